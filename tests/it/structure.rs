//! Invariants held by the code's shape, read from the sources (`view`:
//! tokens without comments or test code, paths resolved through `use`
//! lines): a new feature that breaks one fails here, in review, before
//! any run.
//!
//! - every file the run writes for the user goes through the one sink
//!   (`src/ci/outputs/file.rs`): no other product code opens, creates or
//!   copies a file, but for the listed scratch files;
//! - network settings are read and HTTP clients and TLS configs built only
//!   in `src/net.rs` (`Network::from_env`, once per run): the network's
//!   variable names live in `env_vars::network` and nothing else names
//!   them, and only `run.rs` and `main.rs` read the process environment;
//! - `github` reaches only what its job needs, never the config, the flow's
//!   context or the platform's client (which hold the Baseten key);
//! - no product code reads the clock to make a deadline of its own: every
//!   deadline and every "is there time left" comes from the run's budget
//!   (`src/budget.rs`) and its clock, but for the listed measurements.
//!
//! Each rule lists its exceptions with a reason and how many times each
//! occurs: a new occurrence fails, and so does an exception that no longer
//! occurs (remove it).

mod informing;
mod view;

use std::collections::BTreeMap;
use std::path::Path;

use view::{Crate, PathUse, Source, TokenKind};

/// Something a rule found: where, and which pattern.
#[derive(Clone, Debug)]
struct Finding {
    file: String,
    line: usize,
    what: String,
}

/// An exception to a rule: `what` occurs `count` times in `file`, because
/// `why`.
struct Allowed {
    file: &'static str,
    what: &'static str,
    count: usize,
    why: &'static str,
}

