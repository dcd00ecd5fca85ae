//! Invariants held by the code's shape that clippy cannot state. The
//! others live in the root `clippy.toml` (the compiler resolves their
//! paths; each exception is an `#[expect]` with its reason where it
//! stands; `scripts/clippy-rules` proves each one fires). Where each of
//! the rules lives:
//!
//! - only the sink writes files (scratch: the chain helper's directory
//!   and script, `multi`'s unnamed log file, each an `#[expect]`):
//!   `clippy.toml`;
//! - only `run.rs`/`main.rs` read the environment: `clippy.toml`;
//! - HTTP clients, TLS configs, roots and proxies only in `net`: `clippy.toml`;
//! - the clock read only by the budget: `clippy.toml` (`Instant::now`,
//!   `SystemTime::now`, tokio's, `checked_add`, `timeout_at`,
//!   `sleep_until`, `from_std`); a deadline summed from a moment
//!   (`started + timeout`): here, `listed_places_and_deadlines_not_summed`;
//! - the network's variables named only in `env_vars::network` and `net`:
//!   here (names and literals are no paths clippy resolves);
//! - `github` never reaches `config`, `flow::Ctx` or `baseten::Api`: here
//!   (visibility cannot hide an item from one sibling module alone);
//! - the scripted clock only in debug builds, named by the budget alone,
//!   and the truss's files checked in one place: here (`LISTED`);
//! - no mutation awaits a read that only informs: `structure/informing.rs`;
//! - each rule catches its evasions: `each_rule_catches_its_evasions`.
//!
//! The scan is textual: comments cut, strings set apart, test code
//! (`#[cfg(test)]` items, files declared so) left out; a nested block
//! comment, or a path spelt through a `use` alias, is not followed.

mod informing;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use regex_lite::{Captures, Regex};

/// A file's code: comments blanked, each string literal replaced by
/// `"S<n>"` (its text in `strings[n]`), test items blanked; lines kept.
pub(crate) struct Source {
    code: String,
    strings: Vec<String>,
}

/// Product files by path under `src/`.
pub(crate) type Crate = BTreeMap<String, Source>;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap()
}

fn blank(text: &str) -> String {
    let keep_lines = |c| if c == '\n' { c } else { ' ' };
    text.chars().map(keep_lines).collect()
}

