//! The serving seam: what the engine knows about serving calls is one
//! trait, [`Service`], and one value per call, [`Incoming`].
//!
//! When a REQUEST arrives the engine does the protocol's half of serving
//! it ([`on_request`]): the id's parity, a live id reused, draining,
//! `max_calls`, registering the call so its ITEMs, END, CREDIT and CANCEL
//! reach it, the deadline. It then hands the call to the connection's
//! service, runs the future the service returns — catching panics, dropping
//! it when the caller cancels or the deadline passes — and answers with
//! what it yields. The future is first polled once right here on the
//! reader, in either wait mode, so a call answered without waiting costs
//! no task and no entry in the call table; a future that must not run on
//! the reader (it computes before its first await) yields first
//! (`Provider::in_task`).
//!
//! A [`Provider`](crate::Provider) is a service (methods by name, typed
//! handlers); so is the hub's registry, which relays each call elsewhere.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hubwire_frame::{FrameError, Hello, Kind, MethodInfo, Name};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::calls::{Served, StreamIn};
use super::state::Core;
use crate::codec::Payload;
use crate::context::{CallContext, CancelSignal};
use crate::errors::{Code, Error};

/// The work of one served call: the RESPONSE payload (`None` for an empty
/// `ok`, as the streaming-out kinds answer) or the call's error.
pub type ServeFuture = Pin<Box<dyn Future<Output = Result<Option<Payload>, Error>> + Send>>;

/// Whatever serves the calls that arrive on a connection. This is all the
/// engine knows about serving.
pub trait Service: Send + Sync + 'static {
    /// The methods offered, advertised in HELLO. Asked once as each
    /// connection starts.
    fn methods(&self) -> Vec<MethodInfo>;

    /// Serves one call, whatever its method. `Err` refuses it at once — an
    /// unknown method (`unknown_method`), a kind mismatch or an input that
    /// does not decode (`invalid_argument`) — and it is answered without a
    /// task. `Ok` is the call's work, which the engine runs to its answer:
    /// it polls it once on the connection's reader (the other frames of
    /// the connection wait meanwhile), then, if it is not done, in a task
    /// of its own. Work that computes for long before its first await
    /// should yield first (`tokio::task::yield_now`).
    fn call(&self, call: Incoming) -> Result<ServeFuture, Error>;

    /// Starts one call as the engine does: like [`Service::call`], but a
    /// service that has the outcome at once, without a future (a method
    /// registered with [`Provider::unary_sync`](crate::Provider::unary_sync)),
    /// returns it as [`Work::Done`]: the call then costs no allocation and
    /// no poll. The default is `call`'s work. A service that wraps another
    /// passes this on, so that the inner service's answers stay free; and
    /// whatever it does around the inner work (a permit, a span, a count)
    /// it does around the inner `start` or `call` itself, not only around
    /// the future: such a handler has already run when either returns.
    fn start(&self, call: Incoming) -> Result<Work, Error> {
        self.call(call).map(Work::Future)
    }
}

/// What [`Service::start`] makes of a call. Exhaustive on purpose: a
/// wrapping service that matches on it should have to consider a new kind.
pub enum Work {
    /// The outcome, computed already.
    Done(Result<Option<Payload>, Error>),
    /// The work that produces it: polled once on the reader, then, if it
    /// waits, in a task of its own.
    Future(ServeFuture),
}

impl Work {
    /// As a future, for code that wants one whatever the work is.
    pub fn into_future(self) -> ServeFuture {
        match self {
            Work::Done(r) => Box::pin(std::future::ready(r)),
            Work::Future(f) => f,
        }
    }
}

/// One call handed to a [`Service`]: what was asked, and the halves of its
/// streams.
pub struct Incoming {
    pub(crate) method: Name,
    pub(crate) id: u32,
    pub(crate) kind: Kind,
    pub(crate) input: Payload,
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancel: Arc<CancelSignal>,
    pub(crate) peer: Arc<Hello>,
    pub(crate) core: Arc<Core>,
    /// The caller's items (client_stream, bidi), until taken.
    pub(crate) items: Option<StreamIn>,
    /// Credit for our items to the caller (server_stream, bidi), until taken.
    pub(crate) credit: Option<Arc<Semaphore>>,
}

impl Incoming {
    /// The method called.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The kind the caller asked for.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The REQUEST payload, as it arrived (empty for the streaming-in kinds).
    pub fn input(&self) -> &Payload {
        &self.input
    }

    /// The call's context: method, id, deadline, cancellation, caller.
    pub fn context(&self) -> CallContext {
        self.context_named(self.method.as_str().into())
    }

    /// The context, with the method's name shared rather than copied (a
    /// provider keeps one per method).
    pub(crate) fn context_named(&self, method: Arc<str>) -> CallContext {
        CallContext { method, id: self.id, deadline: self.deadline, cancel: self.cancel.clone(), peer: self.peer.clone() }
    }
}

