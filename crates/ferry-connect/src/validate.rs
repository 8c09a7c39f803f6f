//! Validation of a connector config: every property is checked against the plugin's
//! definition, and every given property is either supported, accepted without effect (with a
//! warning), or rejected with an error naming it.

use std::collections::BTreeMap;

use crate::config::{connector_common, sink_common, ConfigDef, ConfigKey, Support, PLUGIN_VERSION};
use crate::plugin::{find, Finding, PluginDesc, PluginKind};

/// The validation of one property.
#[derive(Clone, Debug)]
pub struct FieldResult {
    /// The property's name.
    pub name: String,
    /// The given value (`None`: not given).
    pub value: Option<String>,
    /// What is wrong with its value.
    pub errors: Vec<String>,
    /// What the user should know (accepted without effect, …).
    pub warnings: Vec<String>,
    /// Its declaration, if it has one.
    pub key: Option<ConfigKey>,
    /// The values a form should offer.
    pub recommended: Vec<String>,
}

impl FieldResult {
    fn new(name: &str, value: Option<&String>) -> Self {
        FieldResult {
            name: name.to_string(),
            value: value.cloned(),
            errors: Vec::new(),
            warnings: Vec::new(),
            key: None,
            recommended: Vec::new(),
        }
    }
}

/// The validation of a whole config.
#[derive(Clone, Debug)]
pub struct Validation {
    /// The plugin's class, when `connector.class` named a known plugin.
    pub class: Option<&'static str>,
    /// Sink or source, when `connector.class` named a known plugin.
    pub kind: Option<PluginKind>,
    /// Every property's result.
    pub fields: Vec<FieldResult>,
}

impl Validation {
    /// How many errors there are in all.
    pub fn error_count(&self) -> usize {
        self.fields.iter().map(|f| f.errors.len()).sum()
    }

    /// Every warning, as `property: warning`.
    pub fn warnings(&self) -> impl Iterator<Item = String> + '_ {
        self.fields
            .iter()
            .flat_map(|f| f.warnings.iter().map(move |w| format!("{}: {w}", f.name)))
    }

    /// The errors as `field: message`, for an error reply.
    pub fn errors(&self) -> Vec<String> {
        self.fields
            .iter()
            .flat_map(|f| f.errors.iter().map(move |e| format!("{}: {e}", f.name)))
            .collect()
    }

    fn field(&mut self, name: &str) -> Option<&mut FieldResult> {
        self.fields.iter_mut().find(|f| f.name == name)
    }

    /// An error on property `name`, listed with the property's result (added if absent).
    pub fn add_error(&mut self, config: &BTreeMap<String, String>, name: &str, error: String) {
        self.field_or_new(config, name).errors.push(error);
    }

    fn add_warning(&mut self, config: &BTreeMap<String, String>, name: &str, warning: String) {
        self.field_or_new(config, name).warnings.push(warning);
    }

    fn field_or_new(&mut self, config: &BTreeMap<String, String>, name: &str) -> &mut FieldResult {
        match self.fields.iter().position(|f| f.name == name) {
            Some(i) => &mut self.fields[i],
            None => {
                self.fields.push(FieldResult::new(name, config.get(name)));
                let last = self.fields.len() - 1;
                &mut self.fields[last]
            }
        }
    }
}

/// The full definition of a plugin: common connector properties, sink ones for sinks, its own.
pub fn definition(plugin: &PluginDesc) -> ConfigDef {
    let mut def = connector_common();
    match plugin.kind() {
        PluginKind::Sink => def.extend(sink_common()),
        PluginKind::Source => def.extend(crate::config::source_common()),
    }
    def.extend((plugin.config)());
    // Ferry's sources have a dead letter queue too (Kafka Connect's have none): last, after
    // everything Kafka Connect lists.
    if plugin.kind() == PluginKind::Source {
        def.extend(crate::error_handling::dead_letter_config());
    }
    for key in &mut def {
        if key.name == PLUGIN_VERSION {
            key.default = Some(plugin.version);
        }
    }
    def
}

/// The prefixes of a connector's Kafka client overrides (Kafka Connect's
/// `connector.client.config.override.policy` is `All` by default: every one is allowed).
pub const CLIENT_OVERRIDE_PREFIXES: [&str; 3] = [
    "producer.override.",
    "consumer.override.",
    "admin.override.",
];

