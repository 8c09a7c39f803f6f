//! The dead letter queue of a task: records that failed (with `errors.tolerance=all`) are
//! produced to `errors.deadletterqueue.topic.name` — a sink's as they were consumed, a
//! source's as they were about to be produced — with the `__connect.errors.*` headers if asked.
//! Their offsets are committed only once the DLQ has them: a record is never both skipped and
//! lost.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use ferry_connect::error_handling::{context_headers, ErrorSettings, FailureContext};
use ferry_connect::ConnectError;
use rdkafka::message::{Header as KafkaHeader, Headers, Message, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};

use crate::kafka::OffRuntime;
use tracing::debug;

use crate::admin::{admin_client, create_topic, NewTopicSpec};
use crate::clients::{self, Role};
use crate::kafka::KafkaSettings;
use crate::unit::UnitCtx;

/// How long a metadata request for the DLQ topic may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// The bytes of a record that failed: a consumed message, or a source record as far as it
/// could be converted.
#[derive(Clone, Debug, Default)]
pub struct Original {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Option<i64>,
}

impl Original {
    /// A consumed message, or one the producer gave back undelivered.
    pub fn of(msg: &impl Message) -> Self {
        Original {
            key: msg.key().map(<[u8]>::to_vec),
            value: msg.payload().map(<[u8]>::to_vec),
            headers: msg
                .headers()
                .iter()
                .flat_map(|hs| hs.iter())
                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                .collect(),
            timestamp: msg.timestamp().to_millis(),
        }
    }
}

/// Whether the cluster's metadata (of all topics: asking for one could auto-create it) lists
/// `topic`; false when it cannot be read.
async fn exists(producer: &FutureProducer, topic: &str) -> bool {
    let client = producer.clone();
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || {
        use rdkafka::producer::Producer;
        client
            .client()
            .fetch_metadata(None, METADATA_TIMEOUT)
            .map(|m| {
                m.topics()
                    .iter()
                    .any(|t| t.name() == topic && !t.partitions().is_empty())
            })
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

/// Where a task's failed records go: Kafka's DLQ topic ([`DeadLetters`]), or a fake in the
/// loops' tests.
#[async_trait::async_trait]
pub trait DeadLetterQueue: Send + Sync {
    /// Send a record that failed (without waiting for its delivery).
    fn send(
        &self,
        original: &Original,
        ctx: &FailureContext,
        error: &ConnectError,
    ) -> Result<(), ConnectError>;
    /// Wait until every record sent is in the queue.
    async fn flush(&self) -> Result<(), ConnectError>;
}

pub struct DeadLetters {
    topic: String,
    context_headers: bool,
    producer: OffRuntime<FutureProducer>,
    in_flight: Mutex<Vec<DeliveryFuture>>,
}

impl DeadLetters {
    /// The DLQ of these settings, if they name one; its topic is created if it does not exist.
    pub async fn open(
        settings: &ErrorSettings,
        ctx: &UnitCtx,
        kafka: &KafkaSettings,
    ) -> Result<Option<Self>, ConnectError> {
        let Some(topic) = settings.dlq_topic.clone() else {
            return Ok(None);
        };
        let client = |role| clients::for_unit(kafka, role, ctx);
        let producer: FutureProducer = client(Role::Producer)?.create().map_err(|e| {
            ConnectError::fatal(format!("cannot create the dead letter queue producer: {e}"))
        })?;
        if exists(&producer, &topic).await {
            debug!(topic = %topic, "the dead letter queue topic exists");
        } else {
            let admin = admin_client(client(Role::Admin)?, "the dead letter queue")?;
            let spec = NewTopicSpec {
                topic: &topic,
                partitions: 1,
                replication_factor: settings.dlq_replication_factor,
                configs: &BTreeMap::new(),
                what: "the dead letter queue topic (errors.deadletterqueue.topic.name)",
                replication_property: "errors.deadletterqueue.topic.replication.factor",
            };
            create_topic(&admin, &spec).await?;
        }
        Ok(Some(DeadLetters {
            topic,
            context_headers: settings.context_headers,
            producer: OffRuntime::new(producer),
            in_flight: Mutex::new(Vec::new()),
        }))
    }
}

#[async_trait::async_trait]
impl DeadLetterQueue for DeadLetters {
    /// Send a record that failed, with its own headers and then the context headers.
    fn send(
        &self,
        original: &Original,
        ctx: &FailureContext,
        error: &ConnectError,
    ) -> Result<(), ConnectError> {
        let mut headers = OwnedHeaders::new();
        for (key, value) in &original.headers {
            headers = headers.insert(KafkaHeader {
                key,
                value: value.as_deref(),
            });
        }
        if self.context_headers {
            for (key, value) in context_headers(ctx, error) {
                headers = headers.insert(KafkaHeader {
                    key: &key,
                    value: Some(&value),
                });
            }
        }
        let mut record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(&self.topic).headers(headers);
        if let Some(k) = &original.key {
            record = record.key(k);
        }
        if let Some(v) = &original.value {
            record = record.payload(v);
        }
        if let Some(ts) = original.timestamp {
            record = record.timestamp(ts);
        }
        let delivery = self.producer.send_result(record).map_err(|(e, _)| {
            ConnectError::retriable(format!(
                "cannot send a failed record to the dead letter queue {}: {e}",
                self.topic
            ))
        })?;
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(delivery);
        Ok(())
    }

    /// Wait until every record sent is in the DLQ; an undelivered one fails the task (its
    /// offset was not committed, so it is consumed again).
    async fn flush(&self) -> Result<(), ConnectError> {
        let pending: Vec<DeliveryFuture> =
            std::mem::take(&mut *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()));
        for delivery in pending {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => {
                    return Err(ConnectError::retriable(format!(
                        "a failed record did not reach the dead letter queue {}: {e}",
                        self.topic
                    )))
                }
                Err(_) => {
                    return Err(ConnectError::retriable(format!(
                        "the dead letter queue producer dropped a record for {}",
                        self.topic
                    )))
                }
            }
        }
        Ok(())
    }
}
