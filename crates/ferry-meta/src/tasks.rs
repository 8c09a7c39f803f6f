//! Task configs stored without repeating what every task of a connector shares: a connector
//! with 10,000 tasks whose configs differ in one property (or none) is stored, replicated and
//! snapshotted as one shared map and 10,000 small ones, not 10,000 copies of its config.

use crate::redact::ConfigMap;

/// Task configs as stored: what every task shares, and each task's own properties (those not
/// shared, or shared with another value — never a property absent from the task).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Split {
    /// What every task config has.
    pub shared: ConfigMap,
    /// Each task's own properties.
    pub own: Vec<ConfigMap>,
}

/// Split task configs into what they share and what is each one's own. With fewer than two
/// tasks, or nothing in common, everything stays each task's own.
pub fn split(configs: &[ConfigMap]) -> Split {
    let whole = || Split {
        shared: ConfigMap::default(),
        own: configs.to_vec(),
    };
    let Some((first, rest)) = configs.split_first() else {
        return whole();
    };
    if rest.is_empty() {
        return whole();
    }
    let shared: ConfigMap = first
        .0
        .iter()
        .filter(|(k, v)| rest.iter().all(|c| c.0.get(*k) == Some(*v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if shared.0.is_empty() {
        return whole();
    }
    let own = configs
        .iter()
        .map(|c| {
            c.0.iter()
                .filter(|(k, _)| !shared.0.contains_key(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect();
    Split { shared, own }
}

/// A task's whole config: the shared properties, then its own over them.
pub fn merged(shared: &ConfigMap, own: &ConfigMap) -> ConfigMap {
    if shared.0.is_empty() {
        return own.clone();
    }
    let mut whole = shared.clone();
    whole
        .0
        .extend(own.0.iter().map(|(k, v)| (k.clone(), v.clone())));
    whole
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> ConfigMap {
        pairs.iter().copied().collect()
    }

    #[test]
    fn what_every_task_shares_is_kept_once_and_merging_gives_each_config_back() {
        let configs: Vec<ConfigMap> = (0..4)
            .map(|i| {
                let i = i.to_string();
                cfg(&[("topics", "t"), ("file", "out"), ("task", &i)])
            })
            .collect();
        let s = split(&configs);
        assert_eq!(s.shared, cfg(&[("file", "out"), ("topics", "t")]));
        assert_eq!(s.own[3], cfg(&[("task", "3")]));
        let back: Vec<ConfigMap> = s.own.iter().map(|o| merged(&s.shared, o)).collect();
        assert_eq!(back, configs);
    }

    #[test]
    fn a_value_that_differs_or_a_key_some_lack_is_each_tasks_own() {
        let configs = vec![
            cfg(&[("a", "1"), ("b", "x"), ("c", "only here")]),
            cfg(&[("a", "1"), ("b", "y")]),
        ];
        let s = split(&configs);
        assert_eq!(s.shared, cfg(&[("a", "1")]));
        assert_eq!(
            s.own,
            vec![cfg(&[("b", "x"), ("c", "only here")]), cfg(&[("b", "y")])]
        );
        let back: Vec<ConfigMap> = s.own.iter().map(|o| merged(&s.shared, o)).collect();
        assert_eq!(back, configs);
    }

    #[test]
    fn one_task_or_nothing_in_common_stays_whole() {
        let one = vec![cfg(&[("a", "1")])];
        assert_eq!(split(&one).own, one);
        assert!(split(&one).shared.0.is_empty());
        let apart = vec![cfg(&[("a", "1")]), cfg(&[("a", "2")])];
        assert_eq!(split(&apart).own, apart);
        assert_eq!(split(&[]), Split::default());
        // Identical tasks: everything shared, nothing of their own.
        let same = vec![cfg(&[("a", "1")]); 3];
        let s = split(&same);
        assert_eq!(s.shared, cfg(&[("a", "1")]));
        assert!(s.own.iter().all(|o| o.0.is_empty()) && s.own.len() == 3);
    }
}
