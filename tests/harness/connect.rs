//! Apache Kafka Connect itself, the reference Ferry is compared with: one distributed worker
//! (`org.apache.kafka.connect.cli.ConnectDistributed`) from the jars `scripts/testbed/kafka.sh`
//! fetches, against a test's brokers, driven through its REST API with `curl` as its users
//! drive it; stopped on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::{brokers, free_port, rest, say, wait_for};

/// How long a worker has to answer its REST API after its start.
const BOOT: Duration = Duration::from_secs(120);

/// The JVM options of a test worker (`FERRY_CONNECT_JVM_OPTS` replaces them; Kafka Connect's
/// `connect-distributed.sh` gives `-Xms256M -Xmx2G`).
const TEST_JVM: &str = "-Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1";

/// Prometheus's JMX exporter agent (`scripts/testbed/kafka.sh` fetches it).
pub fn exporter_agent() -> PathBuf {
    let dir = brokers::libs().join("../agent");
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jar"))
        .unwrap_or_else(|| {
            panic!(
                "no JMX exporter agent in {}: run ./scripts/testbed/kafka.sh",
                dir.display()
            )
        })
}

/// A running Kafka Connect worker.
pub struct KafkaConnect {
    /// `http://127.0.0.1:<port>`, its REST API.
    pub url: String,
    child: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl KafkaConnect {
    /// Start one distributed worker of group `group` on `bootstrap` (its config, offset and
    /// status topics with `replication` replicas, JsonConverter with schemas as in
    /// `connect-distributed.properties`), with `more` worker properties; wait until its REST
    /// API answers and it has joined its group.
    pub fn start(
        bootstrap: &str,
        group: &str,
        replication: u32,
        more: &[(&str, &str)],
    ) -> KafkaConnect {
        Self::start_with(bootstrap, group, replication, more, &[])
    }

    /// [`KafkaConnect::start`] with `jvm_args` after the JVM's heap options (a Java agent).
    pub fn start_with(
        bootstrap: &str,
        group: &str,
        replication: u32,
        more: &[(&str, &str)],
        jvm_args: &[String],
    ) -> KafkaConnect {
        let dir = tempfile::Builder::new()
            .prefix("ferry-connect-")
            .tempdir()
            .expect("tempdir for Kafka Connect");
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let mut properties: Vec<(String, String)> = [
            ("bootstrap.servers", bootstrap.to_string()),
            ("group.id", group.to_string()),
            ("listeners", url.clone()),
            (
                "key.converter",
                "org.apache.kafka.connect.json.JsonConverter".into(),
            ),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter".into(),
            ),
            ("config.storage.topic", format!("{group}-configs")),
            ("offset.storage.topic", format!("{group}-offsets")),
            ("status.storage.topic", format!("{group}-status")),
            ("config.storage.replication.factor", replication.to_string()),
            ("offset.storage.replication.factor", replication.to_string()),
            ("status.storage.replication.factor", replication.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        properties.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let config = dir.path().join("connect-distributed.properties");
        let text: String = properties
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        std::fs::write(&config, text).expect("connect-distributed.properties");
        let logging = dir.path().join("log4j2.properties");
        std::fs::write(
            &logging,
            "rootLogger.level = INFO\n\
             rootLogger.appenderRef.out.ref = OUT\n\
             appender.out.type = Console\n\
             appender.out.name = OUT\n\
             appender.out.layout.type = PatternLayout\n\
             appender.out.layout.pattern = [%d] %p %m (%c)%n\n",
        )
        .expect("log4j2.properties");
        let log = dir.path().join("connect.log");
        let out = std::fs::File::create(&log).expect("Kafka Connect's log file");
        let err = out.try_clone().expect("Kafka Connect's log file");
        let jvm = std::env::var("FERRY_CONNECT_JVM_OPTS").unwrap_or_else(|_| TEST_JVM.to_string());
        let child = crate::dies_with_parent(&mut Command::new("java"))
            .args(jvm.split_whitespace())
            .args(jvm_args)
            .arg(format!("-Dlog4j2.configurationFile={}", logging.display()))
            .arg("-cp")
            .arg(format!("{}/*", brokers::libs().display()))
            .arg("org.apache.kafka.connect.cli.ConnectDistributed")
            .arg(&config)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("start Kafka Connect");
        let connect = KafkaConnect {
            url,
            child: Some(child),
            log,
            _dir: dir,
        };
        wait_for("Kafka Connect's REST API and its group", BOOT, || {
            let (status, _) = connect.request("GET", "/connectors", None)?;
            (status == 200).then_some(())
        });
        say(format!("Kafka Connect at {}", connect.url));
        connect
    }

    /// A REST call with `curl`: the status code and the JSON body (`Value::Null` when empty);
    /// `None` if nothing answered.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
        let body = body.map_or(rest::Body::None, rest::Body::Json);
        rest::call(&self.url, method, path, body).map(|a| (a.status, a.body))
    }

    /// `request`, which must be answered.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.request(method, path, body).unwrap_or_else(|| {
            panic!(
                "Kafka Connect did not answer {method} {path}; its log ends:\n{}",
                self.log_tail(40)
            )
        })
    }

    /// The worker's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The last lines of the worker's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Kill the worker (`kill -9`) and wait for its exit.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stop the worker (SIGTERM, as a user would) and wait for its exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = child.wait();
        }
    }
}

impl Drop for KafkaConnect {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!("---- Kafka Connect's log ----\n{}", self.log_tail(40));
        }
    }
}
