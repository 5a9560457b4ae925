//! The HTTP/JSON gateway, for callers that do not speak hubwire: curl,
//! browsers, shell scripts.
//!
//! | request | answer |
//! |---|---|
//! | `POST /v1/call/<method>` | the result as JSON (raw bytes for `application/octet-stream` in); streams as NDJSON |
//! | `GET /v1/methods` | every routed method: name, kind, provider, doc |
//! | `GET /v1/status` | the status `hubwire status` shows, as JSON |
//! | `GET /healthz` | 200 when every provider has a ready replica, else 503 naming the ones that do not |
//! | `GET /metrics` | Prometheus text format |
//!
//! With a token configured (`crate::auth`), every request but
//! `GET /healthz` needs `Authorization: Bearer <token>`, else 401 with
//! `WWW-Authenticate: Bearer`; without one, `GET /v1/status` is the
//! redacted status of untrusted callers.
//!
//! A call goes through an in-memory hubwire connection to the hub itself,
//! so it is routed, limited and drained exactly like any other client's.
//! Client- and bidi-stream inputs are NDJSON request bodies (one JSON value
//! per line). A deadline is the `hubwire-timeout-ms` header. Errors use the
//! HTTP statuses of `spec/errors.md` ("Over HTTP").
//!
//! Who may use it, and for how long: every request's `Host` must be one
//! of `allowed_hosts` and its `Origin` (if any) one of `allowed_origins`
//! (403 otherwise, `http_guard`); a call's body must be
//! `application/json` (or NDJSON for input streams, or
//! `application/octet-stream` for raw bytes): 415 otherwise, so that a
//! web page cannot send one without a CORS preflight. Each HTTP
//! connection counts against `max_connections` and
//! `max_connections_per_peer` (over them: 429 and closed); a request's
//! head must arrive within `http_header_timeout` (else the connection is
//! closed) and its body within `http_body_timeout` (else 408 and closed).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hubwire::transport::tls;
use hubwire::{CallOptions, Code, Codec, Connection, Error, Kind, Payload, Token};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::mpsc;

use crate::admit::{Admission, Peer};
use crate::http_guard::{host_allowed, origin_allowed};
use crate::registry::Registry;
use crate::status;

/// The largest request body accepted: the protocol's default frame limit.
const MAX_BODY: usize = 16 << 20;

/// A response body: all at once, or streamed line by line.
pub enum Body {
    /// A complete body (taken once).
    Full(Option<Bytes>),
    /// NDJSON lines as they come.
    Lines(mpsc::Receiver<Bytes>),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Body::Lines(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }

    /// Exact for complete bodies, so they go out with a Content-Length
    /// rather than chunked.
    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            Body::Full(b) => hyper::body::SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Lines(_) => hyper::body::SizeHint::default(),
        }
    }
}

/// What the gateway serves and under which limits (the `[hub]` keys).
pub struct Settings {
    /// Providers and methods.
    pub reg: Arc<Registry>,
    /// The hub's name, for status.
    pub hub: String,
    /// The connection limits every listener shares.
    pub admission: Arc<Admission>,
    /// `http_header_timeout`.
    pub header_timeout: Duration,
    /// `http_body_timeout`.
    pub body_timeout: Duration,
    /// `allowed_origins`.
    pub allowed_origins: Vec<String>,
    /// `allowed_hosts`.
    pub allowed_hosts: Vec<String>,
    /// The token every request but `GET /healthz` must carry as a bearer
    /// token (`token_file` or `HUBWIRE_TOKEN`), if set.
    pub token: Option<Token>,
    /// Every connection showed a client certificate signed by `[hub.tls]
    /// client_ca`: its callers are trusted (private status).
    pub certified: bool,
}

struct Gateway {
    conn: Connection,
    settings: Settings,
    listen: std::net::SocketAddr,
}

