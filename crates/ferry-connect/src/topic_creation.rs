//! Source topics created by the worker (KIP-158): a source connector that sets
//! `topic.creation.default.replication.factor` and `topic.creation.default.partitions` has
//! each topic it writes to created before its first record, with the settings of the first
//! group of `topic.creation.groups` whose `include` matches the topic and whose `exclude` does
//! not, or of the `default` group. Any other `topic.creation.<group>.<name>` is a topic config
//! (`cleanup.policy`, `compression.type`, …). Pure: parsing and matching only.

use std::collections::BTreeMap;

/// The prefix of every property of topic creation.
pub const PREFIX: &str = "topic.creation.";
/// The property listing the groups besides `default`.
pub const GROUPS: &str = "topic.creation.groups";
const DEFAULT: &str = "default";

/// One group's settings: `-1` leaves partitions or replication to the broker's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSettings {
    /// The group whose settings these are (`default`, or a name in `topic.creation.groups`).
    pub group: String,
    /// Partitions of a new topic (-1: the broker's default).
    pub partitions: i32,
    /// Its replication factor (-1: the broker's default).
    pub replication_factor: i32,
    /// Topic configs, e.g. `cleanup.policy`.
    pub configs: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
struct Group {
    settings: TopicSettings,
    include: Vec<regex::Regex>,
    exclude: Vec<regex::Regex>,
}

/// A source connector's topic creation.
#[derive(Clone, Debug)]
pub struct TopicCreation {
    groups: Vec<Group>,
    default: TopicSettings,
}

/// A problem with a property: its name and what is wrong.
pub type Problem = (String, String);

/// A partition count or replication factor: a positive number, or -1 for the broker's.
fn count(config: &BTreeMap<String, String>, name: &str) -> Result<Option<i32>, Problem> {
    let Some(value) = config.get(name) else {
        return Ok(None);
    };
    match value.trim().parse::<i32>() {
        Ok(n) if n >= 1 || n == -1 => Ok(Some(n)),
        _ => Err((
            name.to_string(),
            format!("{value:?} is not a positive number or -1 (the broker's default)"),
        )),
    }
}

fn patterns(config: &BTreeMap<String, String>, name: &str) -> Result<Vec<regex::Regex>, Problem> {
    crate::config::split_list(config.get(name).map_or("", String::as_str))
        .iter()
        // Kafka Connect matches the whole topic name.
        .map(|p| {
            regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                (
                    name.to_string(),
                    format!("{p:?} is not a regular expression: {e}"),
                )
            })
        })
        .collect()
}

impl TopicCreation {
    /// From a source connector's config: `None` when it does not create topics (neither
    /// default setting given); every problem, each with the property it is about.
    pub fn from_config(config: &BTreeMap<String, String>) -> Result<Option<Self>, Vec<Problem>> {
        let mut problems = Vec::new();
        let key = |group: &str, name: &str| format!("{PREFIX}{group}.{name}");
        let partitions_key = key(DEFAULT, "partitions");
        let replication_key = key(DEFAULT, "replication.factor");
        let partitions = count(config, &partitions_key)
            .map_err(|p| problems.push(p))
            .ok()
            .flatten();
        let replication = count(config, &replication_key)
            .map_err(|p| problems.push(p))
            .ok()
            .flatten();
        let names = crate::config::split_list(config.get(GROUPS).map_or("", String::as_str));
        let given = config.keys().any(|k| k.starts_with(PREFIX) && k != GROUPS);
        if partitions.is_none() && replication.is_none() && !given && problems.is_empty() {
            return Ok(None);
        }
        for (value, name) in [
            (partitions, &partitions_key),
            (replication, &replication_key),
        ] {
            if value.is_none() && !config.contains_key(name.as_str()) {
                problems.push((
                    name.clone(),
                    "topic creation needs both topic.creation.default.partitions and topic.creation.default.replication.factor".into(),
                ));
            }
        }
        // Placeholders while there are problems: the groups are checked all the same.
        let (partitions, replication) = (partitions.unwrap_or(-1), replication.unwrap_or(-1));
        let configs = |group: &str| -> BTreeMap<String, String> {
            let prefix = format!("{PREFIX}{group}.");
            config
                .iter()
                .filter_map(|(k, v)| {
                    let name = k.strip_prefix(&prefix)?;
                    let own = ["partitions", "replication.factor", "include", "exclude"];
                    (!own.contains(&name)).then(|| (name.to_string(), v.clone()))
                })
                .collect()
        };
        let default = TopicSettings {
            group: DEFAULT.into(),
            partitions,
            replication_factor: replication,
            configs: configs(DEFAULT),
        };
        let mut groups = Vec::new();
        for name in &names {
            if name == DEFAULT {
                problems.push((
                    GROUPS.into(),
                    "\"default\" is always a group: do not list it".into(),
                ));
                continue;
            }
            let parsed = (
                count(config, &key(name, "partitions")),
                count(config, &key(name, "replication.factor")),
                patterns(config, &key(name, "include")),
                patterns(config, &key(name, "exclude")),
            );
            match parsed {
                (Ok(p), Ok(r), Ok(include), Ok(exclude)) => {
                    let mut own = default.configs.clone();
                    own.extend(configs(name));
                    groups.push(Group {
                        settings: TopicSettings {
                            group: name.clone(),
                            partitions: p.unwrap_or(partitions),
                            replication_factor: r.unwrap_or(replication),
                            configs: own,
                        },
                        include,
                        exclude,
                    });
                }
                (p, r, i, e) => {
                    problems.extend(p.err());
                    problems.extend(r.err());
                    problems.extend(i.err());
                    problems.extend(e.err());
                }
            }
        }
        if problems.is_empty() {
            Ok(Some(TopicCreation { groups, default }))
        } else {
            Err(problems)
        }
    }

