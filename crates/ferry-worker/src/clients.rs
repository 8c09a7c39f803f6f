//! The Kafka clients of a unit, configured as Kafka Connect's worker configures its own: its
//! base producer and consumer configs, then the worker's properties (`[kafka] properties`, those
//! prefixed `producer.`, `consumer.` or `admin.` for that client only), then the connector's
//! `producer.override.*`, `consumer.override.*` and `admin.override.*`, then what Ferry
//! manages itself. The differences from Kafka Connect's base configs are deliberate and listed
//! in docs/compatibility.md#kafka-clients.
//!
//! Ferry's clients are librdkafka's: a property is given to librdkafka under its own name
//! (a few Java names are translated); one librdkafka does not know is logged by name and not
//! used, as Kafka Connect logs the properties a Java client does not use; one with a value
//! librdkafka refuses fails the unit with an error naming the property.

use std::collections::BTreeMap;

use ferry_connect::ConnectError;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaConfRes;
use tracing::warn;

use crate::kafka::KafkaSettings;

/// Which client of a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A source task's producer, and a dead letter queue's.
    Producer,
    /// A sink task's consumer.
    Consumer,
    /// The admin client that creates a dead letter queue's topic.
    Admin,
}

impl Role {
    /// The worker-property prefix for this client only (`producer.` …).
    fn worker_prefix(self) -> &'static str {
        match self {
            Role::Producer => "producer.",
            Role::Consumer => "consumer.",
            Role::Admin => "admin.",
        }
    }

    /// The connector-config prefix of its overrides (`producer.override.` …).
    fn override_prefix(self) -> &'static str {
        let [producer, consumer, admin] = ferry_connect::validate::CLIENT_OVERRIDE_PREFIXES;
        match self {
            Role::Producer => producer,
            Role::Consumer => consumer,
            Role::Admin => admin,
        }
    }

    /// Kafka Connect's `client.id` prefix for a task's client of this role.
    fn client_id_prefix(self) -> &'static str {
        match self {
            Role::Producer => "connector-producer",
            Role::Consumer => "connector-consumer",
            Role::Admin => "connector-adminclient",
        }
    }

    /// Kafka Connect's base config of this client (its `Worker`), as librdkafka spells it,
    /// with Ferry's deliberate differences.
    fn base(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Role::Producer => &[
                ("acks", "all"),
                // Kafka Connect: delivery.timeout.ms and max.block.ms at their maximum (retry
                // for ever); librdkafka's 0 is "no timeout".
                ("message.timeout.ms", "0"),
                ("linger.ms", "5"),
                // Kafka Connect keeps order with max.in.flight.requests.per.connection=1; an
                // idempotent producer keeps it with five in flight, and writes no duplicate
                // when it retries.
                ("enable.idempotence", "true"),
                // Keyed records land in the partitions Java's producer picks.
                ("partitioner", "murmur2_random"),
                // Records without a key or partition are spread over all partitions.
                ("sticky.partitioning.linger.ms", "0"),
                // Java's buffer.memory default (32 MiB) as librdkafka's bound of records
                // waiting to be sent (its own default, 1 GiB, let a fast source's worker grow
                // by hundreds of MiB).
                ("queue.buffering.max.kbytes", "32768"),
            ],
            Role::Consumer => &[
                ("auto.offset.reset", "earliest"),
                ("enable.auto.commit", "false"),
                // librdkafka's own (no Java name), chosen from `make bench`'s W1: prefetch at
                // most 8 MiB per consumer (its default, 64 MiB, made a worker's RSS grow by
                // 64 MiB per task), and when that queue is full, look again after 5 ms rather
                // than 1 s — with the default, a task stalled for a second whenever it fell
                // behind its prefetch: 112k records/s at one task, 224k with these.
                ("queued.max.messages.kbytes", "8192"),
                ("fetch.queue.backoff.ms", "5"),
            ],
            Role::Admin => &[],
        }
    }

    /// What Ferry sets itself after every layer: an override of these is refused.
    fn managed(self) -> &'static [&'static str] {
        match self {
            Role::Producer => &["bootstrap.servers", "transactional.id"],
            // Ferry commits offsets itself (to Raft, and to the group for monitoring).
            Role::Consumer => &[
                "bootstrap.servers",
                "enable.auto.commit",
                "enable.auto.offset.store",
            ],
            Role::Admin => &["bootstrap.servers"],
        }
    }
}

/// Java client properties with another name in librdkafka.
const JAVA_NAMES: &[(&str, &str)] = &[
    ("max.request.size", "message.max.bytes"),
    ("fetch.max.wait.ms", "fetch.wait.max.ms"),
    ("delivery.timeout.ms", "message.timeout.ms"),
];

