//! Pages generated from the code, and the facts other pages take from it:
//! `docs/reference.md` (every input from the input table, every output from
//! `action.yml` as the binary writes them, every exit code from
//! `src/outcome.rs`), the exit-code table in `docs/faq.md`, the input blocks
//! of the GitLab CI/CD components in `templates/`, the outputs
//! `docs/migrating.md` names, the config count the pages state, and the
//! README's first commands.
//!
//! A stale page fails here with the command that rewrites it:
//! `UPDATE_DOCS=1 cargo test --test it docs_reference`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml::Value;

use crate::harness::{PYTHON_ACTION_OUTPUTS, truss_push};

/// The input table itself, compiled here as it is in the crate, so the
/// pages read every field (kind, range, default, help, heading) that the
/// crate keeps to itself. It uses nothing but `std`.
#[allow(
    dead_code,
    unreachable_pub,
    reason = "the crate uses the rest of the table; the pages read only its fields"
)]
#[path = "../../src/cli/inputs.rs"]
mod table;

/// The commands and the inputs each reads, compiled here the same way.
#[allow(unreachable_pub, reason = "the crate's own visibility")]
#[path = "../../src/cli/commands.rs"]
mod commands;

use commands::Command as Cmd;
use table::{INPUTS, Input, InputSpec, Unit, ValueKind};

const REGENERATE: &str = "UPDATE_DOCS=1 cargo test --test it docs_reference";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `path` with what the code says it must hold; with
/// `UPDATE_DOCS=1` writes it instead.
fn check_generated(path: &Path, want: &str) {
    let rel = path.strip_prefix(repo()).unwrap_or(path).display();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        // Through a rename, so a test reading the file meanwhile (the
        // reference reads the components' headers) never sees half of it.
        let part = path.with_extension("part");
        std::fs::write(&part, want)
            .and_then(|()| std::fs::rename(&part, path))
            .unwrap_or_else(|e| panic!("writing {rel}: {e}"));
        return;
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    if have != want {
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "{rel} is stale: it differs from what the code says from line {} on\n  have: {:?}\n  want: {:?}\nregenerate it with: {REGENERATE}",
            line + 1,
            have.lines().nth(line).unwrap_or("<end of file>"),
            want.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

// ---------------------------------------------------------------- inputs

/// The `--help` section an input is listed under, or "Deploy" for the
/// inputs the Python action already had.
fn heading(spec: &InputSpec) -> &'static str {
    spec.heading.unwrap_or("Deploy")
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// What an input takes, as a reader would write it.
fn takes(kind: ValueKind) -> String {
    match kind {
        ValueKind::Path => "a path".into(),
        ValueKind::Secret => "a secret (masked, never printed)".into(),
        ValueKind::Name => "text".into(),
        ValueKind::Bool => "`true`/`false`".into(),
        ValueKind::Switch => "`true`/`false`, or the bare flag".into(),
        ValueKind::Json => "JSON".into(),
        ValueKind::Url => "an `https://` URL".into(),
        ValueKind::Template => "a URL with `{prefix}` and `{id}`".into(),
        ValueKind::Format => "`dotenv`, `shell` or `json`".into(),
        ValueKind::Number(r) => {
            let unit = match r.unit {
                Unit::Share => "(a share)".to_string(),
                u => u.word().to_string(),
            };
            let whole = if r.whole { ", whole" } else { "" };
            format!("{}–{} {unit}{whole}", number(r.min), number(r.max))
        }
    }
}

/// Text for a table cell: `|` would end the cell and `<n>` would be read
/// as an HTML tag.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn action() -> Value {
    let text = std::fs::read_to_string(repo().join("action.yml")).expect("action.yml");
    serde_yaml::from_str(&text).expect("action.yml is YAML")
}

fn action_inputs() -> BTreeSet<String> {
    action()["inputs"]
        .as_mapping()
        .expect("inputs")
        .keys()
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect()
}

fn inputs_section() -> String {
    let in_action = action_inputs();
    let mut headings: Vec<&str> = Vec::new();
    for spec in INPUTS {
        if !headings.contains(&heading(spec)) {
            headings.push(heading(spec));
        }
    }
    let mut out = String::new();
    for h in headings {
        out.push_str(&format!("\n### {h}\n\n"));
        out.push_str("| input | plain variable | default | takes | in `action.yml` | meaning |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for spec in INPUTS.iter().filter(|s| heading(s) == h) {
            let default = match spec.default {
                Some(d) => format!("`{d}`"),
                None if spec.name == "truss-directory" || spec.name == "baseten-api-key" => {
                    "required".into()
                }
                None => "—".into(),
            };
            let action = if in_action.contains(spec.name) {
                "yes"
            } else {
                "env only"
            };
            out.push_str(&format!(
                "| `{}` | `{}` | {} | {} | {} | {} |\n",
                spec.name,
                spec.plain_env,
                cell(&default),
                cell(&takes(spec.kind)),
                action,
                cell(spec.help),
            ));
        }
    }
    out
}

/// The action's own inputs (read by its install step, not the binary) and
/// each GitLab component's own inputs (job names, stages, the image), from
/// the files that declare them.
fn wrapper_inputs_section() -> String {
    let a = action();
    let mut out = String::from(
        "### Only in the GitHub action\n\n| input | default | meaning |\n|---|---|---|\n",
    );
    for (name, spec) in a["inputs"].as_mapping().expect("inputs") {
        let name = name.as_str().expect("input name");
        if INPUTS.iter().any(|s| s.name == name) {
            continue;
        }
        out.push_str(&format!(
            "| `{name}` | `{}` | {} |\n",
            spec["default"].as_str().unwrap_or_default(),
            cell(spec["description"].as_str().unwrap_or_default().trim()),
        ));
    }
    for path in templates() {
        let text = std::fs::read_to_string(&path).unwrap();
        let (header, _) = text.split_once("\n---\n").expect("a spec header");
        let header: Value = serde_yaml::from_str(header).expect("YAML");
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        out.push_str(&format!(
            "\n### Only in the GitLab component `templates/{file}`\n\n| input | default | meaning |\n|---|---|---|\n"
        ));
        for (name, spec) in header["spec"]["inputs"].as_mapping().expect("inputs") {
            let name = name.as_str().expect("input name");
            if INPUTS.iter().any(|s| s.name == name) {
                continue;
            }
            out.push_str(&format!(
                "| `{name}` | `{}` | {} |\n",
                spec["default"].as_str().unwrap_or_default(),
                cell(spec["description"].as_str().unwrap_or_default().trim()),
            ));
        }
    }
    out
}

// --------------------------------------------------------------- outputs

/// The outputs every run writes, in writing order, as the binary writes
/// them on the shortest path there is: a bad input (nothing is sent). The
/// JSON file is read as YAML, whose mapping keeps the writing order.
fn outputs_of_every_run() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let out = truss_push(dir.path())
        .args(["--output-file", "outputs.json"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2), "a run without truss-directory");
    let text = std::fs::read_to_string(dir.path().join("outputs.json")).expect("outputs file");
    let doc: Value = serde_yaml::from_str(&text).expect("outputs JSON");
    doc.as_mapping()
        .expect("an object")
        .keys()
        .map(|k| k.as_str().expect("a name").to_string())
        .collect()
}

