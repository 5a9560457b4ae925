//! Starting inputs, taken from the spec's vectors (compiled in, so the
//! binary needs no checkout): every frame the vectors encode or reject,
//! every HELLO body they test, every MessagePack and JSON payload.

use serde_json::Value;

const FRAMES: &str = include_str!("../../../spec/vectors/frames.json");
const REJECT: &str = include_str!("../../../spec/vectors/reject.json");
const HANDSHAKE: &str = include_str!("../../../spec/vectors/handshake.json");
const CODECS: &str = include_str!("../../../spec/vectors/codecs.json");

fn cases(file: &str, list: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(file).expect("spec vectors are valid JSON");
    v[list].as_array().cloned().unwrap_or_default()
}

fn hex_field(cases: &[Value], field: &str) -> Vec<Vec<u8>> {
    cases.iter().filter_map(|c| hex::decode(c[field].as_str()?).ok()).collect()
}

/// Whole frames: the encode vectors, the decode-only ones, and the
/// rejected ones; plus a few valid ones back to back, as a stream.
pub fn frames() -> Vec<Vec<u8>> {
    let mut all = hex_field(&cases(FRAMES, "cases"), "hex");
    all.extend(hex_field(&cases(FRAMES, "decode_only"), "hex"));
    let good = all.clone();
    all.extend(hex_field(&cases(REJECT, "cases"), "hex"));
    all.push(good.iter().take(6).flatten().copied().collect());
    all
}

/// HELLO bodies: the handshake vectors (valid and not), and the bodies of
/// HELLO frames in the frame vectors.
pub fn hellos() -> Vec<Vec<u8>> {
    let mut all: Vec<Vec<u8>> =
        cases(HANDSHAKE, "cases").iter().filter_map(|c| Some(c["body_json"].as_str()?.as_bytes().to_vec())).collect();
    all.extend(frames().into_iter().filter(|f| f.len() > 12 && f[5] == 0x01).map(|f| f[12..].to_vec()));
    all
}

/// Payloads: every MessagePack encoding and every JSON text of the codec
/// vectors.
pub fn payloads() -> Vec<Vec<u8>> {
    let cs = cases(CODECS, "cases");
    let mut all = hex_field(&cs, "msgpack_hex");
    all.extend(hex_field(&cases(CODECS, "bin"), "msgpack_hex"));
    all.extend(cs.iter().filter_map(|c| Some(c["json"].as_str()?.as_bytes().to_vec())));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_set_is_loaded() {
        assert!(frames().len() > 100, "{} frame seeds", frames().len());
        assert!(hellos().len() > 40, "{} hello seeds", hellos().len());
        assert!(payloads().len() > 60, "{} payload seeds", payloads().len());
    }
}
