//! `hubwire-bench` (also `hubwire bench`): runs the scenarios, prints the
//! tables, writes the results (JSON, markdown, SVG), compares with an
//! earlier run.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use hubwire_tests::nats_server::{self, NatsServer};
use indicatif::{ProgressBar, ProgressStyle};

use crate::machine::{busy_processes, load1, Machine};
use crate::model::{Job, Mode, System, Transport};
use crate::report::{compare, markdown, svg};
use crate::results::{compute_ratios, Results, Row};
use crate::runner::{pipelined_interleaved, sequential_interleaved, Budget, Measurement};
use crate::scenario::{self, Filter, Scenario};
use crate::systems::{self, Context};
use crate::{cpu, peer, targets};

/// The hubwire benchmark suite: hubwire against the raw transport floor
/// and the peers a user would pick instead, measured in one run.
#[derive(Parser, Debug)]
#[command(
    name = "hubwire-bench",
    version,
    after_help = "Scenario files (bench/scenarios/*.toml) say what runs: systems × transports × payloads × encodings × windows/clients.\n\
Each row reports latency percentiles (one call in flight) or calls/s and MB/s (pipelined), CPU time per call of both processes,\n\
and its time per call as a ratio to the raw floor (a hand-written echo on the same transport) and to the best peer of the same run.\n\
\n\
Examples:\n  hubwire bench                          # everything (~10 min), writes bench/results/\n  hubwire bench --quick                  # everything, short measurements (< 60 s)\n  hubwire bench --scenario rtt --transport unix\n  hubwire bench --quick --compare bench/results/results.json\n\
\n\
Run it on an idle machine: it warns when it is not (load average, busy processes)."
)]
pub struct Args {
    /// Short measurements (0.04 s warm-up + 0.12 s per row): the whole suite in under a minute.
    #[arg(long)]
    pub quick: bool,
    /// Tiny measurements, for the smoke test: every row runs, the figures mean little.
    #[arg(long, conflicts_with = "quick")]
    pub smoke: bool,
    /// The scenario files' directory [default: bench/scenarios of this repository].
    #[arg(long, value_name = "DIR")]
    pub scenarios: Option<PathBuf>,
    /// Where to write results.json, results.md and the SVG charts [default: bench/results, or bench/results/<quick|smoke>; not committed].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// An earlier results.json: print which rows got faster or slower.
    #[arg(long, value_name = "OLD_JSON")]
    pub compare: Option<PathBuf>,
    /// Only scenarios whose name contains this (repeatable).
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenario: Vec<String>,
    /// Only systems whose name contains this (repeatable), e.g. hubwire, floor, tonic.
    #[arg(long = "system", value_name = "NAME")]
    pub system: Vec<String>,
    /// Only these transports (repeatable): inproc, child, pipe, unix, tcp, hub, hub-direct, nats.
    #[arg(long = "transport", value_name = "NAME")]
    pub transport: Vec<String>,
    /// Only payloads whose name contains this (repeatable).
    #[arg(long = "payload", value_name = "NAME")]
    pub payload: Vec<String>,
    /// List the rows that would run, and exit.
    #[arg(long)]
    pub list: bool,
    /// Replace the results between the markers in this README (a full run's job).
    #[arg(long, value_name = "README")]
    pub readme: Option<PathBuf>,
    /// Check a results.json instead of running: every row the scenarios
    /// (and filters) call for is there with positive figures. Prints
    /// `bench: N passed, N failed`.
    #[arg(long, value_name = "RESULTS_JSON")]
    pub check: Option<PathBuf>,
    /// The grpc-go bench program [default: bench/go/bin/grpcbench].
    #[arg(long, value_name = "PATH")]
    pub grpc_go: Option<PathBuf>,
    /// The hub executable for the through-the-hub rows [default: `hubwire` beside this program].
    #[arg(long, value_name = "PATH")]
    pub hub: Option<PathBuf>,
}

