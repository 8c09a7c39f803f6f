//! ParquetFormat: a Parquet file per committed file, its columns made from the records'
//! Connect struct schema (optional schemas as nullable columns, Decimal as DECIMAL, Date,
//! Time (ms) and Timestamp (ms, UTC) as their logical types, arrays as lists, maps as maps),
//! `parquet.codec` none, snappy (the default) or zstd. Records are gathered into Arrow batches
//! and written by the parquet crate; row groups of at most 64k rows leave the memory as they
//! fill, the footer is written on close.

use std::sync::Arc;

use arrow_array::*;
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, TimeUnit};
use ferry_connect::config::Choice;
use ferry_connect::logical::Logical;
use ferry_connect::{ConnectError, Result, Schema, SchemaType, SinkRecord, Value};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::RecordWriter;

/// Records gathered before they are handed to the Parquet writer as one batch.
const BATCH_ROWS: usize = 4096;
/// Rows of a row group.
const ROW_GROUP_ROWS: usize = 65_536;

/// `parquet.codec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParquetCodec {
    /// No compression (`none` or `uncompressed`).
    None,
    /// Snappy, the default.
    Snappy,
    /// Zstandard.
    Zstd,
}

impl Choice for ParquetCodec {
    const CHOICES: &'static [(&'static str, ParquetCodec)] = &[
        ("none", ParquetCodec::None),
        ("uncompressed", ParquetCodec::None),
        ("snappy", ParquetCodec::Snappy),
        ("zstd", ParquetCodec::Zstd),
    ];
}

impl ParquetCodec {
    fn compression(self) -> Compression {
        match self {
            ParquetCodec::None => Compression::UNCOMPRESSED,
            ParquetCodec::Snappy => Compression::SNAPPY,
            ParquetCodec::Zstd => Compression::ZSTD(ZstdLevel::default()),
        }
    }
}

fn data(e: impl std::fmt::Display) -> ConnectError {
    ConnectError::data(e.to_string())
}

/// The Arrow type of a Connect schema.
fn arrow_type(schema: &Schema) -> Result<DataType> {
    if let Some(logical) = Logical::of(schema)? {
        return Ok(match logical {
            Logical::Decimal { scale } => {
                let precision = schema
                    .parameters
                    .get("connect.decimal.precision")
                    .and_then(|p| p.trim().parse::<u8>().ok())
                    .unwrap_or(38);
                let scale = i8::try_from(scale).map_err(|_| {
                    data(format!("a Decimal scale of {scale} does not fit Parquet"))
                })?;
                DataType::Decimal128(precision, scale)
            }
            Logical::Date => DataType::Date32,
            Logical::Time => DataType::Time32(TimeUnit::Millisecond),
            Logical::Timestamp => DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        });
    }
    Ok(match schema.ty {
        SchemaType::Int8 => DataType::Int8,
        SchemaType::Int16 => DataType::Int16,
        SchemaType::Int32 => DataType::Int32,
        SchemaType::Int64 => DataType::Int64,
        SchemaType::Float32 => DataType::Float32,
        SchemaType::Float64 => DataType::Float64,
        SchemaType::Boolean => DataType::Boolean,
        SchemaType::String => DataType::Utf8,
        SchemaType::Bytes => DataType::Binary,
        SchemaType::Array => DataType::List(Arc::new(field("element", elements(schema)?)?)),
        SchemaType::Map => DataType::Map(Arc::new(entries_field(schema)?), false),
        SchemaType::Struct => DataType::Struct(struct_fields(schema)?),
    })
}

fn field(name: &str, schema: &Schema) -> Result<Field> {
    Ok(Field::new(name, arrow_type(schema)?, schema.optional))
}

fn struct_fields(schema: &Schema) -> Result<Fields> {
    schema
        .fields
        .iter()
        .map(|f| field(&f.name, &f.schema))
        .collect::<Result<Vec<_>>>()
        .map(Fields::from)
}

