//! A connection: one transport, one handshake, many calls both ways.
//!
//! [`Connection`] is the public handle to the engine's shared state (the
//! `engine` module): open one with [`Connection::dial`] or
//! [`Connection::accept`], call the peer's methods with the calls of
//! `client.rs`, and offer ours by opening it with
//! [`ConnectionOptions::service`].

use std::any::Any;
use std::sync::{Arc, Weak};
use std::time::Duration;

use hubwire_frame::Hello;

use crate::engine::{self, ConnectionOptions, Core};
use crate::errors::Error;
use crate::transport::{DynTransport, Transport};

/// A live connection to a peer. Cheap to clone; the connection closes when
/// the last clone is dropped (or on [`Connection::close`]).
#[derive(Clone)]
pub struct Connection {
    handle: Arc<Handle>,
}

/// Ends the connection when the last [`Connection`] clone goes.
pub(crate) struct Handle {
    core: Arc<Core>,
    /// A client's direct connections through a hub: `direct.rs` owns
    /// them (opaque here, so this file needs nothing of that one).
    direct: Option<Arc<dyn Any + Send + Sync>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.core.die(Error::unavailable("connection dropped by its owner"));
    }
}

impl Connection {
    /// Opens the connection as the dialer (odd call ids): sends our HELLO,
    /// reads the peer's, negotiates the version.
    pub async fn dial(transport: impl Transport, options: &ConnectionOptions) -> Result<Connection, Error> {
        Connection::start(Arc::new(transport), options, true).await
    }

    /// Opens the connection as the acceptor (even call ids).
    pub async fn accept(transport: impl Transport, options: &ConnectionOptions) -> Result<Connection, Error> {
        Connection::start(Arc::new(transport), options, false).await
    }

    /// [`Connection::dial`] (`dialer`) or [`Connection::accept`] over a
    /// shared transport.
    pub async fn start(transport: DynTransport, options: &ConnectionOptions, dialer: bool) -> Result<Connection, Error> {
        let make = options.router.filter(|_| options.direct && dialer && options.handoff.is_none());
        let Some(make) = make else {
            let core = engine::open(transport, options, dialer).await?;
            return Ok(Connection { handle: Arc::new(Handle { core, direct: None }) });
        };
        // A client asking for the direct path: its DIRECT frames feed its routes.
        let (routes, hook) = make(options);
        let mut options = options.clone();
        options.handoff = Some(hook);
        let core = engine::open(transport, &options, dialer).await?;
        Ok(Connection { handle: Arc::new(Handle { core, direct: Some(routes) }) })
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.handle.core
    }

    pub(crate) fn from_handle(handle: Arc<Handle>) -> Connection {
        Connection { handle }
    }

    /// A handle that does not keep the connection open.
    pub(crate) fn downgrade(&self) -> Weak<Handle> {
        Arc::downgrade(&self.handle)
    }

    /// What `direct.rs` keeps for this connection, if it asked for the
    /// direct path.
    pub(crate) fn direct_state(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.handle.direct.as_ref()
    }

    /// The peer's HELLO: its identity, limits and methods.
    pub fn peer(&self) -> &Hello {
        &self.core().peer
    }

    /// Where the connection goes, for logs.
    pub fn describe(&self) -> String {
        self.core().transport.describe()
    }

    /// Whether both directions are on shared memory now (§11.4).
    pub fn on_shared_memory(&self) -> bool {
        self.core().on_shm()
    }

    /// Waits until the upgrade to shared memory is settled: true once the
    /// connection is on it both ways, false if it stays where it is (the
    /// peer cannot, refused, it is switched off, or the connection ended).
    pub async fn upgraded(&self) -> bool {
        self.core().upgraded().await
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.core().is_closed()
    }

    /// Whether the peer has sent GOAWAY: it finishes the calls it has but
    /// takes no new ones, so new calls belong elsewhere.
    pub fn is_draining(&self) -> bool {
        self.core().calls.lock().unwrap().peer_draining
    }

    /// Waits until the connection ends; returns why.
    pub async fn closed(&self) -> Error {
        self.core().wait_closed().await
    }

    /// Round-trip time of a PING.
    pub async fn ping(&self) -> Result<Duration, Error> {
        self.core().ping().await
    }

    /// Closes the connection now: calls in flight either way fail with
    /// `unavailable`, handlers are cancelled.
    pub fn close(&self) {
        self.core().die(Error::unavailable("connection closed locally"));
    }

    /// Drains, then closes: sends GOAWAY `ok` (the peer starts no new
    /// calls), refuses new calls, waits up to `grace` for the calls in
    /// flight either way to finish, then closes.
    pub async fn drain(&self, grace: Duration) {
        self.core().drain(grace).await
    }
}
