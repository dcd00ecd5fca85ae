//! Invariants held by the code's shape, read from the sources: a new
//! feature that breaks one fails here, in review, before any run.
//!
//! - every file the run writes for the user goes through the one sink
//!   (`src/ci/outputs/file.rs`): no other product code opens a file for
//!   writing, but for the run's own scratch files;
//! - `github` never sees the run's config (which would reach every input);
//! - a phase takes its deadline from the run's budget (`src/budget.rs`),
//!   never from a clock sum of its own;
//! - network settings are read and HTTP clients built only in `src/net.rs`
//!   (`Network::from_env`, once per run), so no module below can reach
//!   the process environment for a proxy or a CA of its own.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every product source file under `src/`, with its text up to its test
/// module (tests write fixtures freely); files that are tests whole are
/// left out.
fn product_sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&src(), &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "tests.rs"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let product = match text.find("#[cfg(test)]\nmod tests") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            let rel = p.strip_prefix(src()).unwrap().display().to_string();
            (rel, product)
        })
        .collect()
}

/// The lines of `text` that are code (not comments) and contain `needle`.
fn code_lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter(|l| l.contains(needle))
        .collect()
}

#[test]
fn only_the_sink_opens_a_file_for_writing() {
    const SINK: &str = "ci/outputs/file.rs";
    // The run's own scratch files, in directories it made and removes:
    // never a file the user named.
    const SCRATCH: [(&str, &str); 2] = [
        (
            "archive/reference.rs",
            "the tests' reference tar (a test-only module), in a temp dir the test owns",
        ),
        (
            "chain/codegen.rs",
            "the chain helper's script, in a temporary directory",
        ),
    ];
    let writers = [
        "OpenOptions",
        "File::create",
        "File::options",
        "fs::write(",
        "fs::copy(",
        "fs::rename(",
        ".persist(",
        "create_new(",
        ".append(true)",
        ".write(true)",
    ];
    let mut found = Vec::new();
    for (file, text) in product_sources() {
        if file == SINK || SCRATCH.iter().any(|(f, _)| *f == file) {
            continue;
        }
        for w in writers {
            for line in code_lines_with(&text, w) {
                found.push(format!("{file}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "write through the sink (crate::ci::write_file), not a file of your own:\n{}",
        found.join("\n")
    );
}

/// `line` with its string literals emptied, so a message may name a
/// variable (`check HTTPS_PROXY`) without reading it; a name passed as a
/// literal (`env("https_proxy")`) keeps its quotes and still counts.
fn without_strings(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        let mut literal = String::new();
        while let Some(d) = chars.next() {
            match d {
                '\\' => {
                    chars.next();
                }
                '"' => break,
                d => literal.push(d),
            }
        }
        let lower = literal.to_ascii_lowercase();
        if lower.ends_with("_proxy") || lower.starts_with("ssl_cert_") {
            out.push_str(&format!("\"{lower}\""));
        } else {
            out.push_str("\"\"");
        }
    }
    out
}

#[test]
fn only_the_network_module_reads_network_settings_or_builds_clients() {
    // Where each variable's name is declared is not where it is read.
    const HOMES: [&str; 2] = ["net.rs", "env_vars.rs"];
    let reads_or_builds = [
        "SSL_CERT_",
        "_PROXY",
        "no_proxy\"",
        "https_proxy\"",
        "http_proxy\"",
        "all_proxy\"",
        "Matcher::from_env",
        "Matcher::from_system",
        "Client::builder(",
        "ClientBuilder",
        "Client::new()",
        "reqwest::blocking",
        "ClientConfig::builder",
    ];
    let mut found = Vec::new();
    for (file, text) in product_sources() {
        if HOMES.contains(&file.as_str()) {
            continue;
        }
        for line in text.lines() {
            let code = without_strings(line);
            if !code.trim_start().starts_with("//")
                && reads_or_builds.iter().any(|w| code.contains(w))
            {
                found.push(format!("{file}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "take the run's net::Network (built once in run.rs), not a client or setting of your own:\n{}",
        found.join("\n")
    );
}

#[test]
fn github_never_imports_the_config() {
    let found: Vec<String> = product_sources()
        .into_iter()
        .filter(|(f, _)| f.starts_with("github/"))
        .flat_map(|(f, text)| {
            code_lines_with(&text, "crate::config")
                .into_iter()
                .map(move |l| format!("{f}: {}", l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        found.is_empty(),
        "github gets a github::Job, never the Config (it would reach every input):\n{}",
        found.join("\n")
    );
}

#[test]
fn phases_take_their_deadlines_from_the_budget_alone() {
    // The code that runs the phases: a deadline there comes from
    // `budget::Budget::until` (through `Ctx::until` / `Ctx::api_for`),
    // never from a sum over the clock or the inputs.
    let phases =
        |f: &str| f.starts_with("flow/") || ["model.rs", "chain.rs", "execute.rs"].contains(&f);
    let sums = [
        "Instant::now() +",
        "started +",
        "wait_timeout +",
        "predict_timeout +",
        "until(None",
        "until(Some(",
        "deploy_until",
        "run_until",
    ];
    let mut found = Vec::new();
    for (file, text) in product_sources().into_iter().filter(|(f, _)| phases(f)) {
        for s in sums {
            for line in code_lines_with(&text, s) {
                found.push(format!("{file}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "ask the run's budget for the phase's deadline (ctx.until(Phase::…)):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_truss_files_are_checked_in_one_place() {
    // `plan::check_files` is the one check of a truss's files, called once
    // per target by every road (one target, several, a plan).
    let callers: Vec<String> = product_sources()
        .into_iter()
        .filter(|(f, text)| {
            !f.starts_with("archive/") && !code_lines_with(text, "archive::plan(").is_empty()
        })
        .map(|(f, _)| f)
        .collect();
    assert_eq!(
        callers,
        ["plan.rs"],
        "check the truss's files through plan::check_files"
    );
    let roads: Vec<String> = product_sources()
        .into_iter()
        .filter(|(_, text)| !code_lines_with(text, "check_files(").is_empty())
        .map(|(f, _)| f)
        .collect();
    assert_eq!(
        roads,
        ["plan.rs", "run.rs"],
        "prepare (several, plan) and one target"
    );
}
