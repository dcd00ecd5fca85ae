//! Everything printed while the run goes: the `Reporter` that owns stdout
//! and stderr, GitHub workflow commands (groups, annotations, masking), and
//! the upload progress that `progress` decides.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use super::detect::CiKind;
use super::progress::{Draw, Upload};
use super::runner_text::{is_line_break, json_for_runner, looks_like_command, runner_lines};

/// Escapes a workflow command's data (message): `%`, CR, LF.
fn escape_data(value: &str) -> String {
    value
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value: as data, plus `:` and `,`.
fn escape_property(value: &str) -> String {
    escape_data(value).replace(':', "%3A").replace(',', "%2C")
}

/// `::name k=v,k=v::data`; properties with empty values are left out, as the
/// toolkit does.
fn workflow_command(name: &str, properties: &[(&str, &str)], data: &str) -> String {
    let props: Vec<String> = properties
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", escape_property(v)))
        .collect();
    if props.is_empty() {
        format!("::{name}::{}", escape_data(data))
    } else {
        format!("::{name} {}::{}", props.join(","), escape_data(data))
    }
}

/// Severity of an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Error,
    Warning,
    Notice,
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Notice => "notice",
        }
    }
}

/// An annotation as a workflow command, e.g. `::error title=Deploy::boom`.
fn annotation_command(level: Level, title: Option<&str>, message: &str) -> String {
    workflow_command(level.word(), &[("title", title.unwrap_or(""))], message)
}

/// The same annotation as a plain line for other CI systems: `error: boom`.
fn annotation_line(level: Level, title: Option<&str>, message: &str) -> String {
    match title {
        Some(t) if !t.is_empty() => format!("{}: {t}: {message}", level.word()),
        _ => format!("{}: {message}", level.word()),
    }
}

/// A group start: `::group::title` on GitHub, a plain heading elsewhere.
fn group_start(kind: CiKind, title: &str) -> String {
    match kind {
        CiKind::GitHub => workflow_command("group", &[], title),
        _ => format!("==> {title}"),
    }
}

/// Where the reporter writes; tests pass an in-memory buffer.
pub(crate) type Sink = Box<dyn Write + Send>;

/// Owns stdout/stderr for the run: plain lines, groups, annotations,
/// masking and upload progress, each in the form the CI system understands.
///
/// On GitHub everything goes to stdout, because groups and the text inside
/// them must share a stream to be shown together; elsewhere errors and
/// warnings go to stderr. Every registered secret ([`crate::secret`]) is
/// replaced by `***` in everything this reporter prints, whoever called
/// it. Write errors are ignored: losing a log line must not fail a deploy.
pub(crate) struct Reporter {
    kind: CiKind,
    terminal: bool,
    out: Sink,
    err: Sink,
    /// Secrets this reporter already sent `::add-mask::` for.
    masked: Vec<String>,
    group_open: bool,
    upload: Option<Upload>,
    /// A terminal progress bar is on the current line and needs a newline
    /// before anything else is printed.
    bar_on_line: bool,
    rng: fastrand::Rng,
    /// Log lines go to stderr: stdout carries data (`print-config`).
    lines_to_stderr: bool,
}

impl Reporter {
    /// A reporter writing to `out`/`err`. `stdout_is_terminal` enables the
    /// redrawn progress bar (only outside CI, where logs are not terminals
    /// even when a TTY is allocated).
    pub(crate) fn new(kind: CiKind, stdout_is_terminal: bool, out: Sink, err: Sink) -> Self {
        Self {
            kind,
            terminal: stdout_is_terminal,
            out,
            err,
            masked: Vec::new(),
            group_open: false,
            upload: None,
            bar_on_line: false,
            rng: fastrand::Rng::new(),
            lines_to_stderr: false,
        }
    }

    /// A reporter for one of several targets deploying at once: plain lines
    /// (headings for groups, `warning: …` for annotations) into `sink`,
    /// redacted like every reporter. Its text is shown later, inside the
    /// target's own group, since groups cannot interleave.
    pub(crate) fn buffered(&self, sink: Sink) -> Self {
        let mut r = Self::new(CiKind::Local, false, Box::new(std::io::sink()), sink);
        r.lines_to_stderr = true;
        r
    }

    /// Shows a buffered target's `text` inside one group titled `title`.
    pub(crate) fn replay(&mut self, title: &str, text: &str) {
        self.group(title);
        self.line(text);
        self.end_group();
    }

