//! Property tests over the inputs: any byte string, in any input, given in
//! any of its four spellings, ends with a documented exit code, a
//! `GITHUB_OUTPUT` the runner accepts, no panic and no hang.
//!
//! Cases are reproducible: the seed is fixed unless `PROPTEST_RNG_SEED` is
//! set, and the case count is bounded unless `PROPTEST_CASES` is set, so a
//! CI run always tries the same inputs and a developer explores with e.g.
//! `PROPTEST_RNG_SEED=$RANDOM PROPTEST_CASES=1000 cargo test --test it props`.
//! Failures are not persisted to a file: a failing input is printed shrunk
//! and belongs in a named test of its own.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fake_baseten::FakeBaseten;
use fake_baseten::runner::parse_github_output;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use truss_push::cli::{INPUTS, env_names};

use crate::harness::{API_KEY, example_model, fake, output_names, truss_push};

mod values;

use values::{Given, Spelling, URL_INPUTS, given, leaves_loopback};

/// The seed CI uses, so a red run means a change in the product, not a new
/// draw of inputs.
const DEFAULT_SEED: u64 = 0x7472_7573_7370_7573;

/// Enough cases to try every input several times in every spelling while
/// the whole property stays well under a minute on two cores.
const DEFAULT_CASES: u32 = 128;

/// Every failing case is re-run while shrinking; this keeps a failure's
/// report to minutes, not hours.
const MAX_SHRINK_ITERS: u32 = 200;

/// A hang guard, not a speed check: a run still going after it is hanging.
/// Valid-looking inputs deploy to a fake whose deployments are ready at
/// once, the base wait and predict budgets are a few seconds, and
/// everything else is refused or fails fast; the slowest honest run (an API
/// that refuses connections: the wait budget, then the cleanup's retries)
/// takes about 9 s on a quiet machine, so a loaded runner stays far below.
const RUN_BOUND: Duration = Duration::from_secs(60);

/// The base wait and predict budgets, in seconds: short, so that a run
/// pointed at a dead host by a generated URL still ends within the bound.
const BASE_BUDGET_SECS: &str = "3";

/// Inputs that lengthen an honest run: with one of them and a URL input
/// that points at a dead host, a run may take the whole generated budget,
/// up to a day. Such a case is dropped when it outlives the bound, not
/// failed.
const BUDGET_INPUTS: &[&str] = &[
    "wait-timeout-seconds",
    "deploy-timeout-minutes",
    "predict-timeout",
];

/// Every exit code the binary may end with and the status it reports with
/// it. 6 is a successful run whose outputs could not be delivered.
const EXIT_CODES: &[(i32, &str)] = &[
    (0, "success"),
    (1, "deploy_failed"),
    (2, "deploy_failed"),
    (3, "deploy_timeout"),
    (4, "predict_failed"),
    (5, "cleanup_failed"),
    (6, "success"),
    (130, "deploy_failed"),
];

/// What one run left behind.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    github_output: String,
    summary: String,
    elapsed: Duration,
}

impl std::fmt::Debug for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cut = |s: &str| s.chars().take(4000).collect::<String>();
        write!(
            f,
            "exit {} after {:?}\n--- stdout\n{}\n--- stderr\n{}\n--- GITHUB_OUTPUT\n{}",
            self.code,
            self.elapsed,
            cut(&self.stdout),
            cut(&self.stderr),
            cut(&self.github_output)
        )
    }
}

