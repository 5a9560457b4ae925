//! What the bench talks about, and nothing else: the systems measured,
//! where and how they are measured (transport, encoding, mode), and the job
//! that names one such measurement. Everything else in the crate (scenario
//! files, the runner, each system's client and server, the results) builds
//! on this module; it depends on no other module but the payloads.

use std::sync::Arc;

use serde::Deserialize;

use crate::payload::Payload;

/// A mode with its parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One call in flight.
    Sequential,
    /// `window` calls in flight.
    Pipelined { window: usize },
    /// `clients` connections at once.
    Parallel { clients: usize },
    /// One call in flight, each on a connection of its own: connect,
    /// handshake (and upgrade, on `shm`), the call, close.
    Connect,
}

impl Mode {
    /// The mode's name and parameter as the tables print them.
    pub fn label(self) -> String {
        match self {
            Mode::Sequential => "sequential".into(),
            Mode::Pipelined { window } => format!("window {window}"),
            Mode::Parallel { clients } => format!("{clients} clients"),
            Mode::Connect => "connect".into(),
        }
    }
}

/// How a payload crosses the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// The payload's bytes, no serialization.
    Raw,
    /// The payload as a value, MessagePack (for ipc-channel: its bincode).
    Msgpack,
    /// The payload as a value, JSON.
    Json,
}

impl Encoding {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Msgpack => "msgpack",
            Encoding::Json => "json",
        }
    }
}

/// Where the two sides are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Two threads of the bench process.
    Inproc,
    /// A child process on a socketpair (hubwire's child transport).
    Child,
    /// A child process on its stdin and stdout pipes.
    Pipe,
    /// A Unix stream socket to another process.
    Unix,
    /// TCP over loopback to another process.
    Tcp,
    /// Through the hubwire hub: client → hub → provider (a hub child).
    Hub,
    /// The hub's direct path (spec §14): the hub hands the client a
    /// socketpair to its provider child; calls go client → provider.
    #[serde(rename = "hub-direct")]
    HubDirect,
    /// Through the run's local `nats-server` (`spec/PROTOCOL.md` §13).
    Nats,
    /// A Unix socket to another process, upgraded to shared memory
    /// (spec §11.4): hubwire, and the shared-memory floor.
    Shm,
}

