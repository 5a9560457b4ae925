//! The handshake (`spec/PROTOCOL.md` §4): the HELLO body and version
//! negotiation. The body is JSON so that a human can read it in a capture
//! and any language can parse it with what it already has.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Code, FrameError, Kind, DEFAULT_MAX_FRAME};

/// Default `window`: initial credit per stream.
pub const DEFAULT_WINDOW: u32 = 64;
/// Default `max_calls`: concurrent calls accepted as callee.
pub const DEFAULT_MAX_CALLS: u32 = 4096;
/// The smallest `max_frame` a peer may declare.
pub const MIN_MAX_FRAME: u32 = 4096;
/// The HELLO body size every peer accepts whatever its `max_frame`
/// (`spec/PROTOCOL.md` §4.1.2): a receiver reads its first frame with the
/// limit `max(max_frame, HELLO_LIMIT)`, and a sender keeps its HELLO within it.
pub const HELLO_LIMIT: u32 = 1 << 20;

/// Who a peer is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerInfo {
    /// Name for logs and listings.
    pub name: String,
    /// Implementation language (`rust`, `go`, `ts`, `python`, …).
    pub lang: String,
    /// Implementation version.
    pub version: String,
}

/// One method a peer offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodInfo {
    /// The name REQUESTs use.
    pub name: String,
    /// The call kind.
    pub kind: Kind,
    /// JSON Schema of the input.
    #[serde(default = "empty_schema")]
    pub input: Value,
    /// JSON Schema of the output.
    #[serde(default = "empty_schema")]
    pub output: Value,
    /// JSON Schema of the method's failure values, if it declares any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Value>,
    /// One line saying what the method does (for listings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
}

fn empty_schema() -> Value {
    Value::Object(Default::default())
}

/// The HELLO body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Protocol versions the sender speaks.
    pub versions: Vec<u32>,
    /// Who the sender is.
    pub peer: PeerInfo,
    /// Largest frame body the sender accepts.
    #[serde(default = "default_max_frame")]
    pub max_frame: u32,
    /// Initial credit per stream the sender receives.
    #[serde(default = "default_window")]
    pub window: u32,
    /// Concurrent calls the sender accepts as callee.
    #[serde(default = "default_max_calls")]
    pub max_calls: u32,
    /// Methods the sender offers.
    #[serde(default)]
    pub methods: Vec<MethodInfo>,
    /// The dialer's credential (§4.4); an acceptor never sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Token>,
    /// Transports the sender can move the connection to after the
    /// handshake (§11.4): `shm`. Unknown names are kept and ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upgrade: Vec<String>,
    /// The direct path through a hub (`spec/PROTOCOL.md` §14.1): the
    /// version of it the sender implements (1), or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<u32>,
}

/// The longest `token` a HELLO may carry, in bytes (§4.4).
pub const MAX_TOKEN: usize = 4096;

/// A HELLO's `token`: a shared secret. Its `Debug` form is redacted, so a
/// HELLO printed into a log never shows it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Token(pub String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// Whether `self` equals `other`, in time that depends only on the
    /// lengths, never on where the first differing byte is (§4.4).
    pub fn matches(&self, other: &Token) -> bool {
        let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
        let mut diff = (a.len() ^ b.len()) as u64;
        for i in 0..a.len().max(b.len()) {
            let x = a.get(i).copied().unwrap_or(0);
            let y = b.get(i).copied().unwrap_or(0);
            diff |= u64::from(x ^ y);
        }
        std::hint::black_box(diff) == 0
    }
}

fn default_max_frame() -> u32 {
    DEFAULT_MAX_FRAME
}
fn default_window() -> u32 {
    DEFAULT_WINDOW
}
fn default_max_calls() -> u32 {
    DEFAULT_MAX_CALLS
}

impl Hello {
    /// A HELLO for version 1 with default limits and no methods.
    pub fn new(peer: PeerInfo) -> Hello {
        Hello {
            versions: vec![crate::VERSION as u32],
            peer,
            max_frame: DEFAULT_MAX_FRAME,
            window: DEFAULT_WINDOW,
            max_calls: DEFAULT_MAX_CALLS,
            methods: Vec::new(),
            token: None,
            upgrade: Vec::new(),
            direct: None,
        }
    }

