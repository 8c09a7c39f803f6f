//! `connection.url` as PostgreSQL's JDBC driver reads it, with `connection.user` and
//! `connection.password`; the password is kept out of `Debug` and of every message.

use std::collections::BTreeMap;

use ferry_connect::config::{at_least, one_of, positive, Choice, Values};
use ferry_connect::{ConfigDef, ConfigKey, ConfigType, ConnectError, Importance, Result};

/// The connection's properties, which both connectors have.
pub(super) fn connection_config() -> ConfigDef {
    use ConfigType::*;
    use Importance::*;
    vec![
        ConfigKey::new(
            "connection.url",
            String,
            High,
            "jdbc:postgresql://host:port/database[?params]",
        )
        .required()
        .validator(|v| Connection::parse_url(v.trim()).map(|_| ())),
        ConfigKey::new(
            "connection.user",
            String,
            High,
            "The database user (wins over the URL's user parameter).",
        ),
        ConfigKey::new(
            "connection.password",
            Password,
            High,
            "The user's password; never shown or logged.",
        ),
        ConfigKey::new(
            "connection.attempts",
            Int,
            Low,
            "Attempts of the source connector to list the tables; tasks retry through the retry layer.",
        )
        .default("3")
        .validator(positive),
        ConfigKey::new(
            "connection.backoff.ms",
            Long,
            Low,
            "The source connector's wait between those attempts.",
        )
        .default("10000")
        .validator(|v| at_least(0)(v)),
        ConfigKey::new(
            "dialect.name",
            String,
            Low,
            "PostgreSqlDatabaseDialect, or empty (taken from the URL).",
        )
        .default("")
        .validator(|v| {
            one_of(
                if v.trim().is_empty() {
                    "PostgreSqlDatabaseDialect"
                } else {
                    v
                },
                &["PostgreSqlDatabaseDialect"],
            )
        }),
    ]
}

/// Where to connect, from `connection.url`, `connection.user` and `connection.password`.
#[derive(Clone, PartialEq, Eq)]
pub struct Connection {
    /// host and port, in the order the URL lists them (the driver tries them in turn).
    pub hosts: Vec<(String, u16)>,
    /// The database (the URL's path).
    pub database: String,
    /// The user, if the URL or `connection.user` names one.
    pub user: Option<String>,
    password: Option<String>,
    /// The URL's other parameters (sslmode, currentSchema, ApplicationName, …).
    pub params: BTreeMap<String, String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("hosts", &self.hosts)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "[hidden]"))
            .field("params", &self.params)
            .finish()
    }
}

/// PostgreSQL's port when the URL names none.
const DEFAULT_PORT: u16 = 5432;

/// Decode `%XX` escapes (URL parameters may hold them, passwords especially).
fn unescape(s: &str) -> std::result::Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a % that does not start an escape")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "escapes that are not UTF-8".to_string())
}

impl Connection {
    /// Parse the connection properties. Errors name `connection.url` and never repeat the
    /// password.
    pub fn from_props(props: &BTreeMap<String, String>) -> Result<Connection> {
        let values = Values::new(connection_config(), props);
        // Read as given, not through its validator: an error must not carry the URL, which
        // may hold a password.
        let url = props
            .get("connection.url")
            .map(|u| u.trim())
            .filter(|u| !u.is_empty())
            .ok_or_else(|| ConnectError::config("connection.url", "missing required property"))?;
        let mut c =
            Connection::parse_url(url).map_err(|e| ConnectError::config("connection.url", e))?;
        // The properties win over the URL's parameters, as in Confluent's connector.
        if let Some(user) = values.text("connection.user")? {
            c.user = Some(user);
        }
        if let Some(password) = values.password("connection.password")? {
            c.password = Some(password);
        }
        Ok(c)
    }

    /// `jdbc:postgresql://host[:port][,host[:port]…]/database[?k=v&…]`, or the short forms
    /// `jdbc:postgresql:database` and `jdbc:postgresql:/` (localhost). Messages quote only
    /// the parts that cannot hold a password.
    pub fn parse_url(url: &str) -> std::result::Result<Connection, String> {
        let rest = url.strip_prefix("jdbc:postgresql:").ok_or_else(|| {
            let scheme = url.split("//").next().unwrap_or(url);
            format!("{scheme:?} is not a PostgreSQL JDBC URL: expected jdbc:postgresql://host:port/database")
        })?;
        let (location, query) = match rest.split_once('?') {
            Some((l, q)) => (l, Some(q)),
            None => (rest, None),
        };
        let (hosts, database) = match location.strip_prefix("//") {
            Some(authority_and_path) => {
                let (authority, database) = authority_and_path
                    .split_once('/')
                    .unwrap_or((authority_and_path, ""));
                let mut hosts = Vec::new();
                for host in authority.split(',').filter(|h| !h.is_empty()) {
                    hosts.push(parse_host(host)?);
                }
                if hosts.is_empty() {
                    hosts.push(("localhost".to_string(), DEFAULT_PORT));
                }
                (hosts, database.to_string())
            }
            None => (
                vec![("localhost".to_string(), DEFAULT_PORT)],
                location.trim_start_matches('/').to_string(),
            ),
        };
        let mut c = Connection {
            hosts,
            database: unescape(&database).map_err(|e| format!("the database name has {e}"))?,
            user: None,
            password: None,
            params: BTreeMap::new(),
        };
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = unescape(value).map_err(|e| format!("parameter {key:?} has {e}"))?;
            match key {
                "user" => c.user = Some(value),
                "password" => c.password = Some(value),
                _ => {
                    c.params.insert(key.to_string(), value);
                }
            }
        }
        if c.database.is_empty() {
            // The driver's default: the database named after the user.
            c.database = c.user.clone().unwrap_or_default();
        }
        Ok(c)
    }

    /// The password, if given; never shown or logged.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }
}

fn parse_host(host: &str) -> std::result::Result<(String, u16), String> {
    // [v6]:port, [v6], host:port, host
    if let Some(v6) = host.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("host {host:?}: an IPv6 address without its ]"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => port(host, p)?,
            None if after.is_empty() => DEFAULT_PORT,
            None => {
                return Err(format!(
                    "host {host:?}: unexpected {after:?} after the address"
                ))
            }
        };
        return Ok((addr.to_string(), port));
    }
    match host.rsplit_once(':') {
        Some((name, p)) => Ok((name.to_string(), port(host, p)?)),
        None => Ok((host.to_string(), DEFAULT_PORT)),
    }
}

fn port(host: &str, p: &str) -> std::result::Result<u16, String> {
    p.parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("host {host:?}: {p:?} is not a port"))
}

/// `quote.sql.identifiers`, which both connectors have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quoting {
    /// Identifiers quoted (`ALWAYS`, the default).
    Always,
    /// Identifiers as they are (`NEVER`).
    Never,
}

impl Choice for Quoting {
    const CHOICES: &'static [(&'static str, Quoting)] =
        &[("always", Quoting::Always), ("never", Quoting::Never)];
}
