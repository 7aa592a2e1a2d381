//! Compiles the FetchService protos with protox (pure Rust), so no `protoc` is needed to build.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/cloudevent.proto", "proto/fetch-api.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
