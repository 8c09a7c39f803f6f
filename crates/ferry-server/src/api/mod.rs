//! The management gRPC service: an adapter of the management core ([`Core`]), which holds the
//! rules (validation, name rules, forwarding, request ids, linearizable reads, the offsets
//! API's checks, adding and removing nodes). This module converts `proto/management.proto`'s
//! messages to the core's calls and its answers back.

pub mod convert;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use ferry_meta::state::TargetState;
use ferry_meta::ClusterState;
use ferry_proto::management as pb;
use ferry_proto::management::management_server::Management;
use ferry_worker::metrics::WorkerMetrics;
use openraft::ServerState;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};

use crate::error::{ApiError, ApiResult};
use crate::manage::{require_name, Core, Put, Stored};

/// The management service of one node.
#[derive(Clone)]
pub struct Api {
    core: Core,
    metrics: Arc<WorkerMetrics>,
}

type Reply<T> = Result<GrpcResponse<T>, Status>;

impl Api {
    /// The gRPC door to `core`, answering for this node's `metrics` too.
    pub fn new(core: Core, metrics: Arc<WorkerMetrics>) -> Self {
        Api { core, metrics }
    }

    async fn status_of(&self, name: &str) -> ApiResult<pb::ConnectorStatusInfo> {
        self.core
            .read_connector(name, |s| statuses(&self.core, s, name).remove(name))
            .await
    }

    /// A create or a config update, as the answer says it.
    async fn put(
        &self,
        name: &str,
        config: &std::collections::HashMap<String, String>,
        create: bool,
        expected_version: Option<u64>,
        id: &str,
    ) -> ApiResult<pb::ConnectorInfo> {
        let config = convert::config_map(config);
        Ok(
            match self
                .core
                .put(
                    name,
                    config,
                    Put {
                        create,
                        expected_version,
                        initial: None,
                    },
                    id,
                )
                .await?
            {
                Stored::Refused(validation) => pb::ConnectorInfo {
                    name: name.trim().to_string(),
                    refused: Some(convert::validation(&validation)),
                    ..Default::default()
                },
                Stored::Done(stored) => convert::connector_info(
                    &stored.name,
                    &stored.connector,
                    stored.kind,
                    stored.created,
                    stored.warnings,
                ),
            },
        )
    }

    async fn set_target(
        &self,
        req: pb::WriteConnectorRequest,
        target: TargetState,
    ) -> Reply<pb::Empty> {
        self.core
            .set_target(&req.name, target, &req.request_id)
            .await?;
        Ok(GrpcResponse::new(pb::Empty {}))
    }

    /// The connector's offsets, KIP-875's way, after a change.
    async fn offsets_now(&self, name: &str) -> Reply<pb::ConnectorOffsets> {
        let name = name.trim();
        let offsets = self.core.read(|s| convert::offsets(s, name)).await?;
        Ok(GrpcResponse::new(offsets))
    }
}

/// The status of every connector (or of `only`, if not empty), with Ferry's facts: generations,
/// fenced commits, the target state.
pub fn statuses(
    core: &Core,
    state: &ClusterState,
    only: &str,
) -> BTreeMap<String, pb::ConnectorStatusInfo> {
    state
        .connectors
        .iter()
        .filter(|(name, _)| only.is_empty() || name.as_str() == only)
        .filter_map(|(name, c)| {
            convert::status_info(state, name, core.kind_of(&c.config), convert::Door::Grpc)
                .map(|s| (name.clone(), s))
        })
        .collect()
}

