//! Servo's ipc-channel across two processes: its bytes channel, and its
//! serde channel (bincode) carrying the study's `Msg { topic, data }`. The
//! parent and the echo child exchange their channel ends through an
//! `IpcOneShotServer`, as that crate's multi-process setup does.

use std::io;
use std::process::Command;
use std::sync::mpsc;

use bytes::Bytes;
use ipc_channel::ipc::{self, IpcBytesReceiver, IpcBytesSender, IpcOneShotServer, IpcReceiver, IpcSender};
use serde::{Deserialize, Serialize};

use super::endpoint::Children;
use crate::client::{check_len, Client};
use crate::model::Job;
use crate::payload::{Msg, Structured};
use crate::peer::{bench_peer, Peer};
use crate::runner::Target;

/// The child's ends: where requests arrive, where answers go.
#[derive(Serialize, Deserialize)]
enum Ends {
    Bytes(IpcBytesReceiver, IpcBytesSender),
    Serde(IpcReceiver<Msg>, IpcSender<Msg>),
}

/// The parent's sending end and what it sends.
#[derive(Clone)]
enum Tx {
    Bytes(IpcBytesSender, Bytes),
    Serde(IpcSender<Msg>, Msg),
}

/// The parent's receiving end.
enum Rx {
    Bytes(IpcBytesReceiver),
    Serde(IpcReceiver<Msg>),
}

fn err(e: impl std::fmt::Debug) -> io::Error {
    io::Error::other(format!("ipc-channel: {e:?}"))
}

/// One echo child per connection.
pub fn start(job: &Job, serde: bool) -> io::Result<Box<dyn Target>> {
    let msg = match &job.payload.value {
        Structured::Msg(m) => m.clone(),
        Structured::Doc(_) => Msg { topic: 7, data: job.payload.raw.to_vec() },
    };
    Ok(Box::new(Ipc { serde, raw: job.payload.raw.clone(), msg, children: Children::default() }))
}

struct Ipc {
    serde: bool,
    raw: Bytes,
    msg: Msg,
    children: Children,
}

impl Target for Ipc {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let (server, name) = IpcOneShotServer::<IpcSender<Ends>>::new()?;
        let kind = if self.serde { "ipc-serde" } else { "ipc-bytes" };
        let peer = Peer::from_child(Command::new(bench_peer()?).args([kind, "--ipc", &name]).spawn()?);
        self.children.add(peer.pid());
        // accept() blocks with no timeout: wait for it on another thread, so
        // a child that dies before connecting fails this row, not the run.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(server.accept().map(|(_, boot)| boot).map_err(err));
        });
        let boot = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .map_err(|_| io::Error::other(format!("{kind} child did not connect within 10 s")))??;
        let (tx, rx) = if self.serde {
            let (req_tx, req_rx) = ipc::channel()?;
            let (resp_tx, resp_rx) = ipc::channel()?;
            boot.send(Ends::Serde(req_rx, resp_tx)).map_err(err)?;
            (Tx::Serde(req_tx, self.msg.clone()), Rx::Serde(resp_rx))
        } else {
            let (req_tx, req_rx) = ipc::bytes_channel()?;
            let (resp_tx, resp_rx) = ipc::bytes_channel()?;
            boot.send(Ends::Bytes(req_rx, resp_tx)).map_err(err)?;
            (Tx::Bytes(req_tx, self.raw.clone()), Rx::Bytes(resp_rx))
        };
        let sent = match &tx {
            Tx::Bytes(_, b) => b.len(),
            Tx::Serde(_, m) => m.data.len(),
        };
        Ok(Box::new(IpcClient { tx, rx, sent, _peer: peer }))
    }

    fn peers(&self) -> Vec<u32> {
        self.children.pids()
    }
}

struct IpcClient {
    tx: Tx,
    rx: Rx,
    sent: usize,
    _peer: Peer,
}

impl Tx {
    fn send(&self) -> io::Result<()> {
        match self {
            Tx::Bytes(tx, b) => tx.send(b),
            Tx::Serde(tx, m) => tx.send(m.clone()).map_err(err),
        }
    }
}

impl Rx {
    /// Receives one answer; checks it has `sent` bytes.
    fn answer(&self, sent: usize) -> io::Result<()> {
        match self {
            Rx::Bytes(rx) => check_len(rx.recv().map_err(err)?.len(), sent),
            Rx::Serde(rx) => check_len(rx.recv().map_err(err)?.data.len(), sent),
        }
    }
}

impl Client for IpcClient {
    fn call(&mut self) -> io::Result<()> {
        self.tx.send()?;
        self.rx.answer(self.sent)
    }

    /// A sending thread `window` messages ahead of this one, which takes
    /// the answers and hands a credit back for each (ipc-channel's sends
    /// block when the socket is full, so one thread could deadlock).
    fn pipeline(&mut self, window: usize, calls: u64) -> io::Result<()> {
        let (credit_tx, credit_rx) = mpsc::sync_channel::<()>(window);
        let tx = self.tx.clone();
        std::thread::scope(|s| {
            let sender = s.spawn(move || -> io::Result<()> {
                for i in 0..calls {
                    if i >= window as u64 && credit_rx.recv().is_err() {
                        return Ok(()); // the receiving side failed; it reports why
                    }
                    tx.send()?;
                }
                Ok(())
            });
            let mut r = Ok(());
            for _ in 0..calls {
                r = self.rx.answer(self.sent);
                if r.is_err() {
                    break;
                }
                let _ = credit_tx.try_send(());
            }
            drop(credit_tx);
            let s = sender.join().map_err(|_| io::Error::other("the sending thread panicked"))?;
            r.and(s)
        })
    }
}

/// `bench-peer ipc-bytes|ipc-serde --ipc NAME`: connects to the parent's
/// one-shot server, receives its ends, echoes until the parent goes away.
pub fn serve(name: Option<&str>, serde: bool) -> io::Result<()> {
    let name = name.ok_or_else(|| io::Error::other("--ipc NAME is needed"))?;
    let boot = IpcSender::<IpcSender<Ends>>::connect(name.to_string())?;
    let (tx, rx) = ipc::channel::<Ends>()?;
    boot.send(tx).map_err(err)?;
    match (rx.recv().map_err(err)?, serde) {
        (Ends::Bytes(req, resp), false) => {
            while let Ok(b) = req.recv() {
                resp.send(&b)?;
            }
        }
        (Ends::Serde(req, resp), true) => {
            while let Ok(m) = req.recv() {
                resp.send(m).map_err(err)?;
            }
        }
        _ => return Err(io::Error::other("the parent sent the other kind of channel")),
    }
    Ok(())
}
