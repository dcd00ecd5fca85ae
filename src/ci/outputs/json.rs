//! The JSON outputs file: one object of strings; and the one JSON layout
//! every document of ours uses (the top level one member a line, anything
//! nested compact).

use std::io;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

use super::Outputs;

/// The outputs as one JSON object of strings, in writing order.
pub(in crate::ci) struct Entries(Vec<(&'static str, String)>);

impl From<&Outputs> for Entries {
    fn from(outputs: &Outputs) -> Self {
        Entries(outputs.entries())
    }
}

impl Serialize for Entries {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// `value` with its top-level members one a line (indented two spaces) and
/// everything nested compact, ending in a newline.
pub(in crate::ci) fn top_level_lines<T: Serialize + ?Sized>(value: &T) -> String {
    let mut bytes = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut bytes, TopLevelLines::default());
    value.serialize(&mut ser).expect("plain data serializes");
    bytes.push(b'\n');
    String::from_utf8(bytes).expect("serde_json writes UTF-8")
}

/// Pretty at depth one, compact below.
#[derive(Default)]
struct TopLevelLines {
    depth: usize,
    pretty: PrettyFormatter<'static>,
}

impl TopLevelLines {
    fn top(&self) -> bool {
        self.depth == 1
    }
}

impl Formatter for TopLevelLines {
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        if self.top() {
            self.pretty.begin_object(w)
        } else {
            CompactFormatter.begin_object(w)
        }
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        let top = self.top();
        self.depth -= 1;
        if top {
            self.pretty.end_object(w)
        } else {
            CompactFormatter.end_object(w)
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if self.top() {
            self.pretty.begin_object_key(w, first)
        } else {
            CompactFormatter.begin_object_key(w, first)
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.top() {
            self.pretty.begin_object_value(w)
        } else {
            CompactFormatter.begin_object_value(w)
        }
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.top() {
            self.pretty.end_object_value(w)
        } else {
            CompactFormatter.end_object_value(w)
        }
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        CompactFormatter.begin_array(w)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        CompactFormatter.end_array(w)
    }
}

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
