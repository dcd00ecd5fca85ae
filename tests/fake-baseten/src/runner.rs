//! How CI runners read the files a step writes: GitHub's `$GITHUB_OUTPUT`
//! environment-file parser and GitLab's dotenv report upload, with the
//! errors each would report.
//!
//! truss-push's tests read its outputs through these, so a file the real
//! consumer would reject, or misread, fails a test instead of a user's job.

use std::fmt;

/// Why GitHub's runner would reject an environment file; messages are the
/// runner's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerFileError {
    EmptyNameOrDelimiter(String),
    DelimiterNotFound(String),
    EofMissingNewline,
    InvalidFormat(String),
}

impl fmt::Display for RunnerFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunnerFileError::EmptyNameOrDelimiter(line) => write!(
                f,
                "Invalid format '{line}'. Name must not be empty and delimiter must not be empty"
            ),
            RunnerFileError::DelimiterNotFound(delimiter) => write!(
                f,
                "Invalid value. Matching delimiter not found '{delimiter}'"
            ),
            RunnerFileError::EofMissingNewline => {
                f.write_str("Invalid value. EOF marker missing new line.")
            }
            RunnerFileError::InvalidFormat(line) => write!(f, "Invalid format '{line}'"),
        }
    }
}

impl std::error::Error for RunnerFileError {}

/// Reads the next line starting at `*index` (LF line ends, as the Linux and
/// macOS runners do; a CR stays in the line). Returns the line and whether
/// it ended with a newline.
fn read_line<'a>(text: &'a str, index: &mut usize) -> Option<(&'a str, bool)> {
    if *index >= text.len() {
        return None;
    }
    let start = *index;
    match text[start..].find('\n') {
        Some(offset) => {
            *index = start + offset + 1;
            Some((&text[start..start + offset], true))
        }
        None => {
            *index = text.len();
            Some((&text[start..], false))
        }
    }
}

/// Parses `$GITHUB_OUTPUT` (also `$GITHUB_ENV`/`$GITHUB_STATE`) exactly as
/// the runner does on Linux: empty lines skipped; `name=value` when the
/// first `=` comes before any `<<`; heredoc `name<<DELIM` when `<<` comes
/// first, the value running to the first line exactly equal to DELIM,
/// without the newline before it. Entries are returned in file order; for
/// duplicates the runner keeps the last.
pub fn parse_github_output(text: &str) -> Result<Vec<(String, String)>, RunnerFileError> {
    let mut entries = Vec::new();
    let mut index = 0;
    while let Some((line, _)) = read_line(text, &mut index) {
        if line.is_empty() {
            continue;
        }
        let equals = line.find('=');
        let heredoc = line.find("<<");
        match (equals, heredoc) {
            // The runner does not reject an empty name here (it checks the
            // wrong variable), so neither does this mirror.
            (Some(eq), h) if h.is_none_or(|h| eq < h) => {
                entries.push((line[..eq].to_owned(), line[eq + 1..].to_owned()));
            }
            (_, Some(h)) => {
                let (name, delimiter) = (&line[..h], &line[h + 2..]);
                if name.is_empty() || delimiter.is_empty() {
                    return Err(RunnerFileError::EmptyNameOrDelimiter(line.to_owned()));
                }
                let start = index;
                let mut end = index;
                loop {
                    match read_line(text, &mut index) {
                        None => {
                            return Err(RunnerFileError::DelimiterNotFound(delimiter.to_owned()));
                        }
                        Some((l, _)) if l == delimiter => break,
                        Some((_, false)) => return Err(RunnerFileError::EofMissingNewline),
                        Some((_, true)) => end = index - 1,
                    }
                }
                let value = if end > start { &text[start..end] } else { "" };
                entries.push((name.to_owned(), value.to_owned()));
            }
            _ => return Err(RunnerFileError::InvalidFormat(line.to_owned())),
        }
    }
    Ok(entries)
}

/// Why GitLab would reject a dotenv report; messages are GitLab's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DotenvError {
    TooBig,
    NotUtf8,
    InvalidFormat,
    TooManyVariables,
    BlankKey,
    InvalidKey,
}

impl fmt::Display for DotenvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DotenvError::TooBig => "Dotenv Artifact Too Big. Maximum Allowable Size: 5120",
            DotenvError::NotUtf8 => "dotenv file is not UTF-8",
            DotenvError::InvalidFormat => "Invalid Format",
            DotenvError::TooManyVariables => "Dotenv files cannot have more than 20 variables",
            DotenvError::BlankKey => "Validation failed: Key can't be blank",
            DotenvError::InvalidKey => {
                "Validation failed: Key can contain only letters, digits and '_'."
            }
        })
    }
}

impl std::error::Error for DotenvError {}

/// GitLab accepts a dotenv report only when it is *below* this many bytes.
pub const DOTENV_LIMIT_BYTES: usize = 5 * 1024;
/// GitLab's self-managed default limit on dotenv variables.
pub const DOTENV_MAX_VARS: usize = 20;

/// Ruby's `String#strip`: ASCII whitespace and NUL at both ends.
fn ruby_strip(s: &str) -> &str {
    s.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | '\0'))
}

