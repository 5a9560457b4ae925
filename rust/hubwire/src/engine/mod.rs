//! The protocol engine: everything between a transport and the API. It
//! knows frames, call ids, credit, deadlines and the connection's life; it
//! knows nothing of methods, handlers or typed values. The API above it
//! (`connection`, `client`, `stream`, `provider`, `relay`) calls down into
//! it; it calls up only through the one seam it defines, [`Service`].
//!
//! | file | what |
//! |---|---|
//! | `state` | [`Core`]: one connection's shared state; sending frames, starting and abandoning calls, draining, dying |
//! | `handshake` | opening a connection: HELLO both ways, version negotiation, the reader task started |
//! | `reader` | the reader task: read, parse, route each frame to its call, wait |
//! | `read_state` | the reader's state (buffer, decoder, spinner), shared with a caller that reads its own answer; making room for the next read |
//! | `reuse` | large frames' buffers kept for the next large frame, under a process-wide cap |
//! | `own_read` | a caller alone in flight in low-latency mode reads its own answer |
//! | `writer` | the write queue: batched, vectored, inline flush |
//! | `calls` | the call table: calls we started, calls we serve, ids |
//! | `id_table` | the calls we started, in a table indexed by the ids we chose |
//! | `slots` | the outcome slots of the calls that answer once: a slab in the call table, no channel per call |
//! | `answer` | [`Answer`]: waiting for the outcome in a call's slot |
//! | `credit` | [`RecvWindow`]: the credit this side grants for a stream it receives |
//! | `direct` | the direct path's frames (§14): DIRECT and ACCEPT sent with a descriptor, received into a [`DirectHook`] |
//! | `handoff` | the types `direct` hands up: [`Handoff`], [`DirectHook`] |
//! | `serve` | the serving seam: [`Service`], [`Incoming`], and the protocol half of serving a REQUEST |
//! | `options` | [`ConnectionOptions`]: how a connection presents itself and its limits |
//! | [`wait`] | [`WaitMode`]: efficient vs low-latency (adaptive spin) |
//! | `upgrade` | the move to shared memory (§11.4): offer, answer, the switch of each direction |
//! | `upgrade_state` | where one connection's upgrade stands (kept on its `Core`) |
//!
//! The same files, by the same names, make up the engine of the
//! TypeScript SDK (`ts/src/engine/`), except `wait`, `read_state`, `own_read` and `reuse`: a
//! JavaScript runtime waits in its event loop, and a caller there never
//! reads for itself.

mod answer;
mod backlog;
mod calls;
mod credit;
mod direct;
mod handoff;
mod handshake;
mod id_table;
mod inbox;
mod options;
mod own_read;
mod read_state;
mod reader;
mod reuse;
mod serve;
mod slots;
mod state;
mod upgrade;
mod upgrade_state;
pub mod wait;
mod writer;

pub(crate) use answer::Answer;
pub(crate) use calls::{Event, IdHasher, StreamIn};
pub(crate) use credit::RecvWindow;
pub use handoff::{DirectHook, Handoff};
pub(crate) use handshake::open;
pub(crate) use inbox::InboxTx;
pub use options::{ConnectionOptions, RouterFactory, DEFAULT_SHM_MAX_CONNECTIONS, DEFAULT_SHM_RING};
pub(crate) use serve::panic_message;
pub use serve::{Incoming, ServeFuture, Service, Work};
pub(crate) use state::{Core, Started};
pub use wait::WaitMode;

#[cfg(test)]
mod backpressure_tests;
#[cfg(test)]
mod slots_tests;
