//! Counters and latency per replica, cheap enough to update on every call:
//! atomics only, and a fixed log-scale histogram (4 buckets per power of
//! two, 1 µs to ~1 h) from which p50 and p99 are read to within 19%.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hubwire::Code;

/// Buckets per doubling: bucket bounds grow by 2^(1/4) ≈ 1.19.
const SUB: u32 = 4;
/// 2^32 µs ≈ 71 minutes: longer calls land in the last bucket.
const BUCKETS: usize = 32 * SUB as usize;

/// What one replica has served.
pub struct Metrics {
    calls: AtomicU64,
    errors: AtomicU64,
    by_code: [AtomicU64; Code::ALL.len()],
    latency: [AtomicU64; BUCKETS],
    latency_sum_us: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            by_code: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
            latency_sum_us: AtomicU64::new(0),
        }
    }
}

fn bucket_of(us: u64) -> usize {
    if us <= 1 {
        return 0;
    }
    // floor(log2(us) * SUB), from the exponent and the top fraction bits.
    let exp = 63 - us.leading_zeros();
    let frac = if exp >= 2 { ((us >> (exp - 2)) & 0b11) as u32 } else { ((us << (2 - exp)) & 0b11) as u32 };
    ((exp * SUB + frac) as usize).min(BUCKETS - 1)
}

/// The upper bound of a bucket, in µs.
fn bucket_upper(b: usize) -> f64 {
    2f64.powf((b as f64 + 1.0) / SUB as f64)
}

impl Metrics {
    /// Records one finished call.
    pub fn record(&self, took: Duration, code: Code) {
        let us = took.as_micros().min(u64::MAX as u128) as u64;
        self.calls.fetch_add(1, Relaxed);
        if code != Code::Ok {
            self.errors.fetch_add(1, Relaxed);
        }
        self.by_code[code as usize].fetch_add(1, Relaxed);
        self.latency[bucket_of(us)].fetch_add(1, Relaxed);
        self.latency_sum_us.fetch_add(us, Relaxed);
    }

    /// Calls finished.
    pub fn calls(&self) -> u64 {
        self.calls.load(Relaxed)
    }

    /// Calls that ended with any code but `ok`.
    pub fn errors(&self) -> u64 {
        self.errors.load(Relaxed)
    }

    /// Calls per code, for codes seen at least once.
    pub fn by_code(&self) -> Vec<(Code, u64)> {
        Code::ALL.iter().map(|&c| (c, self.by_code[c as usize].load(Relaxed))).filter(|&(_, n)| n > 0).collect()
    }

    /// Sum of all call durations.
    pub fn latency_sum(&self) -> Duration {
        Duration::from_micros(self.latency_sum_us.load(Relaxed))
    }

    /// The histogram as counts per bucket.
    pub fn snapshot(&self) -> Histogram {
        Histogram(self.latency.iter().map(|b| b.load(Relaxed)).collect())
    }
}

/// A copy of a latency histogram; several can be merged.
#[derive(Clone, Default)]
pub struct Histogram(Vec<u64>);

impl Histogram {
    /// Adds another histogram's counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        if self.0.is_empty() {
            self.0 = vec![0; BUCKETS];
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a += b;
        }
    }

    /// The `q` quantile (0..=1) as the upper bound of its bucket, or
    /// `None` before any call.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total: u64 = self.0.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &n) in self.0.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Duration::from_nanos((bucket_upper(b) * 1000.0) as u64));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_grow_monotonically_and_bound_their_values() {
        let mut last = 0;
        for us in [1u64, 2, 3, 5, 8, 13, 100, 1000, 65_000, 1 << 31] {
            let b = bucket_of(us);
            assert!(b >= last, "{us} µs went to bucket {b} after {last}");
            assert!(bucket_upper(b) >= us as f64, "bucket {b} tops at {} < {us}", bucket_upper(b));
            assert!(bucket_upper(b) <= us as f64 * 1.19 + 1.0, "bucket {b} too wide for {us}");
            last = b;
        }
    }

    #[test]
    fn quantiles_come_from_the_right_bucket() {
        let m = Metrics::default();
        for _ in 0..99 {
            m.record(Duration::from_micros(100), Code::Ok);
        }
        m.record(Duration::from_millis(50), Code::Unavailable);
        let h = m.snapshot();
        let p50 = h.quantile(0.5).unwrap().as_micros();
        let p999 = h.quantile(0.999).unwrap().as_micros();
        assert!((100..=119).contains(&p50), "p50 {p50}");
        assert!((50_000..=59_500).contains(&p999), "p99.9 {p999}");
        assert_eq!((m.calls(), m.errors()), (100, 1));
        assert_eq!(m.by_code(), vec![(Code::Ok, 99), (Code::Unavailable, 1)]);
    }
}
