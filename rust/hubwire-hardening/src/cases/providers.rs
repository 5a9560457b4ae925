//! Providers that misbehave: crash loops, slow consumers with large calls
//! queued for them, spewing stdout and stderr, hanging while alive, killed
//! under load, leaving grandchildren behind.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hubwire::{CallOptions, Code, Connection, Raw};
use serde_json::{json, Value};

use crate::hub::Launch;
use crate::suite::{Ctx, Outcome};

/// A MiB in KiB (the unit of `Reading::rss_kib`).
const MIB: u64 = 1024;

/// A hub of the case's own: `[hub]` lines, then providers.
fn config(hub: &str, providers: &str) -> String {
    format!("[hub]\nunix = \"hub.sock\"\n{hub}\n{providers}")
}

/// `f` with a deadline of our own, so that no call of a case waits forever.
async fn within<T>(d: Duration, what: &str, f: impl std::future::Future<Output = Result<T, hubwire::Error>>) -> Result<T, String> {
    tokio::time::timeout(d, f).await.map_err(|_| format!("{what}: no answer within {d:?}"))?.map_err(|e| format!("{what}: {e}"))
}

/// 20 calls to an unknown method while provider `crashy` exits 300 ms
/// into every start, before its handshake. Expected: each fails at once
/// (< 500 ms) with `unknown_method`, whatever a provider's state.
pub async fn unknown_method_crash_loop(ctx: &Ctx) -> Outcome {
    let providers = format!(
        "[[provider]]\nname = \"t\"\nexec = [\"{}\"]\n\n[[provider]]\nname = \"crashy\"\nexec = [\"{}\", \"--exit-after\", \"300\"]\nrestart_backoff = \"50ms\"\nrestart_backoff_max = \"50ms\"\ncrash_loop_limit = 1000\n",
        ctx.test_provider(),
        ctx.misbehave()
    );
    let hub = ctx.own_hub("crashloop", &config("", &providers), &Launch::default())?;
    hub.wait_ready("t", Duration::from_secs(10)).await?;
    let conn = hub.connect().await?;
    for i in 0..20 {
        let started = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(12), conn.call_raw("no.such.method", Bytes::new())).await;
        let took = started.elapsed();
        match r {
            Ok(Err(e)) if e.code() == Code::UnknownMethod && took < Duration::from_millis(500) => {}
            Ok(Err(e)) => return Err(format!("call {i}: {} after {} ms: {}", e.code(), took.as_millis(), e.message())),
            Ok(Ok(_)) => return Err(format!("call {i}: an unknown method succeeded")),
            Err(_) => return Err(format!("call {i}: no answer within 12 s")),
        }
    }
    Ok("20 × unknown_method at once".into())
}

/// 256 `m.hold` calls of 1 MiB each at once, towards provider `m` (8
/// slots, each call held 200 ms, a queue of 1024). Expected: every call
/// is answered, with its result or `resource_exhausted` at once when the
/// client's or the provider's queued bytes are over their caps; the hub
/// grows by less than 64 MiB (not by the 256 MiB offered).
pub async fn queued_large_calls(ctx: &Ctx) -> Outcome {
    let before = ctx.probe.now().rss_kib;
    let conn = ctx.main.connect().await?;
    let payload = Bytes::from(vec![1u8; 1 << 20]);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..256 {
        let (conn, payload) = (conn.clone(), payload.clone());
        tasks.spawn(async move { within(Duration::from_secs(60), "m.hold", conn.call::<Raw, u64>("m.hold", &Raw(payload))).await });
    }
    let results = tasks.join_all().await;
    tally(ctx, before, "256 × 1 MiB calls", results)
}

/// 16 client streams of 64 items × 256 KiB towards `m.drain` (which
/// reads an item every 10 ms). Expected: as for queued calls: every stream
/// answered (its total or `resource_exhausted`), growth < 64 MiB.
pub async fn queued_streams(ctx: &Ctx) -> Outcome {
    let before = ctx.probe.now().rss_kib;
    let conn = ctx.main.connect().await?;
    let item = Bytes::from(vec![2u8; 256 * 1024]);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (conn, item) = (conn.clone(), item.clone());
        tasks.spawn(async move { within(Duration::from_secs(60), "m.drain", stream(conn, item)).await });
    }
    let results = tasks.join_all().await;
    tally(ctx, before, "16 × 64 × 256 KiB streams", results)
}

async fn stream(conn: Connection, item: Bytes) -> Result<u64, hubwire::Error> {
    let s = conn.client_stream::<Raw, u64>("m.drain", &CallOptions::new()).await?;
    for _ in 0..64 {
        s.send(&Raw(item.clone())).await?;
    }
    s.finish().await
}

