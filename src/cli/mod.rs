//! The command line and its environment fallbacks: stage one of the inputs.
//!
//! Every input can be given four ways: as a flag, as the GitHub
//! Docker-action variable `INPUT_NAME-WITH-HYPHENS`, as
//! `INPUT_NAME_WITH_UNDERSCORES`, or as a plain variable. Precedence is in
//! that order and an empty value means "not given", because GitHub passes
//! unset inputs as empty strings. Each input is declared once, in `INPUTS`:
//! the clap definition, the environment names, the default and the kind of
//! value all come from that table, and code names an input by the `Input`
//! enum, so a misspelt one does not compile. This module only gathers raw
//! strings (a value that is not UTF-8 is refused); `crate::config`
//! validates them. A refused command line still says what it can
//! (`Cli::salvage`: an unknown flag dropped with its value, so `--json`
//! holds in every order).

use std::collections::BTreeMap;
use std::env::VarError;
use std::ffi::OsString;

use clap::{Arg, ArgAction, ArgMatches, Command};

pub mod commands;
mod inputs;

/// Reads one environment variable the way `std::env::var` does, so that a
/// value which is not UTF-8 is told apart from an unset one.
pub(crate) type EnvLookup<'a> = &'a (dyn Fn(&str) -> Result<String, VarError> + Sync);

pub(crate) use inputs::ValueKind;
pub use inputs::{INPUTS, Input, InputSpec};

/// The environment names an input is read from, in precedence order.
pub fn env_names(spec: &InputSpec) -> [String; 3] {
    let upper = spec.name.to_ascii_uppercase();
    [
        format!("INPUT_{upper}"),
        format!("INPUT_{}", upper.replace('-', "_")),
        spec.plain_env.to_string(),
    ]
}

/// The `--help` line of an input: its text, its range, its plain variable
/// and its default.
fn help_line(spec: &InputSpec) -> String {
    let mut line = spec.help.to_string();
    if let ValueKind::Number(r) = spec.kind {
        line.push_str(&format!(" [range: {} to {}]", r.min, r.max));
    }
    line.push_str(&format!(" [env: {}]", spec.plain_env));
    if let Some(d) = spec.default {
        line.push_str(&format!(" [default: {d}]"));
    }
    line
}

/// The clap definition, built from `INPUTS`. Every flag takes its value as
/// an OS string so that a value which is not UTF-8 reaches `gather`, which
/// names the flag, instead of clap refusing it without saying which.
pub(crate) fn command() -> Command {
    let mut cmd = Command::new("truss-push")
        .version(env!("CARGO_PKG_VERSION"))
        .about(env!("CARGO_PKG_DESCRIPTION"))
        // Repeating a flag is not an error: the last value wins.
        .args_override_self(true);
    for spec in INPUTS {
        let mut arg = Arg::new(spec.name)
            .long(spec.name)
            .value_name(spec.kind.value_name())
            .value_parser(clap::value_parser!(OsString))
            .action(ArgAction::Set)
            .help(help_line(spec));
        if let Some(heading) = spec.heading {
            arg = arg.help_heading(heading);
        }
        if spec.kind == ValueKind::Switch {
            arg = arg.num_args(0..=1).default_missing_value("true");
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

/// Whether the argument `arg` is the one clap refused: `bad` as clap names
/// it, or its `flag` alone, with `=value`, or (a short flag) with its value
/// attached (`-zx`) or in a cluster (`-zq`).
fn names(arg: &str, bad: &str, flag: &str) -> bool {
    let short = flag.len() == 2 && flag.starts_with('-') && flag != "--";
    arg == bad
        || arg == flag
        || arg.starts_with(&format!("{flag}="))
        || (short && arg.starts_with(flag) && !arg.starts_with("--"))
}

/// The parsed command line: the flags that were given, by input name.
/// Its `Debug` shows a secret input (the API key, the GitHub token) as
/// `***`.
#[derive(Default)]
pub struct Cli {
    flags: BTreeMap<&'static str, OsString>,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli")
            .field("flags", &Masked(&self.flags))
            .finish()
    }
}

/// Input values by name, each secret input's shown as `***`: a raw value
/// is not yet a `Secret`, and a `Debug` of it must not print the key.
struct Masked<'a, V>(&'a BTreeMap<&'static str, V>);

impl<V: std::fmt::Debug> std::fmt::Debug for Masked<'_, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |name: &str| {
            INPUTS
                .iter()
                .any(|s| s.name == name && s.kind == ValueKind::Secret)
        };
        f.debug_map()
            .entries(self.0.iter().map(|(name, v)| {
                let shown: &dyn std::fmt::Debug = if secret(name) { &"***" } else { v };
                (name, shown)
            }))
            .finish()
    }
}

