//! What a deployment costs per hour, read, never guessed: its
//! `instance_type_name` and `autoscaling_settings` (`DeploymentV1`), and
//! that instance type's price (`GET /v1/instance_type_prices`, USD per
//! minute) matched by the type's `name` and by nothing looser. The hourly
//! price at the minimum and at the maximum replicas is `price × 60 ×
//! replicas`.
//!
//! [`read`] is the one read (a model id and a deployment id, any platform
//! handle), for every command that says what serves or what was freed.
//! In a deploy it is a read that only informs ([`later`], through
//! `inform::for_report`): its own short deadline, never holding the smoke
//! test, a promotion or the verdict. Everything it reads is checked
//! ([`price_of`]): a price that is not a number, negative or beyond
//! [`PRICE_MAX_USD_PER_MINUTE`], a name outside the allowlist, a type
//! the list lacks or names twice, replicas out of range — the price is
//! unreadable and said so, never shown.

use serde_json::Value;

use super::Ctx;
use super::inform::Informed;
use crate::baseten::{Api, Capacity, PriceEntry};
use crate::ci::HourlyPrice;

/// The highest price per minute believed: far above any GPU instance
/// sold today (an 8×H100 node is a few dollars a minute); past it an
/// answer is broken or hostile, not a price.
pub(crate) const PRICE_MAX_USD_PER_MINUTE: f64 = 100.0;
/// The most replicas believed of one deployment's autoscaling settings.
pub(crate) const REPLICAS_MAX: u64 = 10_000;
/// The most GPUs believed of one instance type.
const GPUS_MAX: u64 = 64;
/// Instance type and GPU names shown: at most this many characters of
/// `[A-Za-z0-9:._-]` (the spec gives no shape; names like `A10Gx4x16`,
/// `H100:8x80x1600`).
const NAME_MAX_CHARS: usize = 64;

/// A deployment's price: what it runs on and its hourly range.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Price {
    pub(crate) instance_type: String,
    /// GPU count and type; `None` for a CPU type.
    pub(crate) gpus: Option<(u64, String)>,
    pub(crate) usd_per_minute: f64,
    pub(crate) min_replica: u64,
    pub(crate) max_replica: u64,
}

impl Price {
    /// USD per hour at the minimum replicas.
    pub(crate) fn hourly_min(&self) -> f64 {
        self.hourly(self.min_replica)
    }

    /// USD per hour at the maximum replicas.
    pub(crate) fn hourly_max(&self) -> f64 {
        self.hourly(self.max_replica)
    }

    fn hourly(&self, replicas: u64) -> f64 {
        self.usd_per_minute * 60.0 * replicas as f64
    }

    /// "Costs $A–$B per hour: N–M replicas of <type> (<GPUs>)".
    pub(crate) fn line(&self) -> String {
        let gpus = match &self.gpus {
            Some((n, kind)) => format!("{n} × {kind}"),
            None => "no GPU".into(),
        };
        format!(
            "Costs ${:.2}–${:.2} per hour: {}–{} replicas of {} ({gpus})",
            self.hourly_min(),
            self.hourly_max(),
            self.min_replica,
            self.max_replica,
            self.instance_type
        )
    }
}

/// What a run learned of the price, for its outputs and summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PriceRecord {
    /// What serves at the end (this run's deployment, or the unchanged
    /// one), or why its price is not known. `None`: no price applies
    /// (nothing got ready).
    pub(crate) serving: Option<Result<Price, String>>,
    /// The deployment this one replaces in the environment, and its price.
    pub(crate) replaced: Option<(String, Result<Price, String>)>,
}

