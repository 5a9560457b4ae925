//! Unary round trip of a 16-byte payload between two processes over a Unix
//! socket: hubwire against a hand-written length-prefixed echo, in both
//! waiting modes, in one run. See bench/README.md.
//!
//! After the criterion group, prints the ratios hubwire / echo computed
//! from this run's own measurement samples, and writes them to
//! bench/results/unary_rtt.json.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use criterion::Criterion;
use hubwire_bench::{socket_path, Client, Peer, Variant, PAYLOAD_LEN};

const SAMPLE_SIZE: usize = 30;
const GROUP: &str = "unary_rtt_unix_16B";
/// hubwire efficient / blocking echo must not exceed this.
const TARGET_EFFICIENT: f64 = 1.3;
/// hubwire low-latency / spinning echo must not exceed this.
const TARGET_LOW_LATENCY: f64 = 2.0;

/// Every `iter_custom` call of every variant: (iterations, elapsed).
static SAMPLES: Mutex<Vec<(Variant, u64, Duration)>> = Mutex::new(Vec::new());

fn bench(c: &mut Criterion) {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_bench-peer"));
    let mut group = c.benchmark_group(GROUP);
    group.throughput(criterion::Throughput::Elements(1));
    for variant in Variant::ALL {
        // Started lazily, so a filtered-out variant starts no process.
        let mut state: Option<(Peer, Client)> = None;
        group.bench_function(variant.bench_id(), |b| {
            let (_, client) = state.get_or_insert_with(|| {
                let peer =
                    Peer::spawn(exe, variant, socket_path(variant)).expect("start bench-peer");
                let client = Client::connect(variant, &peer.path, PAYLOAD_LEN)
                    .expect("connect to bench-peer");
                (peer, client)
            });
            b.iter_custom(|iters| {
                let t = client.run(iters);
                SAMPLES.lock().unwrap().push((variant, iters, t));
                t
            });
        });
        // Client first (the echo peers exit on EOF), then kill the peer.
        if let Some((peer, client)) = state.take() {
            drop(client);
            drop(peer);
        }
    }
    group.finish();
}

struct Stat {
    mean_us: f64,
    median_us: f64,
    iters: u64,
}

/// The measurement samples of `variant`: its last `SAMPLE_SIZE` calls (the
/// earlier ones are criterion's warm-up). `None` unless the variant ran a
/// full measurement (not under `--test`, a filter, or `--profile-time`).
fn stat(variant: Variant) -> Option<Stat> {
    let all = SAMPLES.lock().unwrap();
    let mine: Vec<_> = all.iter().filter(|s| s.0 == variant).collect();
    if mine.len() <= SAMPLE_SIZE {
        return None;
    }
    let last = &mine[mine.len() - SAMPLE_SIZE..];
    let iters: u64 = last.iter().map(|s| s.1).sum();
    let total: Duration = last.iter().map(|s| s.2).sum();
    let mut per: Vec<f64> = last
        .iter()
        .map(|s| s.2.as_secs_f64() * 1e6 / s.1 as f64)
        .collect();
    per.sort_by(|a, b| a.total_cmp(b));
    let median_us = if per.len() % 2 == 1 {
        per[per.len() / 2]
    } else {
        (per[per.len() / 2 - 1] + per[per.len() / 2]) / 2.0
    };
    Some(Stat {
        mean_us: total.as_secs_f64() * 1e6 / iters as f64,
        median_us,
        iters,
    })
}

