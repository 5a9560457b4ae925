//! A provider called "example" that offers one method of each call kind.
//!
//! ```text
//! example-provider --unix /tmp/hw.sock        # listen on a Unix socket
//! example-provider --tcp 127.0.0.1:7070       # listen on TCP
//! example-client --spawn example-provider     # started by a parent (HUBWIRE_FD)
//! ```

use std::process::ExitCode;

use clap::Parser;
use hubwire::transport::{self, child::ENV_FD};
use hubwire::{ConnectionOptions, Error, ItemSink, ItemStream, Provider, Raw};
use hubwire_examples::{init_logging, DivError, DivideIn, GreetIn, GreetOut, Wait};
use serde_json::json;

/// Serves the "example" provider: echo, greet, divide, count, sum, chat.
///
/// With neither --unix nor --tcp, it expects to have been started by a
/// hubwire parent (HUBWIRE_FD set) and serves that parent.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Listen on this Unix socket path.
    #[arg(long, value_name = "PATH", conflicts_with = "tcp")]
    unix: Option<std::path::PathBuf>,
    /// Listen on this TCP address (host:port, e.g. 127.0.0.1:7070).
    #[arg(long, value_name = "ADDR")]
    tcp: Option<String>,
    /// How connections wait for bytes (default: HUBWIRE_WAIT, else efficient).
    #[arg(long, value_enum)]
    wait: Option<Wait>,
}

fn provider() -> Provider {
    Provider::new("example")
        // Raw bytes in, raw bytes out: no serialization at all.
        .unary("echo", |_ctx, input: Raw| async move { Ok(input) })
        .unary("greet", |_ctx, input: GreetIn| async move { Ok(GreetOut { greeting: format!("Hello, {}!", input.name) }) })
        .describe(
            "greet",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            json!({"type": "object", "properties": {"greeting": {"type": "string"}}, "required": ["greeting"]}),
            None,
        )
        // A typed failure: the caller gets `failure` with a DivError value,
        // not a string to parse.
        .unary("divide", |_ctx, DivideIn { a, b }: DivideIn| async move {
            if b == 0.0 {
                return Err(Error::failure(&DivError { kind: "division_by_zero".into() }));
            }
            Ok(a / b)
        })
        .describe(
            "divide",
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            json!({"type": "number"}),
            Some(json!({"type": "object", "properties": {"kind": {"const": "division_by_zero"}}, "required": ["kind"]})),
        )
        .server_stream("count", |_ctx, n: u32, sink: ItemSink<u32>| async move {
            for i in 0..n {
                sink.send(&i).await?;
            }
            Ok(())
        })
        .describe("count", json!({"type": "integer", "minimum": 0}), json!({"type": "integer", "minimum": 0}), None)
        .client_stream("sum", |_ctx, mut items: ItemStream<i64>| async move {
            let mut total: i64 = 0;
            while let Some(x) = items.next().await? {
                total = total.checked_add(x).ok_or_else(|| Error::invalid_argument("sum overflows i64"))?;
            }
            Ok(total)
        })
        .describe("sum", json!({"type": "integer"}), json!({"type": "integer"}), None)
        .bidi("chat", |_ctx, mut items: ItemStream<String>, sink: ItemSink<String>| async move {
            while let Some(line) = items.next().await? {
                sink.send(&line.to_uppercase()).await?;
            }
            Ok(())
        })
        .describe("chat", json!({"type": "string"}), json!({"type": "string"}), None)
}

/// Completes on Ctrl-C or SIGTERM, so that listeners are dropped (and a
/// Unix socket file removed) on the way out.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    init_logging();
    let mut config = ConnectionOptions::new("example");
    if let Some(w) = args.wait {
        config = config.wait(w.into());
    }

    let served: Result<(), String> = if let Some(path) = &args.unix {
        match transport::unix::UnixListener::bind(path) {
            Err(e) => Err(e.to_string()),
            Ok(listener) => tokio::select! {
                r = provider().serve(listener, config) => r.map_err(|e| e.to_string()),
                _ = shutdown_signal() => { tracing::info!("shutting down"); Ok(()) }
            },
        }
    } else if let Some(addr) = &args.tcp {
        match transport::tcp::TcpListener::bind(addr.as_str()).await {
            Err(e) => Err(e.to_string()),
            Ok(listener) => tokio::select! {
                r = provider().serve(listener, config) => r.map_err(|e| e.to_string()),
                _ = shutdown_signal() => { tracing::info!("shutting down"); Ok(()) }
            },
        }
    } else if transport::child::started_by_parent() {
        // Deliberately on stdout: the protocol runs on fd 3, so the parent
        // just logs this line (spec/PROTOCOL.md §10).
        println!("example-provider {} (pid {}): serving my parent over fd 3", env!("CARGO_PKG_VERSION"), std::process::id());
        match provider().serve_child(config).await {
            Ok(()) => {
                tracing::info!("parent went away; exiting");
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    } else {
        eprintln!(
            "example-provider: nothing to serve on.\n\
             Give it a listener:\n  \
               example-provider --unix /tmp/hw.sock\n  \
               example-provider --tcp 127.0.0.1:7070\n\
             or let a hubwire parent start it (which sets {ENV_FD}), e.g.:\n  \
               example-client --spawn example-provider"
        );
        return ExitCode::from(2);
    };

    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
