//! The HDFS sink, as Confluent's `HdfsSinkConnector` is configured, on HDFS or on a directory
//! every worker shares. Exactly once (DESIGN.md "Exactly-once sinks"): records go to temporary
//! files named per (topic, partition, generation, uuid); a rotation closes and syncs them and
//! commits "files tmp → final, offsets start → next" through Raft with compare-and-set; only an
//! accepted commit is renamed to Confluent's `<topic>+<partition>+<start>+<end>.<ext>`.
//!
//! Built so far: the config (`config`) and the partitioners (`partitioner`). The storage,
//! formats, rotation and the task
//! come next; until then the plugin is not registered.

#![warn(missing_docs)]

pub mod config;
pub mod format;
pub mod naming;
pub mod partitioner;
pub mod sink;
pub mod storage;
pub mod writer;

pub use config::{hdfs3_sink_plugin, sink_plugin};
