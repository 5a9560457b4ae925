//! `[[provider]]` in `hubwire.toml`: how the hub reaches each provider
//! and the pool's bounds, checked by the same `Parser` as `[hub]`, with
//! errors that name the line (`docs/hub.md`, "Providers").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{ConfigError, Parser};

/// `[[provider]] queue_bytes` when not set.
pub const DEFAULT_QUEUE_BYTES: usize = 16 << 20;

/// How the hub reaches a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Spawned as a child (`spec/PROTOCOL.md` §10).
    Exec {
        /// Program and arguments.
        argv: Vec<String>,
        /// Extra environment.
        env: BTreeMap<String, String>,
        /// Variables passed on from the hub's environment (when set), on
        /// top of the minimal one every provider gets.
        env_pass: Vec<String>,
        /// Working directory.
        dir: Option<PathBuf>,
    },
    /// Dialled on a Unix socket.
    Unix(PathBuf),
    /// Dialled over TCP.
    Tcp(String),
    /// A link through the NATS cluster of `[nats]` (`remote`).
    Nats(crate::remote::Target),
}

/// One `[[provider]]`.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Unique name: logs, status, metrics.
    pub name: String,
    /// Line of its `[[provider]]` header.
    pub line: usize,
    /// How to reach it.
    pub launch: Launch,
    /// Processes (or connections) in the pool.
    pub replicas: usize,
    /// Calls in flight at once across the pool.
    pub max_in_flight: usize,
    /// Calls that may wait for a slot; more are refused `resource_exhausted`.
    pub queue: usize,
    /// Time between health pings.
    pub health_interval: Duration,
    /// A ping slower than this counts as a failed health check.
    pub health_timeout: Duration,
    /// First restart delay; doubles per quick death up to `backoff_max`.
    pub backoff: Duration,
    /// Longest restart delay.
    pub backoff_max: Duration,
    /// A replica that dies sooner than this after starting died quickly.
    pub min_uptime: Duration,
    /// Quick deaths in a row before the replica is marked failed.
    pub crash_limit: u32,
    /// How long a stopping child gets between SIGTERM and SIGKILL.
    pub stop_timeout: Duration,
    /// Payload bytes of the calls waiting for a slot (`queue_bytes`).
    pub queue_bytes: usize,
    /// Overrides `[hub] default_deadline` for this provider's methods
    /// (`Some(None)`: no default deadline).
    pub default_deadline: Option<Option<Duration>>,
    /// A replica whose oldest call has had no frame from it for this long
    /// is hung: its calls fail, it is restarted (`hung_timeout`; `None`:
    /// never).
    pub hung_timeout: Option<Duration>,
    /// `shm = false` keeps this provider's connections on the socket.
    pub shm: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProviderToml {
    name: Option<Spanned<String>>,
    exec: Option<Spanned<Vec<String>>>,
    env: Option<BTreeMap<String, String>>,
    env_pass: Option<Vec<String>>,
    dir: Option<String>,
    dial: Option<Spanned<String>>,
    replicas: Option<Spanned<i64>>,
    max_in_flight: Option<Spanned<i64>>,
    queue: Option<Spanned<i64>>,
    health_interval: Option<Spanned<String>>,
    health_timeout: Option<Spanned<String>>,
    restart_backoff: Option<Spanned<String>>,
    restart_backoff_max: Option<Spanned<String>>,
    min_uptime: Option<Spanned<String>>,
    crash_loop_limit: Option<Spanned<i64>>,
    stop_timeout: Option<Spanned<String>>,
    // Limits (docs/hub.md#limits).
    queue_bytes: Option<Spanned<String>>,
    default_deadline: Option<Spanned<String>>,
    hung_timeout: Option<Spanned<String>>,
    shm: Option<bool>,
}

