//! Compiles `proto/*.proto` without protoc: protox parses them, tonic-prost-build generates code.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [root.join("management.proto"), root.join("peer.proto")];
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let fds = protox::compile(&files, [&root])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
