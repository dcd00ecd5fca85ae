//! The typing of plain scalars by PyYAML's YAML 1.1 implicit resolvers:
//! null, booleans (`yes`, `off`), integers (`010` octal, `0x`, `0b`, `1:30`
//! sexagesimal, `_` separators), floats (`1e3`, `.inf`, `6.8523015e+5`) and
//! timestamps, each constructed as PyYAML's safe loader constructs it.

use super::Node;

/// The type PyYAML's implicit resolvers give a plain scalar.
pub(crate) fn resolve_plain(s: &str) -> Result<Node, String> {
    if matches!(s, "" | "~" | "null" | "Null" | "NULL") {
        return Ok(Node::Null);
    }
    match s {
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(Node::Bool(true));
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(Node::Bool(false));
        }
        "=" => {
            return Err(
                "config.yaml: a plain `=` is YAML 1.1's value tag, which truss cannot read; quote it"
                    .into(),
            );
        }
        _ => {}
    }
    if is_float(s) {
        return Ok(Node::Float(construct_float(s)));
    }
    if is_int(s) {
        return construct_int(s).map(Node::Int);
    }
    if let Some(t) = timestamp(s)? {
        return Ok(t);
    }
    Ok(Node::Str(s.to_string()))
}

fn split_sign(s: &str) -> (bool, &str) {
    match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    }
}

fn all(s: &str, f: impl Fn(u8) -> bool) -> bool {
    s.bytes().all(f)
}

