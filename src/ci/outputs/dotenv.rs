//! The dotenv outputs file, by GitLab's dotenv report rules (also read by
//! Bitbucket): `TRUSS_PUSH_<NAME>=value`, one line each, the command's
//! fixed list of variables (`command`), under 5 KiB for the whole file.

use std::borrow::Cow;

use super::command::{Command, Var, dotenv_row};
use super::{Outputs, truncate_bytes};

/// GitLab accepts a dotenv artifact only when its size is *below* 5 KiB.
const DOTENV_MAX_BYTES: usize = 5 * 1024 - 1;
/// Prefix of every dotenv name: dotenv variables become environment
/// variables of later jobs, and un-prefixed names such as `MODEL_NAME` are
/// inputs of truss-push itself, so a second deploy job would inherit them.
const DOTENV_PREFIX: &str = "TRUSS_PUSH_";
/// Budget for the error message inside the dotenv file, leaving the rest of
/// the 5 KiB to the predict response.
const DOTENV_ERROR_MESSAGE_MAX_BYTES: usize = 1024;
/// Ends a dotenv value that was cut to fit the file.
const DOTENV_CUT_MARKER: &str = "…";

/// `deployment-id` → `TRUSS_PUSH_DEPLOYMENT_ID`.
pub(super) fn dotenv_name(output_name: &str) -> String {
    let mut name = String::from(DOTENV_PREFIX);
    name.extend(output_name.chars().map(|c| match c {
        '-' => '_',
        c => c.to_ascii_uppercase(),
    }));
    name
}

/// Each command and the names of its dotenv variables, in the order the
/// file writes them (the docs' table and the tests read them here).
pub fn dotenv_variables() -> Vec<(&'static str, Vec<String>)> {
    Command::ALL
        .iter()
        .map(|&c| {
            let names = dotenv_row(c)
                .iter()
                .flat_map(|&var| {
                    let name = match var {
                        Var::Output(o) => dotenv_name(o),
                        Var::Renamed(_, n) => format!("{DOTENV_PREFIX}{n}"),
                    };
                    let flag = (var.output() == "predict-response")
                        .then(|| format!("{DOTENV_PREFIX}PREDICT_RESPONSE_TRUNCATED"));
                    std::iter::once(name).chain(flag)
                })
                .collect();
            (c.word(), names)
        })
        .collect()
}

/// Makes `value` single-line: `\` → `\\`, LF → `\n`, CR → `\r`, stopping
/// before the result would exceed `max_bytes` (never inside an escape).
/// Returns the text and whether anything was cut.
fn escape_single_line(value: &str, max_bytes: usize) -> (String, bool) {
    let mut out = String::new();
    for c in value.chars() {
        let piece: Cow<str> = match c {
            '\\' => "\\\\".into(),
            '\n' => "\\n".into(),
            '\r' => "\\r".into(),
            c => c.to_string().into(),
        };
        if out.len() + piece.len() > max_bytes {
            return (out, true);
        }
        out.push_str(&piece);
    }
    (out, false)
}

/// The single-line form of a predict response: compact JSON when the
/// response is JSON (directly usable with `jq`), else escaped text.
fn single_line_predict_response(response: &str, max_bytes: usize) -> (String, bool) {
    if let Some(compact) = compact_json(response) {
        let kept = truncate_bytes(&compact, max_bytes);
        return (kept.to_owned(), kept.len() < compact.len());
    }
    escape_single_line(response, max_bytes)
}

/// `text` without the whitespace between JSON tokens, if it is valid JSON.
/// Working on the text rather than re-serializing keeps key order and
/// number spelling exactly as the model sent them. Valid JSON has no raw
/// line breaks inside strings, so the result is one line.
fn compact_json(text: &str) -> Option<String> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            in_string = c == '"';
            out.push(c);
        }
    }
    Some(out)
}

