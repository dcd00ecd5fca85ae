//! A view of the crate's Rust sources good enough to hold the structural
//! rules to: tokens (comments dropped, string literals kept whole and in
//! their own case, char literals told apart from lifetimes), the items
//! under `#[cfg(test)]` removed wherever they stand, the module tree read
//! from `mod` declarations (so a file is test code only when a
//! `#[cfg(test)] mod` declares it, whatever its name), and every path
//! resolved through the file's `use` lines (`use std::fs::write;
//! write(..)` reads as `std::fs::write`, `super::super::config` as
//! `crate::config`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    Ident,
    /// A string literal (plain, raw, byte or C); `text` is its content.
    Str,
    Char,
    Lifetime,
    Number,
    /// `::` or one punctuation character.
    Punct,
}

#[derive(Clone, Debug)]
pub struct Token {
    pub kind: TokenKind,
    pub text: String,
    pub line: usize,
}

impl Token {
    pub fn is(&self, kind: TokenKind, text: &str) -> bool {
        self.kind == kind && self.text == text
    }

    fn punct(&self, p: &str) -> bool {
        self.is(TokenKind::Punct, p)
    }
}

/// The tokens of Rust source `text`. Comments (line, block, nested, doc)
/// are dropped; a literal is one token whatever it holds.
pub fn lex(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let ident_start = |ch: char| ch.is_alphabetic() || ch == '_';
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let at = |k: usize| c.get(i + k).copied().unwrap_or('\0');
        let start_line = line;
        let push = |kind, text: String, out: &mut Vec<Token>| {
            out.push(Token {
                kind,
                text,
                line: start_line,
            })
        };
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some((prefix, hashes)) = raw_string_start(&c, i) {
            // r"…", r#"…"#, br"…", cr#"…"#: no escapes, ends at `"` and the
            // same number of `#`.
            i += prefix + hashes + 1;
            let mut s = String::new();
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                if c[i] == '\n' {
                    line += 1;
                }
                s.push(c[i]);
                i += 1;
            }
            push(TokenKind::Str, s, &mut out);
        } else if ch == '"' || ((ch == 'b' || ch == 'c') && at(1) == '"') {
            i += if ch == '"' { 1 } else { 2 };
            let mut s = String::new();
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    s.push(c[i]);
                    i += 1;
                }
                if c[i] == '\n' {
                    line += 1;
                }
                s.push(c[i]);
                i += 1;
            }
            i += 1;
            push(TokenKind::Str, s, &mut out);
        } else if ch == '\'' || (ch == 'b' && at(1) == '\'') {
            let q = if ch == 'b' { i + 1 } else { i };
            let next = c.get(q + 1).copied().unwrap_or('\0');
            if next == '\\' {
                // An escaped char literal: up to its closing quote, past
                // the escaped character (which may be a quote).
                let mut j = q + 3;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                push(TokenKind::Char, c[q + 1..j].iter().collect(), &mut out);
                i = j + 1;
            } else if c.get(q + 2) == Some(&'\'') {
                push(TokenKind::Char, next.to_string(), &mut out);
                i = q + 3;
            } else {
                // A lifetime or a label.
                let mut j = q + 1;
                while j < c.len() && ident_char(c[j]) {
                    j += 1;
                }
                push(TokenKind::Lifetime, c[q + 1..j].iter().collect(), &mut out);
                i = j;
            }
        } else if ident_start(ch) {
            let mut j = i;
            if ch == 'r' && at(1) == '#' && c.get(i + 2).is_some_and(|&n| ident_start(n)) {
                j += 2;
                i += 2;
            }
            while j < c.len() && ident_char(c[j]) {
                j += 1;
            }
            push(TokenKind::Ident, c[i..j].iter().collect(), &mut out);
            i = j;
        } else if ch.is_ascii_digit() {
            let mut j = i;
            while j < c.len()
                && (ident_char(c[j])
                    || (c[j] == '.' && c.get(j + 1).is_some_and(char::is_ascii_digit)))
            {
                j += 1;
            }
            push(TokenKind::Number, c[i..j].iter().collect(), &mut out);
            i = j;
        } else if ch == ':' && at(1) == ':' {
            push(TokenKind::Punct, "::".into(), &mut out);
            i += 2;
        } else {
            push(TokenKind::Punct, ch.to_string(), &mut out);
            i += 1;
        }
    }
    out
}

