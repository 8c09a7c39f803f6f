//! Taking a source connector over from Kafka Connect: where Ferry has no offsets for it, the
//! last ones Kafka Connect wrote for its name in its offsets topic (`offset.storage.topic`:
//! keys `["<connector>", {partition}]`, values the offset, `null` when deleted), read once
//! from the beginning to the end when a task starts. A sink needs nothing of this: it starts
//! from its `connect-<name>` group's committed offsets (see the sink loop).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferry_connect::record::{source_map_from_json, source_map_json, SourceMap};
use ferry_connect::ConnectError;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::kafka::KafkaSettings;

/// How long reading the offsets topic may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One record of Kafka Connect's offsets topic: the source partition (canonical JSON) and its
/// offset (`None`: deleted), if it is `connector`'s.
fn record_of(
    connector: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Option<(String, Option<SourceMap>)> {
    let key: serde_json::Value = serde_json::from_slice(key).ok()?;
    let [name, partition] = key.as_array()?.as_slice() else {
        return None;
    };
    if name.as_str()? != connector {
        return None;
    }
    let partition = source_map_from_json(&partition.to_string())?;
    let offset = match value {
        None => None,
        Some(bytes) => Some(source_map_from_json(std::str::from_utf8(bytes).ok()?)?),
    };
    Some((source_map_json(&partition), offset))
}

/// The last offsets Kafka Connect wrote to `topic` for `connector`, by source partition
/// (canonical JSON); read off the async runtime.
pub async fn source_offsets(
    kafka: &KafkaSettings,
    topic: &str,
    connector: &str,
) -> Result<BTreeMap<String, SourceMap>, ConnectError> {
    let (kafka, topic, connector) = (kafka.clone(), topic.to_string(), connector.to_string());
    tokio::task::spawn_blocking(move || read(&kafka, &topic, &connector))
        .await
        .map_err(|e| ConnectError::fatal(format!("reading Kafka Connect's offsets failed: {e}")))?
}

fn read(
    kafka: &KafkaSettings,
    topic: &str,
    connector: &str,
) -> Result<BTreeMap<String, SourceMap>, ConnectError> {
    let failed = |what: String| {
        ConnectError::retriable(format!(
            "cannot read Kafka Connect's offsets of {connector} in {topic:?} ({}): {what}",
            ferry_connect::config::OFFSETS_STORAGE_TOPIC
        ))
    };
    let mut config = kafka.client_config();
    config
        .set("group.id", format!("ferry-takeover-{connector}"))
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().map_err(|e| failed(e.to_string()))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), READ_TIMEOUT)
        .map_err(|e| failed(e.to_string()))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic)
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err(failed("no such topic".into()));
    }
    // Every partition from its beginning to its end as of now.
    let mut ends = BTreeMap::new();
    let mut assignment = TopicPartitionList::new();
    for p in &partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, *p, READ_TIMEOUT)
            .map_err(|e| failed(e.to_string()))?;
        if high > low {
            ends.insert(*p, high);
            assignment
                .add_partition_offset(topic, *p, Offset::Offset(low))
                .map_err(|e| failed(e.to_string()))?;
        }
    }
    let mut offsets: BTreeMap<String, SourceMap> = BTreeMap::new();
    if ends.is_empty() {
        return Ok(offsets);
    }
    consumer
        .assign(&assignment)
        .map_err(|e| failed(e.to_string()))?;
    let started = Instant::now();
    let mut at: BTreeMap<i32, i64> = BTreeMap::new();
    while ends
        .iter()
        .any(|(p, end)| at.get(p).is_none_or(|o| o + 1 < *end))
    {
        if started.elapsed() > READ_TIMEOUT {
            return Err(failed(format!(
                "not read to its end within {} s",
                READ_TIMEOUT.as_secs()
            )));
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message.map_err(|e| failed(e.to_string()))?;
        at.insert(message.partition(), message.offset());
        let Some(key) = message.key() else { continue };
        match record_of(connector, key, message.payload()) {
            Some((partition, Some(offset))) => {
                offsets.insert(partition, offset);
            }
            Some((partition, None)) => {
                offsets.remove(&partition);
            }
            None => {}
        }
    }
    Ok(offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_connects_records_of_this_connector_only() {
        let key = br#"["lines",{"filename":"/tmp/in.txt"}]"#;
        let (partition, offset) =
            record_of("lines", key, Some(br#"{"position":1234}"#)).expect("ours");
        assert_eq!(partition, r#"{"filename":"/tmp/in.txt"}"#);
        assert_eq!(
            offset.map(|o| source_map_json(&o)).as_deref(),
            Some(r#"{"position":1234}"#)
        );
        assert_eq!(
            record_of("lines", key, None).map(|r| r.1),
            Some(None),
            "a tombstone"
        );
        assert!(record_of("other", key, Some(b"{}")).is_none());
        assert!(record_of("lines", b"not json", Some(b"{}")).is_none());
    }
}
