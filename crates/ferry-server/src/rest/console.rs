//! The web console at `/ui`: its page, script and style (built from `console/` by
//! `make console` into `crates/ferry-server/console/`, embedded here — cargo never runs npm),
//! and `/ui/events`, the server-sent events that tell an open console when to read the REST
//! API again. The console reads and writes through the REST API only.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{extract::State, Router};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;

use super::Rest;
use crate::manage::Core;

/// The built console (see `console/build.mjs`).
const INDEX_HTML: &str = include_str!("../../console/index.html");
const APP_JS: &str = include_str!("../../console/app.js");
const APP_CSS: &str = include_str!("../../console/app.css");

/// The console loads nothing but its own files and the REST API of the node serving it.
const POLICY: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                      frame-ancestors 'none'; form-action 'none'; base-uri 'none'";

/// The shortest time between two events of one console: a burst of changes is one event.
const EVENT_GAP: Duration = Duration::from_millis(250);

pub(super) fn routes() -> Router<Rest> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route(
            "/ui/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route("/ui/events", get(events))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// What an event says changed: the applied state or the cluster's leadership or membership.
#[derive(Serialize, PartialEq, Clone, Debug)]
struct Change {
    applied_index: u64,
    leader_id: Option<u64>,
    term: u64,
    members: Vec<u64>,
}

impl Change {
    fn now(core: &Core) -> Self {
        let node = core.node();
        let applied_index = node.state().read().last_applied.map_or(0, |l| l.index);
        // Read in place: the metrics' maps are not copied at every wake-up.
        let metrics = node.raft().metrics();
        let raft = metrics.borrow();
        Change {
            applied_index,
            leader_id: raft.current_leader,
            term: raft.current_term,
            members: raft
                .membership_config
                .membership()
                .nodes()
                .map(|(id, _)| *id)
                .collect(),
        }
    }
}

/// A `change` event when the applied state, the leader, the term or the members change (at
/// most one each [`EVENT_GAP`]), the first at once; the stream ends when the node stops, so that
/// an open console does not hold the node's shutdown.
async fn events(State(rest): State<Rest>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = mpsc::channel(4);
    let core = rest.core.clone();
    let mut shutdown = rest.shutdown.clone();
    tokio::spawn(async move {
        let mut applied = core.node().state().applied();
        let mut raft = core.node().raft().metrics();
        let mut sent: Option<Change> = None;
        loop {
            let now = Change::now(&core);
            if sent.as_ref() != Some(&now) {
                let Ok(event) = Event::default().event("change").json_data(&now) else {
                    return;
                };
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
                sent = Some(now);
            }
            tokio::select! {
                changed = applied.changed() => if changed.is_err() { return },
                changed = raft.changed() => if changed.is_err() { return },
                _ = shutdown.wait_for(|stop| *stop) => return,
                _ = tx.closed() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(EVENT_GAP) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    });
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use sha2::{Digest, Sha256};

    /// The files `console/build.mjs` reads, as it names them: relative to `console/`, sorted.
    fn sources(console: &Path) -> Vec<String> {
        fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
            let entries = std::fs::read_dir(dir).expect("console/src is readable");
            for entry in entries {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    walk(&path, into);
                } else {
                    into.push(path);
                }
            }
        }
        let mut files: Vec<PathBuf> = ["build.mjs", "package.json", "package-lock.json"]
            .iter()
            .map(|name| console.join(name))
            .collect();
        walk(&console.join("src"), &mut files);
        let mut names: Vec<String> = files
            .iter()
            .map(|f| {
                let relative = f.strip_prefix(console).expect("under console/");
                relative.to_string_lossy().replace('\\', "/")
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_embedded_console_is_built_from_the_sources_as_they_are() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let console = manifest.join("../../console");
        let expected: String = sources(&console)
            .iter()
            .map(|name| {
                let bytes = std::fs::read(console.join(name)).expect("a source is readable");
                let digest: String = Sha256::digest(&bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("{digest}  {name}\n")
            })
            .collect();
        let built = std::fs::read_to_string(manifest.join("console/SOURCES"))
            .expect("crates/ferry-server/console/SOURCES (make console writes it)");
        assert_eq!(
            built, expected,
            "crates/ferry-server/console/ was not built from console/ as it is: run `make console`"
        );
    }
}
