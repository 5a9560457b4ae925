//! Large frames' buffers, kept for the next large frame.
//!
//! The reader gives a frame larger than a read chunk a buffer of its own
//! size (`read_state::reserve_reusing`), and the payload the application gets
//! is a view of it. A new buffer of a megabyte is, with glibc, often fresh
//! pages from the kernel, each faulted in and zeroed as the frame is read
//! into it; bulk calls on a fast transport then spend more on that than on
//! the copy itself (`bench/README.md`, round 13). So the reader keeps a
//! handle on the buffers of its last large frames; once the application
//! has dropped everything it held of one, the next large frame that fits
//! is read into it, whose pages are resident and likely still cached.
//!
//! What this keeps alive is bounded twice: [`SPARES`] buffers of at most
//! [`REUSE_MAX`] bytes per connection, and [`BUDGET`] bytes across the
//! process (the hub has many connections), each counted at its
//! allocation's size; a buffer that would go over is not kept, and the
//! next large frame gets a new one. Kept buffers live until two later large
//! frames replace them or the connection ends: a connection that moved
//! bulk and went quiet holds up to two of them.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;

/// The largest frame buffer kept for reuse: a 1 MiB payload and more.
pub(crate) const REUSE_MAX: usize = 2 << 20;
/// Buffers kept per connection: with several large frames in flight, the
/// application lets go of one while the next arrives.
pub(crate) const SPARES: usize = 2;
/// Bytes of kept buffers across the process.
pub(crate) const BUDGET: usize = 64 << 20;

/// Bytes of buffers kept now, across the process.
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// A kept buffer: a handle on a large frame's allocation, counted in
/// [`KEPT`] until dropped or taken.
struct Spare {
    buf: BytesMut,
    size: usize,
}

impl Drop for Spare {
    fn drop(&mut self) {
        KEPT.fetch_sub(self.size, Ordering::Relaxed);
    }
}

/// One connection's kept buffers.
#[derive(Default)]
pub(crate) struct Reuse {
    spares: Vec<Spare>,
    /// The reader's buffer is a large frame's (at most [`REUSE_MAX`]).
    pub(crate) buf_is_large: bool,
    /// That buffer's size.
    pub(crate) large_size: usize,
}

