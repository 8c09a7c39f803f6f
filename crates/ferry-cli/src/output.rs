//! What the CLI prints: aligned tables for people, JSON for scripts. The JSON follows Kafka
//! Connect's REST shapes where one exists (status, config, offsets), so existing scripts need
//! few changes.

/// `println!` that ends the CLI quietly when standard output is closed (`ferry … | head -1`):
/// a reader that has seen enough is not an error.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

/// Write one line to standard output; a closed pipe ends the process with success.
pub fn line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("ferry: cannot write the output: {e}");
        std::process::exit(1);
    }
}

use std::collections::BTreeMap;

use ferry_proto::management as pb;
use serde_json::{json, Value};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

fn print_json(value: &Value) {
    say!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// Print rows as columns padded to the widest cell.
fn table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = widths.get(i).copied().unwrap_or(0)))
            .collect();
        say!("{}", padded.join("  ").trim_end());
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}

pub fn done(format: Format, message: &str) {
    match format {
        Format::Table => say!("{message}"),
        Format::Json => print_json(&json!({ "ok": true, "message": message })),
    }
}

pub fn names(format: Format, names: &[String]) {
    match format {
        Format::Table => names.iter().for_each(|n| say!("{n}")),
        Format::Json => print_json(&json!(names)),
    }
}

fn sorted(config: &std::collections::HashMap<String, String>) -> BTreeMap<&String, &String> {
    config.iter().collect()
}

pub fn connector(format: Format, info: &pb::ConnectorInfo) {
    match format {
        Format::Table => {
            let verb = if info.created { "created" } else { "updated" };
            say!(
                "{verb} {} (version {}, {}, {})",
                info.name,
                info.version,
                info.r#type,
                info.target_state
            );
            for warning in &info.warnings {
                say!("warning: {warning}");
            }
        }
        Format::Json => print_json(&json!({
            "name": info.name,
            "config": sorted(&info.config),
            "version": info.version,
            "type": info.r#type,
            "target_state": info.target_state,
            "created": info.created,
            "warnings": info.warnings,
        })),
    }
}

pub fn config(format: Format, info: &pb::ConnectorInfo) {
    match format {
        Format::Table => {
            say!(
                "# {} (version {}, {}, {})",
                info.name,
                info.version,
                info.r#type,
                info.target_state
            );
            for (k, v) in sorted(&info.config) {
                say!("{k}={v}");
            }
        }
        Format::Json => print_json(&json!(sorted(&info.config))),
    }
}

pub fn status(format: Format, s: &pb::ConnectorStatusInfo) {
    match format {
        Format::Table => {
            say!(
                "connector {} ({}), target {}",
                s.name,
                s.r#type,
                s.target_state
            );
            let mut rows = vec![vec![
                "connector".to_string(),
                s.state.clone(),
                or_dash(&s.worker_id),
                first_line(&s.trace),
            ]];
            rows.extend(s.tasks.iter().map(|t| {
                vec![
                    format!("task {}", t.id),
                    t.state.clone(),
                    or_dash(&t.worker_id),
                    first_line(&t.trace),
                ]
            }));
            table(&["WHAT", "STATE", "WORKER", "TRACE"], &rows);
        }
        Format::Json => print_json(&status_json(s)),
    }
}

fn first_line(trace: &str) -> String {
    trace
        .lines()
        .next()
        .map_or_else(|| "-".to_string(), str::to_string)
}

fn status_json(s: &pb::ConnectorStatusInfo) -> Value {
    let trace = |t: &str| if t.is_empty() { Value::Null } else { json!(t) };
    json!({
        "name": s.name,
        "connector": {"state": s.state, "worker_id": s.worker_id, "trace": trace(&s.trace)},
        "tasks": s.tasks.iter().map(|t| json!({
            "id": t.id, "state": t.state, "worker_id": t.worker_id,
            "trace": trace(&t.trace), "generation": t.generation,
            "fenced_commits": t.fenced_commits,
        })).collect::<Vec<_>>(),
        "type": s.r#type,
        "target_state": s.target_state,
    })
}

pub fn event(format: Format, e: &pb::StatusEvent) {
    let Some(s) = &e.status else { return };
    match format {
        Format::Table if e.deleted => say!("[{}] {} deleted", e.applied_index, s.name),
        Format::Table => {
            let tasks: Vec<String> = s
                .tasks
                .iter()
                .map(|t| format!("{}={}", t.id, t.state))
                .collect();
            say!(
                "[{}] {} {} (target {}) tasks: {}",
                e.applied_index,
                s.name,
                s.state,
                s.target_state,
                if tasks.is_empty() {
                    "-".into()
                } else {
                    tasks.join(" ")
                }
            );
        }
        Format::Json => say!(
            "{}",
            json!({"applied_index": e.applied_index, "deleted": e.deleted, "status": status_json(s)})
        ),
    }
}

