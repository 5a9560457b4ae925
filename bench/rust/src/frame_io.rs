//! The floor's wire: frames of a `u32` LE length and the bytes, over any
//! [`Pipe`] — a pair of file descriptors (a socket twice, or two pipes),
//! or the rings of a shared-memory segment (`shm_floor.rs`) — read through
//! a buffer, one `write` per batch. Blocking, or spinning on non-blocking
//! reads for up to 50 µs before waiting (the same budget as hubwire's
//! low-latency mode).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long the spinning floor spins before it blocks.
pub const SPIN: Duration = Duration::from_micros(50);

/// A byte stream the floor's frames travel on.
pub trait Pipe {
    /// One read; `WouldBlock` when nothing is there and the pipe does not
    /// block; `Ok(0)` at end of stream.
    fn read(&self, buf: &mut [u8]) -> io::Result<usize>;
    /// One write of a prefix of `buf`; `WouldBlock` when full.
    fn write(&self, buf: &[u8]) -> io::Result<usize>;
    /// Waits until a read (`readable`) or a write (`writable`) may move.
    fn wait(&self, readable: bool, writable: bool) -> io::Result<()>;
    /// Whether reads and writes return `WouldBlock` instead of blocking.
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
}

/// A read and a write descriptor (the same socket twice is fine).
pub struct FdPipe {
    r: File,
    w: File,
}

impl Pipe for FdPipe {
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        (&self.r).read(buf)
    }

    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        (&self.w).write(buf)
    }

    fn wait(&self, readable: bool, writable: bool) -> io::Result<()> {
        let mut fds = Vec::with_capacity(2);
        if readable {
            fds.push((self.r.as_raw_fd(), libc::POLLIN));
        }
        if writable {
            fds.push((self.w.as_raw_fd(), libc::POLLOUT));
        }
        poll(&fds).map(drop)
    }

    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        set_nonblocking(&self.r, on)?;
        set_nonblocking(&self.w, on)
    }
}

/// One end of a framed byte stream.
pub struct FrameIo<P: Pipe = FdPipe> {
    pipe: P,
    spin: bool,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    wbuf: Vec<u8>,
    woff: usize,
}

