//! hubwire runtime: the reference implementation of `spec/PROTOCOL.md` on
//! tokio.
//!
//! A [`Connection`] runs over any [`Transport`](transport::Transport) and
//! carries many calls at once, told apart by id. Either side may call
//! ([`Connection::call`] and friends, `client.rs`) and either side may
//! serve calls, through a [`Service`] — usually a [`Provider`]
//! (`provider.rs`).
//!
//! The crate is two layers and the transports. Each layer imports only
//! from the ones below it (`scripts/imports.py rust rust/hubwire/src`
//! draws the graph):
//!
//! | module | layer | what |
//! |---|---|---|
//! | [`relay`] | API | [`Routed::forward`](relay::Routed::forward): serving a call by passing it on (the hub) |
//! | `provider` | API | [`Provider`]: handlers by name, failures vs defects; serve a listener, a transport, a parent |
//! | `client` | API | calling: unary, server/client/bidi streams, deadlines |
//! | `stream` | API | [`ItemStream`] and [`ItemSink`]: the two halves of a flow-controlled stream |
//! | [`direct`] | API | the direct path through a hub: a client's routes to provider replicas, a hub's hooks to offer them |
//! | `direct_serve` | API | a child provider's half of the direct path: serving handed-over connections, reporting their calls |
//! | `connection` | API | [`Connection`]: dial, accept, ping, close, drain |
//! | [`testing`] | API | a client and a service connected in memory, for tests |
//! | `engine` | engine | the protocol: handshake, reader, writer, call table, credit, the serving seam ([`Service`], [`Incoming`]), [`ConnectionOptions`], [`wait`] modes |
//! | `context` | base | [`CallContext`]: what a handler knows about its call |
//! | [`codec`] | base | [`Raw`] bytes, MessagePack and JSON payloads |
//! | `one_value` | base | what counts as one MessagePack value, checked before any decoder |
//! | [`errors`] | base | [`Error`] and the status [`Code`] table |
//! | [`nats`] | API | dialing and serving over NATS (§13): a client, a provider replica with no hub |
//! | [`transport`] | transports | memory, child process, Unix socket, TCP, TLS, NATS, and shared memory reached by upgrading a Unix or child connection (§11.4) |
//!
//! ```no_run
//! use hubwire::{transport, Connection, ConnectionOptions, Provider, Raw};
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = Provider::new("demo")
//!     .unary("echo", |_ctx, input: Raw| async move { Ok(input) })
//!     .unary("add", |_ctx, (a, b): (i64, i64)| async move { Ok(a + b) });
//! let listener = transport::unix::UnixListener::bind("/tmp/demo.sock")?;
//! tokio::spawn(provider.serve(listener, ConnectionOptions::new("demo")));
//!
//! let conn = Connection::dial(transport::unix::connect("/tmp/demo.sock").await?, &ConnectionOptions::new("client")).await?;
//! let sum: i64 = conn.call("add", &(2, 3)).await?;
//! # Ok(()) }
//! ```

mod client;
pub mod codec;
mod connection;
mod context;
pub mod direct;
mod direct_serve;
mod engine;
pub mod errors;
pub mod nats;
mod one_value;
mod provider;
pub mod relay;
mod stream;
pub mod testing;
pub mod transport;

pub use client::{AnyCall, CallOptions, ClientStream};
pub use codec::{Codec, Message, Payload, Raw};
pub use connection::Connection;
pub use context::CallContext;
pub use engine::wait;
pub use engine::{ConnectionOptions, Incoming, ServeFuture, Service, WaitMode, Work, DEFAULT_SHM_MAX_CONNECTIONS, DEFAULT_SHM_RING};
pub use errors::{Code, Error};
pub use hubwire_frame as frame;
pub use hubwire_frame::{Hello, Kind, MethodInfo, PeerInfo, Token};
pub use provider::Provider;
pub use relay::Routed;
pub use stream::{ItemSink, ItemStream};
