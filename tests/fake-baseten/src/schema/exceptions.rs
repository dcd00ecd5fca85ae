//! The one list of justified deviations from the published REST API. An
//! exchange the schema check would flag passes only when an entry here
//! names it, with the reason. Keep it short: every entry is a place where
//! the suite cannot prove the fake behaves like the platform.

use super::template_of;

/// Which part of an exchange an exception covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The whole endpoint: not published, served anyway.
    Endpoint,
    /// One top-level field of the request body.
    Request,
    /// One top-level field of the 200 answer.
    Answer,
}

#[derive(Clone, Copy, Debug)]
pub struct Exception {
    pub method: &'static str,
    /// A path template, `{param}` for one segment.
    pub path: &'static str,
    pub side: Side,
    /// The top-level field allowed (`Request`/`Answer` only).
    pub field: Option<&'static str>,
    pub reason: &'static str,
}

/// One entry. (The chain promotion deviations the check first found —
/// chain cancel endpoints, `in_progress_promotion` on chain environments,
/// the chain promote's `preserve_env_instance_type` — were removed from
/// client and fake.)
pub const EXCEPTIONS: &[Exception] = &[Exception {
    method: "GET",
    path: "/v1/chains/{chain_id}/environments",
    side: Side::Answer,
    field: Some("environments"),
    reason: "the published spec answers a chain's environment list with the model's EnvironmentsV1 (items with model_id, is_production, …, which a chain environment has not); the fake lists ChainEnvironmentV1, what the published single chain environment endpoint answers. truss-push reads only name, current_deployment.id and candidate_deployment.id, which both shapes have (GUESSES.md)",
}];

/// The exceptions for `method path` (a concrete path).
pub fn matching(method: &str, path: &str) -> Vec<&'static Exception> {
    let for_method = || EXCEPTIONS.iter().filter(move |x| x.method == method);
    let Some(template) = template_of(for_method().map(|x| x.path), path) else {
        return Vec::new();
    };
    for_method().filter(|x| x.path == template).collect()
}
