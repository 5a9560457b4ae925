//! Clients that misbehave on the wire, against the main hub: silent and
//! slow ones, broken and oversized frames, garbage, wrong versions, and a
//! CANCEL racing a REQUEST that reuses its id.

use std::time::{Duration, Instant};

use hubwire_frame::{Code, Codec, Frame, Hello, Kind, PeerInfo};

use crate::suite::{Ctx, Outcome};
use crate::wire::{self, Raw, Read};

/// A MiB in KiB (the unit of `Reading::rss_kib`).
const MIB: u64 = 1024;

/// Hub RSS growth (KiB) over the case's start: peak minus before.
fn growth(ctx: &Ctx, before_kib: u64) -> u64 {
    ctx.probe.peak().rss_kib.saturating_sub(before_kib)
}

/// A client that writes 256 KiB `echo` requests and never reads. Expected:
/// once `write_queue` (4 MiB) of answers waits for it, the hub stops
/// reading its requests, so our writes block and the hub grows by a few
/// MiB at most (< 32 MiB). (`write_stall_timeout`, 30 s, then closes it:
/// too long to wait for here.) Bounded: 1 GiB written, 10 s, or the hub
/// growing by 256 MiB, whichever comes first.
pub async fn silent_client(ctx: &Ctx) -> Outcome {
    let before = ctx.probe.now().rss_kib;
    let mut c = Raw::unix(&ctx.main.socket).await?;
    c.handshake().await?;
    let payload = vec![0x5a; 256 * 1024];
    let (started, mut sent, mut id) = (Instant::now(), 0u64, 1u32);
    let why = loop {
        if growth(ctx, before) > 256 * MIB {
            break "the hub grew by 256 MiB";
        }
        if sent >= 1 << 30 || started.elapsed() > Duration::from_secs(10) {
            break "the bound of the case";
        }
        if c.send(&wire::request(id, Kind::Unary, Codec::Raw, "echo", &payload, 0), Duration::from_secs(2)).await.is_err() {
            break "the hub stopped reading";
        }
        sent += payload.len() as u64;
        id += 2;
    };
    let grew = growth(ctx, before);
    let note = format!("wrote {} MiB unread, stopped by {why}; hub grew {} MiB", sent >> 20, grew / MIB);
    if grew < 32 * MIB {
        Ok(note)
    } else {
        Err(note)
    }
}

/// 50 clients (under `max_connections_per_peer`) trickling their HELLO
/// one byte per 250 ms. Expected: each
/// is closed once `handshake_timeout` (10 s) has passed, so all within
/// 14 s.
pub async fn slow_handshake(ctx: &Ctx) -> Outcome {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let socket = ctx.main.socket.clone();
        tasks.spawn(async move {
            let mut c = Raw::unix(&socket).await?;
            let hello = wire::hello();
            let started = Instant::now();
            for b in hello.iter().cycle() {
                if started.elapsed() > Duration::from_secs(14) {
                    return Err("still open after 14 s".to_string());
                }
                if c.send(&[*b], Duration::from_secs(1)).await.is_err() {
                    return Ok(started.elapsed());
                }
                if let Read::Closed = c.next(Duration::from_millis(250)).await {
                    return Ok(started.elapsed());
                }
            }
            unreachable!("cycle() never ends")
        });
    }
    let results = tasks.join_all().await;
    let open = results.iter().filter(|r| r.is_err()).count();
    let slowest = results.iter().filter_map(|r| r.as_ref().ok()).max().copied().unwrap_or_default();
    if open == 0 {
        Ok(format!("all 50 closed, the last after {:.1} s", slowest.as_secs_f64()))
    } else {
        Err(format!("{open} of 50 trickling handshakes still open after 14 s"))
    }
}

/// 100 clients that end mid-header or mid-body. Expected: each connection
/// is dropped, the hub's descriptors come back, and a new client is served.
pub async fn truncated_frames(ctx: &Ctx) -> Outcome {
    let fds_before = ctx.probe.now().fds;
    for i in 0..100u32 {
        let mut c = Raw::unix(&ctx.main.socket).await?;
        c.handshake().await?;
        let frame = wire::request(1, Kind::Unary, Codec::Raw, "echo", &[1u8; 1000], 0);
        let cut = if i % 2 == 0 { 7 } else { 12 + 500 };
        c.send(&frame[..cut], Duration::from_secs(2)).await?;
    }
    settle_fds(ctx, fds_before).await?;
    served(ctx).await?;
    Ok("100 truncated connections dropped; descriptors back".into())
}

/// A REQUEST header announcing 4 GiB, then one announcing max_frame + 1.
/// Expected: GOAWAY `too_large` and the connection closed, without
/// waiting for the body.
pub async fn oversized_frame(ctx: &Ctx) -> Outcome {
    for len in [u32::MAX, 16 * 1024 * 1024 + 1] {
        let mut c = Raw::unix(&ctx.main.socket).await?;
        c.handshake().await?;
        c.send(&wire::header(len, 1, 0x02, 0, 0, 1), Duration::from_secs(2)).await?;
        match c.until_closed(Duration::from_secs(3)).await {
            Ok((Some((Code::TooLarge, _)), _)) => {}
            Ok((goaway, _)) => return Err(format!("body_len {len}: closed with {goaway:?}, not GOAWAY too_large")),
            Err(e) => return Err(format!("body_len {len}: {e}")),
        }
    }
    Ok("GOAWAY too_large, closed".into())
}