fn outputs_section(every_run: &[String]) -> String {
    let a = action();
    let outputs = a["outputs"].as_mapping().expect("outputs");
    let mut out = String::from("| output | written | meaning |\n|---|---|---|\n");
    for (name, spec) in outputs {
        let name = name.as_str().expect("output name");
        let when = if every_run.iter().any(|n| n == name) {
            "every run"
        } else {
            "when it applies"
        };
        let description = spec["description"].as_str().unwrap_or_default().trim();
        out.push_str(&format!("| `{name}` | {when} | {} |\n", cell(description)));
    }
    out
}

// ------------------------------------------------------------ exit codes

/// What each exit code constant in `src/outcome.rs` means to a user.
const EXIT_MEANINGS: &[(&str, &str)] = &[
    ("EXIT_SUCCESS", "`success`"),
    ("EXIT_DEPLOY_FAILED", "`deploy_failed`"),
    (
        "EXIT_INVALID_INPUT",
        "`deploy_failed`: invalid input, or the platform's preflight refused the deploy — nothing was uploaded or created",
    ),
    ("EXIT_DEPLOY_TIMEOUT", "`deploy_timeout`"),
    ("EXIT_PREDICT_FAILED", "`predict_failed`"),
    (
        "EXIT_CLEANUP_FAILED",
        "`cleanup_failed`: the deactivate failed (without a signal); `deployment-id` names what may be left running, `error-message` and the error annotation say to deactivate it in Baseten. With `teardown` or `prune`: a retirement was refused or failed, or a model's deciding read (its environments, its audit log) failed or did not decide, so nothing of it was retired; `error-message` names each",
    ),
    (
        "EXIT_OUTPUTS_NOT_WRITTEN",
        "the deploy succeeded but `GITHUB_OUTPUT` or the outputs file could not be written; the error names which failed and which received the outputs (a failed run keeps its own code; `status` keeps the deploy's word)",
    ),
    (
        "EXIT_DRIFTED",
        "`success`: `command: drift` read every target and some environment does not serve what the repository says (`drift: true`, each target's state in `drift-report`); a read that failed is 1 instead, never 0 or 7",
    ),
    (
        "EXIT_CLEANUP_UNFINISHED",
        "`deploy_failed`: cancelled (a signal, or fail-fast), and cleanup could not finish — its deactivate outlasted the signal's seconds, a second signal came, or what a create in flight made could not be told; `deployment-id` names what may be left running, `error-message` says what to deactivate",
    ),
    (
        "EXIT_CANCELLED",
        "`deploy_failed`: cancelled by SIGINT, SIGTERM or SIGHUP (cleanup ran, outputs were written)",
    ),
];

