//! The JDBC connectors' properties, with the names and defaults of Confluent's JDBC connector
//! (10.x): the connection (`connection.url` as PostgreSQL's JDBC driver reads it, user and
//! password), the source's and the sink's. The password is kept out of `Debug` and of every
//! message.

use std::collections::BTreeMap;

use ferry_connect::config::{at_least, non_empty, one_of, positive, Choice, Values};
use ferry_connect::plugin::{Finding, TaskFactory};
use ferry_connect::{
    ConfigDef, ConfigKey, ConfigType, ConnectError, Importance, PluginDesc, Result, Support,
};

use crate::dialect::TableId;
use crate::sink::{JdbcSinkConnector, JdbcSinkTask};
use crate::source::{JdbcSourceConnector, JdbcSourceTask};

pub const SINK_CLASS: &str = "io.confluent.connect.jdbc.JdbcSinkConnector";
pub const SOURCE_CLASS: &str = "io.confluent.connect.jdbc.JdbcSourceConnector";

/// The task property that lists a source task's tables (JSON: `[[schema, table], …]`).
pub const TABLES: &str = "tables";

pub fn sink_plugin() -> PluginDesc {
    PluginDesc {
        class: SINK_CLASS,
        aliases: &["JdbcSinkConnector"],
        version: env!("CARGO_PKG_VERSION"),
        connector: JdbcSinkConnector::build,
        tasks: TaskFactory::Sink(JdbcSinkTask::build),
        config: sink_config,
        check: Some(check_sink),
    }
}

pub fn source_plugin() -> PluginDesc {
    PluginDesc {
        class: SOURCE_CLASS,
        aliases: &["JdbcSourceConnector"],
        version: env!("CARGO_PKG_VERSION"),
        connector: JdbcSourceConnector::build,
        tasks: TaskFactory::Source(JdbcSourceTask::build),
        config: source_config,
        check: Some(check_source),
    }
}

fn connection_config() -> ConfigDef {
    use ConfigType::*;
    use Importance::*;
    vec![
        ConfigKey::new(
            "connection.url",
            String,
            High,
            "jdbc:postgresql://host:port/database[?params]",
        )
        .required()
        .validator(|v| Connection::parse_url(v.trim()).map(|_| ())),
        ConfigKey::new(
            "connection.user",
            String,
            High,
            "The database user (wins over the URL's user parameter).",
        ),
        ConfigKey::new(
            "connection.password",
            Password,
            High,
            "The user's password; never shown or logged.",
        ),
        ConfigKey::new(
            "connection.attempts",
            Int,
            Low,
            "Attempts of the source connector to list the tables; tasks retry through the retry layer.",
        )
        .default("3")
        .validator(positive),
        ConfigKey::new(
            "connection.backoff.ms",
            Long,
            Low,
            "The source connector's wait between those attempts.",
        )
        .default("10000")
        .validator(|v| at_least(0)(v)),
        ConfigKey::new(
            "dialect.name",
            String,
            Low,
            "PostgreSqlDatabaseDialect, or empty (taken from the URL).",
        )
        .default("")
        .validator(|v| {
            one_of(
                if v.trim().is_empty() {
                    "PostgreSqlDatabaseDialect"
                } else {
                    v
                },
                &["PostgreSqlDatabaseDialect"],
            )
        }),
    ]
}

