//! The behaviour provider as a child process: serves the parent on the
//! descriptor in `HUBWIRE_FD`. Prints garbage to stdout first, to prove
//! stdout is not the protocol channel.
//!
//! With `HUBWIRE_NATS_URL` set it instead attaches to that NATS server as a
//! replica (`spec/PROTOCOL.md` §13), prints `ready <replica id>` on stdout
//! and serves until killed: the NATS tests kill it with SIGKILL mid-call.

#[tokio::main]
async fn main() {
    let wait = hubwire::WaitMode::from_env().unwrap_or_default();
    let config = hubwire_tests::provider_config().wait(wait);
    if let Ok(url) = std::env::var("HUBWIRE_NATS_URL") {
        let replica = async {
            let client = hubwire::nats::connect(&url).await?;
            hubwire::nats::serve(hubwire_tests::provider(), client, &Default::default(), config.clone()).await
        };
        match replica.await {
            Ok(r) => {
                println!("ready {}", r.id());
                std::future::pending::<()>().await;
            }
            Err(e) => {
                eprintln!("behaviour-provider: {e}");
                std::process::exit(2);
            }
        }
    }
    println!("behaviour-provider starting \u{0}\u{1}\u{2}\u{3} (garbage on stdout is harmless)");
    if let Err(e) = hubwire_tests::provider().serve_child(config).await {
        eprintln!("behaviour-provider: {e}");
        std::process::exit(2);
    }
}
