//! Durations, byte sizes and UTC times as people read them in logs,
//! outputs and the step summary: the one place these are spelled.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `12.3` for a known time (like Python's `f"{x:.1f}"`), empty otherwise.
pub(crate) fn format_deploy_time(seconds: Option<f64>) -> String {
    match seconds {
        Some(s) if s.is_finite() => format!("{s:.1}"),
        _ => String::new(),
    }
}

/// `2023-11-14 22:13:20` (UTC, whole seconds); times before 1970 show the epoch.
pub(crate) fn format_utc(at: SystemTime) -> String {
    let secs = at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01, by counting
/// 400-year eras (146097 days) and a March-based year so the leap day is last.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468; // days from 0000-03-01 to 1970-01-01
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// `12.9s` under a minute, `10m18s` under an hour, `1h02m03s` beyond, for
/// the summary's history table. Tenths are truncated and longer times cut
/// to whole seconds, so an elapsed time never reads later than it was.
pub(crate) fn format_elapsed(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    if secs < 60 {
        // Tenths, truncated, so 59.99 s never renders as "60.0s".
        let tenths = elapsed.as_millis() / 100;
        format!("{}.{}s", tenths / 10, tenths % 10)
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m{:02}s", secs / 3600, secs % 3600 / 60, secs % 60)
    }
}

/// `12.9s` under a minute, `10m31s` under an hour, `3h00m05s` beyond, for
/// log lines. Unlike [`format_elapsed`] it rounds (59.96 s reads `60.0s`,
/// 90.6 s reads `1m31s`), which is how the deploy log has always spelled
/// timeouts and waits.
pub(crate) fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        let total = s.round() as u64;
        let (h, m, sec) = (total / 3600, (total % 3600) / 60, total % 60);
        if h > 0 {
            format!("{h}h{m:02}m{sec:02}s")
        } else {
            format!("{m}m{sec:02}s")
        }
    }
}

/// Binary units with one decimal: `512 B`, `1.5 KiB`, `12.0 MiB`.
pub(crate) fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn deploy_time_has_one_decimal_or_is_empty() {
        let cases = [
            (Some(42.46), "42.5"),
            (Some(0.0), "0.0"),
            (Some(12.25), "12.2"),
            (Some(600.0), "600.0"),
            (None, ""),
            (Some(f64::NAN), ""),
        ];
        for (input, want) in cases {
            assert_eq!(format_deploy_time(input), want, "{input:?}");
        }
    }

    #[test]
    fn utc_and_elapsed_formatting() {
        let times = [
            (0, "1970-01-01 00:00:00"),
            (1_700_000_000, "2023-11-14 22:13:20"),
            (1_709_164_800, "2024-02-29 00:00:00"),
            (951_782_400, "2000-02-29 00:00:00"),
            (1_709_251_199, "2024-02-29 23:59:59"),
            (4_107_542_400, "2100-03-01 00:00:00"),
        ];
        for (secs, want) in times {
            assert_eq!(format_utc(at(secs)), want, "{secs}");
        }
        let elapsed = [
            (Duration::ZERO, "0.0s"),
            (Duration::from_millis(12_949), "12.9s"),
            (Duration::from_millis(59_999), "59.9s"),
            (Duration::from_secs(60), "1m00s"),
            (Duration::from_secs(618), "10m18s"),
            (Duration::from_secs(3723), "1h02m03s"),
        ];
        for (d, want) in elapsed {
            assert_eq!(format_elapsed(d), want, "{d:?}");
        }
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(Duration::from_millis(12_900)), "12.9s");
        assert_eq!(human_duration(Duration::from_secs(631)), "10m31s");
        assert_eq!(
            human_duration(Duration::from_secs(3 * 3600 + 5)),
            "3h00m05s"
        );
        // Rounds where the history's elapsed column truncates.
        assert_eq!(human_duration(Duration::from_millis(59_960)), "60.0s");
        assert_eq!(format_elapsed(Duration::from_millis(59_960)), "59.9s");
        assert_eq!(human_duration(Duration::from_millis(90_600)), "1m31s");
        assert_eq!(format_elapsed(Duration::from_millis(90_600)), "1m30s");
    }

    #[test]
    fn byte_sizes_in_binary_units() {
        for (bytes, want) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1536, "1.5 KiB"),
            (30 * 1024 * 1024, "30.0 MiB"),
            (5 * 1024 * 1024 * 1024, "5.0 GiB"),
        ] {
            assert_eq!(format_bytes(bytes), want);
        }
    }
}
