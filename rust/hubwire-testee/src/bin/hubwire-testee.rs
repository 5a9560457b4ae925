//! The Rust testee as a process: control on stdin/stdout.

#[tokio::main]
async fn main() {
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    if let Err(e) = hubwire_testee::run(stdin, tokio::io::stdout(), None).await {
        eprintln!("hubwire-testee: {e}");
        std::process::exit(1);
    }
}
