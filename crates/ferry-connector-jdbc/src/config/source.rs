//! The JDBC source's properties: what is read and how new rows are found (`mode`, the
//! tables, …), parsed.

use std::collections::BTreeMap;

use ferry_connect::config::{at_least, one_of, positive, Choice, Values};
use ferry_connect::{ConfigDef, ConfigKey, ConfigType, ConnectError, Importance, Result, Support};

use super::connection::{connection_config, Connection, Quoting};
use crate::dialect::TableId;

/// The source's properties.
pub fn source_config() -> ConfigDef {
    use ConfigType::*;
    use Importance::*;
    let mut def = connection_config();
    def.extend([
        ConfigKey::new(
            "mode",
            String,
            High,
            "bulk, incrementing, timestamp or timestamp+incrementing.",
        )
        .required()
        .choice::<SourceMode>(),
        ConfigKey::new(
            "incrementing.column.name",
            String,
            Medium,
            "A strictly increasing column (empty: the table's serial or identity column).",
        )
        .default(""),
        ConfigKey::new(
            "timestamp.column.name",
            List,
            Medium,
            "Timestamp columns; with several, the first that is not null (COALESCE).",
        )
        .default(""),
        ConfigKey::new(
            "timestamp.delay.interval.ms",
            Long,
            Medium,
            "How long after a timestamp its rows are read: transactions that commit within it are not missed.",
        )
        .default("0")
        .validator(|v| at_least(0)(v)),
        ConfigKey::new(
            "timestamp.initial",
            Long,
            Low,
            "Epoch milliseconds to start from without an offset (-1: now); empty: from the first row.",
        ),
        ConfigKey::new(
            "validate.non.null",
            Boolean,
            Low,
            "Refuse nullable incrementing and timestamp columns (rows with nulls would never be read).",
        )
        .default("true"),
        ConfigKey::new("table.whitelist", List, Medium, "The tables to copy (name or schema.name).")
            .default(""),
        ConfigKey::new("table.blacklist", List, Medium, "The tables not to copy.").default(""),
        ConfigKey::new(
            "schema.pattern",
            String,
            Medium,
            "The schemas tables are looked up in (a LIKE pattern); empty: all but the system's.",
        ),
        ConfigKey::new("catalog.pattern", String, Low, "The database is the URL's.")
            .support(Support::NoEffect("the catalog is the database of connection.url")),
        ConfigKey::new(
            "table.types",
            List,
            Low,
            "TABLE, VIEW and/or MATERIALIZED VIEW.",
        )
        .default("TABLE")
        .validator(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .try_for_each(|t| one_of(t, &["TABLE", "VIEW", "MATERIALIZED VIEW", "PARTITIONED TABLE"]))
        }),
        ConfigKey::new(
            "query",
            String,
            Medium,
            "Copy the result of this query instead of tables (to the topic named topic.prefix).",
        )
        .default(""),
        ConfigKey::new("query.suffix", String, Low, "Appended to every query (e.g. a locking clause).")
            .default(""),
        ConfigKey::new("topic.prefix", String, High, "Topics are the prefix and the table's name.")
            .required(),
        ConfigKey::new("poll.interval.ms", Int, High, "How often each table is queried.")
            .default("5000")
            .validator(positive),
        ConfigKey::new("batch.max.rows", Int, Low, "Rows per poll at most.")
            .default("100")
            .validator(positive),
        ConfigKey::new(
            "table.poll.interval.ms",
            Long,
            Low,
            "How often the tables are listed again: new tables are picked up.",
        )
        .default("60000")
        .validator(positive),
        ConfigKey::new(
            "numeric.mapping",
            String,
            Low,
            "none (Decimal), precision_only or best_fit (integers and doubles where they fit).",
        )
        .choice::<NumericMapping>(),
        ConfigKey::new(
            "transaction.isolation.mode",
            String,
            Low,
            "DEFAULT or READ_COMMITTED (PostgreSQL's default).",
        )
        .default("DEFAULT")
        .validator(|v| {
            one_of(v, &["DEFAULT", "READ_COMMITTED"])
                .map_err(|e| format!("{e} (other isolation levels are not supported yet)"))
        }),
        ConfigKey::new("numeric.precision.mapping", Boolean, Low, "Deprecated: precision_only.")
            .default("false"),
        ConfigKey::new("quote.sql.identifiers", String, Medium, "ALWAYS or NEVER.")
            .default("ALWAYS")
            .choice::<Quoting>(),
        ConfigKey::new(
            "db.timezone",
            String,
            Medium,
            "Time zone of TIMESTAMP columns: UTC only for now.",
        )
        .default("UTC")
        .validator(|v| {
            one_of(v, &["UTC"]).map_err(|e| format!("{e} (other zones are not supported yet)"))
        }),
    ]);
    def
}

