//! `ferryd`: one Ferry node — a member of the Raft control plane and a worker.

mod api;
mod boot;
mod bootstrap;
mod config;
mod error;
mod fatal;
mod limits;
mod plugins;
mod scheduler;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tokio::sync::watch;
use tracing::error;

/// A Ferry node: Kafka Connect's distributed mode, coordinated by Raft.
#[derive(Parser, Debug)]
#[command(name = "ferryd", version)]
struct Args {
    /// Path of this node's cluster.toml.
    #[arg(short, long, env = "FERRY_CONFIG", default_value = "cluster.toml")]
    config: PathBuf,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Only check the config and exit.
    #[arg(long)]
    check: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum LogFormat {
    Text,
    Json,
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "info,openraft=warn,sled=warn,h2=warn,tower=warn,hyper=warn",
        )
    });
    // Colours only on a terminal: log files stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    init_tracing(args.log_format);
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
    runtime.block_on(async move {
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            let _ = stop_tx.send(true);
        });
        match boot::run(config, stop_rx).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                error!(error = %format!("{e:#}"), "ferryd failed");
                eprintln!("ferryd: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
