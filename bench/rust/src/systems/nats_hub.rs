//! `hub-nats-hub`: a hubwire call through hub → NATS → hub → provider
//! (`docs/hub.md`, "Joining a NATS cluster"), over the run's local
//! `nats-server`. Hub B runs the bench provider (`bench-peer hubwire`) as
//! its child and offers it on NATS; hub A has no provider and routes
//! `echo` to the cluster over its pool of links; the client dials hub A's
//! Unix socket. Four processes and three hops (Unix socket, a NATS link,
//! the child's socketpair); the CPU time of all four counts.

use std::io;
use std::path::Path;
use std::time::Instant;

use super::endpoint::Addr;
use super::hub::{launch, wait_for_provider};
use super::hubwire::{job_wait_mode, Remote};
use crate::client::Client;
use crate::cpu;
use crate::model::Job;
use crate::peer::{bench_peer, Peer, TempDir};
use crate::runner::Target;

/// Starts hub B (the provider, offered on NATS), then hub A (routing to
/// NATS), and waits until a call through A is answered.
pub fn start(job: &Job, exe: Option<&Path>, url: Option<&str>) -> io::Result<Box<dyn Target>> {
    let url = url.ok_or_else(|| io::Error::other("no nats-server in this run (run `make deps` to install it)"))?;
    let exe = exe.ok_or_else(|| io::Error::other("hub not available: no `hubwire` executable beside hubwire-bench (build hubwire-hub)"))?;
    let (mode, wait) = job_wait_mode(job)?;
    let dir = TempDir::new()?;
    let peer = bench_peer()?.display().to_string();
    // Subjects of their own, so that rows of one run never meet.
    let prefix = format!("bench{}", std::process::id());
    let nats = |offer: bool| format!("[nats]\nurl = {url:?}\nprefix = {prefix:?}\noffer = {offer}\n");
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    let b = format!(
        "[hub]\nname = \"hub-b\"\nunix = {:?}\nwait = {mode:?}\n\n{}\n[[provider]]\nname = \"bench\"\nexec = [{peer:?}, \"hubwire\", \"--wait\", {mode:?}]\n",
        sock_b.display().to_string(),
        nats(true)
    );
    let hub_b = launch(exe, &dir.join("b.toml"), &b, &sock_b)?;
    let a = format!("[hub]\nname = \"hub-a\"\nunix = {:?}\nwait = {mode:?}\n\n{}", sock_a.display().to_string(), nats(false));
    let hub_a = launch(exe, &dir.join("a.toml"), &a, &sock_a)?;
    wait_for_provider(&sock_a, Instant::now(), true)?;
    let remote = Remote::external(Addr::Unix(sock_a), Vec::new(), wait, job, false);
    Ok(Box::new(NatsHub { remote, hubs: [hub_a, hub_b], _dir: dir }))
}

struct NatsHub {
    remote: Remote,
    hubs: [Peer; 2],
    _dir: TempDir,
}

impl Target for NatsHub {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        self.remote.connect()
    }

    /// Both hubs and the provider hub B runs.
    fn peers(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.hubs.iter().map(Peer::pid).collect();
        pids.extend(cpu::children_of(self.hubs[1].pid()));
        pids
    }
}