/// This node's view of the cluster: members, roles, leader, indexes.
pub fn cluster_status(core: &Core) -> pb::ClusterStatusResponse {
    let meta = core.node();
    let metrics = meta.raft().metrics().borrow().clone();
    let membership = metrics.membership_config.membership();
    let voters: Vec<u64> = membership.voter_ids().collect();
    let replication = metrics.replication.clone().unwrap_or_default();
    let role_of = |id: u64| -> String {
        if Some(id) == metrics.current_leader {
            "leader".into()
        } else if !voters.contains(&id) {
            "learner".into()
        } else if id == metrics.id {
            match metrics.state {
                ServerState::Candidate => "candidate".into(),
                _ => "follower".into(),
            }
        } else {
            "follower".into()
        }
    };
    let formats = meta.reported_formats();
    // One read of the applied state, dropped at the end of this block.
    let (cluster_id, feature_level, rest_addrs) = {
        let applied = meta.state().read();
        let state = &applied.state;
        let rest_addrs: BTreeMap<u64, String> = state
            .workers
            .iter()
            .map(|(id, w)| (*id, w.rest_url.clone()))
            .collect();
        (
            state.cluster_id.clone().unwrap_or_default(),
            state.feature_level(),
            rest_addrs,
        )
    };
    let members = membership
        .nodes()
        .map(|(id, node)| pb::Member {
            id: *id,
            api_addr: node.api_addr.clone(),
            raft_addr: node.raft_addr.clone(),
            role: if voters.contains(id) {
                "voter"
            } else {
                "learner"
            }
            .into(),
            raft_state: role_of(*id),
            matched_index: replication.get(id).and_then(|m| m.map(|l| l.index)),
            incarnation: node.incarnation.clone(),
            acknowledged_index: meta.acknowledged(*id),
            format: (metrics.current_leader == Some(metrics.id))
                .then(|| formats.get(id).copied())
                .flatten(),
            rest_addr: rest_addrs.get(id).cloned().unwrap_or_default(),
        })
        .collect();
    let leader_api_addr = metrics
        .current_leader
        .and_then(|l| membership.get_node(&l))
        .map(|n| n.api_addr.clone())
        .unwrap_or_default();
    pb::ClusterStatusResponse {
        cluster_id,
        node_id: metrics.id,
        leader_id: metrics.current_leader,
        leader_api_addr,
        term: metrics.current_term,
        committed_index: meta.committed_index(),
        applied_index: metrics.last_applied.map(|l| l.index),
        last_log_index: metrics.last_log_index,
        snapshot_index: metrics.snapshot.map(|l| l.index),
        purged_index: metrics.purged.map(|l| l.index),
        state: format!("{:?}", metrics.state).to_lowercase(),
        members,
        target_voters: core.target_voters() as u32,
        incarnation: meta.boot().incarnation.clone(),
        removed: meta.removed(),
        feature_level,
        format: ferry_meta::format::understood(),
        not_voting: {
            let standing = meta.standing();
            if meta.removed() {
                "this node was removed from the cluster (ferry cluster add-node adds it again)"
                    .to_string()
            } else if standing.may_vote() {
                String::new()
            } else {
                standing.reason(&meta.boot().incarnation)
            }
        },
    }
}

