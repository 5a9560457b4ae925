//! The Rust testee of the conformance suite (`conformance/README.md`): it
//! reads control commands as JSON lines, serves the conformance service or
//! makes the calls it is told to, and reports events as JSON lines. The
//! runner starts it as a process, or calls [`run`] in-process over the
//! memory transport.

mod calls;
mod service;

use std::sync::{Arc, Mutex};

use hubwire::transport::{child, tcp, unix, DynTransport};
use hubwire::{Connection, ConnectionOptions, Service};
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Where events go: one writer task, so lines never interleave.
#[derive(Clone)]
pub(crate) struct Events(mpsc::UnboundedSender<Value>);

impl Events {
    pub(crate) fn send(&self, v: Value) {
        let _ = self.0.send(v);
    }
}

/// Runs the control loop until `input` ends. `memory` is the testee's end
/// of an in-memory transport, for the runner's in-process mode.
pub async fn run<R, W>(input: R, mut output: W, memory: Option<DynTransport>) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let events = Events(tx);
    let writer = tokio::spawn(async move {
        while let Some(v) = rx.recv().await {
            let mut line = v.to_string();
            line.push('\n');
            if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
                return;
            }
        }
    });
    let memory = Mutex::new(memory);
    let mut conn: Option<Connection> = None;
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await? {
        let Ok(cmd) = serde_json::from_str::<Value>(&line) else {
            events.send(json!({"event": "error", "code": "invalid_argument", "message": format!("not JSON: {line}")}));
            continue;
        };
        let op = cmd["op"].as_str().unwrap_or("");
        let transport = cmd["transport"].as_str().unwrap_or("");
        let address = cmd["address"].as_str().unwrap_or("").to_string();
        match op {
            "hello" => events.send(json!({
                "event": "hello", "lang": "rust", "version": env!("CARGO_PKG_VERSION"),
                "roles": ["client", "provider"], "transports": ["memory", "child", "unix", "tcp", "nats"],
            })),
            "serve" => match serve(transport, &address, token(&cmd), &memory, &events).await {
                Ok(addr) => events.send(json!({"event": "ready", "address": addr})),
                Err(e) => events.send(json!({"event": "error", "code": "unavailable", "message": e})),
            },
            "connect" => match connect(transport, &address, token(&cmd), &memory).await {
                Ok(c) => {
                    conn = Some(c);
                    events.send(json!({"event": "connected"}));
                }
                Err(e) => events.send(json!({"event": "error", "code": e.code().name(), "message": e.message()})),
            },
            "ping" => match &conn {
                Some(c) => {
                    let (c, events, id) = (c.clone(), events.clone(), cmd["id"].clone());
                    tokio::spawn(async move {
                        let code = match c.ping().await {
                            Ok(_) => "ok".to_string(),
                            Err(e) => e.code().name().to_string(),
                        };
                        events.send(json!({"event": "result", "id": id, "code": code}));
                    });
                }
                None => events.send(json!({"event": "result", "id": cmd["id"], "code": "unavailable", "message": "not connected"})),
            },
            "call" => match &conn {
                Some(c) => {
                    let (c, events) = (c.clone(), events.clone());
                    tokio::spawn(async move { events.send(calls::call(&c, &cmd).await) });
                }
                None => events.send(json!({"event": "result", "id": cmd["id"], "code": "unavailable", "message": "not connected"})),
            },
            other => events.send(json!({"event": "error", "code": "invalid_argument", "message": format!("unknown op {other:?}")})),
        }
    }
    drop(conn);
    drop(events);
    let _ = writer.await;
    Ok(())
}

fn config() -> ConnectionOptions {
    ConnectionOptions::new("conformance-testee")
}

/// The `token` of a `serve` (required of dialers) or `connect` (sent in
/// our HELLO) command, if it has one.
fn token(cmd: &Value) -> Option<String> {
    cmd["token"].as_str().map(str::to_string)
}

fn take(memory: &Mutex<Option<DynTransport>>) -> Result<DynTransport, String> {
    memory.lock().unwrap().take().ok_or_else(|| "no memory transport (only in-process)".to_string())
}

