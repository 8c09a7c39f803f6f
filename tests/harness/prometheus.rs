//! A real Prometheus server (Debian's, installed by `scripts/testbed/prometheus.sh`) scraping a
//! test's nodes every second, and queries of its HTTP API as a dashboard makes them; stopped
//! on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::{free_port, say, wait_for};

/// How long the server has to answer after its start.
const BOOT: Duration = Duration::from_secs(60);

/// A running Prometheus server.
pub struct Prometheus {
    /// `http://127.0.0.1:<port>`, its HTTP API.
    pub url: String,
    child: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Start a server scraping `GET /metrics` of each of `targets` (`http://host:port`) every
    /// second; wait until it is ready.
    pub fn start(targets: &[String]) -> Prometheus {
        let dir = tempfile::Builder::new()
            .prefix("ferry-prometheus-")
            .tempdir()
            .expect("tempdir for Prometheus");
        let hosts: Vec<String> = targets
            .iter()
            .map(|t| format!("'{}'", t.trim_start_matches("http://")))
            .collect();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n- job_name: ferry\n  metrics_path: /metrics\n  \
                 static_configs:\n  - targets: [{}]\n",
                hosts.join(", ")
            ),
        )
        .expect("prometheus.yml");
        let port = free_port();
        let log = dir.path().join("prometheus.log");
        let out = std::fs::File::create(&log).expect("Prometheus's log file");
        let err = out.try_clone().expect("Prometheus's log file");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("start prometheus (run ./scripts/testbed/prometheus.sh)");
        let prometheus = Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            child: Some(child),
            log,
            _dir: dir,
        };
        wait_for("Prometheus to be ready", BOOT, || {
            let out = Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
                .arg(format!("{}/-/ready", prometheus.url))
                .output()
                .ok()?;
            (out.stdout == b"200").then_some(())
        });
        say(format!(
            "Prometheus at {} scraping {}",
            prometheus.url,
            hosts.join(", ")
        ));
        prometheus
    }

    /// An instant query (`GET /api/v1/query`): each series of the result, its labels and value;
    /// `None` if the server did not answer it.
    pub fn query(&self, promql: &str) -> Option<Vec<(Value, f64)>> {
        let out = Command::new("curl")
            .args(["-s", "-m", "10", "-G"])
            .arg(format!("{}/api/v1/query", self.url))
            .arg("--data-urlencode")
            .arg(format!("query={promql}"))
            .output()
            .ok()?;
        let answer: Value = serde_json::from_slice(&out.stdout).ok()?;
        if answer["status"] != "success" {
            return None;
        }
        let result = answer["data"]["result"].as_array()?;
        Some(
            result
                .iter()
                .filter_map(|r| {
                    let value = r["value"][1].as_str()?.parse().ok()?;
                    Some((r["metric"].clone(), value))
                })
                .collect(),
        )
    }

    /// The value of a query whose result is one series (a sum, a count); `None` if it has none.
    pub fn scalar(&self, promql: &str) -> Option<f64> {
        match self.query(promql)?.as_slice() {
            [(_, value)] => Some(*value),
            _ => None,
        }
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("---- Prometheus's log ----\n{}", self.log_tail(20));
        }
    }
}