impl Cli {
    /// Parses the process's arguments; `--help` and `--version` come back as
    /// errors whose `use_stderr()` is false.
    pub fn try_parse() -> Result<Self, clap::Error> {
        Ok(Self::from_matches(command().try_get_matches()?))
    }

    /// Parses `args` (the first is the program name).
    pub fn try_parse_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Ok(Self::from_matches(command().try_get_matches_from(args)?))
    }

    /// What can still be read from a command line clap refused (an unknown
    /// flag, a missing value): the flags it holds that parse, so that a
    /// parse error is reported where the user asked (`--json`,
    /// `--output-file`) and with the secrets it names masked.
    pub fn salvage() -> Self {
        Self::salvage_from(std::env::args_os())
    }

    /// [`Cli::salvage`] over `args` (the first is the program name).
    pub fn salvage_from<I, T>(args: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        // truss-push takes no positional argument, so a bare `--` ends
        // nothing: it is dropped with the plain words after it, and the
        // flags after those still count (`-- x --json` still asks for the
        // document; kept, `x` would become `--json`'s value).
        let mut kept = Vec::with_capacity(args.len());
        let mut after_dashes = false;
        for (i, a) in args.into_iter().enumerate() {
            let text = a.to_string_lossy();
            if i > 0 && text == "--" {
                after_dashes = true;
                continue;
            }
            if after_dashes && !text.starts_with('-') {
                continue;
            }
            after_dashes = false;
            kept.push(a);
        }
        args = kept;
        // Each refusal names the argument it stumbled on: drop it and read
        // the rest again, until clap accepts them or names nothing more.
        while args.len() > 1 {
            let e = match command().try_get_matches_from(&args) {
                Ok(m) => return Self::from_matches(m),
                Err(e) => e,
            };
            let bad = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::String(a)) => a.clone(),
                _ => break,
            };
            let flag = bad.split([' ', '=']).next().unwrap_or_default().to_string();
            let Some(at) = args
                .iter()
                .skip(1)
                .position(|a| names(&a.to_string_lossy(), &bad, &flag))
            else {
                break;
            };
            let removed = args.remove(at + 1).to_string_lossy().into_owned();
            // An unknown flag written apart from its value (`--bogus x`,
            // `-z x`, `-zq x`) takes the value with it: left behind, `x`
            // would become the value of the flag before (`--json --bogus
            // x` would read as `--json x`) or a stray argument.
            let unknown = e.kind() == clap::error::ErrorKind::UnknownArgument;
            let apart = removed.starts_with('-') && !removed.contains('=');
            if unknown
                && apart
                && args
                    .get(at + 1)
                    .is_some_and(|next| !next.to_string_lossy().starts_with('-'))
            {
                args.remove(at + 1);
            }
        }
        command()
            .ignore_errors(true)
            .try_get_matches_from(&args)
            .map(Self::from_matches)
            .unwrap_or_default()
    }

    /// Like `try_parse_from`, panicking on a parse error (tests).
    pub fn parse_from<I, T>(args: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Self::try_parse_from(args).unwrap_or_else(|e| panic!("{e}"))
    }

    fn from_matches(mut m: ArgMatches) -> Self {
        let flags = INPUTS
            .iter()
            .filter_map(|spec| Some((spec.name, m.remove_one::<OsString>(spec.name)?)))
            .collect();
        Self { flags }
    }

    /// Gathers every input from flags and the environment. `env` is the
    /// environment lookup (a parameter so tests need no `set_var`).
    pub(crate) fn gather(&self, env: EnvLookup<'_>) -> Inputs {
        let mut inputs = Inputs::default();
        for spec in INPUTS {
            let from_flag = self
                .flags
                .get(spec.name)
                .map(|v| (format!("--{}", spec.name), v.clone().into_string()));
            let from_env = env_names(spec).into_iter().map(|n| {
                let v = env(&n).map_err(|e| match e {
                    VarError::NotPresent => OsString::new(),
                    VarError::NotUnicode(raw) => raw,
                });
                (n, v)
            });
            for (source, value) in from_flag.into_iter().chain(from_env) {
                match value {
                    Ok(v) if v.trim().is_empty() => {}
                    Ok(v) => {
                        inputs.values.insert(spec.name, v);
                        break;
                    }
                    // Unset.
                    Err(raw) if raw.is_empty() => {}
                    // Never fall back to a later spelling: treating this one
                    // as unset could turn a mangled dry-run into a real
                    // deploy. The value itself is not shown: it may be the
                    // key.
                    Err(_) => {
                        inputs.problems.push(format!(
                            "{source} (input {}) is not valid UTF-8: inputs must be text; fix the value where it is set",
                            spec.name
                        ));
                        break;
                    }
                }
            }
        }
        inputs
    }
}

