//! The latency chart of the step summary: a Mermaid `xychart-beta`
//! (GitHub renders it) of the candidate's percentiles as bars and the
//! measured baseline's as a line, on a y-axis that starts at zero, so a
//! bar's length is its value and the candidate's bar against the
//! baseline's point shows the ratio the regression gate judges as it is
//! (a p99 of 29.8 ms never looks five times a p50 of 19.7 ms). Each
//! percentile's values are printed in its x-axis label (Mermaid draws
//! those everywhere; its data labels exist only on newer versions and,
//! with a line series beside the bars, Mermaid 11 draws one astray), a
//! legend line follows for renderers that draw none, and the two colours
//! keep a 3:1 contrast on GitHub's light and dark backgrounds. Nothing is
//! drawn that was not measured.

use super::side::SideStats;
use super::verdict::Analysis;

/// The candidate's bars: blue, 3.7:1 on white and 5.0:1 on GitHub's dark
/// background (#0d1117).
const CANDIDATE_COLOUR: &str = "#2f81f7";
/// The baseline's line: orange, apart from blue for colour-blind readers
/// too; 3.8:1 on white, 5.0:1 on the dark background.
const BASELINE_COLOUR: &str = "#c96a00";

const PERCENTILES: [&str; 4] = ["p50", "p90", "p95", "p99"];

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
        let hi = finite.iter().copied().fold(0.0_f64, f64::max);
        let top = axis_top(hi);
        // One precision for the axis, the points and the labels, so a
        // sub-millisecond model's values are not rounded to 0.1 ms.
        let d = decimals(top);
        let value = |v: Option<f64>| match v {
            Some(x) if x.is_finite() => format!("{x:.d$}"),
            Some(_) => "∞".to_string(),
            None => "–".to_string(),
        };
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
        // The values in each label: "p95 29.8 / 16.0".
        let labels: Vec<String> = PERCENTILES
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let cand = value(series(c)[i]);
                match &self.baseline {
                    Some(b) => format!("\"{p} {cand} / {}\"", value(series(b)[i])),
                    None => format!("\"{p} {cand}\""),
                }
            })
            .collect();
        let mut out = format!(
            "\n```mermaid\n%%{{init: {{\"xyChart\": {{\"showLegend\": true}}, \"themeVariables\": {{\"xyChart\": {{\"plotColorPalette\": \"{CANDIDATE_COLOUR}, {BASELINE_COLOUR}\"}}}}}}}}%%\nxychart-beta\n    title \"Latency (ms) by percentile\"\n    x-axis [{}]\n    y-axis \"ms\" 0 --> {top:.d$}\n    bar \"candidate\" [{}]\n",
            labels.join(", "),
            pts(c)
        );
        if let Some(b) = &self.baseline {
            out.push_str(&format!("    line \"baseline\" [{}]\n", pts(b)));
        }
        out.push_str("```\n\n");
        let mut legend = match &self.baseline {
            Some(_) => "🟦 candidate (bars) · 🟧 baseline (line) · labels: candidate / baseline ms"
                .to_string(),
            None => {
                "🟦 candidate (bars) · no baseline was measured · labels: candidate ms".to_string()
            }
        };
        legend.push_str(" · the y-axis starts at 0, so a bar's length is its value");
        if series(c).iter().flatten().any(|v| v.is_infinite()) {
            legend.push_str(" · a bar at the top reached a failed request (∞)");
        }
        out.push_str(&legend);
        out.push('\n');
        out
    }
}

/// The axis's top: a round number a little over `hi` (the bottom is 0).
fn axis_top(hi: f64) -> f64 {
    let hi = hi.max(1e-3);
    let step = 10f64.powf((hi / 5.0).log10().floor());
    ((hi * 1.1) / step).ceil() * step
}

/// Decimals that resolve a hundredth of the axis (sub-millisecond models
/// too), at most four.
fn decimals(top: f64) -> usize {
    let span = top.max(1e-4);
    ((100.0 / span).log10().ceil().max(0.0) as usize).min(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_starts_at_zero_and_ends_just_over_the_data() {
        for hi in [0.47, 19.7, 29.8, 120.0, 900.0] {
            let top = axis_top(hi);
            assert!(top > hi && top <= hi * 1.35, "{hi}: {top}");
        }
    }

    #[test]
    fn points_and_axis_share_one_precision() {
        // A sub-millisecond model: 0.41 and 0.47 ms stay apart.
        let d = decimals(axis_top(0.47));
        assert!(d >= 3, "{d}");
        assert_ne!(format!("{:.d$}", 0.412), format!("{:.d$}", 0.418));
        // Tens of milliseconds: one decimal; hundreds: whole ones.
        assert_eq!(decimals(axis_top(60.0)), 1);
        assert_eq!(decimals(axis_top(900.0)), 0);
    }
}
