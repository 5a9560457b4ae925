//! Dials the "example" provider and calls each of its methods once.
//!
//! ```text
//! example-client --unix /tmp/hw.sock
//! example-client --tcp 127.0.0.1:7070
//! example-client --spawn target/debug/example-provider [ARGS...]
//! ```
//!
//! Prints one line per call and exits non-zero if any call did something
//! unexpected.

use std::fmt::Display;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use hubwire::transport::{self, child::SpawnOptions};
use hubwire::{CallOptions, Code, Connection, ConnectionOptions, Error};
use hubwire_examples::{init_logging, DivError, DivideIn, GreetIn, GreetOut, Wait};

/// Calls every method of the "example" provider once.
#[derive(Parser, Debug)]
#[command(version)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["unix", "tcp", "spawn"]))]
struct Args {
    /// Dial this Unix socket path.
    #[arg(long, value_name = "PATH")]
    unix: Option<std::path::PathBuf>,
    /// Dial this TCP address (host:port).
    #[arg(long, value_name = "ADDR")]
    tcp: Option<String>,
    /// Start this command as a child provider and talk to it over a
    /// socketpair (everything after --spawn is the command and its args).
    #[arg(long, value_name = "CMD", num_args = 1.., allow_hyphen_values = true)]
    spawn: Option<Vec<String>>,
    /// How the connection waits for bytes (default: HUBWIRE_WAIT, else efficient).
    #[arg(long, value_enum)]
    wait: Option<Wait>,
}

/// Counts what went as expected and what did not.
#[derive(Default)]
struct Tally {
    ok: usize,
    bad: usize,
}

impl Tally {
    fn ok(&mut self, what: &str, detail: impl Display) {
        self.ok += 1;
        println!("ok    {what:<14} {detail}");
    }

    fn bad(&mut self, what: &str, detail: impl Display) {
        self.bad += 1;
        println!("FAIL  {what:<14} {detail}");
    }

    /// Checks a call's result against what was expected.
    fn check<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: Result<T, Error>, want: T) {
        match got {
            Ok(v) if v == want => self.ok(what, format!("-> {v:?}")),
            Ok(v) => self.bad(what, format!("-> {v:?}, expected {want:?}")),
            Err(e) => self.bad(what, format!("error {e}")),
        }
    }
}

