//! Config definitions: each property declared once (name, type, default, importance,
//! documentation, validator, and whether Ferry supports it); the same declaration drives
//! parsing, validation errors, the validate API and the docs.

use std::collections::BTreeMap;

use crate::error::{ConnectError, Result};

/// The type of a property value, as Kafka Connect's `ConfigDef.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    /// Text.
    String,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// `true` or `false`.
    Boolean,
    /// Comma-separated list.
    List,
    /// A secret: never returned or logged.
    Password,
    /// A class name.
    Class,
}

impl ConfigType {
    /// Kafka Connect's name of the type (`STRING`, `INT`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::List => "LIST",
            ConfigType::Password => "PASSWORD",
            ConfigType::Class => "CLASS",
        }
    }

    /// Check that `value` parses as this type; the error says what was expected.
    pub fn check(self, value: &str) -> Result<(), String> {
        let value = value.trim();
        match self {
            ConfigType::Int => value
                .parse::<i32>()
                .map(|_| ())
                .map_err(|_| format!("expected a 32-bit integer, got {value:?}")),
            ConfigType::Long => value
                .parse::<i64>()
                .map(|_| ())
                .map_err(|_| format!("expected a 64-bit integer, got {value:?}")),
            ConfigType::Boolean => match value.to_ascii_lowercase().as_str() {
                "true" | "false" => Ok(()),
                _ => Err(format!("expected true or false, got {value:?}")),
            },
            ConfigType::String | ConfigType::List | ConfigType::Password | ConfigType::Class => {
                Ok(())
            }
        }
    }
}

/// How much a property matters (Kafka Connect's `ConfigDef.Importance`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Importance {
    /// `HIGH`.
    High,
    /// `MEDIUM`.
    Medium,
    /// `LOW`.
    Low,
}

/// Whether Ferry honours a property. Nothing is silently ignored (DESIGN.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Honoured.
    Supported,
    /// Accepted for compatibility, without effect; the reason is shown as a warning.
    NoEffect(&'static str),
    /// Refused with a validation error giving the reason.
    Rejected(&'static str),
}

/// A validator of a property's (type-checked) value.
pub type Validator = fn(&str) -> Result<(), String>;

/// One property.
#[derive(Clone, Debug)]
pub struct ConfigKey {
    /// The property's name.
    pub name: &'static str,
    /// Its type.
    pub ty: ConfigType,
    /// `None` and `required`: the property must be given.
    pub default: Option<&'static str>,
    /// Whether it must be given (when it has no default).
    pub required: bool,
    /// How much it matters.
    pub importance: Importance,
    /// What it does, for the validate API and the docs.
    pub doc: &'static str,
    /// A check of its value beyond its type.
    pub validator: Option<Validator>,
    /// The values an enumerated property may take (see [`Choice`]), matched ignoring case.
    pub allowed: Option<fn() -> Vec<&'static str>>,
    /// Whether Ferry honours it.
    pub support: Support,
}

/// An enumerated property's values: each name a config may give and what it stands for,
/// declared once — [`ConfigKey::choice`] takes the names from it for validation and the
/// validate API, [`Values::choice`] the values for parsing.
pub trait Choice: Copy + 'static {
    /// Each name a config may give, and what it stands for.
    const CHOICES: &'static [(&'static str, Self)];
}

fn names<T: Choice>() -> Vec<&'static str> {
    T::CHOICES.iter().map(|(name, _)| *name).collect()
}

impl ConfigKey {
    /// A supported, optional property without default or validator.
    pub const fn new(
        name: &'static str,
        ty: ConfigType,
        importance: Importance,
        doc: &'static str,
    ) -> Self {
        ConfigKey {
            name,
            ty,
            default: None,
            required: false,
            importance,
            doc,
            validator: None,
            allowed: None,
            support: Support::Supported,
        }
    }

