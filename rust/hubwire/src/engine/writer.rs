//! The write path of a connection: frames from many tasks, few syscalls.
//!
//! Callers append encoded frames to one queue under a short lock. The first
//! caller to find nobody flushing becomes the flusher and writes the queue
//! itself, in the caller's own task, with one vectored `sendmsg`; callers
//! that append while it writes leave their frames for it to pick up in its
//! next call. There is no writer task hop on the fast path. On a transport
//! that writes into shared memory ([`Transport::try_write_in_memory`](crate::transport::Transport::try_write_in_memory)), a
//! queue of small frames is copied into the ring under the lock
//! itself ([`Writer::write_held`]). When the socket
//! is full, the remainder is handed to a background task that waits for
//! the socket to drain. Small frames are copied into one contiguous buffer;
//! payloads above `COPY_LIMIT` stay separate `Bytes` segments (no copy).
//!
//! Two exceptions to flushing at once, both so that frames that come in a
//! burst leave in few writes (one `sendmsg`, one wake-up of the peer per
//! batch) rather than one each:
//! * while the reader dispatches the frames of one read, the writer is
//!   *corked*: answers produced meanwhile (handlers that finish at once)
//!   are written together when it is done ([`Writer::uncork`]);
//! * a frame sent while other calls are in flight on the connection
//!   (pipelining: more are coming) is pushed with [`Writer::push_soon`],
//!   which leaves the write to the background flusher, a task that runs
//!   after the tasks already woken, so their frames join the same write.
//!   One call in flight is never delayed this way.
//!
//! Either way a batch is written once it is full ([`BATCH_FRAMES`] frames,
//! or more with many calls in flight, below), without waiting for the rest
//! of the burst: the peer starts on the first frames while this side
//! produces the next ones. Writing a whole burst at
//! once made the two processes take turns, each idle while the other
//! worked (pipelined 16 B calls on a Unix socket, window 64, low-latency:
//! 0.69–0.91 M calls/s; in batches of 16, 1.59–1.89 M; bench/README.md,
//! round 8). With more calls in flight a batch grows to half of them, up
//! to [`BATCH_MAX`] ([`Writer::set_batch`]): two batches per burst still
//! overlap the peer's work with ours, and a socket's `sendmsg` and the
//! peer's wake-up are paid once per 64 frames rather than per 16 (window
//! 256, four turns: 1.9–2.3 → 2.3–2.8 M calls/s, CPU per call 0.81–1.0 →
//! 0.65–0.83 µs; bench/README.md, round 10). On shared memory, where a
//! write is a copy and no system call, batches stay at 16.
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

use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::Notify;

use crate::transport::DynTransport;

/// Payloads up to this size are copied next to their header.
const COPY_LIMIT: usize = 4096;
/// Frames in a batch held back by a cork or left to the background
/// flusher, at which it is written at once (see the module doc), unless
/// more calls are in flight ([`Writer::set_batch`]). Small enough that the
/// peer starts early, large enough that a `sendmsg` of 16 small frames
/// costs less than their encoding.
const BATCH_FRAMES: usize = 16;
/// The largest batch [`Writer::set_batch`] sets.
const BATCH_MAX: usize = 64;
/// The most bytes [`Writer::write_held`] copies while it holds the queue's
/// lock: a batch of small frames (16 × 1 KiB), a few microseconds of
/// other senders' wait at most.
const HELD_LIMIT: usize = 16 * 1024;
/// Segments per `sendmsg`.
const MAX_IOV: usize = 64;
/// Segments up to which a write's slices take a small array: a frame
/// written alone is one or two (header and payload copied together, or a
/// large payload beside them).
const FEW_IOV: usize = 4;