/// `mode`: how new rows are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceMode {
    /// The whole table on every poll.
    Bulk,
    /// Rows past the last value of a strictly increasing column.
    Incrementing,
    /// Rows past the last timestamp (and those of it not read yet).
    Timestamp,
    /// Rows past the last (timestamp, incrementing) pair.
    TimestampIncrementing,
}

impl SourceMode {
    /// Whether it reads timestamp columns.
    pub fn timestamps(self) -> bool {
        matches!(
            self,
            SourceMode::Timestamp | SourceMode::TimestampIncrementing
        )
    }

    /// Whether it reads an incrementing column.
    pub fn incrementing(self) -> bool {
        matches!(
            self,
            SourceMode::Incrementing | SourceMode::TimestampIncrementing
        )
    }
}

/// `numeric.mapping`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumericMapping {
    /// Decimal always.
    None,
    /// Integers for NUMERIC(p, 0) that fit 64 bits.
    PrecisionOnly,
    /// Integers as precision_only, and FLOAT64 for NUMERIC(p, s > 0) with p < 19.
    BestFit,
}

/// The source's properties, parsed.
#[derive(Clone, Debug)]
pub struct JdbcSourceConfig {
    /// Where to connect.
    pub connection: Connection,
    /// The connector's attempts to list the tables, and its wait between them.
    pub connection_attempts: u32,
    /// The wait between those attempts.
    pub connection_backoff_ms: u64,
    /// `mode`.
    pub mode: SourceMode,
    /// `incrementing.column.name`; `None`: the table's serial or identity column.
    pub incrementing_column: Option<String>,
    /// `timestamp.column.name`: the first that is not null (COALESCE).
    pub timestamp_columns: Vec<String>,
    /// `timestamp.delay.interval.ms`.
    pub delay_ms: i64,
    /// Epoch milliseconds to start from without an offset (`timestamp.initial`; -1 is now).
    pub timestamp_initial: Option<i64>,
    /// `validate.non.null`.
    pub validate_non_null: bool,
    /// `table.whitelist`.
    pub whitelist: Vec<String>,
    /// `table.blacklist`.
    pub blacklist: Vec<String>,
    /// `schema.pattern`.
    pub schema_pattern: Option<String>,
    /// `table.types`.
    pub table_types: Vec<String>,
    /// `query`.
    pub query: Option<String>,
    /// `query.suffix`.
    pub query_suffix: String,
    /// `topic.prefix`.
    pub topic_prefix: String,
    /// `poll.interval.ms`.
    pub poll_interval_ms: u64,
    /// `batch.max.rows`.
    pub batch_max_rows: usize,
    /// `table.poll.interval.ms`.
    pub table_poll_interval_ms: u64,
    /// `numeric.mapping`.
    pub numeric_mapping: NumericMapping,
    /// `quote.sql.identifiers` is ALWAYS.
    pub quote_identifiers: bool,
}

impl Choice for SourceMode {
    const CHOICES: &'static [(&'static str, SourceMode)] = &[
        ("bulk", SourceMode::Bulk),
        ("incrementing", SourceMode::Incrementing),
        ("timestamp", SourceMode::Timestamp),
        ("timestamp+incrementing", SourceMode::TimestampIncrementing),
    ];
}

impl Choice for NumericMapping {
    const CHOICES: &'static [(&'static str, NumericMapping)] = &[
        ("none", NumericMapping::None),
        ("precision_only", NumericMapping::PrecisionOnly),
        ("best_fit", NumericMapping::BestFit),
    ];
}

