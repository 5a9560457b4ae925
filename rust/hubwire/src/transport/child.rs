//! Child-process providers (`spec/PROTOCOL.md` §10). The parent makes a
//! socketpair and starts the child with one end as descriptor 3 and
//! `HUBWIRE_FD=3` in its environment. The protocol never touches the
//! child's stdout or stderr: those are read line by line and become log
//! lines, so a stray `print` in a plugin cannot corrupt the framing. A
//! line is kept up to [`SpawnOptions::line_max`] bytes; the rest of it is
//! discarded as it is read and only counted, so a child that prints
//! without newlines costs a bounded buffer, not its whole output.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Bytes read from a child's stdout or stderr at a time.
const LOG_READ: usize = 8192;
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

/// [`SpawnOptions::line_max`] by default: 4 KiB.
pub const DEFAULT_LINE_MAX: usize = 4096;

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
    /// The longest stdout/stderr line passed to `log`; a longer one is cut
    /// there and ends with `… [N bytes cut]`.
    pub line_max: usize,
}

impl SpawnOptions {
    /// Options with a name and the default log sink.
    pub fn new(name: impl Into<String>) -> SpawnOptions {
        SpawnOptions { name: name.into(), log: None, pipe_stdin: false, line_max: DEFAULT_LINE_MAX }
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

/// Reads `stream` into lines of at most `opts.line_max` bytes and hands
/// each to the log sink. Holds one read buffer and one line, never more.
async fn forward_lines(stream: impl AsyncRead + Unpin, opts: SpawnOptions, which: &'static str) {
    let mut reader = BufReader::with_capacity(LOG_READ, stream);
    let mut line = LineCut::new(opts.line_max);
    loop {
        let buf = match reader.fill_buf().await {
            Ok(b) if !b.is_empty() => b,
            // End of stream (or a broken pipe): a last line without newline.
            _ => {
                if let Some(text) = line.take() {
                    emit(&opts, which, &text);
                }
                return;
            }
        };
        let (used, ended) = line.feed(buf);
        reader.consume(used);
        if ended {
            if let Some(text) = line.take() {
                emit(&opts, which, &text);
            }
        }
    }
}

fn emit(opts: &SpawnOptions, which: &str, text: &str) {
    match &opts.log {
        Some(sink) => sink(&opts.name, which, text),
        None => tracing::info!(target: "hubwire::child", provider = %opts.name, stream = which, "{text}"),
    }
}

/// One line being read: its first `max` bytes, and how many more were cut.
struct LineCut {
    kept: Vec<u8>,
    cut: usize,
    max: usize,
}

impl LineCut {
    fn new(max: usize) -> LineCut {
        LineCut { kept: Vec::new(), cut: 0, max }
    }

    /// Takes bytes up to and including the first newline of `buf`: how
    /// many were taken, and whether the line ended.
    fn feed(&mut self, buf: &[u8]) -> (usize, bool) {
        let (body, used, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = self.max.saturating_sub(self.kept.len()).min(body.len());
        self.kept.extend_from_slice(&body[..room]);
        self.cut += body.len() - room;
        (used, ended)
    }

    /// The line so far as text (a trailing `\r` dropped, the cut noted),
    /// leaving it empty; `None` if nothing was read.
    fn take(&mut self) -> Option<String> {
        if self.kept.is_empty() && self.cut == 0 {
            return None;
        }
        if self.cut == 0 && self.kept.last() == Some(&b'\r') {
            self.kept.pop();
        }
        let mut text = String::from_utf8_lossy(&self.kept).into_owned();
        if self.cut > 0 {
            text.push_str(&format!("… [{} bytes cut]", self.cut));
        }
        self.kept.clear();
        self.cut = 0;
        Some(text)
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

#[cfg(test)]
mod tests {
    use super::LineCut;

    #[test]
    fn a_long_line_keeps_its_first_bytes_and_counts_the_rest() {
        let mut l = LineCut::new(4);
        assert_eq!(l.feed(b"abcdef"), (6, false));
        assert_eq!(l.feed(b"gh\nnext"), (3, true));
        assert_eq!(l.kept.len(), 4, "no more than max kept");
        assert_eq!(l.take().as_deref(), Some("abcd… [4 bytes cut]"));
        assert_eq!(l.feed(b"ok\r\n"), (4, true));
        assert_eq!(l.take().as_deref(), Some("ok"));
        assert_eq!(l.take(), None);
    }
}
