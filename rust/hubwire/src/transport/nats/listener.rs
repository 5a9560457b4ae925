//! A replica's side (`spec/PROTOCOL.md` §13.2, §13.7): a NATS micro
//! service whose endpoints are the connect subjects (one per method, the
//! provider's, the replica's own, all in the queue group `hubwire`). Each
//! connect request becomes a [`NatsLink`] handed out by `poll_accept`, so
//! `Provider::serve(listener, …)` serves NATS like a socket. async-nats's
//! service module answers `$SRV.PING`/`INFO`/`STATS` from the same
//! endpoints, with the calls counted here as each endpoint's `data`.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_nats::service::{Service, ServiceExt};
use async_nats::Client;
use futures_util::stream::{select_all, StreamExt};
use hubwire_frame::{Code, MethodInfo};
use tokio::sync::mpsc;

use super::link::NatsLink;
use super::wire::{self, ConnectReply, Target, LINK_VERSION, QUEUE_GROUP};
use super::NatsError;
use crate::transport::{DynTransport, Listener};

/// Links accepted but not yet taken by `poll_accept`; a connect request
/// beyond is refused `resource_exhausted`.
const BACKLOG: usize = 128;

/// What a replica offers on NATS.
#[derive(Clone, Debug)]
pub struct Offer {
    /// The subject prefix (§13.1), `hubwire` by default.
    pub prefix: String,
    /// The provider's name (its HELLO `peer` name).
    pub provider: String,
    /// Its version for `$SRV` (semver).
    pub version: String,
    /// The methods, one connect subject each.
    pub methods: Vec<MethodInfo>,
}

impl Offer {
    /// An offer of `methods` by `provider`, under the default prefix.
    pub fn new(provider: impl Into<String>, methods: Vec<MethodInfo>) -> Offer {
        Offer { prefix: wire::DEFAULT_PREFIX.into(), provider: provider.into(), version: "0.0.0".into(), methods }
    }
}

/// Calls served per method, for `$SRV.STATS` (counted by whoever serves
/// the links: `hubwire::nats::serve`).
#[derive(Default, Debug)]
pub struct CallCounts {
    by_method: Mutex<HashMap<String, Arc<AtomicU64>>>,
}

impl CallCounts {
    /// Counts one call of `method` (only methods offered are counted).
    pub fn count(&self, method: &str) {
        if let Some(n) = self.by_method.lock().unwrap().get(method) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Calls of `method` so far.
    pub fn get(&self, method: &str) -> u64 {
        self.by_method.lock().unwrap().get(method).map_or(0, |n| n.load(Ordering::Relaxed))
    }
}

/// A replica listening on NATS. Dropping it unsubscribes every subject
/// (connect and `$SRV`), so no new link reaches it; links already open
/// live on.
pub struct NatsListener {
    links: Mutex<mpsc::Receiver<NatsLink>>,
    replica: String,
    label: String,
    calls: Arc<CallCounts>,
    task: tokio::task::JoinHandle<()>,
    service: Option<Service>,
}

impl NatsListener {
    /// Starts the micro service and subscribes the connect subjects.
    pub async fn bind(client: Client, offer: Offer) -> Result<NatsListener, NatsError> {
        let fail = |what: &str, e: &dyn std::fmt::Display| NatsError::new(Code::Unavailable, format!("{what}: {e}"));
        let calls = Arc::new(CallCounts::default());
        {
            let mut by = calls.by_method.lock().unwrap();
            for m in &offer.methods {
                by.insert(m.name.clone(), Arc::default());
            }
        }
        let stats_calls = calls.clone();
        let meta = HashMap::from([
            ("hubwire.protocol".to_string(), "1".to_string()),
            ("hubwire.provider".to_string(), offer.provider.clone()),
            ("hubwire.prefix".to_string(), offer.prefix.clone()),
        ]);
        let service = client
            .service_builder()
            .description(format!("hubwire provider {}", offer.provider))
            .metadata(meta)
            .queue_group(QUEUE_GROUP)
            // `-provider` and `-replica` are no method's token (§13.7).
            .stats_handler(move |endpoint: String, _| match wire::untoken(&endpoint) {
                Some(method) => serde_json::json!({ "calls": stats_calls.get(&method) }),
                None => serde_json::Value::Null,
            })
            .start(wire::service_name(&offer.provider), &offer.version)
            .await
            .map_err(|e| fail("start the NATS micro service", &e))?;
        let replica = service.info().await.id;
        let mut endpoints = Vec::new();
        let mut add = |name: String, subject: String, meta: Vec<(&str, String)>| {
            let builder = service.endpoint_builder().name(name).queue_group(QUEUE_GROUP);
            let meta: HashMap<String, String> = meta.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            endpoints.push(async move { builder.metadata(meta).add(subject).await });
        };
        for m in &offer.methods {
            let subject = Target::Method(m.name.clone()).subject(&offer.prefix);
            add(wire::token(&m.name), subject, vec![("hubwire.method", m.name.clone()), ("hubwire.kind", m.kind.name().to_string())]);
        }
        add(
            "-provider".into(),
            Target::Provider(offer.provider.clone()).subject(&offer.prefix),
            vec![("hubwire.connect", "provider".into())],
        );
        add("-replica".into(), Target::Replica(replica.clone()).subject(&offer.prefix), vec![("hubwire.connect", "replica".into())]);
        let mut streams = Vec::new();
        for e in endpoints {
            streams.push(e.await.map_err(|e| fail("subscribe a connect subject", &e))?);
        }
        round_trip(&client).await.map_err(|e| fail("a round trip to the NATS server", &e))?;
        let (tx, rx) = mpsc::channel(BACKLOG);
        let label = format!("nats:{}.p.{}@{replica}", offer.prefix, wire::token(&offer.provider));
        let task = tokio::spawn(answer(client, select_all(streams), tx, replica.clone(), offer.provider.clone()));
        Ok(NatsListener { links: Mutex::new(rx), replica, label, calls, task, service: Some(service) })
    }

