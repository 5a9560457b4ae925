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

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hubwire::{CallOptions, Code, Codec, Connection, Error, Kind, Payload, Token};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::mpsc;

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

struct Gateway {
    conn: Connection,
    reg: Arc<Registry>,
    hub: String,
    token: Option<Token>,
}

/// Serves HTTP on `listener` until the task is aborted; with `token`, only
/// to requests that carry it as a bearer token.
pub async fn serve(listener: tokio::net::TcpListener, conn: Connection, reg: Arc<Registry>, hub: String, token: Option<Token>) {
    let gw = Arc::new(Gateway { conn, reg, hub, token });
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("HTTP accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let gw = gw.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let gw = gw.clone();
                async move { Ok::<_, Infallible>(gw.handle(req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                tracing::debug!("HTTP connection ended: {e}");
            }
        });
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
    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().to_string();
        if let Some(token) = &self.token {
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
            (&Method::GET, "/metrics") => respond(StatusCode::OK, "text/plain; version=0.0.4", crate::prometheus::render(&self.reg)),
            (&Method::GET, "/v1/methods") => json(StatusCode::OK, &status::methods(&self.reg)),
            (&Method::GET, "/v1/status") => {
                // Every request got this far with the token, or none is set.
                let s = status::status(&self.reg, &self.hub);
                json(StatusCode::OK, &if self.token.is_some() { s } else { s.redacted() })
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

    fn health(&self) -> Response<Body> {
        let s = status::status(&self.reg, &self.hub);
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
        let raw = req.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/octet-stream"));
        let timeout = req.headers().get("hubwire-timeout-ms").map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| Error::invalid_argument("hubwire-timeout-ms must be a whole number of milliseconds"))
        });
        let opts = CallOptions { timeout: timeout.transpose()?.map(Duration::from_millis), codec: None };
        let body = http_body_util::Limited::new(req.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| Error::new(Code::TooLarge, format!("cannot read the request body (limit {MAX_BODY} bytes): {e}")))?
            .to_bytes();
        let codec = if raw { Codec::Raw } else { Codec::Json };
        let kind = self.reg.route(method).map_or(Kind::Unary, |r| r.info.kind);
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
