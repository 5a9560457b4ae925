//! Log output. Human-readable lines by default; one JSON object per line
//! with `--log-format json` (or `HUBWIRE_LOG_FORMAT=json`). `RUST_LOG`
//! filters as usual (default `info`). A provider's stdout and stderr lines
//! arrive under the target `provider`, tagged with its name, replica and
//! stream.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people.
    Text,
    /// For machines: one JSON object per line.
    Json,
}

/// Installs the global subscriber, writing to stderr.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.with_target(true).with_ansi(std::io::stderr().is_terminal()).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