async fn run(conn: &Connection) -> Tally {
    let mut t = Tally::default();
    let opts = CallOptions::new().timeout(Duration::from_secs(10));

    let peer = conn.peer();
    println!("connected to {} ({} {}) over {}", peer.peer.name, peer.peer.lang, peer.peer.version, conn.describe());
    println!("methods:");
    for m in &peer.methods {
        let errors = if m.errors.is_some() { "  (declares typed failures)" } else { "" };
        println!("  {:<8} {:<14} in: {}  out: {}{errors}", m.name, m.kind.name(), m.input, m.output);
    }
    println!();

    // echo: raw bytes, no codec at all.
    let r = conn.call_raw("echo", Bytes::from_static(b"hello, hubwire")).await;
    t.check("echo", r.map(|b| String::from_utf8_lossy(&b).into_owned()), "hello, hubwire".to_string());

    // greet: typed struct in, typed struct out (MessagePack on the wire).
    let r: Result<GreetOut, Error> = conn.call_with("greet", &GreetIn { name: "Ada".into() }, &opts).await;
    t.check("greet", r, GreetOut { greeting: "Hello, Ada!".into() });

    // divide: ok.
    let r: Result<f64, Error> = conn.call_with("divide", &DivideIn { a: 7.0, b: 2.0 }, &opts).await;
    t.check("divide 7/2", r, 3.5);

    // divide by zero: a typed failure, decoded back into DivError.
    let r: Result<f64, Error> = conn.call_with("divide", &DivideIn { a: 1.0, b: 0.0 }, &opts).await;
    match r {
        Err(e) if e.code() == Code::Failure => match e.failure_value::<DivError>() {
            Some(Ok(v)) if v.kind == "division_by_zero" => t.ok("divide 1/0", format!("-> failure {v:?}")),
            other => t.bad("divide 1/0", format!("failure with unexpected value {other:?}")),
        },
        Err(e) => t.bad("divide 1/0", format!("expected a typed failure, got {e}")),
        Ok(v) => t.bad("divide 1/0", format!("expected a failure, got {v}")),
    }

    // count: server stream.
    let r = async { conn.server_stream::<u32, u32>("count", &5, &opts).await?.collect().await }.await;
    t.check("count 5", r, vec![0, 1, 2, 3, 4]);

    // sum: client stream.
    let r = async {
        let s = conn.client_stream::<i64, i64>("sum", &opts).await?;
        for i in 1..=10 {
            s.send(&i).await?;
        }
        s.finish().await
    }
    .await;
    t.check("sum 1..=10", r, 55);

    // chat: bidirectional stream.
    let lines = ["hello there", "how are you?", "goodbye"];
    let r = async {
        let (sink, mut items) = conn.bidi::<String, String>("chat", &opts).await?;
        let mut replies = Vec::new();
        for line in lines {
            sink.send(&line.to_string()).await?;
            // One reply per line, read as it comes back.
            match items.next().await? {
                Some(reply) => replies.push(reply),
                None => return Err(Error::new(Code::Internal, "chat ended early")),
            }
        }
        sink.end()?;
        replies.extend(items.collect().await?);
        Ok(replies)
    }
    .await;
    t.check("chat", r, lines.iter().map(|l| l.to_uppercase()).collect::<Vec<_>>());

    // An unknown method: a status, not a hang or a dead connection.
    let r: Result<(), Error> = conn.call_with("no_such_method", &(), &opts).await;
    match r {
        Err(e) if e.code() == Code::UnknownMethod => t.ok("no_such_method", format!("-> {e}")),
        Err(e) => t.bad("no_such_method", format!("expected unknown_method, got {e}")),
        Ok(()) => t.bad("no_such_method", "expected unknown_method, got ok"),
    }

    // ping: round-trip time of a PING frame.
    match conn.ping().await {
        Ok(rtt) => t.ok("ping", format!("-> {rtt:?}")),
        Err(e) => t.bad("ping", format!("error {e}")),
    }

    t
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    init_logging();
    let mut config = ConnectionOptions::new("example-client");
    if let Some(w) = args.wait {
        config = config.wait(w.into());
    }

    let mut child = None;
    let dialed = if let Some(path) = &args.unix {
        match transport::unix::connect(path).await {
            Ok(tr) => Connection::dial(tr, &config).await,
            Err(e) => Err(Error::unavailable(e.to_string())),
        }
    } else if let Some(addr) = &args.tcp {
        match transport::tcp::connect(addr.as_str()).await {
            Ok(tr) => Connection::dial(tr, &config).await,
            Err(e) => Err(Error::unavailable(e.to_string())),
        }
    } else {
        let argv = args.spawn.as_deref().unwrap_or_default();
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        match transport::child::spawn(cmd, SpawnOptions::new("example")) {
            Ok((tr, c)) => {
                child = Some(c);
                Connection::dial(tr, &config).await
            }
            Err(e) => Err(Error::unavailable(e.to_string())),
        }
    };
    let conn = match dialed {
        Ok(c) => c,
        Err(e) => {
            eprintln!("example-client: cannot connect: {e}");
            if let Some(mut c) = child {
                if let Ok(Ok(status)) = tokio::time::timeout(Duration::from_secs(1), c.wait()).await {
                    eprintln!("example-client: the spawned provider exited: {status} (its stderr is logged above)");
                }
            }
            return ExitCode::FAILURE;
        }
    };

    let mut tally = run(&conn).await;
    conn.drain(Duration::from_secs(1)).await;
    drop(conn);

    // A spawned provider sees end-of-stream on its socket and exits.
    if let Some(mut c) = child {
        match tokio::time::timeout(Duration::from_secs(5), c.wait()).await {
            Ok(Ok(status)) if status.success() => tally.ok("child exit", format!("-> {status}")),
            Ok(Ok(status)) => tally.bad("child exit", format!("-> {status}")),
            Ok(Err(e)) => tally.bad("child exit", format!("wait failed: {e}")),
            Err(_) => {
                let _ = c.kill().await;
                tally.bad("child exit", "did not exit within 5 s of the connection closing; killed");
            }
        }
    }

    println!();
    println!("{} calls as expected, {} unexpected", tally.ok, tally.bad);
    if tally.bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
