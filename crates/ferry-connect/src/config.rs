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
    /// A 16-bit integer.
    Short,
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
            ConfigType::Short => "SHORT",
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
            ConfigType::Short => value
                .parse::<i16>()
                .map(|_| ())
                .map_err(|_| format!("expected a 16-bit integer, got {value:?}")),
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

impl Importance {
    /// Kafka Connect's name of the importance.
    pub fn as_str(self) -> &'static str {
        match self {
            Importance::High => "HIGH",
            Importance::Medium => "MEDIUM",
            Importance::Low => "LOW",
        }
    }
}

/// Whether Ferry honours a property. Nothing is silently ignored
/// (docs/design.md#nothing-is-silently-ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Honoured.
    Supported,
    /// Accepted for compatibility, without effect; the reason is shown as a warning.
    NoEffect(&'static str),
    /// Refused with a validation error giving the reason.
    Rejected(&'static str),
}

/// How wide a form field for a property should be (Kafka Connect's `ConfigDef.Width`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// `NONE`.
    None,
    /// `SHORT`.
    Short,
    /// `MEDIUM`.
    Medium,
    /// `LONG`.
    Long,
}

impl Width {
    /// Kafka Connect's name of the width.
    pub fn as_str(self) -> &'static str {
        match self {
            Width::None => "NONE",
            Width::Short => "SHORT",
            Width::Medium => "MEDIUM",
            Width::Long => "LONG",
        }
    }
}

/// Where a form shows a property: its group, its place in the group (from 1), its field's
/// width and its label, as the validate API reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Display {
    /// The group (`Common`, `Error Handling`, …); `None` for a property in no group.
    pub group: Option<&'static str>,
    /// The place in the group, from 1; -1 outside a group.
    pub order: i32,
    /// The field's width.
    pub width: Width,
    /// The label.
    pub label: &'static str,
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
    /// Where a form shows it; `None`: in no group, labelled with its name.
    pub display: Option<Display>,
    /// The values a form should offer.
    pub recommended: Option<fn() -> Vec<&'static str>>,
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
            display: None,
            recommended: None,
        }
    }

    /// The values a form should offer.
    pub const fn recommended(mut self, values: fn() -> Vec<&'static str>) -> Self {
        self.recommended = Some(values);
        self
    }

    /// Shown in `group`, at place `order` (from 1), in a field of `width`, labelled `label`.
    pub const fn shown(
        mut self,
        group: &'static str,
        order: i32,
        width: Width,
        label: &'static str,
    ) -> Self {
        self.display = Some(Display {
            group: Some(group),
            order,
            width,
            label,
        });
        self
    }

    /// How a form shows a property outside any group: its width and label.
    pub const fn labelled(mut self, width: Width, label: &'static str) -> Self {
        self.display = Some(Display {
            group: None,
            order: -1,
            width,
            label,
        });
        self
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
    def
}

/// The name of the property that asks for a version of the connector's plugin.
pub const PLUGIN_VERSION: &str = "connector.plugin.version";

const COMMON: &str = "Common";

