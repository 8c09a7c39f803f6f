//! The source's columns: the Connect schema of each PostgreSQL column type (Confluent's
//! mapping: integers by width, NUMERIC as Decimal — or per `numeric.mapping` —, DATE, TIME and
//! TIMESTAMP as their logical types, text, bytes, UUID and JSON as strings), and the values of
//! the server's binary format. A type without a mapping is read as its text (the query casts
//! it), so no column is left out. Pure: no connection here.

use std::sync::Arc;

use ferry_connect::logical::{date_schema, decimal_schema, time_schema, timestamp_schema, Decimal};
use ferry_connect::{ConnectError, Result, Schema, SchemaType, Value};
use postgres_types::Type;

use crate::config::NumericMapping;

/// Days from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
pub const PG_EPOCH_DAYS: i64 = 10_957;
/// Microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
pub const PG_EPOCH_MICROS: i64 = PG_EPOCH_DAYS * 86_400_000_000;
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// How a column's values are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// BOOLEAN as BOOLEAN.
    Boolean,
    /// SMALLINT as INT16.
    Int16,
    /// INTEGER as INT32.
    Int32,
    /// BIGINT as INT64.
    Int64,
    /// An OID (unsigned 32 bits) as INT64.
    Oid,
    /// REAL as FLOAT32.
    Float32,
    /// DOUBLE PRECISION as FLOAT64.
    Float64,
    /// NUMERIC as Decimal of this scale; `None`: unconstrained, each value with its own.
    Decimal(Option<i32>),
    /// NUMERIC(p, 0) as the narrowest integer that holds p digits (`numeric.mapping`).
    NumericInt(SchemaType),
    /// NUMERIC(p, s > 0) as FLOAT64 (`numeric.mapping=best_fit`).
    NumericDouble,
    /// TEXT, VARCHAR and CHAR(n) as STRING.
    Text,
    /// PostgreSQL's one-byte `"char"`.
    Char,
    /// BYTEA as BYTES.
    Bytes,
    /// DATE as Connect's Date.
    Date,
    /// TIME as Connect's Time.
    Time,
    /// TIME WITH TIME ZONE as Connect's Time (in UTC).
    TimeTz,
    /// TIMESTAMP and TIMESTAMPTZ as Connect's Timestamp.
    Timestamp,
    /// UUID as its text.
    Uuid,
    /// JSON as its text.
    Json,
    /// JSONB as its text.
    Jsonb,
    /// Any other type, selected as `::text`.
    Cast,
}

/// The precision and scale of a NUMERIC's type modifier (none when unconstrained).
pub fn numeric_typmod(typmod: i32) -> Option<(i32, i32)> {
    if typmod < 4 {
        return None;
    }
    let t = typmod - 4;
    let precision = (t >> 16) & 0xffff;
    // An 11-bit signed scale (PostgreSQL 15 allows negative ones).
    let scale = ((t & 0x7ff) ^ 1024) - 1024;
    Some((precision, scale))
}

/// The kind of a column of type `ty` with type modifier `typmod`.
pub fn kind_of(ty: &Type, typmod: i32, mapping: NumericMapping) -> Kind {
    match *ty {
        Type::BOOL => Kind::Boolean,
        Type::INT2 => Kind::Int16,
        Type::INT4 => Kind::Int32,
        Type::INT8 => Kind::Int64,
        Type::OID => Kind::Oid,
        Type::FLOAT4 => Kind::Float32,
        Type::FLOAT8 => Kind::Float64,
        Type::NUMERIC => match numeric_typmod(typmod) {
            None => Kind::Decimal(None),
            Some((precision, scale)) => match mapping {
                NumericMapping::PrecisionOnly | NumericMapping::BestFit
                    if scale == 0 && precision < 19 =>
                {
                    Kind::NumericInt(match precision {
                        0..=2 => SchemaType::Int8,
                        3..=4 => SchemaType::Int16,
                        5..=9 => SchemaType::Int32,
                        _ => SchemaType::Int64,
                    })
                }
                NumericMapping::BestFit if scale > 0 && precision < 19 => Kind::NumericDouble,
                _ => Kind::Decimal(Some(scale)),
            },
        },
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => Kind::Text,
        Type::CHAR => Kind::Char,
        Type::BYTEA => Kind::Bytes,
        Type::DATE => Kind::Date,
        Type::TIME => Kind::Time,
        Type::TIMETZ => Kind::TimeTz,
        Type::TIMESTAMP | Type::TIMESTAMPTZ => Kind::Timestamp,
        Type::UUID => Kind::Uuid,
        Type::JSON => Kind::Json,
        Type::JSONB => Kind::Jsonb,
        _ => Kind::Cast,
    }
}

/// A column of a source query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceColumn {
    /// The column's name.
    pub name: String,
    /// How its values are read.
    pub kind: Kind,
    /// Whether it may be null.
    pub optional: bool,
}

