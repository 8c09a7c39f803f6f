//! Which topics a sink connector consumes (Kafka Connect's rule): exactly one of `topics`, a
//! comma-separated list, and `topics.regex`, a pattern matching the whole topic name (internal
//! topics, `__…`, never match a pattern).

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{ConnectError, Result};

/// The topics a sink consumes.
#[derive(Clone, Debug)]
pub enum Topics {
    /// `topics`.
    List(BTreeSet<String>),
    /// `topics.regex`, anchored to whole names.
    Regex(regex::Regex),
}

impl Topics {
    /// From a sink connector's config; a config error names what is wrong (both given,
    /// neither, a pattern that does not compile).
    pub fn of(config: &BTreeMap<String, String>) -> Result<Topics> {
        let given = |k: &str| config.get(k).filter(|v| !v.trim().is_empty());
        match (given("topics"), given("topics.regex")) {
            (Some(_), Some(_)) => Err(ConnectError::config(
                "topics",
                "topics and topics.regex are mutually exclusive; set only one",
            )),
            (None, None) => Err(ConnectError::config(
                "topics",
                "must configure one of topics or topics.regex",
            )),
            (Some(list), None) => Ok(Topics::List(
                crate::config::split_list(list).into_iter().collect(),
            )),
            (None, Some(pattern)) => regex::Regex::new(&format!("^(?:{pattern})$"))
                .map(Topics::Regex)
                .map_err(|e| {
                    ConnectError::config(
                        "topics.regex",
                        format!("not a valid regular expression: {e}"),
                    )
                    .with_value(pattern)
                }),
        }
    }

    /// Whether the sink consumes `topic`.
    pub fn matches(&self, topic: &str) -> bool {
        match self {
            Topics::List(list) => list.contains(topic),
            Topics::Regex(re) => re.is_match(topic) && !topic.starts_with("__"),
        }
    }

    /// Of the topics in `by_topic` (keyed by name), what the sink consumes: a list is looked
    /// up name by name, a pattern tried on every topic (a scheduler pass does this for every
    /// sink connector, over every topic of the cluster).
    pub fn of_these<'a, V>(&self, by_topic: &'a BTreeMap<&str, V>) -> Vec<&'a V> {
        match self {
            Topics::List(list) => list
                .iter()
                .filter_map(|t| by_topic.get(t.as_str()))
                .collect(),
            Topics::Regex(_) => by_topic
                .iter()
                .filter(|(t, _)| self.matches(t))
                .map(|(_, v)| v)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::props;

    #[test]
    fn of_these_takes_what_matches_takes() {
        let by_topic: BTreeMap<&str, u32> = [("a", 1), ("b", 2), ("dst_1", 3), ("__internal", 4)]
            .into_iter()
            .collect();
        for (key, value) in [
            ("topics", "a, dst_1, missing, __internal"),
            ("topics.regex", "dst_.*|a"),
            ("topics.regex", ".*"),
        ] {
            let topics = Topics::of(&props(&[(key, value)])).expect("a rule");
            let mut expected: Vec<&u32> = by_topic
                .iter()
                .filter(|(t, _)| topics.matches(t))
                .map(|(_, v)| v)
                .collect();
            let mut got = topics.of_these(&by_topic);
            got.sort();
            expected.sort();
            assert_eq!(got, expected, "{key}={value}");
        }
    }

    #[test]
    fn a_list_or_a_pattern_of_whole_names_exactly_one() {
        let list = Topics::of(&props(&[("topics", "a, b")])).expect("a list");
        assert!(list.matches("a") && list.matches("b") && !list.matches("ab"));
        let pattern = Topics::of(&props(&[("topics.regex", "dst_.*")])).expect("a pattern");
        assert!(pattern.matches("dst_table01"));
        assert!(!pattern.matches("x_dst_table01"), "the whole name");
        let internal = Topics::of(&props(&[("topics.regex", ".*")])).expect("a pattern");
        assert!(!internal.matches("__consumer_offsets"));
        for (config, property) in [
            (props(&[("topics", "a"), ("topics.regex", "a")]), "topics"),
            (props(&[]), "topics"),
            (props(&[("topics.regex", "(")]), "topics.regex"),
        ] {
            let e = Topics::of(&config).expect_err("refused");
            assert_eq!(e.config.map(|c| c.property).as_deref(), Some(property));
        }
    }
}
