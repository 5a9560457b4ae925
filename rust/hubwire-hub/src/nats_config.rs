//! `[nats]` of `hubwire.toml`: the NATS cluster the hub joins
//! (`docs/hub.md`, "Joining a NATS cluster"). Checked like the rest of the
//! config: one line naming the file, the line and what is wrong. Secret
//! files (a password, a token, a `.creds` file, a TLS key) are read here
//! and refused when group or others may read them, as `token_file` is
//! (`trust::private_mode`); their contents never appear in an error or in
//! `Debug` output.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// `[nats]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct NatsToml {
    url: Option<Spanned<Urls>>,
    user: Option<Spanned<String>>,
    password_file: Option<Spanned<String>>,
    token_file: Option<Spanned<String>>,
    creds: Option<Spanned<String>>,
    ca: Option<Spanned<String>>,
    cert: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    prefix: Option<Spanned<String>>,
    offer: Option<bool>,
    route: Option<bool>,
    links: Option<Spanned<i64>>,
    remote_methods: Option<Spanned<i64>>,
    max_links: Option<Spanned<i64>>,
    discovery_timeout: Option<Spanned<String>>,
}

/// One server URL or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum Urls {
    One(String),
    Many(Vec<String>),
}

/// A secret read from a private file: shown as `<secret>` by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

/// How the hub proves who it is to the NATS servers: one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NatsAuth {
    /// None (or what the URLs carry, `nats://user:pass@host`).
    None,
    /// `user` and the first line of `password_file`.
    UserPassword {
        /// The user name.
        user: String,
        /// The password.
        password: Secret,
    },
    /// The first line of `token_file`.
    Token(Secret),
    /// A `.creds` file (a JWT and its NKey seed), read by the NATS client.
    Creds(PathBuf),
}

/// `[nats]`, checked.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// The line of `[nats]`.
    pub line: usize,
    /// Server URLs (`nats://host:port`, `tls://host:port`), tried in turn.
    pub servers: Vec<String>,
    /// Credentials.
    pub auth: NatsAuth,
    /// CA certificates (PEM) that signed the servers' certificates.
    pub ca: Option<PathBuf>,
    /// Our client certificate and its key (PEM), when the servers ask.
    pub identity: Option<(PathBuf, PathBuf)>,
    /// The first tokens of every hubwire subject (`spec/PROTOCOL.md`,
    /// hubwire over NATS): hubs and providers with the same prefix see
    /// each other, others do not.
    pub prefix: String,
    /// Serve this hub's local methods to the cluster.
    pub offer: bool,
    /// Send a call for a method no local provider offers to the cluster.
    pub route: bool,
    /// Links a hub keeps open per remote method (each to a replica the
    /// cluster picks), so calls spread and one dead replica stops nothing.
    pub links: usize,
    /// Remote methods the hub keeps links for at once.
    pub remote_methods: usize,
    /// Links from the cluster the hub serves at once.
    pub max_links: usize,
    /// How long `hubwire list`/`status` wait for the cluster's answers
    /// to discovery (`$SRV.INFO`, `$SRV.STATS`).
    pub discovery_timeout: Duration,
}

/// `links` when not set.
pub const DEFAULT_LINKS: usize = 2;
/// `remote_methods` when not set.
pub const DEFAULT_REMOTE_METHODS: usize = 1024;
/// `max_links` when not set.
pub const DEFAULT_MAX_LINKS: usize = 1024;
/// `prefix` when not set.
pub const DEFAULT_PREFIX: &str = "hubwire";

