//! Server-sent events, decoded from bytes as they arrive: lines end in CRLF,
//! LF or CR; `field:value` with one optional space after the colon; lines
//! starting with `:` are comments; `data` lines join with newlines; a blank
//! line ends an event. No I/O here: the caller feeds what it read.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Event {
    /// The `event` field; empty means the default type, `message`.
    pub(crate) kind: String,
    pub(crate) data: String,
}

/// An incremental decoder: feed it chunks in order, split anywhere.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    line: Vec<u8>,
    /// The previous chunk ended in CR: an LF starting this one belongs to it.
    after_cr: bool,
    kind: String,
    data: String,
    has_data: bool,
}

impl Decoder {
    /// Bytes held for the event not yet complete (its line and data), for
    /// a reader that bounds them.
    pub(crate) fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.len()
    }

    /// Decodes `chunk`, returning the events it completed.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        let mut bytes = chunk;
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.end_line(&mut events);
                    match bytes.get(i + 1) {
                        Some(b'\n') => i += 1,
                        Some(_) => {}
                        None => self.after_cr = true,
                    }
                }
                b => self.line.push(b),
            }
            i += 1;
        }
        events
    }

    fn end_line(&mut self, events: &mut Vec<Event>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                events.push(Event {
                    kind: std::mem::take(&mut self.kind),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.kind.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let line = String::from_utf8_lossy(&line);
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.kind = value.to_string(),
            // `id` and `retry` matter to reconnecting clients; a smoke test
            // never reconnects.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    fn all(chunks: &[&[u8]]) -> Vec<Event> {
        let mut d = Decoder::default();
        chunks.iter().flat_map(|c| d.feed(c)).collect()
    }

    #[test]
    fn the_line_endings_the_spec_allows() {
        for text in [
            "data: a\n\ndata: b\n\n",
            "data: a\r\n\r\ndata: b\r\n\r\n",
            "data: a\r\rdata: b\r\r",
            "data: a\r\n\ndata: b\n\r\n",
        ] {
            assert_eq!(data(&all(&[text.as_bytes()])), ["a", "b"], "{text:?}");
        }
    }

    #[test]
    fn the_space_after_the_colon_is_optional_and_only_one_is_removed() {
        let ev = all(&[b"data:a\n\ndata:  b\n\ndata\n\n"]);
        assert_eq!(data(&ev), ["a", " b", ""]);
    }

    #[test]
    fn multi_line_data_joins_with_newlines_and_comments_are_skipped() {
        let ev = all(&[b": keep-alive\ndata: {\"a\":\ndata: 1}\n: note\nevent: delta\n\n"]);
        assert_eq!(
            ev,
            [Event {
                kind: "delta".into(),
                data: "{\"a\":\n1}".into()
            }]
        );
    }

    #[test]
    fn events_split_across_reads_at_any_byte() {
        let text = b"data: one\r\n\r\n: c\r\ndata: two\r\ndata: lines\r\n\r\ndata: [DONE]\r\n\r\n";
        let want = all(&[text]);
        assert_eq!(data(&want), ["one", "two\nlines", "[DONE]"]);
        for cut in 0..text.len() {
            assert_eq!(all(&[&text[..cut], &text[cut..]]), want, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(all(&bytes), want);
    }

    #[test]
    fn an_unfinished_event_is_not_dispatched_and_blank_lines_alone_are_nothing() {
        assert!(all(&[b"\n\n\r\n"]).is_empty());
        assert!(all(&[b"data: half"]).is_empty());
    }
}
