//! `make bench`: the control plane's figures, each beside a baseline measured in the same run.
//!
//! - durable commits/s through Raft (3 nodes, every append flushed by sled), from one client
//!   and from many concurrent clients (openraft batches their entries into one flush), beside
//!   the raw rate of sled insert + flush on the same disk;
//! - time from `ferryd` start to serving its API, and to being ready for writes;
//! - RSS of an idle node;
//! - FileStreamSink throughput beside kcat's raw consume, fail-over time, RSS under load
//!   (`sink.rs`);
//! - Ferry beside Kafka Connect (`versus.rs`), and the control plane at 10,000 tasks
//!   (`scale.rs`).

mod scale;
mod sink;
mod versus;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ferry_proto::management as pb;
use ferry_proto::management::management_client::ManagementClient;
use ferry_tests::{wait_for, Cluster, Settings};
use tonic::transport::Channel;

const SEQUENTIAL: usize = 500;
const CONCURRENT_CLIENTS: usize = 64;
const PER_CLIENT: usize = 40;

fn sled_baseline(ops: usize) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let db = sled::open(dir.path())?;
    let value = vec![7u8; 300];
    let started = Instant::now();
    for i in 0..ops {
        db.insert((i as u64).to_be_bytes(), value.clone())?;
        db.flush()?;
    }
    Ok(ops as f64 / started.elapsed().as_secs_f64())
}

async fn client(addr: &str) -> anyhow::Result<ManagementClient<Channel>> {
    Ok(ManagementClient::connect(format!("http://{addr}")).await?)
}

/// The benchmark's write: "stop" of a connector that is already STOPPED, each with its own
/// request id. A real, durable Raft commit (one API call, one log entry) that no worker reacts
/// to, so the figures measure the control plane alone.
fn write_request(i: usize, client: usize) -> pb::WriteConnectorRequest {
    pb::WriteConnectorRequest {
        name: "bench".to_string(),
        request_id: format!("bench-{client}-{i}"),
    }
}

/// Create the STOPPED connector the benchmark writes to.
async fn prepare(addr: &str) -> anyhow::Result<()> {
    let mut c = client(addr).await?;
    let config: HashMap<String, String> = [
        ("connector.class", "FileStreamSink"),
        ("topics", "bench"),
        ("file", "bench.out"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    c.create_connector(pb::CreateConnectorRequest {
        name: "bench".into(),
        config,
        request_id: String::new(),
    })
    .await?;
    c.stop_connector(pb::WriteConnectorRequest {
        name: "bench".into(),
        request_id: String::new(),
    })
    .await?;
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn sequential(addr: &str, tag: usize) -> anyhow::Result<(f64, Duration, Duration)> {
    let mut c = client(addr).await?;
    let mut latencies = Vec::with_capacity(SEQUENTIAL);
    let started = Instant::now();
    for i in 0..SEQUENTIAL {
        let t = Instant::now();
        c.stop_connector(write_request(i, tag)).await?;
        latencies.push(t.elapsed());
    }
    let rate = SEQUENTIAL as f64 / started.elapsed().as_secs_f64();
    latencies.sort();
    Ok((
        rate,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
    ))
}

async fn concurrent(addr: &str) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CONCURRENT_CLIENTS {
        let addr = addr.to_string();
        tasks.push(tokio::spawn(async move {
            let mut client = client(&addr).await?;
            for i in 0..PER_CLIENT {
                client.stop_connector(write_request(i, 1000 + c)).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok((CONCURRENT_CLIENTS * PER_CLIENT) as f64 / started.elapsed().as_secs_f64())
}

/// Write a workload's figures to `target/bench/<name>.json`, so that runs can be compared.
fn write_report(name: &str, report: &serde_json::Value) -> anyhow::Result<()> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_vec_pretty(report)?,
    )?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("failover") => return sink::failover_only(),
        Some("versus") => return versus::run(),
        Some("scale") => return scale::run(),
        _ => {}
    }
    println!(
        "# Ferry control-plane benchmark (binaries: {})",
        ferry_tests::bin_dir().display()
    );
    let baseline = sled_baseline(1000)?;
    println!("baseline  sled insert+flush, one writer:           {baseline:>9.0} ops/s");

    let mut cluster = Cluster::new(3, Settings::default());
    let spawned = Instant::now();
    cluster.start_all();
    let serving = wait_for("node 1 to serve its API", Duration::from_secs(30), || {
        cluster.status(1).map(|_| spawned.elapsed())
    });
    let leader = cluster.wait_leader(Duration::from_secs(30));
    let ready = wait_for("the cluster id", Duration::from_secs(30), || {
        let s = cluster.status(leader)?;
        (!s["cluster_id"].as_str()?.is_empty()).then(|| spawned.elapsed())
    });
    println!(
        "start     ferryd spawn -> API serving:              {:>9} ms",
        serving.as_millis()
    );
    println!(
        "start     ferryd spawn -> leader + cluster id:      {:>9} ms (3 fresh nodes)",
        ready.as_millis()
    );

    let follower = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let leader_addr = cluster.node(leader).api.clone();
    let follower_addr = cluster.node(follower).api.clone();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(prepare(&leader_addr))?;
    let (rate, p50, p99) = runtime.block_on(sequential(&leader_addr, 1))?;
    println!(
        "raft      one client on the leader:                {rate:>9.0} commits/s  (p50 {:.2} ms, p99 {:.2} ms; {:.0}% of baseline)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        100.0 * rate / baseline
    );
    let (rate, p50, p99) = runtime.block_on(sequential(&follower_addr, 2))?;
    println!(
        "raft      one client on a follower (forwarded):    {rate:>9.0} commits/s  (p50 {:.2} ms, p99 {:.2} ms)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    let rate = runtime.block_on(concurrent(&leader_addr))?;
    println!(
        "raft      {CONCURRENT_CLIENTS} concurrent clients (batched appends): {rate:>9.0} commits/s  ({:.1}x baseline)",
        rate / baseline
    );

    // Read as soon as the load ends: what the node keeps after it, not what it returns later.
    for id in 1..=3 {
        if let Some(mib) = cluster.node(id).pid().map(sink::rss_mib) {
            println!("memory    idle node {id} RSS after the load:         {mib:>9.1} MiB");
        }
    }

    // Restart of one node with data: time to serve and to catch up.
    cluster.stop(follower);
    let target = cluster
        .status(leader)
        .and_then(|s| s["applied_index"].as_u64())
        .unwrap_or(0);
    let spawned = Instant::now();
    cluster.start(follower);
    let serving = wait_for(
        "the restarted node to serve",
        Duration::from_secs(30),
        || cluster.status(follower).map(|_| spawned.elapsed()),
    );
    cluster.wait_applied(follower, target, Duration::from_secs(60));
    println!(
        "start     restart with {target} entries -> serving: {:>9} ms; caught up after {} ms",
        serving.as_millis(),
        spawned.elapsed().as_millis()
    );
    drop(cluster);
    sink::run()?;
    versus::run()?;
    scale::run()?;
    Ok(())
}