/// At `i`, the start of a raw string: the prefix's length (`r`, `br`,
/// `cr`) and its number of `#`.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return None;
    }
    let prefix = match (c.get(i), c.get(i + 1)) {
        (Some('r'), _) => 1,
        (Some('b' | 'c'), Some('r')) => 2,
        _ => return None,
    };
    let mut hashes = 0;
    while c.get(i + prefix + hashes) == Some(&'#') {
        hashes += 1;
    }
    (c.get(i + prefix + hashes) == Some(&'"')).then_some((prefix, hashes))
}

/// Where the group opened at `open` closes (its matching bracket).
fn close_of(t: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, tok) in t.iter().enumerate().skip(open) {
        if tok.kind != TokenKind::Punct {
            continue;
        }
        match tok.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    t.len() - 1
}

/// Whether the attribute's tokens (inside `#[…]`) make what follows test
/// code: `cfg(test)`, or `cfg(all(…, test, …))`.
fn is_test_cfg(attr: &[Token]) -> bool {
    let words: Vec<&str> = attr.iter().map(|t| t.text.as_str()).collect();
    match words.as_slice() {
        ["cfg", "(", "test", ")"] => true,
        ["cfg", "(", "all", "(", rest @ ..] => {
            // Only the `all` list's own entries, not a nested `any`/`not`.
            let mut depth = 0;
            rest.iter().any(|w| {
                match *w {
                    "(" => depth += 1,
                    ")" => depth -= 1,
                    _ => {}
                }
                depth == 0 && *w == "test"
            })
        }
        _ => false,
    }
}

const ITEM_WORDS: [&str; 16] = [
    "pub",
    "fn",
    "mod",
    "impl",
    "struct",
    "enum",
    "trait",
    "use",
    "const",
    "static",
    "type",
    "let",
    "macro_rules",
    "async",
    "unsafe",
    "extern",
];

/// Where the item (or field, statement, arm) starting at `i` ends: its
/// `;` or its body's `}` for items, its `,` for fields and arms, or the
/// end of the enclosing group.
fn item_end(t: &[Token], i: usize) -> usize {
    // The word that says what it is, past a visibility (`pub(crate)`).
    let mut w = i;
    if t.get(w).is_some_and(|t| t.is(TokenKind::Ident, "pub")) {
        w += 1;
        if t.get(w).is_some_and(|t| t.punct("(")) {
            w = close_of(t, w) + 1;
        }
    }
    let word = t.get(w).map(|t| t.text.as_str()).unwrap_or_default();
    let is_item = ITEM_WORDS.contains(&word) || w > i;
    let semi_only = ["use", "const", "static", "let", "type"].contains(&word);
    let mut k = i;
    while k < t.len() {
        let tok = &t[k];
        if tok.punct("(") || tok.punct("[") || tok.punct("{") {
            let close = close_of(t, k);
            if is_item && !semi_only && tok.punct("{") {
                return close;
            }
            k = close + 1;
            continue;
        }
        if tok.punct(")") || tok.punct("]") || tok.punct("}") {
            return k - 1;
        }
        if tok.punct(";") || (!is_item && tok.punct(",")) {
            return k;
        }
        k += 1;
    }
    t.len() - 1
}