/// Reads `[nats]`: `line` is its header's, `line_of` turns a byte offset
/// into a line, `base` is the config's directory. `Err` is a line and why.
pub(crate) fn section(t: NatsToml, line: usize, base: &Path, line_of: &dyn Fn(usize) -> usize) -> Result<NatsConfig, (usize, String)> {
    let at = |s: &Spanned<String>| line_of(s.span().start);
    let path = |s: &Spanned<String>| base.join(s.get_ref());
    let Some(url) = t.url else {
        return Err((line, "[nats] needs url = \"nats://HOST:PORT\" (or a list of them)".into()));
    };
    let url_line = line_of(url.span().start);
    let servers = match url.into_inner() {
        Urls::One(u) => vec![u],
        Urls::Many(v) => v,
    };
    if servers.is_empty() {
        return Err((url_line, "[nats] url = []: give at least one server".into()));
    }
    if let Some(bad) = servers.iter().find_map(|u| check_url(u).err()) {
        return Err((url_line, format!("[nats] url: {bad}")));
    }
    let auth = match (t.user, t.password_file, t.token_file, t.creds) {
        (None, None, None, None) => NatsAuth::None,
        (Some(u), Some(p), None, None) => {
            let password = secret_line(&path(&p)).map_err(|e| (at(&p), format!("[nats] password_file: {e}")))?;
            NatsAuth::UserPassword { user: u.into_inner(), password }
        }
        (None, None, Some(f), None) => NatsAuth::Token(secret_line(&path(&f)).map_err(|e| (at(&f), format!("[nats] token_file: {e}")))?),
        (None, None, None, Some(c)) => {
            private(&path(&c)).map_err(|e| (at(&c), format!("[nats] creds: {e}")))?;
            NatsAuth::Creds(path(&c))
        }
        (Some(u), None, None, None) => return Err((at(&u), "[nats] user needs password_file (a file holding the password)".into())),
        (None, Some(p), None, None) => return Err((at(&p), "[nats] password_file needs user".into())),
        _ => return Err((line, "[nats]: give one of user + password_file, token_file or creds, not several".into())),
    };
    let ca = t.ca.as_ref().map(path);
    let identity = match (t.cert, t.key) {
        (None, None) => None,
        (Some(c), Some(k)) => {
            private(&path(&k)).map_err(|e| (at(&k), format!("[nats] key: {e}")))?;
            Some((path(&c), path(&k)))
        }
        (Some(c), None) => return Err((at(&c), "[nats] cert needs key".into())),
        (None, Some(k)) => return Err((at(&k), "[nats] key needs cert".into())),
    };
    let prefix = match t.prefix {
        None => DEFAULT_PREFIX.to_string(),
        Some(p) => {
            check_prefix(p.get_ref()).map_err(|why| (at(&p), format!("[nats] prefix = {:?}: {why}", p.get_ref())))?;
            p.into_inner()
        }
    };
    let count = |v: Option<Spanned<i64>>, what: &str, max: i64, default: usize| match v {
        None => Ok(default),
        Some(n) if (1..=max).contains(n.get_ref()) => Ok(*n.get_ref() as usize),
        Some(n) => Err((line_of(n.span().start), format!("[nats] {what} = {} must be between 1 and {max}", n.get_ref()))),
    };
    let discovery_timeout = match t.discovery_timeout {
        None => Duration::from_millis(500),
        Some(d) => crate::config::parse_duration(d.get_ref()).filter(|d| !d.is_zero() && *d <= Duration::from_secs(60)).ok_or((
            at(&d),
            format!("[nats] discovery_timeout = {:?}: expected a duration between 1ms and 60s, like \"500ms\"", d.get_ref()),
        ))?,
    };
    Ok(NatsConfig {
        line,
        servers,
        auth,
        ca,
        identity,
        prefix,
        offer: t.offer.unwrap_or(true),
        route: t.route.unwrap_or(true),
        links: count(t.links, "links", 16, DEFAULT_LINKS)?,
        remote_methods: count(t.remote_methods, "remote_methods", 1_000_000, DEFAULT_REMOTE_METHODS)?,
        max_links: count(t.max_links, "max_links", 1_000_000, DEFAULT_MAX_LINKS)?,
        discovery_timeout,
    })
}

/// `nats://host:port`, `tls://host:port` (the port may be left out:
/// 4222); user and password may come before the host.
pub fn check_url(u: &str) -> Result<(), String> {
    let Some((scheme, rest)) = u.split_once("://") else {
        return Err(format!("{u:?} is not a URL: write it like \"nats://127.0.0.1:4222\""));
    };
    if !matches!(scheme, "nats" | "tls") {
        return Err(format!("{u:?}: the scheme must be nats:// or tls://"));
    }
    let host_port = rest.rsplit_once('@').map_or(rest, |(_, h)| h).trim_end_matches('/');
    let (host, port) = match host_port.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, Some(p)),
        _ => (host_port, None),
    };
    if host.is_empty() || host.contains('/') {
        return Err(format!("{u:?} has no host"));
    }
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err(format!("{u:?}: the port is not a number from 0 to 65535"));
    }
    Ok(())
}

/// Subject tokens: non-empty, separated by single dots, of letters,
/// digits, `-` and `_` (no wildcard, no space).
pub fn check_prefix(p: &str) -> Result<(), &'static str> {
    let ok = !p.is_empty() && p.split('.').all(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    if ok {
        Ok(())
    } else {
        Err("expected subject tokens of letters, digits, '-' and '_' separated by dots, like \"hubwire\" or \"acme.prod\"")
    }
}

/// Refuses a secret file that group or others may read.
fn private(path: &Path) -> Result<(), String> {
    match crate::trust::private_mode(path).map_err(|e| format!("cannot read {}: {e}", path.display()))? {
        Some(mode) => Err(format!("{} is accessible by group or others (mode {mode:04o}); make it private: chmod 600", path.display())),
        None => Ok(()),
    }
}

