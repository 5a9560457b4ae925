//! Giving a ring's memory back when its connection goes quiet
//! (`spec/PROTOCOL.md` §11.4.1, "Memory").
//!
//! A segment's pages cost memory only once touched. A writer that rewinds
//! (starts again at the ring's first byte whenever the reader has caught
//! up) keeps small calls in the ring's first pages, however large the
//! ring; only a frame that does not fit there (bulk) touches the rest.
//! Those pages stay resident after the bulk has passed, so the writer
//! gives them back ([`give_back`]) once its ring has been empty and no
//! write has gone past [`KEEP`] for a whole tick of [`RELEASE_TICK`].
//!
//! Only the writer may touch free bytes, and the release runs on another
//! task, so the part past `KEEP` has an owner, [`Deep`]: a write that goes
//! past `KEEP` holds it for the length of the write, and the release takes
//! it only when nobody holds it. A write that finds the release at work
//! stops at `KEEP` (it parks, and the release wakes it when done); no
//! write waits on a lock, and a write that stays below `KEEP` costs
//! nothing here.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The bytes at the start of each ring that are never given back: what
/// small calls use, and the ring size before rings grew (a Unix socket's
/// buffer is about as large).
pub const KEEP: usize = 256 * 1024;

/// How often the release looks; a ring's pages past [`KEEP`] go back one
/// to two ticks after the last write that used them.
pub const RELEASE_TICK: Duration = Duration::from_secs(1);

// The state's low two bits; the rest counts the holds, so that the
// release can tell a quiet tick from a busy one that looks the same at
// both ends.
const CLEAN: u64 = 0;
const HELD: u64 = 1;
const DIRTY: u64 = 2;
const RELEASING: u64 = 3;
const STATE: u64 = 3;

/// Who owns a ring's bytes past [`KEEP`]: the writer, for one write, or
/// the release.
pub struct Deep {
    state: AtomicU64,
    /// The state the release saw at its last tick.
    seen: AtomicU64,
}

impl Default for Deep {
    fn default() -> Deep {
        Deep { state: AtomicU64::new(CLEAN), seen: AtomicU64::new(CLEAN) }
    }
}

impl Deep {
    /// The writer's claim, before a write past `KEEP`: false while the
    /// release is at work (the write then stops at `KEEP`). Followed by
    /// [`Deep::let_go`] once the write is published.
    pub fn hold(&self) -> bool {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & STATE == RELEASING {
                return false;
            }
            let held = (((s >> 2) + 1) << 2) | HELD;
            match self.state.compare_exchange_weak(s, held, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Ends a [`Deep::hold`]: the pages past `KEEP` may be resident.
    pub fn let_go(&self) {
        let s = self.state.load(Ordering::Relaxed);
        debug_assert_eq!(s & STATE, HELD);
        // Release: the write's stores come before a release that sees this.
        self.state.store((s & !STATE) | DIRTY, Ordering::Release);
    }

    /// Whether the release is at work: a writer stopped at `KEEP` parks.
    pub fn releasing(&self) -> bool {
        self.state.load(Ordering::Acquire) & STATE == RELEASING
    }

    /// The release's tick: takes the part past `KEEP` if it was used and
    /// nobody has held it since the last tick. Then the caller checks that
    /// the ring is empty and gives the pages back, and calls
    /// [`Deep::end`] (or [`Deep::abort`] if bytes are still unread).
    pub fn begin(&self) -> bool {
        let s = self.state.load(Ordering::Acquire);
        let last = self.seen.swap(s, Ordering::Relaxed);
        s & STATE == DIRTY
            && s == last
            && self.state.compare_exchange(s, (s & !STATE) | RELEASING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// The pages are back: writes may go past `KEEP` again.
    pub fn end(&self) {
        let s = self.state.load(Ordering::Relaxed);
        self.state.store(s & !STATE, Ordering::Release);
    }

    /// Nothing was given back (the reader has bytes to read there): the
    /// next quiet tick tries again.
    pub fn abort(&self) {
        let s = self.state.load(Ordering::Relaxed);
        let dirty = (s & !STATE) | DIRTY;
        self.state.store(dirty, Ordering::Release);
        self.seen.store(dirty, Ordering::Relaxed);
    }
}

/// Gives the pages of `[start, start + len)` of a shared mapping back to
/// the system (`madvise(MADV_REMOVE)`: a memfd's pages are freed, in every
/// process that maps them, and read as zeros after).
///
/// # Safety
/// The range must lie inside a shared mapping of a memfd, page-aligned,
/// and nobody may read or write it meanwhile.
pub unsafe fn give_back(start: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract.
    if unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_REMOVE) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_takes_the_deep_part_only_after_a_quiet_tick() {
        let d = Deep::default();
        assert!(!d.begin(), "never used: nothing to give back");
        assert!(d.hold());
        assert!(!d.begin(), "held: the write goes on");
        d.let_go();
        assert!(!d.begin(), "first tick after a write: not quiet yet");
        assert!(d.hold());
        d.let_go();
        assert!(!d.begin(), "another write since: still busy");
        assert!(d.begin(), "a whole tick without a write");
        assert!(d.releasing());
        assert!(!d.hold(), "a write past KEEP stops there while the release works");
        d.end();
        assert!(!d.releasing());
        assert!(!d.begin() && !d.begin(), "clean: nothing more to give back");
        assert!(d.hold(), "writes go past KEEP again");
        d.let_go();
        d.begin();
        assert!(d.begin());
        d.abort();
        assert!(!d.releasing());
        assert!(d.begin(), "after an abort the next tick tries again");
    }
}
