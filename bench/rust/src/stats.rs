//! Latency percentiles from every call's own measurement.

use serde::{Deserialize, Serialize};

/// Percentiles of one set of round trips, in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Mean.
    pub mean_us: f64,
}

/// Nearest-rank percentiles of `samples` (nanoseconds; sorted in place).
pub fn latency(samples: &mut [u32]) -> Option<Latency> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let rank = |q: f64| {
        let i = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[i] as f64 / 1e3
    };
    let mean = samples.iter().map(|&s| s as f64).sum::<f64>() / samples.len() as f64 / 1e3;
    Some(Latency { p50_us: rank(0.5), p99_us: rank(0.99), p999_us: rank(0.999), mean_us: mean })
}

#[cfg(test)]
mod tests {
    #[test]
    fn nearest_rank_percentiles() {
        let mut s: Vec<u32> = (1..=1000).rev().map(|i| i * 1000).collect();
        let l = super::latency(&mut s).unwrap();
        assert_eq!((l.p50_us, l.p99_us, l.p999_us), (500.0, 990.0, 999.0));
        assert!((l.mean_us - 500.5).abs() < 1e-9);
        assert!(super::latency(&mut []).is_none());
    }
}
