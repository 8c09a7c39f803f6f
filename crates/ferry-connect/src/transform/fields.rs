//! Transforms of a record's fields: ValueToKey, ExtractField, InsertField, ReplaceField,
//! MaskField and HoistField (the last five as `$Key` and `$Value`). A value with a schema must
//! be a struct; one without must be a map with string keys, as in Kafka Connect.

use std::sync::{Arc, Mutex};

use crate::config::{non_empty, ConfigDef, ConfigType};
use crate::data::{Field, Schema, SchemaType, Struct, Value};
use crate::error::{ConnectError, Result};
use crate::logical::{timestamp_schema, Decimal};

use super::{key, list, prop, Applied, ConnectRecord, Part, Props, TransformClass, Transformation};

pub fn classes() -> Vec<TransformClass> {
    macro_rules! both {
        ($name:literal, $config:expr, $build:expr) => {
            [
                TransformClass {
                    class: concat!("org.apache.kafka.connect.transforms.", $name, "$Key"),
                    config: $config,
                    build: |p| $build(p, Part::Key),
                },
                TransformClass {
                    class: concat!("org.apache.kafka.connect.transforms.", $name, "$Value"),
                    config: $config,
                    build: |p| $build(p, Part::Value),
                },
            ]
        };
    }
    let mut all = vec![TransformClass {
        class: "org.apache.kafka.connect.transforms.ValueToKey",
        config: || {
            vec![key(
                "fields",
                ConfigType::List,
                "Value fields to make the key of, in order.",
            )
            .required()
            .validator(non_empty)]
        },
        build: |p| {
            Ok(Box::new(ValueToKey {
                fields: list(p, "fields"),
                last: Mutex::new(None),
            }))
        },
    }];
    all.extend(both!("ExtractField", extract_config, ExtractField::build));
    all.extend(both!("InsertField", insert_config, InsertField::build));
    all.extend(both!("ReplaceField", replace_config, ReplaceField::build));
    all.extend(both!("MaskField", mask_config, MaskField::build));
    all.extend(both!("HoistField", hoist_config, HoistField::build));
    all.extend(both!(
        "SetSchemaMetadata",
        metadata_config,
        SetSchemaMetadata::build
    ));
    all.extend(both!("Flatten", flatten_config, Flatten::build));
    all
}

/// A struct schema of these fields (their schemas shared), optional or not.
pub fn struct_schema(fields: Vec<(String, Arc<Schema>)>, like: Option<&Schema>) -> Schema {
    let mut schema = Schema::of(SchemaType::Struct);
    if let Some(like) = like {
        schema.optional = like.optional;
        schema.name = like.name.clone();
        schema.version = like.version;
        schema.doc = like.doc.clone();
        schema.parameters = like.parameters.clone();
    }
    schema.fields = fields
        .into_iter()
        .enumerate()
        .map(|(index, (name, schema))| Field {
            name,
            index,
            schema,
        })
        .collect();
    schema
}

/// The struct a schema'd part must be (`requireStruct`), or the map a schemaless one must be.
pub fn require_struct<'a>(value: &'a Value, purpose: &str) -> Result<&'a Struct> {
    match value {
        Value::Struct(s) => Ok(s),
        other => Err(ConnectError::data(format!(
            "only Struct objects supported for [{purpose}], found: {}",
            other.kind()
        ))),
    }
}

pub fn require_map<'a>(value: &'a Value, purpose: &str) -> Result<&'a [(Value, Value)]> {
    match value {
        Value::Map(entries) => Ok(entries),
        other => Err(ConnectError::data(format!(
            "only Map objects supported in absence of schema for [{purpose}], found: {}",
            other.kind()
        ))),
    }
}

fn map_get<'a>(entries: &'a [(Value, Value)], name: &str) -> Option<&'a Value> {
    entries
        .iter()
        .find(|(k, _)| matches!(k, Value::String(s) if s == name))
        .map(|(_, v)| v)
}

