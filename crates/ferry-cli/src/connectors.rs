//! `ferry connectors …`: each command a function that builds its request, calls the cluster
//! and prints the answer.

use std::path::Path;

use ferry_proto::management as pb;

use crate::client::{CliError, Servers, EXIT_INVALID};
use crate::input::{self, ConnectorJson};
use crate::output::{self, Format};
use crate::Connectors;

/// Run one `ferry connectors` command.
pub async fn run(
    servers: &Servers,
    out: Format,
    rid: &str,
    command: Connectors,
) -> Result<(), CliError> {
    match command {
        Connectors::List => list(servers, out).await,
        Connectors::Create { file } => create(servers, out, rid, &file).await,
        Connectors::Config {
            name, file: None, ..
        } => show_config(servers, out, name).await,
        Connectors::Config {
            name,
            file: Some(file),
            expect_version,
        } => put_config(servers, out, rid, name, &file, expect_version).await,
        Connectors::Validate { file } => validate(servers, out, &file).await,
        Connectors::Status { name } => status(servers, out, name).await,
        Connectors::Pause { name } => set_target(servers, out, rid, &name, Target::Pause).await,
        Connectors::Resume { name } => set_target(servers, out, rid, &name, Target::Resume).await,
        Connectors::Stop { name } => set_target(servers, out, rid, &name, Target::Stop).await,
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
            restart(servers, out, req).await
        }
        Connectors::Delete { name } => delete(servers, out, rid, &name).await,
        Connectors::Tasks { name } => tasks(servers, out, name).await,
        Connectors::RestartTask { name, task } => restart_task(servers, out, rid, name, task).await,
        Connectors::Offsets {
            name,
            alter: None,
            reset: false,
        } => offsets(servers, out, name).await,
        Connectors::Offsets {
            name,
            alter: Some(file),
            ..
        } => alter_offsets(servers, out, rid, name, &file).await,
        Connectors::Offsets {
            name, reset: true, ..
        } => reset_offsets(servers, out, rid, &name).await,
        Connectors::Watch { name } => watch(servers, out, name.unwrap_or_default()).await,
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

/// A connector's JSON file (`{"name": …, "config": {…}}` or a bare config).
fn read_connector(file: &Path) -> Result<ConnectorJson, CliError> {
    let text = input::read(file).map_err(invalid)?;
    input::parse_connector(&text, &file.display().to_string()).map_err(invalid)
}

async fn list(servers: &Servers, out: Format) -> Result<(), CliError> {
    let reply = servers
        .call(|mut c| async move { c.list_connectors(pb::ListConnectorsRequest {}).await })
        .await?;
    output::names(out, &reply.names);
    Ok(())
}

async fn create(servers: &Servers, out: Format, rid: &str, file: &Path) -> Result<(), CliError> {
    let parsed = read_connector(file)?;
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
    stored(out, &reply)
}

async fn show_config(servers: &Servers, out: Format, name: String) -> Result<(), CliError> {
    let reply = servers
        .call(|mut c| {
            let name = name.clone();
            async move { c.get_connector(pb::ConnectorName { name }).await }
        })
        .await?;
    output::config(out, &reply);
    Ok(())
}

async fn put_config(
    servers: &Servers,
    out: Format,
    rid: &str,
    name: String,
    file: &Path,
    expected_version: Option<u64>,
) -> Result<(), CliError> {
    let req = pb::PutConnectorConfigRequest {
        name,
        config: read_connector(file)?.config,
        request_id: rid.to_string(),
        expected_version,
    };
    let reply = servers
        .call(|mut c| {
            let req = req.clone();
            async move { c.put_connector_config(req).await }
        })
        .await?;
    stored(out, &reply)
}

async fn validate(servers: &Servers, out: Format, file: &Path) -> Result<(), CliError> {
    let parsed = read_connector(file)?;
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
    Ok(())
}

async fn status(servers: &Servers, out: Format, name: String) -> Result<(), CliError> {
    let reply = servers
        .call(|mut c| {
            let name = name.clone();
            async move { c.connector_status(pb::ConnectorName { name }).await }
        })
        .await?;
    output::status(out, &reply);
    Ok(())
}

async fn restart(
    servers: &Servers,
    out: Format,
    req: pb::RestartConnectorRequest,
) -> Result<(), CliError> {
    let reply = servers
        .call(|mut c| {
            let req = req.clone();
            async move { c.restart_connector(req).await }
        })
        .await?;
    output::status(out, &reply);
    Ok(())
}

async fn delete(servers: &Servers, out: Format, rid: &str, name: &str) -> Result<(), CliError> {
    servers
        .call(|mut c| {
            let req = write_request(name, rid);
            async move { c.delete_connector(req).await }
        })
        .await?;
    output::done(out, &format!("deleted {name}"));
    Ok(())
}

async fn tasks(servers: &Servers, out: Format, name: String) -> Result<(), CliError> {
    let reply = servers
        .call(|mut c| {
            let name = name.clone();
            async move { c.list_tasks(pb::ConnectorName { name }).await }
        })
        .await?;
    output::tasks(out, &reply);
    Ok(())
}

async fn restart_task(
    servers: &Servers,
    out: Format,
    rid: &str,
    name: String,
    task: u32,
) -> Result<(), CliError> {
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
    Ok(())
}

async fn offsets(servers: &Servers, out: Format, name: String) -> Result<(), CliError> {
    let reply = servers
        .call(|mut c| {
            let name = name.clone();
            async move { c.get_offsets(pb::ConnectorName { name }).await }
        })
        .await?;
    output::offsets(out, &reply);
    Ok(())
}

async fn alter_offsets(
    servers: &Servers,
    out: Format,
    rid: &str,
    name: String,
    file: &Path,
) -> Result<(), CliError> {
    let text = input::read(file).map_err(invalid)?;
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
    Ok(())
}

async fn reset_offsets(
    servers: &Servers,
    out: Format,
    rid: &str,
    name: &str,
) -> Result<(), CliError> {
    let reply = servers
        .call(|mut c| {
            let req = write_request(name, rid);
            async move { c.reset_offsets(req).await }
        })
        .await?;
    output::offsets(out, &reply);
    Ok(())
}

/// Follow status changes until the stream ends.
async fn watch(servers: &Servers, out: Format, name: String) -> Result<(), CliError> {
    let mut stream = servers
        .call(|mut c| {
            let name = name.clone();
            async move { c.watch_status(pb::WatchStatusRequest { name }).await }
        })
        .await?;
    loop {
        match stream.message().await {
            Ok(Some(event)) => output::event(out, &event),
            Ok(None) => return Ok(()),
            Err(status) => return Err(CliError::from_status("the server", &status)),
        }
    }
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
