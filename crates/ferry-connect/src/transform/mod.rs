//! Single message transforms and predicates, with Kafka Connect's class names, properties and
//! semantics: `transforms=a,b` with `transforms.a.type`, `transforms.a.*`,
//! `transforms.a.predicate` and `transforms.a.negate`; `predicates=p` with `predicates.p.type`
//! and `predicates.p.*`. A transform changes a record, or drops it (`Filter`); the chain runs
//! in order, and a transform whose predicate does not hold passes the record on unchanged.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{ConfigDef, ConfigKey, ConfigType, Importance};
use crate::data::{Schema, Value};
use crate::error::{ConnectError, Result};
use crate::record::{Header, SinkRecord, SourceRecord};

mod cast;
mod fields;
mod headers;
mod predicate;
mod route;
mod timestamp;

#[cfg(test)]
mod tests;

/// Seed 003's chain: records keyed by `user_id`.
#[cfg(test)]
pub(crate) const SEED_003_CHAIN: &[(&str, &str)] = &[
    ("transforms", "createKey,extractInt"),
    (
        "transforms.createKey.type",
        "org.apache.kafka.connect.transforms.ValueToKey",
    ),
    ("transforms.createKey.fields", "user_id"),
    (
        "transforms.extractInt.type",
        "org.apache.kafka.connect.transforms.ExtractField$Key",
    ),
    ("transforms.extractInt.field", "user_id"),
];

pub use predicate::Predicate;

/// The parts of a record that transforms read and change, for sink and source records alike
/// (Kafka Connect's `ConnectRecord`).
pub trait ConnectRecord {
    /// The record's topic.
    fn topic(&self) -> &str;
    /// Route the record to another topic.
    fn set_topic(&mut self, topic: String);
    /// The Kafka partition, if the record has one yet.
    fn kafka_partition(&self) -> Option<i32>;
    /// The Kafka offset: sink records only.
    fn kafka_offset(&self) -> Option<i64>;
    /// Its timestamp in milliseconds, if any.
    fn timestamp(&self) -> Option<i64>;
    /// Its key and the key's schema.
    fn key(&self) -> (Option<&Arc<Schema>>, &Value);
    /// Replace its key.
    fn set_key(&mut self, schema: Option<Arc<Schema>>, value: Value);
    /// Its value and the value's schema.
    fn value(&self) -> (Option<&Arc<Schema>>, &Value);
    /// Replace its value.
    fn set_value(&mut self, schema: Option<Arc<Schema>>, value: Value);
    /// Its headers.
    fn headers(&self) -> &[Header];
    /// Its headers, to change.
    fn headers_mut(&mut self) -> &mut Vec<Header>;
}

macro_rules! connect_record {
    ($record:ty, $partition:expr, $offset:expr) => {
        impl ConnectRecord for $record {
            fn topic(&self) -> &str {
                &self.topic
            }
            fn set_topic(&mut self, topic: String) {
                self.topic = topic;
            }
            fn kafka_partition(&self) -> Option<i32> {
                $partition(self)
            }
            fn kafka_offset(&self) -> Option<i64> {
                $offset(self)
            }
            fn timestamp(&self) -> Option<i64> {
                self.timestamp
            }
            fn key(&self) -> (Option<&Arc<Schema>>, &Value) {
                (self.key_schema.as_ref(), &self.key)
            }
            fn set_key(&mut self, schema: Option<Arc<Schema>>, value: Value) {
                self.key_schema = schema;
                self.key = value;
            }
            fn value(&self) -> (Option<&Arc<Schema>>, &Value) {
                (self.value_schema.as_ref(), &self.value)
            }
            fn set_value(&mut self, schema: Option<Arc<Schema>>, value: Value) {
                self.value_schema = schema;
                self.value = value;
            }
            fn headers(&self) -> &[Header] {
                &self.headers
            }
            fn headers_mut(&mut self) -> &mut Vec<Header> {
                &mut self.headers
            }
        }
    };
}

connect_record!(
    SinkRecord,
    |r: &SinkRecord| Some(r.partition),
    |r: &SinkRecord| Some(r.offset)
);
connect_record!(
    SourceRecord,
    |r: &SourceRecord| r.partition,
    |_: &SourceRecord| None
);