fn map_put(entries: &mut Vec<(Value, Value)>, name: &str, value: Value) {
    match entries
        .iter_mut()
        .find(|(k, _)| matches!(k, Value::String(s) if s == name))
    {
        Some(entry) => entry.1 = value,
        None => entries.push((Value::String(name.to_string()), value)),
    }
}

/// `ValueToKey`: the key becomes a struct (or map) of some of the value's fields.
struct ValueToKey {
    fields: Vec<String>,
    /// The last value schema seen and the key schema made of it: records of a topic share
    /// their schema, so the key schema is made once, not per record (as Kafka Connect caches it).
    last: Mutex<Option<(Arc<Schema>, Arc<Schema>)>>,
}

impl ValueToKey {
    /// The key schema of the fields of `value_schema`.
    fn key_schema(&self, value_schema: &Arc<Schema>) -> Result<Arc<Schema>> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, key_schema)) = last.as_ref() {
            if Arc::ptr_eq(seen, value_schema) {
                return Ok(key_schema.clone());
            }
        }
        let mut fields = Vec::with_capacity(self.fields.len());
        for name in &self.fields {
            let field = value_schema
                .field(name)
                .ok_or_else(|| ConnectError::data(format!("field does not exist: {name}")))?;
            fields.push((name.clone(), field.schema.clone()));
        }
        let key_schema = Arc::new(struct_schema(fields, None));
        *last = Some((value_schema.clone(), key_schema.clone()));
        Ok(key_schema)
    }
}

impl Transformation for ValueToKey {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = record.value();
        let (key_schema, key) = match schema {
            Some(schema) => {
                let s = require_struct(value, "copying fields from value to key")?;
                let key_schema = self.key_schema(schema)?;
                let values = self
                    .fields
                    .iter()
                    .map(|name| s.get(name).cloned().unwrap_or(Value::Null))
                    .collect();
                let key = Struct::of(key_schema.clone(), values)?;
                (Some(key_schema), Value::Struct(key))
            }
            None => {
                let entries = require_map(value, "copying fields from value to key")?;
                let key = self
                    .fields
                    .iter()
                    .map(|name| {
                        (
                            Value::String(name.clone()),
                            map_get(entries, name).cloned().unwrap_or(Value::Null),
                        )
                    })
                    .collect();
                (None, Value::Map(key))
            }
        };
        record.set_key(key_schema, key);
        Ok(Applied::Keep)
    }
}

fn extract_config() -> ConfigDef {
    vec![key("field", ConfigType::String, "The field to extract.")
        .required()
        .validator(non_empty)]
}

/// The part and the one field of ExtractField and HoistField.
struct OneField {
    part: Part,
    field: String,
}

impl OneField {
    fn of(props: &Props, part: Part) -> Self {
        OneField {
            part,
            field: prop(props, "field", "").trim().to_string(),
        }
    }
}

/// `ExtractField`: the key (or value) becomes one of its fields.
struct ExtractField(OneField);

impl ExtractField {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        Ok(Box::new(ExtractField(OneField::of(props, part))))
    }
}

impl Transformation for ExtractField {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.0.part.peek(record);
        let (schema, extracted) = match schema {
            Some(schema) => {
                let field = schema.field(&self.0.field).ok_or_else(|| {
                    ConnectError::data(format!("unknown field: {}", self.0.field))
                })?;
                let extracted = if value.is_null() {
                    Value::Null
                } else {
                    require_struct(value, "field extraction")?
                        .get(&self.0.field)
                        .cloned()
                        .unwrap_or(Value::Null)
                };
                (Some(field.schema.clone()), extracted)
            }
            None => {
                let extracted = if value.is_null() {
                    Value::Null
                } else {
                    map_get(require_map(value, "field extraction")?, &self.0.field)
                        .cloned()
                        .unwrap_or(Value::Null)
                };
                (None, extracted)
            }
        };
        self.0.part.set(record, schema, extracted);
        Ok(Applied::Keep)
    }
}

