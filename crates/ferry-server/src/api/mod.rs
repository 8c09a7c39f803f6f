//! The management gRPC service. Writes go through the leader (forwarded by
//! [`MetaNode::write`]) and carry a request id so that a retry applies once; reads marked
//! linearizable in `proto/management.proto` wait for [`MetaNode::linearizable`] first.

pub mod convert;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use ferry_connect::{validate, PluginDesc, PluginKind};
use ferry_meta::peer::Proposal;
use ferry_meta::state::{Command, Outcome, TargetState};
use ferry_meta::{ClusterState, ConfigMap, FerryNode, MetaNode, Request};
use ferry_proto::management as pb;
use ferry_proto::management::management_server::Management;
use openraft::ServerState;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};
use tracing::{debug, info};

use crate::error::{ApiError, ApiResult};
use crate::limits::Limits;

/// The management service of one node.
#[derive(Clone)]
pub struct Api {
    node: MetaNode,
    plugins: Arc<Vec<PluginDesc>>,
    target_voters: usize,
    limits: Arc<Limits>,
    /// The brokers, for what an API call asks of Kafka itself (a sink's group on reset).
    kafka: Option<ferry_worker::KafkaSettings>,
}

type Reply<T> = Result<GrpcResponse<T>, Status>;

/// How long remove-node waits for the scheduler to move a node's tasks away.
const TASKS_MOVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether any connector instance or task is assigned to worker `id`.
fn assigned_to(state: &ClusterState, id: ferry_meta::NodeId) -> bool {
    state.assignments.values().any(|a| {
        a.connector.is_some_and(|c| c.worker == Some(id))
            || a.tasks.values().any(|t| t.worker == Some(id))
    })
}

fn request_id(given: &str) -> String {
    if given.trim().is_empty() {
        uuid::Uuid::new_v4().to_string()
    } else {
        given.trim().to_string()
    }
}

/// The name of an existing connector a request is about (a new one is checked against the
/// limits in [`Api::put`]).
fn require_name(name: &str) -> ApiResult<&str> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::Invalid(
            "name: a connector name is required".into(),
        ));
    }
    Ok(name)
}

impl Api {
    pub fn new(
        node: MetaNode,
        plugins: Vec<PluginDesc>,
        target_voters: usize,
        limits: Limits,
        kafka: Option<ferry_worker::KafkaSettings>,
    ) -> Self {
        Api {
            node,
            plugins: Arc::new(plugins),
            target_voters,
            limits: Arc::new(limits),
            kafka,
        }
    }

    fn kind_of(&self, config: &ConfigMap) -> Option<PluginKind> {
        let class = config.get("connector.class")?;
        ferry_connect::plugin::find(&self.plugins, class).map(|p| p.kind())
    }

    /// Write a command through the leader; the state machine's rejection becomes an error.
    async fn write(&self, id: &str, command: Command) -> ApiResult<Outcome> {
        let request = Request::new(request_id(id), command);
        debug!(%request, "write");
        Ok(self.node.write_answer(request).await??)
    }

    /// A linearizable read of the state.
    async fn read<T>(&self, f: impl FnOnce(&ClusterState) -> T) -> ApiResult<T> {
        self.node.linearizable().await?;
        Ok(f(&self.node.state().read().state))
    }

    /// Whether offsets changed through the offsets API are marked as winning over a sink's
    /// own: once the cluster's feature level allows it (a new cluster raises its level within
    /// its first heartbeats; until then, and in a cluster being upgraded, they are changed as
    /// before).
    async fn superseding_offsets(&self) -> ApiResult<bool> {
        self.read(|s| s.feature_level() >= ferry_meta::format::SUPERSEDING_OFFSETS)
            .await
    }

    /// A linearizable read about one connector: `None` from `f` means it does not exist.
    async fn read_connector<T>(
        &self,
        name: &str,
        f: impl FnOnce(&ClusterState) -> Option<T>,
    ) -> ApiResult<T> {
        self.read(f).await?.ok_or_else(|| {
            ApiError::from(ferry_meta::Rejection::NotFound {
                name: name.to_string(),
            })
        })
    }

