//! Keeping providers alive: one task per replica starts it (spawns the
//! child or dials the socket), waits for its HELLO, registers its methods,
//! pings it, and when it dies restarts it after a backoff that doubles
//! with every quick death. A replica that dies quickly `crash_loop_limit`
//! times in a row is marked failed, with how it last ended and its last
//! stderr lines, instead of being restarted forever.
//!
//! Calls in flight on a replica that dies fail at once with `unavailable`:
//! the connection sees end-of-stream the moment the process is gone, and
//! the runtime fails every pending call on it.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hubwire::transport::child::{self, LogSink, SpawnOptions};
use hubwire::transport::{tcp, unix};
use hubwire::{Connection, ConnectionOptions};
use tokio::process::{Child, Command};

use crate::config::Launch;
use crate::registry::{Phase, ProviderState, Registry, Replica};
use crate::remote::{LinkError, Target};

/// How one run of a replica ended.
enum Ended {
    /// It died, or never came up (`ready` false); restart it unless it is
    /// crash-looping.
    Died { why: String, ready: bool },
    /// It can never work in this hub (a method conflict): do not restart.
    Refused(String),
    /// The hub is stopping; the replica has been stopped.
    Stopping,
    /// It could not be started for want of descriptors (EMFILE, ENFILE):
    /// the hub's trouble, not the provider's, so not a crash.
    NoDescriptors(String),
}

/// The first wait after a spawn failed for want of descriptors; it
/// doubles up to [`NO_FD_BACKOFF_MAX`] while they stay short.
const NO_FD_BACKOFF: Duration = Duration::from_millis(50);
/// The longest wait between spawns while descriptors are short.
const NO_FD_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Starts one supervisor task per replica of every provider.
pub fn start(reg: &Arc<Registry>, config: &ConnectionOptions) -> Vec<tokio::task::JoinHandle<()>> {
    reg.providers.iter().flat_map(|p| start_provider(reg, p, config)).collect()
}

/// Starts one supervisor task per replica of `p` (a provider of the
/// config, or a remote method's pool of links).
pub fn start_provider(reg: &Arc<Registry>, p: &Arc<ProviderState>, config: &ConnectionOptions) -> Vec<tokio::task::JoinHandle<()>> {
    // A local replica hears `direct` in our HELLO and may report its direct
    // calls with `hubwire.report` (spec §14.5); a link through NATS reaches
    // another hub or a replica that is not ours, so it hears nothing of it.
    let local = !matches!(p.config.launch, crate::config::Launch::Nats(_));
    // `shm = false` on the provider keeps it on the socket.
    let config = config.clone().shm(config.shm && p.config.shm);
    p.replicas
        .iter()
        .map(|r| {
            let config = if local { config.clone().advertise_direct(true).service(crate::direct::reports(r)) } else { config.clone() };
            tokio::spawn(supervise(reg.clone(), p.clone(), r.clone(), config))
        })
        .collect()
}

fn set_phase(reg: &Registry, p: &ProviderState, r: &Replica, phase: Phase) {
    let mut st = r.state.lock().unwrap();
    if phase != Phase::Ready {
        st.conn = None;
    }
    st.phase = phase;
    drop(st);
    p.changed.notify_waiters();
    reg.changed.notify_waiters();
}

