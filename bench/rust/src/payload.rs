//! Payloads, built from the rules in `bench/scenarios/payloads.toml`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// One entry of `payloads.toml`.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum PayloadSpec {
    /// A JSON value given as text.
    Literal { json: String },
    /// Records appended until the JSON text reaches `size` bytes.
    Records { size: usize },
    /// One string of `size` bytes.
    String { size: usize },
    /// `size` bytes, byte i = i mod 251.
    Bytes { size: usize },
}

/// The ipc-channel study's structured message: a topic and a byte buffer
/// (serialized as bytes, not as a sequence of numbers, as that study's
/// update recommends).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    /// A small integer field.
    pub topic: u32,
    /// The bulk of the message.
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// A payload as a value, for the structured encodings.
#[derive(Clone, Debug, PartialEq)]
pub enum Structured {
    /// A JSON document (literal, records, string).
    Doc(Value),
    /// A byte buffer in a message (bytes).
    Msg(Msg),
}

/// A payload in both forms.
#[derive(Debug)]
pub struct Payload {
    /// Its name in `payloads.toml`.
    pub name: String,
    /// The bytes sent raw: the compact JSON text of a document, or the
    /// buffer itself.
    pub raw: Bytes,
    /// The value sent with a structured encoding.
    pub value: Structured,
}

impl Payload {
    /// Builds a payload from its rule.
    pub fn build(name: &str, spec: &PayloadSpec) -> Result<Payload, String> {
        let doc = |v: Value| {
            let raw = serde_json::to_vec(&v).map_err(|e| e.to_string())?;
            Ok::<_, String>((Bytes::from(raw), Structured::Doc(v)))
        };
        let (raw, value) = match spec {
            PayloadSpec::Literal { json } => doc(serde_json::from_str(json).map_err(|e| format!("payload {name}: {e}"))?)?,
            PayloadSpec::Records { size } => doc(records(*size))?,
            PayloadSpec::String { size } => doc(Value::String("x".repeat(size.saturating_sub(2))))?,
            PayloadSpec::Bytes { size } => {
                let data: Vec<u8> = (0..*size).map(|i| (i % 251) as u8).collect();
                (Bytes::from(data.clone()), Structured::Msg(Msg { topic: 7, data }))
            }
        };
        Ok(Payload { name: name.to_string(), raw, value })
    }

    /// Its size in bytes as sent raw.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether it is empty (never, for the files we ship).
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Whether its raw form is JSON text (so a JSON-only peer can carry it).
    pub fn is_json(&self) -> bool {
        matches!(self.value, Structured::Doc(_))
    }

    /// The structured form as a JSON value (a message's bytes become an
    /// array of numbers, which is what JSON makes of bytes).
    pub fn json_value(&self) -> Value {
        match &self.value {
            Structured::Doc(v) => v.clone(),
            Structured::Msg(m) => serde_json::to_value(m).expect("a Msg is valid JSON"),
        }
    }
}

/// A cheap stand-in for equality of documents, to check an answer: the
/// length of a document's top level.
pub fn shape(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        Value::String(s) => s.len(),
        _ => 1,
    }
}

/// The records rule: append records until the compact JSON text of the
/// array is at least `size` bytes.
fn records(size: usize) -> Value {
    let mut items = Vec::new();
    let mut len = 2; // "[" and "]"
    let mut i: u64 = 0;
    while len < size {
        let r = json!({
            "id": i,
            "name": format!("record-{i}"),
            "email": format!("user{i}@example.com"),
            "active": i.is_multiple_of(2),
            "score": i as f64 * 1.5,
            "tags": ["alpha", "beta", "gamma"],
        });
        len += serde_json::to_vec(&r).expect("a record is valid JSON").len() + usize::from(i > 0);
        items.push(r);
        i += 1;
    }
    Value::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_reach_their_size_and_no_more_than_one_record_past_it() {
        let p = Payload::build("big", &PayloadSpec::Records { size: 78_000 }).unwrap();
        assert!(p.len() >= 78_000 && p.len() < 78_200, "{}", p.len());
        let Structured::Doc(v) = &p.value else { panic!("records are a document") };
        assert_eq!(serde_json::to_vec(v).unwrap().len(), p.len());
    }

    #[test]
    fn strings_and_bytes_have_their_exact_size() {
        assert_eq!(Payload::build("s", &PayloadSpec::String { size: 79_000 }).unwrap().len(), 79_000);
        let b = Payload::build("b", &PayloadSpec::Bytes { size: 1024 }).unwrap();
        assert_eq!(b.len(), 1024);
        assert_eq!(b.raw[300], (300 % 251) as u8);
    }
}
