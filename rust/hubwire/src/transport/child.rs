//! Child-process providers (`spec/PROTOCOL.md` §10). The parent makes a
//! socketpair and starts the child with one end as descriptor 3 and
//! `HUBWIRE_FD=3` in its environment. The protocol never touches the
//! child's stdout or stderr: those are read line by line and become log
//! lines, so a stray `print` in a plugin cannot corrupt the framing.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use super::fd::FdTransport;

/// The descriptor the child finds its end of the socketpair on.
pub const CHILD_FD: i32 = 3;
/// The environment variable that tells a child where its socket is.
pub const ENV_FD: &str = "HUBWIRE_FD";

/// A transport over the socketpair to (or from) a child process.
pub type ChildTransport = FdTransport<UnixStream>;

/// Receives each line a child prints: (provider name, `stdout` or `stderr`,
/// the line without its newline).
pub type LogSink = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// Options for [`spawn`].
#[derive(Clone)]
pub struct SpawnOptions {
    /// The name the child's log lines carry.
    pub name: String,
    /// Where log lines go; `None` sends them to `tracing` at info level
    /// under the target `hubwire::child`.
    pub log: Option<LogSink>,
    /// Give the child a pipe on stdin (left in `Child::stdin`) instead of
    /// `/dev/null`, for parents that also drive the child by hand (the
    /// conformance runner).
    pub pipe_stdin: bool,
}

impl SpawnOptions {
    /// Options with a name and the default log sink.
    pub fn new(name: impl Into<String>) -> SpawnOptions {
        SpawnOptions { name: name.into(), log: None, pipe_stdin: false }
    }
}

/// Starts `command` as a child provider. Returns the parent's end of the
/// connection and the child process (killed when dropped).
pub fn spawn(mut command: Command, opts: SpawnOptions) -> io::Result<(ChildTransport, Child)> {
    let (ours, theirs) = UnixStream::pair()?;
    let fd = theirs.as_raw_fd();
    command
        .env(ENV_FD, CHILD_FD.to_string())
        .stdin(if opts.pipe_stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: between fork and exec only async-signal-safe calls (dup2,
    // fcntl) are made.
    unsafe {
        command.pre_exec(move || {
            if fd == CHILD_FD {
                // Already in place: just let it survive exec.
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(fd, CHILD_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| io::Error::new(e.kind(), format!("spawn provider {}: {e}", opts.name)))?;
    drop(theirs);
    let pid = child.id().unwrap_or(0);
    if let Some(out) = child.stdout.take() {
        tokio::spawn(forward_lines(out, opts.clone(), "stdout"));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(forward_lines(err, opts.clone(), "stderr"));
    }
    ours.set_nonblocking(true)?;
    let transport = FdTransport::new(ours, format!("child:{}[{pid}]", opts.name))?;
    Ok((transport, child))
}

async fn forward_lines(stream: impl AsyncRead + Unpin, opts: SpawnOptions, which: &'static str) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                while matches!(line.last(), Some(b'\n' | b'\r')) {
                    line.pop();
                }
                let text = String::from_utf8_lossy(&line);
                match &opts.log {
                    Some(sink) => sink(&opts.name, which, &text),
                    None => tracing::info!(target: "hubwire::child", provider = %opts.name, stream = which, "{text}"),
                }
            }
        }
    }
}

/// Whether this process was started by a hubwire parent (`HUBWIRE_FD` is
/// set), before [`from_env`] takes the descriptor.
pub fn started_by_parent() -> bool {
    std::env::var_os(ENV_FD).is_some()
}

/// In a child started by [`spawn`] (or any parent following §10): the
/// transport to the parent, or `None` if `HUBWIRE_FD` is not set.
pub fn from_env() -> io::Result<Option<ChildTransport>> {
    let Ok(value) = std::env::var(ENV_FD) else { return Ok(None) };
    let fd: i32 =
        value.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{ENV_FD}={value:?} is not a descriptor number")))?;
    // SAFETY: the parent handed us this descriptor for exactly this use;
    // we take ownership of it once.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    std::env::remove_var(ENV_FD);
    stream.set_nonblocking(true)?;
    Ok(Some(FdTransport::new(stream, format!("parent:fd{fd}"))?))
}
