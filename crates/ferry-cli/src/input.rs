//! Connector JSON as Kafka Connect users have it: `{"name": …, "config": {…}}` (what
//! `POST /connectors` takes) or a bare config map with `name` inside (what `PUT
//! /connectors/{name}/config` takes). Values may be strings, numbers or booleans.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};
use serde_json::Value;

/// A connector name and its config, as strings.
#[derive(Debug, PartialEq)]
pub struct ConnectorJson {
    pub name: Option<String>,
    pub config: HashMap<String, String>,
}

/// Read a file, or standard input for `-`.
pub fn read(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("cannot read standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn scalar(key: &str, value: &Value) -> anyhow::Result<String> {
    Ok(match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => bail!("config property {key:?} is null; give it a value or leave it out"),
        _ => bail!("config property {key:?} must be a string, number or boolean"),
    })
}

pub fn parse_connector(text: &str, origin: &str) -> anyhow::Result<ConnectorJson> {
    let value: Value =
        serde_json::from_str(text).with_context(|| format!("{origin} is not valid JSON"))?;
    let Value::Object(object) = value else {
        bail!("{origin} must hold a JSON object: {{\"name\": ..., \"config\": {{...}}}}");
    };
    let (name, config) = match object.get("config") {
        Some(Value::Object(config)) => {
            let name = match object.get("name") {
                Some(Value::String(n)) => Some(n.clone()),
                Some(_) => bail!("{origin}: \"name\" must be a string"),
                None => None,
            };
            (name, config.clone())
        }
        Some(_) => bail!("{origin}: \"config\" must be an object of properties"),
        None => {
            let name = object
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string);
            (name, object)
        }
    };
    let config = config
        .iter()
        .map(|(k, v)| Ok((k.clone(), scalar(k, v)?)))
        .collect::<anyhow::Result<_>>()
        .with_context(|| format!("in {origin}"))?;
    Ok(ConnectorJson { name, config })
}

/// KIP-875 offsets: `{"offsets": [{"partition": {…}, "offset": {…} | null}]}`.
pub fn parse_offsets(text: &str, origin: &str) -> anyhow::Result<Vec<(String, String)>> {
    let value: Value =
        serde_json::from_str(text).with_context(|| format!("{origin} is not valid JSON"))?;
    let Some(Value::Array(offsets)) = value.get("offsets") else {
        bail!(
            "{origin} must hold {{\"offsets\": [{{\"partition\": {{...}}, \"offset\": {{...}}}}]}}"
        );
    };
    offsets
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let partition = o
                .get("partition")
                .with_context(|| format!("{origin}: offsets[{i}] has no \"partition\""))?;
            let offset = o.get("offset").cloned().unwrap_or(Value::Null);
            Ok((partition.to_string(), offset.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_003_sink_json_is_taken_as_is() {
        // Seed 003's JDBC sink request body: note the boolean, not a string.
        let text = r#"{
          "name": "jdbc_sink_postgresql",
          "config": {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "tasks.max": "5",
            "errors.deadletterqueue.context.headers.enable": true
          }
        }"#;
        let parsed = parse_connector(text, "x.json").expect("valid");
        assert_eq!(parsed.name.as_deref(), Some("jdbc_sink_postgresql"));
        assert_eq!(
            parsed.config["errors.deadletterqueue.context.headers.enable"],
            "true"
        );
        assert_eq!(parsed.config["tasks.max"], "5");
    }

    #[test]
    fn a_bare_config_map_works_too() {
        let parsed = parse_connector(r#"{"name":"a","tasks.max":3}"#, "x").expect("valid");
        assert_eq!(parsed.name.as_deref(), Some("a"));
        assert_eq!(parsed.config["tasks.max"], "3");
    }

    #[test]
    fn bad_json_is_named() {
        let cases = [
            ("{", "x.json is not valid JSON"),
            ("[]", "must hold a JSON object"),
            (r#"{"name":"a","config":{"k":null}}"#, "\"k\" is null"),
            (
                r#"{"name":"a","config":{"k":[1]}}"#,
                "\"k\" must be a string",
            ),
        ];
        for (text, want) in cases {
            let err = format!("{:#}", parse_connector(text, "x.json").expect_err(want));
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn kip_875_offsets() {
        let parsed = parse_offsets(
            r#"{"offsets":[{"partition":{"kafka_topic":"t","kafka_partition":0},"offset":{"kafka_offset":5}},{"partition":{"f":"x"},"offset":null}]}"#,
            "o.json",
        )
        .expect("valid");
        assert_eq!(parsed[0].1, r#"{"kafka_offset":5}"#);
        assert_eq!(parsed[1].1, "null");
    }
}
