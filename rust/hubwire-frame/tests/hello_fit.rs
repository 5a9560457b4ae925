//! A HELLO too large for every peer is shortened (`spec/PROTOCOL.md`
//! §4.1.2): docs first, then schemas; names and kinds always stay.

use hubwire_frame::{Hello, Kind, MethodInfo, PeerInfo, HELLO_LIMIT};
use serde_json::json;

fn hello(methods: usize, schema_pad: usize, doc_pad: usize) -> Hello {
    let mut h = Hello::new(PeerInfo { name: "many".into(), lang: "rust".into(), version: "0".into() });
    h.methods = (0..methods)
        .map(|i| MethodInfo {
            name: format!("m{i}"),
            kind: Kind::Unary,
            input: json!({"description": "x".repeat(schema_pad)}),
            output: json!({}),
            errors: Some(json!(true)),
            doc: Some("d".repeat(doc_pad)),
        })
        .collect();
    h
}

#[test]
fn a_hello_that_fits_is_unchanged() {
    let mut h = hello(10, 100, 100);
    let before = h.clone();
    h.fit();
    assert_eq!(h, before);
}

#[test]
fn docs_go_first() {
    let mut h = hello(3000, 30, 300);
    assert!(h.to_json().len() > HELLO_LIMIT as usize);
    h.fit();
    assert!(h.to_json().len() <= HELLO_LIMIT as usize);
    assert!(h.methods.iter().all(|m| m.doc.is_none() && m.input["description"].as_str().unwrap().len() == 30));
    assert_eq!(h.methods.len(), 3000);
}

#[test]
fn then_the_schemas() {
    let mut h = hello(3000, 300, 10);
    h.fit();
    assert!(h.to_json().len() <= HELLO_LIMIT as usize);
    assert!(h.methods.iter().all(|m| m.doc.is_none() && m.input == json!({}) && m.errors.is_none()));
    assert_eq!(h.methods[2999].name, "m2999");
}
