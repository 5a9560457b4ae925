//! The order of call ids across the wrap (`spec/PROTOCOL.md` §3): serial
//! arithmetic, so GOAWAY's last id keeps its meaning after 0xFFFFFFFF.

use hubwire_frame::id_after;

#[test]
fn ids_after_the_last_seen_in_serial_order() {
    // Without a wrap, the numeric order.
    assert!(id_after(5, 3));
    assert!(!id_after(3, 5));
    assert!(!id_after(3, 3));
    // Across the wrap: the dialer's 1 follows 0xFFFFFFFF, the acceptor's 2 follows 0xFFFFFFFE.
    assert!(id_after(1, 0xFFFF_FFFF));
    assert!(id_after(2, 0xFFFF_FFFE));
    assert!(!id_after(0xFFFF_FFFF, 1));
    // Half the id space ahead is "after", the other half "before".
    assert!(id_after(0x8000_0000, 1));
    assert!(!id_after(0x8000_0001, 1));
    // last 0: the peer saw none of our calls, so every call is after it.
    assert!(id_after(1, 0) && id_after(0xFFFF_FFFF, 0));
}