/// What a transform did with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The record goes on.
    Keep,
    /// Dropped: the record goes no further (it still counts as processed).
    Drop,
}

/// One transform, configured.
pub trait Transformation: Send + Sync {
    /// Transform a record in place, or say it is dropped.
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied>;
}

/// Which part of a record a `$Key` / `$Value` transform works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The record's key.
    Key,
    /// The record's value.
    Value,
}

impl Part {
    /// The part of a record, with its schema.
    pub fn get(self, record: &dyn ConnectRecord) -> (Option<Arc<Schema>>, Value) {
        let (schema, value) = self.peek(record);
        (schema.cloned(), value.clone())
    }

    /// The part of a record, with its schema, borrowed: for a transform that reads a little of
    /// it (cloning the whole of a large struct per record is most of such a transform's cost).
    pub fn peek(self, record: &dyn ConnectRecord) -> (Option<&Arc<Schema>>, &Value) {
        match self {
            Part::Key => record.key(),
            Part::Value => record.value(),
        }
    }

    /// Replace the part of a record.
    pub fn set(self, record: &mut dyn ConnectRecord, schema: Option<Arc<Schema>>, value: Value) {
        match self {
            Part::Key => record.set_key(schema, value),
            Part::Value => record.set_value(schema, value),
        }
    }

    /// `key` or `value`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Key => "key",
            Part::Value => "value",
        }
    }
}

/// A transform class: its name, its properties, and how to build it from them (named without
/// the `transforms.<alias>.` prefix).
pub struct TransformClass {
    /// Kafka Connect's class name.
    pub class: &'static str,
    /// Its properties.
    pub config: fn() -> ConfigDef,
    /// Build it from its own properties.
    pub build: fn(&Props) -> Result<Box<dyn Transformation>>,
}

/// A transform's or predicate's own properties.
pub type Props = BTreeMap<String, String>;

const PACKAGE: &str = "org.apache.kafka.connect.transforms.";

/// Every transform Ferry has.
pub fn classes() -> Vec<TransformClass> {
    let mut all = fields::classes();
    all.extend(cast::classes());
    all.extend(headers::classes());
    all.extend(route::classes());
    all.extend(timestamp::classes());
    all.push(TransformClass {
        class: "org.apache.kafka.connect.transforms.Filter",
        config: Vec::new,
        build: |_| Ok(Box::new(Filter)),
    });
    all
}

