//! The write path of a connection: frames from many tasks, few syscalls.
//!
//! Callers append encoded frames to one queue under a short lock. The first
//! caller to find nobody flushing becomes the flusher and writes the queue
//! itself, in the caller's own task, with one vectored `sendmsg`; callers
//! that append while it writes leave their frames for it to pick up in its
//! next call. There is no writer task hop on the fast path. When the socket
//! is full, the remainder is handed to a background task that waits for
//! the socket to drain. Small frames are copied into one contiguous buffer;
//! payloads above `COPY_LIMIT` stay separate `Bytes` segments (no copy).
//!
//! Two exceptions to flushing at once, both so that frames that come in a
//! burst leave in one write (one `sendmsg`, one wake-up of the peer)
//! rather than one each:
//! * while the reader dispatches the frames of one read, the writer is
//!   *corked*: answers produced meanwhile (handlers that finish at once)
//!   are written together when it is done ([`Writer::uncork`]);
//! * a frame sent while other calls are in flight on the connection
//!   (pipelining: more are coming) is pushed with [`Writer::push_soon`],
//!   which leaves the write to the background flusher, a task that runs
//!   after the tasks already woken, so their frames join the same write.
//!   One call in flight is never delayed this way.
//!
//! The queue has a cap (`ConnectionOptions::write_queue`): above it, async
//! senders wait ([`Writer::ready`]) and the reader stops taking new calls
//! from the peer ([`Writer::over_cap`]); frames pushed by code that cannot
//! wait (answers) still queue, bounded by the calls the peer may have
//! in flight.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;

use crate::transport::DynTransport;

/// Payloads up to this size are copied next to their header.
const COPY_LIMIT: usize = 4096;
/// Segments per `sendmsg`.
const MAX_IOV: usize = 64;

#[derive(Default)]
struct Queue {
    head: BytesMut,
    segs: VecDeque<Bytes>,
    queued: usize,
    flushing: bool,
    /// Set while the reader dispatches a batch: no inline flush.
    corked: bool,
    closed: Option<String>,
    /// The segment list an inline flush takes its batch into, kept between
    /// flushes: no allocation per write.
    spare: Vec<Bytes>,
}

impl Queue {
    fn seal_head(&mut self) {
        if !self.head.is_empty() {
            let b = self.head.split().freeze();
            self.segs.push_back(b);
        }
    }
}

/// The shared write queue of one connection.
pub(crate) struct Writer {
    q: Mutex<Queue>,
    transport: DynTransport,
    /// Wakes the background flusher (shared with it, so it can wait
    /// without keeping the writer alive).
    stalled: Arc<Notify>,
    /// Wakes senders waiting below the cap, and `flushed`.
    drained: Notify,
    /// Tasks waiting on `drained` ([`Writer::waiting`]): a flush that ends
    /// with nobody waiting skips `notify_waiters`, which takes a lock.
    waiters: AtomicUsize,
    /// Queued bytes above which senders wait and the reader pauses.
    cap: usize,
    /// Whether more than `cap` is queued (and the writer is open), kept
    /// beside the queue's lock so that the checks made per frame sent
    /// ([`Writer::ready`]) and per REQUEST read ([`Writer::over_cap`]) take
    /// no lock. Written under the lock whenever `queued` changes.
    high: AtomicBool,
}

impl Writer {
    /// A writer over `transport` whose queue is capped at `cap` bytes.
    pub(crate) fn new(transport: DynTransport, cap: usize) -> Arc<Writer> {
        let w = Arc::new(Writer {
            cap,
            high: AtomicBool::new(false),
            q: Mutex::new(Queue { head: BytesMut::with_capacity(16 * 1024), ..Default::default() }),
            transport,
            stalled: Arc::new(Notify::new()),
            drained: Notify::new(),
            waiters: AtomicUsize::new(0),
        });
        tokio::spawn(background_flush(Arc::downgrade(&w), w.stalled.clone()));
        w
    }