#[derive(Default)]
struct Queue {
    head: BytesMut,
    segs: VecDeque<Bytes>,
    queued: usize,
    /// Frames queued since the last batch was taken.
    frames: usize,
    flushing: bool,
    /// The flush is handed to the background flusher, which has not begun
    /// it yet: set with `flushing`, by whoever hands it over.
    handed: Handoff,
    /// Set while the reader dispatches a batch: no inline flush.
    corked: bool,
    closed: Option<String>,
    /// The segment list an inline flush takes its batch into, kept between
    /// flushes: no allocation per write.
    spare: Vec<Bytes>,
}

/// Why the background flusher was woken: only a hand-over makes it the
/// flusher (a wake-up left over from a hand-over taken back is ignored).
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Handoff {
    #[default]
    None,
    /// By [`Writer::push_soon`]: a sender that fills the batch takes the
    /// flush back and writes it itself.
    Soon,
    /// The socket was full, or a frame written alone left others queued.
    Stalled,
}

/// What a sender does after queueing its frame.
#[derive(PartialEq, Eq)]
enum Flush {
    /// Nothing: another task flushes, or the writer is corked.
    No,
    /// Write the queue now, in this task.
    Now,
    /// Hand the flush to the background flusher.
    Soon,
}

/// What [`Writer::write_held`] did.
enum Held {
    /// Nothing: the queue holds more than small frames, the transport
    /// does not write into memory, or the write failed. The caller
    /// flushes as a batch.
    Batch,
    /// All written, and nobody to wake: the flush is over.
    Done,
    /// The caller is still the flusher: it wakes the reader (`wake`) and
    /// the senders waiting below the cap (`below`), then flushes the rest.
    Flushing { wake: bool, below: bool },
}

impl Queue {
    /// Hands the flush (held by the caller) to the background flusher.
    fn hand_over(&mut self, why: Handoff) {
        debug_assert!(self.flushing);
        self.handed = why;
    }

