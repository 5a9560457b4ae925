//! Checks this crate against the shared byte-level vectors of `spec/vectors/`
//! (format: `spec/vectors/README.md`). Every test collects the names of all
//! failing cases and asserts once at the end, so one run reports them all.

use bytes::{Bytes, BytesMut};
use hubwire_frame::{negotiate, Code, Codec, Decoder, Frame, FrameError, Hello, Kind};
use serde_json::{json, Value};

const DEFAULT_MAX_FRAME: u32 = 16_777_216;

fn load(file: &str) -> Value {
    let path = format!("{}/../../spec/vectors/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"));
    assert!(v["description"].is_string(), "{file}: no description");
    v
}

fn cases<'a>(doc: &'a Value, section: &str) -> &'a Vec<Value> {
    let cases = doc[section].as_array().unwrap_or_else(|| panic!("no {section:?} array"));
    assert!(!cases.is_empty(), "empty {section:?}");
    let mut names: Vec<&str> = cases.iter().map(|c| c["name"].as_str().expect("case without a name")).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "duplicate case names in {section:?}");
    cases
}

/// Runs `check` on every case and returns `name: why` for each failure (a
/// panic in `check` counts as a failure too).
fn run_cases(what: &str, cases: &[Value], check: impl Fn(&Value) -> Result<(), String>) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(case))).unwrap_or_else(|p| {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            Err(format!("panicked: {msg}"))
        });
        if let Err(why) = result {
            failures.push(format!("  {name}: {why}"));
        }
    }
    println!("{what}: {} cases, {} failed", cases.len(), failures.len());
    if !failures.is_empty() {
        failures.insert(0, format!("{what}: {} of {} cases failed:", failures.len(), cases.len()));
    }
    failures
}

/// Asserts that no case failed, listing every failure.
fn assert_none_failed(failures: Vec<String>) {
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

fn run_all(what: &str, cases: &[Value], check: impl Fn(&Value) -> Result<(), String>) {
    assert_none_failed(run_cases(what, cases, check));
}

fn unhex(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().expect("hex string")).expect("valid hex")
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("missing string {key:?}"))
}

fn u32_of(v: &Value, key: &str) -> u32 {
    v[key].as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or_else(|| panic!("missing u32 {key:?}"))
}

// ------------------------------------------------------------------ codes

