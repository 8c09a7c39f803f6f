//! What the sink writes for one record, as Confluent's JDBC sink decides it: the table
//! (`table.name.format`), the key columns (`pk.mode`, `pk.fields`), the other columns (the
//! value's fields, `fields.whitelist`), and whether it is a write or a delete (a tombstone
//! with `delete.enabled`). Pure; errors name the record and the field.

use std::sync::Arc;

use ferry_connect::{ConnectError, Result, Schema, SchemaType, SinkRecord, Value};

use crate::config::{InsertMode, JdbcSinkConfig, PkMode};
use crate::dialect::{sql_type, Column, Dialect, TableId};

/// One column's value, with the schema it came with (for auto.create).
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The column's name.
    pub name: String,
    /// Its value.
    pub value: Value,
    /// The schema it came with.
    pub schema: Arc<Schema>,
}

/// What a row's statement does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// INSERT.
    Insert,
    /// INSERT … ON CONFLICT DO UPDATE.
    Upsert,
    /// UPDATE … WHERE key.
    Update,
    /// DELETE … WHERE key (a tombstone).
    Delete,
}

/// The statement for one record.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The destination table.
    pub table: TableId,
    /// What the statement does.
    pub op: Op,
    /// The key columns.
    pub keys: Vec<Cell>,
    /// The other columns.
    pub others: Vec<Cell>,
}

/// Kafka Connect's names of the kafka pk.mode's columns.
const KAFKA_COLUMNS: [&str; 3] = ["__connect_topic", "__connect_partition", "__connect_offset"];

fn at(record: &SinkRecord) -> String {
    format!(
        "the record at {}-{} offset {}",
        record.topic, record.partition, record.offset
    )
}

fn schema_of(ty: SchemaType) -> Arc<Schema> {
    Arc::new(Schema::of(ty))
}

/// The fields of a struct value, in schema order, those `only` names (all when empty).
fn fields_of(value: &Value, only: &[String], what: &str, record: &SinkRecord) -> Result<Vec<Cell>> {
    let Value::Struct(s) = value else {
        return Err(ConnectError::data(format!(
            "{}: its {what} is not a struct with a schema (use a converter with schemas, such as JsonConverter with schemas.enable=true)",
            at(record)
        )));
    };
    for name in only {
        if s.schema.field(name).is_none() {
            return Err(ConnectError::data(format!(
                "{}: its {what} has no field {name:?}",
                at(record)
            )));
        }
    }
    Ok(s.schema
        .fields
        .iter()
        .filter(|f| only.is_empty() || only.contains(&f.name))
        .map(|f| Cell {
            name: f.name.clone(),
            value: s.get(&f.name).cloned().unwrap_or(Value::Null),
            schema: f.schema.clone(),
        })
        .collect())
}

/// The row of `record` under `config`.
pub fn row_of(config: &JdbcSinkConfig, record: &SinkRecord) -> Result<Row> {
    let table = TableId::parse(&config.table_of(&record.topic))?;
    let tombstone = matches!(record.value, Value::Null);
    if tombstone && !config.delete_enabled {
        return Err(ConnectError::data(format!(
            "{}: a null value (a tombstone) is only written as a delete, with delete.enabled=true and pk.mode=record_key",
            at(record)
        )));
    }
    let keys = match config.pk_mode {
        PkMode::None => Vec::new(),
        PkMode::Kafka => {
            let names: Vec<&str> = if config.pk_fields.len() == 3 {
                config.pk_fields.iter().map(String::as_str).collect()
            } else {
                KAFKA_COLUMNS.to_vec()
            };
            vec![
                Cell {
                    name: names[0].into(),
                    value: Value::String(record.topic.clone()),
                    schema: schema_of(SchemaType::String),
                },
                Cell {
                    name: names[1].into(),
                    value: Value::Int32(record.partition),
                    schema: schema_of(SchemaType::Int32),
                },
                Cell {
                    name: names[2].into(),
                    value: Value::Int64(record.offset),
                    schema: schema_of(SchemaType::Int64),
                },
            ]
        }
        PkMode::RecordKey => match (&record.key, &record.key_schema) {
            (Value::Struct(_), _) => fields_of(&record.key, &config.pk_fields, "key", record)?,
            (Value::Null, _) => {
                return Err(ConnectError::data(format!(
                    "{}: pk.mode=record_key needs a key, and it has none",
                    at(record)
                )))
            }
            (key, schema) => {
                let [name] = config.pk_fields.as_slice() else {
                    return Err(ConnectError::data(format!(
                        "{}: its key is a primitive value, so pk.fields must name its one column",
                        at(record)
                    )));
                };
                let schema = schema.clone().unwrap_or_else(|| {
                    schema_of(match key {
                        Value::Int32(_) => SchemaType::Int32,
                        Value::Int64(_) => SchemaType::Int64,
                        _ => SchemaType::String,
                    })
                });
                vec![Cell {
                    name: name.clone(),
                    value: key.clone(),
                    schema,
                }]
            }
        },
        PkMode::RecordValue => fields_of(&record.value, &config.pk_fields, "value", record)?,
    };
    if tombstone {
        return Ok(Row {
            table,
            op: Op::Delete,
            keys,
            others: Vec::new(),
        });
    }
    let key_names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    let others: Vec<Cell> = fields_of(&record.value, &config.fields, "value", record)?
        .into_iter()
        .filter(|c| !key_names.contains(&c.name.as_str()))
        .collect();
    let op = match config.insert_mode {
        InsertMode::Insert => Op::Insert,
        InsertMode::Upsert => Op::Upsert,
        InsertMode::Update => Op::Update,
    };
    Ok(Row {
        table,
        op,
        keys,
        others,
    })
}

impl Row {
    /// The statement and the order of its parameters.
    pub fn sql(&self, dialect: &Dialect) -> (String, Vec<&Cell>) {
        let names = |cells: &[Cell]| cells.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        let (keys, others) = (names(&self.keys), names(&self.others));
        let keys_then_others: Vec<&Cell> = self.keys.iter().chain(&self.others).collect();
        match self.op {
            Op::Insert => {
                let all: Vec<String> = keys.iter().chain(&others).cloned().collect();
                (dialect.insert(&self.table, &all), keys_then_others)
            }
            Op::Upsert => (
                dialect.upsert(&self.table, &keys, &others),
                keys_then_others,
            ),
            Op::Update => (
                dialect.update(&self.table, &keys, &others),
                self.others.iter().chain(&self.keys).collect(),
            ),
            Op::Delete => (
                dialect.delete(&self.table, &keys),
                self.keys.iter().collect(),
            ),
        }
    }

    /// The columns of this row, for auto.create and auto.evolve (keys required).
    pub fn columns(&self) -> Result<Vec<Column>> {
        let mut columns = Vec::new();
        for (cell, is_key) in self
            .keys
            .iter()
            .map(|c| (c, true))
            .chain(self.others.iter().map(|c| (c, false)))
        {
            columns.push(Column {
                name: cell.name.clone(),
                sql_type: sql_type(&cell.name, &cell.schema)?,
                optional: !is_key && cell.schema.optional,
                default: None,
            });
        }
        Ok(columns)
    }
}

#[cfg(test)]
mod tests;
