//! A process spawned per call: the payload on its stdin, the answer on its
//! stdout, then it exits (the Go hub study's rejected first design).

use std::io::{self, Read, Write};
use std::process::{Command, Stdio};

use bytes::Bytes;

use crate::client::{check_len, Client};
use crate::model::Job;
use crate::peer::bench_peer;
use crate::runner::Target;

/// Nothing runs between calls; each call starts its own process.
pub fn start(job: &Job) -> io::Result<Box<dyn Target>> {
    Ok(Box::new(PerCall { exe: bench_peer()?, payload: job.payload.raw.clone() }))
}

struct PerCall {
    exe: std::path::PathBuf,
    payload: Bytes,
}

impl Target for PerCall {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        Ok(Box::new(PerCall { exe: self.exe.clone(), payload: self.payload.clone() }))
    }

    // Each call's process is reaped within the call, so its CPU time
    // counts through RUSAGE_CHILDREN.
    fn peers(&self) -> Vec<u32> {
        Vec::new()
    }
}

impl Client for PerCall {
    fn call(&mut self) -> io::Result<()> {
        let mut child = Command::new(&self.exe).arg("spawn-echo").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        // The child reads all of stdin before it answers, so writing first
        // cannot deadlock.
        child.stdin.take().expect("piped").write_all(&self.payload)?;
        let mut out = Vec::with_capacity(self.payload.len());
        child.stdout.take().expect("piped").read_to_end(&mut out)?;
        let status = child.wait()?;
        if !status.success() {
            return Err(io::Error::other(format!("spawn-echo exited with {status}")));
        }
        check_len(out.len(), self.payload.len())
    }
}

/// `bench-peer spawn-echo`: copies stdin to stdout.
pub fn serve() -> io::Result<()> {
    let mut buf = Vec::new();
    io::stdin().lock().read_to_end(&mut buf)?;
    io::stdout().lock().write_all(&buf)
}
