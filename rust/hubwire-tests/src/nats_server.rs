//! Real `nats-server` processes for the tests: one server, or a cluster of
//! several on loopback ports, each killed (SIGKILL) when dropped.
//!
//! The binary is Debian's `nats-server` package, which `make deps`
//! installs; `NATS_SERVER` names another binary. Everything here is
//! synchronous (plain processes and sockets) with a deadline on every
//! wait, so it works from a test of any kind.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::TempDir;

/// How long a server may take to accept connections (and, in a cluster,
/// to connect its routes) before the test fails.
const START_DEADLINE: Duration = Duration::from_secs(15);
/// Starts tried before giving up on a server that exits at once: its port,
/// free when picked, can be taken by another test's socket before it binds.
const START_ATTEMPTS: usize = 4;

/// Where `nats-server` is: `$NATS_SERVER`, else on `PATH`, else where the
/// Debian package puts it (`/usr/sbin`, not on every user's `PATH`).
pub fn binary() -> Result<PathBuf, String> {
    locate("NATS_SERVER", "nats-server", &["/usr/sbin/nats-server".into(), "/usr/bin/nats-server".into()])
        .ok_or_else(|| "nats-server not found (on PATH, /usr/sbin or $NATS_SERVER): run `make deps` to install it".to_string())
}

/// Where a tool the NATS tests run is: the file `$var` names, else `name`
/// on `PATH`, else the first of `also` that exists.
pub fn locate(var: &str, name: &str, also: &[PathBuf]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()));
    on_path.or_else(|| also.iter().find(|p| p.is_file()).cloned())
}

/// Whether `nats-server` is installed (tests that need one say so and
/// fail when it is not; the bench leaves its NATS rows out).
pub fn available() -> bool {
    binary().is_ok()
}

/// A free TCP port on 127.0.0.1 (bound, then released for the server).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Options for the servers started.
#[derive(Clone, Debug, Default)]
pub struct ServerOptions {
    /// The server's `max_payload` (None: the server's default, 1 MiB).
    pub max_payload: Option<usize>,
}

/// One running `nats-server`.
pub struct NatsServer {
    child: Option<Child>,
    /// The client port on 127.0.0.1.
    pub port: u16,
    /// The monitoring (HTTP) port on 127.0.0.1.
    pub http_port: u16,
    /// The route (cluster) port, when part of a cluster.
    pub cluster_port: Option<u16>,
    dir: TempDir,
}

impl NatsServer {
    /// Starts one server on a free loopback port and waits until it accepts
    /// clients. Panics with a message naming `make deps` when the binary is
    /// missing.
    pub fn start() -> NatsServer {
        NatsServer::start_with(&ServerOptions::default())
    }

    /// Like [`NatsServer::start`], with options.
    pub fn start_with(opts: &ServerOptions) -> NatsServer {
        let mut why = String::new();
        for _ in 0..START_ATTEMPTS {
            let mut server = NatsServer::spawn(opts, None);
            match server.wait_ready(0) {
                Ok(()) => return server,
                Err(e) => why = e,
            }
        }
        panic!("{why} (tried {START_ATTEMPTS} times)")
    }

    /// Spawns a server; `cluster` is (its route port, the route ports of the
    /// others).
    fn spawn(opts: &ServerOptions, cluster: Option<(u16, &[u16])>) -> NatsServer {
        let bin = binary().unwrap_or_else(|e| panic!("{e}"));
        let dir = TempDir::new("nats");
        let (port, http_port) = (free_port(), free_port());
        let mut conf = format!("listen: 127.0.0.1:{port}\nhttp: 127.0.0.1:{http_port}\n");
        if let Some(n) = opts.max_payload {
            conf.push_str(&format!("max_payload: {n}\n"));
        }
        if let Some((own, routes)) = cluster {
            let routes: Vec<String> = routes.iter().map(|p| format!("nats-route://127.0.0.1:{p}")).collect();
            conf.push_str(&format!("cluster {{\n  name: hubwire-test\n  listen: 127.0.0.1:{own}\n  routes: [{}]\n}}\n", routes.join(", ")));
        }
        let path = dir.0.join("nats.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.0.join("stderr")).map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e} (run `make deps` to install nats-server)", bin.display()));
        NatsServer { child: Some(child), port, http_port, cluster_port: cluster.map(|c| c.0), dir }
    }

    /// The URL clients connect to.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Waits until the server sends its `INFO` to a client and, with
    /// `routes` > 0, until it has that many routes up. Fails at once if
    /// the server exited (most often: its port was taken meanwhile), with
    /// what it printed; panics if it is still not ready at the deadline.
    fn wait_ready(&mut self, routes: usize) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let up = info_line(self.addr()).is_some() && (routes == 0 || self.routes() >= routes);
            if up {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let said = std::fs::read_to_string(self.dir.0.join("stderr")).unwrap_or_default();
                let last = said.lines().last().unwrap_or("").to_string();
                return Err(format!("nats-server on port {} exited ({status}) before it was ready: {last}", self.port));
            }
            if Instant::now() > deadline {
                panic!("nats-server on port {} not ready within {START_DEADLINE:?}", self.port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How many routes (cluster peers) the server has now, from its
    /// monitoring endpoint `/routez`.
    pub fn routes(&self) -> usize {
        let body = http_get(SocketAddr::from(([127, 0, 0, 1], self.http_port)), "/routez").unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["num_routes"].as_u64().unwrap_or(0) as usize
    }

    /// Kills the server at once (SIGKILL), as a crashed node.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Several servers joined into one cluster by routes on loopback ports.
pub struct NatsCluster {
    /// The nodes, in start order.
    pub nodes: Vec<NatsServer>,
}

impl NatsCluster {
    /// Starts `n` nodes, each routed to every other, and waits until every
    /// node has its `n - 1` routes.
    pub fn start(n: usize) -> NatsCluster {
        NatsCluster::start_with(n, &ServerOptions::default())
    }

    /// Like [`NatsCluster::start`], with options for every node.
    /// A node that exits before it is ready (a port taken meanwhile)
    /// restarts the whole cluster on new ports.
    pub fn start_with(n: usize, opts: &ServerOptions) -> NatsCluster {
        let mut why = String::new();
        'attempt: for _ in 0..START_ATTEMPTS {
            let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
            let mut nodes: Vec<NatsServer> = (0..n)
                .map(|i| {
                    let others: Vec<u16> = ports.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, p)| *p).collect();
                    NatsServer::spawn(opts, Some((ports[i], &others)))
                })
                .collect();
            for node in &mut nodes {
                if let Err(e) = node.wait_ready(n - 1) {
                    why = e;
                    continue 'attempt;
                }
            }
            return NatsCluster { nodes };
        }
        panic!("{why} (tried {START_ATTEMPTS} times)")
    }

    /// Every node's client URL, comma-separated (what a client is given to
    /// fail over between nodes).
    pub fn urls(&self) -> String {
        self.nodes.iter().map(|n| n.url()).collect::<Vec<_>>().join(",")
    }
}

/// Connects to a NATS server and reads its first line (`INFO {…}`), or
/// None if it does not answer within a second.
pub fn info_line(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while buf.len() < 64 * 1024 {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        if byte[0] == b'\n' {
            let line = String::from_utf8_lossy(&buf).trim_end().to_string();
            return line.starts_with("INFO ").then_some(line);
        }
        buf.push(byte[0]);
    }
    None
}

/// A plain HTTP/1.0 GET on loopback, the body returned (monitoring only).
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}