impl Parser<'_> {
    /// One `[[provider]]` table, whose header is on `line`.
    pub(crate) fn provider(&self, t: ProviderToml, line: usize, base: &Path) -> Result<ProviderConfig, ConfigError> {
        let Some(name) = t.name else {
            return Err(self.err(Some(line), "[[provider]] has no name".into()));
        };
        let name_line = self.at(&name);
        let name = name.into_inner();
        // Names appear in logs, tables and Prometheus labels: keep them plain.
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
            return Err(
                self.err(name_line, format!("provider name {name:?} must be non-empty and use only letters, digits, '.', '_' and '-'"))
            );
        }
        let launch = match (t.exec, t.dial) {
            (Some(_), Some(d)) => {
                return Err(self.err(self.at(&d), format!("provider {name:?}: set exec (spawn it) or dial (connect to it), not both")))
            }
            (None, None) => {
                return Err(self
                    .err(Some(line), format!("provider {name:?}: missing command: set exec = [\"program\", ...] or dial = \"unix:PATH\"")))
            }
            (Some(exec), None) => {
                let at = self.at(&exec);
                let mut argv = exec.into_inner();
                if argv.first().is_none_or(|p| p.is_empty()) {
                    return Err(self.err(at, format!("provider {name:?}: exec is empty: it needs at least the program")));
                }
                // A path with a slash is relative to the config; a bare
                // name is looked up on PATH when spawned.
                if argv[0].contains('/') {
                    argv[0] = base.join(&argv[0]).display().to_string();
                }
                let env_pass = t.env_pass.unwrap_or_default();
                if let Some(bad) = env_pass.iter().find(|n| n.is_empty() || n.contains('=')) {
                    return Err(self.err(at, format!("provider {name:?}: env_pass: {bad:?} is not a variable name")));
                }
                Launch::Exec { argv, env: t.env.unwrap_or_default(), env_pass, dir: t.dir.map(|d| base.join(d)) }
            }
            (None, Some(dial)) => {
                let at = self.at(&dial);
                let d = dial.into_inner();
                if t.env.is_some() || t.env_pass.is_some() || t.dir.is_some() {
                    return Err(self.err(at, format!("provider {name:?}: env, env_pass and dir only apply to exec providers")));
                }
                match d.split_once(':') {
                    Some(("unix", p)) if !p.is_empty() => Launch::Unix(base.join(p)),
                    Some(("tcp", a)) if a.rsplit_once(':').is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok()) => {
                        Launch::Tcp(a.into())
                    }
                    Some(("nats", n)) if !n.is_empty() && !n.contains(['.', '*', '>', ' ']) => {
                        Launch::Nats(crate::remote::Target::Provider(n.into()))
                    }
                    _ => {
                        return Err(self.err(
                            at,
                            format!("provider {name:?}: dial = {d:?}: expected \"unix:PATH\", \"tcp:HOST:PORT\" or \"nats:NAME\""),
                        ))
                    }
                }
            }
        };
        const MANY: i64 = 1_000_000;
        let max_in_flight = self.count(t.max_in_flight, "max_in_flight", 1..=MANY, 256)?;
        Ok(ProviderConfig {
            replicas: self.count(t.replicas, "replicas", 1..=1024, 1)?,
            max_in_flight,
            queue: self.count(t.queue, "queue", 0..=MANY, 4 * max_in_flight)?,
            health_interval: self.positive(t.health_interval, "health_interval", Duration::from_secs(5))?,
            health_timeout: self.positive(t.health_timeout, "health_timeout", Duration::from_secs(2))?,
            backoff: self.duration(t.restart_backoff, "restart_backoff", Duration::from_millis(100))?,
            backoff_max: self.duration(t.restart_backoff_max, "restart_backoff_max", Duration::from_secs(10))?,
            min_uptime: self.duration(t.min_uptime, "min_uptime", Duration::from_secs(2))?,
            crash_limit: self.count(t.crash_loop_limit, "crash_loop_limit", 1..=1000, 5)? as u32,
            stop_timeout: self.duration(t.stop_timeout, "stop_timeout", Duration::from_secs(3))?,
            queue_bytes: self.size(t.queue_bytes, "queue_bytes", 0..=1 << 40, DEFAULT_QUEUE_BYTES)?,
            default_deadline: match t.default_deadline {
                None => None,
                d => Some(self.optional(d, "default_deadline", None)?),
            },
            hung_timeout: self.optional(t.hung_timeout, "hung_timeout", None)?,
            shm: t.shm.unwrap_or(true),
            name,
            line,
            launch,
        })
    }
}
