//! The shared behaviour suite: every case runs on every transport (memory,
//! Unix socket in both waiting modes, TCP, child process). A case sees only
//! a `Harness` whose client is connected to the behaviour provider.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hubwire::{CallOptions, Code, Codec, Error, Raw};
use hubwire_tests::harness::{Harness, Setup};
use hubwire_tests::{DivError, Tagged, PROVIDER_MAX_FRAME, PROVIDER_WINDOW};

const CHILD: &str = env!("CARGO_BIN_EXE_behaviour-provider");

fn tagged(token: &str, n: u64) -> Tagged {
    Tagged { token: token.into(), n }
}

/// Polls `was_cancelled(token)` until the provider reports it, or fails.
async fn assert_cancel_observed(h: &Harness, token: &str) {
    let start = Instant::now();
    loop {
        let seen: Option<bool> = h.client.call("was_cancelled", &token.to_string()).await.unwrap();
        if seen == Some(true) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "provider never observed cancellation of {token} (saw {seen:?})");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn expect_code<T: std::fmt::Debug>(r: Result<T, Error>, code: Code) -> Error {
    match r {
        Err(e) if e.code() == code => e,
        other => panic!("expected {code}, got {other:?}"),
    }
}

mod cases {
    use super::*;

    pub async fn unary_raw(h: &mut Harness) {
        let c = &h.client;
        assert_eq!(c.call_raw("echo", Bytes::from_static(b"hello")).await.unwrap(), Bytes::from_static(b"hello"));
        assert_eq!(c.call_raw("echo", Bytes::new()).await.unwrap(), Bytes::new());
        let big: Bytes = (0..1_000_000u32).map(|i| (i * 7) as u8).collect::<Vec<_>>().into();
        assert_eq!(c.call_raw("echo", big.clone()).await.unwrap(), big);
    }

    pub async fn unary_typed(h: &mut Harness) {
        let c = &h.client;
        assert_eq!(c.call::<_, i64>("add", &(2i64, 40i64)).await.unwrap(), 42);
        let json = CallOptions::new().codec(Codec::Json);
        assert_eq!(c.call_with::<_, i64>("add", &(-5i64, 3i64), &json).await.unwrap(), -2);
        assert_eq!(c.call::<_, f64>("divide", &(1.0, 4.0)).await.unwrap(), 0.25);
    }

    pub async fn typed_failure(h: &mut Harness) {
        for opts in [CallOptions::new(), CallOptions::new().codec(Codec::Json)] {
            let e = expect_code(h.client.call_with::<_, f64>("divide", &(1.0, 0.0), &opts).await, Code::Failure);
            let v: DivError = e.failure_value().expect("failure carries a value").unwrap();
            assert_eq!(v.kind, "division_by_zero");
        }
    }

    pub async fn defect_panic(h: &mut Harness) {
        let e = expect_code(h.client.call::<_, ()>("panic", &"boom 42".to_string()).await, Code::Defect);
        assert!(e.message().contains("boom 42"), "{e}");
        // Only that call failed: the connection and provider go on.
        assert_eq!(h.client.call::<_, i64>("add", &(1i64, 1i64)).await.unwrap(), 2);
    }

    pub async fn unknown_method(h: &mut Harness) {
        let e = expect_code(h.client.call_raw("no_such_method", Bytes::new()).await, Code::UnknownMethod);
        assert!(e.message().contains("no_such_method"), "{e}");
    }

    pub async fn invalid_argument(h: &mut Harness) {
        // Wrong type of input.
        expect_code(h.client.call::<_, i64>("add", &"not a pair".to_string()).await, Code::InvalidArgument);
        // Structured method given raw bytes.
        expect_code(h.client.call_raw("add", Bytes::from_static(b"\x92\x01\x02")).await, Code::InvalidArgument);
        // Wrong call kind.
        let e = expect_code(h.client.call::<_, u32>("count", &3u32).await, Code::InvalidArgument);
        assert!(e.message().contains("server_stream"), "{e}");
    }

    pub async fn response_type_mismatch(h: &mut Harness) {
        // The caller expects a string, the method returns a number.
        expect_code(h.client.call::<_, String>("add", &(1i64, 2i64)).await, Code::Internal);
    }

    pub async fn server_stream(h: &mut Harness) {
        let items = h.client.server_stream::<_, u32>("count", &100u32, &CallOptions::new()).await.unwrap();
        assert_eq!(items.collect().await.unwrap(), (0..100).collect::<Vec<_>>());
        let items = h.client.server_stream::<_, u32>("count", &0u32, &CallOptions::new()).await.unwrap();
        assert!(items.collect().await.unwrap().is_empty());
    }

    pub async fn server_stream_error(h: &mut Harness) {
        let mut items = h.client.server_stream::<_, u32>("then_fail", &2u32, &CallOptions::new()).await.unwrap();
        assert_eq!(items.next().await.unwrap(), Some(0));
        assert_eq!(items.next().await.unwrap(), Some(1));
        let e = expect_code(items.next().await, Code::Failure);
        assert_eq!(e.failure_value::<DivError>().unwrap().unwrap().kind, "stream_failed");
    }

    pub async fn client_stream(h: &mut Harness) {
        // More items than the provider's window: needs CREDIT to finish.
        let call = h.client.client_stream::<i64, i64>("sum", &CallOptions::new()).await.unwrap();
        for i in 1..=1000 {
            call.send(&i).await.unwrap();
        }
        assert_eq!(call.finish().await.unwrap(), 500_500);
        let call = h.client.client_stream::<i64, i64>("sum", &CallOptions::new()).await.unwrap();
        assert_eq!(call.finish().await.unwrap(), 0);
    }

    pub async fn client_stream_early_answer(h: &mut Harness) {
        let call = h.client.client_stream::<i64, i64>("first_only", &CallOptions::new()).await.unwrap();
        call.send(&7).await.unwrap();
        assert_eq!(call.finish().await.unwrap(), 7);
    }

    pub async fn bidi(h: &mut Harness) {
        let (sink, mut items) = h.client.bidi::<String, String>("upper", &CallOptions::new()).await.unwrap();
        for i in 0..200 {
            sink.send(&format!("line {i}")).await.unwrap();
            assert_eq!(items.next().await.unwrap(), Some(format!("LINE {i}")));
        }
        // A burst bigger than both windows, read afterwards.
        let writer = tokio::spawn(async move {
            for i in 0..500 {
                sink.send(&format!("b{i}")).await.unwrap();
            }
            sink.end().unwrap();
        });
        for i in 0..500 {
            assert_eq!(items.next().await.unwrap(), Some(format!("B{i}")));
        }
        assert_eq!(items.next().await.unwrap(), None);
        writer.await.unwrap();
    }

    pub async fn cancel_unary_observed(h: &mut Harness) {
        let token = &h.token("cancel-unary");
        let r = tokio::time::timeout(Duration::from_millis(100), h.client.call::<_, ()>("sleep", &tagged(token, 60_000))).await;
        assert!(r.is_err(), "the call should still be running when dropped");
        assert_cancel_observed(h, token).await;
    }

    pub async fn cancel_stream_observed(h: &mut Harness) {
        let token = &h.token("cancel-stream");
        let mut items = h.client.server_stream::<_, u64>("firehose", &tagged(token, 1_000_000), &CallOptions::new()).await.unwrap();
        for i in 0..3 {
            assert_eq!(items.next().await.unwrap(), Some(i));
        }
        drop(items);
        assert_cancel_observed(h, token).await;
    }

    pub async fn deadline_exceeded(h: &mut Harness) {
        let token = &h.token("deadline-unary");
        let opts = CallOptions::new().timeout(Duration::from_millis(100));
        let start = Instant::now();
        let e = expect_code(h.client.call_with::<_, ()>("sleep", &tagged(token, 60_000), &opts).await, Code::DeadlineExceeded);
        assert!(start.elapsed() < Duration::from_secs(3), "took {:?}: {e}", start.elapsed());
        assert_cancel_observed(h, token).await;
        // A call that fits its deadline succeeds.
        let opts = CallOptions::new().timeout(Duration::from_secs(10));
        h.client.call_with::<_, ()>("sleep", &tagged(&h.token("deadline-ok"), 1), &opts).await.unwrap();
        // A zero timeout is no deadline, as timeout_ms = 0 is on the wire.
        let opts = CallOptions::new().timeout(Duration::ZERO);
        h.client.call_with::<_, ()>("sleep", &tagged(&h.token("deadline-none"), 20), &opts).await.unwrap();
    }

    pub async fn deadline_exceeded_mid_stream(h: &mut Harness) {
        let token = &h.token("deadline-stream");
        let opts = CallOptions::new().timeout(Duration::from_millis(200));
        let mut items = h.client.server_stream::<_, u64>("slow_stream", &tagged(token, 20), &opts).await.unwrap();
        let mut got = 0;
        let err = loop {
            match items.next().await {
                Ok(Some(_)) => got += 1,
                Ok(None) => panic!("slow_stream never ends by itself"),
                Err(e) => break e,
            }
        };
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
        assert!(got >= 2, "expected some items before the deadline, got {got}");
        assert_cancel_observed(h, token).await;
    }

    pub async fn flow_control_bounded(h: &mut Harness) {
        // The client grants 64 items (its default window); a provider that
        // could send 100 000 must stop at the window while we do not read.
        let token = &h.token("flow");
        let window = hubwire::frame::hello::DEFAULT_WINDOW as u64;
        let mut items = h.client.server_stream::<_, u64>("firehose", &tagged(token, 100_000), &CallOptions::new()).await.unwrap();
        assert_eq!(items.next().await.unwrap(), Some(0));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sent: u64 = h.client.call("progress", &token.to_string()).await.unwrap();
        assert!(sent <= window + 1, "producer ran ahead of the consumer: sent {sent} with window {window}");
        assert!(sent >= window / 2, "producer should have used its credit: sent {sent}");
        // Reading on lets it go on.
        for i in 1..(3 * window) {
            assert_eq!(items.next().await.unwrap(), Some(i));
        }
        let sent: u64 = h.client.call("progress", &token.to_string()).await.unwrap();
        assert!(sent >= 3 * window - 1, "credit was not returned: sent {sent}");
    }

    pub async fn flow_control_bounded_upstream(h: &mut Harness) {
        // The other direction: a handler that does not read grants no
        // credit beyond its window, so the caller's sends stop there.
        let call = h.client.client_stream::<i64, i64>("stall", &CallOptions::new()).await.unwrap();
        let mut sent = 0;
        while sent < 10 * PROVIDER_WINDOW {
            match tokio::time::timeout(Duration::from_millis(300), call.send(&1)).await {
                Ok(r) => {
                    r.unwrap();
                    sent += 1;
                }
                Err(_) => break,
            }
        }
        assert_eq!(sent, PROVIDER_WINDOW, "the caller must stop at the callee's window");
    }

    pub async fn concurrent_1000(h: &mut Harness) {
        // 1000 calls in flight on one connection, answered out of order.
        let calls = (0..1000u32).map(|i| {
            let c = h.client.clone();
            async move {
                let delay = ((i * 37) % 50) as u64;
                let r: u32 = c.call("delay_echo", &(i, delay)).await.unwrap();
                assert_eq!(r, i);
                i
            }
        });
        let handles: Vec<_> = calls.map(tokio::spawn).collect();
        let mut done = Vec::new();
        for h in handles {
            done.push(h.await.unwrap());
        }
        assert_eq!(done, (0..1000).collect::<Vec<_>>());
    }

    pub async fn too_large(h: &mut Harness) {
        let big = Bytes::from(vec![7u8; PROVIDER_MAX_FRAME as usize]);
        let e = expect_code(h.client.call_raw("echo", big).await, Code::TooLarge);
        assert!(e.message().contains("max_frame"), "{e}");
        // Nothing was sent; the connection is fine.
        let ok = Bytes::from(vec![1u8; PROVIDER_MAX_FRAME as usize - 64]);
        assert_eq!(h.client.call_raw("echo", ok.clone()).await.unwrap(), ok);
    }

    pub async fn ping_and_identity(h: &mut Harness) {
        let rtt = h.client.ping().await.unwrap();
        assert!(rtt < Duration::from_secs(5));
        let peer = h.client.peer();
        assert_eq!(peer.peer.name, "behaviour");
        assert_eq!(peer.peer.lang, "rust");
        assert_eq!(peer.window, PROVIDER_WINDOW);
        assert_eq!(peer.max_frame, PROVIDER_MAX_FRAME);
        let count = peer.method("count").expect("count offered");
        assert_eq!(count.kind, hubwire::Kind::ServerStream);
        assert_eq!(peer.method("echo").unwrap().input["contentMediaType"], "application/octet-stream");
    }

    pub async fn peer_crash_fails_in_flight(h: &mut Harness) {
        let mut calls = Vec::new();
        for i in 0..10 {
            let c = h.client.clone();
            let t = h.token(&format!("crash{i}"));
            calls.push(tokio::spawn(async move { c.call::<_, ()>("sleep", &tagged(&t, 60_000)).await }));
        }
        let mut stream =
            h.client.server_stream::<_, u64>("slow_stream", &tagged(&h.token("crash-s"), 10), &CallOptions::new()).await.unwrap();
        assert_eq!(stream.next().await.unwrap(), Some(0));
        h.client.ping().await.unwrap(); // all REQUESTs have reached the provider
        let start = Instant::now();
        h.kill_peer().await;
        for c in calls {
            let r = tokio::time::timeout(Duration::from_secs(5), c).await.expect("in-flight call left hanging").unwrap();
            expect_code(r, Code::Unavailable);
        }
        let e = loop {
            match tokio::time::timeout(Duration::from_secs(5), stream.next()).await.expect("stream left hanging") {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("stream ended cleanly after a crash"),
                Err(e) => break e,
            }
        };
        assert_eq!(e.code(), Code::Unavailable, "{e}");
        assert!(start.elapsed() < Duration::from_secs(5));
        // New calls fail at once, too.
        expect_code(h.client.call_raw("echo", Bytes::new()).await, Code::Unavailable);
        assert!(h.client.is_closed());
    }

    pub async fn stray_output_is_logged(h: &mut Harness) {
        for i in 0..20 {
            let r: String = h.client.call("shout", &format!("hi {i}")).await.unwrap();
            assert_eq!(r, format!("HI {i}"));
        }
        let r: Raw = h.client.call("echo", &Raw(Bytes::from_static(b"\x01\x02"))).await.unwrap();
        assert_eq!(r.0, Bytes::from_static(b"\x01\x02"));
        // In-process, the garbage went to the test's own stdout, which is
        // not the connection either. In a child it must come back as log
        // lines, tagged with the stream it was printed on.
        if !matches!(h.setup, Setup::Child | Setup::ShmChild) {
            return;
        }
        let has = |logs: &[(String, String)], stream: &str, text: &str| logs.iter().any(|(s, l)| s == stream && l.contains(text));
        let deadline = Instant::now() + Duration::from_secs(5);
        let logs = loop {
            let logs = h.logs.lock().unwrap().clone();
            if has(&logs, "stderr", "noise hi 19") || Instant::now() > deadline {
                break logs;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(has(&logs, "stdout", "HW garbage hi 3"), "{logs:?}");
        assert!(has(&logs, "stderr", "noise hi 19"), "{logs:?}");
        assert!(has(&logs, "stdout", "behaviour-provider starting"), "{logs:?}");
    }
}

macro_rules! transport_suite {
    ($module:ident, $setup:expr, [$($case:ident),* $(,)?]) => {
        mod $module {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let mut h = Harness::new($setup, CHILD).await;
                    tokio::time::timeout(Duration::from_secs(60), cases::$case(&mut h))
                        .await
                        .expect("case timed out");
                }
            )*
        }
    };
}

macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        transport_suite!(memory, Setup::Memory, [$($case),*]);
        transport_suite!(unix, Setup::Unix, [$($case),*]);
        transport_suite!(unix_low_latency, Setup::UnixLowLatency, [$($case),*]);
        transport_suite!(tcp, Setup::Tcp, [$($case),*]);
        transport_suite!(tls, Setup::Tls, [$($case),*]);
        transport_suite!(child, Setup::Child, [$($case),*]);
        transport_suite!(nats, Setup::Nats, [$($case),*]);
        transport_suite!(shm, Setup::Shm, [$($case),*]);
        transport_suite!(shm_low_latency, Setup::ShmLowLatency, [$($case),*]);
        transport_suite!(shm_child, Setup::ShmChild, [$($case),*]);
    };
}

suite!(
    unary_raw,
    unary_typed,
    typed_failure,
    defect_panic,
    unknown_method,
    invalid_argument,
    response_type_mismatch,
    server_stream,
    server_stream_error,
    client_stream,
    client_stream_early_answer,
    bidi,
    cancel_unary_observed,
    cancel_stream_observed,
    deadline_exceeded,
    deadline_exceeded_mid_stream,
    flow_control_bounded,
    flow_control_bounded_upstream,
    concurrent_1000,
    too_large,
    ping_and_identity,
    peer_crash_fails_in_flight,
    stray_output_is_logged,
);