/// Serves HTTP on `listener` until the task is aborted; HTTPS when `tls`
/// is given (each handshake in the connection's own task, within the
/// acceptor's deadline).
pub async fn serve(listener: tokio::net::TcpListener, tls: Option<tls::Acceptor>, conn: Connection, settings: Settings) {
    let Ok(listen) = listener.local_addr() else { return };
    let gw = Arc::new(Gateway { conn, settings, listen });
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("HTTP accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ticket = match gw.settings.admission.admit(Peer::Ip(peer.ip())) {
            Ok(t) => t,
            Err(why) => {
                tracing::debug!(client = %format!("http:{peer}"), "refused: {why}");
                refuse(stream, &why);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (gw, tls) = (gw.clone(), tls.clone());
        tokio::spawn(async move {
            // Held until the connection ends: it counts against the limits.
            let _ticket = ticket;
            match tls {
                None => gw.serve_connection(stream).await,
                Some(tls) => match tls.accept(stream).await {
                    Ok(stream) => gw.serve_connection(stream).await,
                    Err(e) => tracing::info!("HTTPS handshake failed: {e}"),
                },
            }
        });
    }
}

/// Answers a connection over the limits `429` and closes it, never
/// waiting: a fresh socket's send buffer is empty, so the answer goes in
/// one non-blocking write. What the client already sent is read and
/// dropped first, so that the close is not a reset that could destroy the
/// answer before the client reads it (as `admit::refuse` does).
fn refuse(stream: tokio::net::TcpStream, why: &str) {
    let answer = format!(
        "HTTP/1.1 429 Too Many Requests\r\nconnection: close\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{why}\n",
        why.len() + 1
    );
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        if !matches!(stream.try_read(&mut sink), Ok(n) if n > 0) {
            break;
        }
    }
    let _ = stream.try_write(answer.as_bytes());
    if let Ok(s) = stream.into_std() {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
}

fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder().status(status).header("content-type", content_type).body(Body::Full(Some(body.into()))).unwrap()
}

/// 401 for a request without the bearer token (RFC 6750 §3).
fn unauthorized() -> Response<Body> {
    let body =
        serde_json::to_vec(&serde_json::json!({"code": "unauthenticated", "message": "this hub requires Authorization: Bearer <token>"}))
            .unwrap_or_default();
    Response::builder()
        .status(StatusCode::UNAUTHORIZED)
        .header("content-type", "application/json")
        .header(hyper::header::WWW_AUTHENTICATE, "Bearer")
        .body(Body::Full(Some(body.into())))
        .unwrap()
}

fn json(status: StatusCode, v: &impl serde::Serialize) -> Response<Body> {
    let mut b = serde_json::to_vec_pretty(v).unwrap_or_default();
    b.push(b'\n');
    respond(status, "application/json", b)
}

/// The HTTP status of a code (`spec/errors.md`, "Over HTTP").
pub fn http_status(code: Code) -> u16 {
    match code {
        Code::Ok => 200,
        Code::Failure => 422,
        Code::Defect | Code::Internal => 500,
        Code::UnknownMethod => 404,
        Code::InvalidArgument => 400,
        Code::DeadlineExceeded => 504,
        Code::Cancelled => 499,
        Code::Unavailable => 503,
        Code::ResourceExhausted => 429,
        Code::TooLarge => 413,
        Code::ProtocolError | Code::UnsupportedVersion => 502,
        Code::Unauthenticated => 401,
    }
}

fn error_value(e: &Error) -> serde_json::Value {
    let detail: Option<serde_json::Value> = e.detail().and_then(|p| serde_json::from_slice(&to_json(p).ok()?).ok());
    serde_json::json!({"code": e.code().name(), "message": e.message(), "detail": detail})
}

fn error(e: &Error) -> Response<Body> {
    json(StatusCode::from_u16(http_status(e.code())).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &error_value(e))
}

/// A payload as JSON text (MessagePack is transcoded; raw bytes are not JSON).
fn to_json(p: &Payload) -> Result<Bytes, String> {
    match p.codec {
        Codec::Json => Ok(p.bytes.clone()),
        Codec::Msgpack => {
            let v: serde_json::Value = rmp_serde::from_slice(&p.bytes).map_err(|e| format!("cannot transcode MessagePack: {e}"))?;
            Ok(serde_json::to_vec(&v).map_err(|e| e.to_string())?.into())
        }
        Codec::Raw => Err("raw bytes".into()),
    }
}

