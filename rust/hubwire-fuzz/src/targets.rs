//! The decoders under test. Each target takes one input, must not panic,
//! asserts its properties (a failed property is a panic, so the runner
//! treats both alike), and returns a signature of its *outcome*: what it
//! decoded or which error stopped it, with digits left out so that "body
//! of 17 bytes" and "body of 18 bytes" count as one outcome.

use bytes::BytesMut;
use hubwire::{Codec, Message, Payload};
use hubwire_frame::{Decoder, Frame, FrameError, Hello};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::seeds;

/// One fuzz target.
pub struct Target {
    /// Its name on the command line and in reports.
    pub name: &'static str,
    /// What it feeds and what it asserts.
    pub doc: &'static str,
    /// Starting inputs.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Tokens of the input's syntax, for the mutator.
    pub dict: &'static [&'static [u8]],
    /// Runs one input; panics on a failed property.
    pub run: fn(&[u8]) -> u64,
}

/// Every target, in the order a run takes them.
pub const ALL: [Target; 3] = [
    Target {
        name: "frame",
        doc: "bytes → Decoder::check/decode/finish at two max_frame limits; split into chunks it decodes the same; \
              every frame decoded re-encodes to bytes that decode to the same frame",
        seeds: seeds::frames,
        dict: &[b"\x00\x00\x00\x00\x01", b"\xff\xff\xff\xff", b"{\"versions\":[1]}", b"\x01\x01\x00\x00"],
        run: frame,
    },
    Target {
        name: "hello",
        doc: "bytes → Hello::from_json; an accepted HELLO serializes to JSON that parses to the same HELLO",
        seeds: seeds::hellos,
        dict: &[
            b"null",
            b"true",
            b"1e309",
            b"-0",
            b"64.0",
            b"4294967296",
            b"\"\\ud800\"",
            b"[[[[[[[[",
            b"{}",
            b"\"versions\":[1]",
            b"\"methods\":[{\"name\":\"a\",\"kind\":\"unary\"}]",
            b"\"max_frame\":",
            b"\"window\":0",
        ],
        run: hello,
    },
    Target {
        name: "payload",
        doc: "bytes → a MessagePack and a JSON payload decoded as a JSON value and as a typed struct; a decoded value \
              re-encodes to bytes that decode to the same value",
        seeds: seeds::payloads,
        dict: &[
            b"\xc1",
            b"\xd4\x01\x00",
            b"\xca\x7f\xc0\x00\x00",
            b"\xdd\xff\xff\xff\xff",
            b"\xc6\xff\xff\xff\xff",
            b"\x81\x01\x02",
            b"null",
        ],
        run: payload,
    },
];

/// The target called `name`.
pub fn by_name(name: &str) -> Option<&'static Target> {
    ALL.iter().find(|t| t.name == name)
}

/// FNV-1a over a sequence of words: cheap and stable across runs.
fn sig(words: impl IntoIterator<Item = u64>) -> u64 {
    words.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, w| (h ^ w).wrapping_mul(0x0100_0000_01b3))
}

/// An error's code and the shape of its message: the words before the
/// first quoted part (serde quotes the offending input) and no digits.
fn error_sig(e: &FrameError) -> u64 {
    sig(std::iter::once(e.code as u64).chain(std::iter::once(message_sig(&e.message))))
}

/// The first 48 bytes only: a list echoed in a message ("got [1, 2, …]")
/// would otherwise make every length a new outcome.
fn message_sig(m: &str) -> u64 {
    let head = m.split(['"', '`', '\'']).next().unwrap_or("");
    sig(head.bytes().filter(|b| !b.is_ascii_digit()).take(48).map(u64::from))
}

/// Decodes a stream fed in `chunks` (byte counts, cycled): the frames and
/// how it ended.
fn decode_stream(dec: &Decoder, input: &[u8], chunks: &[usize]) -> (Vec<Frame>, Option<FrameError>) {
    let (mut buf, mut frames, mut fed) = (BytesMut::new(), Vec::new(), 0);
    for &n in chunks.iter().cycle() {
        let end = (fed + n).min(input.len());
        buf.extend_from_slice(&input[fed..end]);
        fed = end;
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
        if fed == input.len() {
            break;
        }
    }
    (frames, dec.finish(&buf).err())
}

