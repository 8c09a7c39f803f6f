//! Compiles `proto/*.proto` without protoc: protox parses them, tonic-prost-build generates code.

/// The messages the REST API also answers with, as JSON.
const REST_JSON: [&str; 4] = [
    ".ferry.v1.ClusterStatusResponse",
    ".ferry.v1.Member",
    ".ferry.v1.ConnectorStatusInfo",
    ".ferry.v1.TaskStatus",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [root.join("management.proto"), root.join("peer.proto")];
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let fds = protox::compile(&files, [&root])?;
    // The cluster's and the connectors' status are also the JSON of the REST API's Ferry
    // extensions (`/ferry/cluster`, `/ferry/connectors`), which the web console reads.
    let mut build = tonic_prost_build::configure();
    for message in REST_JSON {
        build = build.type_attribute(message, "#[derive(serde::Serialize)]");
    }
    build.compile_fds(fds)?;
    Ok(())
}
