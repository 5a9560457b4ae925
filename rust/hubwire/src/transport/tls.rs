//! TLS over TCP (rustls with the `ring` provider), for peers across a
//! network: the frames are the same as over [`tcp`](super::tcp), only the
//! bytes are encrypted.
//!
//! The handshake is done by `tokio-rustls` within [`HANDSHAKE_TIMEOUT`]
//! (so a peer that never finishes it holds no task or descriptor for
//! long); after it, [`TlsTransport`] drives the rustls connection itself on
//! the non-blocking socket, so that `try_read`/`try_write` keep their
//! meaning (ask the kernel now, never wait).
//!
//! Client certificates: a server config built with a `client_ca` requires
//! every client to present a certificate signed by it (mutual TLS); a
//! client config may carry one.

use std::io::{self, BufRead, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
pub use tokio_rustls::rustls;

use super::{DynTransport, Listener, Transport};

/// How long a TLS handshake may take, on either side, before the
/// connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes a [`TlsListener`] runs at once; while that many are in
/// progress it accepts nothing more (new connections wait in the kernel's
/// backlog).
pub const MAX_HANDSHAKING: usize = 256;

/// Finished handshakes waiting for the accept loop to take them.
const READY_QUEUE: usize = 64;

/// The most plaintext decrypted into the caller's buffer per read.
const READ_CHUNK: usize = 64 * 1024;

fn invalid(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {e}"))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A PEM syntax error in words (the library's own prints marker lines
/// as byte arrays); `wanted` is the kind of block looked for.
fn pem_error(what: &str, wanted: &str, e: rustls::pki_types::pem::Error) -> io::Error {
    use rustls::pki_types::pem::Error as E;
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    match e {
        E::NoItemsFound => invalid(what, format!("no {wanted} block in the PEM text")),
        E::MissingSectionEnd { end_marker } => {
            invalid(what, format!("a PEM block is not closed (no \"-----END {}-----\" line)", lossy(&end_marker)))
        }
        E::IllegalSectionStart { line } => invalid(what, format!("bad PEM line {:?}", lossy(&line))),
        E::Base64Decode(why) => invalid(what, format!("bad base64 in a PEM block: {why}")),
        e => invalid(what, e),
    }
}

/// Every certificate in a PEM text (`what` names it in errors). At least
/// one is required.
pub fn certs_from_pem(pem: &[u8], what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().map_err(|e| pem_error(what, "CERTIFICATE", e))?;
    if certs.is_empty() {
        return Err(invalid(what, "no CERTIFICATE block in the PEM text"));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in a PEM text.
pub fn key_from_pem(pem: &[u8], what: &str) -> io::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| pem_error(what, "PRIVATE KEY", e))
}

fn roots(ca_pem: &[u8], what: &str) -> io::Result<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    for c in certs_from_pem(ca_pem, what)? {
        roots.add(c).map_err(|e| invalid(what, e))?;
    }
    Ok(Arc::new(roots))
}

/// A server config: our certificate chain and key (PEM), and when
/// `client_ca` (PEM) is given, a client certificate signed by it is
/// required.
pub fn server_config(cert_pem: &[u8], key_pem: &[u8], client_ca: Option<&[u8]>) -> io::Result<Arc<ServerConfig>> {
    let builder = ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().map_err(io::Error::other)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(ca, "client_ca")?, provider())
                .build()
                .map_err(|e| invalid("client_ca", e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(certs_from_pem(cert_pem, "cert")?, key_from_pem(key_pem, "key")?)
        .map_err(|e| invalid("cert and key", e))?;
    Ok(Arc::new(config))
}

/// A client config trusting the CAs in `ca_pem`, presenting `identity`
/// (certificate chain PEM, key PEM) when given.
pub fn client_config(ca_pem: &[u8], identity: Option<(&[u8], &[u8])>) -> io::Result<Arc<ClientConfig>> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots(ca_pem, "CA")?);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(certs_from_pem(cert, "client certificate")?, key_from_pem(key, "client key")?)
            .map_err(|e| invalid("client certificate and key", e))?,
    };
    Ok(Arc::new(config))
}

