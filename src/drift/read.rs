//! The reads of one model target, typed for the verdict: its content
//! hash (`content::hash`), the model by name (`content::plan::Workspace`,
//! one list for every target), what serves the environment
//! (`content::skip::serving`: the environment list names the serving
//! deployment with its labels), then side by side the serving
//! deployment's raw config (`Api::deployment_raw_config`) and the model's
//! audit log. Deploy by content's own reads, one home: only their typing
//! is drift's. Every value an audit entry carries is checked before it is
//! kept ([`touch`]): what reaches the report is an id, a known word, a
//! checked prefix or address, or nothing.

use std::path::Path;

use serde_json::Value;

use super::verdict::{AUDIT_GROUPS, Reads, Serves, Touch, Who};
use crate::baseten::{Api, AuditEntry};
use crate::content::plan::Workspace;
use crate::content::skip::{self, Why};
use crate::secret::Secret;

/// The prefix the audit log shows for this run's key: its text before the
/// first `.` (Baseten keys are `<prefix>.<secret>`), else its first 8
/// characters. Only ever compared, never said.
pub(crate) fn key_prefix(key: &Secret) -> String {
    let text = key.expose();
    match text.split_once('.') {
        Some((prefix, _)) => prefix.to_string(),
        None => text.chars().take(8).collect(),
    }
}

/// Every read of one model target (`dir`, its model `name` in `team`)
/// against `env`.
pub(crate) async fn reads(
    api: &Api,
    workspace: &Workspace,
    (name, team): (&str, Option<&str>),
    dir: &Path,
    env: &str,
) -> Reads {
    let root = dir.to_path_buf();
    let hashing = async {
        match tokio::task::spawn_blocking(move || crate::content::hash(&root)).await {
            Ok(Ok(h)) => Ok(h.hex),
            Ok(Err(e)) => Err(format!("hashing the truss failed ({e:#})")),
            Err(e) => Err(format!("hashing the truss failed ({e})")),
        }
    };
    let platform = async {
        let model_id = match workspace.model_id(api, name, team).await {
            Ok(Some(id)) => id,
            Ok(None) => return (Ok(Serves::NoModel), None, None),
            Err(why) => return (Err(why.to_string()), None, None),
        };
        let (id, label) = match skip::serving(api, Some(&model_id), env).await {
            Ok(read) => (read.deployment_id, read.recorded),
            Err(Why::NotListed { .. }) => return (Ok(Serves::NoEnvironment), None, None),
            Err(Why::ServesNothing { .. }) => return (Ok(Serves::Nothing), None, None),
            Err(why) => return (Err(why.to_string()), None, None),
        };
        let (config, audit) = tokio::join!(
            api.deployment_raw_config(&model_id, &id),
            audit(api, &model_id)
        );
        let config = config
            .map_err(|e| format!("could not read the serving deployment {id}'s config ({e})"));
        (
            Ok(Serves::Deployment { id, label }),
            Some(config),
            Some(audit),
        )
    };
    let (source_hash, (serves, config, audit)) = tokio::join!(hashing, platform);
    Reads {
        source_hash,
        serves,
        config,
        audit,
    }
}

/// The model's audit log, every entry of the groups drift reads, typed.
async fn audit(api: &Api, model_id: &str) -> Result<Vec<Touch>, String> {
    let entries = api
        .audit_log(model_id, &AUDIT_GROUPS)
        .await
        .map_err(|e| format!("could not read the model's audit log ({e})"))?;
    entries.iter().map(touch).collect()
}

/// The words an audit entry's `source` may be (`AuditLogSourceV1`).
const SOURCES: [&str; 5] = ["UI", "API", "MCP", "SYSTEM", "OTHER"];

/// One audit entry typed and checked: a time that is not the log's ISO
/// 8601 (`history::instant`) fails the read (the entry cannot be placed, so nothing after it can be
/// told); any other value that is not what its field may be is dropped.
fn touch(e: &AuditEntry) -> Result<Touch, String> {
    let at = crate::history::instant(&e.created).ok_or_else(|| {
        format!(
            "the audit log has an entry whose time is not an ISO 8601 UTC time ({:?})",
            e.created.chars().take(40).collect::<String>()
        )
    })?;
    let text = |k: &str| e.event_data.get(k).and_then(Value::as_str);
    let actor = e.actor.as_ref();
    Ok(Touch {
        at,
        created: e.created.clone(),
        event_type: e.event_type.clone(),
        deployment_id: text("deployment_id")
            .filter(|id| crate::baseten::id::is_usable(id))
            .map(str::to_string),
        environment: text("environment_name")
            .filter(|n| word(n, 64, |c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map(str::to_string),
        who: Who {
            source: e.source.as_deref().map(|s| {
                SOURCES
                    .iter()
                    .find(|w| **w == s)
                    .unwrap_or(&"OTHER")
                    .to_string()
            }),
            kind: actor
                .map(|a| a.kind.as_str())
                .filter(|k| word(k, 32, |c| c.is_ascii_uppercase() || c == '_'))
                .map(str::to_string),
            key_prefix: actor
                .and_then(|a| a.api_key_prefix.as_deref())
                .filter(|p| word(p, 64, |c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .map(str::to_string),
            email: actor
                .and_then(|a| a.email.as_deref())
                .filter(|m| email(m))
                .map(str::to_string),
        },
    })
}

/// 1 to `max` characters, each one `ok` allows.
fn word(text: &str, max: usize, ok: impl Fn(char) -> bool) -> bool {
    (1..=max).contains(&text.len()) && text.chars().all(ok)
}

/// An address as the audit log should name a user: `local@domain`, no
/// space, quote, angle bracket, backtick or control character, at most
/// 254 bytes.
fn email(text: &str) -> bool {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '%' | '+' | '-');
    match text.split_once('@') {
        Some((local, domain)) => {
            text.len() <= 254
                && word(local, 64, plain)
                && word(domain, 189, |c| {
                    c.is_ascii_alphanumeric() || c == '.' || c == '-'
                })
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_checked_values_are_kept() {
        assert!(email("ann@example.com"));
        assert!(email("a.b+ci@sub.example.co"));
        for bad in [
            "ann",
            "@example.com",
            "ann@",
            "ann @example.com",
            "<ann@example.com>",
            "ann@example.com\n",
            "`x`@example.com",
        ] {
            assert!(!email(bad), "{bad:?}");
        }
        let prefix = |p: &str| word(p, 64, |c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        assert!(prefix("abc_DEF-12"));
        assert!(!prefix("abc.def") && !prefix("") && !prefix(&"a".repeat(65)));
    }

    #[test]
    fn the_key_prefix_is_the_text_before_the_first_dot() {
        assert_eq!(key_prefix(&Secret::new("abcd1234.secretpart")), "abcd1234");
        assert_eq!(key_prefix(&Secret::new("nodotsatallhere")), "nodotsat");
    }
}
