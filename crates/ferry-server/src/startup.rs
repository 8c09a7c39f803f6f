//! Start a node: storage, listeners, and membership of the cluster its static peers form.
//!
//! Bootstrap happens once, in any boot order: only the peer with the lowest id may initialize
//! the cluster, and only when it can reach every other static peer and none of them belongs to
//! a cluster yet. A node whose data directory was wiped therefore finds its peers initialized
//! and waits for the leader to bring it back (or for `ferry cluster add-node`), and never starts
//! a second cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use ferry_meta::peer::PeerService;
use ferry_meta::state::Command;
use ferry_meta::{FerryNode, MetaNode, Request};
use ferry_proto::management::management_server::ManagementServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;
use tracing::{error, info, warn};

use crate::api::Api;
use crate::bootstrap::{decide, initializer, Decision};
use crate::config::ClusterConfig;
use crate::manage::Core;
use crate::plugins::plugins;
use crate::scheduler;
use ferry_connect::task::WallClock;
use ferry_worker::lease::Lease;
use ferry_worker::metrics::WorkerMetrics;
use ferry_worker::{LeaseSettings, Runtime, RuntimeSettings};
use std::sync::Arc;

/// How long a bootstrap probe of a peer may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a stopping leader waits for what it released to be assigned elsewhere.
const HANDOVER: Duration = Duration::from_secs(2);
/// How long a stopping node waits for clients and peers to close their connections.
const SERVER_DRAIN: Duration = Duration::from_secs(2);
/// How long the scheduler, healer and lease loops have to end once the units are handed over.
const LOOP_STOP: Duration = Duration::from_secs(1);

