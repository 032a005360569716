//! The layering, checked: a tidy test in the manner of rust-analyzer's (`xtask/src/tidy.rs`). It
//! reads the source tree and fails, naming file and line, when a module imports from a layer
//! above its own, so that a dependency running the wrong way (the memory model calling the
//! lifecycle, the indexer's reads depending on the ranking pipeline) cannot come back unseen.
//!
//! The layers, top to bottom, are [`LAYERS`] (ARCHITECTURE.md, "Layers"). A module may import
//! from its own layer and every layer below; [`UTILITIES`] may be imported by anyone and
//! themselves import only utilities. [`FORBIDDEN`] adds pairs the layers alone would allow,
//! and [`ALLOWED`] lists the known exceptions, each with its reason; an exception that is no
//! longer needed fails the test too, so the list only shrinks.
//!
//! What counts as an import: every `crate::` path in code, in a `use` or inline, after comments
//! and string literals are blanked out; a `use crate::{a, b::c}` group names each of its items.
//! `super::` paths are not followed: in this tree a `super` never leaves its top-level module.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, top to bottom, each with its top-level modules (a folder under `src/` or a file
/// directly in it).
const LAYERS: &[(&str, &[&str])] = &[
    // The Node binding and the Claude Code hooks: entry points over the handle.
    ("binding", &["node", "hook"]),
    // The engine is the composition root of one file's shared state (store, indexes, queues,
    // the sync service), so it sits with the handle.
    ("handle", &["engram", "engine"]),
    ("features", &["retrieval", "observer", "lifecycle", "agent"]),
    ("model", &["memory", "code", "graph", "vector"]),
    ("services", &["embed", "sync"]),
    ("store", &["store"]),
];

/// Modules any layer may import; they import only each other.
const UTILITIES: &[&str] = &[
    "error",
    "text",
    "log",
    "clock",
    "simd",
    "file_read",
    "thread_priority",
];

/// (importer, imported, why): imports the layers would allow but the architecture does not.
const FORBIDDEN: &[(&str, &str, &str)] = &[(
    "engine",
    "lifecycle",
    "the engine keeps a file's shared state and queues; policy (what a scan does, what a \
     write triggers) is the lifecycle's, wired in by the handle",
)];

/// (file, imported module, why): known imports against the layers, kept on purpose.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "src/agent/session_context.rs",
        "engram",
        "adds `Engram::session_context` (each subsystem keeps its `impl Engram` block)",
    ),
    (
        "src/agent/e2e.rs",
        "engram",
        "an observation is stored through `Engram::remember` (privacy filter, dedup, hooks)",
    ),
    (
        "src/agent/planner.rs",
        "engram",
        "the planner's context ranks recipes through `Engram::recall`, like the session context",
    ),
    (
        "src/agent/qa.rs",
        "engram",
        "the QA context reads the trust level and project root through the handle",
    ),
    (
        "src/code/watch.rs",
        "engram",
        "the watcher thread holds a handle and calls `Engram::index_paths` on it",
    ),
    (
        "src/lifecycle/api.rs",
        "engram",
        "adds the lifecycle's `Engram` methods (each subsystem keeps its `impl Engram` block)",
    ),
    (
        "src/lifecycle/salvage.rs",
        "engram",
        "salvage opens the new file through `Engram::open` to write into it",
    ),
    (
        "src/retrieval/recall.rs",
        "engram",
        "adds `Engram::recall` (each subsystem keeps its `impl Engram` block)",
    ),
    (
        "src/retrieval/injection.rs",
        "engram",
        "adds the step-injection methods (each subsystem keeps its `impl Engram` block)",
    ),
    (
        "src/sync/mod.rs",
        "engine",
        "the sync service runs for an engine: its loop holds the engine weakly and its lifetime",
    ),
    (
        "src/sync/pull.rs",
        "graph",
        "a pull replays the graph's pulled knowledge rows through `graph::write` (closure, cycles)",
    ),
    (
        "src/sync/tables.rs",
        "memory",
        "a pulled memory that duplicates a local one is archived the way the memory model does",
    ),
    (
        "src/error.rs",
        "sync",
        "classifying a remote statement's error asks sync what a Hrana failure means",
    ),
    (
        "src/log.rs",
        "memory",
        "log lines pass the privacy filter before they leave the process (invariant 4)",
    ),
];

