//! The string formats truss checks inside its validators: weights URIs,
//! CPU and memory quantities, PEP 440 versions, host names and networks,
//! BDN sources and mount paths, build secret names.

use super::py;

/// Weights sources name one of the supported URI schemes.
pub(super) fn weights_source(v: &str) -> Result<(), String> {
    const CLOUD: [&str; 5] = ["azure://", "cw://", "gs://", "r2://", "s3://"];
    const ALL: &str = "azure://, cw://, gs://, hf://, https://, r2://, s3://";
    let Some((scheme, _)) = v.split_once("://") else {
        return Err(format!(
            "source '{v}' is missing a URI scheme; supported schemes: {ALL}"
        ));
    };
    let scheme = format!("{scheme}://");
    let rest = &v[scheme.len()..];
    if CLOUD.contains(&scheme.as_str()) {
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!("invalid URI '{v}': expected {scheme}bucket/path"));
        }
        if rest.contains('@') {
            return Err(format!(
                "the @ revision syntax is only valid for hf:// sources, not in '{v}'"
            ));
        }
    } else if scheme == "https://" || scheme == "hf://" {
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!(
                "invalid URI '{v}': expected {scheme}host-or-owner/path"
            ));
        }
    } else {
        return Err(format!(
            "unsupported source scheme '{scheme}'; supported schemes: {ALL}"
        ));
    }
    Ok(())
}

pub(super) fn milli_cpu(s: &str) -> bool {
    s.strip_suffix('m')
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

pub(super) fn memory(s: &str) -> Result<(), String> {
    if py::parse_float(s).is_some() {
        return Ok(());
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let unit = &s[split..];
    if !unit.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(format!(
            "invalid memory specification {s}: use e.g. \"2Gi\" or \"512Mi\""
        ));
    }
    const UNITS: [&str; 12] = [
        "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    if !UNITS.contains(&unit) {
        return Err(format!(
            "invalid memory unit {unit} in {s}: use one of {}",
            UNITS.join(", ")
        ));
    }
    Ok(())
}

/// PEP 440, as `packaging.version.Version` parses it.
pub(super) fn pep440(s: &str) -> bool {
    let t = s.trim().to_ascii_lowercase();
    let b = t.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    let sep = |i: &mut usize| {
        if *i < b.len() && matches!(b[*i], b'-' | b'_' | b'.') {
            *i += 1;
        }
    };
    let word = |i: &mut usize, words: &[&str]| {
        for w in words {
            if t[*i..].starts_with(w) {
                *i += w.len();
                return true;
            }
        }
        false
    };
    if i < b.len() && b[i] == b'v' {
        i += 1;
    }
    let save = i;
    if digits(&mut i) && i < b.len() && b[i] == b'!' {
        i += 1;
    } else {
        i = save;
    }
    if !digits(&mut i) {
        return false;
    }
    while i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
        i += 1;
        digits(&mut i);
    }
    // Each optional part may start with a separator; roll back if the
    // keyword does not follow it. Its number may follow a separator too.
    let tagged = |i: &mut usize, words: &[&str]| {
        let save = *i;
        sep(i);
        if !word(i, words) {
            *i = save;
            return;
        }
        let before_number = *i;
        sep(i);
        if !digits(i) {
            *i = before_number;
        }
    };
    tagged(
        &mut i,
        &["alpha", "beta", "preview", "pre", "rc", "a", "b", "c"],
    );
    // A post-release is `-N` or a tagged `post`/`rev`/`r`.
    let save = i;
    i += 1;
    if !(b.get(save) == Some(&b'-') && digits(&mut i)) {
        i = save;
        tagged(&mut i, &["post", "rev", "r"]);
    }
    tagged(&mut i, &["dev"]);
    if i < b.len() && b[i] == b'+' {
        i += 1;
        let segs: Vec<&str> = t[i..].split(['-', '_', '.']).collect();
        if segs
            .iter()
            .any(|s| s.is_empty() || !s.bytes().all(|c| c.is_ascii_alphanumeric()))
        {
            return false;
        }
        i = b.len();
    }
    i == b.len()
}

/// Python's `re.match(...$)` also matches before one final newline.
pub(super) fn without_final_newline(s: &str) -> &str {
    s.strip_suffix('\n').unwrap_or(s)
}

pub(super) fn fqdn(s: &str) -> bool {
    without_final_newline(s).split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'*' | b'-'))
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    })
}

pub(super) fn ipv4(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut v: u32 = 0;
    for p in parts {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if p.len() > 1 && p.starts_with('0') {
            return None;
        }
        let n: u32 = p.parse().ok()?;
        if n > 255 {
            return None;
        }
        v = (v << 8) | n;
    }
    Some(v)
}

/// `ipaddress.ip_network(value, strict=False)`, IPv4 only.
pub(super) fn ipv4_network(s: &str) -> Result<(), String> {
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    if ipv4(addr).is_none() {
        return Err(if addr.contains(':') {
            "IPv6 is not supported".into()
        } else {
            "not an IPv4 address".into()
        });
    }
    let Some(p) = prefix else { return Ok(()) };
    if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
        return match p.parse::<u32>() {
            Ok(n) if n <= 32 => Ok(()),
            _ => Err("invalid prefix length".into()),
        };
    }
    match ipv4(p) {
        Some(m) if m.leading_ones() + m.trailing_zeros() == 32 => Ok(()),
        Some(m) if m.leading_zeros() + m.trailing_ones() == 32 => Ok(()),
        _ => Err("invalid netmask".into()),
    }
}

pub(super) fn bdn_identifier(kind: &str, v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err(format!("BDN {kind} must not be empty"));
    }
    if v.chars().count() > 256 {
        return Err(format!("BDN {kind} must be at most 256 characters"));
    }
    if v.contains('/') || v.contains("..") || v.contains('\0') {
        return Err(format!("invalid BDN {kind}: {v:?}"));
    }
    Ok(())
}

