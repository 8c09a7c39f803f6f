//! AvroFormat: an Avro object container file per committed file, its schema made from the
//! records' Connect schema the way Confluent's AvroData makes it (records named by the Connect
//! schema or `io.confluent.connect.avro.ConnectDefault`, optional schemas as unions with null,
//! `connect.*` properties, Decimal/Date/Time/Timestamp as Avro logical types, maps with
//! non-string keys as arrays of `MapEntry` records), `avro.codec` null, deflate or snappy.
//! Values are encoded straight from the Connect value by its schema; apache-avro checks the
//! schema and compresses the blocks.

use std::collections::BTreeMap;
use std::sync::Arc;

use apache_avro::{Codec, DeflateSettings};
use ferry_connect::config::Choice;
use ferry_connect::logical::Logical;
use ferry_connect::{ConnectError, Result, Schema, SchemaType, SinkRecord, Value};
use serde_json::{json, Map, Value as Json};

use super::RecordWriter;

const NAMESPACE: &str = "io.confluent.connect.avro";
const DEFAULT_NAME: &str = "ConnectDefault";
/// Bytes of records per block, as Avro's Java writer (`DataFileWriter`'s sync interval).
const BLOCK_BYTES: usize = 64_000;

/// `avro.codec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AvroCodec {
    /// No compression.
    Null,
    /// Deflate.
    Deflate,
    /// Snappy, with the CRC-32 of each block as Avro writes it.
    Snappy,
}

impl Choice for AvroCodec {
    const CHOICES: &'static [(&'static str, AvroCodec)] = &[
        ("null", AvroCodec::Null),
        ("deflate", AvroCodec::Deflate),
        ("snappy", AvroCodec::Snappy),
    ];
}

impl AvroCodec {
    /// The codec's name in Avro's file header: the name the config gives it.
    fn name(self) -> &'static str {
        Self::CHOICES
            .iter()
            .find(|(_, codec)| *codec == self)
            .map_or("null", |(name, _)| *name)
    }

    fn codec(self) -> Codec {
        match self {
            AvroCodec::Null => Codec::Null,
            AvroCodec::Deflate => Codec::Deflate(DeflateSettings::default()),
            AvroCodec::Snappy => Codec::Snappy,
        }
    }
}

/// The Avro schema (as JSON) of a Connect schema.
pub fn avro_schema(schema: &Schema) -> Result<Json> {
    Namer::default().schema(schema, false)
}

/// Names records as AvroData does; a named record seen again is referred to by name.
#[derive(Default)]
struct Namer {
    defined: BTreeMap<String, Schema>,
    unnamed: usize,
}

