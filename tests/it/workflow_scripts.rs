//! No example teaches script injection: a `${{ … }}` naming a step's or a
//! job's outputs, or the triggering event, inside a `run:` (or GitLab's
//! `script:`) is pasted into the script before the shell reads it, and
//! truss-push's outputs carry what the platform answered. Every workflow
//! snippet in the README and the docs, the GitLab components, `action.yml`
//! and our own workflows hand such values to scripts through `env:`.

use std::path::{Path, PathBuf};

/// The keys whose value is a shell script (GitHub's and GitLab's).
const SCRIPT_KEYS: [&str; 4] = ["run", "script", "before_script", "after_script"];
/// What an expression may not name inside a script.
const TAINTED: [&str; 3] = ["steps.", "needs.", "github.event"];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Markdown pages and YAML files holding workflow examples.
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dir = |d: &Path, ext: &str| {
        let mut found: Vec<PathBuf> = std::fs::read_dir(d)
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect();
        found.sort();
        out.extend(found);
    };
    dir(repo(), "md");
    dir(&repo().join("docs"), "md");
    dir(&repo().join("templates"), "yml");
    dir(&repo().join(".github/workflows"), "yml");
    out.push(repo().join("action.yml"));
    out
}

/// The fenced code blocks of a Markdown page (any language: a snippet
/// tagged `sh` or left untagged can hold a workflow too), each with the
/// line it starts on.
fn code_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        match &mut open {
            None if fence.len() >= 3 => open = Some((n + 2, fence, String::new())),
            Some((start, opened, body)) => {
                if fence.len() >= opened.len()
                    && fence.starts_with(&opened[..1])
                    && trimmed[fence.len()..].trim().is_empty()
                {
                    blocks.push((*start, std::mem::take(body)));
                    open = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
            None => {}
        }
    }
    blocks
}

/// Every script value in `yaml` (a fragment is fine), with its first line
/// (1-based, within `yaml`): a `run:` key's line and every following line
/// that is blank or indented past the key, which covers a one-line value,
/// a plain or quoted value continued on more lines, and a `|`/`>` block.
fn scripts(yaml: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        // `- - run:` puts the key past each sequence entry's dash.
        let mut rest = &line[indent..];
        let mut column = indent;
        while let Some(after) = rest.strip_prefix("- ").or(rest.strip_prefix("-\t")) {
            let inner = after.len() - after.trim_start().len();
            column += 2 + inner;
            rest = after.trim_start();
        }
        let key = SCRIPT_KEYS.iter().find(|k| {
            rest.strip_prefix(**k)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        });
        if key.is_none() {
            i += 1;
            continue;
        }
        let mut value = line.to_string();
        let mut j = i + 1;
        while j < lines.len() {
            let next = lines[j];
            let next_indent = next.len() - next.trim_start().len();
            if !next.trim().is_empty() && next_indent <= column {
                break;
            }
            value.push('\n');
            value.push_str(next);
            j += 1;
        }
        out.push((i + 1, value));
        i = j;
    }
    out
}

/// The expressions in `script` that name a tainted context.
fn tainted(script: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = script;
    while let Some(at) = rest.find("${{") {
        let expr = &rest[at..];
        let end = expr.find("}}").map_or(expr.len(), |e| e + 2);
        let text = &expr[..end];
        if TAINTED.iter().any(|t| text.contains(t)) {
            found.push(text.to_string());
        }
        rest = &expr[end.min(expr.len())..];
    }
    found
}

/// `file:line: expression` for each tainted expression inside a script.
fn findings(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let rel = path.strip_prefix(repo()).unwrap().display().to_string();
    let chunks = match path.extension().is_some_and(|x| x == "md") {
        true => code_blocks(&text),
        false => vec![(1, text)],
    };
    let mut out = Vec::new();
    for (start, chunk) in chunks {
        for (line, script) in scripts(&chunk) {
            for expr in tainted(&script) {
                out.push(format!("{rel}:{}: {expr}", start + line - 1));
            }
        }
    }
    out
}

#[test]
fn no_example_pastes_an_output_or_the_event_into_a_script() {
    let sources = sources();
    assert!(sources.len() > 10, "{sources:?}");
    let found: Vec<String> = sources.iter().flat_map(|p| findings(p)).collect();
    assert!(
        found.is_empty(),
        "these put a step's output, a job's output or the event into a script, where the value becomes code; pass it through env: (`env: {{ID: ${{{{ steps.x.outputs.y }}}}}}` and `$ID` in the script):\n{}",
        found.join("\n")
    );
}

/// The scanner itself: it finds the pattern in every shape a script takes
/// and leaves the `env:` form alone.
#[test]
fn the_scan_catches_every_shape_of_script() {
    let caught = [
        "- run: echo ${{ steps.d.outputs.deployment-id }}\n",
        "- name: x\n  run: |\n    echo one\n\n    echo ${{steps.d.outputs.status}}\n",
        "steps:\n  - run: >-\n      echo\n      ${{ needs.plan.outputs.matrix }}\n",
        "- run: \"echo ${{ github.event.pull_request.title }}\"\n",
        "- run: echo\n    ${{ toJSON(github.event) }}\n",
        "- - run: echo ${{ format('{0}', steps.a.outputs.b) }}\n",
        "job:\n  script:\n    - echo ${{ steps.a.outputs.b }}\n",
        "- run : echo ${{ steps.a.outputs.b }}\n",
    ];
    for yaml in caught {
        let found: Vec<String> = scripts(yaml).iter().flat_map(|(_, s)| tainted(s)).collect();
        assert_eq!(found.len(), 1, "{yaml}");
    }
    let clean = [
        "- env:\n    ID: ${{ steps.d.outputs.deployment-id }}\n  run: echo \"$ID\"\n",
        "- run: echo hi\n  env:\n    ID: ${{ steps.d.outputs.deployment-id }}\n",
        "- run: echo ${{ secrets.X == '' }}\n",
        "- runs-on: ${{ needs.a.outputs.b }}\n",
    ];
    for yaml in clean {
        let found: Vec<String> = scripts(yaml).iter().flat_map(|(_, s)| tainted(s)).collect();
        assert!(found.is_empty(), "{yaml}: {found:?}");
    }
    let page = "text\n```yaml\n- run: echo ${{ steps.a.outputs.b }}\n```\n\n~~~\nrun: |\n  ${{ needs.x }}\n~~~\n";
    let blocks = code_blocks(page);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(blocks[0].0, 3);
}
