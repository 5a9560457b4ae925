//! The raw floor: a hand-written length-prefixed echo, no framework, on
//! each transport, blocking or spinning (`frame_io.rs`). In process it is
//! two threads handing the buffer over standard channels.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::time::Instant;

use bytes::Bytes;

use super::endpoint::{spawn_socketpair, spawn_stdio, Children, Listening};
use crate::client::{check_len, run_sync, send_ahead, Client};
use crate::frame_io::{FdPipe, FrameIo, Pipe, SPIN};
use crate::model::{Job, Transport};
use crate::peer::Peer;
use crate::runner::Target;
use crate::serve::Listen;

/// Starts the floor's server side for `job`.
pub fn start(job: &Job, spin: bool) -> io::Result<Box<dyn Target>> {
    let mut args = vec!["floor"];
    if spin {
        args.push("--spin");
    }
    let payload = job.payload.raw.clone();
    Ok(match job.transport {
        Transport::Unix | Transport::Tcp => {
            Box::new(Remote { server: Listening::start(&args, job.transport)?, spin, payload, open: FrameIo::socket })
        }
        Transport::Child | Transport::Pipe => {
            Box::new(PerChild { args, pipe: job.transport == Transport::Pipe, spin, payload, children: Children::default() })
        }
        Transport::Inproc => Box::new(InProc { spin, payload }),
        Transport::Hub | Transport::HubDirect | Transport::Nats => {
            return Err(io::Error::other(format!("the socket floor does not go through {}", job.transport.name())))
        }
        Transport::Shm => return Err(io::Error::other("the socket floor over shared memory is shm_floor.rs")),
    })
}

/// A floor server in another process, dialled once per connection; `open`
/// turns the connected socket into the client's framing (the socket
/// itself, or the rings it hands over in `shm_floor.rs`).
pub(super) struct Remote<P: Pipe> {
    pub(super) server: Listening,
    pub(super) spin: bool,
    pub(super) payload: Bytes,
    pub(super) open: fn(OwnedFd, bool) -> io::Result<FrameIo<P>>,
}

impl<P: Pipe + Send + 'static> Target for Remote<P> {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let io = (self.open)(self.server.addr.connect()?, self.spin)?;
        Ok(Box::new(FloorClient { io, payload: self.payload.clone(), _peer: None }))
    }

    fn peers(&self) -> Vec<u32> {
        vec![self.server.pid()]
    }
}

/// One child per connection: on a socketpair (fd 3) or on its stdio.
struct PerChild {
    args: Vec<&'static str>,
    pipe: bool,
    spin: bool,
    payload: Bytes,
    children: Children,
}

impl Target for PerChild {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let (peer, io) = if self.pipe {
            let mut args = self.args.clone();
            args.push("--stdio");
            let (peer, r, w) = spawn_stdio(&args)?;
            (peer, FrameIo::new(r, w, self.spin)?)
        } else {
            let mut args = self.args.clone();
            args.push("--fd3");
            let (peer, sock) = spawn_socketpair(&args)?;
            (peer, FrameIo::socket(OwnedFd::from(sock), self.spin)?)
        };
        self.children.add(peer.pid());
        Ok(Box::new(FloorClient { io, payload: self.payload.clone(), _peer: Some(peer) }))
    }

    fn peers(&self) -> Vec<u32> {
        self.children.pids()
    }
}

/// The floor's client over any pipe (a socket, pipes, or the rings of
/// `shm_floor.rs`).
pub(super) struct FloorClient<P: Pipe = FdPipe> {
    pub(super) io: FrameIo<P>,
    pub(super) payload: Bytes,
    // Dropped after `io`, so the child sees end of stream before the kill.
    pub(super) _peer: Option<Peer>,
}

impl<P: Pipe + Send> Client for FloorClient<P> {
    fn call(&mut self) -> io::Result<()> {
        self.io.round_trip(&self.payload)
    }

    fn pipeline(&mut self, window: usize, calls: u64) -> io::Result<()> {
        self.io.pipeline(&self.payload, window, calls)
    }
}

/// The server loop of `bench-peer floor`: one thread per connection.
pub fn serve(listen: Listen, spin: bool) -> io::Result<()> {
    listen.serve_blocking(move |r, w| FrameIo::new(r, w, spin)?.serve())
}

/// In process: the client thread and an echo thread, over two channels.
struct InProc {
    spin: bool,
    payload: Bytes,
}

impl Target for InProc {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let (to_srv, srv_in) = mpsc::channel::<Bytes>();
        let (srv_out, from_srv) = mpsc::channel::<Bytes>();
        let spin = self.spin;
        std::thread::spawn(move || {
            while let Some(b) = recv(&srv_in, spin) {
                if srv_out.send(b).is_err() {
                    break;
                }
            }
        });
        Ok(Box::new(ChannelClient { tx: to_srv, rx: from_srv, spin, payload: self.payload.clone() }))
    }

    fn peers(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// Receives, spinning on `try_recv` for up to 50 µs first if `spin`.
fn recv(rx: &mpsc::Receiver<Bytes>, spin: bool) -> Option<Bytes> {
    if spin {
        let t0 = Instant::now();
        loop {
            match rx.try_recv() {
                Ok(b) => return Some(b),
                Err(mpsc::TryRecvError::Disconnected) => return None,
                Err(mpsc::TryRecvError::Empty) if t0.elapsed() < SPIN => std::hint::spin_loop(),
                Err(mpsc::TryRecvError::Empty) => break,
            }
        }
    }
    rx.recv().ok()
}

struct ChannelClient {
    tx: mpsc::Sender<Bytes>,
    rx: mpsc::Receiver<Bytes>,
    spin: bool,
    payload: Bytes,
}

impl ChannelClient {
    fn answer(&self) -> io::Result<()> {
        let b = recv(&self.rx, self.spin).ok_or(io::ErrorKind::UnexpectedEof)?;
        check_len(b.len(), self.payload.len())
    }

    fn send(&self) -> io::Result<()> {
        self.tx.send(self.payload.clone()).map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

impl Client for ChannelClient {
    fn call(&mut self) -> io::Result<()> {
        self.send()?;
        self.answer()
    }

    fn pipeline(&mut self, window: usize, calls: u64) -> io::Result<()> {
        run_sync(send_ahead(window, calls, async || self.send(), async || self.answer()))
    }
}