/// One import against the layers.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    file: String,
    line: usize,
    from: String,
    to: String,
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let root = CrateRoot::read(&src.join("lib.rs"));
    let mut found = Vec::new();
    for file in rust_files(&src) {
        let rel = relative(&file);
        let Some(from) = top_module(&src, &file) else {
            continue; // lib.rs declares the modules; it imports nothing of its own
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, name) in crate_paths(&text) {
            let to = root.module_of(&name).unwrap_or_else(|| {
                panic!("{rel}:{line}: `crate::{name}` is neither a module nor a root re-export")
            });
            if to != from && !may_import(&from, &to) {
                found.push(Violation {
                    file: rel.clone(),
                    line,
                    from: from.clone(),
                    to,
                });
            }
        }
    }

    let unexpected: Vec<String> = found
        .iter()
        .filter(|v| !ALLOWED.iter().any(|(f, m, _)| *f == v.file && *m == v.to))
        .map(|v| {
            format!(
                "{}:{}: `{}` ({}) imports `{}` ({})",
                v.file,
                v.line,
                v.from,
                layer_name(&v.from),
                v.to,
                layer_name(&v.to)
            )
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "imports against the layering (see tests/layering.rs and ARCHITECTURE.md):\n{}",
        unexpected.join("\n")
    );

    let stale: Vec<String> = ALLOWED
        .iter()
        .filter(|(f, m, _)| !found.iter().any(|v| v.file == *f && v.to == *m))
        .map(|(f, m, _)| format!("{f} -> {m}"))
        .collect();
    assert!(
        stale.is_empty(),
        "ALLOWED lists imports that are gone; remove them:\n{}",
        stale.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let root = CrateRoot::read(&src.join("lib.rs"));
    let placed: BTreeSet<&str> = LAYERS
        .iter()
        .flat_map(|(_, modules)| modules.iter().copied())
        .chain(UTILITIES.iter().copied())
        .collect();
    let declared: BTreeSet<&str> = root.modules.iter().map(String::as_str).collect();
    assert_eq!(
        placed, declared,
        "LAYERS and UTILITIES must place exactly the modules lib.rs declares"
    );
}

#[test]
fn the_scanner_reads_paths_in_code_only() {
    let text = r##"//! Docs name `crate::lifecycle` freely.
use crate::memory::Ctx;
use crate::{error::Result, store::{Store, Writer}};
/* a block comment: crate::sync */
fn f() -> crate::Result<()> {
    let s = "crate::observer"; let r = r#"crate::agent"#; let c = '"'; let q = '\'';
    let b = br"crate::graph\"; let e = "a \" crate::embed";
    let t = crate::text::clip_bytes("a", 1);
    // crate::vector in a comment
    g::<'static>(t, $crate::x)
}
"##;
    let names: Vec<(usize, String)> = crate_paths(text);
    assert_eq!(
        names,
        [
            (2, "memory"),
            (3, "error"),
            (3, "store"),
            (5, "Result"),
            (8, "text")
        ]
        .map(|(line, name)| (line, name.to_owned()))
    );
}

/// Whether `from` may import `to` (two different top-level modules).
fn may_import(from: &str, to: &str) -> bool {
    if FORBIDDEN.iter().any(|(f, t, _)| *f == from && *t == to) {
        return false;
    }
    if UTILITIES.contains(&to) {
        return true;
    }
    if UTILITIES.contains(&from) {
        return false;
    }
    layer_of(to) >= layer_of(from)
}

/// The index of `module`'s layer in [`LAYERS`] (0 is the top).
fn layer_of(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
        .unwrap_or_else(|| panic!("module `{module}` has no layer in tests/layering.rs"))
}

fn layer_name(module: &str) -> &'static str {
    if UTILITIES.contains(&module) {
        "utility"
    } else {
        LAYERS[layer_of(module)].0
    }
}