impl SourceColumn {
    /// The column's Connect schema; an unconstrained NUMERIC takes the scale of `value`.
    pub fn schema(&self, value: &Value) -> Schema {
        let schema = match self.kind {
            Kind::Boolean => Schema::of(SchemaType::Boolean),
            Kind::Int16 => Schema::of(SchemaType::Int16),
            Kind::Int32 => Schema::of(SchemaType::Int32),
            Kind::Int64 | Kind::Oid => Schema::of(SchemaType::Int64),
            Kind::Float32 => Schema::of(SchemaType::Float32),
            Kind::Float64 | Kind::NumericDouble => Schema::of(SchemaType::Float64),
            Kind::Decimal(Some(scale)) => decimal_schema(scale),
            Kind::Decimal(None) => decimal_schema(match value {
                Value::Decimal(d) => d.scale,
                _ => 0,
            }),
            Kind::NumericInt(ty) => Schema::of(ty),
            Kind::Bytes => Schema::of(SchemaType::Bytes),
            Kind::Date => date_schema(),
            Kind::Time | Kind::TimeTz => time_schema(),
            Kind::Timestamp => timestamp_schema(),
            Kind::Text | Kind::Char | Kind::Uuid | Kind::Json | Kind::Jsonb | Kind::Cast => {
                Schema::of(SchemaType::String)
            }
        };
        if self.optional {
            schema.optional()
        } else {
            schema
        }
    }

    /// Whether the schema depends on the value (an unconstrained NUMERIC).
    pub fn varies(&self) -> bool {
        self.kind == Kind::Decimal(None)
    }

    /// The value of the server's binary form (`None`: NULL); the error names the column.
    pub fn decode(&self, raw: Option<&[u8]>) -> Result<Value> {
        let Some(raw) = raw else {
            return Ok(Value::Null);
        };
        decode(self.kind, raw).map_err(|e| ConnectError::data(format!("column {}: {e}", self.name)))
    }
}

fn fixed<const N: usize>(raw: &[u8], what: &str) -> std::result::Result<[u8; N], String> {
    raw.try_into()
        .map_err(|_| format!("a {what} of {} bytes, expected {N}", raw.len()))
}

fn text(raw: &[u8]) -> std::result::Result<String, String> {
    String::from_utf8(raw.to_vec()).map_err(|_| "text that is not UTF-8".to_string())
}

/// Microseconds since the epoch of a TIMESTAMP or TIMESTAMPTZ value.
pub fn timestamp_micros(raw: &[u8]) -> std::result::Result<i64, String> {
    let since_2000 = i64::from_be_bytes(fixed::<8>(raw, "timestamp")?);
    if since_2000 == i64::MAX || since_2000 == i64::MIN {
        return Err("an infinite timestamp has no Connect value".to_string());
    }
    Ok(since_2000 + PG_EPOCH_MICROS)
}

/// An integer column's value (incrementing columns).
pub fn integer(kind: Kind, raw: &[u8]) -> std::result::Result<i64, String> {
    match decode(kind, raw)? {
        Value::Int8(i) => Ok(i as i64),
        Value::Int16(i) => Ok(i as i64),
        Value::Int32(i) => Ok(i as i64),
        Value::Int64(i) => Ok(i),
        Value::Decimal(d) if d.scale == 0 => {
            i64::try_from(d.unscaled).map_err(|_| format!("{} does not fit 64 bits", d.unscaled))
        }
        other => Err(format!("a {} is not an integer", other.kind())),
    }
}