fn entries_field(schema: &Schema) -> Result<Field> {
    let keys = schema
        .key_schema
        .as_deref()
        .ok_or_else(|| data("a map schema without a key schema"))?;
    if keys.optional {
        return Err(data(
            "Parquet map keys cannot be null: the map's key schema is optional",
        ));
    }
    let fields = Fields::from(vec![
        field("key", keys)?,
        field("value", elements(schema)?)?,
    ]);
    Ok(Field::new("key_value", DataType::Struct(fields), false))
}

fn elements(schema: &Schema) -> Result<&Schema> {
    schema.value_schema.as_deref().ok_or_else(|| {
        data(format!(
            "a {} schema without a value schema",
            schema.ty.name()
        ))
    })
}

fn mismatch(schema: &Schema, value: &Value) -> ConnectError {
    data(format!(
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

/// The value a row holds for `schema`: a null with a default is the default. `Ok(None)` for
/// null, which only an optional schema (or a row its parent made null) may hold.
fn present<'v>(schema: &'v Schema, value: &'v Value, masked: bool) -> Result<Option<&'v Value>> {
    match (value, &schema.default) {
        (Value::Null, Some(default)) => Ok(Some(default)),
        (Value::Null, None) if schema.optional || masked => Ok(None),
        (Value::Null, None) => Err(data(format!(
            "a null value for a required {} schema{}",
            schema.ty.name(),
            schema
                .name
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ))),
        (v, _) => Ok(Some(v)),
    }
}

/// A column of primitives: `$pat => $out` takes the value out of a present row.
macro_rules! primitives {
    ($schema:expr, $present:expr, $array:ty, $pat:pat => $out:expr) => {{
        let values = $present
            .iter()
            .map(|p| match p {
                None => Ok(None),
                Some($pat) => Ok(Some($out)),
                Some(v) => Err(mismatch($schema, v)),
            })
            .collect::<Result<Vec<_>>>()?;
        <$array>::from(values)
    }};
}

fn arrow_error(e: arrow_schema::ArrowError) -> ConnectError {
    data(format!("cannot build the Parquet columns: {e}"))
}

/// The struct a present row holds, with the schema it must have.
fn struct_of<'v>(schema: &Schema, value: &'v Value) -> Result<&'v ferry_connect::Struct> {
    match value {
        Value::Struct(s)
            if std::ptr::eq(s.schema.as_ref(), schema) || s.schema.fields == schema.fields =>
        {
            Ok(s)
        }
        v => Err(mismatch(schema, v)),
    }
}

/// One column of `rows`: each a value, and whether its parent row is null (then the value
/// is null and masked, whatever the schema).
fn column(schema: &Schema, rows: &[(&Value, bool)]) -> Result<ArrayRef> {
    let present = rows
        .iter()
        .map(|(v, masked)| present(schema, v, *masked))
        .collect::<Result<Vec<Option<&Value>>>>()?;
    let nulls = || {
        present
            .iter()
            .any(Option::is_none)
            .then(|| NullBuffer::from(present.iter().map(Option::is_some).collect::<Vec<bool>>()))
    };
    let array: ArrayRef = match (Logical::of(schema)?, schema.ty) {
        (Some(Logical::Decimal { scale }), _) => {
            let DataType::Decimal128(precision, arrow_scale) = arrow_type(schema)? else {
                return Err(data("a Decimal column that is not DECIMAL"));
            };
            let mut values = Vec::with_capacity(present.len());
            for p in &present {
                values.push(match p {
                    None => None,
                    Some(Value::Decimal(d)) => Some(d.rescale(scale)?.unscaled),
                    Some(v) => return Err(mismatch(schema, v)),
                });
            }
            Arc::new(
                Decimal128Array::from(values)
                    .with_precision_and_scale(precision, arrow_scale)
                    .map_err(arrow_error)?,
            )
        }
        (Some(Logical::Date), _) => {
            Arc::new(primitives!(schema, present, Date32Array, Value::Date(d) => *d))
        }
        (Some(Logical::Time), _) => {
            Arc::new(primitives!(schema, present, Time32MillisecondArray, Value::Time(t) => *t))
        }
        (Some(Logical::Timestamp), _) => Arc::new(
            primitives!(schema, present, TimestampMillisecondArray, Value::Timestamp(t) => *t)
                .with_timezone("UTC"),
        ),
        (None, SchemaType::Int8) => {
            Arc::new(primitives!(schema, present, Int8Array, Value::Int8(x) => *x))
        }
        (None, SchemaType::Int16) => {
            Arc::new(primitives!(schema, present, Int16Array, Value::Int16(x) => *x))
        }
        (None, SchemaType::Int32) => {
            Arc::new(primitives!(schema, present, Int32Array, Value::Int32(x) => *x))
        }
        (None, SchemaType::Int64) => {
            Arc::new(primitives!(schema, present, Int64Array, Value::Int64(x) => *x))
        }
        (None, SchemaType::Float32) => {
            Arc::new(primitives!(schema, present, Float32Array, Value::Float32(x) => *x))
        }
        (None, SchemaType::Float64) => {
            Arc::new(primitives!(schema, present, Float64Array, Value::Float64(x) => *x))
        }
        (None, SchemaType::Boolean) => {
            Arc::new(primitives!(schema, present, BooleanArray, Value::Boolean(x) => *x))
        }
        (None, SchemaType::String) => {
            Arc::new(primitives!(schema, present, StringArray, Value::String(x) => x.as_str()))
        }
        (None, SchemaType::Bytes) => {
            Arc::new(primitives!(schema, present, BinaryArray, Value::Bytes(x) => x.as_slice()))
        }
        (None, SchemaType::Struct) => {
            let mut children = Vec::with_capacity(schema.fields.len());
            for f in &schema.fields {
                let child_rows = present
                    .iter()
                    .map(|p| match p {
                        None => Ok((&Value::Null, true)),
                        Some(v) => Ok((struct_of(schema, v)?.raw(f.index), false)),
                    })
                    .collect::<Result<Vec<_>>>()?;
                children.push(
                    column(&f.schema, &child_rows)
                        .map_err(|e| data(format!("field {}: {}", f.name, e.message)))?,
                );
            }
            Arc::new(
                StructArray::try_new(struct_fields(schema)?, children, nulls())
                    .map_err(arrow_error)?,
            )
        }
        (None, SchemaType::Array) => {
            let element = elements(schema)?;
            let (mut offsets, mut items) = (vec![0i32], Vec::new());
            for p in &present {
                match p {
                    None => {}
                    Some(Value::Array(values)) => items.extend(values.iter().map(|v| (v, false))),
                    Some(v) => return Err(mismatch(schema, v)),
                }
                offsets.push(
                    i32::try_from(items.len())
                        .map_err(|_| data("an array column of more than 2^31 values"))?,
                );
            }
            Arc::new(
                ListArray::try_new(
                    Arc::new(field("element", element)?),
                    OffsetBuffer::new(offsets.into()),
                    column(element, &items)?,
                    nulls(),
                )
                .map_err(arrow_error)?,
            )
        }
        (None, SchemaType::Map) => {
            let entries = entries_field(schema)?;
            let (keys_schema, values_schema) = (
                schema
                    .key_schema
                    .as_deref()
                    .ok_or_else(|| data("a map schema without a key schema"))?,
                elements(schema)?,
            );
            let (mut offsets, mut keys, mut values) = (vec![0i32], Vec::new(), Vec::new());
            for p in &present {
                match p {
                    None => {}
                    Some(Value::Map(map)) => {
                        for (k, v) in map {
                            keys.push((k, false));
                            values.push((v, false));
                        }
                    }
                    Some(v) => return Err(mismatch(schema, v)),
                }
                offsets.push(
                    i32::try_from(keys.len())
                        .map_err(|_| data("a map column of more than 2^31 entries"))?,
                );
            }
            let DataType::Struct(entry_fields) = entries.data_type().clone() else {
                return Err(data("map entries that are not a struct"));
            };
            let entry_array = StructArray::try_new(
                entry_fields,
                vec![column(keys_schema, &keys)?, column(values_schema, &values)?],
                None,
            )
            .map_err(arrow_error)?;
            Arc::new(
                MapArray::try_new(
                    Arc::new(entries),
                    OffsetBuffer::new(offsets.into()),
                    entry_array,
                    nulls(),
                    false,
                )
                .map_err(arrow_error)?,
            )
        }
    };
    Ok(array)
}

/// One Parquet file: its columns are the fields of the first record's struct schema.
pub struct ParquetWriter {
    codec: ParquetCodec,
    schema: Option<Arc<Schema>>,
    writer: Option<ArrowWriter<Vec<u8>>>,
    rows: Vec<Value>,
    out: Vec<u8>,
}

impl ParquetWriter {
    /// A writer of Parquet files compressed with `codec`.
    pub fn new(codec: ParquetCodec) -> Self {
        ParquetWriter {
            codec,
            schema: None,
            writer: None,
            rows: Vec::new(),
            out: Vec::new(),
        }
    }

    fn open(&mut self, schema: &Arc<Schema>) -> Result<()> {
        let fields = struct_fields(schema)?;
        let props = WriterProperties::builder()
            .set_compression(self.codec.compression())
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_created_by(format!("Ferry {}", env!("CARGO_PKG_VERSION")))
            .build();
        let arrow_schema = Arc::new(arrow_schema::Schema::new(fields));
        let writer = ArrowWriter::try_new(Vec::new(), arrow_schema, Some(props))
            .map_err(|e| data(format!("cannot start a Parquet file for this schema: {e}")))?;
        self.writer = Some(writer);
        self.schema = Some(schema.clone());
        Ok(())
    }

    /// Hand the gathered rows to the Parquet writer (every one was validated when taken).
    fn write_batch(&mut self) -> Result<()> {
        let (Some(writer), Some(schema)) = (self.writer.as_mut(), self.schema.as_ref()) else {
            return Ok(());
        };
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows: Vec<(&Value, bool)> = self.rows.iter().map(|v| (v, false)).collect();
        let broken = |e: String| ConnectError::fatal(format!("Parquet: {e}"));
        let array = column(schema, &rows).map_err(|e| broken(e.message))?;
        let Some(structs) = array.as_any().downcast_ref::<StructArray>() else {
            return Err(broken("the rows are not structs".into()));
        };
        let batch = RecordBatch::from(structs.clone());
        writer.write(&batch).map_err(|e| broken(e.to_string()))?;
        self.rows.clear();
        self.out.append(writer.inner_mut());
        Ok(())
    }
}

impl RecordWriter for ParquetWriter {
    fn write(&mut self, record: &SinkRecord) -> Result<()> {
        let located = |e: ConnectError| {
            ConnectError::data(format!(
                "cannot write the record at {}-{} offset {} as Parquet: {}",
                record.topic, record.partition, record.offset, e.message
            ))
        };
        let schema = match &record.value_schema {
            Some(schema) if schema.ty == SchemaType::Struct => schema,
            Some(schema) => {
                return Err(located(data(format!(
                    "its schema is {}, and Parquet files hold structs",
                    schema.ty.name()
                ))))
            }
            None => {
                return Err(located(data(
                    "it has no schema (Parquet files need one: use a converter with schemas, such as JsonConverter with schemas.enable=true)",
                )))
            }
        };
        if record.value.is_null() {
            return Err(located(data(
                "a null value (a tombstone) has no Parquet row",
            )));
        }
        schema.validate(&record.value).map_err(located)?;
        if self.writer.is_none() {
            self.open(schema).map_err(located)?;
        }
        self.rows.push(record.value.clone());
        if self.rows.len() >= BATCH_ROWS {
            self.write_batch()?;
        }
        Ok(())
    }

    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>> {
        self.write_batch()?;
        if let Some(mut writer) = self.writer.take() {
            writer
                .finish()
                .map_err(|e| ConnectError::fatal(format!("Parquet: cannot close the file: {e}")))?;
            self.out.append(writer.inner_mut());
        }
        Ok(self.take())
    }
}

#[cfg(test)]
mod tests;