/// `(name, code)` of every `EXIT_*` constant in `src/outcome.rs`.
fn exit_constants() -> Vec<(String, u8)> {
    let text = std::fs::read_to_string(repo().join("src/outcome.rs")).expect("src/outcome.rs");
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("pub(crate) const EXIT_")?;
            let (name, value) = rest.split_once(": u8 = ")?;
            let code = value.trim_end_matches(';').trim().parse().ok()?;
            Some((format!("EXIT_{name}"), code))
        })
        .collect()
}

fn exit_section() -> String {
    let mut out = String::from("| code | meaning |\n|---|---|\n");
    let constants = exit_constants();
    assert!(
        constants.len() >= 8,
        "exit codes read from src/outcome.rs: {constants:?}"
    );
    for (name, code) in &constants {
        let meaning = EXIT_MEANINGS
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| {
                panic!("src/outcome.rs has {name} = {code}: say what it means in EXIT_MEANINGS")
            })
            .1;
        out.push_str(&format!("| {code} | {meaning} |\n"));
    }
    for (name, _) in EXIT_MEANINGS {
        assert!(
            constants.iter().any(|(n, _)| n == name),
            "EXIT_MEANINGS describes {name}, which src/outcome.rs no longer has"
        );
    }
    out
}

// ------------------------------------------------------------- the page

