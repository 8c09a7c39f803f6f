//! A freeze never hides. Plain OS threads, outside the async runtime, take the stop signals
//! and watch two things: that the runtime makes progress (a task of it ticks), and that a stop
//! asked by SIGTERM or SIGINT ends the process within `[worker] shutdown_timeout_ms`. When
//! either fails, every thread's stack goes to the log and the process exits with
//! [`EXIT_CODE`]: crash-only, as a fatal Raft error ends it ([`crate::fatal`]). A frozen node
//! is worse than a dead one — its peers' connections stay open, nothing in it answers, and no
//! one is told — while a dead one is seen, its units move, and a supervisor restarts it.
//!
//! The signals are taken on a thread of their own, so that SIGTERM is obeyed by a node whose
//! runtime runs nothing any more. What counts as frozen is decided by [`Monitor`], a pure
//! function of the ticks it sees and the time, tested without I/O.

use std::fs::File;
use std::io::Seek;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{error, info, warn};

/// The exit code of a node its watchdog ended (frozen, or not stopped within its bound).
pub const EXIT_CODE: i32 = 71;

/// How often the watchdog looks.
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// A look that comes this much later than asked means the whole process stood still (SIGSTOP,
/// a suspended machine): the runtime's window starts again rather than being blamed.
const PAUSED: Duration = Duration::from_secs(2);
/// How long a debugger may take to write the stacks.
const STACKS_TIMEOUT: Duration = Duration::from_secs(60);

/// What the watchdog enforces.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The runtime not ticking for this long is a freeze.
    pub freeze_timeout: Duration,
    /// A stop asked must have ended the process within this.
    pub shutdown_bound: Duration,
    /// Test only: once this file exists, every worker thread of the runtime blocks for good.
    pub test_freeze_file: Option<PathBuf>,
}

/// The runtime's side of the watchdog: the tick counter its task moves, and whether a stop
/// was asked (and seen by [`Monitor`]).
#[derive(Debug, Default)]
struct Shared {
    ticks: AtomicU64,
    stop_asked: AtomicBool,
}

/// A started watchdog; the runtime ticks it with [`Watchdog::tick`].
#[derive(Debug, Clone)]
pub struct Watchdog {
    shared: Arc<Shared>,
    every: Duration,
}

/// Start the signal and watchdog threads of `runtime`. A SIGTERM or SIGINT sends `true` on
/// `stop`.
pub fn start(
    settings: Settings,
    runtime: &tokio::runtime::Handle,
    stop: watch::Sender<bool>,
) -> std::io::Result<Watchdog> {
    if let Some(file) = settings.test_freeze_file {
        freeze_on(file, runtime.clone())?;
    }
    let shared = Arc::new(Shared::default());
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])?;
    let asked = shared.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if asked.stop_asked.swap(true, Ordering::AcqRel) {
                    warn!(signal, "already stopping");
                    continue;
                }
                info!(signal, "told to stop");
                // Nothing left to tell once the runtime has ended: the process is exiting.
                let _ = stop.send(true);
            }
        })?;
    let watched = shared.clone();
    let freeze = settings.freeze_timeout;
    let bound = settings.shutdown_bound;
    std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || watch_over(&watched, freeze, bound))?;
    Ok(Watchdog {
        shared,
        // Several ticks per timeout: a late one is not yet a freeze.
        every: (freeze / 10).max(Duration::from_millis(100)),
    })
}

