//! `bench-peer`: the server side of every system, in its own process.
//!
//! `bench-peer <system> [--spin] [--wait MODE] (--unix PATH | --tcp ADDR | --fd3 | --stdio | --ipc NAME)`
//!
//! Listening peers print `ready <address>` on stdout once they accept
//! connections; the others serve the connection they were started with.
//! This file only parses the command line and picks the system's `serve`;
//! the accept loops they share are in `serve.rs`.

use std::io;
use std::path::PathBuf;

use clap::Parser;

use crate::serve::Listen;
use crate::systems::{floor, grpc, http, hubwire, ipc, jsonrpc, nats, shm_floor, spawn};

/// bench-peer: the server side of one benchmarked system.
#[derive(Parser, Debug)]
#[command(name = "bench-peer")]
pub struct Args {
    /// floor, shm-floor, hubwire, http1, tonic, jsonrpc, spawn-echo, ipc-bytes, ipc-serde, nats-echo
    pub system: String,
    /// floor: spin up to 50 µs before blocking.
    #[arg(long)]
    pub spin: bool,
    /// hubwire: efficient or low-latency.
    #[arg(long, default_value = "efficient")]
    pub wait: String,
    /// hubwire: accept the upgrade to shared memory (spec §11.4).
    #[arg(long)]
    pub shm: bool,
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
    /// hubwire, nats-echo: attach to this NATS server (`nats://…`).
    #[arg(long)]
    pub nats: Option<String>,
}

impl Args {
    /// Where to take connections from, if the flags say (hubwire without
    /// one serves its parent, through hubwire's child transport).
    fn listen(&self) -> Option<Listen> {
        if let Some(p) = &self.unix {
            Some(Listen::Unix(p.clone()))
        } else if let Some(a) = &self.tcp {
            Some(Listen::Tcp(a.clone()))
        } else if self.fd3 {
            Some(Listen::Fd3)
        } else if self.stdio {
            Some(Listen::Stdio)
        } else {
            None
        }
    }

    /// The same, for the systems that need one.
    fn needs_listen(&self) -> io::Result<Listen> {
        self.listen().ok_or_else(|| io::Error::other("one of --unix, --tcp, --fd3, --stdio is needed"))
    }
}

/// `bench-peer`'s main.
pub fn main() {
    let args = Args::parse();
    let r = match (args.system.as_str(), args.nats.as_deref()) {
        ("hubwire", Some(url)) => nats::serve_hubwire(url, &args.wait),
        ("nats-echo", Some(url)) => nats::serve_floor(url),
        (system, _) => serve(&args, system),
    };
    if let Err(e) = r {
        eprintln!("bench-peer {}: {e}", args.system);
        std::process::exit(1);
    }
}

/// The systems that listen on a socket or serve their parent.
fn serve(args: &Args, system: &str) -> io::Result<()> {
    match system {
        "floor" => args.needs_listen().and_then(|l| floor::serve(l, args.spin)),
        "shm-floor" => args.needs_listen().and_then(|l| shm_floor::serve(l, args.spin)),
        "hubwire" => hubwire::serve(args.listen(), &args.wait, args.shm),
        "http1" => args.needs_listen().and_then(http::serve),
        "tonic" => args.needs_listen().and_then(grpc::serve),
        "jsonrpc" => jsonrpc::serve(),
        "spawn-echo" => spawn::serve(),
        "ipc-bytes" => ipc::serve(args.ipc.as_deref(), false),
        "ipc-serde" => ipc::serve(args.ipc.as_deref(), true),
        other => Err(io::Error::other(format!("unknown system {other:?}"))),
    }
}
