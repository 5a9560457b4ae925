//! The outcome slots end to end: every way a call that answers once can
//! leave the call table (its RESPONSE, a dropped future, the connection's
//! death, the peer's GOAWAY) delivers to its slot, and every slot is free
//! again afterwards.

use std::future::{poll_fn, Future};
use std::task::Poll;

use bytes::Bytes;
use hubwire_frame::{Code, Frame, Hello, PeerInfo};

use crate::transport::memory;
use crate::transport::Transport;
use crate::{Connection, ConnectionOptions, Provider, Raw};

fn provider() -> Provider {
    Provider::new("s")
        .unary("echo", |_ctx, x: Raw| async move { Ok(x) })
        .unary("hang", |_ctx, _x: Raw| std::future::pending::<Result<Raw, crate::Error>>())
}

/// (calls in the table, slots in use, slots the slab has grown to).
fn table(c: &Connection) -> (usize, usize, usize) {
    let t = c.core().calls.lock().unwrap();
    (t.out.len(), t.slots.in_use(), t.slots.capacity())
}

/// Polls `f` once: a call's first poll registers it and sends its REQUEST.
async fn poll_once<F: Future + Unpin>(f: &mut F) {
    poll_fn(|cx| {
        assert!(std::pin::Pin::new(&mut *f).poll(cx).is_pending(), "answered before its REQUEST left");
        Poll::Ready(())
    })
    .await
}

/// Yields until the client has `n` calls in flight.
async fn until_in_flight(c: &Connection, n: usize) {
    for _ in 0..1000 {
        if table(c).0 == n {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{:?} in the table, waiting for {n} calls", table(c));
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_call_frees_its_slot_and_the_next_call_reuses_it() {
    let p = crate::testing::pair(provider()).await;
    let mut call = Box::pin(p.client.call_raw("hang", Bytes::from_static(b"x")));
    poll_once(&mut call).await;
    assert_eq!(table(&p.client), (1, 1, 1));
    drop(call);
    assert_eq!(table(&p.client), (0, 0, 1), "cancelled: out of the table, slot free");
    for _ in 0..3 {
        assert_eq!(&p.client.call_raw("echo", Bytes::from_static(b"y")).await.unwrap()[..], b"y");
    }
    assert_eq!(table(&p.client), (0, 0, 1), "the one slot was reused");
}

#[tokio::test(flavor = "current_thread")]
async fn the_connection_s_death_fails_every_pending_call() {
    let p = crate::testing::pair(provider()).await;
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let c = p.client.clone();
            tokio::spawn(async move { c.call_raw("hang", Bytes::from_static(b"x")).await })
        })
        .collect();
    until_in_flight(&p.client, 5).await;
    assert_eq!(table(&p.client), (5, 5, 5));
    p.server.close();
    for c in calls {
        let e = c.await.unwrap().unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e}");
    }
    assert_eq!(table(&p.client), (0, 0, 5));
}

#[tokio::test(flavor = "current_thread")]
async fn goaway_fails_the_calls_after_last_id_and_the_rest_are_answered() {
    let (ours, raw) = memory::pair();
    let hello = Frame::Hello(Box::new(Hello::new(PeerInfo { name: "raw".into(), lang: "rust".into(), version: "0".into() })));
    raw.try_write(&[std::io::IoSlice::new(&hello.to_bytes())]).unwrap();
    let client = Connection::dial(ours, &ConnectionOptions::new("client")).await.unwrap();
    // Ids 1, 3, 5, in the order the tasks start.
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.call_raw("m", Bytes::new()).await })
        })
        .collect();
    until_in_flight(&client, 3).await;
    let goaway = Frame::Goaway { last_id: 1, code: Code::Ok, message: "draining".into() };
    let answer = Frame::Response {
        call_id: 1,
        codec: hubwire_frame::Codec::Raw,
        code: Code::Ok,
        message: String::new(),
        payload: Bytes::from_static(b"a"),
    };
    for f in [goaway, answer] {
        raw.try_write(&[std::io::IoSlice::new(&f.to_bytes())]).unwrap();
    }
    let mut results = Vec::new();
    for c in calls {
        results.push(c.await.unwrap());
    }
    assert_eq!(&results[0].as_ref().unwrap()[..], b"a", "call 1 was seen and answered");
    for r in &results[1..] {
        let e = r.as_ref().unwrap_err();
        assert!(e.code() == Code::Unavailable && e.message().contains("never saw"), "{e}");
    }
    assert_eq!(table(&client), (0, 0, 3));
}