/// The server side of the handshake, with its deadline. Also used by the
/// hub's HTTP and WebSocket listeners, which speak HTTP over the stream.
#[derive(Clone)]
pub struct Acceptor {
    inner: tokio_rustls::TlsAcceptor,
    timeout: Duration,
    client_certs: bool,
}

impl Acceptor {
    /// An acceptor for `config`, with the default [`HANDSHAKE_TIMEOUT`].
    /// `requires_client_cert` says whether `config` was built with a
    /// `client_ca` (rustls does not tell).
    pub fn new(config: Arc<ServerConfig>, requires_client_cert: bool) -> Acceptor {
        Acceptor { inner: config.into(), timeout: HANDSHAKE_TIMEOUT, client_certs: requires_client_cert }
    }

    /// Sets the handshake deadline.
    pub fn handshake_timeout(mut self, d: Duration) -> Acceptor {
        self.timeout = d;
        self
    }

    /// Whether every connection it accepts has presented a client
    /// certificate signed by the configured `client_ca`.
    pub fn requires_client_cert(&self) -> bool {
        self.client_certs
    }

    /// Runs the server handshake on `stream`, failing with `TimedOut` when
    /// it is not done within the deadline.
    pub async fn accept(&self, stream: tokio::net::TcpStream) -> io::Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
        stream.set_nodelay(true)?;
        match tokio::time::timeout(self.timeout, self.inner.accept(stream)).await {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, format!("TLS handshake not done within {:?}", self.timeout))),
        }
    }
}

/// Connects to `addr` (`host:port`), checking the server's certificate
/// against `host` and `config`'s CAs, within [`HANDSHAKE_TIMEOUT`].
pub async fn connect(addr: &str, config: Arc<ClientConfig>) -> io::Result<TlsTransport> {
    let (stream, conn) = connect_stream(addr, config).await?.into_inner();
    TlsTransport::new(stream, conn.into(), format!("tls:{addr}"))
}

/// Like [`connect`], but the TLS stream itself, for a protocol other than
/// hubwire's over it (HTTPS, WSS).
pub async fn connect_stream(addr: &str, config: Arc<ClientConfig>) -> io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let fail = |e: io::Error| io::Error::new(e.kind(), format!("connect to tls:{addr}: {e}"));
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(host.to_string()).map_err(|e| fail(invalid("server name", e)))?;
    let handshake = async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        tokio_rustls::TlsConnector::from(config).connect(name, stream).await
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(r) => r.map_err(fail),
        Err(_) => Err(fail(io::Error::new(io::ErrorKind::TimedOut, format!("not connected within {HANDSHAKE_TIMEOUT:?}")))),
    }
}

/// A connection and its one byte of written-but-unreported plaintext (see
/// [`TlsTransport::write_some`]).
struct State {
    conn: rustls::Connection,
    owed: usize,
}

/// A transport over an established TLS connection.
pub struct TlsTransport {
    io: AsyncFd<std::net::TcpStream>,
    state: Mutex<State>,
    label: String,
}

