//! The WebSocket listener of a real hub process: calls over it, the
//! `Origin`, `Host` and subprotocol checks at the upgrade, a text message
//! (1003) and an oversized one (1009) refused, a silent connection closed
//! after the upgrade timeout, and SIGTERM draining a
//! WebSocket client like any other (`spec/PROTOCOL.md` §11.3).

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Hub;
use futures_util::{SinkExt, StreamExt};
use hubwire::{CallOptions, Connection, ConnectionOptions, ItemStream};
use hubwire_hub::websocket;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

const ONE: &str = "[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\n";

/// A hub with a WebSocket listener on port 0 and `extra` `[hub]` lines,
/// its provider ready, and the `ws://` URL it logged.
async fn start(extra: &str) -> (Hub, String) {
    let hub = Hub::start_with(&format!("websocket = \"127.0.0.1:0\"\n{extra}"), ONE, &[]);
    hub.wait_ready("test", 1).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr = loop {
        let log = hub.log();
        let at = log.lines().find_map(|l| l.split("listen=ws:").nth(1)).and_then(|a| a.split_whitespace().next()).map(str::to_string);
        if let Some(at) = at {
            break at;
        }
        assert!(Instant::now() < deadline, "no `listen=ws:` line in the hub's log:\n{log}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    (hub, format!("ws://{addr}/"))
}

/// An upgrade request to `url` with `headers` (the subprotocol is not
/// offered unless one of them does); the error it got, if any.
async fn upgrade(url: &str, headers: &[(&'static str, &str)]) -> Result<(), String> {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(*k, HeaderValue::from_str(v).unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok(_) => Ok(()),
        Err(WsError::Http(resp)) => {
            let body = resp.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default().to_string();
            Err(format!("{} {body}", resp.status().as_u16()))
        }
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_over_a_websocket_are_served_like_any_other() {
    let (hub, url) = start("").await;
    let t = websocket::connect(&url).await.unwrap();
    let c = Connection::dial(t, &ConnectionOptions::new("ws-client")).await.unwrap();
    assert!(c.peer().methods.iter().any(|m| m.name == "echo"), "the hub's HELLO lists the provider's methods");
    assert_eq!(&c.call_raw("echo", Bytes::from_static(b"\x00\xffover ws")).await.unwrap()[..], b"\x00\xffover ws");
    // 3 MiB each way: the frame spans many messages (at most 1 MiB each).
    let big: Bytes = (0..3 << 20).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into();
    assert_eq!(c.call_raw("echo", big.clone()).await.unwrap(), big);
    let items: ItemStream<u32> = c.server_stream("count", &3000u32, &CallOptions::new()).await.unwrap();
    assert_eq!(items.collect().await.unwrap(), (0..3000).collect::<Vec<u32>>());
    // Many calls at once share the one WebSocket.
    let calls = (0..200u32).map(|i| {
        let c = c.clone();
        async move { c.call_raw("echo", Bytes::from(i.to_string())).await.unwrap() }
    });
    let got = futures_util::future::join_all(calls).await;
    assert!(got.iter().enumerate().all(|(i, b)| b[..] == *i.to_string().as_bytes()));
    drop(hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_host_and_subprotocol_are_checked_before_the_upgrade() {
    let (_hub, url) = start("allowed_origins = [\"http://good.example:8080\"]\n").await;
    let proto = ("sec-websocket-protocol", websocket::SUBPROTOCOL);
    assert_eq!(upgrade(&url, &[proto]).await, Ok(()), "no Origin: not a browser");
    assert_eq!(upgrade(&url, &[proto, ("origin", "http://good.example:8080")]).await, Ok(()));
    let e = upgrade(&url, &[proto, ("origin", "http://evil.example")]).await.unwrap_err();
    assert!(e.starts_with("403") && e.contains("allowed_origins"), "{e}");
    let e = upgrade(&url, &[proto, ("host", "evil.example")]).await.unwrap_err();
    assert!(e.starts_with("403") && e.contains("allowed_hosts"), "{e}");
    let e = upgrade(&url, &[]).await.unwrap_err();
    assert!(e.starts_with("400") && e.contains("hubwire.v1"), "{e}");
    let e = upgrade(&url, &[("sec-websocket-protocol", "chat, mqtt")]).await.unwrap_err();
    assert!(e.starts_with("400"), "{e}");
}

/// Sends `msg` on a raw WebSocket to the hub and returns the Close it got.
async fn closed_after(url: &str, msg: Message) -> CloseFrame {
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_static(websocket::SUBPROTOCOL));
    let (mut ws, resp) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(resp.headers().get("sec-websocket-protocol").unwrap(), websocket::SUBPROTOCOL);
    // A send may fail once the hub has closed (the oversized message is refused while it arrives).
    let _ = ws.send(msg).await;
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(m) = ws.next().await {
            if let Ok(Message::Close(frame)) = m {
                return frame;
            }
        }
        None
    })
    .await
    .expect("no Close within 20 s")
    .expect("a Close with a code")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_oversized_messages_close_the_websocket_and_nothing_else() {
    let (_hub, url) = start("").await;
    let close = closed_after(&url, Message::Text("{\"method\": \"echo\"}".into())).await;
    assert_eq!(close.code, CloseCode::Unsupported);
    assert!(close.reason.starts_with("protocol_error"), "{}", close.reason);
    let close = closed_after(&url, Message::Binary(vec![0u8; websocket::MAX_MESSAGE + 1].into())).await;
    assert_eq!(close.code, CloseCode::Size, "{}", close.reason);
    // The hub goes on serving other WebSocket clients.
    let c = Connection::dial(websocket::connect(&url).await.unwrap(), &ConnectionOptions::new("after")).await.unwrap();
    assert_eq!(&c.call_raw("echo", Bytes::from_static(b"still here")).await.unwrap()[..], b"still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_websocket_client_like_any_other() {
    let (mut hub, url) = start("").await;
    let c = Connection::dial(websocket::connect(&url).await.unwrap(), &ConnectionOptions::new("ws-client")).await.unwrap();
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.call::<_, String>("sleep", &serde_json::json!({"ms": 1500})).await }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.call::<_, usize>("live", &()).await.unwrap() != 1 {
        assert!(Instant::now() < deadline, "the sleep never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let status = tokio::task::spawn_blocking(move || {
        let s = hub.terminate(Duration::from_secs(30));
        (s, hub)
    });
    // The call in flight finishes; the hub then ends the connection.
    assert_eq!(call.await.unwrap().unwrap(), "slept 1500 ms");
    let why = tokio::time::timeout(Duration::from_secs(20), c.closed()).await.expect("the hub did not close the WebSocket");
    println!("closed: {why}");
    let (s, _hub) = status.await.unwrap();
    assert!(s.success(), "the hub exited {s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_asks_to_upgrade_is_closed() {
    use tokio::io::AsyncReadExt;
    let (_hub, url) = start("").await;
    let addr = url.trim_start_matches("ws://").trim_end_matches('/');
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 64];
    let within = websocket::UPGRADE_TIMEOUT + Duration::from_secs(20);
    let read = tokio::time::timeout(within, silent.read(&mut buf)).await.expect("still open long after the upgrade timeout");
    assert!(matches!(read, Ok(0) | Err(_)), "the hub closed it without a word: {read:?}");
    // The listener still upgrades others.
    let c = Connection::dial(websocket::connect(&url).await.unwrap(), &ConnectionOptions::new("next")).await.unwrap();
    assert_eq!(&c.call_raw("echo", Bytes::from_static(b"next")).await.unwrap()[..], b"next");
}
