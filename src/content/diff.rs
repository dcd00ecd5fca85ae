//! What a deploy changes in production: this truss's `config.yaml` against
//! the one the serving deployment was created with (the platform's raw
//! copy), as a line diff, or "code changed" when the configs are equal and
//! the content hashes are not. Values under `secrets:` are never shown
//! (names only), and the section goes through the summary's redacting
//! sink like any output.

use std::fmt::Write as _;

/// Lines of context around each change.
const CONTEXT_LINES: usize = 2;
/// Past this many line pairs the diff is not computed (the table is
/// quadratic), only said to differ.
const DIFF_CELLS_MAX: usize = 4_000_000;
/// Longest diff shown; the rest is cut with a note.
const DIFF_SHOWN_MAX_BYTES: usize = 16 * 1024;

/// What changes in the deployment serving `environment`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    pub(crate) environment: String,
    pub(crate) serving: String,
    pub(crate) what: What,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum What {
    /// The configs differ: the diff, `-` theirs and `+` ours.
    Config(String),
    /// Same config, other content hash.
    CodeOnly,
    /// Same config, and the serving deployment records no hash to compare.
    ConfigSame,
    /// Same config and same hash: the same source deploys again.
    Same,
    /// Nothing to compare with: why.
    Unknown(String),
}

/// Decides what changes. `theirs` is the serving deployment's raw config
/// (or why it is missing), `same_hash` whether its recorded hash equals
/// ours (`None`: it records none).
pub(crate) fn change(ours: &str, theirs: Result<&str, String>, same_hash: Option<bool>) -> What {
    let theirs = match theirs {
        Ok(t) => t,
        Err(why) => return What::Unknown(why),
    };
    // Line by line: a copy whose line endings the platform rewrote is
    // the same config.
    if ours.lines().eq(theirs.lines()) {
        return match same_hash {
            Some(true) => What::Same,
            Some(false) => What::CodeOnly,
            None => What::ConfigSame,
        };
    }
    What::Config(line_diff(&names_only(theirs), &names_only(ours)))
}

/// The config text with every value under a top-level `secrets:` key
/// dropped: a line `  name: value` becomes `  name: ***`; an inline
/// mapping is replaced whole.
pub(crate) fn names_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut inside = false;
    for line in text.lines() {
        let indented = line.starts_with([' ', '\t']);
        let blank = line.trim().is_empty() || line.trim_start().starts_with('#');
        if !indented && !blank {
            inside = false;
        }
        if !indented && let Some(rest) = line.strip_prefix("secrets:") {
            let rest = rest.trim();
            if rest.is_empty() || rest.starts_with('#') {
                inside = true;
                out.push_str("secrets:");
            } else {
                out.push_str("secrets: *** (values not shown)");
            }
        } else if inside && indented && !blank {
            match line.split_once(':') {
                Some((name, value)) if !value.trim().is_empty() => {
                    let _ = write!(out, "{name}: ***");
                }
                _ => out.push_str(line),
            }
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// A line diff of `old` to `new` in hunks with `CONTEXT_LINES` around
/// each change: ` ` kept, `-` removed, `+` added.
fn line_diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a.len().saturating_mul(b.len()) > DIFF_CELLS_MAX {
        return format!(
            "config.yaml differs ({} lines before, {} after): too long to diff here\n",
            a.len(),
            b.len()
        );
    }
    // Longest common subsequence lengths from the end.
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT_LINES);
        let hi = (k + CONTEXT_LINES).min(ops.len() - 1);
        ops[lo..=hi].iter().any(|(op, _)| *op != ' ')
    };
    let mut out = String::new();
    let mut gap = false;
    for (k, (op, line)) in ops.iter().enumerate() {
        if near_change(k) {
            if gap && !out.is_empty() {
                out.push_str("…\n");
            }
            gap = false;
            let _ = writeln!(out, "{op} {line}");
        } else {
            gap = true;
        }
    }
    if out.len() > DIFF_SHOWN_MAX_BYTES {
        let mut cut = DIFF_SHOWN_MAX_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n… (diff cut here)\n");
    }
    out
}

/// A fenced block that `text` cannot close.
fn fenced(lang: &str, text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{}\n{fence}\n", text.trim_end_matches('\n'))
}