fn insert_config() -> ConfigDef {
    let field = |name, doc| key(name, ConfigType::String, doc);
    vec![
        field(
            "topic.field",
            "Field for the topic; suffix ! for required, ? (default) for optional.",
        ),
        field("partition.field", "Field for the Kafka partition."),
        field(
            "offset.field",
            "Field for the Kafka offset (sink connectors only).",
        ),
        field("timestamp.field", "Field for the record timestamp."),
        field("static.field", "Field for a fixed value."),
        field("static.value", "The fixed value of static.field."),
    ]
}

/// A field to insert: its name, and whether it is required (`name!`).
#[derive(Clone, Debug)]
struct InsertSpec {
    name: String,
    required: bool,
}

impl InsertSpec {
    fn parse(props: &Props, key: &str) -> Option<InsertSpec> {
        let raw = props.get(key)?.trim();
        if raw.is_empty() {
            return None;
        }
        Some(match (raw.strip_suffix('!'), raw.strip_suffix('?')) {
            (Some(name), _) => InsertSpec {
                name: name.to_string(),
                required: true,
            },
            (_, Some(name)) => InsertSpec {
                name: name.to_string(),
                required: false,
            },
            _ => InsertSpec {
                name: raw.to_string(),
                required: false,
            },
        })
    }
}

/// `InsertField`: adds the topic, partition, offset, timestamp and a fixed value as fields.
struct InsertField {
    part: Part,
    topic: Option<InsertSpec>,
    partition: Option<InsertSpec>,
    offset: Option<InsertSpec>,
    timestamp: Option<InsertSpec>,
    fixed: Option<(InsertSpec, String)>,
}

impl InsertField {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        let fixed = match (
            InsertSpec::parse(props, "static.field"),
            props.get("static.value"),
        ) {
            (Some(spec), Some(value)) => Some((spec, value.clone())),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ConnectError::config(
                    "static.value",
                    "required when static.field is set",
                ))
            }
            (None, Some(_)) => {
                return Err(ConnectError::config(
                    "static.field",
                    "required when static.value is set",
                ))
            }
        };
        Ok(Box::new(InsertField {
            part,
            topic: InsertSpec::parse(props, "topic.field"),
            partition: InsertSpec::parse(props, "partition.field"),
            offset: InsertSpec::parse(props, "offset.field"),
            timestamp: InsertSpec::parse(props, "timestamp.field"),
            fixed,
        }))
    }

    /// The fields to insert, with their schemas and values, in Kafka Connect's order.
    fn inserts(&self, record: &dyn ConnectRecord) -> Result<Vec<(InsertSpec, Schema, Value)>> {
        let mut out = Vec::new();
        let optional = |spec: &InsertSpec, s: Schema| if spec.required { s } else { s.optional() };
        if let Some(spec) = &self.topic {
            let value = Value::String(record.topic().to_string());
            out.push((
                spec.clone(),
                optional(spec, Schema::of(SchemaType::String)),
                value,
            ));
        }
        if let Some(spec) = &self.partition {
            let value = record.kafka_partition().map_or(Value::Null, Value::Int32);
            out.push((
                spec.clone(),
                optional(spec, Schema::of(SchemaType::Int32)),
                value,
            ));
        }
        if let Some(spec) = &self.offset {
            let offset = record.kafka_offset().ok_or_else(|| {
                ConnectError::data("offset field insertion is only supported for sink connectors")
            })?;
            out.push((
                spec.clone(),
                optional(spec, Schema::of(SchemaType::Int64)),
                Value::Int64(offset),
            ));
        }
        if let Some(spec) = &self.timestamp {
            let value = record.timestamp().map_or(Value::Null, Value::Timestamp);
            out.push((spec.clone(), optional(spec, timestamp_schema()), value));
        }
        if let Some((spec, value)) = &self.fixed {
            out.push((
                spec.clone(),
                optional(spec, Schema::of(SchemaType::String)),
                Value::String(value.clone()),
            ));
        }
        Ok(out)
    }
}

