//! Each part of a run sees only what it needs: a plan needs no key (and
//! is given no stand-in for one), yet a key given malformed is refused on
//! every road before anything is sent.

use crate::harness::*;

#[test]
fn a_plan_needs_no_key_but_refuses_a_malformed_one() {
    let fake = fake("");
    let plan = |key: Option<&str>| {
        let mut inv = Invocation::bare()
            .arg("plan", "true")
            .model(example_model());
        if let Some(k) = key {
            inv = inv.arg("baseten-api-key", k);
        }
        inv.run()
    };
    let without = plan(None);
    assert_eq!(without.code, 0, "{without:?}");
    assert_eq!(without.out("targets-count"), "1", "{without:?}");
    let malformed = plan(Some("sk with spaces"));
    assert_eq!(malformed.code, 2, "{malformed:?}");
    assert!(
        malformed
            .out("error-message")
            .contains("baseten-api-key contains whitespace"),
        "{malformed:?}"
    );
    assert!(
        !malformed.everything().contains("sk with spaces"),
        "never shown"
    );
    // A deploy without a key is refused before its first request.
    let deploy = Invocation::bare()
        .arg("api-url", fake.rest_base())
        .arg("app-url", fake.graphql_base())
        .model(example_model())
        .run();
    assert_eq!(deploy.code, 2, "{deploy:?}");
    assert!(
        deploy
            .out("error-message")
            .contains("baseten-api-key is required")
    );
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
}
