//! The write queue's cap, end to end over the in-memory transport: a peer
//! that sends calls and does not read is held back by its own full socket
//! (bytes queued for it stay near the cap), gets every answer once it
//! reads, and is closed with GOAWAY `resource_exhausted` if it never does.

use std::io::{self, IoSlice};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hubwire_frame::{Code, Codec, Decoder, Frame, Hello, Kind, PeerInfo};

use crate::transport::memory::{self, MemoryTransport};
use crate::transport::Transport;
use crate::{Connection, ConnectionOptions, Provider, Raw};

/// Payload of each echo call, and the server's write queue cap.
const PAYLOAD: usize = 16 * 1024;
const CAP: usize = 64 * 1024;

fn echo_server(stall: Duration) -> ConnectionOptions {
    let echo = Provider::new("s").unary("echo", |_ctx, x: Raw| async move { Ok(x) });
    ConnectionOptions::new("server").write_queue(CAP, stall).service(echo)
}

/// Writes `bytes` whole, yielding while the transport is full; false if it
/// stays full while the other side has had many turns to read.
async fn write_all(t: &MemoryTransport, mut bytes: &[u8]) -> bool {
    let mut idle = 0;
    while !bytes.is_empty() {
        match t.try_write(&[IoSlice::new(bytes)]) {
            Ok(n) => {
                bytes = &bytes[n..];
                idle = 0;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                idle += 1;
                if idle > 200 {
                    return false;
                }
                tokio::task::yield_now().await;
            }
            Err(e) => panic!("write failed: {e}"),
        }
    }
    true
}

/// A raw peer: sends HELLO, then `echo` REQUESTs (ids 1, 3, …) until its
/// writes block; returns how many REQUESTs went out whole.
async fn flood(raw: &MemoryTransport) -> u32 {
    let hello = Frame::Hello(Box::new(Hello::new(PeerInfo { name: "raw".into(), lang: "rust".into(), version: "0".into() })));
    assert!(write_all(raw, &hello.to_bytes()).await);
    let payload = Bytes::from(vec![7u8; PAYLOAD]);
    let mut sent = 0;
    for id in (1u32..).step_by(2).take(10_000) {
        let req = Frame::Request {
            call_id: id,
            kind: Kind::Unary,
            codec: Codec::Raw,
            timeout_ms: 0,
            method: "echo".into(),
            payload: payload.clone(),
        };
        if !write_all(raw, &req.to_bytes()).await {
            break;
        }
        sent += 1;
    }
    sent
}

#[tokio::test(flavor = "current_thread")]
async fn a_peer_that_does_not_read_is_held_back_and_then_answered() {
    let (raw, theirs) = memory::pair();
    let server = tokio::spawn(async move { Connection::accept(theirs, &echo_server(Duration::from_secs(3600))).await.unwrap() });
    let sent = flood(&raw).await;
    let server = server.await.unwrap();
    let queued = server.core().writer.queued();
    // Answers queued: the cap, plus those of calls already running when it
    // was passed (here: what the reader took in before the first answer
    // was queued, at most the transport's 256 KiB), never one per request
    // offered (10 000 × 16 KiB).
    assert!(queued <= CAP + 256 * 1024 + 16 * (PAYLOAD + 64), "{queued} bytes queued for a peer that does not read");
    assert!(sent < 64, "the writes blocked only after {sent} requests");
    // Now read: every request sent is answered, none lost.
    let decoder = Decoder::new(16 << 20);
    let mut buf = BytesMut::new();
    let mut answered = 0;
    while answered < sent {
        buf.reserve(64 * 1024);
        match std::future::poll_fn(|cx| raw.poll_read(cx, &mut buf)).await {
            Ok(0) => panic!("closed after {answered} of {sent} answers"),
            Ok(_) => {}
            Err(e) => panic!("read failed: {e}"),
        }
        while let Some(f) = decoder.decode(&mut buf).unwrap() {
            match f {
                Frame::Response { code: Code::Ok, payload, .. } => {
                    assert_eq!(payload.len(), PAYLOAD);
                    answered += 1;
                }
                Frame::Hello(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(answered, sent);
}

#[tokio::test(flavor = "current_thread")]
async fn a_peer_that_never_reads_is_closed_with_resource_exhausted() {
    let (raw, theirs) = memory::pair();
    let server = tokio::spawn(async move { Connection::accept(theirs, &echo_server(Duration::from_millis(20))).await.unwrap() });
    flood(&raw).await;
    let why = server.await.unwrap().closed().await;
    assert!(why.message().contains("resource_exhausted"), "{}", why.message());
}

#[tokio::test(flavor = "current_thread")]
async fn two_sides_streaming_past_their_caps_both_finish() {
    use crate::stream::{ItemSink, ItemStream};
    // Each item is as large as the cap: both queues are over it most of
    // the time, and both sides must go on reading each other's ITEMs.
    let echo = Provider::new("s").bidi("echo", |_ctx, mut items: ItemStream<Raw>, sink: ItemSink<Raw>| async move {
        while let Some(x) = items.next().await? {
            sink.send(&x).await?;
        }
        Ok(())
    });
    let opts = |name: &str| ConnectionOptions::new(name).write_queue(CAP, Duration::from_secs(3600));
    let p = crate::testing::pair_with(echo, opts("client"), opts("server")).await;
    let (sink, mut outputs) = p.client.bidi::<Raw, Raw>("echo", &crate::CallOptions::new()).await.unwrap();
    let n = 100;
    let sending = tokio::spawn(async move {
        for i in 0..n {
            sink.send(&Raw(Bytes::from(vec![i as u8; CAP]))).await.unwrap();
        }
        sink.end().unwrap();
    });
    let mut got = 0;
    while let Some(x) = outputs.next().await.unwrap() {
        assert_eq!(x.0[0], got as u8);
        got += 1;
        // A slow reader, but a reader.
        tokio::task::yield_now().await;
    }
    sending.await.unwrap();
    assert_eq!(got, n);
}
