//! The commands for people: `hubwire call`, `hubwire list`,
//! `hubwire status`. Each dials the hub like any client (the hub's own
//! methods `hubwire.status` and `hubwire.methods` carry the tables), so
//! what they show is what every client sees.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hubwire::transport::{tcp, tls, unix};
use hubwire::{CallOptions, Codec, Connection, ConnectionOptions, Error, Kind, Payload, Token};

use crate::discovery::{Cluster, CLUSTER_METHOD};
use crate::nats_config::NatsConfig;
use crate::status::{self, MethodRow, Status};
use crate::terminal::printable;

/// Where the hub listens, as given on the command line or found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubAddr {
    /// A Unix socket path.
    Unix(PathBuf),
    /// host:port.
    Tcp(String),
    /// host:port, over TLS.
    Tls(String),
}

impl std::fmt::Display for HubAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HubAddr::Unix(p) => write!(f, "unix:{}", p.display()),
            HubAddr::Tcp(a) => write!(f, "tcp:{a}"),
            HubAddr::Tls(a) => write!(f, "tls:{a}"),
        }
    }
}

/// Parses `unix:PATH`, `tcp:HOST:PORT`, `tls:HOST:PORT`, or a bare path.
pub fn parse_addr(s: &str) -> HubAddr {
    match s.split_once(':') {
        Some(("unix", p)) => HubAddr::Unix(p.into()),
        Some(("tcp", a)) => HubAddr::Tcp(a.into()),
        Some(("tls", a)) => HubAddr::Tls(a.into()),
        _ => HubAddr::Unix(s.into()),
    }
}

/// Finds the hub: `--hub`, then `$HUBWIRE_HUB`, then the config file's
/// `[hub]` unix (or tcp, which is tls when `[hub.tls]` is set) listener.
pub fn find_hub(flag: Option<&str>, config: &Path) -> Result<HubAddr, String> {
    if let Some(a) = flag {
        return Ok(parse_addr(a));
    }
    if let Ok(a) = std::env::var("HUBWIRE_HUB") {
        return Ok(parse_addr(&a));
    }
    if !config.exists() {
        return Err(format!("no hub address: pass --hub unix:PATH (or set HUBWIRE_HUB), or run where {} is", config.display()));
    }
    let cfg = crate::config::load(config).map_err(|e| e.to_string())?;
    match (cfg.hub.unix, cfg.hub.tcp) {
        (Some(p), _) => Ok(HubAddr::Unix(p.value)),
        (None, Some(t)) if cfg.hub.tls.is_some() => Ok(HubAddr::Tls(t.value)),
        (None, Some(t)) => Ok(HubAddr::Tcp(t.value)),
        (None, None) => Err(format!("{} has no unix or tcp listener to reach the hub by; pass --hub", config.display())),
    }
}

/// What a `tls:` address needs: the CA that signed the hub's certificate,
/// and a client certificate with its key when the hub asks for one.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    /// CA certificates (PEM).
    pub ca: Option<PathBuf>,
    /// Client certificate chain (PEM).
    pub cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    pub key: Option<PathBuf>,
}

fn client_tls(f: &TlsFiles) -> Result<Arc<tls::rustls::ClientConfig>, String> {
    let read = |p: &Path, what: &str| std::fs::read(p).map_err(|e| format!("cannot read the {what} {}: {e}", p.display()));
    let Some(ca) = &f.ca else {
        return Err("a tls: hub needs --ca FILE (or HUBWIRE_CA): the CA certificate that signed the hub's".into());
    };
    let ca = read(ca, "CA file")?;
    let identity = match (&f.cert, &f.key) {
        (Some(c), Some(k)) => Some((read(c, "client certificate")?, read(k, "client key")?)),
        (None, None) => None,
        _ => return Err("--cert and --key go together".into()),
    };
    tls::client_config(&ca, identity.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice()))).map_err(|e| e.to_string())
}