/// `tokens` without the code under `#[cfg(test)]`; `None` when an inner
/// `#![cfg(test)]` makes the whole file test code.
pub fn without_test_code(tokens: &[Token]) -> Option<Vec<Token>> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let inner = tokens[i].punct("#")
            && tokens.get(i + 1).is_some_and(|t| t.punct("!"))
            && tokens.get(i + 2).is_some_and(|t| t.punct("["));
        if tokens[i].punct("#") && (inner || tokens.get(i + 1).is_some_and(|t| t.punct("["))) {
            let open = if inner { i + 2 } else { i + 1 };
            let close = close_of(tokens, open);
            if is_test_cfg(&tokens[open + 1..close]) {
                if inner {
                    return None;
                }
                // Skip the other attributes of the same item, then the item.
                let mut j = close + 1;
                while tokens.get(j).is_some_and(|t| t.punct("#"))
                    && tokens.get(j + 1).is_some_and(|t| t.punct("["))
                {
                    j = close_of(tokens, j + 1) + 1;
                }
                i = item_end(tokens, j) + 1;
                continue;
            }
            out.extend_from_slice(&tokens[i..=close]);
            i = close + 1;
            continue;
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    Some(out)
}

/// One name a `use` line binds: `name` stands for `path`.
#[derive(Clone, Debug)]
pub struct Import {
    pub name: String,
    pub path: Vec<String>,
    pub line: usize,
}

/// The names the `use` items of `t` bind (globs bind `*`).
pub fn imports(t: &[Token]) -> Vec<Import> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if t[i].is(TokenKind::Ident, "use") && (i == 0 || !t[i - 1].punct("::")) {
            let end = (i..t.len()).find(|&k| t[k].punct(";")).unwrap_or(t.len());
            use_tree(&t[i + 1..end], Vec::new(), &mut out);
            i = end;
        }
        i += 1;
    }
    out
}

fn use_tree(t: &[Token], mut prefix: Vec<String>, out: &mut Vec<Import>) {
    let mut i = 0;
    while i < t.len() {
        let tok = &t[i];
        if tok.punct("::") {
            i += 1;
        } else if tok.punct("{") {
            let close = close_of(t, i);
            let inner = &t[i + 1..close];
            let mut start = 0;
            let mut depth = 0;
            for (k, tk) in inner.iter().enumerate() {
                if tk.punct("{") {
                    depth += 1;
                } else if tk.punct("}") {
                    depth -= 1;
                } else if tk.punct(",") && depth == 0 {
                    use_tree(&inner[start..k], prefix.clone(), out);
                    start = k + 1;
                }
            }
            use_tree(&inner[start..], prefix.clone(), out);
            return;
        } else if tok.punct("*") {
            out.push(Import {
                name: "*".into(),
                path: prefix,
                line: tok.line,
            });
            return;
        } else if tok.kind == TokenKind::Ident {
            if tok.text == "as" {
                if let Some(alias) = t.get(i + 1) {
                    let path = prefix.clone();
                    out.push(Import {
                        name: alias.text.clone(),
                        path,
                        line: tok.line,
                    });
                }
                return;
            }
            if tok.text == "self"
                && !prefix.is_empty()
                && t.get(i + 1).is_none_or(|n| n.text == "as")
            {
                // `use a::b::{self}`: binds `b`.
                if t.get(i + 1).is_none() {
                    let name = prefix.last().cloned().unwrap_or_default();
                    out.push(Import {
                        name,
                        path: prefix,
                        line: tok.line,
                    });
                    return;
                }
                i += 1;
                continue;
            }
            prefix.push(tok.text.clone());
            i += 1;
            if i >= t.len() {
                out.push(Import {
                    name: tok.text.clone(),
                    path: prefix,
                    line: tok.line,
                });
                return;
            }
        } else {
            i += 1;
        }
    }
}

/// A path as written in code (`a::b::c`, or one name), resolved.
#[derive(Clone, Debug)]
pub struct PathUse {
    /// The path with its first segment resolved: `crate::…` for the
    /// crate's own items, else as imported (`std::…`, `reqwest::…`) or as
    /// written.
    pub segments: Vec<String>,
    pub line: usize,
    /// Written after a `.`: a method call, not a path.
    pub method: bool,
}

impl PathUse {
    pub fn text(&self) -> String {
        self.segments.join("::")
    }

    /// Whether `pattern` (`a::b`) is a run of this path's segments.
    pub fn contains(&self, pattern: &str) -> bool {
        let p: Vec<&str> = pattern.split("::").collect();
        self.segments
            .windows(p.len())
            .any(|w| w.iter().zip(&p).all(|(a, b)| a == b))
    }

