//! The HDFS store of the HDFS sink against a real NameNode and DataNode: the operations the
//! commit protocol relies on (create never overwrites, close makes data durable, rename never
//! overwrites and says what it found, list, delete, read across blocks), checked by Hadoop's
//! own FsShell; and an unreachable NameNode gives a retriable error that names the file.

use ferry_connector_hdfs::storage::{HdfsStorage, Renamed, Storage};
use ferry_tests::hdfs::Hdfs;
use ferry_tests::say;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hdfs_store_keeps_the_commit_protocols_promises_on_a_real_namenode() {
    let mut hdfs = Hdfs::start();
    let store = HdfsStorage::new(&hdfs.namenode).expect("client");

    // 3 MB over 1 MB blocks, written in pieces as the sink writes.
    let data: Vec<u8> = (0..3 * 1024 * 1024 + 123)
        .map(|i| (i % 251) as u8)
        .collect();
    // A retriable failure (a just-started DataNode's block not yet reported: "Not replicated
    // yet") is what the sink's retry layer takes: a new session writes the file again.
    let path = "/data/log/+tmp/t/x_tmp.avro";
    let mut attempt = 0;
    loop {
        attempt += 1;
        let written: ferry_connect::Result<()> = async {
            let mut out = store.create(path).await?;
            for piece in data.chunks(128 * 1024) {
                out.write(piece.to_vec()).await?;
            }
            out.close().await
        }
        .await;
        match written {
            Ok(()) => break,
            Err(e) if e.is_retriable() && attempt < 5 => {
                say(format!("attempt {attempt}: {e}; writing the file again"));
                store.delete(path).await.expect("delete the partial file");
                tokio::time::sleep(std::time::Duration::from_millis(500 * attempt)).await;
            }
            Err(e) => panic!("write: {e:?}"),
        }
    }
    let again = store.create("/data/log/+tmp/t/x_tmp.avro").await;
    assert!(again.is_err(), "an existing file is never overwritten");

    assert_eq!(
        store
            .rename("/data/log/+tmp/t/x_tmp.avro", "/data/log/t/a/x.avro")
            .await
            .expect("rename"),
        Renamed::Done
    );
    assert_eq!(
        store
            .rename("/data/log/+tmp/t/x_tmp.avro", "/data/log/t/a/x.avro")
            .await
            .expect("replayed rename"),
        Renamed::AlreadyThere
    );
    assert_eq!(
        store
            .rename("/data/log/+tmp/t/y_tmp.avro", "/data/log/t/a/y.avro")
            .await
            .expect("lost rename"),
        Renamed::Missing
    );
    // A rename onto an existing file leaves both as they were.
    let mut other = store
        .create("/data/log/+tmp/t/z_tmp.avro")
        .await
        .expect("create");
    other.write(b"other".to_vec()).await.expect("write");
    other.close().await.expect("close");
    assert_eq!(
        store
            .rename("/data/log/+tmp/t/z_tmp.avro", "/data/log/t/a/x.avro")
            .await
            .expect("rename onto a file"),
        Renamed::AlreadyThere
    );
    assert_eq!(
        store.read("/data/log/t/a/x.avro").await.expect("read"),
        data,
        "read back across blocks"
    );

    assert_eq!(
        store.list_files("/data/log").await.expect("list"),
        ["/data/log/+tmp/t/z_tmp.avro", "/data/log/t/a/x.avro"]
    );
    assert!(store.list_files("/nowhere").await.expect("list").is_empty());
    // Hadoop's own client sees the same, with the full length.
    let listing = hdfs.shell(&["-ls", "-R", "/data/log"]);
    say(format!("hdfs dfs -ls -R /data/log:\n{listing}"));
    assert!(
        listing.contains(&format!("{} ", data.len())) && listing.contains("/data/log/t/a/x.avro"),
        "{listing}"
    );
    assert_eq!(
        hdfs.files("/data/log"),
        ["/data/log/+tmp/t/z_tmp.avro", "/data/log/t/a/x.avro"]
    );

    store
        .delete("/data/log/+tmp/t/z_tmp.avro")
        .await
        .expect("delete");
    store
        .delete("/data/log/+tmp/t/z_tmp.avro")
        .await
        .expect("deleting twice is fine");
    assert!(!store
        .exists("/data/log/+tmp/t/z_tmp.avro")
        .await
        .expect("exists"));
    assert!(store.exists("/data/log/t/a/x.avro").await.expect("exists"));

    // The NameNode goes away: a clear, retriable error naming the file; back again: it works.
    hdfs.kill_namenode();
    let t = std::time::Instant::now();
    let failed = match store.create("/data/log/+tmp/t/w_tmp.avro").await {
        Ok(_) => panic!("created a file without a NameNode"),
        Err(e) => e,
    };
    say(format!(
        "without a NameNode, after {} ms: {}",
        t.elapsed().as_millis(),
        failed.message
    ));
    assert!(failed.is_retriable(), "{}", failed.message);
    assert!(
        failed.message.contains("/data/log/+tmp/t/w_tmp.avro"),
        "{}",
        failed.message
    );
    hdfs.start_namenode();
    // Safe mode until the DataNode reports again: retriable too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let read = loop {
        match store.read("/data/log/t/a/x.avro").await {
            Ok(read) => break read,
            Err(e) => {
                assert!(e.is_retriable(), "{}", e.message);
                assert!(
                    std::time::Instant::now() < deadline,
                    "NameNode not back: {}",
                    e.message
                );
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    };
    say(format!(
        "NameNode restarted: the committed file reads back {} ms after the kill",
        t.elapsed().as_millis()
    ));
    assert_eq!(read, data, "the committed file survives a NameNode restart");
}
