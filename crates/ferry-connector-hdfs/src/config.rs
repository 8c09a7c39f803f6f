//! The properties of the HDFS sink, with the names and defaults of Confluent's HDFS 2 / HDFS 3
//! sink connectors (and of the storage-common partitioners they share). Each is supported,
//! accepted without effect (with a warning), or refused with a reason.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_connect::config::{non_empty, one_of, positive, Values};
use ferry_connect::plugin::{Finding, TaskFactory};
use ferry_connect::task::Props;
use ferry_connect::{
    ConfigDef, ConfigKey, ConfigType, ConnectError, Importance, PluginDesc, Result, Support,
};

use crate::format::avro::AvroCodec;
use crate::format::parquet::ParquetCodec;
use crate::partitioner::Partitioner;
use crate::sink::{HdfsSinkConnector, HdfsSinkTask};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Confluent's HDFS 2 sink connector (`HdfsSinkConnector`).
pub fn sink_plugin() -> PluginDesc {
    PluginDesc {
        class: SINK_CLASS,
        task_class: "io.confluent.connect.hdfs.HdfsSinkTask",
        aliases: &["HdfsSinkConnector"],
        version: VERSION,
        connector: HdfsSinkConnector::build,
        tasks: TaskFactory::Sink(HdfsSinkTask::build),
        config: sink_config,
        check: Some(check),
    }
}

/// Confluent's HDFS 3 sink connector (`Hdfs3SinkConnector`): the same sink, under its class.
pub fn hdfs3_sink_plugin() -> PluginDesc {
    PluginDesc {
        class: HDFS3_SINK_CLASS,
        task_class: "io.confluent.connect.hdfs3.Hdfs3SinkTask",
        aliases: &["Hdfs3SinkConnector"],
        version: VERSION,
        ..sink_plugin()
    }
}

/// The class of Confluent's HDFS 2 sink.
pub const SINK_CLASS: &str = "io.confluent.connect.hdfs.HdfsSinkConnector";
/// The class of Confluent's HDFS 3 sink.
pub const HDFS3_SINK_CLASS: &str = "io.confluent.connect.hdfs3.Hdfs3SinkConnector";

/// The output formats, by the simple names of Confluent's format classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatKind {
    /// Avro object container files (`.avro`), the default.
    Avro,
    /// Parquet files (`.parquet`).
    Parquet,
    /// JSON, one record per line (`.json`).
    Json,
    /// Values as text, one per line (`.txt`).
    String,
}

impl FormatKind {
    /// The format a `format.class` names (either connector's package).
    pub fn of_class(class: &str) -> Option<FormatKind> {
        let simple = class.rsplit('.').next().unwrap_or(class);
        let package = class.strip_suffix(simple).unwrap_or("");
        let known = [
            "",
            "io.confluent.connect.hdfs.",
            "io.confluent.connect.hdfs3.",
        ];
        let kind = match simple {
            "AvroFormat" => (FormatKind::Avro, "avro."),
            "ParquetFormat" => (FormatKind::Parquet, "parquet."),
            "JsonFormat" => (FormatKind::Json, "json."),
            "StringFormat" => (FormatKind::String, "string."),
            _ => return None,
        };
        known
            .iter()
            .any(|k| package.is_empty() || package == format!("{k}{}", kind.1))
            .then_some(kind.0)
    }

    /// The file extension Confluent gives committed files.
    pub fn extension(self) -> &'static str {
        match self {
            FormatKind::Avro => ".avro",
            FormatKind::Parquet => ".parquet",
            FormatKind::Json => ".json",
            FormatKind::String => ".txt",
        }
    }
}

/// Where files go: a NameNode, or a directory every worker shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// `hdfs://host:port`.
    Hdfs {
        /// The NameNode's `host:port`.
        namenode: String,
    },
    /// `file:///path` or `/path`.
    Local(PathBuf),
}

