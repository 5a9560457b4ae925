//! The WebSocket listener (`spec/PROTOCOL.md` §11.3): browsers reach the
//! hub through the front door, with the same frames as on a socket.
//!
//! The WebSocket lives here, not in the runtime: only the hub serves it (a
//! page is the client), and the runtime's transports stay free of an HTTP
//! stack. It still ends behind the runtime's [`Transport`] trait, so a
//! WebSocket client is served by exactly the code that serves unix and tcp
//! clients: [`WebSocketListener`] is a [`Listener`] whose connections are
//! already upgraded.
//!
//! Each connection is a byte pipe ([`memory::pair`], bounded like a
//! socket buffer) and one task that pumps between it and the WebSocket:
//! binary messages in → bytes to the hub; bytes from the hub → one binary
//! message per read (see `websocket_pump`). A message's bytes are
//! copied once, into the pipe; the pipe's bound means a hub that stops
//! reading stops the pump reading the WebSocket, so TCP pushes back.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use hubwire::transport::{memory, tls, DynTransport, Listener, Transport};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{header, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::WebSocketStream;

use crate::http_guard::{host_allowed, origin_allowed};

/// The subprotocol a client must offer in `Sec-WebSocket-Protocol`.
pub const SUBPROTOCOL: &str = "hubwire.v1";
/// The largest message payload either side sends or accepts (§11.3);
/// a bigger one closes the WebSocket with 1009.
pub const MAX_MESSAGE: usize = 1 << 20;
/// How long a new TCP connection may take to finish its upgrade request.
pub const UPGRADE_TIMEOUT: Duration = Duration::from_secs(10);
/// Upgrades in progress at once; more connections wait in the listen
/// backlog until one finishes (each takes at most [`UPGRADE_TIMEOUT`]).
pub const MAX_UPGRADING: usize = 256;
/// Upgraded connections waiting for the hub to take them.
const READY_QUEUE: usize = 64;

/// Who may upgrade: the `[hub]` `allowed_origins` and `allowed_hosts`.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Origins allowed to connect (a request without `Origin` always may).
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted; empty = loopback names and the listen address.
    pub allowed_hosts: Vec<String>,
}

/// A bound WebSocket listener. Upgrades run in a task of its own from the
/// moment it is bound (so that a slow client delays nobody); dropping it
/// stops that task and every upgrade in progress, never a connection the
/// hub already took.
pub struct WebSocketListener {
    local: SocketAddr,
    /// `ws` or, over TLS, `wss`.
    scheme: &'static str,
    ready: Mutex<mpsc::Receiver<(DynTransport, SocketAddr)>>,
    upgrading: tokio::task::JoinHandle<()>,
}

impl WebSocketListener {
    /// Binds `addr` (`host:port`; port 0 picks a free port) and starts
    /// upgrading the connections that arrive, under `policy`; over TLS
    /// (`wss:`) when `tls` is given, the handshake counting against
    /// [`UPGRADE_TIMEOUT`].
    pub async fn bind(addr: &str, policy: Policy, tls: Option<tls::Acceptor>) -> io::Result<WebSocketListener> {
        let tcp = tokio::net::TcpListener::bind(addr).await?;
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(READY_QUEUE);
        let scheme = if tls.is_some() { "wss" } else { "ws" };
        let upgrading = tokio::spawn(upgrade_loop(tcp, local, Arc::new(policy), tls, tx));
        Ok(WebSocketListener { local, scheme, ready: Mutex::new(rx), upgrading })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl WebSocketListener {
    /// The next upgraded connection and the address it came from (for
    /// the hub's per-peer connection limit).
    pub async fn accept(&self) -> io::Result<(DynTransport, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<io::Result<(DynTransport, SocketAddr)>> {
        match self.ready.lock().unwrap().poll_recv(cx) {
            Poll::Ready(Some(x)) => Poll::Ready(Ok(x)),
            Poll::Ready(None) => Poll::Ready(Err(io::Error::other("the WebSocket listener stopped"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for WebSocketListener {
    fn drop(&mut self) {
        self.upgrading.abort();
    }
}

impl Listener for WebSocketListener {
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<DynTransport>> {
        self.poll_next(cx).map_ok(|(t, _)| t)
    }

    fn describe(&self) -> String {
        format!("{}:{}", self.scheme, self.local)
    }
}

/// Accepts TCP connections and upgrades each in a task of its own, at most
/// [`MAX_UPGRADING`] at once, each within [`UPGRADE_TIMEOUT`]. This is the
/// one place a WebSocket connection enters the hub before the hub's own
/// accept loop takes it as a [`Transport`].
async fn upgrade_loop(
    tcp: tokio::net::TcpListener,
    listen: SocketAddr,
    policy: Arc<Policy>,
    tls: Option<tls::Acceptor>,
    ready: mpsc::Sender<(DynTransport, SocketAddr)>,
) {
    let permits = Arc::new(Semaphore::new(MAX_UPGRADING));
    let mut upgrading = JoinSet::new();
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else { return };
        while upgrading.try_join_next().is_some() {}
        let (stream, peer) = match tcp.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors, usually: wait instead of spinning.
                tracing::warn!(listen = %format!("ws:{listen}"), "accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (policy, tls, ready) = (policy.clone(), tls.clone(), ready.clone());
        upgrading.spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(UPGRADE_TIMEOUT, upgrade(stream, peer, listen, &policy, tls.as_ref())).await {
                Ok(Ok(t)) => {
                    let _ = ready.send((Arc::new(t), peer)).await;
                }
                Ok(Err(WsError::Http(resp))) => {
                    let why = String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default());
                    tracing::info!(client = %format!("ws:{peer}"), "websocket upgrade refused: {} {why}", resp.status().as_u16())
                }
                Ok(Err(e)) => tracing::info!(client = %format!("ws:{peer}"), "websocket upgrade failed: {e}"),
                Err(_) => tracing::debug!(client = %format!("ws:{peer}"), "websocket upgrade refused: not done within {UPGRADE_TIMEOUT:?}"),
            }
        });
    }
}

/// The limits both sides apply to WebSocket messages (§11.3).
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE)).max_frame_size(Some(MAX_MESSAGE))
}

/// Runs the TLS handshake (when `tls`), then checks the upgrade request
/// and completes the WebSocket handshake.
async fn upgrade(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    listen: SocketAddr,
    policy: &Policy,
    tls: Option<&tls::Acceptor>,
) -> Result<WebSocketTransport, WsError> {
    stream.set_nodelay(true)?;
    match tls {
        None => upgrade_stream(stream, format!("ws:{peer}"), listen, policy).await,
        Some(a) => upgrade_stream(a.accept(stream).await?, format!("wss:{peer}"), listen, policy).await,
    }
}

async fn upgrade_stream<S>(stream: S, label: String, listen: SocketAddr, policy: &Policy) -> Result<WebSocketTransport, WsError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // The callback's type is tungstenite's: its error is the HTTP answer.
    #[allow(clippy::result_large_err)]
    let check = |req: &Request, mut resp: Response| -> Result<Response, ErrorResponse> {
        if let Err((status, why)) = check_request(req, &listen, policy) {
            let mut r = ErrorResponse::new(Some(why));
            *r.status_mut() = status;
            return Err(r);
        }
        resp.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(SUBPROTOCOL));
        Ok(resp)
    };
    let ws = tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(ws_config())).await?;
    Ok(WebSocketTransport::start(ws, label))
}