/// The repository root: the first ancestor of this executable (or of the
/// working directory) holding `bench/scenarios`.
fn repo_root() -> Option<PathBuf> {
    let starts = [std::env::current_exe().ok(), std::env::current_dir().ok()];
    starts.into_iter().flatten().find_map(|s| s.ancestors().find(|a| a.join("bench/scenarios").is_dir()).map(Path::to_path_buf))
}

/// `path` in the repository, if the repository was found.
fn in_root(root: Option<&Path>, path: &str) -> Option<PathBuf> {
    root.map(|r| r.join(path))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// `hubwire-bench`'s main.
pub fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("hubwire-bench: {e}");
            ExitCode::from(2)
        }
    }
}

/// The charts a run draws: file name and title.
const CHARTS: [(&str, &str); 2] =
    [("latency-by-size.svg", "Round trip by payload size"), ("throughput-by-window.svg", "Throughput by window")];

/// Runs what `args` ask for; whether every row (or check) passed.
fn run(args: Args) -> io::Result<bool> {
    let root = repo_root();
    let (scenarios, jobs) = select_jobs(&args, root.as_deref())?;
    if let Some(file) = &args.check {
        return Ok(check(&read_results(file), &jobs));
    }
    if args.list {
        jobs.iter().for_each(|j| println!("{}", j.key()));
        return Ok(true);
    }
    if jobs.is_empty() {
        return Err(io::Error::other("no rows match the filters (try --list)"));
    }
    let (profile, budget) = profile(&args);
    let out = out_dir(&args, root.as_deref(), profile);
    let mut ctx = context(&args, root.as_deref());
    // One local nats-server for every NATS row of the run, killed when the
    // run ends.
    let nats_server = jobs.iter().any(|j| j.transport == Transport::Nats).then(NatsServer::start);
    ctx.nats = nats_server.as_ref().map(NatsServer::url);
    let mut res = new_results(profile, &budget);
    let t0 = Instant::now();
    measure(&mut res, &jobs, &ctx, &budget);
    write_results(&res, &scenarios, &out)?;
    eprintln!("hubwire-bench: {} rows in {:.1} s; written to {}", res.rows.len(), t0.elapsed().as_secs_f64(), out.display());
    if let Some(old) = &args.compare {
        let old: Results = serde_json::from_slice(&std::fs::read(old)?)?;
        println!("{}", compare::compare(&old, &res));
    }
    if let Some(readme) = &args.readme {
        write_readme(readme, &res, &scenarios, &out)?;
    }
    Ok(res.rows.iter().all(Row::ok))
}

/// Loads the scenarios (`--scenarios`, or the repository's) and the jobs
/// the filters keep.
fn select_jobs(args: &Args, root: Option<&Path>) -> io::Result<(Vec<Scenario>, Vec<Job>)> {
    let dir = args
        .scenarios
        .clone()
        .or_else(|| in_root(root, "bench/scenarios"))
        .ok_or_else(|| io::Error::other("no bench/scenarios found; pass --scenarios DIR"))?;
    let (scenarios, payloads) = scenario::load(&dir)?;
    let filter = Filter {
        scenarios: args.scenario.clone(),
        systems: args.system.clone(),
        transports: args.transport.clone(),
        payloads: args.payload.clone(),
    };
    let mut jobs = scenario::expand(&scenarios, &payloads, &filter);
    // The NATS rows need Debian's nats-server (`make deps`); without it
    // they are left out, and the smoke check expects none.
    if !nats_server::available() && jobs.iter().any(|j| j.transport == Transport::Nats) {
        eprintln!("hubwire-bench: nats-server not found (`make deps` installs it): the NATS rows are left out");
        jobs.retain(|j| j.transport != Transport::Nats);
    }
    Ok((scenarios, jobs))
}