impl Reuse {
    /// Keeps `handle`, an empty handle on the reader's last large buffer
    /// (of `large_size` bytes), dropping the oldest kept one past
    /// [`SPARES`]; not kept if the process is at its [`BUDGET`].
    pub(crate) fn keep(&mut self, handle: BytesMut) {
        self.buf_is_large = false;
        if self.spares.len() == SPARES {
            self.spares.remove(0);
        }
        let size = self.large_size;
        if KEPT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| (k + size <= BUDGET).then_some(k + size)).is_ok() {
            self.spares.push(Spare { buf: handle, size });
        }
    }

    /// A kept buffer the application has let go of, with room for `need`
    /// bytes, empty; `None` if there is none.
    pub(crate) fn take(&mut self, need: usize) -> Option<BytesMut> {
        let i = self.spares.iter_mut().position(|s| s.buf.try_reclaim(need))?;
        let mut spare = self.spares.remove(i);
        Some(std::mem::take(&mut spare.buf))
    }

    /// The reader's buffer is now a large frame's, an allocation of `size`
    /// bytes.
    pub(crate) fn large(&mut self, size: usize) {
        self.buf_is_large = size <= REUSE_MAX;
        self.large_size = size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::read_state::reserve_reusing;
    use bytes::BufMut;
    use hubwire_frame::Decoder;

    /// A REQUEST header (12 bytes) for a body of `body` bytes (the body
    /// then reads as a timeout, a one-byte method and the payload).
    fn header(body: u32) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_u32_le(body);
        b.extend_from_slice(&[1, 0x02, 0, 0]);
        b.put_u32_le(1);
        b
    }

    /// Reads one large frame through `reserve_reusing` as the reader does:
    /// its header first, then reads that fill the buffer; returns where its
    /// buffer starts and the payload.
    fn read_frame(d: &Decoder, buf: &mut BytesMut, reuse: &mut Reuse, body: u32, fill: u8) -> (*const u8, bytes::Bytes) {
        reserve_reusing(d, buf, reuse);
        buf.extend_from_slice(&header(body));
        reserve_reusing(d, buf, reuse);
        let at = buf.as_ptr();
        loop {
            // Reads of up to 100,000 bytes, as a transport's would be.
            let n = (buf.capacity() - buf.len()).min(100_000).min(12 + body as usize - buf.len());
            buf.extend_from_slice(&vec![fill; n]);
            if buf.len() == 12 + body as usize {
                break;
            }
            reserve_reusing(d, buf, reuse);
            assert_eq!(buf.as_ptr(), at, "the buffer moved at {}", buf.len());
        }
        let frame = d.decode(buf).unwrap().unwrap();
        let hubwire_frame::Frame::Request { payload, .. } = frame else { panic!("not a REQUEST") };
        (at, payload)
    }

    #[test]
    fn a_large_frame_is_read_into_the_buffer_of_one_the_application_let_go_of() {
        let d = Decoder::new(16 << 20);
        let (mut buf, mut reuse) = (BytesMut::new(), Reuse::default());
        let body = 1 << 20;
        let (a, pa) = read_frame(&d, &mut buf, &mut reuse, body, 1);
        drop(pa);
        let (b, pb) = read_frame(&d, &mut buf, &mut reuse, body, 2);
        assert_eq!(b, a, "the first frame's buffer, let go of, is read into again");
        // Held by the application: never written over; a new buffer.
        let (c, pc) = read_frame(&d, &mut buf, &mut reuse, body, 3);
        assert_ne!(c, b);
        assert_eq!(reuse.spares.len(), 1, "b's buffer kept, though still shared with the application");
        assert!(pb.iter().all(|&x| x == 2) && pc.iter().all(|&x| x == 3), "each frame's own bytes");
        drop(pb);
        let (e, _pe) = read_frame(&d, &mut buf, &mut reuse, body, 4);
        assert_eq!(e, b, "let go of later: read into once it is");
        assert!(pc.iter().all(|&x| x == 3), "the frame still held is intact");
    }

    #[test]
    fn frames_too_large_are_not_kept_and_smaller_ones_fit_a_kept_buffer() {
        let d = Decoder::new(64 << 20);
        let (mut buf, mut reuse) = (BytesMut::new(), Reuse::default());
        let (_, pa) = read_frame(&d, &mut buf, &mut reuse, REUSE_MAX as u32, 1);
        drop(pa);
        let (_, pb) = read_frame(&d, &mut buf, &mut reuse, REUSE_MAX as u32, 1);
        assert!(reuse.spares.is_empty(), "over REUSE_MAX: not kept");
        drop(pb);
        let (mut buf, mut reuse) = (BytesMut::new(), Reuse::default());
        let (c, pc) = read_frame(&d, &mut buf, &mut reuse, 1 << 20, 1);
        drop(pc);
        let (e, _) = read_frame(&d, &mut buf, &mut reuse, 512 << 10, 1);
        assert_eq!(e, c, "a smaller frame fits the kept buffer");
    }

    #[test]
    fn a_kept_buffer_is_counted_at_its_allocations_size() {
        let d = Decoder::new(16 << 20);
        let (mut buf, mut reuse) = (BytesMut::new(), Reuse::default());
        let (_, pa) = read_frame(&d, &mut buf, &mut reuse, 1 << 20, 1);
        drop(pa);
        let (_, pb) = read_frame(&d, &mut buf, &mut reuse, 100_000, 2);
        assert_eq!(reuse.spares.len(), 0, "the 1 MiB buffer was taken for the 100 kB frame");
        assert_eq!(reuse.large_size, 12 + (1 << 20), "and is counted whole");
        drop(pb);
        let (_, _pc) = read_frame(&d, &mut buf, &mut reuse, 3 << 20, 3);
        assert_eq!(reuse.spares.len(), 1);
        assert_eq!(reuse.spares[0].size, 12 + (1 << 20), "kept at its allocation's size, not the last frame's");
    }
}
