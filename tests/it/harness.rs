//! Runs the real binary against an in-process fake and reads back what a CI
//! user would see: exit code, stdout/stderr, GITHUB_OUTPUT parsed by the
//! runner's rules, the step summary and the outputs file.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fake_baseten::FakeBaseten;
use fake_baseten::runner::parse_github_output;
use fake_baseten::scenario::Scenario;

/// The outputs every run writes, whatever happened: the Python action's
/// seven first, then the ones this project adds (the binary's own lists).
pub fn output_names() -> impl Iterator<Item = &'static str> {
    truss_push::PYTHON_ACTION_OUTPUT_NAMES
        .into_iter()
        .chain(truss_push::EXTRA_OUTPUT_NAMES)
}

/// The Python action's (`basetenlabs/action-truss-push`) outputs, in the
/// order it writes them: every run writes them first.
pub const PYTHON_ACTION_OUTPUTS: &[&str] = &truss_push::PYTHON_ACTION_OUTPUT_NAMES;

/// A canary API key: tests assert it never appears in anything the binary
/// writes.
pub const API_KEY: &str = "sk-canary-9f8e7d6c5b4a";

pub fn example_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello-model")
}

/// Model directories in one temp dir, each named after its model (a copy
/// of the example model with `model_name: <name>`), for several targets in
/// one step.
pub fn model_dirs(names: &[&str]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let root = tempfile::tempdir().unwrap();
    let model_py = std::fs::read_to_string(example_model().join("model/model.py")).unwrap();
    let dirs = names
        .iter()
        .map(|n| {
            let d = root.path().join(n);
            std::fs::create_dir_all(d.join("model")).unwrap();
            std::fs::write(d.join("config.yaml"), format!("model_name: {n}\n")).unwrap();
            std::fs::write(d.join("model/model.py"), &model_py).unwrap();
            d
        })
        .collect();
    (root, dirs)
}

/// A file `name` holding `text`, in a temp dir of its own (kept alive with
/// the path).
pub fn file_in_temp_dir(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// `truss-directory` naming each of `dirs`, one a line.
pub fn target_list(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.to_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn scenario_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake-baseten/scenarios")
        .join(name)
}

/// Starts a fake from YAML, with the canary key.
pub fn fake(yaml: &str) -> FakeBaseten {
    let scenario = Scenario::from_yaml(yaml)
        .expect("scenario parses")
        .with_api_key(API_KEY);
    FakeBaseten::start_in_background(scenario).expect("fake starts")
}

/// `fake`, whose scenario has `manual_clock: true`, with its clock set to
/// move one scenario second each time it answers a poll (a status read or
/// a predict): what a run reads at its n-th poll is the scenario n seconds
/// on, so every scripted step is read, and the run's log and summary are
/// the same on every run however loaded the machine.
pub fn per_poll(fake: FakeBaseten) -> FakeBaseten {
    assert!(
        fake.clock().is_manual(),
        "per_poll needs manual_clock: true"
    );
    fake.clock().advance_per_poll(1.0);
    fake
}

/// A model truss copied into a temp dir, with `config.yaml` replaced.
pub fn model_dir(config_yaml: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("model")).unwrap();
    std::fs::copy(
        example_model().join("model/model.py"),
        d.path().join("model/model.py"),
    )
    .unwrap();
    std::fs::write(d.path().join("config.yaml"), config_yaml).unwrap();
    d
}

/// The one place the binary is started from: an empty environment but
/// `PATH`, `HOME` and the working directory both `dir`, and no stdin.
/// Callers add arguments, variables and pipes.
pub fn truss_push(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_truss-push"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .current_dir(dir)
        .stdin(Stdio::null());
    cmd
}

/// Deploys a model naming a secret with `api_url` (a proxy in front of
/// `fake` that fails the secrets lookup) and checks the deploy succeeded
/// with a note that the secrets could not be checked.
pub fn secrets_check_failing_at(fake: &FakeBaseten, api_url: &str) -> Outcome {
    let dir = model_dir("model_name: secretive\nsecrets:\n  openai_key: null\n");
    let run = Invocation::new(fake)
        .model(dir.path())
        .arg("api-url", api_url)
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        run.stdout.contains("could not check the secrets"),
        "{run:?}"
    );
    run
}

pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub outputs: BTreeMap<String, String>,
    pub summary: String,
    pub outputs_file: Option<String>,
    pub elapsed: Duration,
    /// From the signal a test sent to the exit, when it sent one.
    pub after_signal: Option<Duration>,
    /// The binary's peak resident memory in KiB (`VmHWM`), as last read
    /// from /proc while it ran: the high-water mark only grows, so the last
    /// read before the exit holds every earlier peak.
    pub peak_rss_kib: u64,
}

