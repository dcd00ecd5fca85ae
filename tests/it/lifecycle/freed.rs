//! The hourly floor `prune` and `teardown` freed: each retired
//! deployment's minimum replicas (from the listing) at its instance type's
//! price (the price list, read once), one line in the log and the
//! summary; what is not known said not read, never guessed.

use fake_baseten::FakeBaseten;

use super::*;

/// Model `pruned`: `prod0001` serves production; `old00001` (A10Gx4x16,
/// 0.02012 USD a minute, 2 to 3 replicas) and `old00002` (1x2, 0.00058,
/// 1 to 2) are older and labelled, and a pull request's previews; `types`
/// replaces the price list when given.
fn two_old(types: &str) -> FakeBaseten {
    let mut y = String::from(
        "manual_clock: true\nmodels:\n  - id: prune001\n    name: pruned\n    deployments:\n",
    );
    y += &dep(
        "prod0001",
        1,
        &format!(", environment: production{}", labelled()),
    );
    y += &dep(
        "old00001",
        10,
        &format!(
            ", settings: {{instance_type: A10Gx4x16, min_replica: 2, max_replica: 3}}{}",
            pr_label("acme/models#12")
        ),
    );
    y += &dep(
        "old00002",
        20,
        &format!(
            ", settings: {{instance_type: 1x2, min_replica: 1, max_replica: 2}}{}",
            pr_label("acme/models#12")
        ),
    );
    y += "audit_log:\n  entries:\n";
    y += "    - {at: -86400, event_type: MODEL_DEPLOYMENT_PROMOTED, model: pruned, deployment: prod0001, environment: production}\n";
    y += types;
    fake(&y)
}

fn prune<'a>(fake: &'a FakeBaseten, dir: &std::path::Path) -> Invocation<'a> {
    command(fake, "prune")
        .arg("truss-directory", dir.to_str().unwrap())
        .arg("older-than", "5d")
}

/// 2 × 0.02012 × 60 + 1 × 0.00058 × 60 = 2.4492 USD an hour.
const FREED: &str = "Freed $2.45 per hour at the minimum replicas (2 deployments priced)";

#[test]
fn a_prune_says_the_hourly_floor_it_freed() {
    let fake = two_old("");
    let dir = model_dir("model_name: pruned\n");
    let run = prune(&fake, dir.path()).run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(deleted(&fake), ["old00001", "old00002"]);
    assert!(run.stdout.contains(FREED), "{run:?}");
    assert!(
        run.summary.contains(&FREED.replace('$', r"\$")),
        "{}",
        run.summary
    );
    // The price list is read once, after the retirements.
    let log = fake.requests();
    let prices: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| e.endpoint == "rest.list_instance_type_prices")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(prices.len(), 1, "{log:#?}");
    let last_delete = log
        .iter()
        .rposition(|e| e.method == "DELETE")
        .expect("deleted");
    assert!(last_delete < prices[0], "{log:#?}");
}

#[test]
fn a_dry_run_says_what_it_would_free() {
    let fake = two_old("");
    let dir = model_dir("model_name: pruned\n");
    let run = prune(&fake, dir.path()).arg("dry-run", "true").run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(mutations_of(&fake).is_empty());
    assert!(
        run.stdout
            .contains("Would free $2.45 per hour at the minimum replicas (2 deployments priced)"),
        "{run:?}"
    );
    assert!(!run.stdout.contains("Freed $"), "{run:?}");
}

#[test]
fn a_hostile_price_is_not_read_never_summed() {
    let fake = two_old(
        "instance_types:\n  - {id: A10Gx4x16, name: A10Gx4x16, memory_limit_mib: 16384, millicpu_limit: 4000, gpu_count: 1, gpu_type: A10G, price: -0.5}\n  - {id: 1x2, name: 1x2, memory_limit_mib: 2048, millicpu_limit: 1000, price: 0.00058}\n",
    );
    let dir = model_dir("model_name: pruned\n");
    let run = prune(&fake, dir.path()).run();
    assert_eq!(run.code, 0, "the price never holds the verdict: {run:?}");
    assert_eq!(deleted(&fake), ["old00001", "old00002"]);
    assert!(
        run.stdout.contains(
            "Freed $0.03 per hour at the minimum replicas (1 deployment priced; 1 not read: the price of A10Gx4x16 (-0.5 USD per minute) is not from 0 to 100 (old00001))"
        ),
        "{run:?}"
    );
    // A type the price list does not have at all: nothing priced.
    let fake = two_old(
        "instance_types:\n  - {id: A10Gx4x16, name: A10Gx4x16, memory_limit_mib: 16384, millicpu_limit: 4000, gpu_count: 1, gpu_type: A10G}\n  - {id: 1x2, name: 1x2, memory_limit_mib: 2048, millicpu_limit: 1000}\n",
    );
    let run = prune(&fake, dir.path()).run();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("Freed per hour at the minimum replicas: not read (2 deployments not priced: the price list has no instance type named A10Gx4x16 (old00001); the price list has no instance type named 1x2 (old00002))"),
        "{run:?}"
    );
}

#[test]
fn a_teardown_says_the_hourly_floor_it_freed() {
    let fake = two_old("");
    let (inv, _event) = on_github(command(&fake, "teardown"), &closed(12));
    let run = inv.run();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(deleted(&fake), ["old00001", "old00002"]);
    assert!(run.stdout.contains(FREED), "{run:?}");
    assert!(
        run.summary.contains(&FREED.replace('$', r"\$")),
        "{}",
        run.summary
    );
}
