//! Connect values as statement parameters, in the binary format of the column type the
//! server inferred for each: the same value can go to an INT or a BIGINT column, a string to
//! a VARCHAR or a TEXT, a Decimal to a NUMERIC. A value that does not fit its column is an
//! error that names the column, which the sink takes as a fault of that record.

use std::error::Error;

use bytes::{BufMut, BytesMut};
use ferry_connect::logical::Decimal;
use ferry_connect::Value;
use postgres_types::{to_sql_checked, IsNull, ToSql, Type};

/// Days from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;
const PG_EPOCH_MILLIS: i64 = PG_EPOCH_DAYS * 86_400_000;

/// One parameter: a column's name (for errors) and its value.
#[derive(Debug)]
pub struct Param<'a> {
    /// The column it binds to.
    pub column: &'a str,
    /// The value bound.
    pub value: &'a Value,
}

type BoxError = Box<dyn Error + Sync + Send>;

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Int8(i) => Some(*i as i64),
        Value::Int16(i) => Some(*i as i64),
        Value::Int32(i) => Some(*i as i64),
        Value::Int64(i) => Some(*i),
        _ => None,
    }
}

impl Param<'_> {
    fn refuse(&self, ty: &Type) -> BoxError {
        format!(
            "column {}: a {} value cannot be written to a {} column",
            self.column,
            self.value.kind(),
            ty.name()
        )
        .into()
    }

    fn int<T: TryFrom<i64> + ToSql>(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, BoxError> {
        let i = int_of(self.value).ok_or_else(|| self.refuse(ty))?;
        let narrowed = T::try_from(i).map_err(|_| {
            format!(
                "column {}: {i} is out of range for {}",
                self.column,
                ty.name()
            )
        })?;
        narrowed.to_sql(ty, out)
    }
}