    /// An enumerated property: it takes one of `T`'s names.
    pub const fn choice<T: Choice>(mut self) -> Self {
        self.allowed = Some(names::<T>);
        self
    }

    /// Check a given value as declared: its type, its allowed values, its validator.
    pub fn check(&self, value: &str) -> Result<(), String> {
        self.ty.check(value)?;
        if let Some(allowed) = self.allowed {
            one_of(value, &allowed())?;
        }
        match self.validator {
            Some(validator) => validator(value),
            None => Ok(()),
        }
    }

    /// The property must be given.
    pub const fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// The value taken when the property is not given.
    pub const fn default(mut self, value: &'static str) -> Self {
        self.default = Some(value);
        self
    }

    /// A check of the value beyond its type.
    pub const fn validator(mut self, validator: Validator) -> Self {
        self.validator = Some(validator);
        self
    }

    /// Whether Ferry honours the property.
    pub const fn support(mut self, support: Support) -> Self {
        self.support = support;
        self
    }
}

/// The properties of a plugin.
pub type ConfigDef = Vec<ConfigKey>;

/// Validator: an integer of at least `min`.
pub fn at_least(min: i64) -> impl Fn(&str) -> Result<(), String> {
    move |value| match value.trim().parse::<i64>() {
        Ok(v) if v >= min => Ok(()),
        Ok(v) => Err(format!("must be at least {min}, got {v}")),
        Err(_) => Err(format!("expected an integer, got {value:?}")),
    }
}

/// Validator: an integer from `min` to `max`.
pub fn between(min: i64, max: i64) -> impl Fn(&str) -> Result<(), String> {
    move |value| match value.trim().parse::<i64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(()),
        Ok(v) => Err(format!("must be from {min} to {max}, got {v}")),
        Err(_) => Err(format!("expected an integer, got {value:?}")),
    }
}

/// Validator: at least 1.
pub fn positive(value: &str) -> Result<(), String> {
    at_least(1)(value)
}

/// Validator: one of `allowed`, ignoring case and surrounding blanks.
pub fn one_of(value: &str, allowed: &[&str]) -> Result<(), String> {
    let v = value.trim();
    if allowed.iter().any(|a| a.eq_ignore_ascii_case(v)) {
        Ok(())
    } else {
        Err(format!("must be one of {}, got {v:?}", allowed.join(", ")))
    }
}

/// Validator: a non-empty value.
pub fn non_empty(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        Err("must not be empty".into())
    } else {
        Ok(())
    }
}

/// The properties every connector has (Kafka Connect's `ConnectorConfig`).
pub fn connector_common() -> ConfigDef {
    let mut def = connector_own();
    def.extend(crate::error_handling::connector_config());
    def.extend(crate::error_handling::dead_letter_config());
    def
}

fn connector_own() -> ConfigDef {
    vec![
        ConfigKey::new(
            "name",
            ConfigType::String,
            Importance::High,
            "Globally unique name of the connector.",
        )
        .required()
        .validator(non_empty),
        ConfigKey::new(
            "connector.class",
            ConfigType::String,
            Importance::High,
            "Name or alias of the connector class, e.g. \
             org.apache.kafka.connect.file.FileStreamSinkConnector or FileStreamSink.",
        )
        .required(),
        ConfigKey::new(
            "tasks.max",
            ConfigType::Int,
            Importance::High,
            "Maximum number of tasks to use for this connector.",
        )
        .default("1")
        .validator(positive),
        ConfigKey::new(
            "key.converter",
            ConfigType::Class,
            Importance::Low,
            "Converter of record keys between Kafka bytes and Connect data: StringConverter, \
             ByteArrayConverter or JsonConverter (Kafka Connect's class names or short names); \
             its own properties follow as key.converter.*. Unset: the worker's.",
        )
        .validator(known_converter),
        ConfigKey::new(
            "value.converter",
            ConfigType::Class,
            Importance::Low,
            "Converter of record values between Kafka bytes and Connect data: StringConverter, \
             ByteArrayConverter or JsonConverter; its own properties follow as \
             value.converter.*. Unset: the worker's.",
        )
        .validator(known_converter),
        ConfigKey::new(
            "header.converter",
            ConfigType::Class,
            Importance::Low,
            "Converter of record headers: SimpleHeaderConverter (values as text, types \
             inferred) or a record converter. Unset: the worker's, else SimpleHeaderConverter.",
        )
        .validator(known_header_converter),
        ConfigKey::new(
            "transforms",
            ConfigType::List,
            Importance::Low,
            "Aliases of the transforms to apply to records, in order; each configured as \
             transforms.<alias>.type and transforms.<alias>.*.",
        ),
        ConfigKey::new(
            "predicates",
            ConfigType::List,
            Importance::Low,
            "Aliases of the predicates transforms may be conditional on; each configured as \
             predicates.<alias>.type and predicates.<alias>.*.",
        ),
    ]
}