impl Gateway {
    /// Serves HTTP/1.1 on one connection (plain or TLS) until it ends.
    async fn serve_connection<S>(self: Arc<Self>, stream: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let header_timeout = self.settings.header_timeout;
        let service = hyper::service::service_fn(move |req| {
            let gw = self.clone();
            async move { Ok::<_, Infallible>(gw.handle(req).await) }
        });
        let io = hyper_util::rt::TokioIo::new(stream);
        let served = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(io, service)
            .await;
        if let Err(e) = served {
            tracing::debug!("HTTP connection ended: {e}");
        }
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        if let Err(refused) = self.check_browser(&req) {
            return refused;
        }
        let (reg, hub) = (&self.settings.reg, self.settings.hub.as_str());
        let path = req.uri().path().to_string();
        if let Some(token) = &self.settings.token {
            // Liveness stays open, so probes need no secret; it says only
            // which providers are down.
            let header = req.headers().get(hyper::header::AUTHORIZATION).map(|v| v.as_bytes());
            let open = req.method() == Method::GET && path == "/healthz";
            if !open && !crate::auth::bearer_matches(header, token) {
                return unauthorized();
            }
        }
        match (req.method(), path.as_str()) {
            (&Method::GET, "/healthz") => self.health(),
            (&Method::GET, "/metrics") => respond(StatusCode::OK, "text/plain; version=0.0.4", crate::prometheus::render(reg)),
            (&Method::GET, "/v1/methods") => json(StatusCode::OK, &status::methods(reg)),
            (&Method::GET, "/v1/status") => {
                // Every request got this far with the token (or none is
                // set), or over a certified connection.
                let s = status::status(reg, hub);
                let trusted = self.settings.token.is_some() || self.settings.certified;
                json(StatusCode::OK, &if trusted { s } else { s.redacted() })
            }
            (&Method::POST, p) if p.starts_with("/v1/call/") => {
                let method = match percent_decode(&p["/v1/call/".len()..]) {
                    Some(m) => m,
                    None => return error(&Error::invalid_argument("the method in the path is not valid percent-encoded UTF-8")),
                };
                self.call(&method, req).await.unwrap_or_else(|e| error(&e))
            }
            (_, "/healthz" | "/metrics" | "/v1/methods" | "/v1/status") => {
                respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "use GET\n")
            }
            (_, p) if p.starts_with("/v1/call/") => respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "use POST\n"),
            _ => respond(
                StatusCode::NOT_FOUND,
                "text/plain",
                "not found; try POST /v1/call/<method>, GET /v1/methods, /v1/status, /healthz, /metrics\n",
            ),
        }
    }

    /// `Host` (DNS rebinding) and `Origin` (cross-site pages), both 403.
    #[allow(clippy::result_large_err)]
    fn check_browser(&self, req: &Request<Incoming>) -> Result<(), Response<Body>> {
        let text = |name| req.headers().get(name).map(|v: &hyper::header::HeaderValue| v.to_str().unwrap_or("\u{fffd}"));
        let forbidden = |why: String| Err(respond(StatusCode::FORBIDDEN, "text/plain", format!("{why}\n")));
        let host = text(hyper::header::HOST);
        if !host_allowed(host, &self.settings.allowed_hosts, &self.listen) {
            return forbidden(format!("Host {host:?} is not allowed (see allowed_hosts)"));
        }
        let origin = text(hyper::header::ORIGIN);
        if !origin_allowed(origin, &self.settings.allowed_origins) {
            return forbidden(format!("Origin {origin:?} is not allowed (see allowed_origins)"));
        }
        Ok(())
    }

    fn health(&self) -> Response<Body> {
        let s = status::status(&self.settings.reg, &self.settings.hub);
        let down: Vec<String> = s
            .providers
            .iter()
            .filter(|p| !p.replicas.iter().any(|r| r.state == "ready"))
            .map(|p| format!("{}: {}", p.name, p.replicas.first().map_or("no replicas", |r| r.state.as_str())))
            .collect();
        if down.is_empty() {
            respond(StatusCode::OK, "text/plain", "ok\n")
        } else {
            respond(StatusCode::SERVICE_UNAVAILABLE, "text/plain", format!("not ready: {}\n", down.join(", ")))
        }
    }

    async fn call(&self, method: &str, req: Request<Incoming>) -> Result<Response<Body>, Error> {
        let raw = match body_type(req.headers().get("content-type").map(|v| v.as_bytes())) {
            Some(raw) => raw,
            None => {
                let why = "a call's body must be Content-Type: application/json (application/x-ndjson for input streams, application/octet-stream for raw bytes)\n";
                return Ok(respond(StatusCode::UNSUPPORTED_MEDIA_TYPE, "text/plain", why));
            }
        };
        let timeout = req.headers().get("hubwire-timeout-ms").map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| Error::invalid_argument("hubwire-timeout-ms must be a whole number of milliseconds"))
        });
        let opts = CallOptions { timeout: timeout.transpose()?.map(Duration::from_millis), codec: None };
        let reading = http_body_util::Limited::new(req.into_body(), MAX_BODY).collect();
        let body = match tokio::time::timeout(self.settings.body_timeout, reading).await {
            Ok(b) => b.map_err(|e| Error::new(Code::TooLarge, format!("cannot read the request body (limit {MAX_BODY} bytes): {e}")))?,
            Err(_) => {
                let why = format!("the request body did not arrive within http_body_timeout ({:?})\n", self.settings.body_timeout);
                let mut r = respond(StatusCode::REQUEST_TIMEOUT, "text/plain", why);
                r.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
                return Ok(r);
            }
        }
        .to_bytes();
        let codec = if raw { Codec::Raw } else { Codec::Json };
        let kind = self.settings.reg.route(method).map_or(Kind::Unary, |r| r.info.kind);
        if !raw && !kind.streams_in() {
            check_json(&body)?;
        }
        let input = match (kind.streams_in(), body.is_empty() && !raw) {
            (true, _) => Payload { codec, bytes: Bytes::new() },
            (false, true) => Payload { codec, bytes: Bytes::from_static(b"null") },
            (false, false) => Payload { codec, bytes: body.clone() },
        };
        if kind == Kind::Unary {
            return Ok(answer(self.conn.call_payload(method, input, &opts).await?));
        }
        // Checked before the call starts, so that bad input costs the
        // provider nothing.
        let lines: Vec<Bytes> = match (kind.streams_in(), raw) {
            (false, _) => Vec::new(),
            (true, true) => vec![body],
            (true, false) => ndjson(&body)?,
        };
        let mut call = self.conn.call_any(method, kind, input, &opts).await?;
        if let Some(sink) = call.sink.take() {
            tokio::spawn(async move {
                for bytes in lines {
                    if sink.send(&Payload { codec, bytes }).await.is_err() {
                        return;
                    }
                }
                let _ = sink.end();
            });
        }
        let Some(mut items) = call.items.take() else {
            return Ok(answer(call.response().await?));
        };
        // Wait for the first item, so that an error before any output gets
        // its own HTTP status rather than a 200 with an error line.
        let first = items.next().await?;
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            let mut next = Ok(first);
            loop {
                let end = next.is_err();
                let line = match next {
                    Ok(Some(p)) => to_json(&p).unwrap_or_else(|_| serde_json::to_vec(&p.bytes.to_vec()).unwrap_or_default().into()),
                    Ok(None) => return,
                    Err(e) => serde_json::to_vec(&serde_json::json!({"error": error_value(&e)})).unwrap_or_default().into(),
                };
                let mut l = line.to_vec();
                l.push(b'\n');
                if tx.send(l.into()).await.is_err() || end {
                    return;
                }
                next = items.next().await;
            }
        });
        Ok(Response::builder().status(StatusCode::OK).header("content-type", "application/x-ndjson").body(Body::Lines(rx)).unwrap())
    }
}

