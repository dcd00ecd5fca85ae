//! What a reviewer reads first, over every step summary a scenario
//! renders (the committed `*_summary.snap` files, each the exact page its
//! scenario wrote, held by its own snapshot test):
//!
//! - the order: the verdict (a `##` heading with ✅/❌), then on a failure
//!   the reason ("**Why:**", plain words), then what serves the
//!   environment ("**… serves:**"), all before the first table or
//!   `<details>` block — parsed as Markdown, not matched as text;
//! - each command's own verdict: teardown, prune, drift and rollback
//!   say what they did (not "Truss Deploy"); ⚠️ is a verdict that worked
//!   (drift found drift); drift's table — what serves each target — comes
//!   right after the verdict (and the reason); a rollback says what
//!   serves its environment;
//! - one truth per page: no environment is said to be served by two
//!   different deployments, and no row of the promotion's steps is shown
//!   twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

fn summaries() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("_summary.snap"))
        .collect();
    files.sort();
    assert!(files.len() > 40, "every scenario's page: {}", files.len());
    let mut pages: Vec<(String, String)> = files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            // The insta header: `---`, its fields, `---`.
            let page = text.splitn(3, "---\n").nth(2).unwrap_or_default();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, page.to_string())
        })
        .collect();
    // The pages the docs' renders were made from that no snapshot holds
    // (a live evidence run's).
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/images/summary-sources");
    for entry in std::fs::read_dir(sources).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        pages.push((name, std::fs::read_to_string(&p).unwrap()));
    }
    pages
}

/// The page's top-level blocks, in order, as the parts the order test
/// knows.
#[derive(Debug, PartialEq)]
enum Block {
    Verdict(String),
    Why,
    Serves,
    /// A table, or an HTML block opening `<details>`.
    Details,
    Other,
}

fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut text = String::new();
    let mut start: Option<Tag> = None;
    for event in Parser::new_ext(page, Options::ENABLE_TABLES) {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    start = Some(tag.clone());
                    text.clear();
                }
                depth += 1;
            }
            Event::End(end) => {
                depth -= 1;
                if depth > 0 {
                    continue;
                }
                let block = match (start.take(), end) {
                    (Some(Tag::Heading { level, .. }), TagEnd::Heading(_))
                        if level == HeadingLevel::H2 && out.is_empty() =>
                    {
                        Block::Verdict(text.clone())
                    }
                    (_, TagEnd::Table) => Block::Details,
                    (_, TagEnd::HtmlBlock) if text.contains("<details") => Block::Details,
                    (_, TagEnd::Paragraph) if text.starts_with("Why:") => Block::Why,
                    (_, TagEnd::Paragraph) if first_line_serves(&text) => Block::Serves,
                    _ => Block::Other,
                };
                out.push(block);
            }
            Event::Text(t) | Event::Code(t) | Event::Html(t) => text.push_str(&t),
            _ => {}
        }
    }
    out
}

fn first_line_serves(text: &str) -> bool {
    text.split_once(':')
        .is_some_and(|(head, _)| head.ends_with(" serves") && head.matches(' ').count() == 1)
}

