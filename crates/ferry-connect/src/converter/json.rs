//! `org.apache.kafka.connect.json.JsonConverter`: Connect data as JSON, by default in Kafka
//! Connect's envelope `{"schema": …, "payload": …}`, written key for key as Kafka Connect writes
//! it (so that a record decoded and encoded again is the same text), numbers as Java prints
//! them, bytes in base64, decimals in base64 or as numbers (`decimal.format`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use base64::Engine;
use serde_json::Value as J;

use crate::config::{Choice, Values};
use crate::data::{Schema, SchemaAndValue, SchemaType, Struct, Value};
use crate::error::{ConnectError, Result};
use crate::logical::{Decimal, Logical};

use super::{Converter, SERIALIZATION_ERROR};

mod payload;

/// Kafka Connect's JsonConverter.
pub const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// How decimals are written (`decimal.format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecimalFormat {
    /// The unscaled value's two's-complement bytes in base64 (the default).
    Base64,
    /// A JSON number.
    Numeric,
}

/// The converter, configured.
#[derive(Debug)]
pub struct JsonConverter {
    schemas: bool,
    decimal: DecimalFormat,
    replace_null_with_default: bool,
    /// The schemas read, by their JSON text (`schemas.cache.size` of them; emptied when
    /// full): records of one topic carry the same schema, read once instead of per record.
    cache: std::sync::Mutex<SchemaCache>,
}

/// Schemas by the JSON text they were read from.
#[derive(Debug, Default)]
struct SchemaCache {
    size: usize,
    schemas: std::collections::HashMap<Arc<str>, Option<Arc<Schema>>>,
    /// The schema taken last, compared before the map is hashed into: a topic's records
    /// mostly carry the schema of the record before them.
    last: Option<(Arc<str>, Option<Arc<Schema>>)>,
}

impl SchemaCache {
    /// The schema `text` is, read by `read` unless it was read before.
    fn schema(
        &mut self,
        text: &str,
        read: impl FnOnce() -> Result<Option<Arc<Schema>>>,
    ) -> Result<Option<Arc<Schema>>> {
        if let Some((last, schema)) = &self.last {
            if **last == *text {
                return Ok(schema.clone());
            }
        }
        let (text, schema) = match self.schemas.get_key_value(text) {
            Some((text, schema)) => (text.clone(), schema.clone()),
            None => {
                let schema = read()?;
                if self.size == 0 {
                    return Ok(schema);
                }
                if self.schemas.len() >= self.size {
                    self.schemas.clear();
                }
                let text: Arc<str> = text.into();
                self.schemas.insert(text.clone(), schema.clone());
                (text, schema)
            }
        };
        self.last = Some((text, schema.clone()));
        Ok(schema)
    }
}

/// A record with schemas as the usual case has it: exactly a schema and a payload, taken as
/// text without building a tree of them. Anything else takes the general path (and its errors).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[serde(borrow)]
    schema: &'a serde_json::value::RawValue,
    #[serde(borrow)]
    payload: &'a serde_json::value::RawValue,
}

impl Choice for DecimalFormat {
    const CHOICES: &'static [(&'static str, DecimalFormat)] = &[
        ("BASE64", DecimalFormat::Base64),
        ("NUMERIC", DecimalFormat::Numeric),
    ];
}

impl Default for JsonConverter {
    /// The declared defaults.
    fn default() -> Self {
        JsonConverter::configure(&BTreeMap::new()).expect("the declared defaults are valid")
    }
}

impl JsonConverter {
    /// From the converter's own properties (`value.converter.schemas.enable` arrives as
    /// `schemas.enable`).
    pub fn configure(props: &BTreeMap<String, String>) -> Result<Self> {
        let values = Values::new(super::converter_config(JSON_CONVERTER), props);
        let size: i64 = values.number("schemas.cache.size")?;
        Ok(JsonConverter {
            schemas: values.boolean("schemas.enable")?,
            decimal: values.choice("decimal.format")?,
            replace_null_with_default: values.boolean("replace.null.with.default")?,
            cache: std::sync::Mutex::new(SchemaCache {
                size: usize::try_from(size).unwrap_or(0),
                ..SchemaCache::default()
            }),
        })
    }