async fn supervise(reg: Arc<Registry>, p: Arc<ProviderState>, r: Arc<Replica>, config: ConnectionOptions) {
    let cfg = &p.config;
    let (name, i) = (cfg.name.as_str(), r.index);
    // A dialled provider's process is not ours: when it cannot be reached
    // we keep dialling (backoff capped at backoff_max) rather than give up.
    let dialled = !matches!(cfg.launch, Launch::Exec { .. });
    let mut backoff = cfg.backoff;
    let mut quick_deaths = 0;
    let mut no_fd_backoff = NO_FD_BACKOFF;
    loop {
        if reg.is_stopping() {
            set_phase(&reg, &p, &r, Phase::Stopped);
            return;
        }
        set_phase(&reg, &p, &r, Phase::Starting);
        *r.hung.lock().unwrap() = None;
        let started = Instant::now();
        let (why, ready) = match run_once(&reg, &p, &r, &config).await {
            Ended::Died { why, ready } => (why, ready),
            Ended::Refused(why) => {
                tracing::error!(provider = name, replica = i, "refused: {why}");
                *p.refused.lock().unwrap() = Some(why.clone());
                set_phase(&reg, &p, &r, Phase::Failed(why));
                return;
            }
            Ended::Stopping => {
                set_phase(&reg, &p, &r, Phase::Stopped);
                return;
            }
            Ended::NoDescriptors(why) => {
                tracing::warn!(provider = name, replica = i, "{why}; trying again in {no_fd_backoff:?} (not counted as a crash)");
                set_phase(&reg, &p, &r, Phase::Backoff);
                tokio::select! {
                    _ = tokio::time::sleep(no_fd_backoff) => {}
                    _ = reg.stopped() => {}
                }
                no_fd_backoff = (no_fd_backoff * 2).min(NO_FD_BACKOFF_MAX);
                continue;
            }
        };
        no_fd_backoff = NO_FD_BACKOFF;
        r.state.lock().unwrap().last_exit = Some(why.clone());
        // A run that never got through its handshake counts as a quick
        // death however long it took (a provider that never says HELLO
        // would otherwise be restarted forever).
        if !ready || started.elapsed() < cfg.min_uptime {
            quick_deaths += 1;
        } else {
            quick_deaths = 0;
            backoff = cfg.backoff;
        }
        if quick_deaths >= cfg.crash_limit && !dialled {
            let reason = format!("crash loop: died {quick_deaths} times in a row within {:?} of starting; last: {why}", cfg.min_uptime);
            tracing::error!(provider = name, replica = i, "marked failed: {reason}");
            set_phase(&reg, &p, &r, Phase::Failed(reason));
            return;
        }
        let again = if dialled { "dialling again" } else { "restarting" };
        tracing::warn!(provider = name, replica = i, "{why}; {again} in {backoff:?}");
        set_phase(&reg, &p, &r, if dialled && !ready { Phase::Unreachable } else { Phase::Backoff });
        r.state.lock().unwrap().restarts += 1;
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = reg.stopped() => {}
        }
        backoff = (backoff * 2).min(cfg.backoff_max);
    }
}

