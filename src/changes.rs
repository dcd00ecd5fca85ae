//! Change detection for `changed-since`: which targets a commit range
//! touched, from the `git` executable. A model changed when a file under its
//! directory changed that its `.truss_ignore` does not leave out of the
//! archive; a chain when its source file, a local module it imports, or a
//! directory it names with `make_abs_path_here` changed. Missing history is
//! an input error that says how much is needed: a planner that cannot see
//! the range must never fall back to deploying everything.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::ci_context::{self, CiContext};
use crate::git::GitError;
use crate::kind::Kind;
use crate::targets::Found;

/// Python files larger than this are not scanned for imports.
const SOURCE_MAX_MIB: u64 = 4;
/// Imports are followed this many files deep at most; a local import graph
/// is small, and the bound keeps a cycle or a vendored tree cheap.
const IMPORT_SCAN_MAX_FILES: usize = 500;
/// The ref `changed-since` names: itself, or for `auto` the CI's base — a
/// GitHub pull request's base sha (push events: the previous tip), a GitLab
/// merge request's diff base (pushes: the previous tip). A GitHub event
/// payload that cannot be read is an error here
/// ([`CiContext::event_for_changes`]).
pub(crate) fn since_ref(value: &str, ci: &CiContext) -> Result<String, String> {
    let value = value.trim();
    if !value.eq_ignore_ascii_case("auto") {
        check_ref(value)?;
        return Ok(value.to_string());
    }
    if let Some(event) = ci.event_for_changes()? {
        if let Some(sha) = ci_context::event_change_base(event) {
            check_ref(sha)?;
            return Ok(sha.to_string());
        }
        return Err(
            "changed-since: auto found no base in this GitHub event (it reads pull_request.base.sha, or before on a push; a new branch has none): set changed-since to a ref, e.g. origin/main".into(),
        );
    }
    if let Some(sha) = ci.gitlab.change_base() {
        check_ref(sha)?;
        return Ok(sha.to_string());
    }
    Err("changed-since: auto needs a GitHub pull request or push event, or a GitLab merge request or push pipeline; elsewhere set changed-since to a ref, e.g. origin/main or HEAD~1".into())
}

/// A ref is passed to git as an argument: one that starts with `-` would
/// be read as an option.
fn check_ref(r: &str) -> Result<(), String> {
    if r.is_empty() || r.starts_with('-') || r.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "changed-since must be a git ref such as origin/main, HEAD~1 or a commit sha (or auto), got {r:?}"
        ));
    }
    Ok(())
}

/// Runs git in `dir`; stdout on success, else git's own message.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    match crate::git::git(dir, args) {
        Ok(out) => Ok(String::from_utf8_lossy(&out).into_owned()),
        Err(GitError::NotRun(e)) => Err(format!(
            "cannot run git ({e}): changed-since needs the git executable"
        )),
        Err(GitError::Failed(msg)) => Err(msg),
    }
}

/// What a range changed: the repository's top directory and the changed
/// paths (added, modified, deleted; a rename is its old and its new path),
/// absolute.
#[derive(Debug)]
pub(crate) struct Changes {
    pub(crate) base: String,
    pub(crate) paths: Vec<PathBuf>,
}

/// The files changed between the merge base of `since` and `HEAD`, and
/// `HEAD` — what a pull request's "Files changed" shows.
pub(crate) fn changed(dir: &Path, since: &str) -> Result<Changes, String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"]).map_err(|e| {
        format!(
            "changed-since needs a git checkout, but {} is not in one ({e})",
            dir.display()
        )
    })?;
    let top = PathBuf::from(top.trim());
    let top = std::fs::canonicalize(&top).unwrap_or(top);
    let shallow =
        || git(&top, &["rev-parse", "--is-shallow-repository"]).is_ok_and(|s| s.trim() == "true");
    let depth = || {
        git(&top, &["rev-list", "--count", "HEAD"])
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    let history_hint = || {
        if shallow() {
            let n = depth();
            let commits = if n == "1" { "commit" } else { "commits" };
            format!(
                "this clone is shallow ({n} {commits} of history): fetch the whole history (actions/checkout with fetch-depth: 0; GitLab GIT_DEPTH: 0; or git fetch --unshallow) so the ref and the merge base with HEAD are present"
            )
        } else {
            "fetch it first (e.g. git fetch origin main) or check the spelling".into()
        }
    };
    let spec = format!("{since}^{{commit}}");
    let sha = git(
        &top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ],
    )
    .map_err(|_| {
        format!(
            "changed-since: {since:?} is not in this clone: {}",
            history_hint()
        )
    })?;
    let sha = sha.trim().to_string();
    let base = git(&top, &["merge-base", &sha, "HEAD"]).map_err(|_| {
        format!(
            "changed-since: {since:?} and HEAD share no history in this clone, so what changed cannot be told: {}",
            history_hint()
        )
    })?;
    let base = base.trim().to_string();
    let listed = git(
        &top,
        &[
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            &base,
            "HEAD",
            "--",
        ],
    )
    .map_err(|e| format!("changed-since: git diff {base}..HEAD failed: {e}"))?;
    let paths = listed
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(|p| top.join(p))
        .collect();
    Ok(Changes { base, paths })
}

