//! Kafka clients: their config from `cluster.toml`, and topic metadata for the scheduler.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ferry_meta::state::TopicPartitionRef;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// How Ferry reaches Kafka: `cluster.toml`'s `[kafka]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSettings {
    /// `bootstrap.servers`: comma-separated `host:port` list.
    pub bootstrap_servers: String,
    /// Passed to librdkafka as they are (`security.protocol`, `sasl.*`, `ssl.*`, …), except
    /// the few Ferry sets itself.
    #[serde(default)]
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

/// A metadata client (a consumer that never consumes).
pub struct Metadata {
    consumer: BaseConsumer,
}

impl Metadata {
    /// A metadata client of the cluster `settings` name.
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