/// `Host`, then `Origin` (403), then the subprotocol (400): the status to
/// refuse with and why.
fn check_request(req: &Request, listen: &SocketAddr, policy: &Policy) -> Result<(), (StatusCode, String)> {
    let text = |name: header::HeaderName| req.headers().get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let refuse = |status: StatusCode, why: String| Err((status, why));
    let host = text(header::HOST);
    if !host_allowed(host, &policy.allowed_hosts, listen) {
        return refuse(StatusCode::FORBIDDEN, format!("Host {host:?} is not allowed (see allowed_hosts)"));
    }
    let origin = text(header::ORIGIN);
    if !origin_allowed(origin, &policy.allowed_origins) {
        return refuse(StatusCode::FORBIDDEN, format!("Origin {origin:?} is not allowed (see allowed_origins)"));
    }
    let offered = req.headers().get_all(header::SEC_WEBSOCKET_PROTOCOL).iter().filter_map(|v| v.to_str().ok());
    if !offered.flat_map(|v| v.split(',')).any(|p| p.trim() == SUBPROTOCOL) {
        return refuse(StatusCode::BAD_REQUEST, format!("Sec-WebSocket-Protocol must offer {SUBPROTOCOL}"));
    }
    Ok(())
}

/// Dials a hub's WebSocket listener (`ws://host:port/`), offering
/// [`SUBPROTOCOL`]: a Rust client over the same path a browser takes.
pub async fn connect(url: &str) -> io::Result<WebSocketTransport> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = url.into_client_request().map_err(io::Error::other)?;
    req.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(SUBPROTOCOL));
    let (ws, _) = tokio_tungstenite::connect_async_with_config(req, Some(ws_config()), true).await.map_err(|e| match e {
        WsError::Io(e) => io::Error::new(e.kind(), format!("connect to {url}: {e}")),
        WsError::Http(resp) => {
            let why = String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned();
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("connect to {url}: refused with HTTP {}: {why}", resp.status().as_u16()),
            )
        }
        e => io::Error::other(format!("connect to {url}: {e}")),
    })?;
    Ok(WebSocketTransport::start(ws, url.to_string()))
}

/// One WebSocket connection as a byte stream: the hub's end of a pipe
/// whose other end a task pumps to and from the WebSocket. Dropping it
/// ends the stream, and the pump closes the WebSocket.
pub struct WebSocketTransport {
    pipe: memory::MemoryTransport,
    label: String,
}

impl WebSocketTransport {
    /// Starts the pump for `ws` (either role) and returns our end.
    pub fn start<S>(ws: WebSocketStream<S>, label: String) -> WebSocketTransport
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (ours, pumped) = memory::pair();
        tokio::spawn(crate::websocket_pump::run(ws, pumped, label.clone()));
        WebSocketTransport { pipe: ours, label }
    }
}

impl Transport for WebSocketTransport {
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        self.pipe.try_read(buf)
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        self.pipe.poll_read(cx, buf)
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.pipe.try_write(bufs)
    }

    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        self.pipe.poll_write(cx, bufs)
    }

    fn shutdown(&self) {
        self.pipe.shutdown()
    }

    fn shutdown_write(&self) {
        self.pipe.shutdown_write()
    }

    fn describe(&self) -> String {
        self.label.clone()
    }
}
