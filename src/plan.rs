//! Plan mode and target selection: which targets a run deploys (every one
//! `truss-directory` names, or those `changed-since` touched), and `--plan`,
//! which prints them as a CI matrix and stops without any network call.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::archive;
use crate::budget::{Budget, Phase};
use crate::changes;
use crate::ci::{Cell, Reporter};
use crate::ci_context::CiContext;
use crate::cli::{Input, Inputs};
use crate::config::{Config, Target};
use crate::content::plan::{self as by_content, Seen};
use crate::content::skip::Serving;
use crate::handles::Run;
use crate::outcome::Failure;
use crate::report::Fanout;
use crate::secret::Secret;
use crate::settings::Settings;
use crate::targets::{self, Found};

/// GitHub Actions refuses a matrix that expands to more jobs than this.
pub(crate) const GITHUB_MATRIX_JOBS_MAX: usize = 256;
/// A stand-in for the default deployment name, made from each deploy job's
/// commit, so that a plan checks everything else exactly as that job will;
/// never sent.
const PLAN_NAME_STAND_IN: &str = "plan";

/// The targets a run deploys, and why.
#[derive(Debug)]
pub(crate) struct Selection {
    /// The targets to deploy, each with the changed path that selected it
    /// (`None` without `changed-since`).
    pub(crate) chosen: Vec<(Found, Option<String>)>,
    /// Targets `changed-since` left out.
    pub(crate) unchanged: Vec<Found>,
    /// `changed-since` as given and the merge base it compared with.
    pub(crate) since: Option<(String, String)>,
}

/// Resolves `truss-directory` and applies `changed-since`; every problem is
/// an input error.
pub(crate) fn select(settings: &Settings, ci: &CiContext) -> Result<Selection, String> {
    let found = targets::resolve(
        &settings.truss_directory,
        settings.given_model_name.as_deref(),
    )?;
    let Some(since) = settings.changed_since.as_deref() else {
        return Ok(Selection {
            chosen: found.into_iter().map(|f| (f, None)).collect(),
            unchanged: Vec::new(),
            since: None,
        });
    };
    let reference = changes::since_ref(since, ci)?;
    let first = &found[0].path;
    let dir = match first.is_dir() {
        true => first.clone(),
        false => first.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".").to_path_buf()
    } else {
        dir
    };
    let changes = changes::changed(&dir, &reference)?;
    let (mut chosen, mut unchanged) = (Vec::new(), Vec::new());
    for f in found {
        match changes::touched(&f, &changes)? {
            Some(p) => {
                let shown = p
                    .strip_prefix(std::env::current_dir().unwrap_or_default())
                    .unwrap_or(&p)
                    .display()
                    .to_string();
                chosen.push((f, Some(shown)));
            }
            None => unchanged.push(f),
        }
    }
    Ok(Selection {
        chosen,
        unchanged,
        since: Some((reference, changes.base)),
    })
}

/// Logs what was selected and why.
pub(crate) fn say_selection(sel: &Selection, rep: &Arc<Mutex<Reporter>>) {
    let mut r = rep.lock().unwrap();
    if let Some((since, base)) = &sel.since {
        let short: String = base.chars().take(12).collect();
        r.line(&format!(
            "Changed since {since} (merge base {short}): {} of {} targets",
            sel.chosen.len(),
            sel.chosen.len() + sel.unchanged.len()
        ));
    }
    for (f, why) in &sel.chosen {
        let why = why
            .as_ref()
            .map(|p| format!(" — changed: {p}"))
            .unwrap_or_default();
        r.line(&format!(
            "  {} {} ({:?}){why}",
            f.kind.as_str(),
            f.path.display(),
            f.name
        ));
    }
    for f in &sel.unchanged {
        r.line(&format!(
            "  unchanged, skipped: {} {} ({:?})",
            f.kind.as_str(),
            f.path.display(),
            f.name
        ));
    }
}

