//! `io.confluent.connect.jdbc.JdbcSinkConnector` for PostgreSQL, exactly-once at the database
//! (docs/design.md#the-jdbc-sink): each batch and the next offsets of its partitions commit in one
//! transaction, and the offsets row of a partition is written only by a generation at least
//! the row's, so a zombie task is fenced at the database. A starting task reads its offsets
//! there and asks the runtime to consume from them, so records already written are never
//! written again, whatever `insert.mode` (the seed's plain inserts see no duplicate keys after
//! a fail-over).
//!
//! Errors are classified by SQLSTATE: lost connections, shutdowns, lock and serialization
//! failures are retriable (the runtime retries the batch); data errors (class 22, 23) belong to
//! a record: the batch is replayed record by record, each behind a savepoint, so that only the
//! bad ones are reported (to the DLQ, with PostgreSQL's message) and the rest commit.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use async_trait::async_trait;
use ferry_connect::task::{Connector, ErrantRecordReporter, Props};
use ferry_connect::{ConnectError, Result, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;
use tracing::{debug, info, warn};

use crate::bind::Param;
use crate::config::JdbcSinkConfig;
use crate::dialect::{self, Dialect, TableId};
use crate::pg::{classify, connect, describe, lost};
use crate::row::{row_of, Row};

/// The JDBC sink connector: tasks alike, each given its partitions by the scheduler.
pub struct JdbcSinkConnector {
    props: Props,
}

impl JdbcSinkConnector {
    /// The connector of a (validated) config.
    pub fn build(props: &Props) -> Result<Box<dyn Connector>> {
        JdbcSinkConfig::parse(props)?;
        Ok(Box::new(JdbcSinkConnector {
            props: props.clone(),
        }))
    }
}

impl Connector for JdbcSinkConnector {
    /// Every task the same config; the runtime spreads the partitions.
    fn task_configs(&self, max_tasks: usize) -> Result<Vec<Props>> {
        Ok(vec![self.props.clone(); max_tasks.max(1)])
    }
}

/// Whether a DDL statement lost a race with the same statement of another session (seen:
/// 23505 on pg_type's unique index, 42710 "type … already exists", 42P07, 42701).
fn raced(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::UNIQUE_VIOLATION
            || *c == SqlState::DUPLICATE_TABLE
            || *c == SqlState::DUPLICATE_COLUMN
            || *c == SqlState::DUPLICATE_OBJECT
    })
}

/// Writes records as rows, with their partitions' next offsets in the same transaction.
pub struct JdbcSinkTask {
    config: JdbcSinkConfig,
    context: SinkTaskContext,
    client: Option<Client>,
    /// The columns of each table written so far (checked, created or evolved once).
    tables: HashMap<TableId, BTreeSet<String>>,
    /// The next offset the database holds for each partition of this task.
    next: HashMap<TopicPartition, i64>,
    /// When the offsets API last changed this connector's offsets (read at open): rows of the
    /// offsets table written by that generation or an older one predate the change.
    altered_at: Option<u64>,
}

/// Who writes a transaction, and which offsets rows predate an alter or reset.
struct Writer<'a> {
    connector: &'a str,
    generation: u64,
    altered_at: Option<u64>,
}

impl Writer<'_> {
    /// Whether an offsets row of generation `owner` was written before the offsets API
    /// changed the offsets: it no longer says where the partition is.
    fn superseded(&self, owner: i64) -> bool {
        superseded(self.altered_at, owner)
    }
}

fn superseded(altered_at: Option<u64>, owner: i64) -> bool {
    altered_at.is_some_and(|at| u64::try_from(owner).is_ok_and(|owner| owner <= at))
}

impl JdbcSinkTask {
    /// A task of a config, writing with `context`.
    pub fn build(props: &Props, context: SinkTaskContext) -> Result<Box<dyn SinkTask>> {
        Ok(Box::new(JdbcSinkTask {
            config: JdbcSinkConfig::parse(props)?,
            context,
            client: None,
            tables: HashMap::new(),
            next: HashMap::new(),
            altered_at: None,
        }))
    }

