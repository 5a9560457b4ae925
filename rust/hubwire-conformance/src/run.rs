//! Runs one case on one transport: start the testee, connect, handshake,
//! then the steps in order. The first step that does not hold fails the
//! case with a message saying which step, what was expected and what came.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use hubwire::transport::{self, tcp, unix, DynTransport};
use serde_json::{json, Map, Value};

use crate::case::{Case, Handshake, Role};
use crate::pattern::{self, Vars};
use crate::peer::{Peer, Read};
use crate::testee::{Running, Testee};

/// The URL of the run's `nats-server`, when the `nats` transport runs.
pub static NATS_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// A subject prefix of its own for each case on NATS, so cases never meet.
fn nats_prefix() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("conf{}x{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// The runtime the runner's NATS clients and listeners run on: a thread
/// of its own. A case that keeps the main runtime's workers busy (a
/// 16 MiB payload checked in a debug build) would otherwise hold back
/// the other cases' HEARTBEATs and the reading of their messages off the
/// socket, and a peer that hears nothing on a link for 600 ms breaks it
/// (spec §13.5): a failure of a case that did nothing wrong.
fn nats_runtime() -> &'static tokio::runtime::Handle {
    static RT: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("the NATS runtime");
        let handle = rt.handle().clone();
        std::thread::Builder::new()
            .name("conformance-nats".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .expect("the NATS runtime's thread");
        handle
    })
}

/// Runs `f` on [`nats_runtime`], where whatever it spawns stays.
async fn on_nats_runtime<T: Send + 'static>(f: impl std::future::Future<Output = T> + Send + 'static) -> Result<T, String> {
    nats_runtime().spawn(f).await.map_err(|e| format!("the NATS runtime: {e}"))
}

/// A `nats://host:port/<prefix>` address for a new case, and a client
/// (its connection served on [`nats_runtime`]).
async fn nats_case() -> Result<(String, async_nats::Client), String> {
    let url = NATS_URL.get().ok_or("no nats-server in this run")?;
    let client = on_nats_runtime(hubwire::nats::connect(url)).await?.map_err(|e| e.to_string())?;
    Ok((format!("{url}/{}", nats_prefix()), client))
}

struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("hwconf-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Run<'a> {
    case: &'a Case,
    transport: &'a str,
    peer: Peer,
    testee: Running,
    vars: Vars,
    /// Where the testee listens (provider role, unix/tcp).
    address: Option<String>,
    wait: Duration,
    /// The testee's HELLO said `direct` (spec §14.1).
    testee_direct: bool,
    /// The testee's HELLO lists `"shm"` (spec §11.4).
    testee_lists_shm: bool,
}

/// Runs `case` against `testee` on `transport`. `vars` holds what the
/// testee said of itself (`$lang`, `$version`).
pub async fn run_case(testee: &Testee, case: &Case, transport: &str, wait: Duration, vars: Vars) -> Result<(), String> {
    let dir = TempDir::new();
    let (mut running, ours) = testee.start(transport).await?;
    let connected = tokio::time::timeout(wait * 2, connect(&mut running, case, transport, ours, &dir, wait)).await;
    let (peer, address) = match connected {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return Err(with_logs(e, &running)),
        Err(_) => return Err(with_logs("timed out setting up the connection".into(), &running)),
    };
    let mut run = Run { case, transport, peer, testee: running, vars, address, wait, testee_direct: false, testee_lists_shm: false };
    let result = run.all().await;
    result.map_err(|e| with_logs(e, &run.testee))
}

fn with_logs(e: String, r: &Running) -> String {
    let logs = r.stderr.lock().unwrap();
    if logs.is_empty() {
        e
    } else {
        format!("{e}\n      testee output (last lines):\n        {}", logs.join("\n        "))
    }
}

async fn first_event(r: &mut Running, wait: Duration) -> Result<Value, String> {
    let mut vars = Vars::new();
    r.expect(&Map::new(), &mut vars, wait).await
}

/// A control command with the case's `testee:` settings added.
fn command(case: &Case, mut cmd: Value) -> Value {
    if let Some(t) = &case.testee.token {
        cmd["token"] = json!(t);
    }
    cmd
}