    /// A reporter on the process's stdout and stderr.
    pub(crate) fn stdio(kind: CiKind) -> Self {
        let terminal = std::io::stdout().is_terminal();
        Self::new(
            kind,
            terminal,
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
        )
    }

    fn progress_redraws(&self) -> bool {
        self.terminal && self.kind == CiKind::Local
    }

    /// Redacts a piece before it is escaped or fenced (an escape could
    /// split a secret); [`Self::emit`] redacts the finished text again.
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        crate::secret::scrub(text)
    }

    fn end_bar(&mut self) {
        if self.bar_on_line {
            self.bar_on_line = false;
            let _ = self.out.write_all(b"\n");
        }
    }

    /// The sink every log line goes through. On GitHub the text is cut
    /// where the runner (or a viewer) ends a line, and each line that the
    /// runner would take for a workflow command (a model's log printing
    /// `::set-output`, `loading\r::error`, a directory name) is fenced with
    /// `stop-commands`, so it is shown, never executed. Elsewhere lines end
    /// at `\n` only, as given.
    fn write_out(&mut self, text: &str) {
        let text = self.neutralize(text);
        self.emit(&text, false);
    }

    /// Like [`Self::write_out`], on stderr (outside GitHub: errors, warnings).
    fn write_err(&mut self, text: &str) {
        let text = self.neutralize(text);
        self.emit(&text, true);
    }

    /// A workflow command this reporter built (escaped: one runner line).
    fn command(&mut self, line: &str) {
        self.emit(&format!("{line}\n"), false);
    }

    fn neutralize(&mut self, text: &str) -> String {
        if self.kind != CiKind::GitHub {
            return text.to_owned();
        }
        // One trailing break is the line's end, not an empty line after it.
        let body = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix(is_line_break))
            .unwrap_or(text);
        let mut out = String::with_capacity(body.len() + 1);
        for line in runner_lines(body) {
            if looks_like_command(line) {
                let token = format!("{:032x}", self.rng.u128(..));
                let _ = write!(out, "::stop-commands::{token}\n{line}\n::{token}::\n");
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Writes finished text, redacted: to stderr when asked or when stdout
    /// carries data, else to stdout.
    fn emit(&mut self, text: &str, to_err: bool) {
        let text = crate::secret::scrub(text);
        self.emit_unredacted(&text, to_err);
    }

    /// [`Self::emit`] without the redaction: only for `::add-mask::`, which
    /// must name the secret to hide it.
    fn emit_unredacted(&mut self, text: &str, to_err: bool) {
        self.end_bar();
        if to_err || self.lines_to_stderr {
            let _ = self.out.flush();
            let _ = self.err.write_all(text.as_bytes());
            let _ = self.err.flush();
        } else {
            let _ = self.out.write_all(text.as_bytes());
            let _ = self.out.flush();
        }
    }

    /// Writes `text` to stdout as data (redacted, not a log line), and sends
    /// every log line after it to stderr so stdout stays parseable. The data
    /// is JSON; on GitHub it is escaped so that no line of it can read as a
    /// command or be shown as two lines.
    pub(crate) fn data(&mut self, text: &str) {
        let mut text = self.redact(text).into_owned();
        if self.kind == CiKind::GitHub {
            text = json_for_runner(&text);
        }
        let text = crate::secret::scrub(&text);
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
        self.lines_to_stderr = true;
    }

    /// A plain log line (may hold several lines), through the sink that
    /// keeps it from reading as a workflow command on GitHub.
    pub(crate) fn line(&mut self, msg: &str) {
        let msg = self.redact(msg).into_owned();
        // One trailing newline is the caller's line end, not an extra blank line.
        let msg = msg.strip_suffix('\n').unwrap_or(&msg);
        self.write_out(&format!("{msg}\n"));
    }

    /// Starts a collapsible group (a heading outside GitHub). GitHub does not
    /// nest groups, so an open one is closed first.
    pub(crate) fn group(&mut self, title: &str) {
        self.end_group();
        let title = self.redact(title).into_owned();
        let line = group_start(self.kind, &title);
        match self.kind {
            CiKind::GitHub => self.command(&line),
            _ => self.write_out(&format!("{line}\n")),
        }
        self.group_open = true;
    }

    /// Ends the open group, if any.
    pub(crate) fn end_group(&mut self) {
        if self.group_open {
            self.group_open = false;
            if self.kind == CiKind::GitHub {
                self.command("::endgroup::");
            }
        }
    }

    /// An annotation with an optional title.
    pub(crate) fn annotate(&mut self, level: Level, title: Option<&str>, msg: &str) {
        let msg = self.redact(msg).into_owned();
        let title = title.map(|t| self.redact(t).into_owned());
        if self.kind == CiKind::GitHub {
            let line = annotation_command(level, title.as_deref(), &msg);
            self.command(&line);
        } else {
            let line = annotation_line(level, title.as_deref(), &msg);
            match level {
                Level::Notice => self.write_out(&format!("{line}\n")),
                Level::Error | Level::Warning => self.write_err(&format!("{line}\n")),
            }
        }
    }

    pub(crate) fn warning(&mut self, msg: &str) {
        self.annotate(Level::Warning, None, msg);
    }

    pub(crate) fn notice(&mut self, msg: &str) {
        self.annotate(Level::Notice, None, msg);
    }

    /// Hides `secret` from now on: `::add-mask::` on GitHub (so the runner
    /// also masks it in other steps' output), and registered, so it is
    /// `***` in everything every sink writes on every CI. Blank values are
    /// ignored, as the runner ignores them (with a warning).
    pub(crate) fn mask(&mut self, secret: &str) {
        if secret.trim().is_empty() || self.masked.iter().any(|s| s == secret) {
            return;
        }
        crate::secret::register(secret);
        if self.kind == CiKind::GitHub {
            let line = workflow_command("add-mask", &[], secret);
            self.emit_unredacted(&format!("{line}\n"), false);
        }
        self.masked.push(secret.to_owned());
    }

    /// Starts reporting an upload of `total_bytes`.
    pub(crate) fn upload_started(&mut self, label: &str, total_bytes: u64) {
        #[expect(
            clippy::disallowed_methods,
            reason = "upload progress on screen: rates, and how often a line is printed"
        )]
        self.upload_started_at(label, total_bytes, Instant::now());
    }

    fn upload_started_at(&mut self, label: &str, total_bytes: u64, now: Instant) {
        self.end_bar();
        let label = self.redact(label).into_owned();
        self.upload = Some(Upload::new(label, total_bytes, now));
        self.upload_progress_at(0, now);
    }

    /// Reports `done_bytes` uploaded so far. In CI a line is printed at the
    /// start and then at most every 5 s, with the rate and the time left;
    /// on a terminal the bar is redrawn when the whole percent changes.
    pub(crate) fn upload_progress(&mut self, done_bytes: u64) {
        #[expect(
            clippy::disallowed_methods,
            reason = "upload progress on screen: rates, and how often a line is printed"
        )]
        self.upload_progress_at(done_bytes, Instant::now());
    }

    /// Between stored parts: `sent_bytes` handed to the network so far
    /// (a resent part counts again, so it is capped at the total). Prints
    /// a due line even when nothing moved, so a stalled upload is seen to
    /// stall.
    pub(crate) fn upload_tick(&mut self, sent_bytes: u64) {
        #[expect(
            clippy::disallowed_methods,
            reason = "upload progress on screen: rates, and how often a line is printed"
        )]
        self.upload_progress_at(sent_bytes, Instant::now());
    }

    fn upload_progress_at(&mut self, done_bytes: u64, now: Instant) {
        let redraw = self.progress_redraws();
        let Some(upload) = self.upload.as_mut() else {
            return;
        };
        match upload.advance(done_bytes, now, redraw) {
            None => {}
            Some(Draw::Bar(bar)) => {
                let _ = write!(self.out, "\r{bar}");
                let _ = self.out.flush();
                self.bar_on_line = true;
            }
            Some(Draw::Line(line)) => self.write_out(&format!("{line}\n")),
        }
    }

    /// Ends the upload report (a failed upload simply stops short of 100 %).
    pub(crate) fn upload_finished(&mut self) {
        self.upload = None;
        self.end_bar();
    }

    /// Closes an open group and flushes both streams.
    pub(crate) fn finish(&mut self) {
        self.end_group();
        self.end_bar();
        let _ = self.out.flush();
        let _ = self.err.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::ci::hostile_text::hostile_text;

    /// A clonable in-memory writer, to hand to a [`Reporter`] and read back.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Capture {
        /// Everything written so far, as (lossy) UTF-8.
        fn text(&self) -> String {
            let bytes = self.0.lock().unwrap_or_else(|e| e.into_inner());
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut bytes = self.0.lock().unwrap_or_else(|e| e.into_inner());
            bytes.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    // --- Workflow commands -------------------------------------------------

    /// The runner's reverse mapping (`%25` last), to prove escapes round-trip.
    fn runner_unescape(s: &str, property: bool) -> String {
        let mut s = s.replace("%0D", "\r").replace("%0A", "\n");
        if property {
            s = s.replace("%3A", ":").replace("%2C", ",");
        }
        s.replace("%25", "%")
    }

    #[test]
    fn workflow_command_escaping_table() {
        let cases = [
            // (raw, data, property)
            ("plain", "plain", "plain"),
            ("100%", "100%25", "100%25"),
            ("a\nb", "a%0Ab", "a%0Ab"),
            ("a\r\nb", "a%0D%0Ab", "a%0D%0Ab"),
            ("k: v, w", "k: v, w", "k%3A v%2C w"),
            ("%0A", "%250A", "%250A"),
            ("%3A", "%253A", "%253A"),
            ("::error::x", "::error::x", "%3A%3Aerror%3A%3Ax"),
        ];
        for (raw, data, property) in cases {
            assert_eq!(escape_data(raw), data, "data {raw:?}");
            assert_eq!(escape_property(raw), property, "property {raw:?}");
            assert_eq!(runner_unescape(data, false), raw);
            assert_eq!(runner_unescape(property, true), raw);
        }
    }

    #[test]
    fn workflow_commands_render() {
        let cases = [
            (
                annotation_command(Level::Error, None, "boom"),
                "::error::boom",
            ),
            (
                annotation_command(Level::Error, Some("Deploy: failed, sadly"), "a\nb"),
                "::error title=Deploy%3A failed%2C sadly::a%0Ab",
            ),
            (
                annotation_command(Level::Warning, Some(""), "w"),
                "::warning::w",
            ),
            (
                annotation_command(Level::Notice, Some("t"), "n"),
                "::notice title=t::n",
            ),
            (
                workflow_command("add-mask", &[], "s%cr\net"),
                "::add-mask::s%25cr%0Aet",
            ),
            (group_start(CiKind::GitHub, "Deploy m"), "::group::Deploy m"),
            (group_start(CiKind::GitLab, "Deploy m"), "==> Deploy m"),
            (annotation_line(Level::Error, None, "boom"), "error: boom"),
            (
                annotation_line(Level::Warning, Some("Cleanup"), "w"),
                "warning: Cleanup: w",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        for (line, command) in [
            ("::error::x", true),
            ("   ::set-output name=a::b", true),
            ("log ##[group]x", true),
            ("a :: b", false),
            ("plain", false),
        ] {
            assert_eq!(looks_like_command(line), command, "{line:?}");
        }
    }

    // --- Reporter ----------------------------------------------------------

    fn reporter(kind: CiKind, terminal: bool) -> (Reporter, Capture, Capture) {
        let (out, err) = (Capture::default(), Capture::default());
        let r = Reporter::new(kind, terminal, Box::new(out.clone()), Box::new(err.clone()));
        (r, out, err)
    }

    #[test]
    fn reporter_on_github_uses_workflow_commands_on_stdout() {
        let (mut r, out, err) = reporter(CiKind::GitHub, false);
        r.mask("sk-secret-123");
        r.group("Deploy my-model");
        r.line("using key sk-secret-123");
        r.annotate(
            Level::Error,
            Some("deploy_failed"),
            "BUILD_FAILED\nsee logs",
        );
        r.notice("done");
        r.group("Predict");
        r.finish();
        assert_eq!(
            out.text(),
            "::add-mask::sk-secret-123\n\
             ::group::Deploy my-model\n\
             using key ***\n\
             ::error title=deploy_failed::BUILD_FAILED%0Asee logs\n\
             ::notice::done\n\
             ::endgroup::\n\
             ::group::Predict\n\
             ::endgroup::\n"
        );
        assert_eq!(err.text(), "");
    }

    #[test]
    fn reporter_elsewhere_prints_headings_and_plain_annotations() {
        let (mut r, out, err) = reporter(CiKind::GitLab, false);
        r.mask("sk-secret-123");
        r.group("Deploy my-model");
        r.line("key=sk-secret-123");
        r.warning("slow");
        r.annotate(Level::Error, None, "boom");
        r.notice("fyi");
        r.end_group();
        assert_eq!(out.text(), "==> Deploy my-model\nkey=***\nnotice: fyi\n");
        assert_eq!(err.text(), "warning: slow\nerror: boom\n");
    }

    #[test]
    fn reporter_fences_untrusted_lines_that_look_like_commands() {
        let (mut r, out, _) = reporter(CiKind::GitHub, false);
        r.line("model log\n::set-output name=status::success");
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "model log");
        let token = lines[1].strip_prefix("::stop-commands::").unwrap();
        assert_eq!(token.len(), 32);
        assert_eq!(lines[2], "::set-output name=status::success");
        assert_eq!(lines[3], format!("::{token}::"));
        assert_eq!(lines.len(), 4);

        let (mut r, out, _) = reporter(CiKind::Local, false);
        r.line("::set-output name=status::success");
        assert_eq!(out.text(), "::set-output name=status::success\n");
    }

    /// The commands the runner would execute reading `log`, fences left
    /// out: what remains is what the output meant to say.
    fn meant(log: &str) -> Vec<(String, String)> {
        let commands = fake_baseten::workflow_log::workflow_commands(log);
        let fence = |name: &str| name.len() == 32 && name.chars().all(|c| c.is_ascii_hexdigit());
        commands
            .into_iter()
            .filter(|c| !(fence(&c.name) || c.name == "stop-commands" && fence(&c.data)))
            .map(|c| (c.name, c.data))
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 256,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]

        /// Whatever a log line, a token, a path or a message holds, the
        /// runner executes exactly the commands the reporter meant, on
        /// stdout and (once stdout carries data) on stderr.
        #[test]
        fn hostile_text_never_becomes_a_workflow_command(text in hostile_text(0..24)) {
            let (mut r, out, err) = reporter(CiKind::GitHub, false);
            r.mask("sk-hostile-canary");
            r.group(&text);
            r.line(&text);
            r.upload_started(&text, 10);
            r.upload_progress(10);
            r.upload_finished();
            r.annotate(Level::Error, Some(&text), &text);
            r.end_group();
            r.data(&serde_json::json!({"v": text}).to_string());
            r.line(&text);
            r.warning(&text);
            r.finish();
            let names = |log: &str| meant(log).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
            proptest::prop_assert_eq!(
                names(&out.text()),
                ["add-mask", "group", "error", "endgroup"]
            );
            let masked = meant(&out.text())[0].1.clone();
            proptest::prop_assert_eq!(masked.as_str(), "sk-hostile-canary");
            proptest::prop_assert_eq!(names(&err.text()), ["warning"]);
            let json = out.text().lines().last().unwrap_or_default().to_string();
            let v: serde_json::Value = serde_json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(v["v"].as_str(), Some(text.as_str()));
        }
    }

    #[test]
    fn a_carriage_return_cannot_start_a_command() {
        let (mut r, out, _) = reporter(CiKind::GitHub, false);
        r.line("loading\r::error::forged\u{2028}::warning::also");
        let text = out.text();
        assert!(meant(&text).is_empty(), "{text:?}");
        assert!(text.starts_with("loading\n::stop-commands::"), "{text:?}");
    }

    #[test]
    fn reporter_is_send_and_lines_end_once() {
        fn assert_send<T: Send>() {}
        assert_send::<Reporter>();
        let (mut r, out, _) = reporter(CiKind::Local, false);
        r.line("a\n");
        r.line("b\nc");
        r.line("");
        assert_eq!(out.text(), "a\nb\nc\n\n");
    }

    #[test]
    fn blank_masks_are_ignored() {
        let (mut r, out, _) = reporter(CiKind::GitHub, false);
        r.mask("  ");
        r.mask("");
        r.line("a b");
        assert_eq!(out.text(), "a b\n");
    }

    #[test]
    fn terminal_progress_redraws_one_line() {
        let (mut r, out, _) = reporter(CiKind::Local, true);
        r.upload_started("up", 200);
        for done in 0..=200 {
            r.upload_progress(done);
        }
        r.line("after");
        r.upload_finished();
        let text = out.text();
        assert_eq!(
            text.matches('\r').count(),
            101,
            "one redraw per whole percent"
        );
        assert!(text.ends_with("\rup [####################] 100% 200 B/200 B\nafter\n"));
    }
}