/// A value the platform answered is not one truss-push shows.
fn shown_name(v: &Value, what: &str) -> Result<String, String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("{what} is not a string ({})", kind_of(v)))?;
    let ok = !s.is_empty()
        && s.chars().count() <= NAME_MAX_CHARS
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-'));
    match ok {
        true => Ok(s.to_string()),
        false => Err(format!(
            "{what} is not a name truss-push shows (1 to {NAME_MAX_CHARS} of letters, digits, ':', '.', '_', '-')"
        )),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn count(v: Option<&Value>, what: &str, max: u64) -> Result<u64, String> {
    match v.and_then(Value::as_u64) {
        Some(n) if n <= max => Ok(n),
        _ => Err(format!(
            "{what} is not a whole number from 0 to {max} ({})",
            v.map_or("absent", kind_of)
        )),
    }
}

/// An instance type's name as a listing gave it, when it is one
/// truss-push shows (and so may match the price list); or why not.
pub(crate) fn type_name(name: &str) -> Result<String, String> {
    shown_name(&Value::String(name.to_string()), "the instance type name")
}

/// The entry the price list has for instance type `name` (a name
/// [`type_name`] passed), matched by name and by nothing looser, and its
/// price per minute, checked; or why it is unreadable.
pub(crate) fn listed<'a>(
    name: &str,
    list: &'a [PriceEntry],
) -> Result<(&'a PriceEntry, f64), String> {
    let mut same = list.iter().filter(|e| e.name.as_str() == Some(name));
    let entry = match (same.next(), same.next()) {
        (None, _) => {
            return Err(format!("the price list has no instance type named {name}"));
        }
        (Some(_), Some(_)) => {
            return Err(format!(
                "the price list names instance type {name} more than once"
            ));
        }
        (Some(e), None) => e,
    };
    match entry.price.as_f64() {
        Some(p) if p.is_finite() && (0.0..=PRICE_MAX_USD_PER_MINUTE).contains(&p) => Ok((entry, p)),
        Some(p) => Err(format!(
            "the price of {name} ({p} USD per minute) is not from 0 to {PRICE_MAX_USD_PER_MINUTE}"
        )),
        None => Err(format!(
            "the price of {name} is not a number ({})",
            kind_of(&entry.price)
        )),
    }
}

/// The price from what the platform answered, every value checked; or
/// why it is unreadable.
pub(crate) fn price_of(cap: &Capacity, list: &[PriceEntry]) -> Result<Price, String> {
    let name = match &cap.instance_type_name {
        None | Some(Value::Null) => return Err("the deployment names no instance type".into()),
        Some(v) => shown_name(v, "the deployment's instance type name")?,
    };
    let scaling = match &cap.autoscaling_settings {
        Some(s @ Value::Object(_)) => s,
        _ => return Err("the deployment has no autoscaling settings yet".into()),
    };
    let min_replica = count(scaling.get("min_replica"), "min_replica", REPLICAS_MAX)?;
    let max_replica = count(scaling.get("max_replica"), "max_replica", REPLICAS_MAX)?;
    if min_replica > max_replica {
        return Err(format!(
            "min_replica ({min_replica}) is above max_replica ({max_replica})"
        ));
    }
    let (entry, usd_per_minute) = listed(&name, list)?;
    let gpu_count = count(Some(&entry.gpu_count), "gpu_count", GPUS_MAX)?;
    let gpus = match (gpu_count, &entry.gpu_type) {
        (0, _) => None,
        (n, t) => Some((n, shown_name(t, "the instance type's gpu_type")?)),
    };
    Ok(Price {
        instance_type: name,
        gpus,
        usd_per_minute,
        min_replica,
        max_replica,
    })
}

/// The price of one model deployment: its capacity (from the model's
/// deployment list), then the price list. Each request is tried once; the
/// caller's handle bounds it in time.
pub(crate) async fn read(api: &Api, model_id: &str, deployment_id: &str) -> Result<Price, String> {
    let all = api.capacities(model_id).await.map_err(|e| e.to_string())?;
    let Some(cap) = all.into_iter().find(|c| c.id == deployment_id) else {
        return Err(format!(
            "the model's deployment list does not show deployment {deployment_id}"
        ));
    };
    priced(api, &cap).await
}

async fn priced(api: &Api, cap: &Capacity) -> Result<Price, String> {
    let list = api
        .instance_type_prices()
        .await
        .map_err(|e| e.to_string())?;
    price_of(cap, &list)
}

