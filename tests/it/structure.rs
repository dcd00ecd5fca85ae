//! Rules of the code's shape that clippy cannot state; the others are in
//! `clippy.toml` (an exception is an `#[expect]` with its reason where it
//! stands; `scripts/clippy-rules` proves each rule fires). Where each is:
//!
//! - `clippy.toml`: only the sink writes files (the chain helper's scratch
//!   and `multi`'s unnamed log are `#[expect]`s); only `run.rs`/`main.rs`
//!   read the environment; only `net` builds clients, TLS configs, roots
//!   and proxies; only the budget reads the clock (`Instant::now`,
//!   `SystemTime::now`, tokio's, `checked_add`, `timeout_at`,
//!   `sleep_until`, `from_std`);
//! - here, names and text clippy resolves no path for: no deadline summed
//!   from a moment (`sums`); the network's variables named only in
//!   `env_vars::network` and `net` (`network`); `github` never reaching
//!   `config`, `flow::Ctx` or `baseten::Api`, as no visibility hides an
//!   item from one sibling alone (`github_reach`); no mutation awaiting a
//!   read that only informs, `src/flow/inform.rs` (`informing`); the
//!   scripted clock only in debug builds and only the budget's, the
//!   truss's files checked in one place, informing reads settled where
//!   listed (`LISTED`); each rule firing on planted violations
//!   (`each_rule_catches_its_evasions`).
//!
//! The scan is textual (comments cut, strings apart, `#[cfg(test)]` code
//! left out): a nested block comment or a `use` alias is not followed.

use std::collections::{BTreeMap, BTreeSet};

use regex_lite::{Captures, Regex};

/// A file's code, lines kept: comments and test items blanked, each string
/// literal replaced by `"S<n>"` (its text in `strings[n]`).
struct Source {
    code: String,
    strings: Vec<String>,
}

/// Product files by path under `src/`.
type Crate = BTreeMap<String, Source>;

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
        let (mut end, mut depth) = (code.len(), 0);
        for (k, ch) in code[at..].char_indices() {
            depth += i32::from(ch == '{') - i32::from(ch == '}');
            if depth == 0 && (ch == ';' || ch == '}') {
                end = at + k + 1;
                break;
            }
        }
        let gone = blank(&code[at..end]);
        code.replace_range(at..end, &gone);
    }
    Source { code, strings }
}

/// The files (path → text) as sources, but a file declared under
/// `#[cfg(test)]` by its parent.
fn product(files: &BTreeMap<String, String>) -> Crate {
    let decl = re(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+(\w+)\s*;");
    let stem = |f: &str| f.replace("/mod.rs", "").replace(".rs", "");
    let mut tests = BTreeSet::new();
    for (file, text) in files {
        let dir = Some(stem(file) + "/").filter(|d| d != "lib/" && d != "main/");
        let dir = dir.unwrap_or_default();
        tests.extend(decl.captures_iter(text).map(|k| format!("{dir}{}", &k[3])));
    }
    let kept = files.iter().filter(|(f, _)| !tests.contains(&stem(f)));
    kept.map(|(f, t)| (f.clone(), lex(t))).collect()
}

/// The crate's `src/`.
fn from_disk() -> Crate {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for path in ignore::Walk::new(&root).map(|e| e.unwrap().into_path()) {
        if path.extension().is_some_and(|x| x == "rs") {
            let rel = path.strip_prefix(&root).unwrap().to_string_lossy().into();
            files.insert(rel, std::fs::read_to_string(&path).unwrap());
        }
    }
    product(&files)
}

/// Where `pattern` matches in `s`: (line, match).
fn finds(s: &Source, pattern: &str) -> Vec<(usize, String)> {
    let line = |at: usize| s.code[..at].matches('\n').count() + 1;
    let at = |m: regex_lite::Match| (line(m.start()), m.as_str().into());
    re(pattern).find_iter(&s.code).map(at).collect()
}

/// The files where `pattern` matches, each with how many times (`file:n`).
fn places<'a>(files: impl Iterator<Item = (&'a String, &'a Source)>, pattern: &str) -> Vec<String> {
    let counted = files.map(|(f, s)| format!("{f}:{}", finds(s, pattern).len()));
    counted.filter(|p| !p.ends_with(":0")).collect()
}

