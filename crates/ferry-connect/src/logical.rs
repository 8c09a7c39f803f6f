//! Kafka Connect's logical types: `Decimal` (bytes holding an unscaled two's-complement integer,
//! with a `scale` parameter), `Date` (int32 days since the epoch), `Time` (int32 milliseconds
//! since midnight) and `Timestamp` (int64 milliseconds since the epoch). Values of these schemas
//! are [`Value::Decimal`], [`Value::Date`], [`Value::Time`] and [`Value::Timestamp`], as Kafka
//! Connect's are `BigDecimal` and `java.util.Date`; converters and formats turn them into their
//! primitive encodings.

use std::fmt;

use crate::data::{logical, Schema, SchemaType, Value};
use crate::error::{ConnectError, Result};

/// Which logical type a schema is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logical {
    /// A decimal number of a fixed scale.
    Decimal {
        /// Digits after the decimal point.
        scale: i32,
    },
    /// A date: days since 1970-01-01.
    Date,
    /// A time of day in milliseconds.
    Time,
    /// An instant in milliseconds since the epoch.
    Timestamp,
}

impl Logical {
    /// The logical type of `schema`, if its name and type make it one. A Decimal without a
    /// readable `scale` parameter is an error, as in Kafka Connect.
    pub fn of(schema: &Schema) -> Result<Option<Logical>> {
        let Some(name) = schema.name.as_deref() else {
            return Ok(None);
        };
        Ok(match (name, schema.ty) {
            (logical::DECIMAL, SchemaType::Bytes) => {
                let scale = schema
                    .parameters
                    .get(logical::DECIMAL_SCALE)
                    .ok_or_else(|| {
                        ConnectError::data("invalid Decimal schema: scale parameter not found")
                    })?;
                let scale = scale.trim().parse().map_err(|_| {
                    ConnectError::data(format!(
                        "invalid Decimal schema: scale parameter {scale:?} is not an integer"
                    ))
                })?;
                Some(Logical::Decimal { scale })
            }
            (logical::DATE, SchemaType::Int32) => Some(Logical::Date),
            (logical::TIME, SchemaType::Int32) => Some(Logical::Time),
            (logical::TIMESTAMP, SchemaType::Int64) => Some(Logical::Timestamp),
            _ => None,
        })
    }

    /// Whether `value` is a value of this logical type.
    pub fn accepts(self, value: &Value) -> bool {
        match (self, value) {
            (Logical::Decimal { scale }, Value::Decimal(d)) => d.scale == scale,
            (Logical::Date, Value::Date(_))
            | (Logical::Time, Value::Time(_))
            | (Logical::Timestamp, Value::Timestamp(_)) => true,
            _ => false,
        }
    }

    /// The logical value of a primitive one (what a converter read from the wire).
    pub fn to_logical(self, value: Value) -> Result<Value> {
        match (self, value) {
            (Logical::Decimal { scale }, Value::Bytes(b)) => {
                Ok(Value::Decimal(Decimal::from_bytes(&b, scale)?))
            }
            (Logical::Date, Value::Int32(days)) => Ok(Value::Date(days)),
            (Logical::Time, Value::Int32(ms)) => {
                if (0..MILLIS_PER_DAY as i32).contains(&ms) {
                    Ok(Value::Time(ms))
                } else {
                    Err(ConnectError::data(format!(
                        "Time values must be milliseconds within one day, got {ms}"
                    )))
                }
            }
            (Logical::Timestamp, Value::Int64(ms)) => Ok(Value::Timestamp(ms)),
            (_, v) if self.accepts(&v) => Ok(v),
            (_, Value::Null) => Ok(Value::Null),
            (logical, v) => Err(ConnectError::data(format!(
                "a {} value cannot be a {}",
                v.kind(),
                logical.name()
            ))),
        }
    }

