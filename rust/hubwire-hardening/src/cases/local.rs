//! What other local users and providers can reach: printed names, the
//! providers' environment, the Unix socket's mode and its peers.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use hubwire_frame::Frame;

use crate::suite::{Ctx, Outcome, ESCAPE_PREFIX, HUB_SECRET, HUB_SECRET_VAR};
use crate::wire::{self, Raw, Read};

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

/// Another local user (uid 65534) dials the main hub's socket. Expected:
/// refused: `connect` fails (mode 0600) or the hub closes the connection
/// (its uid not in `allow_uids`), with or without a GOAWAY, within 2 s of
/// its HELLO. Needs root to change uid (skipped, as a PASS saying so,
/// otherwise).
pub async fn unix_other_user(ctx: &Ctx) -> Outcome {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Ok("skipped: needs root to act as another user".into());
    }
    let mut raw = match Raw::unix_as(&ctx.main.socket, 65534).await? {
        Err(e) => return Ok(format!("uid 65534: connect refused ({e})")),
        Ok(raw) => raw,
    };
    raw.send(&wire::hello(), Duration::from_secs(5)).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        match raw.next(deadline.saturating_duration_since(tokio::time::Instant::now())).await {
            Read::Frame(Frame::Goaway { code, .. }) => return Ok(format!("uid 65534: closed by the hub ({code})")),
            Read::Closed => return Ok("uid 65534: closed by the hub".into()),
            Read::Frame(_) => {}
            Read::Bad(e) => return Err(format!("the hub sent uid 65534 bytes that do not decode: {e}")),
            Read::Timeout => return Err("uid 65534 was served: the hub's HELLO and no GOAWAY in 2 s".into()),
        }
    }
}
