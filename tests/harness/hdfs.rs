//! A real HDFS for a test: a NameNode and a DataNode of Hadoop 2.7.3 or of Hadoop 3 (Java 17)
//! from the jars scripts/testbed/hdfs.sh puts in target/, in a temporary directory, on
//! loopback ports; killed on drop. `shell` is Hadoop's own FsShell (`hdfs dfs`), the
//! independent reader of what Ferry wrote.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{free_port, say, wait_for};

/// A release of Hadoop the harness runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hadoop {
    /// 2.7.3, from the pyspark 2.4.8 source package (the jars Confluent's HDFS 2 connector
    /// was built against).
    Two,
    /// The Hadoop 3 release pinned in scripts/testbed/hadoop3/pom.xml, from Maven Central.
    Three,
}

impl std::fmt::Display for Hadoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Hadoop::Two => "Hadoop 2.7.3",
            Hadoop::Three => "Hadoop 3",
        })
    }
}

impl Hadoop {
    /// The directory of this release's jars.
    fn jars(self) -> PathBuf {
        let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
        let (jars, ready) = match self {
            Hadoop::Two => (target.join("hdfs/jars"), ".complete"),
            Hadoop::Three => (target.join("hdfs3/libs"), "hadoop-client-minicluster-"),
        };
        let there = fs::read_dir(&jars)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(ready));
        assert!(
            there,
            "no {self} jars in {}: run ./scripts/testbed/hdfs.sh (make test does)",
            jars.display()
        );
        jars
    }
}

fn property(name: &str, value: &str) -> String {
    format!("  <property><name>{name}</name><value>{value}</value></property>\n")
}

fn site(properties: &[(&str, String)]) -> String {
    let body: String = properties.iter().map(|(k, v)| property(k, v)).collect();
    format!("<?xml version=\"1.0\"?>\n<configuration>\n{body}</configuration>\n")
}

pub struct Hdfs {
    /// `host:port` of the NameNode's RPC, as `store.url` takes it after `hdfs://`.
    pub namenode: String,
    hadoop: Hadoop,
    dir: tempfile::TempDir,
    namenode_process: Option<Child>,
    datanode_process: Option<Child>,
}

impl Hdfs {
    /// Format a new file system of Hadoop 2.7.3 and start its NameNode and DataNode; returns
    /// once the DataNode has reported its blocks (the file system takes writes).
    pub fn start() -> Hdfs {
        Hdfs::start_hadoop(Hadoop::Two)
    }

