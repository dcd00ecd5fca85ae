//! The latency chart of the step summary: a Mermaid `xychart-beta`
//! (GitHub renders it) of the candidate's percentiles as bars and the
//! measured baseline's as a line, in two contrasting colours, on a y-axis
//! that starts near the data, with a legend line below for renderers that
//! draw none. Nothing is drawn that was not measured.

use super::side::SideStats;
use super::verdict::Analysis;

/// The candidate's bars: blue.
const CANDIDATE_COLOUR: &str = "#1f6feb";
/// The baseline's line: orange, apart from blue for colour-blind readers
/// too.
const BASELINE_COLOUR: &str = "#f0883e";

impl Analysis {
    /// The chart and its legend line; a sentence instead when the
    /// candidate's latency was not measured.
    pub(super) fn chart(&self) -> String {
        let c = &self.candidate;
        let series = |s: &SideStats| [s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms];
        let mut finite: Vec<f64> = series(c)
            .into_iter()
            .flatten()
            .filter(|v| v.is_finite())
            .collect();
        if finite.is_empty() {
            return "\nNo latency chart: no request to a case that expects a success was answered, so no latency was measured.\n".into();
        }
        if let Some(b) = &self.baseline {
            finite.extend(series(b).into_iter().flatten().filter(|v| v.is_finite()));
        }
        let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = finite.iter().copied().fold(0.0_f64, f64::max);
        let (bottom, top) = axis(lo, hi);
        // One precision for the axis and the points, so a sub-millisecond
        // model's points are not rounded to the nearest 0.1 ms.
        let d = decimals(bottom, top);
        let pts = |s: &SideStats| {
            series(s)
                .map(|v| match v {
                    Some(x) if x.is_finite() => format!("{x:.d$}"),
                    // A percentile that reached a failed request (or, for
                    // a side without answers, none): drawn at the top.
                    _ => format!("{top:.d$}"),
                })
                .join(", ")
        };
        let mut out = format!(
            "\n```mermaid\n%%{{init: {{\"xyChart\": {{\"showLegend\": true}}, \"themeVariables\": {{\"xyChart\": {{\"plotColorPalette\": \"{CANDIDATE_COLOUR}, {BASELINE_COLOUR}\"}}}}}}}}%%\nxychart-beta\n    title \"Latency (ms) by percentile\"\n    x-axis [p50, p90, p95, p99]\n    y-axis \"ms\" {bottom:.d$} --> {top:.d$}\n    bar \"candidate\" [{}]\n",
            pts(c)
        );
        if let Some(b) = &self.baseline {
            out.push_str(&format!("    line \"baseline\" [{}]\n", pts(b)));
        }
        out.push_str("```\n\n");
        let mut legend = match &self.baseline {
            Some(_) => "🟦 candidate (bars) · 🟧 baseline (line)".to_string(),
            None => "🟦 candidate (bars) · no baseline was measured".to_string(),
        };
        legend.push_str(&format!(" · the y-axis starts at {bottom:.d$} ms"));
        if series(c).iter().flatten().any(|v| v.is_infinite()) {
            legend.push_str(" · a bar at the top reached a failed request (∞)");
        }
        out.push_str(&legend);
        out.push('\n');
        out
    }
}

/// A y-axis from a round number a little under `lo` to one a little over
/// `hi`: a 20 % difference fills a fifth of the chart, not a sliver.
fn axis(lo: f64, hi: f64) -> (f64, f64) {
    let span = (hi - lo).max(hi * 0.05).max(1e-3);
    let step = 10f64.powf((span / 5.0).log10().floor());
    let bottom = ((lo - span * 0.2) / step).floor() * step;
    let top = ((hi + span * 0.1) / step).ceil() * step;
    (bottom.max(0.0), top.max(bottom + step))
}

/// Decimals that resolve a hundredth of the axis (sub-millisecond models
/// too), at most four.
fn decimals(bottom: f64, top: f64) -> usize {
    let span = (top - bottom).max(1e-4);
    ((100.0 / span).log10().ceil().max(0.0) as usize).min(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_starts_near_the_data() {
        let (b, t) = axis(100.0, 120.0);
        assert!(
            (80.0..100.0).contains(&b) && t > 120.0 && t <= 130.0,
            "{b} {t}"
        );
        let (b, t) = axis(0.5, 0.6);
        assert!(b < 0.5 && t > 0.6, "{b} {t}");
    }

    #[test]
    fn points_and_axis_share_one_precision() {
        // A sub-millisecond model: 0.41 and 0.47 ms stay apart.
        let (b, t) = axis(0.41, 0.47);
        let d = decimals(b, t);
        assert!(d >= 3, "{b} {t} {d}");
        assert_ne!(format!("{:.d$}", 0.412), format!("{:.d$}", 0.418));
        // Tens of milliseconds: one decimal; hundreds: whole ones.
        let (b, t) = axis(40.0, 60.0);
        assert_eq!(decimals(b, t), 1);
        let (b, t) = axis(100.0, 900.0);
        assert_eq!(decimals(b, t), 0);
    }
}
