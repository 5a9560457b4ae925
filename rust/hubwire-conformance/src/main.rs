//! `hubwire-conformance`: runs the conformance suite (`conformance/`)
//! against an implementation under test, as client and as provider, on
//! every transport both support. See `conformance/README.md`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;

use hubwire_conformance::case::{self, Role};
use hubwire_conformance::report::{self, KnownFailing, Outcome, Summary};
use hubwire_conformance::{pattern, run, testee};
use hubwire_tests::nats_server::{self, NatsServer};

/// Runs the hubwire conformance suite against an implementation.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Language of the testee (names the known-failing lists).
    #[arg(long, default_value = "rust")]
    lang: String,
    /// The testee's command line (program and arguments, space-separated).
    #[arg(long)]
    testee: String,
    /// Roles to test, comma-separated.
    #[arg(long, default_value = "provider,client", value_delimiter = ',')]
    roles: Vec<String>,
    /// Transports to test (default: all the testee supports).
    #[arg(long, value_delimiter = ',')]
    transports: Vec<String>,
    /// Only cases whose name matches this glob.
    #[arg(long, default_value = "*")]
    cases: String,
    /// The repository root (holds conformance/ and spec/); found from the
    /// current directory by default.
    #[arg(long)]
    root: Option<PathBuf>,
    /// Where the known-failing lists are (default: conformance/known-failing).
    #[arg(long)]
    known_failing: Option<PathBuf>,
    /// Seconds to wait for each expected frame or event.
    #[arg(long, default_value_t = 5.0)]
    wait: f64,
    /// Cases run at once.
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// Print every case, not just failures.
    #[arg(long, short = 'v')]
    verbose: bool,
}

fn find_root(start: PathBuf) -> Option<PathBuf> {
    start.ancestors().find(|p| p.join("conformance/suites").is_dir() && p.join("spec/vectors").is_dir()).map(PathBuf::from)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // The in-process testee panics on purpose (`panic` method); say so in
    // one line instead of a backtrace.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>().is_some_and(|m| m.starts_with("conformance:")) {
            return;
        }
        default_hook(info)
    }));
    std::process::exit(match run(args).await {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("hubwire-conformance: {e}");
            2
        }
    });
}