fn reference_page(every_run: &[String]) -> String {
    format!(
        "# Reference: inputs, outputs, exit codes

<!-- GENERATED from src/cli/inputs.rs (the input table), action.yml (the
outputs, as the binary writes them) and src/outcome.rs (the exit codes) by
tests/it/docs_reference.rs. Do not edit by hand; regenerate with:
{REGENERATE} -->

Task pages explain when to use what: see the [README](../README.md#documentation).

## Giving an input

Every input is a flag (`--truss-directory ./my-model`), or an environment
variable: `INPUT_TRUSS-DIRECTORY` (GitHub's Docker-action form),
`INPUT_TRUSS_DIRECTORY`, or the plain variable below — in that order, a flag
before all of them. An empty value means \"not given\". Booleans take
`true`/`false`, `1`/`0`, `yes`/`no` in any case; anything else is an error,
never a silent `false`. A flag may repeat; the last one wins. Every input is
checked before anything is sent: a bad one exits 2 with one message saying
what to change, and the outputs are still written.

\"in `action.yml`\": the GitHub action declares it as a `with:` input; the
others are read from the step's `env:` under their plain variable (for
example `TRUSS_PUSH_API_URL`).
{inputs}
{wrappers}
The components take every input above except the secrets (`baseten-api-key`
and `github-token` come from masked CI/CD variables), `output-file` and
`output-format` (each component writes its own dotenv report), the
GitHub-only features and the stdout modes; see
[GitLab and other CI](gitlab-and-other-ci.md).

### What some values must be

- `model-name` and `team`: at most 256 characters, no control characters
  and no invisible formatting characters (bidi overrides such as U+202E,
  zero-width characters, U+2028/U+2029). `environment`: letters, digits,
  `_` and `-`, at most 48 characters.
- `deployment-name` defaults to `PR-<n>_<sha7>` on GitHub pull requests (the
  pull request's head commit), `MR-<n>_<sha7>` on GitLab merge requests,
  else `<sha7>`; locally `git rev-parse HEAD`.
- `team`: the named one; else the only one the key sees; else the team that
  already has a model of this name; else the team marked default; else an
  error listing the teams.
- `promote` is refused together with `environment`; `promotion:
  after-predict` needs an environment and a predict payload
  ([gated promotion](gated-promotion.md)); `regional-environment` and
  `preserve-previous-production-deployment` need an environment.
- `wait-timeout-seconds` bounds only the client's wait;
  `deploy-timeout-minutes` is also sent to the platform. How they add up:
  [the run's budget](network-and-limits.md#the-runs-budget).
- A value that is not UTF-8 is an error naming where it was set, never a
  silent \"not given\". Files the run reads are bounded too: `config.yaml`
  and `.truss_ignore` must be regular files of at most 1 MiB,
  `GITHUB_EVENT_PATH` at most 25 MiB, and a FIFO, socket, device, broken
  link, non-UTF-8 file name or file the running user cannot read in the
  truss is refused.
- The evidence inputs (`predict-cases` …) are explained in
  [evidence](evidence.md); `skip-unchanged` and `changed-since` in
  [deploy by content](deploy-by-content.md) and [monorepos](monorepo.md).

## Outputs

Written to `$GITHUB_OUTPUT` on GitHub, and to `--output-file` anywhere
(`dotenv` by default, `json` for a `*.json` file, or `shell`); a dotenv
file holds a fixed list of them ([below](#the-dotenv-file)). \"every
run\": written on every exit path, bad input included, empty when unknown.
The others are written only in the mode that produces them. `truss-push
--json` prints the same values as one JSON object on stdout (see [GitHub
reporting](github-reporting.md#the---json-result)).

{commands}
{outputs}
### The dotenv file

GitLab refuses a dotenv report of more than 20 variables (the
self-managed default) or of 5 KB (5,120 bytes) or more for the whole file,
and the job then fails at artifact upload, after the deploy. So a dotenv
file is not every output: it is a fixed list per command, the scalar
outputs people branch on, most used first, each always written (empty when
it does not apply). Every name is `TRUSS_PUSH_` and the output in capitals
with `_`; a plan's status is `TRUSS_PUSH_PLAN_STATUS`, never
`TRUSS_PUSH_STATUS`, since it deployed nothing. Long values share the 5 KB:
a cut one ends with `…` (`TRUSS_PUSH_PREDICT_RESPONSE_TRUNCATED=true` says
the predict response was). JSON-valued outputs (`results`, `matrix`) are
never in it, nor `tested-deployment-id`, `last-status`, `cases-passed`,
`latency-p50-ms` and `baseline-p95-ms`: read those from the JSON outputs
(`--json`, or `--output-file outputs.json`), which the GitLab components
keep as the artifact `truss-push.json`
([how a later job reads it](gitlab-and-other-ci.md#reading-every-output)).

| command | variables, in the file's order |
|---|---|
{dotenv}
## Exit codes

{exits}
With several targets the step's `status` is the worst of the targets'
(`deploy_failed`, `deploy_timeout`, `predict_failed`, `cleanup_failed`,
`success`, worst first) and the exit code is that target's, but 8 (what
is left named) whenever any target's cleanup could not finish, whether a
signal or fail-fast halted the run.
",
        inputs = inputs_section(),
        wrappers = wrapper_inputs_section(),
        outputs = outputs_section(every_run),
        dotenv = dotenv_section(),
        exits = exit_section(),
        commands = commands_section(),
    )
}

/// Which inputs each command reads, from `Command::reads`: an input given
/// to a command that does not read it is exit 2.
fn commands_section() -> String {
    let every: Vec<Input> = Input::ALL
        .into_iter()
        .filter(|&i| Cmd::ALL.iter().all(|c| c.reads(i)))
        .collect();
    let mut out = String::from(
        "## Which inputs each command reads\n\n`command` selects what the step does. Every command reads ",
    );
    let names = |v: &[Input]| {
        v.iter()
            .map(|i| format!("`{}`", i.name()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out += &names(&every);
    out += ". Beyond those, an input given a value other than its default to a command that does not read it is an error (exit 2), never silently ignored.\n\n| command | also reads |\n|---|---|\n";
    for c in Cmd::ALL {
        let own: Vec<Input> = Input::ALL
            .into_iter()
            .filter(|&i| c.reads(i) && !every.contains(&i))
            .collect();
        let unread: Vec<Input> = Input::ALL.into_iter().filter(|&i| !c.reads(i)).collect();
        let cell = if unread.len() < own.len() {
            format!("every input but {}", names(&unread))
        } else {
            names(&own)
        };
        out += &format!("| `{}` | {} |\n", c.word(), cell);
    }
    out
}

/// The dotenv file's table: each command's variables, from the binary's
/// own table.
fn dotenv_section() -> String {
    truss_push::dotenv_variables()
        .into_iter()
        .map(|(command, names)| {
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("| {command} | {} |\n", names.join(", "))
        })
        .collect()
}

#[test]
fn docs_reference_is_generated_from_the_input_table() {
    let every_run = outputs_of_every_run();
    check_generated(
        &repo().join("docs/reference.md"),
        &reference_page(&every_run),
    );
}

#[test]
fn docs_reference_lists_every_output_the_binary_writes() {
    let every_run = outputs_of_every_run();
    let a = action();
    let declared: Vec<&str> = a["outputs"]
        .as_mapping()
        .expect("outputs")
        .keys()
        .filter_map(Value::as_str)
        .collect();
    for name in &every_run {
        assert!(
            declared.contains(&name.as_str()),
            "the binary writes `{name}` on every run but action.yml does not declare it, so docs/reference.md cannot list it"
        );
    }
    assert_eq!(
        &every_run[..PYTHON_ACTION_OUTPUTS.len()],
        PYTHON_ACTION_OUTPUTS,
        "the Python action's outputs come first, in its order"
    );
}

/// `docs/migrating.md` says how many outputs every run adds to the Python
/// action's and names each one: both come from the binary, not a hand count.
#[test]
fn docs_reference_migration_page_counts_the_added_outputs_from_the_binary() {
    let every_run = outputs_of_every_run();
    let added: Vec<&String> = every_run
        .iter()
        .filter(|n| !PYTHON_ACTION_OUTPUTS.contains(&n.as_str()))
        .collect();
    let page = std::fs::read_to_string(repo().join("docs/migrating.md")).expect("migrating.md");
    let claim = format!("every run writes {} outputs", every_run.len());
    assert!(
        page.contains(&claim),
        "docs/migrating.md must say \"{claim}\" (the binary writes {every_run:?})"
    );
    let claim = format!(
        "{} more than the Python action's {}",
        added.len(),
        PYTHON_ACTION_OUTPUTS.len()
    );
    assert!(
        page.contains(&claim),
        "docs/migrating.md must say \"{claim}\""
    );
    for name in added {
        assert!(
            page.contains(&format!("`{name}`")),
            "docs/migrating.md must name the added output `{name}`"
        );
    }
}

/// The string literals in `text` that open a tuple and read like an output
/// name, as `(name, value)` entries do: `("targets-count", …)`.
fn name_literals(text: &str) -> Vec<String> {
    let parts: Vec<&str> = text.split('"').collect();
    parts
        .chunks(2)
        .filter(|pair| pair.len() == 2 && pair[0].trim_end().ends_with('('))
        .map(|pair| pair[1])
        .filter(|l| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .map(str::to_string)
        .collect()
}

/// The body of `fn name` in the source file `path` (up to the first line
/// that closes a top-level item).
fn function_body(path: &str, name: &str) -> String {
    let text = std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let start = text.find(&format!("fn {name}(")).unwrap_or_else(|| {
        panic!("{path} has no fn {name}: say here where the outputs are written")
    });
    let body = &text[start..];
    let end = body.find("\n}\n").unwrap_or(body.len());
    body[..end].to_string()
}

/// The outputs written only in some modes, as the code writes them: the
/// optional entries after the every-run list in `Outputs::raw_entries`, and
/// the evidence entries.
fn mode_dependent_outputs_in_the_code() -> BTreeSet<String> {
    let raw = function_body("src/ci/outputs/mod.rs", "raw_entries");
    let (_, optional) = raw
        .split_once("];")
        .expect("raw_entries: the every-run list, then the optional entries");
    let mut names: BTreeSet<String> = name_literals(optional).into_iter().collect();
    names.extend(name_literals(&function_body(
        "src/evidence/mod.rs",
        "output_entries",
    )));
    names
}

/// `docs/migrating.md` names every output that appears only in some mode,
/// and those are exactly the ones the code writes outside the every-run
/// list and `action.yml` declares beyond it.
#[test]
fn docs_reference_migration_page_names_the_mode_dependent_outputs() {
    let every_run = outputs_of_every_run();
    let in_code = mode_dependent_outputs_in_the_code();
    assert!(
        in_code.len() >= 9,
        "mode-dependent outputs read from the code: {in_code:?}"
    );
    let declared: BTreeSet<String> = action()["outputs"]
        .as_mapping()
        .expect("outputs")
        .keys()
        .filter_map(|k| k.as_str().map(str::to_string))
        .filter(|n| !every_run.contains(n))
        .collect();
    assert_eq!(
        declared, in_code,
        "action.yml's outputs beyond every run's vs what the code writes in some modes"
    );
    let page = std::fs::read_to_string(repo().join("docs/migrating.md")).expect("migrating.md");
    let missing: Vec<&String> = in_code
        .iter()
        .filter(|n| !page.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/migrating.md must name the mode-dependent outputs {missing:?}"
    );
}

// ------------------------------------------- facts copied onto other pages

const GENERATED_EXITS: &str = "<!-- BEGIN generated from src/outcome.rs";

/// The exit-code table in `docs/faq.md` is the reference's, rewritten with
/// it; the README states no codes of its own, it links the table.
#[test]
fn docs_reference_faq_exit_codes_are_generated() {
    let path = repo().join("docs/faq.md");
    let text = std::fs::read_to_string(&path).expect("docs/faq.md");
    assert!(
        text.contains(GENERATED_EXITS),
        "docs/faq.md has no generated exit-code table"
    );
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with(GENERATED_EXITS) {
            for l in lines.by_ref() {
                if l.starts_with("<!-- END generated") {
                    out.push_str(&exit_section());
                    out.push_str(l);
                    out.push('\n');
                    break;
                }
            }
        }
    }
    check_generated(&path, &out);

    // The forms a hand copy took ("exit 2", "3 `deploy_timeout`", "130
    // cancelled"); 0 and 1 are left out, being too common to tell apart.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for (_, code) in exit_constants().iter().filter(|(_, c)| *c > 1) {
        for copy in [
            format!("exit {code}"),
            format!(" {code} `"),
            format!("{code} bad input"),
            format!("{code} cancelled"),
        ] {
            assert!(
                !readme.contains(&copy),
                "README.md copies an exit code (\"{copy}\"): link docs/reference.md#exit-codes instead"
            );
        }
    }
    assert!(
        readme.contains("](docs/reference.md#exit-codes)"),
        "README.md links the exit-code table"
    );
}

/// Every "<n> configs" on the pages is the size of the corpus the parity
/// test runs through the real truss (`tests/fixtures/configs/*.yaml`).
#[test]
fn docs_reference_config_counts_match_the_corpus() {
    let corpus = std::fs::read_dir(repo().join("tests/fixtures/configs"))
        .expect("tests/fixtures/configs")
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        })
        .count();
    let mut stated = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (before, _) in text.match_indices(" configs").map(|(i, m)| (&text[..i], m)) {
            let digits: String = before
                .chars()
                .rev()
                .take_while(char::is_ascii_digit)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if digits.is_empty() {
                continue;
            }
            stated += 1;
            assert_eq!(
                digits.parse::<usize>().unwrap(),
                corpus,
                "{} says {digits} configs; tests/fixtures/configs holds {corpus}",
                page.strip_prefix(repo()).unwrap().display()
            );
        }
    }
    assert!(
        stated >= 1,
        "no page states the corpus size any more: drop this test"
    );
}

/// The README's first commands are the two a fresh machine must run, and
/// the GitHub snippet follows on the first screen.
#[test]
fn docs_reference_readme_opens_with_the_demo_and_the_test_command() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut blocks = readme.split("```").skip(1).step_by(2);
    let first = blocks.next().expect("a code block");
    let (lang, body) = first.split_once('\n').unwrap();
    assert_eq!(
        lang, "sh",
        "the README's first code block is the shell commands"
    );
    let commands: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        commands.len() >= 2
            && commands[0].starts_with("scripts/demo")
            && commands[1].starts_with("scripts/test"),
        "the README's first two commands must be scripts/demo and scripts/test: {commands:?}"
    );
    let snippet = readme
        .lines()
        .position(|l| l.contains("- uses: truss-push/truss-push@"))
        .expect("the GitHub snippet");
    assert!(
        snippet < 45,
        "the GitHub snippet is on line {}: keep it on the first screen",
        snippet + 1
    );
}

/// Words the project once used privately, which a user reading the action's
/// inputs or the pages would need a glossary for: the Python action
/// (`basetenlabs/action-truss-push`) is called that, and a real deployment's
/// recorded status history is called that.
const RETIRED_PHRASES: &[&str] = &[
    "the anchor",
    "anchor action",
    "anchor's",
    "the seed's",
    "seed history",
    "seed status",
    "seed model",
    "seed deployment",
];

#[test]
fn docs_reference_what_users_read_has_no_private_vocabulary() {
    let mut files = pages();
    files.push(repo().join("action.yml"));
    files.extend(templates());
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap().to_lowercase();
        for phrase in RETIRED_PHRASES {
            if let Some(at) = text.find(phrase) {
                let line = text[..at].lines().count().max(1);
                found.push(format!(
                    "{}:{line}: \"{phrase}\"",
                    file.strip_prefix(repo()).unwrap().display()
                ));
            }
        }
    }
    assert!(found.is_empty(), "private words:\n{}", found.join("\n"));
}

// ------------------------------------------------- the GitLab components

/// Inputs the components do not take, and why: secrets come from masked
/// CI/CD variables (a component input is written into the pipeline's
/// configuration, where anyone who reads the pipeline sees it); the
/// components own their dotenv report; the GitHub features and the
/// stdout-only modes have no use in a GitLab job.
const NOT_COMPONENT_INPUTS: &[&str] = &[
    "baseten-api-key",
    "github-token",
    "output-file",
    "output-format",
    "github-deployment",
    "pr-comment",
    "commit-status",
    "json",
    "print-config",
    "plan",
];

const BEGIN: &str = "# BEGIN generated from src/cli/inputs.rs";
const END: &str = "# END generated";

/// The inputs a component mirrors, in table order.
fn component_inputs() -> impl Iterator<Item = &'static InputSpec> {
    INPUTS
        .iter()
        .filter(|s| !NOT_COMPONENT_INPUTS.contains(&s.name))
}

/// The job variable a component sets for an input: the binary's
/// `INPUT_NAME` form, which it reads before the plain variable, so a
/// project variable that happens to share a plain name (`ENVIRONMENT`,
/// `TEAM`) does not override the component's input.
fn job_variable(spec: &InputSpec) -> String {
    format!("INPUT_{}", spec.name.to_ascii_uppercase().replace('-', "_"))
}

fn quoted(text: &str) -> String {
    // A JSON string is a YAML double-quoted scalar.
    serde_json::to_string(text).unwrap()
}

/// Replaces every generated block in `text` with `render(indent, kind)`,
/// where `kind` is the word after the marker (`spec` or `variables`).
fn splice(text: &str, render: impl Fn(&str, &str) -> String) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        if let Some(rest) = line.trim_start().strip_prefix(BEGIN) {
            let indent = &line[..line.len() - line.trim_start().len()];
            let kind = rest.trim().trim_start_matches('(').trim_end_matches(')');
            for l in lines.by_ref() {
                if l.trim_start().starts_with(END) {
                    out.push_str(&render(indent, kind));
                    out.push_str(l);
                    out.push('\n');
                    break;
                }
            }
        }
    }
    out
}

fn render_block(indent: &str, kind: &str, skip: &[&str]) -> String {
    let mut out = String::new();
    for spec in component_inputs().filter(|s| !skip.contains(&s.name)) {
        match kind {
            "spec" => {
                out.push_str(&format!("{indent}{}:\n", spec.name));
                out.push_str(&format!("{indent}  description: {}\n", quoted(spec.help)));
                if spec.name != "truss-directory" {
                    out.push_str(&format!("{indent}  default: \"\"\n"));
                }
            }
            "variables" => out.push_str(&format!(
                "{indent}{}: {{value: \"$[[ inputs.{} ]]\", expand: false}}\n",
                job_variable(spec),
                spec.name
            )),
            // The plan job's trigger forwards every input but the targets,
            // which each child job names with a flag.
            "forwarded" if spec.name != "truss-directory" && spec.name != "changed-since" => out
                .push_str(&format!(
                    "{indent}{}: {{value: \"$[[ inputs.{} ]]\", expand: false}}\n",
                    job_variable(spec),
                    spec.name
                )),
            "forwarded" => {}
            other => panic!("unknown generated block ({other})"),
        }
    }
    out
}

/// The inputs a component leaves out of its generated blocks: the
/// teardown component mirrors only what `command: teardown` reads, and not
/// `command` (its job runs teardown) nor the targets (its stop job has no
/// checkout).
fn skipped_in(path: &Path) -> Vec<&'static str> {
    match path.file_name().and_then(|f| f.to_str()) {
        Some("teardown.yml") => Input::ALL
            .into_iter()
            .filter(|&i| {
                !Cmd::Teardown.reads(i)
                    || matches!(
                        i.name(),
                        "command"
                            | "truss-directory"
                            | "model-name"
                            | "changed-since"
                            | "max-parallel"
                            | "fail-fast"
                    )
            })
            .map(Input::name)
            .collect(),
        _ => Vec::new(),
    }
}

