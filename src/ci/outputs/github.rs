//! `$GITHUB_OUTPUT`: every entry as a heredoc with a fresh random
//! delimiter that occurs in neither its name nor its value.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::bail;

use super::Outputs;
use super::file::append_file;

/// How many fresh delimiters to try before giving up; a random 128-bit
/// delimiter colliding even once means someone forged it, so this only
/// matters for injected generators.
const DELIMITER_ATTEMPTS: usize = 16;

/// A fresh `ghadelimiter_<32 hex>` from `rng`.
fn random_delimiter(rng: &mut fastrand::Rng) -> String {
    format!("ghadelimiter_{:032x}", rng.u128(..))
}

/// `[A-Za-z_][A-Za-z0-9_-]*`: what GitHub accepts as an output id and what
/// the runner's file parser cannot misread (no `=`, no `<<`).
fn is_valid_output_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Renders entries for `$GITHUB_OUTPUT`: each as `name<<DELIM` LF value LF
/// `DELIM` LF, with a delimiter from `next_delimiter` that occurs in neither
/// name nor value (a new one is drawn on collision).
fn render_github_output(
    entries: &[(&str, String)],
    next_delimiter: &mut dyn FnMut() -> String,
) -> anyhow::Result<String> {
    let mut text = String::new();
    for (name, value) in entries {
        if !is_valid_output_name(name) {
            bail!(
                "output name {name:?} is not valid: expected a letter or '_' followed by letters, digits, '_' or '-'"
            );
        }
        let delimiter = pick_delimiter(name, value, next_delimiter)?;
        let _ = write!(text, "{name}<<{delimiter}\n{value}\n{delimiter}\n");
    }
    Ok(text)
}

fn pick_delimiter(
    name: &str,
    value: &str,
    next_delimiter: &mut dyn FnMut() -> String,
) -> anyhow::Result<String> {
    for _ in 0..DELIMITER_ATTEMPTS {
        let delimiter = next_delimiter();
        let usable = !delimiter.is_empty()
            && !delimiter.contains(['\n', '\r'])
            && !name.contains(&delimiter)
            && !value.contains(&delimiter);
        if usable {
            return Ok(delimiter);
        }
    }
    bail!(
        "could not find a heredoc delimiter absent from output {name:?} after {DELIMITER_ATTEMPTS} attempts"
    )
}

/// Appends all outputs to the `$GITHUB_OUTPUT` file at `path` (created if
/// missing, so local runs can point it at any file). Nothing is written when
/// rendering fails.
pub(crate) fn append_github_output(path: &Path, outputs: &Outputs) -> anyhow::Result<()> {
    let mut rng = fastrand::Rng::new();
    let text = render_github_output(&outputs.entries(), &mut || random_delimiter(&mut rng))?;
    Ok(append_file(path, &text)?)
}

#[cfg(test)]
mod tests {
    use fake_baseten::runner::parse_github_output;

    use super::super::tests::full_outputs;
    use super::*;
    use crate::outcome::Status;

    fn seeded() -> impl FnMut() -> String {
        let mut rng = fastrand::Rng::with_seed(7);
        move || random_delimiter(&mut rng)
    }

    #[test]
    fn github_output_round_trips_through_the_runner_rules() {
        let values = [
            "simple",
            "",
            "line one\nline two",
            "EOF",
            "before\nEOF\nafter",
            "x=y",
            "a<<b",
            "name<<EOF",
            "trailing newline\n",
            "\n",
            "\n\nleading blank lines",
            "windows\r\nline",
            "ghadelimiter_",
            "{\"a\": [1, 2]}",
            "日本語 ✅",
        ];
        let entries: Vec<(&str, String)> = values.iter().map(|v| ("out", v.to_string())).collect();
        let text = render_github_output(&entries, &mut seeded()).unwrap();
        assert!(
            !text.contains('\r') || text.contains("windows\r\n"),
            "LF only of our own"
        );
        let parsed = parse_github_output(&text).unwrap();
        let got: Vec<&str> = parsed.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(got, values);
        assert!(parsed.iter().all(|(n, _)| n == "out"));
    }

