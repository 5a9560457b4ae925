//! The suite covers what issue and spec ask of it: enough cases, every
//! frame type sent and expected, every status code of `spec/errors.md` as
//! an outcome, every call kind in both roles, and a doc line on each case.

use std::collections::BTreeSet;
use std::path::Path;

use hubwire_conformance::case::{load_suites, Role};
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn the_suite_covers_the_protocol() {
    let cases = load_suites(&root().join("conformance/suites")).unwrap();
    assert!(cases.len() >= 60, "only {} cases", cases.len());

    let (mut sent, mut expected, mut codes, mut kinds) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for c in &cases {
        assert!(!c.doc.trim().is_empty(), "case {} ({}) has no doc", c.name, c.role.name());
        for step in &c.steps {
            let (kind, arg) = step.as_object().unwrap().iter().next().unwrap();
            let ty = arg.get("type").and_then(Value::as_str).unwrap_or("").to_string();
            match kind.as_str() {
                "send" => {
                    sent.insert(ty.clone());
                    if ty == "request" && c.role == Role::Provider {
                        kinds.insert((arg.get("kind").and_then(Value::as_str).unwrap_or("unary").to_string(), "provider"));
                    }
                }
                "expect" => {
                    expected.insert(ty);
                }
                "control" if arg["op"] == "call" => {
                    kinds.insert((arg.get("kind").and_then(Value::as_str).unwrap_or("unary").to_string(), "client"));
                }
                _ => {}
            }
            if matches!(kind.as_str(), "expect" | "expect_event") {
                if let Some(code) = arg.get("code").and_then(Value::as_str) {
                    codes.insert(code.to_string());
                }
            }
        }
    }
    let types = ["hello", "request", "response", "item", "end", "cancel", "credit", "ping", "pong", "goaway"];
    for t in types {
        assert!(sent.contains(t), "no case sends a {t} frame");
        assert!(expected.contains(t), "no case expects a {t} frame");
    }
    let table: Value = serde_json::from_slice(&std::fs::read(root().join("spec/codes.json")).unwrap()).unwrap();
    for code in table["codes"].as_array().unwrap() {
        let name = code["name"].as_str().unwrap();
        assert!(codes.contains(name), "no case expects the status {name}");
    }
    for kind in ["unary", "server_stream", "client_stream", "bidi"] {
        for role in ["provider", "client"] {
            assert!(kinds.contains(&(kind.to_string(), role)), "no {role}-role case makes a {kind} call");
        }
    }
}

#[test]
fn known_failing_lists_exist_and_parse() {
    for role in [Role::Provider, Role::Client] {
        let path = root().join(format!("conformance/known-failing/rust-{}.txt", role.name()));
        assert!(path.exists(), "{} is missing", path.display());
    }
}
