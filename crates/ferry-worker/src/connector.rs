//! The connector instance: it turns the connector config into task configs (Kafka Connect's
//! `taskConfigs(maxTasks)`) and reports the connector's status.

use ferry_connect::config::parsed;
use ferry_meta::state::{Command, TargetState};
use tokio::sync::watch;
use tracing::info;

use crate::unit::{stopped, Failure, UnitCtx};

async fn generate_task_configs(ctx: &UnitCtx) -> Result<(), Failure> {
    let current = {
        let applied = ctx.node.state().read();
        applied
            .state
            .connectors
            .get(&ctx.name)
            .map(|c| c.tasks_version == ctx.version && !c.tasks.is_empty())
    };
    match current {
        None => return Err(Failure::Fenced),
        Some(true) => return Ok(()),
        Some(false) => {}
    }
    let max_tasks = parsed(&ctx.connector_config, "tasks.max", 1usize)?.max(1);
    let connector = (ctx.plugin.connector)(&ctx.connector_config)?;
    let configs = connector.task_configs(max_tasks)?;
    info!(connector = %ctx.name, tasks = configs.len(), version = ctx.version, "task configs");
    ctx.write(Command::PutTaskConfigs {
        name: ctx.name.clone(),
        version: ctx.version,
        configs: configs.into_iter().map(ferry_meta::ConfigMap).collect(),
    })
    .await
    .map(|_| ())
}

/// Run the connector instance until `stop`, following its target state.
pub async fn run(
    ctx: UnitCtx,
    mut control: watch::Receiver<TargetState>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let target = *control.borrow_and_update();
        let step = async {
            if target != TargetState::Stopped {
                generate_task_configs(&ctx).await?;
            }
            ctx.report_target(target).await
        };
        match step.await {
            Ok(()) => {}
            Err(Failure::Fenced | Failure::Stopped) => return,
            Err(Failure::Task(e)) => {
                ctx.report_failure(&e).await;
                return;
            }
        }
        tokio::select! {
            changed = control.changed() => if changed.is_err() { return },
            _ = stopped(&mut stop) => return,
        }
    }
}
