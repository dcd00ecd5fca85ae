//! Ids the platform answers with are input like any other: checked once,
//! where an answer is parsed, before anything uses them.
//!
//! An id lands in URL paths and host names, in the `deployment-id` output,
//! the log and the step summary, and from there in users' workflow
//! scripts; an answer from the network (a TLS-intercepting proxy is a
//! documented setup) must not be able to become a path step, a line break
//! or a shell command there. Baseten's API reference gives every id as a
//! plain string and never says what it may hold; every id it has ever
//! answered is a short run of ASCII letters and digits (`abcd1234`), so
//! that is the allowlist — our assumption, written down in
//! docs/network-and-limits.md. Anything else is a platform error
//! ([`UnusableId`]) that shows the value escaped to letters and digits
//! only, so not even the error message carries it.
//!
//! Statuses are held to the same kind of rule (`last-status` reports them
//! as written): a word of ASCII letters, digits and `_`, as every status
//! the published API lists is.
//!
//! The check runs inside deserialisation (`#[serde(deserialize_with =
//! "checked")]` on every id field of an answer's type) or on the raw JSON
//! value ([`field`]) where an answer is read as `serde_json::Value`.

use std::cell::RefCell;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::ApiError;

/// The longest id accepted; the platform's are 7 or 8 characters.
const ID_MAX_CHARS: usize = 64;
/// Characters of a refused id shown (escaped) in its error.
const SHOWN_MAX_CHARS: usize = 40;

/// The longest status word accepted (`SCALED_TO_ZERO`, `MODEL_READY`, …).
const STATUS_MAX_CHARS: usize = 64;

/// What an answer's value was read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadAs {
    Id,
    /// A deployment's or chainlet's status, which `last-status` and the
    /// summary report as the platform wrote it.
    Status,
}

/// A value from the platform outside its allowlist. Its message names the
/// value only escaped: every character but an ASCII letter or digit as
/// `\u{…}`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the platform answered with {} truss-push will not use, {shown}: {} (something between truss-push and Baseten may have rewritten the answer)",
    match kind { ReadAs::Id => "an id", ReadAs::Status => "a status" },
    match kind {
        ReadAs::Id => "ids are expected to be 1 to 64 ASCII letters and digits",
        ReadAs::Status => "statuses are expected to be at most 64 ASCII letters, digits and '_'",
    }
)]
pub(crate) struct UnusableId {
    kind: ReadAs,
    shown: String,
}

impl UnusableId {
    fn new(id: &str) -> Self {
        Self::of(ReadAs::Id, id)
    }

    fn of(kind: ReadAs, id: &str) -> Self {
        let mut shown = String::from("\"");
        for c in id.chars().take(SHOWN_MAX_CHARS) {
            match c.is_ascii_alphanumeric() {
                true => shown.push(c),
                false => shown.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            }
        }
        shown.push('"');
        if id.chars().count() > SHOWN_MAX_CHARS {
            shown.push_str(" (cut)");
        }
        Self { kind, shown }
    }
}

/// Whether `status` (already trimmed) is a status word: empty (not said)
/// or ASCII letters, digits and `_`.
pub(crate) fn is_status_word(status: &str) -> bool {
    status.len() <= STATUS_MAX_CHARS
        && status
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `status` itself when it is a status word.
pub(crate) fn check_status(status: &str) -> Result<&str, UnusableId> {
    match is_status_word(status) {
        true => Ok(status),
        false => Err(UnusableId::of(ReadAs::Status, status)),
    }
}

/// Whether `id` is on the allowlist.
pub(crate) fn is_usable(id: &str) -> bool {
    (1..=ID_MAX_CHARS).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// `id` itself when usable.
pub(crate) fn check(id: &str) -> Result<&str, UnusableId> {
    match is_usable(id) {
        true => Ok(id),
        false => Err(UnusableId::new(id)),
    }
}

thread_local! {
    /// The id [`checked`] refused during the deserialisation running on
    /// this thread: serde flattens a field's error into text, and the
    /// caller ([`refused_during`]) wants it typed.
    static REFUSED: RefCell<Option<UnusableId>> = const { RefCell::new(None) };
}

/// Runs `parse` (a synchronous deserialisation) and tells whether it
/// failed on an unusable id: `Err` then, whatever else it reports.
pub(crate) fn refused_during<T>(parse: impl FnOnce() -> T) -> Result<T, UnusableId> {
    REFUSED.with(|r| r.borrow_mut().take());
    let out = parse();
    match REFUSED.with(|r| r.borrow_mut().take()) {
        Some(refused) => Err(refused),
        None => Ok(out),
    }
}

/// `#[serde(deserialize_with = "…")]` for an id field.
pub(crate) fn checked<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let id = String::deserialize(d)?;
    match check(&id) {
        Ok(_) => Ok(id),
        Err(refused) => Err(remember::<D>(refused)),
    }
}

/// `#[serde(deserialize_with = "…")]` for a status field (kept as the
/// platform wrote it but for the spaces around it).
pub(crate) fn checked_status<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let status = String::deserialize(d)?;
    match check_status(status.trim()) {
        Ok(_) => Ok(status),
        Err(refused) => Err(remember::<D>(refused)),
    }
}

