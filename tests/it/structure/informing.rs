//! A read that only informs never holds a mutation (SPEC, "Reads are of
//! two kinds"; `src/flow/inform.rs`). Its outcome is taken two ways:
//! `inform::settle_for_report`, called once, by `execute.rs`, after its
//! call to `cleanup(` (every mutation of the run is behind it); and
//! `.settle(` in place, only where listed and never in a file that names a
//! platform mutation (or a step of the flow that makes one). Where each
//! is taken is listed in `super::LISTED`.

use super::{Crate, finds, snippet};

const MUTATION: &str = r"\b(create|create_once|deploy_chain_atomic|package_and_upload|promote|promote_once|promote_after_predict|test_and_promote|cancel_promotion|activate|deactivate|deactivate_chain|cleanup_created|cleanup_gated|roll_back)\s*\(";

/// What is wrong where an informing read's outcome is taken (where it may
/// be taken: `super::LISTED`).
fn informing(c: &Crate) -> Vec<String> {
    let mut wrong = Vec::new();
    for (file, s) in c.iter().filter(|(f, _)| *f != "flow/inform.rs") {
        let (settles, mutations) = (finds(s, r"\.settle\s*\("), finds(s, MUTATION));
        if let (Some((at, _)), Some((m, what))) = (settles.first(), mutations.first()) {
            wrong.push(format!(
                "{file}:{at}: .settle( in a file that mutates ({m}: {what})"
            ));
        }
        // The target's cleanup: a bare `cleanup(`, not a method, a path or
        // its definition.
        let cleanup = finds(s, r"(\bfn\s+|[.:]\s*)?\bcleanup\s*\(");
        let cleanup: Vec<usize> = cleanup
            .iter()
            .filter(|c| c.1.starts_with("cleanup"))
            .map(|c| c.0)
            .collect();
        for (line, _) in finds(s, r"\bsettle_for_report\s*\(") {
            if file != "execute.rs" || cleanup.is_empty() || cleanup.iter().any(|&c| c >= line) {
                wrong.push(format!(
                    "{file}:{line}: settle_for_report( not after execute's cleanup("
                ));
            }
        }
    }
    wrong
}

#[test]
fn no_mutation_awaits_a_read_that_only_informs() {
    let wrong = informing(super::from_disk());
    assert!(
        wrong.is_empty(),
        "give a read that only informs to the report (inform::for_report): {wrong:#?}"
    );
}

/// Cases, one a line (`⏎` a line break): `+` (caught) or `-`, the file,
/// its text.
const CASES: &str = "
+ model.rs async fn d(ctx: &Ctx) { read.settle().await; flow::create_once(ctx).await; }
+ flow/content.rs async fn f(api: &Api) { read.settle().await; api.promote(x).await; }
+ execute.rs async fn e() {⏎inform::settle_for_report(&c).await;⏎cleanup(&c, x).await; }⏎async fn cleanup(c: &Ctx) {}
+ flow/create.rs async fn f(c: &Ctx) { crate::inform::settle_for_report(c).await; }
- execute.rs async fn e() { let c = cleanup(&c, x).await;⏎inform::settle_for_report(&c).await; stop.cleanup(); }⏎async fn cleanup(c: &Ctx) {}
- flow/content.rs async fn f() { read.settle().await; smoke_test(ctx).await; }
";

#[test]
fn the_informing_rule_catches_its_evasions() {
    for case in CASES.lines().filter(|l| !l.is_empty()) {
        let [sign, file, text] = case.splitn(3, ' ').collect::<Vec<_>>()[..] else {
            panic!("{case}")
        };
        let wrong = informing(&snippet(&[(file, &text.replace('⏎', "\n"))]));
        assert_eq!(wrong.is_empty(), sign == "-", "{case}: {wrong:?}");
    }
}