    /// The connection, made again after one was lost.
    async fn client(&mut self) -> Result<&mut Client> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        if self.client.is_none() {
            let config = &self.config;
            let client = connect(&config.connection, "ferry-jdbc-sink").await?;
            if let Err(e) = client.batch_execute(&dialect::create_offsets_table()).await {
                // Tasks starting together race to create it: PostgreSQL's CREATE TABLE IF
                // NOT EXISTS then fails on its catalog's unique index, or finds it made.
                if !raced(&e) {
                    return Err(classify("create the offsets table", &e));
                }
                debug!("another task created the offsets table meanwhile");
            }
            info!(database = %describe(&config.connection), "connected");
            self.client = Some(client);
            self.tables.clear();
        }
        self.client
            .as_mut()
            .ok_or_else(|| ConnectError::fatal("no PostgreSQL connection"))
    }

    /// Keep the error's class; forget a connection it broke.
    fn failed(&mut self, what: &str, e: tokio_postgres::Error) -> ConnectError {
        if lost(&e) {
            self.client = None;
        }
        classify(what, &e)
    }

    /// Make sure `row`'s table has its columns: create it (auto.create) or add what is
    /// missing (auto.evolve), or say what is missing.
    async fn ensure_table(&mut self, row: &Row) -> Result<()> {
        let wanted: Vec<String> = row
            .keys
            .iter()
            .chain(&row.others)
            .map(|c| c.name.clone())
            .collect();
        if self
            .tables
            .get(&row.table)
            .is_some_and(|known| wanted.iter().all(|w| known.contains(w)))
        {
            return Ok(());
        }
        let config = &self.config;
        let d = Dialect {
            quote: config.quote_identifiers,
        };
        let (auto_create, auto_evolve) = (config.auto_create, config.auto_evolve);
        let table = row.table.clone();
        let client = self.client().await?;
        let found = client
            .query(
                "SELECT column_name FROM information_schema.columns \
                 WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2",
                &[&table.schema, &table.table],
            )
            .await;
        let existing: BTreeSet<String> = match found {
            Ok(rows) => match rows.iter().map(|r| r.try_get::<_, String>(0)).collect() {
                Ok(columns) => columns,
                Err(e) => return Err(self.failed("read the table's columns", e)),
            },
            Err(e) => return Err(self.failed("read the table's columns", e)),
        };
        let name = d.table(&table);
        let ddl = if existing.is_empty() {
            if !auto_create {
                return Err(ConnectError::fatal(format!(
                    "table {name} does not exist and auto.create is false"
                )));
            }
            let keys: Vec<String> = row.keys.iter().map(|c| c.name.clone()).collect();
            Some(d.create_table(&table, &row.columns()?, &keys))
        } else {
            let missing: Vec<_> = row
                .columns()?
                .into_iter()
                .filter(|c| !existing.contains(&c.name))
                .collect();
            match (missing.is_empty(), auto_evolve) {
                (true, _) => None,
                (false, false) => {
                    let names: Vec<&str> = missing.iter().map(|c| c.name.as_str()).collect();
                    return Err(ConnectError::fatal(format!(
                        "table {name} has no column {} and auto.evolve is false",
                        names.join(", ")
                    )));
                }
                (false, true) => {
                    if let Some(required) =
                        missing.iter().find(|c| !c.optional && c.default.is_none())
                    {
                        return Err(ConnectError::fatal(format!(
                            "table {name}: auto.evolve cannot add the required column {} (only optional ones)",
                            required.name
                        )));
                    }
                    Some(d.add_columns(&table, &missing))
                }
            }
        };
        if let Some(ddl) = ddl {
            info!(table = %name, statement = %ddl, "changing the table");
            let client = self.client().await?;
            if let Err(e) = client.batch_execute(&ddl).await {
                if raced(&e) {
                    // Tasks writing the same new table create or evolve it together:
                    // PostgreSQL then refuses all but one (on its catalog's unique index, or as
                    // an existing table or column). Again, with the columns as they are now.
                    return Err(ConnectError::retriable(format!(
                        "table {name} was changed by another task meanwhile: trying again"
                    )));
                }
                return Err(self.failed(&format!("change table {name}"), e));
            }
        }
        self.tables
            .entry(table)
            .or_default()
            .extend(existing.into_iter().chain(wanted));
        Ok(())
    }

    /// Write `records` (of this task's partitions, in order) and their offsets in one
    /// transaction. Records the database already holds are skipped; records that fail on
    /// their own are reported, or fail the task when nothing tolerates them.
    async fn write(&mut self, records: &[SinkRecord]) -> Result<()> {
        let fresh: Vec<&SinkRecord> = records
            .iter()
            .filter(|r| {
                self.next
                    .get(&r.topic_partition())
                    .is_none_or(|n| r.offset >= *n)
            })
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let (config, context) = (self.config.clone(), &self.context);
        let reporter = context.reporter.clone();
        let (connector, generation) = (context.connector.clone(), context.generation);
        let altered_at = self.altered_at;
        // Rows first: a record without one is a fault of its own.
        let mut rows: Vec<(&SinkRecord, std::result::Result<Row, ConnectError>)> = Vec::new();
        for r in &fresh {
            rows.push((r, row_of(&config, r)));
        }
        for (_, row) in &rows {
            if let Ok(row) = row {
                self.ensure_table(row).await?;
            }
        }
        let mut ends: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        for r in &fresh {
            let end = ends.entry(r.topic_partition()).or_insert(r.offset + 1);
            *end = (*end).max(r.offset + 1);
        }
        let d = Dialect {
            quote: config.quote_identifiers,
        };
        let mut replay = false;
        let commit_times = self.context.commit_times.clone();
        let started = std::time::Instant::now();
        loop {
            let client = self.client().await?;
            let writer = Writer {
                connector: &connector,
                generation,
                altered_at,
            };
            let outcome = transaction(
                client,
                &d,
                &writer,
                &rows,
                &ends,
                replay,
                reporter.as_deref(),
            )
            .await;
            match outcome {
                Ok(()) => {
                    // The batch's transaction (a replay's included) committed.
                    commit_times.took(started.elapsed());
                    break;
                }
                // A record's own fault in the batch: once more, record by record.
                Err(Rollback::Data) if !replay => {
                    debug!("a record failed in the batch: writing it record by record");
                    replay = true;
                }
                Err(Rollback::Data) => {
                    return Err(ConnectError::fatal(
                        "a record failed again in a replay that had reported it",
                    ))
                }
                Err(Rollback::Record(e)) => return Err(e),
                Err(Rollback::Fenced(message)) => return Err(ConnectError::fatal(message)),
                Err(Rollback::Db(what, e)) => return Err(self.failed(&what, e)),
                Err(Rollback::Other(e)) => return Err(e),
            }
        }
        self.next.extend(ends);
        Ok(())
    }
}

