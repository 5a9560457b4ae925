//! Hostile HTTP: a web page's cross-origin POST, DNS rebinding's foreign
//! Host, slowloris heads and bodies, and what status tells a stranger.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http;
use crate::hub::{HubProc, Launch};
use crate::suite::{Ctx, Outcome, ARGV_SECRET, ENV_SECRET};

/// What a page on another site can send without a preflight: a `text/plain`
/// POST with its Origin. Expected: refused (403: Origin not in
/// `allowed_origins`, or 415: calls take only `application/json`), the
/// call not run.
pub async fn cross_origin_post(ctx: &Ctx) -> Outcome {
    let head = format!("POST /v1/call/echo HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example\r\nContent-Type: text/plain", ctx.http);
    let a = http::request(&ctx.http, &head, b"\"hello\"").await?;
    if (400..500).contains(&a.status) {
        Ok(format!("refused with {}", a.status))
    } else {
        Err(format!("a cross-origin text/plain POST got {}: the call ran", a.status))
    }
}

/// `Host: evil.example` (a DNS-rebinding page's requests carry its own
/// name). Expected: refused (4xx: not in `allowed_hosts`), while the same
/// request with the listener's own address is served (200).
pub async fn bad_host(ctx: &Ctx) -> Outcome {
    let good = http::request(&ctx.http, &format!("GET /v1/methods HTTP/1.1\r\nHost: {}", ctx.http), b"").await?;
    if good.status != 200 {
        return Err(format!("GET /v1/methods with the right Host got {}", good.status));
    }
    let bad = http::request(&ctx.http, "GET /v1/methods HTTP/1.1\r\nHost: evil.example", b"").await?;
    if (400..500).contains(&bad.status) {
        Ok(format!("evil.example refused with {}", bad.status))
    } else {
        Err(format!("Host: evil.example got {}", bad.status))
    }
}

/// A gateway of its own with `http_header_timeout` and `http_body_timeout`
/// of 2 s, in front of the test provider (so that a call's body must be
/// read whole before the call can start).
async fn gateway(ctx: &Ctx, name: &str) -> Result<(HubProc, String), String> {
    let config = format!(
        "[hub]\nhttp = \"127.0.0.1:0\"\nhttp_header_timeout = \"2s\"\nhttp_body_timeout = \"2s\"\n\n[[provider]]\nname = \"t\"\nexec = [\"{}\"]\n",
        ctx.test_provider()
    );
    let hub = ctx.own_hub(name, &config, &Launch::default())?;
    let addr = hub.listening("HTTP gateway").ok_or("no HTTP gateway in the log")?;
    Ok((hub, addr))
}

/// 20 connections trickling a request head, a byte per 200 ms, to a
/// gateway with `http_header_timeout = "2s"`. Expected: each closed (or
/// answered 408) within 2 s + 3 s margin.
pub async fn slow_headers(ctx: &Ctx) -> Outcome {
    let (_hub, addr) = gateway(ctx, "slowhead").await?;
    trickle_all(
        &addr,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".into(),
        "",
    )
    .await
}

/// 20 POSTs announcing 1000 body bytes and trickling them, a byte per
/// 200 ms, to a gateway with `http_body_timeout = "2s"`. Expected: each
/// closed (or answered 408) within 2 s + 3 s margin.
pub async fn slow_body(ctx: &Ctx) -> Outcome {
    let (_hub, addr) = gateway(ctx, "slowbody").await?;
    let head = "POST /v1/call/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n";
    trickle_all(&addr, head.into(), &"1".repeat(1000)).await
}

/// Sends `head` at once then `slow` a byte per 200 ms on 20 connections;
/// each must be closed by the hub within 5 s.
async fn trickle_all(addr: &str, head: String, slow: &str) -> Outcome {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (addr, head, slow) = (addr.to_string(), head.clone(), slow.to_string());
        tasks.spawn(async move {
            let mut s = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
            let (head, slow) = if slow.is_empty() { (&head[..16], &head[16..]) } else { (&head[..], &slow[..]) };
            s.write_all(head.as_bytes()).await.map_err(|e| e.to_string())?;
            let started = Instant::now();
            for b in slow.bytes() {
                if started.elapsed() > Duration::from_secs(5) {
                    return Err("still open after 5 s".to_string());
                }
                if s.write_all(&[b]).await.is_err() {
                    return Ok(started.elapsed());
                }
                let mut buf = [0u8; 1024];
                match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => return Ok(started.elapsed()),
                    // An answer (408) counts once the hub then closes.
                    Ok(Ok(_)) | Err(_) => {}
                }
            }
            Err("the whole request went through without a timeout".to_string())
        });
    }
    let results = tasks.join_all().await;
    let open: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    match open.first() {
        None => Ok(format!(
            "20 closed, the last after {:.1} s",
            results.iter().filter_map(|r| r.as_ref().ok()).max().map_or(0.0, |d| d.as_secs_f64())
        )),
        Some(e) => Err(format!("{} of 20: {e}", open.len())),
    }
}

/// `GET /v1/status` with no credentials, on the main hub. Expected: no
/// argv (a secret passed as a flag), no config env, no stderr tail and no
/// pids for an unauthenticated caller (or the request refused, 401/403).
pub async fn status_private(ctx: &Ctx) -> Outcome {
    let a = http::request(&ctx.http, &format!("GET /v1/status HTTP/1.1\r\nHost: {}", ctx.http), b"").await?;
    if a.status == 401 || a.status == 403 {
        return Ok(format!("refused with {}", a.status));
    }
    let trusted = ctx.main.status().await?;
    let pids: Vec<String> = trusted["providers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["replicas"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["pid"].as_u64())
        .map(|p| format!("\"pid\":{p}"))
        .collect();
    let mut shown = Vec::new();
    for (what, needle) in [("argv", ARGV_SECRET), ("env", ENV_SECRET), ("stderr", "a line on stderr")] {
        if a.body.contains(needle) {
            shown.push(what);
        }
    }
    if pids.iter().any(|p| a.body.replace(' ', "").contains(p.as_str())) {
        shown.push("pids");
    }
    if shown.is_empty() {
        Ok(format!("{}: nothing private", a.status))
    } else {
        Err(format!("an unauthenticated GET /v1/status shows {}", shown.join(", ")))
    }
}