impl StoreUrl {
    /// `store.url` (or `hdfs.url`); the error says what a store URL must be.
    pub fn parse(url: &str) -> Result<StoreUrl> {
        let url = url.trim();
        let bad = |why: &str| ConnectError::config("store.url", format!("{url:?} {why}"));
        if let Some(rest) = url.strip_prefix("hdfs://") {
            let namenode = rest.trim_end_matches('/');
            if namenode.is_empty() || namenode.contains('/') {
                return Err(bad(
                    "must be hdfs://host:port (the directory is topics.dir)",
                ));
            }
            return Ok(StoreUrl::Hdfs {
                namenode: namenode.to_string(),
            });
        }
        let path = url.strip_prefix("file://").unwrap_or(url);
        if !path.starts_with('/') {
            return Err(bad(
                "must be hdfs://host:port, file:///absolute/path or /absolute/path",
            ));
        }
        Ok(StoreUrl::Local(PathBuf::from(path)))
    }
}

/// The HDFS sink's parsed config.
#[derive(Clone, Debug)]
pub struct HdfsSinkConfig {
    /// `store.url`: where the files go.
    pub url: StoreUrl,
    /// `topics.dir`, without a trailing slash.
    pub topics_dir: String,
    /// `format.class`.
    pub format: FormatKind,
    /// `avro.codec`.
    pub avro_codec: AvroCodec,
    /// `parquet.codec`.
    pub parquet_codec: ParquetCodec,
    /// `flush.size`: records of a partition after which its files are committed.
    pub flush_size: u64,
    /// `rotate.interval.ms` (record time); `None` when -1.
    pub rotate_interval_ms: Option<i64>,
    /// `rotate.schedule.interval.ms` (wall clock, aligned to the time zone); `None` when -1.
    pub rotate_schedule_ms: Option<i64>,
    /// `retry.backoff.ms`.
    pub retry_backoff_ms: u64,
    /// `filename.offset.zero.pad.width`.
    pub zero_pad_width: usize,
    /// `file.delim`.
    pub file_delim: String,
    /// `max.open.files.per.task`.
    pub max_open_files: usize,
    /// The partitioner `partitioner.class` and its properties describe.
    pub partitioner: Partitioner,
}

/// A period property: positive milliseconds, or -1 for none.
fn period(values: &Values, key: &str) -> Result<Option<i64>> {
    match values.number::<i64>(key)? {
        -1 => Ok(None),
        ms if ms > 0 => Ok(Some(ms)),
        ms => Err(
            ConnectError::config(key, format!("must be positive or -1, got {ms}"))
                .with_value(ms.to_string()),
        ),
    }
}

impl HdfsSinkConfig {
    /// The sink's properties; the error names the property.
    pub fn parse(props: &Props) -> Result<Self> {
        let values = Values::new(sink_config(), props);
        let url = match values.text("store.url")? {
            Some(url) => url,
            None => values.text("hdfs.url")?.ok_or_else(|| {
                ConnectError::config("store.url", "missing (or the older hdfs.url)")
            })?,
        };
        let class = values.string("format.class")?;
        let format = FormatKind::of_class(&class).ok_or_else(|| {
            ConnectError::config("format.class", format!("{class:?} is not supported"))
        })?;
        Ok(HdfsSinkConfig {
            url: StoreUrl::parse(&url)?,
            topics_dir: values
                .string("topics.dir")?
                .trim_end_matches('/')
                .to_string(),
            format,
            avro_codec: values.choice("avro.codec")?,
            parquet_codec: values.choice("parquet.codec")?,
            flush_size: values.number("flush.size")?,
            rotate_interval_ms: period(&values, "rotate.interval.ms")?,
            rotate_schedule_ms: period(&values, "rotate.schedule.interval.ms")?,
            retry_backoff_ms: values.number("retry.backoff.ms")?,
            zero_pad_width: values.number("filename.offset.zero.pad.width")?,
            file_delim: values.string("file.delim")?,
            max_open_files: values.number("max.open.files.per.task")?,
            partitioner: Partitioner::from_config(props)?,
        })
    }
}

fn no_effect(name: &'static str, ty: ConfigType, why: &'static str) -> ConfigKey {
    ConfigKey::new(name, ty, Importance::Low, "Accepted for compatibility.")
        .support(Support::NoEffect(why))
}