/// The `matrix` output: `{"include": [{"target", "kind", "name"}, …]}`,
/// on one line.
pub(crate) fn matrix(chosen: &[(Found, Option<String>)]) -> String {
    let include: Vec<_> = chosen
        .iter()
        .map(|(f, _)| {
            json!({
                "target": f.path.to_string_lossy(),
                "kind": f.kind.as_str(),
                "name": f.name,
            })
        })
        .collect();
    json!({ "include": include }).to_string()
}

/// A target ready to deploy.
pub(crate) struct Planned {
    pub(crate) index: usize,
    pub(crate) found: Found,
    pub(crate) cfg: Config,
}

pub(crate) type Prepared = (Selection, Vec<Planned>);

/// Every input check, before any request: the targets, each target's own
/// config, its files, and the several-target inputs. Plan mode runs the
/// same checks.
pub(crate) fn prepare(settings: &Settings, ci: &CiContext) -> Result<Prepared, String> {
    if settings.print_config {
        return Err("print-config shows one model's config: give truss-directory one model and no changed-since".into());
    }
    let sel = select(settings, ci)?;
    let mut planned = Vec::with_capacity(sel.chosen.len());
    for (index, (found, _)) in sel.chosen.iter().enumerate() {
        let path = found.path.to_string_lossy();
        let cfg = Config::resolve(settings, &path, ci).map_err(|e| format!("{path}: {e}"))?;
        check_files(&cfg).map_err(|e| format!("{path}: {e}"))?;
        planned.push(Planned {
            index,
            found: found.clone(),
            cfg,
        });
    }
    Ok((sel, planned))
}

/// The truss's files, checked once per target in every mode (one target,
/// several, a plan): what the truss holds is the user's input too, so a
/// FIFO, a broken link or a name that is not UTF-8 is refused before any
/// request. A chain's trusses are generated later, by its helper.
pub(crate) fn check_files(cfg: &Config) -> Result<(), String> {
    match &cfg.target {
        Target::Model { dir, .. } => archive::plan(dir).map(drop).map_err(|e| format!("{e:#}")),
        Target::Chain { .. } => Ok(()),
    }
}

