//! Conversions between the replicated state and the management API's messages, in one place.

use std::collections::BTreeMap;

use ferry_connect::{PluginDesc, PluginKind, Validation};
use ferry_meta::state::{Connector, ConnectorStatus, SinkOffset, SourceOffset, Status};
use ferry_meta::{ClusterState, NodeId};
use ferry_proto::management as pb;
use serde_json::{json, Value};

use crate::error::ApiError;

/// Which address names a worker in a status: each API shows the worker's own address in that
/// API, as Kafka Connect's REST API shows its REST `host:port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    /// The management (gRPC) address.
    Grpc,
    /// The advertised REST address (the management address of a worker that records none).
    Rest,
}

/// How a worker is shown through `door`.
pub fn worker_id(state: &ClusterState, worker: Option<NodeId>, door: Door) -> String {
    match worker {
        Some(id) => state.workers.get(&id).map_or_else(
            || format!("node-{id}"),
            |w| match door {
                Door::Rest if !w.rest_url.is_empty() => w.rest_url.clone(),
                _ => w.api_addr.clone(),
            },
        ),
        None => String::new(),
    }
}

pub fn connector_info(
    name: &str,
    connector: &Connector,
    kind: Option<PluginKind>,
    created: bool,
    warnings: Vec<String>,
) -> pb::ConnectorInfo {
    pb::ConnectorInfo {
        name: name.to_string(),
        config: connector.config.redacted().into_iter().collect(),
        version: connector.version,
        target_state: connector.target.as_str().to_string(),
        r#type: kind.map_or("unknown", |k| k.as_str()).to_string(),
        created,
        warnings,
        refused: None,
    }
}

fn task_status(
    state: &ClusterState,
    name: &str,
    id: u32,
    status: &Status,
    door: Door,
) -> pb::TaskStatus {
    pb::TaskStatus {
        id,
        state: status.state.as_str().to_string(),
        worker_id: worker_id(state, status.worker, door),
        trace: status.trace.clone().unwrap_or_default(),
        generation: status.generation,
        fenced_commits: state
            .fenced
            .get(name)
            .and_then(|f| f.get(&id))
            .map_or(0, |f| f.count),
    }
}

pub fn status_info(
    state: &ClusterState,
    name: &str,
    kind: Option<PluginKind>,
    door: Door,
) -> Option<pb::ConnectorStatusInfo> {
    let connector = state.connectors.get(name)?;
    let empty = ConnectorStatus::default();
    let status = state.status.get(name).unwrap_or(&empty);
    Some(pb::ConnectorStatusInfo {
        name: name.to_string(),
        state: status.connector.state.as_str().to_string(),
        worker_id: worker_id(state, status.connector.worker, door),
        trace: status.connector.trace.clone().unwrap_or_default(),
        target_state: connector.target.as_str().to_string(),
        r#type: kind.map_or("unknown", |k| k.as_str()).to_string(),
        tasks: status
            .tasks
            .iter()
            .map(|(id, s)| task_status(state, name, *id, s, door))
            .collect(),
    })
}

pub fn plugin_info(plugin: &PluginDesc) -> pb::PluginInfo {
    pb::PluginInfo {
        class: plugin.class.to_string(),
        r#type: plugin.kind().as_str().to_string(),
        version: plugin.version.to_string(),
        aliases: plugin.aliases.iter().map(|a| a.to_string()).collect(),
    }
}

pub fn validation(v: &Validation) -> pb::ValidateConfigResponse {
    pb::ValidateConfigResponse {
        class: v.class.unwrap_or_default().to_string(),
        error_count: v.error_count() as u32,
        fields: v
            .fields
            .iter()
            .map(|f| pb::FieldResult {
                name: f.name.clone(),
                value: f
                    .value
                    .as_ref()
                    .map(|value| ferry_meta::redact::redact_value(&f.name, value))
                    .unwrap_or_default(),
                errors: f.errors.clone(),
                warnings: f.warnings.clone(),
                documentation: f
                    .key
                    .as_ref()
                    .map(|k| k.doc)
                    .unwrap_or_default()
                    .to_string(),
                r#type: f
                    .key
                    .as_ref()
                    .map(|k| k.ty.as_str())
                    .unwrap_or_default()
                    .to_string(),
                required: f.key.as_ref().is_some_and(|k| k.required),
            })
            .collect(),
    }
}

/// Offsets in KIP-875's shape.
pub fn offsets(state: &ClusterState, name: &str) -> pb::ConnectorOffsets {
    let mut out = Vec::new();
    if let Some(offsets) = state.offsets.get(name) {
        for (topic, partitions) in &offsets.sink {
            for (partition, offset) in partitions {
                out.push(pb::ConnectorOffset {
                    partition_json: json!({"kafka_partition": partition, "kafka_topic": topic})
                        .to_string(),
                    offset_json: json!({ "kafka_offset": offset }).to_string(),
                });
            }
        }
        for (partition, offset) in &offsets.source {
            out.push(pb::ConnectorOffset {
                partition_json: partition.clone(),
                offset_json: offset.clone(),
            });
        }
    }
    pb::ConnectorOffsets {
        name: name.to_string(),
        offsets: out,
    }
}

fn parse_object(what: &str, index: usize, text: &str) -> Result<Option<Value>, ApiError> {
    let text = text.trim();
    if text.is_empty() || text == "null" {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ApiError::Invalid(format!("offsets[{index}].{what} is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::Invalid(format!(
            "offsets[{index}].{what} must be a JSON object or null, got {text}"
        )));
    }
    Ok(Some(value))
}

