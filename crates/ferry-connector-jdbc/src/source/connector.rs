//! The JDBC source connector: the tables to copy, listed again every
//! `table.poll.interval.ms`, spread over the tasks.

use std::time::Duration;

use async_trait::async_trait;
use ferry_connect::task::{Connector, Props};
use ferry_connect::{ConnectError, Result};
use tokio_postgres::Client;
use tracing::{debug, info, warn};

use crate::config::{JdbcSourceConfig, TABLES};
use crate::dialect::TableId;
use crate::pg::{classify, connect, describe};

use super::{name_of, APPLICATION};

/// The relation kinds of `table.types`.
pub(super) fn relkinds(types: &[String]) -> Vec<String> {
    let mut kinds = Vec::new();
    for t in types {
        let of: &[&str] = match t.to_ascii_uppercase().as_str() {
            "TABLE" => &["r", "p"],
            "PARTITIONED TABLE" => &["p"],
            "VIEW" => &["v"],
            "MATERIALIZED VIEW" => &["m"],
            _ => &[],
        };
        kinds.extend(of.iter().map(|k| k.to_string()));
    }
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The tables of the database the config copies, in name order.
async fn list_tables(client: &Client, config: &JdbcSourceConfig) -> Result<Vec<TableId>> {
    let rows = client
        .query(
            "SELECT n.nspname::text, c.relname::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind::text = ANY($1) AND n.nspname LIKE $2 \
             AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
             AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%' \
             ORDER BY 1, 2",
            &[
                &relkinds(&config.table_types),
                &config.schema_pattern.as_deref().unwrap_or("%"),
            ],
        )
        .await
        .map_err(|e| classify("list the tables", &e))?;
    let mut tables = Vec::new();
    for row in rows {
        let t = TableId {
            schema: Some(
                row.try_get(0)
                    .map_err(|e| classify("list the tables", &e))?,
            ),
            table: row
                .try_get(1)
                .map_err(|e| classify("list the tables", &e))?,
        };
        if config.wants(&t) {
            tables.push(t);
        }
    }
    Ok(tables)
}

/// Kafka Connect's `ConnectorUtils.groupPartitions`: `groups` contiguous groups, the first
/// ones one longer when the items do not divide evenly.
pub fn group<T: Clone>(items: &[T], groups: usize) -> Vec<Vec<T>> {
    let groups = groups.clamp(1, items.len().max(1));
    let per = items.len() / groups;
    let longer = items.len() % groups;
    let mut out = Vec::with_capacity(groups);
    let mut at = 0;
    for g in 0..groups {
        let size = per + usize::from(g < longer);
        out.push(items[at..at + size].to_vec());
        at += size;
    }
    out
}

/// The JDBC source connector: it lists the tables and spreads them over its tasks.
pub struct JdbcSourceConnector {
    props: Props,
    config: JdbcSourceConfig,
    tables: Vec<TableId>,
}

impl JdbcSourceConnector {
    /// The connector of a (validated) config.
    pub fn build(props: &Props) -> Result<Box<dyn Connector>> {
        Ok(Box::new(JdbcSourceConnector {
            props: props.clone(),
            config: JdbcSourceConfig::parse(props)?,
            tables: Vec::new(),
        }))
    }

    async fn tables_now(&self) -> Result<Vec<TableId>> {
        let client = connect(&self.config.connection, APPLICATION).await?;
        list_tables(&client, &self.config).await
    }
}

#[async_trait]
impl Connector for JdbcSourceConnector {
    /// List the tables (a query has none), trying `connection.attempts` times.
    async fn start(&mut self) -> Result<()> {
        if self.config.query.is_some() {
            return Ok(());
        }
        let (attempts, backoff) = (
            self.config.connection_attempts,
            self.config.connection_backoff_ms,
        );
        let mut attempt = 1;
        let tables = loop {
            match self.tables_now().await {
                Ok(tables) => break tables,
                Err(e) if e.is_retriable() && attempt < attempts => {
                    warn!(attempt, error = %e.message, "cannot list the tables; trying again");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(backoff)).await;
                }
                Err(e) => return Err(e),
            }
        };
        let names: Vec<String> = tables.iter().map(name_of).collect();
        info!(database = %describe(&self.config.connection), tables = ?names, "tables to copy");
        if tables.is_empty() {
            warn!("no table to copy yet: the tables are listed again every table.poll.interval.ms");
        }
        self.tables = tables;
        Ok(())
    }

    fn task_configs(&self, max_tasks: usize) -> Result<Vec<Props>> {
        if self.config.query.is_some() {
            return Ok(vec![self.props.clone()]);
        }
        if self.tables.is_empty() {
            return Ok(Vec::new());
        }
        group(&self.tables, max_tasks)
            .into_iter()
            .map(|tables| {
                let pairs: Vec<(String, String)> = tables
                    .into_iter()
                    .map(|t| (t.schema.unwrap_or_default(), t.table))
                    .collect();
                let mut props = self.props.clone();
                let json = serde_json::to_string(&pairs)
                    .map_err(|e| ConnectError::fatal(format!("cannot write {TABLES}: {e}")))?;
                props.insert(TABLES.to_string(), json);
                Ok(props)
            })
            .collect()
    }

    /// Every `table.poll.interval.ms`, list the tables again; return when they changed.
    async fn reconfigure(&mut self) -> Result<()> {
        if self.config.query.is_some() {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(Duration::from_millis(self.config.table_poll_interval_ms)).await;
            match self.tables_now().await {
                Ok(tables) if tables != self.tables => {
                    let names: Vec<String> = tables.iter().map(name_of).collect();
                    info!(tables = ?names, "the tables to copy changed");
                    self.tables = tables;
                    return Ok(());
                }
                Ok(_) => debug!("the tables to copy are the same"),
                Err(e) => warn!(error = %e.message, "cannot list the tables; trying again later"),
            }
        }
    }
}