/// Connects the runner to the testee the way the role and transport say.
async fn connect(
    r: &mut Running,
    case: &Case,
    transport: &str,
    ours: Option<DynTransport>,
    dir: &TempDir,
    wait: Duration,
) -> Result<(Peer, Option<String>), String> {
    let io = |e: std::io::Error| e.to_string();
    match (case.role, transport) {
        (Role::Provider, "nats") => {
            // The testee answers with its replica id; we dial exactly it.
            let (want, client) = nats_case().await?;
            r.send(&command(case, json!({"op": "serve", "transport": "nats", "address": want}))).await?;
            let ev = first_event(r, wait).await?;
            let id = match ev["event"] == "ready" {
                true => ev["address"].as_str().unwrap_or_default().to_string(),
                false => return Err(format!("serve nats: the testee answered {ev}")),
            };
            let (_, prefix) = hubwire_testee::nats_address(&want)?;
            let opts = hubwire::nats::DialOptions { prefix: prefix.into(), ..Default::default() };
            let (link, _) =
                hubwire::transport::nats::dial(&client, &hubwire::nats::Target::Replica(id), &opts).await.map_err(|e| e.to_string())?;
            Ok((Peer::new(Arc::new(link)), None))
        }
        (Role::Client, "nats") => {
            let (address, client) = nats_case().await?;
            let (_, prefix) = hubwire_testee::nats_address(&address)?;
            let offer =
                hubwire::nats::Offer { prefix: prefix.into(), ..hubwire::nats::Offer::new(hubwire_testee::NATS_RUNNER, Vec::new()) };
            let l = on_nats_runtime(hubwire::nats::NatsListener::bind(client, offer)).await?.map_err(|e| e.to_string())?;
            r.send(&command(case, json!({"op": "connect", "transport": "nats", "address": address}))).await?;
            Ok((Peer::new(transport::accept(&l).await.map_err(io)?), None))
        }
        (Role::Provider, _) => {
            let want = match transport {
                "unix" => dir.0.join("testee.sock").display().to_string(),
                "tcp" => "127.0.0.1:0".to_string(),
                _ => String::new(),
            };
            r.send(&command(case, json!({"op": "serve", "transport": transport, "address": want}))).await?;
            let ev = first_event(r, wait).await?;
            if ev["event"] != "ready" {
                return Err(format!("serve {transport}: the testee answered {ev}"));
            }
            let addr = ev["address"].as_str().unwrap_or(&want).to_string();
            let t: DynTransport = match transport {
                "unix" => Arc::new(unix::connect(&addr).await.map_err(io)?),
                "tcp" => Arc::new(tcp::connect(addr.as_str()).await.map_err(io)?),
                _ => ours.ok_or("no connection to the testee")?,
            };
            let keep = matches!(transport, "unix" | "tcp").then_some(addr);
            Ok((Peer::new(t), keep))
        }
        (Role::Client, _) => {
            let t: DynTransport = match transport {
                "unix" => {
                    let path = dir.0.join("runner.sock");
                    let l = unix::UnixListener::bind(&path).map_err(io)?;
                    r.send(&command(case, json!({"op": "connect", "transport": "unix", "address": path.display().to_string()}))).await?;
                    transport::accept(&l).await.map_err(io)?
                }
                "tcp" => {
                    let l = tcp::TcpListener::bind("127.0.0.1:0").await.map_err(io)?;
                    let addr = l.local_addr().map_err(io)?.to_string();
                    r.send(&command(case, json!({"op": "connect", "transport": "tcp", "address": addr}))).await?;
                    transport::accept(&l).await.map_err(io)?
                }
                _ => {
                    r.send(&command(case, json!({"op": "connect", "transport": transport}))).await?;
                    ours.ok_or("no connection to the testee")?
                }
            };
            Ok((Peer::new(t), None))
        }
    }
}

fn obj(v: &Value, what: &str) -> Result<Map<String, Value>, String> {
    v.as_object().cloned().ok_or_else(|| format!("{what} must be a map"))
}

