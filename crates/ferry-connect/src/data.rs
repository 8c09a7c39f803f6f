//! Kafka Connect's data API: schemas, values and structs, with the logical type names Kafka
//! Connect uses, so that converters and connectors agree with existing deployments.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::error::{ConnectError, Result};
use crate::logical::{java_date_string, Decimal, Logical};

/// Logical type names (schema names) of Kafka Connect.
pub mod logical {
    /// The name of Kafka Connect's Decimal logical type.
    pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
    /// The Decimal schema's parameter holding its scale.
    pub const DECIMAL_SCALE: &str = "scale";
    /// The name of Kafka Connect's Date logical type (days since the epoch, INT32).
    pub const DATE: &str = "org.apache.kafka.connect.data.Date";
    /// The name of Kafka Connect's Time logical type (milliseconds of the day, INT32).
    pub const TIME: &str = "org.apache.kafka.connect.data.Time";
    /// The name of Kafka Connect's Timestamp logical type (milliseconds since the epoch, INT64).
    pub const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
}

/// The type of a schema (Kafka Connect's `Schema.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaType {
    /// 8-bit integer.
    Int8,
    /// 16-bit integer.
    Int16,
    /// 32-bit integer.
    Int32,
    /// 64-bit integer.
    Int64,
    /// 32-bit float.
    Float32,
    /// 64-bit float.
    Float64,
    /// Boolean.
    Boolean,
    /// Text.
    String,
    /// Bytes.
    Bytes,
    /// A list of values of one schema.
    Array,
    /// Keys and values of one schema each.
    Map,
    /// Named fields.
    Struct,
}

impl SchemaType {
    /// Whether `value` is of this type (its shape only: elements, entries and fields aside).
    pub fn holds(self, value: &Value) -> bool {
        matches!(
            (self, value),
            (SchemaType::Int8, Value::Int8(_))
                | (SchemaType::Int16, Value::Int16(_))
                | (SchemaType::Int32, Value::Int32(_))
                | (SchemaType::Int64, Value::Int64(_))
                | (SchemaType::Float32, Value::Float32(_))
                | (SchemaType::Float64, Value::Float64(_))
                | (SchemaType::Boolean, Value::Boolean(_))
                | (SchemaType::String, Value::String(_))
                | (SchemaType::Bytes, Value::Bytes(_))
                | (SchemaType::Array, Value::Array(_))
                | (SchemaType::Map, Value::Map(_))
                | (SchemaType::Struct, Value::Struct(_))
        )
    }

    /// Kafka Connect's name of the type (`Schema.Type.getName()`).
    pub fn name(self) -> &'static str {
        match self {
            SchemaType::Int8 => "int8",
            SchemaType::Int16 => "int16",
            SchemaType::Int32 => "int32",
            SchemaType::Int64 => "int64",
            SchemaType::Float32 => "float32",
            SchemaType::Float64 => "float64",
            SchemaType::Boolean => "boolean",
            SchemaType::String => "string",
            SchemaType::Bytes => "bytes",
            SchemaType::Array => "array",
            SchemaType::Map => "map",
            SchemaType::Struct => "struct",
        }
    }
}

/// A schema. Shared (`Arc`) between records, as Kafka Connect shares schema instances.
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// Its type.
    pub ty: SchemaType,
    /// Whether the value may be null.
    pub optional: bool,
    /// The value taken for a null, if any.
    pub default: Option<Value>,
    /// Its name (a logical type's, a record's).
    pub name: Option<String>,
    /// Its version.
    pub version: Option<i32>,
    /// Its documentation.
    pub doc: Option<String>,
    /// Parameters (a Decimal's scale, …).
    pub parameters: BTreeMap<String, String>,
    /// Struct fields, in order.
    pub fields: Vec<Field>,
    /// Map keys.
    pub key_schema: Option<Arc<Schema>>,
    /// Map values and array elements.
    pub value_schema: Option<Arc<Schema>>,
}

/// A field of a struct schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// Its position in the struct.
    pub index: usize,
    /// Its schema.
    pub schema: Arc<Schema>,
}

impl Schema {
    /// A required schema of a primitive type.
    pub fn of(ty: SchemaType) -> Self {
        Schema {
            ty,
            optional: false,
            default: None,
            name: None,
            version: None,
            doc: None,
            parameters: BTreeMap::new(),
            fields: Vec::new(),
            key_schema: None,
            value_schema: None,
        }
    }