/// Validate `config` against the plugins Ferry has, on a worker that names no converters.
pub fn validate(plugins: &[PluginDesc], config: &BTreeMap<String, String>) -> Validation {
    validate_on(plugins, config, &BTreeMap::new())
}

/// Validate `config` against the plugins Ferry has, on a worker whose converters are `worker`
/// (`key.converter` …: the defaults of the connector's).
pub fn validate_on(
    plugins: &[PluginDesc],
    config: &BTreeMap<String, String>,
    worker: &BTreeMap<String, String>,
) -> Validation {
    let class = config.get("connector.class");
    let plugin = class.and_then(|c| find(plugins, c));
    let mut def = match plugin {
        Some(plugin) => definition(plugin),
        None => connector_common(),
    };
    for key in &mut def {
        if CONVERTER_KINDS
            .iter()
            .any(|(prefix, _)| *prefix == key.name)
        {
            key.default = crate::converter::fallback(key.name, worker);
        }
    }
    let mut validation = Validation {
        class: plugin.map(|p| p.class),
        kind: plugin.map(|p| p.kind()),
        fields: def
            .iter()
            .map(|key| check_key(key, config.get(key.name)))
            .collect(),
    };
    if let (Some(class), None) = (class, plugin) {
        let known: Vec<&str> = plugins.iter().map(|p| p.class).collect();
        if let Some(field) = validation.field("connector.class") {
            field.errors.push(format!(
                "unknown connector class {class:?}; Ferry's plugins are: {}",
                known.join(", ")
            ));
        }
    }
    // The key and value converters the config names: every property of each, after the
    // connector's, as Kafka Connect lists them (`converter.type` is the worker's to set; it
    // lists no header converter's).
    for (prefix, kind) in CONVERTER_KINDS {
        let Some(class) = config.get(prefix).filter(|_| lists_properties(prefix)) else {
            continue;
        };
        for key in crate::converter::converter_config(class) {
            let name = format!("{prefix}.{}", key.name);
            let value = match key.name {
                crate::converter::CONVERTER_TYPE => Some(kind.to_string()),
                _ => config.get(&name).cloned(),
            };
            let mut field = check_key(&key, value.as_ref());
            field.name = name;
            validation.fields.push(field);
        }
    }
    // Converter properties no named converter has.
    for (name, value) in config {
        if let Some(field) = check_converter_property(config, name, value) {
            validation.fields.push(field);
        }
    }
    // The transform chain: built as the runtime will build it; its first problem is reported
    // on the property it is about.
    if let Err(e) = crate::transform::Chain::from_config(config) {
        let (property, problem) = e.problem("transforms");
        validation.add_error(config, &property, problem);
    }
    // Given properties that no definition knows.
    if plugin.is_some() {
        for (name, value) in config {
            // Client overrides (`producer.override.*` …) are the Kafka clients' own
            // properties: the worker checks them when it makes the clients, and a bad one
            // fails the task naming it, as in Kafka Connect.
            if converter_prefix(name).is_some()
                || name.starts_with("transforms.")
                || name.starts_with("predicates.")
                || CLIENT_OVERRIDE_PREFIXES.iter().any(|p| name.starts_with(p))
                || (plugin.is_some_and(|p| p.kind() == PluginKind::Source)
                    && name.starts_with(crate::topic_creation::PREFIX))
            {
                continue;
            }
            if !def.iter().any(|k| k.name == name) {
                let mut field = FieldResult::new(name, Some(value));
                field.errors.push(format!(
                    "unknown property {name:?}: not a property of {} in Ferry; remove it",
                    validation.class.unwrap_or("this connector")
                ));
                validation.fields.push(field);
            }
        }
    }
    if let Some(plugin) = plugin {
        if let Some(field) = validation.field(PLUGIN_VERSION) {
            field.recommended = vec![plugin.version.to_string()];
        }
        if let Some(asked) = config.get(PLUGIN_VERSION) {
            if asked.trim() != plugin.version {
                validation.add_error(
                    config,
                    PLUGIN_VERSION,
                    format!(
                        "Ferry has version {} of {}, not {asked:?}",
                        plugin.version, plugin.class
                    ),
                );
            }
        }
        if plugin.kind() == PluginKind::Sink {
            check_topics(config, &mut validation);
        }
        if plugin.kind() == PluginKind::Source {
            if let Err(problems) = crate::topic_creation::TopicCreation::from_config(config) {
                for (name, problem) in problems {
                    validation.add_error(config, &name, problem);
                }
            }
        }
        if let Some(check) = plugin.check {
            for finding in check(config) {
                match finding {
                    Finding::Error(name, error) => validation.add_error(config, &name, error),
                    Finding::Warning(name, warning) => {
                        validation.add_warning(config, &name, warning)
                    }
                }
            }
        }
    }
    validation
}