/// `bdn:namespace/volume[:tag|@digest]`.
pub(super) fn bdn_source(v: &str) -> Result<(), String> {
    let Some(rest) = v.strip_prefix("bdn:") else {
        return Err(format!("volume source must use the bdn: scheme, got: {v}"));
    };
    let bad =
        || format!("invalid BDN volume source: '{v}': expected bdn:namespace/volume[:tag|@digest]");
    let plain = |s: &str| !s.is_empty() && !s.contains(['/', ':', '@', '\0']);
    let (ns, rest) = rest.split_once('/').ok_or_else(bad)?;
    let end = rest.find([':', '@']).unwrap_or(rest.len());
    let (volume, tail) = rest.split_at(end);
    if !plain(ns) || !plain(volume) {
        return Err(bad());
    }
    bdn_identifier("namespace", ns)?;
    bdn_identifier("volume", volume)?;
    if let Some(tag) = tail.strip_prefix(':') {
        if !plain(tag) {
            return Err(bad());
        }
        bdn_identifier("tag", tag)?;
    } else if let Some(d) = tail.strip_prefix('@') {
        let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
        let digest = match d.strip_prefix("b3:") {
            Some(x) if hex(x) => x,
            _ if hex(d) => d,
            _ => return Err(bad()),
        };
        if !(12..=64).contains(&digest.len()) {
            return Err("BDN digest must contain between 12 and 64 hexadecimal characters".into());
        }
    }
    Ok(())
}

/// The mount path as `str(PurePosixPath(value))`, refused when relative,
/// the root, or climbing.
pub(super) fn bdn_mount_path(v: &str) -> Result<String, String> {
    if v.contains('\0') {
        return Err("volume mount must not contain null bytes".into());
    }
    if !v.starts_with('/') {
        return Err(format!(
            "volume mount must be an absolute path (start with /), got: {v}"
        ));
    }
    // POSIX keeps exactly two leading slashes; more collapse to one.
    let root = if v.starts_with("//") && !v.starts_with("///") {
        "//"
    } else {
        "/"
    };
    let parts: Vec<&str> = v
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() && root == "/" {
        return Err("volume mount must not be the filesystem root".into());
    }
    if parts.contains(&"..") {
        return Err(format!(
            "volume mount must not contain parent traversal: {v}"
        ));
    }
    Ok(format!("{root}{}", parts.join("/")))
}

pub(super) fn bdn_filter(p: &str) -> Result<(), String> {
    let bad = p.is_empty()
        || p != p.trim()
        || p.starts_with('/')
        || p.contains('\\')
        || p.contains('\0')
        || p.strip_suffix('/')
            .unwrap_or(p)
            .split('/')
            .any(|s| matches!(s, "" | "." | ".."));
    if bad {
        return Err(format!(
            "mount filter {p:?} must be a non-empty relative glob without dot segments, backslashes, or null bytes"
        ));
    }
    Ok(())
}

pub(super) fn build_secret_name(n: &str, prefix: &str) -> Result<(), String> {
    if n.is_empty() {
        return Err(format!(
            "build.secret_to_path_mapping: invalid secret name `{n}`"
        ));
    }
    if n.chars().count() > 253 {
        return Err(format!(
            "build.secret_to_path_mapping: secret name `{n}` must be shorter than 253"
        ));
    }
    if n == "." || n == ".." {
        return Err(format!(
            "build.secret_to_path_mapping: secret name cannot be `{n}`"
        ));
    }
    let body = without_final_newline(n);
    let k8s = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !k8s && !n.starts_with(prefix) {
        return Err(format!(
            "build.secret_to_path_mapping: secret name `{n}` must follow Kubernetes naming (letters, digits, '-', '.', '_')"
        ));
    }
    Ok(())
}

/// The key patterns of `dict` fields, each ported by hand (the pattern text
/// is what the schema carries; a unit test checks every one is known).
pub(super) fn matches_key_pattern(pattern: &str, key: &str) -> bool {
    match pattern {
        // LoRA adapter names.
        r"^[a-zA-Z0-9_\-\.:]+$" => {
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c))
        }
        _ => false,
    }
}

#[cfg(test)]
pub(super) const KEY_PATTERNS: &[&str] = &[r"^[a-zA-Z0-9_\-\.:]+$"];

/// A Hugging Face repo id as `huggingface_hub.utils.validate_repo_id`
/// accepts it: `name` or `namespace/name`, each 1 to 96 of ASCII letters,
/// digits, `-`, `_` and `.`, starting and ending with a letter, digit or
/// `_`, with no `--` or `..`, not ending in `.git`.
pub(super) fn hf_repo_id(id: &str) -> Result<(), String> {
    let parts: Vec<&str> = id.split('/').collect();
    if parts.len() > 2 {
        return Err(format!(
            "repo id must be 'repo_name' or 'namespace/repo_name', got '{id}'"
        ));
    }
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let part_ok = |p: &str| {
        (1..=96).contains(&p.len())
            && p.chars().all(|c| word(c) || c == '-' || c == '.')
            && p.starts_with(word)
            && p.ends_with(word)
    };
    if !parts.iter().all(|p| part_ok(p)) {
        return Err(format!(
            "repo id must use letters, digits, '-', '_' or '.', not start or end with '-' or '.', and be at most 96 characters: '{id}'"
        ));
    }
    if id.contains("--") || id.contains("..") {
        return Err(format!("repo id cannot contain -- or ..: '{id}'"));
    }
    if id.ends_with(".git") {
        return Err(format!("repo id cannot end with '.git': '{id}'"));
    }
    Ok(())
}