/// A plugin's class and its properties.
pub type Described = (&'static str, fn() -> ConfigDef);

/// Every predicate Ferry has: its class and its properties.
pub fn predicate_classes() -> Vec<Described> {
    predicate::catalog()
}

/// The transform class a name stands for: the full class name, or the name without
/// Kafka Connect's package (`ExtractField$Key`).
pub fn find_class(name: &str) -> Option<TransformClass> {
    let name = name.trim();
    classes()
        .into_iter()
        .find(|c| c.class == name || c.class.strip_prefix(PACKAGE) == Some(name))
}

/// `Filter`: drops every record its predicate selects (every record, without one).
struct Filter;

impl Transformation for Filter {
    fn apply(&self, _: &mut dyn ConnectRecord) -> Result<Applied> {
        Ok(Applied::Drop)
    }
}

/// One step of a chain: a transform and the predicate it is conditional on.
struct Step {
    alias: String,
    class: &'static str,
    transform: Box<dyn Transformation>,
    predicate: Option<(Arc<dyn Predicate>, bool)>,
}

/// The configured chain of a connector.
#[derive(Default)]
pub struct Chain {
    steps: Vec<Step>,
}

impl Chain {
    /// The chain a connector config declares (`transforms`, `predicates`); the error names the
    /// property at fault.
    pub fn from_config(config: &BTreeMap<String, String>) -> Result<Chain> {
        let predicates = predicate::from_config(config)?;
        let mut steps = Vec::new();
        for alias in list(config, "transforms") {
            let prefix = format!("transforms.{alias}.");
            let type_key = format!("{prefix}type");
            let class = config
                .get(&type_key)
                .ok_or_else(|| ConnectError::config(&type_key, "missing required property"))?;
            let class = find_class(class).ok_or_else(|| {
                ConnectError::config(
                    &type_key,
                    format!(
                        "{class:?} is not a transform Ferry has; it has {}",
                        classes()
                            .iter()
                            .map(|c| c.class.strip_prefix(PACKAGE).unwrap_or(c.class))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .with_value(class)
            })?;
            let own = own_props(config, &prefix, &["type", "predicate", "negate"]);
            check_props(&prefix, &(class.config)(), &own)?;
            let transform = (class.build)(&own).map_err(|e| e.under(&prefix))?;
            let predicate = match config.get(&format!("{prefix}predicate")) {
                None => None,
                Some(name) => {
                    let p = predicates.get(name.trim()).ok_or_else(|| {
                        ConnectError::config(
                            format!("{prefix}predicate"),
                            format!("{name:?} is not listed in predicates"),
                        )
                        .with_value(name)
                    })?;
                    let negate = crate::config::flag(config, &format!("{prefix}negate"), false)?;
                    Some((p.clone(), negate))
                }
            };
            if config.contains_key(&format!("{prefix}negate")) && predicate.is_none() {
                return Err(ConnectError::config(
                    format!("{prefix}negate"),
                    format!("is set but {prefix}predicate is not"),
                ));
            }
            steps.push(Step {
                alias,
                class: class.class,
                transform,
                predicate,
            });
        }
        Ok(Chain { steps })
    }

    /// Whether no transform is configured.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Run the chain on a record; `Drop` if a transform dropped it. The error names the
    /// transform that failed.
    pub fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        self.run(record).map_err(|(_, e)| e)
    }

    /// As [`Chain::apply`], with the class of the transform that failed.
    pub fn run(
        &self,
        record: &mut dyn ConnectRecord,
    ) -> std::result::Result<Applied, (&'static str, ConnectError)> {
        for step in &self.steps {
            if let Some((predicate, negate)) = &step.predicate {
                if predicate.test(record) == *negate {
                    continue;
                }
            }
            let applied = step.transform.apply(record).map_err(|e| {
                let message = format!("transform {}: {}", step.alias, e.message);
                (step.class, ConnectError { message, ..e })
            })?;
            if applied == Applied::Drop {
                return Ok(Applied::Drop);
            }
        }
        Ok(Applied::Keep)
    }
}

/// A comma-separated list property, trimmed, without empty entries.
pub fn list(config: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    config
        .get(key)
        .map(|v| crate::config::split_list(v))
        .unwrap_or_default()
}

/// The properties under `prefix`, without it, leaving out the framework's own.
fn own_props(config: &BTreeMap<String, String>, prefix: &str, framework: &[&str]) -> Props {
    config
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(prefix)
                .map(|rest| (rest.to_string(), v.clone()))
        })
        .filter(|(k, _)| !framework.contains(&k.as_str()))
        .collect()
}

/// Every given property is one the class has and parses as its type; required ones are given.
fn check_props(prefix: &str, def: &ConfigDef, own: &Props) -> Result<()> {
    for (name, value) in own {
        let key = def.iter().find(|k| k.name == name).ok_or_else(|| {
            ConnectError::config(
                format!("{prefix}{name}"),
                format!(
                    "not a property of this transform (it has {})",
                    if def.is_empty() {
                        "none".to_string()
                    } else {
                        def.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
                    }
                ),
            )
        })?;
        key.check(value).map_err(|problem| {
            ConnectError::config(format!("{prefix}{name}"), problem).with_value(value)
        })?;
    }
    for key in def.iter().filter(|k| k.required && k.default.is_none()) {
        if !own.contains_key(key.name) {
            return Err(ConnectError::config(
                format!("{prefix}{}", key.name),
                "missing required property",
            ));
        }
    }
    Ok(())
}

/// A property of a transform: required, or with a default.
fn key(name: &'static str, ty: ConfigType, doc: &'static str) -> ConfigKey {
    ConfigKey::new(name, ty, Importance::Medium, doc)
}

/// The value of a property a class declared with a default, or that default.
fn prop<'a>(props: &'a Props, name: &str, default: &'a str) -> &'a str {
    props.get(name).map(String::as_str).unwrap_or(default)
}