impl Transport {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Inproc => "inproc",
            Transport::Child => "child",
            Transport::Pipe => "pipe",
            Transport::Unix => "unix",
            Transport::Tcp => "tcp",
            Transport::Hub => "hub",
            Transport::HubDirect => "hub-direct",
            Transport::Nats => "nats",
            Transport::Shm => "shm",
        }
    }

    /// The transport whose hand-written echo is this one's floor. Through
    /// the hub, that is the client's hop: a Unix socket.
    pub fn floor(self) -> Transport {
        match self {
            Transport::Hub | Transport::HubDirect => Transport::Unix,
            t => t,
        }
    }
}

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum System {
    /// hubwire, `WaitMode::Efficient` on both sides.
    HubwireEfficient,
    /// hubwire, `WaitMode::low_latency()` on both sides.
    HubwireLowLatency,
    /// hubwire, efficient: items on one bidirectional stream
    /// (`echo_stream`), one ITEM each way per call.
    HubwireStreamEfficient,
    /// hubwire, low-latency: items on one bidirectional stream.
    HubwireStreamLowLatency,
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
    /// NATS request-reply with a hand-written async-nats responder: the
    /// floor of unary calls over NATS.
    NatsRequestReply,
    /// A hand-written publish loop (one request, N messages to the
    /// caller's inbox): the floor of a server stream over NATS.
    NatsPublishLoop,
    /// hubwire, efficient: one server-stream call per turn, its items the
    /// payload (over NATS).
    HubwireServerStream,
    /// hubwire, efficient, through hub → NATS → hub → provider
    /// (`systems/nats_hub.rs`).
    HubNatsHub,
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
    pub const ALL: [System; 19] = [
        System::HubwireEfficient,
        System::HubwireLowLatency,
        System::HubwireStreamEfficient,
        System::HubwireStreamLowLatency,
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
        System::NatsRequestReply,
        System::NatsPublishLoop,
        System::HubwireServerStream,
        System::HubNatsHub,
    ];

    /// The name used in scenario files and tables.
    pub fn name(self) -> &'static str {
        match self {
            System::HubwireEfficient => "hubwire-efficient",
            System::HubwireLowLatency => "hubwire-low-latency",
            System::HubwireStreamEfficient => "hubwire-stream-efficient",
            System::HubwireStreamLowLatency => "hubwire-stream-low-latency",
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
            System::NatsRequestReply => "nats-request-reply",
            System::NatsPublishLoop => "nats-publish-loop",
            System::HubwireServerStream => "hubwire-server-stream",
            System::HubNatsHub => "hub-nats-hub",
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
            System::HubwireEfficient
            | System::HubwireLowLatency
            | System::HubwireStreamEfficient
            | System::HubwireStreamLowLatency
            | System::HubwireServerStream
            | System::HubNatsHub => Role::Hubwire,
            System::FloorBlocking | System::FloorSpin | System::NatsRequestReply | System::NatsPublishLoop => Role::Floor,
            _ => Role::Peer,
        }
    }

    /// hubwire's wait mode, as `bench-peer hubwire --wait` and the hub's
    /// config name it (hubwire's rows only).
    pub fn wait_mode(self) -> Option<&'static str> {
        match self {
            System::HubwireEfficient | System::HubwireStreamEfficient | System::HubwireServerStream | System::HubNatsHub => {
                Some("efficient")
            }
            System::HubwireLowLatency | System::HubwireStreamLowLatency => Some("low-latency"),
            _ => None,
        }
    }

    /// Whether it spins while waiting (and so is compared with the
    /// spinning floor).
    pub fn spins(self) -> bool {
        matches!(self, System::HubwireLowLatency | System::HubwireStreamLowLatency | System::FloorSpin)
    }

    /// Whether its calls are items on one bidirectional stream, one each
    /// way per call, rather than calls of their own.
    pub fn on_stream(self) -> bool {
        matches!(self, System::HubwireStreamEfficient | System::HubwireStreamLowLatency | System::TonicStream | System::GrpcGoStream)
    }

    /// Whether it can run this combination.
    pub fn supports(self, t: Transport, e: Encoding, m: Mode, p: &Payload) -> bool {
        use Transport::*;
        let listening = matches!(t, Unix | Tcp);
        let not_parallel = !matches!(m, Mode::Parallel { .. });
        let pipelined = matches!(m, Mode::Pipelined { .. });
        // A connection per call: hubwire's own cost of opening one, on a
        // Unix socket with and without the upgrade to shared memory.
        if m == Mode::Connect {
            return matches!(self, System::HubwireEfficient | System::HubwireLowLatency) && matches!(t, Unix | Shm) && e == Encoding::Raw;
        }
        // Over NATS run only the NATS rows and hubwire's calls (raw).
        if t == Nats {
            return e == Encoding::Raw
                && not_parallel
                && match self {
                    System::HubwireEfficient | System::HubwireLowLatency | System::NatsRequestReply | System::HubNatsHub => true,
                    System::NatsPublishLoop | System::HubwireServerStream => pipelined,
                    _ => false,
                };
        }
        match self {
            System::HubwireEfficient | System::HubwireLowLatency => t != Pipe,
            // The transports of the gRPC streams, and the hub, which relays
            // a stream's items hop by hop under each hop's credit.
            System::HubwireStreamEfficient | System::HubwireStreamLowLatency => {
                matches!(t, Unix | Tcp | Hub | HubDirect | Shm) && e == Encoding::Raw && not_parallel
            }
            System::FloorBlocking | System::FloorSpin => !matches!(t, Hub | HubDirect) && e == Encoding::Raw,
            System::SpawnPerCall => t == Pipe && e == Encoding::Raw && !matches!(m, Mode::Pipelined { .. }),
            System::Http1 => listening && e != Encoding::Msgpack && !matches!(m, Mode::Pipelined { .. }),
            System::JsonRpcStdio => t == Pipe && e == Encoding::Json && p.is_json() && !matches!(m, Mode::Pipelined { .. }),
            System::TonicUnary => listening && e == Encoding::Raw,
            System::TonicStream | System::GrpcGoUnary | System::GrpcGoStream => listening && e == Encoding::Raw && not_parallel,
            System::IpcBytes => t == Unix && e == Encoding::Raw && not_parallel,
            System::IpcSerde => t == Unix && e == Encoding::Msgpack && !p.is_json() && not_parallel,
            System::NatsRequestReply | System::NatsPublishLoop | System::HubwireServerStream | System::HubNatsHub => false,
        }
    }
}

/// One measurement to make.
#[derive(Clone)]
pub struct Job {
    /// The scenario it belongs to.
    pub scenario: String,
    /// What is measured.
    pub system: System,
    /// Where.
    pub transport: Transport,
    /// What is sent.
    pub payload: Arc<Payload>,
    /// How it is encoded.
    pub encoding: Encoding,
    /// How calls are issued.
    pub mode: Mode,
}

impl Job {
    /// A stable key for comparing runs: scenario/system/transport/payload/encoding/mode.
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}/{}",
            self.scenario,
            self.system.name(),
            self.transport.name(),
            self.payload.name,
            self.encoding.name(),
            self.mode.label().replace(' ', "")
        )
    }
}
