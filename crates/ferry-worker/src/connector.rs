//! The connector instance: it turns the connector config into task configs (Kafka Connect's
//! `taskConfigs(maxTasks)`), generates them again when the connector asks (Kafka Connect's
//! `requestTaskReconfiguration`: a table was created, say), and reports the connector's status.

use ferry_connect::config::{connector_common, Values};
use ferry_connect::task::Connector;
use ferry_meta::state::{Command, TargetState};
use tokio::sync::watch;
use tracing::info;

use crate::unit::{stopped, Failure, UnitCtx};

/// Write the connector's task configs unless they are current: generated from this config
/// version already or, when the connector asked for new ones, the same as those stored.
async fn put_task_configs(
    ctx: &UnitCtx,
    connector: &dyn Connector,
    asked: bool,
) -> Result<(), Failure> {
    let (stored, level) = {
        let applied = ctx.node.state().read();
        let stored = applied.state.connectors.get(&ctx.name).map(|c| {
            let generated = c.tasks_version == ctx.version;
            (
                generated && c.task_count() > 0,
                generated.then(|| c.task_configs()),
            )
        });
        (stored, applied.state.feature_level())
    };
    let (current, tasks) = stored.ok_or(Failure::Fenced)?;
    if current && !asked {
        return Ok(());
    }
    let max_tasks: usize =
        Values::new(connector_common(), &ctx.connector_config).number("tasks.max")?;
    let configs: Vec<ferry_meta::ConfigMap> = connector
        .task_configs(max_tasks)?
        .into_iter()
        .map(ferry_meta::ConfigMap)
        .collect();
    if tasks.as_ref() == Some(&configs) && !configs.is_empty() {
        return Ok(());
    }
    info!(connector = %ctx.name, tasks = configs.len(), version = ctx.version, "task configs");
    // What the tasks share is written once, where every member reads that format
    // (`Command::format` says which it is); whole otherwise.
    let split = ferry_meta::tasks::split(&configs);
    let put = |configs, shared| Command::PutTaskConfigs {
        name: ctx.name.clone(),
        version: ctx.version,
        configs,
        shared,
    };
    let command = match put(split.own, split.shared) {
        split if split.format() <= level => split,
        _ => put(configs, ferry_meta::ConfigMap::default()),
    };
    ctx.write(command).await.map(|_| ())
}

/// The connector, built and started on first use.
async fn started<'a>(
    ctx: &UnitCtx,
    connector: &'a mut Option<Box<dyn Connector>>,
) -> Result<&'a dyn Connector, Failure> {
    if connector.is_none() {
        let mut built = (ctx.plugin.connector)(&ctx.connector_config)?;
        built.start().await?;
        *connector = Some(built);
    }
    let connector: &'a Option<Box<dyn Connector>> = connector;
    connector.as_deref().ok_or(Failure::Stopped)
}

/// Until the connector asks for new task configs (never, before it is started).
async fn reconfiguration(connector: &mut Option<Box<dyn Connector>>) -> ferry_connect::Result<()> {
    match connector {
        Some(c) => c.reconfigure().await,
        None => std::future::pending().await,
    }
}

/// Run the connector instance until `stop`, following its target state.
#[tracing::instrument(skip_all, fields(unit = %ctx.label(), connector = %ctx.name, task = ctx.task, generation = ctx.generation))]
pub async fn run(
    ctx: UnitCtx,
    mut control: watch::Receiver<TargetState>,
    mut stop: watch::Receiver<bool>,
) {
    let mut connector: Option<Box<dyn Connector>> = None;
    let mut asked = false;
    loop {
        let target = *control.borrow_and_update();
        let step = async {
            if target != TargetState::Stopped {
                let c = started(&ctx, &mut connector).await?;
                put_task_configs(&ctx, c, asked).await?;
            }
            if asked {
                Ok(())
            } else {
                ctx.report_target(target).await
            }
        };
        match step.await {
            Ok(()) => {}
            Err(Failure::Fenced | Failure::Stopped) => return,
            Err(Failure::Task(e)) => {
                ctx.report_failure(&e).await;
                return;
            }
        }
        asked = false;
        tokio::select! {
            changed = control.changed() => if changed.is_err() { return },
            _ = stopped(&mut stop) => return,
            asking = reconfiguration(&mut connector) => match asking {
                Ok(()) => {
                    info!(connector = %ctx.name, "the connector asks for new task configs");
                    asked = true;
                }
                Err(e) => {
                    ctx.report_failure(&e).await;
                    return;
                }
            },
        }
    }
}