impl JdbcSourceConfig {
    /// The source's properties; the error names the property.
    pub fn parse(props: &BTreeMap<String, String>) -> Result<JdbcSourceConfig> {
        let values = Values::new(source_config(), props);
        let numeric_mapping = match values.get("numeric.mapping")? {
            Some(_) => values.choice("numeric.mapping")?,
            None if values.boolean("numeric.precision.mapping")? => NumericMapping::PrecisionOnly,
            None => NumericMapping::None,
        };
        let config = JdbcSourceConfig {
            connection: Connection::from_props(props)?,
            connection_attempts: values.number("connection.attempts")?,
            connection_backoff_ms: values.number("connection.backoff.ms")?,
            mode: values.choice("mode")?,
            incrementing_column: values.text("incrementing.column.name")?,
            timestamp_columns: values.list("timestamp.column.name")?,
            delay_ms: values.number("timestamp.delay.interval.ms")?,
            timestamp_initial: values.optional_number("timestamp.initial")?,
            validate_non_null: values.boolean("validate.non.null")?,
            whitelist: values.list("table.whitelist")?,
            blacklist: values.list("table.blacklist")?,
            schema_pattern: values.text("schema.pattern")?,
            table_types: values.list("table.types")?,
            query: values.text("query")?,
            query_suffix: props.get("query.suffix").cloned().unwrap_or_default(),
            topic_prefix: props
                .get("topic.prefix")
                .map(|p| p.trim().to_string())
                .ok_or_else(|| {
                    ConnectError::config(
                        "topic.prefix",
                        "missing (topics are the prefix and the table's name)",
                    )
                })?,
            poll_interval_ms: values.number("poll.interval.ms")?,
            batch_max_rows: values.number("batch.max.rows")?,
            table_poll_interval_ms: values.number("table.poll.interval.ms")?,
            numeric_mapping,
            quote_identifiers: values.choice::<Quoting>("quote.sql.identifiers")?
                == Quoting::Always,
        };
        config.check()?;
        Ok(config)
    }

    /// What Confluent's connector refuses across properties.
    fn check(&self) -> Result<()> {
        if !self.whitelist.is_empty() && !self.blacklist.is_empty() {
            return Err(ConnectError::config(
                "table.whitelist",
                "table.whitelist and table.blacklist cannot both be set",
            ));
        }
        if self.query.is_some() && !(self.whitelist.is_empty() && self.blacklist.is_empty()) {
            return Err(ConnectError::config(
                "query",
                "a query copies its result, not tables: leave table.whitelist and table.blacklist empty",
            ));
        }
        if self.mode.timestamps() && self.timestamp_columns.is_empty() {
            return Err(ConnectError::config(
                "timestamp.column.name",
                "needed by mode=timestamp and mode=timestamp+incrementing",
            ));
        }
        if self.mode.incrementing() && self.query.is_some() && self.incrementing_column.is_none() {
            return Err(ConnectError::config(
                "incrementing.column.name",
                "needed with a query (a table's serial column is found on its own)",
            ));
        }
        if self.query.is_some() && self.topic_prefix.is_empty() {
            return Err(ConnectError::config(
                "topic.prefix",
                "with a query, the prefix is the topic and cannot be empty",
            ));
        }
        Ok(())
    }

    /// Whether a table is to be copied: named by the whitelist (by name or schema.name), or
    /// not named by the blacklist. The sink's offsets table never is.
    pub fn wants(&self, t: &TableId) -> bool {
        if t.table == crate::dialect::OFFSETS_TABLE {
            return false;
        }
        let named = |names: &[String]| {
            names.iter().any(|n| {
                *n == t.table
                    || t.schema
                        .as_ref()
                        .is_some_and(|s| *n == format!("{s}.{}", t.table))
            })
        };
        if !self.whitelist.is_empty() {
            named(&self.whitelist)
        } else {
            !named(&self.blacklist)
        }
    }

    /// The topic of a table's rows (the query's: the prefix).
    pub fn topic_of(&self, table: Option<&TableId>) -> String {
        match table {
            Some(t) => format!("{}{}", self.topic_prefix, t.table),
            None => self.topic_prefix.clone(),
        }
    }
}