/// Run a node until `shutdown` turns true. Returns an error if it cannot start.
pub async fn run(
    config: ClusterConfig,
    loggers: crate::loggers::Loggers,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data_dir {}", config.data_dir.display()))?;
    if let Some(version) = config.raft.test_format_version {
        ferry_meta::format::understand_only(version);
        warn!(
            version,
            "test only: understanding formats of the replicated state up to {version}"
        );
    }
    let workers = Arc::new(scheduler::liveness::WorkerTable::default());
    let node = MetaNode::start(
        config.node_id,
        &config.data_dir.join("raft"),
        config.raft_config(),
        ferry_meta::NodeOptions {
            deadline: config.request_timeout(),
            quorum_window: Duration::from_millis(config.worker.timeout_ms / 2),
            max_entry_bytes: config.limits.max_entry_bytes,
            overrides: config.peer_overrides(),
            storage_fault_file: config.raft.test_storage_fault_file.clone(),
            heartbeats: workers.clone(),
        },
    )
    .await
    .context("cannot start the control plane")?;
    let raft_watch = tokio::spawn(crate::fatal::watch_raft(node.clone(), shutdown.clone()));
    check_cluster_id(&config.data_dir, &node)?;
    let me = FerryNode {
        api_addr: config.api_addr.clone(),
        raft_addr: config.raft_addr.clone(),
        incarnation: node.boot().incarnation.clone(),
        ..FerryNode::default()
    };
    let rest_url = config.rest_advertised();

    let peer_listener = TcpListener::bind(&config.raft_addr)
        .await
        .with_context(|| format!("cannot listen on raft_addr {}", config.raft_addr))?;
    let api_listener = TcpListener::bind(&config.api_addr)
        .await
        .with_context(|| format!("cannot listen on api_addr {}", config.api_addr))?;
    // Kafka Connect's REST API: its listeners, `/admin/*` where admin.listeners says.
    let mut rest_listeners = Vec::new();
    let mut admin_on = crate::rest::AdminOn::Main;
    let mut cors = None;
    if let Some(rest) = &config.rest {
        for addr in rest.addresses().map_err(anyhow::Error::msg)? {
            let listener = TcpListener::bind(&addr)
                .await
                .with_context(|| format!("cannot listen on rest.listeners {addr}"))?;
            rest_listeners.push((addr, listener, false));
        }
        if let Some(admin) = rest.admin_addresses().map_err(anyhow::Error::msg)? {
            admin_on = match admin.is_empty() {
                true => crate::rest::AdminOn::Nowhere,
                false => crate::rest::AdminOn::Own,
            };
            for addr in admin {
                let listener = TcpListener::bind(&addr)
                    .await
                    .with_context(|| format!("cannot listen on rest.admin_listeners {addr}"))?;
                rest_listeners.push((addr, listener, true));
            }
        }
        cors = crate::rest::cors(
            rest.access_control_allow_origin.as_deref(),
            rest.access_control_allow_methods.as_deref(),
        )
        .map_err(anyhow::Error::msg)?;
    }

    // The peer service outlives the worker runtime: until its tasks have made their final
    // commits, this node stays a working Raft member (the leader's replication to it, its
    // votes), so that stopping it does not stall the commits it is waiting on.
    let (peer_stop_tx, peer_stop) = watch::channel(false);
    let peer_server = tonic::transport::Server::builder()
        .add_service(PeerService::server(node.clone()))
        .serve_with_incoming_shutdown(incoming(peer_listener), signalled(peer_stop));
    let plugins = Arc::new(plugins());
    let kafka = config.kafka.clone();
    let lease_state = Arc::new(Lease::new(LeaseSettings {
        heartbeat_interval: Duration::from_millis(config.worker.heartbeat_interval_ms),
        worker_timeout: Duration::from_millis(config.worker.timeout_ms),
        disabled: config.worker.test_disable_lease,
    }));
    let mut metrics = WorkerMetrics::new(
        node.state().clone(),
        node.id(),
        plugins.clone(),
        config.metrics,
    );
    metrics.register_collector(Box::new(crate::raft_metrics::RaftSeries::new(node.clone())));
    metrics.register_collector(Box::new(ferry_worker::lease::LeaseSeries(
        lease_state.clone(),
    )));
    let failover_times = scheduler::failover::histogram();
    metrics.register(
        "ferry_failover_seconds",
        "On the leader: the time from a gone worker's last heartbeat until every unit it had runs again elsewhere.",
        failover_times.clone(),
    );
    let metrics = Arc::new(metrics);
    let core = Core::new(
        node.clone(),
        plugins.as_ref().clone(),
        config.target_voters,
        config.limits.clone(),
        kafka.clone(),
        config.worker.converters.clone(),
    );
    tokio::spawn(crate::loggers::follow_cluster_levels(
        loggers.clone(),
        node.state().clone(),
        shutdown.clone(),
    ));
    let routers = crate::rest::routers(
        core.clone(),
        loggers,
        metrics.clone(),
        crate::rest::Options {
            admin: admin_on,
            cors,
            topic_tracking: crate::rest::TopicTracking {
                enable: config.worker.topic_tracking_enable,
                allow_reset: config.worker.topic_tracking_allow_reset,
            },
            shutdown: shutdown.clone(),
        },
    );
    let rest_tasks: Vec<JoinHandle<std::io::Result<()>>> = rest_listeners
        .into_iter()
        .map(|(addr, listener, admin)| {
            let router = if admin {
                info!(rest = %addr, "serving Kafka Connect's REST API's /admin");
                routers.admin.clone()
            } else {
                info!(rest = %addr, "serving Kafka Connect's REST API");
                routers.main.clone()
            };
            tokio::spawn(crate::rest::serve(listener, router, shutdown.clone()))
        })
        .collect();
    let api = Api::new(core, metrics.clone());
    let api_server = tonic::transport::Server::builder()
        .add_service(
            // A request may be as large as the largest entry it can make (a config, a backup
            // to restore), and a little more: beyond that it is refused by the limits' own
            // checks, with their messages, rather than by gRPC's 4 MiB default.
            ManagementServer::new(api)
                .max_decoding_message_size(config.limits.max_entry_bytes + 1024 * 1024),
        )
        .serve_with_incoming_shutdown(incoming(api_listener), signalled(shutdown.clone()));
    let peer_task = tokio::spawn(peer_server);
    let api_task = tokio::spawn(api_server);
    info!(
        node = config.node_id,
        api = %config.api_addr,
        raft = %config.raft_addr,
        data_dir = %config.data_dir.display(),
        "serving"
    );

    let graceful = Duration::from_millis(config.worker.task_shutdown_graceful_timeout_ms);
    let timing = scheduler::Timing {
        heartbeat_interval: Duration::from_millis(config.worker.heartbeat_interval_ms),
        worker_timeout: Duration::from_millis(config.worker.timeout_ms),
        rebalance_delay: Duration::from_millis(config.worker.rebalance_delay_ms),
        graceful_shutdown: graceful,
    };
    // The scheduler, the healer and the lease outlive the runtime: while this node's units
    // stop, commit and release themselves, it still heartbeats (their commits need the lease)
    // and, if it leads, still assigns what they released to the other workers.
    let (after_units_tx, after_units) = watch::channel(false);
    let scheduler = tokio::spawn(scheduler::run(
        node.clone(),
        workers,
        plugins.clone(),
        kafka.clone(),
        timing,
        failover_times,
        after_units.clone(),
    ));

    let healer = tokio::spawn(ferry_meta::heal::run(
        node.clone(),
        config.heal_settings(),
        after_units.clone(),
    ));

    let (lease_tx, lease_rx) = watch::channel(None);
    let lease = tokio::spawn(ferry_worker::lease::run(
        node.clone(),
        lease_state.clone(),
        lease_tx,
        after_units.clone(),
    ));
    let runtime = tokio::spawn(
        Runtime::new(
            node.clone(),
            plugins.clone(),
            RuntimeSettings {
                kafka: kafka.clone(),
                offset_flush_interval: Duration::from_millis(
                    config.worker.offset_flush_interval_ms,
                ),
                commit_consumer_group: config.worker.commit_consumer_group,
                converters: config.worker.converters.clone(),
                offset_storage_topic: config.worker.offset_storage_topic.clone(),
                topic_tracking: config.worker.topic_tracking_enable,
                test_panic_connector: config.worker.test_panic_connector.clone(),
                clock: WallClock::ahead(config.worker.test_clock_ahead_ms),
            },
            lease_state,
            metrics,
        )
        .run(lease_rx, shutdown.clone(), graceful),
    );

    let boot = {
        let (node, config, shutdown) = (node.clone(), config.clone(), shutdown.clone());
        tokio::spawn(async move {
            if let Err(e) = bootstrap(&node, &config, shutdown.clone()).await {
                error!(error = %format!("{e:#}"), "bootstrap failed");
            }
            if let Err(e) = register(&node, &config, &me, &rest_url, shutdown).await {
                error!(error = %format!("{e:#}"), "registration failed");
            }
        })
    };

    let _ = shutdown.wait_for(|stop| *stop).await;
    info!("shutting down");
    boot.abort();
    let _ = runtime.await;
    handed_over(&node, HANDOVER).await;
    after_units_tx.send_replace(true);
    // Each ends at its next turn, unless a write waits for a quorum that is gone (the last
    // node of a cluster stopping): then it is abandoned.
    for (what, task) in [
        ("scheduler", scheduler),
        ("healer", healer),
        ("lease", lease),
    ] {
        stop_within(what, task, LOOP_STOP).await;
    }
    peer_stop_tx.send_replace(true);
    raft_watch.abort();
    for (what, task) in [("peer server", peer_task), ("api server", api_task)] {
        // A graceful stop waits for open connections to close; a client holding one (a status
        // watch, an idle channel) must not keep the node from stopping.
        if let Some(Err(e)) = stop_within(what, task, SERVER_DRAIN).await {
            warn!(server = what, error = %e, "server stopped with an error");
        }
    }
    for task in rest_tasks {
        if let Some(Err(e)) = stop_within("rest server", task, SERVER_DRAIN).await {
            warn!(server = "rest", error = %e, "server stopped with an error");
        }
    }
    match tokio::time::timeout(SERVER_DRAIN, node.shutdown()).await {
        Ok(stopped) => stopped.context("raft shutdown")?,
        Err(_) => warn!("raft did not stop in time: leaving it"),
    }
    info!("stopped");
    Ok(())
}

