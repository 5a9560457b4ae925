//! gRPC with grpc-go (`bench/go/grpcbench`): both sides are Go, as in the
//! Go hub study, so the Go client times its own calls and reports them
//! (and both processes' CPU time) as JSON; this file starts the Go server
//! and reads the report.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::endpoint::{Addr, Listening};
use crate::client::Client;
use crate::model::{Job, Mode};
use crate::runner::{Budget, Measurement, Target};
use crate::stats::Latency;

/// Starts `grpcbench server`.
pub fn start(job: &Job, exe: Option<&Path>, stream: bool) -> io::Result<Box<dyn Target>> {
    let exe = exe
        .map(Path::to_path_buf)
        .ok_or_else(|| io::Error::other("grpc-go bench program not built (make bench-deps, or pass --grpc-go)"))?;
    let mut cmd = Command::new(&exe);
    cmd.arg("server");
    Ok(Box::new(GoGrpc { exe, server: Listening::spawn(cmd, job.transport)?, stream, size: job.payload.len() }))
}

struct GoGrpc {
    exe: PathBuf,
    server: Listening,
    stream: bool,
    size: usize,
}

/// What `grpcbench client` prints.
#[derive(Deserialize)]
struct Report {
    calls: u64,
    elapsed_ns: u64,
    cpu_ns: u64,
    #[serde(default)]
    p50_ns: f64,
    #[serde(default)]
    p99_ns: f64,
    #[serde(default)]
    p999_ns: f64,
    #[serde(default)]
    mean_ns: f64,
}

impl Target for GoGrpc {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "the grpc-go client runs in Go"))
    }

    fn peers(&self) -> Vec<u32> {
        vec![self.server.pid()]
    }

    fn measure(&self, job: &Job, budget: &Budget) -> io::Result<Measurement> {
        let (network, address) = match &self.server.addr {
            Addr::Unix(p) => ("unix", p.display().to_string()),
            Addr::Tcp(a) => ("tcp", a.clone()),
        };
        let window = match job.mode {
            Mode::Pipelined { window } => window,
            _ => 0,
        };
        let out = Command::new(&self.exe)
            .arg("client")
            .args(["-network", network, "-addr", &address])
            .args(["-kind", if self.stream { "stream" } else { "unary" }])
            .args(["-size", &self.size.to_string(), "-window", &window.to_string()])
            .args(["-warmup-ms", &budget.warmup.as_millis().to_string(), "-measure-ms", &budget.measure.as_millis().to_string()])
            .args(["-max", &budget.max_calls.to_string(), "-server-pid", &self.server.pid().to_string()])
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!("grpcbench client: {}", String::from_utf8_lossy(&out.stderr).trim())));
        }
        let r: Report = serde_json::from_slice(&out.stdout)?;
        let latency = (window == 0).then_some(Latency {
            p50_us: r.p50_ns / 1e3,
            p99_us: r.p99_ns / 1e3,
            p999_us: r.p999_ns / 1e3,
            mean_us: r.mean_ns / 1e3,
        });
        Ok(Measurement {
            calls: r.calls,
            elapsed: std::time::Duration::from_nanos(r.elapsed_ns),
            cpu: std::time::Duration::from_nanos(r.cpu_ns),
            latency,
        })
    }
}
