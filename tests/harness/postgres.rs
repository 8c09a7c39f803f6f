//! A real PostgreSQL for a test: Debian's server (scripts/testbed/postgres.sh installs it),
//! initialised in a temporary directory and run as the `postgres` user on a loopback port with
//! password authentication over TCP; stopped on drop. `psql`, PostgreSQL's own client, is the
//! independent reader of what Ferry wrote.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{free_port, say};

/// The superuser's password in every test server.
const SUPERUSER_PASSWORD: &str = "postgres-test";

/// The newest installed server's `bin` directory.
fn bin_dir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort_by_key(|b| {
        b.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found
        .pop()
        .expect("no PostgreSQL server under /usr/lib/postgresql: run ./scripts/testbed/postgres.sh (make test does)")
}

pub struct Postgres {
    pub port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Postgres {
    /// A new server with the seed's database `kcdb` and user `kcuser` / `kcpw`.
    pub fn start() -> Postgres {
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("ferry-pg-")
            .tempdir()
            .expect("tempdir for PostgreSQL");
        let pg = Postgres {
            port: free_port(),
            dir,
            bin: bin_dir(),
        };
        let root = pg.dir.path();
        std::fs::write(root.join("pwfile"), SUPERUSER_PASSWORD).expect("pwfile");
        let chown = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(root)
            .status()
            .expect("chown");
        assert!(chown.success(), "chown {} failed", root.display());
        pg.as_postgres(&[
            "initdb",
            "-D",
            &pg.data(),
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--pwfile",
            &root.join("pwfile").display().to_string(),
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        pg.start_server();
        // One statement per call: CREATE DATABASE cannot run in the transaction psql's -c
        // would put the two in.
        for sql in [
            "CREATE ROLE kcuser LOGIN PASSWORD 'kcpw'",
            "CREATE DATABASE kcdb OWNER kcuser",
        ] {
            pg.psql_as("postgres", SUPERUSER_PASSWORD, "postgres", sql);
        }
        say(format!(
            "PostgreSQL on 127.0.0.1:{} ready in {} ms",
            pg.port,
            started.elapsed().as_millis()
        ));
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// Run a server program as the `postgres` user; panics with its output if it fails.
    fn as_postgres(&self, args: &[&str]) {
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join(args[0]))
            .args(&args[1..])
            .stdin(Stdio::null())
            .output()
            .expect("runuser");
        assert!(
            out.status.success(),
            "{args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Start (or restart) the server on its port.
    pub fn start_server(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        self.as_postgres(&[
            "pg_ctl",
            "-D",
            &self.data(),
            "-l",
            &log,
            "-w",
            "-o",
            &options,
            "start",
        ]);
    }

    /// Stop the server at once, dropping every connection (`pg_ctl -m immediate`).
    pub fn stop_server(&self) {
        self.as_postgres(&[
            "pg_ctl",
            "-D",
            &self.data(),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]);
    }

    /// The seed's `connection.url` for database `db` on this server.
    pub fn jdbc_url(&self, db: &str) -> String {
        format!("jdbc:postgresql://127.0.0.1:{}/{db}", self.port)
    }

    /// Run `sql` in `kcdb` as `kcuser` with psql; its rows, one per line, columns joined by `|`.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_as("kcuser", "kcpw", "kcdb", sql)
    }

    /// As `psql`, but `None` when psql fails (a table that does not exist yet).
    pub fn try_psql(&self, sql: &str) -> Option<String> {
        let out = self.run_psql("kcuser", "kcpw", "kcdb", sql);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).to_string())
    }

    fn run_psql(&self, user: &str, password: &str, db: &str, sql: &str) -> std::process::Output {
        Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                user,
                "-d",
                db,
            ])
            .args(["-v", "ON_ERROR_STOP=1", "-At", "-F", "|", "-c", sql])
            .env("PGPASSWORD", password)
            .stdin(Stdio::null())
            .output()
            .expect("run psql")
    }

    fn psql_as(&self, user: &str, password: &str, db: &str, sql: &str) -> String {
        let out = self.run_psql(user, password, db, sql);
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Seed 003's destination tables: dst_table01's item holds 10 characters, table01's 20.
pub const SEED_003_DESTINATIONS: &str =
    "CREATE TABLE dst_table01 (id integer NOT NULL, user_id varchar(10), item varchar(10), PRIMARY KEY (id));
     CREATE TABLE dst_table02 (id integer NOT NULL, user_id varchar(10), point integer, PRIMARY KEY (id));";

/// Seed 003's jdbc_sink_postgresql.json as the seed has it (a JSON boolean included), with
/// this connection URL and dead letter queue.
pub fn seed_003_sink_json(url: &str, dlq: &str) -> String {
    format!(
        r#"{{
  "name": "jdbc_sink_postgresql",
  "config": {{
    "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
    "connection.url": "{url}",
    "connection.user": "kcuser",
    "connection.password": "kcpw",
    "topics": "dst_table01,dst_table02",
    "tasks.max": "5",
    "errors.tolerance": "all",
    "errors.deadletterqueue.topic.name": "{dlq}",
    "errors.deadletterqueue.context.headers.enable": true
  }}
}}"#
    )
}

/// Check that a DLQ record (as `read_topic` returns it) is seed 003's long item refused by
/// dst_table01's varchar(10) at `put`, with PostgreSQL's error; its message.
pub fn assert_long_item_dead_lettered(record: &serde_json::Value) -> String {
    let h = &record["headers"];
    let message = crate::error_header(h, "exception.message").unwrap_or_default();
    assert!(
        message.contains("value too long for type character varying(10)")
            && message.contains("22001"),
        "{h}"
    );
    assert_eq!(
        crate::error_header(h, "topic").as_deref(),
        Some("dst_table01"),
        "{h}"
    );
    assert_eq!(
        crate::error_header(h, "stage").as_deref(),
        Some("TASK_PUT"),
        "{h}"
    );
    assert!(
        record["value"]
            .as_str()
            .unwrap_or_default()
            .contains(r#""item":"super-apple-0000""#),
        "{record}"
    );
    message
}
