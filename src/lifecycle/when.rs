//! `created_at` as the platform writes it (ISO 8601 / RFC 3339:
//! `2026-12-01T10:00:00Z`, with or without fractions, `Z` or an offset)
//! read into seconds since the epoch, the one reading `prune`'s age rules
//! compare. Anything else is `None`: a deployment whose age cannot be told
//! is never retired by age.

/// Seconds since the epoch of an RFC 3339 date-time, or `None`.
pub(crate) fn epoch_seconds(text: &str) -> Option<i64> {
    let b = text.trim().as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let s = std::str::from_utf8(&b[from..to]).ok()?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        b"Z" | b"z" | b"" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let d = |c: &u8| c.is_ascii_digit().then(|| i64::from(c - b'0'));
            let (h, m) = (d(h1)? * 10 + d(h2)?, d(m1)? * 10 + d(m2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'+' { secs } else { -secs }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_the_platform_writes_them() {
        for (text, want) in [
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2026-12-01T10:00:00Z", Some(1_796_119_200)),
            ("2026-12-01T10:00:00.123456Z", Some(1_796_119_200)),
            ("2026-12-01T10:00:00+00:00", Some(1_796_119_200)),
            ("2026-12-01T12:30:00+02:30", Some(1_796_119_200)),
            ("2026-12-01T07:00:00-03:00", Some(1_796_119_200)),
            ("2026-12-01T10:00:00", Some(1_796_119_200)),
            ("2024-02-29T00:00:00Z", Some(1_709_164_800)),
            ("2023-02-29T00:00:00Z", None),
            ("2026-13-01T10:00:00Z", None),
            ("2026-12-01", None),
            ("2026-12-01T10:00:00.Z", None),
            ("2026-12-01T10:00:00+0200", None),
            ("2026-12-01T1a:00:00Z", None),
            ("+026-12-01T10:00:00Z", None),
            ("", None),
            ("yesterday", None),
        ] {
            assert_eq!(epoch_seconds(text), want, "{text}");
        }
    }
}
