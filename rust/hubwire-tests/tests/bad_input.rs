//! Bad input against a live peer (`spec/PROTOCOL.md` §7.1): every
//! must-reject vector of `spec/vectors/reject.json` is sent, after a valid
//! handshake, on a raw socket to a provider that is also serving a healthy
//! client. For each, the provider must answer GOAWAY with the vector's code
//! and close that connection, and the healthy client must keep working.
//! Handshake failures (wrong first frame, no common version) are checked
//! the same way.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hubwire::transport::unix;
use hubwire::{Connection, ConnectionOptions};
use hubwire_frame::{Code, Decoder, Frame, Hello, PeerInfo};
use hubwire_tests::harness::TempDir;
use serde::Deserialize;

#[derive(Deserialize)]
struct RejectFile {
    cases: Vec<RejectCase>,
}

#[derive(Deserialize)]
struct RejectCase {
    name: String,
    hex: String,
    #[serde(default)]
    max_frame: Option<u32>,
    #[serde(default)]
    eof: bool,
    error: String,
}

fn reject_cases() -> Vec<RejectCase> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/vectors/reject.json");
    let file: RejectFile = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert!(file.cases.len() >= 30, "the must-reject set looks truncated");
    file.cases
}

/// Starts the behaviour provider on a Unix socket with `max_frame`.
async fn start_provider(dir: &Path, max_frame: u32) -> PathBuf {
    let path = dir.join(format!("bad-{max_frame}.sock"));
    let listener = unix::UnixListener::bind(&path).unwrap();
    let config = hubwire_tests::provider_config().max_frame(max_frame);
    tokio::spawn(hubwire_tests::provider().serve(listener, config));
    path
}

fn hello_bytes(versions: Vec<u32>) -> Bytes {
    let mut h = Hello::new(PeerInfo { name: "raw-test".into(), lang: "test".into(), version: "0".into() });
    h.versions = versions;
    Frame::Hello(Box::new(h)).to_bytes()
}

/// What came back on a raw connection: every frame, then end of stream.
struct Reply {
    frames: Vec<Frame>,
    eof: bool,
}

