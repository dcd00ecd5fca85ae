//! How GitHub's runner reads a step's log for workflow commands, so tests
//! can prove which commands a run's output would execute.
//!
//! The runner reads stdout and stderr line by line with .NET's `ReadLine`,
//! which ends a line at `\r\n`, `\r` or `\n`. A line whose start, after
//! whitespace, is `::name props::data` with a second `::` is a command; the
//! legacy form `##[name props]data` is matched anywhere in a line.
//! `::stop-commands::TOKEN` stops commands until a line `::TOKEN::`; in
//! between nothing is executed.

/// A command the runner would execute, as written (data still escaped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkflowCommand {
    pub name: String,
    pub properties: String,
    pub data: String,
}

/// The lines the runner reads from `log`.
pub fn runner_lines(log: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let bytes = log.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&log[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&log[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < log.len() {
        lines.push(&log[start..]);
    }
    lines
}

/// `::name props::data` (after leading whitespace), or `None`.
fn parse_v2(line: &str) -> Option<WorkflowCommand> {
    let rest = line.trim_start().strip_prefix("::")?;
    let end = rest.find("::")?;
    let (info, data) = (&rest[..end], &rest[end + 2..]);
    let (name, properties) = info.split_once(' ').unwrap_or((info, ""));
    Some(WorkflowCommand {
        name: name.to_string(),
        properties: properties.to_string(),
        data: data.to_string(),
    })
}

/// `##[name props]data` anywhere in the line, or `None`.
fn parse_legacy(line: &str) -> Option<WorkflowCommand> {
    let at = line.find("##[")?;
    let rest = &line[at + 3..];
    let end = rest.find(']')?;
    let (info, data) = (&rest[..end], &rest[end + 1..]);
    let (name, properties) = info.split_once(' ').unwrap_or((info, ""));
    Some(WorkflowCommand {
        name: name.to_string(),
        properties: properties.to_string(),
        data: data.to_string(),
    })
}

/// Every command the runner would execute reading `log`, in order. The
/// `stop-commands` command and the line that resumes are included (they are
/// commands too); what lies between them is not.
pub fn workflow_commands(log: &str) -> Vec<WorkflowCommand> {
    let mut found = Vec::new();
    let mut stopped: Option<String> = None;
    for line in runner_lines(log) {
        let cmd = parse_v2(line).or_else(|| parse_legacy(line));
        let Some(cmd) = cmd else { continue };
        if let Some(token) = &stopped {
            if cmd.name == *token && cmd.properties.is_empty() {
                stopped = None;
                found.push(cmd);
            }
            continue;
        }
        if cmd.name == "stop-commands" {
            stopped = Some(cmd.data.clone());
        }
        found.push(cmd);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(log: &str) -> Vec<String> {
        workflow_commands(log).into_iter().map(|c| c.name).collect()
    }

    #[test]
    fn lines_end_where_the_runner_ends_them() {
        assert_eq!(runner_lines("a\r\nb\rc\nd"), ["a", "b", "c", "d"]);
        assert_eq!(runner_lines("a\n\n"), ["a", ""]);
        assert_eq!(runner_lines("a\u{2028}b"), ["a\u{2028}b"]);
    }

    #[test]
    fn commands_fences_and_the_legacy_form() {
        assert_eq!(names("loading\r::error::x\n"), ["error"]);
        assert_eq!(names("  ::warning title=t::w"), ["warning"]);
        assert_eq!(names("a ::error::x\n::nope"), Vec::<String>::new());
        assert_eq!(names("log ##[group]x"), ["group"]);
        assert_eq!(
            names("::stop-commands::tok\n::error::x\n::tok::\n::notice::n"),
            ["stop-commands", "tok", "notice"]
        );
        let c = &workflow_commands("::error title=a%3Ab::m%0Ad")[0];
        assert_eq!(
            (c.properties.as_str(), c.data.as_str()),
            ("title=a%3Ab", "m%0Ad")
        );
    }
}