/// Why a transaction rolled back.
enum Rollback {
    /// A data error in a batch written at once: replay it record by record.
    Data,
    /// A record failed and nothing tolerates it (or reporting it failed).
    Record(ConnectError),
    Fenced(String),
    Db(String, tokio_postgres::Error),
    Other(ConnectError),
}

fn is_data(e: &tokio_postgres::Error) -> bool {
    e.code()
        .is_some_and(|c| c.code().starts_with("22") || c.code().starts_with("23"))
}

/// One attempt at writing `rows` and `ends` at `generation`.
#[allow(clippy::too_many_arguments)]
async fn transaction(
    client: &mut Client,
    d: &Dialect,
    writer: &Writer<'_>,
    rows: &[(&SinkRecord, std::result::Result<Row, ConnectError>)],
    ends: &BTreeMap<TopicPartition, i64>,
    replay: bool,
    reporter: Option<&dyn ErrantRecordReporter>,
) -> std::result::Result<(), Rollback> {
    let db = |what: &str| {
        let what = what.to_string();
        move |e| Rollback::Db(what, e)
    };
    let tx = client.transaction().await.map_err(db("begin"))?;
    let (connector, generation) = (writer.connector, writer.generation);
    let generation_i64 = generation as i64;
    // Lock each partition's row; a newer generation there means this task is a zombie, and a
    // further offset means those records are written (an earlier commit whose answer was
    // lost).
    let mut starts: HashMap<TopicPartition, i64> = HashMap::new();
    for tp in ends.keys() {
        let row = tx
            .query_opt(
                &dialect::lock_offsets(),
                &[&connector, &tp.topic, &tp.partition],
            )
            .await
            .map_err(db("lock the offsets"))?;
        if let Some(row) = row {
            let next: i64 = row.try_get(0).map_err(db("read the offsets"))?;
            let owner: i64 = row.try_get(1).map_err(db("read the offsets"))?;
            if owner > generation_i64 {
                return Err(Rollback::Fenced(format!(
                    "{tp}: fenced: the database's offsets belong to generation {owner}, newer than this task's {generation}"
                )));
            }
            if !writer.superseded(owner) {
                starts.insert(tp.clone(), next);
            }
        }
    }
    let mut reported = Vec::new();
    let mut prepared: HashMap<String, tokio_postgres::Statement> = HashMap::new();
    for (record, row) in rows {
        if starts
            .get(&record.topic_partition())
            .is_some_and(|n| record.offset < *n)
        {
            continue;
        }
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                reported.push((*record, e.detached()));
                continue;
            }
        };
        let (sql, cells) = row.sql(d);
        let params: Vec<Param<'_>> = cells
            .iter()
            .map(|c| Param {
                column: &c.name,
                value: &c.value,
            })
            .collect();
        let refs: Vec<&(dyn ToSql + Sync)> =
            params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let statement = match prepared.get(&sql) {
            Some(s) => s.clone(),
            None => {
                let s = tx.prepare(&sql).await.map_err(db("prepare"))?;
                prepared.insert(sql.clone(), s.clone());
                s
            }
        };
        if !replay {
            match tx.execute(&statement, &refs).await {
                Ok(_) => {}
                Err(e) if is_data(&e) || is_bind(&e) => return Err(Rollback::Data),
                Err(e) => return Err(Rollback::Db(format!("write {}", d.table(&row.table)), e)),
            }
            continue;
        }
        tx.batch_execute("SAVEPOINT ferry_record")
            .await
            .map_err(db("savepoint"))?;
        match tx.execute(&statement, &refs).await {
            Ok(_) => tx
                .batch_execute("RELEASE SAVEPOINT ferry_record")
                .await
                .map_err(db("release the savepoint"))?,
            Err(e) if is_data(&e) || is_bind(&e) => {
                tx.batch_execute("ROLLBACK TO SAVEPOINT ferry_record")
                    .await
                    .map_err(db("roll back to the savepoint"))?;
                let error = if is_bind(&e) {
                    ConnectError::data(format!("{}: {}", at(record), bind_message(&e)))
                } else {
                    classify(
                        &format!("write {} for {}", d.table(&row.table), at(record)),
                        &e,
                    )
                };
                reported.push((*record, error));
            }
            Err(e) => return Err(Rollback::Db(format!("write {}", d.table(&row.table)), e)),
        }
    }
    // What failed on its own is in the DLQ before the offsets pass it (or fails the task).
    for (record, error) in &reported {
        let Some(reporter) = reporter else {
            return Err(Rollback::Record(error.detached()));
        };
        warn!(record = %at(record), error = %error.message, "record not written: reported");
        reporter
            .report(record, error)
            .await
            .map_err(Rollback::Other)?;
    }
    for (tp, end) in ends {
        // Never behind what the database holds (a batch it had already taken in full).
        let next = &(*end).max(starts.get(tp).copied().unwrap_or(*end));
        let changed = tx
            .execute(
                &dialect::store_offsets(),
                &[&connector, &tp.topic, &tp.partition, next, &generation_i64],
            )
            .await
            .map_err(db("store the offsets"))?;
        if changed == 0 {
            return Err(Rollback::Fenced(format!(
                "{tp}: fenced: a newer generation than this task's {generation} holds the database's offsets"
            )));
        }
    }
    tx.commit().await.map_err(db("commit"))?;
    Ok(())
}

