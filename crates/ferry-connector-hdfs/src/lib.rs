//! The HDFS sink, as Confluent's `HdfsSinkConnector` is configured, on HDFS or on a directory
//! every worker shares. Exactly once (docs/design.md#the-storage-sink): records go to temporary
//! files named per (topic, partition, generation, uuid); a rotation closes and syncs them and
//! commits "files tmp → final, offsets start → next" through Raft with compare-and-set; only an
//! accepted commit is renamed to Confluent's `<topic>+<partition>+<start>+<end>.<ext>`.

#![warn(missing_docs)]

pub mod config;
pub mod format;
pub mod naming;
pub mod partitioner;
pub mod sink;
pub mod storage;
pub mod writer;

pub use config::{hdfs3_sink_plugin, sink_plugin};
