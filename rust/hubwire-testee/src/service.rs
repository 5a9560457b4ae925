//! The conformance service (`conformance/README.md`): the methods every
//! testee offers in the provider role.

use std::time::Duration;

use hubwire::{CallContext, Error, ItemSink, ItemStream, Provider, Raw};
use serde_json::{json, Value};

use crate::Events;

/// Any MessagePack value, byte strings included (JSON has none; they
/// travel as arrays of numbers there, `spec/PROTOCOL.md` §6).
pub(crate) type Dyn = rmpv::Value;

/// Reports `cancelled` for `method` if dropped before `done`.
struct Probe {
    events: Events,
    method: &'static str,
    done: bool,
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.done && !fault("deaf-to-cancel") {
            self.events.send(json!({"event": "cancelled", "method": self.method}));
        }
    }
}

/// Whether a deliberate fault is switched on (`HUBWIRE_TESTEE_FAULT`, a
/// comma-separated list). The conformance runner's own tests use them to
/// show that cases fail when the implementation is wrong.
pub(crate) fn fault(name: &str) -> bool {
    std::env::var("HUBWIRE_TESTEE_FAULT").is_ok_and(|v| v.split(',').any(|f| f == name))
}

/// The input of `sleep` and `forever`.
#[derive(serde::Deserialize, serde::Serialize)]
struct Ms {
    ms: u64,
}

pub(crate) fn provider(events: Events) -> Provider {
    let (e1, e2) = (events.clone(), events);
    Provider::new("conformance")
        .unary("echo", |_: CallContext, x: Raw| async move {
            if fault("echo-flip") && !x.0.is_empty() {
                let mut b = x.0.to_vec();
                b[0] ^= 0xff;
                return Ok(Raw(b.into()));
            }
            Ok(x)
        })
        .unary("echo_value", |_, v: Dyn| async move { Ok(v) })
        .unary("fail", |_, v: Dyn| async move {
            if fault("failure-as-defect") {
                return Err::<Dyn, _>(Error::defect(format!("failed with {v}")));
            }
            Err::<Dyn, _>(Error::failure(&v))
        })
        .unary("panic", |_, _x: Raw| async move {
            if true {
                panic!("conformance: the caller asked for a panic");
            }
            Ok(Raw::default())
        })
        .unary("sleep", move |_, v: Ms| {
            let events = e1.clone();
            async move {
                // Created inside the future: dropping the future (on
                // cancellation) drops the probe.
                let mut probe = Probe { events, method: "sleep", done: false };
                tokio::time::sleep(Duration::from_millis(v.ms)).await;
                probe.done = true;
                Ok(Value::Null)
            }
        })
        .unary("big", |_, n: usize| async move { Ok(Raw(vec![97u8; n].into())) })
        .server_stream("count", |_, n: u64, sink: ItemSink<u64>| async move {
            for i in 0..n {
                sink.send(&i).await?;
            }
            Ok(())
        })
        .server_stream("fail_after", |_, n: u64, sink: ItemSink<u64>| async move {
            for i in 0..n {
                sink.send(&i).await?;
            }
            Err(Error::failure(&json!({"after": n})))
        })
        .server_stream("forever", move |_, v: Ms, sink: ItemSink<u64>| {
            let events = e2.clone();
            async move {
                // Never finishes by itself: the probe reports the drop.
                let _probe = Probe { events, method: "forever", done: false };
                for i in 0u64.. {
                    sink.send(&i).await?;
                    tokio::time::sleep(Duration::from_millis(v.ms.max(1))).await;
                }
                Ok(())
            }
        })
        .client_stream("sum", |_, mut items: ItemStream<i64>| async move {
            let mut total = 0i64;
            while let Some(x) = items.next().await? {
                total += x;
            }
            Ok(total)
        })
        .client_stream("first", |_, mut items: ItemStream<Dyn>| async move { Ok(items.next().await?.unwrap_or(Dyn::Nil)) })
        .bidi("echo_stream", |_, mut items: ItemStream<Dyn>, sink: ItemSink<Dyn>| async move {
            while let Some(v) = items.next().await? {
                sink.send(&v).await?;
            }
            Ok(())
        })
}
