//! The shared-memory floor: the floor's frames (`frame_io.rs`) over the two
//! rings of a segment shared by two processes, with no framework on top —
//! what the shared-memory rows of hubwire are measured against. The client
//! makes the segment and hands it over a Unix socket (`SCM_RIGHTS`), as
//! hubwire's upgrade does (`spec/PROTOCOL.md` §11.4); the socket then only
//! tells each side that the other has gone.
//!
//! The client waits for the server's one-byte answer before it writes:
//! the server checks that the rings are untouched, as hubwire's acceptor
//! does before its UPGRADED.
//!
//! `floor-spin` polls the ring for up to 50 µs before it parks;
//! `floor-blocking` parks on the ring's eventfd at once. Either way a
//! writer signals only a parked reader, so a busy pair makes no system
//! call per frame.

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use bytes::BytesMut;
use hubwire::transport::fd_pass;
use hubwire::transport::shm::link::{self, Link};
use hubwire::transport::shm::segment::Segment;
use hubwire::transport::shm::Budget;

use super::endpoint::Listening;
use super::floor::Remote;
use crate::frame_io::{FrameIo, Pipe};
use crate::model::{Job, Transport};
use crate::runner::Target;
use crate::serve::Listen;

/// One side's rings, and the socket that watches the other side.
pub struct ShmPipe {
    link: Link,
    sock: OwnedFd,
    // Dropped after `link`: its eventfds were registered with it.
    _rt: tokio::runtime::Runtime,
}

impl ShmPipe {
    fn new(sock: OwnedFd, make: impl FnOnce() -> io::Result<Link>) -> io::Result<ShmPipe> {
        // The link's eventfds are registered with a reactor that is never
        // driven: the floor parks in poll(2) itself (`Link::wait_blocking`).
        let rt = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
        let link = {
            let _in = rt.enter();
            make()?
        };
        Ok(ShmPipe { link, sock, _rt: rt })
    }

    /// The client's side: makes a segment with rings of hubwire's default
    /// size (`HUBWIRE_SHM_RING` included) and sends it over `sock`.
    pub fn offer(sock: OwnedFd) -> io::Result<ShmPipe> {
        let ring = hubwire::ConnectionOptions::new("shm-floor").shm_ring;
        let (seg, memfd) = Segment::create(ring, ring)?;
        let fds = link::eventfds()?;
        let sent: Vec<_> = std::iter::once(memfd.as_fd()).chain(fds.iter().map(|f| f.as_fd())).collect();
        fd_pass::send_with_fds(sock.as_raw_fd(), &[IoSlice::new(b"s")], &sent)?;
        // The server checks that the rings are untouched: write nothing
        // before its one-byte answer.
        let mut ok = [0u8; 1];
        std::io::Read::read_exact(&mut std::fs::File::from(sock.try_clone()?), &mut ok)?;
        ShmPipe::new(sock, || Link::new(seg, true, fds, Budget::unlimited()))
    }

    /// The server's side: takes the segment the client sent on `sock`.
    pub fn take(sock: OwnedFd) -> io::Result<ShmPipe> {
        let mut buf = BytesMut::with_capacity(16);
        let mut fds = Vec::new();
        fd_pass::recv_with_fds(sock.as_raw_fd(), &mut buf, &mut fds)?;
        let Ok([memfd, d0, r0, d1, r1]) = <[OwnedFd; 5]>::try_from(fds) else {
            return Err(io::Error::other("the shm floor's client sent no segment"));
        };
        let seg = Segment::open(&memfd).map_err(io::Error::other)?;
        let pipe = ShmPipe::new(sock, || Link::new(seg, false, [d0, r0, d1, r1], Budget::unlimited()))?;
        std::io::Write::write_all(&mut std::fs::File::from(pipe.sock.try_clone()?), b"k")?;
        Ok(pipe)
    }
}

impl Drop for ShmPipe {
    /// The other side reads end of stream after what we wrote.
    fn drop(&mut self) {
        self.link.close_write();
    }
}

impl Pipe for ShmPipe {
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.link.read_into(buf)?.ok_or_else(|| io::ErrorKind::WouldBlock.into())
    }

    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self.link.try_write(&[IoSlice::new(buf)])? {
            0 if !buf.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }

    fn wait(&self, readable: bool, writable: bool) -> io::Result<()> {
        self.link.wait_blocking(readable, writable, self.sock.as_raw_fd())
    }

    /// The rings never block: `frame_io` waits in [`Pipe::wait`].
    fn set_nonblocking(&self, _on: bool) -> io::Result<()> {
        Ok(())
    }
}

/// Starts `bench-peer shm-floor` for `job` (transport `shm`).
pub fn start(job: &Job, spin: bool) -> io::Result<Box<dyn Target>> {
    let mut args = vec!["shm-floor"];
    if spin {
        args.push("--spin");
    }
    let server = Listening::start(&args, Transport::Unix)?;
    let open = |sock, spin| FrameIo::on(ShmPipe::offer(sock)?, spin);
    Ok(Box::new(Remote { server, spin, payload: job.payload.raw.clone(), open }))
}

/// The server loop of `bench-peer shm-floor`: one thread per connection.
pub fn serve(listen: Listen, spin: bool) -> io::Result<()> {
    listen.serve_blocking(move |sock, _| match FrameIo::on(ShmPipe::take(sock)?, spin)?.serve() {
        // The client's end: its socket closed.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(()),
        r => r,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn round_trips_and_pipelines_through_the_rings_in_both_modes() {
        for spin in [false, true] {
            let (a, b) = UnixStream::pair().unwrap();
            let server = std::thread::spawn(move || FrameIo::on(ShmPipe::take(b.into())?, spin)?.serve());
            let mut c = FrameIo::on(ShmPipe::offer(a.into()).unwrap(), spin).unwrap();
            c.round_trip(b"hello").unwrap();
            // Larger than a ring: it streams through.
            c.round_trip(&vec![7u8; 600_000]).unwrap();
            c.pipeline(&[1u8; 1000], 256, 5000).unwrap();
            // Frames of 1 MiB, 4 in flight: the bulk row.
            c.pipeline(&vec![3u8; 1 << 20], 4, 20).unwrap();
            drop(c);
            let r = server.join().unwrap();
            assert!(r.is_ok(), "the server reads end of stream when the client goes: {r:?}");
        }
    }
}