    /// The primitive encoding of a logical value.
    pub fn to_primitive(self, value: &Value) -> Result<Value> {
        match (self, value) {
            (Logical::Decimal { scale }, Value::Decimal(d)) if d.scale == scale => {
                Ok(Value::Bytes(d.to_bytes()))
            }
            (Logical::Decimal { scale }, Value::Decimal(d)) => Err(ConnectError::data(format!(
                "a decimal of scale {} does not fit a Decimal schema of scale {scale}",
                d.scale
            ))),
            (Logical::Date, Value::Date(days)) => Ok(Value::Int32(*days)),
            (Logical::Time, Value::Time(ms)) => Ok(Value::Int32(*ms)),
            (Logical::Timestamp, Value::Timestamp(ms)) => Ok(Value::Int64(*ms)),
            (_, Value::Null) => Ok(Value::Null),
            (logical, v) => Err(ConnectError::data(format!(
                "invalid type for {}: a {} value",
                logical.name(),
                v.kind()
            ))),
        }
    }

    /// Kafka Connect's name of the logical type.
    pub fn name(self) -> &'static str {
        match self {
            Logical::Decimal { .. } => logical::DECIMAL,
            Logical::Date => logical::DATE,
            Logical::Time => logical::TIME,
            Logical::Timestamp => logical::TIMESTAMP,
        }
    }
}

/// `Decimal.schema(scale)`.
pub fn decimal_schema(scale: i32) -> Schema {
    Schema::of(SchemaType::Bytes)
        .named(logical::DECIMAL)
        .parameter(logical::DECIMAL_SCALE, scale.to_string())
        .versioned(1)
}

/// `Date.SCHEMA`.
pub fn date_schema() -> Schema {
    Schema::of(SchemaType::Int32)
        .named(logical::DATE)
        .versioned(1)
}

/// `Time.SCHEMA`.
pub fn time_schema() -> Schema {
    Schema::of(SchemaType::Int32)
        .named(logical::TIME)
        .versioned(1)
}

/// `Timestamp.SCHEMA`.
pub fn timestamp_schema() -> Schema {
    Schema::of(SchemaType::Int64)
        .named(logical::TIMESTAMP)
        .versioned(1)
}

/// Milliseconds in a day.
pub const MILLIS_PER_DAY: i64 = 86_400_000;

/// A decimal number: `unscaled × 10^-scale`, as Java's `BigDecimal` (here of at most 38 digits:
/// an unscaled value within i128).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    /// The digits, without the decimal point.
    pub unscaled: i128,
    /// How many of them are after the point.
    pub scale: i32,
}

impl Decimal {
    /// `unscaled × 10^-scale`.
    pub fn new(unscaled: i128, scale: i32) -> Self {
        Decimal { unscaled, scale }
    }

