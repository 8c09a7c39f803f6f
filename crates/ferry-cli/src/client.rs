//! Connecting to a Ferry node: every address in `--server` is tried in turn, so the CLI keeps
//! working while any listed node is up; the node forwards writes to the leader.

use std::time::Duration;

use ferry_proto::management::management_client::ManagementClient;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

/// What went wrong, with the exit code a script can rely on.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

pub const EXIT_ERROR: u8 = 1;
pub const EXIT_NOT_FOUND: u8 = 3;
pub const EXIT_INVALID: u8 = 4;
pub const EXIT_UNAVAILABLE: u8 = 5;
pub const EXIT_CONFLICT: u8 = 6;

impl CliError {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
        }
    }

    pub fn from_status(server: &str, status: &Status) -> Self {
        let code = match status.code() {
            Code::NotFound => EXIT_NOT_FOUND,
            Code::InvalidArgument => EXIT_INVALID,
            Code::AlreadyExists | Code::Aborted | Code::FailedPrecondition => EXIT_CONFLICT,
            Code::Unavailable | Code::DeadlineExceeded => EXIT_UNAVAILABLE,
            _ => EXIT_ERROR,
        };
        let message = if unreachable(status) {
            format!("cannot reach {server}: {}", status.message())
        } else {
            status.message().to_string()
        };
        CliError { code, message }
    }
}

/// How long one call may take: writes wait up to the server's request timeout for a leader.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest answer the CLI reads: the tasks of a connector with thousands of tasks, or a
/// backup, can be larger than gRPC's default of 4 MiB.
const MAX_REPLY_BYTES: usize = 256 * 1024 * 1024;

pub struct Servers {
    addrs: Vec<String>,
}

impl Servers {
    pub fn parse(list: &str) -> Result<Self, CliError> {
        let addrs: Vec<String> = list
            .split(',')
            .map(|a| a.trim().trim_start_matches("http://").to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if addrs.is_empty() {
            return Err(CliError::new(
                EXIT_INVALID,
                "--server is empty: give host:port of a Ferry node",
            ));
        }
        Ok(Servers { addrs })
    }

    fn client(addr: &str) -> Result<ManagementClient<Channel>, CliError> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| {
                CliError::new(
                    EXIT_INVALID,
                    format!("--server {addr:?} is not host:port: {e}"),
                )
            })?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT);
        Ok(ManagementClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(MAX_REPLY_BYTES))
    }

    /// Run `call` against each server until one answers. A server that cannot be reached or
    /// has no reachable leader is skipped, and the leader it names (if any) is tried too: the
    /// CLI follows the leader. Any other answer is final. Writes carry their request id into
    /// every attempt, so a retry applies once.
    pub async fn call<T, F, Fut>(&self, call: F) -> Result<T, CliError>
    where
        F: Fn(ManagementClient<Channel>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut problems = Vec::new();
        let mut addrs = self.addrs.clone();
        let mut next = 0;
        while let Some(addr) = addrs.get(next).cloned() {
            next += 1;
            let client = Self::client(&addr)?;
            match call(client.clone()).await {
                Ok(reply) => return Ok(reply.into_inner()),
                Err(status) if retriable(&status) => {
                    problems.push(CliError::from_status(&addr, &status).message);
                    if let Some(leader) = leader_of(client).await {
                        if !addrs.contains(&leader) {
                            addrs.push(leader);
                        }
                    }
                }
                Err(status) => return Err(CliError::from_status(&addr, &status)),
            }
        }
        Err(CliError::new(
            EXIT_UNAVAILABLE,
            format!("no Ferry node answered ({})", problems.join("; ")),
        ))
    }
}

/// Whether the call never reached a node: the channel's own failure (a refused or timed-out
/// connection), not an answer.
fn unreachable(status: &Status) -> bool {
    std::error::Error::source(status)
        .is_some_and(|source| source.downcast_ref::<tonic::transport::Error>().is_some())
}

fn retriable(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown
    )
}

/// The leader's management address as a node knows it (a local, quick read).
async fn leader_of(mut client: ManagementClient<Channel>) -> Option<String> {
    let mut request = tonic::Request::new(ferry_proto::management::Empty {});
    request.set_timeout(CONNECT_TIMEOUT);
    let status = client.cluster_status(request).await.ok()?.into_inner();
    (!status.leader_api_addr.is_empty()).then_some(status.leader_api_addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_node_that_does_not_listen_is_named_unreachable() {
        let mut client = Servers::client("127.0.0.1:1").expect("a client");
        let status = client
            .cluster_status(ferry_proto::management::Empty {})
            .await
            .expect_err("nothing listens on port 1");
        assert!(unreachable(&status), "{status:?}");
        let failure = CliError::from_status("127.0.0.1:1", &status);
        assert_eq!(failure.code, EXIT_UNAVAILABLE);
        assert!(
            failure.message.starts_with("cannot reach 127.0.0.1:1"),
            "{}",
            failure.message
        );
        let refused = Status::unavailable("no leader");
        assert!(
            !unreachable(&refused),
            "an answer is not a transport failure"
        );
    }
}
