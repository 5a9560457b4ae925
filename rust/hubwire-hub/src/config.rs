//! `hubwire.toml`: what the hub listens on and which providers it runs.
//!
//! Every mistake is reported as one line naming the file, the line and
//! what is wrong (`hubwire.toml:7: provider "dice": exec is empty`), so a
//! broken config never starts a half-working hub. See `docs/hub.md` for
//! the format.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// A config error: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as given.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong, in one line.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The whole config, checked and with paths resolved.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// The file it came from.
    pub file: PathBuf,
    /// The `[hub]` table.
    pub hub: HubSection,
    /// The providers, in file order.
    pub providers: Vec<ProviderConfig>,
}

/// `[hub]`: listeners and hub-wide settings.
#[derive(Debug, Clone)]
pub struct HubSection {
    /// The hub's name in HELLO.
    pub name: String,
    /// Unix socket for clients (hubwire protocol), relative paths resolved
    /// against the config file's directory.
    pub unix: Option<Located<PathBuf>>,
    /// TCP address for clients (hubwire protocol).
    pub tcp: Option<Located<String>>,
    /// TCP address of the HTTP/JSON gateway.
    pub http: Option<Located<String>>,
    /// Low-latency waiting on client and provider connections.
    pub low_latency: bool,
    /// How long SIGTERM waits for calls in flight.
    pub drain_timeout: Duration,
    /// TCP address of the WebSocket listener (hubwire protocol, for browsers).
    pub websocket: Option<Located<String>>,
    /// Browser origins allowed on the HTTP gateway and the WebSocket
    /// listener (`scheme://host[:port]`); a request without `Origin` is
    /// always allowed.
    pub allowed_origins: Vec<String>,
    /// `Host` values the HTTP gateway and the WebSocket listener accept;
    /// empty = `localhost`, `127.0.0.1`, `[::1]` and the listen address.
    pub allowed_hosts: Vec<String>,
    // Authentication (h19-auth).
    /// `token_file`, resolved against the config's directory.
    pub token_file: Option<Located<PathBuf>>,
    /// The token TCP, WebSocket and HTTP clients must present: the first
    /// line of `token_file`, else (by [`load`]) the hub's `HUBWIRE_TOKEN`.
    pub token: Option<hubwire::Token>,
}

/// A value and the line it was written on (for errors found later, such
/// as a port in use).
#[derive(Debug, Clone)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// 1-based line in the config file.
    pub line: usize,
}

/// How the hub reaches a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Spawned as a child (`spec/PROTOCOL.md` §10).
    Exec {
        /// Program and arguments.
        argv: Vec<String>,
        /// Extra environment.
        env: BTreeMap<String, String>,
        /// Working directory.
        dir: Option<PathBuf>,
    },
    /// Dialled on a Unix socket.
    Unix(PathBuf),
    /// Dialled over TCP.
    Tcp(String),
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    hub: Option<Spanned<HubToml>>,
    #[serde(default)]
    provider: Vec<Spanned<ProviderToml>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HubToml {
    name: Option<String>,
    unix: Option<Spanned<String>>,
    tcp: Option<Spanned<String>>,
    http: Option<Spanned<String>>,
    wait: Option<Spanned<String>>,
    drain_timeout: Option<Spanned<String>>,
    websocket: Option<Spanned<String>>,
    allowed_origins: Option<Vec<String>>,
    allowed_hosts: Option<Vec<String>>,
    token_file: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderToml {
    name: Option<Spanned<String>>,
    exec: Option<Spanned<Vec<String>>>,
    env: Option<BTreeMap<String, String>>,
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
}

/// Reads and checks a config file.
pub fn load(path: &Path) -> Result<HubConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        line: None,
        message: format!("cannot read the config: {e}"),
    })?;
    let mut cfg = parse(&text, path)?;
    if cfg.hub.token.is_none() {
        cfg.hub.token =
            crate::auth::token_from_env().map_err(|message| ConfigError { file: cfg.file.display().to_string(), line: None, message })?;
    }
    Ok(cfg)
}

/// Parses config text; relative paths are resolved against `path`'s
/// directory, and a `token_file` is read.
pub fn parse(text: &str, path: &Path) -> Result<HubConfig, ConfigError> {
    let p = Parser { text, file: path.display().to_string() };
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| p.line_of(s.start));
        // toml's message can span lines (it quotes the source); keep the first.
        let message = e.message().lines().next().unwrap_or("invalid TOML").trim().to_string();
        p.err(line, message)
    })?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let hub = p.hub(file.hub, &base)?;
    let mut providers = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for spanned in file.provider {
        let line = p.line_of(spanned.span().start);
        let pc = p.provider(spanned.into_inner(), line, &base)?;
        if let Some(first) = seen.insert(pc.name.clone(), pc.line) {
            return Err(p.err(Some(pc.line), format!("duplicate provider name {:?} (first defined on line {first})", pc.name)));
        }
        providers.push(pc);
    }
    if hub.unix.is_none() && hub.tcp.is_none() && hub.http.is_none() && hub.websocket.is_none() {
        return Err(p.err(None, "[hub] has no listener: set at least one of unix, tcp, http or websocket".into()));
    }
    Ok(HubConfig { file: path.to_path_buf(), hub, providers })
}

struct Parser<'a> {
    text: &'a str,
    file: String,
}