/// `("key.converter", "schemas.enable")` for `key.converter.schemas.enable`.
fn converter_prefix(name: &str) -> Option<(&'static str, &str)> {
    crate::converter::CONVERTER_PREFIXES
        .iter()
        .find_map(|prefix| {
            name.strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('.'))
                .map(|rest| (*prefix, rest))
        })
}

/// The converters a connector names, and how each is used (its `converter.type`).
const CONVERTER_KINDS: [(&str, &str); 3] = [
    ("key.converter", "key"),
    ("value.converter", "value"),
    ("header.converter", "header"),
];

/// Whether the validation lists every property of the converter a config names under
/// `prefix`, as Kafka Connect's does for the key and value converters.
fn lists_properties(prefix: &str) -> bool {
    prefix != "header.converter"
}

/// The validation of a `key.converter.*` (or `value.converter.*`, `header.converter.*`)
/// property not listed with its converter: checked against the converter the config names;
/// one given without naming a converter (the worker's converter and its settings apply then),
/// or one the converter lacks, is accepted with a warning.
fn check_converter_property(
    config: &BTreeMap<String, String>,
    name: &str,
    value: &String,
) -> Option<FieldResult> {
    let (prefix, own) = converter_prefix(name)?;
    let mut field = FieldResult::new(name, Some(value));
    let Some(class) = config.get(prefix) else {
        field.warnings.push(format!(
            "accepted without effect: this config sets no {prefix}, so the worker's converter \
             runs with the worker's settings"
        ));
        return Some(field);
    };
    match crate::converter::converter_config(class)
        .iter()
        .find(|k| k.name == own)
    {
        Some(_) if lists_properties(prefix) => None,
        Some(key) => {
            let mut field = check_key(key, Some(value));
            field.name = name.to_string();
            Some(field)
        }
        None => {
            field.warnings.push(format!(
                "accepted without effect: {class} has no property {own:?}"
            ));
            Some(field)
        }
    }
}

fn check_key(key: &ConfigKey, value: Option<&String>) -> FieldResult {
    let mut field = FieldResult::new(key.name, value);
    field.key = Some(key.clone());
    if let Some(values) = key.recommended {
        field.recommended = values().into_iter().map(str::to_string).collect();
    }
    match value {
        None if key.required && key.default.is_none() => {
            field.errors.push(format!(
                "Missing required configuration \"{}\" which has no default value.",
                key.name
            ));
        }
        None => {}
        Some(value) => {
            match key.support {
                Support::Supported => {}
                Support::NoEffect(why) => field
                    .warnings
                    .push(format!("accepted without effect: {why}")),
                Support::Rejected(why) => {
                    field.errors.push(format!("not supported by Ferry: {why}"))
                }
            }
            if let Err(e) = key.check(value) {
                field.errors.push(e);
            }
        }
    }
    field
}

