//! Every case, in the order the suite runs them. Each is one small async
//! function returning `Ok(note)` (PASS) or `Err(reason)` (FAIL); its doc
//! comment says the behaviour it expects, from the issue and the config
//! keys the hub documents. The runner adds what every case shares: the
//! main hub must survive, and the background clients must keep being
//! served.

use std::future::Future;
use std::pin::Pin;

use crate::suite::{Ctx, Outcome};

mod config;
mod flood;
mod local;
mod peers;
mod providers;
mod remote;
mod shm;
mod web;

/// A case's body.
pub type Run = for<'a> fn(&'a Ctx) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// One case: its name on the table and its body.
pub struct Case {
    /// Unique, kebab-case.
    pub name: &'static str,
    /// The body.
    pub run: Run,
}

macro_rules! cases {
    ($($name:literal => $f:path),* $(,)?) => {
        /// Every case, in order.
        pub const ALL: &[Case] = &[$(Case { name: $name, run: |ctx| Box::pin($f(ctx)) }),*];
    };
}

cases! {
    "silent-client" => peers::silent_client,
    "slow-handshake" => peers::slow_handshake,
    "truncated-frames" => peers::truncated_frames,
    "oversized-frame" => peers::oversized_frame,
    "header-then-silence" => peers::header_then_silence,
    "garbage-bytes" => peers::garbage_bytes,
    "wrong-version" => peers::wrong_version,
    "cancel-then-reuse-id" => peers::cancel_then_reuse_id,
    "idle-flood-10k" => flood::idle_flood,
    "unknown-method-crash-loop" => providers::unknown_method_crash_loop,
    "queued-large-calls" => providers::queued_large_calls,
    "queued-streams" => providers::queued_streams,
    "stdout-no-newline" => providers::stdout_no_newline,
    "stderr-8mib-line" => providers::stderr_long_line,
    "no-deadline-call" => providers::no_deadline_call,
    "hung-replica" => providers::hung_replica,
    "kill9-under-load" => providers::kill9_under_load,
    "setsid-grandchild" => providers::setsid_grandchild,
    "shm-idle-and-kill9" => shm::idle_and_killed,
    "shm-direct-other-user" => shm::other_user,
    "config-unix-at-regular-file" => config::unix_at_regular_file,
    "config-world-writable" => config::world_writable,
    "config-symlink" => config::symlink,
    "config-public-without-auth" => config::public_without_auth,
    "http-cross-origin-post" => web::cross_origin_post,
    "http-bad-host" => web::bad_host,
    "http-slow-headers" => web::slow_headers,
    "http-slow-body" => web::slow_body,
    "http-status-private" => web::status_private,
    "token-required" => remote::token_required,
    "websocket-origin" => remote::websocket_origin,
    "escapes-in-names" => local::escapes_in_names,
    "provider-env" => local::provider_env,
    "unix-socket-mode" => local::unix_socket_mode,
    "unix-other-user" => local::unix_other_user,
}
