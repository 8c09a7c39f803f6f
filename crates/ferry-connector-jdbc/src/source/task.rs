//! The JDBC source task: each of its tables queried in turn, rows as records.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferry_connect::record::SourceMap;
use ferry_connect::task::Props;
use ferry_connect::{
    ConnectError, Result, SourceRecord, SourceTask, SourceTaskContext, Struct, Value,
};
use futures::StreamExt;
use postgres_types::ToSql;
use tokio::time::Instant;
use tokio_postgres::Client;
use tracing::{debug, info, warn};

use crate::column::{kind_of, row_schema, timestamp_micros, Kind, SourceColumn};
use crate::config::{JdbcSourceConfig, TABLES};
use crate::dialect::{Dialect, TableId};
use crate::pg::{classify, connect, describe};
use crate::query::{offsets, Criteria, Key, Offset};

use super::querier::*;
use super::{name_of, APPLICATION};

/// The longest a `poll` waits for a table's turn before returning nothing.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// The alias of a query in the statements that read it.
const QUERY_ALIAS: &str = "ferry_query";

/// Reads its tables' (or the query's) new rows, each table after its committed offset.
pub struct JdbcSourceTask {
    config: JdbcSourceConfig,
    dialect: Dialect,
    queriers: Vec<Querier>,
    client: Option<Client>,
    reading: Option<Reading>,
    /// Whether the last poll read a result to its end.
    just_read: bool,
}

impl JdbcSourceTask {
    /// The task, each table's querier to start after its committed offset.
    pub fn build(props: &Props, context: SourceTaskContext) -> Result<Box<dyn SourceTask>> {
        let config = JdbcSourceConfig::parse(props)?;
        let tables: Vec<Option<TableId>> = match (&config.query, props.get(TABLES)) {
            (Some(_), _) => vec![None],
            (None, Some(json)) => {
                let pairs: Vec<(String, String)> = serde_json::from_str(json).map_err(|e| {
                    ConnectError::fatal(format!("{TABLES}: not a list of tables: {e}"))
                })?;
                pairs
                    .into_iter()
                    .map(|(schema, table)| {
                        Some(TableId {
                            schema: (!schema.is_empty()).then_some(schema),
                            table,
                        })
                    })
                    .collect()
            }
            (None, None) => {
                return Err(ConnectError::fatal(format!(
                    "{TABLES}: a JDBC source task needs its tables (given by the connector)"
                )))
            }
        };
        let database = config.connection.database.clone();
        let mut queriers: Vec<Querier> = tables
            .into_iter()
            .map(|table| {
                let partition: SourceMap = match &table {
                    Some(t) => BTreeMap::from([
                        ("protocol".to_string(), serde_json::json!("1")),
                        (
                            "table".to_string(),
                            serde_json::json!(format!("{database}.{}", name_of(t))),
                        ),
                    ]),
                    None => BTreeMap::from([("query".to_string(), serde_json::json!("query"))]),
                };
                Querier {
                    topic: config.topic_of(table.as_ref()),
                    table,
                    partition: Arc::new(partition),
                    offset: Offset::default(),
                    started: false,
                    next_run: Instant::now(),
                }
            })
            .collect();
        for q in &mut queriers {
            let mut committed = context.offsets.offset(&q.partition);
            if committed.is_none() {
                if let Some(t) = &q.table {
                    let v0 = BTreeMap::from([("table".to_string(), serde_json::json!(t.table))]);
                    committed = context.offsets.offset(&v0);
                }
            }
            if let Some(map) = committed {
                q.offset = Offset::from_map(&map)?;
            }
            info!(querier = %q.label(), topic = %q.topic, offset = ?q.offset, "starting");
        }
        Ok(Box::new(JdbcSourceTask {
            dialect: Dialect {
                quote: config.quote_identifiers,
            },
            config,
            queriers,
            client: None,
            reading: None,
            just_read: false,
        }))
    }

