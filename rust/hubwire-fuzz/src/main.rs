//! `hubwire-fuzz`: fuzzes hubwire's decoders on stable Rust. See the
//! crate doc (`src/lib.rs`) for how, and TESTING.md for the short run in
//! `make test` and the long one.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use hubwire_fuzz::alloc::Counting;
use hubwire_fuzz::run::{self, Options};
use hubwire_fuzz::targets::{self, ALL};

#[global_allocator]
static ALLOC: Counting = Counting;

/// Fuzz hubwire's frame decoder, HELLO parser and payload codecs.
#[derive(Parser)]
#[command(name = "hubwire-fuzz")]
struct Args {
    /// Only this target (repeatable): frame, hello, payload.
    #[arg(long = "target")]
    targets: Vec<String>,
    /// Inputs per target.
    #[arg(long, default_value_t = 100_000)]
    iterations: u64,
    /// Stop each target after this many seconds even if iterations remain.
    #[arg(long)]
    seconds: Option<f64>,
    /// The generator's seed (the same seed repeats a run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where failing inputs are saved, as hex.
    #[arg(long, default_value = "target/fuzz-failures")]
    failures: PathBuf,
    /// Run one saved input (a file of hex) through a target and print the outcome.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// List the targets and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for t in &ALL {
            println!("{}: {}", t.name, t.doc);
        }
        return ExitCode::SUCCESS;
    }
    let chosen: Vec<_> = if args.targets.is_empty() {
        ALL.iter().collect()
    } else {
        let mut v = Vec::new();
        for name in &args.targets {
            match targets::by_name(name) {
                Some(t) => v.push(t),
                None => {
                    eprintln!("error: no target {name:?} (targets: frame, hello, payload)");
                    return ExitCode::from(2);
                }
            }
        }
        v
    };
    run::quiet_panics();
    if let Some(file) = args.replay {
        return replay(&chosen, &file);
    }
    let opts = Options {
        iterations: args.iterations,
        time_limit: args.seconds.map(Duration::from_secs_f64),
        seed: args.seed,
        crashes: args.failures,
        progress: Some(Duration::from_secs(10)),
    };
    println!("seed {}, {} inputs per target{}", args.seed, args.iterations, args.seconds.map(|s| format!(" or {s} s")).unwrap_or_default());
    let mut failed = 0;
    for t in &chosen {
        let report = run::fuzz(t, &opts);
        println!("{}", report.line());
        if let Some(f) = &report.failure {
            println!("  input: {}", hex::encode(&f.input));
            failed += 1;
        }
    }
    // The closing line `make test` totals (scripts/test-summary.awk).
    println!("fuzz: {} passed, {failed} failed", chosen.len() - failed);
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn replay(chosen: &[&'static targets::Target], file: &std::path::Path) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let Ok(input) = hex::decode(text.trim()) else {
        eprintln!("error: {}: not a line of hex", file.display());
        return ExitCode::from(2);
    };
    let mut ok = true;
    for t in chosen {
        match run::run_one(t, &input) {
            Ok(o) => println!("{}: ok (outcome {o:016x})", t.name),
            Err(m) => {
                println!("{}: FAILED: {m}", t.name);
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