/// A REQUEST arrived: check it, register it, hand it to `service`, run its
/// work. Returns whether that started a task (see `reader::dispatch`). An
/// `Err` is a protocol error: the connection closes.
pub(crate) fn on_request(
    core: &Arc<Core>,
    service: Option<&Arc<dyn Service>>,
    id: u32,
    kind: Kind,
    timeout_ms: u32,
    method: Name,
    input: Payload,
) -> Result<bool, FrameError> {
    if core.ours(id) {
        return Err(FrameError::protocol(format!("REQUEST with call id {id} of the receiver's parity")));
    }
    let Some(service) = service else {
        let e = Error::new(Code::UnknownMethod, format!("unknown method {method:?}: this side offers no methods"));
        core.send_response(id, Err(e), false);
        return Ok(false);
    };
    let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
    // The protocol's checks under the table's lock, once. The call enters
    // the table only if its work has to wait (below): one that answers
    // when first polled is never seen by another frame (the reader is busy
    // polling it), so it costs this one lock, no task and no entry.
    let more = {
        let mut t = core.calls.lock().unwrap();
        if t.served.contains_key(&id) {
            return Err(FrameError::protocol(format!("REQUEST for call id {id}, which is already live")));
        }
        // The latest, not the numerically largest: ids wrap (§5.10).
        t.last_peer_id = id;
        let refusal = if t.draining {
            Some(Error::unavailable("provider is draining (GOAWAY); retry elsewhere"))
        } else if t.served.len() + core.answering.load(Relaxed) >= core.local.max_calls as usize {
            let limit = core.local.max_calls;
            Some(Error::new(Code::ResourceExhausted, format!("too many calls in flight: the limit (max_calls) is {limit}")))
        } else {
            None
        };
        if let Some(e) = refusal {
            drop(t);
            core.send_response(id, Err(e), false);
            return Ok(false);
        }
        // Answering until it enters the table or its RESPONSE is queued.
        core.answering.fetch_add(1, Relaxed);
        !t.served.is_empty()
    };
    let cancel = CancelSignal::take();
    let (items_tx, items) = if kind.streams_in() {
        let (tx, stream) = StreamIn::new(core.local.window, core.backlog.clone());
        (Some(tx), Some(stream))
    } else {
        (None, None)
    };
    let credit = kind.streams_out().then(|| Arc::new(Semaphore::new(core.peer.window as usize)));
    let recv = items.as_ref().map(|s| s.window.clone());
    let served = Served { cancel: cancel.clone(), items: items_tx, recv, send_credit: credit.clone() };
    let call =
        Incoming { method, id, kind, input, deadline, cancel: cancel.clone(), peer: core.peer.clone(), core: core.clone(), items, credit };
    let answer = |served: Served, cancel: Arc<CancelSignal>, result| {
        served.end();
        CancelSignal::end(cancel);
        core.answer_served(id, result, more);
        Ok(false)
    };
    let mut work = match std::panic::catch_unwind(AssertUnwindSafe(|| service.start(call))) {
        Ok(Ok(Work::Done(result))) => return answer(served, cancel, result),
        Ok(Ok(Work::Future(work))) => CatchUnwind(work),
        Ok(Err(refused)) => return answer(served, cancel, Err(refused)),
        Err(panic) => return answer(served, cancel, Err(Error::defect(format!("service panicked: {}", panic_message(&*panic))))),
    };
    // Poll once right here, in either wait mode: a handler that answers at
    // once (most do) costs no task, no wake-up and no trip through the
    // scheduler. One that has to wait moves to its own task, which polls it
    // again with a real waker. (A handler that computes for long before
    // its first await yields first: `Provider::in_task`.)
    if let Poll::Ready(result) = Pin::new(&mut work).poll(&mut Context::from_waker(std::task::Waker::noop())) {
        drop(work); // and with it the handler's context: the signal may be reused
        return answer(served, cancel, result);
    }
    {
        let mut t = core.calls.lock().unwrap();
        if t.closed.is_some() {
            // The connection died while the work was first polled: `die`
            // cancelled the calls in the table, and this one with them.
            drop(t);
            served.cancel();
            core.answered();
            return Ok(false);
        }
        t.served.insert(id, served);
        // In the table now, which counts it (under the same lock).
        core.answering.fetch_sub(1, Relaxed);
    }
    tokio::spawn(run(core.clone(), id, work, cancel, deadline));
    Ok(true)
}

/// Runs one call's work to its end (or cancellation, or deadline) and
/// answers.
async fn run(core: Arc<Core>, id: u32, work: CatchUnwind, cancel: Arc<CancelSignal>, deadline: Option<Instant>) {
    let expiry = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        r = work => Some(r),
        _ = expiry => Some(Err(Error::new(Code::DeadlineExceeded, "deadline exceeded in the handler"))),
    };
    let more = finish(&core, id, &cancel, result);
    CancelSignal::give_back(cancel);
    if !more {
        // The caller may answer with its next request soon: spin for it.
        core.kick();
    }
}

/// Forgets a served call and sends its RESPONSE, unless it was cancelled
/// (`result` is None) or the connection died meanwhile. The entry is only
/// removed if it is still this call (`cancel` is its identity): once a
/// call was cancelled the peer may reuse its id for a new one at once.
/// Returns whether other served calls are still in flight (then the
/// RESPONSE may share a write with theirs).
fn finish(core: &Arc<Core>, id: u32, cancel: &Arc<CancelSignal>, result: Option<Result<Option<Payload>, Error>>) -> bool {
    let (live, more) = {
        let mut t = core.calls.lock().unwrap();
        let ours = t.served.get(&id).is_some_and(|s| Arc::ptr_eq(&s.cancel, cancel));
        let live = if ours { t.served.remove(&id) } else { None };
        if live.is_some() {
            // Out of the table, it still holds its slot until its RESPONSE
            // is queued: the peer may reuse the id now, but a drain must
            // not close before the answer is in the queue.
            core.answering.fetch_add(1, Relaxed);
        }
        if t.draining && t.idle() {
            core.idle.notify_waiters();
        }
        (live, !t.served.is_empty())
    };
    if let Some(served) = live {
        served.cancel();
        match result {
            Some(result) => core.answer_served(id, result, more),
            None => core.answered(),
        }
    }
    more
}

/// Turns a panic while polling a call's work into a `defect` for that call.
struct CatchUnwind(ServeFuture);

impl Future for CatchUnwind {
    type Output = Result<Option<Payload>, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(panic) => Poll::Ready(Err(Error::defect(format!("handler panicked: {}", panic_message(&*panic))))),
        }
    }
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}