/// The findings no exception covers, and the exceptions whose count is no
/// longer what they say (a new occurrence, or a stale entry).
fn judge(findings: &[Finding], allowed: &[Allowed]) -> Vec<String> {
    let mut by_place: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for f in findings {
        by_place
            .entry((f.file.clone(), f.what.clone()))
            .or_default()
            .push(f.line);
    }
    let mut problems = Vec::new();
    for a in allowed {
        assert!(!a.why.is_empty(), "an exception needs its reason");
        let lines = by_place
            .remove(&(a.file.to_string(), a.what.to_string()))
            .unwrap_or_default();
        if lines.len() != a.count {
            problems.push(format!(
                "{}: `{}` occurs {} time(s) (lines {lines:?}), the exception says {} ({}): fix the code or the exception",
                a.file,
                a.what,
                lines.len(),
                a.count,
                a.why
            ));
        }
    }
    for ((file, what), lines) in by_place {
        problems.push(format!("{file}:{lines:?}: `{what}`"));
    }
    problems
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn found(file: &str, line: usize, what: impl Into<String>) -> Finding {
    Finding {
        file: file.to_string(),
        line,
        what: what.into(),
    }
}

// ---------------------------------------------------------------- writers

/// The one sink.
const SINK: &str = "ci/outputs/file.rs";

/// Paths that open, create, copy or link a file (matched as a run of
/// segments, after `use` resolution).
const WRITER_PATHS: [&str; 10] = [
    "fs::write",
    "fs::copy",
    "fs::rename",
    "fs::hard_link",
    "fs::soft_link",
    "unix::fs::symlink",
    "OpenOptions",
    "File::create",
    "File::create_new",
    "File::options",
];

/// Methods of the writers above (`OpenOptions`, `tempfile`'s files).
const WRITER_METHODS: [&[&str]; 7] = [
    &[".", "write", "(", "true", ")"],
    &[".", "append", "(", "true", ")"],
    &[".", "create", "(", "true", ")"],
    &[".", "truncate", "(", "true", ")"],
    &[".", "create_new", "("],
    &[".", "persist", "("],
    &[".", "persist_noclobber", "("],
];

fn writers(c: &Crate) -> Vec<Finding> {
    let mut out = Vec::new();
    for (file, s) in &c.product {
        if file == SINK {
            continue;
        }
        for p in s.all_paths().into_iter().filter(|p| !p.method) {
            let segs = &p.segments;
            for w in WRITER_PATHS {
                if p.contains(w) {
                    out.push(found(file, p.line, w));
                }
            }
            if segs.first().is_some_and(|f| f == "tempfile") {
                out.push(found(file, p.line, p.text()));
            }
            // A glob of a file-system module brings its writers in unseen.
            if segs.last().is_some_and(|l| l == "*")
                && (p.contains("fs") || segs.first().is_some_and(|f| f == "tempfile"))
            {
                out.push(found(file, p.line, p.text()));
            }
        }
        for m in WRITER_METHODS {
            for line in s.find_seq(m) {
                out.push(found(file, line, m.concat()));
            }
        }
    }
    // A file outside the module tree is compiled by nobody, or included in
    // a way this view cannot follow: either way, unchecked.
    for u in &c.unreached {
        out.push(found(u, 0, "a file no `mod` declares"));
    }
    out
}

/// Files the run writes that are not the user's: each in a place the run
/// made and removes, never a path the user named.
const SCRATCH: [Allowed; 3] = [
    Allowed {
        file: "chain.rs",
        what: "tempfile::tempdir",
        count: 1,
        why: "the directory the chain helper generates its trusses in, removed with the run",
    },
    Allowed {
        file: "chain/codegen.rs",
        what: "fs::write",
        count: 1,
        why: "the chain helper's script, in that temporary directory",
    },
    Allowed {
        file: "multi.rs",
        what: "tempfile::tempfile",
        count: 1,
        why: "an unnamed temporary file (gone when closed) that holds one target's log until it is replayed: never a file the user named",
    },
];

#[test]
fn only_the_sink_opens_a_file_for_writing() {
    let problems = judge(&writers(&Crate::from_disk(&src())), &SCRATCH);
    assert!(
        problems.is_empty(),
        "write through the sink (crate::ci::write_file), not a file of your own:\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------- network

/// The network's home, and where the names are declared.
const NET: &str = "net.rs";
const ENV_VARS: &str = "env_vars.rs";

/// Whether a variable's name is a network setting by its form: a proxy
/// (`*_PROXY`, any case) or a CA file (`SSL_CERT_*`).
fn looks_like_network(name: &str) -> bool {
    let up = name.trim().to_ascii_uppercase();
    up.ends_with("_PROXY") || up.contains("SSL_CERT")
}

/// `const NAME: &str = "value";` in `t`, with whether the value is one
/// literal (`None` when it is an expression: another constant, a macro).
fn str_consts(t: &[view::Token]) -> Vec<(String, Option<String>, usize)> {
    let mut out = Vec::new();
    for k in 0..t.len() {
        if !(t[k].is(TokenKind::Ident, "const")
            && t.get(k + 1).is_some_and(|n| n.kind == TokenKind::Ident))
        {
            continue;
        }
        let Some(eq) = (k..t.len()).find(|&j| t[j].text == "=" || t[j].text == ";") else {
            continue;
        };
        let end = (eq..t.len()).find(|&j| t[j].text == ";").unwrap_or(t.len());
        let value = match &t[eq + 1..end] {
            [v] if v.kind == TokenKind::Str => Some(v.text.clone()),
            _ => None,
        };
        out.push((t[k + 1].text.clone(), value, t[k].line));
    }
    out
}

/// The network's variables: the constants of `env_vars::network`, by name
/// and value; and what is wrong with the declarations.
fn network_names(env_vars: &Source) -> (Vec<(String, String)>, Vec<Finding>) {
    let t = &env_vars.tokens;
    let mut problems = Vec::new();
    let start = (0..t.len().saturating_sub(2)).find(|&k| {
        t[k].is(TokenKind::Ident, "mod")
            && t[k + 1].is(TokenKind::Ident, "network")
            && t[k + 2].text == "{"
    });
    let Some(start) = start else {
        problems.push(found(ENV_VARS, 0, "no `mod network { … }`"));
        return (Vec::new(), problems);
    };
    let mut depth = 0;
    let mut end = start + 2;
    for (k, tok) in t.iter().enumerate().skip(start + 2) {
        match tok.text.as_str() {
            "{" if tok.kind == TokenKind::Punct => depth += 1,
            "}" if tok.kind == TokenKind::Punct => {
                depth -= 1;
                if depth == 0 {
                    end = k;
                    break;
                }
            }
            _ => {}
        }
    }
    let mut names = Vec::new();
    for (name, value, line) in str_consts(&t[start..end]) {
        match value {
            Some(v) => names.push((name, v)),
            None => problems.push(found(ENV_VARS, line, format!("{name} is not a literal"))),
        }
    }
    let outside: Vec<view::Token> = t[..start].iter().chain(&t[end..]).cloned().collect();
    for (name, value, line) in str_consts(&outside) {
        match value {
            // Every name is declared as itself: an alias of a network
            // name would read it under another.
            None => problems.push(found(ENV_VARS, line, format!("{name} is not a literal"))),
            Some(v) if looks_like_network(&v) => problems.push(found(
                ENV_VARS,
                line,
                format!("{name} = {v:?} is a network variable outside `network`"),
            )),
            Some(_) => {}
        }
    }
    (names, problems)
}

/// Paths that build an HTTP client or a TLS config, or choose roots or
/// proxies: the network module's alone.
const CLIENT_PATHS: [&str; 14] = [
    "reqwest::Client",
    "reqwest::ClientBuilder",
    "reqwest::blocking",
    "reqwest::get",
    "reqwest::Proxy",
    "reqwest::NoProxy",
    "reqwest::Certificate",
    "rustls::ClientConfig",
    "rustls::RootCertStore",
    "webpki_roots",
    "hyper_util::client::legacy",
    "hyper::client",
    "Matcher::builder",
    "Matcher::from_env",
];

/// Reading the process environment.
const ENV_READS: [&str; 4] = [
    "std::env::var",
    "std::env::var_os",
    "std::env::vars",
    "std::env::vars_os",
];

fn network(c: &Crate) -> Vec<Finding> {
    let Some(env_vars) = c.product.get(ENV_VARS) else {
        return vec![found(ENV_VARS, 0, "missing")];
    };
    let (names, mut out) = network_names(env_vars);
    let values: Vec<String> = names.iter().map(|(_, v)| v.to_ascii_uppercase()).collect();
    for (file, s) in &c.product {
        for p in s.all_paths() {
            for r in ENV_READS {
                if !p.method && p.contains(r) {
                    out.push(found(file, p.line, r));
                }
            }
        }
        if file == NET || file == ENV_VARS {
            continue;
        }
        for p in s.all_paths().into_iter().filter(|p| !p.method) {
            if p.contains("env_vars::network")
                || p.segments
                    .iter()
                    .any(|seg| names.iter().any(|(n, _)| n == seg))
            {
                out.push(found(file, p.line, "env_vars::network"));
            }
            for w in CLIENT_PATHS {
                if p.starts_with(w) || p.contains(w) {
                    out.push(found(file, p.line, w));
                }
            }
            if p.contains("Matcher::from_system") {
                out.push(found(file, p.line, "Matcher::from_system"));
            }
            if p.segments.last().is_some_and(|l| l == "*")
                && ["reqwest", "rustls", "hyper_util"].contains(&p.segments[0].as_str())
            {
                out.push(found(file, p.line, p.text()));
            }
        }
        // A name spelt out (`"SSL_CERT_FILE"`, `"_PROXY"`, `"{}_proxy"`):
        // a literal of one word. A message may mention a variable.
        for lit in s.strings() {
            let word = lit.text.trim();
            if word.is_empty() || word.contains(char::is_whitespace) {
                continue;
            }
            if looks_like_network(word) || values.contains(&word.to_ascii_uppercase()) {
                out.push(found(file, lit.line, "a network variable's name"));
            }
        }
    }
    out
}

const ENVIRONMENT_READERS: [Allowed; 2] = [
    Allowed {
        file: "run.rs",
        what: "std::env::var",
        count: 1,
        why: "the run reads its environment once, through the lookup it hands down",
    },
    Allowed {
        file: "main.rs",
        what: "std::env::var",
        count: 1,
        why: "the debug log's filter, before the run starts",
    },
];

/// The S3 connections take the run's TLS config (`net::Transport::tls`)
/// as a value and pass it to the TLS connector: they build none (no
/// `ClientConfig::builder`, which names the same path and would count
/// here).
const TLS_PASSERS: [Allowed; 2] = [
    Allowed {
        file: "s3/wire/mod.rs",
        what: "rustls::ClientConfig",
        count: 1,
        why: "holds the run's TLS config, built in net.rs",
    },
    Allowed {
        file: "s3/wire/conn.rs",
        what: "rustls::ClientConfig",
        count: 2,
        why: "hands the run's TLS config to the connector, for S3 and for an https:// proxy",
    },
];

#[test]
fn only_the_network_module_reads_network_settings_or_builds_clients() {
    let allowed: Vec<Allowed> = ENVIRONMENT_READERS.into_iter().chain(TLS_PASSERS).collect();
    let problems = judge(&network(&Crate::from_disk(&src())), &allowed);
    assert!(
        problems.is_empty(),
        "take the run's net::Network (built once in run.rs), not a client, a setting or a variable of your own:\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------- github

/// What `github` may reach of the crate: its settings and token, the
/// pages' URLs, the sinks, the run's state and budget, and the network.
/// Never `config` (every input), `flow::Ctx` or `baseten::Api` (the key).
const GITHUB_MAY_USE: [&str; 13] = [
    "crate::github",
    "crate::baseten::Endpoints",
    "crate::baseten::is_loopback",
    "crate::budget",
    "crate::ci",
    "crate::env_vars",
    "crate::flow::State",
    "crate::kind",
    "crate::net",
    "crate::outcome",
    "crate::retry",
    "crate::secret",
    "crate::settings::github",
];

fn github_reach(c: &Crate) -> Vec<Finding> {
    let mut out = Vec::new();
    for (file, s) in c.product.iter().filter(|(f, _)| f.starts_with("github/")) {
        for p in s.all_paths().into_iter().filter(|p| !p.method) {
            // `pub(crate)` names no path.
            let visibility = p.segments.len() == 1;
            if p.starts_with("crate")
                && !visibility
                && !GITHUB_MAY_USE.iter().any(|a| p.starts_with(a))
            {
                out.push(found(file, p.line, p.text()));
            }
        }
    }
    out
}

#[test]
fn github_never_reaches_the_config_or_the_key() {
    let problems = judge(&github_reach(&Crate::from_disk(&src())), &[]);
    assert!(
        problems.is_empty(),
        "github gets a github::Job, never the Config, the flow's context or the platform's client (they reach every input and the Baseten key); what it may use: {GITHUB_MAY_USE:?}\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------- the clock

const BUDGET: &str = "budget.rs";

/// Names a deadline is made from by a sum.
const MOMENTS: [&str; 7] = [
    "started", "start", "began", "now", "t0", "until", "deadline",
];

fn clock_reads(c: &Crate) -> Vec<Finding> {
    let mut out = Vec::new();
    for (file, s) in &c.product {
        if file == BUDGET || file.starts_with("budget/") {
            continue;
        }
        let paths = s.all_paths();
        let ends = |p: &PathUse, tail: &[&str]| {
            p.segments.len() >= tail.len()
                && p.segments[p.segments.len() - tail.len()..]
                    .iter()
                    .zip(tail)
                    .all(|(a, b)| a == b)
        };
        for p in paths.iter().filter(|p| !p.method) {
            if ends(p, &["Instant", "now"]) {
                out.push(found(file, p.line, "Instant::now"));
            }
            if ends(p, &["Instant", "from_std"]) {
                out.push(found(file, p.line, "Instant::from_std"));
            }
            if ends(p, &["time", "timeout_at"]) || ends(p, &["time", "sleep_until"]) {
                out.push(found(file, p.line, p.segments.last().unwrap().clone()));
            }
        }
        // In code that handles instants, a sum is a deadline of its own.
        let handles_instants = paths
            .iter()
            .any(|p| p.segments.iter().any(|s| s == "Instant"));
        if !handles_instants {
            continue;
        }
        for line in s.find_seq(&[".", "checked_add", "("]) {
            out.push(found(file, line, "checked_add"));
        }
        for m in MOMENTS {
            for line in s
                .find_seq(&[m, "+"])
                .into_iter()
                .chain(s.find_seq(&[m, "+="]))
            {
                out.push(found(file, line, format!("{m} +")));
            }
        }
    }
    out
}

/// Clock reads that make no phase's deadline: measurements of how long
/// something took, progress on screen, the S3 wire's own waits inside one
/// request, timers on a budget deadline converted for them
/// (`Clock::timer`); and the known violations the lead must see, each
/// marked TODO.
const MEASUREMENTS: [Allowed; 27] = [
    Allowed {
        file: "baseten/inference.rs",
        what: "Instant::now",
        count: 1,
        why: "times the answer (the first token, tokens per second)",
    },
    Allowed {
        file: "baseten/probe.rs",
        what: "Instant::now",
        count: 1,
        why: "times one evidence request: its latency is the measurement",
    },
    Allowed {
        file: "ci/outputs/file.rs",
        what: "Instant::now",
        count: 1,
        why: "the sink's own bound on one file (3 s), whatever phase writes",
    },
    Allowed {
        file: "ci/reporter.rs",
        what: "Instant::now",
        count: 3,
        why: "upload progress on screen: rates, and how often a line is printed",
    },
    Allowed {
        file: "evidence/mod.rs",
        what: "Instant::now",
        count: 1,
        why: "times the smoke test's answer when a negative first case is the smoke test",
    },
    Allowed {
        file: "evidence/sampler.rs",
        what: "Instant::now",
        count: 1,
        why: "times the sample",
    },
    Allowed {
        file: "evidence/sampler.rs",
        what: "Instant::from_std",
        count: 1,
        why: "a timer on the evidence deadline, which the flow hands over on the monotonic clock (`Clock::timer`); each sample request is still checked on the run's clock",
    },
    Allowed {
        file: "evidence/sampler.rs",
        what: "timeout_at",
        count: 1,
        why: "the same timer",
    },
    Allowed {
        file: "evidence/sampler.rs",
        what: "sleep_until",
        count: 1,
        why: "the same timer",
    },
    Allowed {
        file: "flow/smoke.rs",
        what: "Instant::now",
        count: 1,
        why: "times the smoke test's answer",
    },
    Allowed {
        file: "content/plan.rs",
        what: "timeout_at",
        count: 1,
        why: "a timer on the plan's deadline (its budget's Setup phase), through `Clock::timer`",
    },
    Allowed {
        file: "flow/smoke.rs",
        what: "timeout_at",
        count: 1,
        why: "a timer on the smoke test's deadline, through `Ctx::timer`",
    },
    Allowed {
        file: "flow/wait.rs",
        what: "timeout_at",
        count: 1,
        why: "a timer on the last look's deadline, through `Ctx::timer`",
    },
    Allowed {
        file: "flow/upload.rs",
        what: "Instant::now",
        count: 1,
        why: "times the upload, for its report",
    },
    Allowed {
        file: "flow/upload.rs",
        what: "timeout_at",
        count: 1,
        why: "a timer on cleanup's deadline, through `Ctx::timer`",
    },
    Allowed {
        file: "retry.rs",
        what: "Instant::now",
        count: 1,
        why: "compares with a deadline its callers hand over on the monotonic clock (`Clock::timer`)",
    },
    Allowed {
        file: "s3/mod.rs",
        what: "Instant::now",
        count: 2,
        why: "times the upload, for its report; and the drain's share of the cleanup deadline the caller hands over as a timer (`Clock::timer`): half of what is left, at most `multipart::DRAIN_WAIT`",
    },
    Allowed {
        file: "s3/mod.rs",
        what: "now +",
        count: 1,
        why: "the same share",
    },
    Allowed {
        file: "s3/multipart.rs",
        what: "Instant::now",
        count: 1,
        why: "after a failed part, the other parts' answers are awaited at most `DRAIN_WAIT`; the upload phase's own timer (its caller's `Ctx::timer`) still ends it",
    },
    Allowed {
        file: "s3/multipart.rs",
        what: "timeout_at",
        count: 1,
        why: "the drain's timer, on a deadline handed over as a timer",
    },
    Allowed {
        file: "s3/payload.rs",
        what: "Instant::now",
        count: 3,
        why: "the stall watchdog of one body's writes (no progress for its stall time fails the attempt): a bound inside one request, not a phase's deadline",
    },
    Allowed {
        file: "s3/payload.rs",
        what: "start +",
        count: 2,
        why: "the same watchdog",
    },
    Allowed {
        file: "s3/payload.rs",
        what: "started +",
        count: 1,
        why: "the same watchdog",
    },
    Allowed {
        file: "s3/wire/conn.rs",
        what: "Instant::now",
        count: 1,
        why: "when a connection went idle: the pool's rule for reusing it",
    },
    Allowed {
        file: "s3/wire/pool.rs",
        what: "Instant::now",
        count: 1,
        why: "the same idle time",
    },
    Allowed {
        file: "s3/wire/exchange.rs",
        what: "Instant::now",
        count: 1,
        why: "the wait for `100 Continue` inside one request, not a phase's deadline",
    },
    Allowed {
        file: "s3/wire/exchange.rs",
        what: "timeout_at",
        count: 1,
        why: "the same wait",
    },
];

#[test]
fn deadlines_come_from_the_budget_alone() {
    let problems = judge(&clock_reads(&Crate::from_disk(&src())), &MEASUREMENTS);
    assert!(
        problems.is_empty(),
        "ask the run's budget for the phase's deadline (ctx.until(Phase::…), the budget's clock), not the clock:\n{}",
        problems.join("\n")
    );
}

/// The scripted clock a test drives the binary with is compiled into debug
/// builds only, and nothing but the budget reaches it: a release build
/// reads the monotonic clock whatever its environment says.
#[test]
fn the_scripted_clock_exists_only_in_debug_builds() {
    let text = std::fs::read_to_string(src().join(BUDGET)).unwrap();
    let budget = view::lex(&text);
    let words: Vec<&str> = budget.iter().map(|t| t.text.as_str()).collect();
    let declared = words.windows(9).any(|w| {
        w == [
            "#",
            "[",
            "cfg",
            "(",
            "debug_assertions",
            ")",
            "]",
            "mod",
            "test_clock",
        ]
    });
    assert!(
        declared,
        "budget.rs declares `#[cfg(debug_assertions)] mod test_clock;`"
    );
    for (file, s) in &Crate::from_disk(&src()).product {
        if [BUDGET, "budget/test_clock.rs", ENV_VARS].contains(&file.as_str()) {
            continue;
        }
        let named = s.all_paths().iter().any(|p| {
            p.segments
                .iter()
                .any(|seg| seg == "test_clock" || seg == "TRUSS_PUSH_TEST_CLOCK")
        });
        assert!(
            !named,
            "{file} reaches the scripted clock: only the budget may"
        );
    }
}

// ---------------------------------------------------------------- the truss's files

#[test]
fn the_truss_files_are_checked_in_one_place() {
    // `plan::check_files` is the one check of a truss's files, called once
    // per target by every road (one target, several, a plan).
    let c = Crate::from_disk(&src());
    let calling = |target: &str| -> Vec<String> {
        c.product
            .iter()
            .filter(|(_, s)| s.paths().iter().any(|p| p.segments.join("::") == target))
            .map(|(f, _)| f.clone())
            .collect()
    };
    let mut walkers = calling("crate::archive::plan");
    walkers.retain(|f| f != "archive.rs");
    assert_eq!(
        walkers,
        ["plan.rs"],
        "check the truss's files through plan::check_files"
    );
    assert_eq!(
        calling("crate::plan::check_files"),
        ["plan.rs", "run.rs"],
        "prepare (several, plan) and one target"
    );
}

// ---------------------------------------------------------------- the rules' own test

/// A crate of `files` (path under `src/` → text): `lib.rs` and each
/// directory's `mod.rs`, unless given, declare every file under them.
fn snippet_crate(files: &[(&str, &str)]) -> Crate {
    let mut all: BTreeMap<String, String> = files
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    let given: Vec<String> = all.keys().cloned().collect();
    let mut declared: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for f in &given {
        let parts: Vec<&str> = f.trim_end_matches(".rs").split('/').collect();
        for depth in 0..parts.len() {
            let parent = if depth == 0 {
                "lib.rs".to_string()
            } else {
                format!("{}/mod.rs", parts[..depth].join("/"))
            };
            if parts[depth] != "mod" && parts[depth] != "lib" {
                declared
                    .entry(parent)
                    .or_default()
                    .insert(parts[depth].to_string());
            }
        }
    }
    for (parent, children) in declared {
        if !given.contains(&parent) {
            let text: String = children.iter().map(|c| format!("mod {c};\n")).collect();
            all.insert(parent, text);
        }
    }
    Crate::from_files(&all)
}

const ENV_VARS_OK: &str = r#"
/// doc
pub const GITHUB_OUTPUT: &str = "GITHUB_OUTPUT";
pub mod network {
    pub const SSL_CERT_FILE: &str = "SSL_CERT_FILE";
    pub const HTTPS_PROXY: &str = "HTTPS_PROXY";
    pub const HTTPS_PROXY_LOWER: &str = "https_proxy";
}
"#;

/// Each rule against small crates: every way around it found so far is
/// caught, and innocent code passes. A rule that cannot fail would pass
/// here on the evasions.
#[test]
fn each_rule_catches_its_evasions_and_passes_innocent_code() {
    let writes = |files: &[(&str, &str)]| writers(&snippet_crate(files));
    let nets = |file: &str, text: &str| {
        network(&snippet_crate(&[(ENV_VARS, ENV_VARS_OK), (file, text)]))
            .into_iter()
            .filter(|f| f.file == file || f.file == ENV_VARS)
            .collect::<Vec<_>>()
    };
    let reach = |file: &str, text: &str| github_reach(&snippet_crate(&[(file, text)]));
    let clock = |file: &str, text: &str| clock_reads(&snippet_crate(&[(file, text)]));

    // Writers.
    for (why, files) in [
        (
            "tempfile::tempfile",
            &[("x.rs", "fn f() { let f = tempfile::tempfile(); }")][..],
        ),
        (
            "NamedTempFile",
            &[(
                "x.rs",
                "use tempfile::NamedTempFile;\nfn f() { NamedTempFile::new(); }",
            )],
        ),
        (
            "tempfile::Builder",
            &[("x.rs", "fn f() { tempfile::Builder::new().tempfile(); }")],
        ),
        (
            "use std::fs::write",
            &[("x.rs", "use std::fs::write;\nfn f() { write(p, b\"x\"); }")],
        ),
        (
            "fs alias",
            &[("x.rs", "use std::fs as f;\nfn f() { f::write(p, b\"x\"); }")],
        ),
        (
            "File::create via use",
            &[("x.rs", "use std::fs::File;\nfn f() { File::create(p); }")],
        ),
        (
            "OpenOptions",
            &[(
                "x.rs",
                "fn f() { std::fs::OpenOptions::new().append(true).open(p); }",
            )],
        ),
        (
            "tokio's write",
            &[("x.rs", "async fn f() { tokio::fs::write(p, b).await; }")],
        ),
        (
            "a glob of fs",
            &[("x.rs", "use std::fs::*;\nfn f() { write(p, b); }")],
        ),
        (
            "after the first test module",
            &[(
                "x.rs",
                "#[cfg(test)]\nmod tests {\n fn t() {}\n}\nfn later() { std::fs::write(p, b); }",
            )],
        ),
        (
            "a product file named tests.rs",
            &[
                ("lib.rs", "mod s3;"),
                ("s3/mod.rs", "mod tests;"),
                ("s3/tests.rs", "fn f() { std::fs::write(p, b); }"),
            ],
        ),
        (
            "archive.rs outside its test-only writer",
            &[(
                "archive.rs",
                "#[cfg(test)]\nfn write() { File::create(p); }\nfn leak() { std::fs::copy(a, b); }",
            )],
        ),
        (
            "a file no mod declares",
            &[("lib.rs", ""), ("stray.rs", "fn f() {}")],
        ),
    ] {
        assert!(!writes(files).is_empty(), "not caught: {why}");
    }
    for (why, files) in [
        (
            "reads",
            &[(
                "x.rs",
                "fn f() { std::fs::read_to_string(p); std::fs::File::open(p); }",
            )][..],
        ),
        (
            "the sink itself",
            &[(SINK, "fn w() { std::fs::OpenOptions::new().write(true); }")],
        ),
        (
            "a comment",
            &[(
                "x.rs",
                "// std::fs::write(p)\n/* File::create(p) /* nested */ */\nfn f() {}",
            )],
        ),
        (
            "a string",
            &[(
                "x.rs",
                "fn f() { let s = \"std::fs::write(p)\"; let r = r#\"File::create(\"x\")\"#; }",
            )],
        ),
        (
            "a char literal then code",
            &[("x.rs", "fn f() { let q = '\"'; let e = '\\''; g(); }")],
        ),
        (
            "a buffer's write",
            &[(
                "x.rs",
                "fn f(b: &mut Vec<u8>) { b.write(b\"x\"); out.write_all(b\"y\"); }",
            )],
        ),
        (
            "the sink's function",
            &[("x.rs", "fn f() { crate::ci::write_file(p, t); }")],
        ),
        (
            "test code anywhere",
            &[(
                "x.rs",
                "fn f() {}\n#[cfg(test)]\nmod tests { fn t() { std::fs::write(p, b); } }\n#[cfg(test)]\nfn helper() { tempfile::tempfile(); }\nfn g() {}",
            )],
        ),
        (
            "a test file declared so",
            &[
                ("lib.rs", "mod s3;"),
                ("s3/mod.rs", "#[cfg(test)]\nmod tests;"),
                ("s3/tests.rs", "fn f() { std::fs::write(p, b); }"),
            ],
        ),
    ] {
        let f = writes(files);
        assert!(f.is_empty(), "innocent code caught ({why}): {f:?}");
    }

    // The network.
    for (why, file, text) in [
        (
            "SSL_CERT_FILE read in place",
            "baseten/mod.rs",
            "fn f() { std::env::var(\"SSL_CERT_FILE\"); }",
        ),
        (
            "proxies by suffix",
            "x.rs",
            "fn f() { std::env::vars().filter(|(k, _)| k.ends_with(\"_PROXY\")); }",
        ),
        (
            "a name formatted",
            "x.rs",
            "fn f(s: &str) { let n = format!(\"{}_PROXY\", s); }",
        ),
        (
            "a lower-case name",
            "x.rs",
            "fn f(env: E) { env(\"https_proxy\"); }",
        ),
        (
            "a declared name",
            "x.rs",
            "use crate::env_vars::network;\nfn f(env: E) { env(network::HTTPS_PROXY); }",
        ),
        (
            "a declared name, imported",
            "x.rs",
            "use crate::env_vars::network::SSL_CERT_FILE as CA;\nfn f(env: E) { env(CA); }",
        ),
        (
            "reqwest's default client",
            "x.rs",
            "fn f() { let c = reqwest::Client::default(); }",
        ),
        (
            "a client via use",
            "x.rs",
            "use reqwest::Client;\nfn f() { let c = Client::new(); }",
        ),
        (
            "a client builder",
            "x.rs",
            "fn f() { reqwest::ClientBuilder::new().build(); }",
        ),
        (
            "a TLS config",
            "x.rs",
            "fn f() { rustls::ClientConfig::builder(); }",
        ),
        (
            "the process environment",
            "x.rs",
            "use std::env;\nfn f() { env::var_os(\"X\"); }",
        ),
        (
            "an alias constant",
            ENV_VARS,
            "pub const P: &str = network::HTTPS_PROXY;\npub mod network { pub const HTTPS_PROXY: &str = \"HTTPS_PROXY\"; }",
        ),
        (
            "a name outside network",
            ENV_VARS,
            "pub const SECRET_PROXY: &str = \"ALL_PROXY\";\npub mod network {}",
        ),
    ] {
        let f = if file == ENV_VARS {
            network(&snippet_crate(&[(ENV_VARS, text)]))
        } else {
            nets(file, text)
        };
        assert!(!f.is_empty(), "not caught: {why}");
    }
    for (why, text) in [
        (
            "a message naming a variable",
            "fn f() { bail!(\"check HTTPS_PROXY and the api-url input\"); }",
        ),
        (
            "the run's client",
            "fn f(net: &crate::net::Network) { let c = net.api_client(); }",
        ),
        (
            "an own Client type",
            "mod client;\nuse client::Client;\nfn f() { Client::new(h, b); }",
        ),
        (
            "reqwest's types for a request",
            "fn f(r: reqwest::Response, u: reqwest::Url, m: reqwest::Method) {}",
        ),
        (
            "an unrelated variable",
            "fn f(env: E) { env(crate::env_vars::GITHUB_OUTPUT); }",
        ),
    ] {
        let f = nets("x.rs", text);
        assert!(f.is_empty(), "innocent code caught ({why}): {f:?}");
    }
    assert!(
        nets(
            NET,
            "fn f() { reqwest::Client::builder(); std::env::var(\"X\"); }"
        )
        .iter()
        .all(|f| f.what == "std::env::var")
    );

    // GitHub's reach.
    for (why, text) in [
        ("the config by path", "fn f(c: &crate::config::Config) {}"),
        (
            "the config in a use tree",
            "use crate::{config::Config};\nfn f(c: &Config) {}",
        ),
        (
            "the flow's context",
            "use crate::flow::Ctx;\nfn f(c: &Ctx) {}",
        ),
        ("the platform's client", "fn f(a: &crate::baseten::Api) {}"),
        (
            "the config, relatively",
            "use super::super::config::Config;",
        ),
        ("all settings", "use crate::settings::Settings;"),
    ] {
        let f = reach("github/x.rs", text);
        assert!(!f.is_empty(), "not caught: {why}");
    }
    let f = reach(
        "github/x.rs",
        "use crate::settings::github::Settings;\nuse crate::flow::State;\nuse super::client::Client;\nfn f(e: &crate::baseten::Endpoints) { crate::ci::format_utc(t); }",
    );
    assert!(f.is_empty(), "{f:?}");

    // The clock, in every product module.
    for (why, file, text) in [
        (
            "now() plus",
            "content/plan.rs",
            "use std::time::Instant;\nfn f(d: Duration) { api.until(Instant::now() + d); }",
        ),
        (
            "checked_add",
            "evidence/x.rs",
            "use std::time::Instant;\nfn f(d: Duration) { Instant::now().checked_add(d); }",
        ),
        (
            "a moment, then a sum",
            "multi.rs",
            "fn f(d: Duration) { let t = std::time::Instant::now(); let u = t + d; }",
        ),
        (
            "an alias",
            "plan.rs",
            "use std::time::Instant as I;\nfn f() { I::now(); }",
        ),
        (
            "tokio's clock",
            "github/x.rs",
            "fn f() { tokio::time::Instant::now(); }",
        ),
        (
            "a start plus a timeout",
            "flow/x.rs",
            "fn f(ctx: &Ctx) -> Instant { ctx.started + ctx.cfg.wait_timeout }",
        ),
        (
            "a deadline of tokio's",
            "flow/x.rs",
            "fn f() { tokio::time::timeout_at(t, g()); }",
        ),
    ] {
        assert!(!clock(file, text).is_empty(), "not caught: {why}");
    }
    for (why, text) in [
        (
            "the budget's deadline",
            "fn f(ctx: &Ctx) { let until = ctx.until(Phase::Smoke); if ctx.budget.left(until).is_zero() {} }",
        ),
        ("integers", "fn f(a: u64, b: u64) { a.checked_add(b); }"),
        ("wall time", "fn f() { std::time::SystemTime::now(); }"),
        (
            "a test's clock",
            "#[cfg(test)]\nmod tests { fn t() { std::time::Instant::now(); } }",
        ),
    ] {
        let f = clock("flow/x.rs", text);
        assert!(f.is_empty(), "innocent code caught ({why}): {f:?}");
    }
    assert!(clock(BUDGET, "fn f() { Instant::now() + d; }").is_empty());

    // The judge: an exception no longer used fails, and so does one more.
    let f = vec![found("a.rs", 1, "x"), found("a.rs", 2, "x")];
    let one = [Allowed {
        file: "a.rs",
        what: "x",
        count: 1,
        why: "w",
    }];
    let three = [Allowed {
        file: "a.rs",
        what: "x",
        count: 3,
        why: "w",
    }];
    let two = [Allowed {
        file: "a.rs",
        what: "x",
        count: 2,
        why: "w",
    }];
    assert_eq!(judge(&f, &one).len(), 1);
    assert_eq!(judge(&f, &three).len(), 1);
    assert!(judge(&f, &two).is_empty());
}
