//! Applying a request to the state: pure and deterministic.

use std::collections::BTreeMap;

use super::command::*;
use super::model::*;
use crate::redact::ConfigMap;
use crate::NodeId;

impl ClusterState {
    /// The cluster's feature level (see `crate::format`).
    pub fn feature_level(&self) -> u32 {
        self.feature_level.max(crate::format::BASE_FORMAT)
    }

    /// Apply one request. A request id seen recently gets its first answer again and changes
    /// nothing.
    pub fn apply(&mut self, request: &Request) -> Response {
        if let Some(id) = &request.id {
            if let Some(answer) = self.requests.get(id) {
                return answer.clone();
            }
        }
        let answer = self.apply_command(&request.command);
        if let Some(id) = &request.id {
            self.remember(id.clone(), answer.clone());
        }
        answer
    }

    fn remember(&mut self, id: String, answer: Response) {
        self.requests.insert(id.clone(), answer);
        self.request_order.push_back(id);
        while self.request_order.len() > RECENT_REQUESTS {
            if let Some(old) = self.request_order.pop_front() {
                self.requests.remove(&old);
            }
        }
    }

    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    fn connector(&self, name: &str) -> Result<&Connector, Rejection> {
        self.connectors
            .get(name)
            .ok_or_else(|| Rejection::NotFound {
                name: name.to_string(),
            })
    }

    fn apply_command(&mut self, command: &Command) -> Response {
        match command {
            Command::SetFeatureLevel { level } => {
                self.feature_level = self.feature_level.max(*level);
                Ok(Outcome::Done)
            }
            Command::Unsupported { format, .. } => Err(Rejection::Unsupported { format: *format }),
            Command::RestoreState { state } => self.restore(state),
            Command::SetClusterId { id } => self.set_cluster_id(id),
            Command::PutWorker { id, node, readmit } => {
                // A retired worker's own registration (racing with its removal) is ignored.
                if *readmit || !self.retired.contains(id) {
                    self.retired.remove(id);
                    self.workers.insert(*id, node.clone());
                }
                Ok(Outcome::Done)
            }
            Command::RecordTopics { name, topics } => {
                if self.connectors.contains_key(name) {
                    self.topics
                        .entry(name.clone())
                        .or_default()
                        .extend(topics.iter().cloned());
                }
                Ok(Outcome::Done)
            }
            Command::ResetTopics { name } => {
                self.topics.remove(name);
                Ok(Outcome::Done)
            }
            Command::SetLogLevel { logger, level } => {
                let seq = self.log_levels.values().map(|l| l.seq).max().unwrap_or(0) + 1;
                self.log_levels.insert(
                    logger.clone(),
                    ClusterLogLevel {
                        level: level.clone(),
                        seq,
                    },
                );
                Ok(Outcome::Done)
            }
            Command::RemoveWorker { id, retire } => {
                self.workers.remove(id);
                if *retire {
                    self.retired.insert(*id);
                }
                Ok(Outcome::Done)
            }
            Command::PutConnector {
                name,
                config,
                create,
                expected_version,
                initial,
            } => self.put_connector(name, config, *create, *expected_version, *initial),
            Command::DeleteConnector { name } => self.delete_connector(name),
            Command::SetTargetState { name, target } => self.set_target(name, *target),
            Command::Restart {
                name,
                include_tasks,
                only_failed,
            } => self.restart(name, *include_tasks, *only_failed),
            Command::RestartTask { name, task } => self.restart_task(name, *task),
            Command::PutTaskConfigs {
                name,
                version,
                configs,
                shared,
            } => self.put_task_configs(name, *version, shared, configs),
            Command::Assign { name, task, worker } => self.assign(name, *task, *worker),
            Command::Revoke {
                name,
                task,
                generation,
            } => self.revoke(name, *task, *generation),
            Command::Release {
                name,
                task,
                generation,
            } => self.release(name, *task, *generation),
            Command::ReportStatus {
                name,
                task,
                generation,
                state,
                worker,
                trace,
            } => self.report_status(name, *task, *generation, *state, *worker, trace),
            Command::CommitSinkOffsets {
                name,
                task,
                generation,
                offsets,
            } => self.commit_sink_offsets(name, *task, *generation, offsets),
            Command::CommitSourceOffsets {
                name,
                task,
                generation,
                offsets,
            } => self.commit_source_offsets(name, *task, *generation, offsets),
            Command::CommitSinkRange {
                name,
                task,
                generation,
                topic,
                partition,
                start,
                next,
                payload,
            } => {
                let range = SinkRange {
                    topic,
                    partition: *partition,
                    start: *start,
                    next: *next,
                    payload,
                };
                self.commit_sink_range(name, *task, *generation, range)
            }
            Command::SetSinkPartitions { name, partitions } => {
                self.set_sink_partitions(name, partitions)
            }
            Command::AlterOffsets {
                name,
                sink,
                source,
                supersede,
            } => self.alter_offsets(name, sink, source, *supersede),
            Command::ResetOffsets { name, supersede } => self.reset_offsets(name, *supersede),
        }
    }

