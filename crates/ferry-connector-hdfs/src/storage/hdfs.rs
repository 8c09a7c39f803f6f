//! The store on a real HDFS, through hdfs-native (the NameNode's RPC and the DataNodes'
//! transfer protocol, no JVM). A file is written through one pipeline, synced (`hsync`) and
//! completed on close; a rename never overwrites (rename2 without OVERWRITE).

use async_trait::async_trait;
use bytes::Bytes;
use ferry_connect::{ConnectError, Result};
use hdfs_native::client::FileStatus;
use hdfs_native::file::FileWriter;
use hdfs_native::{Client, ClientBuilder, HdfsError, WriteOptions};

use super::{Output, Renamed, Storage};

/// NameNode exceptions that pass: the NameNode is starting, failing over, or waiting for
/// replicas.
const RETRIABLE_EXCEPTIONS: &[&str] = &[
    "org.apache.hadoop.ipc.RetriableException",
    "org.apache.hadoop.ipc.StandbyException",
    "org.apache.hadoop.hdfs.server.namenode.SafeModeException",
    "org.apache.hadoop.hdfs.server.namenode.NotReplicatedYetException",
    "org.apache.hadoop.hdfs.protocol.RecoveryInProgressException",
];

/// An HDFS failure as the runtime sees it: lost connections, a NameNode in safe mode and a
/// broken block pipeline can pass, and are retriable; the rest (permissions, bad paths, an
/// existing file) are not.
fn classify(what: String, e: HdfsError) -> ConnectError {
    match e {
        HdfsError::IOError(io) => ConnectError::io(what, io),
        HdfsError::DataTransferError(_)
        | HdfsError::ChecksumError
        | HdfsError::BlocksNotFound(_) => ConnectError::retriable(format!("{what}: {e}")),
        // The NameNode's Java stack trace stays out of the task's status.
        HdfsError::RPCError(class, message) => {
            let message = format!("{what}: {class}: {}", message.lines().next().unwrap_or(""));
            if RETRIABLE_EXCEPTIONS.contains(&class.as_str()) {
                ConnectError::retriable(message)
            } else {
                ConnectError::fatal(message)
            }
        }
        other => ConnectError::fatal(format!("{what}: {other}")),
    }
}

fn parent(path: &str) -> Option<&str> {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) | None => None,
        Some((dir, _)) => Some(dir),
    }
}

/// The files of a NameNode (`hdfs://host:port`); paths are absolute.
pub struct HdfsStorage {
    url: String,
    client: Client,
}

impl HdfsStorage {
    /// A client of the NameNode at `namenode` (`host:port`).
    pub fn new(namenode: &str) -> Result<Self> {
        let url = format!("hdfs://{namenode}");
        // The client's own retries of an unreachable NameNode would take three minutes
        // (15 attempts, up to 15 s apart); a few quick ones, then the error reaches the
        // runtime's retry layer, which backs off within errors.retry.timeout and shows it.
        let client = ClientBuilder::new()
            .with_url(url.clone())
            .with_config([
                ("dfs.client.failover.max.attempts", "2"),
                ("dfs.client.failover.sleep.base.millis", "200"),
                ("dfs.client.failover.sleep.max.millis", "1000"),
            ])
            .build()
            .map_err(|e| ConnectError::config("store.url", format!("{url}: {e}")))?;
        Ok(HdfsStorage { url, client })
    }

    fn what(&self, action: &str, path: &str) -> String {
        format!("{action} {}{path}", self.url)
    }

    async fn status(&self, path: &str) -> Result<Option<FileStatus>> {
        match self.client.get_file_info(path).await {
            Ok(status) => Ok(Some(status)),
            Err(HdfsError::FileNotFound(_)) => Ok(None),
            Err(e) => Err(classify(self.what("look up", path), e)),
        }
    }

    async fn mkdirs(&self, dir: &str) -> Result<()> {
        self.client
            .mkdirs(dir, 0o755, true)
            .await
            .map_err(|e| classify(self.what("create directory", dir), e))
    }
}

