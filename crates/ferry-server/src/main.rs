//! `ferryd`: one Ferry node — a member of the Raft control plane and a worker.

#![warn(missing_docs)]

mod api;
mod bootstrap;
mod config;
mod error;
mod fatal;
mod limits;
mod loggers;
mod manage;
mod plugins;
mod raft_metrics;
mod rest;
mod scheduler;
mod startup;
mod watchdog;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tokio::sync::watch;
use tracing::error;

/// The allocator of the whole process: a record's values, maps and buffers are allocated and
/// freed at a high rate on several threads, where glibc's malloc spent a third of a source
/// task's CPU (`make bench` W3's profile). librdkafka's C `malloc`/`free` are mimalloc's too
/// (the crate's `override` feature): its fetch thread allocates each message and a task's
/// thread frees it, where glibc's arenas took locks and zeroed fresh pages (W1's profile).
/// Transparent huge pages are off for the process ([`main`]).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A Ferry node: Kafka Connect's distributed mode, coordinated by Raft.
#[derive(Parser, Debug)]
#[command(name = "ferryd", version)]
struct Args {
    /// Path of this node's cluster.toml.
    #[arg(short, long, env = "FERRY_CONFIG", default_value = "cluster.toml")]
    config: PathBuf,
    /// Log format (overrides `[log] format` of the config).
    #[arg(long, value_enum)]
    log_format: Option<config::LogFormat>,
    /// Only check the config and exit.
    #[arg(long)]
    check: bool,
}

/// Replaces the node's log filter.
type Reload = Box<dyn Fn(tracing_subscriber::EnvFilter) -> Result<(), String> + Send + Sync>;

/// The node's logging: its filter from `RUST_LOG` or Ferry's default, reloadable, so that
/// `/admin/loggers` can change levels at run time.
fn init_tracing(format: config::LogFormat) -> loggers::Loggers {
    const DEFAULT: &str = "info,openraft=warn,sled=warn,h2=warn,tower=warn,hyper=warn";
    let mut directives = std::env::var("RUST_LOG").unwrap_or_else(|_| DEFAULT.to_string());
    let filter = tracing_subscriber::EnvFilter::try_new(&directives).unwrap_or_else(|_| {
        directives = DEFAULT.to_string();
        tracing_subscriber::EnvFilter::new(DEFAULT)
    });
    // Colours only on a terminal: log files stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let reload: Reload = match format {
        config::LogFormat::Text => {
            let builder = builder.with_env_filter(filter).with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            Box::new(move |f| handle.reload(f).map_err(|e| e.to_string()))
        }
        config::LogFormat::Json => {
            let builder = builder
                .json()
                .with_env_filter(filter)
                .with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            Box::new(move |f| handle.reload(f).map_err(|e| e.to_string()))
        }
    };
    let apply: loggers::Apply = std::sync::Arc::new(move |directives: &str| {
        let filter = tracing_subscriber::EnvFilter::try_new(directives)
            .map_err(|e| format!("log levels {directives:?}: {e}"))?;
        reload(filter)
    });
    loggers::Loggers::new(&directives, Some(apply))
}

fn main() -> ExitCode {
    // mimalloc takes memory in large aligned regions, which a kernel with transparent huge
    // pages `always` backs with 2 MiB pages: each librdkafka thread's first small allocations
    // then hold a huge page (100 connectors on one worker, a client each: peak RSS 127 → 520
    // MiB with librdkafka on mimalloc; with huge pages off 112 MiB, and W1's CPU unchanged).
    // The flag is the process's; the kernel refusing it only costs memory.
    let huge_pages_off = nix::sys::prctl::set_thp_disable(true);
    let args = Args::parse();
    // The config says how to log; what is wrong with it goes to standard error as it is.
    let config = match config::ClusterConfig::load(&args.config) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("ferryd: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!("{}: ok", args.config.display());
        return ExitCode::SUCCESS;
    }
    let loggers = init_tracing(args.log_format.unwrap_or(config.log.format));
    if let Err(e) = huge_pages_off {
        tracing::warn!(error = %e, "cannot turn transparent huge pages off for ferryd; it may hold more memory");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferryd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let watchdog = watchdog::start(
        watchdog::Settings {
            freeze_timeout: Duration::from_millis(config.worker.freeze_timeout_ms),
            shutdown_bound: Duration::from_millis(config.worker.shutdown_timeout_ms),
            test_freeze_file: config.worker.test_freeze_file.clone(),
        },
        runtime.handle(),
        stop_tx,
    );
    let watchdog = match watchdog {
        Ok(watchdog) => watchdog,
        Err(e) => {
            eprintln!("ferryd: cannot start the watchdog: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        tokio::spawn(watchdog.tick());
        match startup::run(config, loggers, stop_rx).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                error!(error = %format!("{e:#}"), "ferryd failed");
                eprintln!("ferryd: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}
