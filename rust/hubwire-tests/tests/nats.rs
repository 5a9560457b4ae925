//! hubwire over NATS (`spec/PROTOCOL.md` §13) beyond the behaviour suite,
//! against a real `nats-server`: nobody offering a method, a replica killed
//! with SIGKILL mid-call and the failover to another, a lost message, a
//! silent peer, a replica stopped a while that does not take its own
//! stall for its peer's silence, a flood a reader does not read, `$SRV`
//! discovery, and a stream's items sharing DATA messages of at most 16 KiB.
//! Outcomes only: the time bounds live in the bench and hardening suites.
//! Some cases play the other side by hand with a plain NATS client.

use std::io::{self, IoSlice};
use std::process::Stdio;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use hubwire::nats::{self, DialOptions, Target};
use hubwire::transport::nats::wire::{self, MsgKind};
use hubwire::transport::nats::NatsLink;
use hubwire::transport::Transport;
use hubwire::{Code, ConnectionOptions};
use hubwire_tests::nats_server::NatsServer;
use hubwire_tests::Tagged;
use tokio::io::{AsyncBufReadExt, BufReader};

const PROVIDER: &str = env!("CARGO_BIN_EXE_behaviour-provider");

/// Every case is bounded, so a hang fails instead of stalling the run.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f).await.expect("case timed out")
}

fn client_opts() -> ConnectionOptions {
    ConnectionOptions::new("nats-test-client")
}

