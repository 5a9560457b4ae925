//! `[hub.tls]`: the tcp, http and websocket listeners over TLS, client
//! certificates, and the config errors around them. Certificates are made
//! fresh by each test (`hubwire_tests::pki`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use common::{temp_dir, Hub, TempDir, HUB, PROVIDER};
use hubwire::transport::{tcp, tls};
use hubwire::{Connection, ConnectionOptions};
use hubwire_tests::pki::TestPki;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ONE: &str = "[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\n";

/// A hub with a tls tcp listener, an HTTPS gateway and a WSS listener;
/// `client_ca` asks for client certificates. Returns the hub, the PKI's
/// directory (removed when dropped), and the tcp and http addresses (the
/// wss one is in the log).
async fn tls_hub(client_ca: bool) -> (Hub, TempDir, String, String) {
    let pki = temp_dir();
    TestPki::new("hub").write_to(&pki);
    let ca = if client_ca { format!("client_ca = \"{}/ca.pem\"\n", pki.display()) } else { String::new() };
    let extra = format!(
        "tcp = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nwebsocket = \"127.0.0.1:0\"\n[hub.tls]\ncert = \"{0}/server.pem\"\nkey = \"{0}/server.key\"\n{ca}",
        pki.display()
    );
    let hub = Hub::start_with(&extra, ONE, &[]);
    hub.wait_ready("test", 1).await;
    let (tcp, http) = (hub.listening("accepting clients listen=tls:"), hub.listening("HTTP gateway"));
    (hub, pki, tcp, http)
}

fn client(pki: &Path, with_cert: bool) -> std::sync::Arc<tls::rustls::ClientConfig> {
    let read = |f: &str| std::fs::read(pki.join(f)).unwrap();
    let (cert, key) = (read("client.pem"), read("client.key"));
    tls::client_config(&read("ca.pem"), with_cert.then_some((cert.as_slice(), key.as_slice()))).unwrap()
}

async fn dial_tls(addr: &str, config: std::sync::Arc<tls::rustls::ClientConfig>) -> Result<Connection, String> {
    let t = tls::connect(addr, config).await.map_err(|e| e.to_string())?;
    Connection::dial(t, &ConnectionOptions::new("tls-test")).await.map_err(|e| e.to_string())
}

