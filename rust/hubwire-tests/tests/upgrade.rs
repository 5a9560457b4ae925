//! The upgrade to shared memory (`spec/PROTOCOL.md` §11.4) beyond what the
//! behaviour suite's `shm*` setups cover: calls that cross the switch,
//! refusals and the switch that turns it off. (A peer killed mid-call is
//! the behaviour suite's `peer_crash_fails_in_flight` on `shm_child`.)

use bytes::Bytes;
use hubwire::transport::{self, unix};
use hubwire::{Connection, ConnectionOptions};
use hubwire_tests::harness::TempDir;

/// A client and the behaviour provider over a Unix socket, each with its
/// options; neither waits for the upgrade.
async fn pair(client: ConnectionOptions, server: ConnectionOptions) -> (Connection, Connection, TempDir) {
    let server = server.service(hubwire_tests::provider());
    let dir = TempDir::new("upgrade");
    let path = dir.0.join("p.sock");
    let listener = unix::UnixListener::bind(&path).unwrap();
    let (c, s) = tokio::join!(async { Connection::dial(unix::connect(&path).await.unwrap(), &client).await }, async {
        Connection::start(transport::accept(&listener).await.unwrap(), &server, false).await
    });
    (c.unwrap(), s.unwrap(), dir)
}

fn client() -> ConnectionOptions {
    ConnectionOptions::new("upgrade-client").shm(true)
}

fn server() -> ConnectionOptions {
    hubwire_tests::provider_config().shm(true)
}

