//! Latency CDFs as a hand-written SVG (`--cdf FILE.svg`): one step line per distribution,
//! milliseconds on a log axis, cumulative fraction from 0 to 1.

use std::fmt::Write;

use crate::histogram::Snapshot;

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
];
/// The smallest latency drawn: 1 µs (a log axis has no zero).
const FLOOR_MS: f64 = 1e-3;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn decade_label(exponent: i32) -> String {
    if exponent >= 0 {
        format!("{}", 10f64.powi(exponent))
    } else {
        format!("{:.*}", (-exponent) as usize, 10f64.powi(exponent))
    }
}

/// An SVG document plotting each non-empty distribution's CDF (values in nanoseconds).
pub fn render(title: &str, series: &[(String, Snapshot)]) -> String {
    let series: Vec<&(String, Snapshot)> = series.iter().filter(|(_, s)| !s.is_empty()).collect();
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(title)
    );
    let ms = |ns: u64| (ns as f64 / 1e6).max(FLOOR_MS);
    let (lo_ms, hi_ms) = series
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), (_, s)| {
            (
                lo.min(ms(s.min().unwrap_or(0))),
                hi.max(ms(s.max().unwrap_or(0))),
            )
        });
    if series.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">no samples</text>"#,
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        svg.push_str("</svg>\n");
        return svg;
    }
    let lo = lo_ms.log10().floor() as i32;
    let mut hi = hi_ms.log10().ceil() as i32;
    if hi <= lo {
        hi = lo + 1;
    }
    let x = |value_ms: f64| LEFT + (value_ms.log10() - lo as f64) / (hi - lo) as f64 * plot_w;
    let y = |fraction: f64| TOP + (1.0 - fraction) * plot_h;

    // Grid and axes.
    for exponent in lo..=hi {
        let gx = x(10f64.powi(exponent));
        let _ = writeln!(
            svg,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            TOP + plot_h
        );
        let _ = writeln!(
            svg,
            r#"<text x="{gx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + plot_h + 16.0,
            decade_label(exponent)
        );
    }
    for fraction in [0.0, 0.25, 0.5, 0.75, 0.9, 1.0] {
        let gy = y(fraction);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{:.1}" y2="{gy:.1}" stroke="#ddd"/>"##,
            LEFT + plot_w
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{fraction}</text>"#,
            LEFT - 6.0,
            gy + 4.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">latency (ms, log scale)</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 14.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">cumulative fraction</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );

    // One step line per distribution, with its legend entry.
    for (i, (name, snapshot)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut points = Vec::new();
        let mut below = 0.0;
        for (value, fraction) in snapshot.cdf() {
            let px = x(ms(value));
            points.push(format!("{px:.1},{:.1}", y(below)));
            points.push(format!("{px:.1},{:.1}", y(fraction)));
            below = fraction;
        }
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        let ly = TOP + 10.0 + i as f64 * 20.0;
        let lx = LEFT + plot_w + 16.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"/>"#,
            lx + 22.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{} (n={})</text>"#,
            lx + 28.0,
            ly + 4.0,
            escape(name),
            snapshot.count()
        );
    }
    svg.push_str("</svg>\n");
    svg
}