/// Runs the binary with a base that deploys to the fake (every base value
/// in its plain variable) and the generated values on top; an error when
/// the run outlived `RUN_BOUND` and was killed.
fn run(fake: &FakeBaseten, givens: &[Given]) -> Result<Ran, String> {
    let dir = tempfile::tempdir().unwrap();
    let gh_out = dir.path().join("github_output");
    let summary = dir.path().join("summary.md");
    std::fs::write(&gh_out, "").unwrap();
    let mut env: BTreeMap<String, OsString> = BTreeMap::new();
    let base = [
        ("TRUSS_DIRECTORY", example_model().into_os_string()),
        ("BASETEN_API_KEY", API_KEY.into()),
        ("DEPLOYMENT_NAME", "ci-test".into()),
        ("TRUSS_PUSH_POLL_INTERVAL_SECONDS", "0.05".into()),
        ("TRUSS_PUSH_WAIT_TIMEOUT_SECONDS", BASE_BUDGET_SECS.into()),
        ("PREDICT_TIMEOUT", BASE_BUDGET_SECS.into()),
        ("TRUSS_PUSH_APP_URL", fake.graphql_base().into()),
        ("TRUSS_PUSH_API_URL", fake.rest_base().into()),
        ("TRUSS_PUSH_INFERENCE_URL", fake.inference_template().into()),
        ("TRUSS_PUSH_S3_ENDPOINT", fake.s3_endpoint().into()),
    ];
    for (k, v) in base {
        env.insert(k.into(), v);
    }
    let mut args: Vec<OsString> = Vec::new();
    for g in givens {
        let spec = INPUTS.iter().find(|s| s.name == g.input).unwrap();
        let value = OsString::from_vec(g.value.0.clone());
        let [hyphens, underscores, plain] = env_names(spec);
        match g.spelling {
            Spelling::FlagJoined => {
                let mut arg = OsString::from(format!("--{}=", g.input));
                arg.push(&value);
                args.push(arg);
            }
            Spelling::FlagSeparate => {
                args.push(format!("--{}", g.input).into());
                args.push(value);
            }
            Spelling::EnvHyphens => {
                env.insert(hyphens, value);
            }
            Spelling::EnvUnderscores => {
                env.insert(underscores, value);
            }
            Spelling::EnvPlain => {
                env.insert(plain, value);
            }
        }
    }
    let mut child = truss_push(dir.path())
        .env("GITHUB_OUTPUT", &gh_out)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .envs(&env)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child can be waited on") {
            break status;
        }
        if started.elapsed() > RUN_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "still running after {RUN_BOUND:?}\n--- stdout\n{}",
                stdout.join().unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(Ran {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().expect("stdout read"),
        stderr: stderr.join().expect("stderr read"),
        github_output: std::fs::read_to_string(&gh_out).unwrap_or_default(),
        summary: std::fs::read_to_string(&summary).unwrap_or_default(),
        elapsed: started.elapsed(),
    })
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Whether the arguments may hold a help or version request of their own:
/// `--dry-run` (like every switch) takes an optional value, so
/// `--dry-run --help` is `--help`.
/// Such a run prints the help and exits 0 without running anything, so
/// there are no outputs to check.
fn asked_for_help(givens: &[Given]) -> bool {
    givens.iter().any(|g| {
        matches!(g.input, "dry-run" | "print-config" | "json")
            && g.spelling == Spelling::FlagSeparate
            && g.value.0.starts_with(b"-")
    })
}

/// Whether the value the binary reads for `input` is not UTF-8: the last
/// flag given, else the first of its three variables that is set to
/// something other than blanks. The base values are UTF-8, so only
/// generated values matter.
fn reads_non_utf8(givens: &[Given], input: &str) -> bool {
    let given = |spellings: &[Spelling]| {
        givens
            .iter()
            .rev()
            .find(|g| g.input == input && spellings.contains(&g.spelling))
            .map(|g| g.value.0.as_slice())
    };
    let flag = given(&[Spelling::FlagJoined, Spelling::FlagSeparate]);
    let envs = [
        Spelling::EnvHyphens,
        Spelling::EnvUnderscores,
        Spelling::EnvPlain,
    ]
    .map(|s| given(&[s]));
    for value in std::iter::once(flag).chain(envs).flatten() {
        match std::str::from_utf8(value) {
            Err(_) => return true,
            Ok(text) if !text.trim().is_empty() => return false,
            Ok(_) => {}
        }
    }
    false
}

/// How the runs ended: a property that only ever sees refused inputs would
/// prove little, and the slowest run shows how close the bound is.
#[derive(Debug, Default)]
struct Tally {
    codes: BTreeMap<i32, usize>,
    slowest: Duration,
    /// Cases that outlived the bound honestly (see `BUDGET_INPUTS`).
    dropped: usize,
    /// Cases that asked for `--help` or `--version` (see `asked_for_help`).
    help: usize,
}