/// Reads the price of `deployment_id` (ready, or serving unchanged) on the
/// side, for the report: a read that only informs.
pub(crate) fn later(ctx: &Ctx<'_>, model_id: &str, deployment_id: &str) {
    let (m, d) = (model_id.to_string(), deployment_id.to_string());
    super::inform::for_report(
        ctx,
        "the hourly price",
        move |api| async move { read(&api, &m, &d).await },
        |out: Informed<Price>, ctx| {
            let out = out.map_err(|e| e.to_string().trim_start_matches("not read: ").to_string());
            if let Err(why) = &out {
                ctx.notice(&format!("Price not read: {why}"));
            }
            ctx.state.lock().unwrap().price.serving = Some(out);
        },
    );
}

/// Reads, before the create, what serves `env` and its price: the
/// deployment this one replaces, for the summary's change. Nothing when
/// the model is new or nothing serves.
pub(crate) fn replaced_later(ctx: &Ctx<'_>, model_id: Option<&str>, env: &str) {
    let Some(m) = model_id.map(str::to_string) else {
        return;
    };
    let env = env.to_string();
    super::inform::for_report(
        ctx,
        "the price of what the deploy replaces",
        move |api| async move {
            let all = api.capacities(&m).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(
                match all
                    .into_iter()
                    .find(|c| c.environment.as_deref() == Some(&env))
                {
                    Some(cap) => Some((cap.id.clone(), priced(&api, &cap).await)),
                    None => None,
                },
            )
        },
        |out: Informed<Option<(String, Result<Price, String>)>>, ctx| {
            if let Ok(replaced) = out {
                ctx.state.lock().unwrap().price.replaced = replaced;
            }
        },
    );
}

/// Reads, before a promote, the price of deployment `id`, which the
/// promote replaces in the environment (reuse by content, `command:
/// rollback`), for the summary's change. Read before, as a deploy reads
/// what it replaces before its create: a promote that scales the previous
/// deployment down must not change what it is said to have cost. Unread,
/// the line says so.
pub(crate) fn replaced_by_id_later(ctx: &Ctx<'_>, model_id: &str, id: &str) {
    let (m, d) = (model_id.to_string(), id.to_string());
    let shown = id.to_string();
    super::inform::for_report(
        ctx,
        "the price of what the promote replaces",
        move |api| async move { read(&api, &m, &d).await },
        move |out: Informed<Price>, ctx| {
            let out = out.map_err(|e| e.to_string().trim_start_matches("not read: ").to_string());
            ctx.state.lock().unwrap().price.replaced = Some((shown, out));
        },
    );
}

/// A chain's price: none is published per chainlet.
pub(crate) fn chain(ctx: &Ctx<'_>) {
    ctx.state.lock().unwrap().price.serving = Some(Err(
        "a chain has no published price (the API publishes no instance type per chainlet)".into(),
    ));
}

/// "+$1.20" / "-$0.60" / "±$0.00".
fn signed(usd: f64) -> String {
    match usd {
        d if d.abs() < 0.005 => "±$0.00".into(),
        d if d > 0.0 => format!("+${d:.2}"),
        d => format!("-${:.2}", -d),
    }
}

/// The outputs and the summary's line, when a price applies.
pub(crate) fn hourly(r: &PriceRecord) -> Option<HourlyPrice> {
    let serving = r.serving.as_ref()?;
    let p = match serving {
        Err(why) => return Some(HourlyPrice::not_read(why)),
        Ok(p) => p,
    };
    let mut line = p.line();
    match &r.replaced {
        Some((id, Ok(before))) => line.push_str(&format!(
            "; against {id}, which it replaces (${:.2}–${:.2} per hour): {} at the minimum, {} at the maximum",
            before.hourly_min(),
            before.hourly_max(),
            signed(p.hourly_min() - before.hourly_min()),
            signed(p.hourly_max() - before.hourly_max()),
        )),
        Some((id, Err(why))) => {
            line.push_str(&format!("; the price of {id}, which it replaces, not read: {why}"));
        }
        None => {}
    }
    Some(HourlyPrice {
        min: format!("{:.2}", p.hourly_min()),
        max: format!("{:.2}", p.hourly_max()),
        line,
    })
}