/// A sink needs exactly one of `topics` and `topics.regex` ([`crate::topics::Topics`]); a
/// pattern that does not compile is reported by its property's validator.
fn check_topics(config: &BTreeMap<String, String>, validation: &mut Validation) {
    if let Err(e) = crate::topics::Topics::of(config) {
        let (property, problem) = e.problem("topics");
        if property == "topics" {
            // Both given: the error is on both, as Kafka Connect reports it.
            let given = |name: &str| config.get(name).is_some_and(|v| !v.trim().is_empty());
            let both = given("topics") && given("topics.regex");
            for name in ["topics", "topics.regex"] {
                if name == "topics" || both {
                    if let Some(field) = validation.field(name) {
                        field.errors.push(problem.clone());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigKey, ConfigType, Importance};

    fn plugins() -> Vec<PluginDesc> {
        vec![PluginDesc {
            class: "org.example.TestSink",
            task_class: "org.example.TestSinkTask",
            aliases: &["TestSink"],
            version: "1",
            connector: |_| Err(crate::ConnectError::fatal("not built in validation tests")),
            tasks: crate::plugin::TaskFactory::Sink(|_, _| {
                Err(crate::ConnectError::fatal("not built in validation tests"))
            }),
            config: || {
                vec![
                    ConfigKey::new("file", ConfigType::String, Importance::High, "x").required(),
                    ConfigKey::new("batch", ConfigType::Int, Importance::Low, "y")
                        .default("5")
                        .validator(crate::config::positive),
                    ConfigKey::new("logs.dir", ConfigType::String, Importance::Low, "z")
                        .support(Support::NoEffect("Raft replaces the write-ahead log")),
                    ConfigKey::new(
                        "hive.integration",
                        ConfigType::Boolean,
                        Importance::Low,
                        "w",
                    )
                    .support(Support::Rejected("Hive is not supported")),
                ]
            },
            check: None,
        }]
    }

    use crate::config::props as config;

    fn errors_of(v: &Validation, field: &str) -> Vec<String> {
        v.fields
            .iter()
            .filter(|f| f.name == field)
            .flat_map(|f| f.errors.clone())
            .collect()
    }

    #[test]
    fn table() {
        let base = [
            ("name", "a"),
            ("connector.class", "TestSink"),
            ("topics", "t"),
            ("file", "/tmp/x"),
        ];
        // (case, properties added to a valid config, field expected to fail, error text)
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, &'a str);
        let cases: Vec<Case> = vec![
            ("valid", vec![], "", ""),
            (
                "unknown class",
                vec![("connector.class", "com.Nope")],
                "connector.class",
                "unknown connector class",
            ),
            (
                "alias or class",
                vec![("connector.class", "org.example.TestSink")],
                "",
                "",
            ),
            (
                "bad int",
                vec![("batch", "x")],
                "batch",
                "expected a 32-bit integer",
            ),
            (
                "validator",
                vec![("batch", "0")],
                "batch",
                "must be at least 1",
            ),
            (
                "tasks.max",
                vec![("tasks.max", "0")],
                "tasks.max",
                "must be at least 1",
            ),
            (
                "unknown property",
                vec![("frobnicate", "1")],
                "frobnicate",
                "unknown property",
            ),
            (
                "rejected property",
                vec![("hive.integration", "true")],
                "hive.integration",
                "not supported by Ferry",
            ),
            (
                "both topics",
                vec![("topics.regex", "t.*")],
                "topics",
                "mutually exclusive",
            ),
            (
                "json converter settings",
                vec![
                    (
                        "value.converter",
                        "org.apache.kafka.connect.json.JsonConverter",
                    ),
                    ("value.converter.schemas.enable", "false"),
                    ("value.converter.decimal.format", "NUMERIC"),
                ],
                "",
                "",
            ),
            (
                "a converter setting of the wrong type",
                vec![
                    ("key.converter", "JsonConverter"),
                    ("key.converter.schemas.enable", "yes"),
                ],
                "key.converter.schemas.enable",
                "expected true or false",
            ),
            (
                "a converter setting out of range",
                vec![
                    ("value.converter", "JsonConverter"),
                    ("value.converter.decimal.format", "HEX"),
                ],
                "value.converter.decimal.format",
                "must be one of BASE64, NUMERIC",
            ),
            (
                "string converter encoding",
                vec![
                    ("key.converter", "StringConverter"),
                    ("key.converter.converter.encoding", "latin1"),
                ],
                "key.converter.converter.encoding",
                "only UTF-8",
            ),
            (
                "unknown converter",
                vec![("value.converter", "io.confluent.connect.avro.AvroConverter")],
                "value.converter",
                "not supported by Ferry",
            ),
            (
                "the seed 003 transforms",
                crate::transform::SEED_003_CHAIN.to_vec(),
                "",
                "",
            ),
            (
                "a transform without its required property",
                vec![("transforms", "k"), ("transforms.k.type", "ValueToKey")],
                "transforms.k.fields",
                "missing required property",
            ),
            (
                "an unknown transform",
                vec![("transforms", "k"), ("transforms.k.type", "Frobnicate")],
                "transforms.k.type",
                "not a transform Ferry has",
            ),
            (
                "bad regex",
                vec![("topics.regex", "(")],
                "topics.regex",
                "not a valid regular expression",
            ),
        ];
        for (name, extra, field, want) in cases {
            let mut c = config(&base);
            for (k, v) in extra {
                c.insert(k.to_string(), v.to_string());
            }
            let v = validate(&plugins(), &c);
            if field.is_empty() {
                assert_eq!(v.error_count(), 0, "{name}: {:?}", v.errors());
            } else {
                let errors = errors_of(&v, field);
                assert!(
                    errors.iter().any(|e| e.contains(want)),
                    "{name}: {errors:?}"
                );
            }
        }
    }

    #[test]
    fn missing_required_properties_are_named() {
        let v = validate(
            &plugins(),
            &config(&[("name", "a"), ("connector.class", "TestSink")]),
        );
        assert_eq!(
            errors_of(&v, "file"),
            vec!["Missing required configuration \"file\" which has no default value."]
        );
        assert!(errors_of(&v, "topics")[0].contains("must configure one of topics"));
    }

    #[test]
    fn converter_settings_without_their_converter_or_unknown_to_it_warn() {
        let c = config(&[
            ("name", "a"),
            ("connector.class", "TestSink"),
            ("topics", "t"),
            ("file", "f"),
            ("key.converter.schemas.enable", "false"),
            ("value.converter", "StringConverter"),
            (
                "value.converter.schema.registry.url",
                "http://registry:8081",
            ),
        ]);
        let v = validate(&plugins(), &c);
        assert_eq!(v.error_count(), 0, "{:?}", v.errors());
        let warnings: Vec<String> = v.warnings().collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("key.converter.schemas.enable")
                    && w.contains("sets no key.converter")),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("value.converter.schema.registry.url")
                    && w.contains("has no property")),
            "{warnings:?}"
        );
    }

    #[test]
    fn named_converters_list_their_properties_and_the_workers_are_the_defaults() {
        let c = config(&[
            ("name", "a"),
            ("connector.class", "TestSink"),
            ("topics", "t"),
            ("file", "f"),
            ("value.converter", "StringConverter"),
            ("header.converter", "JsonConverter"),
            ("header.converter.schemas.enable", "maybe"),
        ]);
        let worker = config(&[("key.converter", "JsonConverter")]);
        let v = validate_on(&plugins(), &c, &worker);
        let default = |name: &str| {
            v.fields
                .iter()
                .find(|f| f.name == name)
                .and_then(|f| f.key.as_ref())
                .and_then(|k| k.default)
        };
        assert_eq!(
            default("key.converter"),
            Some("org.apache.kafka.connect.json.JsonConverter")
        );
        assert_eq!(
            default("value.converter"),
            Some("org.apache.kafka.connect.storage.StringConverter")
        );
        assert_eq!(
            default("header.converter"),
            Some("org.apache.kafka.connect.storage.SimpleHeaderConverter")
        );
        // The value converter's properties follow the connector's, its type set; the header
        // converter's are not listed, but one given is checked.
        let listed: Vec<(&str, Option<&str>)> = v
            .fields
            .iter()
            .filter(|f| f.name.starts_with("value.converter.converter."))
            .map(|f| (f.name.as_str(), f.value.as_deref()))
            .collect();
        assert_eq!(
            listed,
            [
                ("value.converter.converter.type", Some("value")),
                ("value.converter.converter.encoding", None)
            ]
        );
        assert_eq!(
            errors_of(&v, "header.converter.schemas.enable").len(),
            1,
            "{:?}",
            v.errors()
        );
        assert!(!v
            .fields
            .iter()
            .any(|f| f.name == "header.converter.converter.type"));
    }

    #[test]
    fn no_effect_properties_warn() {
        let mut c = config(&[
            ("name", "a"),
            ("connector.class", "TestSink"),
            ("topics", "t"),
            ("file", "f"),
        ]);
        c.insert("logs.dir".into(), "/logs".into());
        let v = validate(&plugins(), &c);
        assert_eq!(v.error_count(), 0);
        assert!(v
            .warnings()
            .any(|w| w.contains("logs.dir") && w.contains("without effect")));
    }
}