/// `[0-9][0-9_]*` followed by one or more `:[0-5]?[0-9]` groups.
fn sexagesimal(s: &str, first_nonzero: bool) -> bool {
    let mut parts = s.split(':');
    let head = parts.next().unwrap_or("");
    let head_ok = !head.is_empty()
        && head.as_bytes()[0].is_ascii_digit()
        && (!first_nonzero || head.as_bytes()[0] != b'0')
        && all(head, |b| b.is_ascii_digit() || b == b'_');
    let mut n = 0;
    for p in parts {
        n += 1;
        let b = p.as_bytes();
        let ok = match b.len() {
            1 => b[0].is_ascii_digit(),
            2 => (b'0'..=b'5').contains(&b[0]) && b[1].is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    head_ok && n > 0
}

fn exponent_ok(e: &str) -> bool {
    // `[eE][-+][0-9]+`: the sign is required in YAML 1.1.
    let b = e.as_bytes();
    b.len() >= 3
        && matches!(b[0], b'e' | b'E')
        && matches!(b[1], b'-' | b'+')
        && all(&e[2..], |c| c.is_ascii_digit())
}

fn is_float(s: &str) -> bool {
    let (_, body) = split_sign(s);
    if matches!(body, ".inf" | ".Inf" | ".INF") {
        return true;
    }
    if matches!(s, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    // `\.[0-9_]+(exp)?` takes no sign.
    if let Some(rest) = s.strip_prefix('.') {
        let (frac, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        return !frac.is_empty()
            && all(frac, |b| b.is_ascii_digit() || b == b'_')
            && (exp.is_empty() || exponent_ok(exp));
    }
    let Some(dot) = body.find('.') else {
        return false;
    };
    let (int, rest) = (&body[..dot], &body[dot + 1..]);
    if int.contains(':') {
        return sexagesimal(int, false) && all(rest, |b| b.is_ascii_digit() || b == b'_');
    }
    let (frac, exp) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    !int.is_empty()
        && int.as_bytes()[0].is_ascii_digit()
        && all(int, |b| b.is_ascii_digit() || b == b'_')
        && all(frac, |b| b.is_ascii_digit() || b == b'_')
        && (exp.is_empty() || exponent_ok(exp))
}

fn construct_float(s: &str) -> f64 {
    let clean: String = s.chars().filter(|&c| c != '_').collect::<String>();
    let lower = clean.to_ascii_lowercase();
    let (neg, body) = split_sign(&lower);
    let sign = if neg { -1.0 } else { 1.0 };
    if body == ".inf" {
        return sign * f64::INFINITY;
    }
    if body == ".nan" {
        return f64::NAN;
    }
    if body.contains(':') {
        let mut value = 0.0;
        for part in body.split(':') {
            value = value * 60.0 + part.parse::<f64>().unwrap_or(0.0);
        }
        return sign * value;
    }
    sign * body.parse::<f64>().unwrap_or(f64::NAN)
}

fn is_int(s: &str) -> bool {
    let (_, body) = split_sign(s);
    if let Some(b) = body.strip_prefix("0b") {
        return !b.is_empty() && all(b, |c| matches!(c, b'0' | b'1' | b'_'));
    }
    if let Some(x) = body.strip_prefix("0x") {
        return !x.is_empty() && all(x, |c| c.is_ascii_hexdigit() || c == b'_');
    }
    if body.contains(':') {
        return sexagesimal(body, true);
    }
    if body == "0" {
        return true;
    }
    if let Some(o) = body.strip_prefix('0') {
        return !o.is_empty() && all(o, |c| matches!(c, b'0'..=b'7' | b'_'));
    }
    !body.is_empty()
        && matches!(body.as_bytes()[0], b'1'..=b'9')
        && all(body, |c| c.is_ascii_digit() || c == b'_')
}

fn construct_int(s: &str) -> Result<i128, String> {
    let clean: String = s.chars().filter(|&c| c != '_').collect();
    let (neg, body) = split_sign(&clean);
    let too_big = || format!("config.yaml: the integer {s} is too large");
    let value = if body == "0" {
        0
    } else if let Some(b) = body.strip_prefix("0b") {
        i128::from_str_radix(b, 2).map_err(|_| too_big())?
    } else if let Some(x) = body.strip_prefix("0x") {
        i128::from_str_radix(x, 16).map_err(|_| too_big())?
    } else if let Some(o) = body.strip_prefix('0') {
        i128::from_str_radix(o, 8).map_err(|_| too_big())?
    } else if body.contains(':') {
        let mut v: i128 = 0;
        for part in body.split(':') {
            let p: i128 = part.parse().map_err(|_| too_big())?;
            v = v
                .checked_mul(60)
                .and_then(|v| v.checked_add(p))
                .ok_or_else(too_big)?;
        }
        v
    } else {
        body.parse::<i128>().map_err(|_| too_big())?
    };
    Ok(if neg { -value } else { value })
}

/// PyYAML's timestamp: `YYYY-MM-DD` is a date; with a time it is a datetime.
fn timestamp(s: &str) -> Result<Option<Node>, String> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|x| x.iter().all(u8::is_ascii_digit))
    };
    // The date-only form has exactly 4-2-2 digits.
    if b.len() == 10
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
    {
        let (y, m, d) = (num(&s[0..4]), num(&s[5..7]), num(&s[8..10]));
        check_date(s, y, m, d)?;
        let text = format!("{y:04}-{m:02}-{d:02}");
        return Ok(Some(Node::Time {
            py: text.clone(),
            json: text,
        }));
    }
    let Some(t) = parse_datetime(s) else {
        return Ok(None);
    };
    check_date(s, t.y, t.mo, t.d)?;
    if t.h > 23 || t.mi > 59 || t.s > 59 {
        return Err(format!("config.yaml: {s} is not a valid timestamp"));
    }
    let date = format!("{:04}-{:02}-{:02}", t.y, t.mo, t.d);
    let mut clock = format!("{:02}:{:02}:{:02}", t.h, t.mi, t.s);
    if t.micros != 0 {
        clock.push_str(&format!(".{:06}", t.micros));
    }
    let (py_tz, json_tz) = match t.tz_minutes {
        None => (String::new(), String::new()),
        Some(0) => ("+00:00".to_string(), "Z".to_string()),
        Some(m) => {
            let sign = if m < 0 { '-' } else { '+' };
            let a = m.abs();
            let z = format!("{sign}{:02}:{:02}", a / 60, a % 60);
            (z.clone(), z)
        }
    };
    Ok(Some(Node::Time {
        py: format!("{date} {clock}{py_tz}"),
        json: format!("{date}T{clock}{json_tz}"),
    }))
}

fn num(s: &str) -> u32 {
    s.parse().unwrap_or(0)
}

fn check_date(s: &str, y: u32, m: u32, d: u32) -> Result<(), String> {
    let leap = (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    if y == 0 || d == 0 || d > days {
        return Err(format!(
            "config.yaml: {s} reads as a date in YAML 1.1 but is not a valid one; quote it to keep it a string"
        ));
    }
    Ok(())
}

struct DateTime {
    y: u32,
    mo: u32,
    d: u32,
    h: u32,
    mi: u32,
    s: u32,
    micros: u32,
    tz_minutes: Option<i32>,
}

/// `YYYY-M?M-D?D(T|t|[ \t]+)H?H:MM:SS(.frac)?([ \t]*(Z|[-+]H?H(:MM)?))?`
fn parse_datetime(s: &str) -> Option<DateTime> {
    let mut p = Cursor {
        s: s.as_bytes(),
        i: 0,
    };
    let y = p.digits(4, 4)?;
    p.eat(b'-')?;
    let mo = p.digits(1, 2)?;
    p.eat(b'-')?;
    let d = p.digits(1, 2)?;
    if p.peek() == Some(b'T') || p.peek() == Some(b't') {
        p.i += 1;
    } else {
        let start = p.i;
        while matches!(p.peek(), Some(b' ' | b'\t')) {
            p.i += 1;
        }
        if p.i == start {
            return None;
        }
    }
    let h = p.digits(1, 2)?;
    p.eat(b':')?;
    let mi = p.digits(2, 2)?;
    p.eat(b':')?;
    let sec = p.digits(2, 2)?;
    let mut micros = 0;
    if p.peek() == Some(b'.') {
        p.i += 1;
        let start = p.i;
        while p.peek().is_some_and(|c| c.is_ascii_digit()) {
            p.i += 1;
        }
        let frac = &s[start..p.i];
        let mut six: String = frac.chars().take(6).collect();
        while six.len() < 6 {
            six.push('0');
        }
        micros = six.parse().ok()?;
    }
    while matches!(p.peek(), Some(b' ' | b'\t')) {
        p.i += 1;
    }
    let tz_minutes = match p.peek() {
        None => None,
        Some(b'Z') => {
            p.i += 1;
            Some(0)
        }
        Some(c @ (b'-' | b'+')) => {
            p.i += 1;
            let th = p.digits(1, 2)? as i32;
            let tm = if p.peek() == Some(b':') {
                p.i += 1;
                p.digits(2, 2)? as i32
            } else {
                0
            };
            let m = th * 60 + tm;
            Some(if c == b'-' { -m } else { m })
        }
        Some(_) => return None,
    };
    if p.i != s.len() {
        return None;
    }
    // A zone needs the separator to have been real whitespace or nothing.
    Some(DateTime {
        y,
        mo,
        d,
        h,
        mi,
        s: sec,
        micros,
        tz_minutes,
    })
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek() == Some(c)).then(|| self.i += 1)
    }
    fn digits(&mut self, min: usize, max: usize) -> Option<u32> {
        let start = self.i;
        while self.i - start < max && self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if self.i - start < min {
            return None;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .parse()
            .ok()
    }
}