/// The Markdown section for the summary and the pull-request comment.
pub(crate) fn markdown(c: &Change) -> String {
    let mut out = format!(
        "### What changes in {}\n\nCompared with deployment `{}`, which serves {} now:\n\n",
        c.environment,
        c.serving.replace('`', "'"),
        c.environment
    );
    match &c.what {
        What::Config(diff) => {
            out.push_str("config.yaml changes (`-` serving, `+` this truss; secret values never shown):\n\n");
            out.push_str(&fenced("diff", diff));
        }
        What::CodeOnly => out.push_str(
            "**Code changed**: config.yaml is the same; other files of the truss differ (the content hashes differ).\n",
        ),
        What::ConfigSame => out.push_str(
            "config.yaml is the same; the serving deployment records no content hash, so whether other files changed is not known.\n",
        ),
        What::Same => out.push_str("The same source (config.yaml and content hash equal) deploys again.\n"),
        What::Unknown(why) => {
            let _ = writeln!(out, "Not compared: {why}.");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_accelerator_is_one_line_out_one_in() {
        let theirs = "model_name: m\nresources:\n  cpu: '1'\n  accelerator: A10G\n  memory: 2Gi\npython_version: py311\n";
        let ours = "model_name: m\nresources:\n  cpu: '1'\n  accelerator: H100\n  memory: 2Gi\npython_version: py311\n";
        let What::Config(d) = change(ours, Ok(theirs), Some(false)) else {
            panic!("no diff")
        };
        assert_eq!(
            d,
            "  resources:\n    cpu: '1'\n-   accelerator: A10G\n+   accelerator: H100\n    memory: 2Gi\n  python_version: py311\n"
        );
    }

    #[test]
    fn hunks_far_apart_are_separated() {
        let theirs: String = (0..20).map(|i| format!("k{i}: {i}\n")).collect();
        let ours = theirs
            .replace("k1: 1", "k1: x")
            .replace("k18: 18", "k18: y");
        let What::Config(d) = change(&ours, Ok(&theirs), None) else {
            panic!()
        };
        assert!(d.contains("- k1: 1\n+ k1: x\n"), "{d}");
        assert!(d.contains("…\n"), "{d}");
        assert!(!d.contains("k9"), "{d}");
    }

    #[test]
    fn equal_configs_say_what_the_hash_says() {
        let c = "model_name: m\n";
        assert_eq!(change(c, Ok(c), Some(false)), What::CodeOnly);
        assert_eq!(change(c, Ok(c), Some(true)), What::Same);
        assert_eq!(change(c, Ok(c), None), What::ConfigSame);
        assert_eq!(
            change(c, Err("no raw config".into()), Some(false)),
            What::Unknown("no raw config".into())
        );
    }

    #[test]
    fn line_endings_alone_are_no_change() {
        let ours = "model_name: m\nresources:\n  cpu: '1'\n";
        let theirs = "model_name: m\r\nresources:\r\n  cpu: '1'";
        assert_eq!(change(ours, Ok(theirs), Some(false)), What::CodeOnly);
    }

    #[test]
    fn secret_values_never_show() {
        let theirs = "model_name: m\nsecrets:\n  hf_token: null\n  openai: sk-live-old\n";
        let ours = "model_name: m\nsecrets:\n  hf_token: null\n  openai: sk-live-new\n  extra: hunter2\nenvironment_variables: {}\n";
        let What::Config(d) = change(ours, Ok(theirs), Some(false)) else {
            panic!()
        };
        assert!(!d.contains("sk-live") && !d.contains("hunter2"), "{d}");
        assert!(d.contains("+   extra: ***"), "{d}");
        assert!(d.contains("environment_variables: {}"), "{d}");
        assert_eq!(
            names_only("secrets: {a: b}\nx: 1\n"),
            "secrets: *** (values not shown)\nx: 1\n"
        );
    }

    #[test]
    fn the_section_cannot_be_closed_by_its_text() {
        let c = Change {
            environment: "production".into(),
            serving: "d1".into(),
            what: What::Config("+ a: ```\n".into()),
        };
        let md = markdown(&c);
        assert!(md.contains("````diff\n+ a: ```\n````\n"), "{md}");
    }
}