impl Run<'_> {
    async fn all(&mut self) -> Result<(), String> {
        if self.case.handshake == Handshake::Auto {
            self.send_frame(&json!({"type": "hello"}), 1).await.map_err(|e| format!("handshake: {e}"))?;
            self.expect_one(&obj(&json!({"type": "hello"}), "")?).await.map_err(|e| format!("handshake: {e}"))?;
            if self.case.role == Role::Client {
                let ev = first_event(&mut self.testee, self.wait).await.map_err(|e| format!("handshake: {e}"))?;
                if ev["event"] != "connected" {
                    return Err(format!("handshake: the testee reported {ev}"));
                }
            }
        }
        if self.case.requires.iter().any(|r| !self.testee_has(r)) {
            // Not a failure: the spec lets a runtime go without it.
            return Ok(());
        }
        for (i, step) in self.case.steps.iter().enumerate() {
            let (kind, arg) = step.as_object().and_then(|m| m.iter().next()).expect("validated at load");
            self.repeated(kind, arg).await.map_err(|e| format!("step {} ({kind}): {e}", i + 1))?;
        }
        Ok(())
    }

    /// Whether the testee's HELLO showed capability `r` (`case::REQUIREMENTS`).
    fn testee_has(&self, r: &str) -> bool {
        match r {
            "shm" => self.testee_lists_shm,
            "direct" => self.testee_direct,
            _ => false,
        }
    }

    /// A step with `repeat: N` runs N times with `$i` substituted; a send
    /// goes out as one write, an `unordered` expect takes the N frames in
    /// any order.
    async fn repeated(&mut self, kind: &str, arg: &Value) -> Result<(), String> {
        let mut arg = arg.clone();
        let (repeat, unordered) = match arg.as_object_mut() {
            Some(m) => (m.remove("repeat").and_then(|v| v.as_u64()), m.remove("unordered").and_then(|v| v.as_bool()).unwrap_or(false)),
            None => (None, false),
        };
        match (kind, repeat) {
            ("send", _) => self.send_frame(&arg, repeat.unwrap_or(1)).await,
            ("expect", Some(n)) if unordered => {
                let patterns = (0..n).map(|i| obj(&pattern::subst_i(&arg, i), "expect")).collect::<Result<Vec<_>, _>>()?;
                self.expect_unordered(patterns).await
            }
            (_, Some(n)) => {
                for i in 0..n {
                    self.step(kind, &pattern::subst_i(&arg, i)).await.map_err(|e| format!("repetition {i}: {e}"))?;
                }
                Ok(())
            }
            (_, None) => self.step(kind, &arg).await,
        }
    }

    async fn step(&mut self, kind: &str, arg: &Value) -> Result<(), String> {
        match kind {
            "send" => self.send_frame(arg, 1).await,
            "send_hex" => {
                let b = hex::decode(arg.as_str().unwrap_or("")).map_err(|e| format!("bad hex: {e}"))?;
                self.peer.send(&b).await
            }
            "send_many" => self.send_many(arg).await,
            "expect" => {
                let m = obj(arg, "expect")?;
                if let Some(values) = m.get("values").and_then(Value::as_array) {
                    for v in values {
                        let mut one = m.clone();
                        one.insert("value".into(), v.clone());
                        self.expect_one(&one).await?;
                    }
                    return Ok(());
                }
                self.expect_one(&m).await
            }
            "expect_none" => {
                let ms = arg["ms"].as_u64().unwrap_or(200);
                let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
                loop {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    match self.peer.read(left).await? {
                        Read::Timeout => return Ok(()),
                        Read::Closed => return Err(format!("the testee closed the connection{}", self.peer.closed_how())),
                        Read::Frame(f) if self.ignored(&f, None).await? => continue,
                        Read::Frame(f) => return Err(format!("expected no frame for {ms} ms, got {}", pattern::show(&f))),
                    }
                }
            }
            "expect_closed" => loop {
                match self.peer.read(self.wait).await? {
                    Read::Closed if arg["promptly"].as_bool() == Some(true) && self.peer.stalled() => {
                        return Err(format!(
                            "the testee stopped reading for {:?} without closing the connection (spec §7.3: discard input \
                             for a bounded time, then close)",
                            crate::peer::SEND_STALL
                        ))
                    }
                    Read::Closed => return Ok(()),
                    Read::Timeout => return Err(format!("the testee did not close the connection within {:?}", self.wait)),
                    Read::Frame(f) if self.ignored(&f, None).await? => continue,
                    Read::Frame(f) => return Err(format!("expected the connection to close, got {}", pattern::show(&f))),
                }
            },
            "control" => {
                let cmd = pattern::resolve(arg, &self.vars)?;
                self.testee.send(&cmd).await
            }
            "expect_event" => {
                let m = obj(&pattern::resolve_partial(arg, &self.vars), "expect_event")?;
                self.testee.expect(&m, &mut self.vars, self.wait).await.map(|_| ())
            }
            "sleep" => {
                tokio::time::sleep(Duration::from_millis(arg.as_u64().unwrap_or(0))).await;
                Ok(())
            }
            "close" => {
                match arg.get("socket_only").and_then(Value::as_bool) {
                    Some(true) => self.peer.close_socket(),
                    _ => self.peer.close(),
                }
                Ok(())
            }
            "end_stream" => {
                self.peer.end_stream();
                Ok(())
            }
            "check_alive" => self.check_alive().await,
            "hand_over" => self.hand_over().await,
            "offer_upgrade" => crate::upgrade::offer(&mut self.peer, arg, self.testee_lists_shm, self.wait).await,
            "accept_upgrade" => crate::upgrade::accept(&mut self.peer, self.testee_lists_shm, self.wait).await,
            "expect_shm" => match !self.testee_lists_shm || self.peer.on_shm() {
                true => Ok(()),
                false => Err("the connection is not on shared memory both ways".into()),
            },
            "expect_all" => {
                let list = arg.as_array().ok_or("expect_all needs a list of patterns")?;
                let patterns = list.iter().map(|p| obj(p, "expect_all")).collect::<Result<Vec<_>, _>>()?;
                self.expect_unordered(patterns).await
            }
            other => Err(format!("unknown step {other}")),
        }
    }

    /// Sends a list of frames as one write: how a case puts frames for
    /// different calls (a CANCEL and a REQUEST reusing its id) in front of
    /// the testee at once.
    async fn send_many(&mut self, list: &Value) -> Result<(), String> {
        let frames = list.as_array().ok_or("send_many needs a list of frames")?;
        let mut out = BytesMut::new();
        for f in frames {
            out.extend_from_slice(&pattern::build(&Value::Object(obj(f, "send_many")?), &self.vars)?);
        }
        self.peer.send(&out).await
    }

    /// Sends a frame `repeat` times, `$i` substituted, as one write.
    async fn send_frame(&mut self, spec: &Value, repeat: u64) -> Result<(), String> {
        let mut m = obj(spec, "send")?;
        if m.get("type").and_then(Value::as_str) == Some("hello") {
            let mut merged = self.case.hello.clone();
            merged.extend(m);
            m = merged;
        }
        let spec = Value::Object(m);
        let mut out = BytesMut::new();
        for i in 0..repeat {
            out.extend_from_slice(&pattern::build(&pattern::subst_i(&spec, i), &self.vars)?);
        }
        self.peer.send(&out).await
    }

    /// Skips (and answers) frames of ignored types; true if `f` was skipped.
    async fn ignored(&mut self, f: &hubwire_frame::Frame, wanted: Option<&str>) -> Result<bool, String> {
        let ty = pattern::type_name(f);
        if wanted == Some(ty) || !self.case.ignore.iter().any(|t| t == ty) {
            return Ok(false);
        }
        if let hubwire_frame::Frame::Ping { data } = f {
            self.peer.send(&hubwire_frame::Frame::Pong { data: *data }.to_bytes()).await?;
        }
        Ok(true)
    }

    async fn expect_one(&mut self, m: &Map<String, Value>) -> Result<(), String> {
        let wanted = m.get("type").and_then(Value::as_str);
        loop {
            match self.peer.read(self.wait).await? {
                Read::Timeout => return Err(format!("no frame matching {} within {:?}", Value::Object(m.clone()), self.wait)),
                Read::Closed => {
                    return Err(format!(
                        "the testee closed the connection{}; expected {}",
                        self.peer.closed_how(),
                        Value::Object(m.clone())
                    ))
                }
                Read::Frame(f) => {
                    if self.ignored(&f, wanted).await? {
                        continue;
                    }
                    if let hubwire_frame::Frame::Hello(h) = &f {
                        self.testee_direct = h.direct.is_some();
                        self.testee_lists_shm = h.upgrade.iter().any(|m| m == "shm");
                    }
                    return pattern::check(m, &f, &mut self.vars)
                        .map_err(|e| format!("{e}\n      expected {}\n      got      {}", Value::Object(m.clone()), pattern::show(&f)));
                }
            }
        }
    }

    /// Takes frames until each pattern has matched one of them, in any
    /// order.
    async fn expect_unordered(&mut self, mut left: Vec<Map<String, Value>>) -> Result<(), String> {
        while !left.is_empty() {
            let f = match self.peer.read(self.wait).await? {
                Read::Timeout => {
                    return Err(format!("{} expected frames did not arrive, e.g. {}", left.len(), Value::Object(left[0].clone())))
                }
                Read::Closed => {
                    let how = self.peer.closed_how();
                    return Err(format!("the testee closed the connection{how} with {} expected frames to come", left.len()));
                }
                Read::Frame(f) => f,
            };
            if self.ignored(&f, left[0].get("type").and_then(Value::as_str)).await? {
                continue;
            }
            let hit = left.iter().position(|p| {
                let mut trial = self.vars.clone();
                let ok = pattern::check(p, &f, &mut trial).is_ok();
                if ok {
                    self.vars = trial;
                }
                ok
            });
            match hit {
                Some(i) => {
                    left.remove(i);
                }
                None => return Err(format!("{} matches none of the {} frames still expected", pattern::show(&f), left.len())),
            }
        }
        Ok(())
    }

    /// Provider role, a testee whose HELLO said `direct` (spec §14.4): hands
    /// it one end of a socketpair with ACCEPT and checks an echo over the
    /// other as a new connection. A testee without the direct path passes:
    /// no peer sends it ACCEPT.
    async fn hand_over(&mut self) -> Result<(), String> {
        if !self.testee_direct {
            return Ok(());
        }
        let (theirs, ours) = std::os::unix::net::UnixStream::pair().map_err(|e| e.to_string())?;
        let accept = hubwire_frame::Frame::Accept(hubwire_frame::AcceptBody { client: "conformance-runner".into() });
        self.peer.send_with_fd(&accept.to_bytes(), std::os::fd::AsFd::as_fd(&theirs)).await?;
        drop(theirs);
        let probe = async {
            ours.set_nonblocking(true).map_err(|e| e.to_string())?;
            let t = hubwire::transport::fd::FdTransport::new(ours, "direct".into()).map_err(|e| e.to_string())?;
            let conn =
                hubwire::Connection::dial(t, &hubwire::ConnectionOptions::new("conformance-direct")).await.map_err(|e| e.to_string())?;
            echoes(&conn, b"direct").await
        };
        tokio::time::timeout(self.wait, probe)
            .await
            .map_err(|_| "the handed-over connection got no answer".to_string())?
            .map_err(|e| format!("the handed-over connection is not served: {e}"))
    }

    /// Provider role on unix/tcp: another connection is still served.
    async fn check_alive(&mut self) -> Result<(), String> {
        let Some(addr) = &self.address else { return Ok(()) };
        let config = hubwire::ConnectionOptions::new("conformance-check");
        let probe = async {
            let conn = match self.transport {
                "unix" => hubwire::Connection::dial(unix::connect(addr).await.map_err(|e| e.to_string())?, &config).await,
                _ => hubwire::Connection::dial(tcp::connect(addr.as_str()).await.map_err(|e| e.to_string())?, &config).await,
            }
            .map_err(|e| e.to_string())?;
            echoes(&conn, b"alive").await
        };
        tokio::time::timeout(self.wait, probe)
            .await
            .map_err(|_| "a new connection to the testee got no answer".to_string())?
            .map_err(|e| format!("the testee stopped serving other connections: {e}"))
    }
}

/// `echo` of `word` over `conn` answers `word`: the probes of `hand_over`
/// and `check_alive`.
async fn echoes(conn: &hubwire::Connection, word: &'static [u8]) -> Result<(), String> {
    let got = conn.call_raw("echo", bytes::Bytes::from_static(word)).await.map_err(|e| e.to_string())?;
    match got.as_ref() == word {
        true => Ok(()),
        false => Err(format!("echo of {word:?} answered {got:?}")),
    }
}
