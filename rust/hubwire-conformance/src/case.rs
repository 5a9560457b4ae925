//! Cases as data: the YAML files of `conformance/suites/`, and the
//! must-reject vectors of `spec/vectors/reject.json` turned into cases.

use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Map, Value};

/// The testee's role in a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The testee offers the conformance service; the runner calls.
    Provider,
    /// The testee calls; the runner answers.
    Client,
}

impl Role {
    /// The role's name in reports and known-failing file names.
    pub fn name(self) -> &'static str {
        match self {
            Role::Provider => "provider",
            Role::Client => "client",
        }
    }
}

/// Who performs the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Handshake {
    /// The runner exchanges HELLOs before the first step.
    #[default]
    Auto,
    /// The steps do it.
    Manual,
}

/// One case.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Path-like name, unique per role.
    pub name: String,
    /// The testee's role.
    pub role: Role,
    /// One line saying what the case shows.
    #[serde(default)]
    pub doc: String,
    /// Fields of the runner's HELLO.
    #[serde(default)]
    pub hello: Map<String, Value>,
    /// How the testee is set up before the connection opens.
    #[serde(default)]
    pub testee: TesteeSetup,
    /// Auto or manual handshake.
    #[serde(default)]
    pub handshake: Handshake,
    /// Only these transports, if set.
    #[serde(default)]
    pub transports: Option<Vec<String>>,
    /// Capabilities the testee's HELLO must show for the steps to run
    /// ([`REQUIREMENTS`]); a testee without one passes the case unrun.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Frame types skipped while expecting.
    #[serde(default = "default_ignore")]
    pub ignore: Vec<String>,
    /// What happens, in order.
    pub steps: Vec<Value>,
    /// The file it came from.
    #[serde(skip)]
    pub source: String,
}

/// A case's `testee:` map: settings passed to the testee in its `serve`
/// (provider role) or `connect` (client role) command.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TesteeSetup {
    /// Provider role: the token the testee requires of dialers; client
    /// role: the token it sends in its HELLO (`spec/PROTOCOL.md` §4.4).
    #[serde(default)]
    pub token: Option<String>,
}

fn default_ignore() -> Vec<String> {
    vec!["credit".into(), "ping".into()]
}

/// The step kinds of `conformance/README.md`.
pub const STEP_KINDS: &[&str] = &[
    "send",
    "send_hex",
    "send_many",
    "expect",
    "expect_none",
    "expect_closed",
    "control",
    "expect_event",
    "sleep",
    "close",
    "end_stream",
    "check_alive",
    "hand_over",
    "offer_upgrade",
    "accept_upgrade",
    "expect_shm",
    "expect_all",
];

/// What a case may require of the testee's HELLO: `shm`, its `upgrade`
/// lists `"shm"` (`spec/PROTOCOL.md` §11.4); `direct`, it sent `direct`
/// (§14.1).
pub const REQUIREMENTS: &[&str] = &["shm", "direct"];

impl Case {
    /// Whether the case runs on `transport`.
    pub fn runs_on(&self, transport: &str) -> bool {
        self.transports.as_ref().is_none_or(|t| t.iter().any(|x| x == transport))
    }

    /// Checks the shape of every step, so a typo fails loudly at load time.
    /// Modifiers written beside the step (`- send: {...}` then `repeat: 3`)
    /// are moved into it, where the runner reads them.
    fn validate(&mut self) -> Result<(), String> {
        if let Some(r) = self.requires.iter().find(|r| !REQUIREMENTS.contains(&r.as_str())) {
            return Err(format!("requires {r:?}: one of {REQUIREMENTS:?}"));
        }
        if !self.requires.is_empty() && self.handshake == Handshake::Manual {
            return Err("requires needs the automatic handshake (it reads the testee's HELLO)".into());
        }
        for (i, step) in self.steps.iter_mut().enumerate() {
            let Some(map) = step.as_object_mut() else {
                return Err(format!("step {} is not a map", i + 1));
            };
            for modifier in ["repeat", "values", "unordered"] {
                if let Some(v) = map.remove(modifier) {
                    let target = map.values_mut().next().and_then(Value::as_object_mut);
                    match target {
                        Some(t) => {
                            t.insert(modifier.into(), v);
                        }
                        None => return Err(format!("step {}: {modifier} needs a send or expect map beside it", i + 1)),
                    }
                }
            }
            let kinds: Vec<&String> = map.keys().filter(|k| STEP_KINDS.contains(&k.as_str())).collect();
            if kinds.len() != 1 || map.len() != 1 {
                return Err(format!(
                    "step {} must have exactly one of {STEP_KINDS:?}, got keys {:?}",
                    i + 1,
                    map.keys().collect::<Vec<_>>()
                ));
            }
        }
        Ok(())
    }
}

/// Loads every `*.yaml` under `dir`, sorted by file name.
pub fn load_suites(dir: &Path) -> Result<Vec<Case>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let mut these: Vec<Case> = serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        for c in &mut these {
            c.source = f.file_name().unwrap().to_string_lossy().into_owned();
            c.validate().map_err(|e| format!("{}: case {} ({}): {e}", c.source, c.name, c.role.name()))?;
        }
        cases.extend(these);
    }
    let mut seen = std::collections::HashSet::new();
    for c in &cases {
        if !seen.insert((c.name.clone(), c.role)) {
            return Err(format!("{}: duplicate case {} for role {}", c.source, c.name, c.role.name()));
        }
    }
    Ok(cases)
}

#[derive(Deserialize)]
struct RejectFile {
    cases: Vec<RejectVector>,
}

#[derive(Deserialize)]
struct RejectVector {
    name: String,
    hex: String,
    #[serde(default)]
    max_frame: Option<u64>,
    #[serde(default)]
    eof: bool,
    error: String,
}

/// Every must-reject vector sent to a live testee, in both roles: the
/// testee must answer GOAWAY with the vector's code and close. Vectors
/// that need a non-default `max_frame` are left out (the testee runs with
/// defaults).
pub fn reject_cases(vectors: &Path) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(vectors).map_err(|e| format!("{}: {e}", vectors.display()))?;
    let file: RejectFile = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", vectors.display()))?;
    let mut cases = Vec::new();
    for v in file.cases.into_iter().filter(|v| v.max_frame.is_none()) {
        for role in [Role::Provider, Role::Client] {
            let mut steps = vec![json!({"send_hex": v.hex})];
            if v.eof {
                steps.push(json!({"end_stream": true}));
            }
            steps.push(json!({"expect": {"type": "goaway", "code": v.error}}));
            steps.push(json!({"expect_closed": true}));
            if role == Role::Provider {
                steps.push(json!({"check_alive": true}));
            }
            cases.push(Case {
                name: format!("malformed/vector/{}", v.name),
                role,
                doc: format!("spec/vectors/reject.json case {}: GOAWAY {} and close", v.name, v.error),
                hello: Map::new(),
                testee: TesteeSetup::default(),
                handshake: Handshake::Auto,
                transports: None,
                requires: Vec::new(),
                // Some vectors start with a valid PING: its PONG may come first.
                ignore: vec!["credit".into(), "ping".into(), "pong".into()],
                steps,
                source: "spec/vectors/reject.json".into(),
            });
        }
    }
    Ok(cases)
}
