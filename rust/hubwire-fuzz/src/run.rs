//! The loop: take an input from the corpus, mutate it, run the target on
//! it, keep it if its outcome is new. A panic or a failed property stops
//! the target: the input is saved as hex (one line, the format of
//! `spec/vectors`) and reported with the panic's message, so it can be
//! replayed (`hubwire-fuzz --replay FILE`) and turned into a vector.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::corpus::Corpus;
use crate::rng::Rng;
use crate::targets::Target;
use crate::{alloc, mutate};

/// Bytes a decoder may hold at its peak for one input: a fixed allowance
/// plus a multiple of the input (a JSON `[0,0,…]` becomes 32-byte values,
/// 16 per input byte). Announced lengths must not count.
pub fn memory_bound(input_len: usize) -> usize {
    1024 * 1024 + 64 * input_len
}

/// How long and how a target is fuzzed.
#[derive(Clone, Debug)]
pub struct Options {
    /// Inputs to run per target (seeds included).
    pub iterations: u64,
    /// Stop a target after this long even if iterations remain.
    pub time_limit: Option<Duration>,
    /// The generator's seed: the same seed repeats the same run.
    pub seed: u64,
    /// Where a failing input is saved.
    pub crashes: PathBuf,
    /// Print progress to stderr every this often (None: silent).
    pub progress: Option<Duration>,
}

/// A failing input and why it failed.
#[derive(Debug)]
pub struct Failure {
    /// The panic message or failed property.
    pub message: String,
    /// The input.
    pub input: Vec<u8>,
    /// Where it was saved, if saving worked.
    pub saved: Option<PathBuf>,
}

/// What fuzzing one target did.
#[derive(Debug)]
pub struct Report {
    /// The target's name.
    pub target: &'static str,
    /// Inputs run.
    pub execs: u64,
    /// Distinct outcomes seen.
    pub outcomes: usize,
    /// Inputs in the corpus at the end.
    pub corpus: usize,
    /// Time taken.
    pub elapsed: Duration,
    /// The first failure, which ended the run.
    pub failure: Option<Failure>,
}

impl Report {
    /// One line for humans.
    pub fn line(&self) -> String {
        let rate = self.execs as f64 / self.elapsed.as_secs_f64().max(1e-9);
        let verdict = match &self.failure {
            None => "no failure".to_string(),
            Some(f) => format!(
                "FAILED: {} (input {} bytes{})",
                f.message,
                f.input.len(),
                f.saved.as_ref().map(|p| format!(", saved to {}", p.display())).unwrap_or_default()
            ),
        };
        format!(
            "{}: {} execs in {:.1} s ({:.0}/s), {} outcomes, corpus {}, {verdict}",
            self.target,
            self.execs,
            self.elapsed.as_secs_f64(),
            rate,
            self.outcomes,
            self.corpus
        )
    }
}

/// The message of the last panic, captured by our hook instead of printed.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Replaces the panic hook with one that records the message quietly (a
/// fuzzer provokes panics on purpose; each is reported once, by us).
pub fn quiet_panics() {
    panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{msg}{at}"));
    }));
}

/// Runs `t` on one input: its outcome, or why it failed (a panic, or more
/// memory than [`memory_bound`]).
pub fn run_one(t: &Target, input: &[u8]) -> Result<u64, String> {
    let base = alloc::live();
    alloc::reset_peak();
    let r = panic::catch_unwind(AssertUnwindSafe(|| (t.run)(input)));
    let took = alloc::peak().saturating_sub(base);
    match r {
        Err(_) => Err(LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_else(|| "panic".into())),
        Ok(_) if took > memory_bound(input.len()) => {
            Err(format!("allocated {took} bytes at its peak for a {}-byte input (bound {})", input.len(), memory_bound(input.len())))
        }
        Ok(o) => Ok(o),
    }
}

/// Fuzzes one target. One run at a time per process: the allocation
/// bound reads the process's counting allocator, and a panic's message
/// the process's hook, so a run beside it on another thread is charged
/// for that thread's allocations and panics.
pub fn fuzz(t: &'static Target, opts: &Options) -> Report {
    let start = Instant::now();
    let (mut rng, mut corpus) = (Rng::new(opts.seed), Corpus::default());
    let mut execs = 0u64;
    let mut last_progress = Instant::now();
    let fail = |message: String, input: Vec<u8>| {
        let saved = save(&opts.crashes, t.name, &input);
        Some(Failure { message, input, saved })
    };
    let mut failure = None;
    for s in (t.seeds)() {
        execs += 1;
        match run_one(t, &s) {
            Ok(o) => {
                corpus.offer(&s, o, &mut rng);
            }
            Err(m) => {
                failure = fail(format!("seed: {m}"), s);
                break;
            }
        }
    }
    let mut input = Vec::new();
    while failure.is_none() && execs < opts.iterations {
        if opts.time_limit.is_some_and(|l| start.elapsed() >= l) {
            break;
        }
        input.clear();
        input.extend_from_slice(corpus.pick(&mut rng));
        let other = corpus.pick(&mut rng).to_vec();
        mutate::mutate(&mut input, &other, t.dict, &mut rng);
        execs += 1;
        match run_one(t, &input) {
            Ok(o) => {
                corpus.offer(&input, o, &mut rng);
            }
            Err(m) => failure = fail(m, input.clone()),
        }
        if let Some(every) = opts.progress {
            if last_progress.elapsed() >= every {
                last_progress = Instant::now();
                let rate = execs as f64 / start.elapsed().as_secs_f64();
                eprintln!("  {}: {execs} execs ({rate:.0}/s), {} outcomes, corpus {}", t.name, corpus.outcomes(), corpus.len());
            }
        }
    }
    Report { target: t.name, execs, outcomes: corpus.outcomes(), corpus: corpus.len(), elapsed: start.elapsed(), failure }
}

/// Saves a failing input as one line of hex in `dir`.
fn save(dir: &Path, target: &str, input: &[u8]) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    let name =
        format!("{target}-{:016x}.hex", input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)));
    let path = dir.join(name);
    std::fs::write(&path, format!("{}\n", hex::encode(input))).ok()?;
    Some(path)
}