    /// Parse decimal text as `BigDecimal(String)` does: an optional sign, digits with an
    /// optional point, an optional exponent (`1.50`, `-3`, `1E+3`, `2.5e-4`).
    pub fn parse(text: &str) -> Result<Decimal> {
        let bad =
            |why: &str| ConnectError::data(format!("{text:?} is not a decimal number: {why}"));
        let t = text.trim();
        let (mantissa, exponent) = match t.find(['e', 'E']) {
            Some(i) => (
                &t[..i],
                t[i + 1..]
                    .parse::<i32>()
                    .map_err(|_| bad("the exponent is not an integer"))?,
            ),
            None => (t, 0),
        };
        let (negative, digits) = match mantissa.as_bytes().first() {
            Some(b'-') => (true, &mantissa[1..]),
            Some(b'+') => (false, &mantissa[1..]),
            _ => (false, mantissa),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && frac.is_empty() {
            return Err(bad("no digits"));
        }
        let mut unscaled: i128 = 0;
        for c in int.chars().chain(frac.chars()) {
            let d = c.to_digit(10).ok_or_else(|| bad("not a digit"))?;
            unscaled = unscaled
                .checked_mul(10)
                .and_then(|u| u.checked_add(i128::from(d)))
                .ok_or_else(|| bad("more than 38 digits"))?;
        }
        let scale = i32::try_from(frac.len())
            .ok()
            .and_then(|f| f.checked_sub(exponent))
            .ok_or_else(|| bad("the exponent is out of range"))?;
        Ok(Decimal {
            unscaled: if negative { -unscaled } else { unscaled },
            scale,
        })
    }

    /// The unscaled value as Java's `BigInteger.toByteArray()`: big-endian two's complement,
    /// in as few bytes as hold the sign.
    pub fn to_bytes(&self) -> Vec<u8> {
        let bytes = self.unscaled.to_be_bytes();
        let negative = self.unscaled < 0;
        let filler = if negative { 0xff } else { 0x00 };
        let mut start = 0;
        while start < bytes.len() - 1
            && bytes[start] == filler
            && (bytes[start + 1] & 0x80 != 0) == negative
        {
            start += 1;
        }
        bytes[start..].to_vec()
    }

    /// The decimal whose unscaled value is the two's-complement `bytes`.
    pub fn from_bytes(bytes: &[u8], scale: i32) -> Result<Decimal> {
        if bytes.is_empty() {
            return Err(ConnectError::data("a Decimal value has no bytes"));
        }
        if bytes.len() > 16 {
            return Err(ConnectError::data(format!(
                "a Decimal of {} bytes is wider than the 38 digits Ferry supports",
                bytes.len()
            )));
        }
        let filler = if bytes[0] & 0x80 != 0 { 0xff } else { 0x00 };
        let mut full = [filler; 16];
        full[16 - bytes.len()..].copy_from_slice(bytes);
        Ok(Decimal {
            unscaled: i128::from_be_bytes(full),
            scale,
        })
    }

    /// This value at another scale, if that loses nothing.
    pub fn rescale(self, scale: i32) -> Result<Decimal> {
        let lossy = || {
            ConnectError::data(format!(
                "{self} cannot be given scale {scale} without rounding or overflow"
            ))
        };
        let diff = scale - self.scale;
        let factor = 10i128.checked_pow(diff.unsigned_abs()).ok_or_else(lossy)?;
        let unscaled = if diff >= 0 {
            self.unscaled.checked_mul(factor).ok_or_else(lossy)?
        } else if self.unscaled % factor == 0 {
            self.unscaled / factor
        } else {
            return Err(lossy());
        };
        Ok(Decimal { unscaled, scale })
    }

    /// The nearest double.
    pub fn to_f64(self) -> f64 {
        // Through the text form, so that the result is the closest double.
        self.to_string().parse().unwrap_or(f64::NAN)
    }
}

/// As `BigDecimal.toString()`: plain notation unless the scale is negative or the number is
/// smaller than 10^-6, then scientific (`1.23E+5`, `1E-7`).
impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.unscaled.unsigned_abs().to_string();
        let sign = if self.unscaled < 0 { "-" } else { "" };
        let len = digits.len() as i64;
        let scale = i64::from(self.scale);
        let adjusted = -scale + (len - 1);
        if scale >= 0 && adjusted >= -6 {
            if scale == 0 {
                write!(f, "{sign}{digits}")
            } else if len > scale {
                let (int, frac) = digits.split_at((len - scale) as usize);
                write!(f, "{sign}{int}.{frac}")
            } else {
                let zeros = "0".repeat((scale - len) as usize);
                write!(f, "{sign}0.{zeros}{digits}")
            }
        } else {
            let (first, rest) = digits.split_at(1);
            let point = if rest.is_empty() { "" } else { "." };
            let exp_sign = if adjusted >= 0 { "+" } else { "" };
            write!(f, "{sign}{first}{point}{rest}E{exp_sign}{adjusted}")
        }
    }
}