    pub fn starts_with(&self, pattern: &str) -> bool {
        let p: Vec<&str> = pattern.split("::").collect();
        self.segments.len() >= p.len() && self.segments.iter().zip(&p).all(|(a, b)| a == b)
    }
}

/// One source file of the crate, as the rules read it.
#[derive(Debug)]
pub struct Source {
    /// Its module path, `crate` first.
    pub module: Vec<String>,
    /// Its tokens without test code.
    pub tokens: Vec<Token>,
    pub imports: Vec<Import>,
    /// The modules it declares (`mod name;`) and the items it defines
    /// (`fn name`, `struct name`, …): a path starting with one of them is
    /// relative to this module.
    own: BTreeSet<String>,
}

const DEFINING: [&str; 10] = [
    "mod",
    "fn",
    "struct",
    "enum",
    "const",
    "static",
    "type",
    "trait",
    "union",
    "macro_rules",
];

const KEYWORDS: [&str; 6] = ["crate", "self", "super", "Self", "std", "core"];

impl Source {
    pub fn new(module: Vec<String>, tokens: Vec<Token>) -> Source {
        let imports = imports(&tokens);
        let own = tokens
            .windows(2)
            .filter(|w| w[0].kind == TokenKind::Ident && DEFINING.contains(&w[0].text.as_str()))
            .filter(|w| w[1].kind == TokenKind::Ident)
            .map(|w| w[1].text.clone())
            .collect();
        Source {
            module,
            tokens,
            imports,
            own,
        }
    }

    /// `segments` with `crate`, `self` and `super` made absolute and a
    /// first name bound by a `use` replaced by what it stands for.
    pub fn resolve(&self, segments: &[String]) -> Vec<String> {
        let Some(first) = segments.first() else {
            return Vec::new();
        };
        let (mut base, rest) = match first.as_str() {
            "crate" => (vec!["crate".to_string()], &segments[1..]),
            "self" => (self.module.clone(), &segments[1..]),
            "super" => {
                let mut m = self.module.clone();
                let mut k = 0;
                while segments.get(k).is_some_and(|s| s == "super") {
                    m.pop();
                    k += 1;
                }
                (m, &segments[k..])
            }
            name if !KEYWORDS.contains(&name) => {
                match self.imports.iter().rev().find(|im| im.name == name) {
                    Some(im) => {
                        // The import itself may be relative (`use super::x`).
                        let mut bound = if im
                            .path
                            .first()
                            .is_some_and(|s| ["crate", "self", "super"].contains(&s.as_str()))
                        {
                            self.resolve(&im.path)
                        } else if im.path.first().is_some_and(|s| self.is_own_module(s)) {
                            let mut m = self.module.clone();
                            m.extend(im.path.iter().cloned());
                            m
                        } else {
                            im.path.clone()
                        };
                        if bound.is_empty() {
                            bound = im.path.clone();
                        }
                        (bound, &segments[1..])
                    }
                    None if self.is_own_module(name) => (self.module.clone(), segments),
                    None => (Vec::new(), segments),
                }
            }
            _ => (Vec::new(), segments),
        };
        base.extend(rest.iter().cloned());
        base
    }

    /// Whether `name` is a module or item this file declares, so a path
    /// or `use` starting with it is relative to this module.
    fn is_own_module(&self, name: &str) -> bool {
        self.own.contains(name)
    }

    /// Every path in the code (outside `use` lines, which
    /// [`Source::imported`] gives), resolved.
    pub fn paths(&self) -> Vec<PathUse> {
        let t = &self.tokens;
        let mut out = Vec::new();
        let mut i = 0;
        let mut in_use = false;
        while i < t.len() {
            if t[i].is(TokenKind::Ident, "use") {
                in_use = true;
            }
            if in_use {
                if t[i].punct(";") {
                    in_use = false;
                }
                i += 1;
                continue;
            }
            let leading =
                t[i].punct("::") && t.get(i + 1).is_some_and(|n| n.kind == TokenKind::Ident);
            if t[i].kind != TokenKind::Ident && !leading {
                i += 1;
                continue;
            }
            let method = i > 0 && t[i - 1].punct(".");
            let line = t[i].line;
            let mut segs = Vec::new();
            if leading {
                i += 1;
            }
            while i < t.len() && t[i].kind == TokenKind::Ident {
                segs.push(t[i].text.clone());
                if t.get(i + 1).is_some_and(|n| n.punct("::"))
                    && t.get(i + 2).is_some_and(|n| n.kind == TokenKind::Ident)
                {
                    i += 2;
                } else {
                    i += 1;
                    break;
                }
            }
            let segments = if method || leading {
                segs
            } else {
                self.resolve(&segs)
            };
            out.push(PathUse {
                segments,
                line,
                method,
            });
        }
        out
    }