/// Parses a dotenv report as GitLab's upload does: size below 5 KiB; every
/// line (blank ones included) must contain `=`; name and value are the text
/// around the first `=`, stripped; quotes and `#` are literal; at most 20
/// variables; names non-empty `[A-Za-z0-9_]+`.
pub fn parse_gitlab_dotenv(bytes: &[u8]) -> Result<Vec<(String, String)>, DotenvError> {
    if bytes.len() >= DOTENV_LIMIT_BYTES {
        return Err(DotenvError::TooBig);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| DotenvError::NotUtf8)?;
    let mut variables = Vec::new();
    for line in text.split_inclusive('\n') {
        let content = line.strip_suffix('\n').unwrap_or(line);
        let (key, value) = content.split_once('=').ok_or(DotenvError::InvalidFormat)?;
        variables.push((ruby_strip(key).to_owned(), ruby_strip(value).to_owned()));
    }
    if variables.len() > DOTENV_MAX_VARS {
        return Err(DotenvError::TooManyVariables);
    }
    for (key, _) in &variables {
        if key.is_empty() {
            return Err(DotenvError::BlankKey);
        }
        if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(DotenvError::InvalidKey);
        }
    }
    Ok(variables)
}

/// Reverses truss-push's single-line dotenv escaping (`\\`, `\n`, `\r`).
pub fn unescape_dotenv_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = Vec<(String, String)>;

    #[test]
    fn runner_parser_mirrors_the_runner_including_errors() {
        let ok = |pairs: &[(&str, &str)]| -> Result<Pairs, RunnerFileError> {
            Ok(pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect())
        };
        let cases: Vec<(&str, Result<Pairs, RunnerFileError>)> = vec![
            ("a=1\nb=2\n", ok(&[("a", "1"), ("b", "2")])),
            ("\n\na=1\n\n", ok(&[("a", "1")])),
            ("a=b=c<<d\n", ok(&[("a", "b=c<<d")])),
            ("a=\n", ok(&[("a", "")])),
            ("=x\n", ok(&[("", "x")])),
            ("a<<b=c\nv\nb=c\n", ok(&[("a", "v")])),
            ("a<<EOF\nEOF\n", ok(&[("a", "")])),
            ("a<<EOF\n\nEOF\n", ok(&[("a", "")])),
            ("a<<EOF\nx\n\nEOF\n", ok(&[("a", "x\n")])),
            ("a<<EOF\n EOF\nEOF\n", ok(&[("a", " EOF")])),
            ("a<<EOF\nx\nEOF", ok(&[("a", "x")])),
            ("a<<EOF\r\nx\r\nEOF\r\n", ok(&[("a", "x\r")])),
            ("a<<E\n1\nE\nb<<F\n2\nF\n", ok(&[("a", "1"), ("b", "2")])),
            ("a=1\na=2\n", ok(&[("a", "1"), ("a", "2")])),
            (
                "a<<\n",
                Err(RunnerFileError::EmptyNameOrDelimiter("a<<".into())),
            ),
            (
                "<<EOF\nx\nEOF\n",
                Err(RunnerFileError::EmptyNameOrDelimiter("<<EOF".into())),
            ),
            (
                "a<<EOF\nx\n",
                Err(RunnerFileError::DelimiterNotFound("EOF".into())),
            ),
            (
                "a<<EOF",
                Err(RunnerFileError::DelimiterNotFound("EOF".into())),
            ),
            ("a<<EOF\nx", Err(RunnerFileError::EofMissingNewline)),
            (
                "just text\n",
                Err(RunnerFileError::InvalidFormat("just text".into())),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_github_output(text), want, "{text:?}");
        }
        assert_eq!(
            RunnerFileError::DelimiterNotFound("EOF".into()).to_string(),
            "Invalid value. Matching delimiter not found 'EOF'"
        );
    }

    #[test]
    fn gitlab_parser_rejects_what_gitlab_rejects() {
        let cases: &[(&str, Result<Pairs, DotenvError>)] = &[
            ("KEY1=VAR1\n", Ok(vec![("KEY1".into(), "VAR1".into())])),
            ("KEY1 = V A R \n", Ok(vec![("KEY1".into(), "V A R".into())])),
            ("K=a=b\n", Ok(vec![("K".into(), "a=b".into())])),
            ("K=\"q\"\n", Ok(vec![("K".into(), "\"q\"".into())])),
            ("K=x # c\n", Ok(vec![("K".into(), "x # c".into())])),
            ("K=\n", Ok(vec![("K".into(), String::new())])),
            ("A=1\n\nB=2\n", Err(DotenvError::InvalidFormat)),
            ("# comment\n", Err(DotenvError::InvalidFormat)),
            ("A=1\ncontinued line\n", Err(DotenvError::InvalidFormat)),
            ("=V\n", Err(DotenvError::BlankKey)),
            ("K-1=V\n", Err(DotenvError::InvalidKey)),
            ("K E Y=V\n", Err(DotenvError::InvalidKey)),
        ];
        for (text, want) in cases {
            assert_eq!(&parse_gitlab_dotenv(text.as_bytes()), want, "{text:?}");
        }
        let many: String = (0..21).map(|i| format!("K{i}=v\n")).collect();
        assert_eq!(
            parse_gitlab_dotenv(many.as_bytes()),
            Err(DotenvError::TooManyVariables)
        );
        let big = format!("K={}\n", "x".repeat(5 * 1024));
        assert_eq!(
            parse_gitlab_dotenv(big.as_bytes()),
            Err(DotenvError::TooBig)
        );
        assert_eq!(parse_gitlab_dotenv(b"K=\xff\n"), Err(DotenvError::NotUtf8));
        assert_eq!(
            DotenvError::TooManyVariables.to_string(),
            "Dotenv files cannot have more than 20 variables"
        );
    }

    #[test]
    fn dotenv_unescaping_reverses_the_single_line_escapes() {
        for (escaped, raw) in [
            ("plain", "plain"),
            ("a\\nb", "a\nb"),
            ("a\\r\\nb", "a\r\nb"),
            ("C:\\\\path", "C:\\path"),
            ("literal \\\\n", "literal \\n"),
            ("trailing \\", "trailing \\"),
        ] {
            assert_eq!(unescape_dotenv_value(escaped), raw, "{escaped:?}");
        }
    }
}
