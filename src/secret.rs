//! A string that must never be printed (the API key), and the one
//! redaction every sink goes through (`register` once, `scrub` at each
//! sink): the reporter (stdout, stderr), the
//! outputs, files and summary, the JSON documents, debug logs and panic
//! messages.
//!
//! The registry is process-wide on purpose: the run registers the key and
//! the GitHub token once, before anything can print, and every sink —
//! the panic hook and the debug log writer included, which hold no handle
//! of the run — redacts against it, so a call site that forgets cannot
//! leak.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;
use std::sync::Mutex;

/// Secrets registered for sinks that hold no handle of the run (debug logs,
/// panic messages): once registered, for the life of the process.
static REGISTERED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// `text` with every occurrence of each secret replaced by `***`; borrowed
/// when there is none. Empty secrets are ignored.
fn redact<'a, S: AsRef<str>>(text: &'a str, secrets: &[S]) -> Cow<'a, str> {
    let mut text = Cow::Borrowed(text);
    for secret in secrets.iter().map(AsRef::as_ref) {
        if !secret.is_empty() && text.contains(secret) {
            text = Cow::Owned(text.replace(secret, "***"));
        }
    }
    text
}

/// Registers `secret` for every sink, for the life of the process.
pub(crate) fn register(secret: &str) {
    let secret = secret.trim();
    if secret.is_empty() {
        return;
    }
    let mut all = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| s == secret) {
        all.push(secret.to_string());
        // Longest first: a secret that contains another is replaced whole,
        // not left with its tail showing.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// `text` redacted of every registered secret; borrowed when none occurs.
pub(crate) fn scrub(text: &str) -> Cow<'_, str> {
    let all = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    match redact(text, &all) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(clean) => Cow::Owned(clean),
    }
}

/// Standard error through the process-wide redaction, for debug logs.
pub struct RedactedStderr;

impl Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(scrub(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Holds a secret; `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_of_every_secret_is_replaced() {
        assert_eq!(redact("a k1 b k2 k1", &["k1", "k2"]), "a *** b *** ***");
        assert!(matches!(redact("nothing", &["k1"]), Cow::Borrowed(_)));
        assert_eq!(redact("x", &[""]), "x");
        register("sk-registered-canary");
        assert_eq!(scrub("Api-Key sk-registered-canary"), "Api-Key ***");
        register("sk-registered");
        assert_eq!(scrub("sk-registered-canary sk-registered"), "*** ***");
        assert!(matches!(scrub("clean"), Cow::Borrowed(_)));
    }

    #[test]
    fn never_formats_the_value() {
        let s = Secret::new("sk-canary-123");
        assert_eq!(format!("{s} {s:?} {:?}", Some(&s)), "*** *** Some(***)");
        assert_eq!(s.expose(), "sk-canary-123");
    }
}
