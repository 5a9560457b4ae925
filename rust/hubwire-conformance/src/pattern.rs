//! Frames from case data, and case patterns matched against frames.
//!
//! A frame in a case is a map named like `spec/vectors/frames.json`
//! (`type`, `call_id`, `kind`, `codec`, `method`, `code`, …) plus one
//! payload field (`payload_text`, `payload_hex`, `payload_fill`, `value`).
//! A pattern has the same fields; only those it names are checked. Strings
//! starting with `$` are variables: bound on first use, compared after.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use hubwire_frame::frame::{Codec, Kind};
use hubwire_frame::{Code, Frame, Hello, PeerInfo};
use serde_json::{json, Map, Value};

/// Variables bound while a case runs.
pub type Vars = HashMap<String, Value>;

fn field<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    m.get(k)
}

/// Resolves `$name` references in a value about to be sent.
pub fn resolve(v: &Value, vars: &Vars) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) if s.starts_with('$') && s.len() > 1 && s != "$i" && s != "$odd" => {
            vars.get(s).cloned().ok_or_else(|| format!("variable {s} is used before it is bound"))?
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| resolve(x, vars)).collect::<Result<_, _>>()?),
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| Ok((k.clone(), resolve(x, vars)?))).collect::<Result<_, String>>()?),
        other => other.clone(),
    })
}

/// Resolves bound variables in a pattern and leaves unbound ones, which
/// the match will bind.
pub fn resolve_partial(v: &Value, vars: &Vars) -> Value {
    match v {
        Value::String(s) if s.starts_with('$') => vars.get(s).cloned().unwrap_or_else(|| v.clone()),
        Value::Array(a) => Value::Array(a.iter().map(|x| resolve_partial(x, vars)).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), resolve_partial(x, vars))).collect()),
        other => other.clone(),
    }
}

/// Substitutes the repetition index: the string `"$i"` becomes the number
/// `i`, `"$odd"` the number `2i+1` (the provider role's call ids), and
/// `$i` inside a longer string becomes its digits (`"c$i"` → `"c3"`).
pub fn subst_i(v: &Value, i: u64) -> Value {
    match v {
        Value::String(s) if s == "$i" => json!(i),
        Value::String(s) if s == "$odd" => json!(2 * i + 1),
        Value::String(s) if s.contains("$i") => Value::String(s.replace("$i", &i.to_string())),
        Value::Array(a) => Value::Array(a.iter().map(|x| subst_i(x, i)).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), subst_i(x, i))).collect()),
        other => other.clone(),
    }
}

fn codec_of(m: &Map<String, Value>) -> Result<Codec, String> {
    match field(m, "codec").and_then(Value::as_str) {
        None if m.contains_key("value") => Ok(Codec::Msgpack),
        None => Ok(Codec::Raw),
        Some("raw") => Ok(Codec::Raw),
        Some("msgpack") => Ok(Codec::Msgpack),
        Some("json") => Ok(Codec::Json),
        Some(c) => Err(format!("unknown codec {c:?}")),
    }
}

/// Encodes a JSON value with a structured codec.
pub fn encode_value(v: &Value, codec: Codec) -> Result<Bytes, String> {
    match codec {
        Codec::Json => Ok(serde_json::to_vec(v).unwrap().into()),
        Codec::Msgpack => rmp_serde::to_vec_named(v).map(Bytes::from).map_err(|e| e.to_string()),
        Codec::Raw => Err("a value needs codec msgpack or json".into()),
    }
}

/// Decodes a payload into a JSON value (raw payloads become hex strings).
pub fn decode_value(p: &[u8], codec: Codec) -> Result<Value, String> {
    match codec {
        Codec::Json => serde_json::from_slice(p).map_err(|e| format!("json: {e}")),
        Codec::Msgpack => rmp_serde::from_slice(p).map_err(|e| format!("msgpack: {e}")),
        Codec::Raw => Ok(Value::String(hex::encode(p))),
    }
}

fn payload_of(m: &Map<String, Value>, codec: Codec) -> Result<Bytes, String> {
    if let Some(t) = field(m, "payload_text").and_then(Value::as_str) {
        return Ok(Bytes::copy_from_slice(t.as_bytes()));
    }
    if let Some(h) = field(m, "payload_hex").and_then(Value::as_str) {
        return hex::decode(h).map(Bytes::from).map_err(|e| format!("payload_hex: {e}"));
    }
    if let Some(f) = field(m, "payload_fill") {
        let (b, n) = (f[0].as_u64().unwrap_or(0) as u8, f[1].as_u64().unwrap_or(0) as usize);
        return Ok(vec![b; n].into());
    }
    if let Some(v) = field(m, "value") {
        return encode_value(v, codec);
    }
    Ok(Bytes::new())
}