fn templates() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("templates"))
        .expect("templates/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    files.sort();
    files
}

#[test]
fn docs_reference_gitlab_components_mirror_the_input_table() {
    let files = templates();
    assert!(
        files.len() >= 2,
        "templates/deploy.yml and templates/plan.yml: {files:?}"
    );
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(BEGIN),
            "{} has no generated blocks",
            path.display()
        );
        let skip = skipped_in(&path);
        let want = splice(&text, |indent, kind| render_block(indent, kind, &skip));
        check_generated(&path, &want);

        // What GitLab will read: a `spec:` header, `---`, then the jobs;
        // every input the jobs use is declared, and every declared one used.
        let (header, jobs) = want.split_once("\n---\n").expect("a spec header, then ---");
        let header: Value = serde_yaml::from_str(header).expect("the spec header is YAML");
        let declared: BTreeSet<&str> = header["spec"]["inputs"]
            .as_mapping()
            .expect("spec: inputs:")
            .keys()
            .filter_map(Value::as_str)
            .collect();
        let _: Value = serde_yaml::from_str(jobs).expect("the jobs document is YAML");
        let used: BTreeSet<&str> = jobs
            .split("$[[ inputs.")
            .skip(1)
            .filter_map(|s| s.split_once(" ]]").map(|(n, _)| n))
            .collect();
        assert_eq!(
            declared,
            used,
            "{}: declared vs used inputs",
            path.display()
        );
    }
}

