//! `/connector-plugins`: the plugins this build has (connectors, and with
//! `connectorsOnly=false` transforms, predicates and converters), each one's properties, and
//! the validation of a connector config as a create would validate it.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, put};
use axum::{Json, Router};
use ferry_connect::catalog;
use ferry_connect::config::ConfigDef;
use ferry_connect::validate::definition;

use super::entities::{ConfigInfos, ConfigKeyInfo, PluginInfo};
use super::error::{Asked, RestError, RestResult};
use super::{json_body, Rest};

/// Kafka Connect's prefix of the errors its validate endpoint wraps in a 500.
const BAD_REQUEST: &str = "org.apache.kafka.connect.runtime.rest.errors.BadRequestException: ";

pub(super) fn routes() -> Router<Rest> {
    Router::new()
        .route("/connector-plugins", get(list))
        .route("/connector-plugins/{plugin}/config", get(config))
        .route("/connector-plugins/{plugin}/config/validate", put(validate))
}

async fn list(
    State(rest): State<Rest>,
    Query(query): Query<Vec<(String, String)>>,
) -> Json<Vec<PluginInfo>> {
    // Anything but `false` (ignoring case) keeps the default, as Java's Boolean parsing does.
    let connectors_only = !query
        .iter()
        .rev()
        .find(|(k, _)| k == "connectorsOnly")
        .is_some_and(|(_, v)| v.eq_ignore_ascii_case("false"));
    let mut plugins: Vec<PluginInfo> = rest
        .core
        .plugins()
        .iter()
        .map(|p| PluginInfo {
            class: p.class,
            kind: p.kind().as_str(),
            version: p.version,
        })
        .collect();
    plugins.sort_by_key(|p| p.class);
    if !connectors_only {
        plugins.extend(catalog::others().into_iter().map(|p| PluginInfo {
            class: p.class,
            kind: p.kind.as_str(),
            version: catalog::VERSION,
        }));
    }
    Json(plugins)
}

/// A plugin's properties: a connector's own first, then those every connector (and every sink
/// or source) has.
async fn config(
    State(rest): State<Rest>,
    Path(plugin): Path<String>,
) -> RestResult<Json<Vec<ConfigKeyInfo>>> {
    let def: ConfigDef = match ferry_connect::plugin::find(rest.core.plugins(), &plugin) {
        Some(connector) => {
            let own = (connector.config)();
            let mut def = own.clone();
            def.extend(
                definition(connector)
                    .into_iter()
                    .filter(|k| !own.iter().any(|o| o.name == k.name)),
            );
            def
        }
        None => match catalog::find(&plugin) {
            Some(other) => other.config,
            None => return Err(RestError::not_found(format!("Unknown plugin {plugin}."))),
        },
    };
    Ok(Json(
        def.iter().map(|k| ConfigKeyInfo::of(k.name, k)).collect(),
    ))
}

/// Kafka Connect's rule for the plugin of the path and the config's class: without a
/// trailing `Connector`, the class ends with the plugin's name.
fn same_type(class: &str, plugin: &str) -> bool {
    let bare = |s: &str| s.strip_suffix("Connector").unwrap_or(s).to_string();
    bare(class.trim()).ends_with(&bare(plugin.trim()))
}

async fn validate(
    State(rest): State<Rest>,
    Path(plugin): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> RestResult<Json<ConfigInfos>> {
    let body = json_body(&headers, &body)?;
    let (config, nulls) = super::split_nulls(&body)?;
    // A config without a known class is an error of the request, which Kafka Connect
    // answers with a 500 naming its exception.
    let class = super::connectors::known_class(&rest, &config)
        .map_err(|problem| RestError::internal(format!("{BAD_REQUEST}{}", problem.message())))?;
    if !same_type(&class, &plugin) {
        return Err(RestError::bad_request(format!(
            "Included connector type {class} does not match request type {plugin}"
        )));
    }
    let mut validation = rest
        .core
        .validate(&config)
        .map_err(|e| RestError::from_core(e, Asked::Read, String::new))?;
    for name in nulls {
        validation.add_error(&config, &name, super::NULL_VALUE.into());
    }
    Ok(Json(ConfigInfos::of(&class, &validation)))
}

#[cfg(test)]
mod tests {
    use super::same_type;

    #[test]
    fn the_path_names_the_configs_class_as_kafka_connect_matches_them() {
        assert!(same_type("FileStreamSink", "FileStreamSink"));
        assert!(same_type(
            "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "FileStreamSink"
        ));
        assert!(same_type(
            "FileStreamSinkConnector",
            "FileStreamSinkConnector"
        ));
        assert!(!same_type("FileStreamSource", "FileStreamSink"));
    }
}