/// The token the CLI sends when it dials over TCP: the first line of
/// `--token-file`, else `$HUBWIRE_TOKEN`, else none.
pub fn find_token(flag: Option<&Path>) -> Result<Option<Token>, String> {
    match flag {
        Some(f) => crate::auth::read_token_file(f).map(Some).map_err(|e| format!("--token-file: {e}")),
        None => crate::auth::token_from_env(),
    }
}

/// Dials the hub (`files` is only read for a `tls:` address); over TCP
/// and TLS with `token` in our HELLO (a Unix socket needs none: its peers
/// are checked by the file system).
pub async fn connect(addr: &HubAddr, files: &TlsFiles, token: Option<&Token>) -> Result<Connection, String> {
    let config = ConnectionOptions::new("hubwire-cli");
    let with_token = match token {
        Some(k) => config.clone().token(k.0.clone()),
        None => config.clone(),
    };
    let hint = "is `hubwire hub` running?";
    let r = match addr {
        HubAddr::Unix(p) => match unix::connect(p).await {
            Ok(t) => Connection::dial(t, &config).await,
            Err(e) => return Err(format!("cannot reach the hub at {addr}: {e} ({hint})")),
        },
        HubAddr::Tcp(a) => match tcp::connect(a.as_str()).await {
            Ok(t) => Connection::dial(t, &with_token).await,
            Err(e) => return Err(format!("cannot reach the hub at {addr}: {e} ({hint})")),
        },
        HubAddr::Tls(a) => match tls::connect(a, client_tls(files)?).await {
            Ok(t) => Connection::dial(t, &with_token).await,
            Err(e) => return Err(format!("cannot reach the hub at {addr}: {e} ({hint})")),
        },
    };
    r.map_err(|e| format!("handshake with the hub at {addr} failed: {e}"))
}

/// What `hubwire call` was asked.
pub struct CallArgs {
    /// The method.
    pub method: String,
    /// JSON input (unary, server_stream); stdin lines for input streams.
    pub input: Option<String>,
    /// Raw bytes in and out: from this file (`-` for stdin).
    pub raw: Option<String>,
    /// Deadline.
    pub timeout: Option<Duration>,
}

/// An error for the terminal: the message and detail come from peers, so
/// their control characters are escaped.
fn describe(e: &Error) -> String {
    let detail = e.detail().map(|p| format!(" {}", String::from_utf8_lossy(&p.bytes))).unwrap_or_default();
    printable(&format!("{}: {}{detail}", e.code().name(), e.message())).into_owned()
}

fn pretty(p: &Payload) -> String {
    match p.codec {
        Codec::Json => serde_json::from_slice::<serde_json::Value>(&p.bytes)
            .map(|v| serde_json::to_string(&v).unwrap_or_default())
            .unwrap_or_else(|_| printable(&String::from_utf8_lossy(&p.bytes)).into_owned()),
        Codec::Msgpack => {
            rmp_serde::from_slice::<serde_json::Value>(&p.bytes).map(|v| v.to_string()).unwrap_or_else(|e| format!("<msgpack: {e}>"))
        }
        Codec::Raw => printable(&String::from_utf8_lossy(&p.bytes)).into_owned(),
    }
}

/// The kind of `method`: from the peer's HELLO, else (a hub in a NATS
/// cluster, whose HELLO lists only the remote methods it has used) from
/// what discovery says of it; unary when nobody says.
async fn kind_of(conn: &Connection, method: &str) -> Kind {
    if let Some(m) = conn.peer().method(method) {
        return m.kind;
    }
    let Ok(Some(c)) = hub_cluster(conn).await else { return Kind::Unary };
    let named = c.replicas.iter().find_map(|r| r.methods.get(method).cloned()).unwrap_or_default();
    [Kind::ServerStream, Kind::ClientStream, Kind::Bidi].into_iter().find(|k| k.name() == named).unwrap_or(Kind::Unary)
}

