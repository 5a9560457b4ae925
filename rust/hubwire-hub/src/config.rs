//! `hubwire.toml`: what the hub listens on and which providers it runs.
//!
//! Every mistake is reported as one line naming the file, the line and
//! what is wrong (`hubwire.toml:7: provider "dice": exec is empty`), so a
//! broken config never starts a half-working hub. See `docs/hub.md` for
//! the format.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::provider_config::ProviderToml;
pub use crate::provider_config::{Launch, ProviderConfig, DEFAULT_QUEUE_BYTES};

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
    /// `[nats]`: the NATS cluster the hub joins, if any (`nats_config`).
    pub nats: Option<crate::nats_config::NatsConfig>,
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
    /// How the hub's connections wait for bytes (`wait`).
    pub wait: HubWait,
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

    // Transport security (see `tls_config`).
    /// `[hub.tls]`: the `tcp`, `http` and `websocket` listeners speak TLS.
    pub tls: Option<crate::tls_config::TlsSection>,
    /// `allow_insecure = true`: a network listener with neither TLS nor a
    /// token is allowed on a non-loopback address.
    pub allow_insecure: bool,
    /// Memory and waiting bounds (`docs/hub.md#limits`).
    pub limits: HubLimits,
    /// Connection limits, timeouts and who may use the Unix socket.
    pub access: Access,
    // Authentication (h19-auth).
    /// `token_file`, resolved against the config's directory.
    pub token_file: Option<Located<PathBuf>>,
    /// The token TCP, WebSocket and HTTP clients must present: the first
    /// line of `token_file`, else (by [`load`]) the hub's `HUBWIRE_TOKEN`.
    pub token: Option<hubwire::Token>,
    /// The upgrade of local connections to shared memory.
    pub shm: ShmConfig,
}

/// `[hub] wait`: how the hub's connections wait for bytes (docs/hub.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HubWait {
    /// The default: a connection to a provider spins for its answer while
    /// one caller is alone in the hub (`SpinGate`); otherwise, and on
    /// client connections, as `Efficient`.
    Adaptive,
    /// Never spin.
    Efficient,
    /// Every connection spins after activity (`WaitMode::low_latency`).
    LowLatency,
}

/// `shm`, `shm_ring`, `shm_max_connections` of `[hub]`: whether the hub
/// moves connections to spawned providers and local clients onto shared
/// memory when the peer can (`spec/PROTOCOL.md` §11.4), and its bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct ShmConfig {
    /// On unless `shm = false`.
    pub on: bool,
    /// Bytes per ring of a segment the hub offers (a power of two).
    pub ring: usize,
    /// Connections of the hub on shared memory at once, both legs
    /// counted; beyond it they stay on the socket.
    pub max_connections: usize,
}

/// `[hub]` keys that bound memory and waiting (`docs/hub.md#limits`).
#[derive(Debug, Clone)]
pub struct HubLimits {
    /// Frame bytes queued for one connection before the hub stops reading
    /// new calls from it (`write_queue`).
    pub write_queue: usize,
    /// How long a connection may stay over `write_queue` before it is
    /// closed with GOAWAY `resource_exhausted` (`write_stall_timeout`).
    pub write_stall_timeout: Duration,
    /// Calls of one client connection waiting in the hub (`client_queue`).
    pub client_queue: usize,
    /// Payload bytes of one client connection's waiting calls
    /// (`client_queue_bytes`).
    pub client_queue_bytes: usize,
    /// The deadline a call without one gets when forwarded; `None`: none
    /// (`default_deadline = "0"`).
    pub default_deadline: Option<Duration>,
    /// Longest provider stdout/stderr line kept; the rest is discarded as
    /// it is read (`log_line_max`).
    pub log_line_max: usize,
    /// Items of one stream the hub lets a peer send ahead, per hop
    /// (`window`, in the hub's HELLO): with items of up to `S` bytes, a
    /// stream pins at most `window × S` of the hub's memory per hop.
    pub window: u32,
}