/// The HDFS sink's own properties.
pub fn sink_config() -> ConfigDef {
    use ConfigType::*;
    use Importance::*;
    let reach = "Ferry reaches the NameNode named by store.url itself";
    let kerberos = "Kerberos is not supported yet (see hdfs.authentication.kerberos)";
    vec![
        ConfigKey::new("store.url", String, High, "hdfs://host:port, or file:///path (or /path) of a directory every worker shares."),
        ConfigKey::new("hdfs.url", String, High, "The older name of store.url (store.url wins when both are set)."),
        ConfigKey::new("topics.dir", String, High, "Top-level directory of the data; files go under <topics.dir>/<topic>/<partition path>/.")
            .default("topics")
            .validator(non_empty),
        ConfigKey::new("format.class", Class, High, "AvroFormat, ParquetFormat, JsonFormat or StringFormat (io.confluent.connect.hdfs.* or hdfs3.*).")
            .default("io.confluent.connect.hdfs.avro.AvroFormat")
            .validator(|v| match FormatKind::of_class(v.trim()) {
                Some(_) => Ok(()),
                None => Err(format!("{v:?} is not supported; use AvroFormat, ParquetFormat, JsonFormat or StringFormat")),
            }),
        ConfigKey::new("flush.size", Int, High, "Records of a topic partition after which its files are committed.")
            .required()
            .validator(positive),
        ConfigKey::new("rotate.interval.ms", Long, High, "Commit when the record time has moved this far past the first record of the open files; -1: never.")
            .default("-1")
            .validator(|v| ferry_connect::config::at_least(-1)(v)),
        ConfigKey::new("rotate.schedule.interval.ms", Long, Medium, "Commit on the wall clock every this many ms, aligned to timezone, even when no record arrives; -1: never.")
            .default("-1")
            .validator(|v| ferry_connect::config::at_least(-1)(v)),
        ConfigKey::new("retry.backoff.ms", Long, Low, "How long to wait before writing again after the store failed.")
            .default("5000")
            .validator(|v| ferry_connect::config::at_least(0)(v)),
        ConfigKey::new("filename.offset.zero.pad.width", Int, Low, "Width the offsets in committed file names are zero-padded to.")
            .default("10")
            .validator(positive),
        ConfigKey::new("directory.delim", String, Medium, "Directory delimiter of partition paths.").default("/"),
        ConfigKey::new("file.delim", String, Medium, "Delimiter of the parts of committed file names.")
            .default("+")
            .validator(non_empty),
        ConfigKey::new("max.open.files.per.task", Int, Medium, "Ferry's: at most this many files open per task; beyond, the least recently written partition is committed.")
            .default("100")
            .validator(positive),
        ConfigKey::new("partitioner.class", Class, High, "DefaultPartitioner, FieldPartitioner, TimeBasedPartitioner, HourlyPartitioner or DailyPartitioner.")
            .default("io.confluent.connect.storage.partitioner.DefaultPartitioner"),
        ConfigKey::new("partition.field.name", List, Medium, "FieldPartitioner's fields, comma-separated.").default(""),
        ConfigKey::new("partition.duration.ms", Long, Medium, "TimeBasedPartitioner's bucket length; -1: not time-based.").default("-1"),
        ConfigKey::new("path.format", String, Medium, "TimeBasedPartitioner's directory pattern, e.g. 'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH.").default(""),
        ConfigKey::new("locale", String, Medium, "Locale of time-based paths (month and day names are English).").default(""),
        ConfigKey::new("timezone", String, Medium, "Time zone of time-based paths and scheduled rotation: UTC, Asia/Seoul, +09:00; empty: UTC.").default(""),
        ConfigKey::new("timestamp.extractor", String, Medium, "Wallclock, Record or RecordField: where a record's time comes from.")
            .default("Wallclock")
            .validator(|v| one_of(v, &["Wallclock", "Record", "RecordField"])),
        ConfigKey::new("timestamp.field", String, Medium, "RecordField's field (dots for nested fields).").default("timestamp"),
        ConfigKey::new("avro.codec", String, Low, "Avro compression: null, deflate or snappy.")
            .default("null")
            .choice::<AvroCodec>(),
        ConfigKey::new("parquet.codec", String, Low, "Parquet compression: none, snappy or zstd.")
            .default("snappy")
            .choice::<ParquetCodec>(),
        ConfigKey::new("schema.compatibility", String, Low, "NONE: a schema change commits the open file and starts a new one.")
            .default("NONE")
            .validator(|v| one_of(v, &["NONE"]).map_err(|e| format!("{e} (projection to other schemas is not supported yet)"))),
        ConfigKey::new("hdfs.authentication.kerberos", Boolean, High, "Kerberos authentication; not supported yet.")
            .default("false")
            .validator(|v| match v.trim() {
                "false" => Ok(()),
                _ => Err("Kerberos is not supported yet".into()),
            }),
        ConfigKey::new("hive.integration", Boolean, High, "Hive integration; not supported.")
            .default("false")
            .validator(|v| match v.trim() {
                "false" => Ok(()),
                _ => Err("Hive integration is not supported".into()),
            }),
        no_effect("logs.dir", String, "Ferry keeps no write-ahead log: commits are recorded in Raft"),
        no_effect("hadoop.conf.dir", String, reach),
        no_effect("hadoop.home", String, reach),
        no_effect("storage.class", Class, "the storage follows store.url"),
        no_effect("shutdown.timeout.ms", Long, "a task stops when its last write returns"),
        no_effect("connect.hdfs.principal", String, kerberos),
        no_effect("connect.hdfs.keytab", String, kerberos),
        no_effect("hdfs.namenode.principal", String, kerberos),
        no_effect("kerberos.ticket.renew.period.ms", Long, kerberos),
    ]
}