fn known_header_converter(value: &str) -> Result<(), String> {
    if crate::converter::is_header_converter(value) {
        Ok(())
    } else {
        known_converter(value)
    }
}

fn known_converter(value: &str) -> Result<(), String> {
    if crate::converter::is_converter(value.trim()) {
        Ok(())
    } else {
        let known: Vec<&str> = crate::converter::CONVERTERS
            .iter()
            .map(|(c, _)| *c)
            .collect();
        Err(format!(
            "converter {value:?} is not supported by Ferry (yet); use one of {}",
            known.join(", ")
        ))
    }
}

/// The properties every sink connector has (Kafka Connect's `SinkConnectorConfig`).
pub fn sink_common() -> ConfigDef {
    sink_own()
}

/// The property that names the topic where Kafka Connect kept a source connector's offsets
/// (KIP-618's per-connector `offsets.storage.topic`).
pub const OFFSETS_STORAGE_TOPIC: &str = "offsets.storage.topic";

/// Properties every source connector has.
pub fn source_common() -> ConfigDef {
    vec![ConfigKey::new(
        OFFSETS_STORAGE_TOPIC,
        ConfigType::String,
        Importance::Low,
        "Kafka Connect's offsets topic of this connector (its worker's offset.storage.topic,          e.g. connect-offsets): a task with no offsets in Ferry starts from the last ones          Kafka Connect wrote there for this connector's name, so that a pipeline moves from          Kafka Connect to Ferry without reading anything twice or skipping anything. Unset:          the worker's [worker] offset_storage_topic, if any.",
    )]
}

fn sink_own() -> ConfigDef {
    vec![
        ConfigKey::new(
            "topics",
            ConfigType::List,
            Importance::High,
            "Comma-separated topics to consume. Exactly one of topics and topics.regex.",
        ),
        ConfigKey::new(
            "topics.regex",
            ConfigType::String,
            Importance::High,
            "Regular expression of the topics to consume. Exactly one of topics and topics.regex.",
        )
        .validator(valid_regex),
    ]
}

fn valid_regex(value: &str) -> Result<(), String> {
    regex::Regex::new(value)
        .map(|_| ())
        .map_err(|e| format!("not a valid regular expression: {e}"))
}

/// A property map from literal pairs (configs in tests and examples).
pub fn props(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A config read through its declaration: each getter takes the value given, else the
/// declared default, checks it as declared ([`ConfigKey::check`]) and parses it, so no default
/// or allowed value is written twice; errors are config errors on the property.
pub struct Values<'a> {
    def: ConfigDef,
    props: &'a BTreeMap<String, String>,
}

impl<'a> Values<'a> {
    /// The config `props` read through the declarations `def`.
    pub fn new(def: ConfigDef, props: &'a BTreeMap<String, String>) -> Self {
        Values { def, props }
    }

