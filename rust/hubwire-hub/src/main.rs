//! `hubwire`: run the hub, call through it, look at it, benchmark it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use hubwire_hub::discovery::Cluster;
use hubwire_hub::{cli, config, hub, logs, trust};

#[derive(Parser)]
#[command(name = "hubwire", version, about = "A polyglot RPC hub: supervises providers and routes calls to them")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the hub: start the providers of the config and serve clients.
    Hub {
        /// The config file.
        #[arg(long, short, default_value = "hubwire.toml")]
        config: PathBuf,
        /// Log lines for people (text) or machines (json).
        #[arg(long, value_enum, env = "HUBWIRE_LOG_FORMAT", default_value = "text")]
        log_format: logs::LogFormat,
        /// Check the config and exit.
        #[arg(long)]
        check: bool,
        /// Load a config that others could change (writable by group or
        /// others, or through a symlink another user owns), with a warning.
        #[arg(long)]
        allow_insecure_config: bool,
    },
    /// Call a method through the hub and print the result as JSON (one line per stream item).
    Call {
        /// The method.
        method: String,
        /// The input as JSON (default null). For input streams: one JSON value per line (default: stdin).
        input: Option<String>,
        /// Send raw bytes from FILE ("-" for stdin) and print raw bytes back.
        #[arg(long, value_name = "FILE")]
        raw: Option<String>,
        /// Give up after this long (e.g. 500ms, 5s; 0 for no deadline, as on the wire).
        #[arg(long, value_parser = parse_duration)]
        timeout: Option<Duration>,
        #[command(flatten)]
        hub: HubFlags,
    },
    /// List the methods the hub routes: kind, provider, description.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        hub: HubFlags,
    },
    /// Show every provider and replica: pid, state, restarts, load, latency.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        hub: HubFlags,
    },
    /// Run the benchmark suite (the hubwire-bench program next to this one).
    #[command(disable_help_flag = true)]
    Bench {
        /// Passed to hubwire-bench (try --help).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(clap::Args)]
struct HubFlags {
    /// The hub: unix:PATH, tcp:HOST:PORT or tls:HOST:PORT (default: $HUBWIRE_HUB, else the unix listener of --config).
    #[arg(long)]
    hub: Option<String>,
    /// The config file to find the hub's address in.
    #[arg(long, short, default_value = "hubwire.toml")]
    config: PathBuf,
    /// For a tls: hub, the CA certificate (PEM) that signed the hub's certificate.
    #[arg(long, env = "HUBWIRE_CA", value_name = "FILE")]
    ca: Option<PathBuf>,
    /// For a tls: hub that wants client certificates: ours (PEM), with --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// The key (PEM) of --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// Over TCP or TLS: send the token on this file's first line (default: $HUBWIRE_TOKEN).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// No hub: go through this NATS cluster (nats://HOST:PORT, several separated by commas).
    #[arg(long, env = "HUBWIRE_NATS", value_name = "URL", conflicts_with = "hub")]
    nats: Option<String>,
    /// With --nats: the subject prefix of the deployment (default hubwire).
    #[arg(long, value_name = "PREFIX", requires = "nats")]
    nats_prefix: Option<String>,
}

impl HubFlags {
    /// `[nats]` from `--nats`, when given.
    fn nats(&self) -> Option<Result<hubwire_hub::nats_config::NatsConfig, String>> {
        self.nats.as_deref().map(|u| hubwire_hub::nats_connect::from_flag(u, self.nats_prefix.as_deref()))
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    config::parse_duration(s).ok_or_else(|| format!("{s:?} is not a duration (like 500ms, 5s, 1m)"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match args.command {
        Command::Hub { config: path, log_format, check, allow_insecure_config } => {
            if let Err(why) = trust::check_config(&path) {
                if !allow_insecure_config {
                    eprintln!("error: {}: {why}", path.display());
                    return ExitCode::from(2);
                }
                eprintln!("warning: {}: {why} (loaded anyway: --allow-insecure-config)", path.display());
            }
            let cfg = match config::load(&path) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            if check {
                // The PEM files of [hub.tls], read as the hub reads them when it binds.
                if let Some(Err(e)) = cfg.hub.tls.as_ref().map(|t| hubwire_hub::tls_config::acceptor(&cfg.file, t)) {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
                println!("{}: ok ({} providers)", path.display(), cfg.providers.len());
                return ExitCode::SUCCESS;
            }
            logs::init(log_format);
            rt.block_on(async {
                let bound = match hub::bind(&cfg).await {
                    Ok(b) => b,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                };
                match hub::run(cfg, bound).await {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::from(1)
                    }
                }
            })
        }
        Command::Call { method, input, raw, timeout, hub } => {
            let args = cli::CallArgs { method, input, raw, timeout };
            match hub.nats() {
                Some(nats) => done(rt.block_on(async {
                    let nats = nats?;
                    let conn = cli::dial_nats(&nats, &args.method).await?;
                    cli::call(&conn, args).await
                })),
                None => client(&rt, &hub, |c| async move { cli::call(&c, args).await }),
            }
        }
        Command::List { json, hub } => match hub.nats() {
            Some(nats) => done(rt.block_on(async { cli::show_cluster(&nats?, json, Cluster::methods_table).await })),
            None => client(&rt, &hub, |c| async move { cli::list(&c, json).await }),
        },
        Command::Status { json, hub } => match hub.nats() {
            Some(nats) => done(rt.block_on(async { cli::show_cluster(&nats?, json, Cluster::replicas_table).await })),
            None => client(&rt, &hub, |c| async move { cli::status(&c, json).await }),
        },
        Command::Bench { args } => bench(args),
    }
}

fn client<F, Fut>(rt: &tokio::runtime::Runtime, flags: &HubFlags, f: F) -> ExitCode
where
    F: FnOnce(hubwire::Connection) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let r = rt.block_on(async {
        let addr = cli::find_hub(flags.hub.as_deref(), &flags.config)?;
        let files = cli::TlsFiles { ca: flags.ca.clone(), cert: flags.cert.clone(), key: flags.key.clone() };
        let token = cli::find_token(flags.token_file.as_deref())?;
        let conn = cli::connect(&addr, &files, token.as_ref()).await?;
        f(conn).await
    });
    done(r)
}

/// Exit 0, or print the error and exit 1.
fn done(r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `hubwire bench …` runs `hubwire-bench …` from the same directory.
fn bench(args: Vec<String>) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("hubwire-bench")));
    let Some(exe) = exe.filter(|p| p.exists()) else {
        eprintln!("error: hubwire-bench was not found next to hubwire; build it with `make build` (crate hubwire-bench)");
        return ExitCode::from(2);
    };
    let e = std::process::Command::new(&exe).args(args).exec();
    eprintln!("error: cannot run {}: {e}", exe.display());
    ExitCode::from(2)
}
