//! A read that only informs never holds a mutation (SPEC, "Reads are of
//! two kinds"; `src/flow/inform.rs`). The mechanism leaves two ways to take
//! such a read's outcome, and this rule pins both:
//!
//! - the report's settle (`inform::settle_for_report`) is called once, by
//!   `execute.rs`, after its call to `cleanup(`: every mutation of the run
//!   is behind it;
//! - an informing read awaited in place (`.settle(`) only where listed,
//!   and never in a file that names a platform mutation (a create, an
//!   upload, a promote, a cancel, an activate, a deactivate, or a step of
//!   the flow that makes one).
//!
//! `for_report`'s reads give the flow nothing to await, and `tell_finished`
//! never awaits: neither needs a rule.

use super::view::{Crate, TokenKind};
use super::{Allowed, Finding, found, judge, snippet_crate, src};

/// The mechanism itself: it defines `settle` and the report's settle.
const HOME: &str = "flow/inform.rs";
const EXECUTE: &str = "execute.rs";

/// Calls that change the platform (or the flow's steps that make them):
/// a file that awaits an informing read in place names none.
const MUTATIONS: [&str; 15] = [
    "create",
    "create_once",
    "deploy_chain_atomic",
    "package_and_upload",
    "promote",
    "promote_once",
    "promote_after_predict",
    "test_and_promote",
    "cancel_promotion",
    "activate",
    "deactivate",
    "deactivate_chain",
    "cleanup_created",
    "cleanup_gated",
    "roll_back",
];

fn informing(c: &Crate) -> Vec<Finding> {
    let mut out = Vec::new();
    for (file, s) in &c.product {
        if file == HOME {
            continue;
        }
        let settles = s.find_seq(&[".", "settle", "("]);
        for &line in &settles {
            out.push(found(file, line, ".settle("));
        }
        if !settles.is_empty() {
            for m in MUTATIONS {
                for line in s.find_seq(&[m, "("]) {
                    out.push(found(
                        file,
                        line,
                        format!("a mutation ({m}) beside .settle("),
                    ));
                }
            }
        }
        let t = &s.tokens;
        let called = |k: usize, name: &str| {
            t[k].is(TokenKind::Ident, name)
                && t.get(k + 1).is_some_and(|n| n.is(TokenKind::Punct, "("))
        };
        let reports: Vec<usize> = (0..t.len())
            .filter(|&k| called(k, "settle_for_report"))
            .collect();
        for &k in &reports {
            out.push(found(file, t[k].line, "settle_for_report("));
        }
        if file == EXECUTE && !reports.is_empty() {
            // The target's cleanup called here: a bare `cleanup(`, neither
            // a method (`stop.cleanup()`, the signal), a path
            // (`model::cleanup`, inside it) nor its definition.
            let cleanups: Vec<usize> = (1..t.len())
                .filter(|&k| {
                    called(k, "cleanup")
                        && !t[k - 1].is(TokenKind::Punct, ".")
                        && !t[k - 1].is(TokenKind::Punct, "::")
                        && !t[k - 1].is(TokenKind::Ident, "fn")
                })
                .collect();
            for &k in &reports {
                if cleanups.is_empty() || cleanups.iter().any(|&c| c > k) {
                    out.push(found(file, t[k].line, "settle_for_report( before cleanup("));
                }
            }
        }
    }
    out
}

/// Where an informing read's outcome is taken, each with why no mutation
/// waits for it.
const TAKEN: [Allowed; 2] = [
    Allowed {
        file: "flow/content.rs",
        what: ".settle(",
        count: 1,
        why: "an unchanged run's \"promoted at\" words: the run creates, promotes and deactivates nothing after them",
    },
    Allowed {
        file: "execute.rs",
        what: "settle_for_report(",
        count: 1,
        why: "the report's settle, after the flow and its cleanup",
    },
];

#[test]
fn no_mutation_awaits_a_read_that_only_informs() {
    let problems = judge(&informing(&Crate::from_disk(&src())), &TAKEN);
    assert!(
        problems.is_empty(),
        "a read that only informs is given to the report (inform::for_report), or settled where no mutation follows:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_informing_rule_catches_its_evasions_and_passes_innocent_code() {
    let rule = |file: &str, text: &str| informing(&snippet_crate(&[(file, text)]));
    let whats = |f: Vec<Finding>| f.into_iter().map(|f| f.what).collect::<Vec<_>>();

    // The create awaits the config read.
    let caught = whats(rule(
        "model.rs",
        "async fn deploy(ctx: &Ctx) { let theirs = read.settle().await; flow::create_once(ctx).await; }",
    ));
    assert!(caught.contains(&".settle(".to_string()), "{caught:?}");
    assert!(
        caught.contains(&"a mutation (create_once) beside .settle(".to_string()),
        "{caught:?}"
    );
    // A listed place that starts mutating.
    let caught = whats(rule(
        "flow/content.rs",
        "async fn f(api: &Api) { let w = read.settle().await; api.promote(x).await; }",
    ));
    assert!(
        caught.contains(&"a mutation (promote) beside .settle(".to_string()),
        "{caught:?}"
    );
    // The report's settle moved before cleanup, or into the flow.
    let caught = whats(rule(
        "execute.rs",
        "async fn execute() { inform::settle_for_report(&ctx).await; let c = cleanup(&ctx, x).await; }\nasync fn cleanup(ctx: &Ctx, c: bool) {}",
    ));
    assert!(
        caught.contains(&"settle_for_report( before cleanup(".to_string()),
        "{caught:?}"
    );
    let caught = whats(rule(
        "flow/create.rs",
        "async fn f(ctx: &Ctx) { crate::inform::settle_for_report(ctx).await; }",
    ));
    assert_eq!(caught, ["settle_for_report("]);

    // Innocent: after cleanup (the signal's `stop.cleanup()` and the
    // definition below do not count), and a settle beside reads only.
    let innocent = rule(
        "execute.rs",
        "async fn execute() { let c = cleanup(&ctx, x).await; inform::settle_for_report(&ctx).await; gh.finish(stop.cleanup()).await; }\nasync fn cleanup(ctx: &Ctx, c: bool) {}",
    );
    assert_eq!(judge(&innocent, &TAKEN[1..]), Vec::<String>::new());
    let innocent = rule(
        "flow/content.rs",
        "async fn f(ctx: &Ctx) { let w = read.settle().await; smoke_test(ctx).await; }",
    );
    assert_eq!(judge(&innocent, &TAKEN[..1]), Vec::<String>::new());
}
