//! Measuring one job: the server-side interface every system implements,
//! and how each mode is measured.
//!
//! A system starts a [`Target`] (its server side: a process, a thread, a
//! hub) and opens [`Client`]s on it. Here the calls are timed: every call
//! on its own in sequential mode (percentiles, through the client's
//! [`Client::sequential`], the one timed loop, in `client.rs`), the whole
//! batch when pipelined, each client's calls when parallel. CPU time is
//! read around the measured part only, never the warm-up.

use std::io;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::cpu;
use crate::model::{Job, Mode};
use crate::stats::{latency, Latency};

/// How long to warm up and measure each job.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Calls made before measuring, for this long.
    pub warmup: Duration,
    /// How long the measured part lasts (about).
    pub measure: Duration,
    /// At most this many measured calls (sequential, per client).
    pub max_calls: u64,
}

/// What one job measured.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Calls completed in the measured part.
    pub calls: u64,
    /// Its wall-clock time.
    pub elapsed: Duration,
    /// CPU time both sides used meanwhile (user + system).
    pub cpu: Duration,
    /// Per-call latency (sequential and parallel modes).
    pub latency: Option<Latency>,
}

/// The server side of a job, running; stopped when dropped.
pub trait Target {
    /// Opens one more client connection.
    fn connect(&self) -> io::Result<Box<dyn Client>>;

    /// The live processes serving it, whose CPU time counts.
    fn peers(&self) -> Vec<u32>;

    /// Measures `job`. Systems that run their own loop (another language's
    /// program) override this.
    fn measure(&self, job: &Job, budget: &Budget) -> io::Result<Measurement> {
        match job.mode {
            // A connect "call" is timed as any call; the client redials.
            Mode::Sequential | Mode::Connect => sequential(self, budget),
            Mode::Pipelined { window } => pipelined(self, window, budget),
            Mode::Parallel { clients } => parallel(self, clients, budget),
        }
    }
}

fn sequential<T: Target + ?Sized>(target: &T, budget: &Budget) -> io::Result<Measurement> {
    let mut client = target.connect()?;
    let mut lat = Vec::with_capacity(1 << 16);
    client.sequential(Instant::now() + budget.warmup, u64::MAX, &mut lat)?;
    lat.clear();
    let peers = target.peers();
    let cpu0 = cpu::total(&peers);
    let t0 = Instant::now();
    client.sequential(t0 + budget.measure, budget.max_calls, &mut lat)?;
    let elapsed = t0.elapsed();
    let cpu = cpu::total(&peers).saturating_sub(cpu0);
    Ok(Measurement { calls: lat.len() as u64, elapsed, cpu, latency: latency(&mut lat) })
}

/// How many alternating slices the rows of one comparison are measured in.
pub const SLICES: u32 = 10;

/// One target's share of an interleaved comparison: its client state and
/// what its turns added up to.
struct Turns<S> {
    state: S,
    calls: u64,
    elapsed: Duration,
    cpu: Duration,
}

/// The rows of one comparison measured together: `prepare` connects and
/// warms up each target, then each gets `SLICES` turns (`turn` returns the
/// calls it made), in rotation, so that a change in the machine's load
/// during the comparison hits every row alike. CPU time is counted per
/// turn, for the target whose turn it is. A target that fails drops out.
fn in_turns<S>(
    targets: &[io::Result<Box<dyn Target>>],
    mut prepare: impl FnMut(&dyn Target) -> io::Result<S>,
    mut turn: impl FnMut(&mut S) -> io::Result<u64>,
) -> Vec<io::Result<Turns<S>>> {
    let mut slots: Vec<io::Result<Turns<S>>> = targets
        .iter()
        .map(|t| {
            let t = t.as_ref().map_err(|e| io::Error::new(e.kind(), e.to_string()))?;
            Ok(Turns { state: prepare(t.as_ref())?, calls: 0, elapsed: Duration::ZERO, cpu: Duration::ZERO })
        })
        .collect();
    for _ in 0..SLICES {
        for (slot, target) in slots.iter_mut().zip(targets) {
            let (Ok(s), Ok(target)) = (slot.as_mut(), target) else {
                continue;
            };
            let peers = target.peers();
            let cpu0 = cpu::total(&peers);
            let t0 = Instant::now();
            let r = turn(&mut s.state);
            s.elapsed += t0.elapsed();
            s.cpu += cpu::total(&peers).saturating_sub(cpu0);
            match r {
                Ok(n) => s.calls += n,
                Err(e) => *slot = Err(e),
            }
        }
    }
    slots
}