    /// A converter with `schemas.enable` as given and the other settings at their defaults.
    pub fn with_schemas(schemas: bool) -> Self {
        JsonConverter {
            schemas,
            ..JsonConverter::default()
        }
    }

    /// The JSON form of a schema, as in the envelope.
    pub fn schema_json(&self, schema: &Schema) -> Result<String> {
        let mut out = String::new();
        self.write_schema(&mut out, schema, None)?;
        Ok(out)
    }

    fn write_schema(&self, out: &mut String, schema: &Schema, field: Option<&str>) -> Result<()> {
        let _ = write!(out, "{{\"type\":\"{}\"", json_type_name(schema.ty));
        match schema.ty {
            SchemaType::Array => {
                out.push_str(",\"items\":");
                self.write_schema(out, element_schema(schema)?, None)?;
            }
            SchemaType::Map => {
                let (keys, values) = map_schemas(schema)?;
                out.push_str(",\"keys\":");
                self.write_schema(out, keys, None)?;
                out.push_str(",\"values\":");
                self.write_schema(out, values, None)?;
            }
            SchemaType::Struct => {
                out.push_str(",\"fields\":[");
                for (i, f) in schema.fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.write_schema(out, &f.schema, Some(&f.name))?;
                }
                out.push(']');
            }
            _ => {}
        }
        let _ = write!(out, ",\"optional\":{}", schema.optional);
        if let Some(name) = &schema.name {
            out.push_str(",\"name\":");
            write_string(out, name);
        }
        if let Some(version) = schema.version {
            let _ = write!(out, ",\"version\":{version}");
        }
        if let Some(doc) = &schema.doc {
            out.push_str(",\"doc\":");
            write_string(out, doc);
        }
        if !schema.parameters.is_empty() {
            out.push_str(",\"parameters\":{");
            for (i, (k, v)) in schema.parameters.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_string(out, v);
            }
            out.push('}');
        }
        if let Some(default) = &schema.default {
            out.push_str(",\"default\":");
            self.write_value(out, Some(schema), default, "default")?;
        }
        if let Some(field) = field {
            out.push_str(",\"field\":");
            write_string(out, field);
        }
        out.push('}');
        Ok(())
    }

    fn write_value(
        &self,
        out: &mut String,
        schema: Option<&Schema>,
        value: &Value,
        path: &str,
    ) -> Result<()> {
        if value.is_null() {
            return match schema {
                None => {
                    out.push_str("null");
                    Ok(())
                }
                Some(s) => match &s.default {
                    Some(default) if self.replace_null_with_default => {
                        self.write_value(out, Some(s), default, path)
                    }
                    _ if s.optional => {
                        out.push_str("null");
                        Ok(())
                    }
                    _ => Err(at(
                        path,
                        "null value for a field that is required and has no default value",
                    )),
                },
            };
        }
        let logical = schema.map(Logical::of).transpose()?.flatten();
        let logical_value = matches!(
            value,
            Value::Decimal(_) | Value::Date(_) | Value::Time(_) | Value::Timestamp(_)
        );
        match (schema, logical) {
            (_, Some(logical)) if !logical.accepts(value) => {
                return Err(at(
                    path,
                    format!(
                        "invalid type for {}: a {} value",
                        logical.name(),
                        value.kind()
                    ),
                ));
            }
            (Some(s), None) if logical_value => {
                return Err(at(
                    path,
                    format!("invalid type for {}: a {} value", s.ty.name(), value.kind()),
                ));
            }
            _ => {}
        }
        let mismatch = |s: &Schema| {
            at(
                path,
                format!("invalid type for {}: a {} value", s.ty.name(), value.kind()),
            )
        };
        match value {
            Value::Null => out.push_str("null"),
            Value::Decimal(d) => match self.decimal {
                DecimalFormat::Numeric => {
                    let _ = write!(out, "{d}");
                }
                DecimalFormat::Base64 if schema.is_some() => {
                    write_string(out, &B64.encode(d.to_bytes()));
                }
                // Without a schema nothing would say the scale: write the number.
                DecimalFormat::Base64 => {
                    let _ = write!(out, "{d}");
                }
            },
            Value::Date(v) | Value::Time(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Timestamp(v) => {
                let _ = write!(out, "{v}");
            }
            _ => {
                if let Some(s) = schema {
                    if !s.ty.holds(value) {
                        return Err(mismatch(s));
                    }
                }
                self.write_plain(out, schema, value, path)?;
            }
        }
        Ok(())
    }

    /// A value of a non-logical type that fits `schema` (if any).
    fn write_plain(
        &self,
        out: &mut String,
        schema: Option<&Schema>,
        value: &Value,
        path: &str,
    ) -> Result<()> {
        match value {
            Value::Int8(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Int16(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Int32(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Int64(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Float32(v) => write_float(out, java_float(*v)),
            Value::Float64(v) => write_float(out, java_double(*v)),
            Value::Boolean(v) => {
                let _ = write!(out, "{v}");
            }
            Value::String(v) => write_string(out, v),
            Value::Bytes(v) => write_string(out, &B64.encode(v)),
            Value::Array(items) => {
                let element = schema.map(element_schema).transpose()?;
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.write_value(out, element, item, &format!("{path}[{i}]"))?;
                }
                out.push(']');
            }
            Value::Map(entries) => {
                let schemas = schema.map(map_schemas).transpose()?;
                let object = match schemas {
                    Some((keys, _)) => keys.ty == SchemaType::String,
                    None => entries.iter().all(|(k, _)| matches!(k, Value::String(_))),
                };
                let (keys, values) = schemas.unzip();
                out.push(if object { '{' } else { '[' });
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let entry = format!("{path}[{k}]");
                    if object {
                        match k {
                            Value::String(k) => write_string(out, k),
                            other => {
                                return Err(at(
                                    &entry,
                                    format!(
                                        "a {} map key where strings were declared",
                                        other.kind()
                                    ),
                                ))
                            }
                        }
                        out.push(':');
                        self.write_value(out, values, v, &entry)?;
                    } else {
                        out.push('[');
                        self.write_value(out, keys, k, &entry)?;
                        out.push(',');
                        self.write_value(out, values, v, &entry)?;
                        out.push(']');
                    }
                }
                out.push(if object { '}' } else { ']' });
            }
            Value::Struct(s) => {
                if let Some(schema) = schema {
                    if s.schema.as_ref() != schema {
                        return Err(at(path, "a struct whose schema is not the field's schema"));
                    }
                }
                out.push('{');
                for (i, f) in s.schema.fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(out, &f.name);
                    out.push(':');
                    let field_path = if path.is_empty() {
                        f.name.clone()
                    } else {
                        format!("{path}.{}", f.name)
                    };
                    self.write_value(out, Some(&f.schema), s.raw(f.index), &field_path)?;
                }
                out.push('}');
            }
            // Nulls and logical values are written by write_value, which hands on only the rest.
            Value::Null
            | Value::Decimal(_)
            | Value::Date(_)
            | Value::Time(_)
            | Value::Timestamp(_) => return self.write_value(out, schema, value, path),
        }
        Ok(())
    }

    /// A record written as Kafka Connect writes one, `{"schema":S,"payload":P}` without
    /// spaces, whose S is byte for byte the text of the schema taken last: that schema and P's
    /// text, found without scanning S again (P is read, and checked to be one JSON value, by
    /// the caller). Anything else is `None`, for the general path.
    fn known_envelope<'b>(&self, bytes: &'b [u8]) -> Option<(Arc<Schema>, &'b [u8])> {
        let rest = bytes.strip_prefix(br#"{"schema":"#)?;
        let (text, schema) = self.cache.lock().ok()?.last.clone()?;
        let rest = rest.strip_prefix(text.as_bytes())?;
        let payload = rest.strip_prefix(br#","payload":"#)?.strip_suffix(b"}")?;
        Some((schema?, payload))
    }

    /// A payload's `text` read straight as a value of `schema`, when it fits plainly.
    fn read_payload(&self, schema: &Arc<Schema>, text: &[u8]) -> Option<SchemaAndValue> {
        let value = payload::read(text, schema, self.replace_null_with_default)?;
        let schema = Some(schema.clone());
        Some(SchemaAndValue { schema, value })
    }

    /// The schema a record's `schema` field holds (`text`), from the cache or read.
    fn cached_schema(&self, text: &str) -> Result<Option<Arc<Schema>>> {
        let read = || {
            let json: J = serde_json::from_str(text)
                .map_err(|e| ConnectError::data(format!("the schema is not valid JSON: {e}")))?;
            Ok(read_schema(&json)?.map(Arc::new))
        };
        match self.cache.lock() {
            Ok(mut cache) => cache.schema(text, read),
            // A panic while the cache was held: read without it.
            Err(_) => read(),
        }
    }

    fn read_value(
        &self,
        schema: Option<&Arc<Schema>>,
        json: Option<&J>,
        path: &str,
    ) -> Result<Value> {
        let json = json.filter(|j| !j.is_null());
        let Some(schema) = schema else {
            return Ok(json.map_or(Value::Null, schemaless));
        };
        let Some(json) = json else {
            return match &schema.default {
                Some(default) if self.replace_null_with_default => Ok(default.clone()),
                _ if schema.optional => Ok(Value::Null),
                _ => Err(at(
                    path,
                    format!(
                        "invalid null value for a required {} field",
                        schema.ty.name()
                    ),
                )),
            };
        };
        let wrong = || {
            at(
                path,
                format!(
                    "a JSON {} where the schema says {}",
                    json_kind(json),
                    schema.ty.name()
                ),
            )
        };
        let int = |min: i64, max: i64| -> Result<i64> {
            json.as_i64()
                .filter(|v| (min..=max).contains(v))
                .ok_or_else(|| match json.as_f64() {
                    Some(_) => at(
                        path,
                        format!(
                            "{json} is not a {} (an integer from {min} to {max})",
                            schema.ty.name()
                        ),
                    ),
                    None => wrong(),
                })
        };
        let logical = Logical::of(schema)?;
        let value = match schema.ty {
            SchemaType::Boolean => Value::Boolean(json.as_bool().ok_or_else(wrong)?),
            SchemaType::Int8 => Value::Int8(int(i8::MIN.into(), i8::MAX.into())? as i8),
            SchemaType::Int16 => Value::Int16(int(i16::MIN.into(), i16::MAX.into())? as i16),
            SchemaType::Int32 => Value::Int32(int(i32::MIN.into(), i32::MAX.into())? as i32),
            SchemaType::Int64 => Value::Int64(int(i64::MIN, i64::MAX)?),
            SchemaType::Float32 => Value::Float32(json.as_f64().ok_or_else(wrong)? as f32),
            SchemaType::Float64 => Value::Float64(json.as_f64().ok_or_else(wrong)?),
            SchemaType::String => Value::String(json.as_str().ok_or_else(wrong)?.to_string()),
            SchemaType::Bytes => match (logical, json) {
                // A decimal written as a number (decimal.format=NUMERIC).
                (Some(Logical::Decimal { scale }), J::Number(n)) => {
                    let d = Decimal::parse(&n.to_string()).map_err(|e| at(path, e.message))?;
                    return Ok(Value::Decimal(
                        d.rescale(scale).map_err(|e| at(path, e.message))?,
                    ));
                }
                (_, J::String(text)) => Value::Bytes(
                    B64.decode(text)
                        .map_err(|e| at(path, format!("bytes are not valid base64: {e}")))?,
                ),
                _ => return Err(wrong()),
            },
            SchemaType::Array => {
                let element = schema
                    .value_schema
                    .as_ref()
                    .ok_or_else(|| at(path, "an array schema without an element schema"))?;
                let items = json.as_array().ok_or_else(wrong)?;
                Value::Array(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| {
                            self.read_value(Some(element), Some(item), &format!("{path}[{i}]"))
                        })
                        .collect::<Result<_>>()?,
                )
            }
            SchemaType::Map => {
                let (Some(keys), Some(values)) = (&schema.key_schema, &schema.value_schema) else {
                    return Err(at(path, "a map schema without key and value schemas"));
                };
                let entries = if keys.ty == SchemaType::String {
                    json.as_object()
                        .ok_or_else(wrong)?
                        .iter()
                        .map(|(k, v)| {
                            let entry = format!("{path}[{k}]");
                            Ok((
                                Value::String(k.clone()),
                                self.read_value(Some(values), Some(v), &entry)?,
                            ))
                        })
                        .collect::<Result<_>>()?
                } else {
                    json.as_array()
                        .ok_or_else(wrong)?
                        .iter()
                        .enumerate()
                        .map(|(i, pair)| {
                            let entry = format!("{path}[{i}]");
                            match pair.as_array().map(Vec::as_slice) {
                                Some([k, v]) => Ok((
                                    self.read_value(Some(keys), Some(k), &entry)?,
                                    self.read_value(Some(values), Some(v), &entry)?,
                                )),
                                _ => Err(at(&entry, "map entries must be [key, value] arrays")),
                            }
                        })
                        .collect::<Result<_>>()?
                };
                Value::Map(entries)
            }
            SchemaType::Struct => {
                let object = json.as_object().ok_or_else(wrong)?;
                let mut s = Struct::new(schema.clone())?;
                for f in &schema.fields {
                    let field_path = if path.is_empty() {
                        f.name.clone()
                    } else {
                        format!("{path}.{}", f.name)
                    };
                    let v = self.read_value(Some(&f.schema), object.get(&f.name), &field_path)?;
                    s.put(&f.name, v)?;
                }
                Value::Struct(s)
            }
        };
        match logical {
            Some(logical) => logical.to_logical(value).map_err(|e| at(path, e.message)),
            None => Ok(value),
        }
    }
}

impl Converter for JsonConverter {
    fn decode(&self, topic: &str, data: Option<&[u8]>) -> Result<SchemaAndValue> {
        let Some(bytes) = data else {
            return Ok(SchemaAndValue::null());
        };
        let in_topic = |e: ConnectError| {
            ConnectError::data(format!("JsonConverter (topic {topic}): {}", e.message))
        };
        if self.schemas {
            if let Some((schema, text)) = self.known_envelope(bytes) {
                if let Some(read) = self.read_payload(&schema, text) {
                    return Ok(read);
                }
            }
            if let Ok(envelope) = serde_json::from_slice::<Envelope>(bytes) {
                let schema = self.cached_schema(envelope.schema.get());
                if let Ok(Some(schema)) = &schema {
                    if let Some(read) = self.read_payload(schema, envelope.payload.get().as_bytes())
                    {
                        return Ok(read);
                    }
                }
                if let Ok(payload) = serde_json::from_str::<J>(envelope.payload.get()) {
                    let schema = schema.map_err(in_topic)?;
                    let value = self
                        .read_value(schema.as_ref(), Some(&payload), "")
                        .map_err(in_topic)?;
                    return Ok(SchemaAndValue { schema, value });
                }
            }
        }
        let json: Option<J> = if bytes.is_empty() {
            None
        } else {
            Some(serde_json::from_slice(bytes).map_err(|e| {
                ConnectError::data(SERIALIZATION_ERROR).caused_by(format!(
                    "JsonConverter (topic {topic}): the data is not valid JSON: {e}"
                ))
            })?)
        };
        let (schema, payload) =
            if self.schemas {
                match json {
                    Some(J::Object(mut envelope))
                        if envelope.len() == 2
                            && envelope.contains_key("schema")
                            && envelope.contains_key("payload") =>
                    {
                        (
                            envelope.shift_remove("schema"),
                            envelope.shift_remove("payload"),
                        )
                    }
                    _ => return Err(ConnectError::data(
                        "JsonConverter with schemas.enable requires \"schema\" and \"payload\" \
                         fields and may not contain additional fields. If you are trying to \
                         deserialize plain JSON data, set schemas.enable=false in your converter \
                         configuration.",
                    )),
                }
            } else {
                (None, json)
            };
        let schema = match schema {
            Some(s) => read_schema(&s).map_err(in_topic)?.map(Arc::new),
            None => None,
        };
        let value = self
            .read_value(schema.as_ref(), payload.as_ref(), "")
            .map_err(in_topic)?;
        Ok(SchemaAndValue { schema, value })
    }

    fn encode(
        &self,
        topic: &str,
        schema: Option<&Arc<Schema>>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>> {
        if schema.is_none() && value.is_null() {
            return Ok(None);
        }
        let mut out = String::new();
        let written = if self.schemas {
            out.push_str("{\"schema\":");
            match schema {
                Some(s) => self.write_schema(&mut out, s, None),
                None => {
                    out.push_str("null");
                    Ok(())
                }
            }
            .and_then(|_| {
                out.push_str(",\"payload\":");
                self.write_value(&mut out, schema.map(Arc::as_ref), value, "")
            })
            .map(|_| out.push('}'))
        } else {
            self.write_value(&mut out, schema.map(Arc::as_ref), value, "")
        };
        written.map_err(|e| {
            ConnectError::data(format!("JsonConverter (topic {topic}): {}", e.message))
        })?;
        Ok(Some(out.into_bytes()))
    }
}

/// A schema from its JSON form; JSON `null` is no schema.
pub fn read_schema(json: &J) -> Result<Option<Schema>> {
    if json.is_null() {
        return Ok(None);
    }
    let object = json
        .as_object()
        .ok_or_else(|| ConnectError::data("a schema must be a JSON object"))?;
    let ty = object
        .get("type")
        .and_then(J::as_str)
        .ok_or_else(|| ConnectError::data("schema must contain 'type' field"))?;
    let nested = |key: &str, what: &str| -> Result<Arc<Schema>> {
        object
            .get(key)
            .map(read_schema)
            .transpose()?
            .flatten()
            .map(Arc::new)
            .ok_or_else(|| ConnectError::data(format!("{what} schema did not specify the {key}")))
    };
    let mut schema = match ty {
        "boolean" => Schema::of(SchemaType::Boolean),
        "int8" => Schema::of(SchemaType::Int8),
        "int16" => Schema::of(SchemaType::Int16),
        "int32" => Schema::of(SchemaType::Int32),
        "int64" => Schema::of(SchemaType::Int64),
        "float" => Schema::of(SchemaType::Float32),
        "double" => Schema::of(SchemaType::Float64),
        "bytes" => Schema::of(SchemaType::Bytes),
        "string" => Schema::of(SchemaType::String),
        "array" => Schema {
            value_schema: Some(nested("items", "array")?),
            ..Schema::of(SchemaType::Array)
        },
        "map" => Schema {
            key_schema: Some(nested("keys", "map")?),
            value_schema: Some(nested("values", "map")?),
            ..Schema::of(SchemaType::Map)
        },
        "struct" => {
            let fields = object.get("fields").and_then(J::as_array).ok_or_else(|| {
                ConnectError::data("struct schema's \"fields\" argument is not an array")
            })?;
            let mut built = Vec::with_capacity(fields.len());
            for (index, field) in fields.iter().enumerate() {
                let name = field.get("field").and_then(J::as_str).ok_or_else(|| {
                    ConnectError::data("struct schema's field name not specified properly")
                })?;
                let field_schema = read_schema(field)?
                    .ok_or_else(|| ConnectError::data(format!("field {name} has no schema")))?;
                built.push(crate::data::Field {
                    name: name.to_string(),
                    index,
                    schema: Arc::new(field_schema),
                });
            }
            Schema {
                fields: built,
                ..Schema::of(SchemaType::Struct)
            }
        }
        other => return Err(ConnectError::data(format!("unknown schema type: {other}"))),
    };
    schema.optional = object.get("optional").and_then(J::as_bool).unwrap_or(false);
    schema.name = object.get("name").and_then(J::as_str).map(str::to_string);
    schema.version = object
        .get("version")
        .and_then(J::as_i64)
        .and_then(|v| i32::try_from(v).ok());
    schema.doc = object.get("doc").and_then(J::as_str).map(str::to_string);
    if let Some(params) = object.get("parameters").and_then(J::as_object) {
        for (k, v) in params {
            let v = v
                .as_str()
                .ok_or_else(|| ConnectError::data("schema parameters must have string values"))?;
            schema.parameters.insert(k.clone(), v.to_string());
        }
    }
    if let Some(default) = object.get("default").filter(|d| !d.is_null()) {
        let shape = Arc::new(Schema {
            optional: true,
            ..schema.clone()
        });
        let value = JsonConverter::default().read_value(Some(&shape), Some(default), "default")?;
        schema = schema.with_default(value)?;
    }
    Ok(Some(schema))
}

/// A value read without a schema: integers as int64, other numbers as float64, objects as
/// maps with string keys.
fn schemaless(json: &J) -> Value {
    match json {
        J::Null => Value::Null,
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int64(i),
            None => Value::Float64(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::String(s.clone()),
        J::Array(items) => Value::Array(items.iter().map(schemaless).collect()),
        J::Object(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| (Value::String(k.clone()), schemaless(v)))
                .collect(),
        ),
    }
}

fn element_schema(schema: &Schema) -> Result<&Schema> {
    schema
        .value_schema
        .as_deref()
        .ok_or_else(|| ConnectError::data("an array schema without an element schema"))
}

fn map_schemas(schema: &Schema) -> Result<(&Schema, &Schema)> {
    match (&schema.key_schema, &schema.value_schema) {
        (Some(k), Some(v)) => Ok((k, v)),
        _ => Err(ConnectError::data(
            "a map schema without key and value schemas",
        )),
    }
}

/// The type names of the JSON schema form (`float` and `double` for the float types).
fn json_type_name(ty: SchemaType) -> &'static str {
    match ty {
        SchemaType::Float32 => "float",
        SchemaType::Float64 => "double",
        other => other.name(),
    }
}

fn json_kind(json: &J) -> &'static str {
    match json {
        J::Null => "null",
        J::Bool(_) => "boolean",
        J::Number(_) => "number",
        J::String(_) => "string",
        J::Array(_) => "array",
        J::Object(_) => "object",
    }
}