#[test]
fn every_page_says_verdict_then_reason_then_what_serves_before_any_details() {
    let mut wrong = Vec::new();
    for (name, page) in summaries() {
        let blocks = blocks(&page);
        let details = blocks
            .iter()
            .position(|b| *b == Block::Details)
            .unwrap_or(blocks.len());
        let first = &blocks[..details];
        let failed = match first.first() {
            // ⚠️: it worked and found something to look at (drift).
            Some(Block::Verdict(v)) if v.starts_with('✅') || v.starts_with('⚠') => false,
            Some(Block::Verdict(v)) if v.starts_with('❌') => true,
            other => {
                wrong.push(format!("{name}: the first block is {other:?}"));
                continue;
            }
        };
        let why = first.iter().position(|b| *b == Block::Why);
        let serves = first.iter().position(|b| *b == Block::Serves);
        if failed && why != Some(1) {
            wrong.push(format!(
                "{name}: a failure's reason is not second: {first:?}"
            ));
        }
        if !failed && why.is_some() {
            wrong.push(format!("{name}: a reason on a success"));
        }
        // A page about an environment (a promotion, what changes in it)
        // says what serves it, on the first screen.
        let about_env = page.contains("### Promotion") || page.contains("### What changes in");
        if about_env && serves.is_none() {
            wrong.push(format!(
                "{name}: no \"serves\" line before the details: {first:?}"
            ));
        }
        let verdict = match first.first() {
            Some(Block::Verdict(v)) => v.as_str(),
            _ => "",
        };
        // Each command other than deploy says what it did, not "Truss
        // Deploy"; drift's table (what serves each target's environment)
        // is its answer: right after the verdict and the reason.
        let own = |cmd: &str| name.starts_with(&format!("it__snapshots__{cmd}_"));
        let did = verdict.split_once(' ').map_or("", |(_, rest)| rest);
        for (cmd, words) in [
            ("teardown", "Teardown"),
            ("prune", "Prune:"),
            ("drift", "Drift in "),
            ("rollback", "Rollback of "),
        ] {
            if own(cmd) && !did.starts_with(words) {
                wrong.push(format!(
                    "{name}: the verdict does not say what {cmd} did: {verdict}"
                ));
            }
        }
        if own("drift") && details != 1 + usize::from(failed) {
            wrong.push(format!(
                "{name}: drift's table is not the first thing after the verdict: {first:?}"
            ));
        }
        // A rollback read its environment: what serves it is on the first
        // screen (teardown and prune read many models' environments:
        // what serves is their Protected table's "why").
        if own("rollback") && serves.is_none() {
            wrong.push(format!(
                "{name}: a rollback's page does not say what serves"
            ));
        }
        if let (Some(s), Some(w)) = (serves, why)
            && s < w
        {
            wrong.push(format!("{name}: what serves before the reason"));
        }
        let after = blocks[details..]
            .iter()
            .filter(|b| **b == Block::Serves)
            .count();
        if after > 0 {
            wrong.push(format!("{name}: a \"serves\" line after the details"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Every "`<env>` serves deployment `<id>`" the page states (and "serves:
/// deployment", "serves no deployment"): `(env, id)`, `none` for none.
fn serves_claims(page: &str) -> Vec<(String, String)> {
    let strip = |w: &str| {
        w.trim_matches(|c: char| "`*_:,.;()".contains(c))
            .to_string()
    };
    let mut claims = Vec::new();
    let words: Vec<&str> = page.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        // "Serving <env> now: deployment <id>" (the older page's wording).
        if strip(w) == "Serving"
            && let [env, now, d, id, ..] = &words[i + 1..]
            && strip(now) == "now"
            && strip(d) == "deployment"
        {
            claims.push((strip(env), strip(id)));
            continue;
        }
        if i == 0 || strip(w) != "serves" {
            continue;
        }
        // "<env> now serves", "<env> still serves": the word before.
        let before = match strip(words[i - 1]).as_str() {
            "now" | "still" if i >= 2 => words[i - 2],
            _ => words[i - 1],
        };
        let env = strip(before);
        let rest = &words[i + 1..];
        let rest: Vec<String> = rest.iter().take(2).map(|w| strip(w)).collect();
        let id = match rest.as_slice() {
            [d, id] if d == "deployment" => id.clone(),
            [no, d] if no == "no" && d == "deployment" => "none".into(),
            _ => continue,
        };
        claims.push((env, id));
    }
    claims
}

#[test]
fn no_page_says_two_different_deployments_serve_one_environment() {
    let mut wrong = Vec::new();
    let mut seen_any = 0;
    for (name, page) in summaries() {
        let mut by_env: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (env, id) in serves_claims(&page) {
            by_env.entry(env).or_default().insert(id);
            seen_any += 1;
        }
        for (env, ids) in by_env {
            if ids.len() > 1 {
                wrong.push(format!("{name}: {env} served by {ids:?}"));
            }
        }
        // The promotion's steps are shown once: not again in the history.
        let rows = |part: &str| -> BTreeSet<String> {
            part.lines()
                .filter(|l| l.starts_with("| [UTC]"))
                .map(String::from)
                .collect()
        };
        if let Some((before, after)) = page.split_once("### Status history")
            && let Some((_, promotion)) = before.split_once("### Promotion")
        {
            let twice: Vec<String> = rows(promotion)
                .intersection(&rows(after))
                .cloned()
                .collect();
            if !twice.is_empty() {
                wrong.push(format!("{name}: promotion steps shown twice: {twice:?}"));
            }
        }
    }
    assert!(seen_any > 10, "the claims are found: {seen_any}");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_claims_and_blocks_are_read_as_meant() {
    let claims = serves_claims(
        "**production serves:** deployment `v1` (read)\nand staging serves no deployment; x serves it",
    );
    assert_eq!(
        claims,
        [
            ("production".to_string(), "v1".to_string()),
            ("staging".to_string(), "none".to_string())
        ]
    );
    // The page this replaced: a promotion's event and the content
    // section disagreed after a rollback.
    let old = "| environment production now serves deployment abc |\n\nServing production now: deployment `v1dep001`.";
    assert_eq!(
        serves_claims(old),
        [
            ("production".to_string(), "abc".to_string()),
            ("production".to_string(), "v1dep001".to_string())
        ]
    );
    let page = "## ❌ Truss Deploy (Model): m\n\n**Why:** `deploy_failed`: it broke\n\n**production serves:** deployment `v1`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n";
    assert_eq!(
        blocks(page),
        [
            Block::Verdict("❌ Truss Deploy (Model): m".into()),
            Block::Why,
            Block::Serves,
            Block::Details
        ]
    );
}