/// A civil date (proleptic Gregorian) from days since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days since 1970-01-01 of a civil date.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Milliseconds since the epoch as `java.util.Date.toString()` renders them in UTC
/// (`Thu Jan 01 00:00:00 UTC 1970`): what Kafka Connect's FileStreamSink writes for them.
pub fn java_date_string(millis: i64) -> String {
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let in_day = millis.rem_euclid(MILLIS_PER_DAY) / 1000;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{} {} {d:02} {:02}:{:02}:{:02} UTC {y}",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_print_as_big_decimal_does() {
        let cases = [
            (12345, 2, "123.45"),
            (-12345, 2, "-123.45"),
            (5, 3, "0.005"),
            (0, 0, "0"),
            (0, 2, "0.00"),
            (123, -3, "1.23E+5"),
            (1, 7, "1E-7"),
            (1, 6, "0.000001"),
            (42, 0, "42"),
        ];
        for (unscaled, scale, text) in cases {
            assert_eq!(Decimal::new(unscaled, scale).to_string(), text);
        }
    }

    #[test]
    fn decimals_parse_with_their_scale() {
        let cases = [
            ("1.50", 150, 2),
            ("-3", -3, 0),
            ("1E+3", 1, -3),
            ("2.5e-4", 25, 5),
            ("+.5", 5, 1),
        ];
        for (text, unscaled, scale) in cases {
            assert_eq!(
                Decimal::parse(text).expect(text),
                Decimal::new(unscaled, scale),
                "{text}"
            );
        }
        for bad in [
            "",
            "1.2.3",
            "abc",
            "1e",
            "1234567890123456789012345678901234567890",
        ] {
            assert!(Decimal::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn decimal_bytes_are_minimal_twos_complement() {
        let cases: [(i128, &[u8]); 7] = [
            (0, &[0]),
            (1, &[1]),
            (127, &[127]),
            (128, &[0, 128]),
            (-1, &[0xff]),
            (-128, &[0x80]),
            (-129, &[0xff, 0x7f]),
        ];
        for (unscaled, bytes) in cases {
            let d = Decimal::new(unscaled, 2);
            assert_eq!(d.to_bytes(), bytes, "{unscaled}");
            assert_eq!(Decimal::from_bytes(bytes, 2).expect("bytes"), d);
        }
        assert!(Decimal::from_bytes(&[], 0).is_err());
        assert!(Decimal::from_bytes(&[1; 17], 0).is_err());
    }

    #[test]
    fn rescaling_is_exact_or_refused() {
        let d = Decimal::new(150, 2);
        assert_eq!(d.rescale(3).expect("wider"), Decimal::new(1500, 3));
        assert_eq!(d.rescale(1).expect("exact"), Decimal::new(15, 1));
        assert!(d.rescale(0).is_err(), "1.50 is not an integer");
    }

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        for days in [-800_000, -1, 0, 59, 11_016, 19_723, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(java_date_string(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(
            java_date_string(1_700_000_000_000),
            "Tue Nov 14 22:13:20 UTC 2023"
        );
    }

    #[test]
    fn logical_types_are_known_by_name_and_type() {
        assert_eq!(
            Logical::of(&decimal_schema(2)).expect("valid"),
            Some(Logical::Decimal { scale: 2 })
        );
        assert_eq!(
            Logical::of(&date_schema()).expect("valid"),
            Some(Logical::Date)
        );
        let no_scale = Schema::of(SchemaType::Bytes).named(logical::DECIMAL);
        assert!(Logical::of(&no_scale).is_err());
        let wrong_type = Schema::of(SchemaType::String).named(logical::DATE);
        assert_eq!(Logical::of(&wrong_type).expect("not logical"), None);
        let time = Logical::Time;
        assert!(time.to_logical(Value::Int32(86_400_000)).is_err());
        assert_eq!(
            time.to_logical(Value::Int32(5)).expect("ok"),
            Value::Time(5)
        );
        let dec = Logical::Decimal { scale: 1 };
        assert_eq!(
            dec.to_primitive(&Value::Decimal(Decimal::new(15, 1)))
                .expect("bytes"),
            Value::Bytes(vec![15])
        );
        assert!(dec
            .to_primitive(&Value::Decimal(Decimal::new(15, 2)))
            .is_err());
    }
}
