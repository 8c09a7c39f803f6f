//! `ferry`: the command-line client of a Ferry cluster.
//!
//! Exit codes: 0 success, 1 other error, 2 usage, 3 not found, 4 invalid input (the message
//! names the field), 5 no node reachable or no leader, 6 conflict (exists already, version
//! mismatch, connector not STOPPED for an offsets change).

mod client;
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
}

#[derive(Subcommand, Debug)]
enum Connectors {
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
    /// Restore a backup into a cluster that has no connectors yet (see README, "Backup and
    /// restore").
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

fn invalid(e: anyhow::Error) -> CliError {
    CliError::new(EXIT_INVALID, format!("{e:#}"))
}

fn write_request(name: &str, request_id: &str) -> pb::WriteConnectorRequest {
    pb::WriteConnectorRequest {
        name: name.to_string(),
        request_id: request_id.to_string(),
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
        Top::Connectors(command) => connectors(&servers, out, &rid, command).await?,
    }
    Ok(())
}

async fn connectors(
    servers: &Servers,
    out: Format,
    rid: &str,
    command: Connectors,
) -> Result<(), CliError> {
    match command {
        Connectors::List => {
            let reply = servers
                .call(|mut c| async move { c.list_connectors(pb::ListConnectorsRequest {}).await })
                .await?;
            output::names(out, &reply.names);
        }
        Connectors::Create { file } => {
            let text = input::read(&file).map_err(invalid)?;
            let parsed =
                input::parse_connector(&text, &file.display().to_string()).map_err(invalid)?;
            let name = parsed.name.clone().ok_or_else(|| {
                CliError::new(
                    EXIT_INVALID,
                    format!("{}: \"name\" is missing", file.display()),
                )
            })?;
            let req = pb::CreateConnectorRequest {
                name,
                config: parsed.config,
                request_id: rid.to_string(),
            };
            let reply = servers
                .call(|mut c| {
                    let req = req.clone();
                    async move { c.create_connector(req).await }
                })
                .await?;
            stored(out, &reply)?;
        }
        Connectors::Config {
            name, file: None, ..
        } => {
            let reply = servers
                .call(|mut c| {
                    let name = name.clone();
                    async move { c.get_connector(pb::ConnectorName { name }).await }
                })
                .await?;
            output::config(out, &reply);
        }
        Connectors::Config {
            name,
            file: Some(file),
            expect_version,
        } => {
            let text = input::read(&file).map_err(invalid)?;
            let parsed =
                input::parse_connector(&text, &file.display().to_string()).map_err(invalid)?;
            let req = pb::PutConnectorConfigRequest {
                name,
                config: parsed.config,
                request_id: rid.to_string(),
                expected_version: expect_version,
            };
            let reply = servers
                .call(|mut c| {
                    let req = req.clone();
                    async move { c.put_connector_config(req).await }
                })
                .await?;
            stored(out, &reply)?;
        }
        Connectors::Validate { file } => {
            let text = input::read(&file).map_err(invalid)?;
            let parsed =
                input::parse_connector(&text, &file.display().to_string()).map_err(invalid)?;
            let mut config = parsed.config;
            if let Some(name) = parsed.name {
                config.entry("name".into()).or_insert(name);
            }
            let reply = servers
                .call(|mut c| {
                    let config = config.clone();
                    async move {
                        c.validate_config(pb::ValidateConfigRequest { config })
                            .await
                    }
                })
                .await?;
            output::validation(out, &reply);
            if reply.error_count > 0 {
                return Err(CliError::new(
                    EXIT_INVALID,
                    format!("{} error(s) in the config", reply.error_count),
                ));
            }
        }
        Connectors::Status { name } => {
            let reply = servers
                .call(|mut c| {
                    let name = name.clone();
                    async move { c.connector_status(pb::ConnectorName { name }).await }
                })
                .await?;
            output::status(out, &reply);
        }
        Connectors::Pause { name } => set_target(servers, out, rid, &name, Target::Pause).await?,
        Connectors::Resume { name } => set_target(servers, out, rid, &name, Target::Resume).await?,
        Connectors::Stop { name } => set_target(servers, out, rid, &name, Target::Stop).await?,
        Connectors::Restart {
            name,
            include_tasks,
            only_failed,
        } => {
            let req = pb::RestartConnectorRequest {
                name,
                include_tasks,
                only_failed,
                request_id: rid.to_string(),
            };
            let reply = servers
                .call(|mut c| {
                    let req = req.clone();
                    async move { c.restart_connector(req).await }
                })
                .await?;
            output::status(out, &reply);
        }
        Connectors::Delete { name } => {
            servers
                .call(|mut c| {
                    let req = write_request(&name, rid);
                    async move { c.delete_connector(req).await }
                })
                .await?;
            output::done(out, &format!("deleted {name}"));
        }
        Connectors::Tasks { name } => {
            let reply = servers
                .call(|mut c| {
                    let name = name.clone();
                    async move { c.list_tasks(pb::ConnectorName { name }).await }
                })
                .await?;
            output::tasks(out, &reply);
        }
        Connectors::RestartTask { name, task } => {
            let req = pb::RestartTaskRequest {
                name: name.clone(),
                task,
                request_id: rid.to_string(),
            };
            servers
                .call(|mut c| {
                    let req = req.clone();
                    async move { c.restart_task(req).await }
                })
                .await?;
            output::done(out, &format!("restarting {name} task {task}"));
        }
        Connectors::Offsets {
            name,
            alter: None,
            reset: false,
        } => {
            let reply = servers
                .call(|mut c| {
                    let name = name.clone();
                    async move { c.get_offsets(pb::ConnectorName { name }).await }
                })
                .await?;
            output::offsets(out, &reply);
        }
        Connectors::Offsets {
            name,
            alter: Some(file),
            ..
        } => {
            let text = input::read(&file).map_err(invalid)?;
            let offsets = input::parse_offsets(&text, &file.display().to_string())
                .map_err(invalid)?
                .into_iter()
                .map(|(partition_json, offset_json)| pb::ConnectorOffset {
                    partition_json,
                    offset_json,
                })
                .collect();
            let req = pb::AlterOffsetsRequest {
                name,
                offsets,
                request_id: rid.to_string(),
            };
            let reply = servers
                .call(|mut c| {
                    let req = req.clone();
                    async move { c.alter_offsets(req).await }
                })
                .await?;
            output::offsets(out, &reply);
        }
        Connectors::Offsets {
            name, reset: true, ..
        } => {
            let reply = servers
                .call(|mut c| {
                    let req = write_request(&name, rid);
                    async move { c.reset_offsets(req).await }
                })
                .await?;
            output::offsets(out, &reply);
        }
        Connectors::Watch { name } => {
            let name = name.unwrap_or_default();
            let mut stream = servers
                .call(|mut c| {
                    let name = name.clone();
                    async move { c.watch_status(pb::WatchStatusRequest { name }).await }
                })
                .await?;
            loop {
                match stream.message().await {
                    Ok(Some(event)) => output::event(out, &event),
                    Ok(None) => break,
                    Err(status) => return Err(CliError::from_status("the server", &status)),
                }
            }
        }
    }
    Ok(())
}

/// The answer to a create or a config change: the stored connector, or the refusal with
/// every property's errors (exit 4).
fn stored(out: Format, reply: &pb::ConnectorInfo) -> Result<(), CliError> {
    match &reply.refused {
        Some(validation) => Err(CliError::new(
            EXIT_INVALID,
            output::refused(out, &reply.name, validation),
        )),
        None => {
            output::connector(out, reply);
            Ok(())
        }
    }
}

#[derive(Clone, Copy)]
enum Target {
    Pause,
    Resume,
    Stop,
}

async fn set_target(
    servers: &Servers,
    out: Format,
    rid: &str,
    name: &str,
    target: Target,
) -> Result<(), CliError> {
    servers
        .call(|mut c| {
            let req = write_request(name, rid);
            async move {
                match target {
                    Target::Pause => c.pause_connector(req).await,
                    Target::Resume => c.resume_connector(req).await,
                    Target::Stop => c.stop_connector(req).await,
                }
            }
        })
        .await?;
    let done = match target {
        Target::Pause => "paused",
        Target::Resume => "resumed",
        Target::Stop => "stopped",
    };
    output::done(out, &format!("{done} {name}"));
    Ok(())
}
