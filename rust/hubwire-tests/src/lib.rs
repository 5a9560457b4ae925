//! Support for the behaviour suite (`tests/behaviour.rs`) and the bad-input
//! suite (`tests/bad_input.rs`): the provider every case calls
//! ([`provider`]), and [`harness`], which connects a client to it over each
//! transport. The same provider runs in-process (memory, Unix, TCP) and as
//! a child process (`src/bin/behaviour-provider.rs`), so a case cannot tell
//! which transport it runs on. [`pki`] makes throwaway certificates for the
//! TLS transport (here and in the hub's tests). [`nats_server`] starts real
//! `nats-server`s (one, or a cluster on loopback) for the NATS tests.

pub mod harness;
pub mod nats_server;
pub mod pki;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hubwire::{CallContext, Error, ItemSink, ItemStream, Provider, Raw};
use serde::{Deserialize, Serialize};

/// The typed failure of `divide`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DivError {
    /// Always `division_by_zero`.
    pub kind: String,
}

/// Input of the methods that report what happened to them under a token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tagged {
    /// Key under which the provider records what it observed.
    pub token: String,
    /// Milliseconds or item count, per method.
    pub n: u64,
}

/// What the provider observed, per token: how many items a stream sent,
/// and whether the call was cancelled.
#[derive(Default)]
struct Observed {
    sent: HashMap<String, u64>,
    cancelled: HashMap<String, bool>,
}

static OBSERVED: Mutex<Option<Observed>> = Mutex::new(None);

fn observe(f: impl FnOnce(&mut Observed)) {
    f(OBSERVED.lock().unwrap().get_or_insert_with(Observed::default))
}

/// Records `token` as cancelled if dropped before `done()`: a handler's
/// future is dropped when its call is cancelled.
struct CancelProbe {
    token: String,
    done: bool,
}

impl CancelProbe {
    fn new(token: &str) -> CancelProbe {
        observe(|o| {
            o.cancelled.insert(token.to_string(), false);
        });
        CancelProbe { token: token.to_string(), done: false }
    }
}

impl Drop for CancelProbe {
    fn drop(&mut self) {
        if !self.done {
            observe(|o| {
                o.cancelled.insert(self.token.clone(), true);
            });
        }
    }
}

/// The window the provider grants per stream (small, so flow control shows).
pub const PROVIDER_WINDOW: u32 = 16;
/// The provider's frame limit.
pub const PROVIDER_MAX_FRAME: u32 = 4 * 1024 * 1024;

/// The provider's connection settings.
pub fn provider_config() -> hubwire::ConnectionOptions {
    hubwire::ConnectionOptions::new("behaviour").window(PROVIDER_WINDOW).max_frame(PROVIDER_MAX_FRAME)
}

/// The provider every behaviour case calls.
pub fn provider() -> Provider {
    Provider::new("behaviour")
        .unary("echo", |_: CallContext, x: Raw| async move { Ok(x) })
        .unary("add", |_, (a, b): (i64, i64)| async move { Ok(a + b) })
        .unary("divide", |_, (a, b): (f64, f64)| async move {
            if b == 0.0 {
                return Err(Error::failure(&DivError { kind: "division_by_zero".into() }));
            }
            Ok(a / b)
        })
        .unary("panic", |_, msg: String| async move {
            if !msg.is_empty() {
                panic!("{msg}");
            }
            Ok(())
        })
        .unary("sleep", |_, t: Tagged| async move {
            let mut probe = CancelProbe::new(&t.token);
            tokio::time::sleep(Duration::from_millis(t.n)).await;
            probe.done = true;
            Ok(())
        })
        .unary("was_cancelled", |_, token: String| async move {
            let mut v = None;
            observe(|o| v = o.cancelled.get(&token).copied());
            Ok(v)
        })
        .unary("progress", |_, token: String| async move {
            let mut v = 0;
            observe(|o| v = o.sent.get(&token).copied().unwrap_or(0));
            Ok(v)
        })
        .unary("delay_echo", |_, (i, ms): (u32, u64)| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(i)
        })
        .unary("shout", |_, line: String| async move {
            // Noise on stdout and stderr: must never reach the protocol.
            println!("\u{1}\u{2}HW garbage {line} \x0c\x01\x00\x00\x00");
            eprintln!("stderr noise {line}");
            Ok(line.to_uppercase())
        })
        .server_stream("count", |_, n: u32, sink: ItemSink<u32>| async move {
            for i in 0..n {
                sink.send(&i).await?;
            }
            Ok(())
        })
        .server_stream("firehose", |_, t: Tagged, sink: ItemSink<u64>| async move {
            let mut probe = CancelProbe::new(&t.token);
            for i in 0..t.n {
                sink.send(&i).await?;
                observe(|o| *o.sent.entry(t.token.clone()).or_default() = i + 1);
            }
            probe.done = true;
            Ok(())
        })
        .server_stream("then_fail", |_, n: u32, sink: ItemSink<u32>| async move {
            for i in 0..n {
                sink.send(&i).await?;
            }
            Err(Error::failure(&DivError { kind: "stream_failed".into() }))
        })
        .server_stream("slow_stream", |_, t: Tagged, sink: ItemSink<u64>| async move {
            let mut probe = CancelProbe::new(&t.token);
            for i in 0.. {
                sink.send(&i).await?;
                tokio::time::sleep(Duration::from_millis(t.n)).await;
            }
            probe.done = true;
            Ok(())
        })
        .client_stream("sum", |_, mut items: ItemStream<i64>| async move {
            let mut total = 0;
            while let Some(x) = items.next().await? {
                total += x;
            }
            Ok(total)
        })
        .client_stream("stall", |_, _items: ItemStream<i64>| async move {
            // Holds the stream open without reading it.
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(0i64)
        })
        .client_stream("first_only", |_, mut items: ItemStream<i64>| async move {
            // Answers after one item, without reading the rest: the callee
            // may end a call before the caller's END.
            Ok(items.next().await?.unwrap_or(-1))
        })
        .bidi("upper", |_, mut items: ItemStream<String>, sink: ItemSink<String>| async move {
            while let Some(s) = items.next().await? {
                sink.send(&s.to_uppercase()).await?;
            }
            Ok(())
        })
}
