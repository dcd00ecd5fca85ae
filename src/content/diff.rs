//! What a deploy changes in production: this truss's `config.yaml` against
//! the one the serving deployment was created with (the platform's raw
//! copy), as a line diff, or "code changed" when the configs are equal and
//! the content hashes are not. The `secrets` entry is told apart by
//! parsing both configs (`secrets`): its text never reaches the diff, its
//! names are compared on their own, and the rest is scrubbed of every
//! secret value; the section then goes through the summary's redacting
//! sink like any output.

use std::fmt::Write as _;

use super::secrets::{self, Parts, Untold};
use crate::ci::markdown;

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
    /// The deployment compared with; `None` when none could be read.
    pub(crate) serving: Option<String>,
    pub(crate) what: What,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum What {
    /// The configs differ.
    Config(ConfigDiff),
    /// Same config, other content hash.
    CodeOnly,
    /// Same config, and the serving deployment records no hash to compare.
    ConfigSame,
    /// Same config and same hash: the same source deploys again.
    Same,
    /// Nothing to compare with: why.
    Unknown(String),
}

/// Two configs that differ, with their secrets apart.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ConfigDiff {
    /// The line diff of the text outside `secrets` (`-` serving, `+` this
    /// truss), scrubbed; empty when only `secrets` differs; `Err` with why
    /// it is not shown.
    pub(crate) lines: Result<String, Hidden>,
    /// The secrets' names.
    pub(crate) names: Names,
}

/// Which config.yaml.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ConfigOf {
    Ours,
    Serving,
}

impl std::fmt::Display for ConfigOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConfigOf::Ours => "this truss's",
            ConfigOf::Serving => "the serving deployment's",
        })
    }
}

/// Why the line diff is not shown.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum Hidden {
    #[error("{0} config.yaml could not be parsed ({1}), so its secrets cannot be told apart")]
    Unparsed(ConfigOf, Untold),
    #[error("in {0} config.yaml, {1}")]
    Uncut(ConfigOf, Untold),
}

/// The secrets' names on both sides (values are never compared in view).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Names {
    /// This truss's names.
    pub(crate) ours: Vec<String>,
    pub(crate) added: Vec<String>,
    pub(crate) removed: Vec<String>,
    /// Whether the `secrets` entries' text differs (a value, a comment or
    /// the layout), said without showing any of it.
    pub(crate) text_differs: bool,
}

