//! The write queue alone, over a transport that records each write: what
//! leaves in one write, in which order, and who writes it.

use super::*;
use std::task::{Context, Poll};

/// Records every write. A `slow` one sleeps in each write, so that two
/// tasks writing at once would record out of order. A `ring` one writes
/// into memory (`try_write_in_memory`, as a shared ring does), says its
/// reader must be woken while `parked`, and counts the wake-ups. `room`
/// caps the bytes it takes (unlimited when `None`), until given more.
#[derive(Default)]
struct Recorder {
    writes: Mutex<Vec<Vec<u8>>>,
    slow: bool,
    ring: bool,
    room: Mutex<Option<usize>>,
    /// A writer waiting for room.
    waiting: Mutex<Option<std::task::Waker>>,
    parked: std::sync::atomic::AtomicBool,
    wakes: AtomicUsize,
}

impl Recorder {
    fn ring(room: usize) -> Recorder {
        Recorder { ring: true, room: Mutex::new(Some(room)), ..Default::default() }
    }

    /// Gives `n` more bytes of room and wakes a writer waiting for it.
    fn free(&self, n: usize) {
        *self.room.lock().unwrap().get_or_insert(0) += n;
        if let Some(w) = self.waiting.lock().unwrap().take() {
            w.wake();
        }
    }
}

impl crate::transport::Transport for Recorder {
    fn try_read(&self, _: &mut BytesMut) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
    fn poll_read(&self, _: &mut Context<'_>, _: &mut BytesMut) -> Poll<io::Result<usize>> {
        Poll::Pending
    }
    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.slow {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        let mut all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        if let Some(room) = self.room.lock().unwrap().as_mut() {
            if *room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            all.truncate(*room);
            *room -= all.len();
        }
        let n = all.len();
        self.writes.lock().unwrap().push(all);
        Ok(n)
    }
    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        *self.waiting.lock().unwrap() = Some(cx.waker().clone());
        match self.try_write(bufs) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
            r => Poll::Ready(r),
        }
    }
    fn try_write_in_memory(&self, bufs: &[IoSlice<'_>]) -> Option<io::Result<(usize, bool)>> {
        if !self.ring {
            return None;
        }
        let n = match self.try_write(bufs) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            r => r,
        };
        Some(n.map(|n| (n, self.parked.load(Ordering::SeqCst))))
    }
    fn wake_reader(&self) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
    fn shutdown(&self) {}
    fn shutdown_write(&self) {}
    fn describe(&self) -> String {
        "recorder".into()
    }
}

fn frame(n: u8) -> impl FnOnce(&mut BytesMut) {
    move |b: &mut BytesMut| b.extend_from_slice(&[n; 3])
}

fn writes(t: &Recorder) -> Vec<Vec<u8>> {
    t.writes.lock().unwrap().clone()
}

