//! The hubwire hub: a daemon that supervises providers written in any
//! language and routes calls to them by method name, and the `hubwire`
//! command that runs it and talks to it.
//!
//! | module | what |
//! |---|---|
//! | [`config`] | `hubwire.toml`: listeners and providers, errors with file and line |
//! | [`registry`] | providers, replicas, the method table; duplicate names refused |
//! | [`supervise`] | one task per replica: start, handshake, health pings, restart with backoff, crash loops |
//! | `group` | a provider's process group: signal it, wait until none of it is alive |
//! | [`route`] | one call: admit within the limit, pick the least-loaded ready replica, forward |
//! | [`hub`] | the daemon: listeners, client connections, orderly shutdown on SIGTERM |
//! | [`gateway`] | the HTTP/JSON gateway |
//! | [`websocket`] | the WebSocket listener, for browsers (its pump: `websocket_pump`) |
//! | [`http_guard`] | the `Origin` and `Host` checks for browsers |
//! | [`status`] | `hubwire status` and `hubwire list` data, served as the hub's own methods |
//! | [`metrics`] | per-replica counters and latency histograms |
//! | [`prometheus`] | `GET /metrics` |
//! | [`cli`] | `hubwire call`, `list`, `status` |
//! | [`logs`] | tracing output: human-readable or JSON |
//!
//! The hub is itself a hubwire peer: clients dial it like any provider and
//! see, in its HELLO, every method of every provider. Calls pass through
//! untouched ([`hubwire::relay`]): no payload is decoded on the way.

pub mod cli;
pub mod config;
pub mod gateway;
mod group;
pub mod http_guard;
pub mod hub;
pub mod logs;
pub mod metrics;
pub mod own_schemas;
pub mod prometheus;
pub mod registry;
pub mod route;
pub mod status;
pub mod supervise;
pub mod websocket;
mod websocket_pump;
