//! What `teardown` and `prune` did, kept in the run's `State` as each
//! retirement lands (a cancelled run still reports what it did): the
//! `retired`, `retired-count` and `protected-count` outputs and the
//! summary's section are read from here. The values are already safe to
//! show (ids checked, names escaped by `lifecycle::shown_name`).

use serde::Serialize;

/// One deployment retired, or in a dry run one that would be.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct RetiredEntry {
    pub(crate) model_name: String,
    pub(crate) model_id: String,
    pub(crate) deployment_id: String,
    pub(crate) deployment_name: String,
    /// `deleted`, `deactivated`, `would-delete` or `would-deactivate`.
    pub(crate) action: &'static str,
    /// Its status when the run listed it.
    pub(crate) status: String,
    /// Seconds from its creation to the run's start, when known.
    pub(crate) age_seconds: Option<i64>,
    /// What it ran on (as listed, unchecked: never shown as it is) and
    /// the replicas it kept at rest: what its retirement freed, for the
    /// price read to weigh (`lifecycle::freed`; not an output).
    #[serde(skip)]
    pub(crate) instance_type: Option<String>,
    #[serde(skip)]
    pub(crate) min_replica: Option<u32>,
}

/// A deployment in the command's scope that a safety rule kept, or that
/// the inputs kept (`keep`, `older-than`), or that was gone already.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Kept {
    pub(crate) model_name: String,
    pub(crate) deployment_id: String,
    pub(crate) deployment_name: String,
    pub(crate) status: String,
    pub(crate) age_seconds: Option<i64>,
    /// Why, in words (`serves production`, `among the 2 newest`, …).
    pub(crate) why: String,
}

/// The record of one `teardown` or `prune`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Retirements {
    /// `teardown` or `prune`.
    pub(crate) command: &'static str,
    /// What a teardown retires the previews of (`pull request #12`).
    pub(crate) of: Option<String>,
    pub(crate) retired: Vec<RetiredEntry>,
    /// Kept by a safety rule: `protected-count` counts these.
    pub(crate) protected: Vec<Kept>,
    /// Kept by the inputs (`keep`, `older-than`); not counted.
    pub(crate) kept: Vec<Kept>,
    /// Gone before this run's `DELETE` reached them (answered 404).
    pub(crate) gone: Vec<Kept>,
    /// Retirements that failed or were refused, in words.
    pub(crate) failed: Vec<String>,
    /// Models whose deciding read failed or did not decide: nothing of
    /// them was retired. `(what, why)`: `model NAME` or `chain NAME`.
    pub(crate) undecided: Vec<(String, String)>,
    /// Other things the run says (chains it cannot tell apart, …).
    pub(crate) notes: Vec<String>,
    /// Retirements sent and not yet answered, in words: what a cancel
    /// meanwhile may have left done.
    pub(crate) in_flight: Vec<String>,
    /// The hourly floor the retirements freed (`lifecycle::freed`), in
    /// words: a sum, or why it was not read.
    pub(crate) freed: Option<String>,
}

impl Retirements {
    /// Puts what landed in a stable order (by model, then deployment id),
    /// whatever order the retirements finished in.
    pub(crate) fn sort(&mut self) {
        self.retired.sort_by(|a, b| {
            (&a.model_name, &a.deployment_id).cmp(&(&b.model_name, &b.deployment_id))
        });
    }

    /// The `retired` output: one compact JSON array.
    pub(crate) fn retired_json(&self) -> String {
        serde_json::to_string(&self.retired).expect("plain data serializes")
    }
}

/// An age in words: `3d 4h`, `5h`, `12m`; empty when unknown.
pub(crate) fn age_words(secs: Option<i64>) -> String {
    let Some(s) = secs else {
        return String::new();
    };
    let (d, h, m) = (s / 86_400, (s % 86_400) / 3600, (s % 3600) / 60);
    match (d, h) {
        (0, 0) => format!("{m}m"),
        (0, h) => format!("{h}h"),
        (d, 0) => format!("{d}d"),
        (d, h) => format!("{d}d {h}h"),
    }
}

impl Retirements {
    /// The lines `--json` and the log carry for what was kept by a safety
    /// rule, with each deployment's status and age.
    pub(crate) fn protected_lines(&self) -> Vec<String> {
        self.protected
            .iter()
            .map(|k| {
                format!(
                    "protected: deployment {}{} of model {} ({}, {}): it {}",
                    k.deployment_id,
                    named(&k.deployment_id, &k.deployment_name),
                    k.model_name,
                    k.status,
                    match age_words(k.age_seconds) {
                        a if a.is_empty() => "age unknown".to_string(),
                        a => format!("{a} old"),
                    },
                    k.why
                )
            })
            .collect()
    }

    /// The summary's section: what was retired, what a safety rule kept
    /// and why, what the inputs kept, and what failed.
    pub(crate) fn markdown(&self) -> String {
        use crate::ci::markdown::cell;
        // The counts are the page's heading (`headline`): not again here.
        let mut out = format!("\n### {}\n", self.command);
        if !self.retired.is_empty() {
            out.push_str("\n| model | deployment | name | status | age | action |\n|---|---|---|---|---|---|\n");
            for e in &self.retired {
                out.push_str(&format!(
                    "| {} | `{}` | {} | {} | {} | {} |\n",
                    cell(&e.model_name),
                    e.deployment_id,
                    cell(&e.deployment_name),
                    e.status,
                    age_words(e.age_seconds),
                    e.action
                ));
            }
        }
        for (title, list) in [
            ("Protected", &self.protected),
            ("Kept by the inputs", &self.kept),
            ("Gone already", &self.gone),
        ] {
            if list.is_empty() {
                continue;
            }
            out.push_str(&format!(
                "\n**{title}**\n\n| model | deployment | name | status | age | why |\n|---|---|---|---|---|---|\n"
            ));
            for k in list {
                out.push_str(&format!(
                    "| {} | `{}` | {} | {} | {} | {} |\n",
                    cell(&k.model_name),
                    k.deployment_id,
                    cell(&k.deployment_name),
                    k.status,
                    age_words(k.age_seconds),
                    cell(&k.why)
                ));
            }
        }
        for (model, why) in &self.undecided {
            out.push_str(&format!(
                "\n- nothing retired in {}: {}\n",
                cell(model),
                cell(why)
            ));
        }
        for f in self.failed.iter().chain(&self.notes) {
            out.push_str(&format!("\n- {}\n", cell(f)));
        }
        out
    }
}

