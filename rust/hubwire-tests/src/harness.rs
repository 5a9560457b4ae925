//! Connects a client to the behaviour provider over one transport. Every
//! transport gets the same cases; a case only sees a [`Harness`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hubwire::transport::{self, child, tcp, tls, unix};
use hubwire::{testing, Connection, ConnectionOptions, WaitMode};

/// Which transport (and waiting mode) a harness uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    /// In-memory pair, provider in this process.
    Memory,
    /// Unix socket, provider in this process, efficient waiting.
    Unix,
    /// Unix socket, both sides in low-latency (spinning) mode.
    UnixLowLatency,
    /// TCP on loopback, provider in this process.
    Tcp,
    /// TLS on loopback with a client certificate (mutual TLS), provider in
    /// this process.
    Tls,
    /// The provider as a child process on a socketpair.
    Child,
    /// A link over a real `nats-server` (`spec/PROTOCOL.md` §13), dialed by
    /// method; provider in this process.
    Nats,
    /// Unix socket upgraded to shared memory (§11.4), efficient waiting.
    Shm,
    /// Unix socket upgraded to shared memory, both sides low-latency.
    ShmLowLatency,
    /// The child's socketpair upgraded to shared memory.
    ShmChild,
}

impl Setup {
    /// Whether the connection moves to shared memory.
    pub fn shm(self) -> bool {
        matches!(self, Setup::Shm | Setup::ShmLowLatency | Setup::ShmChild)
    }
}

/// The provider's side, kept so a case can kill it.
enum Peer {
    InProcess(Option<Connection>),
    Child(tokio::process::Child),
}

/// A client connected to the behaviour provider.
pub struct Harness {
    /// The client side.
    pub client: Connection,
    /// Which transport it runs on.
    pub setup: Setup,
    peer: Peer,
    /// Lines the child printed on stdout/stderr: (stream, line).
    pub logs: Arc<Mutex<Vec<(String, String)>>>,
    _dir: Option<TempDir>,
    /// The NATS server of [`Setup::Nats`], and the replica's listener.
    _nats: Option<(crate::nats_server::NatsServer, transport::nats::NatsListener)>,
}

