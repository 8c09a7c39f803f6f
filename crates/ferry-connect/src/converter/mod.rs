//! Converters between Kafka's bytes and Connect values, with Kafka Connect's class names.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{ConfigDef, ConfigKey, ConfigType, Importance, Support, Width};
use crate::data::{Schema, SchemaAndValue, SchemaType, Value};
use crate::error::{ConnectError, Result};

pub mod header;
pub mod json;

pub use header::{
    header_converter, HeaderConverter, SimpleHeaderConverter, SIMPLE_HEADER_CONVERTER,
};
pub use json::{JsonConverter, JSON_CONVERTER};

/// Kafka bytes ⇄ Connect data (Kafka Connect's `Converter`: `decode` is `toConnectData`,
/// `encode` is `fromConnectData`).
pub trait Converter: Send + Sync {
    /// Bytes consumed from `topic` as Connect data.
    fn decode(&self, topic: &str, data: Option<&[u8]>) -> Result<SchemaAndValue>;
    /// Connect data as the bytes to produce to `topic`.
    fn encode(
        &self,
        topic: &str,
        schema: Option<&Arc<Schema>>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>>;
}

/// Kafka Connect's StringConverter.
pub const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
/// Kafka Connect's ByteArrayConverter.
pub const BYTE_ARRAY_CONVERTER: &str = "org.apache.kafka.connect.converters.ByteArrayConverter";

/// The converter classes Ferry has, with their short aliases.
pub const CONVERTERS: &[(&str, &[&str])] = &[
    (STRING_CONVERTER, &["StringConverter"]),
    (BYTE_ARRAY_CONVERTER, &["ByteArrayConverter"]),
    (JSON_CONVERTER, &["JsonConverter"]),
];

/// The default of `key.converter` and `value.converter` where a worker sets none.
pub const DEFAULT_CONVERTER: &str = STRING_CONVERTER;

/// Whether `class` names a converter Ferry has.
pub fn is_converter(class: &str) -> bool {
    resolve(class).is_some()
}

/// Whether `class` names a header converter Ferry has.
pub fn is_header_converter(class: &str) -> bool {
    is_simple_header_converter(class) || is_converter(class)
}

/// The class a name or alias stands for, if Ferry has the converter.
pub fn resolve(class: &str) -> Option<&'static str> {
    let class = class.trim();
    CONVERTERS
        .iter()
        .find(|(c, aliases)| *c == class || aliases.contains(&class))
        .map(|(c, _)| *c)
}

/// The prefixes under which a connector (or the worker) configures its converters.
pub const CONVERTER_PREFIXES: &[&str] = &["key.converter", "value.converter", "header.converter"];

/// Every converter's `converter.type`: how it is used (`key`, `value` or `header`), set by the
/// framework, as Kafka Connect's `ConverterConfig` declares it.
pub const CONVERTER_TYPE: &str = "converter.type";

fn converter_type() -> ConfigKey {
    ConfigKey::new(
        CONVERTER_TYPE,
        ConfigType::String,
        Importance::Low,
        "How the converter is used (key, value or header); set by the worker.",
    )
    .required()
    .labelled(Width::None, CONVERTER_TYPE)
}

/// The properties of a converter class, named without the `key.converter.` prefix, in the
/// form and the order in which Kafka Connect's validation lists them.
pub fn converter_config(class: &str) -> ConfigDef {
    match resolve(class) {
        Some(STRING_CONVERTER) => vec![
            converter_type(),
            ConfigKey::new(
                "converter.encoding",
                ConfigType::String,
                Importance::High,
                "The character encoding of the text; only UTF-8.",
            )
            .default("UTF-8")
            .validator(utf8_only)
            .labelled(Width::Medium, "Encoding"),
        ],
        Some(JSON_CONVERTER) => vec![
            ConfigKey::new(
                "decimal.format",
                ConfigType::String,
                Importance::Low,
                "How decimals are written: BASE64 (their unscaled bytes) or NUMERIC (a number).",
            )
            .default("BASE64")
            .choice::<json::DecimalFormat>()
            .shown("Serialization", 0, Width::Medium, "Decimal Format"),
            converter_type(),
            ConfigKey::new(
                "schemas.cache.size",
                ConfigType::Int,
                Importance::High,
                "How many schemas read from records are kept (by their JSON text), so that a record whose schema was seen before is not read again.",
            )
            .default("1000")
            .shown("Schemas", 1, Width::Medium, "Schema Cache Size"),
            ConfigKey::new(
                "replace.null.with.default",
                ConfigType::Boolean,
                Importance::Low,
                "Whether a null value of a field with a default is read and written as the default.",
            )
            .default("true")
            .shown("Serialization", 1, Width::Medium, "Replace null with default"),
            ConfigKey::new(
                "schemas.enable",
                ConfigType::Boolean,
                Importance::High,
                "Whether records carry their schema in a {\"schema\",\"payload\"} envelope.",
            )
            .default("true")
            .shown("Schemas", 0, Width::Medium, "Enable Schemas"),
            ConfigKey::new(
                "schema.content",
                ConfigType::String,
                Importance::High,
                "A schema for records without an envelope (KIP-1054).",
            )
            .support(Support::Rejected(
                "records without an envelope have no schema in Ferry's JsonConverter",
            ))
            .shown("Schemas", 2, Width::Medium, "Schema Content"),
        ],
        Some(_) => vec![converter_type()],
        None => Vec::new(),
    }
}