/// What `lib.rs` declares: the top-level modules, and which module each root re-export
/// (`crate::Engram`, `crate::Result`, ...) comes from.
struct CrateRoot {
    modules: Vec<String>,
    reexports: Vec<(String, String)>,
}

impl CrateRoot {
    fn read(lib: &Path) -> CrateRoot {
        let code = blank_comments_and_strings(&std::fs::read_to_string(lib).unwrap());
        let mut modules = Vec::new();
        let mut reexports = Vec::new();
        for statement in code.split(';').map(|s| s.trim()) {
            // Attributes (`#[macro_use]`, `#[cfg(...)]`) end on `]`; what follows is the item.
            let item = statement.rsplit(']').next().unwrap_or_default().trim();
            let words: Vec<&str> = item.split_whitespace().collect();
            match words.as_slice() {
                [.., "mod", name] => modules.push((*name).to_owned()),
                ["pub", "use", ..] => {
                    let path = item["pub use".len()..].trim();
                    let (module, rest) = path.split_once("::").expect("pub use module::item");
                    let rest = rest.trim().trim_start_matches('{').trim_end_matches('}');
                    for name in rest.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                        let name = name.rsplit(" as ").next().unwrap_or(name);
                        let name = name.rsplit("::").next().unwrap_or(name).trim();
                        reexports.push((name.to_owned(), module.to_owned()));
                    }
                }
                _ => {}
            }
        }
        CrateRoot { modules, reexports }
    }

    /// The top-level module `crate::name` belongs to.
    fn module_of(&self, name: &str) -> Option<String> {
        if self.modules.iter().any(|m| m == name) {
            return Some(name.to_owned());
        }
        self.reexports
            .iter()
            .find(|(item, _)| item == name)
            .map(|(_, module)| module.clone())
    }
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `src/...` with forward slashes, as the messages and [`ALLOWED`] name files.
fn relative(file: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rel = file.strip_prefix(root).unwrap();
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The top-level module a file belongs to (`None` for `lib.rs`).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.strip_suffix(".rs").unwrap_or(&first);
    (name != "lib").then(|| name.to_owned())
}

/// The first segment after each `crate::` in the code of `text`, with its 1-based line; a
/// `crate::{...}` group gives one entry per item.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let code = blank_comments_and_strings(text);
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("crate::") {
        let at = from + found;
        from = at + "crate::".len();
        let before = at.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|b| b == b'$' || b == b'_' || b.is_ascii_alphanumeric()) {
            continue; // `$crate::` in a macro, or an identifier ending in `crate`
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = code[from..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            for item in top_level_items(group) {
                let name = ident(item.trim_start());
                if !name.is_empty() && name != "self" {
                    out.push((line, name.to_owned()));
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.push((line, name.to_owned()));
            }
        }
    }
    out
}

/// The items of a `{...}` group (the text after its `{`), split at its top-level commas.
fn top_level_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// `text` with comments and the contents of string and character literals replaced by spaces
/// (newlines kept, so line numbers stay right).
fn blank_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if c == 'r' && matches!(next, Some('#') | Some('"')) && raw_prefix(&chars, i) {
            // A raw string: r"..." or r#"..."# (or br...), closed by a quote and as many hashes.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            out.push_str(&" ".repeat(2 + hashes));
            while i < chars.len() {
                let closes = chars[i] == '"'
                    && chars[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes;
                if closes {
                    out.push_str(&" ".repeat(1 + hashes));
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), else a lifetime or label.
            let len = if next == Some('\\') {
                // Past the backslash and the escaped character, which may be a quote.
                chars
                    .get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&q| q == '\''))
                    .map(|p| p + 4)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            match len {
                Some(len) => {
                    for _ in 0..len.min(chars.len() - i) {
                        out.push(' ');
                    }
                    i += len;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether the `r` at `i` starts a raw string (`r"`, `br"`) rather than ending an identifier.
fn raw_prefix(chars: &[char], i: usize) -> bool {
    let ident_at = |k: usize| chars[k].is_alphanumeric() || chars[k] == '_';
    match i {
        0 => true,
        _ if chars[i - 1] == 'b' => i == 1 || !ident_at(i - 2),
        _ => !ident_at(i - 1),
    }
}