/// A RESPONSE payload as the HTTP answer: JSON, or the bytes themselves.
fn answer(out: Payload) -> Response<Body> {
    match to_json(&out) {
        Ok(j) => respond(StatusCode::OK, "application/json", j),
        Err(_) => respond(StatusCode::OK, "application/octet-stream", out.bytes),
    }
}

/// A call's `Content-Type`: `Some(false)` for JSON (and NDJSON),
/// `Some(true)` for raw bytes, `None` for anything else — including none
/// at all and the types a page may send cross-origin without a preflight
/// (`text/plain`, forms).
fn body_type(content_type: Option<&[u8]>) -> Option<bool> {
    let essence = std::str::from_utf8(content_type?).ok()?.split(';').next()?.trim().to_ascii_lowercase();
    match essence.as_str() {
        "application/json" | "application/x-ndjson" => Some(false),
        "application/octet-stream" => Some(true),
        _ => None,
    }
}

/// `%2F` and friends in a path segment, decoded; `None` if malformed.
fn percent_decode(s: &str) -> Option<String> {
    let (mut out, b) = (Vec::with_capacity(s.len()), s.as_bytes());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn check_json(body: &[u8]) -> Result<(), Error> {
    if body.is_empty() {
        return Ok(());
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map(|_| ())
        .map_err(|e| Error::invalid_argument(format!("the request body is not JSON: {e}")))
}

/// One JSON value per non-empty line.
fn ndjson(body: &[u8]) -> Result<Vec<Bytes>, Error> {
    let mut out = Vec::new();
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        check_json(line).map_err(|e| Error::invalid_argument(format!("line {}: {}", i + 1, e.message())))?;
        out.push(Bytes::copy_from_slice(line));
    }
    Ok(out)
}
