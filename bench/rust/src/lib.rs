//! Shared pieces of the hubwire benchmarks: the four variants of the unary
//! round-trip measurement, the hand-written length-prefixed echo (server
//! and client) they are compared with, the hubwire client, and the handling
//! of the peer process (`bench-peer`).
//!
//! The hand-written echo is the floor a runtime is measured against: one
//! `recv` and one `write` per hop, frames of a `u32` LE length and the
//! bytes, read through a buffer (as many bytes as are there per read).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// How long the spinning variants spin before they block: the same budget
/// as `hubwire::WaitMode::low_latency()`.
pub const SPIN: Duration = Duration::from_micros(50);

/// The payload size of the small-payload measurement.
pub const PAYLOAD_LEN: usize = 16;

/// One side of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Hand-written echo, blocking reads on both sides.
    EchoBlocking,
    /// hubwire, `WaitMode::Efficient` on both sides.
    HubwireEfficient,
    /// Hand-written echo, spinning up to 50 µs before blocking, both sides.
    EchoSpin,
    /// hubwire, `WaitMode::low_latency()` on both sides.
    HubwireLowLatency,
}

impl Variant {
    /// All variants, in the order they are benchmarked.
    pub const ALL: [Variant; 4] = [
        Variant::EchoBlocking,
        Variant::HubwireEfficient,
        Variant::EchoSpin,
        Variant::HubwireLowLatency,
    ];

    /// The `bench-peer` kind argument.
    pub fn peer_kind(self) -> &'static str {
        match self {
            Variant::EchoBlocking => "echo-blocking",
            Variant::HubwireEfficient => "hubwire-efficient",
            Variant::EchoSpin => "echo-spin",
            Variant::HubwireLowLatency => "hubwire-lowlatency",
        }
    }

    /// The criterion bench id.
    pub fn bench_id(self) -> &'static str {
        match self {
            Variant::EchoBlocking => "echo_blocking",
            Variant::HubwireEfficient => "hubwire_efficient",
            Variant::EchoSpin => "echo_spin",
            Variant::HubwireLowLatency => "hubwire_lowlatency",
        }
    }

    /// Parses a `bench-peer` kind (or a bench id).
    pub fn parse(s: &str) -> Option<Variant> {
        Variant::ALL
            .into_iter()
            .find(|v| v.peer_kind() == s || v.bench_id() == s)
    }

    /// The hubwire waiting mode, for the hubwire variants.
    pub fn wait_mode(self) -> Option<hubwire::WaitMode> {
        match self {
            Variant::HubwireEfficient => Some(hubwire::WaitMode::Efficient),
            Variant::HubwireLowLatency => Some(hubwire::WaitMode::low_latency()),
            _ => None,
        }
    }

    /// The spin budget, for the hand-written echo variants (`None`: block).
    pub fn echo_spin(self) -> Option<Duration> {
        match self {
            Variant::EchoSpin => Some(SPIN),
            _ => None,
        }
    }
}

/// One end of the hand-written echo: frames are `u32` LE length + bytes.
pub struct EchoStream {
    stream: UnixStream,
    spin: Option<Duration>,
    rbuf: Box<[u8]>,
    start: usize,
    end: usize,
    wbuf: Vec<u8>,
}

const ECHO_BUF: usize = 64 * 1024;