/// The behaviour provider as a process attached to `url`, and its replica id.
async fn spawn_replica(url: &str) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(PROVIDER)
        .env("HUBWIRE_NATS_URL", url)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().expect("the provider printed nothing");
    let id = line.strip_prefix("ready ").unwrap_or_else(|| panic!("unexpected line {line:?}")).to_string();
    (child, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_nobody_offers_fails_unavailable_at_once() {
    let server = NatsServer::start();
    bounded(async {
        let client = nats::connect(&server.url()).await.unwrap();
        // A connect timeout far longer than the test's bound: only the
        // no-responders answer can end the dial.
        let opts = DialOptions { connect_timeout: Duration::from_secs(120), ..Default::default() };
        let err = nats::dial(&client, &Target::Method("nobody.offers".into()), &client_opts(), &opts).await.err().expect("dial fails");
        assert_eq!(err.code(), Code::Unavailable, "{err}");
        assert!(err.message().contains("no provider of method \"nobody.offers\""), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_fails_its_calls_unavailable_and_the_next_dial_reaches_another() {
    let server = NatsServer::start();
    bounded(async {
        let (mut first, first_id) = spawn_replica(&server.url()).await;
        let (_second, second_id) = spawn_replica(&server.url()).await;
        assert_ne!(first_id, second_id);
        let client = nats::connect(&server.url()).await.unwrap();
        // The replica's own subject reaches exactly it.
        let (conn, info) = nats::dial(&client, &Target::Replica(first_id.clone()), &client_opts(), &Default::default()).await.unwrap();
        assert_eq!(info.replica, first_id);
        assert_eq!(info.provider, "behaviour");
        let sleeper = {
            let conn = conn.clone();
            tokio::spawn(async move { conn.call::<_, ()>("sleep", &Tagged { token: "killed".into(), n: 60_000 }).await })
        };
        // The call is in flight once the connection has answered a call
        // sent after it (one link, calls in order).
        let one: i64 = conn.call("add", &(1i64, 2i64)).await.unwrap();
        assert_eq!(one, 3);
        first.start_kill().unwrap();
        first.wait().await.unwrap();
        // No CLOSE, no socket end: only the silence tells.
        let err = sleeper.await.unwrap().expect_err("the call on the dead replica fails");
        assert_eq!(err.code(), Code::Unavailable, "{err}");
        assert!(conn.is_closed());
        // New links go to the live replica.
        for _ in 0..5 {
            let (conn, info) = nats::dial(&client, &Target::Method("add".into()), &client_opts(), &Default::default()).await.unwrap();
            assert_eq!(info.replica, second_id);
            let r: i64 = conn.call("add", &(2i64, 3i64)).await.unwrap();
            assert_eq!(r, 5);
        }
    })
    .await;
}

/// A hand-played acceptor: answers one connect request on `subject` and
/// returns (the dialer's link subject, our link subscription).
async fn fake_acceptor(client: &async_nats::Client, subject: &str) -> tokio::task::JoinHandle<(String, async_nats::Subscriber)> {
    let mut requests = client.subscribe(subject.to_string()).await.unwrap();
    round_trip(client).await;
    let client = client.clone();
    tokio::spawn(async move {
        let req = requests.next().await.unwrap();
        let body = wire::parse_request(&req.payload).unwrap();
        let inbox = client.new_inbox();
        let sub = client.subscribe(inbox.clone()).await.unwrap();
        let reply = serde_json::json!({"hubwire": 1, "link": inbox, "replica": "fake", "provider": "fake"});
        client.publish(req.reply.unwrap(), serde_json::to_vec(&reply).unwrap().into()).await.unwrap();
        (body.link, sub)
    })
}

/// Makes sure the server has our subscriptions (a message to ourselves).
async fn round_trip(client: &async_nats::Client) {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.unwrap();
    client.publish(inbox, Bytes::new()).await.unwrap();
    sub.next().await.unwrap();
}

async fn read(link: &NatsLink) -> io::Result<Bytes> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    std::future::poll_fn(|cx| link.poll_read(cx, &mut buf)).await?;
    Ok(buf.freeze())
}

async fn dial_fake(server: &NatsServer, name: &str) -> (async_nats::Client, NatsLink, String, async_nats::Subscriber) {
    let peer = async_nats::connect(server.url()).await.unwrap();
    let acceptor = fake_acceptor(&peer, &format!("hubwire.m.{name}")).await;
    let client = nats::connect(&server.url()).await.unwrap();
    let (link, info) = hubwire::transport::nats::dial(&client, &Target::Method(name.into()), &Default::default()).await.unwrap();
    assert_eq!(info.replica, "fake");
    let (to, sub) = acceptor.await.unwrap();
    (peer, link, to, sub)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_message_breaks_the_link_and_never_corrupts_it() {
    let server = NatsServer::start();
    bounded(async {
        let (peer, link, to, mut from_link) = dial_fake(&server, "gap").await;
        peer.publish(to.clone(), wire::encode(MsgKind::Data, 0, b"ab")).await.unwrap();
        // Message 1 is "lost": 2 comes next.
        peer.publish(to.clone(), wire::encode(MsgKind::Data, 2, b"cd")).await.unwrap();
        assert_eq!(read(&link).await.unwrap(), Bytes::from_static(b"ab"));
        let err = read(&link).await.expect_err("the gap breaks the link");
        assert!(err.to_string().contains("message 1 lost"), "{err}");
        // Broken for good: no later byte is read, writes fail, and the
        // peer is told with CLOSE.
        assert!(read(&link).await.is_err());
        assert!(link.try_write(&[IoSlice::new(b"x")]).is_err());
        loop {
            let msg = from_link.next().await.unwrap();
            let (kind, _, _) = wire::decode(&msg.payload).unwrap();
            if kind == MsgKind::Close {
                break;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_breaks_the_link_and_an_idle_link_sends_heartbeats() {
    let server = NatsServer::start();
    bounded(async {
        let (_peer, link, _to, mut from_link) = dial_fake(&server, "silent").await;
        // We send nothing, so our side sends HEARTBEATs, numbered from 0.
        for want in 0..2u32 {
            let msg = from_link.next().await.unwrap();
            assert_eq!(wire::decode(&msg.payload).unwrap(), (MsgKind::Heartbeat, want, Bytes::new()));
        }
        // The fake peer sends nothing at all: the link breaks by itself.
        let err = read(&link).await.expect_err("silence breaks the link");
        assert!(err.to_string().contains("silent"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_the_reader_does_not_read_breaks_the_link_bounded() {
    let server = NatsServer::start();
    bounded(async {
        let (peer, link, to, _from_link) = dial_fake(&server, "flood").await;
        // Far more messages than a link holds unread: the client drops the
        // excess (NATS's slow consumer), so memory stays bounded, and the
        // reader then meets a gap.
        let total = (nats::LINK_PENDING * 3) as u32;
        for seq in 0..total {
            peer.publish(to.clone(), wire::encode(MsgKind::Data, seq, &[7u8; 64])).await.unwrap();
        }
        round_trip(&peer).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut bytes = 0usize;
        let err = loop {
            match read(&link).await {
                Ok(b) => {
                    assert!(b.iter().all(|&x| x == 7), "only the bytes sent, in order");
                    bytes += b.len();
                }
                Err(e) => break e,
            }
        };
        // The dropped messages show as a gap if the peer sends more, else
        // as silence (this hand-played peer sends no heartbeats): either
        // way the link breaks, at a message boundary.
        let why = err.to_string();
        assert!(why.contains("lost") || why.contains("silent"), "{err} after {bytes} bytes");
        assert!(bytes < total as usize * 64, "some messages were dropped, not buffered: {bytes} bytes read");
        assert!(bytes <= (nats::LINK_PENDING + 1) * 64, "no more than the pending limit was held: {bytes}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_answers_srv_discovery_with_its_methods_and_calls() {
    let server = NatsServer::start();
    bounded(async {
        let client = nats::connect(&server.url()).await.unwrap();
        let opts = hubwire_tests::provider_config();
        let replica = nats::serve(hubwire_tests::provider(), client.clone(), &Default::default(), opts).await.unwrap();
        let (conn, _) = nats::dial(&client, &Target::Provider("behaviour".into()), &client_opts(), &Default::default()).await.unwrap();
        for i in 0..3i64 {
            let r: i64 = conn.call("add", &(i, 1i64)).await.unwrap();
            assert_eq!(r, i + 1);
        }
        assert_eq!(replica.calls("add"), 3);
        let ask = |subject: String| {
            let client = client.clone();
            async move {
                let msg = client.request(subject, Bytes::new()).await.unwrap();
                serde_json::from_slice::<serde_json::Value>(&msg.payload).unwrap()
            }
        };
        let ping = ask("$SRV.PING".into()).await;
        assert_eq!(ping["type"], "io.nats.micro.v1.ping_response");
        assert_eq!(ping["id"], replica.id());
        let info = ask(format!("$SRV.INFO.behaviour.{}", replica.id())).await;
        assert_eq!(info["type"], "io.nats.micro.v1.info_response");
        assert_eq!(info["metadata"]["hubwire.provider"], "behaviour");
        let endpoints = info["endpoints"].as_array().unwrap();
        let add = endpoints.iter().find(|e| e["name"] == "add").expect("an endpoint per method");
        assert_eq!(add["subject"], "hubwire.m.add");
        assert_eq!(add["queue_group"], "hubwire");
        assert_eq!(add["metadata"]["hubwire.kind"], "unary");
        let count = endpoints.iter().find(|e| e["metadata"]["hubwire.method"] == "count").unwrap();
        assert_eq!(count["metadata"]["hubwire.kind"], "server_stream");
        assert!(endpoints.iter().any(|e| e["name"] == "-replica" && e["subject"] == format!("hubwire.r.{}", replica.id())));
        let stats = ask("$SRV.STATS.behaviour".into()).await;
        assert_eq!(stats["type"], "io.nats.micro.v1.stats_response");
        let add = stats["endpoints"].as_array().unwrap().iter().find(|e| e["name"] == "add").unwrap().clone();
        assert_eq!(add["data"]["calls"], 3);
        let provider =
            stats["endpoints"].as_array().unwrap().iter().find(|e| e["name"] == "-provider").unwrap_or_else(|| panic!("{stats}")).clone();
        assert_eq!(provider["num_requests"], 1, "one link opened by provider name");
        // A stopped replica is gone from discovery and from dialing.
        replica.stop();
        drop(conn);
        let gone = async {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let r = nats::dial(&client, &Target::Method("add".into()), &client_opts(), &Default::default()).await;
                if let Err(e) = r {
                    break e;
                }
            }
        };
        assert_eq!(gone.await.code(), Code::Unavailable);
    })
    .await;
}

/// The sizes (header included) of the DATA messages `spy` has seen, up
/// to the first 300 ms without one (HEARTBEATs go on meanwhile).
async fn data_messages(spy: &mut async_nats::Subscriber) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut quiet_until = tokio::time::Instant::now() + Duration::from_millis(300);
    while let Ok(Some(msg)) = tokio::time::timeout_at(quiet_until, spy.next()).await {
        if let Ok((MsgKind::Data, _, _)) = wire::decode(&msg.payload) {
            sizes.push(msg.payload.len());
            quiet_until = tokio::time::Instant::now() + Duration::from_millis(300);
        }
    }
    sizes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streams_burst_of_items_shares_data_messages_of_at_most_16_kib() {
    let server = NatsServer::start();
    bounded(async {
        let client = nats::connect(&server.url()).await.unwrap();
        let replica =
            nats::serve(hubwire_tests::provider(), client.clone(), &Default::default(), hubwire_tests::provider_config()).await.unwrap();
        let (conn, _) = nats::dial(&client, &Target::Replica(replica.id().into()), &client_opts(), &Default::default()).await.unwrap();
        // A spy on every inbox: the link subjects are inboxes (§13.2).
        let spy = async_nats::connect(server.url()).await.unwrap();
        let mut seen = spy.subscribe("_INBOX.>").await.unwrap();
        round_trip(&spy).await;
        let n = 1000u32;
        let mut items = conn.server_stream::<_, u32>("count", &n, &hubwire::CallOptions::new()).await.unwrap();
        for i in 0..n {
            assert_eq!(items.next().await.unwrap(), Some(i));
        }
        let stream = data_messages(&mut seen).await;
        // The default window (64) grants credit back 32 at a time, so the
        // handler sends most items from its own task, after a CREDIT, not
        // while the reader dispatches (corked). One message per item would
        // be over 1000 (the REQUEST, CREDITs and the RESPONSE besides).
        assert!(stream.len() < n as usize / 2, "{} DATA messages for {n} items", stream.len());
        // A 100 KiB answer is one write, split into messages of at most
        // 16 KiB of data.
        let big = hubwire::Raw(Bytes::from(vec![7u8; 100 * 1024]));
        let back: hubwire::Raw = conn.call("echo", &big).await.unwrap();
        assert_eq!(back.0, big.0);
        let echo = data_messages(&mut seen).await;
        assert!(echo.iter().all(|&len| len <= wire::HEADER_LEN + 16 * 1024), "{echo:?}");
        assert!(echo.iter().filter(|&&len| len == wire::HEADER_LEN + 16 * 1024).count() >= 12, "{echo:?}");
    })
    .await;
}

/// A hand-played dialer's sending side: one sequence for every message,
/// published in its order (the lock is held across the publish, or two
/// senders could publish out of order: a gap that breaks the link).
struct FakeTx {
    client: async_nats::Client,
    to: String,
    seq: tokio::sync::Mutex<u32>,
}

impl FakeTx {
    async fn send(&self, kind: MsgKind, data: &[u8]) {
        let mut seq = self.seq.lock().await;
        self.client.publish(self.to.clone(), wire::encode(kind, *seq, data)).await.unwrap();
        *seq += 1;
    }
}

/// §13.5: a side whose own process was stalled does not count the stall as
/// its peer's silence. The replica is stopped (SIGSTOP) for well over the
/// 600 ms silence limit while the hand-played dialer goes on sending
/// HEARTBEATs, which wait unread for it; once continued, its link must
/// still work (a PING is answered) and it must not have sent CLOSE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_for_a_while_does_not_take_its_stall_for_the_peers_silence() {
    use hubwire_frame::{Decoder, Frame, Hello, PeerInfo};
    let server = NatsServer::start();
    bounded(async {
        let (replica, id) = spawn_replica(&server.url()).await;
        let pid = replica.id().unwrap() as libc::pid_t;
        let client = async_nats::connect(server.url()).await.unwrap();
        let inbox = client.new_inbox();
        let mut from_replica = client.subscribe(inbox.clone()).await.unwrap();
        let request = serde_json::json!({"hubwire": 1, "link": inbox, "peer": "fake-dialer"});
        let subject = Target::Replica(id).subject(wire::DEFAULT_PREFIX);
        let reply = client.request(subject, serde_json::to_vec(&request).unwrap().into()).await.unwrap();
        let reply: wire::ConnectReply = serde_json::from_slice(&reply.payload).unwrap();
        let tx = std::sync::Arc::new(FakeTx { client: client.clone(), to: reply.link.expect("a link subject"), seq: Default::default() });
        let hello = Hello::new(PeerInfo { name: "fake-dialer".into(), lang: "test".into(), version: "0".into() });
        tx.send(MsgKind::Data, &Frame::Hello(Box::new(hello)).to_bytes()).await;
        // HEARTBEATs every 100 ms from here on, whatever the replica does.
        let beats = {
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    tx.send(MsgKind::Heartbeat, &[]).await;
                }
            })
        };
        // Reads the replica's messages until a frame comes; a CLOSE fails.
        let decoder = Decoder::new(u32::MAX);
        let mut buf = BytesMut::new();
        let mut next_frame = async || loop {
            if let Some(f) = decoder.decode(&mut buf).unwrap() {
                return f;
            }
            let msg = from_replica.next().await.unwrap();
            let (kind, _, data) = wire::decode(&msg.payload).unwrap();
            assert_ne!(kind, MsgKind::Close, "the replica broke the link");
            buf.extend_from_slice(&data);
        };
        assert!(matches!(next_frame().await, Frame::Hello(_)));
        // SAFETY: kill(2) with a pid we spawned and still own (not reaped).
        let signal = |sig| assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {sig}");
        signal(libc::SIGSTOP);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        signal(libc::SIGCONT);
        // Time for its ticker to look at the link again, several times.
        tokio::time::sleep(Duration::from_millis(500)).await;
        tx.send(MsgKind::Data, &Frame::Ping { data: *b"stalled!" }.to_bytes()).await;
        loop {
            match next_frame().await {
                Frame::Pong { data } => break assert_eq!(&data, b"stalled!"),
                Frame::Ping { .. } => continue,
                other => panic!("expected PONG, got {other:?}"),
            }
        }
        beats.abort();
    })
    .await;
}