/// NUMERIC's binary form: base-10000 digits with weight, sign and display scale.
pub fn numeric(d: &Decimal, out: &mut BytesMut) {
    let (unscaled, scale) = if d.scale < 0 {
        let factor = 10i128
            .checked_pow(d.scale.unsigned_abs())
            .unwrap_or(i128::MAX);
        (d.unscaled.saturating_mul(factor), 0u32)
    } else {
        (d.unscaled, d.scale as u32)
    };
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let (int_part, frac_part) = if digits.len() > scale {
        digits.split_at(digits.len() - scale)
    } else {
        ("", digits.as_str())
    };
    let frac = format!(
        "{}{frac_part}",
        "0".repeat(scale.saturating_sub(frac_part.len()))
    );
    let int = format!("{}{int_part}", "0".repeat((4 - int_part.len() % 4) % 4));
    let frac = format!("{frac}{}", "0".repeat((4 - frac.len() % 4) % 4));
    let group = |s: &str| -> Vec<i16> {
        s.as_bytes()
            .chunks(4)
            .map(|c| c.iter().fold(0i16, |acc, b| acc * 10 + (b - b'0') as i16))
            .collect()
    };
    let int_groups = group(&int);
    let mut groups: Vec<i16> = int_groups
        .iter()
        .chain(group(&frac).iter())
        .copied()
        .collect();
    let mut weight = int_groups.len() as i16 - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    out.put_i16(groups.len() as i16);
    out.put_i16(weight);
    out.put_u16(if unscaled < 0 { 0x4000 } else { 0 });
    out.put_i16(scale as i16);
    for g in groups {
        out.put_i16(g);
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let v = self.value;
        if matches!(v, Value::Null) {
            return Ok(IsNull::Yes);
        }
        match *ty {
            Type::INT2 => self.int::<i16>(ty, out),
            Type::INT4 => self.int::<i32>(ty, out),
            Type::INT8 => self.int::<i64>(ty, out),
            Type::FLOAT4 | Type::FLOAT8 => {
                let f = match v {
                    Value::Float32(f) => *f as f64,
                    Value::Float64(f) => *f,
                    Value::Decimal(d) => d.to_f64(),
                    other => int_of(other).ok_or_else(|| self.refuse(ty))? as f64,
                };
                if *ty == Type::FLOAT4 {
                    (f as f32).to_sql(ty, out)
                } else {
                    f.to_sql(ty, out)
                }
            }
            Type::BOOL => match v {
                Value::Boolean(b) => b.to_sql(ty, out),
                _ => Err(self.refuse(ty)),
            },
            Type::NUMERIC => {
                let parse = |text: String| {
                    Decimal::parse(&text)
                        .map_err(|e| format!("column {}: {}", self.column, e.message))
                };
                let d = match v {
                    Value::Decimal(d) => *d,
                    Value::Float32(f) => parse(f.to_string())?,
                    Value::Float64(f) => parse(f.to_string())?,
                    other => Decimal::new(int_of(other).ok_or_else(|| self.refuse(ty))? as i128, 0),
                };
                numeric(&d, out);
                Ok(IsNull::No)
            }
            Type::BYTEA => match v {
                Value::Bytes(b) => b.as_slice().to_sql(ty, out),
                _ => Err(self.refuse(ty)),
            },
            Type::DATE => match v {
                Value::Date(days) => {
                    out.put_i32((*days as i64 - PG_EPOCH_DAYS) as i32);
                    Ok(IsNull::No)
                }
                _ => Err(self.refuse(ty)),
            },
            Type::TIME => match v {
                Value::Time(ms) => {
                    out.put_i64(*ms as i64 * 1000);
                    Ok(IsNull::No)
                }
                _ => Err(self.refuse(ty)),
            },
            Type::TIMESTAMP | Type::TIMESTAMPTZ => match v {
                Value::Timestamp(ms) => {
                    out.put_i64((ms - PG_EPOCH_MILLIS) * 1000);
                    Ok(IsNull::No)
                }
                _ => Err(self.refuse(ty)),
            },
            // Text columns, and the types the server reads from text (json, uuid, …) take
            // strings; other values are written as their text.
            _ => match v {
                Value::String(s) => s.as_str().to_sql(ty, out),
                Value::Decimal(d) if <&str as ToSql>::accepts(ty) => {
                    d.to_string().as_str().to_sql(ty, out)
                }
                other if <&str as ToSql>::accepts(ty) => match int_of(other) {
                    Some(i) => i.to_string().as_str().to_sql(ty, out),
                    None => match other {
                        Value::Boolean(b) => b.to_string().as_str().to_sql(ty, out),
                        Value::Float32(f) => f.to_string().as_str().to_sql(ty, out),
                        Value::Float64(f) => f.to_string().as_str().to_sql(ty, out),
                        _ => Err(self.refuse(ty)),
                    },
                },
                _ => Err(self.refuse(ty)),
            },
        }
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(d: Decimal) -> Vec<u8> {
        let mut out = BytesMut::new();
        numeric(&d, &mut out);
        out.to_vec()
    }

    fn be(words: &[i16]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn numerics_in_base_10000() {
        // 12345.678: digits 1, 2345, 6780; weight 1; dscale 3.
        assert_eq!(
            bytes(Decimal::new(12_345_678, 3)),
            be(&[3, 1, 0, 3, 1, 2345, 6780])
        );
        // -0.05: one digit 500 at weight -1; negative; dscale 2.
        assert_eq!(bytes(Decimal::new(-5, 2)), be(&[1, -1, 0x4000, 2, 500]));
        // 0 and 10000 (trailing zero groups dropped).
        assert_eq!(bytes(Decimal::new(0, 2)), be(&[0, 0, 0, 2]));
        assert_eq!(bytes(Decimal::new(10_000, 0)), be(&[1, 1, 0, 0, 1]));
        // A negative scale: 12 × 10^3.
        assert_eq!(bytes(Decimal::new(12, -3)), be(&[2, 1, 0, 0, 1, 2000]));
    }

    #[test]
    fn values_fit_their_columns_or_say_why_not() {
        let mut out = BytesMut::new();
        let big = Value::Int64(1 << 40);
        let p = Param {
            column: "id",
            value: &big,
        };
        let Err(e) = p.to_sql(&Type::INT4, &mut out) else {
            panic!("out of range")
        };
        assert_eq!(
            e.to_string(),
            "column id: 1099511627776 is out of range for int4"
        );
        assert!(p.to_sql(&Type::INT8, &mut out).is_ok());
        let s = Value::String("apple".into());
        let p = Param {
            column: "item",
            value: &s,
        };
        assert!(p.to_sql(&Type::VARCHAR, &mut out).is_ok());
        let Err(e) = p.to_sql(&Type::INT4, &mut out) else {
            panic!("a string is no int")
        };
        assert_eq!(
            e.to_string(),
            "column item: a string value cannot be written to a int4 column"
        );
        let ts = Value::Timestamp(PG_EPOCH_MILLIS + 1);
        let mut out = BytesMut::new();
        Param {
            column: "at",
            value: &ts,
        }
        .to_sql(&Type::TIMESTAMP, &mut out)
        .expect("a timestamp");
        assert_eq!(out.to_vec(), 1000i64.to_be_bytes());
        let mut out = BytesMut::new();
        let date = Value::Date(PG_EPOCH_DAYS as i32 + 2);
        Param {
            column: "d",
            value: &date,
        }
        .to_sql(&Type::DATE, &mut out)
        .expect("a date");
        assert_eq!(out.to_vec(), 2i32.to_be_bytes());
    }
}