/// The socket as `Read`/`Write` for rustls: plain `recv`/`sendmsg`, so a
/// peer that went away is `EPIPE`, never `SIGPIPE`.
struct Sock(RawFd);

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::recv(self.0, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        super::fd::send(self.0, &[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        super::fd::send(self.0, bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// Writes out every encrypted byte rustls holds; `WouldBlock` when the
/// socket cannot take them all now.
fn flush(conn: &mut rustls::Connection, fd: RawFd) -> io::Result<()> {
    while conn.wants_write() {
        if conn.write_tls(&mut Sock(fd))? == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

impl TlsTransport {
    /// The server side of an accepted TCP connection: the TLS handshake
    /// (within the acceptor's deadline), then the transport, labelled
    /// `label`. For accept loops of their own (the hub's, which admits a
    /// connection under its limits before the handshake).
    pub async fn accept(acceptor: &Acceptor, stream: tokio::net::TcpStream, label: String) -> io::Result<TlsTransport> {
        let (stream, conn) = acceptor.accept(stream).await?.into_inner();
        TlsTransport::new(stream, conn.into(), label)
    }

    fn new(stream: tokio::net::TcpStream, mut conn: rustls::Connection, label: String) -> io::Result<TlsTransport> {
        // Encrypted bytes not yet taken by the socket: at most this many
        // are held before writes would block (also rustls' default).
        conn.set_buffer_limit(Some(64 * 1024));
        let std = stream.into_std()?;
        std.set_nonblocking(true)?;
        // SAFETY: we own `std`, so its descriptor stays open and is not
        // registered elsewhere for as long as the AsyncFd lives.
        let io = unsafe { AsyncFd::register(std) }.map_err(io::Error::from)?;
        Ok(TlsTransport { io, state: Mutex::new(State { conn, owed: 0 }), label })
    }

    /// Decrypted bytes into `buf`: first what rustls already holds, then
    /// records read from the socket. `WouldBlock` only when the socket had
    /// nothing (so readiness may be cleared). The peer closing, with or
    /// without `close_notify`, is end of stream: frames carry their own
    /// lengths, so a cut is seen by the frame layer.
    fn read_some(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let fd = self.io.as_raw_fd();
        let mut st = self.state.lock().unwrap();
        loop {
            // Copied straight from rustls' buffer into the spare capacity.
            let mut n = 0;
            let r = loop {
                let room = (buf.capacity() - buf.len()).min(READ_CHUNK - n);
                let mut reader = st.conn.reader();
                match reader.fill_buf() {
                    Ok([]) => break Ok(()),
                    Ok(chunk) if room > 0 => {
                        let take = chunk.len().min(room);
                        buf.put_slice(&chunk[..take]);
                        reader.consume(take);
                        n += take;
                    }
                    Ok(_) => break Ok(()),
                    Err(e) => break Err(e),
                }
            };
            match r {
                // Something copied, or a clean close (`close_notify`): end of stream.
                _ if n > 0 => return Ok(n),
                Ok(()) => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) if !would_block(&e) => return Err(e),
                Err(_) => {}
            }
            if st.conn.read_tls(&mut Sock(fd))? > 0 {
                if let Err(e) = st.conn.process_new_packets() {
                    // rustls queued an alert saying why: try to send it.
                    let _ = flush(&mut st.conn, fd);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
                // Records that ask for an answer (a key update) queue
                // bytes; send what the socket takes now, the rest goes
                // before our next write.
                let _ = flush(&mut st.conn, fd);
            }
        }
    }

    /// Encrypts a prefix of `bufs` and sends it. Encrypted bytes the
    /// socket does not take at once stay in rustls; so that the caller
    /// comes back (and they get sent even if it has nothing more to
    /// write), the last byte of such a write is reported as not written:
    /// the next call sends the rest of the encrypted bytes and then
    /// reports that byte, without encrypting it again. The caller offers
    /// the unwritten bytes again, as every writer does.
    fn write_some(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let fd = self.io.as_raw_fd();
        let mut st = self.state.lock().unwrap();
        flush(&mut st.conn, fd)?;
        if st.owed > 0 {
            return Ok(std::mem::take(&mut st.owed));
        }
        let n = st.conn.writer().write_vectored(bufs)?;
        if n == 0 {
            return Ok(0);
        }
        match flush(&mut st.conn, fd) {
            Err(e) if would_block(&e) => {
                st.owed = 1;
                if n > 1 {
                    Ok(n - 1)
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
            Ok(()) => Ok(n),
        }
    }

    /// Sends `close_notify` (as far as the socket takes it now) and shuts
    /// the socket down `how`.
    fn close(&self, how: libc::c_int) {
        let fd = self.io.as_raw_fd();
        let mut st = self.state.lock().unwrap();
        st.conn.send_close_notify();
        let _ = flush(&mut st.conn, fd);
        // SAFETY: shutdown on a descriptor we own; errors are of no interest.
        unsafe { libc::shutdown(fd, how) };
    }
}

impl Transport for TlsTransport {
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        self.read_some(buf)
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        // rustls may already hold plaintext (read along with the end of
        // the handshake) while the socket has nothing: look there first.
        match self.read_some(buf) {
            Err(e) if would_block(&e) => {}
            r => return Poll::Ready(r),
        }
        loop {
            let mut guard = ready!(self.io.poll_read_ready(cx))?;
            if let Ok(r) = guard.try_io(|_| self.read_some(buf)) {
                return Poll::Ready(r);
            }
        }
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.write_some(bufs)
    }

    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.io.poll_write_ready(cx))?;
            if let Ok(r) = guard.try_io(|_| self.write_some(bufs)) {
                return Poll::Ready(r);
            }
        }
    }

    fn shutdown(&self) {
        self.close(libc::SHUT_RDWR);
    }

    fn shutdown_write(&self) {
        self.close(libc::SHUT_WR);
    }

    fn release(&self) {
        self.close(libc::SHUT_RDWR);
        super::fd::release(self.io.as_raw_fd());
    }

    fn describe(&self) -> String {
        self.label.clone()
    }
}

/// A listening TCP socket whose connections speak TLS. Handshakes run in
/// a task started when it is bound (at most [`MAX_HANDSHAKING`] at once,
/// each within the acceptor's deadline), so a slow client delays nobody;
/// dropping the listener stops that task and every handshake in progress.
pub struct TlsListener {
    local: SocketAddr,
    ready: Mutex<mpsc::Receiver<DynTransport>>,
    handshaking: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Binds `addr` (`host:port`; port 0 picks a free port).
    pub async fn bind(addr: &str, acceptor: Acceptor) -> io::Result<TlsListener> {
        let tcp = tokio::net::TcpListener::bind(addr).await.map_err(|e| io::Error::new(e.kind(), format!("bind tls:{addr}: {e}")))?;
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(READY_QUEUE);
        let handshaking = tokio::spawn(handshake_loop(tcp, acceptor, tx));
        Ok(TlsListener { local, ready: Mutex::new(rx), handshaking })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.handshaking.abort();
    }
}

impl Listener for TlsListener {
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<DynTransport>> {
        match ready!(self.ready.lock().unwrap().poll_recv(cx)) {
            Some(t) => Poll::Ready(Ok(t)),
            None => Poll::Ready(Err(io::Error::other("the TLS listener stopped"))),
        }
    }

    fn describe(&self) -> String {
        format!("tls:{}", self.local)
    }
}

async fn handshake_loop(tcp: tokio::net::TcpListener, acceptor: Acceptor, ready: mpsc::Sender<DynTransport>) {
    let permits = Arc::new(Semaphore::new(MAX_HANDSHAKING));
    let mut handshaking = JoinSet::new();
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else { return };
        while handshaking.try_join_next().is_some() {}
        let (stream, peer) = match tcp.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors, usually: wait instead of spinning.
                tracing::warn!(listen = %format!("tls:{}", tcp.local_addr().map_or("?".into(), |a| a.to_string())), "accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        handshaking.spawn(async move {
            let _permit = permit;
            match TlsTransport::accept(&acceptor, stream, format!("tls:{peer}")).await {
                Ok(t) => {
                    let _ = ready.send(Arc::new(t)).await;
                }
                Err(e) => tracing::info!(client = %format!("tls:{peer}"), "TLS handshake failed: {e}"),
            }
        });
    }
}