    /// Every path a `use` line brings in, resolved (a glob ends in `*`).
    pub fn imported(&self) -> Vec<PathUse> {
        self.imports
            .iter()
            .map(|im| {
                let mut segments = if im.path.first().is_some_and(|s| {
                    ["crate", "self", "super"].contains(&s.as_str()) || self.is_own_module(s)
                }) {
                    self.resolve(&im.path)
                } else {
                    im.path.clone()
                };
                if im.name == "*" {
                    segments.push("*".into());
                }
                PathUse {
                    segments,
                    line: im.line,
                    method: false,
                }
            })
            .collect()
    }

    /// Every path, in code and in `use` lines.
    pub fn all_paths(&self) -> Vec<PathUse> {
        let mut all = self.imported();
        all.extend(self.paths());
        all
    }

    /// The string literals, with their lines.
    pub fn strings(&self) -> impl Iterator<Item = &Token> {
        self.tokens.iter().filter(|t| t.kind == TokenKind::Str)
    }

    /// Whether tokens `words` (each an identifier or punctuation, `.`
    /// included) occur in a row; the lines where they start.
    pub fn find_seq(&self, words: &[&str]) -> Vec<usize> {
        self.tokens
            .windows(words.len())
            .filter(|w| {
                w.iter().zip(words).all(|(t, w)| {
                    t.text == *w && matches!(t.kind, TokenKind::Ident | TokenKind::Punct)
                })
            })
            .map(|w| w[0].line)
            .collect()
    }
}

/// The crate: its product files, and which files are test code.
#[derive(Debug, Default)]
pub struct Crate {
    pub product: BTreeMap<String, Source>,
    /// Files a `#[cfg(test)] mod` (or an inner `#![cfg(test)]`) makes test code.
    pub test_only: BTreeSet<String>,
    /// `.rs` files no `mod` declaration reaches.
    pub unreached: BTreeSet<String>,
}

/// `mod name;` declarations in `t`: the name and its `#[path]`, if any.
fn mod_decls(t: &[Token]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut path = None;
    let mut k = 0;
    while k < t.len() {
        if t[k].punct("#") && t.get(k + 1).is_some_and(|n| n.punct("[")) {
            let close = close_of(t, k + 1);
            if let [p, eq, value] = &t[k + 2..close]
                && p.is(TokenKind::Ident, "path")
                && eq.punct("=")
                && value.kind == TokenKind::Str
            {
                path = Some(value.text.clone());
            }
            k = close + 1;
            continue;
        }
        if t[k].is(TokenKind::Ident, "mod")
            && t.get(k + 1).is_some_and(|n| n.kind == TokenKind::Ident)
            && t.get(k + 2).is_some_and(|n| n.punct(";"))
        {
            out.push((t[k + 1].text.clone(), path.take()));
            k += 3;
            continue;
        }
        let visibility = ["pub", "crate", "in", "super", "self"].contains(&t[k].text.as_str())
            || t[k].punct("(")
            || t[k].punct(")");
        if !visibility {
            path = None;
        }
        k += 1;
    }
    out
}

