//! Who may talk to the hub from a browser: the `Origin` and `Host` checks
//! made before an HTTP request (or a WebSocket upgrade) is served.
//!
//! * `Origin` stops cross-site requests: any page the user opens may make
//!   the browser connect to a loopback port, but the browser always says
//!   which site the page came from. A request without `Origin` did not
//!   come from a page (curl, the CLI, a program), so it is allowed.
//! * `Host` stops DNS rebinding: a hostile name that resolves to 127.0.0.1
//!   makes the browser treat the hub as that name's own site (so `Origin`
//!   would match it), but the `Host` header still carries the hostile name.

use std::net::SocketAddr;

/// Whether a request with this `Origin` header may be served: no header
/// (not a browser), or one equal to an entry of `allowed` (`scheme://host[:port]`,
/// compared without regard to ASCII case, as browsers serialize origins in
/// lower case but people may not write them so).
pub fn origin_allowed(origin: Option<&str>, allowed: &[String]) -> bool {
    match origin {
        None => true,
        Some(o) => allowed.iter().any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(o)),
    }
}

/// Whether a request with this `Host` header may be served.
///
/// With `allowed` empty, the names every local client uses are allowed:
/// `localhost`, `127.0.0.1`, `[::1]` and the listener's own address (so a
/// hub listening on `10.0.0.7` is reachable as `10.0.0.7`). An entry
/// without a port matches the host on any port; one with a port
/// (`hub.example:8443`) matches only that. A request without `Host` (not
/// HTTP/1.1) is refused.
pub fn host_allowed(host: Option<&str>, allowed: &[String], listen: &SocketAddr) -> bool {
    let Some(host) = host else { return false };
    let name = host_name(host);
    if allowed.is_empty() {
        let own = match listen {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        };
        return ["localhost", "127.0.0.1", "[::1]", own.as_str()].iter().any(|d| d.eq_ignore_ascii_case(name));
    }
    allowed.iter().any(|a| if host_name(a).len() == a.len() { a.eq_ignore_ascii_case(name) } else { a.eq_ignore_ascii_case(host) })
}

/// The host part of a `Host` value: `[::1]:7472` → `[::1]`,
/// `localhost:7472` → `localhost`, `example.org` → itself.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn origins_are_allowed_only_when_listed_or_absent() {
        let allowed = list(&["http://localhost:8080", "https://App.example/"]);
        assert!(origin_allowed(None, &[]), "no Origin: not a browser");
        assert!(!origin_allowed(Some("http://evil.example"), &[]), "nothing listed: no page may connect");
        assert!(origin_allowed(Some("http://localhost:8080"), &allowed));
        assert!(origin_allowed(Some("https://app.example"), &allowed), "case and a trailing slash do not matter");
        assert!(!origin_allowed(Some("http://localhost:8081"), &allowed), "the port is part of the origin");
        assert!(!origin_allowed(Some("null"), &allowed), "a sandboxed or file: page");
    }

    #[test]
    fn hosts_default_to_loopback_names_and_the_listen_address() {
        let lo: SocketAddr = "127.0.0.1:7472".parse().unwrap();
        for ok in ["localhost:7472", "127.0.0.1:7472", "[::1]:7472", "LOCALHOST", "127.0.0.1"] {
            assert!(host_allowed(Some(ok), &[], &lo), "{ok}");
        }
        for bad in ["evil.example:7472", "localhost.evil.example", "127.0.0.2:7472", ""] {
            assert!(!host_allowed(Some(bad), &[], &lo), "{bad}");
        }
        assert!(!host_allowed(None, &[], &lo), "no Host header");
        let lan: SocketAddr = "10.0.0.7:7472".parse().unwrap();
        assert!(host_allowed(Some("10.0.0.7:7472"), &[], &lan));
        let v6: SocketAddr = "[fd00::7]:7472".parse().unwrap();
        assert!(host_allowed(Some("[fd00::7]:7472"), &[], &v6));
    }

    #[test]
    fn listed_hosts_replace_the_defaults_and_may_pin_a_port() {
        let lo: SocketAddr = "127.0.0.1:7472".parse().unwrap();
        let allowed = list(&["hub.example", "other.example:8443"]);
        assert!(host_allowed(Some("hub.example:7472"), &allowed, &lo), "no port listed: any port");
        assert!(host_allowed(Some("Other.Example:8443"), &allowed, &lo));
        assert!(!host_allowed(Some("other.example:7472"), &allowed, &lo), "a listed port must match");
        assert!(!host_allowed(Some("localhost:7472"), &allowed, &lo), "the list replaces the defaults");
    }
}