impl Default for HubLimits {
    /// The documented defaults.
    fn default() -> HubLimits {
        HubLimits {
            write_queue: 4 << 20,
            write_stall_timeout: Duration::from_secs(30),
            client_queue: 1024,
            client_queue_bytes: 16 << 20,
            default_deadline: Some(Duration::from_secs(300)),
            log_line_max: 4 << 10,
            window: 8,
        }
    }
}

/// `[hub]` keys on connections and local trust: how many, how long, and
/// who may use the Unix socket (`docs/hub.md`, "Who can reach the hub").
#[derive(Debug, Clone)]
pub struct Access {
    /// Client connections at once, every listener together (HTTP too).
    pub max_connections: usize,
    /// Client connections at once per peer: per uid on the Unix socket,
    /// per IP address on TCP, HTTP and WebSocket.
    pub max_connections_per_peer: usize,
    /// How long a new connection has to complete its HELLO.
    pub handshake_timeout: Duration,
    /// A connection with no call in flight that sends nothing for this
    /// long gets GOAWAY and is closed.
    pub idle_timeout: Duration,
    /// How long the HTTP gateway waits for a request's head.
    pub http_header_timeout: Duration,
    /// How long the HTTP gateway waits for a request's whole body.
    pub http_body_timeout: Duration,
    /// The Unix socket's permission bits, whatever the umask.
    pub unix_mode: u32,
    /// The Unix socket's group (a gid), when set.
    pub unix_group: Option<u32>,
    /// The uids that may use the Unix socket; `None`: the hub's own uid
    /// and root for an owner-only mode, anyone the mode lets in otherwise.
    pub allow_uids: Option<Vec<u32>>,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    hub: Option<Spanned<HubToml>>,
    #[serde(default)]
    provider: Vec<Spanned<ProviderToml>>,
    nats: Option<Spanned<crate::nats_config::NatsToml>>,
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
    // Limits (docs/hub.md#limits).
    write_queue: Option<Spanned<String>>,
    write_stall_timeout: Option<Spanned<String>>,
    client_queue: Option<Spanned<i64>>,
    client_queue_bytes: Option<Spanned<String>>,
    default_deadline: Option<Spanned<String>>,
    log_line_max: Option<Spanned<String>>,
    window: Option<Spanned<i64>>,
    tls: Option<Spanned<crate::tls_config::TlsToml>>,
    allow_insecure: Option<bool>,
    // Connections and local trust (`Access`).
    max_connections: Option<Spanned<i64>>,
    max_connections_per_peer: Option<Spanned<i64>>,
    handshake_timeout: Option<Spanned<String>>,
    idle_timeout: Option<Spanned<String>>,
    http_header_timeout: Option<Spanned<String>>,
    http_body_timeout: Option<Spanned<String>>,
    unix_mode: Option<Spanned<String>>,
    unix_group: Option<Spanned<String>>,
    allow_uids: Option<Spanned<Vec<i64>>>,
    token_file: Option<Spanned<String>>,
    // Shared memory (docs/hub.md#shared-memory).
    shm: Option<bool>,
    shm_ring: Option<Spanned<String>>,
    shm_max_connections: Option<Spanned<i64>>,
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
    // Once the token is known, from the file or the environment: either
    // protects the network listeners.
    crate::tls_config::check_exposure(&cfg.hub).map_err(|(line, why)| ConfigError {
        file: cfg.file.display().to_string(),
        line: Some(line),
        message: why,
    })?;
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
    let nats = match file.nats {
        None => None,
        Some(t) => {
            let line = p.line_of(t.span().start);
            Some(crate::nats_config::section(t.into_inner(), line, &base, &|o| p.line_of(o)).map_err(|(l, why)| p.err(Some(l), why))?)
        }
    };
    if let Some(pc) = providers.iter().find(|pc| matches!(pc.launch, Launch::Nats(_))).filter(|_| nats.is_none()) {
        return Err(p.err(
            Some(pc.line),
            format!("provider {:?}: dial = \"nats:…\" needs a [nats] section (the cluster to reach it through)", pc.name),
        ));
    }
    // A hub that offers its providers to a NATS cluster is reached
    // through it, and needs no listener of its own.
    let offers = nats.as_ref().is_some_and(|n| n.offer);
    if hub.unix.is_none() && hub.tcp.is_none() && hub.http.is_none() && hub.websocket.is_none() && !offers {
        return Err(
            p.err(None, "[hub] has no listener: set at least one of unix, tcp, http or websocket (or join a cluster: [nats])".into())
        );
    }
    Ok(HubConfig { file: path.to_path_buf(), hub, providers, nats })
}