/// Checks across properties: the store, the partitioner, and the settings that would do
/// nothing as given.
pub fn check(config: &BTreeMap<String, String>) -> Vec<Finding> {
    let mut found = Vec::new();
    let given = |k: &str| config.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    match (given("store.url"), given("hdfs.url")) {
        (None, None) => found.push(Finding::Error(
            "store.url".into(),
            "missing: set store.url (or the older hdfs.url) to hdfs://host:port or a shared directory".into(),
        )),
        (Some(url), Some(old)) if url != old => found.push(Finding::Warning(
            "hdfs.url".into(),
            format!("store.url {url:?} is used, not this"),
        )),
        (Some(url), _) | (None, Some(url)) => {
            if let Err(e) = StoreUrl::parse(url) {
                let key = if given("store.url").is_some() { "store.url" } else { "hdfs.url" };
                found.push(Finding::Error(key.into(), e.problem(key).1));
            }
        }
    }
    match Partitioner::from_config(config) {
        Err(e) => {
            let (property, problem) = e.problem("partitioner.class");
            found.push(Finding::Error(property, problem));
        }
        Ok(Partitioner::Time(t)) => {
            if given("timezone").is_none() {
                found.push(Finding::Warning(
                    "timezone".into(),
                    "not set: time-based paths are in UTC (Confluent's connector requires a timezone)".into(),
                ));
            }
            if given("locale").is_none() {
                found.push(Finding::Warning(
                    "locale".into(),
                    "not set: month and day names are English (Confluent's connector requires a locale)".into(),
                ));
            }
            if given("timestamp.field").is_some()
                && !matches!(t.extractor, crate::partitioner::Extractor::RecordField(_))
            {
                found.push(Finding::Warning(
                    "timestamp.field".into(),
                    "accepted without effect: timestamp.extractor is not RecordField (the default is Wallclock), so records are placed by the clock; set timestamp.extractor=RecordField to place them by this field".into(),
                ));
            }
        }
        Ok(_) => {
            for key in [
                "partition.duration.ms",
                "path.format",
                "timestamp.extractor",
                "timestamp.field",
            ] {
                if config.contains_key(key) {
                    found.push(Finding::Warning(
                        key.into(),
                        "accepted without effect: only time-based partitioners use it".into(),
                    ));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_connect::config::props;

    /// Seed 000's HDFS sink config, as its team wrote it (addresses aside).
    const SEED_000: [(&str, &str); 11] = [
        (
            "connector.class",
            "io.confluent.connect.hdfs.HdfsSinkConnector",
        ),
        ("hdfs.url", "hdfs://127.0.0.1:9000"),
        ("partition.duration.ms", "600000"),
        ("topics.dir", "/data/log"),
        ("tasks.max", "6"),
        ("topics", "irene-shopping-log"),
        ("format.class", "io.confluent.connect.hdfs.avro.AvroFormat"),
        (
            "partitioner.class",
            "io.confluent.connect.hdfs.partitioner.TimeBasedPartitioner",
        ),
        ("path.format", "yyyyMMdd/HH/mm/yyyyMMddHHmm"),
        ("timestamp.field", "timestamp"),
        ("flush.size", "600000"),
    ];

    fn seed_000() -> Props {
        let mut c = props(&SEED_000);
        c.insert("rotate.schedule.interval.ms".into(), "600000".into());
        c
    }

    #[test]
    fn seed_000_parses_and_its_silent_settings_are_pointed_out() {
        let c = HdfsSinkConfig::parse(&seed_000()).expect("valid");
        assert_eq!(
            c.url,
            StoreUrl::Hdfs {
                namenode: "127.0.0.1:9000".into()
            }
        );
        assert_eq!(c.topics_dir, "/data/log");
        assert_eq!(c.format, FormatKind::Avro);
        assert_eq!(c.flush_size, 600_000);
        assert_eq!(c.rotate_schedule_ms, Some(600_000));
        assert_eq!(c.rotate_interval_ms, None);
        assert_eq!(c.zero_pad_width, 10);
        let findings = check(&seed_000());
        let (mut warned, mut refused) = (Vec::new(), Vec::new());
        for f in &findings {
            match f {
                Finding::Warning(k, _) => warned.push(k.as_str()),
                Finding::Error(k, _) => refused.push(k.as_str()),
            }
        }
        assert_eq!(warned, ["timezone", "locale", "timestamp.field"]);
        assert!(refused.is_empty(), "{findings:?}");
    }

    #[test]
    fn store_urls_and_format_classes() {
        for (url, want) in [
            (
                "hdfs://nn:8020",
                StoreUrl::Hdfs {
                    namenode: "nn:8020".into(),
                },
            ),
            (
                "hdfs://nn:8020/",
                StoreUrl::Hdfs {
                    namenode: "nn:8020".into(),
                },
            ),
            ("file:///srv/ferry", StoreUrl::Local("/srv/ferry".into())),
            ("/srv/ferry", StoreUrl::Local("/srv/ferry".into())),
        ] {
            assert_eq!(StoreUrl::parse(url).expect(url), want);
        }
        for bad in [
            "hdfs://",
            "hdfs://nn:8020/data",
            "relative/dir",
            "s3://bucket",
        ] {
            let err = StoreUrl::parse(bad).expect_err(bad);
            assert!(err.message.starts_with("store.url"), "{err}");
        }
        assert_eq!(
            FormatKind::of_class("io.confluent.connect.hdfs3.parquet.ParquetFormat"),
            Some(FormatKind::Parquet)
        );
        assert_eq!(
            FormatKind::of_class("io.confluent.connect.hdfs.json.JsonFormat"),
            Some(FormatKind::Json)
        );
        assert_eq!(
            FormatKind::of_class("io.confluent.connect.hdfs.string.StringFormat"),
            Some(FormatKind::String)
        );
        assert_eq!(
            FormatKind::of_class("io.confluent.connect.hdfs.parquet.AvroFormat"),
            None
        );
        assert_eq!(
            FormatKind::of_class("io.confluent.connect.s3.format.avro.AvroFormat"),
            None
        );
    }

    #[test]
    fn cross_property_problems_name_the_property() {
        let mut c = seed_000();
        c.remove("hdfs.url");
        c.insert(
            "format.class".into(),
            "io.confluent.connect.hdfs.json.JsonFormat".into(),
        );
        let errors = |c: &Props| -> Vec<String> {
            check(c)
                .into_iter()
                .filter_map(|f| match f {
                    Finding::Error(k, e) => Some(format!("{k}: {e}")),
                    Finding::Warning(..) => None,
                })
                .collect()
        };
        assert!(
            errors(&c)[0].starts_with("store.url: missing"),
            "{:?}",
            errors(&c)
        );
        c.insert("store.url".into(), "ftp://x".into());
        assert!(
            errors(&c)[0].starts_with("store.url: \"ftp://x\""),
            "{:?}",
            errors(&c)
        );
        c.insert("store.url".into(), "/shared".into());
        c.insert("path.format".into(), "yyyy/ww".into());
        assert!(
            errors(&c)[0].starts_with("path.format: "),
            "{:?}",
            errors(&c)
        );
        let parse = HdfsSinkConfig::parse(&props(&[("store.url", "/x"), ("flush.size", "0")]));
        assert!(parse
            .expect_err("flush.size")
            .message
            .starts_with("flush.size"));
    }
}