type StatusStream = Pin<Box<dyn Stream<Item = Result<pb::StatusEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Management for Api {
    async fn create_connector(
        &self,
        req: GrpcRequest<pb::CreateConnectorRequest>,
    ) -> Reply<pb::ConnectorInfo> {
        let req = req.into_inner();
        let info = self
            .put(&req.name, &req.config, true, None, &req.request_id)
            .await?;
        Ok(GrpcResponse::new(info))
    }

    async fn put_connector_config(
        &self,
        req: GrpcRequest<pb::PutConnectorConfigRequest>,
    ) -> Reply<pb::ConnectorInfo> {
        let req = req.into_inner();
        let info = self
            .put(
                &req.name,
                &req.config,
                false,
                req.expected_version,
                &req.request_id,
            )
            .await?;
        Ok(GrpcResponse::new(info))
    }

    async fn get_connector(&self, req: GrpcRequest<pb::ConnectorName>) -> Reply<pb::ConnectorInfo> {
        let name = require_name(&req.get_ref().name)?.to_string();
        let connector = self
            .core
            .read_connector(&name, |s| s.connectors.get(&name).cloned())
            .await?;
        let kind = self.core.kind_of(&connector.config);
        Ok(GrpcResponse::new(convert::connector_info(
            &name,
            &connector,
            kind,
            false,
            Vec::new(),
        )))
    }

    async fn list_connectors(
        &self,
        _req: GrpcRequest<pb::ListConnectorsRequest>,
    ) -> Reply<pb::ListConnectorsResponse> {
        let names = self
            .core
            .read(|s| s.connectors.keys().cloned().collect())
            .await?;
        Ok(GrpcResponse::new(pb::ListConnectorsResponse { names }))
    }

    async fn delete_connector(
        &self,
        req: GrpcRequest<pb::WriteConnectorRequest>,
    ) -> Reply<pb::Empty> {
        let req = req.into_inner();
        self.core.delete(&req.name, &req.request_id).await?;
        Ok(GrpcResponse::new(pb::Empty {}))
    }

    async fn connector_status(
        &self,
        req: GrpcRequest<pb::ConnectorName>,
    ) -> Reply<pb::ConnectorStatusInfo> {
        let name = require_name(&req.get_ref().name)?.to_string();
        let status = self.status_of(&name).await?;
        Ok(GrpcResponse::new(status))
    }

    async fn pause_connector(
        &self,
        req: GrpcRequest<pb::WriteConnectorRequest>,
    ) -> Reply<pb::Empty> {
        self.set_target(req.into_inner(), TargetState::Paused).await
    }

    async fn resume_connector(
        &self,
        req: GrpcRequest<pb::WriteConnectorRequest>,
    ) -> Reply<pb::Empty> {
        self.set_target(req.into_inner(), TargetState::Running)
            .await
    }

    async fn stop_connector(
        &self,
        req: GrpcRequest<pb::WriteConnectorRequest>,
    ) -> Reply<pb::Empty> {
        self.set_target(req.into_inner(), TargetState::Stopped)
            .await
    }

    async fn restart_connector(
        &self,
        req: GrpcRequest<pb::RestartConnectorRequest>,
    ) -> Reply<pb::ConnectorStatusInfo> {
        let req = req.into_inner();
        self.core
            .restart(
                &req.name,
                req.include_tasks,
                req.only_failed,
                &req.request_id,
            )
            .await?;
        let status = self.status_of(req.name.trim()).await?;
        Ok(GrpcResponse::new(status))
    }

    async fn list_tasks(
        &self,
        req: GrpcRequest<pb::ConnectorName>,
    ) -> Reply<pb::ListTasksResponse> {
        let name = require_name(&req.get_ref().name)?.to_string();
        let tasks = self
            .core
            .read_connector(&name, |s| convert::tasks(s, &name, convert::Door::Grpc))
            .await?;
        Ok(GrpcResponse::new(pb::ListTasksResponse { tasks }))
    }

    async fn restart_task(&self, req: GrpcRequest<pb::RestartTaskRequest>) -> Reply<pb::Empty> {
        let req = req.into_inner();
        self.core
            .restart_task(&req.name, req.task, &req.request_id)
            .await?;
        Ok(GrpcResponse::new(pb::Empty {}))
    }

    async fn get_offsets(
        &self,
        req: GrpcRequest<pb::ConnectorName>,
    ) -> Reply<pb::ConnectorOffsets> {
        let name = require_name(&req.get_ref().name)?.to_string();
        let offsets = self
            .core
            .read_connector(&name, |s| {
                s.connectors
                    .contains_key(&name)
                    .then(|| convert::offsets(s, &name))
            })
            .await?;
        Ok(GrpcResponse::new(offsets))
    }

    async fn alter_offsets(
        &self,
        req: GrpcRequest<pb::AlterOffsetsRequest>,
    ) -> Reply<pb::ConnectorOffsets> {
        let req = req.into_inner();
        self.core
            .alter_offsets(&req.name, &req.request_id, |kind| {
                convert::parse_offsets(kind, &req.offsets)
            })
            .await?;
        self.offsets_now(&req.name).await
    }

    async fn reset_offsets(
        &self,
        req: GrpcRequest<pb::WriteConnectorRequest>,
    ) -> Reply<pb::ConnectorOffsets> {
        let req = req.into_inner();
        self.core.reset_offsets(&req.name, &req.request_id).await?;
        self.offsets_now(&req.name).await
    }

    type WatchStatusStream = StatusStream;

    async fn watch_status(
        &self,
        req: GrpcRequest<pb::WatchStatusRequest>,
    ) -> Reply<Self::WatchStatusStream> {
        let only = req.into_inner().name.trim().to_string();
        let (tx, rx) = mpsc::channel(64);
        let api = self.clone();
        tokio::spawn(async move {
            let mut applied = api.core.node().state().applied();
            let mut sent: BTreeMap<String, pb::ConnectorStatusInfo> = BTreeMap::new();
            loop {
                let (index, current) = {
                    let guard = api.core.node().state().read();
                    let index = guard.last_applied.map_or(0, |l| l.index);
                    (index, statuses(&api.core, &guard.state, &only))
                };
                let mut events = Vec::new();
                for (name, status) in &current {
                    if sent.get(name) != Some(status) {
                        events.push(pb::StatusEvent {
                            applied_index: index,
                            status: Some(status.clone()),
                            deleted: false,
                        });
                    }
                }
                for name in sent.keys().filter(|n| !current.contains_key(*n)) {
                    events.push(pb::StatusEvent {
                        applied_index: index,
                        status: Some(pb::ConnectorStatusInfo {
                            name: name.clone(),
                            ..Default::default()
                        }),
                        deleted: true,
                    });
                }
                for event in events {
                    if tx.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
                sent = current;
                tokio::select! {
                    changed = applied.changed() => if changed.is_err() { return },
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(GrpcResponse::new(
            Box::pin(ReceiverStream::new(rx)) as StatusStream
        ))
    }

    async fn list_plugins(&self, _req: GrpcRequest<pb::Empty>) -> Reply<pb::ListPluginsResponse> {
        Ok(GrpcResponse::new(pb::ListPluginsResponse {
            plugins: self
                .core
                .plugins()
                .iter()
                .map(convert::plugin_info)
                .collect(),
        }))
    }

    async fn validate_config(
        &self,
        req: GrpcRequest<pb::ValidateConfigRequest>,
    ) -> Reply<pb::ValidateConfigResponse> {
        let config = convert::config_map(&req.get_ref().config);
        let validation = self.core.validate(&config)?;
        Ok(GrpcResponse::new(convert::validation(&validation)))
    }

    async fn cluster_status(
        &self,
        _req: GrpcRequest<pb::Empty>,
    ) -> Reply<pb::ClusterStatusResponse> {
        Ok(GrpcResponse::new(cluster_status(&self.core)))
    }

    async fn node_metrics(&self, _req: GrpcRequest<pb::Empty>) -> Reply<pb::NodeMetricsResponse> {
        if !self.metrics.enabled() {
            return Err(tonic::Status::failed_precondition(
                ferry_worker::metrics::METRICS_OFF,
            ));
        }
        Ok(GrpcResponse::new(pb::NodeMetricsResponse {
            node_id: self.core.node().id(),
            text: self.metrics.render(),
        }))
    }

    async fn add_node(
        &self,
        req: GrpcRequest<pb::AddNodeRequest>,
    ) -> Reply<pb::ClusterStatusResponse> {
        let req = req.into_inner();
        self.core
            .add_node(req.id, &req.api_addr, &req.raft_addr)
            .await?;
        Ok(GrpcResponse::new(cluster_status(&self.core)))
    }

    async fn backup(&self, _req: GrpcRequest<pb::Empty>) -> Reply<pb::BackupResponse> {
        let backup = self.core.backup().await?;
        let data = backup.encode().map_err(ApiError::Invalid)?;
        Ok(GrpcResponse::new(pb::BackupResponse {
            data,
            applied_index: backup.applied_index,
            cluster_id: backup.cluster_id.clone().unwrap_or_default(),
            connectors: backup.state.connectors.len() as u32,
        }))
    }

    async fn restore(&self, req: GrpcRequest<pb::RestoreRequest>) -> Reply<pb::RestoreResponse> {
        let req = req.into_inner();
        let restored = self.core.restore(&req.data, &req.request_id).await?;
        Ok(GrpcResponse::new(pb::RestoreResponse {
            connectors: restored.connectors as u32,
            from_cluster_id: restored.from_cluster_id.unwrap_or_default(),
            from_applied_index: restored.from_applied_index,
        }))
    }

    async fn remove_node(
        &self,
        req: GrpcRequest<pb::RemoveNodeRequest>,
    ) -> Reply<pb::ClusterStatusResponse> {
        self.core.remove_node(req.into_inner().id).await?;
        Ok(GrpcResponse::new(cluster_status(&self.core)))
    }
}
