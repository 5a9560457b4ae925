//! How a connection waits for bytes.
//!
//! On the virtual machines we run on, a round trip in which the receiver
//! sleeps in the kernel costs ~47 µs over a Unix socket, almost all of it
//! waking an idle virtual CPU (20–25 µs a hop). A receiver that keeps
//! asking the socket for a few tens of microseconds first answers in a few
//! microseconds. So a connection has two modes:
//!
//! * [`WaitMode::Efficient`]: block in the reactor at once. No CPU while
//!   waiting.
//! * [`WaitMode::LowLatency`]: after activity (bytes arrived, or this side
//!   just sent a request and expects an answer), poll the socket without
//!   blocking for up to `spin`, then block.
//!
//! The spin backs off when it does not pay ([`Spinner`]): never on a
//! machine (or affinity mask) with one CPU, where it would only steal the
//! peer's time slice; and after a few spins in a row that found nothing, it
//! skips a growing number of waits before trying again. An idle connection
//! therefore costs no CPU in either mode: it spins at most once after its
//! last activity, then blocks. The reader does not spin inside a large
//! frame either (`reader.rs`): the rest of it comes in socket-sized
//! pieces, each worth far more than a wake-up.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

/// How a connection waits for bytes; chosen per connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Block at once; burn no CPU while waiting.
    #[default]
    Efficient,
    /// Spin on non-blocking reads for up to `spin` after activity, then block.
    LowLatency {
        /// The longest one spin lasts.
        spin: Duration,
    },
}

impl WaitMode {
    /// Low-latency mode with the default spin of 50 µs.
    pub const fn low_latency() -> WaitMode {
        WaitMode::LowLatency { spin: Duration::from_micros(50) }
    }

    /// Reads `HUBWIRE_WAIT` (`efficient`, `low-latency`, or
    /// `low-latency:<µs>`); `None` if unset or unreadable.
    pub fn from_env() -> Option<WaitMode> {
        let v = std::env::var("HUBWIRE_WAIT").ok()?;
        match v.as_str() {
            "efficient" => Some(WaitMode::Efficient),
            "low-latency" => Some(WaitMode::low_latency()),
            other => {
                let us: u64 = other.strip_prefix("low-latency:")?.parse().ok()?;
                Some(WaitMode::LowLatency { spin: Duration::from_micros(us) })
            }
        }
    }
}

/// A count of calls in flight, shared by connections that spin only
/// while a caller is alone ([`ConnectionOptions::spin_gate`]): one call
/// in flight, and each of the last [`ALONE_BEFORE_SPIN`] calls, that one
/// included, started with none other in flight.
///
/// A spin holds its runtime worker. One caller after another through a
/// process that relays calls (the hub) gets each answer a wake-up sooner
/// by spinning for it, with nobody else waiting for that worker. With
/// several callers, other connections' tasks need the worker, and a
/// spin delays them: through the hub, 4 clients at once, spinning
/// whenever at most one call was in flight took p99.9 from 0.7–1.6 ms
/// to 4.2–4.7 ms, since their calls often do not overlap for a moment;
/// the calls-alone-in-a-row rule keeps them from spinning at all. A
/// spinner whose gate is shut does not spin, and that does not count as
/// a spin that failed.
///
/// [`ConnectionOptions::spin_gate`]: crate::ConnectionOptions::spin_gate
#[derive(Clone, Debug, Default)]
pub struct SpinGate(Arc<GateCount>);

#[derive(Debug, Default)]
struct GateCount {
    /// Calls in flight.
    calls: AtomicUsize,
    /// Calls started alone since one last started beside another.
    alone: AtomicU32,
}

/// Calls started alone in a row before a spin may start: one caller
/// after another, not several whose calls happen not to overlap now.
pub const ALONE_BEFORE_SPIN: u32 = 16;

impl SpinGate {
    /// A gate with no call in flight.
    pub fn new() -> SpinGate {
        SpinGate::default()
    }

    /// Counts one call in flight until the returned guard is dropped.
    pub fn busy(&self) -> Busy {
        let g = &self.0;
        if g.calls.fetch_add(1, Ordering::Relaxed) == 0 {
            // One update, so that a reset by a call starting beside this
            // one is never lost.
            let _ = g.alone.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| Some(a.saturating_add(1)));
        } else {
            g.alone.store(0, Ordering::Relaxed);
        }
        Busy(self.0.clone())
    }

    /// Calls in flight: counted by a [`Busy`] not yet dropped.
    pub fn in_flight(&self) -> usize {
        self.0.calls.load(Ordering::Relaxed)
    }

    /// Whether a spin may start: one call in flight (none: nobody waits
    /// for an answer, so a health check's PING does not spin), and the
    /// last [`ALONE_BEFORE_SPIN`] calls, that one included, each started
    /// alone.
    pub fn open(&self) -> bool {
        self.0.calls.load(Ordering::Relaxed) == 1 && self.0.alone.load(Ordering::Relaxed) >= ALONE_BEFORE_SPIN
    }
}

