//! The pull-request comment kept up to date: found again by its marker,
//! and edited only when this token's identity wrote it.
//!
//! Who the token is: `GET /user` names the user behind a personal access
//! or OAuth token. The job's own `GITHUB_TOKEN` (a GitHub App installation
//! token) may not read `/user`; what it writes is authored by the
//! `github-actions[bot]` user, of type `Bot`, which no person can be. A
//! comment carrying our marker that someone else wrote is left alone (its
//! author could change it between runs), and a new one is posted.

use reqwest::Method;
use serde_json::{Value, json};

use super::client::{CREATE, GhError, REPEATABLE};
use super::{COMMENT_PAGES_MAX, COMMENTS_PER_PAGE, Feature, Session, comment};

/// The login GitHub Actions' own token writes as.
const ACTIONS_BOT_LOGIN: &str = "github-actions[bot]";
/// The GitHub App behind that bot, as `performed_via_github_app` names it.
const ACTIONS_APP_SLUG: &str = "github-actions";

/// Who this token writes as, when it can be learned.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Identity {
    /// `GET /user` named it.
    User(String),
    /// `GET /user` is refused, as for an installation token: the Actions bot.
    ActionsBot,
}

/// Whether `c` (a comment as GitHub lists it) was written by `me`.
pub(super) fn written_by(c: &Value, me: &Identity) -> bool {
    let login = c.pointer("/user/login").and_then(Value::as_str);
    let kind = c.pointer("/user/type").and_then(Value::as_str);
    match me {
        Identity::User(name) => login.is_some_and(|l| l.eq_ignore_ascii_case(name)),
        Identity::ActionsBot => {
            // When GitHub names the app that wrote it, it must be Actions.
            let app = c
                .pointer("/performed_via_github_app/slug")
                .and_then(Value::as_str);
            login == Some(ACTIONS_BOT_LOGIN)
                && kind == Some("Bot")
                && app.is_none_or(|a| a == ACTIONS_APP_SLUG)
        }
    }
}

impl Session {
    /// Who this token is; `None` (with a warning) when GitHub cannot say.
    async fn identity(&self) -> Option<Identity> {
        match self.client.authenticated_user().await {
            Ok(v) => match v.get("login").and_then(Value::as_str) {
                Some(l) if !l.is_empty() => Some(Identity::User(l.to_string())),
                _ => None,
            },
            Err(GhError::Status { status: 403, .. }) => Some(Identity::ActionsBot),
            Err(e) => {
                self.warn(Feature::Comment, "learn who the token is (GET /user)", &e);
                None
            }
        }
    }

    /// Every comment on `pr` that carries `marker`, oldest first; `None`
    /// (with a warning) when they cannot be read.
    async fn marked_comments(&self, pr: &str, marker: &str) -> Option<Vec<Value>> {
        let mut found = Vec::new();
        for page in 1..=COMMENT_PAGES_MAX {
            let query = [
                ("per_page", COMMENTS_PER_PAGE.to_string()),
                ("page", page.to_string()),
            ];
            let listed = match self
                .client
                .send(
                    &REPEATABLE,
                    Method::GET,
                    &["issues", pr, "comments"],
                    &query,
                    None,
                )
                .await
            {
                Ok(v) => v,
                Err(e) => {
                    self.warn(Feature::Comment, "read the pull request's comments", &e);
                    return None;
                }
            };
            let items = listed.as_array().cloned().unwrap_or_default();
            let n = items.len();
            found.extend(items.into_iter().filter(|c| {
                let body = c.get("body").and_then(Value::as_str).unwrap_or_default();
                comment::is_ours(body, marker)
            }));
            if n < COMMENTS_PER_PAGE {
                break;
            }
        }
        Some(found)
    }

    /// Edits our comment that carries `marker`, or creates one when there
    /// is none of ours (or GitHub refuses the edit).
    pub(super) async fn upsert_comment(&self, pr: u64, marker: &str, body: &str) {
        // Whatever the outputs held, neither secret reaches a comment.
        let body = crate::secret::scrub(body).into_owned();
        let pr_s = pr.to_string();
        // Creating one blind could duplicate ours: skip instead.
        let Some(marked) = self.marked_comments(&pr_s, marker).await else {
            return;
        };
        let mut ours = None;
        if !marked.is_empty() {
            let Some(me) = self.identity().await else {
                return;
            };
            ours = marked.iter().find(|c| written_by(c, &me));
            for c in marked.iter().filter(|c| !written_by(c, &me)) {
                let who = c
                    .pointer("/user/login")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                self.say(&format!(
                    "GitHub: a comment by {who} on pull request #{pr} carries truss-push's marker; it is not this token's, so it is left as it is"
                ));
            }
        }
        let payload = json!({ "body": body });
        if let Some(id) = ours.and_then(|c| c.get("id")).and_then(Value::as_u64) {
            let edited = self
                .client
                .send(
                    &REPEATABLE,
                    Method::PATCH,
                    &["issues", "comments", &id.to_string()],
                    &[],
                    Some(&payload),
                )
                .await;
            match edited {
                Ok(_) => {
                    self.say(&format!("GitHub: pull request #{pr} comment updated"));
                    return;
                }
                Err(e) => self.rep.lock().unwrap().warning(&format!(
                    "GitHub: could not edit comment {id} on pull request #{pr} ({e}), so a new comment carries this run's verdict. The deploy itself is not affected."
                )),
            }
        }
        match self
            .client
            .send(
                &CREATE,
                Method::POST,
                &["issues", &pr_s, "comments"],
                &[],
                Some(&payload),
            )
            .await
        {
            Ok(_) => self.say(&format!("GitHub: pull request #{pr} comment added")),
            Err(e) => self.warn(Feature::Comment, "comment on the pull request", &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_identitys_comments_are_ours() {
        let by = |login: &str, kind: &str| json!({"user": {"login": login, "type": kind}});
        let bot = Identity::ActionsBot;
        assert!(written_by(&by("github-actions[bot]", "Bot"), &bot));
        assert!(!written_by(&by("github-actions[bot]", "User"), &bot));
        assert!(!written_by(&by("mallory", "User"), &bot));
        assert!(!written_by(&json!({}), &bot));
        let via = |slug: &str| {
            json!({"user": {"login": "github-actions[bot]", "type": "Bot"},
                   "performed_via_github_app": {"slug": slug}})
        };
        assert!(written_by(&via("github-actions"), &bot));
        assert!(!written_by(&via("some-other-app"), &bot));
        let me = Identity::User("Octocat".into());
        assert!(written_by(&by("octocat", "User"), &me));
        assert!(!written_by(&by("github-actions[bot]", "Bot"), &me));
    }
}
