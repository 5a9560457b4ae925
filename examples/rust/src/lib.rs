//! Types shared by `example-provider` and `example-client`, and the bits of
//! command-line plumbing both use. In a real project the provider would
//! publish these (or its HELLO schemas would be used to generate them).

use serde::{Deserialize, Serialize};

/// The input of `greet`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GreetIn {
    pub name: String,
}

/// The output of `greet`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GreetOut {
    pub greeting: String,
}

/// The input of `divide`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DivideIn {
    pub a: f64,
    pub b: f64,
}

/// The typed failure `divide` declares (its HELLO `errors` schema).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DivError {
    /// Always `"division_by_zero"` here.
    pub kind: String,
}

/// `--wait` on both binaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Wait {
    /// Block in the reactor at once; no CPU while idle.
    Efficient,
    /// Spin briefly after activity before blocking; lower latency.
    LowLatency,
}

impl From<Wait> for hubwire::WaitMode {
    fn from(w: Wait) -> hubwire::WaitMode {
        match w {
            Wait::Efficient => hubwire::WaitMode::Efficient,
            Wait::LowLatency => hubwire::WaitMode::low_latency(),
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`). Stdout is left
/// to the program's own output. Under a hubwire parent (`HUBWIRE_FD` set)
/// the parent timestamps and tags each line itself, so lines go out bare.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    if std::env::var_os(hubwire::transport::child::ENV_FD).is_some() {
        fmt.without_time().init();
    } else {
        fmt.init();
    }
}