/// Judges many answers: ok or `resource_exhausted` only, and bounded growth.
fn tally(ctx: &Ctx, before: u64, what: &str, results: Vec<Result<u64, String>>) -> Outcome {
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let exhausted = results.iter().filter(|r| matches!(r, Err(e) if e.contains("resource_exhausted"))).count();
    let other: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).filter(|e| !e.contains("resource_exhausted")).collect();
    let grew = ctx.probe.peak().rss_kib.saturating_sub(before);
    let note = format!("{what}: {ok} ok, {exhausted} resource_exhausted; hub grew {} MiB", grew / MIB);
    if let Some(e) = other.first() {
        Err(format!("{note}; {} other: {e}", other.len()))
    } else if grew >= 64 * MIB {
        Err(note)
    } else {
        Ok(note)
    }
}

/// `m` writes 64 MiB to stdout without a newline. Expected: the hub cuts
/// the line at `log_line_max` (4 KiB) and keeps nothing more: it grows by
/// less than 24 MiB, and status still answers.
pub async fn stdout_no_newline(ctx: &Ctx) -> Outcome {
    spew(ctx, "m.stdout", 64 << 20).await
}

/// `m` writes one 8 MiB stderr line. Expected: cut at `log_line_max`;
/// `hubwire status` (the CLI) still succeeds with a small output; growth
/// < 24 MiB.
pub async fn stderr_long_line(ctx: &Ctx) -> Outcome {
    spew(ctx, "m.stderr", 8 << 20).await
}