impl Namer {
    fn schema(&mut self, schema: &Schema, ignore_optional: bool) -> Result<Json> {
        let logical = Logical::of(schema)?;
        let base = match schema.ty {
            SchemaType::Int8 | SchemaType::Int16 | SchemaType::Int32 => json!("int"),
            SchemaType::Int64 => json!("long"),
            SchemaType::Float32 => json!("float"),
            SchemaType::Float64 => json!("double"),
            SchemaType::Boolean => json!("boolean"),
            SchemaType::String => json!("string"),
            SchemaType::Bytes => json!("bytes"),
            SchemaType::Array => {
                json!({"type": "array", "items": self.schema(elements(schema)?, false)?})
            }
            SchemaType::Map => {
                let (keys, values) = (map_keys(schema)?, elements(schema)?);
                if string_keys(keys) {
                    json!({"type": "map", "values": self.schema(values, false)?})
                } else {
                    let entry = self.record(
                        &format!("{NAMESPACE}.MapEntry"),
                        None,
                        &[("key", keys), ("value", values)],
                    )?;
                    json!({"type": "array", "items": entry})
                }
            }
            SchemaType::Struct => {
                let name = match &schema.name {
                    Some(name) => name.clone(),
                    None => {
                        self.unnamed += 1;
                        match self.unnamed {
                            1 => format!("{NAMESPACE}.{DEFAULT_NAME}"),
                            n => format!("{NAMESPACE}.{DEFAULT_NAME}{n}"),
                        }
                    }
                };
                if let Some(seen) = self.defined.get(&name) {
                    if seen.fields != schema.fields {
                        return Err(ConnectError::data(format!(
                            "two different struct schemas are named {name}: Avro needs one name per record"
                        )));
                    }
                    Json::String(name)
                } else {
                    self.defined.insert(name.clone(), schema.clone());
                    let fields: Vec<(&str, &Schema)> = schema
                        .fields
                        .iter()
                        .map(|f| (f.name.as_str(), f.schema.as_ref()))
                        .collect();
                    self.record(&name, schema.doc.as_deref(), &fields)?
                }
            }
        };
        let mut base = match base {
            Json::String(s) if self.defined.contains_key(&s) => {
                return self.optional(schema, Json::String(s), ignore_optional)
            }
            Json::String(s) => {
                let mut object = Map::new();
                object.insert("type".into(), Json::String(s));
                object
            }
            Json::Object(object) => object,
            _ => {
                return Err(ConnectError::fatal(
                    "an Avro schema that is neither a name nor an object",
                ))
            }
        };
        if let Some(doc) = &schema.doc {
            base.insert("connect.doc".into(), json!(doc));
        }
        if let Some(version) = schema.version {
            base.insert("connect.version".into(), json!(version));
        }
        if !schema.parameters.is_empty() {
            base.insert("connect.parameters".into(), json!(schema.parameters));
        }
        if let Some(default) = &schema.default {
            base.insert("connect.default".into(), default_json(schema, default)?);
        }
        if let Some(name) = &schema.name {
            base.insert("connect.name".into(), json!(name));
        }
        match schema.ty {
            SchemaType::Int8 => {
                base.insert("connect.type".into(), json!("int8"));
            }
            SchemaType::Int16 => {
                base.insert("connect.type".into(), json!("int16"));
            }
            _ => {}
        }
        match logical {
            Some(Logical::Decimal { scale }) => {
                let precision = schema
                    .parameters
                    .get("connect.decimal.precision")
                    .and_then(|p| p.trim().parse::<u32>().ok())
                    .unwrap_or(38);
                base.insert("scale".into(), json!(scale));
                base.insert("precision".into(), json!(precision));
                base.insert("logicalType".into(), json!("decimal"));
            }
            Some(Logical::Date) => {
                base.insert("logicalType".into(), json!("date"));
            }
            Some(Logical::Time) => {
                base.insert("logicalType".into(), json!("time-millis"));
            }
            Some(Logical::Timestamp) => {
                base.insert("logicalType".into(), json!("timestamp-millis"));
            }
            None => {}
        }
        // A plain primitive stays a plain name, as Avro's Java library prints it.
        let base = if base.len() == 1 {
            base.remove("type").unwrap_or(Json::Null)
        } else {
            Json::Object(base)
        };
        self.optional(schema, base, ignore_optional)
    }

    fn optional(&self, schema: &Schema, base: Json, ignore_optional: bool) -> Result<Json> {
        Ok(
            match (
                schema.optional && !ignore_optional,
                schema.default.is_some(),
            ) {
                (false, _) => base,
                (true, true) => json!([base, "null"]),
                (true, false) => json!(["null", base]),
            },
        )
    }

    fn record(
        &mut self,
        name: &str,
        doc: Option<&str>,
        fields: &[(&str, &Schema)],
    ) -> Result<Json> {
        let (namespace, simple) = match name.rsplit_once('.') {
            Some((namespace, simple)) => (Some(namespace), simple),
            None => (None, name),
        };
        let mut avro_fields = Vec::with_capacity(fields.len());
        for (field, schema) in fields {
            let mut f = Map::new();
            f.insert("name".into(), json!(field));
            f.insert("type".into(), self.schema(schema, false)?);
            if let Some(doc) = &schema.doc {
                f.insert("doc".into(), json!(doc));
            }
            match &schema.default {
                Some(default) => {
                    f.insert("default".into(), default_json(schema, default)?);
                }
                None if schema.optional => {
                    f.insert("default".into(), Json::Null);
                }
                None => {}
            }
            avro_fields.push(Json::Object(f));
        }
        let mut record = Map::new();
        record.insert("type".into(), json!("record"));
        record.insert("name".into(), json!(simple));
        if let Some(namespace) = namespace {
            record.insert("namespace".into(), json!(namespace));
        }
        if let Some(doc) = doc {
            record.insert("doc".into(), json!(doc));
        }
        record.insert("fields".into(), Json::Array(avro_fields));
        Ok(Json::Object(record))
    }
}

fn elements(schema: &Schema) -> Result<&Schema> {
    schema.value_schema.as_deref().ok_or_else(|| {
        ConnectError::data(format!(
            "a {} schema without a value schema",
            schema.ty.name()
        ))
    })
}

fn map_keys(schema: &Schema) -> Result<&Schema> {
    schema
        .key_schema
        .as_deref()
        .ok_or_else(|| ConnectError::data("a map schema without a key schema"))
}

