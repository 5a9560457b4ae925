//! A small SVG line chart (log-log axes) for the two figures: latency by
//! payload size per transport, and throughput by window.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::results::Results;

/// One line of a chart.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// (x, y) points, both > 0.
    pub points: Vec<(f64, f64)>,
}

const COLORS: [&str; 12] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn tick(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{}M", v / 1e6),
        v if v >= 1e3 => format!("{}k", v / 1e3),
        v => format!("{v}"),
    }
}

/// A log-log line chart.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, left, right, top, bottom) = (900.0, 480.0, 70.0, 260.0, 40.0, 50.0);
    let pts = series.iter().flat_map(|s| s.points.iter()).filter(|p| p.0 > 0.0 && p.1 > 0.0);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let _ = writeln!(s, "<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>", (w - right + left) / 2.0, esc(title));
    if x0 > x1 {
        s.push_str("<text x=\"50%\" y=\"50%\" text-anchor=\"middle\">no data in this run</text>\n</svg>\n");
        return s;
    }
    // Whole decades around the data.
    let (lx0, lx1) = (x0.log10().floor(), x1.log10().ceil().max(x0.log10().floor() + 1.0));
    let (ly0, ly1) = (y0.log10().floor(), y1.log10().ceil().max(y0.log10().floor() + 1.0));
    let (pw, ph) = (w - left - right, h - top - bottom);
    let px = |x: f64| left + (x.log10() - lx0) / (lx1 - lx0) * pw;
    let py = |y: f64| top + ph - (y.log10() - ly0) / (ly1 - ly0) * ph;
    let _ = writeln!(s, "<rect x=\"{left}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#888\"/>");
    for d in lx0 as i32..=lx1 as i32 {
        let x = px(10f64.powi(d));
        let _ = writeln!(s, "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#ddd\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>", top + ph, top + ph + 16.0, tick(10f64.powi(d)));
    }
    for d in ly0 as i32..=ly1 as i32 {
        let y = py(10f64.powi(d));
        let _ = writeln!(s, "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", left + pw, left - 6.0, y + 4.0, tick(10f64.powi(d)));
    }
    let _ = writeln!(s, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", left + pw / 2.0, h - 10.0, esc(x_label));
    let _ = writeln!(s, "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>", top + ph / 2.0, esc(y_label));
    for (i, se) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let mut p: Vec<(f64, f64)> = se.points.iter().copied().filter(|p| p.0 > 0.0 && p.1 > 0.0).collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = p.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        let _ = writeln!(s, "<polyline points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"/>", path.join(" "));
        for &(x, y) in &p {
            let _ = writeln!(s, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"/>", px(x), py(y));
        }
        let ly = top + 10.0 + i as f64 * 18.0;
        let _ = writeln!(
            s,
            "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{c}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{}</text>",
            w - right + 15.0,
            w - right + 35.0,
            w - right + 40.0,
            ly + 4.0,
            esc(&se.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Groups `scenario`'s good rows (those `keep` accepts) into one series per
/// system and transport.
fn series(res: &Results, scenario: &str, keep: impl Fn(&crate::results::Row) -> Option<(f64, f64)>) -> Vec<Series> {
    let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in res.rows.iter().filter(|r| r.ok() && r.scenario == scenario) {
        if let Some(p) = keep(r) {
            by.entry(format!("{} / {}", r.system, r.transport)).or_default().push(p);
        }
    }
    by.into_iter().map(|(label, points)| Series { label, points }).collect()
}

/// Median latency by payload size (the Node study's payloads, raw).
pub fn latency_by_size(res: &Results) -> String {
    let s = series(res, "node_sizes", |r| {
        (r.encoding == "raw" || r.system == "jsonrpc-stdio")
            .then(|| (r.payload_bytes as f64, r.latency.map(|l| l.p50_us).unwrap_or(r.us_per_call)))
    });
    line_chart("Round trip by payload size (p50, one call in flight)", "payload bytes", "µs", &s)
}

/// Calls/s by window (pipelined 16 B calls).
pub fn throughput_by_window(res: &Results) -> String {
    let s = series(res, "pipelined", |r| r.window.map(|w| (w as f64, r.calls_per_s)));
    line_chart("Pipelined 16 B calls on one connection", "calls in flight (window)", "calls/s", &s)
}
