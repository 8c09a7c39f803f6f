//! Header converters: header bytes ⇄ Connect values. `SimpleHeaderConverter` (Kafka Connect's
//! default) writes values as text and infers their types when reading; the record converters
//! serve as header converters too, as in Kafka Connect.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::{Schema, SchemaAndValue, Value};
use crate::error::Result;
use crate::value_text::{parse_text, to_text};

use super::Converter;

/// Kafka Connect's SimpleHeaderConverter.
pub const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";

/// Header bytes ⇄ Connect data (Kafka Connect's `HeaderConverter`).
pub trait HeaderConverter: Send + Sync {
    /// A header's bytes as Connect data.
    fn decode(&self, topic: &str, key: &str, data: Option<&[u8]>) -> Result<SchemaAndValue>;
    /// Connect data as a header's bytes.
    fn encode(
        &self,
        topic: &str,
        key: &str,
        schema: Option<&Arc<Schema>>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>>;
}

/// `org.apache.kafka.connect.storage.SimpleHeaderConverter`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimpleHeaderConverter;

impl HeaderConverter for SimpleHeaderConverter {
    /// Bytes that are not UTF-8 are read with U+FFFD in their place, as Kafka Connect's
    /// `new String(bytes, UTF_8)` does.
    fn decode(&self, _topic: &str, _key: &str, data: Option<&[u8]>) -> Result<SchemaAndValue> {
        let Some(bytes) = data else {
            return Ok(SchemaAndValue::null());
        };
        Ok(parse_text(&String::from_utf8_lossy(bytes)))
    }

    fn encode(
        &self,
        _topic: &str,
        _key: &str,
        _schema: Option<&Arc<Schema>>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>> {
        Ok((!value.is_null()).then(|| to_text(value).into_bytes()))
    }
}

/// A record converter used for headers.
struct AsHeaders(Box<dyn Converter>);

impl HeaderConverter for AsHeaders {
    fn decode(&self, topic: &str, _key: &str, data: Option<&[u8]>) -> Result<SchemaAndValue> {
        self.0.decode(topic, data)
    }

    fn encode(
        &self,
        topic: &str,
        _key: &str,
        schema: Option<&Arc<Schema>>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>> {
        self.0.encode(topic, schema, value)
    }
}

/// A header converter from its class (SimpleHeaderConverter or a record converter) and its
/// own properties.
pub fn header_converter(
    class: &str,
    props: &BTreeMap<String, String>,
) -> Result<Box<dyn HeaderConverter>> {
    if super::is_simple_header_converter(class) {
        return Ok(Box::new(SimpleHeaderConverter));
    }
    Ok(Box::new(AsHeaders(super::converter(class, props)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::SchemaType;

    #[test]
    fn simple_headers_are_text_with_inferred_types() {
        let c = SimpleHeaderConverter;
        let cases: [(&[u8], Value); 4] = [
            (b"42", Value::Int8(42)),
            (b"true", Value::Boolean(true)),
            (b"trace-7", Value::String("trace-7".into())),
            (
                b"2023-11-14T22:13:20.042Z",
                Value::Timestamp(1_700_000_000_042),
            ),
        ];
        for (bytes, value) in cases {
            let sv = c.decode("t", "h", Some(bytes)).expect("parses");
            assert_eq!(sv.value, value);
            assert_eq!(
                c.encode("t", "h", sv.schema.as_ref(), &sv.value)
                    .expect("writes"),
                Some(bytes.to_vec())
            );
        }
        assert_eq!(
            c.decode("t", "h", None).expect("null"),
            SchemaAndValue::null()
        );
        assert_eq!(c.encode("t", "h", None, &Value::Null).expect("null"), None);
    }

    #[test]
    fn header_bytes_that_are_not_utf8_are_read_with_replacement_characters() {
        let sv = SimpleHeaderConverter
            .decode("t", "h", Some(b"a\xffb"))
            .expect("never fails");
        assert_eq!(sv.value, Value::String("a\u{fffd}b".into()));
    }

    #[test]
    fn record_converters_serve_as_header_converters() {
        let c = header_converter("StringConverter", &BTreeMap::new()).expect("known");
        let sv = c.decode("t", "h", Some(b"42")).expect("text");
        assert_eq!(sv.value, Value::String("42".into()));
        assert_eq!(sv.schema.map(|s| s.ty), Some(SchemaType::String));
        assert!(header_converter("SimpleHeaderConverter", &BTreeMap::new()).is_ok());
        assert!(header_converter("AvroConverter", &BTreeMap::new()).is_err());
    }
}