/// Decides what changes. `theirs` is the serving deployment's raw config
/// (or why it is missing), `same_hash` whether its recorded hash equals
/// ours (`None`: it records none).
pub(crate) fn change(
    ours: &str,
    theirs: Result<&str, &dyn std::fmt::Display>,
    same_hash: Option<bool>,
) -> What {
    let theirs = match theirs {
        Ok(t) => t,
        Err(why) => return What::Unknown(why.to_string()),
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
    What::Config(config_diff(ours, theirs))
}

/// The diff of two configs that differ, their secrets apart.
fn config_diff(ours: &str, theirs: &str) -> ConfigDiff {
    let (o, t) = match (secrets::split(ours), secrets::split(theirs)) {
        (Ok(o), Ok(t)) => (o, t),
        (o, t) => {
            let names =
                |p: &Result<Parts, Untold>| p.as_ref().map(|p| p.names.clone()).unwrap_or_default();
            let why = match (&o, &t) {
                (Err(e), _) => Hidden::Unparsed(ConfigOf::Ours, e.clone()),
                (_, Err(e)) => Hidden::Unparsed(ConfigOf::Serving, e.clone()),
                _ => unreachable!("one side failed"),
            };
            return ConfigDiff {
                lines: Err(why),
                names: Names {
                    ours: names(&o),
                    text_differs: true,
                    ..Names::default()
                },
            };
        }
    };
    let names = Names {
        added: o
            .names
            .iter()
            .filter(|n| !t.names.contains(n))
            .cloned()
            .collect(),
        removed: t
            .names
            .iter()
            .filter(|n| !o.names.contains(n))
            .cloned()
            .collect(),
        ours: o.names.clone(),
        text_differs: o.secrets_differ(&t),
    };
    let lines = match (&t.rest, &o.rest) {
        (Ok(old), Ok(new)) => Ok(secrets::scrub(&line_diff(old, new), &[&o, &t])),
        (Err(why), _) => Err(Hidden::Uncut(ConfigOf::Serving, why.clone())),
        (_, Err(why)) => Err(Hidden::Uncut(ConfigOf::Ours, why.clone())),
    };
    ConfigDiff { lines, names }
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

/// The Markdown section for the summary and the pull-request comment.
pub(crate) fn markdown(c: &Change) -> String {
    let env = markdown::inline(&c.environment);
    let mut out = format!("### What changes in {env}\n\n");
    if let Some(serving) = &c.serving {
        let _ = write!(
            out,
            "Compared with deployment {}, read from {env} before the deploy.\n\n",
            markdown::code(serving)
        );
    }
    match &c.what {
        What::Config(d) => {
            match &d.lines {
                Ok(lines) if lines.is_empty() => {}
                Ok(lines) => {
                    out.push_str("config.yaml changes (`-` serving, `+` this truss; `secrets` left out):\n\n");
                    out.push_str(&markdown::fenced(lines, "diff"));
                }
                Err(why) => {
                    let _ = writeln!(
                        out,
                        "config.yaml changes; the diff is not shown: {}.",
                        markdown::inline(&why.to_string())
                    );
                }
            }
            out.push('\n');
            out.push_str(&names(&d.names));
        }
        What::CodeOnly => out.push_str(
            "**Code changed**: config.yaml is the same; other files of the truss differ (the content hashes differ).\n",
        ),
        What::ConfigSame => out.push_str(
            "config.yaml is the same; the serving deployment records no content hash, so whether other files changed is not known.\n",
        ),
        What::Same => out.push_str("The same source (config.yaml and content hash equal) deploys again.\n"),
        What::Unknown(why) => {
            let _ = writeln!(out, "Not compared: {}.", markdown::inline(why));
        }
    }
    out
}

/// The secrets' line: names only, never a value.
fn names(n: &Names) -> String {
    let list = |v: &[String]| {
        v.iter()
            .map(|x| markdown::code(x))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if n.ours.is_empty() && n.removed.is_empty() {
        // No names (none, or a list): only whether the entry changed.
        return match n.text_differs {
            true => "The `secrets` entry's text differs (values are never shown).\n".into(),
            false => String::new(),
        };
    }
    let mut out = format!(
        "Secrets (names only; values are never shown): {}",
        match n.ours.is_empty() {
            true => "none".to_string(),
            false => list(&n.ours),
        }
    );
    if !n.added.is_empty() {
        let _ = write!(out, "; added {}", list(&n.added));
    }
    if !n.removed.is_empty() {
        let _ = write!(out, "; removed {}", list(&n.removed));
    }
    if n.added.is_empty() && n.removed.is_empty() {
        out.push_str(match n.text_differs {
            true => "; the `secrets` entry's text differs",
            false => "; unchanged",
        });
    }
    out.push_str(".\n");
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_changed_accelerator_is_one_line_out_one_in() {
        let theirs = "model_name: m\nresources:\n  cpu: '1'\n  accelerator: A10G\n  memory: 2Gi\npython_version: py311\n";
        let ours = "model_name: m\nresources:\n  cpu: '1'\n  accelerator: H100\n  memory: 2Gi\npython_version: py311\n";
        let What::Config(d) = change(ours, Ok(theirs), Some(false)) else {
            panic!("no diff")
        };
        assert_eq!(
            d.lines.unwrap(),
            "  resources:\n    cpu: '1'\n-   accelerator: A10G\n+   accelerator: H100\n    memory: 2Gi\n  python_version: py311\n"
        );
        assert_eq!(d.names, Names::default());
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
        let d = d.lines.unwrap();
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
            change(c, Err(&"no raw config"), Some(false)),
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
    fn secret_values_never_show_and_names_do() {
        let theirs = "model_name: m\nsecrets:\n  hf_token: null\n  openai: sk-live-old\n";
        let ours = "model_name: m\nsecrets:\n  hf_token: null\n  openai: sk-live-new\n  extra: hunter2\nenvironment_variables: {}\n";
        let c = Change {
            environment: "production".into(),
            serving: Some("d1".into()),
            what: change(ours, Ok(theirs), Some(false)),
        };
        let md = markdown(&c);
        assert!(!md.contains("sk-live") && !md.contains("hunter2"), "{md}");
        assert!(md.contains("+ environment_variables: {}"), "{md}");
        assert!(
            md.contains("Secrets (names only; values are never shown): `hf_token`, `openai`, `extra`; added `extra`."),
            "{md}"
        );
        // Only a value changed: no diff, and the names say the text differs.
        let ours = theirs.replace("sk-live-old", "sk-live-new");
        let md = markdown(&Change {
            what: change(&ours, Ok(theirs), Some(false)),
            ..c.clone()
        });
        assert!(!md.contains("```") && !md.contains("sk-live"), "{md}");
        assert!(
            md.contains("`openai`; the `secrets` entry's text differs."),
            "{md}"
        );
        // A list names nothing: only that the entry changed is said.
        let md = markdown(&Change {
            what: change(
                "secrets: [sk-live-one]\n",
                Ok("secrets: [sk-live-two]\n"),
                None,
            ),
            ..c.clone()
        });
        assert!(!md.contains("sk-live"), "{md}");
        assert!(
            md.ends_with("\nThe `secrets` entry's text differs (values are never shown).\n"),
            "{md}"
        );
        // A config the parser refuses shows nothing of itself.
        let md = markdown(&Change {
            what: change(
                "model_name: m\n",
                Ok("secrets: [\n  tok: sk-live-x\n"),
                None,
            ),
            ..c
        });
        assert!(!md.contains("sk-live"), "{md}");
        assert!(
            md.contains(
                "the diff is not shown: the serving deployment's config.yaml could not be parsed"
            ),
            "{md}"
        );
    }

    #[test]
    fn the_section_cannot_be_closed_or_marked_up_by_its_text() {
        let c = Change {
            environment: "prod <b>|x".into(),
            serving: Some("d`1".into()),
            what: What::Config(ConfigDiff {
                lines: Ok("+ a: ```\n".into()),
                names: Names::default(),
            }),
        };
        let md = markdown(&c);
        assert!(md.contains("````diff\n+ a: ```\n````\n"), "{md}");
        assert!(
            md.starts_with("### What changes in prod &lt;b&gt;\\|x\n"),
            "{md}"
        );
        assert!(
            md.contains("read from prod &lt;b&gt;\\|x before the deploy."),
            "{md}"
        );
        let c = Change {
            serving: None,
            what: What::Unknown("the environment could not be read (500)".into()),
            ..c
        };
        assert!(
            markdown(&c).ends_with("\n\nNot compared: the environment could not be read (500).\n"),
            "{}",
            markdown(&c)
        );
    }

    /// How a secret's value is written: every scalar style YAML has.
    #[derive(Clone, Copy, Debug)]
    enum Style {
        Plain,
        /// `'…'`, with a doubled quote inside.
        Single,
        /// `"…"` over two lines, each fragment's first letter escaped
        /// (`\x73`): the source never holds the parsed value.
        DoubleEscaped,
        /// `|`, a PEM's lines.
        Literal,
        /// `>`.
        Folded,
        /// `>-`.
        FoldedStrip,
    }

    const STYLES: [Style; 6] = [
        Style::Plain,
        Style::Single,
        Style::DoubleEscaped,
        Style::Literal,
        Style::Folded,
        Style::FoldedStrip,
    ];

    /// One way YAML lets a config write its `secrets`.
    #[derive(Clone, Copy, Debug)]
    enum Form {
        /// Each value under its name, in a style.
        Direct(Style),
        NextLine,
        QuotedKey,
        SpaceBeforeColon,
        Flow,
        AnchorInside,
        /// Each value an alias of an anchor written elsewhere, in a style.
        AnchorOutside(Style),
        List,
    }

    fn forms() -> Vec<Form> {
        let mut forms: Vec<Form> = STYLES.iter().map(|s| Form::Direct(*s)).collect();
        forms.extend(STYLES.iter().map(|s| Form::AnchorOutside(*s)));
        forms.extend([
            Form::NextLine,
            Form::QuotedKey,
            Form::SpaceBeforeColon,
            Form::Flow,
            Form::AnchorInside,
            Form::List,
        ]);
        forms
    }

    /// A value (its fragments, each starting `sv`) written in `style`
    /// after a key, continuation lines at `indent`.
    fn written(style: Style, v: &[String], indent: &str) -> String {
        let block = |indicator: &str| {
            let mut out = format!("{indicator}\n{indent}-----BEGIN PRIVATE KEY-----\n");
            for l in v {
                let _ = writeln!(out, "{indent}{l}");
            }
            let _ = write!(out, "{indent}-----END PRIVATE KEY-----");
            out
        };
        match style {
            Style::Plain => v.join(""),
            Style::Single => format!("'{}'", v.join("''")),
            Style::DoubleEscaped => {
                let escaped: Vec<String> = v.iter().map(|l| format!("\\x73{}", &l[1..])).collect();
                format!("\"{}\"", escaped.join(&format!("\n{indent}")))
            }
            Style::Literal => block("|"),
            Style::Folded => block(">"),
            Style::FoldedStrip => block(">-"),
        }
    }

    /// A config with `secrets` written in `form`: its text, its names and
    /// what of every value must never be shown (each fragment but its
    /// first letter, which the escaped form writes as `\x73`; a PEM's
    /// lines).
    fn config(
        form: Form,
        secrets: &[(String, Vec<String>)],
        accelerator: &str,
        secrets_first: bool,
    ) -> (String, Vec<String>, Vec<String>) {
        let mut block = String::new();
        let mut outside = String::new();
        let names: Vec<String> = secrets.iter().map(|(n, _)| n.clone()).collect();
        let mut values: Vec<String> = Vec::new();
        let one = |lines: &[String]| lines.join("");
        let mut pem = false;
        match form {
            Form::Flow => {
                let items: Vec<String> = secrets
                    .iter()
                    .map(|(n, v)| format!("{n}: {}", one(v)))
                    .collect();
                block = format!("secrets: {{{}}}\n", items.join(", "));
            }
            Form::List => {
                block.push_str("secrets:\n");
                for (_, v) in secrets {
                    let _ = writeln!(block, "  - {}", one(v));
                }
            }
            _ => {
                block.push_str(match form {
                    Form::QuotedKey => "'secrets':\n",
                    Form::SpaceBeforeColon => "secrets :\n",
                    _ => "secrets:\n",
                });
                for (k, (n, v)) in secrets.iter().enumerate() {
                    match form {
                        Form::Direct(style) => {
                            pem |= matches!(
                                style,
                                Style::Literal | Style::Folded | Style::FoldedStrip
                            );
                            let _ = writeln!(block, "  {n}: {}", written(style, v, "    "));
                        }
                        Form::NextLine => {
                            let _ = writeln!(block, "  {n}:\n    {}", one(v));
                        }
                        Form::AnchorInside if k > 0 => {
                            let _ = writeln!(block, "  {n}: *first");
                        }
                        Form::AnchorInside => {
                            let _ = writeln!(block, "  {n}: &first {}", one(v));
                        }
                        Form::AnchorOutside(style) => {
                            pem |= matches!(
                                style,
                                Style::Literal | Style::Folded | Style::FoldedStrip
                            );
                            let _ =
                                writeln!(outside, "  V{k}: &v{k} {}", written(style, v, "    "));
                            let _ = writeln!(block, "  {n}: *v{k}");
                        }
                        _ => {
                            let _ = writeln!(block, "  {n}: {}", one(v));
                        }
                    }
                }
            }
        }
        for (_, v) in secrets {
            values.extend(v.iter().map(|l| l[1..].to_string()));
        }
        if pem {
            values.push("-----BEGIN PRIVATE KEY-----".into());
            values.push("-----END PRIVATE KEY-----".into());
        }
        let mut text = String::from("model_name: m\n");
        if !outside.is_empty() {
            text.push_str("environment_variables:\n");
            text.push_str(&outside);
        }
        let resources = format!("resources:\n  cpu: '1'\n  accelerator: {accelerator}\n");
        match secrets_first {
            true => text = format!("{text}{block}# a comment\n{resources}"),
            false => text = format!("{text}{resources}{block}"),
        }
        let names = match form {
            Form::List => Vec::new(),
            _ => names,
        };
        (text, names, values)
    }

    fn secrets_strategy() -> impl Strategy<Value = Vec<(String, Vec<String>)>> {
        proptest::collection::vec(
            (
                "nm_[a-z]{4,8}",
                proptest::collection::vec("sv[A-Za-z0-9+/]{10,20}", 1..4),
            ),
            1..4,
        )
        .prop_filter("distinct names", |v| {
            let mut n: Vec<&String> = v.iter().map(|(n, _)| n).collect();
            n.sort();
            n.dedup();
            n.len() == v.len()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// In every form YAML allows, every scalar style written under
        /// the entry or aliased from an anchor elsewhere, on either side
        /// and in any mix, no secret value nor any line of one reaches
        /// the section, the names do, and the rest of the config is
        /// still diffed.
        #[test]
        fn no_secret_value_reaches_the_section(
            ours_form in 0..forms().len(),
            theirs_form in 0..forms().len(),
            ours_secrets in secrets_strategy(),
            theirs_secrets in secrets_strategy(),
            ours_first in any::<bool>(),
            theirs_first in any::<bool>(),
        ) {
            let (ours, our_names, mut values) =
                config(forms()[ours_form], &ours_secrets, "H100", ours_first);
            let (theirs, their_names, their_values) =
                config(forms()[theirs_form], &theirs_secrets, "A10G", theirs_first);
            values.extend(their_values);
            for text in [&ours, &theirs] {
                let doc = crate::truss_config::yaml11::parse(text.as_bytes());
                prop_assert!(doc.is_ok(), "not YAML: {text}");
            }
            let what = change(&ours, Ok(&theirs), Some(false));
            let md = markdown(&Change {
                environment: "production".into(),
                serving: Some("d1".into()),
                what: what.clone(),
            });
            for v in &values {
                prop_assert!(!md.contains(v.as_str()), "{v:?} shown:\n{md}\n--- ours\n{ours}\n--- theirs\n{theirs}");
            }
            for n in &our_names {
                prop_assert!(md.contains(&format!("`{n}`")), "{n} not named:\n{md}");
            }
            for n in their_names.iter().filter(|n| !our_names.contains(n)) {
                prop_assert!(md.contains(&format!("removed `{n}`")) || md.contains(&format!(", `{n}`")), "{n} not named:\n{md}");
            }
            let What::Config(d) = what else {
                return Err(TestCaseError::fail("the configs differ"));
            };
            let lines = d.lines.map_err(|e| TestCaseError::fail(format!("not diffed: {e}\n{ours}\n{theirs}")))?;
            prop_assert!(lines.contains("-   accelerator: A10G\n+   accelerator: H100\n"), "{lines}");
        }
    }
}