/// Runs `hubwire call`: prints the result (or one line per item) on stdout.
pub async fn call(conn: &Connection, args: CallArgs) -> Result<(), String> {
    let kind = kind_of(conn, &args.method).await;
    let opts = CallOptions { timeout: args.timeout, codec: None };
    // Everything is read before the call starts, so that the call's
    // deadline does not run while stdin is being typed.
    let raw = args.raw.as_deref().map(read_input).transpose()?.map(|b| Payload { codec: Codec::Raw, bytes: b.into() });
    let (input, items) = match (raw, kind.streams_in()) {
        // Raw bytes for an input stream go as its one item.
        (Some(p), true) => (Payload { codec: Codec::Raw, bytes: Bytes::new() }, vec![p]),
        (Some(p), false) => (p, Vec::new()),
        (None, true) => {
            let lines = stdin_lines(args.input.as_deref())?;
            (
                Payload { codec: Codec::Json, bytes: Bytes::new() },
                lines.into_iter().map(|l| Payload { codec: Codec::Json, bytes: l.into() }).collect(),
            )
        }
        (None, false) => {
            let text = args.input.clone().unwrap_or_else(|| "null".into());
            serde_json::from_str::<serde::de::IgnoredAny>(&text).map_err(|e| format!("the input is not JSON: {e}: {text}"))?;
            (Payload { codec: Codec::Json, bytes: Bytes::from(text) }, Vec::new())
        }
    };
    let mut out = std::io::stdout().lock();
    let mut print = |p: &Payload| -> Result<(), String> {
        if p.codec == Codec::Raw && args.raw.is_some() {
            out.write_all(&p.bytes).map_err(|e| e.to_string())
        } else {
            writeln!(out, "{}", pretty(p)).map_err(|e| e.to_string())
        }
    };
    if kind == Kind::Unary {
        let r = conn.call_payload(&args.method, input, &opts).await.map_err(|e| describe(&e))?;
        return print(&r);
    }
    let mut c = conn.call_any(&args.method, kind, input, &opts).await.map_err(|e| describe(&e))?;
    if let Some(sink) = c.sink.take() {
        tokio::spawn(async move {
            for item in items {
                if sink.send(&item).await.is_err() {
                    return;
                }
            }
            let _ = sink.end();
        });
    }
    match c.items.take() {
        Some(mut items) => {
            while let Some(p) = items.next().await.map_err(|e| describe(&e))? {
                print(&p)?;
            }
            Ok(())
        }
        None => print(&c.response().await.map_err(|e| describe(&e))?),
    }
}

fn read_input(path: &str) -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    if path == "-" {
        std::io::stdin().read_to_end(&mut v).map_err(|e| format!("cannot read stdin: {e}"))?;
    } else {
        v = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    }
    Ok(v)
}

/// ItemStream for an input stream: the JSON argument's lines, or stdin's.
fn stdin_lines(arg: Option<&str>) -> Result<Vec<String>, String> {
    let text = match arg {
        Some(a) => a.to_string(),
        None if std::io::stdin().is_terminal() => {
            eprintln!("(reading items from stdin, one JSON value per line; end with Ctrl-D)");
            String::from_utf8(read_input("-")?).map_err(|e| e.to_string())?
        }
        None => String::from_utf8(read_input("-")?).map_err(|e| e.to_string())?,
    };
    let mut items = Vec::new();
    for (i, l) in text.lines().map(str::trim).enumerate().filter(|(_, l)| !l.is_empty()) {
        serde_json::from_str::<serde::de::IgnoredAny>(l).map_err(|e| format!("input line {}: not JSON: {e}", i + 1))?;
        items.push(l.to_string());
    }
    Ok(items)
}

/// The cluster as the hub sees it, when it joined one (its HELLO lists
/// `hubwire.cluster`).
async fn hub_cluster(conn: &Connection) -> Result<Option<Cluster>, String> {
    if conn.peer().method(CLUSTER_METHOD).is_none() {
        return Ok(None);
    }
    conn.call(CLUSTER_METHOD, &()).await.map(Some).map_err(|e| describe(&e))
}

/// Asks the cluster of `--nats` directly, with no hub.
pub async fn discover(nats: &NatsConfig) -> Result<Cluster, String> {
    let client = crate::nats_connect::connect(nats, "hubwire-cli", false).await?;
    crate::discovery::discover(&client, &nats.prefix, nats.discovery_timeout).await
}

