//! Which targets a run deploys: `truss-directory` read as several paths and
//! globs (one per line, or comma separated). A directory with `config.yaml`
//! is a model, a `.py` file is a chain, and a directory without
//! `config.yaml` stands for the models below it. Everything here is decided
//! from the file system alone, before any request.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::config::{self, Target};
use crate::kind::Kind;

/// Directories deeper than this below a searched directory are not looked
/// into: a model tree is shallow, and a symlink loop must end.
const SEARCH_MAX_DEPTH: usize = 8;
/// A search that visits more directories than this is pointed at the wrong
/// place (a home directory, a `node_modules`), and says so.
const SEARCH_MAX_DIRS: usize = 20_000;

/// One target found.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    /// As the user spelled it (or as a glob or search produced it), so the
    /// plan's `target` can be fed back as `truss-directory`.
    pub(crate) path: PathBuf,
    pub(crate) kind: Kind,
    /// The model name (`model_name` in config.yaml, or `model-name`), or the
    /// chain name as its source spells it; see [`chain_name`].
    pub(crate) name: String,
}

/// The entries of a `truss-directory` value: split on line breaks and
/// commas, trimmed, blank ones dropped.
pub(crate) fn entries(raw: &str) -> Vec<&str> {
    raw.split(['\n', ','])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect()
}

fn has_glob(entry: &str) -> bool {
    entry.contains(['*', '?'])
}

/// Whether `raw` names anything other than one model directory or one chain
/// file: several entries, a glob, or a directory holding models. A value
/// that is itself an existing path is always one target (a directory may
/// have a comma in its name), and so is anything today's single-target
/// checks should refuse with their own message.
pub(crate) fn is_several(raw: &str) -> bool {
    let whole = raw.trim();
    if whole.is_empty() || Path::new(whole).join("config.yaml").exists() {
        return false;
    }
    if Path::new(whole).is_file() {
        return false;
    }
    let parts = entries(raw);
    match parts.as_slice() {
        [one] if !has_glob(one) => {
            let dir = Path::new(one);
            dir.is_dir()
                && !dir.join("config.yaml").exists()
                && !dir.join("config.yml").exists()
                && search_models(dir).is_ok_and(|found| !found.is_empty())
        }
        [] => false,
        _ => true,
    }
}

/// Resolves `raw` into its targets, each once, in the order given (a glob's
/// or a search's matches sorted). Every model's config.yaml is loaded and
/// checked. `model_name` is the `model-name` input, which can name one
/// target only.
pub(crate) fn resolve(raw: &str, model_name: Option<&str>) -> Result<Vec<Found>, String> {
    let mut paths: Vec<(PathBuf, Kind)> = Vec::new();
    for entry in entries(raw) {
        if has_glob(entry) {
            let matched = glob(entry)?;
            if matched.is_empty() {
                return Err(format!(
                    "truss-directory: {entry:?} matches nothing: check the pattern (relative to {}); '*' matches within one directory, '**' any depth",
                    cwd_text()
                ));
            }
            let before = paths.len();
            for m in matched {
                classify_match(&m, &mut paths)?;
            }
            if paths.len() == before {
                return Err(format!(
                    "truss-directory: {entry:?} matches only paths that are neither a model directory (with config.yaml) nor a chain .py file"
                ));
            }
        } else {
            classify_entry(Path::new(entry), &mut paths)?;
        }
    }
    if paths.is_empty() {
        return Err(
            "truss-directory is required: set it to your model directory (with config.yaml), your chain's .py file, or several of them".into(),
        );
    }
    let mut seen = HashSet::new();
    paths.retain(|(p, _)| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
    if let (Some(n), [_, _, ..]) = (model_name, paths.as_slice()) {
        return Err(format!(
            "model-name {n:?} names one model, but truss-directory gives {} targets: set model_name in each config.yaml instead",
            paths.len()
        ));
    }
    let mut found = Vec::with_capacity(paths.len());
    for (path, kind) in paths {
        let name = match (model_name, kind) {
            (Some(n), _) => n.to_string(),
            (None, Kind::Model) => model_name_of(&path)?,
            (None, Kind::Chain) => chain_name(&path)?,
        };
        found.push(Found { path, kind, name });
    }
    refuse_same_names(&found)?;
    Ok(found)
}

/// Two targets of one kind with one name would deploy over each other.
fn refuse_same_names(found: &[Found]) -> Result<(), String> {
    let mut by_name: BTreeMap<(Kind, &str), &Path> = BTreeMap::new();
    for f in found {
        if let Some(first) = by_name.insert((f.kind, &f.name), &f.path) {
            return Err(format!(
                "truss-directory: {} and {} both deploy the {} {:?}: give each its own name (model_name in config.yaml, or the chain's entrypoint name), or deploy them in separate steps",
                first.display(),
                f.path.display(),
                f.kind.as_str(),
                f.name
            ));
        }
    }
    Ok(())
}

/// An entry the user wrote out: it must exist and be (or hold) a target.
fn classify_entry(path: &Path, out: &mut Vec<(PathBuf, Kind)>) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| {
        format!(
            "truss-directory: {} cannot be read ({e}): each entry must be a model directory (with config.yaml), a chain .py file, or a directory holding models; paths are relative to {}",
            path.display(),
            cwd_text()
        )
    })?;
    if meta.is_file() {
        if is_py(path) {
            out.push((path.to_path_buf(), Kind::Chain));
            return Ok(());
        }
        return Err(format!(
            "truss-directory: {} is a file but not a chain .py file: name the model's directory (with config.yaml) or the chain's .py file",
            path.display()
        ));
    }
    if path.join("config.yaml").exists() {
        out.push((path.to_path_buf(), Kind::Model));
        return Ok(());
    }
    let models = search_models(path)?;
    if models.is_empty() {
        return Err(format!(
            "truss-directory: {} is neither a model (it has no config.yaml) nor a directory holding one: point it at a model directory, a chain .py file, or a folder of models",
            path.display()
        ));
    }
    out.extend(models.into_iter().map(|m| (m, Kind::Model)));
    Ok(())
}