/// KIP-875 offsets from an alter request, for a sink or a source connector.
pub fn parse_offsets(
    kind: PluginKind,
    offsets: &[pb::ConnectorOffset],
) -> Result<(Vec<SinkOffset>, Vec<SourceOffset>), ApiError> {
    let mut sink = Vec::new();
    let mut source = Vec::new();
    for (i, o) in offsets.iter().enumerate() {
        let partition = parse_object("partition", i, &o.partition_json)?
            .ok_or_else(|| ApiError::Invalid(format!("offsets[{i}].partition is missing")))?;
        let offset = parse_object("offset", i, &o.offset_json)?;
        match kind {
            PluginKind::Sink => {
                let topic = partition
                    .get("kafka_topic")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ApiError::Invalid(format!(
                            "offsets[{i}].partition needs \"kafka_topic\" (a string) for a sink connector"
                        ))
                    })?;
                let part = partition
                    .get("kafka_partition")
                    .and_then(Value::as_i64)
                    .and_then(|p| i32::try_from(p).ok())
                    .filter(|p| *p >= 0)
                    .ok_or_else(|| {
                        ApiError::Invalid(format!(
                            "offsets[{i}].partition needs \"kafka_partition\" (a non-negative integer)"
                        ))
                    })?;
                let next = match offset {
                    None => None,
                    Some(offset) => Some(
                        offset
                            .get("kafka_offset")
                            .and_then(Value::as_i64)
                            .filter(|o| *o >= 0)
                            .ok_or_else(|| {
                                ApiError::Invalid(format!(
                                    "offsets[{i}].offset needs \"kafka_offset\" (a non-negative integer)"
                                ))
                            })?,
                    ),
                };
                sink.push(SinkOffset {
                    topic: topic.to_string(),
                    partition: part,
                    offset: next,
                });
            }
            PluginKind::Source => source.push(SourceOffset {
                partition: ferry_connect::record::canonical_json(&partition),
                offset: offset.as_ref().map(ferry_connect::record::canonical_json),
            }),
        }
    }
    Ok((sink, source))
}

/// A config map from the API, as the state stores it.
pub fn config_map(config: &std::collections::HashMap<String, String>) -> BTreeMap<String, String> {
    config
        .iter()
        .map(|(k, v)| (k.trim().to_string(), v.clone()))
        .collect()
}

/// The tasks of a connector with their configs (secrets redacted), workers, generations and
/// sink partitions; `None` if it does not exist.
pub fn tasks(state: &ClusterState, name: &str, door: Door) -> Option<Vec<pb::TaskInfo>> {
    let connector = state.connectors.get(name)?;
    let assignment = state.assignments.get(name);
    Some(
        connector
            .task_configs()
            .iter()
            .enumerate()
            .map(|(i, config)| {
                let a = assignment.and_then(|a| a.tasks.get(&(i as u32)));
                pb::TaskInfo {
                    id: i as u32,
                    config: config.redacted().into_iter().collect(),
                    worker_id: worker_id(state, a.and_then(|a| a.worker), door),
                    generation: a.map_or(0, |a| a.generation),
                    partitions: state
                        .sink_partitions
                        .get(name)
                        .and_then(|p| p.get(&(i as u32)))
                        .map(|tps| {
                            tps.iter()
                                .map(|tp| format!("{}-{}", tp.topic, tp.partition))
                                .collect()
                        })
                        .unwrap_or_default(),
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(partition: &str, offset: &str) -> pb::ConnectorOffset {
        pb::ConnectorOffset {
            partition_json: partition.into(),
            offset_json: offset.into(),
        }
    }

    #[test]
    fn sink_offsets_in_kip_875_shape() {
        let (sink, source) = parse_offsets(
            PluginKind::Sink,
            &[
                offset(
                    r#"{"kafka_topic":"t","kafka_partition":2}"#,
                    r#"{"kafka_offset":10}"#,
                ),
                offset(r#"{"kafka_topic":"t","kafka_partition":3}"#, "null"),
            ],
        )
        .expect("valid");
        assert!(source.is_empty());
        assert_eq!(sink[0].offset, Some(10));
        assert_eq!(sink[1].offset, None);
    }

    #[test]
    fn bad_offsets_name_the_entry() {
        let cases = [
            (offset("{", "{}"), "offsets[0].partition is not JSON"),
            (
                offset(r#"{"kafka_partition":1}"#, r#"{"kafka_offset":1}"#),
                "kafka_topic",
            ),
            (
                offset(
                    r#"{"kafka_topic":"t","kafka_partition":-1}"#,
                    r#"{"kafka_offset":1}"#,
                ),
                "kafka_partition",
            ),
            (
                offset(
                    r#"{"kafka_topic":"t","kafka_partition":1}"#,
                    r#"{"kafka_offset":"x"}"#,
                ),
                "kafka_offset",
            ),
            (offset("[]", "{}"), "must be a JSON object"),
        ];
        for (o, want) in cases {
            let err = parse_offsets(PluginKind::Sink, &[o]).expect_err(want);
            assert!(err.to_string().contains(want), "{err}");
        }
    }

    #[test]
    fn source_partitions_are_canonical() {
        let (_, a) = parse_offsets(
            PluginKind::Source,
            &[offset(r#"{"b":1,"a":2}"#, r#"{"p":1}"#)],
        )
        .expect("valid");
        let (_, b) = parse_offsets(
            PluginKind::Source,
            &[offset(r#"{"a":2, "b":1}"#, r#"{"p":1}"#)],
        )
        .expect("valid");
        assert_eq!(a[0].partition, b[0].partition);
    }
}
