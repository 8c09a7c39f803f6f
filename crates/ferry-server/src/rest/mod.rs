//! Kafka Connect's REST API, served by every node (axum): an adapter of the management core,
//! as the gRPC service is — paths, status codes, JSON shapes and error bodies are Kafka
//! Connect's; the rules are the core's (writes reach the leader with one request id across
//! their retries, reads are linearizable, secrets stay hidden). Beside it: `GET /metrics`,
//! Ferry's extensions under `/ferry/` and the web console under `/ui/`.

mod connectors;
mod console;
pub mod entities;
pub mod error;
mod ferry;
mod loggers;
mod plugins;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use tokio::sync::{watch, OnceCell};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::manage::Core;
use entities::{ServerInfo, WorkerStatus};
use error::{RestError, RestResult};
use ferry_worker::metrics::{WorkerMetrics, METRICS_OFF};

/// How long `GET /health` waits for the control plane to answer, as Kafka Connect waits.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);

/// What every handler shares.
#[derive(Clone)]
pub struct Rest {
    core: Core,
    loggers: crate::loggers::Loggers,
    topic_tracking: TopicTracking,
    /// The Kafka cluster's id, asked once.
    kafka_cluster_id: Arc<OnceCell<Option<String>>>,
    /// What this node's worker counts (`GET /metrics`).
    metrics: Arc<WorkerMetrics>,
    /// Channels to the other nodes, for their metrics.
    peers: ferry::PeerChannels,
    /// Turns true when the node stops: open event streams end.
    shutdown: watch::Receiver<bool>,
}

/// Where `/admin/*` (the log levels) is served: Kafka Connect's `admin.listeners`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminOn {
    /// On the main listeners (`admin.listeners` unset).
    Main,
    /// Nowhere (`admin.listeners` empty).
    Nowhere,
    /// Only on listeners of its own.
    Own,
}

/// Kafka Connect's `topic.tracking.enable` and `topic.tracking.allow.reset` (KIP-558).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopicTracking {
    /// The active topics are recorded and shown.
    pub enable: bool,
    /// They may be reset.
    pub allow_reset: bool,
}

/// How a node's REST listeners are set up, beyond the core they serve.
pub struct Options {
    /// Where `/admin/*` is served.
    pub admin: AdminOn,
    /// CORS, if configured.
    pub cors: Option<Cors>,
    /// Topic tracking.
    pub topic_tracking: TopicTracking,
    /// The node's stop signal.
    pub shutdown: watch::Receiver<bool>,
}

/// The routers of a node's REST listeners.
pub struct Routers {
    /// For `listeners`.
    pub main: Router,
    /// For `admin.listeners` (`/admin/*` only).
    pub admin: Router,
}

/// The REST API over `core`, and this node's `metrics` (`GET /metrics`): `/admin/*` where
/// `admin` says, CORS as `cors` allows.
pub fn routers(
    core: Core,
    loggers: crate::loggers::Loggers,
    metrics: Arc<WorkerMetrics>,
    options: Options,
) -> Routers {
    let Options {
        admin,
        cors,
        topic_tracking,
        shutdown,
    } = options;
    let rest = Rest {
        core,
        loggers,
        topic_tracking,
        kafka_cluster_id: Arc::new(OnceCell::new()),
        metrics,
        peers: ferry::PeerChannels::default(),
        shutdown,
    };
    let mut main = Router::new()
        .route("/", get(root))
        .route("/health", get(health))
        .route("/metrics", get(prometheus_metrics))
        .merge(plugins::routes())
        .merge(connectors::routes())
        .merge(ferry::routes())
        .merge(console::routes());
    if admin == AdminOn::Main {
        main = main.merge(loggers::routes());
    }
    let trusted = cors.as_ref().map(|c| c.trusted.clone());
    let finish = |router: Router<Rest>| {
        let trusted = trusted.clone();
        let router = router
            .fallback(|| async { RestError::not_found("HTTP 404 Not Found") })
            .method_not_allowed_fallback(|| async {
                RestError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "HTTP 405 Method Not Allowed",
                )
            })
            .layer(middleware::from_fn(move |request: Request, next: Next| {
                let trusted = trusted.clone();
                async move { browser_writes_are_json(trusted.as_ref(), request, next).await }
            }))
            .with_state(rest.clone());
        match &cors {
            Some(cors) => router.layer(cors.layer.clone()),
            None => router,
        }
    };
    Routers {
        main: finish(main),
        admin: finish(loggers::routes()),
    }
}