    /// A backup restored: only into a cluster without connectors.
    fn restore(&mut self, state: &ClusterState) -> Response {
        if !self.connectors.is_empty() {
            return Err(Rejection::NotEmpty {
                connectors: self.connectors.len(),
            });
        }
        *self = crate::backup::restored(self, state);
        Ok(Outcome::Done)
    }

    /// The cluster id is set once.
    fn set_cluster_id(&mut self, id: &str) -> Response {
        match &self.cluster_id {
            Some(current) if current != id => Err(Rejection::ClusterIdSet {
                current: current.clone(),
            }),
            _ => {
                self.cluster_id = Some(id.to_string());
                Ok(Outcome::Done)
            }
        }
    }

    /// A connector and everything about it.
    fn delete_connector(&mut self, name: &str) -> Response {
        self.connector(name)?;
        self.connectors.remove(name);
        self.assignments.remove(name);
        self.status.remove(name);
        self.offsets.remove(name);
        self.sink_partitions.remove(name);
        self.fenced.remove(name);
        self.topics.remove(name);
        Ok(Outcome::Done)
    }

    fn set_target(&mut self, name: &str, target: TargetState) -> Response {
        let connector = self
            .connectors
            .get_mut(name)
            .ok_or_else(|| Rejection::NotFound {
                name: name.to_string(),
            })?;
        connector.target = target;
        Ok(Outcome::Done)
    }

    fn restart_task(&mut self, name: &str, task: u32) -> Response {
        self.known_task(name, task)?;
        self.restart_instance(name, Some(task));
        Ok(Outcome::Restarted {
            connector: false,
            tasks: vec![task],
        })
    }

    /// A task of the connector's current task configs (`Err` names it otherwise).
    fn known_task(&self, name: &str, task: u32) -> Result<(), Rejection> {
        let connector = self.connector(name)?;
        if task as usize >= connector.tasks.len() {
            return Err(Rejection::UnknownTask {
                name: name.to_string(),
                task,
            });
        }
        Ok(())
    }

    /// A unit (the connector instance, or a task) to a worker, under a new generation: its
    /// status is UNASSIGNED until the worker reports.
    fn assign(&mut self, name: &str, task: Option<u32>, worker: Option<NodeId>) -> Response {
        self.connector(name)?;
        if let Some(task) = task {
            self.known_task(name, task)?;
        }
        let generation = self.next_generation();
        let assignment = Assignment {
            worker,
            generation,
            revoked: false,
            released_by: None,
        };
        let entry = self.assignments.entry(name.to_string()).or_default();
        match task {
            Some(task) => {
                entry.tasks.insert(task, assignment);
            }
            None => entry.connector = Some(assignment),
        }
        *self.status_mut(name, task) = Status {
            state: RunState::Unassigned,
            worker,
            trace: None,
            generation,
        };
        Ok(Outcome::Assigned { generation })
    }

    /// A unit to move: its worker stops it and makes its final commit.
    fn revoke(&mut self, name: &str, task: Option<u32>, generation: u64) -> Response {
        self.check_generation(name, task, generation)?;
        if let Some(a) = self.assignment_mut(name, task) {
            a.revoked = true;
        }
        Ok(Outcome::Done)
    }

    /// A unit its worker stopped (its final commit is in): unassigned, to be assigned afresh.
    fn release(&mut self, name: &str, task: Option<u32>, generation: u64) -> Response {
        self.check_generation(name, task, generation)?;
        if let Some(a) = self.assignment_mut(name, task) {
            a.released_by = a.worker.take();
            a.revoked = false;
        }
        let status = self.status_mut(name, task);
        status.state = RunState::Unassigned;
        status.worker = None;
        Ok(Outcome::Done)
    }