fn decode(kind: Kind, raw: &[u8]) -> std::result::Result<Value, String> {
    Ok(match kind {
        Kind::Boolean => Value::Boolean(fixed::<1>(raw, "boolean")?[0] != 0),
        Kind::Int16 => Value::Int16(i16::from_be_bytes(fixed(raw, "int2")?)),
        Kind::Int32 => Value::Int32(i32::from_be_bytes(fixed(raw, "int4")?)),
        Kind::Int64 => Value::Int64(i64::from_be_bytes(fixed(raw, "int8")?)),
        Kind::Oid => Value::Int64(u32::from_be_bytes(fixed(raw, "oid")?) as i64),
        Kind::Float32 => Value::Float32(f32::from_be_bytes(fixed(raw, "float4")?)),
        Kind::Float64 => Value::Float64(f64::from_be_bytes(fixed(raw, "float8")?)),
        Kind::Decimal(scale) => {
            let d = numeric(raw)?;
            Value::Decimal(match scale {
                Some(s) => d.rescale(s).map_err(|e| e.message)?,
                None => d,
            })
        }
        Kind::NumericInt(ty) => {
            let d = numeric(raw)?;
            let n = i64::try_from(d.unscaled).map_err(|_| format!("{d} does not fit 64 bits"))?;
            let out_of = || format!("{n} does not fit {}", ty.name());
            match ty {
                SchemaType::Int8 => Value::Int8(i8::try_from(n).map_err(|_| out_of())?),
                SchemaType::Int16 => Value::Int16(i16::try_from(n).map_err(|_| out_of())?),
                SchemaType::Int32 => Value::Int32(i32::try_from(n).map_err(|_| out_of())?),
                _ => Value::Int64(n),
            }
        }
        Kind::NumericDouble => Value::Float64(numeric(raw)?.to_f64()),
        Kind::Text | Kind::Json | Kind::Cast => Value::String(text(raw)?),
        Kind::Jsonb => match raw.split_first() {
            Some((1, json)) => Value::String(text(json)?),
            _ => return Err("a jsonb value of an unknown version".to_string()),
        },
        Kind::Char => Value::String(text(raw)?),
        Kind::Bytes => Value::Bytes(raw.to_vec()),
        Kind::Date => {
            let days = i32::from_be_bytes(fixed(raw, "date")?);
            if days == i32::MAX || days == i32::MIN {
                return Err("an infinite date has no Connect value".to_string());
            }
            let epoch_days = days as i64 + PG_EPOCH_DAYS;
            Value::Date(i32::try_from(epoch_days).map_err(|_| "a date out of range".to_string())?)
        }
        Kind::Time => {
            let micros = i64::from_be_bytes(fixed(raw, "time")?);
            Value::Time((micros / 1000) as i32)
        }
        Kind::TimeTz => {
            let bytes = fixed::<12>(raw, "timetz")?;
            let (time, zone) = bytes.split_at(8);
            let micros = i64::from_be_bytes(time.try_into().map_err(|_| "timetz")?);
            // The zone is in seconds west of UTC.
            let west = i32::from_be_bytes(zone.try_into().map_err(|_| "timetz")?) as i64;
            let utc = (micros + west * 1_000_000).rem_euclid(MICROS_PER_DAY);
            Value::Time((utc / 1000) as i32)
        }
        Kind::Timestamp => Value::Timestamp(timestamp_micros(raw)?.div_euclid(1000)),
        Kind::Uuid => {
            let b = fixed::<16>(raw, "uuid")?;
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            Value::String(format!(
                "{}-{}-{}-{}-{}",
                &hex[0..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..32]
            ))
        }
    })
}

/// NUMERIC's binary form (base-10000 digits, weight, sign, display scale) as a Decimal of
/// its display scale.
pub fn numeric(raw: &[u8]) -> std::result::Result<Decimal, String> {
    let word = |i: usize| -> std::result::Result<i16, String> {
        raw.get(i * 2..i * 2 + 2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "a truncated numeric".to_string())
    };
    let ndigits = word(0)?.max(0) as usize;
    let weight = word(1)? as i64;
    let sign = word(2)? as u16;
    let dscale = word(3)?.max(0) as i64;
    match sign {
        0x0000 | 0x4000 => {}
        0xC000 => return Err("NaN has no Decimal value".to_string()),
        _ => return Err("an infinite numeric has no Decimal value".to_string()),
    }
    let overflow = || "a numeric of more than 38 digits does not fit a Decimal".to_string();
    let mut unscaled: i128 = 0;
    for i in 0..ndigits {
        let digit = word(4 + i)? as i128;
        unscaled = unscaled
            .checked_mul(10_000)
            .and_then(|u| u.checked_add(digit))
            .ok_or_else(overflow)?;
    }
    // unscaled × 10000^(weight - ndigits + 1), at scale dscale.
    let exponent = 4 * (weight - ndigits as i64 + 1) + dscale;
    if exponent >= 0 {
        let factor = 10i128.checked_pow(exponent as u32).ok_or_else(overflow)?;
        unscaled = unscaled.checked_mul(factor).ok_or_else(overflow)?;
    } else {
        // Digits beyond the display scale are zeros.
        let divisor = 10i128.checked_pow((-exponent) as u32).unwrap_or(i128::MAX);
        unscaled /= divisor;
    }
    if sign == 0x4000 {
        unscaled = -unscaled;
    }
    Ok(Decimal::new(unscaled, dscale as i32))
}

/// The struct schema of a row: named after the table (none for a query), one field per
/// column in order; unconstrained NUMERICs take the scale of this row's value.
pub fn row_schema(name: Option<&str>, columns: &[SourceColumn], values: &[Value]) -> Arc<Schema> {
    let fields: Vec<(&str, Schema)> = columns
        .iter()
        .zip(values)
        .map(|(c, v)| (c.name.as_str(), c.schema(v)))
        .collect();
    let schema = Schema::structure(fields);
    Arc::new(match name {
        Some(n) => schema.named(n),
        None => schema,
    })
}

#[cfg(test)]
mod tests;