    /// Ends the flush of an empty queue (its flusher's, with the lock).
    fn end_flush(&mut self) {
        debug_assert!(self.flushing && self.queued == 0);
        self.frames = 0;
        self.flushing = false;
    }

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
    /// Frames at which a held-back batch is written ([`Writer::set_batch`]).
    batch: AtomicUsize,
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
            batch: AtomicUsize::new(BATCH_FRAMES),
        });
        tokio::spawn(background_flush(Arc::downgrade(&w), w.stalled.clone()));
        w
    }

    /// Queues one frame: `head` writes the header and fixed fields,
    /// `payload` follows. Flushes inline unless another task is flushing
    /// or the writer is corked. Fails only when the connection is closed.
    pub(crate) fn push(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes) -> Result<(), String> {
        self.push_freeing(head, payload, false, None)
    }

    /// Like [`Writer::push`], but the write is left to the background
    /// flusher, so that frames other tasks push before it runs go out in
    /// the same write. For frames that are not alone (see the module doc).
    pub(crate) fn push_soon(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes) -> Result<(), String> {
        self.push_freeing(head, payload, true, None)
    }

    /// [`Writer::push`] (or, with `soon`, [`Writer::push_soon`]) that
    /// also takes one from `slot`, under the lock that queues the frame:
    /// the count drops before any flusher can write the frame, so a peer
    /// that has it and sends its next call never finds the slot still
    /// taken (`Core::answering`: a served call's `max_calls` slot). Taken
    /// also when the writer is closed and the frame dropped.
    pub(crate) fn push_freeing(
        &self,
        head: impl FnOnce(&mut BytesMut),
        payload: &Bytes,
        soon: bool,
        slot: Option<&AtomicUsize>,
    ) -> Result<(), String> {
        match self.enqueue(head, payload, soon, slot)? {
            Flush::No => {}
            Flush::Now => self.flush_inline(),
            Flush::Soon => self.stalled.notify_one(),
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
            q.hand_over(Handoff::Stalled);
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

    /// Sizes the batches for `in_flight` calls: half of them, between
    /// [`BATCH_FRAMES`] and [`BATCH_MAX`] frames (0: the smallest).
    pub(crate) fn set_batch(&self, in_flight: usize) {
        let n = (in_flight / 2).clamp(BATCH_FRAMES, BATCH_MAX);
        // Stored only when it changes: called on every pipelined call, and
        // a store would take the cache line from the other threads' loads.
        if self.batch.load(Ordering::Relaxed) != n {
            self.batch.store(n, Ordering::Relaxed);
        }
    }

    /// Ends [`Writer::cork`]: writes what was queued meanwhile.
    pub(crate) fn uncork(&self) {
        let held = {
            let mut q = self.q.lock().unwrap();
            q.corked = false;
            if q.flushing || q.queued == 0 || q.closed.is_some() {
                return;
            }
            q.flushing = true;
            self.write_held(&mut q)
        };
        if self.after_held(held) == Flush::Now {
            self.flush_inline();
        }
    }

    /// Appends a frame to the queue, and says what the caller does next:
    /// flush now if nobody was flushing and the writer is not corked, or
    /// the batch is full ([`Writer::set_batch`]; a flush handed to the
    /// background flusher and not begun is taken back); with `soon`, hand
    /// a batch that is not full to the background flusher instead.
    fn enqueue(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes, soon: bool, slot: Option<&AtomicUsize>) -> Result<Flush, String> {
        let held = {
            let mut q = self.q.lock().unwrap();
            if let Some(slot) = slot {
                slot.fetch_sub(1, Ordering::SeqCst);
            }
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
            q.frames += 1;
            self.mark(&q);
            let full = q.frames >= self.batch.load(Ordering::Relaxed);
            if q.flushing {
                if full && q.handed == Handoff::Soon {
                    q.handed = Handoff::None;
                    return Ok(Flush::Now);
                }
                return Ok(Flush::No);
            }
            if q.corked && !full {
                return Ok(Flush::No);
            }
            q.flushing = true;
            if soon && !full {
                q.hand_over(Handoff::Soon);
                return Ok(Flush::Soon);
            }
            self.write_held(&mut q)
        };
        Ok(self.after_held(held))
    }

    /// Whether what is queued may be written with [`Writer::write_held`]:
    /// small frames only, all in `head` (no payload kept as a segment of
    /// its own, no remainder of a stalled write).
    fn holds_small(&self, q: &Queue) -> bool {
        q.segs.is_empty() && q.head.len() <= HELD_LIMIT && q.queued == q.head.len()
    }

    /// Writes the small frames in `q.head` while the lock is held (the
    /// caller just became the flusher), if the queue holds only those
    /// ([`Writer::holds_small`]) and the transport writes into memory
    /// ([`Transport::try_write_in_memory`](crate::transport::Transport::try_write_in_memory)):
    /// a copy into the ring, which costs less than taking the frames out
    /// as a batch (a second and third lock, the segment lists). The
    /// wake-up of a parked reader (a system call on a descriptor the peer
    /// handed over, which a broken peer could make block) is left to
    /// [`Writer::after_held`], once the lock is let go, with the flush
    /// still held, so that other senders queue meanwhile as they would
    /// behind any write.
    fn write_held(&self, q: &mut Queue) -> Held {
        if !self.holds_small(q) {
            return Held::Batch;
        }
        let Some(r) = self.transport.try_write_in_memory(&[IoSlice::new(&q.head)]) else { return Held::Batch };
        // An error is met again, and dealt with, by the batch's write.
        let Ok((n, wake)) = r else { return Held::Batch };
        if n == q.head.len() {
            // Cleared, not advanced: the buffer keeps its room from the start.
            q.head.clear();
        } else {
            q.head.advance(n);
        }
        let below = self.count_written(q, n);
        if q.queued == 0 && !wake {
            q.end_flush();
            return Held::Done;
        }
        Held::Flushing { wake, below }
    }

    /// What the caller of [`Writer::write_held`] does once the lock is let
    /// go: wake the reader, wake waiting senders, and say whether it is
    /// still the flusher (`Flush::Now`: the rest of the queue, or frames
    /// queued while it woke the reader, are its to write).
    fn after_held(&self, held: Held) -> Flush {
        match held {
            Held::Batch => Flush::Now,
            Held::Done => {
                // As a batch's flush does when it drains the queue.
                self.notify_drained();
                Flush::No
            }
            Held::Flushing { wake, below } => {
                if wake {
                    self.transport.wake_reader();
                }
                if below {
                    self.notify_drained();
                }
                if self.end_flush_if_empty() {
                    Flush::No
                } else {
                    Flush::Now
                }
            }
        }
    }

    /// Ends the flush the caller holds if nothing is queued (the usual
    /// case after a wake-up made as the flusher: one lock, where a batch's
    /// flush would take the queue apart to find it empty); false if frames
    /// wait, which the caller then flushes.
    fn end_flush_if_empty(&self) -> bool {
        let mut q = self.q.lock().unwrap();
        if q.queued > 0 {
            return false;
        }
        q.end_flush();
        drop(q);
        self.notify_drained();
        true
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
        let below = self.count_written(&mut q, wrote);
        q.frames = 0;
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
        let n = q.segs.len().min(MAX_IOV);
        batch.extend(q.segs.drain(..n));
        drop(q);
        if below {
            self.notify_drained();
        }
        true
    }

    /// Marks `n` bytes as written, waking senders held back by the cap
    /// once the queue falls below it.
    fn written(&self, n: usize) {
        let below = self.count_written(&mut self.q.lock().unwrap(), n);
        if below {
            self.notify_drained();
        }
    }

    /// Counts `n` bytes as written (with the lock held); true if that took
    /// the queue from over its cap to below it (wake the waiting senders
    /// once the lock is let go).
    fn count_written(&self, q: &mut Queue, n: usize) -> bool {
        let was_high = q.queued > self.cap;
        q.queued = q.queued.saturating_sub(n);
        self.mark(q);
        was_high && q.queued <= self.cap
    }

    /// Puts an unwritten remainder back at the front of the queue, the
    /// `wrote` bytes before it counted as written, and hands the flush to
    /// the background flusher. The count is made under the same lock as
    /// the hand-over: from then on the flusher owns the queue, and may
    /// drain it (counting `queued` down to 0) before this task runs on.
    fn put_back(&self, batch: &mut Vec<Bytes>, wrote: usize) {
        let mut q = self.q.lock().unwrap();
        for b in batch.drain(..).rev() {
            q.segs.push_front(b);
        }
        let below = self.count_written(&mut q, wrote);
        q.hand_over(Handoff::Stalled);
        drop(q);
        if below {
            self.notify_drained();
        }
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
        let (r, offered) = if batch.len() <= FEW_IOV { offer::<FEW_IOV>(batch, &mut write) } else { offer::<MAX_IOV>(batch, &mut write) };
        match r {
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

/// Offers the first `N` segments of `batch` to `write`: the result, and
/// the bytes offered. The slices are on the stack (no allocation per
/// write), and the array is as small as the batch allows: filling 64
/// empty slices first cost ~200 instructions per write, a fifth of a
/// call's writer work when one frame is written at a time.
fn offer<const N: usize>(batch: &[Bytes], write: &mut impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>) -> (io::Result<usize>, usize) {
    let mut slices = [IoSlice::new(&[]); N];
    let n = batch.len().min(N);
    let mut offered = 0;
    for (s, b) in slices.iter_mut().zip(batch) {
        *s = IoSlice::new(b);
        offered += b.len();
    }
    (write(&slices[..n]), offered)
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
        {
            let mut q = writer.q.lock().unwrap();
            if q.closed.is_some() {
                return;
            }
            // Not handed over (taken back by a sender that filled the
            // batch, or already flushed): someone else owns the queue.
            if std::mem::take(&mut q.handed) == Handoff::None {
                continue;
            }
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
#[path = "writer_tests.rs"]
mod tests;
