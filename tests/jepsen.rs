//! Fault suite scenarios: a recorded history of concurrent clients under a nemesis, checked
//! afterwards.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_proto::management as pb;
use ferry_proto::management::management_client::ManagementClient;
use ferry_tests::jepsen::linearizable::{check, ConfigInput, ConfigOutput, ConfigRegister, Op};
use ferry_tests::{say, Cluster, Settings};
use tonic::Code;

type History = Arc<Mutex<Vec<Op<ConfigInput, ConfigOutput>>>>;

fn config(value: &str) -> HashMap<String, String> {
    [
        ("connector.class", "FileStreamSink"),
        ("topics", value),
        ("file", "out.txt"),
        // No task runs a config of this test: a STOPPED-like load stays on the control plane.
        ("tasks.max", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Whether a failed call may still have taken effect.
fn indeterminate(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Unknown
            | Code::Cancelled
            | Code::Internal
    )
}

/// A call that could not even connect: it never reached a node, so it had no effect.
fn never_sent(status: &tonic::Status) -> bool {
    let text = format!("{status:?}");
    status.code() == Code::Unavailable
        && (text.contains("tcp connect") || text.contains("Connection refused"))
}

async fn client(
    id: u64,
    addrs: Vec<String>,
    keys: Vec<String>,
    started: Instant,
    until: Instant,
    history: History,
) {
    let mut seed = id
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut count = 0;
    while Instant::now() < until {
        let addr = &addrs[next(addrs.len() as u64) as usize];
        let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("http://{addr}")) else {
            return;
        };
        let channel = endpoint
            .connect_timeout(Duration::from_millis(500))
            .timeout(Duration::from_secs(8))
            .connect_lazy();
        let mut c = ManagementClient::new(channel);
        let key = keys[next(keys.len() as u64) as usize].clone();
        count += 1;
        let value = format!("c{id}-{count}");
        let input = match next(10) {
            0..=3 => ConfigInput::Get,
            4..=6 => ConfigInput::Put(value.clone()),
            7..=8 => ConfigInput::Create(value.clone()),
            _ => ConfigInput::Delete,
        };
        let call = started.elapsed().as_nanos() as u64;
        let outcome: Result<ConfigOutput, tonic::Status> = match &input {
            ConfigInput::Get => match c
                .get_connector(pb::ConnectorName { name: key.clone() })
                .await
            {
                Ok(r) => Ok(ConfigOutput::Value(
                    r.into_inner().config.get("topics").cloned(),
                )),
                Err(s) if s.code() == Code::NotFound => Ok(ConfigOutput::Value(None)),
                Err(s) => Err(s),
            },
            ConfigInput::Put(v) => match c
                .put_connector_config(pb::PutConnectorConfigRequest {
                    name: key.clone(),
                    config: config(v),
                    request_id: String::new(),
                    expected_version: None,
                })
                .await
            {
                Ok(_) => Ok(ConfigOutput::Ok),
                Err(s) => Err(s),
            },
            ConfigInput::Create(v) => match c
                .create_connector(pb::CreateConnectorRequest {
                    name: key.clone(),
                    config: config(v),
                    request_id: String::new(),
                })
                .await
            {
                Ok(_) => Ok(ConfigOutput::Ok),
                Err(s) if s.code() == Code::AlreadyExists => Ok(ConfigOutput::AlreadyExists),
                Err(s) => Err(s),
            },
            ConfigInput::Delete => match c
                .delete_connector(pb::WriteConnectorRequest {
                    name: key.clone(),
                    request_id: String::new(),
                })
                .await
            {
                Ok(_) => Ok(ConfigOutput::Ok),
                Err(s) if s.code() == Code::NotFound => Ok(ConfigOutput::NotFound),
                Err(s) => Err(s),
            },
        };
        let ret = started.elapsed().as_nanos() as u64;
        let op = match outcome {
            Ok(output) => Op {
                key,
                input,
                call,
                ret: Some(ret),
                output: Some(output),
            },
            // A failed read has no effect, and neither has a call that never connected.
            Err(_) if input == ConfigInput::Get => continue,
            Err(status) if never_sent(&status) => continue,
            Err(status) if indeterminate(status.code()) => Op {
                key,
                input,
                call,
                ret: None,
                output: None,
            },
            Err(status) => panic!("unexpected answer {status:?} to {input:?}"),
        };
        history.lock().unwrap_or_else(|p| p.into_inner()).push(op);
    }
}

#[test]
fn concurrent_config_clients_see_a_linearizable_history_through_a_leader_kill() {
    let mut cluster = Cluster::new(3, Settings::default());
    cluster.start_all();
    let leader = cluster.wait_leader(Duration::from_secs(30));
    let addrs: Vec<String> = cluster.nodes.values().map(|n| n.api.clone()).collect();
    let keys: Vec<String> = (0..3).map(|k| format!("k{k}")).collect();
    let history: History = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let started = Instant::now();
    let until = started + Duration::from_secs(10);
    let clients: Vec<_> = (0..5)
        .map(|id| {
            runtime.spawn(client(
                id,
                addrs.clone(),
                keys.clone(),
                started,
                until,
                history.clone(),
            ))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    cluster.kill9(leader);
    for c in clients {
        runtime.block_on(c).expect("client task");
    }
    let history = history.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let unknown = history.iter().filter(|o| o.ret.is_none()).count();
    let failing = check(&ConfigRegister, &history);
    say(format!(
        "LINEARIZABILITY: {} operations on {} keys ({unknown} of unknown outcome) through a kill -9 of leader {leader}: {}",
        history.len(),
        keys.len(),
        if failing.is_empty() { "linearizable".to_string() } else { format!("NOT linearizable on {failing:?}") }
    ));
    assert!(history.len() > 50, "the workload ran");
    assert!(failing.is_empty(), "non-linearizable keys: {failing:?}");
}