/// Whether `class` names Kafka Connect's SimpleHeaderConverter.
pub(crate) fn is_simple_header_converter(class: &str) -> bool {
    let class = class.trim();
    class == SIMPLE_HEADER_CONVERTER || class == "SimpleHeaderConverter"
}

fn utf8_only(value: &str) -> std::result::Result<(), String> {
    match value.trim().to_ascii_uppercase().replace('-', "").as_str() {
        "UTF8" => Ok(()),
        _ => Err(format!("encoding {value:?} is not supported; only UTF-8")),
    }
}

/// A connector's key and value converters.
pub type KeyValue = (Box<dyn Converter>, Box<dyn Converter>);

/// The key and value converters of a connector: for each, the one its config names, with the
/// config's own `key.converter.*` settings; otherwise the worker's, with the worker's settings
/// (Kafka Connect's rule); otherwise StringConverter.
pub fn key_value(
    connector: &BTreeMap<String, String>,
    worker: &BTreeMap<String, String>,
) -> Result<KeyValue> {
    Ok((
        configured("key.converter", connector, worker)?,
        configured("value.converter", connector, worker)?,
    ))
}

fn configured(
    prefix: &str,
    connector: &BTreeMap<String, String>,
    worker: &BTreeMap<String, String>,
) -> Result<Box<dyn Converter>> {
    chosen(prefix, default_class(prefix), connector, worker, converter)
}

/// Kafka Connect's rule: the converter the connector names, with its settings, else the
/// worker's with the worker's, else `default`; built by `build`, the error naming `prefix`.
fn chosen<T>(
    prefix: &str,
    default: &str,
    connector: &BTreeMap<String, String>,
    worker: &BTreeMap<String, String>,
    build: fn(&str, &BTreeMap<String, String>) -> Result<T>,
) -> Result<T> {
    let source = if connector.contains_key(prefix) {
        connector
    } else {
        worker
    };
    let class = source.get(prefix).map(String::as_str).unwrap_or(default);
    build(class, &own_settings(source, prefix)).map_err(|e| match e.config {
        Some(_) => e.under(&format!("{prefix}.")),
        None => ConnectError::fatal(format!("{prefix}: {}", e.message)),
    })
}

/// The header converter of a connector, by the same rule (`header.converter`; otherwise the
/// worker's; otherwise SimpleHeaderConverter).
pub fn headers(
    connector: &BTreeMap<String, String>,
    worker: &BTreeMap<String, String>,
) -> Result<Box<dyn HeaderConverter>> {
    let prefix = "header.converter";
    chosen(
        prefix,
        default_class(prefix),
        connector,
        worker,
        header_converter,
    )
}

/// The class a connector's converter under `prefix` is when neither the connector nor the
/// worker names one.
fn default_class(prefix: &str) -> &'static str {
    match prefix {
        "header.converter" => SIMPLE_HEADER_CONVERTER,
        _ => DEFAULT_CONVERTER,
    }
}

/// The full class name a converter's name or alias stands for, if Ferry has it.
fn canonical(class: &str) -> Option<&'static str> {
    match is_simple_header_converter(class) {
        true => Some(SIMPLE_HEADER_CONVERTER),
        false => resolve(class),
    }
}

/// The class of the converter configured under `prefix` (`key.converter`, `value.converter`,
/// `header.converter`) by Kafka Connect's rule: for error reports.
pub fn class_of(
    prefix: &str,
    connector: &BTreeMap<String, String>,
    worker: &BTreeMap<String, String>,
) -> String {
    match connector.get(prefix).or_else(|| worker.get(prefix)) {
        Some(class) => canonical(class).map_or_else(|| class.trim().to_string(), str::to_string),
        None => default_class(prefix).to_string(),
    }
}

/// What a connector that names no converter under `prefix` uses: the worker's (Kafka Connect
/// shows it as the default of the connector's property), else Ferry's default.
pub fn fallback(prefix: &str, worker: &BTreeMap<String, String>) -> Option<&'static str> {
    match worker.get(prefix) {
        Some(class) => canonical(class),
        None => Some(default_class(prefix)),
    }
}