    /// The properties as given.
    pub fn props(&self) -> &'a BTreeMap<String, String> {
        self.props
    }

    fn key(&self, name: &str) -> Result<&ConfigKey> {
        self.def
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| ConnectError::fatal(format!("property {name} is not declared")))
    }

    /// The value given, or the declared default, checked; `None` when neither is there or
    /// the value is blank.
    pub fn get(&self, name: &str) -> Result<Option<&str>> {
        let key = self.key(name)?;
        // A blank value is taken as not given.
        let value = match self.props.get(name).filter(|v| !v.trim().is_empty()) {
            Some(given) => Some(given.as_str()),
            None => key.default,
        };
        let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        key.check(value).map_err(|problem| {
            let e = ConnectError::config(name, problem);
            if key.ty == ConfigType::Password {
                e
            } else {
                e.with_value(value)
            }
        })?;
        Ok(Some(value))
    }

    /// A property that must have a (non-blank) value, trimmed.
    pub fn string(&self, name: &str) -> Result<String> {
        self.text(name)?
            .ok_or_else(|| ConnectError::config(name, "missing required property"))
    }

    /// A property's trimmed value; `None` when absent or blank.
    pub fn text(&self, name: &str) -> Result<Option<String>> {
        Ok(self.get(name)?.map(|v| v.trim().to_string()))
    }

    /// A number (or anything parsed from its text) that must have a value.
    pub fn number<T: std::str::FromStr>(&self, name: &str) -> Result<T> {
        self.optional_number(name)?
            .ok_or_else(|| ConnectError::config(name, "missing required property"))
    }

    /// A number, or `None` when absent or blank without a default.
    pub fn optional_number<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>> {
        match self.get(name)? {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                ConnectError::config(name, format!("cannot parse {v:?}")).with_value(v)
            }),
        }
    }

    /// A boolean (`true`, ignoring case; else false).
    pub fn boolean(&self, name: &str) -> Result<bool> {
        Ok(self
            .get(name)?
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")))
    }

    /// A comma-separated list, trimmed, without empty entries.
    pub fn list(&self, name: &str) -> Result<Vec<String>> {
        Ok(self.get(name)?.map(split_list).unwrap_or_default())
    }

    /// An enumerated property (declared with [`ConfigKey::choice`]).
    pub fn choice<T: Choice>(&self, name: &str) -> Result<T> {
        let given = self
            .get(name)?
            .ok_or_else(|| ConnectError::config(name, "missing required property"))?;
        T::CHOICES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(given.trim()))
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                ConnectError::config(name, format!("must be one of {}", names::<T>().join(", ")))
                    .with_value(given)
            })
    }

    /// A secret: its value, never put in an error.
    pub fn password(&self, name: &str) -> Result<Option<String>> {
        Ok(self.get(name)?.map(str::to_string))
    }
}

/// The entries of a comma-separated list, trimmed, without empty ones.
pub fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A boolean property, or `default` when absent; the error names the property.
pub fn flag(
    props: &std::collections::BTreeMap<String, String>,
    key: &str,
    default: bool,
) -> crate::Result<bool> {
    match props.get(key).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if v == "true" => Ok(true),
        Some(v) if v == "false" => Ok(false),
        Some(v) => Err(
            ConnectError::config(key, format!("expected true or false, got {v:?}")).with_value(v),
        ),
    }
}

/// A required property of a (validated) config; the error names it.
pub fn required<'a>(
    props: &'a std::collections::BTreeMap<String, String>,
    key: &str,
) -> crate::Result<&'a str> {
    props
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| ConnectError::config(key, "missing required property"))
}

/// A property parsed as `T`, or `default` when absent; the error names the property.
pub fn parsed<T: std::str::FromStr>(
    props: &std::collections::BTreeMap<String, String>,
    key: &str,
    default: T,
) -> crate::Result<T> {
    match props.get(key) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| ConnectError::config(key, format!("cannot parse {v:?}")).with_value(v)),
    }
}