/// A temporary directory removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A fresh directory under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("hubwire-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Harness {
    /// Connects a client over `setup`. `child_bin` is the path of the
    /// `behaviour-provider` binary (only used by [`Setup::Child`]).
    pub async fn new(setup: Setup, child_bin: &str) -> Harness {
        let low = matches!(setup, Setup::UnixLowLatency | Setup::ShmLowLatency);
        let wait = if low { WaitMode::low_latency() } else { WaitMode::Efficient };
        // The socket setups stay on the socket; the shm ones upgrade.
        let client_cfg = ConnectionOptions::new("behaviour-client").wait(wait).shm(setup.shm());
        let logs = Arc::new(Mutex::new(Vec::new()));
        let mut nats = None;
        let (client, peer, dir) = match setup {
            Setup::Memory => {
                let pair = testing::pair_with(crate::provider(), client_cfg, crate::provider_config().wait(wait)).await;
                (pair.client, Peer::InProcess(Some(pair.server)), None)
            }
            Setup::Unix | Setup::UnixLowLatency | Setup::Shm | Setup::ShmLowLatency => {
                let server_cfg = crate::provider_config().wait(wait).service(crate::provider()).shm(setup.shm());
                let dir = TempDir::new("unix");
                let path = dir.0.join("p.sock");
                let listener = unix::UnixListener::bind(&path).unwrap();
                let (c, s) = tokio::join!(async { Connection::dial(unix::connect(&path).await.unwrap(), &client_cfg).await }, async {
                    Connection::start(transport::accept(&listener).await.unwrap(), &server_cfg, false).await
                });
                (c.unwrap(), Peer::InProcess(Some(s.unwrap())), Some(dir))
            }
            Setup::Tcp => {
                let server_cfg = crate::provider_config().wait(wait).service(crate::provider());
                let listener = tcp::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let (c, s) = tokio::join!(async { Connection::dial(tcp::connect(addr).await.unwrap(), &client_cfg).await }, async {
                    Connection::start(transport::accept(&listener).await.unwrap(), &server_cfg, false).await
                });
                (c.unwrap(), Peer::InProcess(Some(s.unwrap())), None)
            }
            Setup::Tls => {
                let server_cfg = crate::provider_config().wait(wait).service(crate::provider());
                let pki = crate::pki::TestPki::new("behaviour");
                let server = tls::server_config(pki.server.cert.as_bytes(), pki.server.key.as_bytes(), Some(pki.ca.as_bytes())).unwrap();
                let listener = tls::TlsListener::bind("127.0.0.1:0", tls::Acceptor::new(server, true)).await.unwrap();
                let addr = listener.local_addr().to_string();
                let identity = Some((pki.client.cert.as_bytes(), pki.client.key.as_bytes()));
                let client = tls::client_config(pki.ca.as_bytes(), identity).unwrap();
                let (c, s) =
                    tokio::join!(async { Connection::dial(tls::connect(&addr, client).await.unwrap(), &client_cfg).await }, async {
                        Connection::start(transport::accept(&listener).await.unwrap(), &server_cfg, false).await
                    });
                (c.unwrap(), Peer::InProcess(Some(s.unwrap())), None)
            }
            Setup::Child | Setup::ShmChild => {
                let sink_logs = logs.clone();
                let opts = child::SpawnOptions {
                    name: "behaviour".into(),
                    log: Some(Arc::new(move |_name: &str, stream: &str, line: &str| {
                        sink_logs.lock().unwrap().push((stream.to_string(), line.to_string()));
                    })),
                    pipe_stdin: false,
                    line_max: child::DEFAULT_LINE_MAX,
                };
                let (t, proc_) = child::spawn(tokio::process::Command::new(child_bin), opts).unwrap();
                let c = Connection::dial(t, &client_cfg).await.unwrap();
                (c, Peer::Child(proc_), None)
            }
            Setup::Nats => {
                use transport::nats;
                let server_cfg = crate::provider_config().wait(wait).service(crate::provider());
                let server = crate::nats_server::NatsServer::start();
                let (a, b) = (nats::connect(&server.url()).await.unwrap(), nats::connect(&server.url()).await.unwrap());
                let offer = nats::Offer::new("behaviour", hubwire::Service::methods(&crate::provider()));
                let listener = nats::NatsListener::bind(a, offer).await.unwrap();
                let target = nats::Target::Method("echo".into());
                let (c, s) = tokio::join!(
                    async { Connection::dial(nats::dial(&b, &target, &Default::default()).await.unwrap().0, &client_cfg).await },
                    async { Connection::start(transport::accept(&listener).await.unwrap(), &server_cfg, false).await }
                );
                nats = Some((server, listener));
                (c.unwrap(), Peer::InProcess(Some(s.unwrap())), None)
            }
        };
        assert_eq!(client.upgraded().await, setup.shm(), "{setup:?}: on shared memory or not, as the setup says");
        Harness { client, setup, peer, logs, _dir: dir, _nats: nats }
    }

    /// A token unique to this harness: in-process providers share one
    /// record of what they observed, and the same case runs on several
    /// transports at once.
    pub fn token(&self, name: &str) -> String {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{name}-{}-{n}", std::process::id())
    }

    /// Kills the provider's side abruptly: the process (child) or its
    /// connection (in-process).
    pub async fn kill_peer(&mut self) {
        match &mut self.peer {
            Peer::InProcess(conn) => drop(conn.take()),
            Peer::Child(p) => {
                p.start_kill().unwrap();
                let _ = tokio::time::timeout(Duration::from_secs(5), p.wait()).await;
            }
        }
    }
}