/// One life of a replica: start, serve until it dies or the hub stops.
async fn run_once(reg: &Registry, p: &Arc<ProviderState>, r: &Arc<Replica>, config: &ConnectionOptions) -> Ended {
    let cfg = &p.config;
    let (conn, mut child) = match &cfg.launch {
        Launch::Exec { argv, env, env_pass, dir } => {
            let (t, child) = match spawn(reg.log_line_max, p, r, argv, &crate::provider_env::build(env_pass, env), dir.as_deref()) {
                Ok(x) => x,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    return Ended::NoDescriptors(format!("cannot start {:?}: out of descriptors: {e}", argv[0]))
                }
                Err(e) => return Ended::Died { why: format!("cannot start {:?}: {e}", argv[0]), ready: false },
            };
            let pid = child.id();
            r.state.lock().unwrap().pid = pid;
            let mut child = Some(child);
            let conn = tokio::select! {
                c = Connection::dial(t, config) => c.map_err(|e| format!("handshake failed: {e}")),
                s = wait_child(&mut child) => Err(format!("exited before its HELLO ({})", describe(s))),
                _ = reg.stopped() => Err(String::new()),
            };
            match conn {
                Ok(c) => (c, child),
                Err(why) => {
                    let exit = stop_child(child, pid, None, cfg.stop_timeout).await;
                    return if reg.is_stopping() { Ended::Stopping } else { Ended::Died { why: join(why, exit), ready: false } };
                }
            }
        }
        Launch::Unix(path) => {
            let at = format!("unix:{}", path.display());
            match dial(reg, &at, config, unix::connect(path)).await {
                Ok(c) => (c, None),
                Err(None) => return Ended::Stopping,
                Err(Some(why)) => return Ended::Died { why, ready: false },
            }
        }
        Launch::Tcp(addr) => match dial(reg, &format!("tcp:{addr}"), config, tcp::connect(addr.as_str())).await {
            Ok(c) => (c, None),
            Err(None) => return Ended::Stopping,
            Err(Some(why)) => return Ended::Died { why, ready: false },
        },
        Launch::Nats(target) => match link(reg, p, r, target).await {
            Ok(c) => (c, None),
            Err(ended) => return ended,
        },
    };
    let pid = r.state.lock().unwrap().pid.filter(|_| child.is_some());
    // A remote method's link reaches a whole hub: its other methods are
    // not routed through this pool.
    let pool = matches!(cfg.launch, Launch::Nats(Target::Method(_)));
    if let Err(why) = if pool { Ok(()) } else { reg.register(p, &conn.peer().methods) } {
        stop_child(child, pid, Some(&conn), cfg.stop_timeout).await;
        return Ended::Refused(why);
    }
    let methods: Vec<&str> = conn.peer().methods.iter().map(|m| m.name.as_str()).collect();
    tracing::info!(provider = %cfg.name, replica = r.index, pid = ?r.state.lock().unwrap().pid, ?methods, "ready");
    {
        let mut st = r.state.lock().unwrap();
        st.conn = Some(conn.clone());
        st.phase = Phase::Ready;
        if !matches!(cfg.launch, Launch::Nats(_)) {
            st.peer = Some(conn.peer().peer.name.clone());
        }
    }
    p.changed.notify_waiters();
    reg.changed.notify_waiters();
    let why = tokio::select! {
        e = conn.closed() => format!("connection lost: {}", e.message()),
        s = wait_child(&mut child) => format!("exited ({})", describe(s)),
        why = health(&conn, cfg.health_interval, cfg.health_timeout) => why,
        why = hung(r, cfg.hung_timeout) => {
            tracing::warn!(provider = %cfg.name, replica = r.index, "{why}");
            *r.hung.lock().unwrap() = Some(why.clone());
            why
        }
        _ = reg.stopped() => String::new(),
    };
    // No new calls to it from here on.
    set_phase(reg, p, r, Phase::Starting);
    let exit = stop_child(child, pid, Some(&conn), cfg.stop_timeout).await;
    if reg.is_stopping() {
        return Ended::Stopping;
    }
    Ended::Died { why: join(why, exit), ready: true }
}

