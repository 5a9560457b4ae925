//! The conformance service (`conformance/README.md`): the methods every
//! testee offers in the provider role.

use std::time::Duration;

use hubwire::{CallContext, Error, ItemSink, Items, Provider, Raw};
use serde_json::{json, Value};

use crate::Events;

/// Reports `cancelled` for `method` if dropped before `done`.
struct Probe {
    events: Events,
    method: &'static str,
    done: bool,
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.done {
            self.events.send(json!({"event": "cancelled", "method": self.method}));
        }
    }
}

fn ms(v: &Value) -> u64 {
    v["ms"].as_u64().unwrap_or(0)
}

pub(crate) fn provider(events: Events) -> Provider {
    let (e1, e2) = (events.clone(), events);
    Provider::new("conformance")
        .unary("echo", |_: CallContext, x: Raw| async move { Ok(x) })
        .unary("echo_value", |_, v: Value| async move { Ok(v) })
        .unary("fail", |_, v: Value| async move { Err::<Value, _>(Error::failure(&v)) })
        .unary("panic", |_, _x: Raw| async move {
            if true {
                panic!("conformance: the caller asked for a panic");
            }
            Ok(Raw::default())
        })
        .unary("sleep", move |_, v: Value| {
            let events = e1.clone();
            async move {
                // Created inside the future: dropping the future (on
                // cancellation) drops the probe.
                let mut probe = Probe { events, method: "sleep", done: false };
                tokio::time::sleep(Duration::from_millis(ms(&v))).await;
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
        .server_stream("forever", move |_, v: Value, sink: ItemSink<u64>| {
            let events = e2.clone();
            async move {
                // Never finishes by itself: the probe reports the drop.
                let _probe = Probe { events, method: "forever", done: false };
                for i in 0u64.. {
                    sink.send(&i).await?;
                    tokio::time::sleep(Duration::from_millis(ms(&v).max(1))).await;
                }
                Ok(())
            }
        })
        .client_stream("sum", |_, mut items: Items<i64>| async move {
            let mut total = 0i64;
            while let Some(x) = items.next().await? {
                total += x;
            }
            Ok(total)
        })
        .client_stream("first", |_, mut items: Items<Value>| async move { Ok(items.next().await?.unwrap_or(Value::Null)) })
        .bidi("echo_stream", |_, mut items: Items<Value>, sink: ItemSink<Value>| async move {
            while let Some(v) = items.next().await? {
                sink.send(&v).await?;
            }
            Ok(())
        })
}