/// The plan component's child pipeline is written by a shell script from
/// the matrix the binary prints. Targets with quotes, backslashes, `$`,
/// spaces, colons and non-ASCII must come back out of the generated YAML
/// exactly, and an empty plan must still be a valid pipeline.
#[test]
fn docs_reference_gitlab_plan_writes_a_child_pipeline_that_keeps_every_target() {
    let text = std::fs::read_to_string(repo().join("templates/plan.yml")).unwrap();
    let (_, jobs) = text.split_once("\n---\n").unwrap();
    let jobs: Value = serde_yaml::from_str(jobs).unwrap();
    let plan = jobs
        .as_mapping()
        .unwrap()
        .iter()
        .find(|(_, j)| j["artifacts"]["paths"].is_sequence())
        .map(|(_, j)| j)
        .expect("the plan job");
    let script: Vec<&str> = plan["script"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();

    let odd = [
        "models/plain",
        "models/with space/a:b",
        "models/quote\"and\\backslash",
        "models/$HOME-and-`tick`",
        "models/café-ü",
    ];
    for targets in [&odd[..], &[][..]] {
        let dir = tempfile::tempdir().unwrap();
        let include: Vec<serde_json::Value> = targets
            .iter()
            .map(|t| serde_json::json!({"kind": "model", "name": "n", "target": t}))
            .collect();
        let matrix = serde_json::json!({ "include": include }).to_string();
        // A stand-in truss-push that prints the matrix as the binary does.
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(dir.path().join("matrix.json"), &matrix).unwrap();
        let stub = bin.join("truss-push");
        std::fs::write(&stub, "#!/bin/sh\ncat \"$STUB_MATRIX\"\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let out = Command::new("sh")
            .arg("-ec")
            .arg(script.join("\n"))
            .current_dir(dir.path())
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .env("STUB_MATRIX", dir.path().join("matrix.json"))
            .env(
                "TRUSS_PUSH_IMAGE",
                "registry.example/truss-push:1.2.3-debug",
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "plan script: {out:?}");
        let child = std::fs::read_to_string(dir.path().join("truss-push-child.yml"))
            .expect("the child pipeline");
        let child: Value = serde_yaml::from_str(&child)
            .unwrap_or_else(|e| panic!("the child pipeline is YAML: {e}\n{child}"));
        let jobs = child.as_mapping().expect("jobs");
        let got: Vec<&str> = jobs
            .values()
            .filter_map(|j| j["variables"]["TRUSS_PUSH_TARGET"]["value"].as_str())
            .collect();
        assert_eq!(got, targets, "targets through the child pipeline");
        for job in jobs.values() {
            assert_eq!(
                job["image"]["name"].as_str(),
                Some("registry.example/truss-push:1.2.3-debug")
            );
            assert!(job["script"].is_sequence());
            if job["variables"]["TRUSS_PUSH_TARGET"].is_mapping() {
                assert_eq!(job["variables"]["TRUSS_PUSH_TARGET"]["expand"], false);
                // Each deploy keeps its dotenv report and every output as JSON.
                let artifacts = &job["artifacts"];
                assert_eq!(artifacts["reports"]["dotenv"], "truss-push.env");
                assert_eq!(artifacts["paths"][0], "truss-push.json");
                let script = job["script"][0].as_str().unwrap();
                assert!(script.ends_with("--json > truss-push.json"), "{script}");
            }
        }
        assert!(!jobs.is_empty(), "an empty plan still needs one job");
    }
}

// ---------------------------------------------------------------- links

/// GitHub's anchor for a heading: lower case, punctuation dropped but `-`
/// and `_`, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// `(target, line)` of every relative Markdown link outside code blocks.
fn relative_links(text: &str) -> Vec<(String, usize)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for part in line.split("](").skip(1) {
            let Some(end) = part.find(')') else { continue };
            let target = &part[..end];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            out.push((target.to_string(), n + 1));
        }
    }
    out
}