/// The outputs and the summary's line of one run: [`hourly`], except
/// after a gated promotion the gate rolled back. Then this run's
/// deployment (the one priced after ready) does not serve, and cleanup
/// usually deactivates it: the price is of what serves again — the
/// deployment the rollback's read shows in the environment, priced by the
/// read of what the deploy replaced when that is the same deployment —
/// and the line names the rolled-back one's price apart. Unread or another
/// deployment: not read, never the candidate's price in its place.
pub(crate) fn of_run(st: &super::State) -> Option<HourlyPrice> {
    let Some((env, now, ours)) = rolled_back(st) else {
        return hourly(&st.price);
    };
    let ours_id = st
        .tested_deployment_id
        .as_deref()
        .unwrap_or("this run's deployment");
    let apart = format!(
        "this run's deployment {ours_id}, rolled back, would cost ${:.2}–${:.2} per hour while it runs",
        ours.hourly_min(),
        ours.hourly_max()
    );
    Some(match serves_again(st, now) {
        Ok(p) => HourlyPrice {
            min: format!("{:.2}", p.hourly_min()),
            max: format!("{:.2}", p.hourly_max()),
            line: format!("{env} serves {now} again: {}; {apart}", p.line()),
        },
        Err(why) => HourlyPrice::not_read(&format!("{env} serves {now} again, {why}; {apart}")),
    })
}

/// After a gated promotion the gate rolled back (a read showed it):
/// the environment, what serves it now, and this run's deployment's price.
fn rolled_back(st: &super::State) -> Option<(&str, &str, &Price)> {
    let serves = st.serves.as_ref()?;
    match (
        st.gate.is_some() && st.rolled_back == Some(true),
        &st.price.serving,
    ) {
        (true, Some(Ok(ours))) => Some((serves.env.as_str(), serves.deployment.as_deref()?, ours)),
        _ => None,
    }
}

/// The price of `now`, which serves again: the read of what the deploy
/// replaced, when it is that deployment; or why there is none.
fn serves_again<'a>(st: &'a super::State, now: &str) -> Result<&'a Price, String> {
    match &st.price.replaced {
        Some((id, Ok(p))) if id == now => Ok(p),
        Some((id, Err(why))) if id == now => Err(format!("and its price was not read ({why})")),
        _ => Err("which this run did not price".into()),
    }
}

/// The price that stands for what serves at the end of a run, for a sum
/// over several targets: [`of_run`]'s choice, as a price.
pub(crate) fn standing(st: &super::State) -> PriceRecord {
    let serving = match rolled_back(st) {
        None => st.price.serving.clone(),
        Some((env, now, _)) => Some(
            serves_again(st, now)
                .cloned()
                .map_err(|why| format!("{env} serves {now} again (rolled back), {why}")),
        ),
    };
    PriceRecord {
        serving,
        replaced: None,
    }
}

