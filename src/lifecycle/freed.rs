//! The hourly floor a `teardown` or a `prune` freed: for each deployment
//! it retired (or, in a dry run, would retire), the replicas it kept at
//! rest (`min_replica`, from the listing the decision was made on) times
//! its instance type's price (`GET /v1/instance_type_prices`, read once,
//! USD per minute, matched by name and by nothing looser:
//! `flow::price::listed`). One line in the log and in the summary:
//! "Freed $X per hour at the minimum replicas (N deployments priced; M not
//! read: why)".
//!
//! The price list is a read that only informs: it runs after every
//! retirement, under its own short deadline ([`Phase::Inform`]), and its
//! failure never changes the verdict. What is not known is said not read,
//! never guessed: a deployment the listing gave no instance type or
//! minimum replicas, a price that is hostile or missing. An `INACTIVE`
//! deployment ran no replica, so its retirement freed nothing ($0.00).

use crate::baseten::{Api, PriceEntry};
use crate::budget::{Budget, Phase, SHORT_READ_SECS};
use crate::flow::price;
use crate::flow::retired::RetiredEntry;

/// The reasons a line names, at most; the rest are counted.
const REASONS_SHOWN: usize = 3;

/// The line of what `retired` (in the record's order) freed, when
/// anything was retired: the price list read once, when any of them
/// needs it, under its own short deadline.
pub(crate) async fn weigh(
    api: &Api,
    budget: &Budget,
    retired: &[RetiredEntry],
    dry_run: bool,
) -> Option<String> {
    if retired.is_empty() {
        return None;
    }
    let list = match retired.iter().any(needs_price) {
        true => Some(read_prices(api, budget).await),
        false => None,
    };
    line(retired, list.as_ref(), dry_run)
}

/// The price list, or why it was not read, within [`SHORT_READ_SECS`].
async fn read_prices(api: &Api, budget: &Budget) -> Result<Vec<PriceEntry>, String> {
    let until = budget.deadline(Phase::Inform);
    let api = api.within(Phase::Inform, until);
    let timed_out = || format!("the price list was not read: timed out after {SHORT_READ_SECS} s");
    match tokio::time::timeout(budget.left(until), api.instance_type_prices()).await {
        Ok(Ok(list)) => Ok(list),
        Ok(Err(_)) if budget.left(until).is_zero() => Err(timed_out()),
        Ok(Err(e)) => Err(format!("the price list was not read: {e}")),
        Err(_) => Err(timed_out()),
    }
}

/// Whether the entry's floor needs the price list.
fn needs_price(e: &RetiredEntry) -> bool {
    e.status != "INACTIVE"
}

/// What one retired deployment kept running at rest, per hour; or why it
/// is not known.
fn floor(e: &RetiredEntry, list: Option<&Result<Vec<PriceEntry>, String>>) -> Result<f64, String> {
    if !needs_price(e) {
        return Ok(0.0);
    }
    let Some(name) = e.instance_type.as_deref() else {
        return Err("the listing named no instance type".into());
    };
    let Some(min) = e.min_replica else {
        return Err("the listing gave no minimum replicas".into());
    };
    let name = price::type_name(name)?;
    let list = match list {
        Some(Ok(l)) => l,
        Some(Err(why)) => return Err(why.clone()),
        None => return Err("the price list was not read".into()),
    };
    let (_, per_minute) = price::listed(&name, list)?;
    Ok(per_minute * 60.0 * f64::from(min))
}

/// The line, when anything was retired: the sum over the deployments
/// priced, and the ones not, with why.
fn line(
    retired: &[RetiredEntry],
    list: Option<&Result<Vec<PriceEntry>, String>>,
    dry_run: bool,
) -> Option<String> {
    if retired.is_empty() {
        return None;
    }
    let mut sum = 0.0;
    let mut priced = 0usize;
    let mut not: Vec<(String, String)> = Vec::new();
    for e in retired {
        match floor(e, list) {
            Ok(usd) => {
                sum += usd;
                priced += 1;
            }
            Err(why) => not.push((e.deployment_id.clone(), why)),
        }
    }
    let verb = match dry_run {
        true => "Would free",
        false => "Freed",
    };
    let why = reasons(&not);
    Some(match (priced, not.len()) {
        (_, 0) => format!(
            "{verb} ${sum:.2} per hour at the minimum replicas ({})",
            deployments(priced, "priced")
        ),
        (0, m) => format!(
            "{verb} per hour at the minimum replicas: not read ({}: {why})",
            deployments(m, "not priced")
        ),
        (n, m) => format!(
            "{verb} ${sum:.2} per hour at the minimum replicas ({}; {m} not read: {why})",
            deployments(n, "priced")
        ),
    })
}

