//! A provider that misbehaves on request, for `make test-hardening`.
//! Started by the hub as a child process, like any provider.
//!
//! Methods (each name prefixed with `--prefix`, default `m.`):
//! * `pid` — its process id.
//! * `hold` (raw) — sleeps `--hold-ms` (default 200) ms, then returns the
//!   input's length: a slow provider that calls queue up behind.
//! * `drain` (client stream of raw items) — reads one item per 10 ms and
//!   returns the total length: a slow consumer of streams.
//! * `stdout` ({"n"}) — writes n bytes to stdout with no newline.
//! * `stderr` ({"n"}) — writes one stderr line of n bytes.
//! * `never` — never answers (the connection still answers PINGs): a
//!   provider that is alive but stuck.
//! * `die` — answers its pid, then exits with status 1 20 ms later.
//! * `setsid` — starts `sleep 1000` in a new session (out of the
//!   provider's process group) and returns its pid.
//! * `env` — its environment, as `NAME=value` strings.
//!
//! `--exit-after MS` sleeps that long and exits with status 3 without a
//! handshake: a provider in a crash loop that spends its life inside the
//! hub's handshake window.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use hubwire::{ConnectionOptions, Error, ItemStream, Provider, Raw};
use serde::{Deserialize, Serialize};

/// The size argument of `stdout` and `stderr`.
#[derive(Serialize, Deserialize)]
struct Size {
    n: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    if let Some(ms) = flag("--exit-after") {
        std::thread::sleep(Duration::from_millis(ms.parse().unwrap_or(100)));
        eprintln!("misbehave: exiting before the handshake (--exit-after {ms})");
        std::process::exit(3);
    }
    let hold = Duration::from_millis(flag("--hold-ms").and_then(|s| s.parse().ok()).unwrap_or(200));
    let prefix = flag("--prefix").unwrap_or_else(|| "m.".into());
    let m = |name: &str| format!("{prefix}{name}");
    let provider = Provider::new("hubwire-misbehave")
        .unary(&m("pid"), |_ctx, (): ()| async move { Ok(std::process::id()) })
        .unary(&m("hold"), move |_ctx, input: Raw| async move {
            tokio::time::sleep(hold).await;
            Ok(input.0.len() as u64)
        })
        .client_stream(&m("drain"), |_ctx, mut items: ItemStream<Raw>| async move {
            let mut total = 0u64;
            while let Some(x) = items.next().await? {
                total += x.0.len() as u64;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok::<u64, Error>(total)
        })
        .unary(&m("stdout"), |_ctx, s: Size| async move {
            // In 64 KiB writes, as a chatty program would, never a newline.
            let chunk = vec![b'x'; 64 * 1024];
            let mut out = std::io::stdout().lock();
            let mut left = s.n;
            while left > 0 {
                let k = left.min(chunk.len());
                out.write_all(&chunk[..k]).map_err(|e| Error::defect(e.to_string()))?;
                left -= k;
            }
            out.flush().map_err(|e| Error::defect(e.to_string()))?;
            Ok(s.n as u64)
        })
        .unary(&m("stderr"), |_ctx, s: Size| async move {
            let mut line = vec![b'e'; s.n];
            line.push(b'\n');
            std::io::stderr().lock().write_all(&line).map_err(|e| Error::defect(e.to_string()))?;
            Ok(s.n as u64)
        })
        .unary(&m("never"), |_ctx, (): ()| async move {
            std::future::pending::<()>().await;
            Ok(())
        })
        .unary(&m("die"), |_ctx, (): ()| async move {
            std::thread::spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                std::process::exit(1);
            });
            Ok(std::process::id())
        })
        .unary(&m("setsid"), |_ctx, (): ()| async move {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("1000");
            // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| if libc::setsid() < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
            }
            let child = cmd.spawn().map_err(|e| Error::defect(e.to_string()))?;
            Ok(child.id())
        })
        .unary(&m("env"), |_ctx, (): ()| async move { Ok(std::env::vars().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>()) });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    if let Err(e) = rt.block_on(provider.serve_child(ConnectionOptions::new("hubwire-misbehave"))) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
