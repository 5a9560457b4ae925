//! What every case gets ([`Ctx`]: the binaries, the main hub, the probe)
//! and how a case's line is judged and printed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::background::Report;
use crate::hub::{HubProc, Launch};
use crate::probe::{Probe, Reading};

/// A case's own verdict: `Ok(note)` passes, `Err(reason)` fails.
pub type Outcome = Result<String, String>;

/// Background p99 over this is flagged on the case's line (the issue's
/// target); see `docs/security.md` for why it is a warning by default.
pub const P99_TARGET: Duration = Duration::from_millis(5);
/// Background p99 over this fails the case: the hub stalled for everyone.
pub const P99_STALL: Duration = Duration::from_millis(250);
/// The main hub's resident memory must stay under this for the whole run.
pub const RSS_TARGET_KIB: u64 = 100 * 1024;

/// Everything a case may use.
pub struct Ctx {
    /// Where `hubwire-test-provider` and `hubwire-misbehave` are.
    pub bin: PathBuf,
    /// The `hubwire` binary under test.
    pub hub: PathBuf,
    /// The run's scratch directory (removed at the end).
    pub scratch: PathBuf,
    /// The main hub, shared by most cases, with the background clients on it.
    pub main: HubProc,
    /// Its TCP listener, `127.0.0.1:PORT`.
    pub tcp: String,
    /// Its HTTP gateway, `127.0.0.1:PORT`.
    pub http: String,
    /// Samples the hub under test.
    pub probe: Probe,
    seq: AtomicUsize,
}

/// An environment variable the main hub is started with, standing for a
/// secret of the hub's own (a cloud key, a token) no provider should see.
pub const HUB_SECRET_VAR: &str = "HW_HARDENING_HUB_SECRET";
/// Its value.
pub const HUB_SECRET: &str = "s3cr3t-of-the-hub";
/// A secret passed to a provider as a command-line flag.
pub const ARGV_SECRET: &str = "s3cr3t-in-argv";
/// A secret given to a provider in its config's `env`.
pub const ENV_SECRET: &str = "s3cr3t-in-env";
/// The method-name prefix of the provider whose names carry terminal
/// escapes (clear screen, set the window title, red).
pub const ESCAPE_PREFIX: &str = "\u{1b}[2J\u{1b}]0;pwned\u{7}\u{1b}[31mred.";

impl Ctx {
    /// Starts the main hub in `scratch/main`.
    pub fn new(bin: PathBuf, hub: Option<PathBuf>, scratch: PathBuf) -> Result<Ctx, String> {
        let hub = hub.unwrap_or_else(|| bin.join("hubwire"));
        let main = start_main(&bin, &hub, &scratch)?;
        let tcp = main.listening("accepting clients listen=tcp:").ok_or("the main hub logged no tcp listener")?;
        let http = main.listening("HTTP gateway").ok_or("the main hub logged no HTTP gateway")?;
        let probe = Probe::start(main.pid());
        Ok(Ctx { bin, hub, scratch, main, tcp, http, probe, seq: AtomicUsize::new(0) })
    }

    /// Restarts the main hub after it died (same directory, same socket).
    pub fn restart_main(&mut self) -> Result<(), String> {
        self.main = start_main(&self.bin, &self.hub, &self.scratch)?;
        self.tcp = self.main.listening("accepting clients listen=tcp:").unwrap_or_default();
        self.http = self.main.listening("HTTP gateway").unwrap_or_default();
        Ok(())
    }

    /// The `hubwire` binary.
    pub fn hub_bin(&self) -> PathBuf {
        self.hub.clone()
    }

    /// The well-behaved test provider.
    pub fn test_provider(&self) -> String {
        self.bin.join("hubwire-test-provider").display().to_string()
    }

    /// The provider that misbehaves on request.
    pub fn misbehave(&self) -> String {
        self.bin.join("hubwire-misbehave").display().to_string()
    }

    /// A fresh directory for a case (short: Unix socket paths are limited).
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.scratch.join(format!("{}-{name}", self.seq.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::create_dir_all(&d);
        d
    }

    /// Starts a hub of the case's own on `config` (which should listen on
    /// `unix = "hub.sock"` to be dialled) and watches it instead of the
    /// main hub until the next case.
    pub fn own_hub(&self, name: &str, config: &str, launch: &Launch) -> Result<HubProc, String> {
        let hub = HubProc::start(&self.hub_bin(), &self.dir(name), config, launch)?;
        self.probe.watch(hub.pid());
        Ok(hub)
    }
}

/// The main hub's config: every provider the shared cases call, default
/// limits everywhere.
fn main_config(bin: &Path) -> String {
    let tp = bin.join("hubwire-test-provider").display().to_string();
    let mb = bin.join("hubwire-misbehave").display().to_string();
    let esc: String = ESCAPE_PREFIX.chars().map(|c| if c.is_control() { format!("\\u{:04x}", c as u32) } else { c.to_string() }).collect();
    format!(
        r#"[hub]
name = "hardening"
unix = "hub.sock"
tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

# The background clients' echo, and the secrets status must not show.
[[provider]]
name = "t"
exec = ["{tp}", "--secret-flag", "{ARGV_SECRET}"]
env = {{ HW_PROVIDER_SECRET = "{ENV_SECRET}" }}
replicas = 2

# Killed with -9 under load.
[[provider]]
name = "k"
exec = ["{tp}", "--prefix", "k."]
replicas = 2
restart_backoff = "20ms"

# Slow, spewing, dying on request; few slots, a long queue.
[[provider]]
name = "m"
exec = ["{mb}"]
max_in_flight = 8
queue = 1024
restart_backoff = "20ms"

# Method names carrying terminal escape sequences.
[[provider]]
name = "esc"
exec = ["{tp}", "--prefix", "{esc}"]
"#
    )
}

fn start_main(bin: &Path, hub: &Path, scratch: &Path) -> Result<HubProc, String> {
    let launch = Launch { env: vec![(HUB_SECRET_VAR.into(), HUB_SECRET.into())], umask_zero: true, ..Launch::default() };
    HubProc::start(hub, &scratch.join("main"), &main_config(bin), &launch)
}

/// One printed line's figures.
pub struct Line {
    /// The case.
    pub name: String,
    /// PASS or FAIL.
    pub pass: bool,
    /// Why (or a note).
    pub reason: String,
    /// The hub watched: before, after, peak.
    pub before: Reading,
    /// After the case.
    pub after: Reading,
    /// Peak during it.
    pub peak: Reading,
    /// The background clients meanwhile.
    pub background: Report,
    /// How long the case took.
    pub took: Duration,
}

/// The table's head.
pub fn head() -> String {
    "| case | verdict | hub RSS MiB before/after/peak | hub fds before/after/peak | bg p99 ms | s | reason |\n|---|---|---|---|---|---|---|"
        .into()
}

impl Line {
    /// The line as a table row.
    pub fn row(&self) -> String {
        let mib = |r: Reading| r.rss_kib as f64 / 1024.0;
        format!(
            "| {} | {} | {:.0}/{:.0}/{:.0} | {}/{}/{} | {:.2} | {:.1} | {} |",
            self.name,
            if self.pass { "PASS" } else { "FAIL" },
            mib(self.before),
            mib(self.after),
            mib(self.peak),
            self.before.fds,
            self.after.fds,
            self.peak.fds,
            self.background.p99.as_secs_f64() * 1000.0,
            self.took.as_secs_f64(),
            self.reason.replace('|', "/"),
        )
    }
}