    /// `start`, of the given release.
    pub fn start_hadoop(hadoop: Hadoop) -> Hdfs {
        let started = std::time::Instant::now();
        let dir = tempfile::tempdir().expect("tempdir for HDFS");
        let rpc = free_port();
        let at = |port: u16| format!("127.0.0.1:{port}");
        let root = dir.path();
        let conf = root.join("conf");
        if hadoop == Hadoop::Two {
            // Its web servers look for these on the classpath (Hadoop 3's jar has its own).
            for sub in ["hdfs", "datanode", "static", "secondary"] {
                fs::create_dir_all(root.join("res/webapps").join(sub)).expect("webapps dir");
            }
        }
        fs::create_dir_all(&conf).expect("conf dir");
        let namenode = at(rpc);
        fs::write(
            conf.join("core-site.xml"),
            site(&[("fs.defaultFS", format!("hdfs://{namenode}"))]),
        )
        .expect("core-site.xml");
        let url = |sub: &str| format!("file://{}", root.join(sub).display());
        fs::write(
            conf.join("hdfs-site.xml"),
            site(&[
                ("dfs.namenode.name.dir", url("name")),
                ("dfs.datanode.data.dir", url("data")),
                ("dfs.replication", "1".into()),
                ("dfs.permissions.enabled", "false".into()),
                ("dfs.webhdfs.enabled", "false".into()),
                ("dfs.namenode.rpc-address", namenode.clone()),
                ("dfs.namenode.http-address", at(free_port())),
                ("dfs.namenode.secondary.http-address", at(free_port())),
                ("dfs.datanode.address", at(free_port())),
                ("dfs.datanode.http.address", at(free_port())),
                ("dfs.datanode.ipc.address", at(free_port())),
                (
                    "dfs.namenode.datanode.registration.ip-hostname-check",
                    "false".into(),
                ),
                // Small blocks, so that a file of a few MB spans several.
                ("dfs.blocksize", "1048576".into()),
                ("dfs.namenode.fs-limits.min-block-size", "4096".into()),
                ("dfs.namenode.safemode.extension", "0".into()),
            ]),
        )
        .expect("hdfs-site.xml");
        fs::write(
            conf.join("log4j.properties"),
            "log4j.rootLogger=WARN,console\n\
             log4j.appender.console=org.apache.log4j.ConsoleAppender\n\
             log4j.appender.console.target=System.err\n\
             log4j.appender.console.layout=org.apache.log4j.PatternLayout\n\
             log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n\n\
             log4j.logger.org.apache.hadoop.hdfs.server.datanode.DataNode=INFO\n",
        )
        .expect("log4j.properties");
        let mut hdfs = Hdfs {
            namenode,
            hadoop,
            dir,
            namenode_process: None,
            datanode_process: None,
        };
        let format = hdfs
            .java("format")
            .args([
                "org.apache.hadoop.hdfs.server.namenode.NameNode",
                "-format",
                "-force",
                "-nonInteractive",
            ])
            .status()
            .expect("run java (Java 17: scripts/testbed/hdfs.sh installs it)");
        assert!(
            format.success(),
            "formatting HDFS failed: {}",
            hdfs.log("format")
        );
        hdfs.start_namenode();
        let datanode = hdfs
            .java("datanode")
            .arg("org.apache.hadoop.hdfs.server.datanode.DataNode")
            .spawn()
            .expect("start the DataNode");
        hdfs.datanode_process = Some(datanode);
        wait_for(
            "the DataNode's first block report",
            Duration::from_secs(90),
            || {
                hdfs.log("datanode")
                    .contains("Successfully sent block report")
                    .then_some(())
            },
        );
        say(format!(
            "HDFS ({hadoop}) at hdfs://{} (NameNode and DataNode ready in {} ms)",
            hdfs.namenode,
            started.elapsed().as_millis()
        ));
        hdfs
    }

    /// The release this file system runs.
    pub fn hadoop(&self) -> Hadoop {
        self.hadoop
    }