/// Java client properties that mean nothing to Ferry's clients (its serialization and
/// assignment are its own): not used, and said so.
const NOT_USED: &[&str] = &[
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "partition.assignment.strategy",
    "max.poll.records",
    "interceptor.classes",
    "metric.reporters",
    "max.block.ms",
    "buffer.memory",
];

/// Whether a worker property is for one kind of client only (`producer.linger.ms`).
pub fn for_one_client(key: &str) -> bool {
    [Role::Producer, Role::Consumer, Role::Admin]
        .iter()
        .any(|role| key.starts_with(role.worker_prefix()))
}

/// Kafka Connect's `client.id` of a unit's client of `role`.
fn client_id(role: Role, name: &str, task: Option<u32>) -> String {
    match task {
        Some(task) => format!("{}-{name}-{task}", role.client_id_prefix()),
        None => format!("{}-{name}", role.client_id_prefix()),
    }
}

/// One property of a client and the name it was given under (for errors and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layered {
    key: String,
    value: String,
    from: String,
}

/// The properties of a unit's client of `role`, in order of precedence (later wins), and the
/// names of those given that Ferry's clients do not use.
fn layers(
    role: Role,
    worker: &BTreeMap<String, String>,
    connector: &BTreeMap<String, String>,
    name: &str,
    task: Option<u32>,
) -> Result<(BTreeMap<String, Layered>, Vec<String>), ConnectError> {
    let mut out: BTreeMap<String, Layered> = BTreeMap::new();
    let mut not_used = Vec::new();
    let mut put = |key: &str, value: &str, from: String| -> Result<(), ConnectError> {
        if NOT_USED.contains(&key) {
            not_used.push(from);
            return Ok(());
        }
        let key = JAVA_NAMES
            .iter()
            .find(|(java, _)| *java == key)
            .map_or(key, |(_, librdkafka)| librdkafka);
        match ClientConfig::new()
            .set(key, value)
            .set_log_level(RDKafkaLogLevel::Emerg)
            .create_native_config()
        {
            Ok(_) => {}
            Err(KafkaError::ClientConfig(RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN, ..)) => {
                not_used.push(from);
                return Ok(());
            }
            Err(KafkaError::ClientConfig(_, description, ..)) => {
                return Err(ConnectError::fatal(format!(
                    "{from}: {description} (a Kafka client property, as librdkafka reads it)"
                )));
            }
            Err(e) => return Err(ConnectError::fatal(format!("{from}: {e}"))),
        }
        out.insert(
            key.to_string(),
            Layered {
                key: key.to_string(),
                value: value.to_string(),
                from,
            },
        );
        Ok(())
    };
    for (key, value) in role.base() {
        put(key, value, format!("Ferry's {key}"))?;
    }
    put(
        "client.id",
        &client_id(role, name, task),
        "client.id".into(),
    )?;
    if role == Role::Consumer {
        put("group.id", &format!("connect-{name}"), "group.id".into())?;
    }
    for (key, value) in worker {
        if !for_one_client(key) {
            put(key, value, format!("kafka.properties.{key}"))?;
        }
    }
    for (key, value) in worker {
        if let Some(key) = key.strip_prefix(role.worker_prefix()) {
            put(
                key,
                value,
                format!("kafka.properties.{}{key}", role.worker_prefix()),
            )?;
        }
    }
    for (key, value) in connector {
        if let Some(bare) = key.strip_prefix(role.override_prefix()) {
            if role.managed().contains(&bare) {
                return Err(ConnectError::fatal(format!(
                    "{key}: Ferry sets {bare} itself; remove {key} from the connector config"
                )));
            }
            put(bare, value, key.clone())?;
        }
    }
    Ok((out, not_used))
}

/// The properties of a unit's client of `role`, with those Ferry's clients do not use logged
/// by name.
fn resolved(
    kafka: &KafkaSettings,
    role: Role,
    connector: &BTreeMap<String, String>,
    name: &str,
    task: Option<u32>,
) -> Result<BTreeMap<String, Layered>, ConnectError> {
    let (properties, not_used) = layers(role, &kafka.properties, connector, name, task)?;
    if !not_used.is_empty() {
        // Names only: a value may be a secret.
        warn!(
            connector = %name,
            task = ?task,
            client = ?role,
            properties = ?not_used,
            "these Kafka client properties are not used by Ferry's clients (librdkafka has no such property, or Ferry does that itself)"
        );
    }
    Ok(properties)
}

