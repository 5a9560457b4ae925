//! Connections and local trust: the Unix socket's mode and peers, the
//! connection limits' GOAWAY, the HTTP gateway's browser checks, the
//! config file's trust, a provider's environment, and peer-supplied text
//! printed escaped. Nothing here is timed: time bounds live in the
//! hardening suite.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Hub;
use hubwire::transport::unix;
use hubwire::{Code, Connection, ConnectionOptions};

/// `hubwire hub` on `config` written with `mode` (and extra arguments);
/// returns (exit code or None if it kept running, stderr).
fn start(config: &str, mode: u32, args: &[&str]) -> (Option<i32>, String) {
    let dir = common::temp_dir();
    let path = dir.join("hubwire.toml");
    std::fs::write(&path, config.replace("{provider}", common::PROVIDER)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    let (code, err) = run_hub(&path, args);
    (code, err)
}

/// Runs the hub on `path` until it exits or has started; stops it if it
/// started.
fn run_hub(path: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let log = path.with_file_name("hub.log");
    let mut child = Command::new(common::HUB)
        .arg("hub")
        .arg("--config")
        .arg(path)
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if text().contains("hub started") || std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (code, text())
}

const HUB: &str = "[hub]\nunix = \"hub.sock\"\n";

#[test]
fn a_config_others_can_write_is_refused_unless_allowed() {
    let (code, err) = start(HUB, 0o666, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("hubwire.toml: the config is writable by anyone (mode 0666)"), "{err}");
    let (code, err) = start(HUB, 0o620, &["--check"]);
    assert_eq!(code, Some(2), "--check refuses it too: {err}");
    assert!(err.contains("writable by its group"), "{err}");
    let (code, err) = start(HUB, 0o666, &["--allow-insecure-config"]);
    assert_eq!(code, None, "loaded anyway: {err}");
    assert!(err.starts_with("warning: ") && err.contains("--allow-insecure-config"), "{err}");
}

#[test]
fn a_symlinked_config_is_followed_when_ours_and_refused_when_another_users() {
    let dir = common::temp_dir();
    let real = dir.join("real.toml");
    std::fs::write(&real, HUB).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = dir.join("hubwire.toml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (code, err) = run_hub(&link, &[]);
    assert_eq!(code, None, "our own link is followed: {err}");
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let (code, err) = run_hub(&link, &[]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("a symlink owned by uid 65534"), "{err}");
    }
}

#[test]
fn the_unix_path_must_be_a_socket_or_free_and_the_keys_are_checked() {
    let dir = common::temp_dir();
    std::fs::write(dir.join("notes.txt"), "mine\n").unwrap();
    let path = dir.join("hubwire.toml");
    std::fs::write(&path, "[hub]\nname = \"x\"\nunix = \"notes.txt\"\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, err) = run_hub(&path, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("hubwire.toml:3: [hub] unix = ") && err.contains("exists and is not a socket (a regular file)"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine\n", "left as it was");
    for (extra, line, cause) in [
        ("unix_mode = \"0644x\"", 3, "expected octal permission bits"),
        ("unix_mode = \"0400\"", 3, "with owner read and write"),
        ("unix_group = \"no-such-group-hubwire\"", 3, "no such group"),
        ("allow_uids = [-1]", 3, "-1 is not a uid"),
        ("max_connections = 0", 3, "between 1 and"),
        ("idle_timeout = \"0s\"", 3, "more than zero"),
    ] {
        let (code, err) = start(&format!("{HUB}{extra}\n"), 0o600, &[]);
        assert_eq!(code, Some(2), "{extra}: {err}");
        assert!(err.contains(&format!("hubwire.toml:{line}: ")) && err.contains(cause), "{extra}: {err}");
    }
}

#[test]
fn the_socket_gets_its_mode_whatever_the_umask() {
    for (extra, want) in [("", 0o600), ("unix_mode = \"0660\"\n", 0o660)] {
        let dir = common::temp_dir();
        let path = dir.join("hubwire.toml");
        std::fs::write(&path, format!("{HUB}{extra}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut cmd = Command::new(common::HUB);
        cmd.arg("hub").arg("--config").arg(&path).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: umask is async-signal-safe and touches only the child.
        unsafe {
            cmd.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let sock = dir.join("hub.sock");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(std::time::Instant::now() < deadline, "the hub did not listen");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(mode, want, "{extra:?} under umask 000");
    }
}

/// Dials the hub's socket and returns how the handshake ended.
async fn dial(hub: &Hub) -> Result<Connection, hubwire::Error> {
    let t = unix::connect(&hub.socket).await.unwrap();
    Connection::dial(t, &ConnectionOptions::new("test-client")).await
}

#[tokio::test]
async fn a_connection_over_the_per_peer_limit_gets_goaway_resource_exhausted() {
    let hub = Hub::start_with("max_connections_per_peer = 2\n", "", &[]);
    let (_a, _b) = (hub.connect().await, hub.connect().await);
    let e = dial(&hub).await.err().expect("a third connection from the same uid is refused");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert!(e.message().contains("max_connections_per_peer = 2"), "names the limit: {e}");
    drop(_a);
    // The place comes back once the hub has seen the first one go.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while dial(&hub).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "the place never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_uid_not_allowed_gets_goaway_unauthenticated_naming_it() {
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    let other = if me == 12345 { 12346 } else { 12345 };
    let hub = Hub::start_with(&format!("allow_uids = [{other}]\n"), "", &[]);
    let e = dial(&hub).await.err().expect("our uid is not listed");
    assert_eq!(e.code(), Code::Unauthenticated, "{e}");
    assert!(e.message().contains(&format!("uid {me} ")), "names the uid: {e}");
}

/// One HTTP/1.1 request with `headers`; returns the status.
fn http_status(addr: &str, head: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // A refused connection may be closed before the request is written.
    let _ = write!(s, "{head}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn the_gateway_takes_json_calls_only_and_checks_host_and_origin() {
    let hub = Hub::start_with("http = \"127.0.0.1:0\"\n", "[[provider]]\nname = \"t\"\nexec = [\"{provider}\"]\n", &[]);
    hub.wait_ready("t", 1).await;
    let addr = hub.listening("HTTP gateway");
    let call = |host: &str, extra: &str| format!("POST /v1/call/sleep HTTP/1.1\r\nHost: {host}{extra}");
    let ok = http_status(&addr, &call(&addr, "\r\nContent-Type: application/json"), r#"{"ms": 1}"#);
    assert_eq!(ok, 200);
    assert_eq!(http_status(&addr, &call(&addr, "\r\nContent-Type: text/plain"), r#"{"ms": 1}"#), 415, "a form-safe type");
    assert_eq!(http_status(&addr, &call(&addr, ""), r#"{"ms": 1}"#), 415, "no type at all");
    assert_eq!(http_status(&addr, &call("evil.example", "\r\nContent-Type: application/json"), r#"{"ms": 1}"#), 403, "DNS rebinding");
    let cross = call(&addr, "\r\nContent-Type: application/json\r\nOrigin: http://evil.example");
    assert_eq!(http_status(&addr, &cross, r#"{"ms": 1}"#), 403, "a foreign page");
}

#[tokio::test]
async fn a_provider_gets_a_minimal_environment_plus_env_pass_and_env() {
    let providers = "[[provider]]\nname = \"t\"\nexec = [\"{provider}\"]\nenv_pass = [\"HW_PASSED\"]\nenv = { HW_SET = \"1\" }\n";
    let hub = Hub::start_env("", providers, &[], &[("HW_SECRET", "s3cr3t"), ("HW_PASSED", "yes")]);
    hub.wait_ready("t", 1).await;
    let env: Vec<String> = hub.connect().await.call("env", &()).await.unwrap();
    assert!(!env.iter().any(|v| v.contains("s3cr3t")), "the hub's own variables stay with the hub: {env:?}");
    // (HUBWIRE_FD was there: the provider's runtime read it, and removes
    // it so that its own children do not inherit it.)
    for want in ["HW_PASSED=yes", "HW_SET=1"] {
        assert!(env.iter().any(|v| v == want), "{want} in {env:?}");
    }
    assert!(env.iter().any(|v| v.starts_with("PATH=")), "{env:?}");
}

#[tokio::test]
async fn peer_supplied_names_are_printed_escaped() {
    let providers = "[[provider]]\nname = \"esc\"\nexec = [\"{provider}\", \"--prefix\", \"\\u001b[2J\\u0007red.\"]\n";
    let hub = Hub::start(providers);
    hub.wait_ready("esc", 1).await;
    for cmd in ["list", "status"] {
        let (code, out, err) = hub.cli(&[cmd]);
        assert_eq!(code, 0, "{err}");
        assert!(!out.bytes().any(|b| (b < 0x20 && b != b'\n') || b == 0x7f), "hubwire {cmd} printed a control byte raw:\n{out:?}");
        if cmd == "list" {
            assert!(out.contains("\\u{1b}[2J\\u{7}red.echo"), "{out}");
        }
    }
}

#[tokio::test]
async fn an_http_connection_over_the_limit_gets_429() {
    let hub = Hub::start_with("http = \"127.0.0.1:0\"\nmax_connections_per_peer = 1\n", "", &[]);
    let addr = hub.listening("HTTP gateway");
    // Held open (not a byte sent): it keeps the one place 127.0.0.1 has.
    let held = std::net::TcpStream::connect(&addr).unwrap();
    let head = format!("GET /v1/methods HTTP/1.1\r\nHost: {addr}");
    assert_eq!(http_status(&addr, &head, ""), 429);
    drop(held);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while http_status(&addr, &head, "") != 200 {
        assert!(std::time::Instant::now() < deadline, "the place never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
