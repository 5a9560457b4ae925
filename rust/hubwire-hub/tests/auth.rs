//! Authentication and private status (`docs/security.md`): with a token,
//! TCP clients must send it in HELLO and HTTP requests as a bearer token;
//! trusted callers (the Unix socket, holders of the token) see argv, pids
//! and stderr tails in the status, others only names, states and counts.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{http_with, Hub};
use hubwire::transport::tcp;
use hubwire::{Code, Connection, ConnectionOptions};
use hubwire_hub::status::{Status, STATUS_METHOD};

const TOKEN: &str = "hub-test-token-91c2";
/// A provider with a secret passed as a flag, as people do.
const SECRET: &str = "hunter2-on-the-command-line";

fn providers() -> String {
    format!("[[provider]]\nname = \"test\"\nexec = [\"{{provider}}\", \"--api-key\", \"{SECRET}\"]\n")
}

/// A hub with TCP and HTTP listeners on port 0, and with `token_file` if
/// `token`; its provider ready.
async fn start(token: bool) -> (Hub, String, String) {
    let mut extra = "tcp = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\n".to_string();
    // The token's directory goes when this returns: the hub has read the
    // file by then (it reads its config before it listens).
    let dir = token.then(common::temp_dir);
    if let Some(dir) = &dir {
        let f = dir.join("token");
        std::fs::write(&f, format!("{TOKEN}\n")).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        extra.push_str(&format!("token_file = \"{}\"\n", f.display()));
    }
    let hub = Hub::start_with(&extra, &providers(), &[]);
    hub.wait_ready("test", 1).await;
    let (tcp, http) = (hub.listening("accepting clients listen=tcp:"), hub.listening("HTTP gateway"));
    (hub, tcp, http)
}

async fn dial(addr: &str, token: Option<&str>) -> Result<Connection, hubwire::Error> {
    let opts = ConnectionOptions::new("auth-test");
    let opts = match token {
        Some(t) => opts.token(t),
        None => opts,
    };
    Connection::dial(tcp::connect(addr).await.unwrap(), &opts).await
}

/// Whether a status shows anything private.
fn private(s: &Status) -> Vec<&'static str> {
    let mut shown = Vec::new();
    let p = &s.providers[0];
    if p.launch.contains(SECRET) {
        shown.push("argv");
    }
    if p.replicas.iter().any(|r| r.pid.is_some()) {
        shown.push("pid");
    }
    if p.replicas.iter().any(|r| !r.stderr.is_empty()) {
        shown.push("stderr");
    }
    shown
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_on_tcp_and_http_and_trusts_who_holds_it() {
    let (hub, tcp, http) = start(true).await;
    // Let the provider's stderr line reach the status.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;

    let e = dial(&tcp, None).await.err().expect("a HELLO without the token is refused");
    assert_eq!((e.code(), e.message().contains("token required")), (Code::Unauthenticated, true), "{e}");
    let e = dial(&tcp, Some("hub-test-token-91c3")).await.err().expect("a wrong token is refused");
    assert_eq!((e.code(), e.message().contains("wrong token")), (Code::Unauthenticated, true), "{e}");
    let s: Status = dial(&tcp, Some(TOKEN)).await.unwrap().call(STATUS_METHOD, &()).await.unwrap();
    assert_eq!(private(&s), ["argv", "pid", "stderr"], "a token holder is trusted: {s:?}");

    let (status, head) = raw_head(&http, "GET /v1/methods", "");
    assert_eq!(status, 401, "{head}");
    assert!(head.to_ascii_lowercase().contains("www-authenticate: bearer"), "{head}");
    assert_eq!(http_with(&http, "GET", "/v1/methods", &format!("Authorization: Bearer {TOKEN}x\r\n"), "").0, 401);
    assert_eq!(http_with(&http, "POST", "/v1/call/hubwire.status", "", "").0, 401, "calls need it too");
    assert_eq!(http_with(&http, "GET", "/healthz", "", "").0, 200, "liveness needs no token");
    let (status, body) = http_with(&http, "GET", "/v1/status", &format!("Authorization: Bearer {TOKEN}\r\n"), "");
    assert_eq!(status, 200);
    assert!(body.contains(SECRET), "a bearer of the token is trusted: {body}");

    // The CLI over TCP: the token from the environment or a file.
    let cli = |env: Option<&str>, extra: &[&str]| {
        let mut c = std::process::Command::new(common::HUB);
        c.args(["status", "--json", "--hub", &format!("tcp:{tcp}")]).args(extra).env_remove("HUBWIRE_TOKEN");
        if let Some(t) = env {
            c.env("HUBWIRE_TOKEN", t);
        }
        let out = c.output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
    };
    let (ok, out) = cli(None, &[]);
    assert!(!ok && out.contains("unauthenticated"), "{out}");
    let (ok, out) = cli(Some(TOKEN), &[]);
    assert!(ok && out.contains(SECRET), "{out}");
    let file = hub.dir.join("cli-token");
    std::fs::write(&file, TOKEN).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (ok, out) = cli(None, &["--token-file", file.to_str().unwrap()]);
    assert!(ok && out.contains(SECRET), "{out}");

    // The Unix socket needs none, and is trusted.
    assert_eq!(private(&hub.status().await), ["argv", "pid", "stderr"]);
    assert!(!hub.log().contains(TOKEN), "the token is never logged:\n{}", hub.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_tcp_and_http_callers_see_only_public_status() {
    let (hub, tcp, http) = start(false).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let trusted = hub.status().await;
    assert_eq!(private(&trusted), ["argv", "pid", "stderr"], "the Unix socket is trusted");

    let s: Status = dial(&tcp, None).await.unwrap().call(STATUS_METHOD, &()).await.unwrap();
    assert!(private(&s).is_empty(), "loopback TCP without a token is not trusted: {s:?}");
    let (p, r) = (&s.providers[0], &s.providers[0].replicas[0]);
    assert_eq!((p.name.as_str(), p.launch.as_str(), r.state.as_str()), ("test", "exec", "ready"), "names and states stay");
    let (status, body) = http_with(&http, "GET", "/v1/status", "", "");
    assert_eq!(status, 200);
    let pid = trusted.providers[0].replicas[0].pid.unwrap();
    assert!(!body.contains(SECRET) && !body.contains(&format!("\"pid\": {pid}")) && !body.contains("on stderr"), "{body}");
    let (status, body) = http_with(&http, "POST", "/v1/call/hubwire.status", "", "");
    assert!(status == 200 && !body.contains(SECRET), "the status method over HTTP is public too: {body}");
}

/// A raw request: (status, the response head).
fn raw_head(addr: &str, request_line: &str, headers: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
    write!(s, "{request_line} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let head = text.split("\r\n\r\n").next().unwrap_or("").to_string();
    (head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), head)
}