fn lex(text: &str) -> Source {
    let lexeme = r##"(?s)//[^\n]*|/\*.*?\*/|r#".*?"#|r".*?"|"(?:[^"\\]|\\.)*"|'(?:[^'\\\n]|\\[^\n]{1,9}?)'"##;
    let mut strings = Vec::new();
    let mut lexed = |m: &Captures| {
        let m = &m[0];
        if m.starts_with(['/', '\'']) {
            return blank(m);
        }
        let body = m.trim_start_matches(['r', '#']).trim_end_matches('#');
        strings.push(body[1..body.len() - 1].to_string());
        format!("\"S{}\"{}", strings.len() - 1, blank(m).replace(' ', ""))
    };
    let mut code = re(lexeme).replace_all(text, &mut lexed).into_owned();
    // A test item: `#[cfg(test)]` to its `;`, or to its block's end.
    while let Some(at) = code.find("#[cfg(test)]") {
        let open = at + code[at..].find(['{', ';']).unwrap_or(code.len() - at - 1);
        let (mut end, mut depth) = (open + 1, 0);
        let block = if &code[open..=open] == "{" {
            &code[open..]
        } else {
            ""
        };
        for (k, ch) in block.char_indices() {
            depth += i32::from(ch == '{') - i32::from(ch == '}');
            if depth == 0 {
                end = open + k + 1;
                break;
            }
        }
        let gone = blank(&code[at..end]);
        code.replace_range(at..end, &gone);
    }
    let kept = re(r#""S\d+""#);
    let kept: BTreeSet<&str> = kept.find_iter(&code).map(|m| m.as_str()).collect();
    for (k, s) in strings.iter_mut().enumerate() {
        if !kept.contains(format!("\"S{k}\"").as_str()) {
            s.clear();
        }
    }
    Source { code, strings }
}

/// The files (path → text) as sources, but a file declared under
/// `#[cfg(test)]` by its parent.
pub(crate) fn product(files: &BTreeMap<String, String>) -> Crate {
    let decl = re(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+(\w+)\s*;");
    let stem = |f: &str| f.replace("/mod.rs", "").replace(".rs", "");
    let mut tests = BTreeSet::new();
    for (file, text) in files {
        let dir = Some(stem(file)).filter(|d| d != "lib" && d != "main");
        for k in decl.captures_iter(text) {
            tests.insert(
                dir.as_ref()
                    .map_or(k[3].into(), |d| format!("{d}/{}", &k[3])),
            );
        }
    }
    let kept = files.iter().filter(|(f, _)| !tests.contains(&stem(f)));
    kept.map(|(f, t)| (f.clone(), lex(t))).collect()
}

/// The crate's `src/`, read once.
pub(crate) fn from_disk() -> &'static Crate {
    static CRATE: OnceLock<Crate> = OnceLock::new();
    CRATE.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = BTreeMap::new();
        for path in ignore::Walk::new(&root).map(|e| e.unwrap().into_path()) {
            if path.extension().is_some_and(|x| x == "rs") {
                let rel = path.strip_prefix(&root).unwrap().to_string_lossy().into();
                files.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
        product(&files)
    })
}

/// Where `pattern` matches in `s`: (line, match).
pub(crate) fn finds(s: &Source, pattern: &str) -> Vec<(usize, String)> {
    let line = |at: usize| s.code[..at].matches('\n').count() + 1;
    let re = re(pattern);
    re.find_iter(&s.code)
        .map(|m| (line(m.start()), m.as_str().into()))
        .collect()
}

/// The files where `pattern` matches, each with how many times
/// (`file:n file:n`).
fn places<'a>(files: impl Iterator<Item = (&'a String, &'a Source)>, pattern: &str) -> String {
    let counted = files.map(|(f, s)| format!("{f}:{}", finds(s, pattern).len()));
    counted
        .filter(|p| !p.ends_with(":0"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn network_like(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    up.ends_with("_PROXY") || up.contains("SSL_CERT")
}

/// Each network variable is a literal constant of `env_vars::network`,
/// and no other file but `net.rs` names one, by constant or by literal.
fn network(c: &Crate) -> Vec<String> {
    let ev = &c["env_vars.rs"];
    let at = ev.code.find("mod network {").unwrap_or(0);
    let end = at + ev.code[at..].find("\n}").unwrap_or(0);
    let (mut out, mut names) = (Vec::new(), Vec::new());
    for k in re(r#"const\s+(\w+)\s*:[^=]*=\s*([^;]*);"#).captures_iter(&ev.code) {
        let (pos, name) = (k.get(0).unwrap().start(), k[1].to_string());
        let lit = re(r#"^"S(\d+)"$"#)
            .captures(k[2].trim())
            .map(|n| n[1].parse().unwrap());
        match lit.map(|n: usize| ev.strings[n].to_ascii_uppercase()) {
            None => out.push(format!("env_vars.rs: {name} is not a literal")),
            Some(v) if at < pos && pos < end => names.push((name, v)),
            Some(v) if network_like(&v) => out.push(format!("env_vars.rs: {name} outside")),
            Some(_) => {}
        }
    }
    let named: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    let named = format!(
        r"env_vars::(\{{[^}}]*)?\bnetwork\b|\b({})\b",
        named.join("|")
    );
    let others = c
        .iter()
        .filter(|(f, _)| !["net.rs", "env_vars.rs"].contains(&&f[..]));
    for (file, s) in others {
        for (line, m) in finds(s, &named) {
            out.push(format!("{file}:{line}: {m}"));
        }
        for lit in s.strings.iter().map(|l| l.trim()) {
            let declared = names.iter().any(|(_, v)| *v == lit.to_ascii_uppercase());
            if !lit.contains(char::is_whitespace) && (network_like(lit) || declared) {
                out.push(format!("{file}: \"{lit}\""));
            }
        }
    }
    out
}

#[test]
fn only_net_names_the_network_variables() {
    let f = network(from_disk());
    assert!(
        f.is_empty(),
        "declare in env_vars::network, name in net.rs: {f:#?}"
    );
}

/// What `github` may reach: never `config`, `flow::Ctx` or `baseten::Api`.
const GITHUB_MAY_USE: &str = "github baseten::Endpoints baseten::is_loopback budget ci env_vars \
    flow::State kind net outcome retry secret settings::github";

fn github_reach(c: &Crate) -> Vec<String> {
    let mut out = Vec::new();
    let may = |p: &str, a: &str| p == a || p.starts_with(&format!("{a}::"));
    let allowed = |p: &str| GITHUB_MAY_USE.split_whitespace().any(|a| may(p, a));
    for (file, s) in c.iter().filter(|(f, _)| f.starts_with("github/")) {
        let climb = [r"\bsuper::super\b", r"\bsuper::"][usize::from(file == "github/mod.rs")];
        for (line, p) in finds(s, &format!(r"{climb}|\bcrate(::\w+)*(::\{{)?")) {
            let path = p.trim_start_matches("crate::").trim_end_matches("::{");
            if p != "crate" && (p.starts_with("super") || !allowed(path)) {
                out.push(format!("{file}:{line}: {p}"));
            }
        }
    }
    out
}

#[test]
fn github_never_reaches_the_config_or_the_key() {
    let f = github_reach(from_disk());
    assert!(f.is_empty(), "github may use {GITHUB_MAY_USE}: {f:#?}");
}

/// A deadline summed from a moment, in code that handles instants.
const SUM: &str = r"\b(started|start|began|now|t0|until|deadline)\s*\+";

fn sums(c: &Crate) -> String {
    let clocked =
        |(f, s): &(&String, &Source)| !f.starts_with("budget") && s.code.contains("Instant");
    places(c.iter().filter(clocked), SUM)
}

/// Patterns found only in these files (`file:times`), and why.
const LISTED: &str = r"
\b(test_clock|TRUSS_PUSH_TEST_CLOCK)\b = budget.rs:4 env_vars.rs:1 = the budget alone reaches the scripted clock
#\[cfg\(debug_assertions\)\]\s*mod test_clock; = budget.rs:1 = a release build has no scripted clock
archive::(\{[^}]*)?\bplan\b = plan.rs:1 = the truss's files are checked through plan::check_files
\bcheck_files\b = plan.rs:2 run.rs:2 = prepare (several targets, plan) and one target
\.settle\s*\(|\bsettle_for_report\s*\( = execute.rs:1 flow/content.rs:1 flow/inform.rs:1 = see informing.rs
";

#[test]
fn listed_places_and_deadlines_not_summed() {
    for row in LISTED.lines().filter(|l| !l.is_empty()) {
        let [pattern, listed, why] = row.split(" = ").collect::<Vec<_>>()[..] else {
            panic!("{row}")
        };
        assert_eq!(places(from_disk().iter(), pattern), listed, "{why}");
    }
    // s3/mod.rs: the drain's share of a deadline handed over as a timer;
    // s3/payload.rs: the stall watchdog of one body's writes, in one request.
    let summed = "s3/mod.rs:1 s3/payload.rs:3";
    assert_eq!(
        sums(from_disk()),
        summed,
        "ask the run's budget for the deadline"
    );
}

pub(crate) fn snippet(files: &[(&str, &str)]) -> Crate {
    let files = files.iter().map(|(f, t)| (f.to_string(), t.to_string()));
    product(&files.collect())
}

/// Cases, one a line (`⏎` a line break): rule, `+` (caught) or `-`
/// (innocent), the file's text.
const CASES: &str = r##"
net + fn f(e: E) { e("SSL_CERT_FILE"); }
net + fn f() { format!("{}_PROXY", s); }
net + fn f(e: E) { e("HTTPS_proxy"); }
net + use crate::env_vars::network;
net + use crate::env_vars::{network as n};
net + use crate::env_vars::network::HTTPS_PROXY as P;
net + fn f() { /* " */ e("HTTP_PROXY"); }
net + fn f() { e(r#"ALL_PROXY"#); }
net + #[cfg(test)]⏎mod t {}⏎fn f() { e("NO_PROXY"); }
net - fn f() { bail!("check HTTPS_PROXY"); }
net - // HTTPS_PROXY⏎fn f() { let q = '"'; e(crate::env_vars::GITHUB_OUTPUT); }
net - #[cfg(test)]⏎mod tests { fn t() { e("HTTPS_PROXY"); } }
decl + pub const P: &str = network::HTTPS_PROXY;⏎pub mod network {⏎}
decl + pub const S: &str = "ALL_PROXY";⏎pub mod network {⏎}
gh + fn f(c: &crate::config::Config) {}
gh + use crate::{config::Config};
gh + use crate::flow::Ctx;
gh + fn f(a: &crate::baseten::Api) {}
gh + use super::super::config::Config;
gh + use crate::settings::Settings;
gh + use crate::flow as f;
gh + use crate::baseten::{Api};
gh - pub(crate) use crate::settings::github::Settings;⏎use crate::budget::{Budget, Clock};⏎use super::client::Client;⏎// crate::config
sum + use std::time::Instant;⏎fn f(ctx: &Ctx) -> Instant { ctx.started + ctx.cfg.wait_timeout }
sum + fn f(d: Instant) { let now = g(); let u = now + d; }
sum - fn f(a: u64) { let start = 0; start + a; }
sum - fn f(i: Instant) {}⏎#[cfg(test)]⏎mod t { fn t() { start + d; } }
"##;

#[test]
fn each_rule_catches_its_evasions() {
    let ev = "pub const GITHUB_OUTPUT: &str = \"GITHUB_OUTPUT\";\npub mod network {\n    pub const HTTPS_PROXY: &str = \"https_proxy\";\n}\n";
    for case in CASES.lines().filter(|l| !l.is_empty()) {
        let [rule, sign, text] = case.splitn(3, ' ').collect::<Vec<_>>()[..] else {
            panic!("{case}")
        };
        let text = &text.replace('⏎', "\n");
        let caught = match rule {
            "net" => !network(&snippet(&[("env_vars.rs", ev), ("x.rs", text)])).is_empty(),
            "decl" => !network(&snippet(&[("env_vars.rs", text)])).is_empty(),
            "gh" => !github_reach(&snippet(&[("github/x.rs", text)])).is_empty(),
            _ => !sums(&snippet(&[("flow/x.rs", text)])).is_empty(),
        };
        assert_eq!(caught, sign == "+", "{case}");
    }
    let tests = |lib| snippet(&[("lib.rs", lib), ("tests.rs", "")]).contains_key("tests.rs");
    assert!(!tests("#[cfg(test)]\nmod tests;") && tests("mod tests;"));
}
