//! hubwire over NATS at the API (`spec/PROTOCOL.md` §13): a client dials a
//! method, a provider or one replica through NATS; a provider attaches to
//! NATS as a replica with no hub on its host. The transport itself is
//! [`transport::nats`](crate::transport::nats).

use std::sync::Arc;

use async_nats::Client;

use crate::provider::accept_loop;
pub use crate::transport::nats::{
    connect, connect_with, CallCounts, DialOptions, LinkInfo, NatsError, NatsListener, Offer, Target, LINK_PENDING,
};
use crate::{Connection, ConnectionOptions, Error, Incoming, MethodInfo, ServeFuture, Service, Work};

impl From<NatsError> for Error {
    fn from(e: NatsError) -> Error {
        Error::new(e.code, e.message)
    }
}

/// Opens a link to `target` and a connection over it (HELLO and all, as
/// the dialer): `unavailable` at once when nobody offers `target`.
pub async fn dial(
    client: &Client,
    target: &Target,
    options: &ConnectionOptions,
    nats: &DialOptions,
) -> Result<(Connection, LinkInfo), Error> {
    let nats = DialOptions { peer: nats.peer.clone().or_else(|| Some(options.name.clone())), ..nats.clone() };
    let (link, info) = crate::transport::nats::dial(client, target, &nats).await?;
    Ok((Connection::dial(link, options).await?, info))
}

/// How a replica attaches to NATS.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The subject prefix (§13.1), `hubwire` by default.
    pub prefix: String,
    /// The version `$SRV` shows (semver).
    pub version: String,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions { prefix: crate::transport::nats::wire::DEFAULT_PREFIX.into(), version: env!("CARGO_PKG_VERSION").into() }
    }
}

/// A replica attached to NATS by [`serve`]: it accepts links until
/// stopped or dropped (then its subjects are unsubscribed, so no new link
/// reaches it; links already open run on until they end).
pub struct Replica {
    id: String,
    calls: Arc<CallCounts>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Replica {
    /// Its replica id (§13.1).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Calls served so far of `method`, as `$SRV.STATS` reports them.
    pub fn calls(&self, method: &str) -> u64 {
        self.calls.get(method)
    }

    /// Stops accepting links.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Attaches `service` to NATS as a replica of the provider named
/// `options.name`: subscribes a connect subject per method (and the
/// provider's and its own) in the queue group `hubwire`, answers `$SRV`
/// discovery, and serves every link as the acceptor with `options`.
pub async fn serve(service: impl Service, client: Client, nats: &ServeOptions, options: ConnectionOptions) -> Result<Replica, Error> {
    let offer =
        Offer { prefix: nats.prefix.clone(), provider: options.name.clone(), version: nats.version.clone(), methods: service.methods() };
    let listener = NatsListener::bind(client, offer).await?;
    let (id, calls) = (listener.replica().to_string(), listener.calls());
    let counted = Counted { inner: service, calls: calls.clone() };
    let task = tokio::spawn(accept_loop(listener, options.service(counted)));
    Ok(Replica { id, calls, task })
}

/// A service that counts its calls per method for `$SRV.STATS`.
struct Counted<S> {
    inner: S,
    calls: Arc<CallCounts>,
}

impl<S: Service> Service for Counted<S> {
    fn methods(&self) -> Vec<MethodInfo> {
        self.inner.methods()
    }

    fn call(&self, call: Incoming) -> Result<ServeFuture, Error> {
        self.start(call).map(Work::into_future)
    }

    fn start(&self, call: Incoming) -> Result<Work, Error> {
        self.calls.count(call.method());
        self.inner.start(call)
    }
}