fn frame(input: &[u8]) -> u64 {
    let mut words = Vec::new();
    for max in [hubwire_frame::DEFAULT_MAX_FRAME, 4096] {
        let dec = Decoder::new(max);
        let (frames, end) = decode_stream(&dec, input, &[input.len().max(1)]);
        // The same bytes in small uneven pieces, as a socket delivers them.
        let chunks = [1 + input.len() % 7, 12, 1, 3 + input.len() % 13];
        let (frames2, end2) = decode_stream(&dec, input, &chunks);
        assert_eq!(frames, frames2, "frames differ when the input arrives in chunks");
        assert_eq!(end.as_ref().map(|e| (e.code, e.message.clone())), end2.map(|e| (e.code, e.message)), "chunked ending differs");
        for (i, f) in frames.iter().enumerate() {
            let mut out = BytesMut::new();
            f.encode(&mut out);
            let again = Decoder::new(u32::MAX).decode(&mut out).expect("a decoded frame re-encodes validly");
            assert_eq!(again.as_ref(), Some(f), "frame does not survive encode/decode");
            if i < 4 {
                // The first few types only: longer runs of frames are
                // not new behaviour of the decoder.
                words.push(f.frame_type() as u64);
            }
        }
        words.push(frames.len().min(8) as u64);
        words.push(end.as_ref().map_or(0, error_sig));
    }
    sig(words)
}

fn hello(input: &[u8]) -> u64 {
    match Hello::from_json(input) {
        Ok(h) => {
            let again = Hello::from_json(&h.to_json()).expect("a HELLO we accepted serializes to one we accept");
            assert_eq!(again, h, "HELLO does not survive to_json/from_json");
            sig([1, h.versions.len().min(4) as u64, h.methods.len().min(4) as u64])
        }
        Err(e) => error_sig(&e),
    }
}

/// A typed input like the examples' (strings, numbers, lists, an optional
/// field, an enum), so serde's typed paths are fuzzed as well as `Value`.
#[derive(Serialize, Deserialize)]
#[allow(dead_code)] // decoded only to exercise serde's typed paths
struct Typed {
    name: String,
    n: u32,
    tags: Vec<String>,
    ratio: Option<f64>,
    mode: Mode,
}

#[derive(Serialize, Deserialize)]
#[allow(dead_code)]
enum Mode {
    Fast,
    Slow { depth: i64 },
}

fn payload(input: &[u8]) -> u64 {
    let mut words = Vec::new();
    for codec in [Codec::Msgpack, Codec::Json] {
        let p = Payload { codec, bytes: bytes::Bytes::copy_from_slice(input) };
        let typed = <Typed as Message>::decode(p.clone()).is_ok();
        match <Value as Message>::decode(p) {
            Ok(v) => {
                let bytes = v.encode(codec).expect("a decoded value re-encodes");
                let again = <Value as Message>::decode(Payload { codec, bytes }).expect("a re-encoded value decodes");
                assert_eq!(again, v, "{} value does not survive encode/decode", codec.name());
                words.push(1 + shape(&v));
            }
            Err(e) => words.push(message_sig(&e)),
        }
        words.push(u64::from(typed));
    }
    sig(words)
}

/// Which JSON types a value holds (a bit each) and how deep it nests (up
/// to 8): enough to tell a flat map from a list of maps of floats.
fn shape(v: &Value) -> u64 {
    fn walk(v: &Value, depth: u64, types: &mut u64, deepest: &mut u64) {
        *deepest = (*deepest).max(depth.min(8));
        *types |= match v {
            Value::Null => 1,
            Value::Bool(_) => 2,
            Value::Number(n) if n.is_f64() => 4,
            Value::Number(n) if n.is_i64() => 8,
            Value::Number(_) => 16,
            Value::String(_) => 32,
            Value::Array(a) => {
                a.iter().for_each(|x| walk(x, depth + 1, types, deepest));
                64
            }
            Value::Object(o) => {
                o.values().for_each(|x| walk(x, depth + 1, types, deepest));
                128
            }
        };
    }
    let (mut types, mut deepest) = (0, 0);
    walk(v, 0, &mut types, &mut deepest);
    types | deepest << 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_runs_without_failing() {
        for t in &ALL {
            for s in (t.seeds)() {
                (t.run)(&s);
            }
        }
    }

    #[test]
    fn different_errors_give_different_signatures() {
        let t = by_name("frame").unwrap();
        let bad_version = hex::decode("000000000208000000000000").unwrap();
        let bad_type = hex::decode("000000000160000000000000").unwrap();
        assert_ne!((t.run)(&bad_version), (t.run)(&bad_type));
    }
}
