//! A flood of idle connections from one address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use crate::cases::peers::{served, settle_fds};
use crate::suite::Ctx;
use crate::wire;

/// Connections attempted.
const ATTEMPTS: usize = 10_000;

/// Up to 10,000 TCP connections from 127.0.0.2 (one peer address), each
/// sending its HELLO and then nothing. Expected: the hub holds at most
/// `max_connections_per_peer` (64) of them and refuses the rest (GOAWAY
/// `resource_exhausted`, closed), so its descriptors stay far below its
/// limit; meanwhile a new client on the Unix socket is served within
/// 100 ms, and a provider that crashes (`m.die`) is respawned within 5 s.
/// Bounded: 10,000 attempts, 30 s, or 20 connects in a row that fail.
pub async fn idle_flood(ctx: &Ctx) -> crate::suite::Outcome {
    let fds_before = ctx.probe.now().fds;
    let addr: SocketAddr = ctx.tcp.parse().map_err(|e| format!("tcp address {:?}: {e}", ctx.tcp))?;
    let hello = wire::hello();
    let (started, mut held, mut failed_in_a_row, mut refused) = (Instant::now(), Vec::new(), 0, 0);
    for _ in 0..ATTEMPTS {
        if failed_in_a_row >= 20 || started.elapsed() > Duration::from_secs(30) {
            break;
        }
        match connect_from(addr, Ipv4Addr::new(127, 0, 0, 2)).await {
            Ok(mut s) => {
                failed_in_a_row = 0;
                if s.write_all(&hello).await.is_err() {
                    refused += 1;
                } else {
                    held.push(s);
                }
            }
            Err(_) => {
                failed_in_a_row += 1;
                refused += 1;
            }
        }
    }
    let attempted = held.len() + refused;
    let flood = format!("{attempted} attempted in {:.1} s", started.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fds_peak = ctx.probe.peak().fds;
    // The checks run while the flood is still held.
    let verdict = async {
        let took = served(ctx).await.map_err(|e| format!("{flood}; {e}"))?;
        if took > Duration::from_millis(100) {
            return Err(format!("{flood}; a new client was served after {} ms (target 100 ms)", took.as_millis()));
        }
        respawns(ctx).await.map_err(|e| format!("{flood}; {e}"))?;
        if fds_peak > fds_before + 1024 {
            return Err(format!("{flood}; the hub held {fds_peak} descriptors (no connection limit)"));
        }
        Ok(format!("{flood}; new client served in {:.1} ms; m respawned", took.as_secs_f64() * 1000.0))
    }
    .await;
    drop(held);
    settle_fds(ctx, fds_before).await.map_err(|e| format!("{}; {e}", verdict.clone().unwrap_or_else(|e| e)))?;
    verdict
}

/// A TCP connection to `to` from address `from` (any port), within 500 ms.
async fn connect_from(to: SocketAddr, from: Ipv4Addr) -> Result<TcpStream, String> {
    let s = TcpSocket::new_v4().map_err(|e| e.to_string())?;
    s.bind(SocketAddr::new(IpAddr::V4(from), 0)).map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_millis(500), s.connect(to)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connect timed out".into()),
    }
}

/// `m.die` ends provider `m`'s process; its replica must be back (a new
/// pid answering `m.pid`) within 5 s.
pub async fn respawns(ctx: &Ctx) -> Result<(), String> {
    let conn = ctx.main.connect().await?;
    let call = |m: &'static str| {
        let conn = conn.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(2), conn.call::<(), u32>(m, &()))
                .await
                .map_err(|_| format!("{m}: no answer in 2 s"))?
                .map_err(|e| format!("{m}: {e}"))
        }
    };
    let old = call("m.die").await?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(pid) = call("m.pid").await {
            if pid != old {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err("provider m was not respawned within 5 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
