//! hubwire runtime: the reference implementation of `spec/PROTOCOL.md` on
//! tokio.
//!
//! A [`Connection`] runs over any [`Transport`](transport::Transport) and
//! carries many calls at once, told apart by id. Either side may call
//! ([`Connection::call`] and friends, `client.rs`) and either side may
//! offer methods ([`Provider`], `provider.rs`).
//!
//! | module | what |
//! |---|---|
//! | `connection` | handshake, [`Config`], sending frames, dying cleanly |
//! | `reader` | the reader task: read, parse, route, wait |
//! | `writer` | the write queue: batched, vectored, inline flush |
//! | `calls` | the call table |
//! | `client` | calling: unary, server/client/bidi streams, deadlines |
//! | `provider` | serving: handlers, failures vs defects, panics |
//! | [`router`] | [`Router`](router::Router): serving calls by passing them on (the hub) |
//! | `stream` | [`Items`] and [`ItemSink`]: flow-controlled streams |
//! | [`codec`] | [`Raw`] bytes, MessagePack and JSON payloads |
//! | [`errors`] | [`Error`] and the status [`Code`] table |
//! | [`wait`] | [`WaitMode`]: efficient vs low-latency (adaptive spin) |
//! | [`transport`] | memory, child process, Unix socket, TCP |
//!
//! ```no_run
//! use hubwire::{Config, Connection, Provider, Raw, transport};
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = Provider::new("demo")
//!     .unary("echo", |_ctx, input: Raw| async move { Ok(input) })
//!     .unary("add", |_ctx, (a, b): (i64, i64)| async move { Ok(a + b) });
//! tokio::spawn(provider.serve(transport::unix::UnixListener::bind("/tmp/demo.sock")?, Config::new("demo")));
//!
//! let conn = Connection::dial(transport::unix::connect("/tmp/demo.sock").await?, &Config::new("client")).await?;
//! let sum: i64 = conn.call("add", &(2, 3)).await?;
//! # Ok(()) }
//! ```

mod calls;
mod client;
pub mod codec;
mod connection;
mod context;
pub mod errors;
mod provider;
mod reader;
pub mod router;
mod stream;
pub mod transport;
pub mod wait;
mod writer;

pub use client::{AnyCall, CallOptions, ClientStream};
pub use codec::{Codec, Message, Payload, Raw};
pub use connection::{Config, Connection};
pub use context::CallContext;
pub use errors::{Code, Error};
pub use hubwire_frame as frame;
pub use hubwire_frame::{Hello, Kind, MethodInfo, PeerInfo};
pub use provider::Provider;
pub use stream::{ItemSink, Items};
pub use wait::WaitMode;
