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

/// Run `work` — a librdkafka call that waits: a consumer's close, a producer's flush, an
/// assignment, each of which joins threads or waits for librdkafka's own — on the async
/// runtime's blocking threads when called on the runtime, else here. An async thread never
/// waits on librdkafka: with a worker thread per core, two such waits (or one that never ends)
/// would leave the node's runtime running nothing.
pub fn off_runtime(work: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(work)),
        Err(_) => work(),
    }
}

/// A librdkafka client whose drop waits (a consumer closes, a producer flushes, each joins its
/// threads): dropped through [`off_runtime`].
pub struct OffRuntime<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> OffRuntime<T> {
    /// Own `client`.
    pub fn new(client: T) -> Self {
        OffRuntime(Some(client))
    }
}

impl<T: Send + 'static> std::ops::Deref for OffRuntime<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("the client is taken only when it is dropped")
    }
}

impl<T: Send + 'static> Drop for OffRuntime<T> {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            off_runtime(move || drop(client));
        }
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
