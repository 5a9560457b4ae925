//! How many client connections the hub holds: `max_connections` in all
//! (every listener, the HTTP gateway's too) and `max_connections_per_peer`
//! (per uid on the Unix socket, per IP address elsewhere). A connection
//! over either limit is refused the moment it is accepted — GOAWAY
//! `resource_exhausted` naming the limit, then closed — without waiting
//! for its HELLO, so a flood costs a descriptor for microseconds, not for
//! a handshake timeout.

use std::collections::HashMap;
use std::fmt;
use std::io::IoSlice;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use hubwire::frame::{Code, Frame};
use hubwire::transport::DynTransport;

/// Who a connection comes from, as the per-peer limit counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A Unix-socket peer, by the uid the kernel reports.
    Uid(u32),
    /// A TCP (or HTTP, WebSocket) peer, by address.
    Ip(IpAddr),
    /// A link from the NATS cluster (`[nats] max_links` bounds them all).
    Cluster,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Uid(u) => write!(f, "uid {u}"),
            Peer::Ip(ip) => write!(f, "{ip}"),
            Peer::Cluster => f.write_str("the NATS cluster"),
        }
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_peer: HashMap<Peer, usize>,
}

/// The connection counts, shared by every listener.
pub struct Admission {
    max_total: usize,
    max_per_peer: usize,
    counts: Mutex<Counts>,
}

/// One admitted connection; dropping it gives its place back.
pub struct Ticket {
    admission: Arc<Admission>,
    peer: Peer,
}

impl Admission {
    /// Limits of `max_total` connections and `max_per_peer` per peer.
    pub fn new(max_total: usize, max_per_peer: usize) -> Arc<Admission> {
        Arc::new(Admission { max_total, max_per_peer, counts: Mutex::default() })
    }

    /// A place for a connection from `peer`, or why there is none (a
    /// message naming the limit reached).
    pub fn admit(self: &Arc<Self>, peer: Peer) -> Result<Ticket, String> {
        let mut c = self.counts.lock().unwrap();
        if c.total >= self.max_total {
            return Err(format!("too many connections: the hub holds max_connections = {}", self.max_total));
        }
        let n = c.per_peer.entry(peer.clone()).or_default();
        if *n >= self.max_per_peer {
            return Err(format!("too many connections from {peer}: max_connections_per_peer = {}", self.max_per_peer));
        }
        *n += 1;
        c.total += 1;
        Ok(Ticket { admission: self.clone(), peer })
    }

    /// Connections held now.
    pub fn held(&self) -> usize {
        self.counts.lock().unwrap().total
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut c = self.admission.counts.lock().unwrap();
        c.total -= 1;
        if let Some(n) = c.per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                c.per_peer.remove(&self.peer);
            }
        }
    }
}

/// Refuses a connection that has just been accepted: GOAWAY with `code`
/// and `message` (as the first frame, before any HELLO: `spec/PROTOCOL.md`
/// §4.1), then closed. Never waits: a new socket's send buffer is empty,
/// so the frame (at most 12 + 3 + 1024 bytes) goes in one non-blocking
/// write or not at all. What the peer already sent (its HELLO) is read
/// and dropped first, so that closing does not turn into a TCP reset that
/// could destroy the GOAWAY before the peer reads it.
pub fn refuse(t: &DynTransport, code: Code, message: &str) {
    let frame = Frame::Goaway { last_id: 0, code, message: message.to_string() }.to_bytes();
    let mut sink = BytesMut::with_capacity(4096);
    for _ in 0..16 {
        sink.clear();
        match t.try_read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let _ = t.try_write(&[IoSlice::new(&frame)]);
    t.shutdown_write();
    t.shutdown();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_per_peer_and_in_all_and_tickets_give_places_back() {
        let a = Admission::new(3, 2);
        let (x, y) = (Peer::Uid(1000), Peer::Ip("127.0.0.2".parse().unwrap()));
        let t1 = a.admit(x.clone()).unwrap();
        let _t2 = a.admit(x.clone()).unwrap();
        let e = a.admit(x.clone()).err().unwrap();
        assert!(e.contains("from uid 1000") && e.contains("max_connections_per_peer = 2"), "{e}");
        let _t3 = a.admit(y.clone()).unwrap();
        let e = a.admit(y.clone()).err().unwrap();
        assert!(e.contains("max_connections = 3"), "{e}");
        drop(t1);
        assert_eq!(a.held(), 2);
        assert!(a.admit(x).is_ok(), "a dropped ticket gives its place back");
    }
}