/// Sends `before` (e.g. a HELLO), reads the peer's HELLO if `handshake`,
/// sends `bad`, optionally half-closes, then reads until end of stream.
fn raw_exchange(path: &Path, before: &[u8], handshake: bool, bad: &[u8], half_close: bool) -> Reply {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(before).unwrap();
    let decoder = Decoder::new(u32::MAX);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut read_frame = |s: &mut UnixStream, buf: &mut BytesMut, frames: &mut Vec<Frame>| -> bool {
        loop {
            if let Some(f) = decoder.decode(buf).expect("the provider sends valid frames") {
                frames.push(f);
                return true;
            }
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    if handshake {
        assert!(read_frame(&mut s, &mut buf, &mut frames), "no HELLO from the provider");
        assert!(matches!(frames[0], Frame::Hello(_)), "first frame must be HELLO");
    }
    // The peer may close before taking all of it; that is fine.
    let _ = s.write_all(bad);
    if half_close {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    while read_frame(&mut s, &mut buf, &mut frames) {}
    Reply { frames, eof: true }
}

fn goaway_code(reply: &Reply) -> Option<(Code, String)> {
    reply.frames.iter().find_map(|f| match f {
        Frame::Goaway { code, message, .. } => Some((*code, message.clone())),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_must_reject_vector_gets_goaway_and_spares_other_connections() {
    let dir = TempDir::new("bad-input");
    let cases = reject_cases();
    let mut providers = std::collections::HashMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        let max_frame = case.max_frame.unwrap_or(hubwire_frame::DEFAULT_MAX_FRAME);
        if let std::collections::hash_map::Entry::Vacant(slot) = providers.entry(max_frame) {
            let path = start_provider(&dir.0, max_frame).await;
            let healthy = Connection::dial(unix::connect(&path).await.unwrap(), &ConnectionOptions::new("healthy")).await.unwrap();
            slot.insert((path, healthy));
        }
        let (path, healthy) = &providers[&max_frame];
        let bad = hex::decode(&case.hex).unwrap();
        let (path2, hello) = (path.clone(), hello_bytes(vec![1]));
        let eof = case.eof;
        let reply = tokio::task::spawn_blocking(move || raw_exchange(&path2, &hello, true, &bad, eof)).await.unwrap();
        let want = Code::from_name(&case.error).unwrap();
        match goaway_code(&reply) {
            Some((code, _)) if code == want && reply.eof => {}
            got => failures.push(format!("{}: expected GOAWAY {want} and close, got {got:?}", case.name)),
        }
        // The provider keeps serving its other connections.
        let r: i64 = healthy.call("add", &(case.name.len() as i64, 1i64)).await.unwrap();
        assert_eq!(r, case.name.len() as i64 + 1, "healthy connection broken after {}", case.name);
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_failures_get_goaway() {
    let dir = TempDir::new("bad-handshake");
    let path = start_provider(&dir.0, hubwire_frame::DEFAULT_MAX_FRAME).await;
    let healthy = Connection::dial(unix::connect(&path).await.unwrap(), &ConnectionOptions::new("healthy")).await.unwrap();
    let ping = Frame::Ping { data: [1; 8] }.to_bytes();
    let cases: Vec<(&str, Vec<u8>, Code)> = vec![
        ("no common version", hello_bytes(vec![2, 3]).to_vec(), Code::UnsupportedVersion),
        ("first frame is not HELLO", ping.to_vec(), Code::ProtocolError),
        (
            "HELLO is not JSON",
            {
                let mut b = hello_bytes(vec![1]).to_vec();
                b[12] = b'!';
                b
            },
            Code::ProtocolError,
        ),
        ("garbage instead of a frame", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), Code::UnsupportedVersion),
    ];
    for (name, first, want) in cases {
        let p = path.clone();
        let reply = tokio::task::spawn_blocking(move || raw_exchange(&p, &first, false, &[], false)).await.unwrap();
        // The provider sends its HELLO first, then GOAWAY.
        let got = goaway_code(&reply);
        assert!(matches!(got, Some((code, _)) if code == want), "{name}: expected GOAWAY {want}, got {got:?}");
        if want == Code::UnsupportedVersion && name.contains("version") {
            let msg = got.unwrap().1;
            assert!(msg.contains("[1]") && msg.contains("[2, 3]"), "{name}: message should name both lists: {msg}");
        }
        let r: i64 = healthy.call("add", &(1i64, 2i64)).await.unwrap();
        assert_eq!(r, 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_refused_at_handshake_gets_the_code() {
    // A hubwire client dialing a peer that speaks only version 2 gets
    // unsupported_version, not a hang or a generic error.
    let dir = TempDir::new("v2");
    let path = dir.0.join("v2.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&hello_bytes(vec![2])).unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    let err = Connection::dial(unix::connect(&path).await.unwrap(), &ConnectionOptions::new("v1-client")).await.err().expect("must fail");
    assert_eq!(err.code(), Code::UnsupportedVersion, "{err}");
    assert!(err.message().contains("no common protocol version"), "{err}");
    server.join().unwrap();
}

/// A HELLO of `methods` methods, each with a schema, for a body of roughly
/// `methods * 110` bytes.
fn hello_with_methods(methods: usize) -> Bytes {
    let mut h = Hello::new(PeerInfo { name: "big-hello".into(), lang: "test".into(), version: "0".into() });
    h.methods = (0..methods)
        .map(|i| hubwire_frame::MethodInfo {
            name: format!("method_{i}"),
            kind: hubwire_frame::Kind::Unary,
            input: serde_json::json!({"type": "object", "description": "padding so that the HELLO grows"}),
            output: serde_json::json!({}),
            errors: None,
            doc: None,
        })
        .collect();
    Frame::Hello(Box::new(h)).to_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_may_exceed_a_small_max_frame_up_to_one_mib() {
    // spec/PROTOCOL.md §4.1.2: the first frame is read with the limit
    // max(max_frame, 1 MiB); after it, max_frame alone applies.
    let dir = TempDir::new("hello-size");
    let path = start_provider(&dir.0, hubwire_frame::hello::MIN_MAX_FRAME).await;
    let big = hello_with_methods(1000);
    assert!(big.len() > 64 * 1024 && big.len() <= hubwire_frame::HELLO_LIMIT as usize, "{} bytes", big.len());

    // Accepted: the provider answers a PING after it.
    let ping = Frame::Ping { data: [7; 8] }.to_bytes();
    let (p, hello) = (path.clone(), big.clone());
    let reply = tokio::task::spawn_blocking(move || raw_exchange(&p, &hello, true, &ping, true)).await.unwrap();
    assert!(reply.frames.iter().any(|f| matches!(f, Frame::Pong { data } if *data == [7; 8])), "no PONG: {:?}", goaway_code(&reply));
    assert_eq!(goaway_code(&reply), None);

    // Once the HELLO is read, a frame over max_frame is too_large.
    let mut item =
        Vec::from(&Frame::Item { call_id: 1, codec: hubwire_frame::Codec::Raw, payload: Bytes::from(vec![0u8; 5000]) }.to_bytes()[..]);
    item.truncate(12); // the header alone proves it
    let (p, hello) = (path.clone(), big);
    let reply = tokio::task::spawn_blocking(move || raw_exchange(&p, &hello, true, &item, false)).await.unwrap();
    assert!(matches!(goaway_code(&reply), Some((Code::TooLarge, _))), "{:?}", goaway_code(&reply));

    // A first frame over 1 MiB is too_large, before its body arrives.
    let mut header = Vec::from(&hello_bytes(vec![1])[..12]);
    header[..4].copy_from_slice(&(hubwire_frame::HELLO_LIMIT + 1).to_le_bytes());
    let p = path.clone();
    let reply = tokio::task::spawn_blocking(move || raw_exchange(&p, &header, false, &[], false)).await.unwrap();
    assert!(matches!(goaway_code(&reply), Some((Code::TooLarge, _))), "{:?}", goaway_code(&reply));
}