/// Plan mode: select, print the matrix on stdout (log lines go to stderr
/// from then on; with `json` the result object carries it instead, so
/// stdout stays one document), and fill the plan's outputs and summary. No
/// request is made and no key is needed.
pub(crate) async fn run(
    run: &Run,
    inputs: &Inputs,
    key: Option<&Secret>,
) -> (Result<(), Failure>, Option<Fanout>) {
    let (ci, rep, json) = (&run.ci, &run.rep, run.json);
    // Every input a deploy job would refuse is refused here, so a matrix
    // never fans out into jobs that all fail on the same input. The key is
    // the deploy jobs' own (no settings hold it; a plan needs none), and so
    // is the default deployment name (made from each deploy job's commit).
    let mut checked = inputs.clone();
    if checked.trimmed(Input::DeploymentName).is_none() {
        checked = checked.with(Input::DeploymentName, PLAN_NAME_STAND_IN);
    }
    let prepared = Settings::parse(&checked, ci).and_then(|s| prepare(&s, ci).map(|p| (s, p)));
    let (settings, (mut sel, planned)) = match prepared {
        Ok(p) => p,
        Err(e) => return (Err(Failure::InvalidInput(e)), None),
    };
    // By content: only a read of the platform leaves a target out.
    let left_out = match (settings.skip_unchanged, key) {
        (false, _) => Vec::new(),
        (true, None) => {
            rep.lock().unwrap().notice(
                "skip-unchanged: no baseten-api-key was given to the plan, so it cannot read what serves each environment; every target is in the matrix (each deploy job still skips an unchanged one)",
            );
            Vec::new()
        }
        (true, Some(key)) => {
            rep.lock()
                .unwrap()
                .line("By content: reading what serves each model target's environment");
            let say = |l: &str| rep.lock().unwrap().line(l);
            // One budget for the plan's reads of every target: they end
            // by the deadline a deploy's setup would have.
            let budget = Budget::new(run.started, settings.wait_timeout, settings.predict_timeout)
                .on(run.clock.clone());
            let deadline = budget.deadline(Phase::Setup);
            let targets: Vec<by_content::Planned<'_>> = planned
                .iter()
                .map(|p| by_content::Planned {
                    index: p.index,
                    shown: p.found.path.display().to_string(),
                    cfg: &p.cfg,
                })
                .collect();
            let net = match run.network() {
                Ok(net) => net,
                Err(f) => return (Err(f), None),
            };
            by_content::by_content(&targets, key, net, (&run.clock, deadline), &say).await
        }
    };
    let mut unchanged: Vec<(Found, Serving)> = Vec::new();
    // Why each target the plan read still deploys, for its row.
    let mut deploys: Vec<(std::path::PathBuf, String)> = Vec::new();
    for (i, seen) in left_out {
        let found = &sel.chosen[i].0;
        match seen {
            Seen::Unchanged(s) => unchanged.push((found.clone(), s)),
            Seen::Deploys(why) => deploys.push((found.path.clone(), why)),
        }
    }
    sel.chosen
        .retain(|(f, _)| !unchanged.iter().any(|(u, _)| u.path == f.path));
    let matrix = matrix(&sel.chosen);
    if !json {
        rep.lock().unwrap().data(&format!("{matrix}\n"));
    }
    say_selection(&sel, rep);
    let n = sel.chosen.len();
    if n > GITHUB_MATRIX_JOBS_MAX {
        rep.lock().unwrap().warning(&format!(
            "the plan has {n} targets, but a GitHub Actions matrix runs at most {GITHUB_MATRIX_JOBS_MAX} jobs: the workflow would fail with this matrix. Split truss-directory across several plan steps (e.g. one per folder) or use changed-since"
        ));
    }
    let sent = if unchanged.is_empty() && !(settings.skip_unchanged && key.is_some()) {
        "nothing was sent".to_string()
    } else {
        format!(
            "{} unchanged left out; only reads were sent",
            unchanged.len()
        )
    };
    rep.lock().unwrap().line(&format!(
        "Plan: {n} target{} to deploy; {sent}",
        if n == 1 { "" } else { "s" }
    ));
    let mut rows: Vec<Vec<Cell>> = sel
        .chosen
        .iter()
        .map(|(f, why)| {
            vec![
                Cell::Code(f.path.display().to_string()),
                Cell::Text(f.kind.as_str().into()),
                Cell::Text(f.name.clone()),
                Cell::Text({
                    let selected = why.clone().unwrap_or_else(|| "named".into());
                    match deploys.iter().find(|(p, _)| *p == f.path) {
                        Some((_, read)) => format!("{selected}; deploys: {read}"),
                        None => selected,
                    }
                }),
            ]
        })
        .collect();
    rows.extend(sel.unchanged.iter().map(|f| {
        vec![
            Cell::Code(f.path.display().to_string()),
            Cell::Text(f.kind.as_str().into()),
            Cell::Text(f.name.clone()),
            Cell::Text("unchanged: skipped".into()),
        ]
    }));
    rows.extend(unchanged.iter().map(|(f, serving)| {
        vec![
            Cell::Code(f.path.display().to_string()),
            Cell::Text(f.kind.as_str().into()),
            Cell::Text(f.name.clone()),
            Cell::Text(format!(
                "unchanged: served by deployment {}{}",
                serving.deployment_id,
                serving.described(settings.environment.as_deref().unwrap_or_default())
            )),
        ]
    }));
    let heading = match &sel.since {
        Some((since, _)) => format!("Truss Plan: {n} target(s) changed since {since}"),
        None => format!("Truss Plan: {n} target(s)"),
    };
    let fanout = Fanout {
        matrix: Some(matrix),
        targets_count: Some(n),
        heading,
        columns: &["Target", "Kind", "Name", "Selected because"],
        rows,
        ..Fanout::default()
    };
    (Ok(()), Some(fanout))
}