/// Opens a link through the cluster: the connection adopted from the
/// first call of a remote method, else a new one, and records the replica
/// it reached as `r`'s peer. A remote method that
/// nobody offers any more, with no other link ready, ends its pool: its
/// waiting calls fail `unavailable` at once, the next call asks again.
async fn link(reg: &Registry, p: &ProviderState, r: &Replica, target: &Target) -> Result<Connection, Ended> {
    {
        // The peer is recorded before the adopted link leaves `adopt`,
        // under its lock: a supervisor looking for the replicas taken
        // (below) sees it in one place or the other, never in neither.
        let mut adopt = r.adopt.lock().unwrap();
        if let Some((c, at)) = adopt.take() {
            r.state.lock().unwrap().peer = Some(at);
            return Ok(c);
        }
    }
    let Some(cluster) = reg.cluster.get() else {
        return Err(Ended::Died { why: "not connected to the NATS cluster ([nats])".into(), ready: false });
    };
    // The replicas the pool's other links reach (or last reached): a new
    // link should reach another, so that calls spread and one death fails
    // fewer. The link the pool's first call opened counts while it waits
    // to be adopted: the pool's supervisors start together, and one that
    // dials before the first has taken it would otherwise avoid nothing.
    // Links open one at a time, each recording its replica before the
    // next looks: two dialling at once would each avoid what the other
    // was about to reach, and could both reach it.
    let open = async {
        let _turn = p.opening.lock().await;
        let taken: Vec<String> = p
            .replicas
            .iter()
            .filter(|o| o.index != r.index)
            .filter_map(|o| {
                let adopted = o.adopt.lock().unwrap().as_ref().map(|(_, at)| at.clone());
                adopted.or_else(|| o.state.lock().unwrap().peer.clone())
            })
            .collect();
        let opened = cluster.open_spread(target, &taken).await;
        if let Ok((_, at)) = &opened {
            r.state.lock().unwrap().peer = Some(at.clone());
        }
        opened
    };
    let why = tokio::select! {
        opened = open => match opened {
            Ok((c, _)) => return Ok(c),
            Err(LinkError::Failed(why)) => why,
            Err(LinkError::Nobody) => format!("no replica in the cluster offers {}", target.describe()),
        },
        _ = reg.stopped() => return Err(Ended::Stopping),
    };
    let others_ready = p.replicas.iter().any(|o| o.index != r.index && o.state.lock().unwrap().phase == Phase::Ready);
    if let (Target::Method(m), false) = (target, others_ready) {
        if why.starts_with("no replica") {
            cluster.forget(m);
            return Err(Ended::Refused(why));
        }
    }
    Err(Ended::Died { why, ready: false })
}

/// Dials a provider's socket and does the handshake, both within the
/// handshake timeout; gives up at once (`Err(None)`) if the hub stops.
async fn dial<T, F>(reg: &Registry, at: &str, config: &ConnectionOptions, connect: F) -> Result<Connection, Option<String>>
where
    T: hubwire::transport::Transport,
    F: std::future::Future<Output = std::io::Result<T>>,
{
    let attempt = async {
        let t = connect.await.map_err(|e| format!("cannot connect to {at}: {e}"))?;
        Connection::dial(t, config).await.map_err(|e| format!("handshake with {at} failed: {e}"))
    };
    tokio::select! {
        r = tokio::time::timeout(config.handshake_timeout, attempt) => match r {
            Ok(r) => r.map_err(Some),
            Err(_) => Err(Some(format!("no answer from {at} within {:?}", config.handshake_timeout))),
        },
        _ = reg.stopped() => Err(None),
    }
}

fn join(why: String, exit: Option<String>) -> String {
    match exit {
        Some(e) if !why.contains(&e) => format!("{why}; {e}"),
        _ => why,
    }
}

/// Starts a provider's process with exactly the environment `env` (see
/// `provider_env`) and the protocol's `HUBWIRE_FD`.
fn spawn(
    line_max: usize,
    p: &ProviderState,
    r: &Arc<Replica>,
    argv: &[String],
    env: &[(String, String)],
    dir: Option<&std::path::Path>,
) -> std::io::Result<(child::ChildTransport, Child)> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    // Its own process group, so that stopping it stops whatever it started.
    cmd.process_group(0);
    // Children never outlive the hub, even when it is killed with -9: the
    // kernel sends them SIGKILL when their parent goes.
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let replica = r.clone();
    let index = r.index;
    let log: LogSink = Arc::new(move |name: &str, stream: &str, line: &str| {
        if stream == "stderr" {
            replica.push_stderr(line);
        }
        tracing::info!(target: "provider", provider = name, replica = index, stream, "{line}");
    });
    let opts = SpawnOptions { name: p.config.name.clone(), log: Some(log), pipe_stdin: false, line_max };
    crate::process::spawn_provider(|| {
        let (t, c) = child::spawn(cmd, opts)?;
        let pid = c.id();
        Ok(((t, c), pid))
    })
}

