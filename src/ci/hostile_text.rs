//! Hostile text for property tests, one strategy for the reporter's unit
//! tests and the binary's (tests/it includes this file by path): fragments
//! that end a line for the runner or a viewer, or forge a workflow command
//! (each forged one recognisable: a `forged` name, an `add-mask` of
//! something that is not a secret, a `stop-commands` token that is not
//! ours, a `FORGED` property or message), mixed with any character.

use std::ops::Range;

use proptest::prelude::*;

/// Between `pieces.start` and `pieces.end` (exclusive) fragments, joined.
pub(crate) fn hostile_text(pieces: Range<usize>) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\r".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("\u{2028}".to_string()),
        Just("\u{2029}".to_string()),
        Just("\u{85}".to_string()),
        Just("%0D".to_string()),
        Just("%0A%25".to_string()),
        Just("::".to_string()),
        Just("::forged-cmd::x".to_string()),
        Just("::error::FORGED".to_string()),
        Just("::error title=FORGED::x".to_string()),
        Just("::add-mask::FORGED".to_string()),
        Just("::stop-commands::abc".to_string()),
        Just("##[forged-legacy]x".to_string()),
        Just("##[error]FORGED".to_string()),
        Just(" \t".to_string()),
        any::<char>().prop_map(String::from),
    ];
    proptest::collection::vec(piece, pieces).prop_map(|v| v.concat())
}
