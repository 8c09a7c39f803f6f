//! What Ferry asks of Kafka's Admin API, as Kafka Connect's worker does: the topics a task
//! creates — a dead letter queue's, and a source's new topics (KIP-158,
//! `ferry_connect::topic_creation`); a topic that exists is fine, any other refusal fails the
//! task, naming the topic and the property that set what the brokers refused — and the
//! deletion of a sink's consumer group when its offsets are reset.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use ferry_connect::topic_creation::TopicCreation;
use ferry_connect::ConnectError;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;

use crate::kafka::OffRuntime;
use tracing::info;

use crate::kafka::KafkaSettings;

/// How long the brokers have to answer a CreateTopics request.
const CREATE_TIMEOUT: Duration = Duration::from_secs(5);

/// A topic to create: its settings and the properties that gave them (for errors).
pub struct NewTopicSpec<'a> {
    /// The topic to create.
    pub topic: &'a str,
    /// `-1`: the broker's default.
    pub partitions: i32,
    /// Its replication factor (-1: the broker's default).
    pub replication_factor: i32,
    /// Its topic configs (`cleanup.policy`, …).
    pub configs: &'a BTreeMap<String, String>,
    /// What the topic is for and the property naming it, e.g. `the dead letter queue topic
    /// (errors.deadletterqueue.topic.name)`.
    pub what: &'a str,
    /// The property that set the replication factor.
    pub replication_property: &'a str,
}

/// Create the topic unless it exists; whether it was created.
pub async fn create_topic(
    admin: &AdminClient<DefaultClientContext>,
    spec: &NewTopicSpec<'_>,
) -> Result<bool, ConnectError> {
    let topic = spec.topic;
    let cannot = |why: String| format!("cannot create {} {topic:?}: {why}", spec.what);
    let replication = TopicReplication::Fixed(spec.replication_factor);
    let mut new = NewTopic::new(topic, spec.partitions, replication);
    for (k, v) in spec.configs {
        new = new.set(k, v);
    }
    let options = AdminOptions::new().operation_timeout(Some(CREATE_TIMEOUT));
    let created = tokio::time::timeout(CREATE_TIMEOUT, admin.create_topics([&new], &options))
        .await
        .map_err(|_| {
            ConnectError::retriable(cannot(format!(
                "no answer within {} s",
                CREATE_TIMEOUT.as_secs()
            )))
        })?
        .map_err(|e| ConnectError::retriable(cannot(e.to_string())))?;
    match created.first() {
        Some(Ok(_)) => {
            info!(topic = %topic, partitions = spec.partitions, replication_factor = spec.replication_factor, "created {}", spec.what);
            Ok(true)
        }
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) | None => Ok(false),
        Some(Err((_, RDKafkaErrorCode::InvalidReplicationFactor))) => {
            Err(ConnectError::fatal(cannot(format!(
                "{} is {}, more than the brokers the cluster has",
                spec.replication_property, spec.replication_factor
            ))))
        }
        Some(Err((_, code))) => Err(ConnectError::fatal(cannot(code.to_string()))),
    }
}

/// An admin client of this config.
pub fn admin_client(
    config: ClientConfig,
    what: &str,
) -> Result<AdminClient<DefaultClientContext>, ConnectError> {
    config
        .create()
        .map_err(|e| ConnectError::fatal(format!("no admin client for {what}: {e}")))
}

/// A source task's topic creation: each topic it writes to is created (or found) once, before
/// its first record.
pub struct SourceTopics {
    rules: TopicCreation,
    admin: OffRuntime<AdminClient<DefaultClientContext>>,
    known: HashSet<String>,
}

impl SourceTopics {
    /// Topic creation by `rules` (KIP-158) through `admin`.
    pub fn new(rules: TopicCreation, admin: AdminClient<DefaultClientContext>) -> Self {
        SourceTopics {
            rules,
            admin: OffRuntime::new(admin),
            known: HashSet::new(),
        }
    }

    /// Make sure `topic` exists, creating it with its group's settings if not.
    pub async fn ensure(&mut self, topic: &str) -> Result<(), ConnectError> {
        if self.known.contains(topic) {
            return Ok(());
        }
        let settings = self.rules.settings_for(topic);
        let replication_property = format!(
            "{}{}.replication.factor",
            ferry_connect::topic_creation::PREFIX,
            settings.group
        );
        let what = format!("the source topic (topic creation group {})", settings.group);
        create_topic(
            &self.admin,
            &NewTopicSpec {
                topic,
                partitions: settings.partitions,
                replication_factor: settings.replication_factor,
                configs: &settings.configs,
                what: &what,
                replication_property: &replication_property,
            },
        )
        .await?;
        self.known.insert(topic.to_string());
        Ok(())
    }
}

/// Forget a sink connector's offsets in Kafka — its `connect-<name>` consumer group — as Kafka
/// Connect does when a sink's offsets are reset, so that its next start does not resume from
/// them. A group that does not exist is fine.
pub async fn delete_sink_group(kafka: &KafkaSettings, connector: &str) -> Result<(), String> {
    let group = format!("connect-{connector}");
    let admin: AdminClient<DefaultClientContext> = kafka
        .client_config()
        .create()
        .map_err(|e| format!("no admin client to delete the group {group}: {e}"))?;
    let options = AdminOptions::new().operation_timeout(Some(CREATE_TIMEOUT));
    let deleted = tokio::time::timeout(CREATE_TIMEOUT, admin.delete_groups(&[&group], &options))
        .await
        .map_err(|_| format!("Kafka did not answer the deletion of the group {group} in time"))?
        .map_err(|e| format!("cannot delete the group {group}: {e}"))?;
    match deleted.first() {
        Some(Ok(_)) | None => Ok(()),
        Some(Err((_, RDKafkaErrorCode::GroupIdNotFound))) => Ok(()),
        Some(Err((_, RDKafkaErrorCode::NonEmptyGroup))) => Err(format!(
            "the consumer group {group} has members (another consumer uses it): stop them first"
        )),
        Some(Err((_, code))) => Err(format!("cannot delete the group {group}: {code}")),
    }
}

/// The Kafka cluster's id, as the brokers report it (Kafka Connect's `kafka_cluster_id`).
pub async fn cluster_id(kafka: &KafkaSettings) -> Result<String, String> {
    let admin: AdminClient<DefaultClientContext> = kafka
        .client_config()
        .create()
        .map_err(|e| format!("no admin client to ask for the Kafka cluster id: {e}"))?;
    tokio::task::spawn_blocking(move || admin.inner().fetch_cluster_id(CREATE_TIMEOUT))
        .await
        .map_err(|e| format!("asking for the Kafka cluster id failed: {e}"))?
        .ok_or_else(|| "the brokers did not say their cluster id in time".to_string())
}
