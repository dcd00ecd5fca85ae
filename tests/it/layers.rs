//! Every arrow points down; no circle. The crate's modules stand in
//! layers, top to bottom; a module imports only from its own layer or
//! below (never up), and no files import each other in a loop, inside a
//! folder or across folders. An arrow is a `crate::` or `super::` path in
//! product code (comments and `#[cfg(test)]` code aside), `use` groups
//! expanded. A folder's `mod.rs` is its face: its children may use it and
//! it re-exports them, so arrows into and out of a `mod.rs` count between
//! layers but not toward a circle.
//!
//! A new top-level module fails here until it is placed in a layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top to bottom. Leaves at the bottom import nothing of the crate but
/// each other.
const LAYERS: &[(&str, &[&str])] = &[
    ("entry", &["main", "lib", "run"]),
    (
        "modes",
        &["multi", "execute", "plan", "lifecycle", "rollback", "drift"],
    ),
    ("the run value every mode takes", &["handles"]),
    (
        "targets and reporting",
        &["model", "chain", "github", "report"],
    ),
    ("the deploy's core", &["flow", "changes"]),
    ("deploy by content, the targets", &["content", "targets"]),
    ("one target's config", &["config"]),
    ("the inputs", &["settings"]),
    ("evidence", &["evidence"]),
    ("the platform and git", &["s3", "baseten", "git"]),
    (
        "the run's means",
        &["archive", "budget", "net", "ci_context", "ci"],
    ),
    (
        "leaves",
        &[
            "status",
            "promotion",
            "history",
            "label",
            "truss_config",
            "files",
            "retry",
            "outcome",
            "kind",
            "cli",
            "secret",
            "env_vars",
        ],
    ),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's module path: `flow/mod.rs` → `[flow]`, `evidence/side.rs` →
/// `[evidence, side]`, `lib.rs` → `[]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// Product code only: line comments and `#[cfg(test)]` items cut (a
/// test module runs to the file's end).
fn product_code(text: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<i32> = None;
    let mut depth = 0i32;
    let mut pending_cfg_test = false;
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim();
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            pending_cfg_test = true;
            continue;
        }
        let opens = code.matches('{').count() as i32;
        let closes = code.matches('}').count() as i32;
        if pending_cfg_test {
            pending_cfg_test = false;
            if trimmed.ends_with(';') {
                continue;
            }
            if trimmed.starts_with("mod ") {
                // A test module stands at the file's end.
                break;
            }
            skip_depth = Some(depth);
        }
        depth += opens - closes;
        if let Some(d) = skip_depth {
            if depth <= d {
                skip_depth = None;
            }
            continue;
        }
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Every path a `use` tree names, groups expanded: `a::{b, c::{self, D}}`
/// → `a::b`, `a::c`, `a::c::D`.
fn expand(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap().trim();
        let joined = match (prefix.is_empty(), path) {
            (_, "self") => prefix.to_string(),
            (true, p) => p.to_string(),
            (false, p) => format!("{prefix}::{p}"),
        };
        if !joined.is_empty() {
            out.push(joined);
        }
        return;
    };
    let head = tree[..open].trim().trim_end_matches("::");
    let prefix = match (prefix.is_empty(), head.is_empty()) {
        (_, true) => prefix.to_string(),
        (true, false) => head.to_string(),
        (false, false) => format!("{prefix}::{head}"),
    };
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&inner[start..i], &prefix, out);
                start = i + 1;
            }
            _ => {}
        }
    }
    expand(&inner[start..], &prefix, out);
}