fn u32_of(m: &Map<String, Value>, k: &str) -> Result<u32, String> {
    match field(m, k) {
        None => Ok(0),
        Some(v) => v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| format!("{k} must be a u32, got {v}")),
    }
}

/// A code by name; a number is put on the wire as it is (after the frame
/// is encoded), to send reserved values.
fn code_of(m: &Map<String, Value>) -> Result<Code, String> {
    if field(m, "code").is_some_and(Value::is_number) {
        return Ok(Code::Ok);
    }
    let name = field(m, "code").and_then(Value::as_str).unwrap_or("ok");
    Code::from_name(name).ok_or_else(|| format!("unknown code {name:?}"))
}

/// Writes a numeric `code` into the first body byte of RESPONSE/GOAWAY.
fn patch_code(b: Bytes, m: &Map<String, Value>) -> Result<Bytes, String> {
    match field(m, "code").and_then(Value::as_u64) {
        None => Ok(b),
        Some(n) => {
            let mut b = BytesMut::from(&b[..]);
            b[hubwire_frame::HEADER_LEN] = u8::try_from(n).map_err(|_| "code must fit a byte")?;
            Ok(b.freeze())
        }
    }
}

fn kind_of(m: &Map<String, Value>) -> Result<Kind, String> {
    Ok(match field(m, "kind").and_then(Value::as_str).unwrap_or("unary") {
        "unary" => Kind::Unary,
        "server_stream" => Kind::ServerStream,
        "client_stream" => Kind::ClientStream,
        "bidi" => Kind::Bidi,
        k => return Err(format!("unknown kind {k:?}")),
    })
}

fn data8(m: &Map<String, Value>) -> Result<[u8; 8], String> {
    let h = field(m, "data_hex").and_then(Value::as_str).unwrap_or("0000000000000000");
    let v = hex::decode(h).map_err(|e| e.to_string())?;
    v.try_into().map_err(|_| "data_hex must be 8 bytes".to_string())
}

/// The runner's HELLO: defaults, then the case's `hello` fields, then the
/// frame's own fields.
pub fn hello_frame(m: &Map<String, Value>) -> Result<Bytes, String> {
    if let Some(body) = field(m, "body") {
        // A body given verbatim (unknown fields, odd values).
        let body = serde_json::to_vec(body).unwrap();
        let mut b = BytesMut::new();
        b.extend_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(&[1, 0x01, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&body);
        return Ok(b.freeze());
    }
    let mut h =
        Hello::new(PeerInfo { name: "conformance-runner".into(), lang: "runner".into(), version: env!("CARGO_PKG_VERSION").into() });
    let mut obj = serde_json::to_value(&h).unwrap();
    for (k, v) in m {
        if !matches!(k.as_str(), "type" | "version") {
            obj[k] = v.clone();
        }
    }
    h = serde_json::from_value(obj).map_err(|e| format!("hello fields: {e}"))?;
    Ok(Frame::Hello(Box::new(h)).to_bytes())
}

/// Encodes one frame of case data.
pub fn build(spec: &Value, vars: &Vars) -> Result<Bytes, String> {
    let spec = resolve(spec, vars)?;
    let m = spec.as_object().ok_or("a frame must be a map")?;
    let ty = field(m, "type").and_then(Value::as_str).ok_or("a frame needs a type")?;
    let codec = codec_of(m)?;
    let call_id = u32_of(m, "call_id")?;
    let frame = match ty {
        "hello" => return patch_version(hello_frame(m)?, m),
        "request" => Frame::Request {
            call_id,
            kind: kind_of(m)?,
            codec,
            timeout_ms: u32_of(m, "timeout_ms")?,
            method: field(m, "method").and_then(Value::as_str).unwrap_or("echo").into(),
            payload: payload_of(m, codec)?,
        },
        "response" => Frame::Response {
            call_id,
            codec,
            code: code_of(m)?,
            message: field(m, "message").and_then(Value::as_str).unwrap_or("").into(),
            payload: payload_of(m, codec)?,
        },
        "item" => Frame::Item { call_id, codec, payload: payload_of(m, codec)? },
        "end" => Frame::End { call_id },
        "cancel" => Frame::Cancel { call_id },
        "credit" => Frame::Credit { call_id, credit: u32_of(m, "credit")? },
        "ping" => Frame::Ping { data: data8(m)? },
        "pong" => Frame::Pong { data: data8(m)? },
        "goaway" => Frame::Goaway {
            last_id: u32_of(m, "last_id")?,
            code: code_of(m)?,
            message: field(m, "message").and_then(Value::as_str).unwrap_or("").into(),
        },
        "upgrade" => Frame::Upgrade { mechanism: field(m, "mechanism").and_then(Value::as_str).unwrap_or("shm").into() },
        "upgraded" => Frame::Upgraded { code: code_of(m)?, message: field(m, "message").and_then(Value::as_str).unwrap_or("").into() },
        // The direct path (spec §14.2): the body as given.
        "direct" => Frame::Direct(Box::new(
            serde_json::from_value(field(m, "body").cloned().unwrap_or_default()).map_err(|e| format!("direct body: {e}"))?,
        )),
        "accept" => {
            Frame::Accept(serde_json::from_value(field(m, "body").cloned().unwrap_or_default()).map_err(|e| format!("accept body: {e}"))?)
        }
        other => return Err(format!("unknown frame type {other:?}")),
    };
    patch_version(patch_code(frame.to_bytes(), m)?, m)
}

fn patch_version(b: Bytes, m: &Map<String, Value>) -> Result<Bytes, String> {
    match field(m, "version") {
        None => Ok(b),
        Some(v) => {
            let mut b = BytesMut::from(&b[..]);
            b[4] = v.as_u64().ok_or("version must be a number")? as u8;
            Ok(b.freeze())
        }
    }
}

/// The type name of a frame, as in cases.
pub fn type_name(f: &Frame) -> &'static str {
    match f {
        Frame::Hello(_) => "hello",
        Frame::Request { .. } => "request",
        Frame::Response { .. } => "response",
        Frame::Item { .. } => "item",
        Frame::End { .. } => "end",
        Frame::Cancel { .. } => "cancel",
        Frame::Credit { .. } => "credit",
        Frame::Ping { .. } => "ping",
        Frame::Pong { .. } => "pong",
        Frame::Goaway { .. } => "goaway",
        Frame::Upgrade { .. } => "upgrade",
        Frame::Upgraded { .. } => "upgraded",
        Frame::Direct(_) => "direct",
        Frame::Accept(_) => "accept",
    }
}

