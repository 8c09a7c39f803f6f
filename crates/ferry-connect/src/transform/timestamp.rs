//! `TimestampConverter$Key` / `$Value`: a timestamp (the whole key or value, or one field)
//! between text in a SimpleDateFormat pattern, Unix time, and the Date, Time and Timestamp
//! logical types.

use std::sync::Arc;

use crate::config::ConfigType;
use crate::data::{Schema, SchemaType, Struct, Value};
use crate::datefmt::DatePattern;
use crate::error::{ConnectError, Result};
use crate::logical::{date_schema, time_schema, timestamp_schema, Logical, MILLIS_PER_DAY};

use super::fields::{require_map, require_struct, struct_schema};
use super::{key, prop, Applied, ConnectRecord, Part, Props, TransformClass, Transformation};

pub fn classes() -> Vec<TransformClass> {
    let config = || {
        vec![
            key(
                "field",
                ConfigType::String,
                "The field holding the timestamp; empty: the whole key or value.",
            )
            .default(""),
            key(
                "target.type",
                ConfigType::String,
                "string, unix, Date, Time or Timestamp.",
            )
            .required()
            .validator(|v| Target::parse(v).map(|_| ())),
            key(
                "format",
                ConfigType::String,
                "SimpleDateFormat pattern of string timestamps, read or written.",
            )
            .default("")
            .validator(|v| {
                if v.is_empty() {
                    Ok(())
                } else {
                    DatePattern::parse(v).map(|_| ()).map_err(|e| e.message)
                }
            }),
            key(
                "unix.precision",
                ConfigType::String,
                "seconds, milliseconds, microseconds or nanoseconds.",
            )
            .default("milliseconds")
            .validator(|v| unix_factor(v).map(|_| ())),
        ]
    };
    vec![
        TransformClass {
            class: "org.apache.kafka.connect.transforms.TimestampConverter$Key",
            config,
            build: |p| TimestampConverter::build(p, Part::Key),
        },
        TransformClass {
            class: "org.apache.kafka.connect.transforms.TimestampConverter$Value",
            config,
            build: |p| TimestampConverter::build(p, Part::Value),
        },
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    String,
    Unix,
    Date,
    Time,
    Timestamp,
}

impl Target {
    fn parse(v: &str) -> std::result::Result<Target, String> {
        Ok(match v.trim() {
            "string" => Target::String,
            "unix" => Target::Unix,
            "Date" => Target::Date,
            "Time" => Target::Time,
            "Timestamp" => Target::Timestamp,
            other => {
                return Err(format!(
                    "must be string, unix, Date, Time or Timestamp, got {other:?}"
                ))
            }
        })
    }
}

/// How many units of `unix.precision` a millisecond is, as (numerator, denominator).
fn unix_factor(v: &str) -> std::result::Result<(i64, i64), String> {
    Ok(match v.trim() {
        "seconds" => (1, 1000),
        "milliseconds" => (1, 1),
        "microseconds" => (1000, 1),
        "nanoseconds" => (1_000_000, 1),
        other => {
            return Err(format!(
                "must be seconds, milliseconds, microseconds or nanoseconds, got {other:?}"
            ))
        }
    })
}

struct TimestampConverter {
    part: Part,
    field: Option<String>,
    target: Target,
    format: Option<DatePattern>,
    unix: (i64, i64),
}

impl TimestampConverter {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        let target = Target::parse(prop(props, "target.type", ""))
            .map_err(|e| ConnectError::config("target.type", e))?;
        let format = match prop(props, "format", "") {
            "" => None,
            f => {
                Some(DatePattern::parse(f).map_err(|e| ConnectError::config("format", e.message))?)
            }
        };
        if target == Target::String && format.is_none() {
            return Err(ConnectError::config(
                "format",
                "required when target.type is string",
            ));
        }
        let field = Some(prop(props, "field", "").trim().to_string()).filter(|f| !f.is_empty());
        Ok(Box::new(TimestampConverter {
            part,
            field,
            target,
            format,
            unix: unix_factor(prop(props, "unix.precision", "milliseconds"))
                .map_err(|e| ConnectError::config("unix.precision", e))?,
        }))
    }

    /// The instant a value holds, in milliseconds since the epoch.
    fn millis(&self, value: &Value) -> Result<i64> {
        let (num, den) = self.unix;
        Ok(match value {
            Value::Timestamp(ms) => *ms,
            Value::Date(days) => i64::from(*days) * MILLIS_PER_DAY,
            Value::Time(ms) => i64::from(*ms),
            Value::Int64(units) => units * den / num,
            Value::Int32(units) => i64::from(*units) * den / num,
            Value::String(text) => self
                .format
                .as_ref()
                .ok_or_else(|| ConnectError::data("a string timestamp needs format to be read"))?
                .parse_text(text)?,
            other => {
                return Err(ConnectError::data(format!(
                    "a {} value is not a timestamp (string, unix, Date, Time or Timestamp)",
                    other.kind()
                )))
            }
        })
    }

    fn convert(&self, value: &Value) -> Result<Value> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        let ms = self.millis(value)?;
        let (num, den) = self.unix;
        Ok(match self.target {
            Target::String => Value::String(
                self.format
                    .as_ref()
                    .map(|f| f.format(ms))
                    .unwrap_or_default(),
            ),
            Target::Unix => Value::Int64(ms * num / den),
            Target::Date => Value::Date(ms.div_euclid(MILLIS_PER_DAY) as i32),
            Target::Time => Value::Time(ms.rem_euclid(MILLIS_PER_DAY) as i32),
            Target::Timestamp => Value::Timestamp(ms),
        })
    }

    fn schema(&self, optional: bool) -> Arc<Schema> {
        let s = match self.target {
            Target::String => Schema::of(SchemaType::String),
            Target::Unix => Schema::of(SchemaType::Int64),
            Target::Date => date_schema(),
            Target::Time => time_schema(),
            Target::Timestamp => timestamp_schema(),
        };
        Arc::new(if optional { s.optional() } else { s })
    }

    fn check_input(schema: &Schema) -> Result<()> {
        match (Logical::of(schema)?, schema.ty) {
            (Some(Logical::Date | Logical::Time | Logical::Timestamp), _)
            | (None, SchemaType::String | SchemaType::Int64) => Ok(()),
            _ => Err(ConnectError::data(format!(
                "a {} schema is not a timestamp (string, int64, Date, Time or Timestamp)",
                schema.ty.name()
            ))),
        }
    }
}