    async fn client(&mut self) -> Result<&Client> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        if self.client.is_none() {
            let client = connect(&self.config.connection, APPLICATION).await?;
            info!(database = %describe(&self.config.connection), "connected");
            self.client = Some(client);
        }
        self.client
            .as_ref()
            .ok_or_else(|| ConnectError::fatal("no PostgreSQL connection"))
    }

    /// `FROM` of a querier: the table, or the query as a subquery.
    fn from(&self, q: &Querier) -> String {
        match (&q.table, &self.config.query) {
            (Some(t), _) => self.dialect.table(t),
            (None, Some(query)) => format!("({query}) AS {}", self.dialect.ident(QUERY_ALIAS)),
            (None, None) => String::new(),
        }
    }

    /// The columns of a querier's rows, with their nullability, and its serial column.
    async fn describe_columns(&mut self, i: usize) -> Result<(Vec<SourceColumn>, Option<String>)> {
        let from = self.from(&self.queriers[i]);
        let label = self.queriers[i].label();
        let mapping = self.config.numeric_mapping;
        let find_serial =
            self.queriers[i].table.is_some() && self.config.incrementing_column.is_none();
        let client = self.client().await?;
        let probe = client
            .prepare(&format!("SELECT * FROM {from}"))
            .await
            .map_err(|e| classify(&format!("read the columns of {label}"), &e))?;
        let oids: Vec<u32> = probe
            .columns()
            .iter()
            .filter_map(|c| c.table_oid())
            .filter(|o| *o != 0)
            .collect::<HashSet<u32>>()
            .into_iter()
            .collect();
        let what = format!("read the nullability of the columns of {label}");
        let not_null: HashMap<(u32, i16), bool> = client
            .query(
                "SELECT attrelid, attnum, attnotnull FROM pg_attribute \
                 WHERE attrelid = ANY($1) AND attnum > 0",
                &[&oids],
            )
            .await
            .map_err(|e| classify(&what, &e))?
            .iter()
            .map(|r| Ok(((r.try_get(0)?, r.try_get(1)?), r.try_get(2)?)))
            .collect::<std::result::Result<_, tokio_postgres::Error>>()
            .map_err(|e| classify(&what, &e))?;
        let mut seen = HashSet::new();
        let mut columns = Vec::new();
        for c in probe.columns() {
            if !seen.insert(c.name().to_string()) {
                return Err(ConnectError::fatal(format!(
                    "{label} has two columns named {}: give them different names",
                    c.name()
                )));
            }
            let required = match (c.table_oid(), c.column_id()) {
                (Some(oid), Some(id)) => not_null.get(&(oid, id)).copied().unwrap_or(false),
                _ => false,
            };
            columns.push(SourceColumn {
                name: c.name().to_string(),
                kind: kind_of(c.type_(), c.type_modifier(), mapping),
                optional: !required,
            });
        }
        let serial = match probe.columns().first() {
            Some(first) if find_serial => {
                let what = format!("find the serial column of {label}");
                client
                    .query_opt(
                        "SELECT a.attname::text FROM pg_attribute a \
                         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
                         WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped \
                         AND (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%') \
                         ORDER BY a.attnum LIMIT 1",
                        &[&first.table_oid().unwrap_or(0)],
                    )
                    .await
                    .map_err(|e| classify(&what, &e))?
                    .map(|r| r.try_get::<_, String>(0))
                    .transpose()
                    .map_err(|e| classify(&what, &e))?
            }
            _ => None,
        };
        Ok((columns, serial))
    }

    /// Start reading the new rows of querier `i`.
    async fn start_query(&mut self, i: usize) -> Result<()> {
        let (columns, serial) = self.describe_columns(i).await?;
        let label = self.queriers[i].label();
        let mode = self.config.mode;
        let index = |name: &str| columns.iter().position(|c| c.name == name);
        let incrementing_name = self.config.incrementing_column.clone().or(serial);
        let incrementing = if mode.incrementing() {
            let name = incrementing_name.as_deref().ok_or_else(|| {
                ConnectError::config(
                    "incrementing.column.name",
                    format!(
                        "{label} has no serial or identity column: name the incrementing column"
                    ),
                )
            })?;
            let at = index(name).ok_or_else(|| {
                ConnectError::config(
                    "incrementing.column.name",
                    format!("{label} has no column {name}"),
                )
            })?;
            let c = &columns[at];
            let whole = matches!(
                c.kind,
                Kind::Int16
                    | Kind::Int32
                    | Kind::Int64
                    | Kind::Oid
                    | Kind::NumericInt(_)
                    | Kind::Decimal(Some(0))
            );
            if !whole {
                return Err(ConnectError::config(
                    "incrementing.column.name",
                    format!("column {name} of {label} is not an integer column"),
                ));
            }
            if self.config.validate_non_null && c.optional && self.queriers[i].table.is_some() {
                return Err(ConnectError::config("incrementing.column.name", format!(
                    "column {name} of {label} is nullable: rows with nulls would never be read (make it NOT NULL, or set validate.non.null=false)"
                )));
            }
            Some(at)
        } else {
            None
        };
        let mut timestamps = Vec::new();
        if mode.timestamps() {
            for name in &self.config.timestamp_columns {
                let at = index(name).ok_or_else(|| {
                    ConnectError::config(
                        "timestamp.column.name",
                        format!("{label} has no column {name}"),
                    )
                })?;
                if columns[at].kind != Kind::Timestamp {
                    return Err(ConnectError::config(
                        "timestamp.column.name",
                        format!("column {name} of {label} is not a timestamp column"),
                    ));
                }
                timestamps.push(at);
            }
            let all_nullable = timestamps.iter().all(|t| columns[*t].optional);
            if self.config.validate_non_null && all_nullable && self.queriers[i].table.is_some() {
                return Err(ConnectError::config("timestamp.column.name", format!(
                    "the timestamp columns of {label} are all nullable: rows with nulls would never be read (make one NOT NULL, or set validate.non.null=false)"
                )));
            }
        }
        let select_list = if columns.iter().any(|c| c.kind == Kind::Cast) {
            columns
                .iter()
                .map(|c| {
                    let id = self.dialect.ident(&c.name);
                    if c.kind == Kind::Cast {
                        format!("{id}::text AS {id}")
                    } else {
                        id
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            "*".to_string()
        };
        let upper = if mode.timestamps() || self.needs_initial(i) {
            Some(self.database_now().await?)
        } else {
            None
        };
        if self.needs_initial(i) {
            if let (Some(initial), Some(now)) = (self.config.timestamp_initial, upper) {
                self.queriers[i].offset.timestamp =
                    Some(if initial == -1 { now } else { initial * 1000 });
            }
        }
        self.queriers[i].started = true;
        let upper = upper
            .filter(|_| mode.timestamps())
            .map(|now| now - self.config.delay_ms * 1000);
        let criteria = Criteria {
            mode,
            incrementing: incrementing_name.as_deref().filter(|_| mode.incrementing()),
            timestamps: &self.config.timestamp_columns,
        };
        let from = self.from(&self.queriers[i]);
        let (sql, bounds) = criteria.select(
            &self.dialect,
            &select_list,
            &from,
            &self.queriers[i].offset,
            upper,
            &self.config.query_suffix,
        );
        debug!(querier = %label, sql = %sql, ?bounds, "querying");
        let params: Vec<BoundParam> = bounds.into_iter().map(BoundParam).collect();
        let client = self.client().await?;
        let stream = client
            .query_raw(&sql, params.iter().map(|p| p as &dyn ToSql))
            .await
            .map_err(|e| classify(&format!("query {label}"), &e))?;
        let schema = (!columns.iter().any(SourceColumn::varies)).then(|| {
            let nulls = vec![Value::Null; columns.len()];
            row_schema(
                self.queriers[i].table.as_ref().map(|t| t.table.as_str()),
                &columns,
                &nulls,
            )
        });
        self.reading = Some(Reading {
            querier: i,
            stream: Box::pin(stream),
            columns,
            incrementing,
            timestamps,
            schema,
            lookahead: None,
        });
        Ok(())
    }

    fn needs_initial(&self, i: usize) -> bool {
        let q = &self.queriers[i];
        !q.started
            && self.config.mode.timestamps()
            && self.config.timestamp_initial.is_some()
            && q.offset.timestamp.is_none()
    }

    /// The database's clock, in microseconds since the epoch.
    async fn database_now(&mut self) -> Result<i64> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT CURRENT_TIMESTAMP", &[])
            .await
            .map_err(|e| classify("read the database's time", &e))?;
        let raw: Raw = row
            .try_get(0)
            .map_err(|e| classify("read the database's time", &e))?;
        timestamp_micros(raw.0).map_err(ConnectError::fatal)
    }

    /// Up to `batch.max.rows` records of the result being read.
    async fn read_batch(&mut self) -> Result<Vec<SourceRecord>> {
        let max = self.config.batch_max_rows;
        let mode = self.config.mode;
        let poll_interval = Duration::from_millis(self.config.poll_interval_ms);
        let Some(reading) = self.reading.as_mut() else {
            return Ok(Vec::new());
        };
        let label = self.queriers[reading.querier].label();
        let mut rows: Vec<(Vec<Value>, Key)> = reading.lookahead.take().into_iter().collect();
        let mut exhausted = false;
        while rows.len() <= max {
            match reading.stream.next().await {
                Some(Ok(row)) => rows.push(decode_row(reading, &row, &label)?),
                Some(Err(e)) => return Err(classify(&format!("read {label}"), &e)),
                None => {
                    exhausted = true;
                    break;
                }
            }
        }
        let following = if rows.len() > max { rows.pop() } else { None };
        let querier = &mut self.queriers[reading.querier];
        let keys: Vec<Key> = rows.iter().map(|(_, k)| *k).collect();
        let positions = offsets(
            mode,
            &querier.offset,
            &keys,
            following.as_ref().map(|(_, k)| k),
        );
        let table_name = querier.table.as_ref().map(|t| t.table.clone());
        let mut records = Vec::with_capacity(rows.len());
        for ((values, _), offset) in rows.into_iter().zip(&positions) {
            let schema = match &reading.schema {
                Some(s) => s.clone(),
                None => row_schema(table_name.as_deref(), &reading.columns, &values),
            };
            let value = Struct::of(schema.clone(), values)
                .map_err(|e| ConnectError::data(format!("a row of {label}: {}", e.message)))?;
            records.push(SourceRecord {
                source_partition: querier.partition.clone(),
                source_offset: offset.to_map(),
                topic: querier.topic.clone(),
                partition: None,
                key_schema: None,
                key: Value::Null,
                value_schema: Some(schema),
                value: Value::Struct(value),
                timestamp: None,
                headers: Vec::new(),
            });
        }
        if let Some(last) = positions.last() {
            querier.offset = *last;
        }
        reading.lookahead = following;
        if exhausted && reading.lookahead.is_none() {
            querier.next_run = Instant::now() + poll_interval;
            debug!(querier = %label, "read to the end");
            self.reading = None;
            self.just_read = true;
        }
        Ok(records)
    }

    /// After a lost connection: query this querier again later, from its last row returned.
    fn lost(&mut self, i: usize, e: &ConnectError) {
        let q = &mut self.queriers[i];
        q.next_run = Instant::now() + Duration::from_millis(self.config.poll_interval_ms);
        warn!(querier = %q.label(), error = %e.message, "reading failed; trying again after poll.interval.ms");
        self.reading = None;
        self.client = None;
    }
}

#[async_trait]
impl SourceTask for JdbcSourceTask {
    /// Each table starts after its committed offset: Ferry's, or one written by Confluent's
    /// connector under the older partition `{"table": name}`.
    async fn poll(&mut self) -> Result<Vec<SourceRecord>> {
        if self.reading.is_none() {
            let Some((i, next)) = self
                .queriers
                .iter()
                .enumerate()
                .map(|(i, q)| (i, q.next_run))
                .min_by_key(|(_, next)| *next)
            else {
                tokio::time::sleep(IDLE_WAIT).await;
                return Ok(Vec::new());
            };
            let now = Instant::now();
            if std::mem::take(&mut self.just_read) {
                // A result was read to its end: return at once, so that the runtime commits
                // its offsets now rather than after the wait.
                return Ok(Vec::new());
            }
            if next > now {
                tokio::time::sleep((next - now).min(IDLE_WAIT)).await;
                return Ok(Vec::new());
            }
            match self.start_query(i).await {
                Ok(()) => {}
                Err(e) if e.is_retriable() => {
                    self.lost(i, &e);
                    return Ok(Vec::new());
                }
                Err(e) => return Err(e),
            }
        }
        match self.read_batch().await {
            Ok(records) => Ok(records),
            Err(e) if e.is_retriable() => {
                if let Some(i) = self.reading.as_ref().map(|r| r.querier) {
                    self.lost(i, &e);
                }
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }

    async fn stop(&mut self) -> Result<()> {
        self.reading = None;
        self.client = None;
        Ok(())
    }
}
