//! The management core: the rules of every management operation, whatever door the request
//! came in by (docs/design.md#one-management-core-several-doors). Writes go through the leader
//! (forwarded by [`MetaNode::write_answer`]) with a request id, so that a retry applies once;
//! reads are linearizable and say when the connector does not exist; configs are validated
//! (plugins and limits) and their `name` rule enforced before anything is written; the offsets
//! API (KIP-875) knows what a connector's kind allows and what a reset asks of Kafka; a node is
//! removed only once its tasks have moved. A protocol adapter (the gRPC service in `api`)
//! converts its messages to these calls and their answers back, and nothing more.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_connect::{validate_on, PluginDesc, PluginKind, Validation};
use ferry_meta::peer::Proposal;
use ferry_meta::state::{Command, Connector, Outcome, SinkOffset, SourceOffset, TargetState};
use ferry_meta::{ClusterState, ConfigMap, FerryNode, MetaNode, NodeId, Request};
use tracing::{debug, info};

use crate::error::{ApiError, ApiResult};
use crate::limits::Limits;

/// How long remove-node waits for the scheduler to move a node's tasks away: less than the
/// CLI's call timeout (30 s), so that the CLI shows why it failed.
const TASKS_MOVE_TIMEOUT: Duration = Duration::from_secs(25);

/// The management core of one node.
#[derive(Clone)]
pub struct Core {
    node: MetaNode,
    plugins: Arc<Vec<PluginDesc>>,
    target_voters: usize,
    limits: Arc<Limits>,
    /// The brokers, for what a call asks of Kafka itself (a sink's group on reset).
    kafka: Option<ferry_worker::KafkaSettings>,
    /// The worker's converters (`[worker.converters]`): what a connector that names none
    /// uses, shown as the defaults of its converter properties.
    converters: Arc<BTreeMap<String, String>>,
}

/// What became of a config to store.
pub enum Stored {
    /// It did not validate: nothing was written; every property's result.
    Refused(Validation),
    /// Stored as `version`.
    Done(Box<StoredConnector>),
}

/// A connector as stored by a create or a config update.
pub struct StoredConnector {
    pub name: String,
    pub connector: Connector,
    pub kind: Option<PluginKind>,
    pub created: bool,
    pub warnings: Vec<String>,
}

/// How a config is written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Put {
    /// The connector must not exist yet.
    pub create: bool,
    /// Compare-and-set: only if the stored version is this.
    pub expected_version: Option<u64>,
    /// The target state a connector this creates starts in (KIP-980); `None`: running.
    pub initial: Option<TargetState>,
}

/// A request id as given, or a new one: a write always carries one.
fn request_id(given: &str) -> String {
    if given.trim().is_empty() {
        uuid::Uuid::new_v4().to_string()
    } else {
        given.trim().to_string()
    }
}

/// The name of an existing connector a request is about (a new one is checked against the
/// limits in [`Core::put`]).
pub fn require_name(name: &str) -> ApiResult<&str> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::Invalid(format!(
            "name: {}",
            crate::limits::NAME_REQUIRED
        )));
    }
    Ok(name)
}

/// Whether any connector instance or task is assigned to worker `id`.
fn assigned_to(state: &ClusterState, id: NodeId) -> bool {
    state.assignments.values().any(|a| {
        a.connector.is_some_and(|c| c.worker == Some(id))
            || a.tasks.values().any(|t| t.worker == Some(id))
    })
}

impl Core {
    pub fn new(
        node: MetaNode,
        plugins: Vec<PluginDesc>,
        target_voters: usize,
        limits: Limits,
        kafka: Option<ferry_worker::KafkaSettings>,
        converters: BTreeMap<String, String>,
    ) -> Self {
        Core {
            node,
            plugins: Arc::new(plugins),
            target_voters,
            limits: Arc::new(limits),
            kafka,
            converters: Arc::new(converters),
        }
    }

    pub fn node(&self) -> &MetaNode {
        &self.node
    }

    pub fn plugins(&self) -> &[PluginDesc] {
        &self.plugins
    }

    /// The brokers, if this node has any.
    pub fn kafka(&self) -> Option<&ferry_worker::KafkaSettings> {
        self.kafka.as_ref()
    }

