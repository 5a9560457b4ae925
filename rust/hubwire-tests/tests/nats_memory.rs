//! A server stream over NATS to a slow consumer holds bounded memory
//! (issue 18; `spec/PROTOCOL.md` §13.6): NATS has no end-to-end flow
//! control, so only hubwire's credit (§8) keeps a fast producer from
//! piling items up in the NATS clients' buffers, the server or the
//! engine. The provider and the consumer run in this process (a test file
//! of its own, so no other case shares its memory) and talk through a real
//! `nats-server`; the test streams far more than the window holds, reads
//! it slowly, and asserts that this process's RSS does not grow with the
//! bytes sent, only by a bound derived from the window × the item size.
//! A memory bound, not a time bound.

use std::time::Duration;

use hubwire::nats::{self, Target};
use hubwire::{CallOptions, ConnectionOptions, ItemSink, Provider};
use hubwire_tests::nats_server::NatsServer;

/// Bytes per item.
const ITEM: usize = 64 * 1024;
/// Items sent: 200 MiB in all, 200 windows' worth.
const ITEMS: u32 = 3200;
/// The consumer's window (items in flight per stream, §8).
const WINDOW: u32 = 16;
/// What the consumer does per item: far slower than the producer (which
/// only copies 64 KiB), so the producer always waits for credit.
const READ_PAUSE: Duration = Duration::from_millis(1);

/// A field of `/proc/self/status` (`VmRSS`, `VmHWM`), in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_of_a_server_stream_holds_memory_bounded_by_the_window() {
    let server = NatsServer::start();
    tokio::time::timeout(Duration::from_secs(120), async {
        let provider = Provider::new("blobs").server_stream("blobs", |_, n: u32, sink: ItemSink<String>| async move {
            let item = "x".repeat(ITEM);
            for _ in 0..n {
                sink.send(&item).await?;
            }
            Ok(())
        });
        let serving = nats::connect(&server.url()).await.unwrap();
        let opts = ConnectionOptions::new("blobs").max_frame(4 * 1024 * 1024);
        let _replica = nats::serve(provider, serving, &Default::default(), opts).await.unwrap();
        let calling = nats::connect(&server.url()).await.unwrap();
        let client_opts = ConnectionOptions::new("nats-memory-client").window(WINDOW).max_frame(4 * 1024 * 1024);
        let (conn, _) = nats::dial(&calling, &Target::Provider("blobs".into()), &client_opts, &Default::default()).await.unwrap();

        let before = status_kib("VmRSS");
        let mut items = conn.server_stream::<_, String>("blobs", &ITEMS, &CallOptions::default()).await.unwrap();
        let (mut got, mut warm, mut peak) = (0u32, 0u64, 0u64);
        while let Some(item) = items.next().await.unwrap() {
            assert_eq!(item.len(), ITEM, "every item whole");
            got += 1;
            tokio::time::sleep(READ_PAUSE).await;
            let rss = status_kib("VmRSS");
            peak = peak.max(rss);
            // After the first 10 % the buffers on the path are warm: from
            // then on, nothing may grow with the bytes sent.
            if got == ITEMS / 10 {
                warm = rss;
            }
        }
        let after = status_kib("VmRSS");
        assert_eq!(got, ITEMS, "every item arrived");
        let sent_mib = ITEMS as u64 * ITEM as u64 / (1024 * 1024);
        let window_kib = WINDOW as u64 * ITEM as u64 / 1024;
        eprintln!(
            "streamed {sent_mib} MiB ({ITEMS} items of {} KiB, window {WINDOW} = {window_kib} KiB) to a consumer pausing {READ_PAUSE:?} per item: \
             RSS {before} KiB before, {warm} KiB after 10 %, peak {peak} KiB, {after} KiB at the end; peak growth {} KiB, growth after warm-up {} KiB",
            ITEM / 1024,
            peak.saturating_sub(before),
            peak.saturating_sub(warm),
        );
        // The items in flight are at most a window, held a few times on the
        // way (the producer's frame, the NATS clients' write and read
        // buffers, the link, the consumer's backlog), plus buffers that the
        // clients and the runtime size once (measured: ~6.5 MiB in all).
        // 16 windows is 8 % of the 200 windows sent, so unbounded
        // buffering would show many times over.
        assert!(peak.saturating_sub(before) <= 16 * window_kib, "memory grew by {} KiB (> 16 windows of {window_kib} KiB)", peak - before);
        // Past warm-up it must not grow with the items sent (2 windows of
        // slack for the allocator).
        assert!(peak.saturating_sub(warm) <= 2 * window_kib, "memory grew by {} KiB after warm-up", peak - warm);
    })
    .await
    .expect("case timed out");
}