/// The `crate::`/`super::` paths a file's product code names.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        let tree: String = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        if tree.starts_with("crate::") || tree.starts_with("super::") {
            expand(&tree, "", &mut out);
        }
    }
    let text = code;
    for start in ["crate::", "super::"] {
        for (i, _) in text.match_indices(start) {
            let before = text[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = text[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let path = path.trim_end_matches(':');
            if path.contains("::") {
                out.push(path.to_string());
            }
        }
    }
    out
}

/// The file a path lands in: the longest module prefix that is a file.
fn resolve(from: &[String], path: &str, files: &BTreeMap<Vec<String>, String>) -> Option<String> {
    let mut segs: Vec<String> = Vec::new();
    let mut parts = path.split("::").peekable();
    match parts.next()? {
        "crate" => {}
        "super" => {
            segs = from.to_vec();
            segs.pop()?;
            while parts.peek() == Some(&"super") {
                parts.next();
                segs.pop()?;
            }
        }
        _ => return None,
    }
    segs.extend(parts.map(String::from));
    (0..=segs.len())
        .rev()
        .find_map(|n| files.get(&segs[..n]).cloned())
}

fn layer_of(file: &str) -> Option<usize> {
    let top = file.split('/').next().unwrap().trim_end_matches(".rs");
    LAYERS.iter().position(|(_, mods)| mods.contains(&top))
}

/// The arrows between files: file → the files it names.
fn arrows() -> BTreeMap<String, BTreeSet<String>> {
    let root = src();
    let mut all = Vec::new();
    rust_files(&root, &mut all);
    let rel = |p: &Path| {
        p.strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/")
    };
    let files: BTreeMap<Vec<String>, String> = all
        .iter()
        .map(|p| (module_of(&rel(p)), rel(p)))
        .filter(|(_, f)| f != "main.rs")
        .collect();
    let mut graph = BTreeMap::new();
    for path in &all {
        let file = rel(path);
        let module = module_of(&file);
        let code = product_code(&std::fs::read_to_string(path).unwrap());
        let to: BTreeSet<String> = paths(&code)
            .iter()
            .filter_map(|p| resolve(&module, p, &files))
            .filter(|t| *t != file)
            .collect();
        graph.insert(file, to);
    }
    graph
}

#[test]
fn every_arrow_points_down_and_no_files_import_each_other_in_a_loop() {
    let graph = arrows();
    let mut wrong = Vec::new();
    for (from, tos) in &graph {
        let Some(a) = layer_of(from) else {
            wrong.push(format!(
                "{from}: not in a layer (place its module in LAYERS)"
            ));
            continue;
        };
        for to in tos {
            let b = layer_of(to).unwrap_or(usize::MAX);
            if b < a {
                wrong.push(format!(
                    "{from} -> {to}: climbs from \"{}\" to \"{}\"",
                    LAYERS[a].0, LAYERS[b].0
                ));
            }
        }
    }
    // Circles: a depth-first search over the arrows between files, a
    // folder's face (`mod.rs`) aside.
    let face = |f: &str| f.ends_with("mod.rs") || f == "lib.rs";
    let mut state: BTreeMap<&str, u8> = BTreeMap::new();
    fn visit<'a>(
        f: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        face: &dyn Fn(&str) -> bool,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
        wrong: &mut Vec<String>,
    ) {
        state.insert(f, 1);
        stack.push(f);
        for to in graph.get(f).into_iter().flatten().filter(|t| !face(t)) {
            match state.get(to.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|s| s == to).unwrap();
                    wrong.push(format!("circle: {} -> {to}", stack[at..].join(" -> ")));
                }
                Some(_) => {}
                None => visit(to, graph, face, state, stack, wrong),
            }
        }
        stack.pop();
        state.insert(f, 2);
    }
    for f in graph.keys().filter(|f| !face(f)) {
        if !state.contains_key(f.as_str()) {
            let mut stack = Vec::new();
            visit(f, &graph, &face, &mut state, &mut stack, &mut wrong);
        }
    }
    assert!(
        wrong.is_empty(),
        "the import graph (tests/it/layers.rs):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_sees_a_climb_and_a_circle() {
    let files: BTreeMap<Vec<String>, String> = [
        (vec!["evidence".into()], "evidence/mod.rs".into()),
        (
            vec!["evidence".into(), "verdict".into()],
            "evidence/verdict.rs".into(),
        ),
        (vec!["settings".into()], "settings/mod.rs".into()),
    ]
    .into();
    let code = product_code(
        "use super::{verdict::{self, Plan}, x};\nfn f() { crate::settings::X }\n#[cfg(test)]\nmod tests {\n    use crate::flow::Ctx;\n}\n",
    );
    let from = vec!["evidence".to_string(), "regression".to_string()];
    let to: BTreeSet<String> = paths(&code)
        .iter()
        .filter_map(|p| resolve(&from, p, &files))
        .collect();
    assert_eq!(
        to,
        ["evidence/mod.rs", "evidence/verdict.rs", "settings/mod.rs"]
            .map(String::from)
            .into(),
        "a `use` group, a path in code, and nothing from test code"
    );
    assert!(
        layer_of("evidence/regression.rs") > layer_of("settings/mod.rs"),
        "evidence stands below settings"
    );
}