/// A frame's fields as JSON, for matching and for messages.
pub fn describe(f: &Frame) -> (Map<String, Value>, Option<(Bytes, Codec)>) {
    let mut m = Map::new();
    m.insert("type".into(), type_name(f).into());
    let mut payload = None;
    match f {
        Frame::Hello(h) => {
            m.insert("body".into(), serde_json::to_value(h).unwrap());
        }
        Frame::Request { call_id, kind, codec, timeout_ms, method, payload: p } => {
            m.insert("call_id".into(), json!(call_id));
            m.insert("kind".into(), kind.name().into());
            m.insert("codec".into(), codec.name().into());
            m.insert("timeout_ms".into(), json!(timeout_ms));
            m.insert("method".into(), json!(method.as_str()));
            payload = Some((p.clone(), *codec));
        }
        Frame::Response { call_id, codec, code, message, payload: p } => {
            m.insert("call_id".into(), json!(call_id));
            m.insert("codec".into(), codec.name().into());
            m.insert("code".into(), code.name().into());
            m.insert("message".into(), json!(message));
            payload = Some((p.clone(), *codec));
        }
        Frame::Item { call_id, codec, payload: p } => {
            m.insert("call_id".into(), json!(call_id));
            m.insert("codec".into(), codec.name().into());
            payload = Some((p.clone(), *codec));
        }
        Frame::End { call_id } | Frame::Cancel { call_id } => {
            m.insert("call_id".into(), json!(call_id));
        }
        Frame::Credit { call_id, credit } => {
            m.insert("call_id".into(), json!(call_id));
            m.insert("credit".into(), json!(credit));
        }
        Frame::Ping { data } | Frame::Pong { data } => {
            m.insert("data_hex".into(), hex::encode(data).into());
        }
        Frame::Goaway { last_id, code, message } => {
            m.insert("last_id".into(), json!(last_id));
            m.insert("code".into(), code.name().into());
            m.insert("message".into(), json!(message));
        }
        Frame::Upgrade { mechanism } => {
            m.insert("mechanism".into(), json!(mechanism));
        }
        Frame::Upgraded { code, message } => {
            m.insert("code".into(), code.name().into());
            m.insert("message".into(), json!(message));
        }
        Frame::Direct(o) => {
            m.insert("body".into(), serde_json::to_value(o).unwrap());
        }
        Frame::Accept(a) => {
            m.insert("body".into(), serde_json::to_value(a).unwrap());
        }
    }
    (m, payload)
}

/// Short text of a frame for failure messages.
pub fn show(f: &Frame) -> String {
    let (mut m, p) = describe(f);
    if let Some((p, c)) = p {
        let v = if p.len() > 64 {
            json!(format!("<{} bytes>", p.len()))
        } else {
            decode_value(&p, c).unwrap_or_else(|_| json!(hex::encode(&p)))
        };
        m.insert("payload".into(), v);
    }
    Value::Object(m).to_string()
}