impl Watchdog {
    /// Tick while the runtime runs: the task the watchdog sees move.
    pub async fn tick(self) {
        let mut every = tokio::time::interval(self.every);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            self.shared.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Test only: once `file` exists, block every worker thread of `runtime` for good. The tasks
/// are spawned from outside the runtime, onto its shared queue, so that each free worker takes
/// one and none is left to run anything else.
fn freeze_on(file: PathBuf, runtime: tokio::runtime::Handle) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("test-freeze".into())
        .spawn(move || {
            while !file.exists() {
                std::thread::sleep(Duration::from_millis(100));
            }
            let workers = runtime.metrics().num_workers();
            warn!(
                file = %file.display(),
                workers, "test only: blocking every thread of the async runtime"
            );
            for _ in 0..workers {
                runtime.spawn(async {
                    loop {
                        std::thread::park();
                    }
                });
            }
        })
        .map(drop)
}

/// The watchdog thread: look every [`LOOK_EVERY`]; on a verdict, write the stacks and exit.
fn watch_over(shared: &Shared, freeze: Duration, bound: Duration) {
    let mut monitor = Monitor::new(Instant::now(), freeze, bound);
    loop {
        std::thread::sleep(LOOK_EVERY);
        let seen = Seen {
            at: Instant::now(),
            ticks: shared.ticks.load(Ordering::Relaxed),
            stop_asked: shared.stop_asked.load(Ordering::Acquire),
        };
        if let Some(verdict) = monitor.look(seen) {
            end(&verdict);
        }
    }
}

/// Write every thread's stack to the log and exit with [`EXIT_CODE`].
fn end(verdict: &Verdict) -> ! {
    error!(%verdict, "watchdog: the node cannot go on; writing every thread's stack, then exiting");
    let stacks = stacks();
    error!(%verdict, "watchdog: every thread's stack:\n{stacks}");
    eprintln!("ferryd: watchdog: {verdict}: exiting with code {EXIT_CODE}");
    crate::fatal::exit_now(EXIT_CODE)
}

/// Every thread of this process: its name and state as the kernel shows them, then its stack
/// as a debugger prints it (gdb, else elfutils' eu-stack, if either is installed).
fn stacks() -> String {
    let mut out = threads();
    match debugger() {
        Ok(text) => out.push_str(&text),
        Err(e) => out.push_str(&format!("(no stacks: {e})\n")),
    }
    out
}

/// One line per thread from `/proc/self/task`: id, name, state and what it waits in.
fn threads() -> String {
    let read = |tid: &str, what: &str| {
        std::fs::read_to_string(format!("/proc/self/task/{tid}/{what}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let mut lines = String::from("threads (id, name, state, waiting in):\n");
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        lines.push_str("  (no /proc/self/task)\n");
        return lines;
    };
    for task in tasks.flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        // `stat` is "tid (name) S …": the state is the field after the name's parenthesis.
        let stat = read(&tid, "stat");
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        lines.push_str(&format!(
            "  {tid} {:?} {state} {}\n",
            read(&tid, "comm"),
            read(&tid, "wchan")
        ));
    }
    lines
}

/// The stacks as gdb (or eu-stack) prints them, attached to this process. Its output goes to
/// a file: a pipe would fill while the debugger holds this thread stopped.
fn debugger() -> std::io::Result<String> {
    let pid = std::process::id().to_string();
    let tools: [(&str, Vec<&str>); 2] = [
        (
            "gdb",
            vec!["-batch", "-nx", "-p", &pid, "-ex", "thread apply all bt"],
        ),
        ("eu-stack", vec!["-p", &pid]),
    ];
    let mut tried = Vec::new();
    for (tool, args) in tools {
        let out = tempfile()?;
        let child = Command::new(tool)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(e) => {
                tried.push(format!("{tool}: {e}"));
                continue;
            }
        };
        let started = Instant::now();
        while child.try_wait()?.is_none() {
            if started.elapsed() > STACKS_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                tried.push(format!("{tool}: no stacks within {STACKS_TIMEOUT:?}"));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // The debugger wrote through the same open file: read it from its start.
        (&out).rewind()?;
        let text = std::io::read_to_string(&out)?;
        if !text.trim().is_empty() {
            return Ok(format!("stacks ({tool}):\n{text}"));
        }
    }
    Err(std::io::Error::other(format!(
        "no debugger wrote them ({})",
        tried.join("; ")
    )))
}

/// A file of the temp directory that no other process sees by name (removed once open).
fn tempfile() -> std::io::Result<File> {
    let path = std::env::temp_dir().join(format!("ferryd-stacks-{}", std::process::id()));
    let file = File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// What the watchdog saw at one look.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// When.
    pub at: Instant,
    /// The runtime's tick count.
    pub ticks: u64,
    /// Whether a stop has been asked.
    pub stop_asked: bool,
}

/// Why the node must end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The runtime did not tick for this long.
    Frozen(Duration),
    /// A stop was asked this long ago and the process still runs.
    NotStopped(Duration),
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Frozen(d) => write!(
                f,
                "the async runtime ran nothing for {} ms ([worker] freeze_timeout_ms): frozen",
                d.as_millis()
            ),
            Verdict::NotStopped(d) => write!(
                f,
                "not stopped {} ms after told to ([worker] shutdown_timeout_ms)",
                d.as_millis()
            ),
        }
    }
}