fn at(record: &SinkRecord) -> String {
    format!(
        "the record at {}-{} offset {}",
        record.topic, record.partition, record.offset
    )
}

/// A parameter this side could not encode (a value that does not fit its column).
fn is_bind(e: &tokio_postgres::Error) -> bool {
    e.code().is_none()
        && !e.is_closed()
        && std::error::Error::source(e).is_some_and(|s| s.to_string().starts_with("column "))
}

fn bind_message(e: &tokio_postgres::Error) -> String {
    std::error::Error::source(e).map_or_else(|| e.to_string(), |s| s.to_string())
}

#[async_trait]
impl SinkTask for JdbcSinkTask {
    /// Read where the database has each partition, and consume from there.
    async fn open(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        let connector = self.context.connector.clone();
        let rewinds = self.context.rewinds.clone();
        self.altered_at = self.context.committer.offsets_altered_at().await?;
        let topics: BTreeSet<&str> = partitions.iter().map(|tp| tp.topic.as_str()).collect();
        for topic in topics {
            let client = self.client().await?;
            let rows = match client
                .query(&dialect::read_offsets(), &[&connector, &topic])
                .await
            {
                Ok(rows) => rows,
                Err(e) => return Err(self.failed("read the offsets", e)),
            };
            for row in rows {
                let read = row
                    .try_get::<_, i32>(0)
                    .and_then(|p| Ok((p, row.try_get::<_, i64>(1)?, row.try_get::<_, i64>(2)?)));
                let (partition, next, owner) = match read {
                    Ok(read) => read,
                    Err(e) => return Err(self.failed("read the offsets", e)),
                };
                let tp = TopicPartition::new(topic, partition);
                if superseded(self.altered_at, owner) {
                    info!(partition = %tp, next, generation = owner, altered_at = ?self.altered_at,
                        "the database's offsets predate the offsets API's change: consuming from the changed offsets");
                    continue;
                }
                if partitions.contains(&tp) {
                    info!(partition = %tp, next, "resuming from the database's offsets");
                    rewinds.request(tp.clone(), next);
                    self.next.insert(tp, next);
                }
            }
        }
        Ok(())
    }

    async fn put(&mut self, records: &[SinkRecord]) -> Result<()> {
        let size = self.config.batch_size;
        for chunk in records.chunks(size) {
            self.write(chunk).await?;
        }
        Ok(())
    }

    async fn flush(&mut self, _offsets: &HashMap<TopicPartition, i64>) -> Result<()> {
        Ok(())
    }

    /// The database holds the offsets; Raft is told what it holds (for status and lag).
    async fn pre_commit(
        &mut self,
        _offsets: &HashMap<TopicPartition, i64>,
    ) -> Result<HashMap<TopicPartition, i64>> {
        Ok(self.next.clone())
    }

    async fn close(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        for tp in partitions {
            self.next.remove(tp);
        }
        Ok(())
    }

    async fn stop(&mut self) -> Result<()> {
        self.client = None;
        Ok(())
    }
}