    #[test]
    fn every_entry_is_a_heredoc_with_its_own_delimiter() {
        let entries = vec![("a", "1".to_string()), ("b", "2".to_string())];
        let text = render_github_output(&entries, &mut seeded()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6);
        let delim_a = lines[0].strip_prefix("a<<").unwrap();
        let delim_b = lines[3].strip_prefix("b<<").unwrap();
        assert!(delim_a.starts_with("ghadelimiter_") && delim_a.len() == 13 + 32);
        assert_ne!(delim_a, delim_b);
        assert_eq!(lines[2], delim_a);
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn a_value_containing_the_delimiter_gets_a_new_one() {
        let forged = "ghadelimiter_00000000000000000000000000000001";
        let value = format!("payload\n{forged}\nstatus=success");
        let mut candidates = vec![
            forged.to_string(),
            "ghadelimiter_00000000000000000000000000000002".to_string(),
        ]
        .into_iter();
        let text = render_github_output(&[("predict-response", value.clone())], &mut || {
            candidates.next().unwrap()
        })
        .unwrap();
        assert!(
            text.starts_with("predict-response<<ghadelimiter_00000000000000000000000000000002\n")
        );
        let parsed = parse_github_output(&text).unwrap();
        assert_eq!(parsed, vec![("predict-response".to_string(), value)]);
    }

    #[test]
    fn a_generator_that_always_collides_is_an_error_not_a_forgery() {
        let result = render_github_output(&[("x", "DELIM".to_string())], &mut || "DELIM".into());
        assert!(result.is_err());
        let bad = ["", "a\nb"];
        for delim in bad {
            let result = render_github_output(&[("x", "v".to_string())], &mut || delim.into());
            assert!(result.is_err(), "{delim:?}");
        }
    }

    #[test]
    fn output_names_are_validated() {
        for good in ["status", "deploy-time-seconds", "_x", "A1_b-2"] {
            assert!(is_valid_output_name(good), "{good}");
        }
        for bad in ["", "1abc", "-a", "a=b", "a<<b", "a b", "é", "a\nb"] {
            assert!(!is_valid_output_name(bad), "{bad:?}");
            assert!(render_github_output(&[(bad, "v".into())], &mut seeded()).is_err());
        }
    }

    #[test]
    fn the_fixed_eof_delimiter_of_the_python_action_is_forgeable_and_ours_is_not() {
        // What the Python action writes for a predict response holding an `EOF` line.
        let response = "ok\nEOF\nstatus=success";
        let python =
            format!("predict-response<<EOF\n{response}\nEOF\nstatus<<EOF\npredict_failed\nEOF\n");
        assert!(parse_github_output(&python).is_err());

        let mut outputs = Outputs::new(Status::PredictFailed);
        outputs.predict_response = response.into();
        let text = render_github_output(&outputs.entries(), &mut seeded()).unwrap();
        let parsed = parse_github_output(&text).unwrap();
        let get = |n: &str| parsed.iter().find(|(k, _)| k == n).unwrap().1.clone();
        assert_eq!(get("predict-response"), response);
        assert_eq!(get("status"), "predict_failed");
    }

    #[test]
    fn append_github_output_appends_every_output_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("set_output_x");
        std::fs::write(&path, "earlier=1\n").unwrap();
        let mut outputs = full_outputs();
        outputs.error_message = "line 1\nline 2".into();
        append_github_output(&path, &outputs).unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        let parsed = parse_github_output(&text).unwrap();
        assert_eq!(parsed[0], ("earlier".to_string(), "1".to_string()));
        let want: Vec<(String, String)> = outputs
            .entries()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
        assert_eq!(parsed[1..], want);
        assert!(want.contains(&("deploy-time-seconds".into(), "42.5".into())));
    }
}
