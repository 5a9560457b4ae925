//! Shared memory (`spec/PROTOCOL.md` §11.4, issue 16): the hub's legs to a
//! provider and from a local client are upgraded by default; here, with
//! time bounds, that an idle upgraded connection burns no CPU on either
//! side and that a provider killed with -9 fails the calls in flight on
//! it as fast as on a socket; and that a client of another user, let in by
//! the socket's mode, is offered neither shared memory nor a direct
//! socketpair.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use hubwire::Code;
use hubwire_frame::{Codec, Frame, Kind};
use serde_json::json;

use crate::hub::Launch;
use crate::suite::{Ctx, Outcome};
use crate::wire::{self, Raw, Read};

/// Clock ticks (utime + stime, fields 14 and 15 of `/proc/<pid>/stat`)
/// a process has used.
fn ticks(pid: u32) -> Result<u64, String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    let f: Vec<&str> = s.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    // After the command's closing parenthesis, field 3 (state) is index 0.
    let get = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok()).ok_or(format!("/proc/{pid}/stat: no field {i}"));
    Ok(get(14)? + get(15)?)
}

/// A hub of its own with one provider; a client on shared memory makes one
/// call and then nothing for 3 s. Expected: both legs are on shared memory,
/// and the hub and the provider each use at most 3 clock ticks (30 ms, 1 %
/// of a CPU; a spinning side would use ~300) over those 3 s. Then a call
/// that sleeps is in flight when the provider is killed with -9: it fails
/// `unavailable` within 200 ms.
pub async fn idle_and_killed(ctx: &Ctx) -> Outcome {
    let providers = format!("[[provider]]\nname = \"p\"\nexec = [\"{}\"]\nhealth_interval = \"60m\"\n", ctx.test_provider());
    let hub = ctx.own_hub("shm", &format!("[hub]\nunix = \"hub.sock\"\n{providers}"), &Launch::default())?;
    let pid = *hub.wait_ready("p", Duration::from_secs(10)).await?.first().ok_or("no provider pid")? as u32;
    let conn = hub.connect().await?;
    if !tokio::time::timeout(Duration::from_secs(5), conn.upgraded()).await.unwrap_or(false) {
        return Err("the client's connection to the hub did not move to shared memory".into());
    }
    conn.call_raw("echo", bytes::Bytes::from_static(b"x")).await.map_err(|e| format!("echo: {e}"))?;
    let status = hub.status().await?;
    if crate::hub::replicas(&status, "p").first().and_then(|r| r["shm"].as_bool()) != Some(true) {
        return Err("the provider's leg is not on shared memory".into());
    }
    let (hub0, p0) = (ticks(hub.pid())?, ticks(pid)?);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (hub_idle, p_idle) = (ticks(hub.pid())? - hub0, ticks(pid)? - p0);
    if hub_idle > 3 || p_idle > 3 {
        return Err(format!("idle for 3 s on shared memory, the hub used {hub_idle} ticks and the provider {p_idle} (at most 3)"));
    }
    let call = tokio::spawn({
        let conn = conn.clone();
        async move { conn.call::<_, String>("sleep", &json!({"ms": 60_000})).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed = Instant::now();
    // SAFETY: a signal to the pid the hub reported as its provider.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let r = tokio::time::timeout(Duration::from_secs(5), call).await.map_err(|_| "the call in flight hung after kill -9".to_string())?;
    let took = killed.elapsed();
    match r.map_err(|e| e.to_string())? {
        Err(e) if e.code() == Code::Unavailable && took <= Duration::from_millis(200) => {
            Ok(format!("idle 3 s: hub {hub_idle}, provider {p_idle} ticks; kill -9 failed the call in {took:?}"))
        }
        Err(e) => Err(format!("after kill -9: {} in {took:?} (want unavailable within 200 ms): {}", e.code(), e.message())),
        Ok(_) => Err("the sleeping call answered after its provider was killed?".into()),
    }
}

/// What a raw client saw of a hub that lets it in: whether the hub's HELLO
/// listed `"shm"`, and how `hubwire.direct` for `echo` ended.
#[derive(Debug)]
struct Offered {
    shm: bool,
    /// The answer's code, and whether a DIRECT frame came before it.
    direct: (Code, bool),
}

/// A hub of its own whose socket lets uid 65534 in (`unix_mode` 0666,
/// `allow_uids`), one spawned provider. A raw client that lists `"shm"`
/// and `direct` in its HELLO dials it and asks `hubwire.direct` for
/// `echo`, first as this process's user (root; the control), then as uid
/// 65534. Expected (`spec/PROTOCOL.md` §11.4, §14.3): to root the hub
/// offers both (`"shm"` in its HELLO, a DIRECT, `ok`); to uid 65534
/// neither: no `"shm"` (a peer of another user could hold up the hub's
/// writer through the eventfds), and `invalid_argument` with no DIRECT
/// (a socketpair reports the hub as its peer, so the replica could not
/// tell and would upgrade). Needs root to act as another user (skipped,
/// as a PASS saying so, otherwise).
pub async fn other_user(ctx: &Ctx) -> Outcome {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Ok("skipped: needs root to act as another user".into());
    }
    let providers = format!("[[provider]]\nname = \"p\"\nexec = [\"{}\"]\nhealth_interval = \"60m\"\n", ctx.test_provider());
    let config = format!("[hub]\nunix = \"hub.sock\"\nunix_mode = \"0666\"\nallow_uids = [0, 65534]\n{providers}");
    let hub = ctx.own_hub("shm-other-user", &config, &Launch::default())?;
    // uid 65534 must reach the socket: search permission on its directory
    // and the scratch directory above it.
    for dir in [hub.dir.as_path(), hub.dir.parent().ok_or("the hub's directory has no parent")?] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(|e| format!("chmod {}: {e}", dir.display()))?;
    }
    hub.wait_ready("p", Duration::from_secs(10)).await?;
    let raw = Raw::unix(&hub.socket).await?;
    let own = offered(raw).await.map_err(|e| format!("as root: {e}"))?;
    if !own.shm || own.direct != (Code::Ok, true) {
        return Err(format!("the control failed: to root the hub offered {own:?} (want shm and a DIRECT)"));
    }
    let raw = Raw::unix_as(&hub.socket, 65534).await?.map_err(|e| format!("uid 65534 could not connect: {e}"))?;
    let other = offered(raw).await.map_err(|e| format!("as uid 65534: {e}"))?;
    match other {
        Offered { shm: false, direct: (Code::InvalidArgument, false) } => {
            Ok("root: shm and a DIRECT; uid 65534: neither (invalid_argument)".into())
        }
        Offered { shm: true, .. } => Err("the hub listed shm in its HELLO to uid 65534".into()),
        Offered { direct: (code, sent), .. } => {
            Err(format!("hubwire.direct as uid 65534: {code}{}, want invalid_argument", if sent { " and a DIRECT" } else { "" }))
        }
    }
}

/// Handshakes on `raw` listing `"shm"` and `direct`, then calls
/// `hubwire.direct` for `echo` (JSON); every wait 5 s at most.
async fn offered(mut raw: Raw) -> Result<Offered, String> {
    let within = Duration::from_secs(5);
    let mut hello = wire::our_hello();
    hello.upgrade = vec!["shm".into()];
    hello.direct = Some(1);
    raw.send(&Frame::Hello(Box::new(hello)).to_bytes(), within).await?;
    let theirs = match raw.next(within).await {
        Read::Frame(Frame::Hello(h)) => h,
        other => return Err(format!("expected the hub's HELLO, got {other:?}")),
    };
    if theirs.direct.is_none() {
        return Err("the hub's HELLO did not list direct: it does not trust this client".into());
    }
    raw.decode_direct();
    let ask = serde_json::to_vec(&json!({"method": "echo"})).map_err(|e| e.to_string())?;
    raw.send(&wire::request(1, Kind::Unary, Codec::Json, "hubwire.direct", &ask, 5000), within).await?;
    let mut sent = false;
    loop {
        match raw.next(within).await {
            Read::Frame(Frame::Direct(_)) => sent = true,
            Read::Frame(Frame::Response { call_id: 1, code, .. }) => {
                return Ok(Offered { shm: theirs.upgrade.iter().any(|m| m == "shm"), direct: (code, sent) });
            }
            Read::Frame(_) => {}
            other => return Err(format!("waiting for the answer to hubwire.direct: {other:?}")),
        }
    }
}