    pub fn target_voters(&self) -> usize {
        self.target_voters
    }

    /// The kind of connector a config is, if its class is a plugin of this build.
    pub fn kind_of(&self, config: &ConfigMap) -> Option<PluginKind> {
        self.plugin_of(config).map(|p| p.kind())
    }

    /// The plugin a connector config names, if this build has it.
    pub fn plugin_of(&self, config: &ConfigMap) -> Option<&PluginDesc> {
        let class = config.get("connector.class")?;
        ferry_connect::plugin::find(&self.plugins, class)
    }

    /// Write a command through the leader; the state machine's rejection becomes an error.
    async fn write(&self, id: &str, command: Command) -> ApiResult<Outcome> {
        let request = Request::new(request_id(id), command);
        debug!(%request, "write");
        Ok(self.node.write_answer(request).await??)
    }

    /// A linearizable read of the state.
    pub async fn read<T>(&self, f: impl FnOnce(&ClusterState) -> T) -> ApiResult<T> {
        self.node.linearizable().await?;
        Ok(f(&self.node.state().read().state))
    }

    /// A linearizable read about one connector: `None` from `f` means it does not exist.
    pub async fn read_connector<T>(
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

    /// The config as stored for connector `name`: its `name` property is the connector's.
    fn named_config(
        name: &str,
        mut config: BTreeMap<String, String>,
    ) -> ApiResult<BTreeMap<String, String>> {
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
    fn validation(&self, config: &BTreeMap<String, String>) -> Validation {
        let mut validation = validate_on(&self.plugins, config, &self.converters);
        self.limits.check_properties(config, &mut validation);
        validation
    }

    /// Validate a config as a create would (its size, every property, the name rule), without
    /// storing anything.
    pub fn validate(&self, config: &BTreeMap<String, String>) -> ApiResult<Validation> {
        self.limits
            .check_config_size(config)
            .map_err(ApiError::Invalid)?;
        let mut validation = self.validation(config);
        if let Some(Err(problem)) = config.get("name").map(|n| self.limits.check_name(n.trim())) {
            validation.add_error(config, "name", problem);
        }
        Ok(validation)
    }

    /// Store a connector's config (a create, or an update of the version `expected_version`
    /// if given) if it validates; if it does not, nothing is written. A connector this creates
    /// starts in `initial` (running if `None`).
    pub async fn put(
        &self,
        name: &str,
        config: BTreeMap<String, String>,
        write: Put,
        id: &str,
    ) -> ApiResult<Stored> {
        let Put {
            create,
            expected_version,
            initial,
        } = write;
        let name = name.trim();
        self.limits
            .check_name(name)
            .map_err(|problem| ApiError::Invalid(format!("name: {problem}")))?;
        let config = Core::named_config(name, config)?;
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
            return Ok(Stored::Refused(validation));
        }
        let warnings: Vec<String> = validation.warnings().collect();
        for warning in &warnings {
            info!(connector = name, %warning, "config warning");
        }
        let config = ConfigMap(config);
        let kind = self.kind_of(&config);
        // Kafka Connect answers an update with the tasks of the config it replaces.
        let replaced = self
            .read(|s| s.connectors.get(name).map(|c| c.tasks.clone()))
            .await?
            .unwrap_or_default();
        let outcome = self
            .write(
                id,
                Command::PutConnector {
                    name: name.to_string(),
                    config: config.clone(),
                    create,
                    expected_version,
                    initial,
                },
            )
            .await?;
        let (version, created) = match outcome {
            Outcome::Connector { version, created } => (version, created),
            _ => (0, false),
        };
        // As stored (read linearizably, so that a follower that forwarded the write answers
        // with it), with the tasks of the config it replaced: none for a new connector.
        let now = self
            .read(|s| {
                s.connectors
                    .get(name)
                    .filter(|c| c.version == version)
                    .cloned()
            })
            .await
            .ok()
            .flatten()
            .map(|mut c| {
                c.tasks = if created { Vec::new() } else { replaced };
                c
            });
        info!(
            connector = name,
            version, created, "connector config stored"
        );
        Ok(Stored::Done(Box::new(StoredConnector {
            name: name.to_string(),
            connector: now.unwrap_or(Connector {
                config,
                version,
                ..Default::default()
            }),
            kind,
            created,
            warnings,
        })))
    }

    pub async fn delete(&self, name: &str, id: &str) -> ApiResult<()> {
        let name = require_name(name)?;
        self.write(
            id,
            Command::DeleteConnector {
                name: name.to_string(),
            },
        )
        .await?;
        info!(connector = name, "connector deleted");
        Ok(())
    }

    /// Pause, resume or stop a connector.
    pub async fn set_target(&self, name: &str, target: TargetState, id: &str) -> ApiResult<()> {
        let name = require_name(name)?;
        self.write(
            id,
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
        Ok(())
    }

    /// Restart a connector instance, and its tasks (all, or the failed ones) if asked.
    pub async fn restart(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
        id: &str,
    ) -> ApiResult<()> {
        let name = require_name(name)?;
        self.write(
            id,
            Command::Restart {
                name: name.to_string(),
                include_tasks,
                only_failed,
            },
        )
        .await?;
        Ok(())
    }

    pub async fn restart_task(&self, name: &str, task: u32, id: &str) -> ApiResult<()> {
        let name = require_name(name)?;
        self.write(
            id,
            Command::RestartTask {
                name: name.to_string(),
                task,
            },
        )
        .await?;
        Ok(())
    }

    /// The kind of an existing connector; an error if its class is not a plugin of this build.
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

    /// Whether the cluster's feature level allows commands of `format` (a new cluster raises
    /// its level within its first heartbeats; until then, and in a cluster being upgraded,
    /// things are written as before).
    async fn at_level(&self, format: u32) -> ApiResult<bool> {
        self.read(|s| s.feature_level() >= format).await
    }

    /// KIP-875 alter: `parse` reads the request's offsets for the connector's kind (sink
    /// partitions or source partitions); the state machine allows it only while STOPPED.
    pub async fn alter_offsets(
        &self,
        name: &str,
        id: &str,
        parse: impl FnOnce(PluginKind) -> ApiResult<(Vec<SinkOffset>, Vec<SourceOffset>)>,
    ) -> ApiResult<()> {
        let name = require_name(name)?;
        let (sink, source) = parse(self.connector_kind(name).await?)?;
        let supersede = self
            .at_level(ferry_meta::format::SUPERSEDING_OFFSETS)
            .await?;
        self.write(
            id,
            Command::AlterOffsets {
                name: name.to_string(),
                sink,
                source,
                supersede,
            },
        )
        .await?;
        info!(connector = %name, "offsets altered");
        Ok(())
    }

    /// KIP-875 reset: a stopped sink's consumer group goes first, as Kafka Connect deletes it
    /// (with no offsets in Raft, a sink starts from its group's); then the offsets in Raft.
    pub async fn reset_offsets(&self, name: &str, id: &str) -> ApiResult<()> {
        let name = require_name(name)?;
        let stopped = self
            .read_connector(name, |s| {
                s.connectors
                    .get(name)
                    .map(|c| c.target == TargetState::Stopped)
            })
            .await?;
        if stopped && self.connector_kind(name).await? == PluginKind::Sink {
            if let Some(kafka) = &self.kafka {
                ferry_worker::admin::delete_sink_group(kafka, name)
                    .await
                    .map_err(ApiError::Kafka)?;
            }
        }
        let supersede = self
            .at_level(ferry_meta::format::SUPERSEDING_OFFSETS)
            .await?;
        self.write(
            id,
            Command::ResetOffsets {
                name: name.to_string(),
                supersede,
            },
        )
        .await?;
        info!(connector = %name, "offsets reset");
        Ok(())
    }

    /// A connector's active topics (KIP-558), in order; none for a connector that does not
    /// exist, as Kafka Connect answers.
    pub async fn active_topics(&self, name: &str) -> ApiResult<Vec<String>> {
        self.read(|s| {
            s.topics
                .get(name)
                .map(|t| t.iter().cloned().collect())
                .unwrap_or_default()
        })
        .await
    }

    /// Forget a connector's active topics (below the format that keeps them there are none).
    pub async fn reset_topics(&self, name: &str, id: &str) -> ApiResult<()> {
        if self
            .at_level(ferry_meta::format::TOPICS_AND_LOG_LEVELS)
            .await?
        {
            self.write(
                id,
                Command::ResetTopics {
                    name: name.to_string(),
                },
            )
            .await?;
            info!(connector = %name, "active topics reset");
        }
        Ok(())
    }

    /// Set a logger's level on every node, each applying it as it learns of it (see
    /// `crate::loggers::follow_cluster_levels`).
    pub async fn set_cluster_log_level(
        &self,
        logger: &str,
        level: &str,
        id: &str,
    ) -> ApiResult<()> {
        let needs = ferry_meta::format::TOPICS_AND_LOG_LEVELS;
        let level_now = self.read(|s| s.feature_level()).await?;
        ferry_meta::format::admissible(needs, level_now).map_err(ApiError::Invalid)?;
        self.write(
            id,
            Command::SetLogLevel {
                logger: logger.to_string(),
                level: level.to_string(),
            },
        )
        .await?;
        Ok(())
    }

    /// Add a node: a learner first, promoted by the leader once caught up; registered as a
    /// worker.
    pub async fn add_node(&self, id: NodeId, api_addr: &str, raft_addr: &str) -> ApiResult<()> {
        for (field, addr) in [("api_addr", api_addr), ("raft_addr", raft_addr)] {
            if addr
                .rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            {
                return Err(ApiError::Invalid(format!(
                    "{field}: {addr:?} is not host:port"
                )));
            }
        }
        let node = FerryNode {
            api_addr: api_addr.to_string(),
            raft_addr: raft_addr.to_string(),
            ..FerryNode::default()
        };
        info!(node = id, %node, "add-node requested");
        self.node
            .propose(Proposal::AddNode {
                id,
                node: node.clone(),
                target_voters: self.target_voters,
            })
            .await?;
        // A node retired by remove-node comes back as a worker only this way.
        let readmit = self.at_level(ferry_meta::format::REST_API).await?;
        self.write("", Command::PutWorker { id, node, readmit })
            .await?;
        Ok(())
    }

    /// Remove a node: first its work moves away, while it is still a member (its running
    /// tasks see their assignments go and stop; their final commits are fenced) — removed
    /// first, it would keep running tasks that no longer saw the cluster's state.
    pub async fn remove_node(&self, id: NodeId) -> ApiResult<()> {
        info!(node = id, "remove-node requested");
        // Retired, its own registration (it may be starting) cannot make it a worker again.
        let retire = self.at_level(ferry_meta::format::REST_API).await?;
        self.write("", Command::RemoveWorker { id, retire }).await?;
        let started = Instant::now();
        while self.read(|s| assigned_to(s, id)).await? {
            if started.elapsed() > TASKS_MOVE_TIMEOUT {
                return Err(ApiError::Meta(ferry_meta::MetaError::Unavailable {
                    waited_ms: started.elapsed().as_millis(),
                    last: format!("node {id} still has tasks assigned: retry remove-node"),
                }));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.node.propose(Proposal::RemoveNode { id }).await?;
        Ok(())
    }

    /// A backup of the state as of a linearizable read.
    pub async fn backup(&self) -> ApiResult<ferry_meta::backup::Backup> {
        self.node.linearizable().await?;
        let backup = {
            let applied = self.node.state().read();
            ferry_meta::backup::Backup::of(&applied.state, applied.last_applied.map(|l| l.index))
        };
        info!(applied_index = ?backup.applied_index, connectors = backup.state.connectors.len(), "backup taken");
        Ok(backup)
    }

    /// Restore a backup (in one Raft entry) into a cluster without connectors.
    pub async fn restore(&self, data: &[u8], id: &str) -> ApiResult<Restored> {
        let backup = ferry_meta::backup::Backup::decode(data).map_err(ApiError::Invalid)?;
        let restored = Restored {
            connectors: backup.state.connectors.len(),
            from_cluster_id: backup.cluster_id,
            from_applied_index: backup.applied_index,
        };
        self.write(
            id,
            Command::RestoreState {
                state: Box::new(backup.state),
            },
        )
        .await?;
        info!(connectors = restored.connectors, from = ?restored.from_cluster_id, "backup restored");
        Ok(restored)
    }
}

/// What a restore brought back.
pub struct Restored {
    pub connectors: usize,
    pub from_cluster_id: Option<String>,
    pub from_applied_index: Option<u64>,
}
