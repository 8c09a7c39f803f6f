//! Transforms of headers: InsertHeader, DropHeaders and HeaderFrom (`$Key` / `$Value`).

use std::sync::Arc;

use crate::config::{non_empty, ConfigDef, ConfigType};
use crate::data::{Schema, Struct, Value};
use crate::error::{ConnectError, Result};
use crate::record::Header;
use crate::value_text::parse_text;

use super::fields::{require_map, require_struct, struct_schema};
use super::{key, list, prop, Applied, ConnectRecord, Part, Props, TransformClass, Transformation};

pub fn classes() -> Vec<TransformClass> {
    let header_from = |part: Part| -> fn(&Props) -> Result<Box<dyn Transformation>> {
        match part {
            Part::Key => |p| HeaderFrom::build(p, Part::Key),
            Part::Value => |p| HeaderFrom::build(p, Part::Value),
        }
    };
    vec![
        TransformClass {
            class: "org.apache.kafka.connect.transforms.InsertHeader",
            config: || {
                vec![
                    key("header", ConfigType::String, "The header's key.")
                        .required()
                        .validator(non_empty),
                    key(
                        "value.literal",
                        ConfigType::String,
                        "The header's value, as text (typed as SimpleHeaderConverter would).",
                    )
                    .required(),
                ]
            },
            build: |p| {
                let value = parse_text(prop(p, "value.literal", ""));
                Ok(Box::new(InsertHeader {
                    header: prop(p, "header", "").to_string(),
                    schema: value.schema,
                    value: value.value,
                }))
            },
        },
        TransformClass {
            class: "org.apache.kafka.connect.transforms.DropHeaders",
            config: || {
                vec![key("headers", ConfigType::List, "Header keys to remove.")
                    .required()
                    .validator(non_empty)]
            },
            build: |p| {
                Ok(Box::new(DropHeaders {
                    headers: list(p, "headers"),
                }))
            },
        },
        TransformClass {
            class: "org.apache.kafka.connect.transforms.HeaderFrom$Key",
            config: header_from_config,
            build: header_from(Part::Key),
        },
        TransformClass {
            class: "org.apache.kafka.connect.transforms.HeaderFrom$Value",
            config: header_from_config,
            build: header_from(Part::Value),
        },
    ]
}

/// `InsertHeader`: adds a header with a fixed value.
struct InsertHeader {
    header: String,
    schema: Option<Arc<Schema>>,
    value: Value,
}

impl Transformation for InsertHeader {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        record.headers_mut().push(Header {
            key: self.header.clone(),
            schema: self.schema.clone(),
            value: self.value.clone(),
        });
        Ok(Applied::Keep)
    }
}

/// `DropHeaders`: removes every header with one of these keys.
struct DropHeaders {
    headers: Vec<String>,
}

impl Transformation for DropHeaders {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        record
            .headers_mut()
            .retain(|h| !self.headers.contains(&h.key));
        Ok(Applied::Keep)
    }
}

fn header_from_config() -> ConfigDef {
    vec![
        key(
            "fields",
            ConfigType::List,
            "Fields whose values become headers.",
        )
        .required()
        .validator(non_empty),
        key(
            "headers",
            ConfigType::List,
            "The header keys, one per field, in the same order.",
        )
        .required()
        .validator(non_empty),
        key(
            "operation",
            ConfigType::String,
            "copy (the fields stay) or move (they are removed).",
        )
        .required()
        .validator(copy_or_move),
    ]
}

fn copy_or_move(value: &str) -> std::result::Result<(), String> {
    match value.trim() {
        "copy" | "move" => Ok(()),
        other => Err(format!("must be copy or move, got {other:?}")),
    }
}

/// `HeaderFrom`: fields of the key (or value) become headers, copied or moved.
struct HeaderFrom {
    part: Part,
    pairs: Vec<(String, String)>,
    moving: bool,
}

impl HeaderFrom {
    fn build(props: &Props, part: Part) -> Result<Box<dyn Transformation>> {
        let fields = list(props, "fields");
        let headers = list(props, "headers");
        if fields.len() != headers.len() {
            return Err(ConnectError::config(
                "headers",
                format!(
                    "{} header keys for {} fields; give one per field",
                    headers.len(),
                    fields.len()
                ),
            ));
        }
        Ok(Box::new(HeaderFrom {
            part,
            pairs: fields.into_iter().zip(headers).collect(),
            moving: prop(props, "operation", "copy").trim() == "move",
        }))
    }
}

impl Transformation for HeaderFrom {
    fn apply(&self, record: &mut dyn ConnectRecord) -> Result<Applied> {
        let (schema, value) = self.part.get(record);
        if value.is_null() {
            return Ok(Applied::Keep);
        }
        let mut added = Vec::new();
        match &schema {
            Some(schema) => {
                let s = require_struct(&value, "header extraction")?;
                for (field, header) in &self.pairs {
                    let f = schema
                        .field(field)
                        .ok_or_else(|| ConnectError::data(format!("unknown field: {field}")))?;
                    added.push(Header {
                        key: header.clone(),
                        schema: Some(f.schema.clone()),
                        value: s.get(field).cloned().unwrap_or(Value::Null),
                    });
                }
                if self.moving {
                    let moved = |name: &str| self.pairs.iter().any(|(f, _)| f == name);
                    let kept: Vec<_> = schema.fields.iter().filter(|f| !moved(&f.name)).collect();
                    let new_schema = Arc::new(struct_schema(
                        kept.iter()
                            .map(|f| (f.name.clone(), f.schema.clone()))
                            .collect(),
                        Some(schema),
                    ));
                    let mut out = Struct::new(new_schema.clone())?;
                    for f in kept {
                        out.put(&f.name, s.raw(f.index).clone())?;
                    }
                    self.part.set(record, Some(new_schema), Value::Struct(out));
                }
            }
            None => {
                let entries = require_map(&value, "header extraction")?;
                for (field, header) in &self.pairs {
                    let v = entries
                        .iter()
                        .find(|(k, _)| matches!(k, Value::String(s) if s == field))
                        .map_or(Value::Null, |(_, v)| v.clone());
                    added.push(Header {
                        key: header.clone(),
                        schema: None,
                        value: v,
                    });
                }
                if self.moving {
                    let kept = entries
                        .iter()
                        .filter(|(k, _)| !matches!(k, Value::String(s) if self.pairs.iter().any(|(f, _)| f == s)))
                        .cloned()
                        .collect();
                    self.part.set(record, None, Value::Map(kept));
                }
            }
        }
        record.headers_mut().extend(added);
        Ok(Applied::Keep)
    }
}
