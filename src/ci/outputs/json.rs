//! The JSON outputs file: one object of strings.

use super::Outputs;
use crate::ci::json::{Entries, top_level_lines};

/// Renders the outputs as a JSON object with the hyphenated names in writing
/// order, one a line; every value is a string, exactly as in
/// `$GITHUB_OUTPUT`.
pub(super) fn render_json(outputs: &Outputs) -> String {
    top_level_lines(&Entries::from(outputs))
}

#[cfg(test)]
mod tests {
    use super::super::tests::full_outputs;
    use super::*;

    #[test]
    fn json_file_is_an_object_of_strings_in_output_order() {
        let mut outputs = full_outputs();
        outputs.error_message = "quote \" and\nnewline".into();
        let text = render_json(&outputs);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let object = value.as_object().unwrap();
        for (name, want) in outputs.entries() {
            assert_eq!(object[name], serde_json::Value::String(want), "{name}");
        }
        assert_eq!(object.len(), 15);
        let positions: Vec<usize> = outputs
            .entries()
            .iter()
            .map(|(n, _)| text.find(&format!("\"{n}\"")).unwrap())
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    }
}
