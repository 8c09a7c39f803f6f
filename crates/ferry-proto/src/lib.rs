//! Ferry's gRPC services, generated from `proto/`. Nothing else lives here: domain types and the
//! conversions to and from these messages belong to the crates that own them.

#![warn(missing_docs)]

/// The client-facing management service.
pub mod management {
    // Generated: documented by the comments of `proto/management.proto`.
    #![allow(missing_docs)]
    tonic::include_proto!("ferry.v1");
}

/// The peer-only service: Raft RPCs, forwarded writes, read index, bootstrap probes.
pub mod peer {
    // Generated: documented by the comments of `proto/peer.proto`.
    #![allow(missing_docs)]
    tonic::include_proto!("ferry.peer.v1");
}
