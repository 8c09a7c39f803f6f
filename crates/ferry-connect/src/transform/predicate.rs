//! Predicates that make a transform conditional: TopicNameMatches, HasHeaderKey and
//! RecordIsTombstone.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{non_empty, ConfigDef, ConfigType};
use crate::error::{ConnectError, Result};

use super::{check_props, key, list, own_props, prop, ConnectRecord, Props};

/// Whether a record is selected.
pub trait Predicate: Send + Sync {
    /// Whether the record matches.
    fn test(&self, record: &dyn ConnectRecord) -> bool;
}

struct PredicateClass {
    class: &'static str,
    config: fn() -> ConfigDef,
    build: fn(&Props) -> Result<Arc<dyn Predicate>>,
}

const PACKAGE: &str = "org.apache.kafka.connect.transforms.predicates.";

fn classes() -> Vec<PredicateClass> {
    vec![
        PredicateClass {
            class: "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            config: || {
                vec![key(
                    "pattern",
                    ConfigType::String,
                    "Regular expression the whole topic must match.",
                )
                .required()
                .validator(non_empty)]
            },
            build: |p| {
                let pattern = prop(p, "pattern", "");
                let regex = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                    ConnectError::config("pattern", format!("not a valid regular expression: {e}"))
                })?;
                Ok(Arc::new(TopicNameMatches { regex }))
            },
        },
        PredicateClass {
            class: "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
            config: || {
                vec![key("name", ConfigType::String, "The header key.")
                    .required()
                    .validator(non_empty)]
            },
            build: |p| {
                Ok(Arc::new(HasHeaderKey {
                    name: prop(p, "name", "").to_string(),
                }))
            },
        },
        PredicateClass {
            class: "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
            config: Vec::new,
            build: |_| Ok(Arc::new(RecordIsTombstone)),
        },
    ]
}

/// Every predicate Ferry has: its class and its properties.
pub(crate) fn catalog() -> Vec<super::Described> {
    classes().into_iter().map(|c| (c.class, c.config)).collect()
}

/// The predicates a connector config declares, by alias.
pub fn from_config(
    config: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Arc<dyn Predicate>>> {
    let mut out = BTreeMap::new();
    for alias in list(config, "predicates") {
        let prefix = format!("predicates.{alias}.");
        let type_key = format!("{prefix}type");
        let class = config
            .get(&type_key)
            .ok_or_else(|| ConnectError::config(&type_key, "missing required property"))?;
        let found = classes()
            .into_iter()
            .find(|c| c.class == class.trim() || c.class.strip_prefix(PACKAGE) == Some(class.trim()))
            .ok_or_else(|| {
                ConnectError::config(&type_key, format!(
                    "{class:?} is not a predicate Ferry has; it has TopicNameMatches, HasHeaderKey, RecordIsTombstone"
                ))
                .with_value(class)
            })?;
        let own = own_props(config, &prefix, &["type"]);
        check_props(&prefix, &(found.config)(), &own)?;
        let predicate = (found.build)(&own).map_err(|e| e.under(&prefix))?;
        out.insert(alias, predicate);
    }
    Ok(out)
}

struct TopicNameMatches {
    regex: regex::Regex,
}

impl Predicate for TopicNameMatches {
    fn test(&self, record: &dyn ConnectRecord) -> bool {
        self.regex.is_match(record.topic())
    }
}

struct HasHeaderKey {
    name: String,
}

impl Predicate for HasHeaderKey {
    fn test(&self, record: &dyn ConnectRecord) -> bool {
        record.headers().iter().any(|h| h.key == self.name)
    }
}

struct RecordIsTombstone;

impl Predicate for RecordIsTombstone {
    fn test(&self, record: &dyn ConnectRecord) -> bool {
        record.value().1.is_null()
    }
}