/// Wait at most `bound` for a task to end, then abort it. `None` if it failed or was aborted.
async fn stop_within<T>(what: &str, mut task: JoinHandle<T>, bound: Duration) -> Option<T> {
    match tokio::time::timeout(bound, &mut task).await {
        Ok(Ok(out)) => Some(out),
        Ok(Err(e)) => {
            warn!(task = what, error = %e, "task failed");
            None
        }
        Err(_) => {
            warn!(
                task = what,
                waited_ms = bound.as_millis() as u64,
                "still running after its time to stop: abandoned"
            );
            task.abort();
            None
        }
    }
}

/// Accepted connections with Nagle's algorithm off: Raft and API messages are small and
/// latency-bound (with it on, delayed ACKs add ~40 ms to some round trips).
fn incoming(
    listener: TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    TcpListenerStream::new(listener).map(|conn| {
        let conn = conn?;
        conn.set_nodelay(true)?;
        Ok(conn)
    })
}

async fn signalled(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// On a leader that is stopping: wait, at most `bound`, until its scheduler has assigned what
/// this node released to other workers (a successor would first wait a worker timeout).
async fn handed_over(node: &MetaNode, bound: Duration) {
    let me = node.id();
    let mut applied = node.state().applied();
    let waited = tokio::time::timeout(bound, async {
        loop {
            let placed = {
                let state = &node.state().read().state;
                state.assignments.values().all(|a| {
                    a.connector
                        .iter()
                        .chain(a.tasks.values())
                        .all(|a| a.worker.is_some_and(|w| w != me))
                })
            };
            if node.leader() != Some(me) || placed {
                return;
            }
            if applied.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    if waited.is_err() {
        warn!("stopping before every released unit was assigned elsewhere");
    }
}

/// Sleep, or return `false` early if the node is shutting down.
async fn pause(shutdown: &mut watch::Receiver<bool>, time: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(time) => true,
        _ = shutdown.wait_for(|stop| *stop) => false,
    }
}

async fn bootstrap(
    node: &MetaNode,
    config: &ClusterConfig,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    if node.raft().is_initialized().await? {
        info!("this node belongs to a cluster already");
        return Ok(());
    }
    let peer_ids: Vec<u64> = config.peers.iter().map(|p| p.id).collect();
    let mut last_missing = Vec::new();
    loop {
        if node.raft().is_initialized().await? {
            info!("this node was added to a cluster");
            return Ok(());
        }
        let mut answers = Vec::new();
        // Only the initializer needs its peers' answers.
        let others = config
            .peers
            .iter()
            .filter(|p| p.id != config.node_id && initializer(&peer_ids) == Some(config.node_id));
        for peer in others {
            let client = node.peer(peer.id, &peer.raft_addr)?;
            answers.push((peer.id, client.probe(None, PROBE_TIMEOUT).await.ok()));
        }
        match decide(config.node_id, &peer_ids, &answers) {
            Decision::NotInitializer { initializer } => {
                info!(
                    initializer,
                    "waiting for the peer with the lowest id to bootstrap the cluster, or for a leader to add this node"
                );
                return Ok(());
            }
            Decision::PeerInitialized { peer, cluster_id } => {
                warn!(
                    peer,
                    cluster_id = cluster_id.as_deref().unwrap_or("unknown"),
                    "a peer already belongs to a cluster: not bootstrapping a new one; waiting for its leader to bring this node back (or `ferry cluster add-node`)"
                );
                return Ok(());
            }
            Decision::Initialize => {
                let incarnation = |id: u64| {
                    if id == config.node_id {
                        return node.boot().incarnation.clone();
                    }
                    answers
                        .iter()
                        .find(|(peer, _)| *peer == id)
                        .and_then(|(_, reply)| reply.as_ref())
                        .map(|reply| reply.incarnation.clone())
                        .unwrap_or_default()
                };
                let members: BTreeMap<u64, FerryNode> = config
                    .peers
                    .iter()
                    .map(|p| {
                        let node = FerryNode {
                            api_addr: p.api_addr.clone(),
                            raft_addr: p.raft_addr.clone(),
                            incarnation: incarnation(p.id),
                            ..FerryNode::default()
                        };
                        (p.id, node)
                    })
                    .collect();
                // Each peer votes in the first election only once it knows it is one of the
                // voters named here (an empty node votes for nobody: it may have been wiped).
                if !invite(node, config, &members).await {
                    if !pause(&mut shutdown, Duration::from_millis(200)).await {
                        return Ok(());
                    }
                    continue;
                }
                info!(voters = ?peer_ids, "every peer is reachable and new: initializing the cluster");
                if let Err(e) = node.raft().initialize(members).await {
                    warn!(error = %e, "initialize refused; this node already has Raft state");
                }
                return Ok(());
            }
            Decision::Retry { missing } => {
                if missing != last_missing {
                    info!(
                        ?missing,
                        "waiting for every static peer to be reachable before bootstrapping"
                    );
                    last_missing = missing;
                }
            }
        }
        if !pause(&mut shutdown, Duration::from_millis(200)).await {
            return Ok(());
        }
    }
}

/// Tell every other static peer the voters of the cluster about to be initialized; whether
/// each took the invitation while still new.
async fn invite(
    node: &MetaNode,
    config: &ClusterConfig,
    members: &BTreeMap<u64, FerryNode>,
) -> bool {
    for peer in config.peers.iter().filter(|p| p.id != config.node_id) {
        let Ok(client) = node.peer(peer.id, &peer.raft_addr) else {
            return false;
        };
        match client.probe(Some(members), PROBE_TIMEOUT).await {
            Ok(reply) if !reply.initialized => {}
            Ok(_) => {
                warn!(
                    peer = peer.id,
                    "the peer joined a cluster meanwhile: not initializing"
                );
                return false;
            }
            Err(e) => {
                info!(peer = peer.id, error = ?e, "the peer did not take the invitation yet");
                return false;
            }
        }
    }
    true
}

fn cluster_id_file(data_dir: &Path) -> PathBuf {
    data_dir.join("cluster_id")
}

/// The cluster id persisted in `data_dir/cluster_id`, if any; an unreadable or corrupt file is
/// an error saying what to do.
fn persisted_cluster_id(data_dir: &Path) -> anyhow::Result<Option<String>> {
    let file = cluster_id_file(data_dir);
    let text = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let text = String::from_utf8_lossy(&text);
    match uuid::Uuid::parse_str(text.trim()) {
        Ok(id) => Ok(Some(id.to_string())),
        Err(_) => anyhow::bail!(
            "{} does not hold a cluster id (it holds {:?}): the file is corrupt. If this node's \
             Raft data ({}) is intact, delete the file and start the node again (it is written \
             anew from the Raft data); if not, wipe {} and start the node empty: the leader adds \
             it back",
            file.display(),
            text.chars().take(80).collect::<String>(),
            data_dir.join("raft").display(),
            data_dir.display()
        ),
    }
}

/// Before serving: the persisted cluster id must be readable and agree with the Raft data's.
fn check_cluster_id(data_dir: &Path, node: &MetaNode) -> anyhow::Result<()> {
    let persisted = persisted_cluster_id(data_dir)?;
    let replicated = node.state().read().state.cluster_id.clone();
    if let (Some(p), Some(r)) = (&persisted, &replicated) {
        if p != r {
            anyhow::bail!("{}", mixed_up(data_dir, p, r));
        }
    }
    Ok(())
}

/// How often registration is tried until the node's record is whole.
const REGISTER_TURN: Duration = Duration::from_millis(200);
/// How often a whole record is checked afterwards.
const SETTLED_TURN: Duration = Duration::from_secs(1);

fn mixed_up(data_dir: &Path, persisted: &str, replicated: &str) -> String {
    format!(
        "{} says this node belongs to cluster {persisted}, but its Raft data belongs to cluster \
         {replicated}: the data directory was mixed up. Wipe {} and start the node empty to \
         join the cluster its peers form (the leader adds it back)",
        cluster_id_file(data_dir).display(),
        data_dir.display()
    )
}

/// Once the cluster has a leader: give it an id if it has none (first writer wins), register
/// this node as a worker, and persist the cluster id beside the Raft data. Then keep the
/// record true for the life of the process: another writer may replace it (add-node records
/// the node's addresses without its REST address, possibly after the node registered itself),
/// and a record without the REST address would show Raft's API address as the `worker_id`
/// of every status read through REST.
async fn register(
    node: &MetaNode,
    config: &ClusterConfig,
    me: &FerryNode,
    rest_url: &Option<String>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let file = cluster_id_file(&config.data_dir);
    let mut persisted = persisted_cluster_id(&config.data_dir)?;
    let mut announced = false;
    let mut told_retired = false;
    let mut settled = false;
    loop {
        if node.leader().is_some() {
            let (cluster_id, registered, absent, retired, worker, whole) = {
                let applied = node.state().read();
                // The REST address is recorded once the cluster's feature level allows it;
                // until then the worker is registered without it, and again when it does.
                let allowed = applied.state.feature_level() >= ferry_meta::format::REST_API;
                let worker = FerryNode {
                    rest_url: rest_url.clone().filter(|_| allowed).unwrap_or_default(),
                    ..me.clone()
                };
                (
                    applied.state.cluster_id.clone(),
                    applied.state.workers.get(&node.id()) == Some(&worker),
                    !applied.state.workers.contains_key(&node.id()),
                    applied.state.retired.contains(&node.id()),
                    worker,
                    allowed || rest_url.is_none(),
                )
            };
            let attempt: anyhow::Result<bool> = async {
                let cluster_id = match cluster_id {
                    Some(id) => id,
                    None => {
                        let id = uuid::Uuid::new_v4().to_string();
                        let answer = node
                            .write_answer(Request::new(
                                format!("cluster-id/{id}"),
                                Command::SetClusterId { id: id.clone() },
                            ))
                            .await?;
                        if answer.is_ok() {
                            info!(cluster_id = %id, "cluster id set");
                        }
                        match node.state().read().state.cluster_id.clone() {
                            Some(id) => id,
                            None => return Ok(false),
                        }
                    }
                };
                match &persisted {
                    // Learned only now (its Raft data was empty at start): the node may not
                    // serve another cluster's work.
                    Some(p) if *p != cluster_id => {
                        crate::fatal::exit(mixed_up(&config.data_dir, p, &cluster_id))
                    }
                    Some(_) => {}
                    None => {
                        // Written whole or not at all: a crash mid-write must not leave a
                        // file that stops the node at its next start.
                        let tmp = file.with_extension("tmp");
                        std::fs::write(&tmp, format!("{cluster_id}\n"))
                            .and_then(|()| std::fs::rename(&tmp, &file))
                            .with_context(|| format!("cannot write {}", file.display()))?;
                        info!(%cluster_id, "joined cluster");
                        persisted = Some(cluster_id);
                    }
                }
                // Retired, or gone after this process registered it (removed by remove-node
                // below feature level 6): only add-node makes it a worker again; the later
                // registrations of this process only update its record.
                if retired || (announced && absent) {
                    if !told_retired {
                        warn!(node = node.id(), "removed from the workers by remove-node: not registering again until `ferry cluster add-node` admits this node");
                        told_retired = true;
                    }
                    return Ok(false);
                }
                told_retired = false;
                if !registered {
                    node.write_answer(Request::new(
                        uuid::Uuid::new_v4().to_string(),
                        Command::PutWorker {
                            id: node.id(),
                            node: worker.clone(),
                            readmit: false,
                        },
                    ))
                    .await??;
                    if !announced {
                        info!(node = node.id(), "registered as a worker");
                        announced = true;
                    }
                    if !worker.rest_url.is_empty() {
                        info!(node = node.id(), rest = %worker.rest_url, "REST address recorded");
                    }
                }
                Ok(whole)
            }
            .await;
            match attempt {
                Ok(whole) => settled = whole,
                Err(e) => warn!(error = %format!("{e:#}"), "registration will be retried"),
            }
        }
        let turn = if settled { SETTLED_TURN } else { REGISTER_TURN };
        if !pause(&mut shutdown, turn).await {
            return Ok(());
        }
    }
}