impl Retirements {
    /// The summary's line of the hourly floor freed, when one was weighed.
    pub(crate) fn freed_markdown(&self) -> String {
        match &self.freed {
            Some(line) => format!(
                "\n{}\n",
                crate::ci::markdown::dollars(&crate::ci::markdown::inline(line))
            ),
            None => String::new(),
        }
    }

    /// The page's verdict, in words: what the command did, counted
    /// (`Teardown of pull request #12: 2 previews deleted, 1 protected`).
    pub(crate) fn headline(&self) -> String {
        let title = match (self.command, &self.of) {
            ("teardown", Some(of)) => format!("Teardown of {of}"),
            ("teardown", None) => "Teardown".to_string(),
            _ => "Prune".to_string(),
        };
        let noun = match self.command {
            "teardown" => "preview",
            _ => "deployment",
        };
        let count = |action: &str| self.retired.iter().filter(|e| e.action == action).count();
        let mut said: Vec<String> = [
            ("deleted", "deleted"),
            ("deactivated", "deactivated"),
            ("would-delete", "would be deleted (dry run)"),
            ("would-deactivate", "would be deactivated (dry run)"),
        ]
        .into_iter()
        .map(|(action, words)| (count(action), words))
        .filter(|(n, _)| *n > 0)
        .map(|(n, words)| format!("{n} {words}"))
        .collect();
        match said.first_mut() {
            Some(first) => {
                let n = first.split(' ').next().unwrap_or_default().to_string();
                let plural = if n == "1" { "" } else { "s" };
                *first = first.replacen(&n, &format!("{n} {noun}{plural}"), 1);
            }
            None => said.push(format!("no {noun} retired")),
        }
        if !self.protected.is_empty() {
            said.push(format!("{} protected", self.protected.len()));
        }
        if !self.failed.is_empty() {
            said.push(format!("{} refused or failed", self.failed.len()));
        }
        if !self.undecided.is_empty() {
            let n = self.undecided.len();
            let models = if n == 1 { "model" } else { "models" };
            said.push(format!("{n} {models} left alone (a read did not decide)"));
        }
        format!("{title}: {}", said.join(", "))
    }
}

/// ` (name)` after an id, when the name says something the id does not.
fn named(id: &str, name: &str) -> String {
    match name.is_empty() || name == id {
        true => String::new(),
        false => format!(" ({name})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_in_words() {
        for (s, w) in [
            (None, ""),
            (Some(59), "0m"),
            (Some(720), "12m"),
            (Some(5 * 3600 + 5), "5h"),
            (Some(2 * 86_400), "2d"),
            (Some(3 * 86_400 + 4 * 3600), "3d 4h"),
        ] {
            assert_eq!(age_words(s), w);
        }
    }

    #[test]
    fn the_headline_says_what_the_command_did_counted() {
        let entry = |action: &'static str| RetiredEntry {
            model_name: "m".into(),
            model_id: "m1".into(),
            deployment_id: "d1".into(),
            deployment_name: String::new(),
            action,
            status: "ACTIVE".into(),
            age_seconds: None,
            instance_type: None,
            min_replica: None,
        };
        let kept = Kept {
            model_name: "m".into(),
            deployment_id: "d0".into(),
            deployment_name: String::new(),
            status: "ACTIVE".into(),
            age_seconds: None,
            why: "serves production".into(),
        };
        let teardown = Retirements {
            command: "teardown",
            of: Some("pull request #12".into()),
            retired: vec![entry("deleted"), entry("deleted")],
            protected: vec![kept.clone()],
            ..Retirements::default()
        };
        assert_eq!(
            teardown.headline(),
            "Teardown of pull request #12: 2 previews deleted, 1 protected"
        );
        let prune = Retirements {
            command: "prune",
            retired: vec![entry("would-deactivate")],
            failed: vec!["x".into()],
            undecided: vec![("model m".into(), "why".into())],
            ..Retirements::default()
        };
        assert_eq!(
            prune.headline(),
            "Prune: 1 deployment would be deactivated (dry run), 1 refused or failed, 1 model left alone (a read did not decide)"
        );
        let none = Retirements {
            command: "prune",
            ..Retirements::default()
        };
        assert_eq!(none.headline(), "Prune: no deployment retired");
    }

    #[test]
    fn the_output_is_one_array_with_every_field() {
        let r = Retirements {
            retired: vec![RetiredEntry {
                model_name: "m".into(),
                model_id: "m1".into(),
                deployment_id: "d1".into(),
                deployment_name: "pr-1".into(),
                action: "deleted",
                status: "ACTIVE".into(),
                age_seconds: Some(60),
                instance_type: Some("A10Gx4x16".into()),
                min_replica: Some(1),
            }],
            ..Retirements::default()
        };
        assert_eq!(
            r.retired_json(),
            r#"[{"model-name":"m","model-id":"m1","deployment-id":"d1","deployment-name":"pr-1","action":"deleted","status":"ACTIVE","age-seconds":60}]"#
        );
        assert_eq!(Retirements::default().retired_json(), "[]");
    }
}