/// The watchdog's judgement, a pure function of what it sees.
#[derive(Debug)]
pub struct Monitor {
    freeze: Duration,
    bound: Duration,
    /// The last look, and the tick count then.
    last: Instant,
    ticks: u64,
    /// Since when the runtime has not ticked.
    still_since: Instant,
    /// When the stop was first seen asked.
    stop_seen: Option<Instant>,
}

impl Monitor {
    /// A monitor started at `now`.
    pub fn new(now: Instant, freeze: Duration, bound: Duration) -> Self {
        Monitor {
            freeze,
            bound,
            last: now,
            ticks: 0,
            still_since: now,
            stop_seen: None,
        }
    }

    /// Take one look; `Some` when the node must end.
    pub fn look(&mut self, seen: Seen) -> Option<Verdict> {
        let gap = seen.at.saturating_duration_since(self.last);
        self.last = seen.at;
        if seen.stop_asked {
            let since = *self.stop_seen.get_or_insert(seen.at);
            let waited = seen.at.saturating_duration_since(since);
            // Once stopping, the bound alone applies: the runtime winds down and stops ticking.
            return (waited > self.bound).then_some(Verdict::NotStopped(waited));
        }
        if seen.ticks != self.ticks || gap > LOOK_EVERY + PAUSED {
            // A tick, or the whole process stood still: nothing of the runtime's to blame.
            self.ticks = seen.ticks;
            self.still_since = seen.at;
            return None;
        }
        let still = seen.at.saturating_duration_since(self.still_since);
        (still > self.freeze).then_some(Verdict::Frozen(still))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREEZE: Duration = Duration::from_secs(10);
    const BOUND: Duration = Duration::from_secs(30);

    /// Looks every [`LOOK_EVERY`] from `start`, `(ticks, stop_asked)` at each; the verdicts.
    fn run(looks: &[(u64, bool)], pause_at: Option<(usize, Duration)>) -> Vec<Option<Verdict>> {
        let start = Instant::now();
        let mut monitor = Monitor::new(start, FREEZE, BOUND);
        let mut at = start;
        looks
            .iter()
            .enumerate()
            .map(|(i, (ticks, stop_asked))| {
                at += LOOK_EVERY;
                if let Some((when, pause)) = pause_at {
                    if i == when {
                        at += pause;
                    }
                }
                monitor.look(Seen {
                    at,
                    ticks: *ticks,
                    stop_asked: *stop_asked,
                })
            })
            .collect()
    }

    /// How many looks make `d`.
    fn looks(d: Duration) -> usize {
        (d.as_millis() / LOOK_EVERY.as_millis()) as usize
    }

    #[test]
    fn a_ticking_runtime_is_never_frozen() {
        let ticking: Vec<(u64, bool)> = (0..looks(FREEZE) as u64 * 3).map(|t| (t, false)).collect();
        assert!(run(&ticking, None).iter().all(Option::is_none));
    }

    #[test]
    fn a_runtime_still_past_the_timeout_is_frozen_and_not_before() {
        let still = vec![(7, false); looks(FREEZE) + 2];
        let verdicts = run(&still, None);
        let first = verdicts
            .iter()
            .position(Option::is_some)
            .expect("a verdict");
        // The first look sees the count move (0 → 7); the freeze is counted from there.
        assert_eq!(first, looks(FREEZE) + 1);
        assert!(matches!(verdicts[first], Some(Verdict::Frozen(d)) if d > FREEZE));
    }

    #[test]
    fn a_process_that_stood_still_starts_its_window_again() {
        // Ticks stop at the same time as the whole process is stopped for a minute (SIGSTOP):
        // on waking, the runtime gets a whole window to tick again.
        let still = vec![(3, false); looks(FREEZE)];
        let verdicts = run(&still, Some((5, Duration::from_secs(60))));
        assert!(verdicts.iter().all(Option::is_none), "{verdicts:?}");
    }

    #[test]
    fn once_stopping_only_the_shutdown_bound_applies() {
        // Told to stop, the runtime stops ticking: no freeze, until the bound has passed.
        let mut stopping = vec![(1, false)];
        stopping.extend(vec![(1, true); looks(BOUND) + 2]);
        let verdicts = run(&stopping, None);
        let first = verdicts
            .iter()
            .position(Option::is_some)
            .expect("a verdict");
        assert_eq!(first, looks(BOUND) + 2);
        assert!(matches!(verdicts[first], Some(Verdict::NotStopped(d)) if d > BOUND));
    }
}