/// One call counted by a [`SpinGate`], until dropped.
#[derive(Debug)]
pub struct Busy(Arc<GateCount>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Failed spins in a row before backing off.
const FAILS_BEFORE_BACKOFF: u32 = 3;
/// The longest back-off, in skipped waits.
const MAX_SKIP_SHIFT: u32 = 10;
/// Attempts between two looks at the clock while spinning.
const CLOCK_EVERY: u32 = 16;

/// The adaptive spin of one connection's reader.
#[derive(Debug)]
pub struct Spinner {
    budget: Option<Duration>,
    fails: u32,
    skip: u32,
    gate: Option<SpinGate>,
}

impl Spinner {
    /// A spinner for `mode`; disabled in efficient mode and when this
    /// process may run on only one CPU; with a `gate`, spinning only
    /// while it is open.
    pub fn new(mode: WaitMode, gate: Option<SpinGate>) -> Spinner {
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let budget = match mode {
            WaitMode::LowLatency { spin } if cpus > 1 && !spin.is_zero() => Some(spin),
            _ => None,
        };
        Spinner { budget, fails: 0, skip: 0, gate }
    }

    /// Whether this spinner ever spins.
    pub fn enabled(&self) -> bool {
        self.budget.is_some()
    }

    /// Whether a spin may start now: enabled, and the gate (if any) open.
    pub fn may_spin(&self) -> bool {
        self.budget.is_some() && self.gate_open()
    }

    fn gate_open(&self) -> bool {
        self.gate.as_ref().is_none_or(SpinGate::open)
    }

    /// Calls `attempt` until it yields a value or the budget is spent.
    /// `None` means: block now.
    pub fn spin<T>(&mut self, mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
        let budget = self.budget?;
        if !self.gate_open() {
            return None;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        let start = Instant::now();
        let mut n: u32 = 0;
        loop {
            if let Some(v) = attempt() {
                self.fails = 0;
                return Some(v);
            }
            // The clock is read every few attempts only: on a shared ring
            // an attempt is a few loads, and a clock read on a virtual
            // machine costs several of them (it was a quarter of both
            // processes' samples, one call in flight on shared memory). A
            // socket's attempt is a system call, so the spin overshoots its
            // budget by a few microseconds at most.
            n = n.wrapping_add(1);
            if n.is_multiple_of(CLOCK_EVERY) && start.elapsed() >= budget {
                break;
            }
            std::hint::spin_loop();
        }
        self.fails += 1;
        if self.fails >= FAILS_BEFORE_BACKOFF {
            self.skip = 1 << (self.fails - FAILS_BEFORE_BACKOFF).min(MAX_SKIP_SHIFT);
        }
        None
    }
}

/// Wakes a reader blocked in the reactor so that it spins again: sent after
/// a request in low-latency mode, because a response is now expected.
#[derive(Default)]
pub(crate) struct Kick {
    flag: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Kick {
    pub(crate) fn kick(&self) {
        if !self.flag.swap(true, Ordering::AcqRel) {
            if let Some(w) = self.waker.lock().unwrap().take() {
                w.wake();
            }
        }
    }

    /// True if kicked since the last call; otherwise registers the waker.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> bool {
        if self.flag.swap(false, Ordering::AcqRel) {
            return true;
        }
        *self.waker.lock().unwrap() = Some(cx.waker().clone());
        self.flag.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efficient_never_spins() {
        let mut s = Spinner::new(WaitMode::Efficient, None);
        let mut calls = 0;
        assert_eq!(
            s.spin(|| {
                calls += 1;
                Some(())
            }),
            None
        );
        assert_eq!(calls, 0);
    }

    #[test]
    fn backs_off_after_failed_spins_and_recovers() {
        let mut s = Spinner { budget: Some(Duration::from_micros(20)), fails: 0, skip: 0, gate: None };
        for _ in 0..FAILS_BEFORE_BACKOFF {
            assert_eq!(s.spin(|| None::<()>), None);
        }
        // Now it skips without calling the attempt at all.
        let mut calls = 0;
        assert_eq!(
            s.spin(|| {
                calls += 1;
                Some(())
            }),
            None
        );
        assert_eq!(calls, 0, "a backed-off spinner must not spin");
        // After the skip, a spin that succeeds resets the back-off.
        assert_eq!(s.spin(|| Some(7)), Some(7));
        assert_eq!(s.fails, 0);
    }

    #[test]
    fn a_shut_gate_stops_the_spin_without_a_back_off() {
        let gate = SpinGate::new();
        let mut s = Spinner { budget: Some(Duration::from_micros(20)), fails: 0, skip: 0, gate: Some(gate.clone()) };
        for _ in 0..ALONE_BEFORE_SPIN {
            drop(gate.busy());
        }
        assert!(!gate.open(), "no call in flight: nobody to spin for");
        let one = gate.busy();
        assert!(gate.open(), "callers one after another");
        drop(one);
        let (a, b) = (gate.busy(), gate.busy());
        let mut calls = 0;
        for _ in 0..2 * FAILS_BEFORE_BACKOFF {
            let got = s.spin(|| {
                calls += 1;
                Some(())
            });
            assert_eq!(got, None);
        }
        assert_eq!(calls, 0, "two calls in flight: no spin");
        assert_eq!((s.fails, s.skip), (0, 0), "a shut gate is not a failed spin");
        drop((a, b));
        assert!(!gate.open(), "alone now, but calls overlapped a moment ago");
        for _ in 0..ALONE_BEFORE_SPIN - 1 {
            drop(gate.busy());
        }
        let _one = gate.busy();
        assert!(gate.open());
        assert_eq!(s.spin(|| Some(7)), Some(7), "calls one after another: it spins");
    }

    #[test]
    fn env_parsing() {
        std::env::set_var("HUBWIRE_WAIT", "low-latency:20");
        assert_eq!(WaitMode::from_env(), Some(WaitMode::LowLatency { spin: Duration::from_micros(20) }));
        std::env::set_var("HUBWIRE_WAIT", "bogus");
        assert_eq!(WaitMode::from_env(), None);
        std::env::remove_var("HUBWIRE_WAIT");
    }
}