/// 48 clients each announce a 16 MiB frame, send 64 KiB of it and stop
/// (48: under `max_connections_per_peer`, 64, with the background clients
/// and the case's own status calls, all from the same uid). Expected: the
/// hub keeps only the bytes that arrived (a frame's buffer is sized from
/// its header, but only the pages filled become resident): it grows by
/// well under 32 MiB, not 48 × 16 MiB.
/// (Such a connection is closed by `idle_timeout`, 5 min: not waited for.)
pub async fn header_then_silence(ctx: &Ctx) -> Outcome {
    let before = ctx.probe.now().rss_kib;
    let mut held = Vec::new();
    for _ in 0..48 {
        let mut c = Raw::unix(&ctx.main.socket).await?;
        c.handshake().await?;
        c.send(&wire::header(16 * 1024 * 1024 - 64, 1, 0x02, 0, 0, 1), Duration::from_secs(2)).await?;
        c.send(&vec![0u8; 64 * 1024], Duration::from_secs(2)).await?;
        held.push(c);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let grew = growth(ctx, before);
    drop(held);
    if grew < 32 * MIB {
        Ok(format!("48 half-sent 16 MiB frames: hub grew {} MiB", grew / MIB))
    } else {
        Err(format!("48 half-sent 16 MiB frames: hub grew {} MiB", grew / MIB))
    }
}

/// 4 KiB of pseudo-random bytes, instead of a HELLO and after one.
/// Expected: GOAWAY (protocol_error, unsupported_version or too_large, by
/// whichever check the bytes fail first) and the connection closed at once.
pub async fn garbage_bytes(ctx: &Ctx) -> Outcome {
    let mut x: u32 = 0x2545_f491;
    let garbage: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    for after_hello in [false, true] {
        let mut c = Raw::unix(&ctx.main.socket).await?;
        if after_hello {
            c.handshake().await?;
        }
        let _ = c.send(&garbage, Duration::from_secs(2)).await;
        c.until_closed(Duration::from_secs(3)).await.map_err(|e| format!("garbage (after HELLO: {after_hello}): {e}"))?;
    }
    Ok("closed, before and after HELLO".into())
}

/// A HELLO frame with version byte 2, and a HELLO offering only versions
/// [2, 3]. Expected: GOAWAY `unsupported_version`, connection closed.
pub async fn wrong_version(ctx: &Ctx) -> Outcome {
    let mut byte2 = wire::hello().to_vec();
    byte2[4] = 2;
    let mut h = Hello::new(PeerInfo { name: "future".into(), lang: "rust".into(), version: "9".into() });
    h.versions = vec![2, 3];
    let future = Frame::Hello(Box::new(h)).to_bytes().to_vec();
    for (what, bytes) in [("version byte 2", byte2), ("versions [2, 3]", future)] {
        let mut c = Raw::unix(&ctx.main.socket).await?;
        c.send(&bytes, Duration::from_secs(2)).await?;
        match c.until_closed(Duration::from_secs(3)).await {
            Ok((Some((Code::UnsupportedVersion, _)), _)) => {}
            Ok((goaway, _)) => return Err(format!("{what}: closed with {goaway:?}, not GOAWAY unsupported_version")),
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
    Ok("GOAWAY unsupported_version, closed".into())
}

/// REQUEST 1 (`sleep` 2 s), then in one write CANCEL 1 and a new REQUEST 1
/// (`echo`). Expected: the new call 1 is answered with its echo (the old
/// call's end must not remove the new one from the table).
pub async fn cancel_then_reuse_id(ctx: &Ctx) -> Outcome {
    let mut c = Raw::unix(&ctx.main.socket).await?;
    c.handshake().await?;
    // MessagePack {"ms": 2000}: fixmap 1, fixstr "ms", uint16 2000.
    let sleep = [0x81, 0xa2, b'm', b's', 0xcd, 0x07, 0xd0];
    c.send(&wire::request(1, Kind::Unary, Codec::Msgpack, "sleep", &sleep, 0), Duration::from_secs(2)).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut both = wire::cancel(1).to_vec();
    both.extend_from_slice(&wire::request(1, Kind::Unary, Codec::Raw, "echo", b"the new call 1", 0));
    c.send(&both, Duration::from_secs(2)).await?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match c.next(deadline.saturating_duration_since(Instant::now())).await {
            Read::Frame(Frame::Response { call_id: 1, code: Code::Ok, payload, .. }) if &payload[..] == b"the new call 1" => {
                return Ok("the new call 1 was answered".into());
            }
            Read::Frame(f) => seen.push(format!("{:?}", f.frame_type())),
            other => return Err(format!("no answer to the new call 1: {other:?} (saw {seen:?})")),
        }
    }
    Err(format!("no answer to the new call 1 within 5 s (saw {seen:?})"))
}

/// Waits (up to 3 s) until the hub's descriptors are back to `before` (+4
/// for the background clients' redials and the hub's own churn).
pub async fn settle_fds(ctx: &Ctx, before: u64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let now = ctx.probe.now().fds;
        if now <= before + 4 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("hub descriptors {now}, not back to {before} within 3 s"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A new client is served an `echo` within 2 s.
pub async fn served(ctx: &Ctx) -> Result<Duration, String> {
    let started = Instant::now();
    let conn = ctx.main.connect().await?;
    let call = conn.call_raw("echo", bytes::Bytes::from_static(b"hi"));
    match tokio::time::timeout(Duration::from_secs(2), call).await {
        Ok(Ok(_)) => Ok(started.elapsed()),
        Ok(Err(e)) => Err(format!("a new client's echo failed: {e}")),
        Err(_) => Err("a new client's echo got no answer within 2 s".into()),
    }
}
