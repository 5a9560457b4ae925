//! The listeners other machines and browsers reach: a token required on
//! TCP and HTTP, and the WebSocket listener's Origin check.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::http;
use crate::hub::Launch;
use crate::suite::{Ctx, Outcome};
use crate::wire::Raw;

const TOKEN: &str = "hardening-token-5f1d0c9a7e";

/// A hub of its own with `token_file` and TCP and HTTP listeners on
/// loopback. Expected: a client whose HELLO carries no token gets GOAWAY
/// and a closed connection; `GET /v1/methods` without
/// `Authorization: Bearer` gets 401, and with the token 200.
pub async fn token_required(ctx: &Ctx) -> Outcome {
    let token = ctx.dir("tokenfile").join("token");
    std::fs::write(&token, TOKEN).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
    let config = format!(
        "[hub]\ntcp = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n\n[[provider]]\nname = \"t\"\nexec = [\"{}\"]\n",
        token.display(),
        ctx.test_provider()
    );
    let hub = ctx.own_hub("token", &config, &Launch::default())?;
    let tcp = hub.listening("accepting clients listen=tcp:").ok_or("no tcp listener in the log")?;
    let web = hub.listening("HTTP gateway").ok_or("no HTTP gateway in the log")?;
    let s = tokio::net::TcpStream::connect(&tcp).await.map_err(|e| format!("connect {tcp}: {e}"))?;
    let mut raw = Raw::over(Box::new(s));
    raw.send(&crate::wire::hello(), Duration::from_secs(2)).await?;
    raw.until_closed(Duration::from_secs(3)).await.map_err(|e| format!("a HELLO without a token: {e}"))?;
    let head = format!("GET /v1/methods HTTP/1.1\r\nHost: {web}");
    let without = http::request(&web, &head, b"").await?;
    if without.status != 401 {
        return Err(format!("GET /v1/methods without a token got {}", without.status));
    }
    let with = http::request(&web, &format!("{head}\r\nAuthorization: Bearer {TOKEN}"), b"").await?;
    if with.status != 200 {
        return Err(format!("GET /v1/methods with the token got {}", with.status));
    }
    Ok("no token: GOAWAY on TCP, 401 on HTTP; with it: 200".into())
}

/// A hub of its own with a WebSocket listener (`ws://HOST:PORT/`,
/// subprotocol `hubwire.v1`). Expected: an upgrade request with
/// `Origin: http://evil.example` is refused (403), the same request with
/// no Origin (a program, not a page) is accepted (101).
pub async fn websocket_origin(ctx: &Ctx) -> Outcome {
    let config = format!("[hub]\nwebsocket = \"127.0.0.1:0\"\n\n[[provider]]\nname = \"t\"\nexec = [\"{}\"]\n", ctx.test_provider());
    let hub = ctx.own_hub("ws", &config, &Launch::default())?;
    let log = hub.log();
    let is_ws = |l: &&str| l.contains("listen=ws:") || (l.to_lowercase().contains("websocket") && l.contains("listen="));
    let line = log.lines().find(is_ws).ok_or("no WebSocket listen= line in the hub's log")?;
    let addr = line.split("listen=").nth(1).and_then(|a| a.split_whitespace().next()).unwrap_or("");
    let addr = addr.trim_start_matches("ws:").trim_start_matches("tcp:").trim_matches('"').to_string();
    let head = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: hubwire.v1"
    );
    let plain = http::status_of(&addr, &head).await?;
    if plain != 101 {
        return Err(format!("an upgrade with no Origin got {plain}, not 101"));
    }
    let evil = http::status_of(&addr, &format!("{head}\r\nOrigin: http://evil.example")).await?;
    if evil == 101 {
        return Err("an upgrade from Origin http://evil.example was accepted".into());
    }
    Ok(format!("evil.example refused with {evil}; no Origin: 101"))
}
