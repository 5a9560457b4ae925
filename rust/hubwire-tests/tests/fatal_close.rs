//! Closing after a fatal GOAWAY (`spec/PROTOCOL.md` §7.3), over TCP, in
//! both roles: a raw peer sends a header announcing a body over the
//! runtime's `max_frame` and goes on writing body bytes. It must still
//! read the GOAWAY `too_large` and then end of stream, and its writes must
//! fail soon after (the runtime discards input for a bounded time, then
//! closes its descriptor), while the application still holds the
//! `Connection`. Bounds are generous: the machine may be busy.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hubwire::transport::tcp;
use hubwire::{Connection, ConnectionOptions};
use hubwire_frame::{Code, Decoder, Frame, Hello, PeerInfo, DEFAULT_MAX_FRAME};

/// Everything must be over within this.
const BOUND: Duration = Duration::from_secs(5);

fn hello_bytes() -> Bytes {
    let h = Hello::new(PeerInfo { name: "raw-test".into(), lang: "test".into(), version: "0".into() });
    Frame::Hello(Box::new(h)).to_bytes()
}

/// A REQUEST header announcing a body one byte over the default `max_frame`.
fn oversized_header() -> Vec<u8> {
    let mut b = (DEFAULT_MAX_FRAME + 1).to_le_bytes().to_vec();
    b.extend_from_slice(&[1, 0x02, 0, 0]);
    b.extend_from_slice(&2u32.to_le_bytes());
    b
}

/// What the raw peer saw.
#[derive(Debug)]
struct Seen {
    goaway: Option<Code>,
    /// When its read ended (end of stream or an error), from the start.
    read_ended: Option<Duration>,
    /// When a write first failed, from the start.
    write_failed: Option<Duration>,
}

/// Reads frames until a GOAWAY, then until end of stream, within [`BOUND`].
fn read_side(mut s: TcpStream, start: Instant, skip_hello: bool) -> (Option<Code>, Option<Duration>) {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let decoder = Decoder::new(u32::MAX);
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut goaway = None;
    let mut skip = skip_hello;
    while start.elapsed() < BOUND {
        while let Some(f) = decoder.decode(&mut buf).expect("the runtime sends valid frames") {
            match f {
                Frame::Hello(_) if skip => skip = false,
                Frame::Goaway { code, .. } => goaway = Some(code),
                other => panic!("unexpected {:?}", other.frame_type()),
            }
        }
        match s.read(&mut chunk) {
            Ok(0) => return (goaway, Some(start.elapsed())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => break,
            Err(_) => return (goaway, Some(start.elapsed())),
        }
    }
    (goaway, None)
}

/// Writes `first`, then (if `flood`) body bytes without pause, or else a
/// byte every 20 ms once the GOAWAY had time to come, until a write fails
/// or [`BOUND`] passes.
fn write_side(mut s: TcpStream, start: Instant, first: Vec<u8>, flood: bool) -> Option<Duration> {
    s.set_write_timeout(Some(BOUND)).unwrap();
    let mut first = first;
    if flood {
        // The whole body in one write, as a peer that sends a frame at
        // once does: the runtime's receive buffer fills before it has
        // read the header.
        first.resize(first.len() + DEFAULT_MAX_FRAME as usize, b'a');
    }
    match s.write_all(&first) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => return None,
        Err(_) => return Some(start.elapsed()),
    }
    let body = vec![b'a'; 64 * 1024];
    while start.elapsed() < BOUND {
        let r = if flood {
            s.write(&body)
        } else {
            std::thread::sleep(Duration::from_millis(20));
            s.write(b"a")
        };
        match r {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => return None,
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

/// Runs the raw peer on `s`: sends `first` then the oversized header (and
/// body bytes if `flood`), reads on another thread.
fn raw_peer(s: TcpStream, first: Vec<u8>, flood: bool, skip_hello: bool) -> Seen {
    let start = Instant::now();
    let r = s.try_clone().unwrap();
    let reader = std::thread::spawn(move || read_side(r, start, skip_hello));
    let mut bytes = first;
    bytes.extend_from_slice(&oversized_header());
    let write_failed = write_side(s, start, bytes, flood);
    let (goaway, read_ended) = reader.join().unwrap();
    Seen { goaway, read_ended, write_failed }
}

fn check(seen: &Seen) {
    assert_eq!(seen.goaway, Some(Code::TooLarge), "{seen:?}");
    assert!(seen.read_ended.is_some(), "the peer's read did not end within {BOUND:?}: {seen:?}");
    assert!(seen.write_failed.is_some_and(|t| t < BOUND), "the peer's writes did not fail within {BOUND:?}: {seen:?}");
    assert!(seen.read_ended.is_some_and(|t| t < BOUND), "{seen:?}");
}

/// A client (the application holds its `Connection` throughout) whose
/// provider sends an oversized frame.
async fn as_client(flood: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        raw_peer(s, hello_bytes().to_vec(), flood, true)
    });
    let conn = Connection::dial(tcp::connect(addr).await.unwrap(), &ConnectionOptions::new("client")).await.unwrap();
    let seen = tokio::task::spawn_blocking(move || peer.join().unwrap()).await.unwrap();
    check(&seen);
    assert!(conn.is_closed());
    let err = conn.closed().await;
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert!(err.message().contains("too_large"), "{err}");
    drop(conn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cuts_off_a_peer_that_never_stops_writing() {
    as_client(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_closes_its_descriptor_while_the_application_holds_the_connection() {
    as_client(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_cuts_off_a_peer_that_never_stops_writing() {
    let listener = tcp::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(hubwire_tests::provider().serve(listener, hubwire_tests::provider_config()));
    let seen =
        tokio::task::spawn_blocking(move || raw_peer(TcpStream::connect(addr).unwrap(), hello_bytes().to_vec(), true, true)).await.unwrap();
    check(&seen);
}