fn parent() -> Result<DynTransport, String> {
    match child::from_env() {
        Ok(Some(t)) => Ok(Arc::new(t)),
        Ok(None) => Err("HUBWIRE_FD is not set".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Offers the conformance service; returns the address it serves on.
async fn serve(
    transport: &str,
    address: &str,
    token: Option<String>,
    memory: &Mutex<Option<DynTransport>>,
    events: &Events,
) -> Result<String, String> {
    let config = match token {
        Some(t) => config().require_token(t),
        None => config(),
    };
    let provider = || service::provider(events.clone());
    match transport {
        "unix" => {
            let l = unix::UnixListener::bind(address).map_err(|e| e.to_string())?;
            tokio::spawn(provider().serve(l, config));
            Ok(address.to_string())
        }
        "tcp" => {
            let l = tcp::TcpListener::bind(address).await.map_err(|e| e.to_string())?;
            let addr = l.local_addr().map_err(|e| e.to_string())?.to_string();
            tokio::spawn(provider().serve(l, config));
            Ok(addr)
        }
        "nats" => {
            // A replica of this provider under the case's prefix; the
            // runner dials it by its id.
            let (url, prefix) = nats_address(address)?;
            let client = hubwire::nats::connect(url).await.map_err(|e| e.to_string())?;
            let offer =
                hubwire::nats::Offer { prefix: prefix.into(), ..hubwire::nats::Offer::new(config.name.clone(), provider().methods()) };
            let l = hubwire::nats::NatsListener::bind(client, offer).await.map_err(|e| e.to_string())?;
            let id = l.replica().to_string();
            tokio::spawn(provider().serve(l, config));
            Ok(id)
        }
        "child" | "memory" => {
            let t = if transport == "child" { parent()? } else { take(memory)? };
            let config = config.service(provider());
            // The handshake needs the runner, which waits for `ready`: answer
            // first, then accept in the background.
            tokio::spawn(async move {
                if let Ok(c) = Connection::start(t, &config, false).await {
                    c.closed().await;
                }
            });
            Ok(transport.to_string())
        }
        other => Err(format!("unsupported transport {other:?}")),
    }
}

async fn connect(
    transport: &str,
    address: &str,
    token: Option<String>,
    memory: &Mutex<Option<DynTransport>>,
) -> Result<Connection, hubwire::Error> {
    let unavailable = |e: String| hubwire::Error::unavailable(e);
    let config = match token {
        Some(t) => config().token(t),
        None => config(),
    };
    match transport {
        "unix" => Connection::dial(unix::connect(address).await.map_err(|e| unavailable(e.to_string()))?, &config).await,
        "tcp" => Connection::dial(tcp::connect(address).await.map_err(|e| unavailable(e.to_string()))?, &config).await,
        // A child is the acceptor of its parent's socketpair (§10), even
        // when it is the one making calls.
        "child" => Connection::start(parent().map_err(unavailable)?, &config, false).await,
        "memory" => Connection::start(take(memory).map_err(unavailable)?, &config, true).await,
        "nats" => {
            let (url, prefix) = nats_address(address).map_err(unavailable)?;
            let client = hubwire::nats::connect(url).await?;
            let opts = hubwire::nats::DialOptions { prefix: prefix.into(), ..Default::default() };
            let target = hubwire::nats::Target::Provider(NATS_RUNNER.into());
            hubwire::nats::dial(&client, &target, &config, &opts).await.map(|(c, _)| c)
        }
        other => Err(unavailable(format!("unsupported transport {other:?}"))),
    }
}

/// The provider name the runner listens under on NATS (client role).
pub const NATS_RUNNER: &str = "runner";

/// A `nats` address of the conformance protocol, `nats://host:port/<prefix>`:
/// the server's URL and the subject prefix of the case.
pub fn nats_address(address: &str) -> Result<(&str, &str), String> {
    let rest = address.strip_prefix("nats://").ok_or_else(|| format!("nats address {address:?} does not start with nats://"))?;
    let slash = rest.find('/').ok_or_else(|| format!("nats address {address:?} has no /<prefix>"))?;
    Ok((&address[..7 + slash], &rest[slash + 1..]))
}