/// Reads the typed TOML into the checked config, naming the line of
/// each mistake; `provider_config` adds `[[provider]]`.
pub(crate) struct Parser<'a> {
    text: &'a str,
    file: String,
}

impl Parser<'_> {
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].matches('\n').count() + 1
    }

    pub(crate) fn err(&self, line: Option<usize>, message: String) -> ConfigError {
        ConfigError { file: self.file.clone(), line, message }
    }

    pub(crate) fn at<T>(&self, s: &Spanned<T>) -> Option<usize> {
        Some(self.line_of(s.span().start))
    }

    pub(crate) fn duration(&self, v: Option<Spanned<String>>, what: &str, default: Duration) -> Result<Duration, ConfigError> {
        let Some(v) = v else { return Ok(default) };
        parse_duration(v.get_ref()).ok_or_else(|| {
            self.err(self.at(&v), format!("{what} = {:?} is not a duration (write it like \"500ms\", \"10s\" or \"2m\")", v.get_ref()))
        })
    }

    pub(crate) fn count(
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

    /// A duration where `"0"` means none.
    pub(crate) fn optional(
        &self,
        v: Option<Spanned<String>>,
        what: &str,
        default: Option<Duration>,
    ) -> Result<Option<Duration>, ConfigError> {
        match v {
            None => Ok(default),
            Some(v) if v.get_ref().trim() == "0" => Ok(None),
            Some(v) => Ok(Some(self.duration(Some(v), what, Duration::ZERO)?).filter(|d| !d.is_zero())),
        }
    }

    /// A size in bytes (`"4KiB"`, `"16MiB"`), within `range`.
    pub(crate) fn size(
        &self,
        v: Option<Spanned<String>>,
        what: &str,
        range: std::ops::RangeInclusive<usize>,
        default: usize,
    ) -> Result<usize, ConfigError> {
        let Some(v) = v else { return Ok(default) };
        let n = parse_size(v.get_ref()).ok_or_else(|| {
            self.err(self.at(&v), format!("{what} = {:?} is not a size (write it like \"4096\", \"64KiB\" or \"16MiB\")", v.get_ref()))
        })?;
        if !range.contains(&n) {
            return Err(
                self.err(self.at(&v), format!("{what} = {:?} must be between {} and {} bytes", v.get_ref(), range.start(), range.end()))
            );
        }
        Ok(n)
    }

    fn limits(&self, h: &mut HubToml) -> Result<HubLimits, ConfigError> {
        let d = HubLimits::default();
        Ok(HubLimits {
            write_queue: self.size(h.write_queue.take(), "write_queue", 64 << 10..=1 << 30, d.write_queue)?,
            write_stall_timeout: self.positive(h.write_stall_timeout.take(), "write_stall_timeout", d.write_stall_timeout)?,
            client_queue: self.count(h.client_queue.take(), "client_queue", 0..=1_000_000, d.client_queue)?,
            client_queue_bytes: self.size(h.client_queue_bytes.take(), "client_queue_bytes", 0..=1 << 40, d.client_queue_bytes)?,
            default_deadline: self.optional(h.default_deadline.take(), "default_deadline", d.default_deadline)?,
            log_line_max: self.size(h.log_line_max.take(), "log_line_max", 80..=1 << 20, d.log_line_max)?,
            window: self.count(h.window.take(), "window", 1..=65_536, d.window as usize)? as u32,
        })
    }

    fn shm(&self, h: &mut HubToml) -> Result<ShmConfig, ConfigError> {
        let at = h.shm_ring.as_ref().and_then(|v| self.at(v));
        let ring = self.size(h.shm_ring.take(), "shm_ring", 4096..=1 << 30, hubwire::DEFAULT_SHM_RING)?;
        if !ring.is_power_of_two() {
            return Err(self.err(at, format!("shm_ring = {ring}: must be a power of two (4KiB, 64KiB, 1MiB, ...)")));
        }
        Ok(ShmConfig {
            on: h.shm.unwrap_or(true),
            ring,
            max_connections: self.count(
                h.shm_max_connections.take(),
                "shm_max_connections",
                0..=1_000_000,
                hubwire::DEFAULT_SHM_MAX_CONNECTIONS,
            )?,
        })
    }

    /// A duration that must not be zero (a zero interval would spin).
    pub(crate) fn positive(&self, v: Option<Spanned<String>>, what: &str, default: Duration) -> Result<Duration, ConfigError> {
        let at = v.as_ref().and_then(|v| self.at(v));
        let d = self.duration(v, what, default)?;
        if d.is_zero() {
            return Err(self.err(at, format!("{what} must be more than zero")));
        }
        Ok(d)
    }

    fn hub(&self, hub: Option<Spanned<HubToml>>, base: &Path) -> Result<HubSection, ConfigError> {
        let mut h = hub.map(Spanned::into_inner).unwrap_or_default();
        let limits = self.limits(&mut h)?;
        let access = self.access(&mut h)?;
        let wait = match h.wait.as_ref().map(|w| (w, w.get_ref().as_str())) {
            None | Some((_, "adaptive")) => HubWait::Adaptive,
            Some((_, "efficient")) => HubWait::Efficient,
            Some((_, "low-latency")) => HubWait::LowLatency,
            Some((w, other)) => {
                let why = format!("wait = {other:?}: expected \"adaptive\" (the default), \"efficient\" or \"low-latency\"");
                return Err(self.err(self.at(w), why));
            }
        };
        let shm = self.shm(&mut h)?;
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
            wait,
            drain_timeout: self.duration(h.drain_timeout, "drain_timeout", Duration::from_secs(10))?,
            websocket: h.websocket.map(located),
            allowed_origins: h.allowed_origins.unwrap_or_default(),
            allowed_hosts: h.allowed_hosts.unwrap_or_default(),
            limits,
            tls: match h.tls {
                None => None,
                Some(t) => {
                    let line = self.line_of(t.span().start);
                    let t = crate::tls_config::section(t.into_inner(), line, base, &|o| self.line_of(o));
                    Some(t.map_err(|(line, why)| self.err(Some(line), why))?)
                }
            },
            allow_insecure: h.allow_insecure.unwrap_or(false),
            access,
            token_file,
            token,
            shm,
        })
    }

    /// The `Access` keys, taken out of `h`.
    fn access(&self, h: &mut HubToml) -> Result<Access, ConfigError> {
        const MANY: i64 = 1_000_000;
        let unix_mode = match h.unix_mode.take() {
            None => 0o600,
            Some(m) => match u32::from_str_radix(m.get_ref().trim_start_matches("0o"), 8) {
                Ok(mode) if mode <= 0o777 && mode & 0o600 == 0o600 => mode,
                _ => {
                    return Err(self.err(
                        self.at(&m),
                        format!(
                            "unix_mode = {:?}: expected octal permission bits with owner read and write, like \"0600\" or \"0660\"",
                            m.get_ref()
                        ),
                    ))
                }
            },
        };
        let unix_group = match h.unix_group.take() {
            None => None,
            Some(g) => Some(
                crate::trust::group_id(g.get_ref())
                    .ok_or_else(|| self.err(self.at(&g), format!("unix_group = {:?}: no such group", g.get_ref())))?,
            ),
        };
        let allow_uids = match h.allow_uids.take() {
            None => None,
            Some(list) => {
                let at = self.at(&list);
                let uids = list.into_inner();
                if let Some(bad) = uids.iter().find(|u| !(0..=i64::from(u32::MAX - 1)).contains(*u)) {
                    return Err(self.err(at, format!("allow_uids: {bad} is not a uid")));
                }
                Some(uids.into_iter().map(|u| u as u32).collect())
            }
        };
        Ok(Access {
            max_connections: self.count(h.max_connections.take(), "max_connections", 1..=MANY, 1024)?,
            max_connections_per_peer: self.count(h.max_connections_per_peer.take(), "max_connections_per_peer", 1..=MANY, 64)?,
            handshake_timeout: self.positive(h.handshake_timeout.take(), "handshake_timeout", Duration::from_secs(10))?,
            idle_timeout: self.positive(h.idle_timeout.take(), "idle_timeout", Duration::from_secs(300))?,
            http_header_timeout: self.positive(h.http_header_timeout.take(), "http_header_timeout", Duration::from_secs(10))?,
            http_body_timeout: self.positive(h.http_body_timeout.take(), "http_body_timeout", Duration::from_secs(30))?,
            unix_mode,
            unix_group,
            allow_uids,
        })
    }
}

