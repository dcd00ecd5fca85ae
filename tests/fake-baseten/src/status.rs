//! Deployment status vocabulary: the 14 public REST statuses, the raw
//! internal statuses chainlets report over GraphQL, the mapping between them
//! (reference 4.3), and the small decisions the fake takes on them.

/// Public (REST v1) statuses, reference 4.2.
pub const PUBLIC_STATUSES: [&str; 14] = [
    "BUILDING",
    "DEPLOYING",
    "DEPLOY_FAILED",
    "LOADING_MODEL",
    "ACTIVE",
    "UNHEALTHY",
    "BUILD_FAILED",
    "BUILD_STOPPED",
    "DEACTIVATING",
    "INACTIVE",
    "FAILED",
    "UPDATING",
    "SCALED_TO_ZERO",
    "WAKING_UP",
];

/// Raw internal status → public status (`STATUS_TO_DISPLAYABLE`).
const RAW_TO_PUBLIC: [(&str, &str); 15] = [
    ("BUILDING_MODEL", "BUILDING"),
    ("DEPLOYING_MODEL", "DEPLOYING"),
    ("MODEL_DEPLOY_FAILED", "DEPLOY_FAILED"),
    ("MODEL_LOADING", "LOADING_MODEL"),
    ("MODEL_READY", "ACTIVE"),
    ("MODEL_UNHEALTHY", "UNHEALTHY"),
    ("BUILDING_MODEL_FAILED", "BUILD_FAILED"),
    ("BUILDING_MODEL_STOPPED", "BUILD_STOPPED"),
    ("DEACTIVATING_MODEL", "DEACTIVATING"),
    ("DEACTIVATED_MODEL", "INACTIVE"),
    ("MODEL_DNE_ERROR", "FAILED"),
    ("UPDATING", "UPDATING"),
    ("MIGRATING_WORKLOAD_PLANES", "UPDATING"),
    ("SCALED_TO_ZERO", "SCALED_TO_ZERO"),
    ("SCALING_FROM_ZERO", "WAKING_UP"),
];

/// Public status of a raw one; unknown raw statuses read `UNKNOWN`, as the
/// Python client shows them.
pub fn raw_to_public(raw: &str) -> &'static str {
    RAW_TO_PUBLIC
        .iter()
        .find(|(r, _)| *r == raw)
        .map(|(_, p)| *p)
        .unwrap_or("UNKNOWN")
}

/// The raw status the platform would report for a public one. Public names
/// that have no raw twin (and unknown names) pass through unchanged, so a
/// scenario can script statuses the table does not know yet.
pub fn public_to_raw(public: &str) -> String {
    RAW_TO_PUBLIC
        .iter()
        .find(|(_, p)| *p == public)
        .map(|(r, _)| (*r).to_string())
        .unwrap_or_else(|| public.to_string())
}

/// A status written in either vocabulary, read as public.
pub fn as_public(status: &str) -> String {
    if PUBLIC_STATUSES.contains(&status) {
        status.to_string()
    } else if RAW_TO_PUBLIC.iter().any(|(r, _)| *r == status) {
        raw_to_public(status).to_string()
    } else {
        status.to_string()
    }
}

/// Ready to serve (possibly after waking): the readiness a promotion waits for.
pub fn is_ready(public: &str) -> bool {
    matches!(public, "ACTIVE" | "SCALED_TO_ZERO")
}

/// A status the deployment will not leave on its own.
pub fn is_failed(public: &str) -> bool {
    matches!(
        public,
        "BUILD_FAILED" | "BUILD_STOPPED" | "DEPLOY_FAILED" | "FAILED" | "UNHEALTHY" | "INACTIVE"
    )
}

/// What an inference request meets, by the deployment's public status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serving {
    /// Answer now.
    Serve,
    /// Scaled to zero or waking: the platform parks the request until a
    /// replica is up, then answers.
    WakeThenServe,
    /// Still building/deploying/loading, or failed/unhealthy: 503 with
    /// `{"error": ...}`, like the gateway answers when no container is
    /// available.
    Unavailable,
    /// Deactivated or deactivating: 404, as the platform documents for
    /// deactivated deployments.
    Gone,
}

