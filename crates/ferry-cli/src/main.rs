//! `ferry`: the command-line client of a Ferry cluster.
//!
//! Exit codes: 0 success, 1 other error, 2 usage, 3 not found, 4 invalid input (the message
//! names the field), 5 no node reachable or no leader, 6 conflict (exists already, version
//! mismatch, connector not STOPPED for an offsets change).

#![warn(missing_docs)]

mod client;
mod connectors;
mod input;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ferry_proto::management as pb;

use client::{CliError, Servers, EXIT_INVALID};
use output::Format;

#[derive(Parser, Debug)]
#[command(name = "ferry", version, about = "Manage a Ferry cluster")]
struct Cli {
    /// Ferry node(s) to talk to, `host:port[,host:port…]`; each is tried in turn.
    #[arg(
        long,
        short,
        env = "FERRY_SERVER",
        default_value = "127.0.0.1:7101",
        global = true
    )]
    server: String,
    /// Output: tables for people, JSON for scripts.
    #[arg(long, short, value_enum, default_value = "table", global = true)]
    output: Format,
    /// Id of this write (default: a new one). Repeating a write with the same id, on any
    /// node, applies it once and answers as the first time: scripts that retry use this.
    #[arg(long, global = true)]
    request_id: Option<String>,
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand, Debug)]
enum Top {
    /// Connectors: create, inspect, control.
    #[command(subcommand, alias = "connector")]
    Connectors(Connectors),
    /// The connector plugins this cluster has.
    Plugins,
    /// The Raft cluster: members, leader, add and remove nodes.
    #[command(subcommand)]
    Cluster(Cluster),
    /// The metrics of the node that answers (the first `--server` reachable): the worker's and
    /// its tasks', with Kafka Connect's names, in Prometheus' text format.
    Metrics,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Connectors {
    /// List connector names.
    List,
    /// Create a connector from Kafka Connect JSON: {"name": …, "config": {…}}.
    Create {
        /// The JSON file (`-` for standard input).
        #[arg(short, long)]
        file: PathBuf,
    },
    /// Show a connector's config, or replace it with `-f` (creating it if absent).
    Config {
        name: String,
        /// New config: {"name": …, "config": {…}} or a bare property map.
        #[arg(short, long)]
        file: Option<PathBuf>,
        /// With -f: only if the stored config is at this version.
        #[arg(long)]
        expect_version: Option<u64>,
    },
    /// Check a config without storing it; every field's errors are shown.
    Validate {
        #[arg(short, long)]
        file: PathBuf,
    },
    /// Status of a connector and its tasks.
    Status { name: String },
    /// Pause a connector and its tasks.
    Pause { name: String },
    /// Resume a paused or stopped connector.
    Resume { name: String },
    /// Stop a connector (its offsets may then be altered or reset).
    Stop { name: String },
    /// Restart a connector, optionally with its tasks.
    Restart {
        name: String,
        #[arg(long)]
        include_tasks: bool,
        #[arg(long)]
        only_failed: bool,
    },
    /// Delete a connector, its status and offsets.
    Delete { name: String },
    /// A connector's tasks and where they run.
    Tasks { name: String },
    /// Restart one task.
    RestartTask { name: String, task: u32 },
    /// Show offsets; alter (KIP-875 JSON) or reset them while the connector is STOPPED.
    Offsets {
        name: String,
        /// {"offsets": [{"partition": {…}, "offset": {…} | null}]}
        #[arg(long, conflicts_with = "reset")]
        alter: Option<PathBuf>,
        #[arg(long)]
        reset: bool,
    },
    /// Follow status changes (of one connector, or all) until interrupted.
    Watch { name: Option<String> },
}

#[derive(Subcommand, Debug)]
enum Cluster {
    /// Members and their roles, leader, term, commit and applied index, cluster id.
    Status,
    /// Add a node: it joins as a learner and becomes a voter up to the target voter count.
    AddNode {
        #[arg(long)]
        id: u64,
        #[arg(long)]
        api_addr: String,
        #[arg(long)]
        raft_addr: String,
    },
    /// Demote and remove a node.
    RemoveNode {
        #[arg(long)]
        id: u64,
    },
    /// Write a consistent copy of the replicated state to a file (it holds connector configs
    /// with their secrets: keep it safe). (`-o` is the output format, as everywhere.)
    Backup {
        #[arg(short = 'f', long)]
        file: PathBuf,
    },
    /// Restore a backup into a cluster that has no connectors yet (see
    /// docs/operations.md#backup-and-restore).
    Restore {
        #[arg(short = 'f', long)]
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferry: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("ferry: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let servers = Servers::parse(&cli.server)?;
    let out = cli.output;
    // One id per invocation: every retry of this write, on any node, applies once.
    let rid = cli
        .request_id
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    match cli.command {
        Top::Plugins => {
            let reply = servers
                .call(|mut c| async move { c.list_plugins(pb::Empty {}).await })
                .await?;
            output::plugins(out, &reply);
        }
        Top::Metrics => {
            let reply = servers
                .call(|mut c| async move { c.node_metrics(pb::Empty {}).await })
                .await?;
            output::metrics(out, &reply);
        }
        Top::Cluster(Cluster::Status) => {
            let reply = servers
                .call(|mut c| async move { c.cluster_status(pb::Empty {}).await })
                .await?;
            output::cluster(out, &reply);
        }
        Top::Cluster(Cluster::AddNode {
            id,
            api_addr,
            raft_addr,
        }) => {
            let req = pb::AddNodeRequest {
                id,
                api_addr,
                raft_addr,
            };
            let reply = servers
                .call(|mut c| {
                    let req = req.clone();
                    async move { c.add_node(req).await }
                })
                .await?;
            output::cluster(out, &reply);
        }
        Top::Cluster(Cluster::Backup { file: path }) => {
            let reply = servers
                .call(|mut c| async move { c.backup(pb::Empty {}).await })
                .await?;
            std::fs::write(&path, &reply.data).map_err(|e| {
                CliError::new(
                    EXIT_INVALID,
                    format!("cannot write {}: {e}", path.display()),
                )
            })?;
            output::backup(out, &path, &reply);
        }
        Top::Cluster(Cluster::Restore { file }) => {
            let data = std::fs::read(&file).map_err(|e| {
                CliError::new(EXIT_INVALID, format!("cannot read {}: {e}", file.display()))
            })?;
            let req = pb::RestoreRequest {
                data,
                request_id: rid.clone(),
            };
            let reply = servers
                .call(|mut c| {
                    let req = req.clone();
                    async move { c.restore(req).await }
                })
                .await?;
            output::restore(out, &file, &reply);
        }
        Top::Cluster(Cluster::RemoveNode { id }) => {
            let reply = servers
                .call(|mut c| async move { c.remove_node(pb::RemoveNodeRequest { id }).await })
                .await?;
            output::cluster(out, &reply);
        }
        Top::Connectors(command) => connectors::run(&servers, out, &rid, command).await?,
    }
    Ok(())
}