/// The first line of a private file, trimmed, not empty.
fn secret_line(path: &Path) -> Result<Secret, String> {
    private(path)?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(Secret(line.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_one_by_one() {
        for good in ["nats://127.0.0.1:4222", "nats://a", "tls://u:p@h.example:4443", "nats://[::1]:4222"] {
            assert_eq!(check_url(good), Ok(()), "{good}");
        }
        for bad in ["127.0.0.1:4222", "http://h:1", "nats://:4222", "nats://h:99999", "nats://h:x"] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefixes_are_subject_tokens() {
        assert!(check_prefix("hubwire").is_ok() && check_prefix("acme.prod-1").is_ok());
        for bad in ["", "a..b", ".a", "a.", "a b", "a.*", "a.>"] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
    }

    fn parse(nats: &str, dir: &Path) -> Result<NatsConfig, crate::config::ConfigError> {
        let text = format!("[hub]\nunix = \"h.sock\"\n\n[nats]\n{nats}");
        crate::config::parse(&text, &dir.join("hubwire.toml")).map(|c| c.nats.expect("[nats] is read"))
    }

    fn refused(nats: &str, dir: &Path, line: usize, cause: &str) {
        let e = parse(nats, dir).unwrap_err();
        assert_eq!(e.line, Some(line), "{e}");
        assert!(e.message.contains(cause), "names {cause:?}: {e}");
    }

    /// A directory of secret files, one per test (the tests run at once),
    /// removed when the test that holds it ends, passed or failed.
    fn secret_dir() -> hubwire_tests::harness::TempDir {
        use std::os::unix::fs::PermissionsExt;
        let d = hubwire_tests::harness::TempDir::new("nats-config");
        for (name, mode) in [("ok.secret", 0o600), ("open.secret", 0o644)] {
            std::fs::write(d.0.join(name), "pa55\n").unwrap();
            std::fs::set_permissions(d.0.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        d
    }

    #[test]
    fn defaults_and_several_servers_are_read() {
        let dir = secret_dir();
        let d = dir.0.clone();
        let c = parse("url = \"nats://127.0.0.1:4222\"\n", &d).unwrap();
        assert_eq!((c.servers.len(), c.offer, c.route, c.links, c.prefix.as_str()), (1, true, true, DEFAULT_LINKS, DEFAULT_PREFIX));
        assert_eq!((c.auth, c.line), (NatsAuth::None, 4));
        let c = parse("url = [\"nats://a:1\", \"nats://b:2\"]\nuser = \"hub\"\npassword_file = \"ok.secret\"\nprefix = \"acme.prod\"\noffer = false\nlinks = 3\n", &d).unwrap();
        assert_eq!(c.servers, ["nats://a:1", "nats://b:2"]);
        assert_eq!(c.auth, NatsAuth::UserPassword { user: "hub".into(), password: Secret("pa55".into()) });
        assert_eq!((c.prefix.as_str(), c.offer, c.links), ("acme.prod", false, 3));
        let c = parse("url = \"nats://a\"\ncreds = \"ok.secret\"\n", &d).unwrap();
        assert_eq!(c.auth, NatsAuth::Creds(d.join("ok.secret")));
    }

    #[test]
    fn broken_values_name_their_line() {
        let dir = secret_dir();
        let d = dir.0.clone();
        refused("offer = true\n", &d, 4, "needs url");
        refused("url = \"127.0.0.1:4222\"\n", &d, 5, "is not a URL");
        refused("url = []\n", &d, 5, "at least one server");
        refused("url = \"nats://a\"\ntoken_file = \"open.secret\"\n", &d, 6, "accessible by group or others (mode 0644)");
        refused("url = \"nats://a\"\ncreds = \"open.secret\"\n", &d, 6, "chmod 600");
        refused("url = \"nats://a\"\ncreds = \"missing.creds\"\n", &d, 6, "cannot read");
        refused("url = \"nats://a\"\nuser = \"u\"\n", &d, 6, "needs password_file");
        refused("url = \"nats://a\"\ntoken_file = \"ok.secret\"\ncreds = \"ok.secret\"\n", &d, 4, "not several");
        refused("url = \"nats://a\"\ncert = \"c.pem\"\n", &d, 6, "cert needs key");
        refused("url = \"nats://a\"\ncert = \"c.pem\"\nkey = \"open.secret\"\n", &d, 7, "[nats] key");
        refused("url = \"nats://a\"\nprefix = \"a.*\"\n", &d, 6, "subject tokens");
        refused("url = \"nats://a\"\nlinks = 0\n", &d, 6, "between 1 and 16");
        refused("url = \"nats://a\"\ndiscovery_timeout = \"5h\"\n", &d, 6, "discovery_timeout");
        refused("url = \"nats://a\"\nlink = 2\n", &d, 6, "unknown field `link`");
    }

    #[test]
    fn a_hub_that_offers_to_a_cluster_needs_no_listener() {
        let ok = crate::config::parse("[nats]\nurl = \"nats://a\"\n", Path::new("h.toml"));
        assert!(ok.is_ok(), "{:?}", ok.err());
        let e = crate::config::parse("[nats]\nurl = \"nats://a\"\noffer = false\n", Path::new("h.toml")).unwrap_err();
        assert!(e.message.contains("no listener"), "{e}");
    }

    #[test]
    fn a_secret_never_shows_in_debug() {
        let a = NatsAuth::Token(Secret("s3cr3t".into()));
        assert!(!format!("{a:?}").contains("s3cr3t"));
    }
}
