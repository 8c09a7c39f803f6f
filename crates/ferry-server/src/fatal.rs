//! Crash-only: a node that cannot go on safely — its Raft core stopped (a panic, a storage
//! failure), its data directory belongs to another cluster — exits with the reason instead of
//! serving as a zombie. A supervisor restarts it; a restart is the one recovery path that is
//! always tested.

use std::fmt::Display;

use ferry_meta::MetaNode;
use tokio::sync::watch;

/// The exit code of a node that stopped on a fatal error.
pub const EXIT_CODE: i32 = 70;

/// Log `reason` and end the process.
pub fn exit(reason: impl Display) -> ! {
    tracing::error!(%reason, "fatal: exiting");
    eprintln!("ferryd: fatal: {reason}");
    exit_now(EXIT_CODE)
}

/// End the process at once with `code`, running no exit handler: a crashing node has nothing
/// to clean up (its log is written unbuffered, its state is in Raft), and a C library's
/// handler (OpenSSL's cleanup, say) could wait on what another thread of the process still
/// holds, leaving a node that neither serves nor ends.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` ends the process; nothing of it runs afterwards.
    unsafe { libc::_exit(code) }
}

/// Watch the Raft core until the node shuts down; if it stops first, exit.
#[tracing::instrument(name = "raft_watch", skip_all, fields(node = node.id()))]
pub async fn watch_raft(node: MetaNode, shutdown: watch::Receiver<bool>) {
    let mut metrics = node.raft().metrics();
    loop {
        let stopped = metrics.borrow_and_update().running_state.clone().err();
        if let Some(fatal) = stopped {
            if !*shutdown.borrow() {
                exit(format!("the Raft core stopped: {fatal}"));
            }
            return;
        }
        if metrics.changed().await.is_err() {
            if !*shutdown.borrow() {
                exit("the Raft core ended unexpectedly (a panic inside it)");
            }
            return;
        }
    }
}