    fn report_status(
        &mut self,
        name: &str,
        task: Option<u32>,
        generation: u64,
        state: RunState,
        worker: Option<NodeId>,
        trace: &Option<String>,
    ) -> Response {
        self.check_generation(name, task, generation)?;
        *self.status_mut(name, task) = Status {
            state,
            worker,
            trace: trace.as_ref().map(|t| cap_trace(t)),
            generation,
        };
        Ok(Outcome::Done)
    }

    fn commit_sink_offsets(
        &mut self,
        name: &str,
        task: u32,
        generation: u64,
        offsets: &[SinkOffset],
    ) -> Response {
        self.check_commit(name, task, generation)?;
        self.check_owned(
            name,
            task,
            generation,
            offsets.iter().map(|o| (o.topic.as_str(), o.partition)),
        )?;
        let stored = self.offsets.entry(name.to_string()).or_default();
        offsets.iter().for_each(|o| stored.set_sink(o));
        Ok(Outcome::Done)
    }

    fn commit_source_offsets(
        &mut self,
        name: &str,
        task: u32,
        generation: u64,
        offsets: &[SourceOffset],
    ) -> Response {
        self.check_commit(name, task, generation)?;
        let stored = self.offsets.entry(name.to_string()).or_default();
        offsets.iter().for_each(|o| stored.set_source(o));
        Ok(Outcome::Done)
    }

    /// An exactly-once sink's commit of one partition: compare-and-set on its next offset.
    fn commit_sink_range(
        &mut self,
        name: &str,
        task: u32,
        generation: u64,
        range: SinkRange<'_>,
    ) -> Response {
        self.check_commit(name, task, generation)?;
        self.check_owned(
            name,
            task,
            generation,
            std::iter::once((range.topic, range.partition)),
        )?;
        let stored = self.offsets.entry(name.to_string()).or_default();
        let recorded = stored.next_offset(range.topic, range.partition);
        if recorded.is_some_and(|r| r != range.start) {
            return Ok(Outcome::Conflict { recorded });
        }
        stored.set_sink(&SinkOffset {
            topic: range.topic.to_string(),
            partition: range.partition,
            offset: Some(range.next),
        });
        stored
            .commits
            .entry(range.topic.to_string())
            .or_default()
            .insert(range.partition, range.payload.clone());
        Ok(Outcome::Done)
    }

    /// KIP-875 alter, while STOPPED; marked (format 5) so that it wins over a sink's own.
    fn alter_offsets(
        &mut self,
        name: &str,
        sink: &[SinkOffset],
        source: &[SourceOffset],
        supersede: bool,
    ) -> Response {
        self.require_stopped(name)?;
        let generation = self.generation;
        let stored = self.offsets.entry(name.to_string()).or_default();
        sink.iter().for_each(|o| stored.set_sink(o));
        source.iter().for_each(|o| stored.set_source(o));
        if supersede {
            stored.altered_at = Some(generation);
        }
        if stored.is_empty() {
            self.offsets.remove(name);
        }
        Ok(Outcome::Done)
    }

    /// KIP-875 reset, while STOPPED; marked as `alter_offsets` is.
    fn reset_offsets(&mut self, name: &str, supersede: bool) -> Response {
        self.require_stopped(name)?;
        self.offsets.remove(name);
        if supersede {
            let marked = Offsets {
                altered_at: Some(self.generation),
                ..Offsets::default()
            };
            self.offsets.insert(name.to_string(), marked);
        }
        Ok(Outcome::Done)
    }

    fn put_connector(
        &mut self,
        name: &str,
        config: &ConfigMap,
        create: bool,
        expected_version: Option<u64>,
        initial: Option<TargetState>,
    ) -> Response {
        let current = self.connectors.get(name).map(|c| c.version);
        if create && current.is_some() {
            return Err(Rejection::AlreadyExists {
                name: name.to_string(),
            });
        }
        if let Some(expected) = expected_version {
            let actual = current.unwrap_or(0);
            if actual != expected {
                return Err(Rejection::VersionMismatch {
                    name: name.to_string(),
                    expected,
                    actual,
                });
            }
        }
        let connector = self.connectors.entry(name.to_string()).or_default();
        if current.is_some() && connector.config == *config {
            // Kafka Connect answers an unchanged PUT without bumping anything.
            return Ok(Outcome::Connector {
                version: connector.version,
                created: false,
            });
        }
        connector.config = config.clone();
        connector.version += 1;
        if let (None, Some(target)) = (current, initial) {
            connector.target = target;
        }
        let version = connector.version;
        self.status.entry(name.to_string()).or_default();
        Ok(Outcome::Connector {
            version,
            created: current.is_none(),
        })
    }