/// Raw input values by input name; absent means not given. Its `Debug`
/// shows a secret input as `***`.
#[derive(Clone, Default)]
pub struct Inputs {
    values: BTreeMap<&'static str, String>,
    problems: Vec<String>,
}

impl std::fmt::Debug for Inputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("values", &Masked(&self.values))
            .field("problems", &self.problems)
            .finish()
    }
}

impl Inputs {
    /// The raw value, untrimmed (JSON and paths keep their spaces).
    pub fn get(&self, input: Input) -> Option<&str> {
        self.values.get(input.name()).map(String::as_str)
    }

    /// The value trimmed of surrounding whitespace.
    pub fn trimmed(&self, input: Input) -> Option<&str> {
        self.get(input).map(str::trim)
    }

    /// The trimmed value, or the input's declared default.
    pub(crate) fn or_default(&self, input: Input) -> Option<&str> {
        self.trimmed(input).or(input.spec().default)
    }

    /// Inputs that could not be read at all (not UTF-8), one message each.
    pub(crate) fn problems(&self) -> &[String] {
        &self.problems
    }

    /// These inputs with `name` set to `value`: one target's inputs when a
    /// run deploys several.
    pub(crate) fn with(&self, input: Input, value: &str) -> Inputs {
        let mut inputs = self.clone();
        inputs.values.insert(input.name(), value.to_string());
        inputs
    }