impl EchoStream {
    /// Wraps a connected socket. With `spin`, the socket is made
    /// non-blocking and each read spins up to `spin` before it blocks in
    /// `poll(2)`; without, reads and writes block.
    pub fn new(stream: UnixStream, spin: Option<Duration>) -> io::Result<EchoStream> {
        stream.set_nonblocking(spin.is_some())?;
        Ok(EchoStream {
            stream,
            spin,
            rbuf: vec![0; ECHO_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            wbuf: Vec::with_capacity(ECHO_BUF),
        })
    }

    fn wait_fd(&self, events: libc::c_short) -> io::Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, -1) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// One read into the buffer, waiting as the mode says. `Ok(0)` is EOF.
    fn fill(&mut self) -> io::Result<usize> {
        if self.start > 0 {
            self.rbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.rbuf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "echo frame larger than the read buffer",
            ));
        }
        let mut spun = false;
        loop {
            match (&self.stream).read(&mut self.rbuf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            // Non-blocking socket, nothing there: spin once, then block.
            let budget = self.spin.expect("only the spinning mode is non-blocking");
            if !spun {
                spun = true;
                let t0 = Instant::now();
                loop {
                    std::hint::spin_loop();
                    match (&self.stream).read(&mut self.rbuf[self.end..]) {
                        Ok(n) => {
                            self.end += n;
                            return Ok(n);
                        }
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                            ) => {}
                        Err(e) => return Err(e),
                    }
                    if t0.elapsed() >= budget {
                        break;
                    }
                }
            }
            self.wait_fd(libc::POLLIN)?;
        }
    }

    /// Reads the next frame; returns its payload's range in the read
    /// buffer, or `None` at a clean end of stream.
    fn next_frame(&mut self) -> io::Result<Option<(usize, usize)>> {
        loop {
            let avail = self.end - self.start;
            if avail >= 4 {
                let n =
                    u32::from_le_bytes(self.rbuf[self.start..self.start + 4].try_into().unwrap())
                        as usize;
                if avail >= 4 + n {
                    let at = self.start + 4;
                    self.start += 4 + n;
                    return Ok(Some((at, n)));
                }
            }
            if self.fill()? == 0 {
                return if self.end == self.start {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
        }
    }

    fn flush_wbuf(&mut self) -> io::Result<()> {
        let mut off = 0;
        while off < self.wbuf.len() {
            match (&self.stream).write(&self.wbuf[off..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_fd(libc::POLLOUT)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends one frame with a single `write`.
    pub fn send(&mut self, payload: &[u8]) -> io::Result<()> {
        self.wbuf.clear();
        self.wbuf
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.wbuf.extend_from_slice(payload);
        self.flush_wbuf()
    }

    /// Server side: reads one frame and writes it back. `false` at EOF.
    pub fn echo_once(&mut self) -> io::Result<bool> {
        let Some((at, n)) = self.next_frame()? else {
            return Ok(false);
        };
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&(n as u32).to_le_bytes());
        self.wbuf.extend_from_slice(&self.rbuf[at..at + n]);
        self.flush_wbuf()?;
        Ok(true)
    }

    /// Client side: one round trip; checks the echoed length.
    pub fn round_trip(&mut self, payload: &[u8]) -> io::Result<()> {
        self.send(payload)?;
        match self.next_frame()? {
            Some((_, n)) if n == payload.len() => Ok(()),
            Some((_, n)) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("echo of {n} bytes, sent {}", payload.len()),
            )),
            None => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// The client side of one variant, connected to its peer.
pub enum Client {
    /// The hand-written echo client.
    Echo {
        stream: EchoStream,
        payload: Vec<u8>,
    },
    /// A hubwire connection on its own current-thread runtime.
    Hubwire {
        rt: tokio::runtime::Runtime,
        conn: hubwire::Connection,
        payload: Bytes,
    },
}

impl Client {
    /// Connects to the peer of `variant` listening at `path`.
    pub fn connect(variant: Variant, path: &Path, payload_len: usize) -> io::Result<Client> {
        let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
        match variant.wait_mode() {
            None => Ok(Client::Echo {
                stream: EchoStream::new(UnixStream::connect(path)?, variant.echo_spin())?,
                payload,
            }),
            Some(mode) => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let conn = rt.block_on(async {
                    let t = hubwire::transport::unix::connect(path).await?;
                    hubwire::Connection::dial(t, &hubwire::Config::new("bench-client").wait(mode))
                        .await
                        .map_err(|e| io::Error::other(e.to_string()))
                })?;
                Ok(Client::Hubwire {
                    rt,
                    conn,
                    payload: payload.into(),
                })
            }
        }
    }

    /// Runs `iters` round trips back to back; returns the time they took.
    /// The hubwire loop runs inside one `block_on`, so entering the
    /// runtime costs nothing per call.
    pub fn run(&mut self, iters: u64) -> Duration {
        match self {
            Client::Echo { stream, payload } => {
                let t0 = Instant::now();
                for _ in 0..iters {
                    stream.round_trip(payload).expect("echo round trip");
                }
                t0.elapsed()
            }
            Client::Hubwire { rt, conn, payload } => rt.block_on(async {
                let t0 = Instant::now();
                for _ in 0..iters {
                    let out = conn
                        .call_raw("echo", payload.clone())
                        .await
                        .expect("hubwire echo call");
                    debug_assert_eq!(out.len(), payload.len());
                }
                t0.elapsed()
            }),
        }
    }
}

/// A running `bench-peer` process; killed on drop.
pub struct Peer {
    child: Child,
    /// The socket it listens on.
    pub path: PathBuf,
}

impl Peer {
    /// Starts `exe <kind> <path>` and waits for its "ready" line.
    pub fn spawn(exe: &Path, variant: Variant, path: PathBuf) -> io::Result<Peer> {
        let _ = std::fs::remove_file(&path);
        let mut child = Command::new(exe)
            .arg(variant.peer_kind())
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        let peer = Peer { child, path };
        if line.trim() != "ready" {
            return Err(io::Error::other(format!(
                "bench-peer {} said {line:?} instead of ready",
                variant.peer_kind()
            )));
        }
        Ok(peer)
    }

    /// The process id, for `perf`/`strace -p`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A socket path in the temp dir, unique to this process and variant.
pub fn socket_path(variant: Variant) -> PathBuf {
    std::env::temp_dir().join(format!(
        "hubwire-bench-{}-{}.sock",
        std::process::id(),
        variant.peer_kind()
    ))
}

/// `bench-peer` next to the running executable (for `rtt-loop`; the bench
/// uses `CARGO_BIN_EXE_bench-peer`).
pub fn sibling_peer_exe() -> io::Result<PathBuf> {
    let me = std::env::current_exe()?;
    Ok(me.with_file_name("bench-peer"))
}
