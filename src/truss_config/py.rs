//! Python's text forms of YAML values, for the places truss calls `str()`
//! (environment variable values) and the numbers Python parses.

use super::yaml11::Node;

/// `str(x)` in Python.
pub(crate) fn str_of(n: &Node) -> String {
    match n {
        Node::Str(s) => s.clone(),
        Node::Time { py, .. } => py.clone(),
        other => repr(other),
    }
}

/// `repr(x)` in Python (timestamps inside containers are approximated by
/// their `str()`).
pub(crate) fn repr(n: &Node) -> String {
    match n {
        Node::Null => "None".into(),
        Node::Bool(true) => "True".into(),
        Node::Bool(false) => "False".into(),
        Node::Int(i) => i.to_string(),
        Node::Float(f) => float_repr(*f),
        Node::Str(s) => str_repr(s),
        Node::Time { py, .. } => py.clone(),
        Node::Seq(items) => {
            let parts: Vec<String> = items.iter().map(repr).collect();
            format!("[{}]", parts.join(", "))
        }
        Node::Map(entries) => {
            let parts: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}: {}", repr(k), repr(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

/// `repr(float)`: the shortest digits that round-trip, fixed notation for
/// exponents from -4 to 15, else `1.5e+16`.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp >= 0 {
            let int_len = exp + 1;
            if n <= int_len {
                format!("{digits}{}.0", "0".repeat((int_len - n) as usize))
            } else {
                format!(
                    "{}.{}",
                    &digits[..int_len as usize],
                    &digits[int_len as usize..]
                )
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() == 1 {
            digits.clone()
        } else {
            format!("{}.{}", &digits[..1], &digits[1..])
        };
        let es = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{es}{:02}", exp.abs())
    }
}

fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `float(s)`: surrounding whitespace, `_` between digits,
/// `inf`/`infinity`/`nan` in any case.
pub(crate) fn parse_float(s: &str) -> Option<f64> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (neg, body) = match lower.as_bytes().first() {
        Some(b'-') => (true, &lower[1..]),
        Some(b'+') => (false, &lower[1..]),
        _ => (false, lower.as_str()),
    };
    let sign = if neg { -1.0 } else { 1.0 };
    match body {
        "inf" | "infinity" => return Some(sign * f64::INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if !underscores_ok(body) {
        return None;
    }
    let clean: String = body.chars().filter(|&c| c != '_').collect();
    if clean.is_empty()
        || !clean
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'+' | b'-'))
        || !clean.bytes().any(|b| b.is_ascii_digit())
    {
        return None;
    }
    clean.parse::<f64>().ok().map(|v| sign * v)
}

/// Python's `int(s)` as pydantic applies it to a string: whitespace,
/// a sign, `_` between digits, and an optional `.0…` tail.
pub(crate) fn parse_int(s: &str) -> Option<i128> {
    let t = s.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let body = match body.split_once('.') {
        Some((int, zeros)) if !zeros.is_empty() && zeros.bytes().all(|b| b == b'0') => int,
        Some(_) => return None,
        None => body,
    };
    if body.is_empty()
        || !body.bytes().all(|b| b.is_ascii_digit() || b == b'_')
        || !underscores_ok(body)
    {
        return None;
    }
    let clean: String = body.chars().filter(|&c| c != '_').collect();
    let v: i128 = clean.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// An underscore only between two digits, as Python's number syntax wants.
fn underscores_ok(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().all(|(i, &c)| {
        c != b'_'
            || (i > 0 && i + 1 < b.len() && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        for (f, want) in [
            (1500.0, "1500.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (685230.15, "685230.15"),
            (-2.5, "-2.5"),
            (3.0, "3.0"),
            (123456789012345.6, "123456789012345.6"),
        ] {
            assert_eq!(float_repr(f), want);
        }
    }

    #[test]
    fn containers_print_like_python() {
        let n = Node::Seq(vec![
            Node::Int(1),
            Node::Str("a".into()),
            Node::Str("it's".into()),
            Node::Null,
        ]);
        assert_eq!(str_of(&n), "[1, 'a', \"it's\", None]");
    }

    #[test]
    fn numbers_parse_like_python() {
        assert_eq!(parse_int(" 3 "), Some(3));
        assert_eq!(parse_int("3_0"), Some(30));
        assert_eq!(parse_int("3.00"), Some(3));
        assert_eq!(parse_int("3.5"), None);
        assert_eq!(parse_int("1e3"), None);
        assert_eq!(parse_int("0x1f"), None);
        assert_eq!(parse_float("1e3"), Some(1000.0));
        assert_eq!(parse_float(" 2.5 "), Some(2.5));
        assert!(parse_float("nan").unwrap().is_nan());
        assert_eq!(parse_float("abc"), None);
        assert_eq!(parse_float("1__0"), None);
    }
}
