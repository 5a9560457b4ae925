//! `spec/vectors/nats.json` (`spec/PROTOCOL.md` §13) against
//! `transport::nats::wire`: every case of every section, failures reported
//! by name together.

use bytes::Bytes;
use hubwire::transport::nats::wire::{self, ConnectReply, ConnectRequest, MsgKind, SeqCheck, Target};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/vectors/nats.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cases<'a>(v: &'a Value, section: &str) -> &'a [Value] {
    let c = v[section].as_array().unwrap_or_else(|| panic!("section {section}"));
    assert!(!c.is_empty(), "section {section} is empty");
    c
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap()
}

fn kind(name: &str) -> MsgKind {
    [MsgKind::Data, MsgKind::Heartbeat, MsgKind::End, MsgKind::Close].into_iter().find(|k| k.name() == name).unwrap()
}

#[test]
fn every_nats_vector_holds() {
    let v = vectors();
    let mut failed = Vec::new();
    let mut check = |name: &Value, ok: bool, what: String| {
        if !ok {
            failed.push(format!("{}: {what}", s(name)));
        }
    };
    for c in cases(&v, "tokens") {
        let t = wire::token(s(&c["method"]));
        check(&c["name"], t == s(&c["token"]), format!("token {t}"));
        let back = wire::untoken(s(&c["token"]));
        check(&c["name"], back.as_deref() == Some(s(&c["method"])), format!("untoken {back:?}"));
    }
    for c in cases(&v, "subjects") {
        let value = s(&c["value"]).to_string();
        let target = match s(&c["target"]) {
            "method" => Target::Method(value),
            "provider" => Target::Provider(value),
            _ => Target::Replica(value),
        };
        let got = target.subject(s(&c["prefix"]));
        check(&c["name"], got == s(&c["subject"]), got);
    }
    for c in cases(&v, "services") {
        let got = wire::service_name(s(&c["provider"]));
        check(&c["name"], got == s(&c["service"]), got);
    }
    for c in cases(&v, "messages") {
        let data = hex::decode(s(&c["data_hex"])).unwrap();
        let (k, seq) = (kind(s(&c["kind"])), c["seq"].as_u64().unwrap() as u32);
        let enc = hex::encode(wire::encode(k, seq, &data));
        check(&c["name"], enc == s(&c["hex"]), format!("encode {enc}"));
        let dec = wire::decode(&Bytes::from(hex::decode(s(&c["hex"])).unwrap()));
        check(&c["name"], dec == Ok((k, seq, Bytes::from(data))), format!("decode {dec:?}"));
    }
    for c in cases(&v, "invalid_messages") {
        let dec = wire::decode(&Bytes::from(hex::decode(s(&c["hex"])).unwrap()));
        check(&c["name"], dec.is_err(), format!("accepted {dec:?}"));
    }
    for c in cases(&v, "sequences") {
        let mut seq = SeqCheck::starting_at(c["first"].as_u64().unwrap_or(0) as u32);
        let broke = c["seqs"].as_array().unwrap().iter().position(|n| seq.accept(n.as_u64().unwrap() as u32).is_err());
        let want = c["broken_at"].as_u64().map(|n| n as usize);
        check(&c["name"], broke == want, format!("broke at {broke:?}"));
    }
    for c in cases(&v, "connect") {
        let body = serde_json::to_vec(&c["body"]).unwrap();
        let again = if s(&c["role"]) == "request" {
            let r = wire::parse_request(&body);
            check(&c["name"], r.is_ok(), format!("refused {r:?}"));
            r.map(|r| serde_json::to_value(r).unwrap()).unwrap_or_default()
        } else {
            let r: Result<ConnectReply, _> = serde_json::from_slice(&body);
            check(&c["name"], r.is_ok(), format!("unreadable {r:?}"));
            r.map(|r| serde_json::to_value(r).unwrap()).unwrap_or_default()
        };
        check(&c["name"], again == c["body"], format!("re-encoded as {again}"));
    }
    for c in cases(&v, "connect_invalid") {
        let r = wire::parse_request(s(&c["body_text"]).as_bytes());
        let code = r.as_ref().err().map(|e| e.code.clone());
        check(&c["name"], code.as_deref() == Some(s(&c["code"])), format!("got {r:?}"));
    }
    assert!(failed.is_empty(), "{} failing vector(s):\n{}", failed.len(), failed.join("\n"));
    // The request type round-trips as the spec writes it.
    let r = ConnectRequest { hubwire: 1, link: "_INBOX.x".into(), peer: None };
    assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"hubwire":1,"link":"_INBOX.x"}"#);
}
