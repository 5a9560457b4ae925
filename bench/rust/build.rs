//! Generates the tonic client and server of the gRPC baseline from Rust
//! type paths (`tonic_build::manual`), so building needs no `protoc`. The
//! messages are hand-written prost structs in `src/systems/grpc.rs`.
//! Also records the compiler's and the peer libraries' versions for the
//! results file.

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version =
        std::process::Command::new(rustc).arg("-V").output().ok().and_then(|o| String::from_utf8(o.stdout).ok()).unwrap_or_default();
    println!("cargo:rustc-env=BENCH_RUSTC_VERSION={}", version.trim());
    println!("cargo:rerun-if-changed=../../rust/Cargo.lock");
    let lock = std::fs::read_to_string("../../rust/Cargo.lock").unwrap_or_default();
    let mut libs = Vec::new();
    for name in ["tonic", "hyper", "ipc-channel", "prost", "tokio"] {
        let needle = format!("name = \"{name}\"\nversion = \"");
        if let Some(at) = lock.find(&needle) {
            let rest = &lock[at + needle.len()..];
            libs.push(format!("{name} {}", &rest[..rest.find('"').unwrap_or(0)]));
        }
    }
    println!("cargo:rustc-env=BENCH_LIBRARY_VERSIONS={}", libs.join(", "));

    let method = |name: &str, route: &str, client_streaming: bool, server_streaming: bool| {
        let mut b = tonic_build::manual::Method::builder()
            .name(name)
            .route_name(route)
            .input_type("crate::systems::grpc::Blob")
            .output_type("crate::systems::grpc::Blob")
            .codec_path("tonic_prost::ProstCodec");
        if client_streaming {
            b = b.client_streaming();
        }
        if server_streaming {
            b = b.server_streaming();
        }
        b.build()
    };
    let service = tonic_build::manual::Service::builder()
        .name("Echo")
        .package("bench")
        .method(method("unary", "Unary", false, false))
        .method(method("stream", "Stream", true, true))
        .build();
    tonic_build::manual::Builder::new().compile(&[service]);
}