/// Keeps `refused` for [`refused_during`] and fails the deserialisation.
fn remember<'de, D: Deserializer<'de>>(refused: UnusableId) -> D::Error {
    let message = refused.to_string();
    REFUSED.with(|r| *r.borrow_mut() = Some(refused));
    serde::de::Error::custom(message)
}

/// An id field of an answer read as JSON: required and usable.
pub(crate) fn field(what: &str, name: &str, v: &Value) -> Result<String, ApiError> {
    match v.as_str() {
        Some(id) => check(id)
            .map(str::to_owned)
            .map_err(|e| refused(what, name, &e)),
        None => Err(ApiError::permanent(format!(
            "{what}: the answer has no {name}"
        ))),
    }
}

/// An id field of a mutation's answer: required, and when unusable the
/// answer still came, so the mutation may have been applied (`Ambiguous`:
/// the caller looks up what exists rather than taking it as refused).
pub(crate) fn answered(what: &str, name: &str, v: &Value) -> Result<String, ApiError> {
    match v.as_str().map(check) {
        Some(Err(e)) => Err(maybe_applied(what, name, &e)),
        _ => field(what, name, v),
    }
}

/// The unusable id of a mutation's answer: the request reached the
/// platform and may have been applied.
pub(crate) fn maybe_applied(what: &str, name: &str, e: &UnusableId) -> ApiError {
    ApiError::Ambiguous {
        message: format!(
            "{what}: {name}: {e}; the request reached the platform and may have been applied"
        ),
    }
}

/// An optional id field (absent, null or empty is `None`): usable when
/// present.
pub(crate) fn optional(
    what: &str,
    name: &str,
    v: Option<&Value>,
) -> Result<Option<String>, ApiError> {
    match v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(id) => check(id)
            .map(|id| Some(id.to_owned()))
            .map_err(|e| refused(what, name, &e)),
        None => Ok(None),
    }
}

/// The platform error an unusable id is: permanent (the same answer will
/// come again), naming the call and the field.
pub(crate) fn refused(what: &str, name: &str, e: &UnusableId) -> ApiError {
    ApiError::permanent(format!("{what}: {name}: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_letters_and_digits_pass_and_a_refusal_shows_neither_quote_nor_command() {
        for good in ["abc123", "Z", &"a".repeat(ID_MAX_CHARS)] {
            assert!(is_usable(good), "{good}");
        }
        for bad in [
            "",
            "abc$(touch x)",
            "a\nb",
            "a b",
            "a-b",
            "a_b",
            "a.b",
            "..",
            "a/b",
            "`id`",
            "a\"b",
            "ａｂｃ",
            &"a".repeat(ID_MAX_CHARS + 1),
        ] {
            assert!(!is_usable(bad), "{bad:?}");
            let shown = check(bad).unwrap_err().to_string();
            let value = shown.split('"').nth(1).unwrap();
            assert!(
                value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "\\{}u".contains(c)),
                "{shown}"
            );
        }
        assert!(
            check("abc$(touch x)")
                .unwrap_err()
                .to_string()
                .contains(r#""abc\u{24}\u{28}touch\u{20}x\u{29}""#)
        );
    }

    #[test]
    fn a_refusal_inside_a_typed_answer_is_told_apart_from_a_malformed_one() {
        #[derive(Debug, Deserialize)]
        struct Answer {
            #[serde(deserialize_with = "checked")]
            #[allow(dead_code, reason = "only its check is tested")]
            id: String,
        }
        let parse = |v: Value| refused_during(|| serde_json::from_value::<Answer>(v));
        assert!(parse(json!({"id": "abc1"})).unwrap().is_ok());
        assert!(parse(json!({"id": 1})).unwrap().is_err());
        assert!(parse(json!({})).unwrap().is_err());
        let e = parse(json!({"id": "a;b"})).unwrap_err();
        assert!(e.to_string().contains(r#""a\u{3b}b""#), "{e}");
        // Nothing left over for the next parse.
        assert!(parse(json!({"id": "ok"})).unwrap().is_ok());
    }

    #[test]
    fn raw_json_ids_are_checked_where_they_are_read() {
        assert_eq!(field("w", "x.id", &json!("ab1")).unwrap(), "ab1");
        let e = field("w", "x.id", &json!("a\nb")).unwrap_err().to_string();
        assert!(
            e.starts_with("w: x.id: the platform answered") && !e.contains('\n'),
            "{e}"
        );
        assert!(field("w", "x.id", &Value::Null).is_err());
        assert_eq!(optional("w", "x", None).unwrap(), None);
        assert_eq!(optional("w", "x", Some(&json!(""))).unwrap(), None);
        assert!(optional("w", "x", Some(&json!("a b"))).is_err());
    }

    #[test]
    fn a_status_is_a_word_or_nothing() {
        for good in ["", "ACTIVE", "SCALED_TO_ZERO", "model_ready1"] {
            assert!(is_status_word(good), "{good}");
        }
        for bad in [
            "A B",
            "$(x)",
            "A\nB",
            "ACTIVE;",
            &"A".repeat(STATUS_MAX_CHARS + 1),
        ] {
            let e = check_status(bad).unwrap_err().to_string();
            assert!(e.contains("a status truss-push will not use"), "{e}");
            assert!(e.contains(&STATUS_MAX_CHARS.to_string()), "{e}");
        }
        let e = check("a b").unwrap_err().to_string();
        assert!(e.contains(&format!("1 to {ID_MAX_CHARS} ")), "{e}");
    }
}
