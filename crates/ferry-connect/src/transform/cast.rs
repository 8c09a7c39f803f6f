//! `Cast$Key` / `Cast$Value`: the whole key or value, or some of its fields, cast to another
//! primitive type (`spec=int64` or `spec=id:int32,price:float64`), as Java casts them.

use std::sync::Arc;

use crate::config::{non_empty, ConfigType};
use crate::data::{Schema, SchemaType, Struct, Value};
use crate::error::{ConnectError, Result};
use crate::value_text::to_text;

use super::fields::{require_map, require_struct, struct_schema};
use super::{key, Applied, ConnectRecord, Part, Props, TransformClass, Transformation};

pub fn classes() -> Vec<TransformClass> {
    let config = || {
        vec![key(
            "spec",
            ConfigType::List,
            "A type for the whole key or value (int8, int16, int32, int64, float32, float64, \
             boolean, string), or field:type pairs.",
        )
        .required()
        .validator(non_empty)]
    };
    vec![
        TransformClass {
            class: "org.apache.kafka.connect.transforms.Cast$Key",
            config,
            build: |p| Cast::build(p, Part::Key),
        },
        TransformClass {
            class: "org.apache.kafka.connect.transforms.Cast$Value",
            config,
            build: |p| Cast::build(p, Part::Value),
        },
    ]
}

fn target(name: &str) -> Result<SchemaType> {
    Ok(match name.trim() {
        "int8" => SchemaType::Int8,
        "int16" => SchemaType::Int16,
        "int32" => SchemaType::Int32,
        "int64" => SchemaType::Int64,
        "float32" => SchemaType::Float32,
        "float64" => SchemaType::Float64,
        "boolean" => SchemaType::Boolean,
        "string" => SchemaType::String,
        other => {
            return Err(ConnectError::config("spec", format!(
                "{other:?} is not a type Cast supports (int8, int16, int32, int64, float32, float64, boolean, string)"
            )))
        }
    })
}

enum Spec {
    Whole(SchemaType),
    Fields(Vec<(String, SchemaType)>),
}

struct Cast {
    part: Part,
    spec: Spec,
}

impl Cast {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        let entries = super::list(props, "spec");
        let spec = match entries.as_slice() {
            [one] if !one.contains(':') => Spec::Whole(target(one)?),
            _ => Spec::Fields(
                entries
                    .iter()
                    .map(|e| match e.split_once(':') {
                        Some((field, ty)) if !field.trim().is_empty() => {
                            Ok((field.trim().to_string(), target(ty)?))
                        }
                        _ => Err(ConnectError::config(
                            "spec",
                            format!(
                                "{e:?} is not field:type (a whole-value cast names one type alone)"
                            ),
                        )),
                    })
                    .collect::<Result<_>>()?,
            ),
        };
        Ok(Box::new(Cast { part, spec }))
    }

    fn field_target(&self, name: &str) -> Option<SchemaType> {
        match &self.spec {
            Spec::Whole(_) => None,
            Spec::Fields(pairs) => pairs.iter().find(|(f, _)| f == name).map(|(_, t)| *t),
        }
    }
}

/// A schema of type `ty`, optional (and documented) as `like` is.
fn cast_schema(like: &Schema, ty: SchemaType) -> Arc<Schema> {
    let mut s = Schema::of(ty);
    s.optional = like.optional;
    s.doc = like.doc.clone();
    Arc::new(s)
}

/// `value` cast to `ty`, as Kafka Connect's Cast does it.
pub fn cast(value: &Value, ty: SchemaType) -> Result<Value> {
    let bad = || {
        ConnectError::data(format!(
            "cannot cast a {} value to {}",
            value.kind(),
            ty.name()
        ))
    };
    if value.is_null() {
        return Ok(Value::Null);
    }
    if ty == SchemaType::String {
        return Ok(Value::String(to_text(value)));
    }
    // Numbers and booleans as a double or an integer, as Java widens them.
    let (int, float): (Option<i64>, f64) = match value {
        Value::Int8(v) => (Some(i64::from(*v)), f64::from(*v)),
        Value::Int16(v) => (Some(i64::from(*v)), f64::from(*v)),
        Value::Int32(v) => (Some(i64::from(*v)), f64::from(*v)),
        Value::Int64(v) => (Some(*v), *v as f64),
        Value::Float32(v) => (None, f64::from(*v)),
        Value::Float64(v) => (None, *v),
        Value::Decimal(d) => (None, d.to_f64()),
        Value::Boolean(b) => (Some(i64::from(*b)), f64::from(u8::from(*b))),
        Value::String(s) => {
            let s = s.trim();
            if ty == SchemaType::Boolean {
                return match s.to_ascii_lowercase().as_str() {
                    "true" => Ok(Value::Boolean(true)),
                    "false" => Ok(Value::Boolean(false)),
                    _ => Err(bad()),
                };
            }
            match s.parse::<i64>() {
                Ok(i) => (Some(i), i as f64),
                Err(_) => (None, s.parse::<f64>().map_err(|_| bad())?),
            }
        }
        _ => return Err(bad()),
    };
    // Java's narrowing: integers wrap, doubles truncate toward zero (saturating).
    let whole = int.unwrap_or(float as i64);
    Ok(match ty {
        SchemaType::Int8 => Value::Int8(whole as i8),
        SchemaType::Int16 => Value::Int16(whole as i16),
        SchemaType::Int32 => Value::Int32(whole as i32),
        SchemaType::Int64 => Value::Int64(whole),
        SchemaType::Float32 => Value::Float32(float as f32),
        SchemaType::Float64 => Value::Float64(float),
        SchemaType::Boolean => Value::Boolean(match int {
            Some(i) => i != 0,
            None => float != 0.0,
        }),
        _ => return Err(bad()),
    })
}

impl Transformation for Cast {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.part.get(record);
        match (&self.spec, schema) {
            (Spec::Whole(ty), schema) => {
                let cast_value = cast(&value, *ty)?;
                let schema = schema.map(|s| cast_schema(&s, *ty));
                self.part.set(record, schema, cast_value);
            }
            (Spec::Fields(_), Some(schema)) => {
                if value.is_null() {
                    return Ok(Applied::Keep);
                }
                let s = require_struct(&value, "casting fields")?;
                let fields = schema
                    .fields
                    .iter()
                    .map(|f| {
                        let fs = match self.field_target(&f.name) {
                            Some(ty) => cast_schema(&f.schema, ty),
                            None => f.schema.clone(),
                        };
                        (f.name.clone(), fs)
                    })
                    .collect();
                let new_schema = Arc::new(struct_schema(fields, Some(&schema)));
                let mut out = Struct::new(new_schema.clone())?;
                for f in &schema.fields {
                    let v = s.raw(f.index);
                    let v = match self.field_target(&f.name) {
                        Some(ty) => cast(v, ty).map_err(|e| {
                            ConnectError::data(format!("field {}: {}", f.name, e.message))
                        })?,
                        None => v.clone(),
                    };
                    out.put(&f.name, v)?;
                }
                self.part.set(record, Some(new_schema), Value::Struct(out));
            }
            (Spec::Fields(_), None) => {
                if value.is_null() {
                    return Ok(Applied::Keep);
                }
                let entries = require_map(&value, "casting fields")?
                    .iter()
                    .map(|(k, v)| {
                        let ty = match k {
                            Value::String(name) => self.field_target(name),
                            _ => None,
                        };
                        Ok((
                            k.clone(),
                            match ty {
                                Some(ty) => cast(v, ty).map_err(|e| {
                                    ConnectError::data(format!("field {k}: {}", e.message))
                                })?,
                                None => v.clone(),
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