/// Each network variable is a literal constant of `env_vars::network`,
/// and no other file but `net.rs` names one, by constant or by literal.
fn network(c: &Crate) -> Vec<String> {
    let ev = &c["env_vars.rs"];
    let network_like = |v: &str| re(r"(?i)_PROXY$|SSL_CERT").is_match(v);
    let at = ev.code.find("mod network {").unwrap_or(0);
    let end = at + ev.code[at..].find("\n}").unwrap_or(0);
    let (mut out, mut names) = (Vec::new(), Vec::new());
    for k in re(r#"const\s+(\w+)\s*:[^=]*=\s*([^;]*);"#).captures_iter(&ev.code) {
        let (pos, name) = (k.get(0).unwrap().start(), k[1].to_string());
        let lit = re(r#"^"S(\d+)"$"#).captures(k[2].trim());
        match lit.map(|n| ev.strings[n[1].parse::<usize>().unwrap()].to_ascii_uppercase()) {
            None => out.push(format!("env_vars.rs: {name} is not a literal")),
            Some(v) if at < pos && pos < end => names.push((name, v)),
            Some(v) if network_like(&v) => out.push(format!("env_vars.rs: {name} outside")),
            Some(_) => {}
        }
    }
    let named: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    let named = named.join("|");
    let named = format!(r"env_vars::(\{{[^}}]*)?\bnetwork\b|\b({named})\b");
    let other = |f: &str| f != "net.rs" && f != "env_vars.rs";
    for (file, s) in c.iter().filter(|(f, _)| other(f)) {
        for (line, m) in finds(s, &named) {
            out.push(format!("{file}:{line}: {m}"));
        }
        for k in re(r#""S(\d+)""#).captures_iter(&s.code) {
            let lit = s.strings[k[1].parse::<usize>().unwrap()].trim();
            let declared = names.iter().any(|(_, v)| *v == lit.to_ascii_uppercase());
            if !lit.contains(char::is_whitespace) && (network_like(lit) || declared) {
                out.push(format!("{file}: \"{lit}\""));
            }
        }
    }
    out
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

/// A deadline summed from a moment, in code that handles instants: ask
/// the run's budget instead.
fn sums(c: &Crate) -> Vec<String> {
    let sum = r"\b(started|start|began|now|t0|until|deadline)\s*\+";
    let clocked =
        |(f, s): &(&String, &Source)| !f.starts_with("budget") && s.code.contains("Instant");
    places(c.iter().filter(clocked), sum)
}

/// A platform mutation, or a step of the flow that makes one.
const MUTATION: &str = r"\b(create|create_once|deploy_chain_atomic|package_and_upload|promote|promote_once|promote_after_predict|test_and_promote|cancel_promotion|activate|deactivate|deactivate_chain|cleanup_created|cleanup_gated|roll_back)\s*\(";

/// An informing read settled where a mutation could await it: `.settle(`
/// in a file that names a mutation, `settle_for_report(` but in
/// `execute.rs` after its `cleanup(`. Give it to `inform::for_report`.
fn informing(c: &Crate) -> Vec<String> {
    let mut wrong = Vec::new();
    for (file, s) in c.iter().filter(|(f, _)| *f != "flow/inform.rs") {
        let (settles, mutations) = (finds(s, r"\.settle\s*\("), finds(s, MUTATION));
        if let (Some((at, _)), Some((m, what))) = (settles.first(), mutations.first()) {
            wrong.push(format!("{file}:{at}: settle beside {what} (line {m})"));
        }
        // The target's cleanup: a bare `cleanup(`, no method, path or `fn`.
        let bare = finds(s, r"(\bfn\s+|[.:]\s*)?\bcleanup\s*\(").into_iter();
        let last_cleanup = bare.filter(|c| c.1.starts_with('c')).map(|c| c.0).max();
        for (line, _) in finds(s, r"\bsettle_for_report\s*\(") {
            if file != "execute.rs" || last_cleanup.is_none_or(|c| c >= line) {
                wrong.push(format!("{file}:{line}: settle_for_report before cleanup"));
            }
        }
    }
    wrong
}

/// Patterns found only in these files (`file:times`), and why.
const LISTED: &str = r"
\b(test_clock|TRUSS_PUSH_TEST_CLOCK)\b = budget.rs:4 env_vars.rs:1 = the budget alone reaches the scripted clock
#\[cfg\(debug_assertions\)\]\s*mod test_clock; = budget.rs:1 = a release build has no scripted clock
archive::(\{[^}]*)?\bplan\b = plan.rs:1 = the truss's files are checked through plan::check_files
\bcheck_files\b = plan.rs:2 run.rs:2 = prepare (several targets, plan) and one target
\.settle\s*\(|\bsettle_for_report\s*\( = execute.rs:1 flow/content.rs:1 flow/inform.rs:1 = informing reads settled
";

type Rule = fn(&Crate) -> Vec<String>;
/// Each rule and what the real crate may show of it. Summed deadlines
/// listed: `s3/mod.rs`, the drain's share of a deadline handed over as a
/// timer; `s3/payload.rs`, one body's stall watchdog.
const RULES: &[(&str, Rule, &[&str])] = &[
    ("net", network, &[]),
    ("gh", github_reach, &[]),
    ("sum", sums, &["s3/mod.rs:1", "s3/payload.rs:3"]),
    ("inf", informing, &[]),
];

#[test]
fn the_rules_hold() {
    let c = from_disk();
    for (name, rule, listed) in RULES {
        assert_eq!(rule(&c), *listed, "rule {name}: see its doc");
    }
    for row in LISTED.lines().filter(|l| !l.is_empty()) {
        let (pattern, rest) = row.split_once(" = ").unwrap();
        let (listed, why) = rest.split_once(" = ").unwrap();
        assert_eq!(places(c.iter(), pattern).join(" "), listed, "{why}");
    }
}

/// Planted violations, one a line (`⏎` a line break): rule, `+` (caught)
/// or `-` (innocent), the file, its text; beside an `env_vars.rs` that
/// declares `network::HTTPS_PROXY`, unless the case is that file.
const CASES: &str = r##"
net + x.rs fn f(e: E) { e("SSL_CERT_FILE"); }
net + x.rs fn f() { format!("{}_PROXY", s); }
net + x.rs fn f(e: E) { e("HTTPS_proxy"); }
net + x.rs use crate::env_vars::network;
net + x.rs use crate::env_vars::{network as n};
net + x.rs use crate::env_vars::network::HTTPS_PROXY as P;
net + x.rs fn f() { /* " */ e("HTTP_PROXY"); }
net + x.rs fn f() { e(r#"ALL_PROXY"#); }
net + x.rs #[cfg(test)]⏎mod t {}⏎fn f() { e("NO_PROXY"); }
net - x.rs fn f() { bail!("check HTTPS_PROXY"); }
net - x.rs // HTTPS_PROXY⏎fn f() { let q = '"'; e(crate::env_vars::GITHUB_OUTPUT); }
net - x.rs #[cfg(test)]⏎mod tests { fn t() { e("HTTPS_PROXY"); } }
net + env_vars.rs pub const P: &str = network::HTTPS_PROXY;⏎pub mod network {⏎}
net + env_vars.rs pub const S: &str = "ALL_PROXY";⏎pub mod network {⏎}
gh + github/x.rs fn f(c: &crate::config::Config) {}
gh + github/x.rs use crate::{config::Config};
gh + github/x.rs use crate::flow::Ctx;
gh + github/x.rs fn f(a: &crate::baseten::Api) {}
gh + github/x.rs use super::super::config::Config;
gh + github/x.rs use crate::settings::Settings;
gh + github/x.rs use crate::flow as f;
gh + github/x.rs use crate::baseten::{Api};
gh - github/x.rs pub(crate) use crate::settings::github::Settings;⏎use crate::budget::{Budget, Clock};⏎use super::client::Client;⏎// crate::config
sum + flow/x.rs use std::time::Instant;⏎fn f(ctx: &Ctx) -> Instant { ctx.started + ctx.cfg.wait_timeout }
sum + flow/x.rs fn f(d: Instant) { let now = g(); let u = now + d; }
sum - flow/x.rs fn f(a: u64) { let start = 0; start + a; }
sum - flow/x.rs fn f(i: Instant) {}⏎#[cfg(test)]⏎mod t { fn t() { start + d; } }
inf + model.rs async fn d(ctx: &Ctx) { read.settle().await; flow::create_once(ctx).await; }
inf + flow/content.rs async fn f(api: &Api) { read.settle().await; api.promote(x).await; }
inf + execute.rs async fn e() {⏎inform::settle_for_report(&c).await;⏎cleanup(&c, x).await; }⏎async fn cleanup(c: &Ctx) {}
inf + flow/create.rs async fn f(c: &Ctx) { crate::inform::settle_for_report(c).await; }
inf - execute.rs async fn e() { let c = cleanup(&c, x).await;⏎inform::settle_for_report(&c).await; stop.cleanup(); }⏎async fn cleanup(c: &Ctx) {}
inf - flow/content.rs async fn f() { read.settle().await; smoke_test(ctx).await; }
"##;

fn snippet(files: &[(&str, &str)]) -> Crate {
    let files = files.iter().map(|(f, t)| (f.to_string(), t.to_string()));
    product(&files.collect())
}

#[test]
fn each_rule_catches_its_evasions() {
    let ev = "pub const GITHUB_OUTPUT: &str = \"GITHUB_OUTPUT\";\npub mod network {\n    pub const HTTPS_PROXY: &str = \"https_proxy\";\n}\n";
    for case in CASES.lines().filter(|l| !l.is_empty()) {
        let [rule, sign, file, text] = case.splitn(4, ' ').collect::<Vec<_>>()[..] else {
            panic!("{case}")
        };
        let c = snippet(&[("env_vars.rs", ev), (file, &text.replace('⏎', "\n"))]);
        let check = RULES.iter().find(|r| r.0 == rule).unwrap().1;
        assert_eq!(check(&c).is_empty(), sign == "-", "{case}");
    }
    let tests = |lib| snippet(&[("lib.rs", lib), ("tests.rs", "")]).contains_key("tests.rs");
    assert!(!tests("#[cfg(test)]\nmod tests;") && tests("mod tests;"));
}
