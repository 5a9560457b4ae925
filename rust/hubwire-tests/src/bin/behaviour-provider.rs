//! The behaviour provider as a child process: serves the parent on the
//! descriptor in `HUBWIRE_FD`. Prints garbage to stdout first, to prove
//! stdout is not the protocol channel.

#[tokio::main]
async fn main() {
    println!("behaviour-provider starting \u{0}\u{1}\u{2}\u{3} (garbage on stdout is harmless)");
    let wait = hubwire::WaitMode::from_env().unwrap_or_default();
    let config = hubwire_tests::provider_config().wait(wait);
    if let Err(e) = hubwire_tests::provider().serve_child(config).await {
        eprintln!("behaviour-provider: {e}");
        std::process::exit(2);
    }
}