    /// The same schema, optional.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// The same schema, named.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The same schema, versioned.
    pub fn versioned(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// The same schema, documented.
    pub fn documented(mut self, doc: impl Into<String>) -> Self {
        self.doc = Some(doc.into());
        self
    }

    /// This schema with a default value, which must fit it.
    pub fn with_default(mut self, value: Value) -> Result<Self> {
        self.validate(&value)
            .map_err(|e| ConnectError::data(format!("invalid default value: {e}")))?;
        self.default = Some(value);
        Ok(self)
    }

    /// The same schema with a parameter.
    pub fn parameter(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.parameters.insert(key.into(), value.into());
        self
    }

    /// An array schema of `elements`.
    pub fn array(elements: Schema) -> Self {
        Schema {
            value_schema: Some(Arc::new(elements)),
            ..Schema::of(SchemaType::Array)
        }
    }

    /// A map schema of `keys` to `values`.
    pub fn map(keys: Schema, values: Schema) -> Self {
        Schema {
            key_schema: Some(Arc::new(keys)),
            value_schema: Some(Arc::new(values)),
            ..Schema::of(SchemaType::Map)
        }
    }

    /// A struct schema with these fields, in order.
    pub fn structure(fields: Vec<(&str, Schema)>) -> Self {
        Schema {
            fields: fields
                .into_iter()
                .enumerate()
                .map(|(index, (name, schema))| Field {
                    name: name.to_string(),
                    index,
                    schema: Arc::new(schema),
                })
                .collect(),
            ..Schema::of(SchemaType::Struct)
        }
    }

    /// A struct schema's field by name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The shared optional string schema (`Schema.OPTIONAL_STRING_SCHEMA`): one for the
    /// process, so that each record decoded with it costs a reference count, not an allocation.
    pub fn optional_string() -> Arc<Schema> {
        static SHARED: std::sync::LazyLock<Arc<Schema>> =
            std::sync::LazyLock::new(|| Arc::new(Schema::of(SchemaType::String).optional()));
        SHARED.clone()
    }

    /// The shared optional bytes schema (`Schema.OPTIONAL_BYTES_SCHEMA`), as the string one.
    pub fn optional_bytes() -> Arc<Schema> {
        static SHARED: std::sync::LazyLock<Arc<Schema>> =
            std::sync::LazyLock::new(|| Arc::new(Schema::of(SchemaType::Bytes).optional()));
        SHARED.clone()
    }

    /// Check that `value` fits this schema (Kafka Connect's `ConnectSchema.validateValue`).
    pub fn validate(&self, value: &Value) -> Result<()> {
        let mismatch = || {
            ConnectError::data(format!(
                "invalid value: a {} does not fit schema type {}{}",
                value.kind(),
                self.ty.name(),
                self.name
                    .as_ref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ))
        };
        if let Some(logical) = Logical::of(self)? {
            return match value {
                Value::Null if self.optional || self.default.is_some() => Ok(()),
                v if logical.accepts(v) => Ok(()),
                Value::Decimal(d) => Err(ConnectError::data(format!(
                    "invalid value: a decimal of scale {} for a {} schema ({})",
                    d.scale,
                    logical.name(),
                    match logical {
                        Logical::Decimal { scale } => format!("scale {scale}"),
                        _ => "not a decimal".to_string(),
                    }
                ))),
                _ => Err(mismatch()),
            };
        }
        match (self.ty, value) {
            (_, Value::Null) if self.optional || self.default.is_some() => Ok(()),
            (_, Value::Null) => Err(ConnectError::data(format!(
                "invalid value: null for a required {} schema",
                self.ty.name()
            ))),
            (
                SchemaType::Int8
                | SchemaType::Int16
                | SchemaType::Int32
                | SchemaType::Int64
                | SchemaType::Float32
                | SchemaType::Float64
                | SchemaType::Boolean
                | SchemaType::String
                | SchemaType::Bytes,
                v,
            ) if self.ty.holds(v) => Ok(()),
            (SchemaType::Array, Value::Array(items)) => match &self.value_schema {
                Some(element) => items.iter().try_for_each(|v| element.validate(v)),
                None => Err(mismatch()),
            },
            (SchemaType::Map, Value::Map(entries)) => {
                match (&self.key_schema, &self.value_schema) {
                    (Some(k), Some(v)) => entries.iter().try_for_each(|(key, value)| {
                        k.validate(key).and_then(|_| v.validate(value))
                    }),
                    _ => Err(mismatch()),
                }
            }
            (SchemaType::Struct, Value::Struct(s)) if s.schema.as_ref() == self => Ok(()),
            (SchemaType::Struct, Value::Struct(_)) => Err(ConnectError::data(
                "invalid value: a struct with a different schema",
            )),
            _ => Err(mismatch()),
        }
    }
}

/// A Connect value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Null.
    Null,
    /// An INT8.
    Int8(i8),
    /// An INT16.
    Int16(i16),
    /// An INT32.
    Int32(i32),
    /// An INT64.
    Int64(i64),
    /// A FLOAT32.
    Float32(f32),
    /// A FLOAT64.
    Float64(f64),
    /// A BOOLEAN.
    Boolean(bool),
    /// A STRING.
    String(String),
    /// BYTES.
    Bytes(Vec<u8>),
    /// An ARRAY.
    Array(Vec<Value>),
    /// Entries in order (keys may be any value, as in Kafka Connect).
    Map(Vec<(Value, Value)>),
    /// A STRUCT.
    Struct(Struct),
    /// A value of a `Decimal` schema.
    Decimal(Decimal),
    /// A value of a `Date` schema: days since 1970-01-01.
    Date(i32),
    /// A value of a `Time` schema: milliseconds since midnight.
    Time(i32),
    /// A value of a `Timestamp` schema: milliseconds since the epoch.
    Timestamp(i64),
}