/// Several targets: the step's price is the sum when every target was
/// priced; otherwise empty, naming the first that was not.
pub(crate) fn sum(targets: &[(String, &PriceRecord)]) -> Option<HourlyPrice> {
    let mut min = 0.0;
    let mut max = 0.0;
    let mut any = false;
    for (target, r) in targets {
        match &r.serving {
            Some(Ok(p)) => {
                min += p.hourly_min();
                max += p.hourly_max();
                any = true;
            }
            Some(Err(why)) => return Some(HourlyPrice::not_read(&format!("{target}: {why}"))),
            None => {
                return Some(HourlyPrice::not_read(&format!(
                    "{target} has no price (it did not get ready)"
                )));
            }
        }
    }
    any.then(|| HourlyPrice {
        min: format!("{min:.2}"),
        max: format!("{max:.2}"),
        line: format!(
            "Costs ${min:.2}–${max:.2} per hour across {} targets",
            targets.len()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cap(name: Value, scaling: Value) -> Capacity {
        Capacity {
            instance_type_name: Some(name),
            autoscaling_settings: Some(scaling),
            ..Capacity::default()
        }
    }

    fn entry(name: &str, gpus: u64, gpu: Value, price: Value) -> PriceEntry {
        PriceEntry {
            name: json!(name),
            gpu_count: json!(gpus),
            gpu_type: gpu,
            price,
        }
    }

    #[test]
    fn a_known_price_at_both_ends_of_the_replicas() {
        let list = [
            entry("1x2", 0, Value::Null, json!(0.00058)),
            entry("A10Gx4x16", 1, json!("A10G"), json!(0.02012)),
        ];
        let scaling = json!({"min_replica": 1, "max_replica": 3, "concurrency_target": 1});
        let p = price_of(&cap(json!("A10Gx4x16"), scaling), &list).unwrap();
        assert_eq!(
            p.line(),
            "Costs $1.21–$3.62 per hour: 1–3 replicas of A10Gx4x16 (1 × A10G)"
        );
        let h = hourly(&PriceRecord {
            serving: Some(Ok(p.clone())),
            replaced: None,
        })
        .unwrap();
        assert_eq!((h.min.as_str(), h.max.as_str()), ("1.21", "3.62"));
        let cpu = price_of(
            &cap(json!("1x2"), json!({"min_replica": 0, "max_replica": 1})),
            &list,
        )
        .unwrap();
        assert_eq!(
            cpu.line(),
            "Costs $0.00–$0.03 per hour: 0–1 replicas of 1x2 (no GPU)"
        );
        let with_before = hourly(&PriceRecord {
            serving: Some(Ok(p.clone())),
            replaced: Some(("d0".into(), Ok(cpu.clone()))),
        })
        .unwrap();
        assert!(
            with_before
                .line
                .ends_with("against d0, which it replaces ($0.00–$0.03 per hour): +$1.21 at the minimum, +$3.59 at the maximum"),
            "{}",
            with_before.line
        );
        let a = PriceRecord {
            serving: Some(Ok(p)),
            replaced: None,
        };
        let b = PriceRecord {
            serving: Some(Ok(cpu)),
            replaced: None,
        };
        let s = sum(&[("a".into(), &a), ("b".into(), &b)]).unwrap();
        assert_eq!((s.min.as_str(), s.max.as_str()), ("1.21", "3.66"));
        let unread = PriceRecord {
            serving: Some(Err("timed out after 5 s".into())),
            replaced: None,
        };
        let s = sum(&[("a".into(), &a), ("c".into(), &unread)]).unwrap();
        assert_eq!((s.min.as_str(), s.max.as_str()), ("", ""));
        assert_eq!(s.line, "Price not read: c: timed out after 5 s");
        assert_eq!(hourly(&PriceRecord::default()), None, "no price applies");
    }

    #[test]
    fn a_gated_rollback_prices_what_serves_again_and_names_the_candidates_apart() {
        let list = [
            entry("A10Gx4x16", 1, json!("A10G"), json!(0.02012)),
            entry("1x2", 0, Value::Null, json!(0.00058)),
        ];
        let ours = price_of(
            &cap(
                json!("A10Gx4x16"),
                json!({"min_replica": 1, "max_replica": 3}),
            ),
            &list,
        )
        .unwrap();
        let before = price_of(
            &cap(json!("1x2"), json!({"min_replica": 0, "max_replica": 1})),
            &list,
        )
        .unwrap();
        let mut st = super::super::State {
            rolled_back: Some(true),
            tested_deployment_id: Some("d1".into()),
            serves: Some(crate::ci::ServesNow {
                env: "production".into(),
                deployment: Some("d0".into()),
                moving_to: None,
            }),
            price: PriceRecord {
                serving: Some(Ok(ours.clone())),
                replaced: Some(("d0".into(), Ok(before))),
            },
            ..super::super::State::default()
        };
        let before_max = st
            .price
            .replaced
            .as_ref()
            .unwrap()
            .1
            .as_ref()
            .unwrap()
            .hourly_max();
        // Without a gate, the rollback command's `rolled_back`: unchanged.
        assert_eq!(of_run(&st), hourly(&st.price));
        st.gate = Some(super::super::gate::Gate {
            owner: crate::kind::Kind::Model,
            owner_id: "m".into(),
            env: "production".into(),
            previous: Some("d0".into()),
            tested: "d1".into(),
            promoted: Some("d1".into()),
            back: None,
            stage: super::super::gate::Stage::Settled,
        });
        let h = of_run(&st).unwrap();
        assert_eq!((h.min.as_str(), h.max.as_str()), ("0.00", "0.03"));
        assert_eq!(
            h.line,
            "production serves d0 again: Costs $0.00–$0.03 per hour: 0–1 replicas of 1x2 (no GPU); this run's deployment d1, rolled back, would cost $1.21–$3.62 per hour while it runs"
        );
        assert_eq!(
            standing(&st).serving.unwrap().unwrap().hourly_max(),
            before_max,
            "several targets sum what serves again"
        );
        // Another deployment serves than the one read before: not read.
        st.price.replaced = Some(("d9".into(), Ok(ours)));
        let h = of_run(&st).unwrap();
        assert_eq!((h.min.as_str(), h.max.as_str()), ("", ""));
        assert!(
            h.line.starts_with(
                "Price not read: production serves d0 again, which this run did not price"
            ),
            "{}",
            h.line
        );
        // Not rolled back: the deploy's own price, as always.
        st.rolled_back = Some(false);
        assert_eq!(of_run(&st), hourly(&st.price));
    }

    #[test]
    fn hostile_or_missing_answers_are_unreadable_never_shown() {
        let good = json!({"min_replica": 1, "max_replica": 3});
        let list = |price: Value| [entry("A10G", 1, json!("A10G"), price)];
        let cases: Vec<(Capacity, Vec<PriceEntry>, &str)> = vec![
            (
                cap(json!("A10G"), good.clone()),
                list(json!(-0.01)).into(),
                "is not from 0",
            ),
            (
                cap(json!("A10G"), good.clone()),
                list(json!("0.02")).into(),
                "not a number (a string)",
            ),
            (
                cap(json!("A10G"), good.clone()),
                list(json!(1e9)).into(),
                "is not from 0",
            ),
            (
                cap(json!("A10G"), good.clone()),
                list(Value::Null).into(),
                "not a number (null)",
            ),
            (
                cap(json!("A10G"), good.clone()),
                vec![entry("H100", 1, json!("H100"), json!(0.1))],
                "no instance type named A10G",
            ),
            (
                cap(json!("A10G"), good.clone()),
                vec![
                    entry("A10G", 1, json!("A10G"), json!(0.1)),
                    entry("A10G", 1, json!("A10G"), json!(0.2)),
                ],
                "more than once",
            ),
            (
                cap(json!("a10g"), good.clone()),
                list(json!(0.1)).into(),
                "no instance type named a10g",
            ),
            (
                cap(json!("A10G<script>"), good.clone()),
                list(json!(0.1)).into(),
                "not a name",
            ),
            (
                cap(json!(7), good.clone()),
                list(json!(0.1)).into(),
                "not a string",
            ),
            (
                cap(json!("A10G"), Value::Null),
                list(json!(0.1)).into(),
                "no autoscaling settings yet",
            ),
            (
                cap(json!("A10G"), json!({"min_replica": 3, "max_replica": 1})),
                list(json!(0.1)).into(),
                "above max_replica",
            ),
            (
                cap(json!("A10G"), json!({"min_replica": -1, "max_replica": 1})),
                list(json!(0.1)).into(),
                "min_replica is not a whole number",
            ),
            (
                cap(
                    json!("A10G"),
                    json!({"min_replica": 1, "max_replica": 1e12}),
                ),
                list(json!(0.1)).into(),
                "max_replica is not a whole number",
            ),
            (
                cap(json!("A10G"), good.clone()),
                vec![entry("A10G", 1, json!("A10G\n**x**"), json!(0.1))],
                "gpu_type is not a name",
            ),
            (
                Capacity::default(),
                list(json!(0.1)).into(),
                "names no instance type",
            ),
        ];
        for (c, l, want) in cases {
            let e = price_of(&c, &l).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
            let h = hourly(&PriceRecord {
                serving: Some(Err(e)),
                replaced: None,
            })
            .unwrap();
            assert_eq!((h.min.as_str(), h.max.as_str()), ("", ""));
            assert!(h.line.starts_with("Price not read: "), "{}", h.line);
        }
    }
}
