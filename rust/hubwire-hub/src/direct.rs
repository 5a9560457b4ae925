//! The hub's half of the direct path (`spec/PROTOCOL.md` §14): the hub
//! keeps the control plane and hands data connections out.
//!
//! * [`offer`] answers a trusted client's `hubwire.direct`: it picks a
//!   ready replica of the method's provider as routing would, makes a
//!   socketpair, hands one end to the replica (ACCEPT) and the other to
//!   the client (DIRECT), then answers `ok`. A dialled provider's address
//!   is handed over instead (`via: address`), so a client that cannot
//!   receive descriptors (Node) can take the path too.
//! * [`reports`] is the service the hub offers on each replica's parent
//!   connection: `hubwire.report`, the counts of the calls the replica
//!   answered over direct connections, added to [`DirectCounts`] for
//!   `hubwire status`.
//!
//! The hub's per-provider limits do not apply on a direct connection; the
//! replica's own `max_calls` and its cap on direct connections do (§14.7).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use hubwire::direct::{DirectAsk, DirectReport, DIRECT_METHOD, REPORT_METHOD};
use hubwire::frame::{AcceptBody, DirectOffer, Via};
use hubwire::{Code, Error, Incoming, Message, Payload, Provider, ServeFuture};

use crate::config::Launch;
use crate::registry::{Registry, Replica};

/// How long handing a connection over may take: ACCEPT and DIRECT each
/// wait for their connection's queued frames to leave first.
pub const HANDOFF_TIMEOUT: Duration = Duration::from_secs(5);

/// What a replica's direct connections have served, as it reported.
#[derive(Default)]
pub struct DirectCounts {
    /// Calls answered over direct connections.
    pub calls: AtomicU64,
    /// Of those, answered with another code than `ok`.
    pub errors: AtomicU64,
    /// Direct connections open at the last report.
    pub open: AtomicU64,
}

/// Whether `method` is the hub's `hubwire.direct`.
pub fn is_offer(method: &str) -> bool {
    method == DIRECT_METHOD
}

/// Serves `hubwire.direct` for one client connection; `allowed`: the
/// client is trusted (§14.1).
pub fn offer(reg: &Arc<Registry>, allowed: bool, call: Incoming) -> Result<ServeFuture, Error> {
    let link = call.direct_link();
    let wanted = call.input().codec;
    let ask = DirectAsk::decode(call.input().clone()).map_err(|m| Error::invalid_argument(format!("{DIRECT_METHOD}: {m}")))?;
    let reg = reg.clone();
    Ok(Box::pin(async move {
        if !allowed || !link.negotiated() {
            return Err(Error::new(Code::Unauthenticated, "the direct path is only for trusted clients that sent `direct` in HELLO"));
        }
        let route = reg
            .route(&ask.method)
            .ok_or_else(|| Error::new(Code::UnknownMethod, format!("unknown method {:?}: no provider offers it", ask.method)))?;
        let p = &route.provider;
        let (replica, conn) = p.pick().ok_or_else(|| Error::unavailable(format!("no replica of provider {:?} is ready", p.config.name)))?;
        if conn.peer().direct.is_none() {
            return Err(Error::invalid_argument(format!(
                "provider {:?} does not take the direct path (no `direct` in its HELLO)",
                p.config.name
            )));
        }
        let methods = reg.routes().into_iter().filter(|r| Arc::ptr_eq(&r.provider, p)).map(|r| r.info.name.clone()).collect();
        let mut offer = DirectOffer {
            provider: p.config.name.clone(),
            replica: replica.index as u32,
            methods,
            via: Via::Fd,
            address: None,
            token: None,
        };
        let hand_over = async {
            match &p.config.launch {
                Launch::Exec { .. } => {
                    if !ask.takes("fd") {
                        return Err(Error::invalid_argument(format!(
                            "provider {:?} is spawned by the hub: its direct path is a descriptor, and the client takes only {:?}",
                            p.config.name,
                            ask.via.as_deref().unwrap_or_default()
                        )));
                    }
                    if !link.passes_fds() {
                        return Err(Error::invalid_argument(format!(
                            "provider {:?} is spawned by the hub: its direct path is a descriptor, which {} cannot carry",
                            p.config.name,
                            link.describe()
                        )));
                    }
                    // Each end of a socketpair reports its creator, the hub,
                    // as its peer (`SO_PEERCRED`): a client of another user
                    // and the replica would both take the other for the
                    // hub's user and might share memory (§11.4, §14.4).
                    if !hubwire::transport::shm::may_share_with(link.peer_uid()) {
                        return Err(Error::invalid_argument(format!(
                            "provider {:?} is spawned by the hub: its direct path is a descriptor, handed only to a client of the hub's own user or root",
                            p.config.name
                        )));
                    }
                    let (theirs, yours) =
                        std::os::unix::net::UnixStream::pair().map_err(|e| Error::unavailable(format!("socketpair: {e}")))?;
                    let (theirs, yours) = (OwnedFd::from(theirs), OwnedFd::from(yours));
                    conn.send_accept(AcceptBody { client: link.describe() }, theirs).await?;
                    link.send(offer, Some(yours)).await?;
                }
                Launch::Unix(_) | Launch::Tcp(_) if !ask.takes("address") => {
                    return Err(Error::invalid_argument(format!(
                        "provider {:?} is dialled by the hub: its direct path is an address, and the client takes only {:?}",
                        p.config.name,
                        ask.via.as_deref().unwrap_or_default()
                    )));
                }
                Launch::Unix(path) => {
                    (offer.via, offer.address) = (Via::Address, Some(format!("unix:{}", path.display())));
                    link.send(offer, None).await?;
                }
                Launch::Tcp(addr) => {
                    (offer.via, offer.address) = (Via::Address, Some(format!("tcp:{addr}")));
                    link.send(offer, None).await?;
                }
                // A link through NATS reaches another hub or a replica on
                // another host: no socket of ours reaches it (spec §13).
                Launch::Nats(_) => {
                    return Err(Error::invalid_argument(format!(
                        "provider {:?} is reached through NATS: it has no direct path",
                        p.config.name
                    )));
                }
            }
            Ok::<_, Error>(())
        };
        tokio::time::timeout(HANDOFF_TIMEOUT, hand_over)
            .await
            .map_err(|_| Error::unavailable(format!("handing over a connection took more than {HANDOFF_TIMEOUT:?}")))??;
        tracing::debug!(client = %link.describe(), provider = %p.config.name, replica = replica.index, "direct connection handed over");
        let codec = <() as Message>::codec_for(wanted);
        Ok(Some(Payload { codec, bytes: ().encode(codec).map_err(Error::defect)? }))
    }))
}

/// The service on a replica's parent connection: `hubwire.report` adds
/// the replica's direct calls to its counts.
pub fn reports(replica: &Arc<Replica>) -> Provider {
    let r = replica.clone();
    Provider::new("hub").unary(REPORT_METHOD, move |_ctx, rep: DirectReport| {
        let c = &r.direct;
        c.calls.fetch_add(rep.calls, Relaxed);
        c.errors.fetch_add(rep.errors, Relaxed);
        c.open.store(rep.open, Relaxed);
        async move { Ok(()) }
    })
}
