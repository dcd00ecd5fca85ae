//! Upload progress: what to show, and when, as an upload of a known size
//! moves. A CI log gets a line at the start and then at most one every
//! [`UPLOAD_LINE_EVERY_SECS`]; a terminal gets a bar redrawn when the whole
//! percent changes. The `Reporter` prints what this decides.

use std::time::{Duration, Instant};

use super::format::{format_bytes, human_duration};

/// How often a CI log gets an upload progress line: often enough to see a
/// long upload move, rarely enough that a fast one prints one line.
const UPLOAD_LINE_EVERY_SECS: u64 = 5;

/// One upload being reported.
pub(super) struct Upload {
    label: String,
    total: u64,
    started: Instant,
    /// Bytes stored so far.
    done: u64,
    /// When the last line was printed in CI mode.
    last_line: Option<Instant>,
    /// Last whole percent drawn in terminal mode.
    last_percent: Option<u8>,
}

/// What to show now.
#[derive(Debug, PartialEq)]
pub(super) enum Draw {
    /// The terminal bar, to redraw over the current line.
    Bar(String),
    /// A CI log line (without its newline).
    Line(String),
}

impl Upload {
    /// An upload of `total` bytes called `label` (already redacted),
    /// started at `now`.
    pub(super) fn new(label: String, total: u64, now: Instant) -> Self {
        Upload {
            label,
            total,
            started: now,
            done: 0,
            last_line: None,
            last_percent: None,
        }
    }

    /// Takes `done_bytes` (capped at the total; a retried part can report
    /// less than before, so the high mark stays) and answers what to show
    /// at `now`, if anything: with `redraw` the bar when the whole percent
    /// changed, else a line when one is due, even if nothing moved, so a
    /// stalled upload is seen to stall.
    pub(super) fn advance(&mut self, done_bytes: u64, now: Instant, redraw: bool) -> Option<Draw> {
        self.done = self.done.max(done_bytes.min(self.total));
        let percent = percent_done(self.done, self.total);
        let pace = pace(self, now);
        if redraw {
            if self.last_percent == Some(percent) {
                return None;
            }
            self.last_percent = Some(percent);
            let bar = progress_bar(&self.label, self.done, self.total);
            return Some(Draw::Bar(format!("{bar}{pace}")));
        }
        let every = Duration::from_secs(UPLOAD_LINE_EVERY_SECS);
        if self
            .last_line
            .is_some_and(|last| now.saturating_duration_since(last) < every)
        {
            return None;
        }
        self.last_line = Some(now);
        let line = progress_line(&self.label, percent, self.done, self.total);
        Some(Draw::Line(format!("{line}{pace}")))
    }
}

/// Whole percent of `done` out of `total`, clamped to 0..=100; an empty
/// upload is complete.
fn percent_done(done: u64, total: u64) -> u8 {
    if total == 0 {
        return 100;
    }
    let percent = u128::from(done.min(total)) * 100 / u128::from(total);
    u8::try_from(percent).unwrap_or(100)
}

/// `, 4.0 MiB/s, about 5.0s left` once the upload has run a second and
/// moved; empty before, when there is nothing to measure yet.
fn pace(upload: &Upload, now: Instant) -> String {
    let secs = now.saturating_duration_since(upload.started).as_secs_f64();
    if secs < 1.0 || upload.done == 0 {
        return String::new();
    }
    let rate = upload.done as f64 / secs;
    let left = (upload.total - upload.done) as f64 / rate;
    let left = Duration::try_from_secs_f64(left).unwrap_or(Duration::MAX);
    format!(
        ", {}/s, about {} left",
        format_bytes(rate as u64),
        human_duration(left)
    )
}

/// `Uploading model: 40% (12.0 MiB of 30.0 MiB)`.
fn progress_line(label: &str, percent: u8, done: u64, total: u64) -> String {
    format!(
        "{label}: {percent}% ({} of {})",
        format_bytes(done.min(total)),
        format_bytes(total)
    )
}

/// `Uploading model [########------------]  40% 12.0 MiB/30.0 MiB`.
fn progress_bar(label: &str, done: u64, total: u64) -> String {
    const WIDTH: usize = 20;
    let percent = percent_done(done, total);
    let filled = usize::from(percent) * WIDTH / 100;
    format!(
        "{label} [{}{}] {percent:>3}% {}/{}",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        format_bytes(done.min(total)),
        format_bytes(total)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CI lines an upload shows for `(bytes, seconds)` steps.
    fn lines(label: &str, total: u64, steps: &[(u64, u64)]) -> Vec<String> {
        let t0 = Instant::now();
        let mut upload = Upload::new(label.into(), total, t0);
        let mut shown: Vec<Option<Draw>> = vec![upload.advance(0, t0, false)];
        for &(done, secs) in steps {
            shown.push(upload.advance(done, t0 + Duration::from_secs(secs), false));
        }
        shown
            .into_iter()
            .flatten()
            .map(|d| match d {
                Draw::Line(l) => l,
                Draw::Bar(b) => panic!("a bar in CI mode: {b}"),
            })
            .collect()
    }

    #[test]
    fn ci_progress_prints_a_line_every_5_seconds_with_rate_and_time_left() {
        assert_eq!(
            lines(
                "Uploading model",
                1000,
                &[(100, 1), (500, 5), (600, 6), (700, 10)]
            ),
            [
                "Uploading model: 0% (0 B of 1000 B)",
                "Uploading model: 50% (500 B of 1000 B), 100 B/s, about 5.0s left",
                "Uploading model: 70% (700 B of 1000 B), 70 B/s, about 4.3s left",
            ]
        );
    }

    #[test]
    fn ci_progress_keeps_its_high_mark_when_a_part_is_retried() {
        // Going back at 10 s: a retried part.
        let mib = 1024 * 1024;
        assert_eq!(
            lines("up", 3 * mib, &[(2 * mib, 5), (mib, 10)]),
            [
                "up: 0% (0 B of 3.0 MiB)",
                "up: 66% (2.0 MiB of 3.0 MiB), 409.6 KiB/s, about 2.5s left",
                "up: 66% (2.0 MiB of 3.0 MiB), 204.8 KiB/s, about 5.0s left",
            ]
        );
    }

    #[test]
    fn a_terminal_bar_is_drawn_once_per_whole_percent() {
        let t0 = Instant::now();
        let mut upload = Upload::new("up".into(), 200, t0);
        let bars: Vec<Draw> = (0..=200)
            .filter_map(|done| upload.advance(done, t0, true))
            .collect();
        assert_eq!(bars.len(), 101);
        assert_eq!(
            bars.last(),
            Some(&Draw::Bar(
                "up [####################] 100% 200 B/200 B".into()
            ))
        );
    }

    #[test]
    fn progress_helpers() {
        for (done, total, want) in [
            (0, 0, 100),
            (0, 10, 0),
            (5, 10, 50),
            (9, 10, 90),
            (20, 10, 100),
        ] {
            assert_eq!(percent_done(done, total), want, "{done}/{total}");
        }
        assert_eq!(percent_done(u64::MAX - 1, u64::MAX), 99);
    }
}