/// Renders the outputs as a GitLab dotenv report: the variables of the
/// run's command's row ([`super::command::DOTENV`]), in its order.
///
/// Every rule GitLab enforces holds: one `NAME=value` line per variable,
/// names `TRUSS_PUSH_` + the output name upper-cased with `-` → `_` (or
/// the row's own name), no blank lines, no comments, no quoting, at most
/// 20 variables (the rows are held to it), under 5 KiB for the whole file.
/// Values are single-line: `predict-response` is compact JSON when the
/// response was JSON; it and every other value otherwise escape `\` as
/// `\\`, LF as `\n` and CR as `\r`. GitLab strips leading and trailing
/// whitespace from values.
///
/// Every variable of the row is always present (empty when its output
/// does not apply); long values are cut instead. Short values are kept
/// whole first, and the long ones share what is left of the 5 KiB equally
/// (the error message keeps at most 1 KiB). A cut value ends with `…`,
/// except the predict response, where the extra variable
/// `TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED` says (`true`/`false`) whether it
/// was cut shorter than the `predict-response` output (a marker would break
/// its JSON).
///
/// The values are not quoted, so the file must not be `source`d by a shell
/// (a `$(…)` in a value would run): use the shell format for that.
pub(super) fn render_dotenv(outputs: &Outputs) -> String {
    const PREDICT: &str = "predict-response";
    const PREDICT_TRUNCATED: &str = "PREDICT_RESPONSE_TRUNCATED";
    let all = outputs.entries();
    let value_of = |output: &str| {
        all.iter()
            .find(|(name, _)| *name == output)
            .map_or(String::new(), |(_, v)| v.clone())
    };
    // (the variable's name, its output, the value)
    let entries: Vec<(String, &str, String)> = dotenv_row(outputs.command)
        .iter()
        .map(|&var| {
            let name = match var {
                Var::Output(o) => dotenv_name(o),
                Var::Renamed(_, n) => format!("{DOTENV_PREFIX}{n}"),
            };
            (name, var.output(), value_of(var.output()))
        })
        .collect();
    let line_for = |name: &str, value: &str| format!("{name}={value}\n");
    let flag_name = format!("{DOTENV_PREFIX}{PREDICT_TRUNCATED}");

    // The lines without their values; the flag is counted at its longer value.
    let has_predict = entries.iter().any(|(_, o, _)| *o == PREDICT);
    let overhead: usize = entries
        .iter()
        .map(|(name, _, _)| line_for(name, "").len())
        .sum::<usize>()
        + if has_predict {
            line_for(&flag_name, "false").len()
        } else {
            0
        };
    let wants: Vec<usize> = entries
        .iter()
        .map(|(_, output, value)| {
            let whole = if *output == PREDICT {
                single_line_predict_response(value, usize::MAX).0.len()
            } else {
                escape_single_line(value, usize::MAX).0.len()
            };
            match *output {
                "error-message" => whole.min(DOTENV_ERROR_MESSAGE_MAX_BYTES),
                _ => whole,
            }
        })
        .collect();
    let budgets = share_bytes(&wants, DOTENV_MAX_BYTES.saturating_sub(overhead));

    let mut text = String::new();
    for ((name, output, value), budget) in entries.iter().zip(budgets) {
        if *output == PREDICT {
            let (predict, truncated) = single_line_predict_response(value, budget);
            text.push_str(&line_for(name, &predict));
            let flag = if truncated { "true" } else { "false" };
            text.push_str(&line_for(&flag_name, flag));
        } else {
            text.push_str(&line_for(name, &dotenv_value(value, budget)));
        }
    }
    text
}

/// Splits `total` bytes between values wanting `wants` bytes: the smallest
/// wants are met in full, and whatever they leave is shared equally by the
/// rest, so one huge value cannot starve the others.
fn share_bytes(wants: &[usize], total: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..wants.len()).collect();
    order.sort_by_key(|&i| wants[i]);
    let mut budgets = vec![0; wants.len()];
    let mut left = total;
    for (done, &i) in order.iter().enumerate() {
        let share = left / (wants.len() - done);
        budgets[i] = wants[i].min(share);
        left -= budgets[i];
    }
    budgets
}

/// A non-predict output's dotenv value: escaped to one line within
/// `max_bytes`, ending with [`DOTENV_CUT_MARKER`] when it was cut.
fn dotenv_value(value: &str, max_bytes: usize) -> String {
    let (whole, cut) = escape_single_line(value, max_bytes);
    if !cut {
        return whole;
    }
    let room = max_bytes.saturating_sub(DOTENV_CUT_MARKER.len());
    let (mut kept, _) = escape_single_line(value, room);
    if kept.len() + DOTENV_CUT_MARKER.len() <= max_bytes {
        kept.push_str(DOTENV_CUT_MARKER);
    }
    kept
}

#[cfg(test)]
mod tests {
    use fake_baseten::runner::{DOTENV_MAX_VARS, parse_gitlab_dotenv, unescape_dotenv_value};

    use super::super::tests::full_outputs;
    use super::super::{
        OutputsFormat, PREDICT_RESPONSE_MAX_CHARS, truncate_chars, write_outputs_file,
    };
    use super::*;
    use crate::outcome::Status;