/// What Ferry sets after every layer, whatever they say.
fn managed_values(kafka: &KafkaSettings, role: Role) -> Vec<(&'static str, String)> {
    let mut out = vec![("bootstrap.servers", kafka.bootstrap_servers.clone())];
    if role == Role::Consumer {
        out.push(("enable.auto.offset.store", "false".to_string()));
    }
    out
}

/// The librdkafka config of a unit's client of `role`: connector `name`, task `task` (`None`
/// for the connector instance), its connector config `connector`.
pub fn client_config(
    kafka: &KafkaSettings,
    role: Role,
    connector: &BTreeMap<String, String>,
    name: &str,
    task: Option<u32>,
) -> Result<ClientConfig, ConnectError> {
    let mut config = ClientConfig::new();
    for p in resolved(kafka, role, connector, name, task)?.values() {
        config.set(&p.key, &p.value);
    }
    for (key, value) in managed_values(kafka, role) {
        config.set(key, value);
    }
    Ok(config)
}

/// [`client_config`] of a unit's client.
pub fn for_unit(
    kafka: &KafkaSettings,
    role: Role,
    ctx: &crate::unit::UnitCtx,
) -> Result<ClientConfig, ConnectError> {
    client_config(kafka, role, &ctx.connector_config, &ctx.name, ctx.task)
}

/// The `client.id` of a worker's shared consumer, unless the worker's or the connector's
/// properties name one.
const SHARED_CONSUMER_CLIENT_ID: &str = "connector-consumer-ferry";

/// A sink task's consumer config as a worker's shared consumer serves it (see
/// [`crate::consumers`]): tasks whose `properties` are equal share one consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedConsumerConfig {
    /// The consumer's properties without the task's own: its group, and Ferry's per-task
    /// `client.id` (one the worker or the connector gives stays, and is shared only by tasks
    /// given the same).
    pub properties: BTreeMap<String, String>,
    /// The group the task's offsets are committed to and read from (`connect-<name>`, or the
    /// connector's `consumer.override.group.id`).
    pub group: String,
}

impl SharedConsumerConfig {
    /// The librdkafka config of a consumer of `group`: a shared consumer first made for a task
    /// of that group (librdkafka assigns partitions only to a consumer with a `group.id`; it
    /// never joins the group — partitions are assigned, not subscribed — nor commits to it), or
    /// the group client that reads and commits the group's offsets.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config.set("group.id", &self.group);
        config
    }
}

/// [`SharedConsumerConfig`] of a sink task.
pub fn shared_consumer(
    kafka: &KafkaSettings,
    ctx: &crate::unit::UnitCtx,
) -> Result<SharedConsumerConfig, ConnectError> {
    shared_consumer_of(kafka, &ctx.connector_config, &ctx.name, ctx.task)
}