fn set_nonblocking(f: &File, on: bool) -> io::Result<()> {
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
        if libc::fcntl(fd, libc::F_SETFL, flags) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Waits until `fds` (fd, events) are ready; returns the revents.
fn poll(fds: &[(i32, libc::c_short)]) -> io::Result<Vec<libc::c_short>> {
    let mut p: Vec<libc::pollfd> = fds.iter().map(|&(fd, events)| libc::pollfd { fd, events, revents: 0 }).collect();
    loop {
        // SAFETY: a valid array of pollfds for the call's duration.
        let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) };
        if r >= 0 {
            return Ok(p.iter().map(|p| p.revents).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

impl FrameIo {
    /// Wraps a read and a write descriptor (the same socket twice is fine).
    /// Non-blocking when spinning; the pipelined client makes them
    /// non-blocking for its own loop either way.
    pub fn new(r: OwnedFd, w: OwnedFd, spin: bool) -> io::Result<FrameIo> {
        FrameIo::on(FdPipe { r: File::from(r), w: File::from(w) }, spin)
    }

    /// One socket used both ways.
    pub fn socket(s: OwnedFd, spin: bool) -> io::Result<FrameIo> {
        let w = s.try_clone()?;
        FrameIo::new(s, w, spin)
    }
}

impl<P: Pipe> FrameIo<P> {
    /// Frames over `pipe`.
    pub fn on(pipe: P, spin: bool) -> io::Result<FrameIo<P>> {
        pipe.set_nonblocking(spin)?;
        Ok(FrameIo { pipe, spin, rbuf: vec![0; 256 * 1024], start: 0, end: 0, wbuf: Vec::with_capacity(64 * 1024), woff: 0 })
    }

    /// One `read` of whatever is there (after spinning, in spin mode);
    /// `Ok(0)` at end of stream. Non-blocking reads that find nothing wait
    /// in `poll` unless `nowait`, when they return `WouldBlock`.
    fn fill(&mut self, nowait: bool) -> io::Result<usize> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.rbuf.len() {
            self.rbuf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        let mut deadline = None;
        loop {
            match self.pipe.read(&mut self.rbuf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if nowait {
                        return Err(e);
                    }
                    if self.spin {
                        let d = *deadline.get_or_insert_with(|| Instant::now() + SPIN);
                        if Instant::now() < d {
                            std::hint::spin_loop();
                            continue;
                        }
                    }
                    self.pipe.wait(true, false)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The next complete frame already buffered: (offset, length).
    fn buffered_frame(&mut self) -> Option<(usize, usize)> {
        let avail = self.end - self.start;
        if avail < 4 {
            return None;
        }
        let n = u32::from_le_bytes(self.rbuf[self.start..self.start + 4].try_into().unwrap()) as usize;
        if avail < 4 + n {
            if 4 + n > self.rbuf.len() {
                self.rbuf.resize((4 + n).next_power_of_two(), 0);
            }
            return None;
        }
        let at = self.start + 4;
        self.start += 4 + n;
        Some((at, n))
    }

    /// Reads the next frame; `None` at a clean end of stream.
    fn next_frame(&mut self) -> io::Result<Option<(usize, usize)>> {
        loop {
            if let Some(f) = self.buffered_frame() {
                return Ok(Some(f));
            }
            if self.fill(false)? == 0 {
                return if self.end == self.start { Ok(None) } else { Err(io::ErrorKind::UnexpectedEof.into()) };
            }
        }
    }

    fn push_frame(&mut self, payload: &[u8]) {
        self.wbuf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.wbuf.extend_from_slice(payload);
    }

    /// Writes what is queued; with `nowait`, stops at `WouldBlock`.
    /// Returns whether everything went.
    fn flush(&mut self, nowait: bool) -> io::Result<bool> {
        while self.woff < self.wbuf.len() {
            match self.pipe.write(&self.wbuf[self.woff..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.woff += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if nowait {
                        return Ok(false);
                    }
                    self.pipe.wait(false, true)?;
                }
                Err(e) => return Err(e),
            }
        }
        self.wbuf.clear();
        self.woff = 0;
        Ok(true)
    }

    /// Server: echoes frames until end of stream. Every frame already
    /// read goes back in one `write`.
    pub fn serve(&mut self) -> io::Result<()> {
        loop {
            let Some((at, n)) = self.next_frame()? else {
                return Ok(());
            };
            self.wbuf.extend_from_slice(&(n as u32).to_le_bytes());
            self.wbuf.extend_from_slice(&self.rbuf[at..at + n]);
            while let Some((at, n)) = self.buffered_frame() {
                self.wbuf.extend_from_slice(&(n as u32).to_le_bytes());
                self.wbuf.extend_from_slice(&self.rbuf[at..at + n]);
            }
            self.flush(false)?;
        }
    }

    /// Client: one round trip.
    pub fn round_trip(&mut self, payload: &[u8]) -> io::Result<()> {
        self.push_frame(payload);
        self.flush(false)?;
        match self.next_frame()? {
            Some((_, n)) => crate::client::check_len(n, payload.len()),
            None => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }

    /// Client: `calls` round trips with up to `window` in flight, in one
    /// thread: non-blocking writes of every frame the window allows, reads
    /// of every answer there is, `poll` (or a spin) when neither moves.
    pub fn pipeline(&mut self, payload: &[u8], window: usize, calls: u64) -> io::Result<()> {
        self.pipe.set_nonblocking(true)?;
        let r = self.pipeline_nb(payload, window as u64, calls);
        self.pipe.set_nonblocking(self.spin)?;
        r
    }

    fn pipeline_nb(&mut self, payload: &[u8], window: u64, calls: u64) -> io::Result<()> {
        let (mut sent, mut done) = (0u64, 0u64);
        let mut idle_since: Option<Instant> = None;
        while done < calls {
            let mut moved = false;
            // Queue what the window allows, in batches of at most 256 KiB.
            while sent < calls && sent - done < window && self.wbuf.len() < 256 * 1024 {
                self.push_frame(payload);
                sent += 1;
            }
            if !self.wbuf.is_empty() {
                let before = self.woff;
                self.flush(true)?;
                moved |= self.woff != before || self.wbuf.is_empty();
            }
            match self.fill(true) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => moved = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            while let Some((_, n)) = self.buffered_frame() {
                crate::client::check_len(n, payload.len())?;
                done += 1;
            }
            if moved {
                idle_since = None;
                continue;
            }
            let since = *idle_since.get_or_insert_with(Instant::now);
            if self.spin && since.elapsed() < SPIN {
                std::hint::spin_loop();
                continue;
            }
            self.pipe.wait(true, !self.wbuf.is_empty())?;
            idle_since = None;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn echo_pair(spin: bool) -> (FrameIo, std::thread::JoinHandle<io::Result<()>>) {
        let (a, b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || FrameIo::socket(b.into(), spin)?.serve());
        (FrameIo::socket(a.into(), spin).unwrap(), server)
    }

    #[test]
    fn round_trips_and_pipelines_in_both_modes() {
        for spin in [false, true] {
            let (mut c, server) = echo_pair(spin);
            c.round_trip(b"hello").unwrap();
            // Larger than the read buffer, so it must grow.
            c.round_trip(&vec![7u8; 600_000]).unwrap();
            // More bytes in flight than the socket buffers hold.
            c.pipeline(&[1u8; 1000], 256, 5000).unwrap();
            c.pipeline(&[], 3, 10).unwrap();
            drop(c);
            server.join().unwrap().unwrap();
        }
    }
}