impl Value {
    /// What kind of value this is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Int8(_) => "int8",
            Value::Int16(_) => "int16",
            Value::Int32(_) => "int32",
            Value::Int64(_) => "int64",
            Value::Float32(_) => "float32",
            Value::Float64(_) => "float64",
            Value::Boolean(_) => "boolean",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
            Value::Struct(_) => "struct",
            Value::Decimal(_) => "decimal",
            Value::Date(_) => "date",
            Value::Time(_) => "time",
            Value::Timestamp(_) => "timestamp",
        }
    }

    /// Whether it is null.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

/// Rendered as Kafka Connect's `toString()` renders it (what FileStreamSink writes).
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Int8(v) => fmt::Display::fmt(v, f),
            Value::Int16(v) => fmt::Display::fmt(v, f),
            Value::Int32(v) => fmt::Display::fmt(v, f),
            Value::Int64(v) => fmt::Display::fmt(v, f),
            Value::Float32(v) => fmt::Display::fmt(v, f),
            Value::Float64(v) => fmt::Display::fmt(v, f),
            Value::Boolean(v) => fmt::Display::fmt(v, f),
            Value::String(v) => f.write_str(v),
            Value::Bytes(v) => f.write_str(&String::from_utf8_lossy(v)),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    fmt::Display::fmt(item, f)?;
                }
                f.write_str("]")
            }
            Value::Map(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    fmt::Display::fmt(k, f)?;
                    f.write_str("=")?;
                    fmt::Display::fmt(v, f)?;
                }
                f.write_str("}")
            }
            Value::Struct(s) => fmt::Display::fmt(s, f),
            Value::Decimal(d) => fmt::Display::fmt(d, f),
            Value::Date(days) => f.write_str(&java_date_string(
                i64::from(*days) * crate::logical::MILLIS_PER_DAY,
            )),
            Value::Time(ms) => f.write_str(&java_date_string(i64::from(*ms))),
            Value::Timestamp(ms) => f.write_str(&java_date_string(*ms)),
        }
    }
}

/// A struct value: a schema and one value per field.
#[derive(Clone, Debug, PartialEq)]
pub struct Struct {
    /// Its schema.
    pub schema: Arc<Schema>,
    values: Vec<Value>,
}

impl Struct {
    /// An empty struct (every field null) of a struct schema.
    pub fn new(schema: Arc<Schema>) -> Result<Self> {
        if schema.ty != SchemaType::Struct {
            return Err(ConnectError::data(format!(
                "a struct needs a struct schema, not {}",
                schema.ty.name()
            )));
        }
        let values = vec![Value::Null; schema.fields.len()];
        Ok(Struct { schema, values })
    }

    /// A struct of a struct schema and one value per field, in order, checked against the
    /// fields' schemas.
    pub fn of(schema: Arc<Schema>, values: Vec<Value>) -> Result<Self> {
        if values.len() != schema.fields.len() {
            return Err(ConnectError::data(format!(
                "a struct of {} fields given {} values",
                schema.fields.len(),
                values.len()
            )));
        }
        let s = Struct::new(schema)?;
        let s = Struct { values, ..s };
        s.validate()?;
        Ok(s)
    }

    /// Set a field, checking the value against the field's schema.
    pub fn put(&mut self, field: &str, value: Value) -> Result<&mut Self> {
        let f = self
            .schema
            .field(field)
            .ok_or_else(|| ConnectError::data(format!("{field} is not a valid field name")))?;
        f.schema
            .validate(&value)
            .map_err(|e| ConnectError::data(format!("field {field}: {e}")))?;
        let index = f.index;
        self.values[index] = value;
        Ok(self)
    }