    /// This replica's id (§13.1), as in its connect replies and `$SRV`.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The calls counted per method for `$SRV.STATS`.
    pub fn calls(&self) -> Arc<CallCounts> {
        self.calls.clone()
    }
}

/// Sends a message to ourselves and waits for it: the server handles one
/// client's operations in order, so once it is back the server has every
/// subscription made before, and a dial that starts after `bind` finds
/// them (on this server; other nodes of a cluster learn of them shortly).
/// (`Client::flush` only writes out the client's buffer.)
async fn round_trip(client: &Client) -> Result<(), String> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.map_err(|e| e.to_string())?;
    client.publish(inbox, bytes::Bytes::new()).await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(std::time::Duration::from_secs(10), sub.next()).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("connection closed".into()),
        Err(_) => Err("no answer within 10 s".into()),
    }
}

/// Answers connect requests until the listener goes: a new link subject
/// per request, subscribed before the reply (§13.2 step 3).
async fn answer(
    client: Client,
    mut requests: futures_util::stream::SelectAll<async_nats::service::endpoint::Endpoint>,
    links: mpsc::Sender<NatsLink>,
    replica: String,
    provider: String,
) {
    while let Some(request) = requests.next().await {
        let reply = match wire::parse_request(&request.message.payload) {
            Err(refusal) => ConnectReply::refused(refusal),
            Ok(req) => match links.try_reserve() {
                Err(_) => ConnectReply::refuse("resource_exhausted", "replica takes no more links now"),
                Ok(slot) => {
                    let inbox = client.new_inbox();
                    match client.subscribe(inbox.clone()).await {
                        Err(e) => ConnectReply::refuse("unavailable", format!("subscribe: {e}")),
                        Ok(sub) => {
                            let label = format!("nats:{}←{}", inbox, req.peer.as_deref().unwrap_or("?"));
                            slot.send(NatsLink::new(client.clone(), sub, req.link, label));
                            ConnectReply {
                                hubwire: LINK_VERSION,
                                link: Some(inbox),
                                replica: Some(replica.clone()),
                                provider: Some(provider.clone()),
                                error: None,
                            }
                        }
                    }
                }
            },
        };
        let body = serde_json::to_vec(&reply).expect("JSON");
        if let Err(e) = request.respond(Ok(body.into())).await {
            tracing::debug!("nats: answering a connect request failed: {e}");
        }
    }
}

impl Listener for NatsListener {
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<DynTransport>> {
        match self.links.lock().unwrap().poll_recv(cx) {
            Poll::Ready(Some(link)) => Poll::Ready(Ok(Arc::new(link))),
            Poll::Ready(None) => Poll::Ready(Err(io::Error::new(io::ErrorKind::NotConnected, format!("{}: stopped", self.label)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn describe(&self) -> String {
        self.label.clone()
    }
}

impl Drop for NatsListener {
    fn drop(&mut self) {
        self.task.abort();
        if let (Some(service), Ok(h)) = (self.service.take(), tokio::runtime::Handle::try_current()) {
            h.spawn(async move {
                let _ = service.stop().await;
            });
        }
    }
}