/// Why a target counts as changed: the first changed path it owns.
pub(crate) fn touched(target: &Found, changes: &Changes) -> Result<Option<PathBuf>, String> {
    match target.kind {
        Kind::Model => model_touched(&target.path, &changes.paths),
        Kind::Chain => Ok(chain_touched(&target.path, &changes.paths)),
    }
}

fn model_touched(dir: &Path, changed: &[PathBuf]) -> Result<Option<PathBuf>, String> {
    let root = std::fs::canonicalize(dir)
        .map_err(|e| format!("cannot read the truss directory {}: {e}", dir.display()))?;
    let matcher = crate::archive::load_matcher(&root).map_err(|e| format!("{e:#}"))?;
    for path in changed {
        let Ok(rel) = path.strip_prefix(&root) else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        if !matcher.matched_path_or_any_parents(rel, false).is_ignore() {
            return Ok(Some(path.clone()));
        }
    }
    Ok(None)
}

fn chain_touched(file: &Path, changed: &[PathBuf]) -> Option<PathBuf> {
    let deps = chain_inputs(file);
    changed
        .iter()
        .find(|p| deps.iter().any(|d| p.starts_with(d)))
        .cloned()
}

/// What a chain's deploy reads, found without running it: its source file;
/// the local modules it imports, transitively (`import a.b`, `from a import
/// b`, `from .a import b`, resolved against the importing file's directory:
/// `a/b.py`, or the whole package directory `a/b/`); and every path it
/// names with `make_abs_path_here("…")` (data directories, external package
/// directories). Imports of installed packages resolve to nothing and are
/// ignored. All paths canonical.
pub(crate) fn chain_inputs(file: &Path) -> BTreeSet<PathBuf> {
    let mut deps = BTreeSet::new();
    let Ok(file) = std::fs::canonicalize(file) else {
        return deps;
    };
    let mut pending = vec![file];
    let mut scanned = 0;
    while let Some(f) = pending.pop() {
        if !deps.insert(f.clone()) || scanned >= IMPORT_SCAN_MAX_FILES {
            continue;
        }
        scanned += 1;
        let Ok(bytes) = crate::files::read_regular_file(&f, SOURCE_MAX_MIB) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let here = f.parent().unwrap_or(Path::new("/")).to_path_buf();
        for dep in imports(&text)
            .into_iter()
            .flat_map(|m| resolve_module(&here, &m))
            .chain(named_paths(&here, &text))
        {
            let Ok(dep) = std::fs::canonicalize(&dep) else {
                continue;
            };
            if dep.is_dir() {
                for py in python_files(&dep) {
                    pending.push(py);
                }
                deps.insert(dep);
            } else {
                pending.push(dep);
            }
        }
    }
    deps
}

/// A module named by an import: leading dots (relative levels) and the
/// dotted path.
#[derive(Debug, PartialEq, Eq)]
struct Module {
    dots: usize,
    path: Vec<String>,
}

fn module(spec: &str) -> Module {
    let dots = spec.chars().take_while(|c| *c == '.').count();
    Module {
        dots,
        path: spec[dots..]
            .split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    }
}

/// The modules a source imports, from `import …` and `from … import …`
/// lines (each `from a import b` also names `a.b`, which may be a module).
fn imports(text: &str) -> Vec<Module> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(rest) = line.strip_prefix("import ") {
            for part in rest.split(',') {
                let name = part.split_whitespace().next().unwrap_or("");
                if !name.is_empty() {
                    found.push(module(name));
                }
            }
        } else if let Some(rest) = line.strip_prefix("from ")
            && let Some((from, names)) = rest.split_once(" import ")
        {
            let from = from.trim();
            let base = module(from);
            for name in names
                .trim_matches(|c| c == '(' || c == ')' || c == ' ')
                .split(',')
            {
                let name = name.split_whitespace().next().unwrap_or("");
                if name.is_empty() || name == "*" || name == "(" {
                    continue;
                }
                let mut path = base.path.clone();
                path.push(name.to_string());
                found.push(Module {
                    dots: base.dots,
                    path,
                });
            }
            found.push(base);
        }
    }
    found
}

