//! Ferry's extensions of the REST API, under `/ferry/`: what Kafka Connect has no endpoint for
//! and the web console shows — the cluster (members, roles, leader, indexes), the connectors'
//! status with Ferry's facts (generations, fenced commits, target states) and any node's
//! metrics, asked of that node by the one serving the request. The JSON is the gRPC API's
//! messages' (`ClusterStatusResponse`, `ConnectorStatusInfo`), field for field.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ferry_proto::management as pb;
use ferry_proto::management::management_client::ManagementClient;
use tonic::transport::{Channel, Endpoint};

use super::error::{Asked, RestError, RestResult};
use super::Rest;
use crate::api::{cluster_status, statuses};
use ferry_worker::metrics::METRICS_OFF;

/// How long a node waits for another's metrics.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);

/// The content type of a node's series (OpenMetrics, as prometheus-client writes them).
pub(super) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(super) fn routes() -> Router<Rest> {
    Router::new()
        .route("/ferry/cluster", get(cluster))
        .route("/ferry/connectors", get(connectors))
        .route("/ferry/nodes/{id}/metrics", get(node_metrics))
}

/// The management API's channels to the other nodes, one per address, made when first used
/// (they reconnect by themselves).
#[derive(Clone, Default)]
pub struct PeerChannels(Arc<Mutex<HashMap<String, Channel>>>);

impl PeerChannels {
    fn to(&self, api_addr: &str) -> Result<Channel, String> {
        let mut channels = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(channel) = channels.get(api_addr) {
            return Ok(channel.clone());
        }
        let channel = Endpoint::from_shared(format!("http://{api_addr}"))
            .map_err(|e| format!("api_addr {api_addr:?}: {e}"))?
            .connect_timeout(PEER_TIMEOUT)
            .timeout(PEER_TIMEOUT)
            .connect_lazy();
        channels.insert(api_addr.to_string(), channel.clone());
        Ok(channel)
    }
}

/// This node's view of the cluster.
async fn cluster(State(rest): State<Rest>) -> Json<pb::ClusterStatusResponse> {
    Json(cluster_status(&rest.core))
}

/// Every connector's status, read linearizably.
async fn connectors(State(rest): State<Rest>) -> RestResult<Json<Vec<pb::ConnectorStatusInfo>>> {
    let core = rest.core.clone();
    let all = rest
        .core
        .read(|s| statuses(&core, s, "").into_values().collect())
        .await
        .map_err(|e| RestError::from_core(e, Asked::Read, String::new))?;
    Ok(Json(all))
}

/// Node `id`'s series: this node's own, or those another answers through the management API.
async fn node_metrics(State(rest): State<Rest>, Path(id): Path<u64>) -> Response {
    match metrics_of(&rest, id).await {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn metrics_of(rest: &Rest, id: u64) -> Result<String, RestError> {
    if id == rest.core.node().id() {
        return match rest.metrics.enabled() {
            true => Ok(rest.metrics.render()),
            false => Err(RestError::not_found(METRICS_OFF)),
        };
    }
    let addr = rest
        .core
        .node()
        .raft()
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .get_node(&id)
        .map(|n| n.api_addr.clone())
        .ok_or_else(|| RestError::not_found(format!("Node {id} is not a member of the cluster")))?;
    let unreachable = |why: String| {
        RestError::new(
            StatusCode::BAD_GATEWAY,
            format!("Node {id} ({addr}) did not answer: {why}"),
        )
    };
    let channel = rest.peers.to(&addr).map_err(unreachable)?;
    match ManagementClient::new(channel)
        .node_metrics(pb::Empty {})
        .await
    {
        Ok(answer) => Ok(answer.into_inner().text),
        Err(status) if status.code() == tonic::Code::FailedPrecondition => {
            Err(RestError::not_found(status.message()))
        }
        Err(status) => Err(unreachable(status.message().to_string())),
    }
}
