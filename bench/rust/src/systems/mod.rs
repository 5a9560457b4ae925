//! The systems measured: hubwire in both wait modes, the raw floor, and
//! the peers a user would pick instead. Each file holds one system's
//! client and server sides; [`System::start`] starts its server for a job.

pub mod endpoint;
pub mod floor;
pub mod grpc;
pub mod grpc_go;
pub mod http;
pub mod hub;
pub mod hubwire;
pub mod ipc;
pub mod jsonrpc;
pub mod spawn;

use std::io;

use crate::payload::Payload;
use crate::runner::Target;
use crate::scenario::{Encoding, Job, Mode, Transport};

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum System {
    /// hubwire, `WaitMode::Efficient` on both sides.
    HubwireEfficient,
    /// hubwire, `WaitMode::low_latency()` on both sides.
    HubwireLowLatency,
    /// Hand-written length-prefixed echo, blocking.
    FloorBlocking,
    /// The same, spinning up to 50 µs before blocking.
    FloorSpin,
    /// A new process per call (stdin in, stdout out).
    SpawnPerCall,
    /// HTTP/1.1 POST per call on a keep-alive connection (hyper).
    Http1,
    /// JSON-RPC 2.0, newline-delimited, over a child's stdio.
    JsonRpcStdio,
    /// gRPC unary calls (tonic).
    TonicUnary,
    /// gRPC bidirectional stream, one message each way per call (tonic).
    TonicStream,
    /// gRPC unary calls (grpc-go, `bench/go`).
    GrpcGoUnary,
    /// gRPC bidirectional stream (grpc-go).
    GrpcGoStream,
    /// ipc-channel's bytes channel, two processes.
    IpcBytes,
    /// ipc-channel's serde channel (bincode), two processes.
    IpcSerde,
}

/// Which kind of row a system gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// hubwire.
    Hubwire,
    /// A raw floor.
    Floor,
    /// A peer (what a user would pick instead).
    Peer,
}

impl System {
    /// Every system, in table order.
    pub const ALL: [System; 13] = [
        System::HubwireEfficient,
        System::HubwireLowLatency,
        System::FloorBlocking,
        System::FloorSpin,
        System::SpawnPerCall,
        System::Http1,
        System::JsonRpcStdio,
        System::TonicUnary,
        System::TonicStream,
        System::GrpcGoUnary,
        System::GrpcGoStream,
        System::IpcBytes,
        System::IpcSerde,
    ];

    /// The name used in scenario files and tables.
    pub fn name(self) -> &'static str {
        match self {
            System::HubwireEfficient => "hubwire-efficient",
            System::HubwireLowLatency => "hubwire-low-latency",
            System::FloorBlocking => "floor-blocking",
            System::FloorSpin => "floor-spin",
            System::SpawnPerCall => "spawn-per-call",
            System::Http1 => "http1",
            System::JsonRpcStdio => "jsonrpc-stdio",
            System::TonicUnary => "tonic-unary",
            System::TonicStream => "tonic-stream",
            System::GrpcGoUnary => "grpc-go-unary",
            System::GrpcGoStream => "grpc-go-stream",
            System::IpcBytes => "ipc-bytes",
            System::IpcSerde => "ipc-serde",
        }
    }

    /// Every name, for error messages.
    pub fn names() -> Vec<&'static str> {
        System::ALL.iter().map(|s| s.name()).collect()
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<System> {
        System::ALL.into_iter().find(|x| x.name() == s)
    }

    /// hubwire, floor or peer.
    pub fn role(self) -> Role {
        match self {
            System::HubwireEfficient | System::HubwireLowLatency => Role::Hubwire,
            System::FloorBlocking | System::FloorSpin => Role::Floor,
            _ => Role::Peer,
        }
    }

    /// Whether it spins while waiting (and so is compared with the
    /// spinning floor).
    pub fn spins(self) -> bool {
        matches!(self, System::HubwireLowLatency | System::FloorSpin)
    }

    /// Whether it can run this combination.
    pub fn supports(self, t: Transport, e: Encoding, m: Mode, p: &Payload) -> bool {
        use Transport::*;
        let listening = matches!(t, Unix | Tcp);
        let not_parallel = !matches!(m, Mode::Parallel { .. });
        match self {
            System::HubwireEfficient | System::HubwireLowLatency => t != Pipe,
            System::FloorBlocking | System::FloorSpin => t != Hub && e == Encoding::Raw,
            System::SpawnPerCall => {
                t == Pipe && e == Encoding::Raw && !matches!(m, Mode::Pipelined { .. })
            }
            System::Http1 => {
                listening && e != Encoding::Msgpack && !matches!(m, Mode::Pipelined { .. })
            }
            System::JsonRpcStdio => {
                t == Pipe
                    && e == Encoding::Json
                    && p.is_json()
                    && !matches!(m, Mode::Pipelined { .. })
            }
            System::TonicUnary => listening && e == Encoding::Raw,
            System::TonicStream | System::GrpcGoUnary | System::GrpcGoStream => {
                listening && e == Encoding::Raw && not_parallel
            }
            System::IpcBytes => t == Unix && e == Encoding::Raw && not_parallel,
            System::IpcSerde => t == Unix && e == Encoding::Msgpack && !p.is_json() && not_parallel,
        }
    }

    /// Starts its server side for `job`.
    pub fn start(self, job: &Job, ctx: &Context) -> io::Result<Box<dyn Target>> {
        if job.transport == Transport::Hub {
            return hub::start(job, ctx, self);
        }
        match self {
            System::HubwireEfficient => hubwire::start(job, "efficient"),
            System::HubwireLowLatency => hubwire::start(job, "low-latency"),
            System::FloorBlocking => floor::start(job, false),
            System::FloorSpin => floor::start(job, true),
            System::SpawnPerCall => spawn::start(job),
            System::Http1 => http::start(job),
            System::JsonRpcStdio => jsonrpc::start(job),
            System::TonicUnary => grpc::start(job, false),
            System::TonicStream => grpc::start(job, true),
            System::GrpcGoUnary => grpc_go::start(job, ctx, false),
            System::GrpcGoStream => grpc_go::start(job, ctx, true),
            System::IpcBytes => ipc::start(job, false),
            System::IpcSerde => ipc::start(job, true),
        }
    }
}

/// What some systems need from the run: where the other programs are.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// The grpc-go bench program (`bench/go`), if built.
    pub grpc_go: Option<std::path::PathBuf>,
    /// The `hubwire` executable (for the hub rows), if found.
    pub hub: Option<std::path::PathBuf>,
}
