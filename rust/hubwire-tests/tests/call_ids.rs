//! Call ids on the serving side, driven by a raw peer over the in-memory
//! transport so that the frames arrive exactly as written: a peer may reuse
//! the id of a call it has cancelled at once (`spec/PROTOCOL.md` §3: an id
//! is free again when its call ends), even in the same write as the CANCEL.

use std::future::poll_fn;
use std::io::IoSlice;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hubwire::transport::{memory, Transport};
use hubwire::{Connection, ConnectionOptions, Provider, Raw};
use hubwire_frame::{Code, Codec, Decoder, Frame, Hello, Kind, PeerInfo};

fn provider() -> Provider {
    Provider::new("ids")
        .unary("echo", |_, x: Raw| async move { Ok(x) })
        .unary("forever", |_, _: Raw| async move { std::future::pending::<Result<Raw, hubwire::Error>>().await })
}

fn request(id: u32, method: &str, payload: &'static [u8]) -> Frame {
    Frame::Request {
        call_id: id,
        kind: Kind::Unary,
        codec: Codec::Raw,
        timeout_ms: 0,
        method: method.into(),
        payload: Bytes::from_static(payload),
    }
}

/// Writes `frames` in one write.
fn send(t: &memory::MemoryTransport, frames: &[Frame]) {
    let bytes: Vec<u8> = frames.iter().flat_map(|f| f.to_bytes().to_vec()).collect();
    assert_eq!(t.try_write(&[IoSlice::new(&bytes)]).unwrap(), bytes.len());
}

/// The next frame from the provider (failing after 5 s: a hang is the bug).
async fn next_frame(t: &memory::MemoryTransport, decoder: &Decoder, buf: &mut BytesMut) -> Frame {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(f) = decoder.decode(buf).unwrap() {
                return f;
            }
            buf.reserve(4096);
            assert!(poll_fn(|cx| t.poll_read(cx, buf)).await.unwrap() > 0, "the provider closed the connection");
        }
    })
    .await
    .expect("no frame from the provider within 5 s")
}

async fn reuse_after_cancel(options: ConnectionOptions) {
    let (raw, theirs) = memory::pair();
    let served = tokio::spawn(async move { Connection::accept(theirs, &options.service(provider())).await.unwrap() });
    let decoder = Decoder::new(u32::MAX);
    let mut buf = BytesMut::new();
    let hello = Hello::new(PeerInfo { name: "raw".into(), lang: "test".into(), version: "0".into() });
    send(&raw, &[Frame::Hello(Box::new(hello)), request(1, "forever", b"")]);
    assert!(matches!(next_frame(&raw, &decoder, &mut buf).await, Frame::Hello(_)));
    let _conn = served.await.unwrap();
    // Let the first call's handler start and wait.
    tokio::time::sleep(Duration::from_millis(50)).await;

    send(&raw, &[Frame::Cancel { call_id: 1 }, request(1, "echo", b"again")]);
    match next_frame(&raw, &decoder, &mut buf).await {
        Frame::Response { call_id: 1, code: Code::Ok, payload, .. } => assert_eq!(&payload[..], b"again"),
        other => panic!("expected the new call 1 answered ok, got {other:?}"),
    }
}

/// On one thread the old call's task wakes (cancelled) before the new
/// call's task runs: the order in which a table keyed by id alone loses the
/// new call.
#[tokio::test(flavor = "current_thread")]
async fn an_id_reused_in_the_same_write_as_its_cancel_is_a_new_call() {
    reuse_after_cancel(ConnectionOptions::new("ids")).await;
}

/// Low-latency mode answers the new call on the reader, before the old
/// call's task runs: the other order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_reused_in_the_same_write_as_its_cancel_is_a_new_call_low_latency() {
    reuse_after_cancel(ConnectionOptions::new("ids").wait(hubwire::WaitMode::low_latency())).await;
}
