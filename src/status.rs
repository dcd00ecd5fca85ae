//! Readiness: which platform statuses mean ready, failed, or still going.
//!
//! The polarity is the point: the official client failed real deploys by
//! treating every status it did not list (SCALED_TO_ZERO first) as a
//! failure. Here only an explicit FAILED status fails a deploy. Every other status — including ones the platform adds tomorrow —
//! is "in progress" and only the deadline can end the wait.

/// How one observed status is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    Ready,
    Failed,
    InProgress,
}

impl Readiness {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Readiness::Ready => "ready",
            Readiness::Failed => "failed",
            Readiness::InProgress => "in progress",
        }
    }
}

/// The 14 public REST v1 deployment statuses (`DeploymentStatusV1`).
pub(crate) const PUBLIC_STATUSES: [&str; 14] = [
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

/// Raw internal statuses that GraphQL `current_model_deployment_status`
/// returns for chainlets: internal names that the REST API translates to the
/// public ones, but GraphQL does not.
pub(crate) const RAW_STATUSES: [&str; 15] = [
    "BUILDING_MODEL",
    "DEPLOYING_MODEL",
    "MODEL_DEPLOY_FAILED",
    "MODEL_LOADING",
    "MODEL_READY",
    "MODEL_UNHEALTHY",
    "BUILDING_MODEL_FAILED",
    "BUILDING_MODEL_STOPPED",
    "DEACTIVATING_MODEL",
    "DEACTIVATED_MODEL",
    "MODEL_DNE_ERROR",
    "UPDATING",
    "MIGRATING_WORKLOAD_PLANES",
    "SCALED_TO_ZERO",
    "SCALING_FROM_ZERO",
];

/// Models (public REST statuses): a deployment resting at zero replicas is
/// healthy and promotable, so it is ready.
pub(crate) const MODEL_READY_STATUSES: &[&str] = &["ACTIVE", "SCALED_TO_ZERO"];

/// Models: terminal failures. DEACTIVATING is deliberately absent: it
/// converges to INACTIVE, which is here.
pub(crate) const MODEL_FAILED_STATUSES: &[&str] = &[
    "BUILD_FAILED",
    "BUILD_STOPPED",
    "DEPLOY_FAILED",
    "FAILED",
    "INACTIVE",
    "UNHEALTHY",
];

/// Models: a deployment in one of these has not served, and never will
/// in this state: its build runs or failed, or it is deploying for the
/// first time or failed to (a deployment that served and failed later
/// shows `FAILED` or `UNHEALTHY`). The audit log's placements of such a
/// deployment did not change what served (`history`).
pub(crate) fn never_served(status: &str) -> bool {
    [
        "BUILDING",
        "BUILD_FAILED",
        "BUILD_STOPPED",
        "DEPLOYING",
        "DEPLOY_FAILED",
    ]
    .iter()
    .any(|s| s.eq_ignore_ascii_case(status.trim()))
}

/// Chains (raw GraphQL chainlet statuses, read untranslated): `MODEL_READY`
/// is the raw spelling of ACTIVE.
pub(crate) const CHAIN_READY_STATUSES: &[&str] = &["ACTIVE", "SCALED_TO_ZERO", "MODEL_READY"];

/// Chains: the public failure names and their raw internal equivalents.
pub(crate) const CHAIN_FAILED_STATUSES: &[&str] = &[
    "BUILD_FAILED",
    "BUILD_STOPPED",
    "DEPLOY_FAILED",
    "FAILED",
    "INACTIVE",
    "UNHEALTHY",
    "BUILDING_MODEL_FAILED",
    "BUILDING_MODEL_STOPPED",
    "MODEL_DEPLOY_FAILED",
    "MODEL_DNE_ERROR",
    "DEACTIVATED_MODEL",
    "MODEL_UNHEALTHY",
];

fn classify(status: &str, ready: &[&str], failed: &[&str]) -> Readiness {
    let status = status.trim();
    if ready.iter().any(|s| s.eq_ignore_ascii_case(status)) {
        Readiness::Ready
    } else if failed.iter().any(|s| s.eq_ignore_ascii_case(status)) {
        Readiness::Failed
    } else {
        Readiness::InProgress
    }
}

/// Reads a model deployment's public status.
pub(crate) fn classify_model(status: &str) -> Readiness {
    classify(status, MODEL_READY_STATUSES, MODEL_FAILED_STATUSES)
}

/// Reads one chainlet's raw status.
pub(crate) fn classify_chainlet(status: &str) -> Readiness {
    classify(status, CHAIN_READY_STATUSES, CHAIN_FAILED_STATUSES)
}

/// True when a status is one this build knows; unknown ones are polled and
/// reported once.
pub(crate) fn is_known_model_status(status: &str) -> bool {
    PUBLIC_STATUSES
        .iter()
        .any(|s| s.eq_ignore_ascii_case(status.trim()))
}

/// True for any public or raw status name this build knows.
pub(crate) fn is_known_chainlet_status(status: &str) -> bool {
    let s = status.trim();
    PUBLIC_STATUSES
        .iter()
        .chain(RAW_STATUSES.iter())
        .any(|k| k.eq_ignore_ascii_case(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Models: statuses known to be on the way (for documentation and tests;
    /// classification does not need them, unknown statuses are in progress too).
    const MODEL_IN_PROGRESS_STATUSES: &[&str] = &[
        "BUILDING",
        "DEPLOYING",
        "LOADING_MODEL",
        "UPDATING",
        "WAKING_UP",
        "DEACTIVATING",
    ];

    /// Chains: statuses known to be on the way, public and raw.
    const CHAIN_IN_PROGRESS_STATUSES: &[&str] = &[
        "BUILDING",
        "DEPLOYING",
        "LOADING_MODEL",
        "UPDATING",
        "WAKING_UP",
        "DEACTIVATING",
        "BUILDING_MODEL",
        "DEPLOYING_MODEL",
        "MODEL_LOADING",
        "MIGRATING_WORKLOAD_PLANES",
        "SCALING_FROM_ZERO",
        "DEACTIVATING_MODEL",
    ];

    use std::collections::BTreeSet;

    fn set(xs: &[&'static str]) -> BTreeSet<&'static str> {
        xs.iter().copied().collect()
    }

    #[test]
    fn model_sets_partition_all_fourteen_public_statuses() {
        let ready = set(MODEL_READY_STATUSES);
        let failed = set(MODEL_FAILED_STATUSES);
        let going = set(MODEL_IN_PROGRESS_STATUSES);
        assert!(ready.is_disjoint(&failed));
        assert!(ready.is_disjoint(&going));
        assert!(failed.is_disjoint(&going));
        let union: BTreeSet<_> = ready.union(&failed).chain(going.iter()).copied().collect();
        assert_eq!(union, set(&PUBLIC_STATUSES));
        for s in PUBLIC_STATUSES {
            let want = if ready.contains(s) {
                Readiness::Ready
            } else if failed.contains(s) {
                Readiness::Failed
            } else {
                Readiness::InProgress
            };
            assert_eq!(classify_model(s), want, "{s}");
        }
    }

    #[test]
    fn chain_sets_partition_every_public_and_raw_status() {
        let ready = set(CHAIN_READY_STATUSES);
        let failed = set(CHAIN_FAILED_STATUSES);
        let going = set(CHAIN_IN_PROGRESS_STATUSES);
        assert!(ready.is_disjoint(&failed));
        assert!(ready.is_disjoint(&going));
        assert!(failed.is_disjoint(&going));
        let all: BTreeSet<_> = PUBLIC_STATUSES
            .iter()
            .chain(RAW_STATUSES.iter())
            .copied()
            .collect();
        let union: BTreeSet<_> = ready.union(&failed).chain(going.iter()).copied().collect();
        assert_eq!(union, all);
    }

    #[test]
    fn a_recorded_real_history_reads_ready_at_scaled_to_zero() {
        // A real history: BUILDING, DEPLOYING, SCALED_TO_ZERO (the old
        // client died here), WAKING_UP, ACTIVE ten minutes later.
        let got: Vec<_> = [
            "BUILDING",
            "DEPLOYING",
            "SCALED_TO_ZERO",
            "WAKING_UP",
            "ACTIVE",
        ]
        .iter()
        .map(|s| classify_model(s))
        .collect();
        use Readiness::*;
        assert_eq!(got, [InProgress, InProgress, Ready, InProgress, Ready]);
    }

    #[test]
    fn unknown_statuses_are_in_progress_never_failed() {
        for s in ["RESHARDING", "", "MODEL_READY", "PENDING"] {
            assert_eq!(classify_model(s), Readiness::InProgress, "{s}");
            assert!(!is_known_model_status(s) || s.is_empty());
        }
        assert_eq!(classify_chainlet("SOMETHING_NEW"), Readiness::InProgress);
        assert_eq!(classify_model(" active "), Readiness::Ready);
    }
}
