//! The source's queries and offsets, as Confluent's JDBC source keeps them: the offset of a
//! table is `{"incrementing": id}`, `{"timestamp": epoch ms, "timestamp_nanos": ns of the
//! second}` or both, so that a table's position reads the same here as in Kafka Connect, with
//! PostgreSQL's microseconds kept. Pure: no connection here.
//!
//! Ferry never skips a row where Confluent can: without an offset every row is read (no
//! initial `-1` or epoch bound), and in `timestamp` mode a row's offset moves to its timestamp
//! only once every row of that timestamp has been returned, so a task stopped in the middle of
//! rows sharing a timestamp reads them again rather than skipping the rest.

use ferry_connect::record::SourceMap;
use ferry_connect::{ConnectError, Result};
use serde_json::json;

use crate::config::SourceMode;
use crate::dialect::Dialect;

/// The offset key of the incrementing column's last value (Confluent's).
pub const INCREMENTING: &str = "incrementing";
/// The offset key of the last timestamp, in milliseconds (Confluent's).
pub const TIMESTAMP: &str = "timestamp";
/// The offset key of the nanoseconds of the last timestamp within its second (Confluent's).
pub const TIMESTAMP_NANOS: &str = "timestamp_nanos";

/// Where a table (or the query) has been read up to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offset {
    /// The last value of the incrementing column read.
    pub incrementing: Option<i64>,
    /// Microseconds since the epoch.
    pub timestamp: Option<i64>,
}

impl Offset {
    /// Confluent's offset map.
    pub fn to_map(&self) -> SourceMap {
        let mut map = SourceMap::new();
        if let Some(i) = self.incrementing {
            map.insert(INCREMENTING.to_string(), json!(i));
        }
        if let Some(micros) = self.timestamp {
            let seconds = micros.div_euclid(1_000_000);
            let sub = micros.rem_euclid(1_000_000);
            map.insert(TIMESTAMP.to_string(), json!(seconds * 1000 + sub / 1000));
            map.insert(TIMESTAMP_NANOS.to_string(), json!(sub * 1000));
        }
        map
    }

    /// An offset map as Confluent's connector or this one wrote it; the error names the key.
    pub fn from_map(map: &SourceMap) -> Result<Offset> {
        let int = |key: &str| -> Result<Option<i64>> {
            match map.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(v) => v.as_i64().map(Some).ok_or_else(|| {
                    ConnectError::fatal(format!(
                        "the committed source offset has {key}={v}, which is not an integer"
                    ))
                }),
            }
        };
        let millis = int(TIMESTAMP)?;
        let nanos = int(TIMESTAMP_NANOS)?;
        let timestamp = millis.map(|ms| {
            let seconds = ms.div_euclid(1000);
            match nanos {
                // The nanoseconds of the second, milliseconds included.
                Some(ns) => seconds * 1_000_000 + ns / 1000,
                None => ms * 1000,
            }
        });
        Ok(Offset {
            incrementing: int(INCREMENTING)?,
            timestamp,
        })
    }
}

/// The values of a row that offsets are made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Key {
    /// The row's incrementing value.
    pub incrementing: Option<i64>,
    /// The row's timestamp (microseconds since the epoch).
    pub timestamp: Option<i64>,
}

/// The offset of each row of `rows`, read after `previous`; `following` is the row after the
/// last one, if the result has one. In timestamp mode a row whose timestamp the next row
/// shares keeps the last complete timestamp.
pub fn offsets(
    mode: SourceMode,
    previous: &Offset,
    rows: &[Key],
    following: Option<&Key>,
) -> Vec<Offset> {
    let mut last = *previous;
    let mut out = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        match mode {
            SourceMode::Bulk => {}
            SourceMode::Incrementing => last.incrementing = row.incrementing,
            SourceMode::TimestampIncrementing => {
                last.incrementing = row.incrementing;
                last.timestamp = row.timestamp;
            }
            SourceMode::Timestamp => {
                let next = rows.get(i + 1).or(following);
                if next.is_none_or(|n| n.timestamp != row.timestamp) {
                    last.timestamp = row.timestamp;
                }
            }
        }
        out.push(last);
    }
    out
}

/// A parameter of a source query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// An integer.
    Int(i64),
    /// Microseconds since the epoch.
    Timestamp(i64),
}

/// How a table's (or the query's) new rows are selected.
#[derive(Clone, Debug)]
pub struct Criteria<'a> {
    /// How new rows are found.
    pub mode: SourceMode,
    /// The incrementing column, if the mode has one.
    pub incrementing: Option<&'a str>,
    /// The timestamp columns, if the mode has them.
    pub timestamps: &'a [String],
}

impl Criteria<'_> {
    fn timestamp(&self, d: &Dialect) -> String {
        match self.timestamps {
            [one] => d.ident(one),
            many => format!(
                "COALESCE({})",
                many.iter()
                    .map(|c| d.ident(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// `SELECT {columns} FROM {from}` with the conditions and order of the mode after
    /// `offset`; `upper` (microseconds) is the timestamp bound of the timestamp modes (the
    /// database's time less `timestamp.delay.interval.ms`). Returns the SQL and its
    /// parameters.
    pub fn select(
        &self,
        d: &Dialect,
        columns: &str,
        from: &str,
        offset: &Offset,
        upper: Option<i64>,
        suffix: &str,
    ) -> (String, Vec<Bound>) {
        let mut bounds = Vec::new();
        let mut param = |b: Bound| {
            bounds.push(b);
            format!("${}", bounds.len())
        };
        let inc = self.incrementing.map(|c| d.ident(c)).unwrap_or_default();
        let ts = self.timestamp(d);
        let mut conditions = Vec::new();
        let order = match self.mode {
            SourceMode::Bulk => String::new(),
            SourceMode::Incrementing => {
                if let Some(i) = offset.incrementing {
                    conditions.push(format!("{inc} > {}", param(Bound::Int(i))));
                }
                format!(" ORDER BY {inc} ASC")
            }
            SourceMode::Timestamp => {
                if let Some(t) = offset.timestamp {
                    conditions.push(format!("{ts} > {}", param(Bound::Timestamp(t))));
                }
                if let Some(u) = upper {
                    conditions.push(format!("{ts} < {}", param(Bound::Timestamp(u))));
                }
                format!(" ORDER BY {ts} ASC")
            }
            SourceMode::TimestampIncrementing => {
                if let Some(u) = upper {
                    conditions.push(format!("{ts} < {}", param(Bound::Timestamp(u))));
                }
                match (offset.timestamp, offset.incrementing) {
                    (Some(t), Some(i)) => {
                        let at = param(Bound::Timestamp(t));
                        let after = param(Bound::Int(i));
                        conditions.push(format!(
                            "(({ts} = {at} AND {inc} > {after}) OR {ts} > {at})"
                        ));
                    }
                    // Only a timestamp (the offset of another mode): its rows again.
                    (Some(t), None) => {
                        conditions.push(format!("{ts} >= {}", param(Bound::Timestamp(t))))
                    }
                    (None, _) => {}
                }
                format!(" ORDER BY {ts}, {inc} ASC")
            }
        };
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        let suffix = if suffix.trim().is_empty() {
            String::new()
        } else {
            format!(" {}", suffix.trim())
        };
        (
            format!("SELECT {columns} FROM {from}{filter}{order}{suffix}"),
            bounds,
        )
    }
}

#[cfg(test)]
mod tests;