/// What every run must do, whatever its inputs.
fn check(fake: &FakeBaseten, givens: &[Given], tally: &mut Tally) -> Result<(), TestCaseError> {
    let may_be_long = givens.iter().any(|g| BUDGET_INPUTS.contains(&g.input))
        && givens.iter().any(|g| URL_INPUTS.contains(&g.input));
    let requests_before = fake.requests().len();
    let ran = match run(fake, givens) {
        Ok(ran) => ran,
        Err(_) if may_be_long => {
            tally.dropped += 1;
            return Err(TestCaseError::reject("a long budget and a dead host"));
        }
        Err(hang) => return Err(TestCaseError::fail(hang)),
    };
    *tally.codes.entry(ran.code).or_default() += 1;
    tally.slowest = tally.slowest.max(ran.elapsed);
    for shown in [&ran.stdout, &ran.stderr] {
        prop_assert!(
            !shown.contains("panicked at") && !shown.contains("RUST_BACKTRACE"),
            "a panic: {ran:?}"
        );
    }
    if asked_for_help(givens) && ran.code == 0 && ran.github_output.is_empty() {
        let text = ran.stdout.as_str();
        prop_assert!(
            text.contains("Usage: truss-push") || text.starts_with("truss-push "),
            "exit 0 without outputs and without help: {ran:?}"
        );
        tally.help += 1;
        return Ok(());
    }
    let expected_status = EXIT_CODES
        .iter()
        .find(|(code, _)| *code == ran.code)
        .map(|(_, status)| *status)
        .ok_or_else(|| TestCaseError::fail(format!("undocumented exit code: {ran:?}")))?;
    let outputs: BTreeMap<String, String> = parse_github_output(&ran.github_output)
        .map_err(|e| TestCaseError::fail(format!("GITHUB_OUTPUT rejected ({e:?}): {ran:?}")))?
        .into_iter()
        .collect();
    for name in output_names() {
        prop_assert!(outputs.contains_key(name), "no output {name}: {ran:?}");
    }
    prop_assert_eq!(&outputs["status"], expected_status, "{:?}", ran);
    let message = &outputs["error-message"];
    if expected_status == "success" {
        prop_assert!(message.is_empty(), "a success with an error: {ran:?}");
    } else {
        prop_assert!(
            !message.trim().is_empty(),
            "a failure without a message: {ran:?}"
        );
    }
    if let Some(input) = INPUTS.iter().find(|s| reads_non_utf8(givens, s.name)) {
        prop_assert_eq!(
            ran.code,
            2,
            "input {} is not UTF-8 where it is read: an input error, never a fallback: {:?}",
            input.name,
            ran
        );
    }
    if ran.code == 2 {
        let sent: Vec<String> = fake.requests()[requests_before..]
            .iter()
            .filter(|r| r.mutation || r.endpoint.starts_with("s3."))
            .map(|r| r.endpoint.clone())
            .collect();
        prop_assert!(
            sent.is_empty(),
            "an input error after an upload or a mutation {sent:?}: {ran:?}"
        );
    }
    // A URL input with its own path (`…/graphql/` as the app's base) sends
    // the run's requests under it: no endpoint of the platform, which the
    // platform answers 404 and the run reports. Those paths are this
    // case's own doing; every other violation still fails the fake.
    if givens.iter().any(|g| URL_INPUTS.contains(&g.input)) {
        let unclaimed: Vec<String> = fake
            .take_violations()
            .into_iter()
            .filter(|v| !v.what.starts_with("unknown path"))
            .map(|v| v.to_string())
            .collect();
        prop_assert!(
            unclaimed.is_empty(),
            "schema violations {unclaimed:?}: {ran:?}"
        );
    }
    // With the canary key in place, nothing the user sees may hold it.
    if givens.iter().all(|g| g.input != "baseten-api-key") {
        for (what, text) in [
            ("stdout", &ran.stdout),
            ("stderr", &ran.stderr),
            ("GITHUB_OUTPUT", &ran.github_output),
            ("summary", &ran.summary),
        ] {
            prop_assert!(!text.contains(API_KEY), "the key in {what}: {ran:?}");
        }
    }
    Ok(())
}

fn config() -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = DEFAULT_CASES;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(DEFAULT_SEED);
    }
    config.failure_persistence = None;
    config.max_shrink_iters = MAX_SHRINK_ITERS;
    config
}

#[test]
fn any_bytes_in_any_inputs_end_in_a_documented_code_with_outputs_and_no_panic() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let model: PathBuf = example_model();
    let strategy = prop::collection::vec(given(&model, &fake.url()), 1..=4).prop_filter(
        "a URL input must not name a host off this machine",
        |givens| {
            givens
                .iter()
                .all(|g| !URL_INPUTS.contains(&g.input) || !leaves_loopback(&g.value.0))
        },
    );
    let config = config();
    let seed = config.rng_seed;
    let mut runner = TestRunner::new(config);
    let started = Instant::now();
    let tally = std::cell::RefCell::new(Tally::default());
    match runner.run(&strategy, |givens| {
        check(&fake, &givens, &mut tally.borrow_mut())
    }) {
        Ok(()) => {}
        Err(TestError::Fail(why, givens)) => {
            panic!("seed {seed:?}: the shrunk failing inputs {givens:#?}\n{why}")
        }
        Err(e) => panic!("seed {seed:?}: {e}"),
    }
    let tally = tally.into_inner();
    let cases = runner.config().cases as usize;
    eprintln!("props: {cases} cases in {:?}, {tally:?}", started.elapsed());
    // Every passing case ran the binary to its end (help requests too).
    let ran: usize = tally.codes.values().sum();
    assert!(ran >= cases, "{ran} runs for {cases} cases: {tally:?}");
    assert!(tally.slowest < RUN_BOUND, "{tally:?}");
    // A property that only ever saw refused inputs would prove little:
    // some runs must get past validation (any code but 2).
    if cases >= 32 {
        assert!(
            tally.codes.keys().any(|&code| code != 2),
            "every run was an input error: {tally:?}"
        );
    }
}

/// The codes in the reference page's exit code table.
fn documented_exit_codes() -> Vec<i32> {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference.md");
    let readme = std::fs::read_to_string(page).expect("docs/reference.md reads");
    let section = readme
        .split("\n## Exit codes")
        .nth(1)
        .expect("docs/reference.md has an exit code section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| {
            l.strip_prefix("| ")?
                .split(" |")
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn every_exit_code_the_property_accepts_is_in_the_reference() {
    let documented = documented_exit_codes();
    assert!(documented.contains(&0), "the table parses: {documented:?}");
    for (code, status) in EXIT_CODES {
        assert!(
            documented.contains(code),
            "exit code {code} ({status}) is not in docs/reference.md's table {documented:?}"
        );
    }
}
