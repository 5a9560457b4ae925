//! `--compare old.json`: what got faster or slower since an earlier run,
//! row by row (same key), by wall-clock time per call.

use std::fmt::Write;

use crate::results::Results;

/// Changes smaller than this are noise and not listed.
pub const THRESHOLD: f64 = 0.05;

/// The comparison as text: faster rows, slower rows, rows only in one run.
pub fn compare(old: &Results, new: &Results) -> String {
    let mut changes = Vec::new();
    let mut gone = Vec::new();
    for o in old.rows.iter().filter(|r| r.ok()) {
        match new.rows.iter().find(|n| n.key == o.key && n.ok()) {
            Some(n) => changes.push((n.us_per_call / o.us_per_call - 1.0, o, n)),
            None => gone.push(o.key.clone()),
        }
    }
    let added: Vec<&str> =
        new.rows.iter().filter(|n| n.ok() && !old.rows.iter().any(|o| o.key == n.key && o.ok())).map(|n| n.key.as_str()).collect();
    changes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut s = format!("Compared with the run of {} ({} profile): {} rows in both.\n", old.unix_time, old.profile, changes.len());
    let line = |s: &mut String, (d, o, n): &(f64, &crate::results::Row, &crate::results::Row)| {
        let _ = writeln!(
            s,
            "  {:+6.1}%  {}  {:.2} → {:.2} µs/call, CPU {:.2} → {:.2} µs/call",
            d * 100.0,
            n.key,
            o.us_per_call,
            n.us_per_call,
            o.cpu_us_per_call,
            n.cpu_us_per_call
        );
    };
    let faster: Vec<_> = changes.iter().filter(|c| c.0 < -THRESHOLD).collect();
    let slower: Vec<_> = changes.iter().rev().filter(|c| c.0 > THRESHOLD).collect();
    let _ = writeln!(s, "faster by more than {:.0}%: {}", THRESHOLD * 100.0, faster.len());
    faster.into_iter().for_each(|c| line(&mut s, c));
    let _ = writeln!(s, "slower by more than {:.0}%: {}", THRESHOLD * 100.0, slower.len());
    slower.into_iter().for_each(|c| line(&mut s, c));
    let listed = |keys: &[&str]| {
        let more = keys.len().saturating_sub(10);
        format!("{}{}", keys[..keys.len().min(10)].join(", "), if more > 0 { format!(" and {more} more") } else { String::new() })
    };
    if !gone.is_empty() {
        let gone: Vec<&str> = gone.iter().map(String::as_str).collect();
        let _ = writeln!(s, "only in the old run ({}): {}", gone.len(), listed(&gone));
    }
    if !added.is_empty() {
        let _ = writeln!(s, "only in this run ({}): {}", added.len(), listed(&added));
    }
    s
}