/// Where a module lives, if it is local to `here`: `a/b.py` (with the
/// package's `a/__init__.py`) or the package directory `a/b/`.
fn resolve_module(here: &Path, m: &Module) -> Vec<PathBuf> {
    let mut base = here.to_path_buf();
    for _ in 1..m.dots {
        base = base.parent().map(Path::to_path_buf).unwrap_or(base);
    }
    if m.path.is_empty() {
        return Vec::new();
    }
    let mut dir = base.clone();
    for part in &m.path[..m.path.len() - 1] {
        dir = dir.join(part);
    }
    let last = &m.path[m.path.len() - 1];
    let mut out = Vec::new();
    let file = dir.join(format!("{last}.py"));
    let package = dir.join(last);
    if file.is_file() {
        out.push(file);
    } else if package.is_dir() {
        out.push(package);
    }
    if !out.is_empty() && m.path.len() > 1 {
        let init = base.join(&m.path[0]).join("__init__.py");
        if init.is_file() {
            out.push(init);
        }
    }
    out
}

/// The paths a source names with `make_abs_path_here("…")`, relative to it.
fn named_paths(here: &Path, text: &str) -> Vec<PathBuf> {
    const CALL: &str = "make_abs_path_here(";
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(CALL) {
        rest = &rest[at + CALL.len()..];
        let arg = rest.trim_start();
        if let Some(q) = arg.chars().next().filter(|c| *c == '"' || *c == '\'')
            && let Some(end) = arg[1..].find(q)
        {
            out.push(here.join(&arg[1..1 + end]));
        }
    }
    out
}

/// The `.py` files under `dir`, bounded.
fn python_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            if out.len() >= IMPORT_SCAN_MAX_FILES {
                return out;
            }
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => pending.push(p),
                Ok(t) if t.is_file() && p.extension().is_some_and(|x| x == "py") => out.push(p),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(dots: usize, path: &[&str]) -> Module {
        Module {
            dots,
            path: path.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn import_lines() {
        let src = "import os, helpers.text as t\nfrom . import util\nfrom ..shared.x import (a, b)  # c\nfrom lib import *\n    import nested\n";
        let got = imports(src);
        for want in [
            m(0, &["os"]),
            m(0, &["helpers", "text"]),
            m(1, &["util"]),
            m(1, &[]),
            m(2, &["shared", "x", "a"]),
            m(2, &["shared", "x", "b"]),
            m(2, &["shared", "x"]),
            m(0, &["lib"]),
            m(0, &["nested"]),
        ] {
            assert!(got.contains(&want), "{want:?} in {got:?}");
        }
    }

    #[test]
    fn auto_reads_the_pull_request_base_and_refuses_option_like_refs() {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("e.json");
        std::fs::write(&event, r#"{"pull_request":{"base":{"sha":"abc123"}}}"#).unwrap();
        let ev = event.to_str().unwrap().to_string();
        let ci =
            CiContext::from_lookup(&move |k: &str| (k == "GITHUB_EVENT_PATH").then(|| ev.clone()));
        assert_eq!(since_ref("auto", &ci).unwrap(), "abc123");
        assert_eq!(since_ref(" HEAD~1 ", &ci).unwrap(), "HEAD~1");
        assert!(since_ref("--output=/tmp/x", &ci).is_err());
        let none = CiContext::default();
        assert!(
            since_ref("auto", &none)
                .unwrap_err()
                .contains("set changed-since")
        );
        let gitlab = CiContext::from_lookup(&|k: &str| {
            (k == "CI_COMMIT_BEFORE_SHA").then(|| "0000000000".to_string())
        });
        assert!(since_ref("AUTO", &gitlab).is_err(), "a null sha is no base");
    }

    #[test]
    fn auto_refuses_an_event_payload_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let garbled = dir.path().join("garbled.json");
        std::fs::write(&garbled, "{not json").unwrap();
        let missing = dir.path().join("missing.json");
        for (path, want) in [
            (&garbled, "is not JSON"),
            (&missing, "which cannot be read"),
            (&dir.path().to_path_buf(), "not a regular file"),
        ] {
            let p = path.to_str().unwrap().to_string();
            let ci = CiContext::from_lookup(&move |k: &str| {
                (k == "GITHUB_EVENT_PATH").then(|| p.clone())
            });
            let err = since_ref("auto", &ci).unwrap_err();
            assert!(err.starts_with("changed-since: auto"), "{err}");
            assert!(err.contains(want), "{want}: {err}");
        }
    }
}