    /// A JVM with the HDFS classpath; its stderr goes to `<name>.log`.
    fn java(&self, name: &str) -> Command {
        let root = self.dir.path();
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join(format!("{name}.log")))
            .expect("log file");
        let classpath = format!(
            "{}:{}:{}/*",
            root.join("conf").display(),
            root.join("res").display(),
            self.hadoop.jars().display()
        );
        let mut java = Command::new("java");
        crate::dies_with_parent(&mut java)
            .args([
                "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "--add-opens=java.base/java.nio=ALL-UNNAMED",
                "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
                "-Xmx256m",
                "-cp",
            ])
            .arg(classpath)
            .env("HADOOP_USER_NAME", "ferry")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        java
    }

    /// After a failed test: whether each process still runs, the last lines of its log, and
    /// the whole logs copied out of the temporary directory (which goes with `self`).
    fn keep_logs(&mut self) {
        let keep = self.dir.path().with_extension("hdfs-failed");
        let kept = fs::create_dir_all(&keep).is_ok();
        let states = [
            (
                "namenode",
                self.namenode_process.as_mut().map(|c| c.try_wait()),
            ),
            (
                "datanode",
                self.datanode_process.as_mut().map(|c| c.try_wait()),
            ),
        ];
        for (name, state) in states {
            let state = match state {
                Some(Ok(None)) => "running".to_string(),
                Some(Ok(Some(exit))) => format!("exited: {exit}"),
                Some(Err(e)) => format!("unknown: {e}"),
                None => "not started".to_string(),
            };
            let log = self.log(name);
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!("---- {} {name} ({state}), last lines ----", self.hadoop);
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
            if kept {
                let _ = fs::write(keep.join(format!("{name}.log")), &log);
            }
        }
        if kept {
            eprintln!("---- {} logs kept in {} ----", self.hadoop, keep.display());
        }
    }

    fn log(&self, name: &str) -> String {
        fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Start (or restart) the NameNode on its port; returns once it takes connections and has
    /// left safe mode.
    pub fn start_namenode(&mut self) {
        let child = self
            .java("namenode")
            .arg("org.apache.hadoop.hdfs.server.namenode.NameNode")
            .stdout(Stdio::null())
            .spawn()
            .expect("start the NameNode");
        self.namenode_process = Some(child);
        wait_for("the NameNode's RPC port", Duration::from_secs(60), || {
            std::net::TcpStream::connect(&self.namenode).ok().map(drop)
        });
        // A restarted NameNode serves no block until the DataNode has reported its blocks
        // again: it stays in safe mode until then.
        wait_for(
            "the NameNode out of safe mode",
            Duration::from_secs(60),
            || {
                let out = self
                    .java("dfsadmin")
                    .arg("org.apache.hadoop.hdfs.tools.DFSAdmin")
                    .args(["-safemode", "get"])
                    .output()
                    .ok()?;
                String::from_utf8_lossy(&out.stdout)
                    .contains("Safe mode is OFF")
                    .then_some(())
            },
        );
    }

    /// Kill the NameNode (the file system becomes unreachable; the DataNode waits for it).
    pub fn kill_namenode(&mut self) {
        if let Some(mut child) = self.namenode_process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Run FsShell (`hdfs dfs ARGS`): whether it succeeded, its stdout and its stderr.
    fn run_shell(&self, args: &[&str]) -> (bool, String, String) {
        let out = self
            .java("shell")
            .arg("org.apache.hadoop.fs.FsShell")
            .args(args)
            .stderr(Stdio::piped())
            .output()
            .expect("run FsShell");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    /// Run FsShell (`hdfs dfs ARGS`); its stdout, or a panic with its stderr.
    pub fn shell(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run_shell(args);
        assert!(ok, "hdfs dfs {args:?} failed: {stdout}\n{stderr}");
        stdout
    }

    /// The paths of the files under `dir`, recursively, as FsShell lists them; none if `dir`
    /// does not exist.
    pub fn files(&self, dir: &str) -> Vec<String> {
        let (ok, stdout, stderr) = self.run_shell(&["-ls", "-R", dir]);
        if !ok && stderr.contains("No such file or directory") {
            return Vec::new();
        }
        assert!(ok, "hdfs dfs -ls -R {dir} failed: {stdout}\n{stderr}");
        let mut files: Vec<String> = stdout
            .lines()
            .filter(|l| l.starts_with('-'))
            .filter_map(|l| l.split_whitespace().last().map(str::to_string))
            .collect();
        files.sort();
        files
    }

    /// The contents of the files `glob` matches, one after another (`hdfs dfs -cat`); empty
    /// when it matches nothing.
    pub fn cat(&self, glob: &str) -> String {
        let (ok, stdout, stderr) = self.run_shell(&["-cat", glob]);
        if !ok && stderr.contains("No such file or directory") {
            return String::new();
        }
        assert!(ok, "hdfs dfs -cat {glob} failed: {stdout}\n{stderr}");
        stdout
    }

    /// Copy an HDFS file to a local path (`hdfs dfs -get`).
    pub fn get(&self, path: &str, to: &Path) {
        self.shell(&["-get", path, &to.display().to_string()]);
    }
}

impl Drop for Hdfs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.keep_logs();
        }
        for child in [
            self.datanode_process.as_mut(),
            self.namenode_process.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