/// A glob's match: models and chains are taken, directories are searched,
/// anything else is skipped (`models/*` also matches a README).
fn classify_match(path: &Path, out: &mut Vec<(PathBuf, Kind)>) -> Result<(), String> {
    if path.is_file() {
        if is_py(path) {
            out.push((path.to_path_buf(), Kind::Chain));
        }
    } else if path.join("config.yaml").is_file() {
        out.push((path.to_path_buf(), Kind::Model));
    } else if path.is_dir() {
        out.extend(search_models(path)?.into_iter().map(|m| (m, Kind::Model)));
    }
    Ok(())
}

fn is_py(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "py")
}

fn cwd_text() -> String {
    std::env::current_dir().map_or_else(
        |_| "the working directory".into(),
        |d| d.display().to_string(),
    )
}

/// The model directories below `dir` (not `dir` itself), sorted; a model's
/// own subdirectories and hidden directories are not searched.
fn search_models(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    let mut visited = 0usize;
    while let Some((d, depth)) = pending.pop() {
        visited += 1;
        if visited > SEARCH_MAX_DIRS {
            return Err(format!(
                "truss-directory: {} holds more than {SEARCH_MAX_DIRS} directories: point it at the folder that holds your models",
                dir.display()
            ));
        }
        for sub in subdirs(&d) {
            if sub.join("config.yaml").is_file() {
                found.push(sub);
            } else if depth + 1 < SEARCH_MAX_DEPTH {
                pending.push((sub, depth + 1));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The non-hidden subdirectories of `dir`, sorted; unreadable ones are
/// left out (a search is a convenience, not an audit).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// Expands a glob: `*` and `?` within one path component, `**` for any
/// number of directories. As in a shell, a wildcard does not match a
/// leading `.` unless the pattern component starts with one.
fn glob(pattern: &str) -> Result<Vec<PathBuf>, String> {
    let path = Path::new(pattern);
    let mut current: Vec<PathBuf> = vec![PathBuf::new()];
    for comp in path.components() {
        let next = match comp {
            Component::RootDir | Component::Prefix(_) => {
                current.iter().map(|p| p.join(comp)).collect()
            }
            Component::CurDir => current,
            Component::ParentDir => current.iter().map(|p| p.join("..")).collect(),
            Component::Normal(part) => {
                let part = part
                    .to_str()
                    .ok_or_else(|| format!("truss-directory: {pattern:?} is not valid UTF-8"))?;
                if part == "**" {
                    let mut all = Vec::new();
                    for base in &current {
                        all.push(base.clone());
                        let mut pending = vec![(base.clone(), 0usize)];
                        while let Some((d, depth)) = pending.pop() {
                            for sub in subdirs(&dir_or_dot(&d)) {
                                let sub = strip_dot(&d, &sub);
                                all.push(sub.clone());
                                if depth + 1 < SEARCH_MAX_DEPTH {
                                    pending.push((sub, depth + 1));
                                }
                            }
                            if all.len() > SEARCH_MAX_DIRS {
                                return Err(format!(
                                    "truss-directory: {pattern:?} walks more than {SEARCH_MAX_DIRS} directories: narrow the pattern"
                                ));
                            }
                        }
                    }
                    all
                } else if has_glob(part) {
                    let mut matched = Vec::new();
                    for base in &current {
                        let Ok(rd) = std::fs::read_dir(dir_or_dot(base)) else {
                            continue;
                        };
                        let mut names: Vec<String> = rd
                            .filter_map(Result::ok)
                            .filter_map(|e| e.file_name().into_string().ok())
                            .filter(|n| wildcard(part, n))
                            .collect();
                        names.sort();
                        matched.extend(names.into_iter().map(|n| base.join(n)));
                    }
                    matched
                } else {
                    current
                        .iter()
                        .map(|p| p.join(part))
                        .filter(|p| p.exists())
                        .collect()
                }
            }
        };
        current = next;
        current.dedup();
    }
    current.retain(|p| !p.as_os_str().is_empty());
    Ok(current)
}

fn dir_or_dot(p: &Path) -> PathBuf {
    if p.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        p.to_path_buf()
    }
}

/// `sub` as found under `dir_or_dot(base)`, spelled under `base`.
fn strip_dot(base: &Path, sub: &Path) -> PathBuf {
    base.join(sub.file_name().unwrap_or_default())
}

/// Whether `name` matches `pattern` (`*`: any run of characters, `?`: one).
fn wildcard(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // matches[j]: whether p[..i] matches n[..j], row by row.
    let mut matches = vec![false; n.len() + 1];
    matches[0] = true;
    for &pc in &p {
        let mut next = vec![false; n.len() + 1];
        if pc == '*' {
            let mut any = false;
            for j in 0..=n.len() {
                any |= matches[j];
                next[j] = any;
            }
        } else {
            for j in 1..=n.len() {
                next[j] = matches[j - 1] && (pc == '?' || pc == n[j - 1]);
            }
        }
        matches = next;
    }
    matches[n.len()]
}

/// The model name the platform will see: `model_name` from config.yaml,
/// read and checked as a single-target run reads it.
fn model_name_of(dir: &Path) -> Result<String, String> {
    // With several targets, an error names the one it is about.
    let loaded = config::load_model(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let Target::Model { config, .. } = loaded else {
        unreachable!("load_model loads a model");
    };
    config
        .get("model_name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "{}/config.yaml has no model_name: with several targets each model names itself; add model_name",
                dir.display()
            )
        })
}

/// The chain name as its source spells it, read without running it:
/// `@chains.mark_entrypoint("name")` (or `name="…"`), else the class it
/// decorates, as `truss_chains` names a chain. A file with no entrypoint
/// mark is refused: it is not a chain.
pub(crate) fn chain_name(file: &Path) -> Result<String, String> {
    let text = crate::files::read_regular_file(file, CHAIN_SOURCE_MAX_MIB)
        .map_err(|e| format!("truss-directory: cannot read {}: {e}", file.display()))?;
    let text = String::from_utf8_lossy(&text);
    static_chain_name(&text).ok_or_else(|| {
        format!(
            "truss-directory: {} has no @chains.mark_entrypoint: a chain's .py file marks its entrypoint chainlet; name the file that does",
            file.display()
        )
    })
}

/// Chain sources larger than this are not Python a person wrote.
const CHAIN_SOURCE_MAX_MIB: u64 = 4;

fn static_chain_name(text: &str) -> Option<String> {
    let at = text.find("mark_entrypoint")?;
    let rest = &text[at + "mark_entrypoint".len()..];
    if let Some(args) = rest.trim_start().strip_prefix('(') {
        let args = args.trim_start();
        let args = args
            .strip_prefix("name")
            .map(|a| a.trim_start().trim_start_matches('=').trim_start())
            .unwrap_or(args);
        if let Some(q) = args.chars().next().filter(|c| *c == '"' || *c == '\'')
            && let Some(end) = args[1..].find(q)
        {
            return Some(args[1..1 + end].to_string());
        }
    }
    let class = rest.find("class ")?;
    let name: String = rest[class + "class ".len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_split_on_lines_and_commas() {
        assert_eq!(entries(" a ,b\n\n c \n,"), vec!["a", "b", "c"]);
        assert!(entries(" \n , ").is_empty());
    }

    #[test]
    fn wildcards() {
        for (p, n, want) in [
            ("*", "abc", true),
            ("a*", "abc", true),
            ("*c", "abc", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*.py", "x.py", true),
            ("*.py", "x.pyc", false),
            ("*", ".hidden", false),
            (".*", ".hidden", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
        ] {
            assert_eq!(wildcard(p, n), want, "{p} {n}");
        }
    }

    #[test]
    fn chain_names_as_written() {
        for (src, want) in [
            (
                "@chains.mark_entrypoint(\"two-chain\")\nclass Front:",
                Some("two-chain"),
            ),
            ("@chains.mark_entrypoint(name='n')\nclass Front:", Some("n")),
            (
                "@chains.mark_entrypoint\nclass Front(chains.ChainletBase):",
                Some("Front"),
            ),
            ("@chains.mark_entrypoint()\nclass Front(x):", Some("Front")),
            ("class Front: pass", None),
        ] {
            assert_eq!(static_chain_name(src).as_deref(), want, "{src}");
        }
    }
}
