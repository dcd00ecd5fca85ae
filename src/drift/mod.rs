//! `command: drift`: whether what serves each model target's environment
//! is what the repository says.

pub(crate) mod verdict;
