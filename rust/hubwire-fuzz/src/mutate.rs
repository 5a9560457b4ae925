//! Byte-level mutations of an input. Decoders fail at their checks in a
//! fixed order (header, lengths, body), so the mutations aim at what those
//! checks read: single bits and bytes, integers at the values where limits
//! flip (0, 1, 4096, 2²⁴, 2³¹, 2³²−1, the input's own length), length
//! fields rewritten to match what follows (so a mutated body is parsed
//! instead of stopping at "truncated"), and tokens of the target's syntax
//! (`null`, `1e309`, a MessagePack `0xc1`).

use crate::rng::Rng;

/// The longest input a mutation may make; bigger inputs are cut. Length
/// fields reach the limits without the bytes: 16 KiB is plenty, and keeps
/// every input fast.
pub const MAX_LEN: usize = 16 * 1024;

/// 32-bit values at which length and limit checks change their answer.
const INTERESTING_U32: [u32; 14] = [0, 1, 2, 7, 8, 11, 12, 255, 256, 4095, 4096, 16_777_216, 0x7fff_ffff, 0xffff_ffff];

/// Bytes at which type, codec, flag and sign checks change their answer.
const INTERESTING_U8: [u8; 12] = [0, 1, 2, 3, 4, 0x0a, 0x0b, 0x7f, 0x80, 0xc1, 0xfe, 0xff];

/// Mutates `input` in place by 1 to 4 stacked mutations. `other` (another
/// corpus entry) feeds splices; `dict` holds the target's syntax tokens.
pub fn mutate(input: &mut Vec<u8>, other: &[u8], dict: &[&[u8]], rng: &mut Rng) {
    let n = 1 + rng.below(4);
    for _ in 0..n {
        one(input, other, dict, rng);
    }
    input.truncate(MAX_LEN);
}

fn one(v: &mut Vec<u8>, other: &[u8], dict: &[&[u8]], rng: &mut Rng) {
    if v.is_empty() {
        v.extend((0..1 + rng.below(16)).map(|_| rng.byte()));
        return;
    }
    let at = rng.below(v.len());
    match rng.below(11) {
        0 => v[at] ^= 1 << rng.below(8),
        1 => v[at] = rng.byte(),
        2 => v[at] = INTERESTING_U8[rng.below(INTERESTING_U8.len())],
        3 => {
            let x = INTERESTING_U32[rng.below(INTERESTING_U32.len())];
            put_u32(v, at, x, rng.one_in(2));
        }
        4 => {
            // A length field that matches what follows it (± 1), so the
            // decoder reads on into the mutated body.
            let rest = (v.len() - at).saturating_sub(4) as u32;
            let x = rest.wrapping_add(rng.below(3) as u32).wrapping_sub(1);
            put_u32(v, at, x, rng.one_in(2));
        }
        5 => {
            let len = 1 + rng.below(16.min(v.len() - at));
            v.drain(at..at + len);
        }
        6 => {
            let bytes: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.byte()).collect();
            v.splice(at..at, bytes);
        }
        7 => {
            // Repeat a slice: nesting, repeated frames, long runs.
            let len = 1 + rng.below(64.min(v.len() - at));
            let chunk = v[at..at + len].to_vec();
            for _ in 0..1 + rng.below(8) {
                v.splice(at..at, chunk.iter().copied());
            }
        }
        8 if !other.is_empty() => {
            let from = rng.below(other.len());
            v.truncate(at);
            v.extend_from_slice(&other[from..]);
        }
        9 if !dict.is_empty() => {
            let token = dict[rng.below(dict.len())];
            if rng.one_in(2) {
                v.splice(at..at, token.iter().copied());
            } else {
                let end = (at + token.len()).min(v.len());
                v.splice(at..end, token.iter().copied());
            }
        }
        _ => v.truncate(at),
    }
}

/// Writes `x` at `at` (little-endian as frame headers, or big-endian as
/// MessagePack lengths), as far as the input reaches.
fn put_u32(v: &mut [u8], at: usize, x: u32, little: bool) {
    let bytes = if little { x.to_le_bytes() } else { x.to_be_bytes() };
    for (i, b) in bytes.iter().enumerate() {
        if let Some(slot) = v.get_mut(at + i) {
            *slot = *b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_change_inputs_and_stay_under_the_cap() {
        let mut rng = Rng::new(3);
        let seed = b"{\"versions\":[1]}".to_vec();
        let mut changed = 0;
        for _ in 0..2000 {
            let mut v = seed.clone();
            mutate(&mut v, b"other", &[b"null"], &mut rng);
            assert!(v.len() <= MAX_LEN);
            changed += usize::from(v != seed);
        }
        assert!(changed > 1800, "only {changed} of 2000 mutations changed the input");
    }

    #[test]
    fn put_u32_writes_either_order_and_clips_at_the_end() {
        let mut v = vec![0u8; 6];
        put_u32(&mut v, 0, 0x0102_0304, true);
        assert_eq!(&v[..4], &[4, 3, 2, 1]);
        put_u32(&mut v, 4, 0x0102_0304, false);
        assert_eq!(&v[4..], &[1, 2]);
    }
}
