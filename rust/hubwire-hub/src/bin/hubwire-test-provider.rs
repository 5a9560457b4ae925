//! A provider for the hub's tests, started by the hub as a child process.
//!
//! Methods (each name prefixed with `--prefix`, default none):
//! `echo` (raw, unary), `pid` (its process id), `sleep` ({"ms": n}, waits
//! and says so; cancellable), `live` (how many `sleep` handlers are
//! running), `count` (n → items 0..n), `sum` (stream of integers → their
//! sum), `bytes` (stream of raw items → their total length), `upper`
//! (bidi: each string upper-cased), `grandchild` (starts `sleep 1000` as
//! its own child and returns its pid), `env` (its environment, as
//! `NAME=value` strings).
//!
//! `--exit-at-once CODE` prints a fatal line on stderr and exits with CODE
//! before serving: a provider in a crash loop. `--hello-after MS` waits
//! that long before its handshake: a slow starter. `--unix PATH` serves on
//! a Unix socket instead of the parent's descriptor (a dialled provider);
//! with `--direct` too, it takes the direct path (the hub hands its address
//! to clients that ask). `--nats URL` attaches it straight to NATS instead
//! (spec §13), as the provider `--name NAME` (default
//! `hubwire-test-provider`), and prints `nats replica ID` once it listens.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hubwire::{ConnectionOptions, Error, Provider, Raw};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Sleep {
    ms: u64,
}

/// `sleep` handlers running now.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Counts a `sleep` handler in [`LIVE`] until it ends, however it ends.
struct Live;

impl Live {
    fn new() -> Live {
        LIVE.fetch_add(1, Ordering::SeqCst);
        Live
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    if let Some(code) = flag("--exit-at-once") {
        eprintln!("fatal: cannot open the database (simulated by --exit-at-once {code})");
        std::process::exit(code.parse().unwrap_or(1));
    }
    if let Some(ms) = flag("--hello-after") {
        std::thread::sleep(Duration::from_millis(ms.parse().unwrap_or(1000)));
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
            let _live = Live::new();
            tokio::time::sleep(Duration::from_millis(s.ms)).await;
            Ok(format!("slept {} ms", s.ms))
        })
        .unary(&m("live"), |_ctx, (): ()| async move { Ok(LIVE.load(Ordering::SeqCst)) })
        .unary(&m("env"), |_ctx, (): ()| async move { Ok(std::env::vars().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>()) })
        .unary(&m("grandchild"), |_ctx, (): ()| async move {
            let c = std::process::Command::new("sleep").arg("1000").spawn().map_err(|e| Error::defect(e.to_string()))?;
            Ok(c.id())
        })
        .server_stream(&m("count"), |_ctx, n: u32, sink: hubwire::ItemSink<u32>| async move {
            for i in 0..n {
                sink.send(&i).await?;
            }
            Ok(())
        })
        .client_stream(&m("sum"), |_ctx, mut items: hubwire::ItemStream<i64>| async move {
            let mut total = 0i64;
            while let Some(x) = items.next().await? {
                total += x;
            }
            Ok::<i64, Error>(total)
        })
        .client_stream(&m("bytes"), |_ctx, mut items: hubwire::ItemStream<Raw>| async move {
            let mut total = 0u64;
            while let Some(x) = items.next().await? {
                total += x.0.len() as u64;
            }
            Ok::<u64, Error>(total)
        })
        .bidi(&m("upper"), |_ctx, mut items: hubwire::ItemStream<String>, sink: hubwire::ItemSink<String>| async move {
            while let Some(s) = items.next().await? {
                sink.send(&s.to_uppercase()).await?;
            }
            Ok(())
        });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let config = ConnectionOptions::new(flag("--name").unwrap_or_else(|| "hubwire-test-provider".into()));
    // `--direct`: a dialled provider that takes the direct path (spec §14).
    let config = config.direct(args.iter().any(|a| a == "--direct"));
    if let Some(url) = flag("--nats") {
        let served: Result<(), Error> = rt.block_on(async move {
            let client = hubwire::nats::connect(&url).await?;
            let replica = hubwire::nats::serve(provider, client, &hubwire::nats::ServeOptions::default(), config).await?;
            println!("nats replica {}", replica.id());
            std::future::pending::<()>().await;
            Ok(())
        });
        if let Err(e) = served {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
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
    if let Err(e) = rt.block_on(provider.serve_child(config)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