fn string_keys(keys: &Schema) -> bool {
    keys.ty == SchemaType::String && !keys.optional
}

/// A default value as the Avro schema's JSON writes it.
fn default_json(schema: &Schema, value: &Value) -> Result<Json> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Int8(v) => json!(v),
        Value::Int16(v) => json!(v),
        Value::Int32(v) | Value::Date(v) | Value::Time(v) => json!(v),
        Value::Int64(v) | Value::Timestamp(v) => json!(v),
        Value::Float32(v) => json!(v),
        Value::Float64(v) => json!(v),
        Value::Boolean(v) => json!(v),
        Value::String(v) => json!(v),
        // Avro writes bytes defaults as ISO-8859-1 text: one char per byte.
        Value::Bytes(v) => json!(v.iter().map(|b| char::from(*b)).collect::<String>()),
        Value::Decimal(d) => json!(d
            .to_bytes()
            .iter()
            .map(|b| char::from(*b))
            .collect::<String>()),
        Value::Array(items) => {
            let elements = elements(schema)?;
            Json::Array(
                items
                    .iter()
                    .map(|v| default_json(elements, v))
                    .collect::<Result<_>>()?,
            )
        }
        Value::Map(entries) => {
            let (keys, values) = (map_keys(schema)?, elements(schema)?);
            if string_keys(keys) {
                let mut object = Map::new();
                for (k, v) in entries {
                    object.insert(k.to_string(), default_json(values, v)?);
                }
                Json::Object(object)
            } else {
                Json::Array(
                    entries
                        .iter()
                        .map(|(k, v)| Ok(json!([default_json(keys, k)?, default_json(values, v)?])))
                        .collect::<Result<_>>()?,
                )
            }
        }
        Value::Struct(s) => {
            let mut object = Map::new();
            for f in &s.schema.fields {
                object.insert(
                    f.name.clone(),
                    default_json(&f.schema, s.get(&f.name).unwrap_or(&Value::Null))?,
                );
            }
            Json::Object(object)
        }
    })
}

fn zigzag(n: i64, out: &mut Vec<u8>) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn bytes(b: &[u8], out: &mut Vec<u8>) {
    zigzag(b.len() as i64, out);
    out.extend_from_slice(b);
}

fn mismatch(schema: &Schema, value: &Value) -> ConnectError {
    ConnectError::data(format!(
        "a {} value does not fit its {} schema{}",
        value.kind(),
        schema.ty.name(),
        schema
            .name
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    ))
}

