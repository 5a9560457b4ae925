//! Copying bytes into a ring the peer reads.
//!
//! A plain `memcpy` into a ring is slow for large pieces: the ring's lines
//! were last read by the peer's CPU, so each one the writer stores to must
//! first be taken back from that CPU's cache, and the peer then reads it
//! from ours again. Non-temporal stores write past the caches, and the
//! reader takes the lines from memory. On the 2-vCPU VM the bench runs on,
//! one thread streaming 1 MiB messages to another through a 256 KiB ring
//! moved 1.8–7.2 GB/s with `memcpy`, as the host placed the two vCPUs,
//! and 10–12 GB/s with non-temporal stores whatever the placement (a Unix
//! socket between the same two threads: 4.5–6.9 GB/s).
//! Small pieces keep `memcpy`: a frame of a few bytes is read at once,
//! from the cache, and the peer may be spinning on it. So do large rings
//! ([`STREAM_RING_MAX`]): there the writer runs far enough ahead that its
//! lines have left its private cache for the shared one before the reader
//! wants them, and bypassing the caches only sends them to memory (4 MiB
//! rings, the same two threads: 42–46 GB/s with `memcpy`, 19 GB/s with
//! non-temporal stores; hubwire's bulk row, 1 MiB echoes, 6–14 GB/s
//! against 7–7.6).
//!
//! Non-temporal stores are not ordered by a release store: a writer that
//! used them calls [`publish_fence`] before it publishes `written`.

/// Pieces from this size up are written with non-temporal stores.
pub const STREAM_FROM: usize = 4096;
/// The largest ring written with non-temporal stores: the private cache
/// of a core of the bench's VM (1 MiB) is twice this.
pub const STREAM_RING_MAX: usize = 512 * 1024;

/// Copies `n` bytes from `src` to `dst`, the data of a ring of `cap`
/// bytes; true if it used non-temporal stores, which [`publish_fence`]
/// must then order before the store that publishes them.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `n` bytes, and the
/// two must not overlap.
pub unsafe fn copy_in(dst: *mut u8, src: *const u8, n: usize, cap: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    if n >= STREAM_FROM && cap <= STREAM_RING_MAX {
        // SAFETY: the caller's contract, passed on.
        unsafe { stream(dst, src, n) };
        return true;
    }
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    false
}

/// Makes the non-temporal stores of [`copy_in`] visible before any store
/// that follows (`sfence`; nothing to do where [`copy_in`] uses none).
pub fn publish_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` is part of SSE, which every x86_64 CPU has.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// `copy_in` for a large piece: plain stores up to `dst`'s next 16-byte
/// boundary and after the last whole 16 bytes, non-temporal stores of 16
/// bytes (SSE2, part of every x86_64 CPU) between.
///
/// # Safety
/// As [`copy_in`].
#[cfg(target_arch = "x86_64")]
unsafe fn stream(dst: *mut u8, src: *const u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    let head = ((16 - (dst as usize & 15)) & 15).min(n);
    // SAFETY: every offset below stays within [0, n); stores to `dst + i`
    // with i ≥ head are 16-byte aligned, as `_mm_stream_si128` requires;
    // loads from `src` may be unaligned (`_mm_loadu_si128`).
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 64 <= n {
            let (s, d) = (src.add(i) as *const __m128i, dst.add(i) as *mut __m128i);
            let (a, b, c, e) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)), _mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
            i += 64;
        }
        while i + 16 <= n {
            _mm_stream_si128(dst.add(i) as *mut __m128i, _mm_loadu_si128(src.add(i) as *const __m128i));
            i += 16;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), n - i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length around the threshold and the unrolled loop's steps,
    /// at every alignment of source and destination, for a ring small
    /// enough to stream into and one too large: the bytes arrive, in
    /// order, and nothing around them is touched.
    #[test]
    fn copies_every_byte_at_every_alignment() {
        let src: Vec<u8> = (0..STREAM_FROM * 3).map(|i| (i * 7 + i / 251) as u8).collect();
        let lens = [
            0,
            1,
            15,
            16,
            17,
            63,
            64,
            65,
            STREAM_FROM - 1,
            STREAM_FROM,
            STREAM_FROM + 1,
            STREAM_FROM + 15,
            STREAM_FROM + 63,
            2 * STREAM_FROM + 37,
        ];
        for n in lens {
            for s_off in 0..16 {
                for (d_off, cap) in (0..16).flat_map(|d| [(d, STREAM_RING_MAX), (d, 2 * STREAM_RING_MAX)]) {
                    let mut dst = vec![0xAAu8; n + 64];
                    let streamed = unsafe { copy_in(dst.as_mut_ptr().add(16 + d_off), src.as_ptr().add(s_off), n, cap) };
                    publish_fence();
                    assert_eq!(streamed, cfg!(target_arch = "x86_64") && n >= STREAM_FROM && cap <= STREAM_RING_MAX, "n {n}, ring {cap}");
                    assert_eq!(&dst[16 + d_off..16 + d_off + n], &src[s_off..s_off + n], "n {n}, src +{s_off}, dst +{d_off}");
                    assert!(dst[..16 + d_off].iter().all(|&b| b == 0xAA), "bytes before touched: n {n}, dst +{d_off}");
                    assert!(dst[16 + d_off + n..].iter().all(|&b| b == 0xAA), "bytes after touched: n {n}, dst +{d_off}");
                }
            }
        }
    }
}
