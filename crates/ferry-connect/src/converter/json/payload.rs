//! A payload read straight from its JSON text into Connect data, guided by its schema, without
//! building a tree of JSON values first. Only what fits its schema plainly is read this way;
//! anything else (a value of another JSON type than its schema's, a number out of range, a
//! decimal written as a number, a map) gives `None`, and the converter takes its general path,
//! which reads the same text again and either accepts it or names what is wrong and where.

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::data::{Schema, SchemaType, Struct, Value};
use crate::logical::Logical;

use super::B64;

/// The payload `text` as a value of `schema`, or `None` when it must take the general path.
pub(super) fn read(
    text: &[u8],
    schema: &Arc<Schema>,
    replace_null_with_default: bool,
) -> Option<Value> {
    let mut json = serde_json::Deserializer::from_slice(text);
    let seed = Seed {
        schema,
        replace_null_with_default,
    };
    let value = seed.deserialize(&mut json).ok()?;
    json.end().ok()?;
    Some(value)
}

/// A value of `schema` to be read.
#[derive(Clone, Copy)]
struct Seed<'s> {
    schema: &'s Arc<Schema>,
    replace_null_with_default: bool,
}

/// Not read here: the general path reads it (and reports what is wrong with it).
fn general<E: de::Error>() -> E {
    E::custom("for the general path")
}

