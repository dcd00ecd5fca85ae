//! `command: drift` (being built: it refuses until it lands).

use crate::handles::Run;
use crate::outcome::Failure;
use crate::secret::Secret;
use crate::settings::CommandSettings;

/// Runs `command: drift`.
pub(crate) async fn run(_run: &Run, cs: &CommandSettings, _key: &Secret) -> Result<(), Failure> {
    Err(Failure::InvalidInput(format!(
        "command {} is not built yet in this version",
        cs.command.word()
    )))
}