struct HdfsOutput {
    what: String,
    file: FileWriter,
}

#[async_trait]
impl Output for HdfsOutput {
    async fn write(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.file
            .write_bytes(Bytes::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| classify(format!("write {}", self.what), e))
    }

    async fn close(mut self: Box<Self>) -> Result<()> {
        self.file
            .hsync()
            .await
            .map_err(|e| classify(format!("sync {}", self.what), e))?;
        self.file
            .close()
            .await
            .map_err(|e| classify(format!("close {}", self.what), e))
    }
}

#[async_trait]
impl Storage for HdfsStorage {
    async fn create(&self, path: &str) -> Result<Box<dyn Output>> {
        let options = WriteOptions::default().overwrite(false).create_parent(true);
        let file = self
            .client
            .create(path, options)
            .await
            .map_err(|e| classify(self.what("create", path), e))?;
        Ok(Box::new(HdfsOutput {
            what: format!("{}{path}", self.url),
            file,
        }))
    }

    async fn rename(&self, from: &str, to: &str) -> Result<Renamed> {
        if self.status(to).await?.is_some() {
            return Ok(Renamed::AlreadyThere);
        }
        if self.status(from).await?.is_none() {
            return Ok(Renamed::Missing);
        }
        if let Some(dir) = parent(to) {
            self.mkdirs(dir).await?;
        }
        match self.client.rename(from, to, false).await {
            Ok(()) => Ok(Renamed::Done),
            // Renamed by someone else between the look-up and now.
            Err(HdfsError::AlreadyExists(_)) => Ok(Renamed::AlreadyThere),
            Err(e) => Err(classify(self.what(&format!("rename {from} to"), to), e)),
        }
    }

    async fn list_files(&self, dir: &str) -> Result<Vec<String>> {
        let listed = match self.client.list_status(dir, true).await {
            Ok(listed) => listed,
            Err(HdfsError::FileNotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(classify(self.what("list", dir), e)),
        };
        let mut files: Vec<String> = listed
            .into_iter()
            .filter(|s| !s.isdir)
            .map(|s| s.path)
            .collect();
        files.sort();
        Ok(files)
    }

    async fn delete(&self, path: &str) -> Result<()> {
        match self.client.delete(path, false).await {
            Ok(_) | Err(HdfsError::FileNotFound(_)) => Ok(()),
            Err(e) => Err(classify(self.what("delete", path), e)),
        }
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        Ok(self.status(path).await?.is_some())
    }

    async fn read(&self, path: &str) -> Result<Vec<u8>> {
        let mut reader = self
            .client
            .read(path)
            .await
            .map_err(|e| classify(self.what("open", path), e))?;
        let length = reader.file_length();
        reader
            .read_bytes(length)
            .await
            .map(|b| b.to_vec())
            .map_err(|e| classify(self.what("read", path), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_of_absolute_paths() {
        assert_eq!(parent("/a/b/c.txt"), Some("/a/b"));
        assert_eq!(parent("/a"), None);
    }

    #[test]
    fn lost_connections_and_safe_mode_are_retriable_bad_paths_are_not() {
        let refused =
            HdfsError::IOError(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(classify("create /x".into(), refused).is_retriable());
        let safe = HdfsError::RPCError(
            "org.apache.hadoop.hdfs.server.namenode.SafeModeException".into(),
            "Name node is in safe mode".into(),
        );
        assert!(classify("create /x".into(), safe).is_retriable());
        let denied = HdfsError::RPCError(
            "org.apache.hadoop.security.AccessControlException".into(),
            "Permission denied\n\tat org.apache.hadoop.Server.call(Server.java:1)".into(),
        );
        let e = classify("create /x".into(), denied);
        assert!(!e.is_retriable());
        assert_eq!(
            e.message,
            "create /x: org.apache.hadoop.security.AccessControlException: Permission denied"
        );
    }
}