impl Outcome {
    pub fn out(&self, name: &str) -> &str {
        self.outputs
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no output {name}: {:?}", self.outputs))
    }

    pub fn status(&self) -> &str {
        self.out("status")
    }

    /// Everything the user can see, for secret checks.
    pub fn everything(&self) -> String {
        format!(
            "{}\n{}\n{:?}\n{}\n{}",
            self.stdout,
            self.stderr,
            self.outputs,
            self.summary,
            self.outputs_file.clone().unwrap_or_default()
        )
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}\n--- outputs\n{:#?}",
            self.code, self.stdout, self.stderr, self.outputs
        )
    }
}

/// A run of the binary: flags pointing at the fake, plus the test's own
/// flags and environment.
pub struct Invocation<'a> {
    pub fake: Option<&'a FakeBaseten>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub outputs_file: Option<&'static str>,
    /// The run's working directory, when not its own temp dir.
    pub cwd: Option<PathBuf>,
    /// Runs the binary as this uid and gid (supplementary groups dropped),
    /// its temp dir and output files opened to that user.
    pub user: Option<u32>,
}

impl<'a> Invocation<'a> {
    pub fn new(fake: &'a FakeBaseten) -> Self {
        Self {
            fake: Some(fake),
            args: vec![
                format!("--baseten-api-key={API_KEY}"),
                "--poll-interval-seconds=0.05".into(),
                "--deployment-name=ci-test".into(),
            ],
            env: Vec::new(),
            outputs_file: None,
            cwd: None,
            user: None,
        }
    }

    /// No fake, no defaults: for input validation tests.
    pub fn bare() -> Self {
        Self {
            fake: None,
            args: Vec::new(),
            env: Vec::new(),
            outputs_file: None,
            cwd: None,
            user: None,
        }
    }

    /// Runs `command` (e.g. "prune"): a command other than deploy and plan
    /// reads no deployment name, so the default one is dropped.
    pub fn command(mut self, command: &str) -> Self {
        if !matches!(command, "deploy" | "plan") {
            self.args.retain(|a| !a.starts_with("--deployment-name="));
        }
        self.arg("command", command)
    }

    pub fn arg(mut self, flag: &str, value: impl AsRef<str>) -> Self {
        // `--flag=value`, so values starting with '-' stay values.
        self.args.push(format!("--{flag}={}", value.as_ref()));
        self
    }

    pub fn model(self, dir: impl AsRef<Path>) -> Self {
        let d = dir.as_ref().to_str().unwrap().to_string();
        self.arg("truss-directory", d)
    }

    pub fn env(mut self, k: &str, v: impl AsRef<str>) -> Self {
        self.env.push((k.into(), v.as_ref().into()));
        self
    }

    /// Runs in `dir` instead of the run's own temp dir.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Runs as `uid` (its gid the same number); only root can.
    pub fn run_as(mut self, uid: u32) -> Self {
        self.user = Some(uid);
        self
    }

    pub fn outputs_file(mut self, name: &'static str) -> Self {
        self.outputs_file = Some(name);
        self
    }

    pub fn run(self) -> Outcome {
        self.start().finish()
    }