fn summary(foreign_cpu_pct: f64) {
    let stats: Vec<(Variant, Stat)> = Variant::ALL
        .into_iter()
        .filter_map(|v| stat(v).map(|s| (v, s)))
        .collect();
    if stats.is_empty() {
        return;
    }
    let get = |v: Variant| stats.iter().find(|s| s.0 == v).map(|s| &s.1);
    let pairs = [
        (
            "efficient",
            "blocking echo",
            Variant::HubwireEfficient,
            Variant::EchoBlocking,
            TARGET_EFFICIENT,
        ),
        (
            "low_latency",
            "spinning echo",
            Variant::HubwireLowLatency,
            Variant::EchoSpin,
            TARGET_LOW_LATENCY,
        ),
    ];
    println!("\n{GROUP}: mean round trip from this run's measurement samples");
    let mut ratios = String::new();
    for (name, base_name, hw, base, target) in pairs {
        let (Some(h), Some(b)) = (get(hw), get(base)) else {
            continue;
        };
        let ratio = h.mean_us / b.mean_us;
        let label = format!("{}:", name.replace('_', "-"));
        println!(
            "{label:<13}hubwire {:.1} µs vs {base_name} {:.1} µs = {ratio:.2}x (target <= {target}x){}",
            h.mean_us,
            b.mean_us,
            if ratio <= target { "" } else { "  MISSED" }
        );
        if !ratios.is_empty() {
            ratios.push_str(",\n");
        }
        let _ = write!(
            ratios,
            "    \"{name}\": {{\"hubwire\": \"{}\", \"baseline\": \"{}\", \"hubwire_mean_us\": {:.3}, \"baseline_mean_us\": {:.3}, \"ratio\": {ratio:.4}, \"target\": {target}, \"met\": {}}}",
            hw.bench_id(),
            base.bench_id(),
            h.mean_us,
            b.mean_us,
            ratio <= target
        );
    }
    let variants: Vec<String> = stats
        .iter()
        .map(|(v, s)| {
            format!(
                "    \"{}\": {{\"mean_us\": {:.3}, \"median_us\": {:.3}, \"iters\": {}}}",
                v.bench_id(),
                s.mean_us,
                s.median_us,
                s.iters
            )
        })
        .collect();
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let json = format!(
        "{{\n  \"bench\": \"{GROUP}\",\n  \"payload_bytes\": {PAYLOAD_LEN},\n  \"unix_time\": {secs},\n  \"cpus\": {cpus},\n  \"foreign_cpu_pct\": {:.1},\n  \"variants\": {{\n{}\n  }},\n  \"ratios\": {{\n{ratios}\n  }}\n}}\n",
        if foreign_cpu_pct.is_finite() { foreign_cpu_pct } else { -1.0 },
        variants.join(",\n")
    );
    println!("other processes used {foreign_cpu_pct:.0}% of a CPU during the run");
    if foreign_cpu_pct > 10.0 {
        println!("WARNING: other processes used {foreign_cpu_pct:.0}% of a CPU during the run; these figures are not reliable");
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("results");
    let file = dir.join("unary_rtt.json");
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, json)) {
        Ok(()) => println!(
            "written to {}",
            file.canonicalize().unwrap_or(file).display()
        ),
        Err(e) => eprintln!("cannot write {}: {e}", file.display()),
    }
}

/// CPU time (s) the whole machine spent busy, from /proc/stat.
fn machine_busy() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let busy: u64 = v
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, x)| x)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(busy as f64 / hz)
}

/// CPU time (s) of this process and its reaped children (the peers).
fn own_cpu() -> f64 {
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage fills the zeroed struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            total += tv(ru.ru_utime) + tv(ru.ru_stime);
        }
    }
    total
}

fn main() {
    let t0 = std::time::Instant::now();
    let (busy0, own0) = (machine_busy(), own_cpu());
    let mut c = Criterion::default()
        .sample_size(SAMPLE_SIZE)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
    // CPU the rest of the machine used meanwhile, as a share of one CPU:
    // a busy machine (a build, another benchmark) distorts every figure.
    let foreign = match (busy0, machine_busy()) {
        (Some(a), Some(b)) => {
            ((b - a) - (own_cpu() - own0)).max(0.0) / t0.elapsed().as_secs_f64() * 100.0
        }
        _ => f64::NAN,
    };
    summary(foreign);
}