/// The results file `--check` reads; an unreadable one is reported and
/// read as empty, so that every row fails (and the count still prints).
fn read_results(file: &Path) -> Results {
    let read = std::fs::read(file).map_err(|e| e.to_string()).and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()));
    read.unwrap_or_else(|e| {
        println!("FAIL {}: {e}", file.display());
        Results::default()
    })
}

/// The profile's name and its time budget per row.
fn profile(args: &Args) -> (&'static str, Budget) {
    let budget = |warmup_ms, measure_ms, max_calls| Budget {
        warmup: Duration::from_millis(warmup_ms),
        measure: Duration::from_millis(measure_ms),
        max_calls,
    };
    if args.smoke {
        ("smoke", budget(5, 20, 500))
    } else if args.quick {
        ("quick", budget(40, 120, 1 << 22))
    } else {
        ("full", budget(300, 2000, 1 << 24))
    }
}

/// Where the results go: `--out`, else `bench/results` (a full run) or
/// `bench/results/<profile>` in the repository.
fn out_dir(args: &Args, root: Option<&Path>, profile: &str) -> PathBuf {
    let default = match profile {
        "full" => "bench/results".to_string(),
        p => format!("bench/results/{p}"),
    };
    args.out.clone().or_else(|| in_root(root, &default)).unwrap_or_else(|| PathBuf::from("bench-results"))
}

/// The other programs some rows need, where they exist.
fn context(args: &Args, root: Option<&Path>) -> Context {
    Context {
        grpc_go: args.grpc_go.clone().or_else(|| in_root(root, "bench/go/bin/grpcbench")).filter(|p| p.exists()),
        hub: args.hub.clone().or_else(|| peer::sibling("hubwire").ok()).filter(|p| p.exists()),
        nats: None,
    }
}

/// An empty results file for this run, with the machine described and
/// checked for idleness (a warning on stderr if it is not idle).
fn new_results(profile: &str, budget: &Budget) -> Results {
    let mut machine = Machine::probe();
    machine.busy_at_start = busy_processes(Duration::from_millis(300));
    let res = Results {
        unix_time: now(),
        profile: profile.into(),
        warmup_s: budget.warmup.as_secs_f64(),
        measure_s: budget.measure.as_secs_f64(),
        machine,
        rows: Vec::new(),
        targets: Vec::new(),
    };
    if let Some(w) = markdown::idle_warning(&res) {
        eprintln!("hubwire-bench: warning: {w}");
    }
    res
}

/// Measures every job into `res`: the rows, what the rest of the machine
/// used meanwhile, the ratios and the targets.
fn measure(res: &mut Results, jobs: &[Job], ctx: &Context, budget: &Budget) {
    let (busy0, own0, t0) = (cpu::machine_busy(), cpu::total(&[]), Instant::now());
    res.rows = measure_rows(jobs, ctx, budget);
    res.machine.foreign_cpu_pct = foreign_cpu_pct(busy0, own0, t0.elapsed());
    res.machine.load_after = load1();
    compute_ratios(&mut res.rows);
    res.targets = targets::check(res);
}

