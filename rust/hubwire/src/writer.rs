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

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;

use crate::transport::DynTransport;

/// Payloads up to this size are copied next to their header.
const COPY_LIMIT: usize = 4096;
/// Queued bytes above which async senders wait for the queue to drain.
const HIGH_WATER: usize = 4 * 1024 * 1024;
/// Segments per `sendmsg`.
const MAX_IOV: usize = 64;

#[derive(Default)]
struct Queue {
    head: BytesMut,
    segs: VecDeque<Bytes>,
    queued: usize,
    flushing: bool,
    closed: Option<String>,
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
    /// Wakes senders waiting below the high-water mark, and `flushed`.
    drained: Notify,
}

impl Writer {
    pub(crate) fn new(transport: DynTransport) -> Arc<Writer> {
        let w = Arc::new(Writer {
            q: Mutex::new(Queue { head: BytesMut::with_capacity(16 * 1024), ..Default::default() }),
            transport,
            stalled: Arc::new(Notify::new()),
            drained: Notify::new(),
        });
        tokio::spawn(background_flush(Arc::downgrade(&w), w.stalled.clone()));
        w
    }

    /// Queues one frame: `head` writes the header and fixed fields,
    /// `payload` follows. Flushes inline unless another task is flushing.
    /// Fails only when the connection is closed.
    pub(crate) fn push(&self, head: impl FnOnce(&mut BytesMut), payload: &Bytes) -> Result<(), String> {
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
            if q.flushing {
                return Ok(());
            }
            q.flushing = true;
        }
        self.flush_inline();
        Ok(())
    }

    /// Waits while more than `HIGH_WATER` bytes are queued: backpressure for
    /// senders that can wait.
    pub(crate) async fn ready(&self) {
        loop {
            let notified = self.drained.notified();
            {
                let q = self.q.lock().unwrap();
                if q.queued <= HIGH_WATER || q.closed.is_some() {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Waits until everything queued so far has been handed to the kernel
    /// (or the writer is closed).
    pub(crate) async fn flushed(&self) {
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
        drop(q);
        self.drained.notify_waiters();
        self.stalled.notify_one();
    }

    /// Takes up to `MAX_IOV` segments off the queue; `None` (and flushing
    /// cleared) when it is empty.
    fn take_batch(&self, batch: &mut Vec<Bytes>) -> bool {
        let mut q = self.q.lock().unwrap();
        q.seal_head();
        if q.segs.is_empty() || q.closed.is_some() {
            q.flushing = false;
            q.queued = 0;
            drop(q);
            self.drained.notify_waiters();
            return false;
        }
        let n = q.segs.len().min(MAX_IOV);
        batch.extend(q.segs.drain(..n));
        true
    }

    /// Puts an unwritten remainder back at the front of the queue.
    fn put_back(&self, batch: &mut Vec<Bytes>) {
        let mut q = self.q.lock().unwrap();
        for b in batch.drain(..).rev() {
            q.segs.push_front(b);
        }
    }

    /// Marks `n` bytes as written, waking senders held back by the
    /// high-water mark once the queue falls below it.
    fn written(&self, n: usize) {
        let mut q = self.q.lock().unwrap();
        let was_high = q.queued > HIGH_WATER;
        q.queued = q.queued.saturating_sub(n);
        if was_high && q.queued <= HIGH_WATER {
            drop(q);
            self.drained.notify_waiters();
        }
    }

    fn flush_inline(&self) {
        let mut batch = Vec::with_capacity(8);
        while self.take_batch(&mut batch) {
            match write_some(&mut batch, |s| self.transport.try_write(s)) {
                Ok(n) => {
                    self.written(n);
                    if !batch.is_empty() {
                        // The socket is full: hand the rest to the
                        // background flusher, which can wait.
                        self.put_back(&mut batch);
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

/// Writes from the front of `batch` until it is empty or `write` would
/// block; consumed segments are removed, a partly written one is cut.
fn write_some(batch: &mut Vec<Bytes>, mut write: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>) -> io::Result<usize> {
    let mut total = 0;
    while !batch.is_empty() {
        // On the stack: the hot path does not allocate per write.
        let mut slices = [IoSlice::new(&[]); MAX_IOV];
        let n = batch.len().min(MAX_IOV);
        for (s, b) in slices.iter_mut().zip(batch.iter()) {
            *s = IoSlice::new(b);
        }
        match write(&slices[..n]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                total += n;
                consume(batch, n);
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
        while writer.take_batch(&mut batch) {
            while !batch.is_empty() {
                let slices: Vec<IoSlice<'_>> = batch.iter().map(|b| IoSlice::new(b)).collect();
                let r = std::future::poll_fn(|cx| writer.transport.poll_write(cx, &slices)).await;
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
