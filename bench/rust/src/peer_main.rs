//! `bench-peer`: the server side of every system, in its own process.
//!
//! `bench-peer <system> [--spin] [--wait MODE] (--unix PATH | --tcp ADDR | --fd3 | --stdio | --ipc NAME)`
//!
//! Listening peers print `ready <address>` on stdout once they accept
//! connections; the others serve the connection they were started with.

use std::io::{self, Write};
use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use clap::Parser;

use crate::systems;

/// bench-peer: the server side of one benchmarked system.
#[derive(Parser, Debug)]
#[command(name = "bench-peer")]
pub struct Args {
    /// floor, hubwire, http1, tonic, jsonrpc, spawn-echo, ipc-bytes, ipc-serde
    pub system: String,
    /// floor: spin up to 50 µs before blocking.
    #[arg(long)]
    pub spin: bool,
    /// hubwire: efficient or low-latency.
    #[arg(long, default_value = "efficient")]
    pub wait: String,
    /// Listen on this Unix socket path.
    #[arg(long)]
    pub unix: Option<PathBuf>,
    /// Listen on this TCP address (port 0: any).
    #[arg(long)]
    pub tcp: Option<String>,
    /// Serve the socketpair on descriptor 3.
    #[arg(long)]
    pub fd3: bool,
    /// Serve stdin/stdout.
    #[arg(long)]
    pub stdio: bool,
    /// ipc-channel: the one-shot server to connect to.
    #[arg(long)]
    pub ipc: Option<String>,
}

/// Where a peer takes its connections from.
pub enum Listener {
    /// A bound Unix socket.
    Unix(UnixListener),
    /// A bound TCP socket.
    Tcp(TcpListener),
    /// Descriptor 3 (a socketpair end).
    Fd3,
    /// Descriptors 0 and 1.
    Stdio,
}

impl Listener {
    /// Binds what `args` asks for and prints `ready <address>` if listening.
    pub fn from_args(args: &Args) -> io::Result<Listener> {
        let l = if let Some(p) = &args.unix {
            let _ = std::fs::remove_file(p);
            let l = UnixListener::bind(p)?;
            ready(&p.display().to_string());
            Listener::Unix(l)
        } else if let Some(a) = &args.tcp {
            let l = TcpListener::bind(a)?;
            ready(&l.local_addr()?.to_string());
            Listener::Tcp(l)
        } else if args.fd3 {
            Listener::Fd3
        } else if args.stdio {
            Listener::Stdio
        } else {
            return Err(io::Error::other(
                "one of --unix, --tcp, --fd3, --stdio is needed",
            ));
        };
        Ok(l)
    }

    /// Runs `serve(read, write)` on every connection, a thread each, until
    /// the listener fails (or, for fd 3 and stdio, the one connection ends).
    pub fn for_each(
        self,
        serve: impl Fn(OwnedFd, OwnedFd) -> io::Result<()> + Send + Sync + Copy + 'static,
    ) -> io::Result<()> {
        let spawn = move |fd: OwnedFd| -> io::Result<()> {
            let w = fd.try_clone()?;
            std::thread::spawn(move || serve(fd, w));
            Ok(())
        };
        match self {
            Listener::Unix(l) => loop {
                spawn(l.accept()?.0.into())?;
            },
            Listener::Tcp(l) => loop {
                let (s, _) = l.accept()?;
                s.set_nodelay(true)?;
                spawn(s.into())?;
            },
            // SAFETY: descriptors 3 (set up by our parent) and 0/1 are ours.
            Listener::Fd3 => {
                let fd = unsafe { OwnedFd::from_raw_fd(3) };
                let w = fd.try_clone()?;
                serve(fd, w)
            }
            Listener::Stdio => unsafe { serve(OwnedFd::from_raw_fd(0), OwnedFd::from_raw_fd(1)) },
        }
    }
}

/// Readiness: the line the bench waits for before it connects, printed
/// once the listener is bound.
pub fn ready(addr: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "ready {addr}");
    let _ = out.flush();
}

/// `bench-peer`'s main.
pub fn main() {
    let args = Args::parse();
    let r = match args.system.as_str() {
        "floor" => Listener::from_args(&args).and_then(|l| systems::floor::serve(l, args.spin)),
        "hubwire" => systems::hubwire::serve(&args),
        "http1" => systems::http::serve(&args),
        "tonic" => systems::grpc::serve(&args),
        "jsonrpc" => systems::jsonrpc::serve(),
        "spawn-echo" => systems::spawn::serve(),
        "ipc-bytes" => systems::ipc::serve(&args, false),
        "ipc-serde" => systems::ipc::serve(&args, true),
        other => Err(io::Error::other(format!("unknown system {other:?}"))),
    };
    if let Err(e) = r {
        eprintln!("bench-peer {}: {e}", args.system);
        std::process::exit(1);
    }
}