/// `"4096"`, `"64KiB"`, `"16 MiB"`, `"1GiB"` → bytes (binary units only:
/// `KB` would leave the reader guessing).
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: usize = n.parse().ok()?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
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
    fn sizes_read_in_binary_units() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64KiB"), Some(64 << 10));
        assert_eq!(parse_size("16 MiB"), Some(16 << 20));
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        for bad in ["", "MiB", "4MB", "-1KiB", "1.5MiB", "4 kib"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn limits_have_defaults_and_zero_means_no_deadline() {
        let cfg = parse("[hub]\nunix = \"h\"\n[[provider]]\nname = \"a\"\nexec = [\"a\"]\n", Path::new("h.toml")).unwrap();
        let (l, p) = (&cfg.hub.limits, &cfg.providers[0]);
        assert_eq!((l.write_queue, l.client_queue, l.client_queue_bytes, l.log_line_max), (4 << 20, 1024, 16 << 20, 4096));
        assert_eq!(l.default_deadline, Some(Duration::from_secs(300)));
        assert_eq!((p.queue_bytes, p.default_deadline, p.hung_timeout), (16 << 20, None, None));
        let cfg = parse(
            "[hub]\nunix = \"h\"\ndefault_deadline = \"0\"\nwrite_queue = \"1MiB\"\n[[provider]]\nname = \"a\"\nexec = [\"a\"]\ndefault_deadline = \"2s\"\nhung_timeout = \"3s\"\nqueue_bytes = \"0\"\n",
            Path::new("h.toml"),
        )
        .unwrap();
        let (l, p) = (&cfg.hub.limits, &cfg.providers[0]);
        assert_eq!((l.default_deadline, l.write_queue), (None, 1 << 20));
        assert_eq!(
            (p.default_deadline, p.hung_timeout, p.queue_bytes),
            (Some(Some(Duration::from_secs(2))), Some(Duration::from_secs(3)), 0)
        );
    }

    #[test]
    fn the_hub_waits_adaptively_unless_told_and_a_bad_wait_names_its_line() {
        let wait = |extra: &str| parse(&format!("[hub]\nunix = \"h\"\n{extra}"), Path::new("h.toml")).map(|c| c.hub.wait);
        assert_eq!(wait(""), Ok(HubWait::Adaptive));
        assert_eq!(wait("wait = \"adaptive\"\n"), Ok(HubWait::Adaptive));
        assert_eq!(wait("wait = \"efficient\"\n"), Ok(HubWait::Efficient));
        assert_eq!(wait("wait = \"low-latency\"\n"), Ok(HubWait::LowLatency));
        let e = wait("wait = \"fast\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("\"fast\"") && e.message.contains("\"adaptive\" (the default)"), "{e}");
    }

    #[test]
    fn a_bad_size_names_its_line() {
        let e = parse("[hub]\nunix = \"h\"\nwrite_queue = \"4MB\"\n", Path::new("h.toml")).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("write_queue"), "{e}");
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