    /// The settings a new topic is created with.
    pub fn settings_for(&self, topic: &str) -> &TopicSettings {
        self.groups
            .iter()
            .find(|g| {
                g.include.iter().any(|r| r.is_match(topic))
                    && !g.exclude.iter().any(|r| r.is_match(topic))
            })
            .map_or(&self.default, |g| &g.settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn off_unless_the_default_group_is_given() {
        assert!(TopicCreation::from_config(&config(&[]))
            .expect("valid")
            .is_none());
        let problems =
            TopicCreation::from_config(&config(&[("topic.creation.default.partitions", "3")]))
                .expect_err("half given");
        assert_eq!(problems[0].0, "topic.creation.default.replication.factor");
    }

    #[test]
    fn the_first_matching_group_wins_and_inherits_the_default() {
        let c = TopicCreation::from_config(&config(&[
            ("topic.creation.default.partitions", "3"),
            ("topic.creation.default.replication.factor", "-1"),
            ("topic.creation.default.cleanup.policy", "delete"),
            ("topic.creation.groups", "compacted, big"),
            ("topic.creation.compacted.include", "state-.*"),
            ("topic.creation.compacted.exclude", "state-raw"),
            ("topic.creation.compacted.cleanup.policy", "compact"),
            ("topic.creation.big.include", "state-.*,big-.*"),
            ("topic.creation.big.partitions", "12"),
        ]))
        .expect("valid")
        .expect("on");
        let s = c.settings_for("state-users");
        assert_eq!(
            (s.group.as_str(), s.partitions, s.replication_factor),
            ("compacted", 3, -1)
        );
        assert_eq!(s.configs["cleanup.policy"], "compact");
        let s = c.settings_for("state-raw");
        assert_eq!(
            (s.group.as_str(), s.partitions),
            ("big", 12),
            "excluded from compacted"
        );
        assert_eq!(s.configs["cleanup.policy"], "delete");
        assert_eq!(c.settings_for("other").group, "default");
        assert_eq!(
            c.settings_for("xstate-users").group,
            "default",
            "whole-name match"
        );
    }

    #[test]
    fn bad_values_name_their_property() {
        let problems = TopicCreation::from_config(&config(&[
            ("topic.creation.default.partitions", "0"),
            ("topic.creation.default.replication.factor", "3"),
            ("topic.creation.groups", "g"),
            ("topic.creation.g.include", "("),
        ]))
        .expect_err("invalid");
        let names: Vec<&str> = problems.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            names.contains(&"topic.creation.default.partitions"),
            "{problems:?}"
        );
        assert!(names.contains(&"topic.creation.g.include"), "{problems:?}");
    }
}