    async fn status_of(&self, name: &str) -> ApiResult<pb::ConnectorStatusInfo> {
        self.read_connector(name, |s| self.statuses(s, name).remove(name))
            .await
    }

    /// The config as stored for connector `name`: its `name` property is the connector's.
    fn named_config(
        &self,
        name: &str,
        config: &std::collections::HashMap<String, String>,
    ) -> ApiResult<BTreeMap<String, String>> {
        let mut config = convert::config_map(config);
        match config.get("name") {
            Some(given) if given.trim() != name => {
                return Err(ApiError::Invalid(format!(
                    "name: the config's name {given:?} differs from the connector name {name:?}"
                )))
            }
            Some(_) => {}
            None => {
                config.insert("name".into(), name.to_string());
            }
        }
        Ok(config)
    }

    /// Every property's result, with the limits that belong to properties.
    fn validation(&self, config: &BTreeMap<String, String>) -> ferry_connect::Validation {
        let mut validation = validate(&self.plugins, config);
        self.limits.check_properties(config, &mut validation);
        validation
    }

    /// Store a connector's config if it validates; if it does not, nothing is written and the
    /// answer carries every property's result (`refused`).
    async fn put(
        &self,
        name: &str,
        config: &std::collections::HashMap<String, String>,
        create: bool,
        expected_version: Option<u64>,
        id: &str,
    ) -> ApiResult<pb::ConnectorInfo> {
        let name = name.trim();
        self.limits.check_name(name).map_err(ApiError::Invalid)?;
        let config = self.named_config(name, config)?;
        self.limits
            .check_config_size(&config)
            .map_err(ApiError::Invalid)?;
        let validation = self.validation(&config);
        if validation.error_count() > 0 {
            info!(
                connector = name,
                errors = validation.error_count(),
                "config refused"
            );
            return Ok(pb::ConnectorInfo {
                name: name.to_string(),
                refused: Some(convert::validation(&validation)),
                ..Default::default()
            });
        }
        let warnings: Vec<String> = validation.warnings().collect();
        for warning in &warnings {
            info!(connector = name, %warning, "config warning");
        }
        let config = ConfigMap(config);
        let kind = self.kind_of(&config);
        let outcome = self
            .write(
                id,
                Command::PutConnector {
                    name: name.to_string(),
                    config: config.clone(),
                    create,
                    expected_version,
                },
            )
            .await?;
        let (version, created) = match outcome {
            Outcome::Connector { version, created } => (version, created),
            _ => (0, false),
        };
        let stored = ferry_meta::state::Connector {
            config,
            version,
            ..Default::default()
        };
        let target = self
            .node
            .state()
            .read()
            .state
            .connectors
            .get(name)
            .map(|c| c.target)
            .unwrap_or_default();
        let mut info = convert::connector_info(name, &stored, kind, created, warnings);
        info.target_state = target.as_str().to_string();
        Ok(info)
    }

    async fn set_target(
        &self,
        req: pb::WriteConnectorRequest,
        target: TargetState,
    ) -> Reply<pb::Empty> {
        let name = require_name(&req.name)?;
        self.write(
            &req.request_id,
            Command::SetTargetState {
                name: name.to_string(),
                target,
            },
        )
        .await?;
        info!(
            connector = name,
            target = target.as_str(),
            "target state set"
        );
        Ok(GrpcResponse::new(pb::Empty {}))
    }

    async fn connector_kind(&self, name: &str) -> ApiResult<PluginKind> {
        let config = self
            .read_connector(name, |s| s.connectors.get(name).map(|c| c.config.clone()))
            .await?;
        self.kind_of(&config).ok_or_else(|| {
            ApiError::Invalid(format!(
                "connector {name}: its class {:?} is not a plugin of this build",
                config.get("connector.class").unwrap_or_default()
            ))
        })
    }

