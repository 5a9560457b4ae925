//! The JSON Schemas of the hub's own methods, `hubwire.status` and
//! `hubwire.methods` (`docs/hub.md`, "The hub's own methods"), advertised
//! in the hub's HELLO like any provider's, so a client in any language
//! can read them without this crate's types. They carry no descriptions
//! (`docs/hub.md` has them): every HELLO of the hub carries them, and a
//! HELLO must stay small (a peer may accept frames of only 4096 bytes).
//! The tests below check every
//! field [`Status`](crate::status::Status) and
//! [`MethodRow`](crate::status::MethodRow) serialize against these
//! schemas, so a field added there without a line here fails the build's
//! tests.

use serde_json::{json, Value};

/// Input of both methods: none. The caller sends MessagePack nil (`c0`) or
/// JSON `null`.
pub fn no_input() -> Value {
    json!({"type": "null"})
}

/// Output of `hubwire.status`: the hub, its uptime, and every provider
/// with its replicas, in config order.
pub fn status_output() -> Value {
    let opt_int = json!({"type": ["integer", "null"], "minimum": 0});
    let replica = json!({
        "type": "object",
        "properties": {
            "index": {"type": "integer", "minimum": 0},
            "pid": opt_int.clone(),
            "state": {"enum": ["starting", "ready", "restarting", "unreachable", "failed", "stopped"]},
            "reason": {"type": ["string", "null"]},
            "restarts": {"type": "integer", "minimum": 0},
            "in_flight": {"type": "integer", "minimum": 0},
            "calls": {"type": "integer", "minimum": 0},
            "errors": {"type": "integer", "minimum": 0},
            "p50_us": opt_int.clone(),
            "p99_us": opt_int,
            "last_exit": {"type": ["string", "null"]},
            "stderr": {"type": "array", "items": {"type": "string"}},
            "direct_calls": {"type": "integer", "minimum": 0},
            "direct_errors": {"type": "integer", "minimum": 0},
            "direct_open": {"type": "integer", "minimum": 0},
            "peer": {"type": ["string", "null"]},
            "shm": {"type": "boolean", "description": "its connection is on shared memory (spec §11.4)"}
        },
        "required": ["index", "state", "restarts", "in_flight", "calls", "errors", "stderr"]
    });
    json!({
        "type": "object",
        "properties": {
            "hub": {"type": "string"},
            "uptime_ms": {"type": "integer", "minimum": 0},
            "links_in": {"type": "integer", "minimum": 0},
            "calls_in": {"type": "integer", "minimum": 0},
            "providers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "launch": {"type": "string"},
                        "queued": {"type": "integer", "minimum": 0},
                        "refused": {"type": "integer", "minimum": 0},
                        "replicas": {"type": "array", "items": replica}
                    },
                    "required": ["name", "launch", "queued", "replicas"]
                }
            }
        },
        "required": ["hub", "uptime_ms", "providers"]
    })
}

/// Output of `hubwire.methods`: every routed method, the hub's own first.
pub fn methods_output() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "kind": {"enum": ["unary", "server_stream", "client_stream", "bidi"]},
                "provider": {"type": "string"},
                "doc": {"type": ["string", "null"]}
            },
            "required": ["name", "kind", "provider"]
        }
    })
}

/// Output of `hubwire.cluster` (a hub in a NATS cluster): the prefix,
/// the replicas discovery found (`discovery::RemoteReplica`), whether
/// the answers were cut.
pub fn cluster_output() -> Value {
    json!({
        "type": "object",
        "properties": {"prefix": {"type": "string"}, "replicas": {"type": "array", "items": {"type": "object"}}, "cut": {"type": "boolean"}},
        "required": ["prefix", "replicas"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{MethodRow, ProviderStatus, ReplicaStatus, Status};

    /// The keys of `value` that `schema` does not list, and the keys the
    /// schema requires that `value` lacks.
    fn mismatches(schema: &Value, value: &Value) -> Vec<String> {
        let props = schema["properties"].as_object().expect("an object schema");
        let obj = value.as_object().expect("an object value");
        let mut out: Vec<String> = obj.keys().filter(|k| !props.contains_key(*k)).map(|k| format!("unlisted {k}")).collect();
        for r in schema["required"].as_array().into_iter().flatten() {
            if !obj.contains_key(r.as_str().unwrap()) {
                out.push(format!("missing required {r}"));
            }
        }
        out
    }

    #[test]
    fn the_status_schema_lists_every_field_status_serializes() {
        let replica = ReplicaStatus {
            index: 0,
            pid: Some(7),
            state: "ready".into(),
            reason: None,
            restarts: 0,
            in_flight: 0,
            calls: 1,
            errors: 0,
            p50_us: Some(3),
            p99_us: None,
            last_exit: None,
            stderr: vec![],
            direct_calls: 2,
            direct_errors: 0,
            direct_open: 1,
            peer: Some("hub-b".into()),
            shm: true,
        };
        let provider = ProviderStatus { name: "p".into(), launch: "exec p".into(), queued: 0, refused: 0, replicas: vec![replica] };
        let status =
            serde_json::to_value(Status { hub: "h".into(), uptime_ms: 1, providers: vec![provider], links_in: Some(1), calls_in: Some(2) })
                .unwrap();
        let schema = status_output();
        let p_schema = &schema["properties"]["providers"]["items"];
        let r_schema = &p_schema["properties"]["replicas"]["items"];
        assert_eq!(mismatches(&schema, &status), Vec::<String>::new());
        assert_eq!(mismatches(p_schema, &status["providers"][0]), Vec::<String>::new());
        assert_eq!(mismatches(r_schema, &status["providers"][0]["replicas"][0]), Vec::<String>::new());
        let states = r_schema["properties"]["state"]["enum"].as_array().unwrap();
        assert!(states.contains(&status["providers"][0]["replicas"][0]["state"]));
    }

    /// Every connection's HELLO carries these; keep them well inside the
    /// smallest `max_frame` a peer may declare (4096).
    #[test]
    fn the_schemas_stay_small() {
        let all = [no_input(), no_input(), status_output(), methods_output(), no_input(), cluster_output()];
        let total: usize = all.iter().map(|v| v.to_string().len()).sum();
        assert!(total <= 2048, "the hub's own schemas take {total} bytes of its HELLO");
    }

    #[test]
    fn the_cluster_schema_lists_every_field_discovery_serializes() {
        let c = crate::discovery::Cluster { prefix: "hubwire".into(), replicas: vec![], cut: false };
        assert_eq!(mismatches(&cluster_output(), &serde_json::to_value(c).unwrap()), Vec::<String>::new());
    }

    #[test]
    fn the_methods_schema_lists_every_field_a_row_serializes() {
        let row = MethodRow { name: "m".into(), kind: "unary".into(), provider: "p".into(), doc: Some("d".into()) };
        let schema = methods_output();
        assert_eq!(mismatches(&schema["items"], &serde_json::to_value(row).unwrap()), Vec::<String>::new());
    }
}