    fn restart(&mut self, name: &str, include_tasks: bool, only_failed: bool) -> Response {
        let connector = self.connector(name)?;
        let task_ids: Vec<u32> = (0..connector.tasks.len() as u32).collect();
        let failed = |status: Option<&Status>| status.is_some_and(|s| s.state == RunState::Failed);
        let status = self.status.get(name);
        let restart_connector = !only_failed || failed(status.map(|s| &s.connector));
        let tasks: Vec<u32> = if include_tasks {
            task_ids
                .into_iter()
                .filter(|t| !only_failed || failed(status.and_then(|s| s.tasks.get(t))))
                .collect()
        } else {
            Vec::new()
        };
        if restart_connector {
            self.restart_instance(name, None);
        }
        for task in &tasks {
            self.restart_instance(name, Some(*task));
        }
        Ok(Outcome::Restarted {
            connector: restart_connector,
            tasks,
        })
    }

    /// A restart bumps the generation (the old run is fenced) and marks the status RESTARTING.
    fn restart_instance(&mut self, name: &str, task: Option<u32>) {
        let generation = self.next_generation();
        let entry = self.assignments.entry(name.to_string()).or_default();
        let slot = match task {
            Some(task) => entry.tasks.get_mut(&task),
            None => entry.connector.as_mut(),
        };
        let worker = match slot {
            Some(assignment) => {
                assignment.generation = generation;
                assignment.worker
            }
            None => {
                let assignment = Assignment {
                    worker: None,
                    generation,
                    revoked: false,
                    released_by: None,
                };
                match task {
                    Some(task) => {
                        entry.tasks.insert(task, assignment);
                    }
                    None => entry.connector = Some(assignment),
                }
                None
            }
        };
        *self.status_mut(name, task) = Status {
            state: RunState::Restarting,
            worker,
            trace: None,
            generation,
        };
    }

    fn put_task_configs(
        &mut self,
        name: &str,
        version: u64,
        shared: &ConfigMap,
        configs: &[ConfigMap],
    ) -> Response {
        let connector = self.connector(name)?;
        if connector.version != version {
            return Err(Rejection::StaleTaskConfigs {
                name: name.to_string(),
                current: connector.version,
                got: version,
            });
        }
        let count = configs.len() as u32;
        // A task changed if its whole config did, however it is split.
        let same_split = connector.task_shared == *shared;
        let changed: Vec<u32> = (0..count)
            .filter(|t| {
                let (t, own) = (*t as usize, &configs[*t as usize]);
                if same_split {
                    connector.tasks.get(t) != Some(own)
                } else {
                    connector.task_config(t) != Some(crate::tasks::merged(shared, own))
                }
            })
            .collect();
        if let Some(connector) = self.connectors.get_mut(name) {
            connector.tasks = configs.to_vec();
            connector.task_shared = shared.clone();
            connector.tasks_version = version;
        }
        // Tasks beyond the new count are gone; changed tasks are fenced by a new generation.
        if let Some(entry) = self.assignments.get_mut(name) {
            entry.tasks.retain(|t, _| *t < count);
        }
        if let Some(status) = self.status.get_mut(name) {
            status.tasks.retain(|t, _| *t < count);
        }
        if let Some(partitions) = self.sink_partitions.get_mut(name) {
            partitions.retain(|t, _| *t < count);
        }
        for task in changed {
            self.bump_task(name, task);
        }
        Ok(Outcome::Done)
    }