fn connector_own() -> ConfigDef {
    vec![
        ConfigKey::new(
            "name",
            ConfigType::String,
            Importance::High,
            "Globally unique name of the connector.",
        )
        .required()
        .validator(non_empty)
        .shown(COMMON, 1, Width::Medium, "Connector name"),
        ConfigKey::new(
            "connector.class",
            ConfigType::String,
            Importance::High,
            "Name or alias of the connector class, e.g. \
             org.apache.kafka.connect.file.FileStreamSinkConnector or FileStreamSink.",
        )
        .required()
        .shown(COMMON, 2, Width::Long, "Connector class"),
        ConfigKey::new(
            PLUGIN_VERSION,
            ConfigType::String,
            Importance::Medium,
            "The version of the connector's plugin to run. Ferry's plugins are built in, one \
             version each: a config may name that version, and no other.",
        )
        .shown(COMMON, 3, Width::Medium, "Connector version"),
        ConfigKey::new(
            "tasks.max",
            ConfigType::Int,
            Importance::High,
            "Maximum number of tasks to use for this connector.",
        )
        .default("1")
        .validator(positive)
        .shown(COMMON, 4, Width::Short, "Tasks max"),
        ConfigKey::new(
            "tasks.max.enforce",
            ConfigType::Boolean,
            Importance::Low,
            "Whether a connector may make more tasks than tasks.max (false). Ferry's connectors \
             never do.",
        )
        .default("true")
        .support(Support::NoEffect(
            "Ferry's connectors never make more tasks than tasks.max",
        ))
        .shown(COMMON, 5, Width::Short, "Enforce tasks max"),
        ConfigKey::new(
            "key.converter",
            ConfigType::Class,
            Importance::Low,
            "Converter of record keys between Kafka bytes and Connect data: StringConverter, \
             ByteArrayConverter or JsonConverter (Kafka Connect's class names or short names); \
             its own properties follow as key.converter.*. Unset: the worker's.",
        )
        .validator(known_converter)
        .recommended(converter_classes)
        .shown(COMMON, 6, Width::Short, "Key converter class"),
        converter_version("key.converter.plugin.version", 7, "Key converter version"),
        ConfigKey::new(
            "value.converter",
            ConfigType::Class,
            Importance::Low,
            "Converter of record values between Kafka bytes and Connect data: StringConverter, \
             ByteArrayConverter or JsonConverter; its own properties follow as \
             value.converter.*. Unset: the worker's.",
        )
        .validator(known_converter)
        .recommended(converter_classes)
        .shown(COMMON, 8, Width::Short, "Value converter class"),
        converter_version(
            "value.converter.plugin.version",
            9,
            "Value converter version",
        ),
        ConfigKey::new(
            "header.converter",
            ConfigType::Class,
            Importance::Low,
            "Converter of record headers: SimpleHeaderConverter (values as text, types \
             inferred) or a record converter. Unset: the worker's, else SimpleHeaderConverter.",
        )
        .validator(known_header_converter)
        .recommended(header_converter_classes)
        .shown(COMMON, 10, Width::Short, "Header converter class"),
        converter_version(
            "header.converter.plugin.version",
            11,
            "Header converter version",
        ),
        ConfigKey::new(
            "transforms",
            ConfigType::List,
            Importance::Low,
            "Aliases of the transforms to apply to records, in order; each configured as \
             transforms.<alias>.type and transforms.<alias>.*.",
        )
        .default("")
        .shown("Transforms", 12, Width::Long, "Transforms"),
        ConfigKey::new(
            "predicates",
            ConfigType::List,
            Importance::Low,
            "Aliases of the predicates transforms may be conditional on; each configured as \
             predicates.<alias>.type and predicates.<alias>.*.",
        )
        .default("")
        .shown("Predicates", 13, Width::Long, "Predicates"),
        ConfigKey::new(
            "config.action.reload",
            ConfigType::String,
            Importance::Low,
            "What to do when a value from a config provider changes: restart or none.",
        )
        .default("restart")
        .choice::<Reload>()
        .support(Support::NoEffect(
            "Ferry has no config providers, so no value changes behind a connector's back",
        ))
        .shown(COMMON, 14, Width::Medium, "Reload Action"),
    ]
}

/// `config.action.reload`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reload {
    /// `restart`.
    Restart,
    /// `none`.
    None,
}

impl Choice for Reload {
    const CHOICES: &'static [(&'static str, Reload)] =
        &[("restart", Reload::Restart), ("none", Reload::None)];
}

/// A `*.converter.plugin.version` property: Ferry's converters are built in, one version each
/// (Ferry's).
fn converter_version(name: &'static str, order: i32, label: &'static str) -> ConfigKey {
    ConfigKey::new(
        name,
        ConfigType::String,
        Importance::Low,
        "The version of the converter's plugin to run: Ferry's converters are built in, at \
         Ferry's version, and no other can be named.",
    )
    .default(crate::catalog::VERSION)
    .validator(built_in_version)
    .recommended(|| vec![crate::catalog::VERSION])
    .shown(COMMON, order, Width::Short, label)
}

fn built_in_version(value: &str) -> Result<(), String> {
    if value.trim() == crate::catalog::VERSION {
        Ok(())
    } else {
        Err(format!(
            "Ferry's converters are built in, at version {}",
            crate::catalog::VERSION
        ))
    }
}

fn converter_classes() -> Vec<&'static str> {
    let mut classes: Vec<&'static str> = crate::converter::CONVERTERS
        .iter()
        .map(|(class, _)| *class)
        .collect();
    classes.sort_unstable();
    classes
}