impl Parser<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].matches('\n').count() + 1
    }

    fn err(&self, line: Option<usize>, message: String) -> ConfigError {
        ConfigError { file: self.file.clone(), line, message }
    }

    fn at<T>(&self, s: &Spanned<T>) -> Option<usize> {
        Some(self.line_of(s.span().start))
    }

    fn duration(&self, v: Option<Spanned<String>>, what: &str, default: Duration) -> Result<Duration, ConfigError> {
        let Some(v) = v else { return Ok(default) };
        parse_duration(v.get_ref()).ok_or_else(|| {
            self.err(self.at(&v), format!("{what} = {:?} is not a duration (write it like \"500ms\", \"10s\" or \"2m\")", v.get_ref()))
        })
    }

    fn count(
        &self,
        v: Option<Spanned<i64>>,
        what: &str,
        range: std::ops::RangeInclusive<i64>,
        default: usize,
    ) -> Result<usize, ConfigError> {
        let Some(v) = v else { return Ok(default) };
        if !range.contains(v.get_ref()) {
            return Err(self.err(self.at(&v), format!("{what} = {} must be between {} and {}", v.get_ref(), range.start(), range.end())));
        }
        Ok(*v.get_ref() as usize)
    }

    /// A duration that must not be zero (a zero interval would spin).
    fn positive(&self, v: Option<Spanned<String>>, what: &str, default: Duration) -> Result<Duration, ConfigError> {
        let at = v.as_ref().and_then(|v| self.at(v));
        let d = self.duration(v, what, default)?;
        if d.is_zero() {
            return Err(self.err(at, format!("{what} must be more than zero")));
        }
        Ok(d)
    }

    fn hub(&self, hub: Option<Spanned<HubToml>>, base: &Path) -> Result<HubSection, ConfigError> {
        let h = hub.map(Spanned::into_inner).unwrap_or_default();
        let low_latency = match &h.wait {
            None => false,
            Some(w) => match w.get_ref().as_str() {
                "efficient" => false,
                "low-latency" => true,
                other => return Err(self.err(self.at(w), format!("wait = {other:?}: expected \"efficient\" or \"low-latency\""))),
            },
        };
        let located = |s: Spanned<String>| Located { line: self.line_of(s.span().start), value: s.into_inner() };
        let token_file = h.token_file.map(located).map(|f| Located { value: base.join(f.value), line: f.line });
        let token = match &token_file {
            None => None,
            Some(f) => Some(crate::auth::read_token_file(&f.value).map_err(|e| self.err(Some(f.line), format!("token_file: {e}")))?),
        };
        Ok(HubSection {
            name: h.name.unwrap_or_else(|| "hubwire".into()),
            unix: h.unix.map(located).map(|u| Located { value: base.join(u.value), line: u.line }),
            tcp: h.tcp.map(located),
            http: h.http.map(located),
            low_latency,
            drain_timeout: self.duration(h.drain_timeout, "drain_timeout", Duration::from_secs(10))?,
            websocket: h.websocket.map(located),
            allowed_origins: h.allowed_origins.unwrap_or_default(),
            allowed_hosts: h.allowed_hosts.unwrap_or_default(),
            token_file,
            token,
        })
    }

    fn provider(&self, t: ProviderToml, line: usize, base: &Path) -> Result<ProviderConfig, ConfigError> {
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
                Launch::Exec { argv, env: t.env.unwrap_or_default(), dir: t.dir.map(|d| base.join(d)) }
            }
            (None, Some(dial)) => {
                let at = self.at(&dial);
                let d = dial.into_inner();
                if t.env.is_some() || t.dir.is_some() {
                    return Err(self.err(at, format!("provider {name:?}: env and dir only apply to exec providers")));
                }
                match d.split_once(':') {
                    Some(("unix", p)) if !p.is_empty() => Launch::Unix(base.join(p)),
                    Some(("tcp", a)) if a.rsplit_once(':').is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok()) => {
                        Launch::Tcp(a.into())
                    }
                    _ => return Err(self.err(at, format!("provider {name:?}: dial = {d:?}: expected \"unix:PATH\" or \"tcp:HOST:PORT\""))),
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
            name,
            line,
            launch,
        })
    }
}

/// `"250ms"`, `"10s"`, `"2m"`, `"1.5s"` → a duration.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        for bad in ["", "10", "s", "5h", "-1s", "1.2.3s"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn paths_with_a_slash_are_relative_to_the_config_and_defaults_apply() {
        let cfg = parse(
            "[hub]\nunix = \"hub.sock\"\n[[provider]]\nname = \"a\"\nexec = [\"./bin/a\", \"x\"]\n[[provider]]\nname = \"b\"\nexec = [\"b\"]\n",
            Path::new("/etc/hw/hubwire.toml"),
        )
        .unwrap();
        assert_eq!(cfg.hub.unix.map(|u| u.value), Some(PathBuf::from("/etc/hw/hub.sock")));
        let argv = |i: usize| match &cfg.providers[i].launch {
            Launch::Exec { argv, .. } => argv.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(argv(0), ["/etc/hw/./bin/a", "x"]);
        assert_eq!(argv(1), ["b"], "a bare name is left for PATH");
        let p = &cfg.providers[0];
        assert_eq!((p.replicas, p.max_in_flight, p.queue, p.crash_limit), (1, 256, 1024, 5));
    }

    #[test]
    fn a_websocket_listener_alone_will_do_and_the_browser_lists_are_read() {
        let cfg =
            parse("[hub]\nwebsocket = \"127.0.0.1:0\"\nallowed_origins = [\"http://localhost:8080\"]\n", Path::new("h.toml")).unwrap();
        assert_eq!(cfg.hub.websocket.map(|w| w.value).as_deref(), Some("127.0.0.1:0"));
        assert_eq!(cfg.hub.allowed_origins, ["http://localhost:8080"]);
        assert!(cfg.hub.allowed_hosts.is_empty(), "empty: the defaults apply");
        let e = parse("[hub]\nallowed_hosts = [\"a\"]\n", Path::new("h.toml")).unwrap_err();
        assert!(e.message.contains("websocket"), "{e}");
    }
}