impl Crate {
    /// The crate from `files` (path under `src/` → text), its roots
    /// `lib.rs` and `main.rs`.
    pub fn from_files(files: &BTreeMap<String, String>) -> Crate {
        let mut c = Crate::default();
        let mut queue: Vec<(String, Vec<String>, bool)> = ["lib.rs", "main.rs"]
            .iter()
            .filter(|f| files.contains_key(**f))
            .map(|f| (f.to_string(), vec!["crate".to_string()], false))
            .collect();
        let mut seen = BTreeSet::new();
        let mut included_test = BTreeSet::new();
        let mut included_product = BTreeSet::new();
        while let Some((file, module, test)) = queue.pop() {
            if !seen.insert(file.clone()) {
                continue;
            }
            let Some(text) = files.get(&file) else {
                continue;
            };
            let all = lex(text);
            let product = if test { None } else { without_test_code(&all) };
            let dir = {
                let p = Path::new(&file);
                let parent = p
                    .parent()
                    .map(|d| d.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
                let own = ["lib", "main", "mod"].contains(&stem.as_str());
                match (parent.is_empty(), own) {
                    (true, true) => String::new(),
                    (true, false) => stem,
                    (false, true) => parent,
                    (false, false) => format!("{parent}/{stem}"),
                }
            };
            let product_mods: BTreeSet<String> = product
                .as_deref()
                .map(|t| mod_decls(t).into_iter().map(|(n, _)| n).collect())
                .unwrap_or_default();
            // `include!("file.rs")`: that file is part of this one, in
            // test code or not as the `include!` is.
            for (tokens, is_test) in [(Some(&all), true), (product.as_ref(), false)] {
                let Some(tokens) = tokens else { continue };
                for w in tokens.windows(4) {
                    if w[0].is(TokenKind::Ident, "include")
                        && w[1].punct("!")
                        && w[2].punct("(")
                        && w[3].kind == TokenKind::Str
                    {
                        let parent = Path::new(&file)
                            .parent()
                            .map(|d| d.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        let target = if parent.is_empty() {
                            w[3].text.clone()
                        } else {
                            format!("{parent}/{}", w[3].text)
                        };
                        if is_test {
                            included_test.insert(target);
                        } else {
                            included_product.insert(target);
                        }
                    }
                }
            }
            for (name, path) in mod_decls(&all) {
                let join = |f: &str| {
                    if dir.is_empty() {
                        f.to_string()
                    } else {
                        format!("{dir}/{f}")
                    }
                };
                let target = match path {
                    Some(p) => {
                        let parent = Path::new(&file)
                            .parent()
                            .map(|d| d.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        if parent.is_empty() {
                            p
                        } else {
                            format!("{parent}/{p}")
                        }
                    }
                    None if files.contains_key(&join(&format!("{name}.rs"))) => {
                        join(&format!("{name}.rs"))
                    }
                    None => join(&format!("{name}/mod.rs")),
                };
                let mut m = module.clone();
                m.push(name.clone());
                let child_test = test || product.is_none() || !product_mods.contains(&name);
                queue.push((target, m, child_test));
            }
            match product {
                Some(tokens) => {
                    c.product.insert(file.clone(), Source::new(module, tokens));
                }
                None => {
                    c.test_only.insert(file.clone());
                }
            }
        }
        // An included file is read where it is included; one included by
        // product code is product code (its text is checked as a file).
        for f in &included_product {
            if let Some(text) = files.get(f) {
                c.product
                    .insert(f.clone(), Source::new(vec!["crate".into()], lex(text)));
                seen.insert(f.clone());
            }
        }
        for f in included_test.difference(&included_product) {
            if files.contains_key(f) {
                c.test_only.insert(f.clone());
                seen.insert(f.clone());
            }
        }
        // A file reached both ways is product code.
        let product: BTreeSet<String> = c.product.keys().cloned().collect();
        c.test_only.retain(|f| !product.contains(f));
        c.unreached = files
            .keys()
            .filter(|f| f.ends_with(".rs") && !seen.contains(*f))
            .cloned()
            .collect();
        c
    }

    /// The crate under `src/`.
    pub fn from_disk(src: &Path) -> Crate {
        fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/");
                    out.insert(rel, std::fs::read_to_string(&path).unwrap());
                }
            }
        }
        let mut files = BTreeMap::new();
        walk(src, src, &mut files);
        Crate::from_files(&files)
    }
}
