//! The systems measured: hubwire in both wait modes, the raw floor, and
//! the peers a user would pick instead. Each file holds one system's
//! client and server sides; [`start`] starts a job's server side.
//!
//! This file only dispatches: what the systems share lives in
//! [`endpoint`] (reaching a server process) and in the crate's `runner`
//! and `serve` modules, so no system imports this one.

pub mod endpoint;
pub mod floor;
pub mod grpc;
pub mod grpc_go;
pub mod http;
pub mod hub;
pub mod hubwire;
pub mod ipc;
pub mod jsonrpc;
pub mod nats;
pub mod nats_hub;
pub mod shm_floor;
pub mod spawn;

use std::io;
use std::path::PathBuf;

use crate::model::{Job, System, Transport};
use crate::runner::Target;

/// What some systems need from the run: where the other programs are.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// The grpc-go bench program (`bench/go`), if built.
    pub grpc_go: Option<PathBuf>,
    /// The `hubwire` executable (for the hub rows), if found.
    pub hub: Option<PathBuf>,
    /// The URL of the run's local `nats-server` (for the NATS rows), if one
    /// was started.
    pub nats: Option<String>,
}

/// Starts the server side of `job`'s system.
pub fn start(job: &Job, ctx: &Context) -> io::Result<Box<dyn Target>> {
    if matches!(job.transport, Transport::Hub | Transport::HubDirect) {
        return hub::start(job, ctx.hub.as_deref());
    }
    if job.system == System::HubNatsHub {
        return nats_hub::start(job, ctx.hub.as_deref(), ctx.nats.as_deref());
    }
    if job.transport == Transport::Nats {
        return nats::start(job, ctx.nats.as_deref());
    }
    match job.system {
        System::HubwireEfficient | System::HubwireLowLatency | System::HubwireStreamEfficient | System::HubwireStreamLowLatency => {
            hubwire::start(job)
        }
        // The floor over shared memory is its own program (`shm_floor.rs`).
        System::FloorBlocking if job.transport == Transport::Shm => shm_floor::start(job, false),
        System::FloorSpin if job.transport == Transport::Shm => shm_floor::start(job, true),
        System::FloorBlocking => floor::start(job, false),
        System::FloorSpin => floor::start(job, true),
        System::SpawnPerCall => spawn::start(job),
        System::Http1 => http::start(job),
        System::JsonRpcStdio => jsonrpc::start(job),
        System::TonicUnary => grpc::start(job, false),
        System::TonicStream => grpc::start(job, true),
        System::GrpcGoUnary => grpc_go::start(job, ctx.grpc_go.as_deref(), false),
        System::GrpcGoStream => grpc_go::start(job, ctx.grpc_go.as_deref(), true),
        System::IpcBytes => ipc::start(job, false),
        System::IpcSerde => ipc::start(job, true),
        System::NatsRequestReply | System::NatsPublishLoop | System::HubwireServerStream | System::HubNatsHub => {
            Err(io::Error::other(format!("{} runs only over NATS", job.system.name())))
        }
    }
}