    fn statuses(
        &self,
        state: &ClusterState,
        only: &str,
    ) -> BTreeMap<String, pb::ConnectorStatusInfo> {
        state
            .connectors
            .iter()
            .filter(|(name, _)| only.is_empty() || name.as_str() == only)
            .filter_map(|(name, c)| {
                convert::status_info(state, name, self.kind_of(&c.config))
                    .map(|s| (name.clone(), s))
            })
            .collect()
    }

    fn cluster_status(&self) -> pb::ClusterStatusResponse {
        let metrics = self.node.raft().metrics().borrow().clone();
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
        let formats = self.node.reported_formats();
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
                acknowledged_index: self.node.acknowledged(*id),
                format: (metrics.current_leader == Some(metrics.id))
                    .then(|| formats.get(id).copied())
                    .flatten(),
            })
            .collect();
        let leader_api_addr = metrics
            .current_leader
            .and_then(|l| membership.get_node(&l))
            .map(|n| n.api_addr.clone())
            .unwrap_or_default();
        pb::ClusterStatusResponse {
            cluster_id: self
                .node
                .state()
                .read()
                .state
                .cluster_id
                .clone()
                .unwrap_or_default(),
            node_id: metrics.id,
            leader_id: metrics.current_leader,
            leader_api_addr,
            term: metrics.current_term,
            committed_index: self.node.committed_index(),
            applied_index: metrics.last_applied.map(|l| l.index),
            last_log_index: metrics.last_log_index,
            snapshot_index: metrics.snapshot.map(|l| l.index),
            purged_index: metrics.purged.map(|l| l.index),
            state: format!("{:?}", metrics.state).to_lowercase(),
            members,
            target_voters: self.target_voters as u32,
            incarnation: self.node.boot().incarnation.clone(),
            removed: self.node.removed(),
            feature_level: self.node.state().read().state.feature_level(),
            format: ferry_meta::format::understood(),
            not_voting: {
                let standing = self.node.standing();
                if self.node.removed() {
                    "this node was removed from the cluster (ferry cluster add-node adds it again)"
                        .to_string()
                } else if standing.may_vote() {
                    String::new()
                } else {
                    standing.reason(&self.node.boot().incarnation)
                }
            },
        }
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
        info!(connector = %info.name, version = info.version, "connector created");
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
        info!(connector = %info.name, version = info.version, created = info.created, "connector config stored");
        Ok(GrpcResponse::new(info))
    }

    async fn get_connector(&self, req: GrpcRequest<pb::ConnectorName>) -> Reply<pb::ConnectorInfo> {
        let name = require_name(&req.get_ref().name)?.to_string();
        let connector = self
            .read_connector(&name, |s| s.connectors.get(&name).cloned())
            .await?;
        let kind = self.kind_of(&connector.config);
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
            .read(|s| s.connectors.keys().cloned().collect())
            .await?;
        Ok(GrpcResponse::new(pb::ListConnectorsResponse { names }))
    }

    async fn delete_connector(
        &self,
        req: GrpcRequest<pb::WriteConnectorRequest>,
    ) -> Reply<pb::Empty> {
        let req = req.into_inner();
        let name = require_name(&req.name)?;
        self.write(
            &req.request_id,
            Command::DeleteConnector {
                name: name.to_string(),
            },
        )
        .await?;
        info!(connector = name, "connector deleted");
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
        let name = require_name(&req.name)?.to_string();
        self.write(
            &req.request_id,
            Command::Restart {
                name: name.clone(),
                include_tasks: req.include_tasks,
                only_failed: req.only_failed,
            },
        )
        .await?;
        let status = self.status_of(&name).await?;
        Ok(GrpcResponse::new(status))
    }

    async fn list_tasks(
        &self,
        req: GrpcRequest<pb::ConnectorName>,
    ) -> Reply<pb::ListTasksResponse> {
        let name = require_name(&req.get_ref().name)?.to_string();
        let tasks = self
            .read_connector(&name, |s| {
                let connector = s.connectors.get(&name)?;
                let assignment = s.assignments.get(&name);
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
                                worker_id: convert::worker_id(s, a.and_then(|a| a.worker)),
                                generation: a.map_or(0, |a| a.generation),
                                partitions: s
                                    .sink_partitions
                                    .get(&name)
                                    .and_then(|p| p.get(&(i as u32)))
                                    .map(|tps| {
                                        tps.iter()
                                            .map(|tp| format!("{}-{}", tp.topic, tp.partition))
                                            .collect()
                                    })
                                    .unwrap_or_default(),
                            }
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .await?;
        Ok(GrpcResponse::new(pb::ListTasksResponse { tasks }))
    }

    async fn restart_task(&self, req: GrpcRequest<pb::RestartTaskRequest>) -> Reply<pb::Empty> {
        let req = req.into_inner();
        let name = require_name(&req.name)?;
        self.write(
            &req.request_id,
            Command::RestartTask {
                name: name.to_string(),
                task: req.task,
            },
        )
        .await?;
        Ok(GrpcResponse::new(pb::Empty {}))
    }

    async fn get_offsets(
        &self,
        req: GrpcRequest<pb::ConnectorName>,
    ) -> Reply<pb::ConnectorOffsets> {
        let name = require_name(&req.get_ref().name)?.to_string();
        let offsets = self
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
        let name = require_name(&req.name)?.to_string();
        let kind = self.connector_kind(&name).await?;
        let (sink, source) = convert::parse_offsets(kind, &req.offsets)?;
        let supersede = self.superseding_offsets().await?;
        self.write(
            &req.request_id,
            Command::AlterOffsets {
                name: name.clone(),
                sink,
                source,
                supersede,
            },
        )
        .await?;
        info!(connector = %name, "offsets altered");
        let offsets = self.read(|s| convert::offsets(s, &name)).await?;
        Ok(GrpcResponse::new(offsets))
    }

    async fn reset_offsets(
        &self,
        req: GrpcRequest<pb::WriteConnectorRequest>,
    ) -> Reply<pb::ConnectorOffsets> {
        let req = req.into_inner();
        let name = require_name(&req.name)?.to_string();
        // A stopped sink's group offsets go first, as Kafka Connect deletes them: with no
        // offsets in Raft, a sink starts from its group's (see the worker's sink loop).
        let stopped = self
            .read_connector(&name, |s| {
                s.connectors
                    .get(&name)
                    .map(|c| c.target == ferry_meta::state::TargetState::Stopped)
            })
            .await?;
        if stopped && self.connector_kind(&name).await? == PluginKind::Sink {
            if let Some(kafka) = &self.kafka {
                ferry_worker::admin::delete_sink_group(kafka, &name)
                    .await
                    .map_err(ApiError::Kafka)?;
            }
        }
        let supersede = self.superseding_offsets().await?;
        self.write(
            &req.request_id,
            Command::ResetOffsets {
                name: name.clone(),
                supersede,
            },
        )
        .await?;
        info!(connector = %name, "offsets reset");
        let offsets = self.read(|s| convert::offsets(s, &name)).await?;
        Ok(GrpcResponse::new(offsets))
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
            let mut applied = api.node.state().applied();
            let mut sent: BTreeMap<String, pb::ConnectorStatusInfo> = BTreeMap::new();
            loop {
                let (index, current) = {
                    let guard = api.node.state().read();
                    let index = guard.last_applied.map_or(0, |l| l.index);
                    (index, api.statuses(&guard.state, &only))
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
            plugins: self.plugins.iter().map(convert::plugin_info).collect(),
        }))
    }

    async fn validate_config(
        &self,
        req: GrpcRequest<pb::ValidateConfigRequest>,
    ) -> Reply<pb::ValidateConfigResponse> {
        let config = convert::config_map(&req.get_ref().config);
        self.limits
            .check_config_size(&config)
            .map_err(ApiError::Invalid)?;
        let mut validation = self.validation(&config);
        if let Some(Err(e)) = config.get("name").map(|n| self.limits.check_name(n.trim())) {
            let problem = e.trim_start_matches("name: ").to_string();
            validation.add_error(&config, "name", problem);
        }
        Ok(GrpcResponse::new(convert::validation(&validation)))
    }

    async fn cluster_status(
        &self,
        _req: GrpcRequest<pb::Empty>,
    ) -> Reply<pb::ClusterStatusResponse> {
        Ok(GrpcResponse::new(self.cluster_status()))
    }

    async fn add_node(
        &self,
        req: GrpcRequest<pb::AddNodeRequest>,
    ) -> Reply<pb::ClusterStatusResponse> {
        let req = req.into_inner();
        for (field, addr) in [("api_addr", &req.api_addr), ("raft_addr", &req.raft_addr)] {
            if addr
                .rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            {
                return Err(
                    ApiError::Invalid(format!("{field}: {addr:?} is not host:port")).into(),
                );
            }
        }
        let node = FerryNode {
            api_addr: req.api_addr.clone(),
            raft_addr: req.raft_addr.clone(),
            incarnation: String::new(),
        };
        info!(node = req.id, %node, "add-node requested");
        self.node
            .propose(Proposal::AddNode {
                id: req.id,
                node: node.clone(),
                target_voters: self.target_voters,
            })
            .await
            .map_err(ApiError::from)?;
        self.write("", Command::PutWorker { id: req.id, node })
            .await?;
        Ok(GrpcResponse::new(self.cluster_status()))
    }

    async fn backup(&self, _req: GrpcRequest<pb::Empty>) -> Reply<pb::BackupResponse> {
        self.node.linearizable().await.map_err(ApiError::from)?;
        let backup = {
            let applied = self.node.state().read();
            ferry_meta::backup::Backup::of(&applied.state, applied.last_applied.map(|l| l.index))
        };
        let data = backup.encode().map_err(ApiError::Invalid)?;
        info!(applied_index = ?backup.applied_index, connectors = backup.state.connectors.len(), "backup taken");
        Ok(GrpcResponse::new(pb::BackupResponse {
            data,
            applied_index: backup.applied_index,
            cluster_id: backup.cluster_id.clone().unwrap_or_default(),
            connectors: backup.state.connectors.len() as u32,
        }))
    }

    async fn restore(&self, req: GrpcRequest<pb::RestoreRequest>) -> Reply<pb::RestoreResponse> {
        let req = req.into_inner();
        let backup = ferry_meta::backup::Backup::decode(&req.data).map_err(ApiError::Invalid)?;
        let connectors = backup.state.connectors.len() as u32;
        self.write(
            &req.request_id,
            Command::RestoreState {
                state: Box::new(backup.state),
            },
        )
        .await?;
        info!(connectors, from = ?backup.cluster_id, "backup restored");
        Ok(GrpcResponse::new(pb::RestoreResponse {
            connectors,
            from_cluster_id: backup.cluster_id.unwrap_or_default(),
            from_applied_index: backup.applied_index,
        }))
    }

    async fn remove_node(
        &self,
        req: GrpcRequest<pb::RemoveNodeRequest>,
    ) -> Reply<pb::ClusterStatusResponse> {
        let id = req.into_inner().id;
        info!(node = id, "remove-node requested");
        // First its work moves away, while it is still a member: its running tasks see their
        // assignments go and stop (their final commits are fenced). Removed first, it kept
        // running tasks that no longer saw the cluster's state.
        self.write("", Command::RemoveWorker { id }).await?;
        let started = std::time::Instant::now();
        while self.read(|s| assigned_to(s, id)).await? {
            if started.elapsed() > TASKS_MOVE_TIMEOUT {
                return Err(ApiError::Meta(ferry_meta::MetaError::Unavailable {
                    waited_ms: started.elapsed().as_millis(),
                    last: format!("node {id} still has tasks assigned: retry remove-node"),
                })
                .into());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        self.node
            .propose(Proposal::RemoveNode { id })
            .await
            .map_err(ApiError::from)?;
        Ok(GrpcResponse::new(self.cluster_status()))
    }
}
