//! `io.confluent.connect.jdbc.JdbcSourceConnector` for PostgreSQL. The connector lists the
//! tables to copy (`table.whitelist`, `table.blacklist`, `schema.pattern`, `table.types`),
//! spreads them over `tasks.max` tasks in contiguous groups as Kafka Connect does, and lists
//! them again every `table.poll.interval.ms`: a new or dropped table gives new task configs.
//! With `query`, one task copies the query's result.
//!
//! A task queries each of its tables every `poll.interval.ms` (the table whose turn came
//! first; a table with more rows is read to the end before the next), returns at most
//! `batch.max.rows` rows per poll, as records of a struct named after the table to the topic
//! `topic.prefix` + table, with Confluent's source partition (`{"protocol": "1", "table":
//! "db.schema.table"}`) and offsets (see [`crate::query`]). Offsets commit through the runtime
//! into Raft once the records are delivered, so a restarted or moved task starts after the
//! last committed row: it never skips one, and repeats at most what was delivered after the
//! last commit. A lost connection is logged and the table queried again after
//! `poll.interval.ms`, from the last row returned; any other database error fails the task.

use crate::dialect::TableId;

mod connector;
mod querier;
mod task;

pub use connector::{group, JdbcSourceConnector};
pub use task::JdbcSourceTask;

/// The application name of the source's connections.
const APPLICATION: &str = "ferry-jdbc-source";

/// `a.b` of a table, for logs and messages.
fn name_of(t: &TableId) -> String {
    match &t.schema {
        Some(s) => format!("{s}.{}", t.table),
        None => t.table.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::connector::relkinds;
    use super::*;

    #[test]
    fn tables_are_grouped_as_kafka_connect_groups_partitions() {
        let tables: Vec<u32> = (1..=5).collect();
        assert_eq!(group(&tables, 2), vec![vec![1, 2, 3], vec![4, 5]]);
        assert_eq!(
            group(&tables, 5),
            vec![vec![1], vec![2], vec![3], vec![4], vec![5]]
        );
        // More tasks than tables: one task per table.
        assert_eq!(group(&tables[..2], 5), vec![vec![1], vec![2]]);
        assert_eq!(group(&tables, 1), vec![tables.clone()]);
    }

    #[test]
    fn table_types_are_relation_kinds() {
        let kinds = relkinds(&["TABLE".to_string(), "view".to_string()]);
        assert_eq!(kinds, vec!["p", "r", "v"]);
    }
}
