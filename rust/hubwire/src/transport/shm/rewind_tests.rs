//! A ring that starts again at its first byte once read (`origin`), and
//! gives back its pages past `KEEP` once quiet (`release.rs`).

use super::*;
use crate::transport::shm::release::KEEP;
use crate::transport::shm::segment::LAYOUT;

/// Bytes of memory the memfd holds now (`st_blocks` counts 512-byte units).
fn resident(fd: &OwnedFd) -> u64 {
    // SAFETY: fstat into a local.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }, 0);
    st.st_blocks as u64 * 512
}

/// Bytes `[at, at + n)` of ring `r`'s data, as the mapping holds them.
fn ring_bytes(l: &Link, r: usize, at: usize, n: usize) -> Vec<u8> {
    // SAFETY: inside the ring's data; nobody writes meanwhile.
    unsafe { std::slice::from_raw_parts(l.seg.data(r).add(at), n).to_vec() }
}

fn read_all(l: &Link, n: usize) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(n);
    while out.len() < n {
        out.reserve(n - out.len());
        assert!(l.try_read(&mut out).unwrap().is_some_and(|k| k > 0), "bytes expected");
    }
    out.to_vec()
}

#[tokio::test(flavor = "current_thread")]
async fn a_writer_starts_again_at_the_first_byte_once_the_reader_has_caught_up() {
    let (d, a, _fd) = pair_of(4096, LAYOUT);
    for round in 1..=3u8 {
        assert_eq!(d.try_write(&[IoSlice::new(&[round; 3000])]).unwrap(), 3000);
        assert_eq!(ring_bytes(&d, 0, 0, 3000), vec![round; 3000], "round {round}: at the ring's start");
        assert_eq!(read_all(&a, 3000), vec![round; 3000]);
    }
    let c = ctl(&d.seg, 0);
    assert_eq!(c.origin.load(Ordering::SeqCst), 6000, "origin: where the third round's bytes start");
    // Not caught up: the next write follows on, and wraps.
    d.try_write(&[IoSlice::new(&[7; 3000])]).unwrap();
    d.try_write(&[IoSlice::new(&[8; 1000])]).unwrap();
    assert_eq!(ring_bytes(&d, 0, 3000, 1000), vec![8; 1000], "after the unread bytes");
    assert_eq!(read_all(&a, 4000), [vec![7; 3000], vec![8; 1000]].concat());
}

#[tokio::test(flavor = "current_thread")]
async fn a_layout_1_writer_never_rewinds_for_its_reader_reads_without_origin() {
    let (d, a, _fd) = pair_of(4096, 1);
    d.try_write(&[IoSlice::new(&[1; 3000])]).unwrap();
    read_all(&a, 3000);
    d.try_write(&[IoSlice::new(&[2; 3000])]).unwrap();
    assert_eq!(ring_bytes(&d, 0, 3000, 1096), vec![2; 1096], "on past the end");
    assert_eq!(ring_bytes(&d, 0, 0, 1904), vec![2; 1904], "and wrapped");
    assert_eq!(ctl(&d.seg, 0).origin.load(Ordering::SeqCst), 0);
    assert_eq!(read_all(&a, 3000), vec![2; 3000]);
}

#[tokio::test(flavor = "current_thread")]
async fn pages_past_keep_go_back_after_a_quiet_tick_and_the_ring_works_after() {
    let cap = 4 * KEEP;
    let (d, a, fd) = pair_of(cap, LAYOUT);
    let small = resident(&fd);
    let big: Vec<u8> = (0..3 * KEEP).map(|i| (i % 251) as u8).collect();
    assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), big.len());
    assert!(resident(&fd) >= small + big.len() as u64);
    assert!(!d.release_idle(), "unread bytes: the first tick only looks");
    assert!(!d.release_idle(), "unread bytes past KEEP are kept");
    assert_eq!(read_all(&a, big.len()), big);
    assert!(d.release_idle(), "read, and no write for a tick");
    assert!(resident(&fd) <= small + KEEP as u64, "{} bytes resident, at most {} expected", resident(&fd), small + KEEP as u64);
    assert!(!d.release_idle() && !d.release_idle(), "nothing more to give back");
    // The ring goes on as before, past KEEP and around.
    for round in 0..3 {
        assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), big.len(), "round {round}");
        assert_eq!(read_all(&a, big.len()), big, "round {round}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_write_stops_at_keep_while_the_release_works_and_is_woken_when_it_is_done() {
    let (d, a, _fd) = pair_of(4 * KEEP, LAYOUT);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let big = vec![5u8; 2 * KEEP];
    assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), big.len());
    assert_eq!(read_all(&a, big.len()), big);
    d.release_idle();
    // The release has taken the part past KEEP (as its thread would, just
    // before it gives the pages back).
    assert!(d.deep.begin());
    // The ring is empty: the writer starts at 0 and may fill KEEP only.
    assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), KEEP);
    assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), 0, "nothing past KEEP");
    assert!(d.poll_writable(&mut cx).is_pending(), "parks, though the ring has room");
    read_all(&a, KEEP);
    assert!(d.finish_release(), "the ring is empty: the pages go back");
    let woke = tokio::time::timeout(std::time::Duration::from_secs(5), std::future::poll_fn(|cx| d.poll_writable(cx)));
    woke.await.expect("woken once the release is done");
    assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), 2 * KEEP, "past KEEP again");
    assert_eq!(read_all(&a, 2 * KEEP), vec![5; 2 * KEEP]);
}