/// An error about the value at `path` (`item`, `order.lines[2]`).
fn at(path: &str, message: impl std::fmt::Display) -> ConnectError {
    if path.is_empty() {
        ConnectError::data(message.to_string())
    } else {
        ConnectError::data(format!("field {path}: {message}"))
    }
}

fn write_string(out: &mut String, s: &str) {
    // serde_json escapes as Jackson does: quotes, backslashes and control characters only.
    out.push_str(&J::String(s.to_string()).to_string());
}

/// A float as JSON: numbers as Java prints them, non-finite ones quoted as Jackson does.
fn write_float(out: &mut String, text: String) {
    if text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || c == '-')
        && text != "-Infinity"
    {
        out.push_str(&text);
    } else {
        write_string(out, &text);
    }
}

/// `Double.toString`: plain from 10^-3 to 10^7 with at least one decimal, else `d.dddE±n`.
pub fn java_double(v: f64) -> String {
    java_number(
        v.is_nan(),
        v.is_infinite(),
        v.is_sign_negative(),
        v.abs(),
        || (format!("{v}"), format!("{v:e}")),
    )
}

/// `Float.toString`, with the float's own shortest digits.
pub fn java_float(v: f32) -> String {
    java_number(
        v.is_nan(),
        v.is_infinite(),
        v.is_sign_negative(),
        f64::from(v.abs()),
        || (format!("{v}"), format!("{v:e}")),
    )
}

fn java_number(
    nan: bool,
    infinite: bool,
    negative: bool,
    magnitude: f64,
    texts: impl Fn() -> (String, String),
) -> String {
    if nan {
        return "NaN".into();
    }
    if infinite {
        return if negative { "-Infinity" } else { "Infinity" }.into();
    }
    let (plain, scientific) = texts();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        // Rust writes 1.5e-7 / 1e10; Java writes 1.5E-7 / 1.0E10.
        let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exponent}")
    }
}

#[cfg(test)]
mod tests;