/// The JDBC sink's own properties.
pub fn sink_config() -> ConfigDef {
    use ConfigType::*;
    use Importance::*;
    let mut def = connection_config();
    def.extend([
        ConfigKey::new(
            "insert.mode",
            String,
            High,
            "insert, upsert (INSERT … ON CONFLICT DO UPDATE) or update.",
        )
        .default("insert")
        .choice::<InsertMode>(),
        ConfigKey::new(
            "pk.mode",
            String,
            High,
            "none, kafka, record_key or record_value: where the key columns come from.",
        )
        .default("none")
        .choice::<PkMode>(),
        ConfigKey::new("pk.fields", List, Medium, "The key columns (see pk.mode).").default(""),
        ConfigKey::new(
            "fields.whitelist",
            List,
            Medium,
            "The value's fields written; empty: all.",
        )
        .default(""),
        ConfigKey::new(
            "table.name.format",
            String,
            Medium,
            "The destination table; ${topic} is replaced by the record's topic.",
        )
        .default("${topic}")
        .validator(non_empty),
        ConfigKey::new(
            "batch.size",
            Int,
            Medium,
            "Records written per transaction at most.",
        )
        .default("3000")
        .validator(positive),
        ConfigKey::new(
            "delete.enabled",
            Boolean,
            Medium,
            "Tombstones delete their key's row (needs pk.mode=record_key).",
        )
        .default("false"),
        ConfigKey::new(
            "auto.create",
            Boolean,
            Medium,
            "Create a missing table from the record's schema.",
        )
        .default("false"),
        ConfigKey::new(
            "auto.evolve",
            Boolean,
            Medium,
            "Add missing (optional) columns.",
        )
        .default("false"),
        ConfigKey::new("quote.sql.identifiers", String, Medium, "ALWAYS or NEVER.")
            .default("ALWAYS")
            .choice::<Quoting>(),
        ConfigKey::new("max.retries", Int, Medium, "Retries of a failed batch.")
            .default("10")
            .validator(|v| at_least(0)(v))
            .support(Support::NoEffect(
                "retriable failures are retried by the runtime within errors.retry.timeout",
            )),
        ConfigKey::new("retry.backoff.ms", Int, Medium, "The wait between retries.")
            .default("3000")
            .validator(|v| at_least(0)(v))
            .support(Support::NoEffect(
                "the runtime's backoff is errors.retry.delay.max.ms",
            )),
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
        ConfigKey::new("table.types", List, Low, "TABLE (views are not written).")
            .default("TABLE")
            .support(Support::NoEffect("Ferry writes tables only")),
    ]);
    def
}

/// What the sink refuses across properties (the same checks as at start).
pub fn check_sink(props: &BTreeMap<String, String>) -> Vec<Finding> {
    finding(JdbcSinkConfig::parse(props).map(|_| ()))
}

/// What the source refuses across properties (the same checks as at start).
pub fn check_source(props: &BTreeMap<String, String>) -> Vec<Finding> {
    finding(JdbcSourceConfig::parse(props).map(|_| ()))
}

/// A parse error as a finding on the property it is about.
fn finding(parsed: Result<()>) -> Vec<Finding> {
    match parsed {
        Ok(()) => Vec::new(),
        Err(e) => {
            let (property, problem) = e.problem("connection.url");
            vec![Finding::Error(property, problem)]
        }
    }
}

/// Where to connect, from `connection.url`, `connection.user` and `connection.password`.
#[derive(Clone, PartialEq, Eq)]
pub struct Connection {
    /// host and port, in the order the URL lists them (the driver tries them in turn).
    pub hosts: Vec<(String, u16)>,
    pub database: String,
    pub user: Option<String>,
    password: Option<String>,
    /// The URL's other parameters (sslmode, currentSchema, ApplicationName, …).
    pub params: BTreeMap<String, String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("hosts", &self.hosts)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "[hidden]"))
            .field("params", &self.params)
            .finish()
    }
}

/// PostgreSQL's port when the URL names none.
const DEFAULT_PORT: u16 = 5432;

/// Decode `%XX` escapes (URL parameters may hold them, passwords especially).
fn unescape(s: &str) -> std::result::Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a % that does not start an escape")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "escapes that are not UTF-8".to_string())
}

impl Connection {
    /// Parse the connection properties. Errors name `connection.url` and never repeat the
    /// password.
    pub fn from_props(props: &BTreeMap<String, String>) -> Result<Connection> {
        let values = Values::new(connection_config(), props);
        // Read as given, not through its validator: an error must not carry the URL, which
        // may hold a password.
        let url = props
            .get("connection.url")
            .map(|u| u.trim())
            .filter(|u| !u.is_empty())
            .ok_or_else(|| ConnectError::config("connection.url", "missing required property"))?;
        let mut c =
            Connection::parse_url(url).map_err(|e| ConnectError::config("connection.url", e))?;
        // The properties win over the URL's parameters, as in Confluent's connector.
        if let Some(user) = values.text("connection.user")? {
            c.user = Some(user);
        }
        if let Some(password) = values.password("connection.password")? {
            c.password = Some(password);
        }
        Ok(c)
    }