pub fn serving(public: &str) -> Serving {
    match public {
        "ACTIVE" | "UPDATING" => Serving::Serve,
        "SCALED_TO_ZERO" | "WAKING_UP" => Serving::WakeThenServe,
        "INACTIVE" | "DEACTIVATING" => Serving::Gone,
        _ => Serving::Unavailable,
    }
}

/// One public status for a chain deployment from its chainlets' public
/// statuses (entrypoint first): the first failure if any, else ACTIVE when
/// all are, else the first chainlet that is not ACTIVE.
pub fn chain_status(chainlets: &[String]) -> String {
    if let Some(failed) = chainlets.iter().find(|s| is_failed(s)) {
        return failed.clone();
    }
    chainlets
        .iter()
        .find(|s| s.as_str() != "ACTIVE")
        .cloned()
        .unwrap_or_else(|| "ACTIVE".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_statuses_map_as_the_reference_table_says() {
        for (raw, public) in [
            ("BUILDING_MODEL", "BUILDING"),
            ("DEPLOYING_MODEL", "DEPLOYING"),
            ("MODEL_DEPLOY_FAILED", "DEPLOY_FAILED"),
            ("MODEL_LOADING", "LOADING_MODEL"),
            ("MODEL_READY", "ACTIVE"),
            ("MODEL_UNHEALTHY", "UNHEALTHY"),
            ("BUILDING_MODEL_FAILED", "BUILD_FAILED"),
            ("BUILDING_MODEL_STOPPED", "BUILD_STOPPED"),
            ("DEACTIVATING_MODEL", "DEACTIVATING"),
            ("DEACTIVATED_MODEL", "INACTIVE"),
            ("MODEL_DNE_ERROR", "FAILED"),
            ("UPDATING", "UPDATING"),
            ("MIGRATING_WORKLOAD_PLANES", "UPDATING"),
            ("SCALED_TO_ZERO", "SCALED_TO_ZERO"),
            ("SCALING_FROM_ZERO", "WAKING_UP"),
            ("SOMETHING_NEW", "UNKNOWN"),
        ] {
            assert_eq!(raw_to_public(raw), public, "{raw}");
        }
    }

    #[test]
    fn every_public_status_round_trips_through_raw() {
        for public in PUBLIC_STATUSES {
            assert_eq!(raw_to_public(&public_to_raw(public)), public);
            assert_eq!(as_public(public), public);
        }
        assert_eq!(public_to_raw("WAKING_UP"), "SCALING_FROM_ZERO");
        assert_eq!(as_public("MODEL_READY"), "ACTIVE");
        assert_eq!(as_public("BRAND_NEW"), "BRAND_NEW");
    }

    #[test]
    fn serving_partitions_every_public_status() {
        for (status, want) in [
            ("ACTIVE", Serving::Serve),
            ("UPDATING", Serving::Serve),
            ("SCALED_TO_ZERO", Serving::WakeThenServe),
            ("WAKING_UP", Serving::WakeThenServe),
            ("INACTIVE", Serving::Gone),
            ("DEACTIVATING", Serving::Gone),
            ("BUILDING", Serving::Unavailable),
            ("DEPLOYING", Serving::Unavailable),
            ("LOADING_MODEL", Serving::Unavailable),
            ("DEPLOY_FAILED", Serving::Unavailable),
            ("BUILD_FAILED", Serving::Unavailable),
            ("BUILD_STOPPED", Serving::Unavailable),
            ("FAILED", Serving::Unavailable),
            ("UNHEALTHY", Serving::Unavailable),
        ] {
            assert_eq!(serving(status), want, "{status}");
        }
    }

    #[test]
    fn chain_status_prefers_failures_then_laggards() {
        let s = |v: &[&str]| chain_status(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["ACTIVE", "ACTIVE"]), "ACTIVE");
        assert_eq!(s(&["ACTIVE", "BUILDING"]), "BUILDING");
        assert_eq!(s(&["DEPLOYING", "BUILD_FAILED"]), "BUILD_FAILED");
        assert_eq!(s(&["SCALED_TO_ZERO", "ACTIVE"]), "SCALED_TO_ZERO");
        assert_eq!(s(&[]), "ACTIVE");
    }
}