impl<'s> Seed<'s> {
    fn of(self, schema: &'s Arc<Schema>) -> Seed<'s> {
        Seed { schema, ..self }
    }

    /// A JSON null, or a struct field that is absent.
    fn null<E: de::Error>(self) -> Result<Value, E> {
        match &self.schema.default {
            Some(default) if self.replace_null_with_default => Ok(default.clone()),
            _ if self.schema.optional => Ok(Value::Null),
            _ => Err(general()),
        }
    }

    /// A value read as its schema's type, as its logical type has it.
    fn done<E: de::Error>(self, value: Value) -> Result<Value, E> {
        match Logical::of(self.schema) {
            Ok(None) => Ok(value),
            Ok(Some(logical)) => logical.to_logical(value).map_err(|_| general()),
            Err(_) => Err(general()),
        }
    }

    fn integer<E: de::Error>(self, v: i64) -> Result<Value, E> {
        let value = match self.schema.ty {
            SchemaType::Int8 => Value::Int8(i8::try_from(v).map_err(|_| general::<E>())?),
            SchemaType::Int16 => Value::Int16(i16::try_from(v).map_err(|_| general::<E>())?),
            SchemaType::Int32 => Value::Int32(i32::try_from(v).map_err(|_| general::<E>())?),
            SchemaType::Int64 => Value::Int64(v),
            SchemaType::Float32 => Value::Float32(v as f64 as f32),
            SchemaType::Float64 => Value::Float64(v as f64),
            _ => return Err(general()),
        };
        self.done(value)
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, json: D) -> Result<Value, D::Error> {
        json.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a value of a {} schema", self.schema.ty.name())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.null()
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        match self.schema.ty {
            SchemaType::Boolean => self.done(Value::Boolean(v)),
            _ => Err(general()),
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.integer(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        match self.schema.ty {
            SchemaType::Float32 => self.done(Value::Float32(v as f64 as f32)),
            SchemaType::Float64 => self.done(Value::Float64(v as f64)),
            _ => self.integer(i64::try_from(v).map_err(|_| general::<E>())?),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        match self.schema.ty {
            SchemaType::Float32 => self.done(Value::Float32(v as f32)),
            SchemaType::Float64 => self.done(Value::Float64(v)),
            _ => Err(general()),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        match self.schema.ty {
            SchemaType::String => self.done(Value::String(v.to_string())),
            SchemaType::Bytes => {
                let bytes = B64.decode(v).map_err(|_| general::<E>())?;
                self.done(Value::Bytes(bytes))
            }
            _ => Err(general()),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let (SchemaType::Array, Some(element)) = (self.schema.ty, &self.schema.value_schema) else {
            return Err(general());
        };
        let mut values = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(value) = items.next_element_seed(self.of(element))? {
            values.push(value);
        }
        self.done(Value::Array(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut object: A) -> Result<Value, A::Error> {
        if self.schema.ty != SchemaType::Struct {
            return Err(general());
        }
        let fields = &self.schema.fields;
        let mut read: Vec<Option<Value>> = vec![None; fields.len()];
        while let Some(index) = object.next_key_seed(FieldIndex(self.schema))? {
            match index {
                // A key given twice keeps its last value, as a JSON object read whole does.
                Some(i) => read[i] = Some(object.next_value_seed(self.of(&fields[i].schema))?),
                None => {
                    object.next_value::<IgnoredAny>()?;
                }
            }
        }
        let values = read
            .into_iter()
            .zip(fields)
            .map(|(value, field)| match value {
                Some(value) => Ok(value),
                None => self.of(&field.schema).null(),
            })
            .collect::<Result<Vec<_>, A::Error>>()?;
        let s = Struct::of(self.schema.clone(), values).map_err(|_| general::<A::Error>())?;
        self.done(Value::Struct(s))
    }
}

/// A struct's key, as the index of its field (`None`: not a field of the struct).
struct FieldIndex<'s>(&'s Schema);

impl<'de> DeserializeSeed<'de> for FieldIndex<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, json: D) -> Result<Option<usize>, D::Error> {
        json.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldIndex<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Option<usize>, E> {
        Ok(self.0.field(name).map(|f| f.index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::converter::json::{read_schema, JsonConverter};
    use serde_json::Value as J;

    /// The payload read here, and as the general path reads it from a tree (`None`: an error).
    fn both(schema: &str, payload: &str, replace: bool) -> (Option<Value>, Option<Value>) {
        let schema: J = serde_json::from_str(schema).expect("a test schema is JSON");
        let schema = Arc::new(
            read_schema(&schema)
                .map_err(|e| e.message)
                .expect("a test schema")
                .expect("not null"),
        );
        let converter = JsonConverter {
            replace_null_with_default: replace,
            ..JsonConverter::default()
        };
        let tree: J = serde_json::from_str(payload).expect("a test payload is JSON");
        let general = converter.read_value(Some(&schema), Some(&tree), "").ok();
        (read(payload.as_bytes(), &schema, replace), general)
    }

    const ROW: &str = r#"{"type":"struct","name":"row","fields":[
        {"field":"id","type":"int32"},
        {"field":"name","type":"string","optional":true},
        {"field":"score","type":"double","optional":true,"default":1.5},
        {"field":"small","type":"int8","optional":true},
        {"field":"ok","type":"boolean","optional":true},
        {"field":"tags","type":"array","items":{"type":"string"},"optional":true},
        {"field":"raw","type":"bytes","optional":true},
        {"field":"day","type":"int32","name":"org.apache.kafka.connect.data.Date","optional":true},
        {"field":"inner","type":"struct","optional":true,"fields":[{"field":"x","type":"int64"}]}
    ]}"#;

    #[test]
    fn what_fits_its_schema_is_read_as_the_general_path_reads_it() {
        for payload in [
            r#"{"id":1,"name":"a\"b\u00e9","score":2,"small":-128,"ok":true,"tags":["x","y"],"raw":"AAE=","day":19000,"inner":{"x":9007199254740993}}"#,
            r#"{"id":2147483647,"name":null,"score":-0.25,"unknown":{"deep":[1,{"a":null}]},"inner":null}"#,
            r#"{"id":3}"#,
            r#"{"id":4,"id":5,"tags":[]}"#,
        ] {
            for replace in [true, false] {
                let (fast, general) = both(ROW, payload, replace);
                assert!(fast.is_some(), "{payload} is read without a tree");
                assert_eq!(
                    fast, general,
                    "{payload}, replace.null.with.default {replace}"
                );
            }
        }
    }

    #[test]
    fn what_does_not_fit_takes_the_general_path() {
        for payload in [
            r#"{"name":"no id"}"#,
            r#"{"id":null}"#,
            r#"{"id":2147483648}"#,
            r#"{"id":1.5}"#,
            r#"{"id":"1"}"#,
            r#"{"id":1,"small":128}"#,
            r#"{"id":1,"raw":"not base64!"}"#,
            r#"{"id":1,"tags":[1]}"#,
            r#"{"id":1,"inner":{}}"#,
            r#"[1]"#,
        ] {
            let (fast, general) = both(ROW, payload, true);
            assert_eq!(fast, None, "{payload} takes the general path");
            assert_eq!(general, None, "{payload} is an error there");
        }
        // Read by the general path, not here: a decimal as a number, a map.
        let decimal = r#"{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}}"#;
        let (fast, general) = both(decimal, "12.34", true);
        assert_eq!(fast, None);
        assert!(general.is_some());
        let map = r#"{"type":"map","keys":{"type":"string"},"values":{"type":"int32"}}"#;
        let (fast, general) = both(map, r#"{"a":1}"#, true);
        assert_eq!(fast, None);
        assert!(general.is_some());
    }
}