    /// `jdbc:postgresql://host[:port][,host[:port]…]/database[?k=v&…]`, or the short forms
    /// `jdbc:postgresql:database` and `jdbc:postgresql:/` (localhost). Messages quote only
    /// the parts that cannot hold a password.
    pub fn parse_url(url: &str) -> std::result::Result<Connection, String> {
        let rest = url.strip_prefix("jdbc:postgresql:").ok_or_else(|| {
            let scheme = url.split("//").next().unwrap_or(url);
            format!("{scheme:?} is not a PostgreSQL JDBC URL: expected jdbc:postgresql://host:port/database")
        })?;
        let (location, query) = match rest.split_once('?') {
            Some((l, q)) => (l, Some(q)),
            None => (rest, None),
        };
        let (hosts, database) = match location.strip_prefix("//") {
            Some(authority_and_path) => {
                let (authority, database) = authority_and_path
                    .split_once('/')
                    .unwrap_or((authority_and_path, ""));
                let mut hosts = Vec::new();
                for host in authority.split(',').filter(|h| !h.is_empty()) {
                    hosts.push(parse_host(host)?);
                }
                if hosts.is_empty() {
                    hosts.push(("localhost".to_string(), DEFAULT_PORT));
                }
                (hosts, database.to_string())
            }
            None => (
                vec![("localhost".to_string(), DEFAULT_PORT)],
                location.trim_start_matches('/').to_string(),
            ),
        };
        let mut c = Connection {
            hosts,
            database: unescape(&database).map_err(|e| format!("the database name has {e}"))?,
            user: None,
            password: None,
            params: BTreeMap::new(),
        };
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = unescape(value).map_err(|e| format!("parameter {key:?} has {e}"))?;
            match key {
                "user" => c.user = Some(value),
                "password" => c.password = Some(value),
                _ => {
                    c.params.insert(key.to_string(), value);
                }
            }
        }
        if c.database.is_empty() {
            // The driver's default: the database named after the user.
            c.database = c.user.clone().unwrap_or_default();
        }
        Ok(c)
    }

    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }
}

fn parse_host(host: &str) -> std::result::Result<(String, u16), String> {
    // [v6]:port, [v6], host:port, host
    if let Some(v6) = host.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("host {host:?}: an IPv6 address without its ]"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => port(host, p)?,
            None if after.is_empty() => DEFAULT_PORT,
            None => {
                return Err(format!(
                    "host {host:?}: unexpected {after:?} after the address"
                ))
            }
        };
        return Ok((addr.to_string(), port));
    }
    match host.rsplit_once(':') {
        Some((name, p)) => Ok((name.to_string(), port(host, p)?)),
        None => Ok((host.to_string(), DEFAULT_PORT)),
    }
}

fn port(host: &str, p: &str) -> std::result::Result<u16, String> {
    p.parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("host {host:?}: {p:?} is not a port"))
}

/// `insert.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertMode {
    Insert,
    /// INSERT … ON CONFLICT (key) DO UPDATE.
    Upsert,
    Update,
}

/// `pk.mode`: where the primary key's values come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PkMode {
    None,
    /// The record's topic, partition and offset (`__connect_topic`, `__connect_partition`,
    /// `__connect_offset` unless `pk.fields` names them).
    Kafka,
    RecordKey,
    RecordValue,
}

/// The sink's properties, parsed.
#[derive(Clone, Debug)]
pub struct JdbcSinkConfig {
    pub connection: Connection,
    pub insert_mode: InsertMode,
    pub pk_mode: PkMode,
    pub pk_fields: Vec<String>,
    /// `fields.whitelist`: the value's fields written (all when empty).
    pub fields: Vec<String>,
    pub table_name_format: String,
    pub batch_size: usize,
    pub delete_enabled: bool,
    pub auto_create: bool,
    pub auto_evolve: bool,
    pub quote_identifiers: bool,
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
}