pub fn tasks(format: Format, reply: &pb::ListTasksResponse) {
    match format {
        Format::Table => {
            let rows: Vec<Vec<String>> = reply
                .tasks
                .iter()
                .map(|t| {
                    vec![
                        t.id.to_string(),
                        or_dash(&t.worker_id),
                        t.generation.to_string(),
                        or_dash(&t.partitions.join(",")),
                    ]
                })
                .collect();
            table(&["TASK", "WORKER", "GENERATION", "PARTITIONS"], &rows);
        }
        Format::Json => print_json(&json!(reply
            .tasks
            .iter()
            .map(|t| json!({"id": t.id, "config": sorted(&t.config), "worker_id": t.worker_id, "generation": t.generation, "partitions": t.partitions}))
            .collect::<Vec<_>>())),
    }
}

fn parse_or_string(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

pub fn offsets(format: Format, reply: &pb::ConnectorOffsets) {
    match format {
        Format::Table => {
            let rows: Vec<Vec<String>> = reply
                .offsets
                .iter()
                .map(|o| vec![o.partition_json.clone(), o.offset_json.clone()])
                .collect();
            table(&["PARTITION", "OFFSET"], &rows);
        }
        Format::Json => print_json(&json!({
            "offsets": reply.offsets.iter().map(|o| json!({
                "partition": parse_or_string(&o.partition_json),
                "offset": parse_or_string(&o.offset_json),
            })).collect::<Vec<_>>()
        })),
    }
}

pub fn plugins(format: Format, reply: &pb::ListPluginsResponse) {
    match format {
        Format::Table => {
            let rows: Vec<Vec<String>> = reply
                .plugins
                .iter()
                .map(|p| vec![p.class.clone(), p.r#type.clone(), p.version.clone(), p.aliases.join(", ")])
                .collect();
            table(&["CLASS", "TYPE", "VERSION", "ALIASES"], &rows);
        }
        Format::Json => print_json(&json!(reply
            .plugins
            .iter()
            .map(|p| json!({"class": p.class, "type": p.r#type, "version": p.version, "aliases": p.aliases}))
            .collect::<Vec<_>>())),
    }
}

pub fn validation(format: Format, reply: &pb::ValidateConfigResponse) {
    match format {
        Format::Table => {
            say!(
                "class {}: {} error(s)",
                or_dash(&reply.class),
                reply.error_count
            );
            let rows: Vec<Vec<String>> = reply
                .fields
                .iter()
                .filter(|f| !f.errors.is_empty() || !f.warnings.is_empty() || !f.value.is_empty())
                .map(|f| {
                    let mut notes: Vec<String> =
                        f.errors.iter().map(|e| format!("error: {e}")).collect();
                    notes.extend(f.warnings.iter().map(|w| format!("warning: {w}")));
                    vec![
                        f.name.clone(),
                        or_dash(&f.value),
                        if notes.is_empty() {
                            "ok".into()
                        } else {
                            notes.join("; ")
                        },
                    ]
                })
                .collect();
            table(&["PROPERTY", "VALUE", "RESULT"], &rows);
        }
        Format::Json => print_json(&json!({
            "name": reply.class,
            "error_count": reply.error_count,
            "configs": reply.fields.iter().map(|f| json!({
                "name": f.name, "value": f.value, "errors": f.errors, "warnings": f.warnings,
                "type": f.r#type, "required": f.required, "documentation": f.documentation,
            })).collect::<Vec<_>>(),
        })),
    }
}

/// How many errors of a refused config the CLI lists; `connectors validate` lists them all.
pub const ERRORS_SHOWN: usize = 50;

/// A config the cluster refused: with `-o json` its validation on standard output; the
/// message (for standard error) lists the first [`ERRORS_SHOWN`] errors and counts the rest.
pub fn refused(format: Format, name: &str, validation: &pb::ValidateConfigResponse) -> String {
    if format == Format::Json {
        self::validation(format, validation);
    }
    let errors: Vec<String> = validation
        .fields
        .iter()
        .flat_map(|f| f.errors.iter().map(move |e| format!("{}: {e}", f.name)))
        .collect();
    let mut message = format!(
        "invalid connector config for {name}: {} error(s)",
        errors.len()
    );
    for error in errors.iter().take(ERRORS_SHOWN) {
        message.push_str("\n  ");
        message.push_str(error);
    }
    if errors.len() > ERRORS_SHOWN {
        message.push_str(&format!(
            "\n  … and {} more (`ferry connectors validate -f FILE` lists every one)",
            errors.len() - ERRORS_SHOWN
        ));
    }
    message
}

/// An optional index, or "-".
fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

pub fn cluster(format: Format, c: &pb::ClusterStatusResponse) {
    match format {
        Format::Table => {
            say!("cluster  {}", or_dash(&c.cluster_id));
            say!(
                "leader   {} ({})   term {}",
                opt(c.leader_id),
                or_dash(&c.leader_api_addr),
                c.term
            );
            say!(
                "node {} ({}): committed {}  applied {}  last log {}  snapshot {}  purged {}",
                c.node_id,
                c.state,
                opt(c.committed_index),
                opt(c.applied_index),
                opt(c.last_log_index),
                opt(c.snapshot_index),
                opt(c.purged_index)
            );
            say!(
                "feature level {} (this node understands formats up to {})",
                c.feature_level,
                c.format
            );
            if !c.not_voting.is_empty() {
                say!("not voting: {}", c.not_voting);
            }
            let rows: Vec<Vec<String>> = c
                .members
                .iter()
                .map(|m| {
                    vec![
                        m.id.to_string(),
                        m.role.clone(),
                        m.raft_state.clone(),
                        m.api_addr.clone(),
                        m.raft_addr.clone(),
                        or_dash(&m.rest_addr),
                        opt(m.matched_index),
                    ]
                })
                .collect();
            let header = ["ID", "ROLE", "STATE", "API", "RAFT", "REST", "MATCHED"];
            table(&header, &rows);
        }
        Format::Json => print_json(&json!({
            "cluster_id": c.cluster_id,
            "node_id": c.node_id,
            "state": c.state,
            "leader_id": c.leader_id,
            "leader_api_addr": c.leader_api_addr,
            "term": c.term,
            "committed_index": c.committed_index,
            "applied_index": c.applied_index,
            "last_log_index": c.last_log_index,
            "snapshot_index": c.snapshot_index,
            "purged_index": c.purged_index,
            "target_voters": c.target_voters,
            "incarnation": c.incarnation,
            "not_voting": c.not_voting,
            "removed": c.removed,
            "feature_level": c.feature_level,
            "format": c.format,
            "members": c.members.iter().map(|m| json!({
                "id": m.id, "role": m.role, "raft_state": m.raft_state,
                "api_addr": m.api_addr, "raft_addr": m.raft_addr, "rest_addr": m.rest_addr,
                "matched_index": m.matched_index,
                "incarnation": m.incarnation, "acknowledged_index": m.acknowledged_index,
                "format": m.format,
            })).collect::<Vec<_>>(),
        })),
    }
}

/// What `cluster backup` wrote.
pub fn backup(format: Format, path: &std::path::Path, b: &pb::BackupResponse) {
    match format {
        Format::Table => say!(
            "backup of cluster {} at log index {}: {} connectors, written to {}",
            or_dash(&b.cluster_id),
            opt(b.applied_index),
            b.connectors,
            path.display()
        ),
        Format::Json => print_json(&json!({
            "file": path.display().to_string(),
            "cluster_id": b.cluster_id,
            "applied_index": b.applied_index,
            "connectors": b.connectors,
        })),
    }
}

/// What `cluster restore` brought back.
pub fn restore(format: Format, path: &std::path::Path, r: &pb::RestoreResponse) {
    match format {
        Format::Table => say!(
            "restored {} connectors from {} (cluster {}, log index {})",
            r.connectors,
            path.display(),
            or_dash(&r.from_cluster_id),
            opt(r.from_applied_index)
        ),
        Format::Json => print_json(&json!({
            "file": path.display().to_string(),
            "connectors": r.connectors,
            "from_cluster_id": r.from_cluster_id,
            "from_applied_index": r.from_applied_index,
        })),
    }
}

/// A node's metrics: the text as the node gave it, or with the node's id as JSON.
pub fn metrics(format: Format, m: &pb::NodeMetricsResponse) {
    match format {
        Format::Table => say!("{}", m.text.trim_end()),
        Format::Json => print_json(&json!({"node_id": m.node_id, "metrics": m.text})),
    }
}