/// A converter's own settings: the properties under `prefix.`, without it.
fn own_settings(source: &BTreeMap<String, String>, prefix: &str) -> BTreeMap<String, String> {
    source
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('.'))
                .map(|rest| (rest.to_string(), v.clone()))
        })
        .collect()
}

/// What is wrong with a worker's converter settings (`[worker.converters]`), one line each.
pub fn check_worker_converters(worker: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems: Vec<String> = worker
        .keys()
        .filter(|k| {
            !CONVERTER_PREFIXES.iter().any(|p| {
                k.as_str() == *p || k.strip_prefix(p).is_some_and(|rest| rest.starts_with('.'))
            })
        })
        .map(|k| format!("{k:?} is not a converter setting (key.converter, value.converter, or one of their own settings)"))
        .collect();
    for prefix in ["key.converter", "value.converter"] {
        if let Err(e) = configured(prefix, &BTreeMap::new(), worker) {
            problems.push(e.message);
        }
    }
    if let Err(e) = headers(&BTreeMap::new(), worker) {
        problems.push(e.message);
    }
    problems
}

/// Build a converter from its class and its own properties (`key.converter.*` without the
/// prefix: `schemas.enable`, `converter.encoding`).
pub fn converter(class: &str, props: &BTreeMap<String, String>) -> Result<Box<dyn Converter>> {
    let class = resolve(class)
        .ok_or_else(|| ConnectError::fatal(format!("unknown converter class {class:?}")))?;
    match class {
        STRING_CONVERTER => {
            let encoding = props
                .get("converter.encoding")
                .map(|e| e.to_ascii_uppercase().replace('-', ""))
                .unwrap_or_else(|| "UTF8".into());
            if encoding != "UTF8" {
                return Err(ConnectError::fatal(format!(
                    "converter.encoding {encoding:?} is not supported: Ferry's StringConverter is UTF-8 only"
                )));
            }
            Ok(Box::new(StringConverter))
        }
        JSON_CONVERTER => Ok(Box::new(JsonConverter::configure(props)?)),
        _ => Ok(Box::new(ByteArrayConverter)),
    }
}

/// Kafka Connect's message when a converter cannot read a record's bytes (the cause follows
/// in the trace), as the dead letter queue's `__connect.errors.exception.message` shows it.
pub const SERIALIZATION_ERROR: &str =
    "Converting byte[] to Kafka Connect data failed due to serialization error: ";

/// `org.apache.kafka.connect.storage.StringConverter`: UTF-8 text, optional string schema.
/// Like Kafka Connect's (Java's `new String(bytes, UTF_8)`), bytes that are not UTF-8 are
/// decoded with U+FFFD in their place: reading never fails.
#[derive(Clone, Copy, Debug, Default)]
pub struct StringConverter;

impl Converter for StringConverter {
    fn decode(&self, _topic: &str, data: Option<&[u8]>) -> Result<SchemaAndValue> {
        let value = match data {
            None => Value::Null,
            Some(bytes) => Value::String(text_of(bytes)),
        };
        Ok(SchemaAndValue {
            schema: Some(Schema::optional_string()),
            value,
        })
    }