    fn set_sink_partitions(
        &mut self,
        name: &str,
        partitions: &BTreeMap<u32, Vec<TopicPartitionRef>>,
    ) -> Response {
        let connector = self.connector(name)?;
        if let Some(task) = partitions
            .keys()
            .find(|t| **t as usize >= connector.tasks.len())
        {
            return Err(Rejection::UnknownTask {
                name: name.to_string(),
                task: *task,
            });
        }
        let old = self.sink_partitions.get(name).cloned().unwrap_or_default();
        let changed: std::collections::BTreeSet<u32> = partitions
            .keys()
            .chain(old.keys())
            .copied()
            .filter(|t| old.get(t) != partitions.get(t))
            .collect();
        for task in changed {
            self.bump_task(name, task);
        }
        self.sink_partitions
            .insert(name.to_string(), partitions.clone());
        Ok(Outcome::Done)
    }

    /// A new generation for an assigned task: its current run is fenced.
    fn bump_task(&mut self, name: &str, task: u32) {
        let assigned = self
            .assignments
            .get(name)
            .is_some_and(|a| a.tasks.contains_key(&task));
        if assigned {
            let generation = self.next_generation();
            if let Some(a) = self
                .assignments
                .get_mut(name)
                .and_then(|a| a.tasks.get_mut(&task))
            {
                a.generation = generation;
            }
        }
    }

    /// The generation check of an offset commit; a stale one is counted in `fenced`.
    fn check_commit(&mut self, name: &str, task: u32, generation: u64) -> Result<(), Rejection> {
        let checked = self.check_generation(name, Some(task), generation);
        if let Err(Rejection::StaleGeneration { .. }) = &checked {
            self.count_fenced(name, task, generation);
        }
        checked
    }

    /// A sink task commits offsets only for the partitions the scheduler gave it. The
    /// generation already implies it (a change of a task's partitions fences its run); this
    /// states it where the offsets are written, and a refusal is counted as fenced.
    fn check_owned<'a>(
        &mut self,
        name: &str,
        task: u32,
        generation: u64,
        mut partitions: impl Iterator<Item = (&'a str, i32)>,
    ) -> Result<(), Rejection> {
        let owned = self.sink_partitions.get(name).and_then(|p| p.get(&task));
        let stray = partitions.find(|(topic, partition)| {
            !owned.is_some_and(|o| {
                o.iter()
                    .any(|tp| tp.topic == *topic && tp.partition == *partition)
            })
        });
        match stray {
            None => Ok(()),
            Some((topic, partition)) => {
                self.count_fenced(name, task, generation);
                Err(Rejection::NotOwned {
                    name: name.to_string(),
                    task,
                    topic: topic.to_string(),
                    partition,
                })
            }
        }
    }

    fn count_fenced(&mut self, name: &str, task: u32, generation: u64) {
        let fenced = self
            .fenced
            .entry(name.to_string())
            .or_default()
            .entry(task)
            .or_default();
        fenced.count += 1;
        fenced.last_generation = generation;
    }

    fn check_generation(&self, name: &str, task: Option<u32>, got: u64) -> Result<(), Rejection> {
        self.connector(name)?;
        let current = self.assignments.get(name).and_then(|a| match task {
            Some(task) => a.tasks.get(&task),
            None => a.connector.as_ref(),
        });
        match current {
            Some(a) if a.generation == got => Ok(()),
            other => Err(Rejection::StaleGeneration {
                name: name.to_string(),
                task,
                current: other.map_or(0, |a| a.generation),
                got,
            }),
        }
    }

    fn require_stopped(&self, name: &str) -> Result<(), Rejection> {
        let connector = self.connector(name)?;
        if connector.target != TargetState::Stopped {
            return Err(Rejection::NotStopped {
                name: name.to_string(),
                state: connector.target.as_str().to_string(),
            });
        }
        Ok(())
    }

    fn assignment_mut(&mut self, name: &str, task: Option<u32>) -> Option<&mut Assignment> {
        let entry = self.assignments.get_mut(name)?;
        match task {
            Some(task) => entry.tasks.get_mut(&task),
            None => entry.connector.as_mut(),
        }
    }

    fn status_mut(&mut self, name: &str, task: Option<u32>) -> &mut Status {
        let entry = self.status.entry(name.to_string()).or_default();
        match task {
            Some(task) => entry.tasks.entry(task).or_default(),
            None => &mut entry.connector,
        }
    }
}

/// What a `CommitSinkRange` commits for its partition.
struct SinkRange<'a> {
    topic: &'a str,
    partition: i32,
    /// The next offset the commit expects recorded (none recorded: any).
    start: i64,
    next: i64,
    payload: &'a BTreeMap<String, String>,
}
