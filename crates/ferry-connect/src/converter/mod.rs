//! Converters between Kafka's bytes and Connect values, with Kafka Connect's class names.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::{Schema, SchemaAndValue, SchemaType, Value};
use crate::error::{ConnectError, Result};

pub mod json;

pub use json::{JsonConverter, JSON_CONVERTER};

/// Kafka bytes ⇄ Connect data (Kafka Connect's `Converter`: `decode` is `toConnectData`,
/// `encode` is `fromConnectData`).
pub trait Converter: Send + Sync {
    fn decode(&self, topic: &str, data: Option<&[u8]>) -> Result<SchemaAndValue>;
    fn encode(
        &self,
        topic: &str,
        schema: Option<&Arc<Schema>>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>>;
}

pub const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
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
    CONVERTERS
        .iter()
        .any(|(c, aliases)| *c == class || aliases.contains(&class))
}

/// Build a converter from its class and its own properties (`key.converter.*` without the
/// prefix: `schemas.enable`, `encoding`).
pub fn converter(class: &str, props: &BTreeMap<String, String>) -> Result<Box<dyn Converter>> {
    let class = CONVERTERS
        .iter()
        .find(|(c, aliases)| *c == class || aliases.contains(&class))
        .map(|(c, _)| *c)
        .ok_or_else(|| ConnectError::fatal(format!("unknown converter class {class:?}")))?;
    match class {
        STRING_CONVERTER => {
            let encoding = props
                .get("encoding")
                .or_else(|| props.get("converter.encoding"))
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

/// `org.apache.kafka.connect.storage.StringConverter`: UTF-8 text, optional string schema.
#[derive(Clone, Copy, Debug, Default)]
pub struct StringConverter;

impl Converter for StringConverter {
    fn decode(&self, topic: &str, data: Option<&[u8]>) -> Result<SchemaAndValue> {
        let value = match data {
            None => Value::Null,
            Some(bytes) => Value::String(String::from_utf8(bytes.to_vec()).map_err(|e| {
                ConnectError::data(format!(
                    "StringConverter: data from topic {topic} is not UTF-8: {e}"
                ))
            })?),
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
    fn string_converter_names_the_topic_of_bad_bytes() {
        let err = StringConverter
            .decode("orders", Some(&[0xff, 0xfe]))
            .expect_err("not UTF-8");
        assert!(err.to_string().contains("orders"), "{err}");
        assert!(!err.is_retriable());
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
    fn unknown_converters_and_encodings_are_refused() {
        assert!(converter("io.confluent.connect.avro.AvroConverter", &BTreeMap::new()).is_err());
        assert!(converter("JsonConverter", &BTreeMap::new()).is_ok());
        let latin1: BTreeMap<String, String> =
            [("encoding".to_string(), "ISO-8859-1".to_string())].into();
        assert!(converter(STRING_CONVERTER, &latin1).is_err());
        let utf8: BTreeMap<String, String> = [("encoding".to_string(), "utf-8".to_string())].into();
        assert!(converter(STRING_CONVERTER, &utf8).is_ok());
        let bad: BTreeMap<String, String> =
            [("schemas.enable".to_string(), "yes".to_string())].into();
        let err = converter(JSON_CONVERTER, &bad)
            .err()
            .expect("not a boolean");
        assert!(err.to_string().contains("schemas.enable"), "{err}");
    }
}
