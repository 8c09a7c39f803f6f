//! Real Apache Kafka for a test: 1 or 3 combined broker+controller KRaft nodes on loopback,
//! run from the jars `scripts/testbed/kafka.sh` fetches into `target/kafka/libs`, each a
//! process of its own with a formatted data directory in a temporary directory; stopped on
//! drop. A node can be killed (`kill -9`), paused (SIGSTOP/SIGCONT) and started again; topics
//! are made through the Admin API, as a user's tools make them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::proxy::Proxy;
use crate::{free_port, say, wait_for};

/// How long a cluster has to answer after its start.
const BOOT: Duration = Duration::from_secs(90);

/// The jars of the pinned Kafka release.
pub fn libs() -> PathBuf {
    let libs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/kafka/libs");
    assert!(
        has_jars(&libs),
        "no Kafka jars in {}: run ./scripts/testbed/kafka.sh",
        libs.display()
    );
    libs
}

fn has_jars(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("kafka_2.13-"))
}

/// JVM options of a test broker: a small heap and a quick start (`FERRY_KAFKA_JVM_OPTS`
/// replaces them, e.g. for a benchmark).
const TEST_JVM: &str = "-Xms64m -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1";

/// The SASL mechanism of a `scram` cluster.
const SCRAM: &str = "SCRAM-SHA-256";

/// The name of the listener Ferry's workers reach through a proxy, in a `proxied` cluster.
const WORKERS: &str = "WORKERS";

/// The client listeners of a cluster.
enum Listeners<'a> {
    /// One PLAINTEXT listener for every client.
    Plain,
    /// One SASL_PLAINTEXT listener with SCRAM and this user and password.
    Scram(&'a str, &'a str),
    /// PLAINTEXT for the harness and the brokers, and one for the workers behind a proxy.
    Proxied,
}

/// The environment variable holding the address of the broker `ferry-kafka` runs for a whole
/// test run (see [`crate::Kafka`]).
pub const SHARED: &str = "FERRY_TEST_KAFKA";

/// A `java` command on the Kafka classpath, with the test JVM options.
fn java(main_class: &str) -> Command {
    let jvm = std::env::var("FERRY_KAFKA_JVM_OPTS").unwrap_or_else(|_| TEST_JVM.to_string());
    let mut cmd = Command::new("java");
    crate::dies_with_parent(&mut cmd)
        .args(jvm.split_whitespace())
        .arg("-cp")
        .arg(format!("{}/*", libs().display()))
        .arg(main_class);
    cmd
}