#[tokio::test(flavor = "current_thread")]
async fn a_frame_alone_is_written_at_once() {
    let t = Arc::new(Recorder::default());
    let w = Writer::new(t.clone(), 1 << 20);
    w.push(frame(1), &Bytes::new()).unwrap();
    w.push(frame(2), &Bytes::from_static(b"p")).unwrap();
    assert_eq!(writes(&t), [vec![1, 1, 1], vec![2, 2, 2, b'p']]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_frame_pushed_alone_follows_the_queue_and_precedes_what_after_queues() {
    let t = Arc::new(Recorder::default());
    let w = Writer::new(t.clone(), 1 << 20);
    w.push(frame(1), &Bytes::new()).unwrap();
    let (w2, t2) = (w.clone(), t.clone());
    w.push_alone(&[7; 3], &[], move || {
        assert_eq!(writes(&t2), [vec![1, 1, 1], vec![7, 7, 7]], "`after` runs once the frame has left");
        w2.push(frame(2), &Bytes::new()).unwrap();
        assert_eq!(writes(&t2).len(), 2, "a frame pushed in `after` waits for it to return");
    })
    .await
    .unwrap();
    w.flushed().await;
    assert_eq!(writes(&t), [vec![1, 1, 1], vec![7, 7, 7], vec![2, 2, 2]]);
}

#[tokio::test(flavor = "current_thread")]
async fn descriptors_pushed_alone_arrive_with_their_frame_on_a_unix_socket() {
    use crate::transport::fd::FdTransport;
    use crate::transport::Transport;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let ta = Arc::new(FdTransport::new(a, "a".into()).unwrap());
    let tb = FdTransport::new(b, "b".into()).unwrap();
    assert!(ta.passes_fds());
    tb.accept_fds(4);
    let mut p = [0; 2];
    // SAFETY: pipe2 fills `p` with two new descriptors we then own.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (_r, wr) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
    let w = Writer::new(ta, 1 << 20);
    w.push(frame(1), &Bytes::new()).unwrap();
    w.push_alone(&[9; 3], &[wr.as_fd()], || {}).await.unwrap();
    w.push(frame(2), &Bytes::new()).unwrap();
    let mut buf = BytesMut::with_capacity(64);
    while buf.len() < 9 {
        let before = buf.len();
        std::future::poll_fn(|cx| tb.poll_read(cx, &mut buf)).await.unwrap();
        if before < 3 && buf.len() <= 3 {
            assert!(tb.take_fd().is_none(), "no descriptor before its frame");
        }
    }
    assert_eq!(&buf[..], &[1, 1, 1, 9, 9, 9, 2, 2, 2]);
    assert!(tb.take_fd().is_some());
    assert!(tb.take_fd().is_none(), "exactly one descriptor");
}

#[tokio::test(flavor = "current_thread")]
async fn frames_pushed_while_corked_leave_in_one_write_on_uncork() {
    let t = Arc::new(Recorder::default());
    let w = Writer::new(t.clone(), 1 << 20);
    w.cork();
    for n in 1..=3 {
        w.push(frame(n), &Bytes::new()).unwrap();
    }
    assert!(writes(&t).is_empty(), "nothing written while corked");
    w.uncork();
    assert_eq!(writes(&t), [vec![1, 1, 1, 2, 2, 2, 3, 3, 3]]);
    w.uncork();
    assert_eq!(writes(&t).len(), 1, "an empty uncork writes nothing");
}

#[tokio::test(flavor = "current_thread")]
async fn frames_pushed_soon_by_several_tasks_share_one_write() {
    let t = Arc::new(Recorder::default());
    let w = Writer::new(t.clone(), 1 << 20);
    // Let the background flusher start waiting.
    tokio::task::yield_now().await;
    let tasks: Vec<_> = (1..=4u8)
        .map(|n| {
            let w = w.clone();
            tokio::spawn(async move { w.push_soon(frame(n), &Bytes::new()).unwrap() })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    w.flushed().await;
    let all = writes(&t);
    assert_eq!(all.len(), 1, "one write for the burst: {all:?}");
    assert_eq!(all[0].len(), 12);
}

#[tokio::test(flavor = "current_thread")]
async fn a_corked_batch_is_written_once_it_holds_batch_frames() {
    let t = Arc::new(Recorder::default());
    let w = Writer::new(t.clone(), 1 << 20);
    w.cork();
    let n = BATCH_FRAMES as u8;
    for i in 0..n + 2 {
        w.push(frame(i), &Bytes::new()).unwrap();
    }
    let all = writes(&t);
    assert_eq!(all.len(), 1, "the full batch left while still corked: {all:?}");
    assert_eq!(all[0], (0..n).flat_map(|i| [i; 3]).collect::<Vec<u8>>());
    w.uncork();
    assert_eq!(writes(&t)[1], [n, n, n, n + 1, n + 1, n + 1], "the rest leaves on uncork");
}

/// With many calls in flight a corked batch grows to half of them, up to
/// `BATCH_MAX`; with few it is `BATCH_FRAMES` again.
#[tokio::test(flavor = "current_thread")]
async fn a_batch_grows_with_the_calls_in_flight_up_to_its_limit() {
    let t = Arc::new(Recorder::default());
    let w = Writer::new(t.clone(), 1 << 20);
    for (in_flight, batch) in [(256, BATCH_MAX), (64, 32), (10, BATCH_FRAMES), (0, BATCH_FRAMES)] {
        w.set_batch(in_flight);
        w.cork();
        for i in 0..batch + 1 {
            w.push(frame(i as u8), &Bytes::new()).unwrap();
        }
        let all = writes(&t);
        assert_eq!(all.len(), 1, "{in_flight} in flight: one write, of the full batch: {all:?}");
        assert_eq!(all[0].len(), 3 * batch, "{in_flight} in flight: a batch of {batch}");
        w.uncork();
        assert_eq!(writes(&t).len(), 2, "the frame after the batch leaves on uncork");
        t.writes.lock().unwrap().clear();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_sender_that_fills_the_batch_takes_the_flush_back_from_the_background() {
    let t = Arc::new(Recorder::default());
    let w = Writer::new(t.clone(), 1 << 20);
    tokio::task::yield_now().await;
    // No yield in between: the background flusher, woken by the first
    // frame, has not run when the batch fills.
    let n = BATCH_FRAMES as u8;
    for i in 0..n + 1 {
        w.push_soon(frame(i), &Bytes::new()).unwrap();
    }
    let all = writes(&t);
    assert_eq!(all.len(), 1, "the sender that filled the batch wrote it: {all:?}");
    assert_eq!(all[0].len(), 3 * BATCH_FRAMES);
    w.flushed().await;
    let all = writes(&t);
    assert_eq!(all.len(), 2, "the frame after the batch left with the background flusher: {all:?}");
    assert_eq!(all[1], [n; 3]);
}

#[test]
fn frames_pushed_soon_from_many_threads_leave_once_each_in_order() {
    // A taken-back flush and the background flusher's stale wake-up on
    // another worker must never both write.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    for _round in 0..8 {
        many_threads_round(&rt);
    }
}

fn many_threads_round(rt: &tokio::runtime::Runtime) {
    let t = Arc::new(Recorder { slow: true, ..Default::default() });
    let w = rt.block_on(async { Writer::new(t.clone(), 1 << 20) });
    let per = 2000u32;
    rt.block_on(async {
        let tasks: Vec<_> = (0..4u8)
            .map(|task| {
                let w = w.clone();
                tokio::spawn(async move {
                    for i in 0..per {
                        let [a, b, ..] = i.to_le_bytes();
                        w.push_soon(move |buf: &mut BytesMut| buf.extend_from_slice(&[task, a, b]), &Bytes::new()).unwrap();
                        if i % 7 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        w.flushed().await;
    });
    let bytes: Vec<u8> = writes(&t).concat();
    assert_eq!(bytes.len(), 4 * per as usize * 3);
    let mut next = [0u32; 4];
    for f in bytes.chunks(3) {
        let task = f[0] as usize;
        assert_eq!(u32::from(f[1]) | u32::from(f[2]) << 8, next[task], "task {task}'s frames in order, once each");
        next[task] += 1;
    }
}

/// `write_some` over batches on both sides of the small slice array and of
/// `MAX_IOV`, with a writer that takes only part of what it is offered:
/// every byte leaves once, in order, at most `MAX_IOV` segments a write.
#[test]
fn write_some_sends_every_segment_in_order_across_partial_writes() {
    for count in [1, 2, FEW_IOV, FEW_IOV + 1, MAX_IOV, MAX_IOV + 7] {
        for take in [1, 5, 64, usize::MAX] {
            let segs: Vec<Bytes> = (0..count).map(|i| Bytes::from(vec![i as u8; 1 + i % 3])).collect();
            let want: Vec<u8> = segs.iter().flat_map(|b| b.iter().copied()).collect();
            let mut batch = segs.clone();
            let mut got = Vec::new();
            let mut widest = 0;
            while !batch.is_empty() {
                let n = write_some(&mut batch, |s| {
                    widest = widest.max(s.len());
                    let all: Vec<u8> = s.iter().flat_map(|b| b.iter().copied()).collect();
                    let n = all.len().min(take);
                    got.extend_from_slice(&all[..n]);
                    Ok(n)
                })
                .unwrap();
                assert!(n > 0, "{count} segments, {take} a write: no progress");
            }
            assert_eq!(got, want, "{count} segments, {take} bytes a write");
            assert!(widest <= MAX_IOV, "{widest} segments in one write");
        }
    }
}

/// On a transport that writes into memory, a frame alone is written while
/// the queue's lock is held (`write_held`); a frame that does not fit
/// leaves its rest to the background flusher, and frames pushed meanwhile
/// queue behind it. A corked writer still holds frames back.
#[tokio::test(flavor = "current_thread")]
async fn a_frame_alone_on_a_ring_is_written_at_once_and_what_does_not_fit_follows() {
    let t = Arc::new(Recorder::ring(5));
    let w = Writer::new(t.clone(), 1 << 20);
    tokio::task::yield_now().await;
    w.push(frame(1), &Bytes::from_static(b"pq")).unwrap();
    assert_eq!(writes(&t), [vec![1, 1, 1, b'p', b'q']]);
    assert_eq!(w.queued(), 0);
    // Written under the lock: no batch was taken (the first would have
    // left its segment list behind as the spare).
    assert_eq!(w.q.lock().unwrap().spare.capacity(), 0, "a batch was taken");
    t.free(2);
    w.push(frame(2), &Bytes::from_static(b"r")).unwrap();
    assert_eq!(writes(&t)[1], [2, 2], "what fits is written at once");
    assert_eq!(w.queued(), 2);
    w.push(frame(3), &Bytes::new()).unwrap();
    assert_eq!(writes(&t).len(), 2, "a frame behind a stalled one waits its turn");
    t.free(100);
    w.flushed().await;
    let all: Vec<u8> = writes(&t).concat();
    assert_eq!(all, [1, 1, 1, b'p', b'q', 2, 2, 2, b'r', 3, 3, 3]);
    assert_eq!(w.queued(), 0);
    let before = writes(&t).len();
    w.cork();
    w.push(frame(4), &Bytes::new()).unwrap();
    w.push(frame(5), &Bytes::new()).unwrap();
    assert_eq!(writes(&t).len(), before, "nothing written while corked");
    w.uncork();
    assert_eq!(writes(&t)[before..], [vec![4, 4, 4, 5, 5, 5]]);
    w.push(frame(6), &Bytes::new()).unwrap();
    assert_eq!(writes(&t).last().unwrap(), &[6, 6, 6], "alone again: written at once");
}

/// A reader parked on the ring is woken once the lock is let go, by the
/// sender that wrote (still the flusher meanwhile: a frame pushed then
/// queues behind it), and each write that finds it parked wakes it.
#[tokio::test(flavor = "current_thread")]
async fn a_parked_reader_is_woken_after_a_write_under_the_lock() {
    let t = Arc::new(Recorder::ring(1 << 20));
    let w = Writer::new(t.clone(), 1 << 20);
    tokio::task::yield_now().await;
    w.push(frame(1), &Bytes::new()).unwrap();
    assert_eq!(t.wakes.load(Ordering::SeqCst), 0, "nobody parked, nobody woken");
    t.parked.store(true, Ordering::SeqCst);
    w.push(frame(2), &Bytes::new()).unwrap();
    assert_eq!(t.wakes.load(Ordering::SeqCst), 1);
    assert_eq!(w.queued(), 0);
    assert!(!w.q.lock().unwrap().flushing, "the flush ended after the wake-up");
    w.push(frame(3), &Bytes::new()).unwrap();
    assert_eq!(t.wakes.load(Ordering::SeqCst), 2);
    assert_eq!(writes(&t).concat(), [1, 1, 1, 2, 2, 2, 3, 3, 3]);
}

/// The ring's wake-up (`write(2)` on an eventfd the peer handed over) is
/// made after the queue's lock is let go. An eventfd handed over in
/// blocking mode with a full counter (a broken or hostile peer owns it, and
/// the ring's `reader_waiting` flag) blocks that write: the sender stuck in
/// it must not hold the other senders of the connection (they queue behind
/// its flush, as behind any write).
#[test]
fn a_stuck_wake_up_does_not_hold_other_senders() {
    use crate::transport::fd::FdTransport;
    use crate::transport::shm::link::{eventfds, Link};
    use crate::transport::shm::segment::Segment;
    use crate::transport::shm::{Budget, Ladder};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let _g = rt.enter();
    let (seg, memfd) = Segment::create(4096, 4096).unwrap();
    let other = Segment::open(&memfd).unwrap();
    let mut fds = eventfds().unwrap();
    // data_1 (what the acceptor signals when it writes ring 1): blocking,
    // counter at its maximum, as a hostile or broken dialer may hand it over.
    let blocking = unsafe { OwnedFd::from_raw_fd(libc::eventfd(0, libc::EFD_CLOEXEC)) };
    let max = (u64::MAX - 1).to_ne_bytes();
    assert_eq!(unsafe { libc::write(blocking.as_raw_fd(), max.as_ptr().cast(), 8) }, 8);
    fds[2] = blocking;
    let dup = |f: &OwnedFd| f.try_clone().unwrap();
    let theirs = [dup(&fds[0]), dup(&fds[1]), dup(&fds[2]), dup(&fds[3])];
    let release = dup(&fds[2]);
    let ours = Link::new(seg, false, fds, Budget::unlimited()).unwrap();
    let peer = Link::new(other, true, theirs, Budget::unlimited()).unwrap();
    // The peer parks on ring 1: reader_waiting = 1. (Whether the poll says
    // Pending depends on whether the reactor has seen the full eventfd
    // readable yet; the flag is set either way.)
    let _ = peer.poll_readable(&mut Context::from_waker(std::task::Waker::noop()));
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let ladder = Arc::new(Ladder::new(Arc::new(FdTransport::new(a, "a".into()).unwrap())));
    ladder.attach(ours);
    ladder.switch_write();
    let w = Writer::new(ladder.clone(), 1 << 20);
    let w1 = w.clone();
    let first = std::thread::spawn(move || w1.push(frame(1), &Bytes::new()).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (tx, rx) = std::sync::mpsc::channel();
    let w2 = w.clone();
    let second = std::thread::spawn(move || {
        w2.push(frame(2), &Bytes::new()).unwrap();
        tx.send(()).unwrap();
    });
    let returned = rx.recv_timeout(std::time::Duration::from_secs(2)).is_ok();
    // Unblock the stuck write (reading zeroes the counter), then clean up.
    let mut v = [0u8; 8];
    unsafe { libc::read(release.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
    first.join().unwrap();
    second.join().unwrap();
    assert!(returned, "a second sender waited behind the first one's stuck eventfd write (queue lock held)");
    assert_eq!(w.queued(), 0, "the frame queued behind the stuck wake-up was written by its flusher");
}