/// Numbers compare by value (1 == 1.0); everything else structurally.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w))),
        _ => a == b,
    }
}

/// Whether `got` contains `want`: object keys must match recursively, each
/// array element of `want` must match some element of `got`.
/// Variables (`$name`) bind or compare as in [`match_scalar`].
pub fn json_subset(want: &Value, got: &Value, vars: &mut Vars) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w.iter().all(|(k, v)| g.get(k).is_some_and(|x| json_subset(v, x, vars))),
        (Value::Array(w), Value::Array(g)) => w.iter().all(|v| {
            g.iter().any(|x| {
                let mut trial = vars.clone();
                let ok = json_subset(v, x, &mut trial);
                if ok {
                    *vars = trial;
                }
                ok
            })
        }),
        _ => match_scalar("", want, got, vars).is_ok(),
    }
}

/// Compares `got` with a pattern value, binding or checking a variable.
pub fn match_scalar(key: &str, want: &Value, got: &Value, vars: &mut Vars) -> Result<(), String> {
    if let Value::String(s) = want {
        if s.starts_with('$') && s.len() > 1 {
            return match vars.get(s) {
                Some(bound) if json_eq(bound, got) => Ok(()),
                Some(bound) => Err(format!("{key}: {s} is {bound}, got {got}")),
                None => {
                    vars.insert(s.clone(), got.clone());
                    Ok(())
                }
            };
        }
    }
    if json_eq(want, got) {
        Ok(())
    } else {
        Err(format!("{key}: expected {want}, got {got}"))
    }
}

/// Whether every byte of `p` is `b`. Compared a page at a time (slice
/// equality is a `memcmp`) rather than byte by byte: the runner is a debug
/// build in `make test`, where a byte loop over a 16 MiB payload holds a
/// runtime thread for ~100 ms, long enough to starve the NATS links of
/// the cases running beside it (a 600 ms silence breaks one, §13.5).
fn all_bytes(p: &[u8], b: u8) -> bool {
    let page = [b; 4096];
    p.chunks(page.len()).all(|c| c == &page[..c.len()])
}

/// Checks a received frame against a pattern (without `repeat`/`values`).
pub fn check(pattern: &Map<String, Value>, f: &Frame, vars: &mut Vars) -> Result<(), String> {
    let (fields, payload) = describe(f);
    for (k, want) in pattern {
        match k.as_str() {
            "repeat" | "values" | "unordered" => {}
            "value" => {
                let (p, c) = payload.as_ref().ok_or("value: the frame has no payload")?;
                let got = decode_value(p, *c)?;
                if !json_eq(want, &got) {
                    return Err(format!("value: expected {want}, got {got}"));
                }
            }
            "payload_text" => {
                let (p, _) = payload.as_ref().ok_or("payload_text: no payload")?;
                if p.as_ref() != want.as_str().unwrap_or("").as_bytes() {
                    return Err(format!("payload_text: expected {want}, got {:?}", String::from_utf8_lossy(p)));
                }
            }
            "payload_hex" => {
                let (p, _) = payload.as_ref().ok_or("payload_hex: no payload")?;
                if hex::encode(p) != want.as_str().unwrap_or("") {
                    return Err(format!("payload_hex: expected {want}, got {}", hex::encode(p)));
                }
            }
            "payload_len" => {
                let (p, _) = payload.as_ref().ok_or("payload_len: no payload")?;
                match_scalar(k, want, &json!(p.len()), vars)?;
            }
            "payload_fill" => {
                let (p, _) = payload.as_ref().ok_or("payload_fill: no payload")?;
                let (b, n) = (want[0].as_u64().unwrap_or(0) as u8, want[1].as_u64().unwrap_or(0) as usize);
                if p.len() != n || !all_bytes(p, b) {
                    return Err(format!("payload_fill: expected {n} bytes of {b}, got {} bytes", p.len()));
                }
            }
            "message_contains" => {
                let msg = fields.get("message").and_then(Value::as_str).unwrap_or("");
                if !msg.contains(want.as_str().unwrap_or("")) {
                    return Err(format!("message {msg:?} does not contain {want}"));
                }
            }
            "body" => {
                let got = fields.get("body").ok_or("body: not a HELLO")?;
                if !json_subset(want, got, vars) {
                    return Err(format!("body: {got} does not contain {want}"));
                }
            }
            _ => {
                let got = fields.get(k).ok_or_else(|| format!("{k}: a {} frame has no such field", type_name(f)))?;
                match_scalar(k, want, got, vars)?;
            }
        }
    }
    Ok(())
}