    fn encode(
        &self,
        _topic: &str,
        _schema: Option<&Arc<Schema>>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>> {
        Ok(match value {
            Value::Null => None,
            Value::String(s) => Some(s.as_bytes().to_vec()),
            other => Some(other.to_string().into_bytes()),
        })
    }
}

/// Bytes as text, invalid UTF-8 replaced (as Java's decoder does). Valid text, the usual
/// case, is checked with SIMD instructions (the simdutf8 crate), several times faster than
/// `str::from_utf8`'s word-at-a-time walk (W1's profile: 3.6 % of ferryd's CPU in it).
fn text_of(bytes: &[u8]) -> String {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// `org.apache.kafka.connect.converters.ByteArrayConverter`: bytes as they are.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByteArrayConverter;

impl Converter for ByteArrayConverter {
    fn decode(&self, _topic: &str, data: Option<&[u8]>) -> Result<SchemaAndValue> {
        Ok(SchemaAndValue {
            schema: Some(Schema::optional_bytes()),
            value: data.map_or(Value::Null, |b| Value::Bytes(b.to_vec())),
        })
    }

    fn encode(
        &self,
        topic: &str,
        schema: Option<&Arc<Schema>>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>> {
        if let Some(schema) = schema {
            if schema.ty != SchemaType::Bytes {
                return Err(ConnectError::data(format!(
                    "ByteArrayConverter (topic {topic}): invalid schema type {}; only bytes",
                    schema.ty.name()
                )));
            }
        }
        match value {
            Value::Null => Ok(None),
            Value::Bytes(b) => Ok(Some(b.clone())),
            other => Err(ConnectError::data(format!(
                "ByteArrayConverter (topic {topic}) is not compatible with a {} value",
                other.kind()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_converter_round_trips_text_and_null() {
        let c = converter("StringConverter", &BTreeMap::new()).expect("known");
        let sv = c.decode("t", Some("héllo".as_bytes())).expect("utf-8");
        assert_eq!(sv.value, Value::String("héllo".into()));
        assert_eq!(sv.schema.as_ref().map(|s| s.ty), Some(SchemaType::String));
        assert_eq!(
            c.encode("t", sv.schema.as_ref(), &sv.value)
                .expect("string"),
            Some("héllo".as_bytes().to_vec())
        );
        assert_eq!(c.decode("t", None).expect("null").value, Value::Null);
        assert_eq!(c.encode("t", None, &Value::Null).expect("null"), None);
        assert_eq!(
            c.encode("t", None, &Value::Int32(42)).expect("to string"),
            Some(b"42".to_vec())
        );
    }

    #[test]
    fn string_converter_reads_bytes_that_are_not_utf8_with_replacement_characters() {
        let sv = StringConverter
            .decode("orders", Some(b"ok \xff\xfe end \xc3"))
            .expect("never fails, as Kafka Connect's");
        assert_eq!(
            sv.value,
            Value::String("ok \u{fffd}\u{fffd} end \u{fffd}".into())
        );
    }

    #[test]
    fn byte_array_converter_passes_bytes_and_refuses_others() {
        let c = converter(BYTE_ARRAY_CONVERTER, &BTreeMap::new()).expect("known");
        let sv = c.decode("t", Some(&[1, 2, 3])).expect("bytes");
        assert_eq!(sv.value, Value::Bytes(vec![1, 2, 3]));
        assert_eq!(
            c.encode("t", sv.schema.as_ref(), &sv.value).expect("bytes"),
            Some(vec![1, 2, 3])
        );
        assert!(c.encode("t", None, &Value::String("x".into())).is_err());
    }

    #[test]
    fn a_connector_names_its_converter_or_takes_the_workers() {
        use crate::config::props;
        let worker = props(&[
            ("value.converter", "JsonConverter"),
            ("value.converter.schemas.enable", "false"),
        ]);
        let plain = br#"{"a":1}"#;
        // The worker's JsonConverter without schemas reads plain JSON.
        let (_, value) = key_value(&BTreeMap::new(), &worker).expect("worker's");
        assert!(value.decode("t", Some(plain)).is_ok());
        // A connector naming JsonConverter gets its own settings: schemas on by default, so
        // plain JSON is refused (the worker's schemas.enable does not leak in).
        let own = props(&[("value.converter", "JsonConverter")]);
        let (_, value) = key_value(&own, &worker).expect("connector's");
        assert!(value.decode("t", Some(plain)).is_err());
        // The key falls back to StringConverter.
        let (key, _) = key_value(&own, &worker).expect("default key");
        assert_eq!(
            key.decode("t", Some(b"k")).expect("text").value,
            Value::String("k".into())
        );
        let bad = props(&[
            ("value.converter", "JsonConverter"),
            ("value.converter.schemas.enable", "maybe"),
        ]);
        let err = key_value(&bad, &worker).err().expect("bad setting");
        assert!(
            err.to_string()
                .starts_with("value.converter.schemas.enable: expected true or false"),
            "{err}"
        );
        assert_eq!(
            err.config.as_ref().map(|c| c.property.as_str()),
            Some("value.converter.schemas.enable")
        );
        assert!(check_worker_converters(&worker).is_empty());
        let problems = check_worker_converters(&props(&[
            ("value.converter", "AvroConverter"),
            ("key.serializer", "x"),
        ]));
        assert_eq!(problems.len(), 2, "{problems:?}");
    }

    #[test]
    fn unknown_converters_and_encodings_are_refused() {
        assert!(converter("io.confluent.connect.avro.AvroConverter", &BTreeMap::new()).is_err());
        assert!(converter("JsonConverter", &BTreeMap::new()).is_ok());
        let latin1: BTreeMap<String, String> =
            [("converter.encoding".to_string(), "ISO-8859-1".to_string())].into();
        assert!(converter(STRING_CONVERTER, &latin1).is_err());
        let utf8: BTreeMap<String, String> =
            [("converter.encoding".to_string(), "utf-8".to_string())].into();
        assert!(converter(STRING_CONVERTER, &utf8).is_ok());
        let bad: BTreeMap<String, String> =
            [("schemas.enable".to_string(), "yes".to_string())].into();
        let err = converter(JSON_CONVERTER, &bad)
            .err()
            .expect("not a boolean");
        assert!(err.to_string().contains("schemas.enable"), "{err}");
    }
}
