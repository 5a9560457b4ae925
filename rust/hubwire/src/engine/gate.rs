//! The bound on our calls in flight: the peer's `max_calls` (§4, HELLO).
//! A call takes a place before its REQUEST leaves and gives it back when
//! it ends; calls beyond the bound wait here rather than be refused there.
//!
//! A count and a [`Notify`], not tokio's `Semaphore`: the semaphore takes
//! its waiters' lock on every release, even with nobody waiting, and a
//! release is on the path of every call. Here a release is one atomic
//! subtraction, plus a wake-up only when a task waits.
//!
//! Waiting without a lost wake-up: a waiter counts itself in `waiters`,
//! then looks at the count again; a release lowers the count, then looks
//! at `waiters`. Both with sequentially consistent order, so one of the two
//! sees the other.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Places for our calls in flight, shared by the connection and every
/// [`Place`] it gave out.
pub(crate) struct Gate {
    used: AtomicUsize,
    max: usize,
    waiters: AtomicUsize,
    freed: Notify,
    closed: AtomicBool,
}

/// One call's place; given back when dropped.
pub(crate) struct Place(Arc<Gate>);

impl Drop for Place {
    fn drop(&mut self) {
        let g = &*self.0;
        g.used.fetch_sub(1, Ordering::SeqCst);
        if g.waiters.load(Ordering::SeqCst) > 0 {
            g.freed.notify_one();
        }
    }
}

impl Gate {
    /// A gate with `max` places (at least one).
    pub(crate) fn new(max: usize) -> Arc<Gate> {
        Arc::new(Gate {
            used: AtomicUsize::new(0),
            max: max.max(1),
            waiters: AtomicUsize::new(0),
            freed: Notify::new(),
            closed: AtomicBool::new(false),
        })
    }

    fn try_take(&self) -> bool {
        let mut used = self.used.load(Ordering::SeqCst);
        while used < self.max {
            match self.used.compare_exchange_weak(used, used + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
        false
    }

    /// Takes a place, waiting for one if all are taken; `None` once the
    /// gate is closed (the connection died). Cancel-safe: a waiter dropped
    /// after a release woke it passes the wake-up on (tokio's
    /// `notify_one` does).
    pub(crate) async fn take(self: &Arc<Gate>) -> Option<Place> {
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return None;
            }
            if self.try_take() {
                return Some(Place(self.clone()));
            }
            let notified = self.freed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let _counted = Counted::new(&self.waiters);
            if self.closed.load(Ordering::SeqCst) {
                return None;
            }
            if self.try_take() {
                return Some(Place(self.clone()));
            }
            notified.await;
        }
    }

    /// Fails every waiter and every later [`Gate::take`]; places already
    /// given out stay valid until dropped.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.freed.notify_waiters();
    }
}

/// A task counted in [`Gate::waiters`] while it lives.
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(n: &'a AtomicUsize) -> Counted<'a> {
        n.fetch_add(1, Ordering::SeqCst);
        Counted(n)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_beyond_the_bound_waits_for_a_place_given_back() {
        let g = Gate::new(2);
        let a = g.take().await.unwrap();
        let _b = g.take().await.unwrap();
        let waiter = tokio::spawn({
            let g = g.clone();
            async move { g.take().await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "the third call waits");
        drop(a);
        assert!(tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn closing_fails_waiters_and_later_calls() {
        let g = Gate::new(1);
        let held = g.take().await.unwrap();
        let waiter = tokio::spawn({
            let g = g.clone();
            async move { g.take().await.is_none() }
        });
        tokio::task::yield_now().await;
        g.close();
        assert!(tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap());
        assert!(g.take().await.is_none());
        drop(held);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiter_dropped_after_its_wake_up_passes_it_on() {
        let g = Gate::new(1);
        let held = g.take().await.unwrap();
        let first = tokio::spawn({
            let g = g.clone();
            async move { g.take().await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        let second = tokio::spawn({
            let g = g.clone();
            async move { g.take().await.is_some() }
        });
        tokio::task::yield_now().await;
        // The release wakes one of them; the first is dropped before it runs.
        drop(held);
        first.abort();
        assert!(tokio::time::timeout(Duration::from_secs(5), second).await.unwrap().unwrap());
    }

    #[test]
    fn many_threads_never_hold_more_places_than_the_bound() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_time().build().unwrap();
        let g = Gate::new(3);
        let inside = Arc::new(AtomicUsize::new(0));
        rt.block_on(async {
            let tasks: Vec<_> = (0..16)
                .map(|_| {
                    let (g, inside) = (g.clone(), inside.clone());
                    tokio::spawn(async move {
                        for _ in 0..500 {
                            let _p = g.take().await.unwrap();
                            assert!(inside.fetch_add(1, Ordering::SeqCst) < 3, "more than 3 places taken");
                            tokio::task::yield_now().await;
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            for t in tasks {
                tokio::time::timeout(Duration::from_secs(30), t).await.expect("no waiter is left hanging").unwrap();
            }
        });
        assert_eq!(g.used.load(Ordering::SeqCst), 0);
    }
}
