//! The JDBC sink's properties: how rows are written (`insert.mode`, `pk.mode`, …), parsed.

use std::collections::BTreeMap;

use ferry_connect::config::{at_least, non_empty, one_of, positive, Choice, Values};
use ferry_connect::{ConfigDef, ConfigKey, ConfigType, ConnectError, Importance, Result, Support};

use super::connection::{connection_config, Connection, Quoting};

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

/// `insert.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertMode {
    /// INSERT (the default).
    Insert,
    /// INSERT … ON CONFLICT (key) DO UPDATE.
    Upsert,
    /// UPDATE … WHERE key.
    Update,
}

/// `pk.mode`: where the primary key's values come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PkMode {
    /// No key columns.
    None,
    /// The record's topic, partition and offset (`__connect_topic`, `__connect_partition`,
    /// `__connect_offset` unless `pk.fields` names them).
    Kafka,
    /// The record's key: its fields, or `pk.fields`' one column for a primitive key.
    RecordKey,
    /// Fields of the record's value (`pk.fields`).
    RecordValue,
}

/// The sink's properties, parsed.
#[derive(Clone, Debug)]
pub struct JdbcSinkConfig {
    /// Where to connect.
    pub connection: Connection,
    /// `insert.mode`.
    pub insert_mode: InsertMode,
    /// `pk.mode`.
    pub pk_mode: PkMode,
    /// `pk.fields`.
    pub pk_fields: Vec<String>,
    /// `fields.whitelist`: the value's fields written (all when empty).
    pub fields: Vec<String>,
    /// `table.name.format`.
    pub table_name_format: String,
    /// `batch.size`: records written per transaction at most.
    pub batch_size: usize,
    /// `delete.enabled`.
    pub delete_enabled: bool,
    /// `auto.create`.
    pub auto_create: bool,
    /// `auto.evolve`.
    pub auto_evolve: bool,
    /// `quote.sql.identifiers` is ALWAYS.
    pub quote_identifiers: bool,
    /// `max.retries` (accepted without effect).
    pub max_retries: u32,
    /// `retry.backoff.ms` (accepted without effect).
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

impl JdbcSinkConfig {
    /// The sink's properties; the error names the property.
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
