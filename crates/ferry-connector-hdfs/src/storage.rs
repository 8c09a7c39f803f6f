//! Where the sink's files live: HDFS or a local directory that every worker shares, behind one
//! small interface (create and write a file, close it durably, rename without overwriting,
//! list, delete). Errors are classified where they arise: an unreachable store is retriable.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use ferry_connect::{ConnectError, Result};

mod hdfs;
pub use hdfs::HdfsStorage;

/// A file being written.
#[async_trait]
pub trait Output: Send {
    /// Append bytes.
    async fn write(&mut self, bytes: Vec<u8>) -> Result<()>;
    /// Make everything written durable and close the file.
    async fn close(self: Box<Self>) -> Result<()>;
}

/// What a rename found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renamed {
    /// Renamed.
    Done,
    /// The target exists already (a replayed commit): nothing was changed.
    AlreadyThere,
    /// Neither the source nor the target exists.
    Missing,
}

/// Where the files are: HDFS, or a local directory every worker shares.
#[async_trait]
pub trait Storage: Send + Sync {
    /// A new file (its directory is created); an existing one is an error.
    async fn create(&self, path: &str) -> Result<Box<dyn Output>>;
    /// Rename `from` to `to` unless `to` exists (its directory is created).
    async fn rename(&self, from: &str, to: &str) -> Result<Renamed>;
    /// The paths of the files under `dir`, recursively; none if it does not exist.
    async fn list_files(&self, dir: &str) -> Result<Vec<String>>;
    /// Remove a file (none there is no error).
    async fn delete(&self, path: &str) -> Result<()>;
    /// Whether a file is there.
    async fn exists(&self, path: &str) -> Result<bool>;
    /// A file's content (for the shared-directory check and for tests).
    async fn read(&self, path: &str) -> Result<Vec<u8>>;
}

/// A directory of the local file system; paths are absolute in the store and resolved under
/// its root.
pub struct LocalStorage {
    root: PathBuf,
}

impl LocalStorage {
    /// The store under the directory `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStorage { root: root.into() }
    }

    fn resolve(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }
}

/// Run blocking file-system work off the async threads.
async fn blocking<T: Send + 'static>(
    what: String,
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ConnectError::fatal(format!("{what}: {e}")))?
        .map_err(|e| ConnectError::io(what, e))
}

struct LocalOutput {
    path: PathBuf,
    file: Option<std::fs::File>,
}

#[async_trait]
impl Output for LocalOutput {
    async fn write(&mut self, bytes: Vec<u8>) -> Result<()> {
        use std::io::Write;
        let mut file = self
            .file
            .take()
            .ok_or_else(|| ConnectError::fatal(format!("{} is closed", self.path.display())))?;
        let what = format!("write {}", self.path.display());
        let (file, result) = tokio::task::spawn_blocking(move || {
            let result = file.write_all(&bytes);
            (file, result)
        })
        .await
        .map_err(|e| ConnectError::fatal(format!("{what}: {e}")))?;
        self.file = Some(file);
        result.map_err(|e| ConnectError::io(what, e))
    }

    async fn close(mut self: Box<Self>) -> Result<()> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let path = self.path.clone();
        blocking(format!("sync {}", path.display()), move || {
            file.sync_all()?;
            // The directory entry too, so that the file survives a crash.
            match path.parent() {
                Some(dir) => std::fs::File::open(dir)?.sync_all(),
                None => Ok(()),
            }
        })
        .await
    }
}

fn files_under(dir: &Path, root: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            files_under(&path, root, out)?;
        } else if let Ok(relative) = path.strip_prefix(root) {
            out.push(format!("/{}", relative.to_string_lossy()));
        }
    }
    Ok(())
}

#[async_trait]
impl Storage for LocalStorage {
    async fn create(&self, path: &str) -> Result<Box<dyn Output>> {
        let full = self.resolve(path);
        let opened = full.clone();
        let file = blocking(format!("create {}", full.display()), move || {
            if let Some(dir) = opened.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&opened)
        })
        .await?;
        Ok(Box::new(LocalOutput {
            path: full,
            file: Some(file),
        }))
    }

    async fn rename(&self, from: &str, to: &str) -> Result<Renamed> {
        let (from, to) = (self.resolve(from), self.resolve(to));
        let what = format!("rename {} to {}", from.display(), to.display());
        blocking(what, move || {
            if to.exists() {
                return Ok(Renamed::AlreadyThere);
            }
            if !from.exists() {
                return Ok(Renamed::Missing);
            }
            if let Some(dir) = to.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::rename(&from, &to)?;
            if let Some(dir) = to.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(Renamed::Done)
        })
        .await
    }

    async fn list_files(&self, dir: &str) -> Result<Vec<String>> {
        let (full, root) = (self.resolve(dir), self.root.clone());
        blocking(format!("list {}", full.display()), move || {
            let mut out = Vec::new();
            files_under(&full, &root, &mut out)?;
            out.sort();
            Ok(out)
        })
        .await
    }

    async fn delete(&self, path: &str) -> Result<()> {
        let full = self.resolve(path);
        blocking(
            format!("delete {}", full.display()),
            move || match std::fs::remove_file(&full) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            },
        )
        .await
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        let full = self.resolve(path);
        blocking(format!("look up {}", full.display()), move || {
            Ok(full.exists())
        })
        .await
    }

    async fn read(&self, path: &str) -> Result<Vec<u8>> {
        let full = self.resolve(path);
        blocking(format!("read {}", full.display()), move || {
            std::fs::read(&full)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn local_files_are_created_renamed_once_listed_and_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LocalStorage::new(dir.path());
        let mut out = store.create("/t/+tmp/a/x_tmp.txt").await.expect("create");
        out.write(b"one\n".to_vec()).await.expect("write");
        out.close().await.expect("close");
        assert!(
            store.create("/t/+tmp/a/x_tmp.txt").await.is_err(),
            "never overwritten"
        );
        assert_eq!(
            store
                .rename("/t/+tmp/a/x_tmp.txt", "/t/a/x.txt")
                .await
                .expect("rename"),
            Renamed::Done
        );
        assert_eq!(
            store
                .rename("/t/+tmp/a/x_tmp.txt", "/t/a/x.txt")
                .await
                .expect("replay"),
            Renamed::AlreadyThere
        );
        assert_eq!(
            store
                .rename("/t/+tmp/a/y_tmp.txt", "/t/a/y.txt")
                .await
                .expect("lost"),
            Renamed::Missing
        );
        assert_eq!(store.read("/t/a/x.txt").await.expect("read"), b"one\n");
        assert_eq!(store.list_files("/t").await.expect("list"), ["/t/a/x.txt"]);
        assert!(store.list_files("/nowhere").await.expect("list").is_empty());
        store.delete("/t/a/x.txt").await.expect("delete");
        store
            .delete("/t/a/x.txt")
            .await
            .expect("deleting twice is fine");
        assert!(!store.exists("/t/a/x.txt").await.expect("exists"));
    }
}