/// Encode a Connect value in Avro's binary encoding of `avro_schema(schema)`.
pub fn encode(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<()> {
    let value = match (value, &schema.default) {
        (Value::Null, Some(default)) => default,
        _ => value,
    };
    if schema.optional {
        // The union's branches: [null, T], or [T, null] when there is a default.
        let (null, some) = if schema.default.is_some() {
            (1, 0)
        } else {
            (0, 1)
        };
        if value.is_null() {
            zigzag(null, out);
            return Ok(());
        }
        zigzag(some, out);
    }
    match (schema.ty, value) {
        (_, Value::Null) => {
            return Err(ConnectError::data(format!(
                "a null value for a required {} schema{}",
                schema.ty.name(),
                schema
                    .name
                    .as_ref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            )))
        }
        (SchemaType::Bytes, Value::Decimal(d)) => match Logical::of(schema)? {
            Some(Logical::Decimal { scale }) => bytes(&d.rescale(scale)?.to_bytes(), out),
            _ => return Err(mismatch(schema, value)),
        },
        (SchemaType::Int32, Value::Date(v) | Value::Time(v)) => zigzag(i64::from(*v), out),
        (SchemaType::Int64, Value::Timestamp(v)) => zigzag(*v, out),
        (SchemaType::Int8, Value::Int8(v)) => zigzag(i64::from(*v), out),
        (SchemaType::Int16, Value::Int16(v)) => zigzag(i64::from(*v), out),
        (SchemaType::Int32, Value::Int32(v)) => zigzag(i64::from(*v), out),
        (SchemaType::Int64, Value::Int64(v)) => zigzag(*v, out),
        (SchemaType::Float32, Value::Float32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (SchemaType::Float64, Value::Float64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (SchemaType::Boolean, Value::Boolean(v)) => out.push(u8::from(*v)),
        (SchemaType::String, Value::String(v)) => bytes(v.as_bytes(), out),
        (SchemaType::Bytes, Value::Bytes(v)) => bytes(v, out),
        (SchemaType::Array, Value::Array(items)) => {
            let elements = elements(schema)?;
            if !items.is_empty() {
                zigzag(items.len() as i64, out);
                for item in items {
                    encode(elements, item, out)?;
                }
            }
            zigzag(0, out);
        }
        (SchemaType::Map, Value::Map(entries)) => {
            let (keys, values) = (map_keys(schema)?, elements(schema)?);
            if !entries.is_empty() {
                zigzag(entries.len() as i64, out);
                for (k, v) in entries {
                    if string_keys(keys) {
                        match k {
                            Value::String(k) => bytes(k.as_bytes(), out),
                            other => return Err(mismatch(keys, other)),
                        }
                    } else {
                        encode(keys, k, out)?;
                    }
                    encode(values, v, out)?;
                }
            }
            zigzag(0, out);
        }
        (SchemaType::Struct, Value::Struct(s)) => {
            if !std::ptr::eq(s.schema.as_ref(), schema) && s.schema.fields != schema.fields {
                return Err(ConnectError::data(
                    "a struct whose schema is not its field's schema",
                ));
            }
            for f in &schema.fields {
                encode(&f.schema, s.raw(f.index), out)
                    .map_err(|e| ConnectError::data(format!("field {}: {}", f.name, e.message)))?;
            }
        }
        _ => return Err(mismatch(schema, value)),
    }
    Ok(())
}

/// One Avro container file: the header when the first record comes (its schema is the
/// file's), then blocks of records, each followed by the file's sync marker.
pub struct AvroWriter {
    codec: AvroCodec,
    schema: Option<Arc<Schema>>,
    sync: [u8; 16],
    out: Vec<u8>,
    block: Vec<u8>,
    count: i64,
}

impl AvroWriter {
    /// A writer of Avro files compressed with `codec`.
    pub fn new(codec: AvroCodec) -> Self {
        AvroWriter {
            codec,
            schema: None,
            sync: *uuid::Uuid::new_v4().as_bytes(),
            out: Vec::new(),
            block: Vec::new(),
            count: 0,
        }
    }

    fn header(&mut self, schema: &Schema) -> Result<()> {
        let text = avro_schema(schema)?.to_string();
        // apache-avro reads it back: a schema Avro readers would refuse is never written.
        apache_avro::Schema::parse_str(&text).map_err(|e| {
            ConnectError::data(format!(
                "the Avro schema made from the record's schema is invalid: {e}"
            ))
        })?;
        self.out.extend_from_slice(b"Obj\x01");
        zigzag(2, &mut self.out);
        bytes(b"avro.schema", &mut self.out);
        bytes(text.as_bytes(), &mut self.out);
        bytes(b"avro.codec", &mut self.out);
        bytes(self.codec.name().as_bytes(), &mut self.out);
        zigzag(0, &mut self.out);
        self.out.extend_from_slice(&self.sync);
        Ok(())
    }

    fn end_block(&mut self) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let mut data = std::mem::take(&mut self.block);
        self.codec
            .codec()
            .compress(&mut data)
            .map_err(|e| ConnectError::fatal(format!("avro.codec {}: {e}", self.codec.name())))?;
        zigzag(self.count, &mut self.out);
        bytes(&data, &mut self.out);
        self.out.extend_from_slice(&self.sync);
        self.count = 0;
        Ok(())
    }
}

impl RecordWriter for AvroWriter {
    fn write(&mut self, record: &SinkRecord) -> Result<()> {
        let located = |e: ConnectError| {
            ConnectError::data(format!(
                "cannot write the record at {}-{} offset {} as Avro: {}",
                record.topic, record.partition, record.offset, e.message
            ))
        };
        let Some(schema) = &record.value_schema else {
            return Err(located(ConnectError::data(
                "it has no schema (Avro files need one: use a converter with schemas, such as JsonConverter with schemas.enable=true)",
            )));
        };
        if self.schema.is_none() {
            self.header(schema).map_err(located)?;
            self.schema = Some(schema.clone());
        }
        let start = self.block.len();
        if let Err(e) = encode(schema, &record.value, &mut self.block) {
            self.block.truncate(start);
            return Err(located(e));
        }
        self.count += 1;
        if self.block.len() >= BLOCK_BYTES {
            self.end_block()?;
        }
        Ok(())
    }

    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>> {
        self.end_block()?;
        Ok(self.take())
    }
}

#[cfg(test)]
mod tests;