/// [`SharedConsumerConfig`] of task `task` of connector `name`, its connector config
/// `connector`.
pub fn shared_consumer_of(
    kafka: &KafkaSettings,
    connector: &BTreeMap<String, String>,
    name: &str,
    task: Option<u32>,
) -> Result<SharedConsumerConfig, ConnectError> {
    let mut layered = resolved(kafka, Role::Consumer, connector, name, task)?;
    let group = layered
        .remove("group.id")
        .map(|l| l.value)
        .unwrap_or_else(|| format!("connect-{name}"));
    let mut properties: BTreeMap<String, String> =
        layered.into_values().map(|l| (l.key, l.value)).collect();
    let own_client_id = client_id(Role::Consumer, name, task);
    if properties.get("client.id") == Some(&own_client_id) {
        properties.insert("client.id".into(), SHARED_CONSUMER_CLIENT_ID.into());
    }
    for (key, value) in managed_values(kafka, Role::Consumer) {
        properties.insert(key.to_string(), value);
    }
    Ok(SharedConsumerConfig { properties, group })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn value(layers: &BTreeMap<String, Layered>, key: &str) -> Option<String> {
        layers.get(key).map(|l| l.value.clone())
    }

    #[test]
    fn kafka_connects_base_configs_and_client_ids() {
        let (p, not_used) =
            layers(Role::Consumer, &map(&[]), &map(&[]), "orders", Some(2)).expect("valid");
        assert_eq!(value(&p, "group.id").as_deref(), Some("connect-orders"));
        assert_eq!(
            value(&p, "client.id").as_deref(),
            Some("connector-consumer-orders-2")
        );
        assert_eq!(value(&p, "auto.offset.reset").as_deref(), Some("earliest"));
        assert!(not_used.is_empty());
        let (p, _) = layers(Role::Producer, &map(&[]), &map(&[]), "src", Some(0)).expect("valid");
        assert_eq!(value(&p, "acks").as_deref(), Some("all"));
        assert_eq!(
            value(&p, "client.id").as_deref(),
            Some("connector-producer-src-0")
        );
    }

    #[test]
    fn worker_properties_then_the_connectors_overrides_win() {
        let worker = map(&[
            ("linger.ms", "20"),
            ("producer.linger.ms", "50"),
            ("consumer.fetch.min.bytes", "1000"),
        ]);
        let connector = map(&[
            ("producer.override.compression.type", "gzip"),
            ("consumer.override.auto.offset.reset", "latest"),
        ]);
        let (p, _) = layers(Role::Producer, &worker, &connector, "c", Some(0)).expect("valid");
        assert_eq!(value(&p, "linger.ms").as_deref(), Some("50"));
        assert_eq!(value(&p, "compression.type").as_deref(), Some("gzip"));
        assert_eq!(value(&p, "fetch.min.bytes"), None, "a consumer's property");
        assert_eq!(
            value(&p, "auto.offset.reset"),
            None,
            "a consumer's override"
        );
        let (c, _) = layers(Role::Consumer, &worker, &connector, "c", Some(0)).expect("valid");
        assert_eq!(value(&c, "linger.ms").as_deref(), Some("20"));
        assert_eq!(value(&c, "fetch.min.bytes").as_deref(), Some("1000"));
        assert_eq!(value(&c, "auto.offset.reset").as_deref(), Some("latest"));
    }

    #[test]
    fn tasks_share_a_consumer_unless_their_own_properties_differ() {
        let kafka = KafkaSettings {
            bootstrap_servers: "b:9092".into(),
            properties: map(&[("consumer.fetch.min.bytes", "1000")]),
        };
        let a = shared_consumer_of(&kafka, &map(&[]), "a", Some(0)).expect("valid");
        let b = shared_consumer_of(&kafka, &map(&[]), "b", Some(3)).expect("valid");
        assert_eq!(
            a.properties, b.properties,
            "group and Ferry's client.id are the task's own"
        );
        assert_eq!(
            (a.group.as_str(), b.group.as_str()),
            ("connect-a", "connect-b")
        );
        assert_eq!(
            a.properties.get("client.id").map(String::as_str),
            Some(SHARED_CONSUMER_CLIENT_ID)
        );
        assert_eq!(
            a.properties.get("fetch.min.bytes").map(String::as_str),
            Some("1000")
        );
        assert_eq!(
            a.properties.get("bootstrap.servers").map(String::as_str),
            Some("b:9092")
        );
        let latest = map(&[("consumer.override.auto.offset.reset", "latest")]);
        let c = shared_consumer_of(&kafka, &latest, "c", Some(0)).expect("valid");
        assert_ne!(
            a.properties, c.properties,
            "an override is the task's effective config"
        );
        let named = map(&[
            ("consumer.override.client.id", "mine"),
            ("consumer.override.group.id", "legacy"),
        ]);
        let d = shared_consumer_of(&kafka, &named, "d", Some(0)).expect("valid");
        assert_eq!(
            d.properties.get("client.id").map(String::as_str),
            Some("mine")
        );
        assert_eq!(d.group, "legacy");
        assert_eq!(
            d.client_config().get("group.id"),
            Some("legacy"),
            "the consumer is made with the group of the task it is first made for"
        );
    }

    #[test]
    fn java_names_are_translated_and_java_only_ones_are_named_as_not_used() {
        let connector = map(&[
            ("producer.override.max.request.size", "2000000"),
            ("producer.override.buffer.memory", "1000"),
            ("producer.override.no.such.thing", "1"),
        ]);
        let (p, not_used) =
            layers(Role::Producer, &map(&[]), &connector, "c", Some(0)).expect("valid");
        assert_eq!(value(&p, "message.max.bytes").as_deref(), Some("2000000"));
        assert_eq!(
            not_used,
            vec![
                "producer.override.buffer.memory".to_string(),
                "producer.override.no.such.thing".to_string()
            ]
        );
    }

    #[test]
    fn a_bad_value_or_an_override_of_what_ferry_manages_is_refused_by_name() {
        let bad = map(&[("producer.override.acks", "sometimes")]);
        let e = layers(Role::Producer, &map(&[]), &bad, "c", Some(0)).expect_err("invalid");
        assert!(
            e.message.contains("producer.override.acks"),
            "{}",
            e.message
        );
        let managed = map(&[("consumer.override.enable.auto.commit", "true")]);
        let e = layers(Role::Consumer, &map(&[]), &managed, "c", Some(0)).expect_err("managed");
        assert!(
            e.message
                .contains("consumer.override.enable.auto.commit: Ferry sets"),
            "{}",
            e.message
        );
    }
}