/// Every job's row, in the jobs' order, measured comparison by comparison
/// under a progress bar.
fn measure_rows(jobs: &[Job], ctx: &Context, budget: &Budget) -> Vec<Row> {
    let bar = ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {wide_msg}").unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut rows: Vec<Option<Row>> = vec![None; jobs.len()];
    for group in comparisons(jobs) {
        bar.set_message(jobs[group[0]].key());
        let group_jobs: Vec<&Job> = group.iter().map(|&i| &jobs[i]).collect();
        for (&i, m) in group.iter().zip(measure_comparison(&group_jobs, ctx, budget)) {
            let row = Row::new(&jobs[i], m.map_err(|e| e.to_string()));
            if let Some(e) = &row.error {
                bar.println(format!("failed: {}: {e}", row.key));
            }
            rows[i] = Some(row);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    rows.into_iter().flatten().collect()
}

/// Measures the jobs of one comparison: interleaved if there are several
/// (all their servers up at once), else the one job on its own.
fn measure_comparison(group: &[&Job], ctx: &Context, budget: &Budget) -> Vec<io::Result<Measurement>> {
    if group.len() == 1 {
        let job = group[0];
        return vec![systems::start(job, ctx).and_then(|target| target.measure(job, budget))];
    }
    let targets: Vec<_> = group.iter().map(|job| systems::start(job, ctx)).collect();
    match group[0].mode {
        Mode::Pipelined { window } => pipelined_interleaved(&targets, window, budget),
        _ => sequential_interleaved(&targets, budget),
    }
}

/// What the rest of the machine used during `elapsed`, as a share of one
/// CPU (%): the machine's busy time since `busy0` less this process's and
/// its children's since `own0`; -1 where the machine's is unknown.
fn foreign_cpu_pct(busy0: Option<Duration>, own0: Duration, elapsed: Duration) -> f64 {
    let own = cpu::total(&[]).saturating_sub(own0);
    match (busy0, cpu::machine_busy()) {
        (Some(a), Some(b)) => (b.saturating_sub(a).saturating_sub(own)).as_secs_f64() / elapsed.as_secs_f64() * 100.0,
        _ => -1.0,
    }
}

/// Writes the charts, `results.md` and `results.json` to `out`, and
/// prints the report (and, again, the idle warning).
fn write_results(res: &Results, scenarios: &[Scenario], out: &Path) -> io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(CHARTS[0].0), svg::latency_by_size(res))?;
    std::fs::write(out.join(CHARTS[1].0), svg::throughput_by_window(res))?;
    let report = markdown::report(res, scenarios, &CHARTS);
    std::fs::write(out.join("results.md"), &report)?;
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(res)?)?;
    println!("{report}");
    if let Some(w) = markdown::idle_warning(res) {
        eprintln!("hubwire-bench: warning: {w}");
    }
    Ok(())
}

/// `--readme`: copies the charts beside the README (`bench/results/` is
/// not committed) and replaces its results section with the report,
/// linking those copies.
fn write_readme(readme: &Path, res: &Results, scenarios: &[Scenario], out: &Path) -> io::Result<()> {
    let dir = readme.parent().unwrap_or(Path::new(".")).join("charts");
    std::fs::create_dir_all(&dir)?;
    for (f, _) in &CHARTS {
        std::fs::copy(out.join(f), dir.join(f))?;
    }
    let linked: Vec<(String, &str)> = CHARTS.iter().map(|(f, t)| (format!("charts/{f}"), *t)).collect();
    let linked: Vec<(&str, &str)> = linked.iter().map(|(f, t)| (f.as_str(), *t)).collect();
    update_readme(readme, &markdown::report(res, scenarios, &linked))
}