/// The pages under `docs/`, sorted.
fn docs_pages() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs
}

/// Every page a user reads: the README, CONTRIBUTING.md and `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md"), repo().join("CONTRIBUTING.md")];
    pages.extend(docs_pages());
    pages
}

#[test]
fn docs_reference_links_resolve_and_the_readme_links_every_page() {
    let pages = pages();
    let docs = docs_pages();

    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(readme.lines().count() <= 200, "README.md is over 200 lines");
    for page in &docs {
        let rel = page.strip_prefix(repo()).unwrap().display().to_string();
        assert!(
            readme.contains(&format!("]({rel}")),
            "README.md does not link {rel}"
        );
    }

    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let rel_page = page.strip_prefix(repo()).unwrap().display().to_string();
        for (target, line) in relative_links(&text) {
            let (file, frag) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let resolved = path
                .canonicalize()
                .ok()
                .and_then(|p| p.strip_prefix(repo()).ok().map(|p| p.display().to_string()));
            let Some(resolved) = resolved else {
                broken.push(format!("{rel_page}:{line}: {target}: no such file"));
                continue;
            };
            if !frag.is_empty() && resolved.ends_with(".md") {
                let text = std::fs::read_to_string(repo().join(&resolved)).unwrap();
                if !anchors(&text).contains(frag) {
                    broken.push(format!("{rel_page}:{line}: {target}: no heading #{frag}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every `yaml` block on the pages parses: a snippet a reader pastes into a
/// workflow must at least be YAML (a `run: echo "…}}: …"` plain scalar, for
/// one, is not).
#[test]
fn docs_reference_every_yaml_snippet_parses() {
    let pages = pages();
    let mut bad = Vec::new();
    let mut seen = 0;
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut block: Option<(usize, String)> = None;
        for (n, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim_start() == "```yaml" => block = Some((n + 1, String::new())),
                Some((start, body)) if line.trim_start() == "```" => {
                    seen += 1;
                    if let Err(e) = serde_yaml::from_str::<Value>(body) {
                        bad.push(format!("{}:{start}: {e}", page.display()));
                    }
                    block = None;
                }
                Some((_, body)) => {
                    body.push_str(line);
                    body.push('\n');
                }
                None => {}
            }
        }
    }
    assert!(seen >= 10, "only {seen} yaml blocks found");
    assert!(
        bad.is_empty(),
        "yaml snippets that do not parse:\n{}",
        bad.join("\n")
    );
}
