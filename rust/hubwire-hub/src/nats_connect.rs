//! Connecting to the NATS cluster of `[nats]` (or of `--nats` on the
//! command line): credentials and TLS files as `nats_config` checked
//! them, a bounded wait for the first connection, and reconnection
//! forever after (async-nats does it; links broken meanwhile fail their
//! calls `unavailable`, `spec/PROTOCOL.md` §13.5).

use std::time::Duration;

use async_nats::{Client, ConnectOptions, ServerAddr};

use crate::nats_config::{NatsAuth, NatsConfig};

/// How long the first connection to the cluster may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to `cfg`'s servers as `name` (shown in the servers'
/// monitoring). `Err` is why, in one line. With `keep_trying` (the hub)
/// it returns at once and connects in the background, so a hub whose
/// cluster is down serves its local providers meanwhile; else (the
/// command line) the first connection must succeed within
/// [`CONNECT_TIMEOUT`].
pub async fn connect(cfg: &NatsConfig, name: &str, keep_trying: bool) -> Result<Client, String> {
    let mut opts = match &cfg.auth {
        NatsAuth::None => ConnectOptions::new(),
        NatsAuth::UserPassword { user, password } => ConnectOptions::with_user_and_password(user.clone(), password.0.clone()),
        NatsAuth::Token(t) => ConnectOptions::with_token(t.0.clone()),
        NatsAuth::Creds(path) => {
            ConnectOptions::with_credentials_file(path).await.map_err(|e| format!("[nats] creds {}: {e}", path.display()))?
        }
    };
    if let Some(ca) = &cfg.ca {
        opts = opts.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let Some((cert, key)) = &cfg.identity {
        opts = opts.add_client_certificate(cert.clone(), key.clone());
    }
    // Each link's unread messages are bounded by the subscription
    // capacity (spec §13.6).
    opts = opts
        .name(name)
        .connection_timeout(CONNECT_TIMEOUT)
        .max_reconnects(None)
        .subscription_capacity(hubwire::transport::nats::LINK_PENDING);
    if keep_trying {
        opts = opts.retry_on_initial_connect();
    }
    let servers: Vec<ServerAddr> =
        cfg.servers.iter().map(|u| u.parse::<ServerAddr>().map_err(|e| format!("[nats] url {u:?}: {e}"))).collect::<Result<_, _>>()?;
    let shown = cfg.servers.join(", ");
    match tokio::time::timeout(CONNECT_TIMEOUT, opts.connect(servers)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("cannot connect to NATS at {shown}: {e}")),
        Err(_) => Err(format!("cannot connect to NATS at {shown}: no connection within {CONNECT_TIMEOUT:?}")),
    }
}

/// `[nats]` for the command line's `--nats URL[,URL…]`: no credentials
/// but those the URLs carry, the default prefix unless given.
pub fn from_flag(urls: &str, prefix: Option<&str>) -> Result<NatsConfig, String> {
    let servers: Vec<String> = urls.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect();
    if servers.is_empty() {
        return Err("--nats needs a URL, like nats://127.0.0.1:4222".into());
    }
    if let Some(p) = prefix {
        crate::nats_config::check_prefix(p).map_err(|e| format!("--nats-prefix {p:?}: {e}"))?;
    }
    for u in &servers {
        crate::nats_config::check_url(u).map_err(|e| format!("--nats: {e}"))?;
    }
    Ok(NatsConfig {
        line: 0,
        servers,
        auth: NatsAuth::None,
        ca: None,
        identity: None,
        prefix: prefix.unwrap_or(crate::nats_config::DEFAULT_PREFIX).to_string(),
        offer: false,
        route: false,
        links: crate::nats_config::DEFAULT_LINKS,
        remote_methods: crate::nats_config::DEFAULT_REMOTE_METHODS,
        max_links: crate::nats_config::DEFAULT_MAX_LINKS,
        discovery_timeout: Duration::from_millis(500),
    })
}