    /// Runs against a fake on a manual clock (`manual_clock: true`), moving
    /// its clock step by step: each `(endpoint, secs)` waits until the
    /// binary's `endpoint` request is answered at the current scenario time,
    /// then sets the clock to `secs`. The binary therefore reads every
    /// scripted status at least once, however slow the machine, and a test
    /// can assert on the order of what it saw instead of on timing.
    pub fn run_stepping_clock(self, steps: &[(&str, f64)]) -> Outcome {
        let fake = self.fake.expect("stepping the clock needs a fake");
        assert!(
            fake.clock().is_manual(),
            "stepping needs manual_clock: true"
        );
        let mut running = self.start();
        for (endpoint, secs) in steps {
            let now = fake.clock().now();
            let answered = || {
                fake.requests()
                    .iter()
                    .any(|e| e.endpoint == *endpoint && e.scenario_secs == now)
            };
            while !answered() {
                if running.exited() {
                    // The outcome shows why; the test's assertions report it.
                    return running.finish();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            fake.clock().set(*secs);
        }
        running.finish()
    }

    /// Runs, and sends `signal` (e.g. `INT`) once the fake has answered
    /// `endpoint`.
    pub fn run_signalled_at(self, endpoint: &str, signal: &str) -> Outcome {
        self.run_signalled_after(endpoint, 1, signal)
    }

    /// Runs, and sends `signal` once the fake has answered `endpoint`
    /// `times` times.
    pub fn run_signalled_after(self, endpoint: &str, times: usize, signal: &str) -> Outcome {
        let fake = self.fake.expect("signalling at an endpoint needs a fake");
        let seen = || {
            fake.requests()
                .iter()
                .filter(|e| e.endpoint == endpoint)
                .count()
                >= times
        };
        self.run_signalled_when(seen, signal)
    }

    /// Runs, and calls `act` once `ready` holds (checked every few
    /// milliseconds; a run that exits first is returned as it is).
    pub fn run_acting_when(self, ready: impl Fn() -> bool, act: impl FnOnce()) -> Outcome {
        let mut running = self.start();
        while !ready() {
            if running.exited() {
                return running.finish();
            }
            if running.started.elapsed() > READY_LIMIT {
                let _ = running.child.kill();
                panic!("the run never reached the moment to act");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        act();
        running.finish()
    }

    /// Runs, and sends `signal` once `ready` holds (checked every few
    /// milliseconds; a run that exits first is returned as it is).
    pub fn run_signalled_when(self, ready: impl Fn() -> bool, signal: &str) -> Outcome {
        let mut running = self.start();
        if !running.signal_when(&ready, signal) {
            return running.finish();
        }
        running.finish()
    }

    /// Runs, sends `signal` once `ready` holds, then calls `act` with the
    /// run's process id once its output so far holds `said` (what the run
    /// prints after the signal, so `act` comes after the run reached it,
    /// not after a guess at its timing; a run that exits first is returned
    /// as it is).
    pub fn run_signalled_then(
        self,
        ready: impl Fn() -> bool,
        signal: &str,
        said: &str,
        act: impl FnOnce(u32),
    ) -> Outcome {
        let mut running = self.start();
        if !running.signal_when(&ready, signal) {
            return running.finish();
        }
        running.act_when_said(said, act)
    }

    /// Runs, and calls `act` with the run's process id once its output so
    /// far holds `said` (a run that exits first is returned as it is).
    pub fn run_acting_when_said(self, said: &str, act: impl FnOnce(u32)) -> Outcome {
        self.start().act_when_said(said, act)
    }

    /// Runs, and sends each `(ready, signal)` in turn once its `ready`
    /// holds (a run that exits first is returned as it is): a second
    /// signal during what the first set off.
    pub fn run_signalled_in_turn(self, steps: &[(&dyn Fn() -> bool, &str)]) -> Outcome {
        let mut running = self.start();
        for (ready, signal) in steps {
            if !running.signal_when(ready, signal) {
                break;
            }
        }
        running.finish()
    }

    pub fn start(self) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let gh_out = dir.path().join("github_output");
        let summary = dir.path().join("summary.md");
        std::fs::write(&gh_out, "").unwrap();
        let mut cmd = truss_push(dir.path());
        cmd.env("GITHUB_OUTPUT", &gh_out)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(f) = self.fake {
            cmd.args(["--app-url", &f.graphql_base()])
                .args(["--api-url", &f.rest_base()])
                .args(["--inference-url", &f.inference_template()])
                .args(["--s3-endpoint", &f.s3_endpoint()]);
        }
        let out_file = self.outputs_file.map(|n| dir.path().join(n));
        if let Some(p) = &out_file {
            cmd.args(["--output-file", p.to_str().unwrap()]);
        }
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        if let Some(uid) = self.user {
            use std::os::unix::fs::PermissionsExt;
            use std::os::unix::process::CommandExt;
            let open = |p: &Path, mode| {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
            };
            open(dir.path(), 0o777);
            open(&gh_out, 0o666);
            std::fs::write(&summary, "").unwrap();
            open(&summary, 0o666);
            // std drops the supplementary groups when root sets a uid.
            cmd.uid(uid).gid(uid);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().expect("the binary runs");
        // Drained on their own threads so a chatty run never blocks on a
        // full pipe while the test steps the clock or waits.
        let so_far = Arc::new(Mutex::new(Vec::new()));
        let stdout = drain(child.stdout.take().unwrap(), Arc::clone(&so_far));
        let stderr = drain(child.stderr.take().unwrap(), Arc::clone(&so_far));
        Running {
            _dir: dir,
            gh_out,
            summary,
            out_file,
            child,
            exit: None,
            stdout,
            stderr,
            so_far,
            started,
            signalled: None,
            peak_rss_kib: 0,
        }
    }
}

/// A hang guard, not a speed check: far above any test's own budget, it
/// turns a binary that never exits into a failing test instead of a stuck
/// test run.
const RUN_LIMIT: Duration = Duration::from_secs(600);
/// How long a run may take to reach the moment a test signals it.
const READY_LIMIT: Duration = Duration::from_secs(60);

/// A started run of the binary.
pub struct Running {
    /// Holds the run's HOME, working directory and output files until the
    /// outcome has been read.
    _dir: tempfile::TempDir,
    gh_out: PathBuf,
    summary: PathBuf,
    out_file: Option<PathBuf>,
    child: Child,
    exit: Option<ExitStatus>,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
    /// Both streams' bytes as they come, interleaved.
    so_far: Arc<Mutex<Vec<u8>>>,
    started: Instant,
    /// When a test signalled the run.
    signalled: Option<Instant>,
    peak_rss_kib: u64,
}

impl Running {
    /// Sends `signal` once `ready` holds (checked every few
    /// milliseconds); `false` when the run exited first.
    fn signal_when(&mut self, ready: &dyn Fn() -> bool, signal: &str) -> bool {
        while !ready() {
            if self.exited() {
                return false;
            }
            if self.started.elapsed() > READY_LIMIT {
                let _ = self.child.kill();
                panic!("the run never reached the moment to send {signal}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let sent = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        self.signalled = Some(Instant::now());
        true
    }

    pub fn exited(&mut self) -> bool {
        if self.exit.is_none() {
            // Read before the exit check: a process that has exited has no
            // memory figures left.
            if let Some(kib) = peak_rss_kib(self.child.id()) {
                self.peak_rss_kib = self.peak_rss_kib.max(kib);
            }
            self.exit = self.child.try_wait().expect("the child can be waited on");
        }
        self.exit.is_some()
    }

    fn act_when_said(mut self, said: &str, act: impl FnOnce(u32)) -> Outcome {
        let heard = |so_far: &Mutex<Vec<u8>>| {
            String::from_utf8_lossy(&so_far.lock().unwrap()).contains(said)
        };
        while !heard(&self.so_far) {
            if self.exited() {
                return self.finish();
            }
            if self.started.elapsed() > READY_LIMIT {
                let _ = self.child.kill();
                panic!("the run never said {said:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        act(self.child.id());
        self.finish()
    }

    pub fn finish(mut self) -> Outcome {
        while !self.exited() {
            if self.started.elapsed() > RUN_LIMIT {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the binary did not exit within {RUN_LIMIT:?}\n--- stdout\n{}",
                    self.stdout.join().unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let elapsed = self.started.elapsed();
        let status = self.exit.expect("exited");
        let gh = std::fs::read_to_string(&self.gh_out).unwrap();
        let outputs = parse_github_output(&gh)
            .unwrap_or_else(|e| panic!("GITHUB_OUTPUT is not valid for the runner: {e:?}\n{gh}"))
            .into_iter()
            .collect();
        Outcome {
            code: status.code().unwrap_or(-1),
            stdout: self.stdout.join().expect("stdout read"),
            stderr: self.stderr.join().expect("stderr read"),
            outputs,
            summary: std::fs::read_to_string(&self.summary).unwrap_or_default(),
            outputs_file: self
                .out_file
                .as_ref()
                .and_then(|p| std::fs::read_to_string(p).ok()),
            elapsed,
            after_signal: self.signalled.map(|t| t.elapsed()),
            peak_rss_kib: self.peak_rss_kib,
        }
    }
}

/// `VmHWM` of a running process, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn drain(mut pipe: impl Read + Send + 'static, so_far: Arc<Mutex<Vec<u8>>>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    bytes.extend_from_slice(&chunk[..n]);
                    so_far.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Endpoint names the fake logged, in order.
pub fn endpoints(fake: &FakeBaseten) -> Vec<String> {
    fake.requests().into_iter().map(|e| e.endpoint).collect()
}

/// The mutation requests the fake logged.
pub fn mutations(fake: &FakeBaseten) -> Vec<fake_baseten::reqlog::LogEntry> {
    fake.requests().into_iter().filter(|e| e.mutation).collect()
}

/// Asserts that each of `lines` occurs in `text`, each after the one before:
/// the order the user reads things in, not when they happened.
#[track_caller]
pub fn assert_in_order(text: &str, lines: &[&str]) {
    let mut from = 0;
    for line in lines {
        match text[from..].find(line) {
            Some(at) => from += at + line.len(),
            None => panic!("{line:?} is missing or out of order in:\n{text}"),
        }
    }
}