impl Transformation for InsertField {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.part.get(record);
        if value.is_null() {
            // Tombstones pass through untouched.
            return Ok(Applied::Keep);
        }
        let inserts = self.inserts(record)?;
        match schema {
            Some(schema) => {
                let s = require_struct(&value, "field insertion")?;
                let mut fields: Vec<(String, Arc<Schema>)> = schema
                    .fields
                    .iter()
                    .map(|f| (f.name.clone(), f.schema.clone()))
                    .collect();
                for (spec, field_schema, _) in &inserts {
                    fields.retain(|(n, _)| n != &spec.name);
                    fields.push((spec.name.clone(), Arc::new(field_schema.clone())));
                }
                let new_schema = Arc::new(struct_schema(fields, Some(&schema)));
                let mut out = Struct::new(new_schema.clone())?;
                for f in &schema.fields {
                    if new_schema
                        .field(&f.name)
                        .is_some_and(|nf| Arc::ptr_eq(&nf.schema, &f.schema))
                    {
                        out.put(&f.name, s.raw(f.index).clone())?;
                    }
                }
                for (spec, _, v) in inserts {
                    out.put(&spec.name, v).map_err(|e| {
                        ConnectError::data(format!("inserting {}: {}", spec.name, e.message))
                    })?;
                }
                self.part.set(record, Some(new_schema), Value::Struct(out));
            }
            None => {
                let mut entries = require_map(&value, "field insertion")?.to_vec();
                for (spec, _, v) in inserts {
                    map_put(&mut entries, &spec.name, v);
                }
                self.part.set(record, None, Value::Map(entries));
            }
        }
        Ok(Applied::Keep)
    }
}

fn replace_config() -> ConfigDef {
    vec![
        key("exclude", ConfigType::List, "Fields to drop."),
        key(
            "include",
            ConfigType::List,
            "Fields to keep (all, if empty).",
        ),
        key("renames", ConfigType::List, "Renames, as old:new pairs."),
        key("blacklist", ConfigType::List, "Deprecated name of exclude."),
        key("whitelist", ConfigType::List, "Deprecated name of include."),
    ]
}

/// `ReplaceField`: keeps, drops and renames fields.
struct ReplaceField {
    part: Part,
    exclude: Vec<String>,
    include: Vec<String>,
    renames: Vec<(String, String)>,
}

impl ReplaceField {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        let mut exclude = list(props, "exclude");
        exclude.extend(list(props, "blacklist"));
        let mut include = list(props, "include");
        include.extend(list(props, "whitelist"));
        let renames = list(props, "renames")
            .into_iter()
            .map(|pair| match pair.split_once(':') {
                Some((from, to)) if !from.trim().is_empty() && !to.trim().is_empty() => {
                    Ok((from.trim().to_string(), to.trim().to_string()))
                }
                _ => Err(ConnectError::config(
                    "renames",
                    format!("invalid rename mapping {pair:?}: use old:new"),
                )),
            })
            .collect::<Result<_>>()?;
        Ok(Box::new(ReplaceField {
            part,
            exclude,
            include,
            renames,
        }))
    }

    fn kept(&self, name: &str) -> bool {
        !self.exclude.iter().any(|e| e == name)
            && (self.include.is_empty() || self.include.iter().any(|i| i == name))
    }

    fn renamed<'a>(&'a self, name: &'a str) -> &'a str {
        self.renames
            .iter()
            .find(|(from, _)| from == name)
            .map_or(name, |(_, to)| to.as_str())
    }
}

