//! The server side of the unary round-trip benchmark, in its own process.
//!
//! `bench-peer <kind> <socket-path>`, kind one of:
//!
//! * `echo-blocking`: hand-written length-prefixed echo, blocking reads.
//! * `echo-spin`: the same, spinning up to 50 µs on non-blocking reads
//!   before blocking in `poll(2)`.
//! * `hubwire-efficient` / `hubwire-lowlatency`: a hubwire provider with a
//!   raw unary `echo`, in `WaitMode::Efficient` / `WaitMode::low_latency()`.
//!
//! Prints `ready` on stdout once listening. The echo kinds serve one
//! connection until EOF; the hubwire kinds serve until killed.
//!
//! The hubwire kinds run on a tokio current-thread runtime. On the 2-CPU
//! machine this was measured on (runtime before 7e115c7), a multi-thread
//! runtime was no faster:
//! 1 worker gave the same means within noise (efficient ~58 µs both,
//! low-latency 8-10 µs both), and 2 workers were slower in low-latency
//! mode (14-16 µs: three spinning threads on two CPUs). Set
//! `BENCH_PEER_RT=multi1` or `multi2` to compare again.

use std::io::Write;
use std::os::unix::net::UnixListener;

use hubwire_bench::{EchoStream, Variant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(kind), Some(path)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: bench-peer <echo-blocking|echo-spin|hubwire-efficient|hubwire-lowlatency> <socket-path>");
        std::process::exit(2);
    };
    let Some(variant) = Variant::parse(kind) else {
        eprintln!("bench-peer: unknown kind {kind:?}");
        std::process::exit(2);
    };
    let r = match variant.wait_mode() {
        None => serve_echo(path, variant),
        Some(mode) => serve_hubwire(path, mode),
    };
    if let Err(e) = r {
        eprintln!("bench-peer {kind}: {e}");
        std::process::exit(1);
    }
}

fn ready() {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
}

fn serve_echo(path: &str, variant: Variant) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    ready();
    let (stream, _) = listener.accept()?;
    let _ = std::fs::remove_file(path);
    let mut s = EchoStream::new(stream, variant.echo_spin())?;
    while s.echo_once()? {}
    Ok(())
}

fn serve_hubwire(path: &str, mode: hubwire::WaitMode) -> std::io::Result<()> {
    let rt = match std::env::var("BENCH_PEER_RT").as_deref() {
        Ok("multi1") => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?,
        Ok("multi2") => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?,
        Ok("current") | Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        Ok(other) => {
            return Err(std::io::Error::other(format!(
                "BENCH_PEER_RT={other}: expected current, multi1 or multi2"
            )))
        }
    };
    rt.block_on(async {
        let provider = hubwire::Provider::new("bench")
            .unary("echo", |_ctx, x: hubwire::Raw| async move { Ok(x) });
        let listener = hubwire::transport::unix::UnixListener::bind(path)?;
        ready();
        provider
            .serve(listener, hubwire::Config::new("bench").wait(mode))
            .await
    })
}
