//! Markdown: the targets, then one table per scenario, one row per system
//! and transport, each with its CPU time per call and its ratios.

use std::fmt::Write;

use crate::results::{Results, Row};
use crate::scenario::Scenario;

fn ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.2}×")).unwrap_or_else(|| "–".into())
}

fn num(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{:.0} MiB", bytes as f64 / (1 << 20) as f64)
    } else if bytes >= 1000 {
        format!("{:.0} KB", bytes as f64 / 1000.0)
    } else {
        format!("{bytes} B")
    }
}

/// The machine, the load, and a warning if it was not idle.
pub fn header(res: &Results) -> String {
    let m = &res.machine;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Run: {} UTC, {} profile, {:.2} s warm-up + {:.2} s measured per row; commit {}.",
        utc(res.unix_time),
        res.profile,
        res.warmup_s,
        res.measure_s,
        if m.commit.is_empty() { "unknown" } else { &m.commit }
    );
    let _ = writeln!(
        s,
        "Machine: {} × {}, Linux {}; {}; {}; {}.",
        m.cpus,
        m.cpu_model,
        m.kernel,
        m.rustc,
        if m.go.is_empty() { "no Go" } else { &m.go },
        m.libraries
    );
    let _ = writeln!(
        s,
        "Load: average {:.2} before, {:.2} after; other processes used {:.0}% of one CPU during the run.",
        m.load_before, m.load_after, m.foreign_cpu_pct
    );
    if let Some(w) = idle_warning(res) {
        let _ = writeln!(s, "\n**Warning: {w}**");
    }
    s
}

/// `YYYY-MM-DD HH:MM` of a Unix time (days to civil date: Howard Hinnant's algorithm).
fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}", rem / 3600, rem % 3600 / 60)
}

/// Why the machine was not idle, if it was not.
pub fn idle_warning(res: &Results) -> Option<String> {
    let m = &res.machine;
    let mut why = Vec::new();
    if m.load_before > 0.5 {
        why.push(format!("load average {:.2} at the start", m.load_before));
    }
    if m.foreign_cpu_pct > 10.0 {
        why.push(format!("other processes used {:.0}% of a CPU during the run", m.foreign_cpu_pct));
    }
    if !m.busy_at_start.is_empty() {
        let list: Vec<String> = m.busy_at_start.iter().take(5).map(|(n, p)| format!("{n} {p:.0}%")).collect();
        why.push(format!("busy at the start: {}", list.join(", ")));
    }
    (!why.is_empty()).then(|| {
        format!(
            "the machine was not idle ({}); blocking transports measure very differently on a busy machine, so compare ratios, not times.",
            why.join("; ")
        )
    })
}

/// The targets table.
pub fn targets(res: &Results) -> String {
    let mut s = String::from("| target | measured (this run) | ratio | limit | |\n|---|---|---|---|---|\n");
    for t in &res.targets {
        let verdict = match t.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not measured",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {verdict} |",
            t.target,
            t.measured,
            t.ratio.map(|r| format!("{r:.2}")).unwrap_or_else(|| "–".into()),
            t.limit
        );
    }
    s
}

/// One scenario's table.
pub fn scenario(res: &Results, sc: &Scenario) -> String {
    let rows: Vec<&Row> = res.rows.iter().filter(|r| r.scenario == sc.name).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!("### {} (`{}`)\n\n", sc.file.title, sc.name);
    let seq = rows.iter().any(|r| r.latency.is_some());
    if seq {
        s.push_str("| system | transport | payload | encoding | mode | p50 µs | p99 µs | p99.9 µs | calls/s | CPU µs/call | × floor | × best peer |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    } else {
        s.push_str("| system | transport | payload | encoding | mode | calls/s | MB/s | CPU µs/call | × floor | × best peer |\n|---|---|---|---|---|---|---|---|---|---|\n");
    }
    for r in rows {
        let head = format!("| {} | {} | {} ({}) | {} | {} ", r.system, r.transport, r.payload, size(r.payload_bytes), r.encoding, r.mode);
        if let Some(e) = &r.error {
            let cols = if seq { 7 } else { 5 };
            let _ = writeln!(s, "{head}| failed: {} {}|", e.replace('|', "/"), "| ".repeat(cols - 1));
            continue;
        }
        if seq {
            let l = r.latency.unwrap_or_default();
            let _ = writeln!(
                s,
                "{head}| {} | {} | {} | {:.0} | {} | {} | {} |",
                num(l.p50_us),
                num(l.p99_us),
                num(l.p999_us),
                r.calls_per_s,
                num(r.cpu_us_per_call),
                ratio(r.vs_floor),
                ratio(r.vs_best_peer)
            );
        } else {
            let _ = writeln!(
                s,
                "{head}| {:.0} | {} | {} | {} | {} |",
                r.calls_per_s,
                num(r.mb_per_s),
                num(r.cpu_us_per_call),
                ratio(r.vs_floor),
                ratio(r.vs_best_peer)
            );
        }
    }
    s.push('\n');
    s
}

/// The whole report.
pub fn report(res: &Results, scenarios: &[Scenario], charts: &[(&str, &str)]) -> String {
    let mut s = header(res);
    s.push_str("\n#### Targets\n\n");
    s.push_str(&targets(res));
    let _ = writeln!(s, "\n{}", crate::targets::sources());
    s.push_str("\nRatios are wall-clock time per call against the reference row of the same run: below 1 is faster. The floor is the hand-written echo on the same transport (the spinning one for spinning rows; through the hub, the Unix socket's); the best peer is the fastest non-hubwire, non-floor row of the same scenario, payload and mode.\n\n");
    for (file, title) in charts {
        let _ = writeln!(s, "![{title}]({file})\n");
    }
    for sc in scenarios {
        s.push_str(&scenario(res, sc));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00");
        assert_eq!(super::utc(951_782_400 + 3_661), "2000-02-29 01:01");
        assert_eq!(super::utc(1_795_320_261), "2026-11-22 04:04");
    }
}