async fn run(args: Args) -> Result<bool, String> {
    let root = match args.root.clone() {
        Some(r) => r,
        None => find_root(std::env::current_dir().map_err(|e| e.to_string())?)
            .ok_or("cannot find the repository root (conformance/suites); pass --root")?,
    };
    let mut cases = case::load_suites(&root.join("conformance/suites"))?;
    let yaml_cases = cases.len();
    cases.extend(case::reject_cases(&root.join("spec/vectors/reject.json"))?);
    let vector_cases = cases.len() - yaml_cases;
    cases.retain(|c| report::glob(&args.cases, &c.name));
    let command: Vec<String> = args.testee.split_whitespace().map(String::from).collect();
    if command.is_empty() {
        return Err("--testee is empty".into());
    }
    let testee = testee::Testee { lang: args.lang.clone(), command, in_process: args.lang == "rust" };

    // Ask the testee what it supports.
    let (mut probe, _) = testee.start(if testee.in_process { "memory" } else { "unix" }).await?;
    probe.send(&json!({"op": "hello"})).await?;
    let mut vars = pattern::Vars::new();
    let hello = probe
        .expect(json!({"event": "hello"}).as_object().unwrap(), &mut vars, Duration::from_secs(10))
        .await
        .map_err(|e| format!("the testee did not answer hello: {e}"))?;
    drop(probe);
    let supported: Vec<String> =
        hello["transports"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect();
    let transports: Vec<String> = if args.transports.is_empty() {
        // NATS runs when the testee speaks it and nats-server is installed.
        let ours = ["memory", "child", "unix", "tcp", "nats"];
        supported.iter().filter(|t| ours.contains(&t.as_str()) && (*t != "nats" || nats_server::available())).cloned().collect()
    } else {
        args.transports.clone()
    };
    // One nats-server for every NATS case of the run, killed at its end.
    let _nats = transports.iter().any(|t| t == "nats").then(NatsServer::start);
    if let Some(server) = &_nats {
        let _ = run::NATS_URL.set(server.url());
    }
    let roles: Vec<Role> = args
        .roles
        .iter()
        .map(|r| match r.as_str() {
            "provider" => Ok(Role::Provider),
            "client" => Ok(Role::Client),
            other => Err(format!("unknown role {other:?}")),
        })
        .collect::<Result<_, _>>()?;
    let kf_dir = args.known_failing.clone().unwrap_or_else(|| root.join("conformance/known-failing"));
    let known: Vec<(Role, Arc<KnownFailing>)> = roles.iter().map(|&r| (r, Arc::new(KnownFailing::load(&kf_dir, &args.lang, r)))).collect();

    let mut jobs = Vec::new();
    for c in cases.iter().filter(|c| roles.contains(&c.role)) {
        for t in transports.iter().filter(|t| c.runs_on(t)) {
            jobs.push((c.clone(), t.clone()));
        }
    }
    println!(
        "hubwire-conformance: {} {} ({} YAML cases + {} from reject vectors; {} match {:?}), roles {:?}, transports {:?}: {} runs",
        args.lang,
        hello["version"].as_str().unwrap_or("?"),
        yaml_cases,
        vector_cases,
        cases.len(),
        args.cases,
        args.roles,
        transports,
        jobs.len()
    );

    let wait = Duration::from_secs_f64(args.wait);
    let limit = Arc::new(tokio::sync::Semaphore::new(
        args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get() * 2).unwrap_or(4)),
    ));
    let testee = Arc::new(testee);
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, (c, t)) in jobs.into_iter().enumerate() {
        let (limit, testee) = (limit.clone(), testee.clone());
        let vars: pattern::Vars = [("$lang".to_string(), hello["lang"].clone()), ("$version".to_string(), hello["version"].clone())].into();
        set.spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            let r = run::run_case(&testee, &c, &t, wait, vars).await;
            (i, c, t, r)
        });
    }
    let mut results = Vec::new();
    while let Some(r) = set.join_next().await {
        match r {
            Ok(r) => results.push(r),
            Err(e) => {
                // The cases still running are stopped and waited for, so
                // that each drops its temp dir: `main` exits the process
                // at once, and a task merely aborted may never be dropped.
                set.shutdown().await;
                return Err(format!("a case panicked: {e}"));
            }
        }
    }
    results.sort_by_key(|r| r.0);

    let mut summary = Summary::default();
    for (_, c, t, r) in &results {
        let kf = &known.iter().find(|(r, _)| *r == c.role).unwrap().1;
        let outcome = match (r, kf.lists(&c.name, t)) {
            (Ok(()), None) => Outcome::Pass,
            (Ok(()), Some(line)) => Outcome::UnexpectedPass(line),
            (Err(_), Some(_)) => Outcome::KnownFail,
            (Err(e), None) => Outcome::Fail(e.clone()),
        };
        let tag = format!("{} {} {:<7} {}", args.lang, c.role.name(), t, c.name);
        match &outcome {
            Outcome::Pass if args.verbose => println!("PASS  {tag}"),
            Outcome::KnownFail if args.verbose => println!("XFAIL {tag}"),
            Outcome::Fail(e) => println!("FAIL  {tag}  [{}]\n      ({})\n      {e}", c.source, c.doc),
            Outcome::UnexpectedPass(line) => {
                println!("XPASS {tag}: listed in {}:{line} but passes; remove the entry", kf.file)
            }
            _ => {}
        }
        summary.add(&args.lang, c.role, t, &outcome);
    }
    summary.print();
    println!("({:.1} s)", started.elapsed().as_secs_f64());
    Ok(summary.totals().1 == 0)
}
