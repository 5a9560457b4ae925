//! Shared memory (`spec/PROTOCOL.md` §11.4, issue 16): the hub's legs to a
//! provider and from a local client are upgraded by default; here, with
//! time bounds, that an idle upgraded connection burns no CPU on either
//! side and that a provider killed with -9 fails the calls in flight on
//! it as fast as on a socket.

use std::time::{Duration, Instant};

use hubwire::Code;
use serde_json::json;

use crate::hub::Launch;
use crate::suite::{Ctx, Outcome};

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