    #[cfg(test)]
    pub fn from_pairs(pairs: &[(&'static str, &str)]) -> Self {
        Self {
            values: pairs.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            problems: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_names_its_own_declaration() {
        assert_eq!(Input::ALL.len(), INPUTS.len());
        for (i, input) in Input::ALL.iter().enumerate() {
            assert_eq!(*input as usize, i);
            let camel: String = input
                .name()
                .split('-')
                .map(|w| w[..1].to_ascii_uppercase() + &w[1..])
                .collect();
            assert_eq!(format!("{input:?}"), camel);
        }
    }
    use std::collections::HashMap;

    fn lookup(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Result<String, VarError> {
        let env: HashMap<&str, &str> = pairs.iter().copied().collect();
        move |k: &str| {
            env.get(k)
                .map(|v| v.to_string())
                .ok_or(VarError::NotPresent)
        }
    }

    fn unset(_: &str) -> Result<String, VarError> {
        Err(VarError::NotPresent)
    }

    #[test]
    fn cli_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn every_input_has_a_flag_and_a_valid_default() {
        let cmd = command();
        for spec in INPUTS {
            assert!(
                cmd.get_arguments().any(|a| a.get_long() == Some(spec.name)),
                "no --{}",
                spec.name
            );
            if let (ValueKind::Number(r), Some(d)) = (spec.kind, spec.default) {
                let d: f64 = d.parse().unwrap();
                assert!(r.min <= d && d <= r.max, "default of {}", spec.name);
            }
        }
    }

    #[test]
    fn four_spellings_with_precedence_and_empty_as_unset() {
        let lookup = lookup(&[
            ("INPUT_MODEL-NAME", "hyphen"),
            ("INPUT_MODEL_NAME", "underscore"),
            ("MODEL_NAME", "plain"),
            ("INPUT_TEAM", ""),
            ("TEAM", "ml"),
            ("INPUT_DEPLOY_TIMEOUT_MINUTES", "60"),
            ("DEPLOY_TIMEOUT_MINUTES", "30"),
            ("ENVIRONMENT", "   "),
        ]);
        let cli = Cli::parse_from(["truss-push", "--labels", "{}"]);
        let got = cli.gather(&lookup);
        assert_eq!(got.get(Input::ModelName), Some("hyphen"));
        assert_eq!(got.get(Input::Team), Some("ml"));
        assert_eq!(got.get(Input::DeployTimeoutMinutes), Some("60"));
        assert_eq!(got.get(Input::Environment), None);
        assert_eq!(got.get(Input::Labels), Some("{}"));
        let cli = Cli::parse_from(["truss-push", "--model-name", "flag"]);
        assert_eq!(cli.gather(&lookup).get(Input::ModelName), Some("flag"));
        let cli = Cli::parse_from(["truss-push", "--model-name", ""]);
        assert_eq!(cli.gather(&lookup).get(Input::ModelName), Some("hyphen"));
    }

    #[test]
    fn a_value_that_is_not_utf8_is_a_problem_not_a_fallback() {
        use std::os::unix::ffi::OsStringExt;
        let bad = || OsString::from_vec(b"tru\xffe".to_vec());
        let env = |k: &str| match k {
            "INPUT_DRY-RUN" => Err(VarError::NotUnicode(bad())),
            "TRUSS_PUSH_DRY_RUN" => Ok("false".to_string()),
            _ => Err(VarError::NotPresent),
        };
        let got = Cli::default().gather(&env);
        assert_eq!(got.get(Input::DryRun), None);
        assert_eq!(got.problems().len(), 1);
        assert!(got.problems()[0].starts_with("INPUT_DRY-RUN (input dry-run)"));
        let cli = Cli::parse_from([OsString::from("truss-push"), "--team".into(), bad()]);
        let got = cli.gather(&unset);
        assert!(
            got.problems()[0].starts_with("--team "),
            "{:?}",
            got.problems()
        );
    }

    #[test]
    fn a_refused_command_line_keeps_the_flags_that_parse() {
        for args in [
            &["truss-push", "--json", "--bogus", "--output-file", "o.json"][..],
            &[
                "truss-push",
                "--output-file=o.json",
                "--json",
                "true",
                "stray",
            ],
            &["truss-push", "--json", "--output-file=o.json", "--team"],
            // An unknown flag with a value, first, in the middle, last.
            &[
                "truss-push",
                "--bogus-flag",
                "x",
                "--json",
                "--output-file=o.json",
            ],
            &[
                "truss-push",
                "--output-file=o.json",
                "--json",
                "--bogus-flag",
                "x",
            ],
            &[
                "truss-push",
                "--json",
                "--bogus-flag",
                "x",
                "--output-file",
                "o.json",
            ],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
            let got = Cli::salvage_from(args).gather(&unset);
            assert_eq!(got.get(Input::Json), Some("true"), "{args:?}");
            assert_eq!(got.get(Input::OutputFile), Some("o.json"), "{args:?}");
        }
    }

    /// Every order of `--json`, `--output-file o.json` and an unknown
    /// flag written each way (long or short, its value apart, joined by
    /// `=` or attached, none, a cluster) or a bare `--` with or without
    /// words after it: the known flags survive.
    #[test]
    fn every_order_of_known_and_unknown_flags_keeps_the_known_ones() {
        let unknown: [&[&str]; 12] = [
            &["--bogus", "x"],
            &["--bogus=x"],
            &["--bogus"],
            &["-z", "x"],
            &["-z=x"],
            &["-zx"],
            &["-z"],
            &["-zq", "x"],
            &["--"],
            &["--", "x", "y"],
            &["--bogus", "x", "-z", "y"],
            &["-z", "--", "x"],
        ];
        let json: &[&str] = &["--json"];
        let file: &[&str] = &["--output-file", "o.json"];
        for u in unknown {
            for order in [
                [json, file, u],
                [json, u, file],
                [u, json, file],
                [file, json, u],
                [file, u, json],
                [u, file, json],
            ] {
                let args: Vec<&str> = std::iter::once("truss-push")
                    .chain(order.iter().flat_map(|g| g.iter().copied()))
                    .collect();
                let got = Cli::salvage_from(&args).gather(&unset);
                assert_eq!(got.get(Input::Json), Some("true"), "{args:?}");
                assert_eq!(got.get(Input::OutputFile), Some("o.json"), "{args:?}");
            }
        }
    }

    /// The key and the token, gathered from a flag or the environment,
    /// never show in a `Debug` of what holds them before validation.
    #[test]
    fn debug_of_the_raw_inputs_never_shows_a_secret() {
        let env = lookup(&[
            ("INPUT_BASETEN-API-KEY", "sk-debug-canary-env"),
            ("GITHUB_TOKEN", "ghp-debug-canary"),
            ("INPUT_GITHUB-TOKEN", "ghp-debug-canary"),
            ("TEAM", "ml"),
        ]);
        for args in [
            &["truss-push"][..],
            &["truss-push", "--baseten-api-key", "sk-debug-canary-flag"],
            &["truss-push", "--github-token=ghp-debug-canary", "--bogus"],
        ] {
            let cli = Cli::salvage_from(args);
            let inputs = cli.gather(&env);
            assert!(inputs.get(Input::BasetenApiKey).is_some());
            let shown = format!("{cli:?} {inputs:?} {inputs:#?}");
            for secret in ["sk-debug-canary", "ghp-debug-canary"] {
                assert!(!shown.contains(secret), "{args:?}: {shown}");
            }
            assert!(shown.contains("\"team\": \"ml\""), "{shown}");
            assert!(shown.contains("\"baseten-api-key\": \"***\""), "{shown}");
        }
    }

    #[test]
    fn a_repeated_flag_keeps_the_last_value() {
        let cli = Cli::parse_from(["truss-push", "--team", "a", "--team=b"]);
        assert_eq!(cli.gather(&unset).get(Input::Team), Some("b"));
    }

    #[test]
    fn dry_run_flag_needs_no_value() {
        let cli = Cli::parse_from(["truss-push", "--dry-run"]);
        assert_eq!(cli.gather(&unset).get(Input::DryRun), Some("true"));
        let cli = Cli::parse_from(["truss-push", "--dry-run", "false"]);
        assert_eq!(cli.gather(&unset).get(Input::DryRun), Some("false"));
    }

    #[test]
    fn defaults_apply_only_when_not_given() {
        let inputs = Inputs::from_pairs(&[("predict-timeout", " 20 ")]);
        assert_eq!(inputs.or_default(Input::PredictTimeout), Some("20"));
        assert_eq!(inputs.or_default(Input::DeployTimeoutMinutes), Some("45"));
        assert_eq!(inputs.or_default(Input::Team), None);
    }

    #[test]
    fn help_shows_env_range_and_default() {
        let help = command().render_long_help().to_string();
        for want in [
            "Deploy budget in minutes [range: 10 to 1440] [env: DEPLOY_TIMEOUT_MINUTES] [default: 45]",
            "--dry-run [<BOOL>]",
            "Baseten API key; never printed [env: BASETEN_API_KEY]",
            "Hosts:",
        ] {
            assert!(help.contains(want), "{want:?} in\n{help}");
        }
    }
}
