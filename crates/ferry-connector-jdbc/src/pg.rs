//! The connection to PostgreSQL: connecting with the properties of `connection.*`, and its
//! errors as Connect errors classified by SQLSTATE (connection errors retriable, data errors
//! the record's, the rest fatal), with the server's message and never the password.

use std::time::Duration;

use ferry_connect::{ConnectError, Result};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};
use tracing::debug;

use crate::config::Connection;

/// A PostgreSQL error as a Connect error of the right class; the message has the server's
/// text and SQLSTATE, never the connection's password.
pub fn classify(what: &str, e: &tokio_postgres::Error) -> ConnectError {
    let message = match e.as_db_error() {
        Some(db) => format!(
            "{what}: {}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => format!("{what}: {e}"),
    };
    match e.code().map(SqlState::code) {
        // No code: the connection itself (refused, reset, closed).
        None => ConnectError::retriable(message),
        Some(code) if retriable_state(code) => ConnectError::retriable(message),
        Some(code) if code.starts_with("22") || code.starts_with("23") => {
            ConnectError::data(message)
        }
        Some(_) => ConnectError::fatal(message),
    }
}

/// Connection exceptions, insufficient resources, operator intervention (shutdowns),
/// transaction rollbacks (serialization, deadlock) and lock timeouts pass.
fn retriable_state(code: &str) -> bool {
    ["08", "53", "57", "40"].iter().any(|c| code.starts_with(c)) || code == "55P03"
}

/// Whether an error leaves the connection unusable.
pub fn lost(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.code().is_none()
        || e.code()
            .is_some_and(|c| c.code().starts_with("08") || c.code().starts_with("57"))
}

/// A connection to the database of `c`, as `application` (its driver task spawned).
pub async fn connect(c: &Connection, application: &str) -> Result<Client> {
    let mut config = tokio_postgres::Config::new();
    for (host, port) in &c.hosts {
        config.host(host).port(*port);
    }
    config
        .dbname(&c.database)
        .application_name(application)
        .connect_timeout(Duration::from_secs(10));
    if let Some(user) = &c.user {
        config.user(user);
    }
    if let Some(password) = c.password() {
        config.password(password);
    }
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| classify(&format!("connect to {}", describe(c)), &e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            debug!(error = %e, "PostgreSQL connection ended");
        }
    });
    Ok(client)
}

/// host:port/database, for messages (no credentials).
pub fn describe(c: &Connection) -> String {
    let hosts: Vec<String> = c.hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
    format!("{}/{}", hosts.join(","), c.database)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_that_pass_are_retried() {
        for code in [
            "08006", "08001", "53300", "57P01", "40001", "40P01", "55P03",
        ] {
            assert!(retriable_state(code), "{code}");
        }
        // Data and integrity errors belong to a record; the rest are the config's or schema's.
        for code in ["22001", "23505", "42703", "42P01", "28P01"] {
            assert!(!retriable_state(code), "{code}");
        }
    }
}
