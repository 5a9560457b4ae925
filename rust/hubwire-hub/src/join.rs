//! The hub's side of a NATS cluster (`[nats]`, `docs/hub.md` "Joining a
//! NATS cluster"): the connection, and the hub's own method
//! `hubwire.cluster` (what discovery sees, `discovery`).

use std::sync::Arc;

use hubwire::{ConnectionOptions, Provider, Token};

use crate::discovery::{self, CLUSTER_METHOD};
use crate::nats_config::NatsConfig;
use crate::nats_link::NatsDialer;
use crate::own_schemas;
use crate::registry::Registry;
use crate::remote::Cluster;

/// A hub joined to a cluster.
#[derive(Clone)]
pub struct Joined {
    /// The NATS connection (reconnects by itself).
    pub client: async_nats::Client,
    /// `[nats]`.
    pub cfg: Arc<NatsConfig>,
}

/// Connects the hub named `name` to `cfg`'s cluster (returns at once and
/// connects in the background if the cluster is not reachable yet), and
/// with `route`, gives the registry the cluster to open links through:
/// dialled with `options` and the hub's `token` in their HELLO.
pub async fn join(
    cfg: &NatsConfig,
    name: &str,
    reg: &Registry,
    options: &ConnectionOptions,
    token: Option<&Token>,
) -> Result<Joined, String> {
    let client = crate::nats_connect::connect(cfg, name, true).await?;
    let options = match token {
        Some(t) => options.clone().token(t.0.clone()),
        None => options.clone(),
    };
    let dialer = Arc::new(NatsDialer::new(client.clone(), &cfg.prefix, name));
    let _ = reg.cluster.set(Arc::new(Cluster::new(dialer, options, cfg.links, cfg.remote_methods)));
    Ok(Joined { client, cfg: Arc::new(cfg.clone()) })
}

/// Adds `hubwire.cluster` to the hub's own methods.
pub fn own_method(own: Provider, j: &Joined) -> Provider {
    let j = j.clone();
    own.unary(CLUSTER_METHOD, move |_ctx, (): ()| {
        let j = j.clone();
        async move {
            discovery::discover(&j.client, &j.cfg.prefix, j.cfg.discovery_timeout)
                .await
                .map_err(|e| hubwire::Error::unavailable(format!("cluster discovery: {e}")))
        }
    })
    .describe(CLUSTER_METHOD, own_schemas::no_input(), own_schemas::cluster_output(), None)
    .doc(CLUSTER_METHOD, "Every hubwire replica in the NATS cluster (discovery): provider, replica id, methods, links, calls")
}