    /// The value of the field at `index` as set, without its default (`getWithoutDefault`).
    pub fn raw(&self, index: usize) -> &Value {
        self.values.get(index).unwrap_or(&Value::Null)
    }

    /// A field's value by name.
    pub fn get(&self, field: &str) -> Option<&Value> {
        let f = self.schema.field(field)?;
        match &self.values[f.index] {
            Value::Null => f.schema.default.as_ref().or(Some(&Value::Null)),
            v => Some(v),
        }
    }

    /// Check that every required field has a value.
    pub fn validate(&self) -> Result<()> {
        for f in &self.schema.fields {
            f.schema
                .validate(&self.values[f.index])
                .map_err(|e| ConnectError::data(format!("field {}: {e}", f.name)))?;
        }
        Ok(())
    }
}

impl fmt::Display for Struct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Struct{")?;
        let mut first = true;
        for field in &self.schema.fields {
            let value = &self.values[field.index];
            if value.is_null() {
                continue;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            // Piece by piece: a record's line is printed per record, and `write!` with a
            // template costs more than the pieces.
            f.write_str(&field.name)?;
            f.write_str("=")?;
            fmt::Display::fmt(value, f)?;
        }
        f.write_str("}")
    }
}

/// A schema (absent for schemaless data) and a value.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaAndValue {
    /// The schema, if the data has one.
    pub schema: Option<Arc<Schema>>,
    /// The value.
    pub value: Value,
}

impl SchemaAndValue {
    /// Null without a schema.
    pub fn null() -> Self {
        SchemaAndValue {
            schema: None,
            value: Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person() -> Arc<Schema> {
        Arc::new(
            Schema::structure(vec![
                ("id", Schema::of(SchemaType::Int32)),
                ("name", Schema::of(SchemaType::String).optional()),
                ("tags", Schema::array(Schema::of(SchemaType::String))),
            ])
            .named("example.Person"),
        )
    }

    #[test]
    fn structs_check_their_fields() {
        let mut s = Struct::new(person()).expect("struct schema");
        s.put("id", Value::Int32(7)).expect("int32 fits");
        assert!(s.put("id", Value::String("x".into())).is_err());
        assert!(s.put("missing", Value::Int32(1)).is_err());
        assert!(s.validate().is_err(), "tags is required");
        s.put("tags", Value::Array(vec![Value::String("a".into())]))
            .expect("array of strings");
        s.validate().expect("complete");
        assert_eq!(s.get("name"), Some(&Value::Null));
        assert_eq!(s.to_string(), "Struct{id=7,tags=[a]}");
    }

    #[test]
    fn logical_values_validate_against_their_schemas() {
        use crate::logical::{date_schema, decimal_schema, timestamp_schema};
        let cases = [
            (
                decimal_schema(2),
                Value::Decimal(Decimal::new(150, 2)),
                true,
            ),
            (
                decimal_schema(2),
                Value::Decimal(Decimal::new(15, 1)),
                false,
            ),
            (decimal_schema(2), Value::Bytes(vec![1]), false),
            (date_schema(), Value::Date(19_000), true),
            (date_schema(), Value::Int32(19_000), false),
            (timestamp_schema(), Value::Timestamp(0), true),
            (timestamp_schema().optional(), Value::Null, true),
            (timestamp_schema(), Value::Null, false),
        ];
        for (schema, value, ok) in cases {
            assert_eq!(schema.validate(&value).is_ok(), ok, "{schema:?} {value:?}");
        }
        assert!(Schema::of(SchemaType::Int32)
            .with_default(Value::String("x".into()))
            .is_err());
        assert_eq!(Value::Date(0).to_string(), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(Value::Decimal(Decimal::new(-5, 2)).to_string(), "-0.05");
    }

    #[test]
    fn values_validate_against_schemas() {
        let cases = [
            (Schema::of(SchemaType::Int64), Value::Int64(1), true),
            (Schema::of(SchemaType::Int64), Value::Int32(1), false),
            (Schema::of(SchemaType::String), Value::Null, false),
            (Schema::of(SchemaType::String).optional(), Value::Null, true),
            (
                Schema::map(
                    Schema::of(SchemaType::String),
                    Schema::of(SchemaType::Int32),
                ),
                Value::Map(vec![(Value::String("k".into()), Value::Int32(1))]),
                true,
            ),
            (
                Schema::map(
                    Schema::of(SchemaType::String),
                    Schema::of(SchemaType::Int32),
                ),
                Value::Map(vec![(Value::Int32(1), Value::Int32(1))]),
                false,
            ),
        ];
        for (schema, value, ok) in cases {
            assert_eq!(schema.validate(&value).is_ok(), ok, "{schema:?} {value:?}");
        }
    }
}