    /// Every rule GitLab's dotenv upload enforces, checked on the bytes.
    fn assert_gitlab_accepts(text: &str) -> Vec<(String, String)> {
        assert!(text.len() < 5 * 1024, "size {}", text.len());
        assert!(text.ends_with('\n'));
        for line in text.lines() {
            assert!(!line.trim().is_empty(), "blank line");
            assert!(!line.starts_with('#'), "comment line");
            let (name, value) = line.split_once('=').expect("NAME=value");
            assert!(name.starts_with(DOTENV_PREFIX));
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{name}"
            );
            assert!(!value.contains('\r'), "{name} has a CR");
        }
        let vars = parse_gitlab_dotenv(text.as_bytes()).expect("GitLab accepts the file");
        assert!(vars.len() <= DOTENV_MAX_VARS);
        assert_eq!(vars.len(), text.lines().count(), "one variable per line");
        vars
    }

    fn var<'a>(vars: &'a [(String, String)], name: &str) -> &'a str {
        &vars.iter().find(|(k, _)| k == name).unwrap().1
    }

    #[test]
    fn drift_is_written_and_its_json_report_left_out() {
        let mut outputs = full_outputs();
        outputs.command = super::super::Command::Drift;
        outputs.drift = Some(true);
        outputs.drift_report = Some(format!("[{}]", "{\"state\": \"in-sync\"},".repeat(400)));
        let text = render_dotenv(&outputs);
        let vars = assert_gitlab_accepts(&text);
        assert_eq!(var(&vars, "TRUSS_PUSH_DRIFT"), "true");
        assert!(!text.contains("DRIFT_REPORT"), "{text}");
        assert!(
            !text.contains('…'),
            "nothing else was cut to make room: {text}"
        );
    }

    #[test]
    fn dotenv_obeys_gitlab_rules_with_a_10kb_multiline_predict_response() {
        let mut outputs = full_outputs();
        // Short lines, so escaping the newlines pushes the 4096 characters past the budget.
        outputs.predict_response = "#\"\\\n".repeat(2600);
        assert!(outputs.predict_response.len() > 10_000);
        outputs.error_message = "first\r\nsecond".into();

        let text = render_dotenv(&outputs);
        let vars = assert_gitlab_accepts(&text);
        assert_eq!(vars.len(), 19);
        assert_eq!(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED"), "true");
        let kept = unescape_dotenv_value(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE"));
        assert!(kept.len() > 2900, "uses the budget: {}", kept.len());
        assert!(kept.len() < 4096);
        assert!(outputs.predict_response.starts_with(&kept));
        assert_eq!(
            unescape_dotenv_value(var(&vars, "TRUSS_PUSH_ERROR_MESSAGE")),
            "first\r\nsecond"
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_STATUS"), "success");
        assert_eq!(var(&vars, "TRUSS_PUSH_DEPLOY_TIME_SECONDS"), "42.5");
        assert_eq!(var(&vars, "TRUSS_PUSH_CHAIN_ID"), "");
    }

    #[test]
    fn dotenv_stays_under_5kb_with_multibyte_text_and_a_huge_error() {
        let mut outputs = full_outputs();
        outputs.predict_response = "日本語のテキスト\n".repeat(2000);
        outputs.error_message = "エラー\n".repeat(3000);
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        let error = var(&vars, "TRUSS_PUSH_ERROR_MESSAGE");
        assert!(error.len() <= DOTENV_ERROR_MESSAGE_MAX_BYTES);
        let kept = error
            .strip_suffix(DOTENV_CUT_MARKER)
            .expect("marked as cut");
        assert!(
            outputs
                .error_message
                .starts_with(&unescape_dotenv_value(kept))
        );
    }

    #[test]
    fn dotenv_cuts_every_long_value_instead_of_dropping_the_file() {
        let mut outputs = full_outputs();
        outputs.model_name = "m".repeat(10_000);
        outputs.environment_url = "S\n".repeat(4000);
        outputs.logs_url = format!("https://app.baseten.co/{}", "l".repeat(6000));
        outputs.predict_response = "p".repeat(9000);
        outputs.error_message = "e".repeat(9000);
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        assert_eq!(vars.len(), 19);
        for name in [
            "TRUSS_PUSH_MODEL_NAME",
            "TRUSS_PUSH_ENVIRONMENT_URL",
            "TRUSS_PUSH_LOGS_URL",
            "TRUSS_PUSH_ERROR_MESSAGE",
        ] {
            let value = var(&vars, name);
            assert!(value.ends_with(DOTENV_CUT_MARKER), "{name}: {value}");
            assert!(
                value.len() > 500,
                "{name} keeps a fair share: {}",
                value.len()
            );
        }
        // An escape is never cut in half.
        let url = var(&vars, "TRUSS_PUSH_ENVIRONMENT_URL");
        let url = url.strip_suffix(DOTENV_CUT_MARKER).unwrap();
        assert!(
            outputs
                .environment_url
                .starts_with(&unescape_dotenv_value(url))
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED"), "true");
        // Short values are whole.
        assert_eq!(var(&vars, "TRUSS_PUSH_STATUS"), "success");
        assert_eq!(var(&vars, "TRUSS_PUSH_DEPLOYMENT_ID"), "dep456");
        assert_eq!(var(&vars, "TRUSS_PUSH_DEPLOY_TIME_SECONDS"), "42.5");
    }

    #[test]
    fn byte_sharing_meets_small_wants_and_splits_the_rest() {
        let cases: &[(&[usize], usize, &[usize])] = &[
            (&[10, 20, 30], 100, &[10, 20, 30]),
            (&[10, 1000, 1000], 100, &[10, 45, 45]),
            (&[10, 1000, 50], 100, &[10, 45, 45]),
            (&[1000, 1000, 1000], 10, &[3, 3, 4]),
            (&[], 10, &[]),
            (&[5], 0, &[0]),
        ];
        for (wants, total, want) in cases {
            let got = share_bytes(wants, *total);
            assert_eq!(got, *want, "{wants:?} in {total}");
            assert!(got.iter().sum::<usize>() <= *total);
        }
    }

    #[test]
    fn a_cut_dotenv_value_ends_with_the_marker_within_its_budget() {
        assert_eq!(dotenv_value("abcdef", 6), "abcdef");
        assert_eq!(dotenv_value("abcdefg", 6), "abc…");
        assert_eq!(dotenv_value("a\nbcdefg", 6), "a\\n…");
        assert_eq!(dotenv_value("abcdefg", 2), "");
    }

    #[test]
    fn dotenv_writes_a_json_predict_response_as_compact_json() {
        let mut outputs = full_outputs();
        outputs.predict_response = "{\n  \"text\": \"a\\nb\",\n  \"n\": [1, 2]\n}\n".into();
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        assert_eq!(
            var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE"),
            r#"{"text":"a\nb","n":[1,2]}"#
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED"), "false");
    }

    #[test]
    fn dotenv_keeps_the_whole_predict_output_when_it_fits() {
        let mut outputs = full_outputs();
        outputs.predict_response = format!("{}\n{}", "a".repeat(3000), "b".repeat(3000));
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        let want = truncate_chars(&outputs.predict_response, PREDICT_RESPONSE_MAX_CHARS);
        assert_eq!(
            unescape_dotenv_value(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE")),
            want
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED"), "false");
    }

    #[test]
    fn compact_json_keeps_order_and_spelling() {
        let cases = [
            (
                "{\"b\": 1.0, \"a\": [1e3, 2]}",
                Some("{\"b\":1.0,\"a\":[1e3,2]}"),
            ),
            (
                "{ \"s\": \"keep  spaces \\\" and \\\\\" }",
                Some("{\"s\":\"keep  spaces \\\" and \\\\\"}"),
            ),
            ("\r\n[ ]\n", Some("[]")),
            (
                "123456789012345678901234567890",
                Some("123456789012345678901234567890"),
            ),
            ("not json", None),
            ("{\"a\": 1} trailing", None),
            ("", None),
        ];
        for (raw, want) in cases {
            assert_eq!(compact_json(raw).as_deref(), want, "{raw:?}");
        }
    }

    /// Every output a deploy can have, each long: evidence, skip-unchanged,
    /// several targets with their JSON `results`. The file keeps the
    /// deploy's fixed list: at most 20 variables, under 5 KB, no JSON
    /// output.
    #[test]
    fn the_widest_deploy_keeps_its_fixed_list_within_gitlabs_limits() {
        let mut outputs = full_outputs();
        outputs.error_message = "e".repeat(9000);
        outputs.predict_response = "p".repeat(9000);
        outputs.environment_url = format!("https://{}", "u".repeat(3000));
        outputs.previous_deployment_id = "v1dep001".into();
        outputs.tested_deployment_id = "dep455".into();
        outputs.rolled_back = Some(true);
        outputs.unchanged = Some(false);
        outputs.targets_count = Some(40);
        outputs.results = Some(format!("[{}]", "{\"target\":\"m\"},".repeat(500)));
        outputs.evidence = vec![
            ("cases-passed", "12".into()),
            ("cases-failed", "3".into()),
            ("latency-p50-ms", "19.7".into()),
            ("latency-p95-ms", "29.8".into()),
            ("baseline-p95-ms", "16.0".into()),
        ];
        let text = render_dotenv(&outputs);
        let vars = assert_gitlab_accepts(&text);
        assert_eq!(vars.len(), 19, "{text}");
        assert!(text.len() < 5 * 1024);
        assert!(!text.contains("RESULTS") && !text.contains("MATRIX"));
        assert_eq!(var(&vars, "TRUSS_PUSH_CASES_FAILED"), "3");
        assert_eq!(var(&vars, "TRUSS_PUSH_LATENCY_P95_MS"), "29.8");
        assert_eq!(var(&vars, "TRUSS_PUSH_TARGETS_COUNT"), "40");
        assert_eq!(var(&vars, "TRUSS_PUSH_UNCHANGED"), "false");
        assert_eq!(var(&vars, "TRUSS_PUSH_ROLLED_BACK"), "true");
    }

    /// A plan's file says the plan's status under its own name, and never
    /// `TRUSS_PUSH_STATUS` (about deploys it did not run) nor its matrix.
    #[test]
    fn a_plans_dotenv_says_the_plans_status() {
        let mut outputs = Outputs::new(Status::Success);
        outputs.command = super::super::Command::Plan;
        outputs.targets_count = Some(2);
        outputs.matrix = Some("{\"include\":[]}".into());
        let vars = assert_gitlab_accepts(&render_dotenv(&outputs));
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "TRUSS_PUSH_PLAN_STATUS",
                "TRUSS_PUSH_TARGETS_COUNT",
                "TRUSS_PUSH_ERROR_MESSAGE"
            ]
        );
        assert_eq!(var(&vars, "TRUSS_PUSH_PLAN_STATUS"), "success");
        assert_eq!(var(&vars, "TRUSS_PUSH_TARGETS_COUNT"), "2");
    }

    #[test]
    fn dotenv_names_are_prefixed_and_upper_snake_case() {
        assert_eq!(dotenv_name("deployment-id"), "TRUSS_PUSH_DEPLOYMENT_ID");
        assert_eq!(
            dotenv_name("deploy-time-seconds"),
            "TRUSS_PUSH_DEPLOY_TIME_SECONDS"
        );
        let text = render_dotenv(&Outputs::new(Status::DeployFailed));
        let names: Vec<&str> = text.lines().map(|l| l.split_once('=').unwrap().0).collect();
        assert_eq!(
            names,
            [
                "TRUSS_PUSH_STATUS",
                "TRUSS_PUSH_DEPLOYMENT_ID",
                "TRUSS_PUSH_MODEL_ID",
                "TRUSS_PUSH_CHAIN_ID",
                "TRUSS_PUSH_MODEL_NAME",
                "TRUSS_PUSH_ERROR_MESSAGE",
                "TRUSS_PUSH_ENVIRONMENT_URL",
                "TRUSS_PUSH_PREDICT_URL",
                "TRUSS_PUSH_LOGS_URL",
                "TRUSS_PUSH_PREVIOUS_DEPLOYMENT_ID",
                "TRUSS_PUSH_ROLLED_BACK",
                "TRUSS_PUSH_UNCHANGED",
                "TRUSS_PUSH_REUSED",
                "TRUSS_PUSH_TARGETS_COUNT",
                "TRUSS_PUSH_CASES_FAILED",
                "TRUSS_PUSH_LATENCY_P95_MS",
                "TRUSS_PUSH_DEPLOY_TIME_SECONDS",
                "TRUSS_PUSH_PREDICT_RESPONSE",
                "TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED",
            ]
        );
    }

    #[test]
    fn single_line_escaping_is_reversible_and_respects_the_budget() {
        let cases = [
            ("plain", "plain"),
            ("a\nb", "a\\nb"),
            ("a\r\nb", "a\\r\\nb"),
            ("C:\\path", "C:\\\\path"),
            ("literal \\n", "literal \\\\n"),
        ];
        for (raw, escaped) in cases {
            assert_eq!(
                escape_single_line(raw, usize::MAX),
                (escaped.to_string(), false)
            );
            assert_eq!(unescape_dotenv_value(escaped), raw);
        }
        // Never cuts an escape in half.
        assert_eq!(escape_single_line("ab\ncd", 3), ("ab".to_string(), true));
        assert_eq!(escape_single_line("ab\ncd", 4), ("ab\\n".to_string(), true));
    }

    #[test]
    fn write_outputs_file_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deploy.env");
        std::fs::write(&path, "STALE=1\n").unwrap();
        write_outputs_file(&path, OutputsFormat::Dotenv, &full_outputs()).unwrap();
        let vars = assert_gitlab_accepts(&std::fs::read_to_string(&path).unwrap());
        assert!(vars.iter().all(|(k, _)| k != "STALE"));
    }
}
