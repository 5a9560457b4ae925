//! `[hub.tls]` and `allow_insecure`: TLS on the network listeners, and
//! the refusal of a listener open to the network with no protection.
//!
//! The config only records paths (with their lines); the PEM files are
//! read by [`acceptor`] when the hub binds (and by `hubwire hub --check`),
//! so that `hubwire status` reading the same config needs no access to
//! the key.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use hubwire::transport::tls;
use serde::Deserialize;
use toml::Spanned;

use crate::config::{ConfigError, HubSection, Located};

/// `[hub.tls]`, checked: PEM paths resolved against the config file's
/// directory.
#[derive(Debug, Clone)]
pub struct TlsSection {
    /// The server's certificate chain (PEM).
    pub cert: Located<PathBuf>,
    /// Its private key (PEM); refused when group or others may access it.
    pub key: Located<PathBuf>,
    /// CA certificates (PEM) that client certificates must be signed by;
    /// when set, a client without one is refused at the handshake.
    pub client_ca: Option<Located<PathBuf>>,
}

/// `[hub.tls]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TlsToml {
    cert: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    client_ca: Option<Spanned<String>>,
}

/// Checks `[hub.tls]` (written on `line`); `line_of` turns a byte offset
/// of the config text into its line.
pub(crate) fn section(t: TlsToml, line: usize, base: &Path, line_of: &dyn Fn(usize) -> usize) -> Result<TlsSection, (usize, String)> {
    let path = |s: Spanned<String>| Located { line: line_of(s.span().start), value: base.join(s.into_inner()) };
    let need = |v: Option<Spanned<String>>, what: &str| v.map(path).ok_or((line, format!("[hub.tls] needs {what} (a PEM file)")));
    Ok(TlsSection { cert: need(t.cert, "cert")?, key: need(t.key, "key")?, client_ca: t.client_ca.map(path) })
}

/// Whether the network listeners are protected: TLS, or a token (from
/// `token_file` or `HUBWIRE_TOKEN`).
pub fn protected(h: &HubSection) -> bool {
    h.tls.is_some() || h.token.is_some()
}

/// Whether a listen address (`host:port`) is on the loopback interface:
/// `127.0.0.0/8`, `[::1]` or `localhost`.
pub fn is_loopback(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses a `tcp`, `http` or `websocket` listener on a non-loopback
/// address when the hub is not [`protected`], unless `allow_insecure`.
pub(crate) fn check_exposure(h: &HubSection) -> Result<(), (usize, String)> {
    if h.allow_insecure || protected(h) {
        return Ok(());
    }
    let listeners = [("tcp", &h.tcp), ("http", &h.http), ("websocket", &h.websocket)];
    for (what, at) in listeners {
        if let Some(at) = at.as_ref().filter(|a| !is_loopback(&a.value)) {
            return Err((
                at.line,
                format!(
                    "[hub] {what} = {:?} is reachable from other machines with neither TLS nor a token: \
                     add [hub.tls] (cert, key), listen on 127.0.0.1, or set allow_insecure = true in [hub] if the network is trusted",
                    at.value
                ),
            ));
        }
    }
    Ok(())
}

/// Reads a PEM file named in `[hub.tls]`.
fn read(file: &Path, what: &str, at: &Located<PathBuf>) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(&at.value).map_err(|e| err(file, at, format!("[hub.tls] {what} = {:?}: cannot read it: {e}", at.value.display())))
}

fn err(file: &Path, at: &Located<PathBuf>, message: String) -> ConfigError {
    ConfigError { file: file.display().to_string(), line: Some(at.line), message }
}

/// Reads the certificate, key and client CA of `[hub.tls]` and builds the
/// TLS acceptor the network listeners share. `file` is the config file,
/// for errors.
pub fn acceptor(file: &Path, t: &TlsSection) -> Result<tls::Acceptor, ConfigError> {
    let open = crate::trust::private_mode(&t.key.value)
        .map_err(|e| err(file, &t.key, format!("[hub.tls] key = {:?}: cannot read it: {e}", t.key.value.display())))?;
    if let Some(mode) = open {
        return Err(err(
            file,
            &t.key,
            format!("[hub.tls] key = {:?}: mode {:o} lets group or others read it; chmod 600 it (or 400)", t.key.value.display(), mode),
        ));
    }
    let cert = read(file, "cert", &t.cert)?;
    let key = read(file, "key", &t.key)?;
    let ca = t.client_ca.as_ref().map(|at| read(file, "client_ca", at)).transpose()?;
    // Check each part alone first, so that the error names its line: the
    // key's PEM, the certificate with it, then the client CA.
    let pem_err = |at: &Located<PathBuf>, e: std::io::Error| err(file, at, format!("[hub.tls] {e} (in {:?})", at.value.display()));
    tls::key_from_pem(&key, "key").map_err(|e| pem_err(&t.key, e))?;
    let mut config = tls::server_config(&cert, &key, None).map_err(|e| pem_err(&t.cert, e))?;
    if let (Some(at), Some(ca)) = (&t.client_ca, &ca) {
        config = tls::server_config(&cert, &key, Some(ca)).map_err(|e| pem_err(at, e))?;
    }
    Ok(tls::Acceptor::new(config, ca.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_are_recognised() {
        for a in ["127.0.0.1:7470", "127.1.2.3:0", "[::1]:80", "localhost:1", "LOCALHOST:2"] {
            assert!(is_loopback(a), "{a}");
        }
        for a in ["0.0.0.0:7470", "[::]:1", "10.0.0.1:2", "example.com:3", "localhost.example.com:4", "[::ffff:8.8.8.8]:5"] {
            assert!(!is_loopback(a), "{a}");
        }
    }
}