    /// The JSON body.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a Hello always serializes")
    }

    /// Parses and validates a HELLO body. It is read as a JSON value first,
    /// so that a duplicate key keeps its last value (as in every other
    /// language's parser), then normalized by the rules of §4.1.1.
    pub fn from_json(body: &[u8]) -> Result<Hello, FrameError> {
        let bad = |e: String| FrameError::protocol(format!("invalid HELLO body: {e}"));
        let mut v: Value = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
        normalize(&mut v).map_err(bad)?;
        let hello: Hello = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
        hello.validate()?;
        Ok(hello)
    }

    fn validate(&self) -> Result<(), FrameError> {
        let bad = |m: String| Err(FrameError::protocol(format!("invalid HELLO body: {m}")));
        if self.versions.is_empty() || self.versions.contains(&0) {
            return bad(format!("versions must be a non-empty list of integers >= 1, got {:?}", self.versions));
        }
        if self.max_frame < MIN_MAX_FRAME {
            return bad(format!("max_frame {} is below the minimum {MIN_MAX_FRAME}", self.max_frame));
        }
        if self.window == 0 {
            return bad("window must be >= 1".into());
        }
        if self.max_calls == 0 {
            return bad("max_calls must be >= 1".into());
        }
        if self.direct == Some(0) {
            return bad("direct must be >= 1".into());
        }
        if let Some(t) = &self.token {
            if t.0.is_empty() || t.0.len() > MAX_TOKEN {
                return bad(format!("token must be 1-{MAX_TOKEN} bytes, got {} bytes", t.0.len()));
            }
        }
        for m in &self.methods {
            if m.name.is_empty() || m.name.len() > 255 {
                return bad(format!("method name must be 1-255 bytes, got {} bytes", m.name.len()));
            }
        }
        Ok(())
    }

    /// Shortens the body to at most [`HELLO_LIMIT`] bytes, the size every
    /// peer accepts (`spec/PROTOCOL.md` §4.1.2): first the docs go, then
    /// the schemas (`{}`, no `errors`), which are descriptive; names and
    /// kinds, which calls need, always stay.
    pub fn fit(&mut self) {
        let fits = |h: &Hello| h.to_json().len() <= HELLO_LIMIT as usize;
        if fits(self) {
            return;
        }
        self.methods.iter_mut().for_each(|m| m.doc = None);
        if fits(self) {
            return;
        }
        for m in &mut self.methods {
            (m.input, m.output, m.errors) = (empty_schema(), empty_schema(), None);
        }
    }

    /// The method called `name`, if offered.
    pub fn method(&self, name: &str) -> Option<&MethodInfo> {
        self.methods.iter().find(|m| m.name == name)
    }
}

/// Applies §4.1.1 to a parsed body before it is typed: `null` in an
/// optional field is removed (its default applies), integers written as
/// `64.0` become `64`, and a schema must be an object or a boolean. Shapes
/// this does not recognize are left for the typed parse to refuse.
fn normalize(v: &mut Value) -> Result<(), String> {
    let Some(top) = v.as_object_mut() else { return Ok(()) };
    drop_nulls(top, &["max_frame", "window", "max_calls", "methods", "upgrade", "direct"]);
    for k in ["max_frame", "window", "max_calls", "direct"] {
        top.get_mut(k).map(integral);
    }
    if let Some(Value::Array(vs)) = top.get_mut("versions") {
        vs.iter_mut().for_each(integral);
    }
    let Some(Value::Array(methods)) = top.get_mut("methods") else { return Ok(()) };
    for m in methods.iter_mut().filter_map(Value::as_object_mut) {
        drop_nulls(m, &["input", "output", "errors", "doc"]);
        for k in ["input", "output", "errors"] {
            match m.get(k) {
                None | Some(Value::Object(_)) | Some(Value::Bool(_)) => {}
                Some(other) => return Err(format!("a method's {k} must be a JSON Schema (an object or a boolean), got {other}")),
            }
        }
    }
    Ok(())
}

/// Removes the keys among `keys` whose value is `null`.
fn drop_nulls(o: &mut serde_json::Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if o.get(*k).is_some_and(Value::is_null) {
            o.remove(*k);
        }
    }
}

/// A float with no fractional part, within u64, becomes that integer; the
/// typed parse then checks the field's range.
fn integral(x: &mut Value) {
    if let Some(f) = x.as_f64().filter(|f| x.is_f64() && f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(f)) {
        *x = Value::from(f as u64);
    }
}

/// The highest version in both lists (`spec/PROTOCOL.md` §4.2).
pub fn negotiate(ours: &[u32], theirs: &[u32]) -> Result<u32, FrameError> {
    ours.iter().filter(|v| theirs.contains(v)).max().copied().ok_or_else(|| {
        FrameError::new(Code::UnsupportedVersion, format!("no common protocol version: we speak {ours:?}, peer speaks {theirs:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_only_itself_and_never_prints() {
        let t = Token("s3cret".into());
        assert!(t.matches(&Token("s3cret".into())));
        for other in ["s3cre", "s3crett", "S3cret", ""] {
            assert!(!t.matches(&Token(other.into())), "{other:?}");
        }
        let mut h = Hello::new(PeerInfo { name: "a".into(), lang: "rust".into(), version: "1".into() });
        h.token = Some(t);
        assert!(!format!("{h:?}").contains("s3cret"), "a logged HELLO hides its token");
        assert!(String::from_utf8(h.to_json()).unwrap().contains(r#""token":"s3cret""#), "but sends it");
    }
}
