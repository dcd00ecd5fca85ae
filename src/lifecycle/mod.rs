//! The lifecycle of what truss-push creates: `teardown` (a pull request's
//! previews) and `prune` (old deployments), never touching what serves.

pub(crate) mod prune;
pub(crate) mod teardown;