struct Node {
    id: u32,
    /// The port of the listener the harness's own clients (and the other brokers) use.
    port: u16,
    /// With `proxied`: the proxy the workers reach this broker through, which a test can cut.
    proxy: Option<Proxy>,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// A running Kafka cluster.
pub struct Brokers {
    /// `host:port,…` of every broker.
    pub bootstrap: String,
    /// The bootstrap servers for Ferry's workers: `bootstrap`, or with `proxied` the brokers'
    /// proxies, so that a test can cut one broker off from the workers alone.
    pub for_workers: String,
    /// What a client needs besides the bootstrap servers (SASL credentials with `scram`).
    pub client: Vec<(String, String)>,
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Brokers {
    /// Start `count` (1 or 3) broker+controller nodes, formatted afresh, and wait until the
    /// cluster answers metadata requests. With three, topics default to three replicas and
    /// `min.insync.replicas=2`.
    pub fn start(count: u32) -> Brokers {
        Brokers::start_with(count, &[])
    }

    /// `start`, with more broker properties (e.g. `auto.create.topics.enable=false`).
    pub fn start_with(count: u32, more: &[(&str, &str)]) -> Brokers {
        Brokers::launch(count, more, Listeners::Plain)
    }

    /// `start`, each broker with a second client listener that Ferry's workers reach through a
    /// proxy of the harness (advertised at the proxy's address; see `for_workers`), which
    /// [`Brokers::cut`] cuts: one broker partitioned from the workers while the other brokers,
    /// the controllers and the harness's own clients still reach it directly.
    pub fn proxied(count: u32) -> Brokers {
        Brokers::launch(count, &[], Listeners::Proxied)
    }

    /// One broker whose only client listener is SASL_PLAINTEXT with SCRAM-SHA-256, and one
    /// user, `user` with `password` (made when the node is formatted); the harness's own
    /// clients log in as that user.
    pub fn scram(user: &str, password: &str) -> Brokers {
        Brokers::launch(1, &[], Listeners::Scram(user, password))
    }

    fn launch(count: u32, more: &[(&str, &str)], listeners: Listeners) -> Brokers {
        assert!(count == 1 || count == 3, "1 or 3 brokers, not {count}");
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("ferry-kafka-")
            .tempdir()
            .expect("tempdir for Kafka");
        let scram = match listeners {
            Listeners::Scram(user, password) => Some((user, password)),
            _ => None,
        };
        let ports: Vec<(u16, u16)> = (0..count).map(|_| (free_port(), free_port())).collect();
        let voters: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, controller))| format!("{}@127.0.0.1:{controller}", i + 1))
            .collect();
        let replicas = count.min(3);
        let cluster_id = kafka_uuid();
        let listener = if scram.is_some() {
            "SASL_PLAINTEXT"
        } else {
            "PLAINTEXT"
        };
        let mut nodes = Vec::new();
        let mut formats = Vec::new();
        for (i, (port, controller)) in ports.iter().enumerate() {
            let id = i as u32 + 1;
            let data = dir.path().join(format!("kafka{id}"));
            let config = dir.path().join(format!("server{id}.properties"));
            // The workers' listener, reached through a proxy that forwards to it.
            let proxy = matches!(listeners, Listeners::Proxied).then(|| {
                let workers = free_port();
                (workers, Proxy::start(&format!("127.0.0.1:{workers}")))
            });
            let (listen, advertise, protocols) = match &proxy {
                Some((workers, proxy)) => (
                    format!(",{WORKERS}://127.0.0.1:{workers}"),
                    format!(",{WORKERS}://{}", proxy.addr),
                    format!(",{WORKERS}:PLAINTEXT"),
                ),
                None => Default::default(),
            };
            let mut properties = [
                "process.roles=broker,controller".to_string(),
                format!("node.id={id}"),
                format!("controller.quorum.voters={}", voters.join(",")),
                format!(
                    "listeners={listener}://127.0.0.1:{port}{listen},CONTROLLER://127.0.0.1:{controller}"
                ),
                format!("advertised.listeners={listener}://127.0.0.1:{port}{advertise}"),
                format!("inter.broker.listener.name={listener}"),
                "controller.listener.names=CONTROLLER".to_string(),
                format!(
                    "listener.security.protocol.map={listener}:{listener},CONTROLLER:PLAINTEXT{protocols}"
                ),
                format!("log.dirs={}", data.display()),
                format!("default.replication.factor={replicas}"),
                format!("min.insync.replicas={}", if replicas == 3 { 2 } else { 1 }),
                format!("offsets.topic.replication.factor={replicas}"),
                format!("transaction.state.log.replication.factor={replicas}"),
                format!("transaction.state.log.min.isr={}", replicas.min(2)),
                format!("share.coordinator.state.topic.replication.factor={replicas}"),
                format!("share.coordinator.state.topic.min.isr={}", replicas.min(2)),
                "group.initial.rebalance.delay.ms=0".to_string(),
            ]
            .to_vec();
            properties.extend(more.iter().map(|(k, v)| format!("{k}={v}")));
            if let Some((user, password)) = scram {
                properties.extend([
                    format!("sasl.enabled.mechanisms={SCRAM}"),
                    format!("sasl.mechanism.inter.broker.protocol={SCRAM}"),
                    format!(
                        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{user}\" password=\"{password}\";"
                    ),
                ]);
            }
            std::fs::write(&config, properties.join("\n") + "\n").expect("server.properties");
            // The nodes are formatted side by side (a JVM start each).
            let mut format = java("kafka.tools.StorageTool");
            // `=`: a cluster id may begin with `-`.
            format
                .arg("format")
                .arg(format!("--cluster-id={cluster_id}"))
                .arg("--config")
                .arg(&config);
            if let Some((user, password)) = scram {
                format.args([
                    "--add-scram",
                    &format!("{SCRAM}=[name={user},password={password}]"),
                ]);
            }
            let format = format
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run Kafka's StorageTool (is Java installed?)");
            formats.push((id, format));
            nodes.push(Node {
                id,
                port: *port,
                proxy: proxy.map(|(_, proxy)| proxy),
                config,
                log: dir.path().join(format!("kafka{id}.log")),
                child: None,
            });
        }
        for (id, format) in formats {
            let formatted = format
                .wait_with_output()
                .expect("wait for Kafka's StorageTool");
            assert!(
                formatted.status.success(),
                "formatting Kafka node {id} failed: {}",
                String::from_utf8_lossy(&formatted.stderr)
            );
        }
        let bootstrap = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",");
        let for_workers = nodes
            .iter()
            .map(|n| n.proxy.as_ref().map(|p| p.addr.clone()))
            .collect::<Option<Vec<_>>>()
            .map_or_else(|| bootstrap.clone(), |proxies| proxies.join(","));
        let mut brokers = Brokers {
            bootstrap,
            for_workers,
            client: scram
                .map(|(user, password)| {
                    [
                        ("security.protocol", "SASL_PLAINTEXT"),
                        ("sasl.mechanisms", SCRAM),
                        ("sasl.username", user),
                        ("sasl.password", password),
                    ]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .to_vec()
                })
                .unwrap_or_default(),
            nodes,
            _dir: dir,
        };
        for i in 0..brokers.nodes.len() {
            brokers.spawn(i);
        }
        brokers.wait_ready();
        say(format!(
            "Apache Kafka: {count} broker(s) at {} ready in {} ms",
            brokers.bootstrap,
            started.elapsed().as_millis()
        ));
        brokers
    }

    fn spawn(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("Kafka log file");
        let err = log.try_clone().expect("Kafka log file");
        let child = java("kafka.Kafka")
            .arg(&node.config)
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("start a Kafka broker");
        node.child = Some(child);
    }

    /// Wait until every broker is in the cluster's metadata.
    fn wait_ready(&self) {
        let consumer = metadata_client(&self.bootstrap, &self.client);
        let want = self.nodes.len();
        wait_for("every Kafka broker in the metadata", BOOT, || {
            let metadata = consumer.fetch_metadata(None, Duration::from_secs(2)).ok()?;
            (metadata.brokers().len() == want).then_some(())
        });
    }

    /// The broker with this id (1-based) as `host:port`.
    pub fn broker(&self, id: u32) -> String {
        format!("127.0.0.1:{}", self.node(id).port)
    }

    fn node(&self, id: u32) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no Kafka node {id}"))
    }

    fn index(&self, id: u32) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .unwrap_or_else(|| panic!("no Kafka node {id}"))
    }

    /// Create topics (name, partitions) through the Admin API and wait until they exist.
    pub fn create_topics(&self, topics: &[(&str, i32)]) {
        let replicas = self.nodes.len().min(3) as i32;
        create_topics_as(&self.bootstrap, &self.client, topics, replicas);
    }

    /// `kill -9` one node.
    pub fn kill9(&mut self, id: u32) {
        let index = self.index(id);
        if let Some(mut child) = self.nodes[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
            say(format!("killed -9 Kafka node {id}"));
        }
    }

    /// SIGSTOP or SIGCONT one node.
    pub fn signal(&self, id: u32, signal: Signal) {
        let child = self.node(id).child.as_ref().expect("the Kafka node runs");
        kill(Pid::from_raw(child.id() as i32), signal).expect("signal the Kafka node");
        say(format!("sent {signal:?} to Kafka node {id}"));
    }

    /// Cut one broker off from Ferry's workers (its proxy drops every connection and refuses
    /// new ones); the other brokers and the harness's clients still reach it.
    pub fn cut(&self, id: u32) {
        self.workers_proxy(id).cut();
        say(format!("cut Kafka node {id} off from the workers"));
    }

    /// Undo [`Brokers::cut`]; how many of the workers' connections the cuts of this broker
    /// dropped or refused so far.
    pub fn heal(&self, id: u32) -> u64 {
        let proxy = self.workers_proxy(id);
        proxy.heal();
        say(format!("Kafka node {id} reachable from the workers again"));
        proxy.broken()
    }

    fn workers_proxy(&self, id: u32) -> &Proxy {
        self.node(id)
            .proxy
            .as_ref()
            .expect("a cluster started with Brokers::proxied")
    }

    /// Start a node again (after `kill9`) on its data directory.
    pub fn restart(&mut self, id: u32) {
        let index = self.index(id);
        assert!(
            self.nodes[index].child.is_none(),
            "Kafka node {id} still runs"
        );
        self.spawn(index);
        say(format!("started Kafka node {id} again"));
    }

    /// Every record of `topic` as Kafka's own console consumer reads it (values, one per line),
    /// stopping once `expected` are read or after `timeout`: an independent reader.
    pub fn console_consume(&self, topic: &str, expected: usize, timeout: Duration) -> Vec<String> {
        console_consume(&self.bootstrap, topic, expected, timeout, false)
    }

    /// The last lines of every node's log, for a failing test's report.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let text = std::fs::read_to_string(&node.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(lines).collect();
            out.push_str(&format!("---- Kafka node {} ----\n", node.id));
            for line in tail.iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Brokers {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_tails(30));
        }
    }
}