/// Sequential rows of one comparison (same scenario, payload, encoding and
/// transport), interleaved: each target gets `SLICES` turns of
/// `measure / SLICES`.
pub fn sequential_interleaved(targets: &[io::Result<Box<dyn Target>>], budget: &Budget) -> Vec<io::Result<Measurement>> {
    let turn = budget.measure / SLICES;
    let max = (budget.max_calls / u64::from(SLICES)).max(1);
    let prepare = |t: &dyn Target| {
        let mut client = t.connect()?;
        let mut lat = Vec::with_capacity(1 << 16);
        client.sequential(Instant::now() + budget.warmup, u64::MAX, &mut lat)?;
        lat.clear();
        Ok((client, lat))
    };
    let run = |(client, lat): &mut (Box<dyn Client>, Vec<u32>)| {
        let before = lat.len();
        client.sequential(Instant::now() + turn, max, lat)?;
        Ok((lat.len() - before) as u64)
    };
    in_turns(targets, prepare, run)
        .into_iter()
        .map(|s| {
            let mut s = s?;
            Ok(Measurement { calls: s.calls, elapsed: s.elapsed, cpu: s.cpu, latency: latency(&mut s.state.1) })
        })
        .collect()
}

/// Pipelined rows of one comparison (same scenario, payload, encoding,
/// transport and window), interleaved: each target's rate is found in its
/// warm-up, then it gets `SLICES` turns of that rate × `measure / SLICES`
/// calls.
pub fn pipelined_interleaved(targets: &[io::Result<Box<dyn Target>>], window: usize, budget: &Budget) -> Vec<io::Result<Measurement>> {
    let slice = budget.measure.as_secs_f64() / f64::from(SLICES);
    let prepare = |t: &dyn Target| {
        let mut client = t.connect()?;
        let rate = warm_pipeline(client.as_mut(), window, budget)?;
        Ok((client, ((rate * slice) as u64).max(window as u64 * 2)))
    };
    let run = |(client, n): &mut (Box<dyn Client>, u64)| {
        client.pipeline(window, *n)?;
        Ok(*n)
    };
    in_turns(targets, prepare, run)
        .into_iter()
        .map(|s| {
            let s = s?;
            Ok(Measurement { calls: s.calls, elapsed: s.elapsed, cpu: s.cpu, latency: None })
        })
        .collect()
}

/// Warms a pipelining client up with growing batches for `budget.warmup`;
/// returns the rate of the last batch (calls/s).
fn warm_pipeline(client: &mut dyn Client, window: usize, budget: &Budget) -> io::Result<f64> {
    let mut n = (window as u64 * 4).max(64);
    let start = Instant::now();
    loop {
        let t = Instant::now();
        client.pipeline(window, n)?;
        let took = t.elapsed().max(Duration::from_micros(1));
        if start.elapsed() >= budget.warmup {
            return Ok(n as f64 / took.as_secs_f64());
        }
        n = n.saturating_mul(2).min(1 << 26);
    }
}

fn pipelined<T: Target + ?Sized>(target: &T, window: usize, budget: &Budget) -> io::Result<Measurement> {
    let mut client = target.connect()?;
    let rate = warm_pipeline(client.as_mut(), window, budget)?;
    let calls = ((rate * budget.measure.as_secs_f64()) as u64).max(window as u64 * 2);
    let peers = target.peers();
    let cpu0 = cpu::total(&peers);
    let t0 = Instant::now();
    client.pipeline(window, calls)?;
    let elapsed = t0.elapsed();
    let cpu = cpu::total(&peers).saturating_sub(cpu0);
    Ok(Measurement { calls, elapsed, cpu, latency: None })
}

fn parallel<T: Target + ?Sized>(target: &T, clients: usize, budget: &Budget) -> io::Result<Measurement> {
    let conns = (0..clients).map(|_| target.connect()).collect::<io::Result<Vec<_>>>()?;
    // Everyone warms up, then all start measuring together.
    let barrier = Arc::new(Barrier::new(clients + 1));
    let warm_end = Instant::now() + budget.warmup;
    let measure = budget.measure;
    let max = budget.max_calls;
    let threads: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let barrier = barrier.clone();
            // The connection comes back with the latencies: closed before
            // the last CPU sample, it would end the server's thread for it,
            // and that thread's time would leave `/proc` with it.
            std::thread::spawn(move || -> io::Result<(Vec<u32>, Box<dyn Client>)> {
                let mut lat = Vec::with_capacity(1 << 14);
                let warm = c.sequential(warm_end, u64::MAX, &mut lat);
                lat.clear();
                barrier.wait();
                warm?;
                c.sequential(Instant::now() + measure, max, &mut lat)?;
                Ok((lat, c))
            })
        })
        .collect();
    barrier.wait();
    let peers = target.peers();
    let cpu0 = cpu::total(&peers);
    let t0 = Instant::now();
    let mut all = Vec::new();
    let mut open = Vec::new();
    let mut err = None;
    for t in threads {
        match t.join() {
            Ok(Ok((lat, c))) => {
                all.extend(lat);
                open.push(c);
            }
            Ok(Err(e)) => err = Some(e),
            Err(_) => err = Some(io::Error::other("a client thread panicked")),
        }
    }
    let elapsed = t0.elapsed();
    let cpu = cpu::total(&peers).saturating_sub(cpu0);
    drop(open);
    if let Some(e) = err {
        return Err(e);
    }
    Ok(Measurement { calls: all.len() as u64, elapsed, cpu, latency: latency(&mut all) })
}
