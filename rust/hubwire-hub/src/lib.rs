//! The hubwire hub: a daemon that supervises providers written in any
//! language and routes calls to them by method name, and the `hubwire`
//! command that runs it and talks to it.
//!
//! | module | what |
//! |---|---|
//! | [`auth`] | the token (file, environment, bearer header) and who is trusted with private status |
//! | [`config`] | `hubwire.toml`: `[hub]` (listeners, limits, access), errors with file and line |
//! | [`provider_config`] | `[[provider]]`: how each provider is reached, its pool's bounds |
//! | [`nats_connect`] | connecting to the cluster: credentials, TLS, reconnection |
//! | [`discovery`] | who offers what in the cluster: `$SRV.INFO`/`$SRV.STATS` gathered for a short deadline |
//! | [`nats_link`] | links over NATS: the dialer behind `remote`, offering the local methods, counting what links serve |
//! | [`nats_config`] | `[nats]`: the NATS cluster the hub joins, its credentials, what it offers and routes |
//! | [`registry`] | providers, replicas, the method table; duplicate names refused |
//! | [`supervise`] | one task per replica: start, handshake, health pings, restart with backoff, crash loops |
//! | `group` | a provider's process group: signal it, wait until none of it is alive |
//! | [`remote`] | routing to the cluster: a remote method is a pool of links, opened on its first call |
//! | [`route`] | one call: find its route (or `unknown_method` at once), admit, pick the least-loaded ready replica, forward with a deadline |
//! | [`queue`] | calls waiting for a provider's slot: bounded in calls and bytes, per provider and per client connection |
//! | [`join`] | the hub in a NATS cluster: its connection, `hubwire.cluster` |
//! | [`hub`] | the daemon: listeners, client connections, orderly shutdown on SIGTERM |
//! | [`gateway`] | the HTTP/JSON gateway |
//! | [`websocket`] | the WebSocket listener, for browsers (its pump: `websocket_pump`) |
//! | [`tls_config`] | `[hub.tls]` (TLS, client certificates) and the refusal of an unprotected network listener |
//! | [`http_guard`] | the `Origin` and `Host` checks for browsers |
//! | [`status`] | `hubwire status` and `hubwire list` data, served as the hub's own methods |
//! | [`metrics`] | per-replica counters and latency histograms |
//! | [`prometheus`] | `GET /metrics` |
//! | [`cli`] | `hubwire call`, `list`, `status` |
//! | [`logs`] | tracing output: human-readable or JSON |
//! | [`admit`] | connection limits: `max_connections`, `max_connections_per_peer`, refusals |
//! | `idle` | `idle_timeout`: a client's activity, and when it is idle |
//! | [`unix_socket`] | the Unix socket: mode, group, `SO_PEERCRED`, `allow_uids` |
//! | [`trust`] | refusing a config file others can change |
//! | [`process`] | the descriptor limit, the subreaper, ending orphaned descendants |
//! | [`provider_env`] | the minimal environment of a spawned provider |
//! | [`terminal`] | peer-supplied text made safe to print |
//!
//! The hub is itself a hubwire peer: clients dial it like any provider and
//! see, in its HELLO, every method of every provider. Calls pass through
//! untouched ([`hubwire::relay`]): no payload is decoded on the way.

pub mod admit;
pub mod auth;
pub mod cli;
pub mod config;
pub mod direct;
pub mod discovery;
pub mod gateway;
mod group;
pub mod http_guard;
pub mod hub;
mod idle;
pub mod join;
pub mod logs;
pub mod metrics;
pub mod nats_config;
pub mod nats_connect;
pub mod nats_link;
pub mod own_schemas;
pub mod process;
pub mod prometheus;
pub mod provider_config;
pub mod provider_env;
pub mod queue;
pub mod registry;
pub mod remote;
pub mod route;
pub mod status;
pub mod supervise;
pub mod terminal;
pub mod tls_config;
pub mod trust;
pub mod unix_socket;
pub mod websocket;
mod websocket_pump;