/// The origins CORS lets in.
#[derive(Clone, Debug)]
enum Trusted {
    /// Any (`*`).
    Any,
    /// These.
    Only(Vec<header::HeaderValue>),
}

impl Trusted {
    fn admits(&self, origin: &header::HeaderValue) -> bool {
        match self {
            Trusted::Any => true,
            Trusted::Only(origins) => origins.contains(origin),
        }
    }
}

/// CORS as configured: the layer, and the origins it lets in.
#[derive(Clone)]
pub struct Cors {
    layer: CorsLayer,
    trusted: Trusted,
}

/// Kafka Connect's CORS (`access.control.allow.origin`, `.methods`): `*` lets any origin in
/// (echoed, as Kafka Connect's Jetty filter does), else the origins listed; methods default to
/// `GET,POST,HEAD`. `None` when no origin is allowed; the error names what does not parse.
pub fn cors(origin: Option<&str>, methods: Option<&str>) -> Result<Option<Cors>, String> {
    let origins = ferry_connect::config::split_list(origin.unwrap_or(""));
    if origins.is_empty() {
        return Ok(None);
    }
    let trusted = if origins.iter().any(|o| o == "*") {
        Trusted::Any
    } else {
        let values = origins
            .iter()
            .map(|o| {
                header::HeaderValue::from_str(o)
                    .map_err(|_| format!("rest.access_control_allow_origin: {o:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Trusted::Only(values)
    };
    let allow_origin = match &trusted {
        Trusted::Any => AllowOrigin::mirror_request(),
        Trusted::Only(values) => AllowOrigin::list(values.clone()),
    };
    let methods = ferry_connect::config::split_list(methods.unwrap_or("GET,POST,HEAD"))
        .iter()
        .map(|m| {
            m.to_ascii_uppercase()
                .parse::<axum::http::Method>()
                .map_err(|_| format!("rest.access_control_allow_methods: {m:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let layer = CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods(methods)
        .allow_headers([
            header::HeaderName::from_static("x-requested-with"),
            header::CONTENT_TYPE,
            header::ACCEPT,
            header::ORIGIN,
        ])
        .allow_credentials(true)
        .max_age(Duration::from_secs(1800));
    Ok(Some(Cors { layer, trusted }))
}

/// Serve `router` on `listener` until `shutdown` turns true.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .await
}

async fn root(State(rest): State<Rest>) -> Json<ServerInfo> {
    let kafka = rest.core.kafka().cloned();
    let id = rest
        .kafka_cluster_id
        .get_or_init(|| async move {
            match kafka {
                Some(kafka) => ferry_worker::admin::cluster_id(&kafka)
                    .await
                    .map_err(|e| tracing::warn!(error = %e, "no Kafka cluster id for GET /"))
                    .ok(),
                None => None,
            }
        })
        .await
        .clone();
    Json(ServerInfo {
        version: env!("CARGO_PKG_VERSION"),
        commit: option_env!("FERRY_COMMIT").unwrap_or("unknown"),
        kafka_cluster_id: id,
    })
}

/// Healthy once this node is a registered worker and the control plane answers a
/// linearizable read in time.
/// This node's series for Prometheus to scrape, in the OpenMetrics text format
/// prometheus-client writes (Prometheus reads it by its content type).
async fn prometheus_metrics(State(rest): State<Rest>) -> Response {
    if !rest.metrics.enabled() {
        return RestError::not_found(METRICS_OFF).into_response();
    }
    (
        [(header::CONTENT_TYPE, ferry::OPENMETRICS)],
        rest.metrics.render(),
    )
        .into_response()
}

async fn health(State(rest): State<Rest>) -> Response {
    let me = rest.core.node().id();
    let answer = tokio::time::timeout(
        HEALTH_TIMEOUT,
        rest.core.read(|s| s.workers.contains_key(&me)),
    )
    .await;
    let (status, code, message) = match answer {
        Ok(Ok(true)) => (
            "healthy",
            StatusCode::OK,
            "Worker has completed startup and is ready to handle requests.",
        ),
        Ok(Ok(false)) => (
            "starting",
            StatusCode::SERVICE_UNAVAILABLE,
            "Worker is still starting up.",
        ),
        Ok(Err(_)) | Err(_) => (
            "unhealthy",
            StatusCode::INTERNAL_SERVER_ERROR,
            "Worker was unable to handle this request and may be unable to handle other requests.",
        ),
    };
    let body = WorkerStatus {
        status,
        message: message.to_string(),
    };
    (code, Json(body)).into_response()
}

/// A write from a browser must say it is JSON, unless its origin is one CORS lets in. Browsers
/// send `Origin` with every write; a page of another site can send `Content-Type:
/// application/json` only after a CORS preflight, which Ferry lets pass only for the origins
/// `access_control_allow_origin` names — so a form post or a `no-cors` fetch from another site
/// (cross-site request forgery) is refused here (415), before it pauses or restarts anything.
/// Clients that are not browsers (curl, Kafka Connect's tools) send no `Origin`, and pages of
/// the origins CORS admits are trusted as Kafka Connect trusts them: neither is affected.
async fn browser_writes_are_json(
    trusted: Option<&Trusted>,
    request: Request,
    next: Next,
) -> Response {
    let write = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let untrusted = request
        .headers()
        .get(header::ORIGIN)
        .is_some_and(|origin| !trusted.is_some_and(|t| t.admits(origin)));
    if write && untrusted && !is_json(request.headers()) {
        return RestError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "A request with an Origin (from a browser) that changes something must have \
             Content-Type: application/json",
        )
        .into_response();
    }
    next.run(request).await
}

/// The request says its body is JSON.
fn is_json(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|media| {
        media.to_str().is_ok_and(|m| {
            m.trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
    })
}

/// A request's JSON body: 415 for another media type, 500 for what does not parse (as Kafka
/// Connect's JSON binding answers).
fn json_body(headers: &HeaderMap, body: &Bytes) -> RestResult<Value> {
    if headers.contains_key(header::CONTENT_TYPE) && !is_json(headers) {
        return Err(RestError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "HTTP 415 Unsupported Media Type",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| RestError::internal(format!("Cannot deserialize the request body: {e}")))
}

/// A config map as Kafka Connect binds it: numbers and booleans become strings; `null` is
/// kept as `None` (a removal in a PATCH); anything else is refused.
fn config_map(value: &Value) -> RestResult<BTreeMap<String, Option<String>>> {
    let Value::Object(map) = value else {
        return Err(RestError::internal(format!(
            "Cannot deserialize value of type `java.util.Map<java.lang.String,java.lang.String>` from {}",
            json_kind(value)
        )));
    };
    map.iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                Value::Null => None,
                other => {
                    return Err(RestError::internal(format!(
                    "Cannot deserialize value of type `java.lang.String` from {} (property {k})",
                    json_kind(other)
                )))
                }
            };
            Ok((k.clone(), text))
        })
        .collect()
}

/// Kafka Connect's error for a property given as `null`.
const NULL_VALUE: &str = "Null value can not be supplied as the configuration value.";

/// A config map's properties given a value, and the names of those given `null`.
fn split_nulls(value: &Value) -> RestResult<(BTreeMap<String, String>, Vec<String>)> {
    let mut config = BTreeMap::new();
    let mut nulls = Vec::new();
    for (k, v) in config_map(value)? {
        match v {
            Some(v) => {
                config.insert(k, v);
            }
            None => nulls.push(k),
        }
    }
    Ok((config, nulls))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "Object value",
        Value::Array(_) => "Array value",
        Value::String(_) => "String value",
        Value::Number(_) => "Number value",
        Value::Bool(_) => "Boolean value",
        Value::Null => "null",
    }
}
