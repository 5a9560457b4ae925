//! Test support for provider and service authors: a client connected to a
//! service in memory, in one line.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use hubwire::{testing, Provider};
//!
//! let provider = Provider::new("math").unary("add", |_ctx, (a, b): (i64, i64)| async move { Ok(a + b) });
//! let pair = testing::pair(provider).await;
//! let sum: i64 = pair.client.call("add", &(2, 3)).await.unwrap();
//! assert_eq!(sum, 5);
//! # }
//! ```

use crate::connection::Connection;
use crate::engine::{ConnectionOptions, Service};
use crate::transport::memory;

/// Two ends of one in-memory connection.
pub struct Pair {
    /// The dialer, calling the service.
    pub client: Connection,
    /// The acceptor, serving it (keep it to close or drain it from the
    /// serving side; dropping it closes the connection).
    pub server: Connection,
}

/// A client connected to `service` over an in-memory transport, both sides
/// with default options (named `client` and `server`).
pub async fn pair(service: impl Service) -> Pair {
    pair_with(service, ConnectionOptions::new("client"), ConnectionOptions::new("server")).await
}

/// Like [`pair`], with options for each side (the server's `service` is
/// set to `service`).
///
/// # Panics
/// If a handshake fails, which over memory means the options are refused
/// by the other side (e.g. no version in common): a test should stop there.
pub async fn pair_with(service: impl Service, client: ConnectionOptions, server: ConnectionOptions) -> Pair {
    let (a, b) = memory::pair();
    let server = server.service(service);
    let (c, s) = tokio::join!(Connection::dial(a, &client), Connection::accept(b, &server));
    Pair { client: c.expect("client handshake"), server: s.expect("server handshake") }
}
