//! The rollback target from the model's audit log (lands with the
//! lead's `history::previous_serving`).

use crate::flow::Ctx;
use crate::outcome::Failure;

/// The deployment that served `env` before `current`, per the audit log.
pub(super) async fn target(
    _ctx: &Ctx<'_>,
    _model_id: &str,
    env: &str,
    current: &str,
) -> Result<String, Failure> {
    Err(Failure::InvalidInput(format!(
        "what served {env} before {current} is not derived yet: name it with to-deployment"
    )))
}
