//! `hubwire-hardening`: the misbehaviour suite (`make test-hardening`).
//!
//! Starts a real hub (`hubwire hub`) on a generated config, keeps two
//! steady background clients calling it, and puts every case of
//! [`cases::ALL`] to it in turn: hostile and broken clients, floods,
//! misbehaving providers, hostile configs and HTTP requests. One table row
//! per case (verdict, the hub's RSS and descriptors before/after/peak, the
//! background clients' p99), then `hardening: N passed, N failed`; exit
//! status 1 if any case failed. Loopback only; every loop is bounded in
//! count and time. `docs/security.md` explains the cases and the figures.
//!
//! ```text
//! hubwire-hardening [--bin DIR] [--hub FILE] [--case NAME]... [--strict-latency] [--list]
//! ```
//! `--bin`: where `hubwire`, `hubwire-test-provider` and
//! `hubwire-misbehave` are (default: next to this program). `--hub`: the
//! `hubwire` binary to put to the test instead of the one in `--bin` (a
//! candidate build of another branch). `--case`: run
//! only the cases whose name contains NAME. `--strict-latency`: a
//! background p99 over 5 ms fails the case instead of being flagged.

mod background;
mod cases;
mod http;
mod hub;
mod probe;
mod suite;
mod wire;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use background::Background;
use suite::{Ctx, Line};

/// A case that has not finished after this fails (and the suite goes on).
const CASE_LIMIT: Duration = Duration::from_secs(120);

struct Args {
    bin: PathBuf,
    hub: Option<PathBuf>,
    only: Vec<String>,
    strict_latency: bool,
    list: bool,
}

fn args() -> Result<Args, String> {
    let here = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut a = Args { bin: here.parent().unwrap_or(&here).to_path_buf(), hub: None, only: vec![], strict_latency: false, list: false };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bin" => a.bin = absolute(it.next().ok_or("--bin needs a directory")?)?,
            "--hub" => a.hub = Some(absolute(it.next().ok_or("--hub needs a file")?)?),
            "--case" => a.only.push(it.next().ok_or("--case needs a name")?),
            "--strict-latency" => a.strict_latency = true,
            "--list" => a.list = true,
            other => return Err(format!("unknown argument {other:?} (see the doc comment of rust/hubwire-hardening/src/main.rs)")),
        }
    }
    Ok(a)
}

/// `path` made absolute against the working directory: the suite runs the
/// hub and providers from scratch directories of their own, where a
/// relative path would name nothing.
fn absolute(path: String) -> Result<PathBuf, String> {
    std::path::absolute(&path).map_err(|e| format!("{path:?}: {e}"))
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    if args.list {
        for c in cases::ALL {
            println!("{}", c.name);
        }
        return;
    }
    raise_nofile();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    // Made after the runtime, so dropped before it in a panic's unwinding
    // (the runtime's drop may wait for blocking tasks).
    let scratch = Scratch(std::env::temp_dir().join(format!("hwhard-{}", std::process::id())));
    let _ = std::fs::create_dir_all(&scratch.0);
    let failed = rt.block_on(run(&args, &scratch.0));
    // `exit` runs no destructor.
    drop(scratch);
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

/// The run's scratch directory, removed when dropped: at the end, and
/// also when a case panics on the main thread (the panic unwinds
/// through `main`).
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the selected cases; returns how many failed.
async fn run(args: &Args, scratch: &std::path::Path) -> usize {
    let started = Instant::now();
    let mut ctx = match Ctx::new(args.bin.clone(), args.hub.clone(), scratch.to_path_buf()) {
        Ok(c) => c,
        Err(e) => {
            println!("the main hub did not start: {e}");
            println!("hardening: 0 passed, 1 failed");
            return 1;
        }
    };
    for p in ["t", "k", "m"] {
        if let Err(e) = ctx.main.wait_ready(p, Duration::from_secs(20)).await {
            println!("the main hub's providers did not start: {e}");
            println!("hardening: 0 passed, 1 failed");
            return 1;
        }
    }
    let background = Background::start(ctx.main.socket.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("{}", suite::head());
    let (mut passed, mut failed, mut suite_peak) = (0, 0, 0u64);
    for case in cases::ALL.iter().filter(|c| args.only.is_empty() || args.only.iter().any(|o| c.name.contains(o.as_str()))) {
        let line = run_case(&mut ctx, &background, case, args.strict_latency).await;
        println!("{}", line.row());
        if line.pass {
            passed += 1
        } else {
            failed += 1
        }
        suite_peak = suite_peak.max(hwm_kib(ctx.main.pid()));
    }
    background.stop();
    // The issue's memory target, over the whole run: the main hub's VmHWM.
    let ok = suite_peak < suite::RSS_TARGET_KIB;
    println!(
        "main hub RSS peak over the suite: {:.0} MiB (target < {} MiB): {}",
        suite_peak as f64 / 1024.0,
        suite::RSS_TARGET_KIB / 1024,
        if ok { "PASS" } else { "FAIL" }
    );
    if ok {
        passed += 1
    } else {
        failed += 1
    }
    let _ = ctx.main.stop(Duration::from_secs(10));
    println!("took {:.0} s", started.elapsed().as_secs_f64());
    println!("hardening: {passed} passed, {failed} failed");
    failed
}

/// Runs one case and judges it, the background clients included.
async fn run_case(ctx: &mut Ctx, background: &Background, case: &cases::Case, strict_latency: bool) -> Line {
    ctx.probe.watch(ctx.main.pid());
    let since = Instant::now();
    let outcome = match tokio::time::timeout(CASE_LIMIT, (case.run)(ctx)).await {
        Ok(o) => o,
        Err(_) => Err(format!("did not finish within {CASE_LIMIT:?}")),
    };
    let (before, peak, after) = (ctx.probe.base(), ctx.probe.peak(), ctx.probe.last());
    let report = background.report(since);
    let took = since.elapsed();
    let mut line =
        Line { name: case.name.into(), pass: outcome.is_ok(), reason: String::new(), before, after, peak, background: report, took };
    line.reason = match outcome {
        Ok(note) => note,
        Err(why) => why,
    };
    if !ctx.main.alive() {
        line.pass = false;
        line.reason = format!("the main hub died; {}", line.reason);
        if let Err(e) = ctx.restart_main() {
            line.reason = format!("{}; restarting it failed: {e}", line.reason);
        }
    }
    let bg = &line.background;
    if bg.failed > 0 {
        line.pass = false;
        line.reason = format!(
            "{}; background: {} of {} calls failed ({})",
            line.reason,
            bg.failed,
            bg.calls,
            bg.first_error.clone().unwrap_or_default()
        );
    } else if bg.p99 > suite::P99_STALL || (strict_latency && bg.p99 > suite::P99_TARGET) {
        line.pass = false;
        line.reason = format!("{}; background p99 {:.1} ms", line.reason, bg.p99.as_secs_f64() * 1000.0);
    } else if bg.p99 > suite::P99_TARGET {
        line.reason = format!("{}; WARN background p99 over 5 ms", line.reason);
    }
    line.reason = hub::clip(line.reason.trim_start_matches("; "), 200);
    line
}

/// The peak resident memory of a process so far (VmHWM), KiB.
fn hwm_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

/// The flood case holds 10,000 connections: raise our own soft limit on
/// descriptors to the hard one (the hub raises its own, or does not: that
/// is what the case finds out).
fn raise_nofile() {
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}
