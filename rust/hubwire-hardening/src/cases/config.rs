//! Hostile or careless configs, each on a hub of its own that should
//! refuse to start.

use std::time::Duration;

use crate::hub::Launch;
use crate::suite::{Ctx, Outcome};

/// `unix = "notes.txt"` where notes.txt is a regular file. Expected: the
/// hub refuses to start (it only ever replaces a socket) and the file is
/// left as it was.
pub async fn unix_at_regular_file(ctx: &Ctx) -> Outcome {
    let dir = ctx.dir("notes");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "my notes\n").map_err(|e| e.to_string())?;
    let started = crate::hub::HubProc::start(&ctx.hub_bin(), &dir, "[hub]\nunix = \"notes.txt\"\n", &Launch::default());
    let intact = std::fs::read_to_string(&notes).ok().as_deref() == Some("my notes\n");
    match (started, intact) {
        (Err(why), true) => Ok(format!("refused, file intact: {why}")),
        (Err(why), false) => Err(format!("refused, but notes.txt was replaced: {why}")),
        (Ok(_), true) => Err("the hub started (notes.txt intact?)".into()),
        (Ok(_), false) => Err("the hub started and replaced notes.txt with its socket".into()),
    }
}

/// A config file with mode 0666. Expected: refused (a config writable by
/// others can make the hub run anything), unless `--allow-insecure-config`.
pub async fn world_writable(ctx: &Ctx) -> Outcome {
    let config = format!("[hub]\nunix = \"hub.sock\"\n\n[[provider]]\nname = \"t\"\nexec = [\"{}\"]\n", ctx.test_provider());
    let launch = Launch { config_mode: Some(0o666), ..Launch::default() };
    match crate::hub::HubProc::start(&ctx.hub_bin(), &ctx.dir("writable"), &config, &launch) {
        Err(why) => Ok(format!("refused: {why}")),
        Ok(_) => Err("the hub loaded a world-writable config".into()),
    }
}

/// The config given as a symlink owned by another user (uid 65534) to a
/// file of ours. Expected: refused by default (the link's owner can point
/// it anywhere, so chooses what the hub runs), like a config writable by
/// others; `--allow-insecure-config` loads it anyway. (A link of the
/// hub's own user is followed and its target checked.) Needs root to give
/// the link away (skipped, as a PASS saying so, otherwise).
pub async fn symlink(ctx: &Ctx) -> Outcome {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Ok("skipped: needs root to give a symlink to another user".into());
    }
    let launch = Launch { config_symlink: Some(65534), ..Launch::default() };
    match crate::hub::HubProc::start(&ctx.hub_bin(), &ctx.dir("symlink"), "[hub]\nunix = \"hub.sock\"\n", &launch) {
        Err(why) => Ok(format!("refused: {why}")),
        Ok(_) => Err("the hub loaded a config through a symlink another user owns".into()),
    }
}

/// `tcp = "0.0.0.0:0"` with neither TLS nor a token. Expected: refused
/// unless `allow_insecure = true`. (The config has no provider, and a hub
/// that does start is killed at once: nothing is served to the network.)
pub async fn public_without_auth(ctx: &Ctx) -> Outcome {
    match crate::hub::HubProc::start(&ctx.hub_bin(), &ctx.dir("public"), "[hub]\ntcp = \"0.0.0.0:0\"\n", &Launch::default()) {
        Err(why) => Ok(format!("refused: {why}")),
        Ok(mut hub) => {
            hub.stop(Duration::from_secs(2));
            Err("the hub listened on 0.0.0.0 with neither TLS nor a token".into())
        }
    }
}
