//! Log levels changed at run time (Kafka Connect's `/admin/loggers`, KIP-495): a logger is a
//! `tracing` target (`ferry_worker::sink`, or a prefix of targets such as `ferry_worker`); the
//! levels set are kept here and applied by rebuilding the node's filter (tracing-subscriber's
//! reload layer). The rules — levels by Kafka Connect's (log4j's) names, a logger's effective
//! level from its closest ancestor, a change that also sets its descendants — are pure and
//! tested without a subscriber. Levels set for the whole cluster (`scope=cluster`) are kept in
//! the replicated state; every node follows them, applying each change once, in order.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ferry_meta::state::ClusterLogLevel;
use ferry_meta::store::StateReader;
use tokio::sync::watch;

/// What a logger's level is, as Kafka Connect shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggerLevel {
    /// log4j's name of the level (`INFO`, `DEBUG`, …).
    pub level: &'static str,
    /// When it was set through the API (ms since the epoch); `None` for a level from the
    /// node's start.
    pub last_modified: Option<u64>,
}

/// log4j's levels, as Kafka Connect accepts them (any case), and the `tracing` filter level
/// each stands for.
const LEVELS: &[(&str, &str)] = &[
    ("OFF", "off"),
    ("FATAL", "error"),
    ("ERROR", "error"),
    ("WARN", "warn"),
    ("INFO", "info"),
    ("DEBUG", "debug"),
    ("TRACE", "trace"),
    ("ALL", "trace"),
];

/// The level a name stands for, by Kafka Connect's name in any case.
pub fn parse_level(name: &str) -> Option<&'static str> {
    LEVELS
        .iter()
        .find(|(log4j, _)| log4j.eq_ignore_ascii_case(name.trim()))
        .map(|(log4j, _)| *log4j)
}

fn filter_level(log4j: &str) -> &'static str {
    LEVELS
        .iter()
        .find(|(l, _)| *l == log4j)
        .map_or("info", |(_, f)| *f)
}

fn log4j_level(filter: &str) -> Option<&'static str> {
    LEVELS
        .iter()
        .find(|(_, f)| f.eq_ignore_ascii_case(filter.trim()))
        .map(|(l, _)| *l)
}

/// The levels of a node's loggers: the root's, those set explicitly, and the directives of the
/// node's start this does not understand (kept as they are).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Levels {
    root: LoggerLevel,
    explicit: BTreeMap<String, LoggerLevel>,
    other: Vec<String>,
}

/// The name of the root logger.
pub const ROOT: &str = "root";

impl Levels {
    /// The levels a filter's directives (`info,openraft=warn,…`) set.
    pub fn from_directives(directives: &str) -> Levels {
        let mut levels = Levels {
            root: LoggerLevel {
                level: "ERROR",
                last_modified: None,
            },
            explicit: BTreeMap::new(),
            other: Vec::new(),
        };
        for directive in directives
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            let from_start = |level| LoggerLevel {
                level,
                last_modified: None,
            };
            match directive.split_once('=') {
                None => match log4j_level(directive) {
                    Some(level) => levels.root = from_start(level),
                    None => levels.other.push(directive.to_string()),
                },
                Some((target, level)) if is_target(target) => match log4j_level(level) {
                    Some(level) => {
                        levels
                            .explicit
                            .insert(target.to_string(), from_start(level));
                    }
                    None => levels.other.push(directive.to_string()),
                },
                Some(_) => levels.other.push(directive.to_string()),
            }
        }
        levels
    }

    /// The root's level and each explicit one, by name (Kafka Connect's `GET /admin/loggers`).
    pub fn all(&self) -> BTreeMap<String, LoggerLevel> {
        let mut all = self.explicit.clone();
        all.insert(ROOT.to_string(), self.root.clone());
        all
    }

    /// The level of logger `name`: its own, else its closest ancestor's, else the root's.
    pub fn of(&self, name: &str) -> LoggerLevel {
        if name == ROOT {
            return self.root.clone();
        }
        let mut at = name;
        loop {
            if let Some(level) = self.explicit.get(at) {
                return level.clone();
            }
            match at.rsplit_once("::") {
                Some((parent, _)) => at = parent,
                None => return self.root.clone(),
            }
        }
    }

    /// Set logger `name` and every explicitly set descendant to `level` at `now` (ms): the
    /// loggers changed, sorted.
    pub fn set(&mut self, name: &str, level: &'static str, now: u64) -> Vec<String> {
        let set = LoggerLevel {
            level,
            last_modified: Some(now),
        };
        if name == ROOT {
            self.root = set;
            return vec![ROOT.to_string()];
        }
        let descendant = format!("{name}::");
        let mut changed: Vec<String> = self
            .explicit
            .keys()
            .filter(|k| k.starts_with(&descendant))
            .cloned()
            .collect();
        changed.push(name.to_string());
        for logger in &changed {
            self.explicit.insert(logger.clone(), set.clone());
        }
        changed.sort();
        changed
    }

    /// The filter directives these levels make.
    pub fn directives(&self) -> String {
        let mut parts = vec![filter_level(self.root.level).to_string()];
        parts.extend(
            self.explicit
                .iter()
                .map(|(target, l)| format!("{target}={}", filter_level(l.level))),
        );
        parts.extend(self.other.iter().cloned());
        parts.join(",")
    }
}