/// Splits the jobs (by index) into comparisons measured together: the
/// sequential jobs of one scenario, payload, encoding and transport whose
/// client runs here (not grpc-go's, which times itself), and likewise the
/// pipelined jobs with the same window; the connect jobs of a scenario
/// across transports too (their question is what the upgrade adds to a
/// Unix socket's connect, so `unix` and `shm` take turns); every other job
/// (parallel, grpc-go) alone. Groups come in the order of their first job.
///
/// Shared memory is reached by upgrading a Unix socket, and its targets
/// are ratios to the Unix rows of the same run (hubwire on shm against
/// hubwire on Unix, against the Unix floors), so `shm` rows take turns
/// with the `unix` rows of their scenario, payload and mode: measured
/// minutes apart, those ratios moved by a third between two runs
/// (efficient one call, 0.91× and 1.27×) on load alone.
fn comparisons(jobs: &[Job]) -> Vec<Vec<usize>> {
    // grpc-go runs its own loop in its own process: it cannot take turns.
    let here = |j: &Job| {
        matches!(j.mode, Mode::Sequential | Mode::Pipelined { .. } | Mode::Connect)
            && !matches!(j.system, System::GrpcGoUnary | System::GrpcGoStream)
    };
    let key = |j: &Job| (j.scenario.clone(), j.payload.name.clone(), j.encoding, place(j), j.mode);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let same = groups.iter_mut().find(|g| here(&jobs[g[0]]) && here(job) && key(&jobs[g[0]]) == key(job));
        match same {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups
}

/// Where a job's comparison takes turns: its transport (`shm` with
/// `unix`), or anywhere for a connect job (see [`comparisons`]).
fn place(j: &Job) -> Option<Transport> {
    match j.transport {
        _ if j.mode == Mode::Connect => None,
        Transport::Shm => Some(Transport::Unix),
        t => Some(t),
    }
}

/// The smoke test's verdict: each expected row present, with calls, a
/// positive rate, time and CPU per call, and latency where one call was in
/// flight; ratios present where a floor ran.
fn check(res: &Results, jobs: &[Job]) -> bool {
    let (mut passed, mut failed) = (0, 0);
    for job in jobs {
        let key = job.key();
        let why = match res.rows.iter().find(|r| r.key == key) {
            None => Some("missing".to_string()),
            Some(r) if !r.ok() => Some(format!("failed: {}", r.error.as_deref().unwrap_or("no calls"))),
            Some(r) => {
                let seq_ok =
                    r.window.is_some() || r.latency.is_some_and(|l| l.p50_us > 0.0 && l.p99_us >= l.p50_us && l.p999_us >= l.p99_us);
                let figures = r.calls_per_s > 0.0 && r.us_per_call > 0.0 && r.cpu_us_per_call > 0.0 && (r.mb_per_s > 0.0);
                (!(seq_ok && figures)).then(|| {
                    format!(
                        "bad figures: {} calls/s, {} µs/call, {} CPU µs/call, latency {:?}",
                        r.calls_per_s, r.us_per_call, r.cpu_us_per_call, r.latency
                    )
                })
            }
        };
        match why {
            None => passed += 1,
            Some(w) => {
                failed += 1;
                println!("FAIL {key}: {w}");
            }
        }
    }
    println!("bench: {passed} passed, {failed} failed");
    failed == 0
}

const START: &str = "<!-- bench-results:start (written by hubwire-bench --readme; do not edit) -->";
const END: &str = "<!-- bench-results:end -->";

/// Replaces what lies between the markers.
fn update_readme(path: &Path, body: &str) -> io::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let (Some(a), Some(b)) = (text.find(START), text.find(END)) else {
        return Err(io::Error::other(format!("{}: no results markers", path.display())));
    };
    let new = format!("{}{START}\n\n{body}\n{}", &text[..a], &text[b..]);
    std::fs::write(path, new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Encoding, Transport};

    /// The jobs of `names` (scenarios) and their comparisons, checked for
    /// what holds of every grouping: each job in exactly one group, a
    /// group's jobs alike in scenario, payload, encoding, place ([`place`]) and
    /// mode, and grpc-go (which times itself) always alone.
    fn grouped(names: &[&str]) -> (Vec<Job>, Vec<Vec<usize>>) {
        let (scenarios, payloads) = scenario::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")).unwrap();
        let filter = Filter { scenarios: names.iter().map(|n| n.to_string()).collect(), ..Filter::default() };
        let jobs = scenario::expand(&scenarios, &payloads, &filter);
        let groups = comparisons(&jobs);
        let mut seen: Vec<usize> = groups.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..jobs.len()).collect::<Vec<_>>(), "every job in exactly one group");
        for g in &groups {
            fn alike(b: &Job) -> (&str, &str, Encoding, Option<Transport>, Mode) {
                (&b.scenario, &b.payload.name, b.encoding, place(b), b.mode)
            }
            assert!(g.iter().all(|&i| alike(&jobs[i]) == alike(&jobs[g[0]])));
            if g.iter().any(|&i| jobs[i].system.name().starts_with("grpc-go")) {
                assert_eq!(g.len(), 1);
            }
        }
        (jobs, groups)
    }

    /// The systems in the group of the job `pick` selects.
    fn systems_beside<'a>(jobs: &'a [Job], groups: &[Vec<usize>], pick: impl Fn(&Job) -> bool) -> Vec<&'a str> {
        let g = groups.iter().find(|g| g.iter().any(|&i| pick(&jobs[i]))).expect("the picked job has a group");
        g.iter().map(|&i| jobs[i].system.name()).collect()
    }

    #[test]
    fn comparisons_group_pipelined_rows_by_window() {
        let (jobs, groups) = grouped(&["pipelined", "bulk"]);
        let names = systems_beside(&jobs, &groups, |j| j.key().starts_with("bulk/floor-blocking/unix/"));
        assert!(names.contains(&"hubwire-efficient") && names.contains(&"ipc-bytes"), "{names:?}");
        let names = systems_beside(&jobs, &groups, |j| {
            j.system.name() == "floor-blocking" && j.transport == Transport::Unix && j.mode == Mode::Pipelined { window: 16 }
        });
        assert!(names.contains(&"hubwire-low-latency") && names.contains(&"tonic-stream"), "{names:?}");
    }

    #[test]
    fn comparisons_put_hubwire_streams_beside_the_grpc_streams_and_only_hubwire_through_the_hub() {
        let (jobs, groups) = grouped(&["streams"]);
        let names = systems_beside(&jobs, &groups, |j| j.key() == "streams/tonic-stream/unix/k1/raw/window64");
        assert!(names.contains(&"hubwire-stream-efficient") && names.contains(&"hubwire-stream-low-latency"), "{names:?}");
        assert!(names.contains(&"floor-spin") && !names.contains(&"hubwire-efficient"), "{names:?}");
        assert!(jobs.iter().any(|j| j.key() == "streams/hubwire-stream-low-latency/hub/b16/raw/window16"));
        assert!(jobs.iter().filter(|j| j.transport == Transport::Hub).all(|j| j.system.name().starts_with("hubwire-stream-")));
    }

    #[test]
    fn comparisons_group_sequential_rows_of_one_transport_and_leave_grpc_go_alone() {
        let (jobs, groups) = grouped(&["rtt"]);
        let names = systems_beside(&jobs, &groups, |j| j.key() == "rtt/floor-blocking/unix/small/raw/sequential");
        assert!(names.contains(&"hubwire-efficient") && names.contains(&"tonic-stream") && !names.contains(&"grpc-go-unary"), "{names:?}");
    }

    #[test]
    fn comparisons_put_shared_memory_beside_the_unix_socket_it_upgrades() {
        let (jobs, groups) = grouped(&["rtt", "pipelined", "bulk"]);
        for (key, other) in [
            ("rtt/hubwire-efficient/shm/small/raw/sequential", "rtt/hubwire-efficient/unix/small/raw/sequential"),
            ("bulk/hubwire-efficient/shm/m1/raw/window4", "bulk/floor-blocking/unix/m1/raw/window4"),
        ] {
            let g = groups.iter().find(|g| g.iter().any(|&i| jobs[i].key() == key)).expect("a group");
            assert!(g.iter().any(|&i| jobs[i].key() == other), "{other} beside {key}");
        }
        let tcp = groups.iter().find(|g| g.iter().any(|&i| jobs[i].transport == Transport::Tcp)).unwrap();
        assert!(tcp.iter().all(|&i| jobs[i].transport == Transport::Tcp), "TCP stays on its own");
    }

    #[test]
    fn comparisons_put_the_connect_rows_of_both_transports_in_one_group() {
        let (jobs, groups) = grouped(&["connect"]);
        assert_eq!(jobs.len(), 4, "two systems on unix and shm");
        assert_eq!(groups.len(), 1, "unix and shm take turns");
    }
}
