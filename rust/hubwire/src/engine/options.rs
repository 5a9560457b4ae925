//! How a connection presents itself and what limits it sets: the fields of
//! our HELLO (`spec/PROTOCOL.md` §4), how the reader waits, and the
//! [`Service`] whose methods we offer, if any.

use std::sync::Arc;
use std::time::Duration;

use hubwire_frame::{Hello, PeerInfo, DEFAULT_MAX_FRAME};

use super::serve::Service;
use super::wait::WaitMode;

/// Options for opening a connection ([`Connection::dial`](crate::Connection::dial),
/// [`Connection::accept`](crate::Connection::accept)).
#[derive(Clone)]
pub struct ConnectionOptions {
    /// Our name in the peer's logs and listings.
    pub name: String,
    /// How the reader waits for bytes.
    pub wait: WaitMode,
    /// The largest frame body we accept.
    pub max_frame: u32,
    /// Initial credit we grant per incoming stream.
    pub window: u32,
    /// Calls we serve at once before answering `resource_exhausted`.
    pub max_calls: u32,
    /// How long to wait for the peer's HELLO.
    pub handshake_timeout: Duration,
    /// The service whose methods we offer, if any (a
    /// [`Provider`](crate::Provider), or the hub's registry).
    pub service: Option<Arc<dyn Service>>,
}

impl ConnectionOptions {
    /// Defaults: efficient waiting (or `HUBWIRE_WAIT`), 16 MiB frames,
    /// window 64, 4096 calls, 10 s handshake, no methods offered.
    pub fn new(name: impl Into<String>) -> ConnectionOptions {
        ConnectionOptions {
            name: name.into(),
            wait: WaitMode::from_env().unwrap_or_default(),
            max_frame: DEFAULT_MAX_FRAME,
            window: hubwire_frame::hello::DEFAULT_WINDOW,
            max_calls: hubwire_frame::hello::DEFAULT_MAX_CALLS,
            handshake_timeout: Duration::from_secs(10),
            service: None,
        }
    }

    /// Sets the waiting mode.
    pub fn wait(mut self, wait: WaitMode) -> ConnectionOptions {
        self.wait = wait;
        self
    }

    /// Sets the frame limit.
    pub fn max_frame(mut self, n: u32) -> ConnectionOptions {
        self.max_frame = n;
        self
    }

    /// Sets the per-stream window (at least 1).
    pub fn window(mut self, n: u32) -> ConnectionOptions {
        self.window = n.max(1);
        self
    }

    /// Sets the concurrent-call limit (at least 1).
    pub fn max_calls(mut self, n: u32) -> ConnectionOptions {
        self.max_calls = n.max(1);
        self
    }

    /// Offers `service`'s methods on the connection.
    pub fn service(mut self, service: impl Service) -> ConnectionOptions {
        self.service = Some(Arc::new(service));
        self
    }

    /// Our HELLO. The service's methods are asked for once, here.
    pub(crate) fn hello(&self) -> Hello {
        let mut h = Hello::new(PeerInfo { name: self.name.clone(), lang: "rust".into(), version: env!("CARGO_PKG_VERSION").into() });
        h.max_frame = self.max_frame;
        h.window = self.window;
        h.max_calls = self.max_calls;
        if let Some(s) = &self.service {
            h.methods = s.methods();
        }
        h.fit();
        h
    }
}