/// Waits for the child to exit; never completes without one.
async fn wait_child(child: &mut Option<Child>) -> Option<ExitStatus> {
    match child {
        Some(c) => c.wait().await.ok(),
        None => std::future::pending().await,
    }
}

/// Sends a health ping every `every`; returns why when one fails.
async fn health(conn: &Connection, every: Duration, within: Duration) -> String {
    loop {
        tokio::time::sleep(every).await;
        match tokio::time::timeout(within, conn.ping()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return format!("health ping failed: {}", e.message()),
            Err(_) => return format!("no answer to a health ping within {within:?}"),
        }
    }
}

/// Completes, with why, once the replica's longest-unmoved call has gone
/// `timeout` without a frame from it (see [`Replica::stalled_for`]);
/// never without a timeout. Checked a few times per `timeout`.
async fn hung(r: &Replica, timeout: Option<Duration>) -> String {
    let Some(timeout) = timeout else { return std::future::pending().await };
    let every = (timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        if let Some(stalled) = r.stalled_for().filter(|s| *s >= timeout) {
            return format!(
                "hung: a call has had no answer or item from it for {:.1} s (hung_timeout = {timeout:?})",
                stalled.as_secs_f64()
            );
        }
    }
}

/// Stops a replica: closes the connection (a child SHOULD exit on
/// end-of-stream, `spec/PROTOCOL.md` §10), then SIGTERM, then SIGKILL
/// after `grace`. Returns how the child ended.
///
/// The child leads its own process group (see `spawn`, `pid` is its id),
/// and the signals go to the group, so that what it started stops with it;
/// whatever of the group is left once the child has ended is killed and
/// waited for, so that nothing of it outlives the hub.
async fn stop_child(child: Option<Child>, pid: Option<u32>, conn: Option<&Connection>, grace: Duration) -> Option<String> {
    if let Some(c) = conn {
        c.drain(Duration::ZERO).await;
    }
    let mut child = child?;
    // What it started, its own group or not (a `setsid` grandchild): ended
    // with it, as far as the tree can be seen before the child goes.
    let tree = pid.map(crate::process::descendants).unwrap_or_default();
    let signal_group = |sig| {
        if let Some(pid) = pid {
            crate::group::signal(pid, sig);
        }
        crate::process::signal_all(&tree, sig);
    };
    let ended = async {
        if let Ok(Some(s)) = child.try_wait() {
            return describe(Some(s));
        }
        if let Ok(s) = tokio::time::timeout(Duration::from_millis(200), child.wait()).await {
            return describe(s.ok());
        }
        signal_group(libc::SIGTERM);
        if let Ok(s) = tokio::time::timeout(grace, child.wait()).await {
            return describe(s.ok());
        }
        signal_group(libc::SIGKILL);
        let _ = child.start_kill();
        format!("{} after ignoring SIGTERM for {grace:?}", describe(child.wait().await.ok()))
    }
    .await;
    signal_group(libc::SIGKILL);
    if let Some(pid) = pid {
        crate::process::provider_reaped(pid);
        crate::process::reap_orphans();
        if !crate::group::wait_empty(pid, GROUP_GONE).await {
            tracing::warn!(pgid = pid, "processes of the provider's group still alive {GROUP_GONE:?} after SIGKILL");
        }
    }
    Some(ended)
}

/// How long a stop waits for the rest of a provider's group to die after
/// SIGKILL: the kernel needs moments, not seconds, unless a process is
/// stuck in the kernel (uninterruptible I/O).
const GROUP_GONE: Duration = Duration::from_secs(2);

/// "exit status 3", "killed by signal 9 (SIGKILL)".
pub fn describe(s: Option<ExitStatus>) -> String {
    match s {
        None => "exit status unknown".into(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
            _ => s.to_string(),
        },
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGINT => "SIGINT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGPIPE => "SIGPIPE",
        _ => "signal",
    }
}
