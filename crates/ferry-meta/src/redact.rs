//! Connector config maps and the one rule for which of their values are secrets.
//!
//! Secrets are stored as given (in the Raft log and sled, see
//! docs/design.md#what-ferry-guarantees-and-what-it-does-not), but never returned by
//! the API, shown by the CLI or written to a log: `Debug` of a [`ConfigMap`] hides them, and
//! [`ConfigMap::redacted`] is what every read path returns.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// What a hidden value is replaced with.
pub const HIDDEN: &str = "[hidden]";

/// Whether a property holds a secret: `*.password`, `*.secret`, JAAS configs, credentials.
pub fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.ends_with("password")
        || key.ends_with("secret")
        || key.ends_with(".secret.key")
        || key.ends_with("jaas.config")
        || key.ends_with("user.info")
        || key.ends_with("credentials")
        || key.ends_with("api.key")
}

/// A property value with secrets removed: secret keys are hidden whole; URLs keep their shape
/// with any embedded password (`user:pw@`, `password=pw`) hidden.
pub fn redact_value(key: &str, value: &str) -> String {
    if is_secret(key) {
        return HIDDEN.to_string();
    }
    if key.to_ascii_lowercase().ends_with("url") || value.contains("://") {
        return redact_url(value);
    }
    value.to_string()
}

/// Hide the password in `scheme://user:password@host` and in `password=…` query parameters.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let start = rest_start + colon + 1;
                out.replace_range(start..rest_start + at, HIDDEN);
            }
        }
    }
    let mut result = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(pos) = find_password_param(rest) {
        let (head, tail) = rest.split_at(pos);
        result.push_str(head);
        let eq = tail.find('=').map_or(tail.len(), |i| i + 1);
        result.push_str(&tail[..eq]);
        result.push_str(HIDDEN);
        let end = tail[eq..].find(['&', ';']).map_or(tail.len(), |i| eq + i);
        rest = &tail[end..];
    }
    result.push_str(rest);
    result
}

fn find_password_param(s: &str) -> Option<usize> {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("password=") {
        let at = from + i;
        let before = lower[..at].chars().last();
        if matches!(before, None | Some('?') | Some('&') | Some(';')) {
            return Some(at);
        }
        from = at + "password=".len();
    }
    None
}

/// A Kafka Connect property map. Its `Debug` hides secrets, so it can appear in any trace.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Default)]
#[serde(transparent)]
pub struct ConfigMap(pub BTreeMap<String, String>);

impl ConfigMap {
    /// A property's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Whether it has no property.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The map with every secret hidden: what the API returns.
    pub fn redacted(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(k, v)| (k.clone(), redact_value(k, v)))
            .collect()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ConfigMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        ConfigMap(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl fmt::Debug for ConfigMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.redacted()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden() {
        let cases = [
            ("connection.password", "kcpw", HIDDEN),
            ("ssl.key.password", "x", HIDDEN),
            ("sasl.jaas.config", "user=a password=b", HIDDEN),
            ("connection.user", "kcuser", "kcuser"),
            ("topics", "a,b", "a,b"),
            (
                "connection.url",
                "jdbc:postgresql://pg01:5432/kcdb",
                "jdbc:postgresql://pg01:5432/kcdb",
            ),
            (
                "connection.url",
                "postgresql://kcuser:kcpw@pg01:5432/kcdb",
                "postgresql://kcuser:[hidden]@pg01:5432/kcdb",
            ),
            (
                "connection.url",
                "jdbc:postgresql://pg01/kcdb?user=u&password=kcpw&ssl=true",
                "jdbc:postgresql://pg01/kcdb?user=u&password=[hidden]&ssl=true",
            ),
            (
                "connection.url",
                "jdbc:sqlserver://h;user=u;Password=pw",
                "jdbc:sqlserver://h;user=u;Password=[hidden]",
            ),
        ];
        for (key, value, want) in cases {
            assert_eq!(redact_value(key, value), want, "{key}={value}");
        }
    }

    #[test]
    fn debug_never_shows_a_secret() {
        let map: ConfigMap = [("connection.password", "kcpw"), ("name", "x")]
            .into_iter()
            .collect();
        let shown = format!("{map:?}");
        assert!(!shown.contains("kcpw"), "{shown}");
        assert!(shown.contains("name"));
    }
}