/// `GET path` over HTTPS: (status line, body).
async fn https_get(addr: &str, config: std::sync::Arc<tls::rustls::ClientConfig>, path: &str) -> std::io::Result<(String, String)> {
    let mut s = tls::connect_stream(addr, config).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((head.lines().next().unwrap_or_default().to_string(), body.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_clients_are_served_on_tcp_and_https_and_plain_ones_are_not() {
    let (hub, pki, tcp_addr, http_addr) = tls_hub(false).await;
    // A client that connects and never starts its handshake holds up nobody.
    let _silent = tokio::net::TcpStream::connect(tcp_addr.as_str()).await.unwrap();
    let conn = dial_tls(&tcp_addr, client(&pki, false)).await.unwrap();
    assert_eq!(&conn.call_raw("echo", Bytes::from_static(b"over tls")).await.unwrap()[..], b"over tls");
    // Larger than one TLS record and than rustls' 64 KiB send buffer.
    let big = Bytes::from(vec![7u8; 300 * 1024]);
    assert_eq!(conn.call_raw("echo", big.clone()).await.unwrap(), big);

    let (status, body) = https_get(&http_addr, client(&pki, false), "/v1/methods").await.unwrap();
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains("\"echo\""), "{body}");

    // The WebSocket listener is WSS: the upgrade is answered over TLS.
    let wss = hub.listening("accepting clients listen=wss:").trim_start_matches("wss:").to_string();
    let upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: hubwire.v1\r\n";
    let mut s = tls::connect_stream(&wss, client(&pki, false)).await.unwrap();
    s.write_all(format!("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n{upgrade}\r\n").as_bytes()).await.unwrap();
    let mut head = vec![0u8; 12];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 101", "{}", String::from_utf8_lossy(&head));

    // Plain hubwire at the TLS listener: no HELLO ever comes back.
    let plain = Connection::dial(tcp::connect(tcp_addr.as_str()).await.unwrap(), &ConnectionOptions::new("plain")).await;
    assert!(plain.is_err(), "a plain client was served at the TLS listener");
    // Plain HTTP at the HTTPS gateway: no HTTP answer (the hub may reset
    // the connection before the request is even written).
    assert!(!plain_http_answered(&http_addr), "a plain HTTP request was answered at the HTTPS gateway");

    // The CLI, with --ca and without.
    let cli = |args: &[&str]| Command::new(HUB).args(args).output().unwrap();
    let ca = pki.join("ca.pem").display().to_string();
    let hub_flag = format!("tls:{tcp_addr}");
    let out = cli(&["call", "--hub", &hub_flag, "--ca", &ca, "sleep", r#"{"ms": 1}"#]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "\"slept 1 ms\"");
    let out = cli(&["list", "--hub", &hub_flag]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ca"), "{}", String::from_utf8_lossy(&out.stderr));
    drop(hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_client_ca_only_clients_with_a_certificate_are_served() {
    let (hub, pki, tcp_addr, http_addr) = tls_hub(true).await;
    let conn = dial_tls(&tcp_addr, client(&pki, true)).await.unwrap();
    assert_eq!(&conn.call_raw("echo", Bytes::from_static(b"mtls")).await.unwrap()[..], b"mtls");
    assert!(dial_tls(&tcp_addr, client(&pki, false)).await.is_err(), "served without a client certificate");

    // A certificate from another CA is no better than none.
    let other = temp_dir();
    TestPki::new("other").write_to(&other);
    let (cert, key) = (std::fs::read(other.join("client.pem")).unwrap(), std::fs::read(other.join("client.key")).unwrap());
    let stranger = tls::client_config(&std::fs::read(pki.join("ca.pem")).unwrap(), Some((&cert, &key))).unwrap();
    assert!(dial_tls(&tcp_addr, stranger).await.is_err(), "served with a certificate of another CA");

    assert!(https_get(&http_addr, client(&pki, true), "/healthz").await.unwrap().0.contains(" 200 "));
    assert!(https_get(&http_addr, client(&pki, false), "/healthz").await.is_err(), "HTTPS without a client certificate");

    let ca = pki.join("ca.pem").display().to_string();
    let (cert, key) = (pki.join("client.pem").display().to_string(), pki.join("client.key").display().to_string());
    let hub_flag = format!("tls:{tcp_addr}");
    let out = Command::new(HUB).args(["list", "--hub", &hub_flag, "--ca", &ca, "--cert", &cert, "--key", &key]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("echo"));
    drop(hub);
}

/// `hubwire hub --check` on `config` (written next to a fresh PKI, with
/// `{pki}` replaced by its directory): (exit code, stderr).
fn check(config: &str, key_mode: u32) -> (Option<i32>, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir();
    TestPki::new("check").write_to(&dir);
    std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(key_mode)).unwrap();
    std::fs::write(dir.join("not.pem"), "-----BEGIN NOTHING-----\n").unwrap();
    let path = dir.join("hubwire.toml");
    std::fs::write(&path, config.replace("{provider}", PROVIDER)).unwrap();
    let out = Command::new(HUB).args(["hub", "--check", "--config"]).arg(&path).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into())
}

fn refused(config: &str, key_mode: u32, line: usize, cause: &str) {
    let (code, err) = check(config, key_mode);
    assert_eq!(code, Some(2), "expected exit status 2 for:\n{config}\nstderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line, got:\n{err}");
    assert!(err.contains(&format!("hubwire.toml:{line}: ")), "names file and line {line}: {err}");
    assert!(err.contains(cause), "names the cause {cause:?}: {err}");
}

const TLS: &str = "[hub.tls]\ncert = \"server.pem\"\nkey = \"server.key\"\n";

#[test]
fn a_network_listener_needs_tls_or_allow_insecure() {
    for (key, addr) in [("tcp", "0.0.0.0:0"), ("http", "[::]:0"), ("websocket", "192.0.2.1:0"), ("tcp", "example.com:7470")] {
        let why = format!("[hub] {key} = \"{addr}\" is reachable from other machines with neither TLS nor a token");
        refused(&format!("[hub]\nunix = \"hub.sock\"\n{key} = \"{addr}\"\n"), 0o600, 3, &why);
    }
    let (code, err) = check("[hub]\ntcp = \"0.0.0.0:0\"\nallow_insecure = true\n", 0o600);
    assert_eq!(code, Some(0), "allow_insecure = true is the way out: {err}");
    let (code, err) = check(&format!("[hub]\ntcp = \"0.0.0.0:0\"\nhttp = \"0.0.0.0:0\"\n{TLS}"), 0o600);
    assert_eq!(code, Some(0), "TLS is protection: {err}");
    for addr in ["127.0.0.1:0", "127.9.9.9:0", "[::1]:0", "localhost:0"] {
        let (code, err) = check(&format!("[hub]\ntcp = \"{addr}\"\n"), 0o600);
        assert_eq!(code, Some(0), "{addr} is loopback: {err}");
    }
}

#[test]
fn bad_tls_files_are_refused_with_their_line() {
    let hub = "[hub]\ntcp = \"127.0.0.1:0\"\n";
    refused(&format!("{hub}{TLS}"), 0o640, 5, "lets group or others read it; chmod 600");
    refused(&format!("{hub}{TLS}"), 0o604, 5, "lets group or others read it");
    refused(&format!("{hub}[hub.tls]\ncert = \"not.pem\"\nkey = \"server.key\"\n"), 0o600, 4, "a PEM block is not closed");
    refused(&format!("{hub}[hub.tls]\ncert = \"server.key\"\nkey = \"server.key\"\n"), 0o600, 4, "no CERTIFICATE block");
    refused(&format!("{hub}[hub.tls]\ncert = \"server.pem\"\nkey = \"server.pem\"\n"), 0o600, 5, "no PRIVATE KEY block");
    refused(&format!("{hub}[hub.tls]\ncert = \"missing.pem\"\nkey = \"server.key\"\n"), 0o600, 4, "cannot read it");
    refused(&format!("{hub}{TLS}client_ca = \"not.pem\"\n"), 0o600, 6, "client_ca");
    refused(&format!("{hub}[hub.tls]\ncert = \"server.pem\"\n"), 0o600, 3, "[hub.tls] needs key");
    refused(&format!("{hub}{TLS}ca = \"x\"\n"), 0o600, 6, "unknown field `ca`");
    // The key of another certificate.
    refused(&format!("{hub}[hub.tls]\ncert = \"server.pem\"\nkey = \"client.key\"\n"), 0o600, 4, "cert and key");
}

/// Whether a plain-text HTTP request to `addr` gets an HTTP status line
/// back; a write or read that fails (the peer closed or reset) is "no".
fn plain_http_answered(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
    if s.write_all(b"GET /v1/methods HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    raw.starts_with(b"HTTP/1.")
}