/// Whether `name` can be a logger: a `tracing` target (letters, digits, `_`, `-`, `.` and
/// `::` separators).
pub fn is_target(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// Applies filter directives to the node's logging; the error says why they were refused.
pub type Apply = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// A node's loggers: their levels and how to apply them.
#[derive(Clone)]
pub struct Loggers {
    levels: Arc<Mutex<Levels>>,
    apply: Option<Apply>,
}

impl Loggers {
    /// The loggers of a node whose filter started from `directives`, changed through `apply`
    /// (`None`: levels are kept but not applied, for a node without a reloadable filter).
    pub fn new(directives: &str, apply: Option<Apply>) -> Loggers {
        Loggers {
            levels: Arc::new(Mutex::new(Levels::from_directives(directives))),
            apply,
        }
    }

    fn levels(&self) -> std::sync::MutexGuard<'_, Levels> {
        self.levels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every explicit level and the root's.
    pub fn all(&self) -> BTreeMap<String, LoggerLevel> {
        self.levels().all()
    }

    /// Logger `name`'s level.
    pub fn of(&self, name: &str) -> LoggerLevel {
        self.levels().of(name)
    }

    /// Set logger `name` (and its descendants) to `level` and apply it: the loggers changed.
    pub fn set(&self, name: &str, level: &'static str) -> Result<Vec<String>, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut levels = self.levels();
        let mut next = levels.clone();
        let changed = next.set(name, level, now);
        if let Some(apply) = &self.apply {
            apply(&next.directives())?;
        }
        *levels = next;
        tracing::info!(logger = name, level, "log level set");
        Ok(changed)
    }
}

/// The cluster-wide changes after the `seen`-th, in the order they were made: (logger, level,
/// its place). A level this build does not know is skipped.
pub fn cluster_changes_after(
    levels: &BTreeMap<String, ClusterLogLevel>,
    seen: u64,
) -> Vec<(String, &'static str, u64)> {
    let mut changes: Vec<(String, &'static str, u64)> = levels
        .iter()
        .filter(|(_, l)| l.seq > seen)
        .filter_map(|(logger, l)| Some((logger.clone(), parse_level(&l.level)?, l.seq)))
        .collect();
    changes.sort_by_key(|(_, _, seq)| *seq);
    changes
}

/// Apply the cluster-wide log levels on this node as the replicated state changes, until
/// `shutdown`: those set before the node started first, then each new one.
pub async fn follow_cluster_levels(
    loggers: Loggers,
    state: StateReader,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut applied = state.applied();
    let mut seen = 0;
    loop {
        let changes = cluster_changes_after(&state.read().state.log_levels, seen);
        for (logger, level, seq) in changes {
            if let Err(e) = loggers.set(&logger, level) {
                tracing::warn!(%logger, level, error = %e, "cannot apply the cluster's log level");
            }
            seen = seq;
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_changes_come_in_their_order_once() {
        let level = |level: &str, seq| ClusterLogLevel {
            level: level.into(),
            seq,
        };
        let levels = BTreeMap::from([
            ("a".to_string(), level("debug", 3)),
            ("b".to_string(), level("WARN", 1)),
            ("c".to_string(), level("nonsense", 4)),
            ("d".to_string(), level("TRACE", 2)),
        ]);
        assert_eq!(
            cluster_changes_after(&levels, 0),
            [
                ("b".to_string(), "WARN", 1),
                ("d".to_string(), "TRACE", 2),
                ("a".to_string(), "DEBUG", 3)
            ]
        );
        assert_eq!(
            cluster_changes_after(&levels, 2),
            [("a".to_string(), "DEBUG", 3)]
        );
        assert!(cluster_changes_after(&levels, 4).is_empty());
    }

    #[test]
    fn levels_come_from_the_start_directives_and_descend_to_children() {
        let levels = Levels::from_directives("info,openraft=warn,ferry_worker::sink=debug,a[b]=x");
        assert_eq!(levels.of(ROOT).level, "INFO");
        assert_eq!(levels.of("openraft").level, "WARN");
        assert_eq!(levels.of("openraft::replication").level, "WARN");
        assert_eq!(levels.of("ferry_worker").level, "INFO");
        assert_eq!(levels.of("ferry_worker::sink::loop").level, "DEBUG");
        assert_eq!(
            levels.all().keys().collect::<Vec<_>>(),
            ["ferry_worker::sink", "openraft", "root"]
        );
        // What it does not understand is kept.
        assert!(levels.directives().ends_with("a[b]=x"));
    }

    #[test]
    fn a_change_sets_the_logger_and_its_set_descendants_and_says_which() {
        let mut levels = Levels::from_directives("info,ferry_worker::sink=debug,ferry_meta=warn");
        let changed = levels.set("ferry_worker", "TRACE", 7);
        assert_eq!(changed, ["ferry_worker", "ferry_worker::sink"]);
        assert_eq!(
            levels.of("ferry_worker::sink"),
            LoggerLevel {
                level: "TRACE",
                last_modified: Some(7)
            }
        );
        assert_eq!(levels.of("ferry_meta").last_modified, None);
        assert_eq!(
            levels.directives(),
            "info,ferry_meta=warn,ferry_worker=trace,ferry_worker::sink=trace"
        );
        assert_eq!(levels.set(ROOT, "FATAL", 8), ["root"]);
        assert!(levels.directives().starts_with("error,"));
    }

    #[test]
    fn levels_are_log4j_s_names_in_any_case() {
        assert_eq!(parse_level("debug"), Some("DEBUG"));
        assert_eq!(parse_level("All"), Some("ALL"));
        assert_eq!(parse_level("verbose"), None);
    }
}