impl Transformation for ReplaceField {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.part.get(record);
        if value.is_null() {
            return Ok(Applied::Keep);
        }
        match schema {
            Some(schema) => {
                let s = require_struct(&value, "field replacement")?;
                let kept: Vec<&Field> = schema
                    .fields
                    .iter()
                    .filter(|f| self.kept(&f.name))
                    .collect();
                let new_schema = Arc::new(struct_schema(
                    kept.iter()
                        .map(|f| (self.renamed(&f.name).to_string(), f.schema.clone()))
                        .collect(),
                    Some(&schema),
                ));
                let mut out = Struct::new(new_schema.clone())?;
                for f in kept {
                    out.put(self.renamed(&f.name), s.raw(f.index).clone())?;
                }
                self.part.set(record, Some(new_schema), Value::Struct(out));
            }
            None => {
                let entries = require_map(&value, "field replacement")?
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Value::String(name) if self.kept(name) => {
                            Some((Value::String(self.renamed(name).to_string()), v.clone()))
                        }
                        Value::String(_) => None,
                        _ => Some((k.clone(), v.clone())),
                    })
                    .collect();
                self.part.set(record, None, Value::Map(entries));
            }
        }
        Ok(Applied::Keep)
    }
}

fn mask_config() -> ConfigDef {
    vec![
        key("fields", ConfigType::List, "Fields to mask.")
            .required()
            .validator(non_empty),
        key(
            "replacement",
            ConfigType::String,
            "The value masked strings and numbers get (unset: the type's empty value).",
        ),
    ]
}

/// `MaskField`: replaces fields with their type's empty value (or `replacement`).
struct MaskField {
    part: Part,
    fields: Vec<String>,
    replacement: Option<String>,
}

impl MaskField {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        Ok(Box::new(MaskField {
            part,
            fields: list(props, "fields"),
            replacement: props.get("replacement").cloned(),
        }))
    }

    fn masked(&self, name: &str, value: &Value) -> Result<Value> {
        let bad = |why: &str| ConnectError::data(format!("cannot mask field {name}: {why}"));
        let number = |r: &str| -> Result<f64> {
            r.trim()
                .parse::<f64>()
                .map_err(|_| bad(&format!("replacement {r:?} is not a number")))
        };
        let integer = |r: &str| -> Result<i64> {
            r.trim()
                .parse::<i64>()
                .map_err(|_| bad(&format!("replacement {r:?} is not an integer")))
        };
        let range = |v: i64, min: i64, max: i64| -> Result<i64> {
            if (min..=max).contains(&v) {
                Ok(v)
            } else {
                Err(bad(&format!("replacement {v} does not fit the field")))
            }
        };
        Ok(match (value, self.replacement.as_deref()) {
            (Value::Null, _) => Value::Null,
            (Value::String(_), r) => Value::String(r.unwrap_or_default().to_string()),
            (Value::Int8(_), r) => Value::Int8(r.map_or(Ok(0), |r| {
                integer(r).and_then(|v| range(v, i8::MIN.into(), i8::MAX.into()))
            })? as i8),
            (Value::Int16(_), r) => Value::Int16(r.map_or(Ok(0), |r| {
                integer(r).and_then(|v| range(v, i16::MIN.into(), i16::MAX.into()))
            })? as i16),
            (Value::Int32(_), r) => Value::Int32(r.map_or(Ok(0), |r| {
                integer(r).and_then(|v| range(v, i32::MIN.into(), i32::MAX.into()))
            })? as i32),
            (Value::Int64(_), r) => Value::Int64(r.map_or(Ok(0), integer)?),
            (Value::Float32(_), r) => Value::Float32(r.map_or(Ok(0.0), number)? as f32),
            (Value::Float64(_), r) => Value::Float64(r.map_or(Ok(0.0), number)?),
            (Value::Decimal(d), r) => Value::Decimal(match r {
                None => Decimal::new(0, d.scale),
                Some(r) => Decimal::parse(r)
                    .and_then(|v| v.rescale(d.scale))
                    .map_err(|e| bad(&e.message))?,
            }),
            (Value::Boolean(_), None) => Value::Boolean(false),
            (Value::Date(_), None) => Value::Date(0),
            (Value::Time(_), None) => Value::Time(0),
            (Value::Timestamp(_), None) => Value::Timestamp(0),
            (Value::Array(_), None) => Value::Array(Vec::new()),
            (Value::Map(_), None) => Value::Map(Vec::new()),
            (Value::Bytes(_), None) => Value::Bytes(Vec::new()),
            (other, Some(_)) => {
                return Err(bad(&format!(
                    "a replacement is only for strings and numbers, not a {}",
                    other.kind()
                )))
            }
            (Value::Struct(_), None) => return Err(bad("structs cannot be masked")),
        })
    }
}