/// A release that finds bytes unread gives nothing back, but still hands
/// the part past KEEP back and wakes a writer that parked meanwhile (the
/// reader, which may read everything next, signals only a writer that
/// was waiting when it read).
#[tokio::test(flavor = "current_thread")]
async fn a_release_that_gives_up_still_wakes_the_writer() {
    let (d, a, _fd) = pair_of(4 * KEEP, LAYOUT);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let big = vec![6u8; KEEP + 4096];
    assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), big.len());
    d.release_idle();
    assert!(d.deep.begin(), "quiet for a tick");
    assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), 0, "past KEEP, and the release is at work");
    assert!(d.poll_writable(&mut cx).is_pending(), "parks while the release works");
    assert!(!d.finish_release(), "bytes unread: nothing given back");
    let woke = tokio::time::timeout(std::time::Duration::from_secs(5), std::future::poll_fn(|cx| d.poll_writable(cx)));
    woke.await.expect("woken by the release that gave up");
    assert_eq!(d.try_write(&[IoSlice::new(&big)]).unwrap(), big.len(), "past KEEP again");
    assert_eq!(read_all(&a, 2 * big.len()), big.repeat(2));
}

/// A writer thread streams numbered bytes in bursts with pauses between
/// them, a reader thread checks every byte, and a third thread ticks the
/// release as fast as it can: no byte is lost or changed, and pages were
/// given back many times meanwhile.
#[test]
fn bytes_survive_a_release_that_ticks_all_the_time() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _g = rt.enter();
    let (d, a, _fd) = pair_of(4 * KEEP, LAYOUT);
    let (d, a) = (std::sync::Arc::new(d), std::sync::Arc::new(a));
    let total: u64 = 64 << 20;
    let done = std::sync::Arc::new(AtomicBool::new(false));
    /// Stops the other threads however the reader ends (a failed check
    /// panics): the test fails instead of hanging.
    struct Done(std::sync::Arc<AtomicBool>);
    impl Drop for Done {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let releases = std::thread::scope(|s| {
        let (dw, dr) = (d.clone(), d.clone());
        let stop = done.clone();
        s.spawn(move || {
            let mut sent = 0u64;
            let mut burst = 0u64;
            while sent < total && !stop.load(Ordering::Acquire) {
                // Bursts of 1 to 2.5 MiB, then wait until all is read and pause.
                let n = ((sent / 7919 % 1536) * 1024 + 1024).min(total - sent) as usize;
                let chunk: Vec<u8> = (sent..sent + n as u64).map(|i| (i % 251) as u8).collect();
                let mut off = 0;
                while off < n && !stop.load(Ordering::Acquire) {
                    off += dw.try_write(&[IoSlice::new(&chunk[off..])]).unwrap();
                    std::hint::spin_loop();
                }
                sent += n as u64;
                burst += n as u64;
                if burst > 1 << 20 {
                    burst = 0;
                    let c = ctl(&dw.seg, 0);
                    while c.read.load(Ordering::Acquire) != c.written.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                    std::thread::sleep(std::time::Duration::from_micros(300));
                }
            }
        });
        let done2 = done.clone();
        let ticker = s.spawn(move || {
            let mut n = 0;
            while !done2.load(Ordering::Acquire) {
                n += usize::from(dr.release_idle());
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            n
        });
        let _done = Done(done.clone());
        let mut got = 0u64;
        let mut buf = vec![0u8; 256 * 1024];
        while got < total {
            match a.read_into(&mut buf).unwrap() {
                Some(n) => {
                    for (k, &b) in buf[..n].iter().enumerate() {
                        assert_eq!(b, ((got + k as u64) % 251) as u8, "byte {}", got + k as u64);
                    }
                    got += n as u64;
                }
                None => std::hint::spin_loop(),
            }
        }
        drop(_done);
        ticker.join().unwrap()
    });
    assert!(releases >= 3, "the release ran {releases} times");
}
