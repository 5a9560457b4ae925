//! The two steady background clients: each on its own connection to the
//! main hub, calling `echo` with 64 bytes every 5 ms for the whole suite,
//! on a runtime and thread of their own (so that the cases' own load in
//! this process does not delay them). Every call is timed; a call that
//! fails or gets no answer within 10 s is counted as failed, with why.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hubwire::transport::unix;
use hubwire::{Connection, ConnectionOptions};

/// Calls per client per second, roughly: one every `PERIOD`.
const PERIOD: Duration = Duration::from_millis(5);
/// A call not answered within this is a failed call.
const CALL_DEADLINE: Duration = Duration::from_secs(10);

/// One finished call.
struct Sample {
    at: Instant,
    latency: Duration,
    error: Option<String>,
}

/// What the clients saw since a mark.
#[derive(Debug, Default)]
pub struct Report {
    /// Calls answered.
    pub calls: usize,
    /// 99th percentile latency of the successful ones.
    pub p99: Duration,
    /// Failed calls (error or no answer), and the first reason.
    pub failed: usize,
    /// The first failure's reason.
    pub first_error: Option<String>,
}

/// The running clients.
pub struct Background {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Starts both clients on the hub's Unix socket.
    pub fn start(socket: PathBuf) -> Background {
        let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
        let stop: Arc<AtomicBool> = Arc::default();
        let (s, st) = (samples.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                let a = tokio::spawn(client(socket.clone(), s.clone(), st.clone()));
                let b = tokio::spawn(client(socket, s, st));
                let _ = tokio::join!(a, b);
            });
        });
        Background { samples, stop, thread: Some(thread) }
    }

    /// What happened since `since`.
    pub fn report(&self, since: Instant) -> Report {
        let samples = self.samples.lock().unwrap();
        let mut ok: Vec<Duration> = Vec::new();
        let mut report = Report::default();
        for s in samples.iter().rev().take_while(|s| s.at >= since) {
            report.calls += 1;
            match &s.error {
                None => ok.push(s.latency),
                Some(e) => {
                    report.failed += 1;
                    report.first_error = Some(e.clone());
                }
            }
        }
        report.p99 = p99(ok);
        report
    }

    /// Stops both clients and waits for them.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The 99th percentile (nearest rank) of `latencies`; zero when empty.
fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    let rank = (latencies.len() * 99).div_ceil(100);
    latencies.get(rank.saturating_sub(1)).copied().unwrap_or_default()
}

/// One client: dials, calls every `PERIOD` until told to stop, redials
/// after a lost connection (counted as a failure).
async fn client(socket: PathBuf, samples: Arc<Mutex<Vec<Sample>>>, stop: Arc<AtomicBool>) {
    let payload = Bytes::from(vec![7u8; 64]);
    let mut conn: Option<Connection> = None;
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let started = Instant::now();
        if conn.as_ref().is_none_or(|c| c.is_closed()) {
            conn = dial(&socket).await.map_err(|e| record(&samples, started, Some(e))).ok();
            if conn.is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        }
        let c = conn.as_ref().unwrap();
        let error = match tokio::time::timeout(CALL_DEADLINE, c.call_raw("echo", payload.clone())).await {
            Ok(Ok(out)) if out == payload => None,
            Ok(Ok(_)) => Some("echo answered other bytes".to_string()),
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {CALL_DEADLINE:?}")),
        };
        record(&samples, started, error);
    }
}

async fn dial(socket: &PathBuf) -> Result<Connection, String> {
    let t = unix::connect(socket).await.map_err(|e| format!("background client cannot connect: {e}"))?;
    let options = ConnectionOptions::new("hardening-background");
    match tokio::time::timeout(Duration::from_secs(5), Connection::dial(t, &options)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("background client handshake: {e}")),
        Err(_) => Err("background client: no handshake within 5 s".into()),
    }
}

fn record(samples: &Mutex<Vec<Sample>>, started: Instant, error: Option<String>) {
    samples.lock().unwrap().push(Sample { at: started, latency: started.elapsed(), error });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_is_the_nearest_rank() {
        let ms = |v: u64| Duration::from_millis(v);
        assert_eq!(p99(vec![]), Duration::ZERO);
        assert_eq!(p99(vec![ms(3)]), ms(3));
        // 100 samples 1..=100 ms: the 99th is 99 ms, not the maximum.
        assert_eq!(p99((1..=100).rev().map(ms).collect()), ms(99));
        // 1000 samples with 11 slow ones: the slow tail shows.
        let mut v: Vec<Duration> = (0..989).map(|_| ms(1)).collect();
        v.extend((0..11).map(|_| ms(500)));
        assert_eq!(p99(v), ms(500));
    }
}