/// An admin client, and a runtime to wait on its answers.
/// A client config for the cluster at `bootstrap`, with what else its clients need.
fn client_config(bootstrap: &str, client: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (k, v) in client {
        config.set(k, v);
    }
    config
}

fn admin(
    bootstrap: &str,
    client: &[(String, String)],
) -> (AdminClient<DefaultClientContext>, tokio::runtime::Runtime) {
    let admin = client_config(bootstrap, client)
        .create()
        .expect("an admin client");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the admin client");
    (admin, runtime)
}

fn metadata_client(bootstrap: &str, client: &[(String, String)]) -> BaseConsumer {
    client_config(bootstrap, client)
        .create()
        .expect("a metadata client")
}

/// The topics of the cluster that are not Kafka's own (`__…`), with their partition counts.
pub fn topics(bootstrap: &str) -> Vec<(String, usize)> {
    topics_as(bootstrap, &[])
}

fn topics_as(bootstrap: &str, client: &[(String, String)]) -> Vec<(String, usize)> {
    let metadata = metadata_client(bootstrap, client)
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("Kafka metadata");
    metadata
        .topics()
        .iter()
        .filter(|t| !t.name().starts_with("__"))
        .map(|t| (t.name().to_string(), t.partitions().len()))
        .collect()
}

