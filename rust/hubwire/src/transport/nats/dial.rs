//! Opening a link as the dialer (`spec/PROTOCOL.md` §13.2): subscribe our
//! link subject, send the connect request (no responders: fail at once),
//! read the reply.

use std::time::Duration;

use async_nats::client::RequestErrorKind;
use async_nats::Client;
use hubwire_frame::Code;

use super::link::NatsLink;
use super::wire::{self, ConnectReply, ConnectRequest, Target, LINK_VERSION};
use super::NatsError;

/// How a dialer opens a link.
#[derive(Clone, Debug)]
pub struct DialOptions {
    /// The subject prefix of the deployment (§13.1), `hubwire` by default.
    pub prefix: String,
    /// How long to wait for the connect reply (§13.2 step 6), 1 s by
    /// default.
    pub connect_timeout: Duration,
    /// Our name, sent in the connect request for the acceptor's logs.
    pub peer: Option<String>,
}

impl Default for DialOptions {
    fn default() -> DialOptions {
        DialOptions { prefix: wire::DEFAULT_PREFIX.into(), connect_timeout: Duration::from_secs(1), peer: None }
    }
}

/// Whom a link reached: from the connect reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkInfo {
    /// The replica's id: two links with the same id reach the same process.
    pub replica: String,
    /// The provider's name.
    pub provider: String,
    /// The connect subject the link was opened on.
    pub subject: String,
}

/// Opens a link to `target` through `client`: the transport (give it to
/// `Connection::dial`) and whom it reached. Fails `unavailable` at once
/// when nobody offers `target`, or after `connect_timeout` without a reply;
/// a replica's refusal fails with its code.
pub async fn dial(client: &Client, target: &Target, opts: &DialOptions) -> Result<(NatsLink, LinkInfo), NatsError> {
    let subject = target.subject(&opts.prefix);
    let unavailable = |what: String| NatsError::new(Code::Unavailable, what);
    let inbox = client.new_inbox();
    // Subscribed before the request, so the acceptor's first bytes (which
    // may overtake its reply) are kept.
    let sub = client.subscribe(inbox.clone()).await.map_err(|e| unavailable(format!("subscribe {inbox}: {e}")))?;
    let body = serde_json::to_vec(&ConnectRequest { hubwire: LINK_VERSION, link: inbox, peer: opts.peer.clone() }).expect("JSON");
    let request = async_nats::Request::new().payload(body.into()).timeout(Some(opts.connect_timeout));
    let reply = client.send_request(subject.clone(), request).await.map_err(|e| match e.kind() {
        RequestErrorKind::NoResponders => {
            unavailable(format!("no provider of {} on NATS (nobody subscribes {subject})", target.describe()))
        }
        RequestErrorKind::TimedOut => unavailable(format!("no reply on {subject} within {:?}", opts.connect_timeout)),
        _ => unavailable(format!("connect request on {subject}: {e}")),
    })?;
    let reply: ConnectReply = serde_json::from_slice(&reply.payload)
        .map_err(|e| NatsError::new(Code::ProtocolError, format!("connect reply on {subject} is not one: {e}")))?;
    if let Some(refusal) = reply.error {
        let code = Code::from_name(&refusal.code).unwrap_or(Code::Unavailable);
        return Err(NatsError::new(code, format!("{subject} refused the link: {}", refusal.message)));
    }
    let (Some(link), Some(replica)) = (reply.link, reply.replica) else {
        return Err(NatsError::new(Code::ProtocolError, format!("connect reply on {subject} lacks link or replica")));
    };
    let info = LinkInfo { replica, provider: reply.provider.unwrap_or_default(), subject };
    let label = format!("nats:{}@{}", info.subject, info.replica);
    Ok((NatsLink::new(client.clone(), sub, link, label), info))
}
