//! The properties of FileStreamSource and FileStreamSink, with Kafka Connect's class names and
//! aliases.

use std::collections::BTreeMap;

use ferry_connect::config::{non_empty, positive, Values};
use ferry_connect::plugin::{Finding, TaskFactory};
use ferry_connect::task::Props;
use ferry_connect::{ConfigDef, ConfigKey, ConfigType, Importance, PluginDesc, Result};

use crate::sink::{FileSinkConnector, FileSinkTask};
use crate::source::{FileSourceConnector, FileSourceTask};

/// Kafka Connect's class of FileStreamSink.
pub const SINK_CLASS: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";
/// Kafka Connect's class of FileStreamSource.
pub const SOURCE_CLASS: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Kafka Connect's source partition and offset keys of FileStreamSource.
pub const FILENAME_FIELD: &str = "filename";
/// The offset key of FileStreamSource: the byte position after the line.
pub const POSITION_FIELD: &str = "position";

/// FileStreamSink's parsed config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSinkConfig {
    /// Relative paths resolve in the worker's working directory.
    pub file: String,
}

impl FileSinkConfig {
    /// The properties of a task or connector; the error names the property.
    pub fn parse(props: &Props) -> Result<Self> {
        Ok(FileSinkConfig {
            file: Values::new(sink_config(), props).string("file")?,
        })
    }
}

/// FileStreamSource's parsed config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSourceConfig {
    /// The file read; relative paths resolve in the worker's working directory.
    pub file: String,
    /// The topic its lines go to.
    pub topic: String,
    /// Lines per poll at most (`batch.size`).
    pub batch_size: usize,
}

impl FileSourceConfig {
    /// The properties of a task or connector; the error names the property.
    pub fn parse(props: &Props) -> Result<Self> {
        let values = Values::new(source_config(), props);
        Ok(FileSourceConfig {
            file: values.string("file")?,
            topic: values.string("topic")?,
            batch_size: values.number("batch.size")?,
        })
    }
}

/// FileStreamSink: records' values appended to a file, one per line.
pub fn sink_plugin() -> PluginDesc {
    PluginDesc {
        class: SINK_CLASS,
        task_class: "org.apache.kafka.connect.file.FileStreamSinkTask",
        aliases: &["FileStreamSink", "FileStreamSinkConnector"],
        version: VERSION,
        connector: FileSinkConnector::build,
        tasks: TaskFactory::Sink(FileSinkTask::build),
        config: sink_config,
        check: None,
    }
}

/// FileStreamSource: a file's lines as records, resumed after the committed position.
pub fn source_plugin() -> PluginDesc {
    PluginDesc {
        class: SOURCE_CLASS,
        task_class: "org.apache.kafka.connect.file.FileStreamSourceTask",
        aliases: &["FileStreamSource", "FileStreamSourceConnector"],
        version: VERSION,
        connector: FileSourceConnector::build,
        tasks: TaskFactory::Source(FileSourceTask::build),
        config: source_config,
        check: Some(check_source),
    }
}

fn sink_config() -> ConfigDef {
    vec![ConfigKey::new(
        "file",
        ConfigType::String,
        Importance::High,
        "Destination filename. A relative path resolves in the worker's working directory.",
    )
    .required()
    .validator(non_empty)]
}

fn source_config() -> ConfigDef {
    vec![
        ConfigKey::new(
            "file",
            ConfigType::String,
            Importance::High,
            "Source filename. A relative path resolves in the worker's working directory.",
        )
        .required()
        .validator(non_empty),
        ConfigKey::new(
            "topic",
            ConfigType::String,
            Importance::High,
            "The topic to publish data to.",
        )
        .required()
        .validator(non_empty),
        ConfigKey::new(
            "batch.size",
            ConfigType::Int,
            Importance::Low,
            "The maximum number of records the source task can read from the file each time it is polled.",
        )
        .default("2000")
        .validator(positive),
    ]
}

/// Kafka Connect's FileStreamSource takes exactly one topic.
fn check_source(config: &BTreeMap<String, String>) -> Vec<Finding> {
    match config.get("topic") {
        Some(topic) if topic.contains(',') => vec![Finding::Error(
            "topic".to_string(),
            format!("must name a single topic, got {topic:?}"),
        )],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_connect::validate;

    use ferry_connect::config::props as config;

    #[test]
    fn seed_000_file_sink_config_validates() {
        // The FileStreamSink config of seed 000 (its connect-configs record).
        let c = config(&[
            (
                "connector.class",
                "org.apache.kafka.connect.file.FileStreamSinkConnector",
            ),
            ("file", "/home1/irteam/jy-test-txt.txt"),
            ("topics", "test1"),
            ("tasks.max", "3"),
            ("name", "FileStreamSinkConnector"),
        ]);
        let v = validate(&[sink_plugin(), source_plugin()], &c);
        assert_eq!(v.error_count(), 0, "{:?}", v.errors());
        assert_eq!(v.class, Some(SINK_CLASS));
    }

    #[test]
    fn source_needs_a_single_topic() {
        let plugins = [sink_plugin(), source_plugin()];
        let missing = validate(
            &plugins,
            &config(&[
                ("name", "s"),
                ("connector.class", "FileStreamSource"),
                ("file", "x"),
            ]),
        );
        assert_eq!(
            missing.errors(),
            vec!["topic: Missing required configuration \"topic\" which has no default value."]
        );
        let two = validate(
            &plugins,
            &config(&[
                ("name", "s"),
                ("connector.class", "FileStreamSource"),
                ("file", "x"),
                ("topic", "a,b"),
            ]),
        );
        assert_eq!(
            two.errors(),
            vec!["topic: must name a single topic, got \"a,b\""]
        );
    }
}
