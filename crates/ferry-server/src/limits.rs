//! What one client request may ask of the cluster (`[limits]` in cluster.toml): bounds on a
//! connector's name, config and tasks, and on a Raft entry, each with its default, checked
//! before anything is written, with a message naming the limit and the value.

use std::collections::BTreeMap;

use ferry_connect::Validation;
use serde::Deserialize;

/// The problem of an empty connector name.
pub const NAME_REQUIRED: &str = "a connector name is required";

/// The limits of one node. Every node of a cluster should have the same.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// The most tasks one connector may have (`tasks.max` above it is refused).
    #[serde(default = "Limits::default_max_tasks_per_connector")]
    pub max_tasks_per_connector: u32,
    /// The largest connector config, in bytes of its property names and values.
    #[serde(default = "Limits::default_max_config_bytes")]
    pub max_config_bytes: usize,
    /// The longest connector name, in characters.
    #[serde(default = "Limits::default_max_name_length")]
    pub max_name_length: usize,
    /// The largest Raft log entry a write may make, in bytes as stored. Large entries delay
    /// replication and snapshots for everyone; nothing Ferry writes needs more.
    #[serde(default = "Limits::default_max_entry_bytes")]
    pub max_entry_bytes: usize,
}

impl Limits {
    const fn default_max_tasks_per_connector() -> u32 {
        1000
    }
    const fn default_max_config_bytes() -> usize {
        1024 * 1024
    }
    const fn default_max_name_length() -> usize {
        255
    }
    const fn default_max_entry_bytes() -> usize {
        4 * 1024 * 1024
    }

    /// What is wrong with the limits themselves.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.max_tasks_per_connector == 0 {
            problems.push("limits.max_tasks_per_connector must be at least 1".to_string());
        }
        if self.max_name_length == 0 {
            problems.push("limits.max_name_length must be at least 1".to_string());
        }
        if self.max_config_bytes >= self.max_entry_bytes {
            problems.push(format!(
                "limits.max_config_bytes ({}) must be below limits.max_entry_bytes ({}): a \
                 config is stored in one entry",
                self.max_config_bytes, self.max_entry_bytes
            ));
        }
        problems
    }

    /// A connector name as Kafka Connect accepts it: not empty, no control characters (`/`,
    /// `&`, `%` and any other Unicode are fine), and not longer than the limit.
    /// What is wrong with a connector name (for the `name` property), if anything.
    pub fn check_name(&self, name: &str) -> Result<(), String> {
        if name.trim().is_empty() {
            return Err(NAME_REQUIRED.to_string());
        }
        if let Some((at, c)) = name.chars().enumerate().find(|(_, c)| c.is_control()) {
            return Err(format!(
                "a connector name may not contain control characters (U+{:04X} at \
                 character {})",
                c as u32,
                at + 1
            ));
        }
        let length = name.chars().count();
        if length > self.max_name_length {
            return Err(format!(
                "the name is {length} characters long, over the limit of {} \
                 ([limits] max_name_length)",
                self.max_name_length
            ));
        }
        Ok(())
    }

    /// The size of a config against its limit.
    pub fn check_config_size(&self, config: &BTreeMap<String, String>) -> Result<(), String> {
        let bytes: usize = config.iter().map(|(k, v)| k.len() + v.len()).sum();
        if bytes > self.max_config_bytes {
            return Err(format!(
                "the config is {bytes} bytes (names and values), over the limit of {} \
                 ([limits] max_config_bytes)",
                self.max_config_bytes
            ));
        }
        Ok(())
    }

    /// The limits that belong to a property, as errors of that property in `validation`:
    /// `tasks.max` above the task limit.
    pub fn check_properties(&self, config: &BTreeMap<String, String>, validation: &mut Validation) {
        let tasks = config
            .get("tasks.max")
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(tasks) = tasks.filter(|t| *t > u64::from(self.max_tasks_per_connector)) {
            validation.add_error(
                config,
                "tasks.max",
                format!(
                    "tasks.max is {tasks}, over the limit of {} tasks per connector ([limits] \
                     max_tasks_per_connector)",
                    self.max_tasks_per_connector
                ),
            );
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tasks_per_connector: Self::default_max_tasks_per_connector(),
            max_config_bytes: Self::default_max_config_bytes(),
            max_name_length: Self::default_max_name_length(),
            max_entry_bytes: Self::default_max_entry_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_tasks_per_connector: 4,
            max_config_bytes: 40,
            max_name_length: 8,
            max_entry_bytes: 1000,
        }
    }

    #[test]
    fn names_allow_what_kafka_connect_allows_and_refuse_the_rest_naming_the_limit() {
        let l = limits();
        for ok in ["a/b", "a&b%c", "données", "日本語", "x y"] {
            assert_eq!(l.check_name(ok), Ok(()), "{ok}");
        }
        assert!(l.check_name("").unwrap_err().contains("required"));
        assert!(l.check_name("  ").unwrap_err().contains("required"));
        let control = l.check_name("ab\ncd").unwrap_err();
        assert!(control.contains("U+000A at character 3"), "{control}");
        let long = l.check_name("日本語日本語日本語").unwrap_err();
        assert_eq!(
            long,
            "the name is 9 characters long, over the limit of 8 ([limits] max_name_length)"
        );
        assert_eq!(
            l.check_name("日本語日本語日本"),
            Ok(()),
            "characters, not bytes"
        );
    }

    #[test]
    fn a_config_over_its_size_is_refused_with_both_numbers() {
        let l = limits();
        let mut config = BTreeMap::from([("k".to_string(), "v".repeat(39))]);
        assert_eq!(l.check_config_size(&config), Ok(()));
        config.insert("x".into(), String::new());
        assert_eq!(
            l.check_config_size(&config).unwrap_err(),
            "the config is 41 bytes (names and values), over the limit of 40 ([limits] \
             max_config_bytes)"
        );
    }

    #[test]
    fn tasks_max_above_the_limit_is_an_error_of_tasks_max() {
        let l = limits();
        let config = BTreeMap::from([("tasks.max".to_string(), "5".to_string())]);
        let mut v = Validation {
            class: None,
            kind: None,
            fields: Vec::new(),
        };
        l.check_properties(&config, &mut v);
        assert_eq!(
            v.errors(),
            vec![
                "tasks.max: tasks.max is 5, over the limit of 4 tasks per connector ([limits] \
                  max_tasks_per_connector)"
            ]
        );
        let config = BTreeMap::from([("tasks.max".to_string(), "4".to_string())]);
        let mut v = Validation {
            class: None,
            kind: None,
            fields: Vec::new(),
        };
        l.check_properties(&config, &mut v);
        assert_eq!(v.error_count(), 0);
    }

    #[test]
    fn defaults_are_consistent_and_bad_limits_are_named() {
        assert!(Limits::default().problems().is_empty());
        let bad = Limits {
            max_tasks_per_connector: 0,
            max_config_bytes: 10,
            max_name_length: 0,
            max_entry_bytes: 10,
        };
        let problems = bad.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[2].contains("max_config_bytes (10) must be below"));
    }
}