/// Dials a replica offering `method` through the cluster of `--nats`,
/// with no hub: `unknown_method` when nobody offers it.
pub async fn dial_nats(nats: &NatsConfig, method: &str) -> Result<Connection, String> {
    let client = crate::nats_connect::connect(nats, "hubwire-cli", false).await?;
    let opts = hubwire::nats::DialOptions { prefix: nats.prefix.clone(), ..Default::default() };
    let target = hubwire::nats::Target::Method(method.to_string());
    match hubwire::transport::nats::dial(&client, &target, &opts).await {
        Ok((link, _)) => Connection::dial(link, &ConnectionOptions::new("hubwire-cli"))
            .await
            .map_err(|e| format!("handshake over NATS failed: {}", describe(&e))),
        Err(e) if e.is_no_responders() => Err(format!("unknown_method: no provider offers {method:?} on NATS (prefix {:?})", nats.prefix)),
        Err(e) => Err(printable(&e.to_string()).into_owned()),
    }
}

/// Runs `hubwire list --nats` (`table`: [`Cluster::methods_table`]) or
/// `hubwire status --nats` ([`Cluster::replicas_table`]): the cluster
/// from discovery, with no hub.
pub async fn show_cluster(nats: &NatsConfig, as_json: bool, table: fn(&Cluster) -> String) -> Result<(), String> {
    let c = discover(nats).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&c).unwrap_or_default());
    } else {
        print!("{}", table(&c));
    }
    Ok(())
}

/// Runs `hubwire list`.
pub async fn list(conn: &Connection, as_json: bool) -> Result<(), String> {
    let rows: Vec<MethodRow> = conn.call(status::METHODS_METHOD, &()).await.map_err(|e| describe(&e))?;
    let cluster = hub_cluster(conn).await?;
    if as_json {
        let v = match &cluster {
            None => serde_json::to_value(&rows),
            Some(c) => serde_json::to_value(serde_json::json!({"methods": rows, "cluster": c})),
        };
        println!("{}", serde_json::to_string_pretty(&v.unwrap_or_default()).unwrap_or_default());
        return Ok(());
    }
    // Every cell came from a peer: shown with control characters escaped.
    let cells: Vec<[String; 4]> =
        rows.iter().map(|r| [&r.name, &r.kind, &r.provider, r.doc.as_deref().unwrap_or("-")].map(|c| printable(c).into_owned())).collect();
    let w = |i: usize, min: usize| cells.iter().map(|c| c[i].chars().count()).max().unwrap_or(0).max(min);
    let (wn, wk, wp) = (w(0, 6), w(1, 4), w(2, 8));
    println!("{:<wn$}  {:<wk$}  {:<wp$}  DESCRIPTION", "METHOD", "KIND", "PROVIDER");
    for [name, kind, provider, doc] in &cells {
        println!("{name:<wn$}  {kind:<wk$}  {provider:<wp$}  {doc}");
    }
    if rows.is_empty() {
        println!("(no methods yet: no provider has finished its handshake)");
    }
    if let Some(c) = cluster {
        println!("\nin the cluster (prefix {:?}):", c.prefix);
        print!("{}", c.methods_table());
    }
    Ok(())
}

/// Runs `hubwire status`.
pub async fn status(conn: &Connection, as_json: bool) -> Result<(), String> {
    let s: Status = conn.call(status::STATUS_METHOD, &()).await.map_err(|e| describe(&e))?;
    let cluster = hub_cluster(conn).await?;
    if as_json {
        let v = match &cluster {
            None => serde_json::to_value(&s),
            Some(c) => serde_json::to_value(serde_json::json!({"hub": s, "cluster": c})),
        };
        println!("{}", serde_json::to_string_pretty(&v.unwrap_or_default()).unwrap_or_default());
    } else {
        print!("{}", status::table(&s));
        if let Some(c) = cluster {
            println!("\nin the cluster (prefix {:?}):", c.prefix);
            print!("{}", c.replicas_table());
        }
    }
    Ok(())
}