async fn echo_works(c: &Connection) {
    let got = c.call_raw("echo", Bytes::from_static(b"still here")).await.unwrap();
    assert_eq!(&got[..], b"still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_cross_the_switch_without_loss() {
    let (c, s, _dir) = pair(client(), server()).await;
    // Started at once, before the upgrade settles: some REQUESTs leave on
    // the socket, some in the ring, and answers come back both ways.
    let calls: Vec<_> = (0..300u32)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { (i, c.call_raw("echo", Bytes::from(i.to_le_bytes().repeat(1 + i as usize % 50))).await) })
        })
        .collect();
    for call in calls {
        let (i, r) = call.await.unwrap();
        assert_eq!(r.unwrap(), Bytes::from(i.to_le_bytes().repeat(1 + i as usize % 50)), "call {i}");
    }
    assert!(c.upgraded().await && s.upgraded().await);
    assert!(c.on_shared_memory() && s.on_shared_memory());
    assert!(c.describe().ends_with("+shm"), "{}", c.describe());
    echo_works(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_larger_than_the_ring_stream_through_it() {
    let (c, s, _dir) = pair(client().shm_ring(4096), server()).await;
    assert!(c.upgraded().await && s.upgraded().await);
    let big = Bytes::from((0..(1 << 20)).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    for _ in 0..3 {
        assert_eq!(c.call_raw("echo", big.clone()).await.unwrap(), big);
    }
}

/// Resident bytes of this process's shared-memory segments whose mapping
/// is `size` bytes long (`/proc/self/smaps`), and how many there are.
fn segments_resident(size: usize) -> (usize, usize) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let (mut n, mut rss, mut ours) = (0, 0, false);
    for line in smaps.lines() {
        if line.contains("hubwire-shm") {
            ours = true;
        } else if let Some(kb) = line.strip_prefix("Size:") {
            ours &= kb.trim().trim_end_matches(" kB").trim().parse::<usize>().unwrap() * 1024 == size;
            n += usize::from(ours);
        } else if let Some(kb) = line.strip_prefix("Rss:").filter(|_| ours) {
            rss += kb.trim().trim_end_matches(" kB").trim().parse::<usize>().unwrap() * 1024;
            ours = false;
        }
    }
    (n, rss)
}

/// Bulk through 2 MiB rings makes their pages resident; a few seconds
/// after it, the pages past each ring's first 256 KiB have gone back
/// (`spec/PROTOCOL.md` §11.4.1, "Memory"), in both processes' mappings
/// (here, one process maps both sides), and the rings work as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_connection_gives_back_what_its_bulk_used() {
    let ring = 2 << 20;
    let (c, s, _dir) = pair(client().shm_ring(ring), server()).await;
    assert!(c.upgraded().await && s.upgraded().await);
    let size = 4096 + 2 * ring;
    let big = Bytes::from((0..(1 << 20)).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let calls: Vec<_> = (0..4).map(|_| c.call_raw("echo", big.clone())).collect();
    for r in futures_util::future::join_all(calls).await {
        assert_eq!(r.unwrap(), big);
    }
    let (n, busy) = segments_resident(size);
    assert_eq!(n, 2, "the segment, mapped by each side");
    assert!(busy >= 2 * (1 << 20), "{busy} bytes resident after the bulk");
    let keep = 2 * 2 * 256 * 1024 + 2 * 4096;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while segments_resident(size).1 > keep {
        assert!(std::time::Instant::now() < deadline, "still {} bytes resident", segments_resident(size).1);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for _ in 0..2 {
        assert_eq!(c.call_raw("echo", big.clone()).await.unwrap(), big);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_offer_keeps_the_connection_on_the_socket() {
    let mut full = server();
    full.shm_max_connections = 0;
    let (c, s, _dir) = pair(client(), full).await;
    assert!(!c.upgraded().await, "the acceptor is over its limit: it refuses");
    assert!(!s.upgraded().await);
    assert!(!c.on_shared_memory() && !c.describe().ends_with("+shm"));
    echo_works(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_off_on_either_side_stays_on_the_socket() {
    for (a, b) in [(false, true), (true, false), (false, false)] {
        let (c, s, _dir) = pair(client().shm(a), server().shm(b)).await;
        assert_eq!(c.peer().upgrade.is_empty(), !b, "a side lists shm in its HELLO exactly when it is on");
        assert!(!c.upgraded().await && !s.upgraded().await, "client {a}, server {b}");
        echo_works(&c).await;
    }
}

/// The descriptors of pipe `ends` that this process holds: the entries of
/// `/proc/self/fd` that name one of their pipes.
fn open_ends(pipes: &[String]) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| pipes.iter().any(|p| target.to_str() == Some(p.as_str())))
        .count()
}

/// A raw dialer: sends `bytes` (with `fds` on their first byte) and reads
/// frames until one `want` accepts.
struct RawDialer {
    sock: std::os::unix::net::UnixStream,
    buf: bytes::BytesMut,
    decoder: hubwire_frame::Decoder,
}

impl RawDialer {
    fn send(&self, bytes: &[u8], fds: &[std::os::fd::BorrowedFd<'_>]) {
        use std::os::fd::AsRawFd;
        let n = hubwire::transport::fd_pass::send_with_fds(self.sock.as_raw_fd(), &[std::io::IoSlice::new(bytes)], fds).unwrap();
        assert_eq!(n, bytes.len());
    }

    fn until(&mut self, want: impl Fn(&hubwire_frame::Frame) -> bool) -> hubwire_frame::Frame {
        loop {
            while let Some(f) = self.decoder.decode(&mut self.buf).unwrap() {
                if want(&f) {
                    return f;
                }
            }
            let mut chunk = [0u8; 4096];
            let n = std::io::Read::read(&mut self.sock, &mut chunk).unwrap();
            assert!(n > 0, "the acceptor closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// §11.4.2: an acceptor that lists `shm` waits for an offer's five
/// descriptors, but descriptors that come with any other frame are closed
/// as soon as that frame is read, not kept (and taken for the offer's)
/// until an UPGRADE comes. Counted in `/proc/self/fd`: both processes are
/// this one, so the acceptor's copies show there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_that_come_with_other_frames_are_closed_at_once() {
    use hubwire_frame::Frame;
    use std::os::fd::{AsFd, AsRawFd};
    let dir = TempDir::new("stray-fds");
    let path = dir.0.join("p.sock");
    let listener = unix::UnixListener::bind(&path).unwrap();
    let serving = tokio::spawn(async move {
        let conn = Connection::start(transport::accept(&listener).await.unwrap(), &server().service(hubwire_tests::provider()), false)
            .await
            .unwrap();
        conn.closed().await;
    });
    let raw = tokio::task::spawn_blocking(move || {
        let sock = std::os::unix::net::UnixStream::connect(&path).unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut d = RawDialer { sock, buf: bytes::BytesMut::new(), decoder: hubwire_frame::Decoder::new(u32::MAX) };
        let mut hello = hubwire_frame::Hello::new(hubwire_frame::PeerInfo { name: "raw".into(), lang: "rust".into(), version: "0".into() });
        hello.upgrade = vec!["shm".into()];
        d.send(&Frame::Hello(Box::new(hello)).to_bytes(), &[]);
        d.until(|f| matches!(f, Frame::Hello(_)));

        let pipes: Vec<_> = (0..5).map(|_| std::io::pipe().unwrap()).collect();
        let names: Vec<String> = pipes
            .iter()
            .map(|(r, _)| std::fs::read_link(format!("/proc/self/fd/{}", r.as_raw_fd())).unwrap().display().to_string())
            .collect();
        let ends: Vec<_> = pipes.iter().map(|(_, w)| w.as_fd()).collect();
        assert_eq!(open_ends(&names), 10, "before: our read and write ends");
        d.send(&Frame::Ping { data: *b"stray-fd" }.to_bytes(), &ends);
        drop(ends);
        let readers: Vec<_> = pipes.into_iter().map(|(r, _w)| r).collect();
        d.until(|f| matches!(f, Frame::Pong { data } if data == b"stray-fd"));
        // A second round trip: the reader has finished with the first
        // PING's read (and settled its descriptors) before it reads this.
        d.send(&Frame::Ping { data: *b"and-then" }.to_bytes(), &[]);
        d.until(|f| matches!(f, Frame::Pong { data } if data == b"and-then"));
        assert_eq!(open_ends(&names), 5, "after: only our read ends; the acceptor closed the write ends it received");

        // The stray descriptors were not kept for the offer: a real one
        // that comes now is taken.
        let (_seg, memfd) = hubwire::transport::shm::segment::Segment::create(4096, 4096).unwrap();
        let efds = hubwire::transport::shm::link::eventfds().unwrap();
        let offer: Vec<_> = std::iter::once(memfd.as_fd()).chain(efds.iter().map(|f| f.as_fd())).collect();
        d.send(&Frame::Upgrade { mechanism: "shm".into() }.to_bytes(), &offer);
        let answer = d.until(|f| matches!(f, Frame::Upgraded { .. }));
        assert!(matches!(answer, Frame::Upgraded { code: hubwire_frame::Code::Ok, .. }), "{answer:?}");
        drop(readers);
    });
    raw.await.unwrap();
    serving.abort();
}

/// A raw acceptor over a [`Ladder`](hubwire::transport::shm::Ladder):
/// sends bytes and reads frames, on the socket or its ring.
struct RawAcceptor {
    t: std::sync::Arc<hubwire::transport::shm::Ladder>,
    buf: bytes::BytesMut,
    decoder: hubwire_frame::Decoder,
}

impl RawAcceptor {
    async fn send(&self, bytes: &[u8]) {
        let mut off = 0;
        while off < bytes.len() {
            let slice = [std::io::IoSlice::new(&bytes[off..])];
            off += std::future::poll_fn(|cx| hubwire::transport::Transport::poll_write(&*self.t, cx, &slice)).await.unwrap();
        }
    }

    async fn next(&mut self) -> hubwire_frame::Frame {
        loop {
            if let Some(f) = self.decoder.decode(&mut self.buf).unwrap() {
                return f;
            }
            self.buf.reserve(4096);
            let read = std::future::poll_fn(|cx| hubwire::transport::Transport::poll_read(&*self.t, cx, &mut self.buf));
            let n = tokio::time::timeout(std::time::Duration::from_secs(10), read).await.expect("a frame within 10 s").unwrap();
            assert!(n > 0, "the dialer closed the connection");
        }
    }
}

/// §11.4.3: a carrier may follow the peer's UPGRADED `ok` at once, and
/// arrive in the same read as the marker. The dialer takes it as a
/// carrier, not as a byte out of place, and goes on over the rings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_carrier_read_with_the_marker_is_no_protocol_error() {
    use hubwire::transport::shm::{link::Link, segment::Segment, Budget, Ladder};
    use hubwire::transport::Transport;
    use hubwire_frame::{Code, Frame};
    let dir = TempDir::new("carrier");
    let path = dir.0.join("p.sock");
    let listener = unix::UnixListener::bind(&path).unwrap();
    let dialing = tokio::spawn(async move { Connection::dial(unix::connect(&path).await.unwrap(), &client()).await.unwrap() });
    let ladder = std::sync::Arc::new(Ladder::new(transport::accept(&listener).await.unwrap()));
    ladder.accept_fds(5);
    let mut raw = RawAcceptor { t: ladder.clone(), buf: bytes::BytesMut::new(), decoder: hubwire_frame::Decoder::new(u32::MAX) };
    let mut hello = hubwire_frame::Hello::new(hubwire_frame::PeerInfo { name: "raw".into(), lang: "rust".into(), version: "0".into() });
    hello.upgrade = vec!["shm".into()];
    raw.send(&Frame::Hello(Box::new(hello)).to_bytes()).await;
    assert!(matches!(raw.next().await, Frame::Hello(_)));
    let c = dialing.await.unwrap();
    assert!(matches!(raw.next().await, Frame::Upgrade { .. }));
    let fds: Vec<_> = std::iter::from_fn(|| ladder.take_fd()).collect();
    let [memfd, d0, r0, d1, r1] = <[std::os::fd::OwnedFd; 5]>::try_from(fds).expect("five descriptors");
    let link = Link::new(Segment::open(&memfd).unwrap(), false, [d0, r0, d1, r1], Budget::unlimited()).unwrap();
    ladder.attach(link);
    // Our marker and a carrier after it in one write, so that the dialer
    // reads them together; then a PING in our ring.
    let mut marker = Frame::Upgraded { code: Code::Ok, message: String::new() }.to_bytes().to_vec();
    marker.push(0);
    raw.send(&marker).await;
    ladder.switch_write();
    raw.send(&Frame::Ping { data: *b"carrier!" }.to_bytes()).await;
    // The PONG comes before the dialer's marker (on the socket) or after
    // it (in its ring); the marker is its last frame on the socket.
    let (mut marker_seen, mut pong_seen) = (false, false);
    while !(marker_seen && pong_seen) {
        match raw.next().await {
            Frame::Upgraded { code: Code::Ok, .. } if !marker_seen => {
                assert!(raw.buf.is_empty(), "nothing after the dialer's marker on the socket");
                ladder.switch_read();
                marker_seen = true;
            }
            Frame::Pong { data } if !pong_seen && &data == b"carrier!" => pong_seen = true,
            f => panic!("expected the dialer's marker and the PONG, got {f:?}"),
        }
    }
    assert!(c.upgraded().await && c.on_shared_memory());
}