    /// Queues one frame: `head` writes the header and fixed fields,
    /// `payload` follows. Flushes inline unless another task is flushing
    /// or the writer is corked. Fails only when the connection is closed.
    pub(crate) fn push(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes) -> Result<(), String> {
        if self.enqueue(head, payload)? {
            self.flush_inline();
        }
        Ok(())
    }

    /// Like [`Writer::push`], but the write is left to the background
    /// flusher, so that frames other tasks push before it runs go out in
    /// the same write. For frames that are not alone (see the module doc).
    pub(crate) fn push_soon(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes) -> Result<(), String> {
        if self.enqueue(head, payload)? {
            self.stalled.notify_one();
        }
        Ok(())
    }

    /// Writes `frame` (encoded) alone at the start of its own write, after
    /// every frame queued before it, with `fds` attached to its first byte
    /// (`transport/fd_pass.rs`), then runs `after` before any later frame is
    /// written: frames pushed meanwhile wait in the queue. Waits for the
    /// queue to drain first, so it must not be awaited by the reader while
    /// it dispatches (the writer may be corked). Fails when the connection
    /// is closed or the write fails (which closes the writer).
    pub(crate) async fn push_alone(&self, frame: &[u8], fds: &[BorrowedFd<'_>], after: impl FnOnce()) -> Result<(), String> {
        let _waiting = self.waiting();
        loop {
            let notified = self.drained.notified();
            {
                let mut q = self.q.lock().unwrap();
                if let Some(reason) = &q.closed {
                    return Err(reason.clone());
                }
                if !q.flushing && q.queued == 0 {
                    q.flushing = true;
                    break;
                }
            }
            notified.await;
        }
        let r = self.write_alone(frame, fds).await;
        if let Err(e) = &r {
            self.close(e);
            return r;
        }
        after();
        let mut q = self.q.lock().unwrap();
        if q.queued > 0 {
            // Frames queued meanwhile: the background flusher owns them.
            drop(q);
            self.stalled.notify_one();
        } else {
            q.flushing = false;
            drop(q);
            self.drained.notify_waiters();
        }
        Ok(())
    }

    /// The writes of [`Writer::push_alone`], this task owning the flush.
    async fn write_alone(&self, frame: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), String> {
        let t = &*self.transport;
        let mut off = 0;
        while off < frame.len() {
            let bufs = [IoSlice::new(&frame[off..])];
            let fds = if off == 0 { fds } else { &[] };
            let _waiting = self.waiting();
            let closed = self.drained.notified();
            if let Some(reason) = &self.q.lock().unwrap().closed {
                return Err(reason.clone());
            }
            let r = tokio::select! {
                biased;
                r = std::future::poll_fn(|cx| if fds.is_empty() { t.poll_write(cx, &bufs) } else { t.poll_write_fds(cx, &bufs, fds) }) => r,
                _ = closed => continue,
            };
            match r {
                Ok(0) => return Err("write failed: connection closed".into()),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write failed: {e}")),
            }
        }
        Ok(())
    }

    /// Holds inline flushes back until [`Writer::uncork`].
    pub(crate) fn cork(&self) {
        self.q.lock().unwrap().corked = true;
    }

    /// Ends [`Writer::cork`]: writes what was queued meanwhile.
    pub(crate) fn uncork(&self) {
        {
            let mut q = self.q.lock().unwrap();
            q.corked = false;
            if q.flushing || q.queued == 0 || q.closed.is_some() {
                return;
            }
            q.flushing = true;
        }
        self.flush_inline();
    }

    /// Appends a frame to the queue; true if the caller is now the
    /// flusher (nobody was flushing and the writer is not corked).
    fn enqueue(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes) -> Result<bool, String> {
        {
            let mut q = self.q.lock().unwrap();
            if let Some(reason) = &q.closed {
                return Err(reason.clone());
            }
            let before = q.head.len();
            head(&mut q.head);
            let added = q.head.len() - before + payload.len();
            if payload.len() <= COPY_LIMIT {
                q.head.extend_from_slice(payload);
            } else {
                q.seal_head();
                q.segs.push_back(payload.clone());
            }
            q.queued += added;
            self.mark(&q);
            if q.flushing || q.corked {
                return Ok(false);
            }
            q.flushing = true;
        }
        Ok(true)
    }

    /// Whether more than the cap is queued (and the writer is open).
    pub(crate) fn over_cap(&self) -> bool {
        self.high.load(Ordering::Acquire)
    }

    /// Updates [`Writer::over_cap`] after `q.queued` or `q.closed` changed
    /// (called with the lock held).
    fn mark(&self, q: &Queue) {
        self.high.store(q.queued > self.cap && q.closed.is_none(), Ordering::Release);
    }

    /// Bytes queued and not yet taken by the transport.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.q.lock().unwrap().queued
    }