fn header_converter_classes() -> Vec<&'static str> {
    let mut classes = converter_classes();
    classes.push(crate::converter::SIMPLE_HEADER_CONVERTER);
    classes.sort_unstable();
    classes
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
    let mut def = vec![
        ConfigKey::new(
            "topics",
            ConfigType::List,
            Importance::High,
            "Comma-separated topics to consume. Exactly one of topics and topics.regex.",
        )
        .default("")
        .shown(COMMON, 4, Width::Long, "Topics"),
        ConfigKey::new(
            "topics.regex",
            ConfigType::String,
            Importance::High,
            "Regular expression of the topics to consume. Exactly one of topics and topics.regex.",
        )
        .default("")
        .validator(valid_regex)
        .shown(COMMON, 4, Width::Long, "Topics regex"),
    ];
    def.extend(crate::error_handling::dead_letter_config());
    def
}

/// The property that names the topic where Kafka Connect kept a source connector's offsets
/// (KIP-618's per-connector `offsets.storage.topic`).
pub const OFFSETS_STORAGE_TOPIC: &str = "offsets.storage.topic";

const EXACTLY_ONCE: &str = "Exactly Once Support";

/// Why the transaction properties of a source have no effect.
const NO_TRANSACTIONS: &str = "Ferry's sources do not write in transactions";

/// Properties every source connector has (Kafka Connect's `SourceConnectorConfig`).
pub fn source_common() -> ConfigDef {
    vec![
        ConfigKey::new(
            crate::topic_creation::GROUPS,
            ConfigType::List,
            Importance::Low,
            "Groups of topic.creation.<group>.* settings for the topics this connector \
             creates, besides the default group.",
        )
        .default("")
        .shown("Topic Creation", 1, Width::Long, "Topic Creation Groups"),
        ConfigKey::new(
            "exactly.once.support",
            ConfigType::String,
            Importance::Medium,
            "requested or required: whether the connector must write exactly once. Ferry's \
             sources write at least once (never skipping, repeats counted), so required is \
             refused.",
        )
        .default("requested")
        .choice::<ExactlyOnce>()
        .validator(|v| match v.trim().eq_ignore_ascii_case("required") {
            true => {
                Err("Ferry's sources write at least once; exactly once cannot be required".into())
            }
            false => Ok(()),
        })
        .shown(EXACTLY_ONCE, 2, Width::Short, "Exactly once support"),
        ConfigKey::new(
            "transaction.boundary",
            ConfigType::String,
            Importance::Medium,
            "Where exactly-once transactions of a source end: poll, interval or connector.",
        )
        .default("poll")
        .choice::<TransactionBoundary>()
        .support(Support::NoEffect(NO_TRANSACTIONS))
        .shown(EXACTLY_ONCE, 3, Width::Short, "Transaction Boundary"),
        ConfigKey::new(
            "transaction.boundary.interval.ms",
            ConfigType::Long,
            Importance::Low,
            "With transaction.boundary=interval: how long a transaction lasts.",
        )
        .support(Support::NoEffect(NO_TRANSACTIONS))
        .shown(
            EXACTLY_ONCE,
            4,
            Width::Short,
            "Transaction boundary interval",
        ),
        ConfigKey::new(
            OFFSETS_STORAGE_TOPIC,
            ConfigType::String,
            Importance::Low,
            "Kafka Connect's offsets topic of this connector (its worker's offset.storage.topic, \
             e.g. connect-offsets): a task with no offsets in Ferry starts from the last ones \
             Kafka Connect wrote there for this connector's name, so that a pipeline moves from \
             Kafka Connect to Ferry without reading anything twice or skipping anything. Unset: \
             the worker's [worker] offset_storage_topic, if any.",
        )
        .shown("offsets.topic", 1, Width::Long, "Offsets topic"),
    ]
}

/// `exactly.once.support`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExactlyOnce {
    /// `requested`.
    Requested,
    /// `required`.
    Required,
}

impl Choice for ExactlyOnce {
    const CHOICES: &'static [(&'static str, ExactlyOnce)] = &[
        ("requested", ExactlyOnce::Requested),
        ("required", ExactlyOnce::Required),
    ];
}

/// `transaction.boundary`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionBoundary {
    /// `poll`.
    Poll,
    /// `interval`.
    Interval,
    /// `connector`.
    Connector,
}

impl Choice for TransactionBoundary {
    const CHOICES: &'static [(&'static str, TransactionBoundary)] = &[
        ("poll", TransactionBoundary::Poll),
        ("interval", TransactionBoundary::Interval),
        ("connector", TransactionBoundary::Connector),
    ];
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