impl Choice for InsertMode {
    const CHOICES: &'static [(&'static str, InsertMode)] = &[
        ("insert", InsertMode::Insert),
        ("upsert", InsertMode::Upsert),
        ("update", InsertMode::Update),
    ];
}

impl Choice for PkMode {
    const CHOICES: &'static [(&'static str, PkMode)] = &[
        ("none", PkMode::None),
        ("kafka", PkMode::Kafka),
        ("record_key", PkMode::RecordKey),
        ("record_value", PkMode::RecordValue),
    ];
}

/// `quote.sql.identifiers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quoting {
    Always,
    Never,
}

impl Choice for Quoting {
    const CHOICES: &'static [(&'static str, Quoting)] =
        &[("always", Quoting::Always), ("never", Quoting::Never)];
}

impl JdbcSinkConfig {
    pub fn parse(props: &BTreeMap<String, String>) -> Result<JdbcSinkConfig> {
        let values = Values::new(sink_config(), props);
        let config = JdbcSinkConfig {
            connection: Connection::from_props(props)?,
            insert_mode: values.choice("insert.mode")?,
            pk_mode: values.choice("pk.mode")?,
            pk_fields: values.list("pk.fields")?,
            fields: values.list("fields.whitelist")?,
            table_name_format: values.string("table.name.format")?,
            batch_size: values.number("batch.size")?,
            delete_enabled: values.boolean("delete.enabled")?,
            auto_create: values.boolean("auto.create")?,
            auto_evolve: values.boolean("auto.evolve")?,
            quote_identifiers: values.choice::<Quoting>("quote.sql.identifiers")?
                == Quoting::Always,
            max_retries: values.number("max.retries")?,
            retry_backoff_ms: values.number("retry.backoff.ms")?,
        };
        config.check()?;
        Ok(config)
    }

    /// What Confluent's connector refuses across properties.
    fn check(&self) -> Result<()> {
        if self.delete_enabled && self.pk_mode != PkMode::RecordKey {
            return Err(ConnectError::config(
                "delete.enabled",
                "deletes need pk.mode=record_key (a tombstone has only its key)",
            ));
        }
        if self.insert_mode != InsertMode::Insert && self.pk_mode == PkMode::None {
            return Err(ConnectError::config(
                "insert.mode",
                format!(
                    "{} needs a primary key: set pk.mode to kafka, record_key or record_value",
                    match self.insert_mode {
                        InsertMode::Upsert => "upsert",
                        _ => "update",
                    }
                ),
            ));
        }
        if self.pk_mode == PkMode::Kafka && !matches!(self.pk_fields.len(), 0 | 3) {
            return Err(ConnectError::config("pk.fields", format!(
                "pk.mode=kafka takes three names (topic, partition, offset columns) or none, got {}",
                self.pk_fields.len()
            )));
        }
        Ok(())
    }

    /// The destination table of a topic: `table.name.format` with `${topic}` replaced.
    pub fn table_of(&self, topic: &str) -> String {
        self.table_name_format.replace("${topic}", topic)
    }
}

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
    Incrementing,
    Timestamp,
    TimestampIncrementing,
}

impl SourceMode {
    pub fn timestamps(self) -> bool {
        matches!(
            self,
            SourceMode::Timestamp | SourceMode::TimestampIncrementing
        )
    }

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
    pub connection: Connection,
    /// The connector's attempts to list the tables, and its wait between them.
    pub connection_attempts: u32,
    pub connection_backoff_ms: u64,
    pub mode: SourceMode,
    pub incrementing_column: Option<String>,
    pub timestamp_columns: Vec<String>,
    pub delay_ms: i64,
    /// Epoch milliseconds to start from without an offset (`timestamp.initial`; -1 is now).
    pub timestamp_initial: Option<i64>,
    pub validate_non_null: bool,
    pub whitelist: Vec<String>,
    pub blacklist: Vec<String>,
    pub schema_pattern: Option<String>,
    pub table_types: Vec<String>,
    pub query: Option<String>,
    pub query_suffix: String,
    pub topic_prefix: String,
    pub poll_interval_ms: u64,
    pub batch_max_rows: usize,
    pub table_poll_interval_ms: u64,
    pub numeric_mapping: NumericMapping,
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

#[cfg(test)]
mod tests;
