//! Model or chain: the one distinction every layer makes (which inputs
//! apply, which API collection, which heading and marker), named once.

/// What a target is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    Model,
    Chain,
}

impl Kind {
    /// `model` or `chain`: for messages, markers and inference host names.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Chain => "chain",
        }
    }
}