/// `1 deployment priced`, `2 deployments priced`.
fn deployments(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 deployment {what}"),
        n => format!("{n} deployments {what}"),
    }
}

/// Each distinct reason once, with the deployments it applies to; at most
/// [`REASONS_SHOWN`], the rest counted.
fn reasons(not: &[(String, String)]) -> String {
    let mut distinct: Vec<(&str, Vec<&str>)> = Vec::new();
    for (id, why) in not {
        match distinct.iter_mut().find(|(w, _)| *w == why.as_str()) {
            Some((_, ids)) => ids.push(id),
            None => distinct.push((why, vec![id])),
        }
    }
    let mut parts: Vec<String> = distinct
        .iter()
        .take(REASONS_SHOWN)
        .map(|(why, ids)| format!("{} ({})", why, ids.join(", ")))
        .collect();
    match distinct.len().saturating_sub(REASONS_SHOWN) {
        0 => {}
        1 => parts.push("1 more reason".into()),
        n => parts.push(format!("{n} more reasons")),
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn entry(id: &str, status: &str, ty: Option<&str>, min: Option<u32>) -> RetiredEntry {
        RetiredEntry {
            model_name: "m".into(),
            model_id: "m1".into(),
            deployment_id: id.into(),
            deployment_name: String::new(),
            action: "deleted",
            status: status.into(),
            age_seconds: None,
            instance_type: ty.map(str::to_string),
            min_replica: min,
        }
    }

    fn prices(a10g: Value) -> Result<Vec<PriceEntry>, String> {
        Ok(vec![
            PriceEntry {
                name: json!("1x2"),
                gpu_count: json!(0),
                gpu_type: Value::Null,
                price: json!(0.00058),
            },
            PriceEntry {
                name: json!("A10Gx4x16"),
                gpu_count: json!(1),
                gpu_type: json!("A10G"),
                price: a10g,
            },
        ])
    }

    #[test]
    fn the_floor_freed_is_the_sum_of_each_minimum_at_its_price() {
        let list = prices(json!(0.02012));
        let two = [
            entry("d1", "ACTIVE", Some("A10Gx4x16"), Some(2)),
            entry("d2", "SCALED_TO_ZERO", Some("1x2"), Some(1)),
        ];
        assert_eq!(
            line(&two, Some(&list), false).unwrap(),
            "Freed $2.45 per hour at the minimum replicas (2 deployments priced)"
        );
        assert_eq!(
            line(&two, Some(&list), true).unwrap(),
            "Would free $2.45 per hour at the minimum replicas (2 deployments priced)"
        );
        // Inactive: no replica ran, nothing to price.
        let inactive = [entry("d3", "INACTIVE", None, None)];
        assert_eq!(
            line(&inactive, None, false).unwrap(),
            "Freed $0.00 per hour at the minimum replicas (1 deployment priced)"
        );
        assert_eq!(line(&[], Some(&list), false), None);
    }

    #[test]
    fn what_is_not_known_is_said_not_read_never_guessed() {
        let hostile = prices(json!(-0.5));
        let two = [
            entry("d1", "ACTIVE", Some("A10Gx4x16"), Some(1)),
            entry("d2", "ACTIVE", Some("1x2"), Some(1)),
        ];
        assert_eq!(
            line(&two, Some(&hostile), false).unwrap(),
            "Freed $0.03 per hour at the minimum replicas (1 deployment priced; 1 not read: the price of A10Gx4x16 (-0.5 USD per minute) is not from 0 to 100 (d1))"
        );
        let failed: Result<Vec<PriceEntry>, String> =
            Err("the price list was not read: timed out after 5 s".into());
        assert_eq!(
            line(&two, Some(&failed), false).unwrap(),
            "Freed per hour at the minimum replicas: not read (2 deployments not priced: the price list was not read: timed out after 5 s (d1, d2))"
        );
        let unknown = [
            entry("d1", "ACTIVE", None, Some(1)),
            entry("d2", "ACTIVE", Some("A10Gx4x16"), None),
            entry("d3", "ACTIVE", Some("H100<b>"), Some(1)),
            entry("d4", "ACTIVE", Some("H100"), Some(1)),
            entry("d5", "ACTIVE", Some("H100"), Some(1)),
        ];
        let l = line(&unknown, Some(&prices(json!(0.02))), true).unwrap();
        assert!(
            l.starts_with("Would free per hour at the minimum replicas: not read (5 deployments not priced: the listing named no instance type (d1); the listing gave no minimum replicas (d2); the instance type name is not a name"),
            "{l}"
        );
        assert!(l.ends_with("; 1 more reason)"), "{l}");
        assert!(!l.contains('<'), "an unchecked name is never shown: {l}");
    }
}