#[test]
fn codes_json_matches_code_enum() {
    let doc = load("../codes.json");
    let codes = doc["codes"].as_array().expect("codes array");
    let mut failures = Vec::new();
    if codes.len() != Code::ALL.len() {
        failures.push(format!("codes.json has {} codes, Code::ALL {}", codes.len(), Code::ALL.len()));
    }
    for (i, c) in codes.iter().enumerate() {
        let (value, name) = (c["value"].as_u64().expect("value"), c["name"].as_str().expect("name"));
        match Code::ALL.get(i) {
            Some(code) if *code as u64 == value && code.name() == name => {}
            other => failures.push(format!("codes.json[{i}] = {value} {name}, Code::ALL[{i}] = {other:?}")),
        }
        if Code::from_name(name).map(|c| c as u64) != Some(value) {
            failures.push(format!("Code::from_name({name:?}) is not {value}"));
        }
        if u8::try_from(value).ok().and_then(Code::from_u8).map(Code::name) != Some(name) {
            failures.push(format!("Code::from_u8({value}) is not {name}"));
        }
    }
    for reserved in Code::ALL.len()..=255 {
        if Code::from_u8(reserved as u8).is_some() {
            failures.push(format!("Code::from_u8({reserved}) should be reserved"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ----------------------------------------------------------------- frames

fn code_named(name: &str) -> Code {
    Code::from_name(name).unwrap_or_else(|| panic!("unknown code name {name:?}"))
}

fn codec_named(name: &str) -> Codec {
    [Codec::Raw, Codec::Msgpack, Codec::Json]
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap_or_else(|| panic!("unknown codec name {name:?}"))
}

fn kind_named(name: &str) -> Kind {
    [Kind::Unary, Kind::ServerStream, Kind::ClientStream, Kind::Bidi]
        .into_iter()
        .find(|k| k.name() == name)
        .unwrap_or_else(|| panic!("unknown kind name {name:?}"))
}

fn data8(v: &Value, key: &str) -> [u8; 8] {
    unhex(&v[key]).try_into().expect("8 bytes of data")
}

/// The vector representation to a frame.
fn frame_from_json(f: &Value) -> Frame {
    let payload = || Bytes::from(unhex(&f["payload_hex"]));
    match str_of(f, "type") {
        "hello" => Frame::Hello(Box::new(serde_json::from_value(f["body"].clone()).expect("hello body"))),
        "request" => Frame::Request {
            call_id: u32_of(f, "call_id"),
            kind: kind_named(str_of(f, "kind")),
            codec: codec_named(str_of(f, "codec")),
            timeout_ms: u32_of(f, "timeout_ms"),
            method: str_of(f, "method").into(),
            payload: payload(),
        },
        "response" => Frame::Response {
            call_id: u32_of(f, "call_id"),
            codec: codec_named(str_of(f, "codec")),
            code: code_named(str_of(f, "code")),
            message: str_of(f, "message").to_owned(),
            payload: payload(),
        },
        "item" => Frame::Item { call_id: u32_of(f, "call_id"), codec: codec_named(str_of(f, "codec")), payload: payload() },
        "end" => Frame::End { call_id: u32_of(f, "call_id") },
        "cancel" => Frame::Cancel { call_id: u32_of(f, "call_id") },
        "credit" => Frame::Credit { call_id: u32_of(f, "call_id"), credit: u32_of(f, "credit") },
        "ping" => Frame::Ping { data: data8(f, "data_hex") },
        "pong" => Frame::Pong { data: data8(f, "data_hex") },
        "goaway" => {
            Frame::Goaway { last_id: u32_of(f, "last_id"), code: code_named(str_of(f, "code")), message: str_of(f, "message").to_owned() }
        }
        "upgrade" => Frame::Upgrade { mechanism: str_of(f, "mechanism").to_owned() },
        "upgraded" => Frame::Upgraded { code: code_named(str_of(f, "code")), message: str_of(f, "message").to_owned() },
        "direct" => Frame::Direct(Box::new(serde_json::from_value(f["body"].clone()).expect("direct body"))),
        "accept" => Frame::Accept(serde_json::from_value(f["body"].clone()).expect("accept body")),
        other => panic!("unknown frame type {other:?}"),
    }
}

/// A frame to the vector representation.
fn frame_to_json(f: &Frame) -> Value {
    match f {
        Frame::Hello(h) => json!({"type": "hello", "body": serde_json::to_value(h).expect("hello to json")}),
        Frame::Request { call_id, kind, codec, timeout_ms, method, payload } => json!({
            "type": "request", "call_id": call_id, "kind": kind.name(), "codec": codec.name(),
            "timeout_ms": timeout_ms, "method": method.as_str(), "payload_hex": hex::encode(payload),
        }),
        Frame::Response { call_id, codec, code, message, payload } => json!({
            "type": "response", "call_id": call_id, "codec": codec.name(), "code": code.name(),
            "message": message, "payload_hex": hex::encode(payload),
        }),
        Frame::Item { call_id, codec, payload } => json!({
            "type": "item", "call_id": call_id, "codec": codec.name(), "payload_hex": hex::encode(payload),
        }),
        Frame::End { call_id } => json!({"type": "end", "call_id": call_id}),
        Frame::Cancel { call_id } => json!({"type": "cancel", "call_id": call_id}),
        Frame::Credit { call_id, credit } => json!({"type": "credit", "call_id": call_id, "credit": credit}),
        Frame::Ping { data } => json!({"type": "ping", "data_hex": hex::encode(data)}),
        Frame::Pong { data } => json!({"type": "pong", "data_hex": hex::encode(data)}),
        Frame::Goaway { last_id, code, message } => json!({
            "type": "goaway", "last_id": last_id, "code": code.name(), "message": message,
        }),
        Frame::Upgrade { mechanism } => json!({"type": "upgrade", "mechanism": mechanism}),
        Frame::Upgraded { code, message } => json!({"type": "upgraded", "code": code.name(), "message": message}),
        Frame::Direct(o) => json!({"type": "direct", "body": serde_json::to_value(o).expect("direct to json")}),
        Frame::Accept(a) => json!({"type": "accept", "body": serde_json::to_value(a).expect("accept to json")}),
    }
}

fn check_frame_case(case: &Value) -> Result<(), String> {
    let bytes = unhex(&case["hex"]);
    let expected = &case["frame"];
    let frame = frame_from_json(expected);

    // encode(frame) == hex, both ways of encoding.
    let mut enc = BytesMut::new();
    frame.encode(&mut enc);
    if enc[..] != bytes[..] {
        return Err(format!("encode gave {}, want {}", hex::encode(&enc), hex::encode(&bytes)));
    }
    if frame.to_bytes()[..] != bytes[..] {
        return Err("to_bytes differs from encode".into());
    }

    // decode(hex) == frame.
    let decoder = Decoder::new(DEFAULT_MAX_FRAME);
    match decoder.check(&bytes) {
        Ok(Some(n)) if n == bytes.len() => {}
        other => return Err(format!("check gave {other:?}, want Ok(Some({}))", bytes.len())),
    }
    let mut buf = BytesMut::from(&bytes[..]);
    let decoded = match decoder.decode(&mut buf) {
        Ok(Some(f)) => f,
        other => return Err(format!("decode gave {other:?}")),
    };
    if !buf.is_empty() {
        return Err(format!("decode left {} bytes", buf.len()));
    }
    let as_json = frame_to_json(&decoded);
    if &as_json != expected {
        return Err(format!("decoded to {as_json}, want {expected}"));
    }
    if decoded != frame {
        return Err(format!("decoded frame {decoded:?} != {frame:?}"));
    }
    if decoded.frame_type() as u8 != bytes[5] {
        return Err(format!("frame_type {:?} does not match byte 0x{:02x}", decoded.frame_type(), bytes[5]));
    }
    decoder.finish(&buf).map_err(|e| format!("finish after a whole frame: {e}"))?;

    // Byte by byte: nothing until the last byte, then the frame.
    let mut buf = BytesMut::new();
    for (i, b) in bytes.iter().enumerate() {
        buf.extend_from_slice(&[*b]);
        match decoder.decode(&mut buf) {
            Ok(None) if i + 1 < bytes.len() => {
                if let Err(e) = decoder.finish(&buf) {
                    if !e.message.contains("truncated") {
                        return Err(format!("finish after {} bytes: {e}", i + 1));
                    }
                }
            }
            Ok(Some(f)) if i + 1 == bytes.len() && f == frame => {}
            other => return Err(format!("byte-by-byte decode after {} bytes gave {other:?}", i + 1)),
        }
    }
    Ok(())
}

#[test]
fn frames() {
    let doc = load("frames.json");
    let cases = cases(&doc, "cases");
    let types: std::collections::BTreeSet<&str> = cases.iter().map(|c| c["frame"]["type"].as_str().unwrap_or("?")).collect();
    for t in ["hello", "request", "response", "item", "end", "cancel", "credit", "ping", "pong", "goaway"] {
        assert!(types.contains(t), "frames.json has no {t} case");
    }
    run_all("frames.json", cases, check_frame_case);
}

/// `direct.json` (spec §14.2): DIRECT and ACCEPT both ways between peers
/// that both sent `direct`, and refused otherwise.
#[test]
fn direct_frames() {
    let doc = load("direct.json");
    run_all("direct.json", cases(&doc, "cases"), |case| {
        let (bytes, frame) = (unhex(&case["hex"]), frame_from_json(&case["frame"]));
        if frame.to_bytes()[..] != bytes[..] {
            return Err(format!("encode gave {}", hex::encode(frame.to_bytes())));
        }
        let mut decoder = Decoder::new(DEFAULT_MAX_FRAME);
        decoder.set_direct(true);
        match decoder.decode(&mut BytesMut::from(&bytes[..])) {
            Ok(Some(f)) if f == frame && frame_to_json(&f) == case["frame"] => Ok(()),
            other => Err(format!("decode gave {other:?}")),
        }
    });
    run_all("direct.json reject", cases(&doc, "reject"), |case| {
        let mut decoder = Decoder::new(DEFAULT_MAX_FRAME);
        decoder.set_direct(case["negotiated"].as_bool().expect("negotiated"));
        match decoder.decode(&mut BytesMut::from(&unhex(&case["hex"])[..])) {
            Err(e) if e.code == code_named(str_of(case, "code")) && e.message.contains(str_of(case, "message_contains")) => Ok(()),
            other => Err(format!("gave {other:?}")),
        }
    });
}

/// Frames with reserved flag bits set: they decode to the given fields
/// (the bits are ignored); encoding those fields gives the bytes with the
/// bits cleared.
#[test]
fn frames_decode_only() {
    let doc = load("frames.json");
    run_all("frames.json decode_only", cases(&doc, "decode_only"), |case| {
        let mut bytes = unhex(&case["hex"]);
        let mut buf = BytesMut::from(&bytes[..]);
        match Decoder::default().decode(&mut buf) {
            Ok(Some(f)) if frame_to_json(&f) == case["frame"] && buf.is_empty() => {}
            other => return Err(format!("decode gave {other:?}")),
        }
        bytes[6] = match case["frame"]["type"].as_str() {
            Some("request") => bytes[6] & 0b11,
            _ => 0,
        };
        let enc = frame_from_json(&case["frame"]).to_bytes();
        if enc[..] != bytes[..] {
            return Err(format!("encode gave {}, want {}", hex::encode(&enc), hex::encode(&bytes)));
        }
        Ok(())
    });
}

/// All frame vectors back to back in one buffer decode in order: a receiver
/// parses every complete frame it has.
#[test]
fn frames_concatenated() {
    let doc = load("frames.json");
    let cases = cases(&doc, "cases");
    let mut buf = BytesMut::new();
    for c in cases {
        buf.extend_from_slice(&unhex(&c["hex"]));
    }
    let decoder = Decoder::default();
    let mut failures = Vec::new();
    for c in cases {
        match decoder.decode(&mut buf) {
            Ok(Some(f)) if frame_to_json(&f) == c["frame"] => {}
            other => failures.push(format!("  {}: {other:?}", c["name"])),
        }
    }
    assert!(buf.is_empty(), "{} bytes left", buf.len());
    assert!(failures.is_empty(), "concatenated frames failed:\n{}", failures.join("\n"));
}

// ----------------------------------------------------------------- reject

fn check_reject_case(case: &Value) -> Result<(), String> {
    let bytes = unhex(&case["hex"]);
    let max_frame =
        case.get("max_frame").map_or(DEFAULT_MAX_FRAME, |v| v.as_u64().and_then(|n| u32::try_from(n).ok()).expect("max_frame is a u32"));
    let eof = case["eof"].as_bool().expect("eof is a bool");
    let want = code_named(str_of(case, "error"));
    let contains = case.get("message_contains").map(|v| v.as_str().expect("message_contains string"));

    let decoder = Decoder::new(max_frame);
    let mut buf = BytesMut::from(&bytes[..]);
    let mut decoded = Vec::new();
    let err: FrameError = loop {
        match decoder.decode(&mut buf) {
            Ok(Some(f)) => decoded.push(f),
            Ok(None) if eof => match decoder.finish(&buf) {
                Err(e) => break e,
                Ok(()) => return Err(format!("accepted: decoded {decoded:?} and finish() was Ok")),
            },
            Ok(None) => {
                return Err(format!(
                    "decoder wants more bytes ({} buffered, after {} frames) but should have refused already",
                    buf.len(),
                    decoded.len()
                ))
            }
            Err(e) => break e,
        }
    };
    if err.code != want {
        return Err(format!("got {}: {}, want {}", err.code, err.message, want));
    }
    if let Some(s) = contains {
        if !err.message.contains(s) {
            return Err(format!("message {:?} does not contain {s:?}", err.message));
        }
    }
    Ok(())
}

#[test]
fn reject() {
    let doc = load("reject.json");
    run_all("reject.json", cases(&doc, "cases"), check_reject_case);
}

// -------------------------------------------------------------- handshake

fn check_hello_case(case: &Value) -> Result<(), String> {
    let body = str_of(case, "body_json");
    let valid = case["valid"].as_bool().expect("valid is a bool");
    match (Hello::from_json(body.as_bytes()), valid) {
        (Ok(hello), true) => {
            let got = serde_json::to_value(&hello).map_err(|e| e.to_string())?;
            if got != case["hello"] {
                return Err(format!("parsed to {got}, want {}", case["hello"]));
            }
            // What we parse, we can write and read back.
            let again = Hello::from_json(&hello.to_json()).map_err(|e| format!("re-parse: {e}"))?;
            if again != hello {
                return Err("to_json/from_json does not round-trip".into());
            }
            Ok(())
        }
        (Ok(hello), false) => Err(format!("accepted an invalid HELLO: {hello:?}")),
        (Err(e), true) => Err(format!("rejected a valid HELLO: {e}")),
        (Err(e), false) => {
            let want = code_named(str_of(case, "error"));
            if e.code == want {
                Ok(())
            } else {
                Err(format!("got {}: {}, want {want}", e.code, e.message))
            }
        }
    }
}

/// The same bodies, wrapped in HELLO frames, through the decoder.
fn check_hello_frame_case(case: &Value) -> Result<(), String> {
    let body = str_of(case, "body_json").as_bytes();
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(&[1, 0x01, 0, 0, 0, 0, 0, 0]);
    buf.extend_from_slice(body);
    match (Decoder::default().decode(&mut buf), case["valid"].as_bool().expect("valid")) {
        (Ok(Some(Frame::Hello(h))), true) if serde_json::to_value(&h).ok().as_ref() == Some(&case["hello"]) => Ok(()),
        (Err(e), false) if e.code == code_named(str_of(case, "error")) => Ok(()),
        (other, _) => Err(format!("as a HELLO frame: {other:?}")),
    }
}

#[test]
fn handshake_bodies() {
    let doc = load("handshake.json");
    let cases = cases(&doc, "cases");
    let mut failures = run_cases("handshake.json cases", cases, check_hello_case);
    failures.extend(run_cases("handshake.json cases in HELLO frames", cases, check_hello_frame_case));
    assert_none_failed(failures);
}

fn versions(v: &Value) -> Vec<u32> {
    v.as_array().expect("versions array").iter().map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()).expect("u32 version")).collect()
}

#[test]
fn handshake_negotiation() {
    let doc = load("handshake.json");
    run_all("handshake.json negotiation", cases(&doc, "negotiation"), |case| {
        let (ours, theirs) = (versions(&case["ours"]), versions(&case["theirs"]));
        match (negotiate(&ours, &theirs), case.get("result")) {
            (Ok(v), Some(want)) if want.as_u64() == Some(v as u64) => Ok(()),
            (Err(e), None) => {
                let want = code_named(str_of(case, "error"));
                if e.code != want {
                    return Err(format!("got {}: {}, want {want}", e.code, e.message));
                }
                match case.get("message_contains").and_then(Value::as_str) {
                    Some(s) if !e.message.contains(s) => Err(format!("message {:?} lacks {s:?}", e.message)),
                    _ => Ok(()),
                }
            }
            (got, want) => Err(format!("got {got:?}, want {want:?}")),
        }
    });
}

// ----------------------------------------------------------------- codecs

fn check_codec_case(case: &Value) -> Result<(), String> {
    let value = &case["value"];
    let msgpack = unhex(&case["msgpack_hex"]);
    let json_text = str_of(case, "json");

    let decoded: Value = rmp_serde::from_slice(&msgpack).map_err(|e| format!("msgpack decode: {e}"))?;
    if &decoded != value {
        return Err(format!("msgpack decodes to {decoded}, want {value}"));
    }
    let encoded = rmp_serde::to_vec(value).map_err(|e| format!("msgpack encode: {e}"))?;
    if encoded != msgpack {
        return Err(format!("msgpack encode gave {}, want {}", hex::encode(&encoded), hex::encode(&msgpack)));
    }
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    if text != json_text {
        return Err(format!("json encode gave {text}, want {json_text}"));
    }
    let parsed: Value = serde_json::from_str(json_text).map_err(|e| format!("json decode: {e}"))?;
    if &parsed != value {
        return Err(format!("json decodes to {parsed}, want {value}"));
    }
    Ok(())
}

fn check_json_number(case: &Value) -> Result<(), String> {
    let text = case["json"].as_str().ok_or("json is not a string")?;
    let want = u64::from_be_bytes(unhex(&case["f64_hex"]).try_into().map_err(|_| "f64_hex is not 8 bytes")?);
    let parsed: Value = serde_json::from_str(text).map_err(|e| format!("json decode: {e}"))?;
    let got = parsed.as_f64().ok_or_else(|| format!("{text} decodes to {parsed}, not a float"))?.to_bits();
    if got != want {
        return Err(format!("{text} decodes to bits {got:016x}, want {want:016x}"));
    }
    Ok(())
}

fn check_bin_case(case: &Value) -> Result<(), String> {
    let bytes = unhex(&case["bytes_hex"]);
    let msgpack = unhex(&case["msgpack_hex"]);
    let encoded = rmp_serde::to_vec(&serde_bytes::ByteBuf::from(bytes.clone())).map_err(|e| e.to_string())?;
    if encoded != msgpack {
        return Err(format!("msgpack encode gave {}, want {}", hex::encode(&encoded), hex::encode(&msgpack)));
    }
    let decoded: serde_bytes::ByteBuf = rmp_serde::from_slice(&msgpack).map_err(|e| format!("msgpack decode: {e}"))?;
    if decoded.as_slice() != &bytes[..] {
        return Err(format!("msgpack decodes to {}", hex::encode(decoded.as_slice())));
    }
    let json_text = case["json"].as_str().ok_or("json missing")?;
    let text = serde_json::to_string(&serde_bytes::ByteBuf::from(bytes.clone())).map_err(|e| e.to_string())?;
    if text != json_text {
        return Err(format!("json encode gave {text}, want {json_text}"));
    }
    let parsed: serde_bytes::ByteBuf = serde_json::from_str(json_text).map_err(|e| format!("json decode: {e}"))?;
    if parsed.as_slice() != &bytes[..] {
        return Err(format!("json decodes to {}", hex::encode(parsed.as_slice())));
    }
    Ok(())
}

#[test]
fn codecs() {
    let doc = load("codecs.json");
    let mut failures = run_cases("codecs.json cases", cases(&doc, "cases"), check_codec_case);
    failures.extend(run_cases("codecs.json bin", cases(&doc, "bin"), check_bin_case));
    failures.extend(run_cases("codecs.json json_numbers", cases(&doc, "json_numbers"), check_json_number));
    assert_none_failed(failures);
}

/// The upgrade's frames (§11.4): decode and encode, and the bytes to refuse.
/// The segment cases are checked by the runtime's `transport/shm` tests.
#[test]
fn upgrade_frames() {
    let doc = load("upgrade.json");
    run_all("upgrade.json cases", cases(&doc, "cases"), check_frame_case);
    run_all("upgrade.json reject", cases(&doc, "reject"), |case| {
        let mut buf = BytesMut::from(&unhex(&case["hex"])[..]);
        match Decoder::new(DEFAULT_MAX_FRAME).decode(&mut buf) {
            Err(e) if e.code.name() == str_of(case, "error") => Ok(()),
            other => Err(format!("decode gave {other:?}, want {}", str_of(case, "error"))),
        }
    });
}
