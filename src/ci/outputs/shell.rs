//! The shell outputs file: single-quoted assignments, safe to `source`.

use std::fmt::Write as _;

use super::Outputs;
use super::dotenv::dotenv_name;

/// Renders the outputs as POSIX shell assignments, one per output:
/// `TRUSS_PUSH_<NAME>='value'`, names as in the dotenv file. Every value is
/// single-quoted, with `'` written as `'\''`, so sourcing the file (`. file`)
/// only assigns: nothing in a value is expanded or run. Values keep their
/// line breaks and are as long as the outputs themselves; NUL characters,
/// which a shell variable cannot hold, are dropped. Use `set -a` before
/// sourcing to export them.
pub(super) fn render_shell(outputs: &Outputs) -> String {
    let mut text = String::new();
    for (name, value) in outputs.entries() {
        let _ = writeln!(text, "{}={}", dotenv_name(name), shell_quote(&value));
    }
    text
}

/// `value` as one POSIX single-quoted word.
fn shell_quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        match c {
            '\'' => quoted.push_str("'\\''"),
            '\0' => {}
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    quoted
}

#[cfg(test)]
mod tests {
    use super::super::tests::full_outputs;
    use super::*;

    #[test]
    fn shell_quoting_is_one_literal_word() {
        let cases = [
            ("plain", "'plain'"),
            ("", "''"),
            ("it's", "'it'\\''s'"),
            ("$(x) `y` $HOME \\", "'$(x) `y` $HOME \\'"),
            ("a\nb", "'a\nb'"),
            ("nul\0here", "'nulhere'"),
        ];
        for (raw, quoted) in cases {
            assert_eq!(shell_quote(raw), quoted, "{raw:?}");
        }
        let text = render_shell(&full_outputs());
        assert!(
            text.starts_with("TRUSS_PUSH_DEPLOYMENT_ID='dep456'\n"),
            "{text}"
        );
        assert!(text.contains("TRUSS_PUSH_STATUS='success'\n"), "{text}");
        assert_eq!(text.lines().count(), 15);
    }
}
