//! The client role: one `call` command becomes one call and one `result`
//! event.

use std::time::Duration;

use bytes::Bytes;
use hubwire::{CallOptions, Codec, Connection, Error, Message, Payload, Raw};

use crate::service::Dyn;
use serde_json::{Map, Value};

fn codec(cmd: &Value) -> Codec {
    match cmd["codec"].as_str() {
        Some("raw") => Codec::Raw,
        Some("json") => Codec::Json,
        _ => Codec::Msgpack,
    }
}

/// The raw input of a command: `input_text`, `input_hex` or `input_fill`.
fn raw_input(cmd: &Value) -> Bytes {
    if let Some(t) = cmd["input_text"].as_str() {
        return Bytes::copy_from_slice(t.as_bytes());
    }
    if let Some(h) = cmd["input_hex"].as_str() {
        return hex::decode(h).unwrap_or_default().into();
    }
    if let Some([b, n]) = cmd["input_fill"].as_array().map(|a| a.as_slice()) {
        return vec![b.as_u64().unwrap_or(0) as u8; n.as_u64().unwrap_or(0) as usize].into();
    }
    Bytes::new()
}

/// How a decoded value is reported: raw bytes as hex, values as they are.
trait Report: Message + Sync {
    fn report(&self) -> Value;
    fn input(cmd: &Value, v: &Value) -> Self;
}

impl Report for Raw {
    fn report(&self) -> Value {
        Value::String(hex::encode(&self.0))
    }
    fn input(_cmd: &Value, v: &Value) -> Raw {
        Raw(match v {
            Value::String(s) => hex::decode(s).unwrap_or_else(|_| s.as_bytes().to_vec()).into(),
            _ => Bytes::new(),
        })
    }
}

impl Report for Dyn {
    fn report(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|e| Value::String(format!("<unreportable: {e}>")))
    }
    fn input(_cmd: &Value, v: &Value) -> Dyn {
        serde_json::from_value(v.clone()).unwrap_or(Dyn::Nil)
    }
}

fn error_fields(r: &mut Map<String, Value>, e: &Error) {
    r.insert("code".into(), e.code().name().into());
    r.insert("message".into(), e.message().into());
    if let Some(Ok(v)) = e.failure_value::<Dyn>() {
        r.insert("failure".into(), v.report());
    }
}

/// Runs one `call` command; returns its `result` event.
pub(crate) async fn call(conn: &Connection, cmd: &Value) -> Value {
    let mut r = Map::new();
    r.insert("event".into(), "result".into());
    r.insert("id".into(), cmd["id"].clone());
    let run = async {
        match codec(cmd) {
            Codec::Raw => run_kind::<Raw>(conn, cmd, &mut r).await,
            _ => run_kind::<Dyn>(conn, cmd, &mut r).await,
        }
    };
    let outcome = match cmd["cancel_after_ms"].as_u64() {
        Some(ms) => tokio::time::timeout(Duration::from_millis(ms), run).await.unwrap_or(Err(Dropped)),
        None => run.await,
    };
    match outcome {
        Ok(Ok(())) => {
            r.insert("code".into(), "ok".into());
        }
        Ok(Err(e)) => error_fields(&mut r, &e),
        Err(Dropped) => {
            r.insert("code".into(), "cancelled".into());
            r.insert("message".into(), "dropped by the testee".into());
        }
    }
    Value::Object(r)
}

/// The testee itself dropped the call (`read`, `cancel_after_ms`).
struct Dropped;

async fn run_kind<T: Report>(conn: &Connection, cmd: &Value, r: &mut Map<String, Value>) -> Result<Result<(), Error>, Dropped> {
    let method = cmd["method"].as_str().unwrap_or("");
    let mut opts = CallOptions::new().codec(codec(cmd));
    if let Some(ms) = cmd["timeout_ms"].as_u64() {
        opts = opts.timeout(Duration::from_millis(ms));
    }
    let items_in: Vec<T> = cmd["items"].as_array().map(|a| a.iter().map(|v| T::input(cmd, v)).collect()).unwrap_or_default();
    let end = cmd["end"].as_bool().unwrap_or(true) && !crate::service::fault("never-end");
    let read = cmd["read"].as_u64();
    match cmd["kind"].as_str().unwrap_or("unary") {
        "unary" => {
            let input = match codec(cmd) {
                Codec::Raw => T::decode(Payload { codec: Codec::Raw, bytes: raw_input(cmd) }).map_err(Error::invalid_argument),
                _ => Ok(T::input(cmd, &cmd["input"])),
            };
            let out = match input {
                Ok(i) => conn.call_with::<T, T>(method, &i, &opts).await,
                Err(e) => Err(e),
            };
            Ok(out.map(|o| {
                r.insert(if T::RAW { "output_hex" } else { "output" }.into(), o.report());
            }))
        }
        "server_stream" => {
            let input = T::input(cmd, if codec(cmd) == Codec::Raw { &Value::Null } else { &cmd["input"] });
            let input = if codec(cmd) == Codec::Raw {
                T::decode(Payload { codec: Codec::Raw, bytes: raw_input(cmd) }).unwrap_or(input)
            } else {
                input
            };
            let items = match conn.server_stream::<T, T>(method, &input, &opts).await {
                Ok(i) => i,
                Err(e) => return Ok(Err(e)),
            };
            read_items(items, read, r).await
        }
        "client_stream" => {
            let call = match conn.client_stream::<T, T>(method, &opts).await {
                Ok(c) => c,
                Err(e) => return Ok(Err(e)),
            };
            for item in &items_in {
                // A send fails once the call has ended (the callee may
                // answer early): the answer says how.
                if call.send(item).await.is_err() {
                    break;
                }
            }
            let out = if end { call.finish().await } else { call.response().await };
            Ok(out.map(|o| {
                r.insert("output".into(), o.report());
            }))
        }
        "bidi" => {
            let (sink, items) = match conn.bidi::<T, T>(method, &opts).await {
                Ok(x) => x,
                Err(e) => return Ok(Err(e)),
            };
            let sender = tokio::spawn(async move {
                for item in &items_in {
                    sink.send(item).await?;
                }
                if end {
                    sink.end()?;
                }
                // Keep the sink (and so the call) alive until the reader
                // is done with it.
                Ok::<_, Error>(sink)
            });
            let out = read_items(items, read, r).await;
            match sender.await {
                Ok(Err(e)) if matches!(out, Ok(Ok(()))) => Ok(Err(e)),
                _ => out,
            }
        }
        other => Ok(Err(Error::invalid_argument(format!("unknown kind {other:?}")))),
    }
}

async fn read_items<T: Report>(
    mut items: hubwire::ItemStream<T>,
    read: Option<u64>,
    r: &mut Map<String, Value>,
) -> Result<Result<(), Error>, Dropped> {
    let mut got = Vec::new();
    let out = loop {
        if read == Some(got.len() as u64) {
            r.insert("items".into(), Value::Array(got));
            return Err(Dropped);
        }
        match items.next().await {
            Ok(Some(v)) => got.push(v.report()),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    r.insert("items".into(), Value::Array(got));
    Ok(out)
}
