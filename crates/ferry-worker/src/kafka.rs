//! Kafka clients: their config from `cluster.toml`, and topic metadata for the scheduler.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ferry_meta::state::TopicPartitionRef;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// How Ferry reaches Kafka.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KafkaSettings {
    pub bootstrap_servers: String,
    /// Passed to librdkafka as they are.
    pub properties: BTreeMap<String, String>,
}

impl KafkaSettings {
    /// A client config of the worker itself (the scheduler's metadata, the offsets
    /// takeover): the bootstrap servers and the pass-through properties that are not for one
    /// kind of client only (`producer.…`, see [`crate::clients`]).
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        for (k, v) in &self.properties {
            if !crate::clients::for_one_client(k) {
                config.set(k, v);
            }
        }
        config
    }
}

/// Which topics a sink connector consumes: `topics` or `topics.regex`.
#[derive(Clone, Debug)]
pub enum Topics {
    List(BTreeSet<String>),
    Regex(regex::Regex),
}

impl Topics {
    /// From a sink connector's config; `None` if it names neither.
    pub fn of(config: &BTreeMap<String, String>) -> Option<Topics> {
        if let Some(list) = config.get("topics").filter(|t| !t.trim().is_empty()) {
            return Some(Topics::List(
                list.split(',')
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect(),
            ));
        }
        let pattern = config.get("topics.regex")?;
        // Kafka Connect matches the whole topic name.
        regex::Regex::new(&format!("^(?:{pattern})$"))
            .ok()
            .map(Topics::Regex)
    }

    pub fn matches(&self, topic: &str) -> bool {
        match self {
            Topics::List(list) => list.contains(topic),
            Topics::Regex(re) => re.is_match(topic) && !topic.starts_with("__"),
        }
    }
}

/// A metadata client (a consumer that never consumes).
pub struct Metadata {
    consumer: BaseConsumer,
}

impl Metadata {
    pub fn new(settings: &KafkaSettings) -> Result<Self, rdkafka::error::KafkaError> {
        Ok(Metadata {
            consumer: settings.client_config().create()?,
        })
    }

    /// Every partition of every topic the broker has (blocking; call off the async runtime).
    pub fn partitions(
        &self,
        timeout: Duration,
    ) -> Result<BTreeSet<TopicPartitionRef>, rdkafka::error::KafkaError> {
        let metadata = self.consumer.fetch_metadata(None, timeout)?;
        Ok(metadata
            .topics()
            .iter()
            .filter(|t| t.error().is_none())
            .flat_map(|t| {
                t.partitions().iter().map(move |p| TopicPartitionRef {
                    topic: t.name().to_string(),
                    partition: p.id(),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_from_a_list_or_a_whole_name_regex() {
        let list: BTreeMap<String, String> = [("topics".to_string(), "a, b".to_string())].into();
        let t = Topics::of(&list).expect("topics");
        assert!(t.matches("a") && t.matches("b") && !t.matches("c"));
        let re: BTreeMap<String, String> =
            [("topics.regex".to_string(), "dst_.*".to_string())].into();
        let t = Topics::of(&re).expect("regex");
        assert!(t.matches("dst_table01"));
        assert!(!t.matches("x_dst_table01"), "the whole name must match");
        assert!(Topics::of(&BTreeMap::new()).is_none());
    }
}