/// Create topics (name, partitions) with `replicas` replicas through the Admin API, and wait
/// until the metadata shows every partition.
pub fn create_topics(bootstrap: &str, topics: &[(&str, i32)], replicas: i32) {
    create_topics_as(bootstrap, &[], topics, replicas);
}

fn create_topics_as(
    bootstrap: &str,
    client: &[(String, String)],
    topics: &[(&str, i32)],
    replicas: i32,
) {
    if topics.is_empty() {
        return;
    }
    let (admin, runtime) = admin(bootstrap, client);
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|(name, partitions)| {
            NewTopic::new(name, *partitions, TopicReplication::Fixed(replicas))
        })
        .collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = runtime
        .block_on(admin.create_topics(new.iter(), &options))
        .expect("CreateTopics");
    for result in results {
        if let Err((topic, code)) = result {
            panic!("cannot create topic {topic}: {code}");
        }
    }
    wait_for("the new topics in the metadata", BOOT, || {
        let known = topics_as(bootstrap, client);
        topics
            .iter()
            .all(|(name, partitions)| known.contains(&(name.to_string(), *partitions as usize)))
            .then_some(())
    });
}

/// Set one config of a topic (`kafka-configs.sh --alter`), through the Admin API.
pub fn set_topic_config(bootstrap: &str, topic: &str, key: &str, value: &str) {
    let (admin, runtime) = admin(bootstrap, &[]);
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let change = AlterConfig::new(ResourceSpecifier::Topic(topic)).set(key, value);
    let results = runtime
        .block_on(admin.alter_configs([&change], &options))
        .expect("AlterConfigs");
    for result in results {
        if let Err((resource, code)) = result {
            panic!("cannot set {key}={value} on {resource:?}: {code}");
        }
    }
    say(format!("topic {topic}: {key}={value}"));
}