impl Transformation for MaskField {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.part.get(record);
        if value.is_null() {
            return Ok(Applied::Keep);
        }
        match schema {
            Some(schema) => {
                let mut s = require_struct(&value, "masking fields")?.clone();
                for name in &self.fields {
                    let field = schema
                        .field(name)
                        .ok_or_else(|| ConnectError::data(format!("unknown field: {name}")))?;
                    let masked = self.masked(name, s.raw(field.index))?;
                    s.put(name, masked)?;
                }
                self.part.set(record, Some(schema), Value::Struct(s));
            }
            None => {
                let mut entries = require_map(&value, "masking fields")?.to_vec();
                for name in &self.fields {
                    if let Some(v) = map_get(&entries, name) {
                        let masked = self.masked(name, v)?;
                        map_put(&mut entries, name, masked);
                    }
                }
                self.part.set(record, None, Value::Map(entries));
            }
        }
        Ok(Applied::Keep)
    }
}

fn hoist_config() -> ConfigDef {
    vec![key(
        "field",
        ConfigType::String,
        "The field the whole key or value goes into.",
    )
    .required()
    .validator(non_empty)]
}

/// `HoistField`: wraps the key (or value) in a struct (or map) of one field.
struct HoistField(OneField);

impl HoistField {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        Ok(Box::new(HoistField(OneField::of(props, part))))
    }
}

impl Transformation for HoistField {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.0.part.get(record);
        match schema {
            Some(schema) => {
                let wrapper = Arc::new(struct_schema(vec![(self.0.field.clone(), schema)], None));
                let mut s = Struct::new(wrapper.clone())?;
                s.put(&self.0.field, value)?;
                self.0.part.set(record, Some(wrapper), Value::Struct(s));
            }
            None => {
                let map = Value::Map(vec![(Value::String(self.0.field.clone()), value)]);
                self.0.part.set(record, None, map);
            }
        }
        Ok(Applied::Keep)
    }
}

fn metadata_config() -> ConfigDef {
    vec![
        key("schema.name", ConfigType::String, "The schema's new name."),
        key(
            "schema.version",
            ConfigType::Int,
            "The schema's new version.",
        ),
    ]
}

/// `SetSchemaMetadata`: renames and re-versions the key's (or value's) schema.
struct SetSchemaMetadata {
    part: Part,
    name: Option<String>,
    version: Option<i32>,
}

impl SetSchemaMetadata {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        let version = props
            .get("schema.version")
            .map(|v| {
                v.trim().parse().map_err(|_| {
                    ConnectError::config("schema.version", format!("{v:?} is not an integer"))
                })
            })
            .transpose()?;
        let name = props.get("schema.name").map(|n| n.trim().to_string());
        if name.is_none() && version.is_none() {
            return Err(ConnectError::config(
                "schema.name",
                "set schema.name, schema.version or both",
            ));
        }
        Ok(Box::new(SetSchemaMetadata {
            part,
            name,
            version,
        }))
    }
}

