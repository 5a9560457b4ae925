//! What other local users and providers can reach: printed names, the
//! providers' environment, the Unix socket's mode and its peers.

use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use crate::suite::{Ctx, Outcome, ESCAPE_PREFIX, HUB_SECRET, HUB_SECRET_VAR};
use crate::wire;

/// `hubwire list` and `hubwire status` with provider `esc` offering
/// methods named `ESC[2J ESC]0;pwned BEL ESC[31m red.…`. Expected: no
/// control character but newline and tab reaches the terminal: they are
/// printed escaped (`\u{1b}` or the like).
pub async fn escapes_in_names(ctx: &Ctx) -> Outcome {
    let mut found = false;
    for cmd in ["list", "status"] {
        let out =
            tokio::process::Command::new(ctx.hub_bin()).arg(cmd).arg("--hub").arg(format!("unix:{}", ctx.main.socket.display())).output();
        let out = tokio::time::timeout(Duration::from_secs(10), out)
            .await
            .map_err(|_| format!("hubwire {cmd}: no answer in 10 s"))?
            .map_err(|e| e.to_string())?;
        let text = [out.stdout, out.stderr].concat();
        found |= String::from_utf8_lossy(&text).contains("red.");
        if let Some(c) = text.iter().find(|&&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f) {
            return Err(format!("hubwire {cmd} printed control byte 0x{c:02x} raw"));
        }
    }
    if found {
        Ok("printed escaped".into())
    } else {
        Ok(format!("no raw control bytes (provider esc not listed: its names {ESCAPE_PREFIX:?}… refused?)"))
    }
}

/// Provider `m` lists its environment. Expected: a minimal one (PATH,
/// HOME, the protocol's HUBWIRE_FD, what its config lists): not the hub's
/// own secret variable.
pub async fn provider_env(ctx: &Ctx) -> Outcome {
    let conn = ctx.main.connect().await?;
    let env = tokio::time::timeout(Duration::from_secs(5), conn.call::<(), Vec<String>>("m.env", &()))
        .await
        .map_err(|_| "m.env: no answer in 5 s")?
        .map_err(|e| e.to_string())?;
    if env.iter().any(|v| v.contains(HUB_SECRET)) {
        Err(format!("the provider sees the hub's {HUB_SECRET_VAR} (and {} variables)", env.len()))
    } else {
        Ok(format!("{} variables, none of the hub's secrets", env.len()))
    }
}

/// The main hub was started with umask 000. Expected: its socket is
/// created 0600 (`unix_mode`'s default) all the same.
pub async fn unix_socket_mode(ctx: &Ctx) -> Outcome {
    let mode = std::fs::metadata(&ctx.main.socket).map_err(|e| e.to_string())?.permissions().mode() & 0o777;
    if mode & 0o077 == 0 {
        Ok(format!("mode {mode:04o}"))
    } else {
        Err(format!("socket mode {mode:04o} under umask 000: other users can connect"))
    }
}

/// How the probe child's attempt ended (its exit status).
const REFUSED_AT_CONNECT: i32 = 10;
const CLOSED_BY_HUB: i32 = 11;
const SERVED: i32 = 20;

/// Another local user (uid 65534) dials the main hub's socket. Expected:
/// refused: `connect` fails (mode 0600) or the hub closes the connection
/// (its uid not in `allow_uids`). Needs root to change uid (skipped, as a
/// PASS saying so, otherwise).
pub async fn unix_other_user(ctx: &Ctx) -> Outcome {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Ok("skipped: needs root to act as another user".into());
    }
    let path = CString::new(ctx.main.socket.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    let hello = wire::hello().to_vec();
    let mut cmd = std::process::Command::new("true");
    // SAFETY: between fork and exec the closure makes only async-signal-safe
    // calls (setgid, setuid, socket, connect, write, poll, read, _exit) on
    // memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::_exit(attempt_as_nobody(&path, &hello));
        });
    }
    let status = tokio::task::spawn_blocking(move || cmd.status()).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    match status.code() {
        Some(REFUSED_AT_CONNECT) => Ok("uid 65534: connect refused".into()),
        Some(CLOSED_BY_HUB) => Ok("uid 65534: closed by the hub".into()),
        Some(SERVED) => Err("uid 65534 was served: the hub's HELLO and no GOAWAY".into()),
        other => Err(format!("the probe as uid 65534 ended with {other:?}")),
    }
}

/// In the forked child: become uid/gid 65534, dial, send HELLO, read for
/// up to 2 s. Returns the exit status to report.
///
/// # Safety
/// Runs between fork and exec: only async-signal-safe calls.
unsafe fn attempt_as_nobody(path: &CString, hello: &[u8]) -> i32 {
    if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
        return 30;
    }
    let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    let mut addr: libc::sockaddr_un = std::mem::zeroed();
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_bytes();
    if fd < 0 || bytes.len() >= addr.sun_path.len() {
        return 31;
    }
    for (i, b) in bytes.iter().enumerate() {
        addr.sun_path[i] = *b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    if libc::connect(fd, &addr as *const libc::sockaddr_un as *const libc::sockaddr, len) != 0 {
        return REFUSED_AT_CONNECT;
    }
    libc::write(fd, hello.as_ptr() as *const libc::c_void, hello.len());
    // Walk the frames the hub sends: a GOAWAY or the end means refused.
    let mut buf = [0u8; 65536];
    let (mut have, mut at) = (0usize, 0usize);
    let mut waited = 0;
    while waited < 2000 {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        if libc::poll(&mut pfd, 1, 100) == 0 {
            waited += 100;
            continue;
        }
        let n = libc::read(fd, buf.as_mut_ptr().add(have) as *mut libc::c_void, buf.len() - have);
        if n <= 0 {
            return CLOSED_BY_HUB;
        }
        have += n as usize;
        while at + 12 <= have {
            if buf[at + 5] == 0x0A {
                return CLOSED_BY_HUB;
            }
            let body = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
            at += 12 + body;
        }
        if at > buf.len() {
            break;
        }
    }
    SERVED
}