impl Transformation for TimestampConverter {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.part.get(record);
        let Some(field) = &self.field else {
            if let Some(s) = &schema {
                Self::check_input(s)?;
            }
            let converted = self.convert(&value)?;
            let schema = schema.map(|s| self.schema(s.optional));
            self.part.set(record, schema, converted);
            return Ok(Applied::Keep);
        };
        if value.is_null() {
            return Ok(Applied::Keep);
        }
        let in_field =
            |e: ConnectError| ConnectError::data(format!("field {field}: {}", e.message));
        match schema {
            Some(schema) => {
                let s = require_struct(&value, "converting timestamp formats")?;
                let f = schema
                    .field(field)
                    .ok_or_else(|| ConnectError::data(format!("unknown field: {field}")))?;
                Self::check_input(&f.schema).map_err(in_field)?;
                let fields = schema
                    .fields
                    .iter()
                    .map(|g| {
                        (
                            g.name.clone(),
                            if g.name == *field {
                                self.schema(g.schema.optional)
                            } else {
                                g.schema.clone()
                            },
                        )
                    })
                    .collect();
                let new_schema = Arc::new(struct_schema(fields, Some(&schema)));
                let mut out = Struct::new(new_schema.clone())?;
                for g in &schema.fields {
                    let v = s.raw(g.index);
                    let v = if g.name == *field {
                        self.convert(v).map_err(in_field)?
                    } else {
                        v.clone()
                    };
                    out.put(&g.name, v)?;
                }
                self.part.set(record, Some(new_schema), Value::Struct(out));
            }
            None => {
                let entries = require_map(&value, "converting timestamp formats")?
                    .iter()
                    .map(|(k, v)| {
                        let ours = matches!(k, Value::String(name) if name == field);
                        Ok((
                            k.clone(),
                            if ours {
                                self.convert(v).map_err(in_field)?
                            } else {
                                v.clone()
                            },
                        ))
                    })
                    .collect::<Result<_>>()?;
                self.part.set(record, None, Value::Map(entries));
            }
        }
        Ok(Applied::Keep)
    }
}