impl Transformation for SetSchemaMetadata {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.part.get(record);
        let schema = schema.ok_or_else(|| {
            ConnectError::data(format!(
                "schemaless {} not supported for [updating schema metadata]",
                self.part.name()
            ))
        })?;
        let mut updated = (*schema).clone();
        if let Some(name) = &self.name {
            updated.name = Some(name.clone());
        }
        if let Some(version) = self.version {
            updated.version = Some(version);
        }
        let updated = Arc::new(updated);
        // A struct carries its schema: it is rebuilt under the new one.
        let value = match value {
            Value::Struct(s) => {
                let mut out = Struct::new(updated.clone())?;
                for f in &updated.fields {
                    out.put(&f.name, s.raw(f.index).clone())?;
                }
                Value::Struct(out)
            }
            other => other,
        };
        self.part.set(record, Some(updated), value);
        Ok(Applied::Keep)
    }
}

fn flatten_config() -> ConfigDef {
    vec![key(
        "delimiter",
        ConfigType::String,
        "Between the names of a nested field and its parents.",
    )
    .default(".")]
}

/// `Flatten`: nested structs (or maps) become top-level fields named `parent.child`.
struct Flatten {
    part: Part,
    delimiter: String,
}

impl Flatten {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        Ok(Box::new(Flatten {
            part,
            delimiter: prop(props, "delimiter", ".").to_string(),
        }))
    }

    fn name(&self, prefix: &str, name: &str) -> String {
        if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}{}{name}", self.delimiter)
        }
    }

    /// The flattened fields of a struct schema; a field under an optional parent is optional.
    fn schema_fields(
        &self,
        schema: &Schema,
        prefix: &str,
        optional: bool,
        out: &mut Vec<(String, Arc<Schema>)>,
    ) {
        for f in &schema.fields {
            let name = self.name(prefix, &f.name);
            if f.schema.ty == SchemaType::Struct {
                self.schema_fields(&f.schema, &name, optional || f.schema.optional, out);
            } else if optional && !f.schema.optional {
                out.push((name, Arc::new((*f.schema).clone().optional())));
            } else {
                out.push((name, f.schema.clone()));
            }
        }
    }

    fn struct_values(
        &self,
        schema: &Schema,
        value: Option<&Struct>,
        prefix: &str,
        out: &mut Vec<(String, Value)>,
    ) {
        for f in &schema.fields {
            let name = self.name(prefix, &f.name);
            let v = value.map_or(Value::Null, |s| s.raw(f.index).clone());
            match (&v, f.schema.ty) {
                (Value::Struct(inner), SchemaType::Struct) => {
                    self.struct_values(&f.schema, Some(inner), &name, out)
                }
                (_, SchemaType::Struct) => self.struct_values(&f.schema, None, &name, out),
                _ => out.push((name, v)),
            }
        }
    }

    fn map_values(&self, entries: &[(Value, Value)], prefix: &str, out: &mut Vec<(Value, Value)>) {
        for (k, v) in entries {
            let key = match k {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let name = self.name(prefix, &key);
            match v {
                Value::Map(inner) => self.map_values(inner, &name, out),
                other => out.push((Value::String(name), other.clone())),
            }
        }
    }
}

impl Transformation for Flatten {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.part.get(record);
        if value.is_null() && schema.is_none() {
            return Ok(Applied::Keep);
        }
        match schema {
            Some(schema) => {
                if schema.ty != SchemaType::Struct {
                    return Ok(Applied::Keep);
                }
                let mut fields = Vec::new();
                self.schema_fields(&schema, "", false, &mut fields);
                let new_schema = Arc::new(struct_schema(fields, Some(&schema)));
                if value.is_null() {
                    self.part.set(record, Some(new_schema), Value::Null);
                    return Ok(Applied::Keep);
                }
                let s = require_struct(&value, "flattening")?;
                let mut values = Vec::new();
                self.struct_values(&schema, Some(s), "", &mut values);
                let mut out = Struct::new(new_schema.clone())?;
                for (name, v) in values {
                    out.put(&name, v)?;
                }
                self.part.set(record, Some(new_schema), Value::Struct(out));
            }
            None => {
                let mut out = Vec::new();
                self.map_values(require_map(&value, "flattening")?, "", &mut out);
                self.part.set(record, None, Value::Map(out));
            }
        }
        Ok(Applied::Keep)
    }
}
