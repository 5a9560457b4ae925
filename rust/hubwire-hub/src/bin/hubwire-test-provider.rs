//! A provider for the hub's tests, started by the hub as a child process.
//!
//! Methods (each name prefixed with `--prefix`, default none):
//! `echo` (raw, unary), `pid` (its process id), `sleep` ({"ms": n}, waits
//! and says so; cancellable), `count` (n → items 0..n), `sum` (stream of
//! integers → their sum), `upper` (bidi: each string upper-cased).
//!
//! `--exit-at-once CODE` prints a fatal line on stderr and exits with CODE
//! before serving: a provider in a crash loop. `--unix PATH` serves on a
//! Unix socket instead of the parent's descriptor (a dialled provider).

use std::time::Duration;

use hubwire::{Config, Error, Provider, Raw};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Sleep {
    ms: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    if let Some(code) = flag("--exit-at-once") {
        eprintln!("fatal: cannot open the database (simulated by --exit-at-once {code})");
        std::process::exit(code.parse().unwrap_or(1));
    }
    let prefix = flag("--prefix").unwrap_or_default();
    let m = |name: &str| format!("{prefix}{name}");
    println!("test provider starting, pid {}", std::process::id());
    eprintln!("test provider: a line on stderr");
    let provider = Provider::new("hubwire-test-provider")
        .unary(&m("echo"), |_ctx, input: Raw| async move { Ok(input) })
        .doc(&m("echo"), "Returns its input bytes")
        .unary(&m("pid"), |_ctx, (): ()| async move { Ok(std::process::id()) })
        .unary(&m("sleep"), |_ctx, s: Sleep| async move {
            tokio::time::sleep(Duration::from_millis(s.ms)).await;
            Ok(format!("slept {} ms", s.ms))
        })
        .server_stream(&m("count"), |_ctx, n: u32, sink: hubwire::ItemSink<u32>| async move {
            for i in 0..n {
                sink.send(&i).await?;
            }
            Ok(())
        })
        .client_stream(&m("sum"), |_ctx, mut items: hubwire::Items<i64>| async move {
            let mut total = 0i64;
            while let Some(x) = items.next().await? {
                total += x;
            }
            Ok::<i64, Error>(total)
        })
        .bidi(&m("upper"), |_ctx, mut items: hubwire::Items<String>, sink: hubwire::ItemSink<String>| async move {
            while let Some(s) = items.next().await? {
                sink.send(&s.to_uppercase()).await?;
            }
            Ok(())
        });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let config = Config::new("hubwire-test-provider");
    if let Some(path) = flag("--unix") {
        let served = rt.block_on(async move {
            let listener = hubwire::transport::unix::UnixListener::bind(&path)?;
            provider.serve(listener, config).await
        });
        if let Err(e) = served {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = rt.block_on(provider.serve_parent(config)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