/// Empty a shared cluster for the next test: delete every topic that is not Kafka's own and
/// every consumer group, and wait until the metadata shows no topic left.
pub fn clear(bootstrap: &str) {
    let (admin, runtime) = admin(bootstrap, &[]);
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let groups: Vec<String> = metadata_client(bootstrap, &[])
        .fetch_group_list(None, Duration::from_secs(10))
        .map(|list| list.groups().iter().map(|g| g.name().to_string()).collect())
        .unwrap_or_default();
    if !groups.is_empty() {
        let names: Vec<&str> = groups.iter().map(String::as_str).collect();
        // A group with members left (a test's process still closing) stays; it holds no
        // topic of the next test.
        let _ = runtime.block_on(admin.delete_groups(&names, &options));
    }
    let left: Vec<String> = topics(bootstrap)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    if left.is_empty() {
        return;
    }
    let names: Vec<&str> = left.iter().map(String::as_str).collect();
    let results = runtime
        .block_on(admin.delete_topics(&names, &options))
        .expect("DeleteTopics");
    for result in results {
        if let Err((topic, code)) = result {
            panic!("cannot delete topic {topic} of the previous test: {code}");
        }
    }
    wait_for("the previous test's topics gone", BOOT, || {
        topics(bootstrap).is_empty().then_some(())
    });
}

/// The records of `topic` as Kafka's console consumer prints them, one per line (with
/// `headers`, `key:value,…` of the headers, a tab, then the value), from the beginning, once
/// `expected` are read or after `timeout`.
pub fn console_consume(
    bootstrap: &str,
    topic: &str,
    expected: usize,
    timeout: Duration,
    headers: bool,
) -> Vec<String> {
    let mut cmd = java("org.apache.kafka.tools.consumer.ConsoleConsumer");
    cmd.args(["--bootstrap-server", bootstrap, "--topic", topic])
        .args(["--from-beginning", "--max-messages", &expected.to_string()])
        .args(["--timeout-ms", &timeout.as_millis().to_string()]);
    if headers {
        cmd.args(["--formatter-property", "print.headers=true"]);
    }
    let out = cmd
        .stderr(Stdio::null())
        .output()
        .expect("run Kafka's console consumer");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// `kafka-topics --describe --topic TOPIC` (Kafka's TopicCommand): its output, for a test
/// to read partition counts and topic configs from Kafka's own tool.
pub fn describe_topic(bootstrap: &str, topic: &str) -> String {
    let out = java("org.apache.kafka.tools.TopicCommand")
        .args([
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--topic",
            topic,
        ])
        .stderr(Stdio::null())
        .output()
        .expect("run Kafka's TopicCommand");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A partition of a consumer group as `kafka-consumer-groups --describe` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPartition {
    pub topic: String,
    pub partition: i32,
    /// `CURRENT-OFFSET`: the group's committed offset (`None` for `-`).
    pub committed: Option<i64>,
    pub end: Option<i64>,
    pub lag: Option<i64>,
}

/// `kafka-consumer-groups --describe --group GROUP` (Kafka's ConsumerGroupCommand), parsed:
/// an independent reader of a group's committed offsets and lag.
pub fn describe_group(bootstrap: &str, group: &str) -> Vec<GroupPartition> {
    let out = java("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand")
        .args([
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
        ])
        .stderr(Stdio::null())
        .output()
        .expect("run Kafka's ConsumerGroupCommand");
    let number = |s: &str| s.parse::<i64>().ok();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
            if cols.len() < 6 || cols[0] != group {
                return None;
            }
            Some(GroupPartition {
                topic: cols[1].to_string(),
                partition: cols[2].parse().ok()?,
                committed: number(cols[3]),
                end: number(cols[4]),
                lag: number(cols[5]),
            })
        })
        .collect()
}

/// A cluster id as Kafka writes them: 16 random bytes, URL-safe base64 without padding.
fn kafka_uuid() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}
