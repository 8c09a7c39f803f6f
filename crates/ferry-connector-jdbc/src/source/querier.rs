//! A table (or the query) a task reads: where it is, and the rows of a read in progress.

use std::error::Error;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use ferry_connect::record::SourceMap;
use ferry_connect::{ConnectError, Result, Schema, Value};
use postgres_types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio::time::Instant;
use tokio_postgres::RowStream;

use crate::bind::Param;
use crate::column::{integer, timestamp_micros, SourceColumn, PG_EPOCH_MICROS};
use crate::dialect::TableId;
use crate::pg::classify;
use crate::query::{Bound, Key, Offset};

use super::name_of;

/// One table of a task (or the query), and where it has been read up to.
pub(super) struct Querier {
    pub(super) table: Option<TableId>,
    pub(super) topic: String,
    pub(super) partition: Arc<SourceMap>,
    pub(super) offset: Offset,
    /// Whether `timestamp.initial` was applied (once, without a committed offset).
    pub(super) started: bool,
    pub(super) next_run: Instant,
}

impl Querier {
    pub(super) fn label(&self) -> String {
        match &self.table {
            Some(t) => name_of(t),
            None => "the query".to_string(),
        }
    }
}

/// A result being read: its columns and where offsets come from.
pub(super) struct Reading {
    pub(super) querier: usize,
    pub(super) stream: Pin<Box<RowStream>>,
    pub(super) columns: Vec<SourceColumn>,
    pub(super) incrementing: Option<usize>,
    pub(super) timestamps: Vec<usize>,
    /// The row schema when no column's schema depends on its value.
    pub(super) schema: Option<Arc<Schema>>,
    /// The row read after the last one returned.
    pub(super) lookahead: Option<(Vec<Value>, Key)>,
}

/// A value's bytes as the server sent them, whatever the type.
pub(super) struct Raw<'a>(pub(super) &'a [u8]);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(Raw(raw))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A query bound: integers narrowed to their column's type, timestamps in microseconds.
#[derive(Debug)]
pub(super) struct BoundParam(pub(super) Bound);

impl ToSql for BoundParam {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self.0 {
            Bound::Int(i) => Param {
                column: "incrementing.column.name",
                value: &Value::Int64(i),
            }
            .to_sql(ty, out),
            Bound::Timestamp(micros) => match *ty {
                Type::TIMESTAMP | Type::TIMESTAMPTZ => {
                    out.put_i64(micros - PG_EPOCH_MICROS);
                    Ok(IsNull::No)
                }
                _ => Err(format!(
                    "timestamp.column.name: a {} column is not a timestamp",
                    ty.name()
                )
                .into()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A row's values and offset key; errors name the table and column.
pub(super) fn decode_row(
    reading: &Reading,
    row: &tokio_postgres::Row,
    label: &str,
) -> Result<(Vec<Value>, Key)> {
    if row.len() != reading.columns.len() {
        return Err(ConnectError::retriable(format!(
            "{label} changed while it was read ({} columns, now {})",
            reading.columns.len(),
            row.len()
        )));
    }
    let mut raws = Vec::with_capacity(row.len());
    for i in 0..row.len() {
        let raw: Option<Raw> = row
            .try_get(i)
            .map_err(|e| classify(&format!("read {label}"), &e))?;
        raws.push(raw.map(|r| r.0));
    }
    let bad = |e: String| ConnectError::data(format!("{label}: {e}"));
    let mut key = Key::default();
    if let Some(at) = reading.incrementing {
        let column = &reading.columns[at];
        key.incrementing = match raws[at] {
            Some(raw) => Some(
                integer(column.kind, raw)
                    .map_err(|e| bad(format!("column {}: {e}", column.name)))?,
            ),
            None => None,
        };
    }
    key.timestamp = match reading
        .timestamps
        .iter()
        .find_map(|t| raws[*t].map(|r| (*t, r)))
    {
        Some((at, raw)) => Some(
            timestamp_micros(raw)
                .map_err(|e| bad(format!("column {}: {e}", reading.columns[at].name)))?,
        ),
        None => None,
    };
    let values = reading
        .columns
        .iter()
        .zip(&raws)
        .map(|(c, raw)| c.decode(*raw).map_err(|e| bad(e.message)))
        .collect::<Result<Vec<Value>>>()?;
    Ok((values, key))
}
