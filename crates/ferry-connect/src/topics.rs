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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::props;

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