    /// Waits while more than the cap is queued: backpressure for senders
    /// that can wait, and for the reader.
    pub(crate) async fn ready(&self) {
        if !self.over_cap() {
            return;
        }
        let _waiting = self.waiting();
        loop {
            let notified = self.drained.notified();
            {
                let q = self.q.lock().unwrap();
                if q.queued <= self.cap || q.closed.is_some() {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Waits until everything queued so far has been handed to the kernel
    /// (or the writer is closed).
    pub(crate) async fn flushed(&self) {
        let _waiting = self.waiting();
        loop {
            let notified = self.drained.notified();
            {
                let q = self.q.lock().unwrap();
                if q.queued == 0 || q.closed.is_some() {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Refuses further frames and drops what is queued.
    pub(crate) fn close(&self, reason: &str) {
        let mut q = self.q.lock().unwrap();
        if q.closed.is_none() {
            q.closed = Some(reason.to_string());
        }
        q.segs.clear();
        q.head.clear();
        q.queued = 0;
        self.mark(&q);
        drop(q);
        self.drained.notify_waiters();
        self.stalled.notify_one();
    }

    /// Counts a task as waiting on `drained` until the guard is dropped;
    /// taken before the task looks at the queue.
    fn waiting(&self) -> Waiting<'_> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        Waiting(&self.waiters)
    }

    /// Wakes the tasks waiting on `drained`, if there are any. Called
    /// after the change they wait for, made under the queue's lock: a
    /// waiter counted itself before it looked, so either it saw the change
    /// or this sees it.
    fn notify_drained(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.drained.notify_waiters();
        }
    }

    /// Marks the `wrote` bytes of the last batch as written, then takes up
    /// to `MAX_IOV` segments off the queue into `batch`; false (and
    /// flushing cleared) when it is empty. One lock for both.
    fn take_batch(&self, batch: &mut Vec<Bytes>, wrote: usize) -> bool {
        let mut q = self.q.lock().unwrap();
        if batch.capacity() == 0 {
            std::mem::swap(batch, &mut q.spare);
        }
        let was_high = q.queued > self.cap;
        q.queued = q.queued.saturating_sub(wrote);
        q.seal_head();
        if q.segs.is_empty() || q.closed.is_some() {
            q.flushing = false;
            q.queued = 0;
            self.mark(&q);
            if q.spare.capacity() == 0 {
                batch.clear();
                std::mem::swap(batch, &mut q.spare);
            }
            drop(q);
            self.notify_drained();
            return false;
        }
        self.mark(&q);
        let n = q.segs.len().min(MAX_IOV);
        batch.extend(q.segs.drain(..n));
        let below = was_high && q.queued <= self.cap;
        drop(q);
        if below {
            self.notify_drained();
        }
        true
    }

    /// Marks `n` bytes as written, waking senders held back by the cap
    /// once the queue falls below it.
    fn written(&self, n: usize) {
        let mut q = self.q.lock().unwrap();
        let was_high = q.queued > self.cap;
        q.queued = q.queued.saturating_sub(n);
        self.mark(&q);
        if was_high && q.queued <= self.cap {
            drop(q);
            self.notify_drained();
        }
    }

    /// Puts an unwritten remainder back at the front of the queue, the
    /// `wrote` bytes before it counted as written.
    fn put_back(&self, batch: &mut Vec<Bytes>, wrote: usize) {
        let mut q = self.q.lock().unwrap();
        for b in batch.drain(..).rev() {
            q.segs.push_front(b);
        }
        drop(q);
        self.written(wrote);
    }

    fn flush_inline(&self) {
        let mut batch = Vec::new();
        let mut wrote = 0;
        while self.take_batch(&mut batch, wrote) {
            match write_some(&mut batch, |s| self.transport.try_write(s)) {
                Ok(n) => {
                    wrote = n;
                    if !batch.is_empty() {
                        // The socket is full: hand the rest to the
                        // background flusher, which can wait.
                        self.put_back(&mut batch, n);
                        self.stalled.notify_one();
                        return;
                    }
                }
                Err(e) => {
                    self.close(&format!("write failed: {e}"));
                    return;
                }
            }
        }
    }
}

/// A task counted in [`Writer::waiters`].
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Writes from the front of `batch` until it is empty or the socket is
/// full: `write` would block, or took less than it was given (a
/// non-blocking stream socket stops only when full, so asking again would
/// only fail with `EAGAIN`). Consumed segments are removed, a partly
/// written one is cut.
fn write_some(batch: &mut Vec<Bytes>, mut write: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>) -> io::Result<usize> {
    let mut total = 0;
    while !batch.is_empty() {
        // On the stack: the hot path does not allocate per write.
        let mut slices = [IoSlice::new(&[]); MAX_IOV];
        let n = batch.len().min(MAX_IOV);
        let mut offered = 0;
        for (s, b) in slices.iter_mut().zip(batch.iter()) {
            *s = IoSlice::new(b);
            offered += b.len();
        }
        match write(&slices[..n]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                total += n;
                consume(batch, n);
                if n < offered {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Lets the background flusher see the writer is gone and exit.
        self.stalled.notify_one();
    }
}

fn consume(batch: &mut Vec<Bytes>, mut n: usize) {
    let mut done = 0;
    for b in batch.iter_mut() {
        if n >= b.len() {
            n -= b.len();
            done += 1;
        } else {
            let _ = b.split_to(n);
            break;
        }
    }
    batch.drain(..done);
}

async fn background_flush(w: std::sync::Weak<Writer>, stalled: Arc<Notify>) {
    loop {
        stalled.notified().await;
        let Some(writer) = w.upgrade() else { return };
        if writer.q.lock().unwrap().closed.is_some() {
            return;
        }
        let mut batch = Vec::new();
        while writer.take_batch(&mut batch, 0) {
            while !batch.is_empty() {
                let slices: Vec<IoSlice<'_>> = batch.iter().map(|b| IoSlice::new(b)).collect();
                // Also wakes when the writer is closed: the connection's
                // end may release the socket, and its readiness with it.
                let _waiting = writer.waiting();
                let r = loop {
                    let closed = writer.drained.notified();
                    if writer.q.lock().unwrap().closed.is_some() {
                        return;
                    }
                    tokio::select! {
                        biased;
                        r = std::future::poll_fn(|cx| writer.transport.poll_write(cx, &slices)) => break r,
                        _ = closed => {}
                    }
                };
                drop(slices);
                match r {
                    Ok(0) | Err(_) => {
                        let msg = match r {
                            Err(e) => format!("write failed: {e}"),
                            _ => "write failed: connection closed".into(),
                        };
                        writer.close(&msg);
                        return;
                    }
                    Ok(n) => {
                        writer.written(n);
                        consume(&mut batch, n);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Poll};

    /// Records every write; never blocks.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<Vec<u8>>>);

    impl crate::transport::Transport for Recorder {
        fn try_read(&self, _: &mut BytesMut) -> io::Result<usize> {
            Err(io::ErrorKind::WouldBlock.into())
        }
        fn poll_read(&self, _: &mut Context<'_>, _: &mut BytesMut) -> Poll<io::Result<usize>> {
            Poll::Pending
        }
        fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let n = all.len();
            self.0.lock().unwrap().push(all);
            Ok(n)
        }
        fn poll_write(&self, _: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
            Poll::Ready(self.try_write(bufs))
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
        t.0.lock().unwrap().clone()
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
}