async fn spew(ctx: &Ctx, method: &str, n: usize) -> Outcome {
    let before = ctx.probe.now().rss_kib;
    let conn = ctx.main.connect().await?;
    within(Duration::from_secs(30), method, conn.call::<Value, u64>(method, &json!({ "n": n }))).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let out = tokio::process::Command::new(ctx.hub_bin())
        .args(["status", "--json", "--hub"])
        .arg(format!("unix:{}", ctx.main.socket.display()))
        .output();
    let out = tokio::time::timeout(Duration::from_secs(10), out)
        .await
        .map_err(|_| "hubwire status: no answer within 10 s")?
        .map_err(|e| e.to_string())?;
    let grew = ctx.probe.peak().rss_kib.saturating_sub(before);
    let note = format!("{} MiB spewed; hub grew {} MiB; status {} bytes", n >> 20, grew / MIB, out.stdout.len());
    if !out.status.success() {
        return Err(format!("{note}; hubwire status failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    if out.stdout.len() > 1 << 20 {
        return Err(format!("{note}: status output over 1 MiB"));
    }
    if grew >= 24 * MIB {
        return Err(note);
    }
    Ok(note)
}

/// A call with no deadline to `m.never` (alive, answers PINGs, never
/// answers calls), on a hub with `default_deadline = "2s"`. Expected: the
/// hub gives it the default deadline: `deadline_exceeded` within 2 s (+3 s
/// margin).
pub async fn no_deadline_call(ctx: &Ctx) -> Outcome {
    let providers = format!("[[provider]]\nname = \"m\"\nexec = [\"{}\"]\n", ctx.misbehave());
    let hub = ctx.own_hub("deadline", &config("default_deadline = \"2s\"", &providers), &Launch::default())?;
    hub.wait_ready("m", Duration::from_secs(10)).await?;
    let conn = hub.connect().await?;
    let started = Instant::now();
    match tokio::time::timeout(Duration::from_secs(8), conn.call::<(), ()>("m.never", &())).await {
        Ok(Err(e)) if e.code() == Code::DeadlineExceeded => Ok(format!("deadline_exceeded after {:.1} s", started.elapsed().as_secs_f64())),
        Ok(Err(e)) => Err(format!("{} after {:.1} s: {}", e.code(), started.elapsed().as_secs_f64(), e.message())),
        Ok(Ok(())) => Err("m.never answered?".into()),
        Err(_) => Err("a call with no deadline got no answer within 8 s".into()),
    }
}

/// 4 calls with no deadline fill `m.never`'s 4 slots, on a hub with no
/// default deadline and `hung_timeout = "2s"` for `m`. Expected: the
/// replica is found hung: the calls fail with `unavailable` within 2 s
/// (+5 s margin), it is restarted (a new pid) and status says "hung".
pub async fn hung_replica(ctx: &Ctx) -> Outcome {
    let providers = format!(
        "[[provider]]\nname = \"m\"\nexec = [\"{}\"]\nmax_in_flight = 4\nhung_timeout = \"2s\"\nrestart_backoff = \"20ms\"\n",
        ctx.misbehave()
    );
    let hub = ctx.own_hub("hung", &config("default_deadline = \"0\"", &providers), &Launch::default())?;
    let old = hub.wait_ready("m", Duration::from_secs(10)).await?;
    let conn = hub.connect().await?;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let conn = conn.clone();
        tasks.spawn(async move { tokio::time::timeout(Duration::from_secs(7), conn.call::<(), ()>("m.never", &())).await });
    }
    for r in tasks.join_all().await {
        match r {
            Ok(Err(e)) if e.code() == Code::Unavailable => {}
            Ok(Err(e)) => return Err(format!("a call on the hung replica ended {}: {}", e.code(), e.message())),
            Ok(Ok(())) => return Err("m.never answered?".into()),
            Err(_) => return Err("calls on a hung replica got no answer within 7 s".into()),
        }
    }
    let new = hub.wait_ready("m", Duration::from_secs(10)).await?;
    if new == old {
        return Err(format!("the hung replica was not restarted (pid {old:?})"));
    }
    let status = hub.status().await?.to_string();
    if !status.to_lowercase().contains("hung") {
        return Err("restarted, but status does not say it was hung".into());
    }
    Ok("unavailable, restarted, status says hung".into())
}

/// 4 clients call `k.echo` for 4 s while a replica of `k` is killed with
/// SIGKILL three times. Expected: every call is answered (its echo, or
/// `unavailable` for those in flight on the killed replica), none waits
/// past 10 s, and both replicas are ready again afterwards.
pub async fn kill9_under_load(ctx: &Ctx) -> Outcome {
    let conn = ctx.main.connect().await?;
    let until = Instant::now() + Duration::from_secs(4);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let conn = conn.clone();
        tasks.spawn(async move {
            let (mut ok, mut unavailable, mut other) = (0u32, 0u32, Vec::new());
            let payload = Bytes::from(vec![3u8; 1024]);
            for _ in 0..20_000 {
                if Instant::now() > until {
                    break;
                }
                match tokio::time::timeout(Duration::from_secs(10), conn.call_raw("k.echo", payload.clone())).await {
                    Ok(Ok(_)) => ok += 1,
                    Ok(Err(e)) if e.code() == Code::Unavailable => unavailable += 1,
                    Ok(Err(e)) => other.push(e.to_string()),
                    Err(_) => other.push("lost: no answer within 10 s".into()),
                }
            }
            (ok, unavailable, other)
        });
    }
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        let pids = ctx.main.wait_ready("k", Duration::from_secs(10)).await?;
        // SAFETY: a signal to a pid the hub just reported as its child.
        unsafe { libc::kill(pids[0] as i32, libc::SIGKILL) };
    }
    let (mut ok, mut unavailable, mut other) = (0, 0, Vec::new());
    for (o, u, x) in tasks.join_all().await {
        ok += o;
        unavailable += u;
        other.extend(x);
    }
    ctx.main.wait_ready("k", Duration::from_secs(10)).await?;
    let note = format!("{} calls, 3 kills: {ok} ok, {unavailable} unavailable", ok + unavailable + other.len() as u32);
    match other.first() {
        None => Ok(note),
        Some(e) => Err(format!("{note}, {} other: {e}", other.len())),
    }
}

/// `m.setsid` starts `sleep 1000` in a session of its own; then the hub
/// is stopped with SIGTERM. Expected: the grandchild ends with the hub
/// (within 5 s of its exit), escaping the process group kill or not.
pub async fn setsid_grandchild(ctx: &Ctx) -> Outcome {
    let providers = format!("[[provider]]\nname = \"m\"\nexec = [\"{}\"]\n", ctx.misbehave());
    let mut hub = ctx.own_hub("setsid", &config("", &providers), &Launch::default())?;
    hub.wait_ready("m", Duration::from_secs(10)).await?;
    let conn = hub.connect().await?;
    let pid = within(Duration::from_secs(5), "m.setsid", conn.call::<(), u32>("m.setsid", &())).await?;
    drop(conn);
    let stopped = hub.stop(Duration::from_secs(10)).is_some();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outlived = alive(pid);
    // SAFETY: the grandchild we asked for; whatever the verdict, it goes.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    match (stopped, outlived) {
        (false, _) => Err("the hub did not exit within 10 s of SIGTERM".into()),
        (true, true) => Err(format!("the setsid grandchild (pid {pid}) outlived the hub by 5 s")),
        (true, false) => Ok("the grandchild ended with the hub".into()),
    }
}

/// Whether a process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}
