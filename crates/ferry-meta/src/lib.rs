//! Ferry's control plane: the replicated [`ClusterState`], the openraft type config, log and
//! state-machine storage on sled, and the peer network (client and server) over tonic.
//!
//! Nothing here knows about Kafka or connectors: the state holds connector configs as opaque
//! property maps.

#![warn(missing_docs)]

pub mod backup;
pub mod error;
pub mod format;
pub mod heal;
pub mod node;
pub mod peer;
pub mod peer_client;
pub mod redact;
pub mod state;
pub mod store;
pub mod tasks;
pub mod types;

pub use error::{MetaError, Result};
pub use node::{Heartbeats, MetaNode, Options as NodeOptions};
pub use redact::ConfigMap;
pub use state::{ClusterState, Command, FerryNode, Outcome, Rejection, Request, Response};
pub use types::{NodeId, Raft, TypeConfig};
