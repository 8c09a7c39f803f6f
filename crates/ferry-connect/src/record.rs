//! Records as connectors see them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::{Schema, Value};

/// A Kafka topic-partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic's partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A record header, converted by the header converter.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The header's key.
    pub key: String,
    /// The schema of its value, if any.
    pub schema: Option<Arc<Schema>>,
    /// Its value.
    pub value: Value,
}

/// A record consumed from Kafka, handed to a sink task.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkRecord {
    /// The topic it was consumed from (a transform may rename it).
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Milliseconds since the epoch, if the record has a timestamp.
    pub timestamp: Option<i64>,
    /// The key's schema, if any.
    pub key_schema: Option<Arc<Schema>>,
    /// The key.
    pub key: Value,
    /// The value's schema, if any.
    pub value_schema: Option<Arc<Schema>>,
    /// The value.
    pub value: Value,
    /// Its headers.
    pub headers: Vec<Header>,
}

impl SinkRecord {
    /// Its topic and partition.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }

    /// Whether two records are of the same topic-partition: `records.chunk_by(same_partition)`
    /// walks a batch a partition's run at a time (a consumer hands out a fetch's records of a
    /// partition together), so that per-partition bookkeeping is done per run, not per record.
    pub fn same_partition(a: &SinkRecord, b: &SinkRecord) -> bool {
        a.partition == b.partition && a.topic == b.topic
    }
}

/// A source partition or offset: a JSON object, as Kafka Connect stores them.
pub type SourceMap = BTreeMap<String, serde_json::Value>;

/// A record produced by a source task.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceRecord {
    /// Where the record came from (e.g. `{"filename": …}`): shared by a task's records of the
    /// same partition, so that a record costs a reference count rather than a copy of the map.
    pub source_partition: Arc<SourceMap>,
    /// How far that source has been read once this record is delivered (e.g. `{"position": …}`).
    pub source_offset: SourceMap,
    /// The topic it goes to.
    pub topic: String,
    /// `None`: the producer's partitioner chooses.
    pub partition: Option<i32>,
    /// The key's schema, if any.
    pub key_schema: Option<Arc<Schema>>,
    /// The key.
    pub key: Value,
    /// The value's schema, if any.
    pub value_schema: Option<Arc<Schema>>,
    /// The value.
    pub value: Value,
    /// Its timestamp in milliseconds since the epoch, if any.
    pub timestamp: Option<i64>,
    /// Its headers.
    pub headers: Vec<Header>,
}

/// The canonical JSON text of a source partition or offset (sorted keys).
pub fn source_map_json(map: &SourceMap) -> String {
    // The usual map (a file name, a position) holds no object: its own key order is already
    // the canonical one, and it is written as it is, without copying it twice first.
    fn holds_no_object(value: &serde_json::Value) -> bool {
        match value {
            serde_json::Value::Object(_) => false,
            serde_json::Value::Array(items) => items.iter().all(holds_no_object),
            _ => true,
        }
    }
    if map.values().all(holds_no_object) {
        if let Ok(text) = serde_json::to_string(map) {
            return text;
        }
    }
    canonical_json(&serde_json::Value::Object(
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    ))
}

/// JSON text with every object's keys sorted, at every depth: one text per value, so that
/// partitions given in any key order are the same partition.
pub fn canonical_json(value: &serde_json::Value) -> String {
    fn sorted(value: &serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(map) => {
                let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                serde_json::Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(sorted).collect())
            }
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// A source partition or offset from its JSON text; `None` if it is not a JSON object.
pub fn source_map_from_json(text: &str) -> Option<SourceMap> {
    match serde_json::from_str(text).ok()? {
        serde_json::Value::Object(map) => Some(map.into_iter().collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_maps_round_trip_in_canonical_form() {
        let map: SourceMap = [
            ("filename".to_string(), serde_json::json!("/tmp/in.txt")),
            ("a".to_string(), serde_json::json!(1)),
        ]
        .into_iter()
        .collect();
        let text = source_map_json(&map);
        assert_eq!(text, r#"{"a":1,"filename":"/tmp/in.txt"}"#);
        assert_eq!(source_map_from_json(&text), Some(map));
        assert_eq!(source_map_from_json("[1]"), None);
        let nested: serde_json::Value =
            serde_json::from_str(r#"{"z":{"b":1,"a":[{"d":1,"c":2}]},"y":0}"#).expect("json");
        assert_eq!(
            canonical_json(&nested),
            r#"{"y":0,"z":{"a":[{"c":2,"d":1}],"b":1}}"#
        );
        // A map holding objects, at any depth, is written in canonical form too.
        let map: SourceMap =
            serde_json::from_str(r#"{"z":{"b":1,"a":0},"y":[[{"d":1,"c":2}]],"x":[1,"s"]}"#)
                .expect("json");
        assert_eq!(
            source_map_json(&map),
            r#"{"x":[1,"s"],"y":[[{"c":2,"d":1}]],"z":{"a":0,"b":1}}"#
        );
    }
}
