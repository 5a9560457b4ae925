//! The in-memory twin: a connected pair of transports in one process, with
//! the same semantics as a socket (bounded buffer, end of stream when the
//! other side shuts down or is dropped). Every behaviour test runs on it
//! as well as on the real transports.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::{BufMut, BytesMut};

use super::Transport;

/// How many bytes a direction buffers before writes would block, like a
/// socket's send buffer.
const CAPACITY: usize = 256 * 1024;

#[derive(Default)]
struct Pipe {
    data: VecDeque<u8>,
    closed: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// One end of an in-memory byte stream.
pub struct MemoryTransport {
    rx: Arc<Mutex<Pipe>>,
    tx: Arc<Mutex<Pipe>>,
    label: &'static str,
}

/// A connected pair: what one writes, the other reads.
pub fn pair() -> (MemoryTransport, MemoryTransport) {
    let a = Arc::new(Mutex::new(Pipe::default()));
    let b = Arc::new(Mutex::new(Pipe::default()));
    (MemoryTransport { rx: a.clone(), tx: b.clone(), label: "memory:a" }, MemoryTransport { rx: b, tx: a, label: "memory:b" })
}

impl MemoryTransport {
    fn read(&self, cx: Option<&mut Context<'_>>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        let mut p = self.rx.lock().unwrap();
        if p.data.is_empty() {
            if p.closed {
                return Poll::Ready(Ok(0));
            }
            return match cx {
                Some(cx) => {
                    p.reader = Some(cx.waker().clone());
                    Poll::Pending
                }
                None => Poll::Ready(Err(io::ErrorKind::WouldBlock.into())),
            };
        }
        let n = p.data.len().min(buf.capacity() - buf.len());
        let (a, b) = p.data.as_slices();
        let from_a = n.min(a.len());
        buf.put_slice(&a[..from_a]);
        buf.put_slice(&b[..n - from_a]);
        p.data.drain(..n);
        if let Some(w) = p.writer.take() {
            w.wake();
        }
        Poll::Ready(Ok(n))
    }

    fn write(&self, cx: Option<&mut Context<'_>>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut p = self.tx.lock().unwrap();
        if p.closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let room = CAPACITY.saturating_sub(p.data.len());
        if room == 0 {
            return match cx {
                Some(cx) => {
                    p.writer = Some(cx.waker().clone());
                    Poll::Pending
                }
                None => Poll::Ready(Err(io::ErrorKind::WouldBlock.into())),
            };
        }
        let mut n = 0;
        for b in bufs {
            let take = b.len().min(room - n);
            p.data.extend(&b[..take]);
            n += take;
            if n == room {
                break;
            }
        }
        if let Some(w) = p.reader.take() {
            w.wake();
        }
        Poll::Ready(Ok(n))
    }
}

impl Transport for MemoryTransport {
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        match self.read(None, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => unreachable!("no context, no Pending"),
        }
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
        self.read(Some(cx), buf)
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self.write(None, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => unreachable!("no context, no Pending"),
        }
    }

    fn poll_write(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        self.write(Some(cx), bufs)
    }

    fn shutdown(&self) {
        for pipe in [&self.rx, &self.tx] {
            let mut p = pipe.lock().unwrap();
            p.closed = true;
            for w in [p.reader.take(), p.writer.take()].into_iter().flatten() {
                w.wake();
            }
        }
    }

    fn shutdown_write(&self) {
        let mut p = self.tx.lock().unwrap();
        p.closed = true;
        if let Some(w) = p.reader.take() {
            w.wake();
        }
    }

    fn describe(&self) -> String {
        self.label.to_string()
    }
}

impl Drop for MemoryTransport {
    fn drop(&mut self) {
        self.shutdown();
    }
}
