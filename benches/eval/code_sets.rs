//! The code-side dev sets: real source trees from the registries, copied with their doc
//! comments stripped (`///` and `//!` in Rust, JSDoc blocks in TypeScript, and every `//` line
//! in Go, where any comment run above a declaration is its doc); every documented function
//! gives one query, the first sentence of its doc, whose right answer is the chunk holding the
//! definition line.
//!
//! - `rust`: tokio's `src/` (cargo registry; a dependency of libsql, so always fetched);
//! - `typescript`: `@types/node` (declarations with JSDoc) and `zod/src` (code with bodies),
//!   both installed by `npm ci`;
//! - `go`: part of the Go standard library from Debian's `golang-*-src` package, which
//!   `scripts/eval.sh` downloads into `target/eval-corpora/` (`ENGRAM_EVAL_GO` overrides);
//! - `python`: networkx (PyPI, pure Python, numpy-style docstrings on most functions), which
//!   `scripts/eval.sh` downloads and unpacks into `target/eval-corpora/` (`ENGRAM_EVAL_PYTHON`
//!   overrides). Not the standard library, which issue 36 keeps out of the dev sets. After a
//!   one-line `def f(): return x` the signature seems to run on to the next line ending in `:`,
//!   so a definition there keeps its docstring: ~10 of the tree's stay.
//!
//! Each set has a **name-blind** twin: the same sentences with every identifier-like token and
//! every word of the target's own name removed, so that the keyword path cannot match on names
//! (the nearest offline stand-in for a question a person types).

use std::path::{Path, PathBuf};

use regex::Regex;

use crate::source_trees::newest_dir;

/// One query and where its answer is.
#[derive(Clone)]
pub struct Case {
    /// The first sentence of the doc.
    pub query: String,
    /// The file, relative to the eval repo.
    pub path: String,
    /// The definition line in the stripped copy, 1-based.
    pub line: u32,
    /// The defined name (for the name-blind twin).
    pub name: String,
}

/// A language's source tree: where it is and which files count.
pub struct CodeCorpus {
    /// `rust`, `typescript`, `go` or `python`.
    pub language: &'static str,
    /// (directory, prefix inside the eval repo) pairs.
    pub roots: Vec<(PathBuf, String)>,
    extension: &'static [&'static str],
}

/// The code corpora present on this machine.
pub fn corpora() -> Vec<CodeCorpus> {
    let mut found = Vec::new();
    if let Some(tokio) = crate::source_trees::tokio_dir() {
        found.push(CodeCorpus {
            language: "rust",
            roots: vec![(tokio.join("src"), "src".to_owned())],
            extension: &["rs"],
        });
    }
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("node_modules");
    let ts: Vec<(PathBuf, String)> = [("@types/node", "node"), ("zod/src", "zod")]
        .into_iter()
        .filter(|(dir, _)| modules.join(dir).is_dir())
        .map(|(dir, prefix)| (modules.join(dir), prefix.to_owned()))
        .collect();
    if !ts.is_empty() {
        found.push(CodeCorpus {
            language: "typescript",
            roots: ts,
            extension: &["ts"],
        });
    }
    let go = std::env::var_os("ENGRAM_EVAL_GO")
        .map(PathBuf::from)
        .or_else(|| {
            let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/eval-corpora");
            newest_dir(corpora.join("usr/share"), "go-1.", |_| true).map(|go| go.join("src"))
        });
    if let Some(go) = go.filter(|g| g.is_dir()) {
        found.push(CodeCorpus {
            language: "go",
            roots: GO_PACKAGES
                .iter()
                .map(|p| (go.join(p), (*p).to_owned()))
                .filter(|(dir, _)| dir.is_dir())
                .collect(),
            extension: &["go"],
        });
    }
    let python = std::env::var_os("ENGRAM_EVAL_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/eval-corpora");
            newest_dir(&corpora, "networkx-", |_| true).map(|dir| dir.join("networkx"))
        });
    if let Some(python) = python.filter(|p| p.is_dir()) {
        found.push(CodeCorpus {
            language: "python",
            roots: vec![(python, "networkx".to_owned())],
            extension: &["py"],
        });
    }
    found
}

/// The Go packages the `go` set takes (about 110k lines of the standard library).
const GO_PACKAGES: [&str; 14] = [
    "net/http",
    "encoding",
    "strings",
    "bytes",
    "bufio",
    "strconv",
    "time",
    "database/sql",
    "text/template",
    "go/ast",
    "sort",
    "regexp",
    "compress",
    "archive",
];

impl CodeCorpus {
    /// Copies the corpus into `repo` with its doc comments stripped and returns the cases.
    pub fn materialise(&self, repo: &Path) -> Vec<Case> {
        let mut cases = Vec::new();
        for (root, prefix) in &self.roots {
            let mut files: Vec<PathBuf> = ignore::WalkBuilder::new(root)
                .standard_filters(false)
                .build()
                .flatten()
                .map(|e| e.into_path())
                .filter(|p| {
                    let name = p.file_name().unwrap_or_default().to_string_lossy();
                    p.extension()
                        .is_some_and(|e| self.extension.contains(&&*e.to_string_lossy()))
                        && !name.ends_with("_test.go")
                        && !name.contains(".test.")
                        && !name.starts_with("test_")
                        && name != "conftest.py"
                        && !p.components().any(|c| {
                            let c = c.as_os_str().to_string_lossy();
                            c == "testdata" || c == "tests" || c == "__tests__"
                        })
                })
                .collect();
            files.sort();
            for path in files {
                let rel = format!(
                    "{prefix}/{}",
                    path.strip_prefix(root).unwrap().to_string_lossy()
                );
                let Ok(source) = std::fs::read_to_string(&path) else {
                    continue;
                };
                let (kept, found) = match self.language {
                    "rust" => strip_line_docs(&source, "///", &["//!"], rust_definition()),
                    "go" => strip_line_docs(&source, "//", &[], go_definition()),
                    "python" => strip_docstrings(&source),
                    _ => strip_block_docs(&source),
                };
                let out = repo.join(&rel);
                std::fs::create_dir_all(out.parent().unwrap()).unwrap();
                // Rewrite only what changed, so a rerun re-indexes nothing.
                if std::fs::read_to_string(&out).ok().as_deref() != Some(kept.as_str()) {
                    std::fs::write(&out, &kept).unwrap();
                }
                cases.extend(found.into_iter().map(|(query, line, name)| Case {
                    query,
                    path: rel.clone(),
                    line,
                    name,
                }));
            }
        }
        cases
    }
}

fn rust_definition() -> &'static Regex {
    static PATTERN: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(
            r#"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"[^"]*"\s+)?fn\s+(?P<name>\w+)"#,
        )
        .unwrap()
    })
}

fn go_definition() -> &'static Regex {
    static PATTERN: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| Regex::new(r"^func\s+(\([^)]*\)\s*)?(?P<name>\w+)").unwrap())
}

fn ts_definition() -> &'static Regex {
    static PATTERN: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(concat!(
            r"^\s*(export\s+)?(declare\s+)?(default\s+)?(async\s+)?",
            r"(?:function\s*\*?\s*(?P<f>\w+)",
            r"|(?:(?:public|private|protected|static|readonly|abstract|override|get|set)\s+)*(?P<m>[A-Za-z_$][\w$]*)\??\s*(<[^>]*>)?\s*\(",
            r"|(?:const|let|var)\s+(?P<c>\w+)\s*(:[^=]*)?=\s*(async\s*)?(\(|function|<))",
        ))
        .unwrap()
    })
}

/// Line comments (`///` in Rust, `//` in Go) directly above a definition: removed from the
/// copy, and their first sentence becomes a case when a definition follows.
fn strip_line_docs(
    source: &str,
    marker: &str,
    dropped: &[&str],
    definition: &Regex,
) -> (String, Vec<(String, u32, String)>) {
    let mut kept = Vec::new();
    let mut cases = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    for line in source.lines() {
        let trimmed = line.trim_start();
        if dropped.iter().any(|d| trimmed.starts_with(d)) {
            continue;
        }
        if let Some(text) = trimmed.strip_prefix(marker) {
            // In Go every `//` run above a declaration is its doc (directives excepted).
            if !text.starts_with("go:") {
                doc.push(text.to_owned());
                continue;
            }
        }
        kept.push(line);
        if trimmed.starts_with("#[") {
            continue; // attributes between the doc and the item
        }
        if let Some(found) = definition.captures(line) {
            if let Some(query) = first_sentence(&doc) {
                cases.push((query, kept.len() as u32, found["name"].to_owned()));
            }
        }
        doc.clear();
    }
    (kept.join("\n"), cases)
}

/// JSDoc blocks (`/** ... */`): removed, and their first sentence becomes a case when the next
/// line defines a function, method or function-valued constant.
fn strip_block_docs(source: &str) -> (String, Vec<(String, u32, String)>) {
    let mut kept = Vec::new();
    let mut cases = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    let mut in_doc = false;
    for line in source.lines() {
        let trimmed = line.trim();
        if !in_doc && trimmed.starts_with("/**") {
            doc.clear();
            in_doc = !trimmed.ends_with("*/") || trimmed == "/**";
            let text = trimmed.trim_start_matches("/**").trim_end_matches("*/");
            doc.push(text.trim().to_owned());
            continue;
        }
        if in_doc {
            in_doc = !trimmed.ends_with("*/");
            let text = trimmed.trim_end_matches("*/").trim_start_matches('*');
            doc.push(text.trim().to_owned());
            continue;
        }
        kept.push(line);
        if trimmed.is_empty() || trimmed.starts_with('@') {
            continue; // decorators between the doc and the item
        }
        if let Some(found) = ts_definition().captures(line) {
            let name = ["f", "m", "c"]
                .iter()
                .find_map(|g| found.name(g))
                .map(|m| m.as_str().to_owned());
            let doc: Vec<String> = doc
                .iter()
                .skip_while(|l| l.is_empty())
                .take_while(|l| !l.starts_with('@'))
                .cloned()
                .collect();
            if let (Some(name), Some(query)) = (name, first_sentence(&doc)) {
                if !matches!(name.as_str(), "if" | "for" | "while" | "switch" | "return") {
                    cases.push((query, kept.len() as u32, name));
                }
            }
        }
        doc.clear();
    }
    (kept.join("\n"), cases)
}

fn python_definition() -> &'static Regex {
    static PATTERN: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(r"^(?P<indent>\s*)(?:(?:async\s+)?(?P<def>def)|class)\s+(?P<name>\w+)").unwrap()
    })
}

/// Python docstrings (the string that opens a module, class or function body): removed, and
/// a function's first sentence becomes a case for its `def` line. A body left empty gets a
/// `pass`, so the copy still parses. Line-based, as the other strippers: a signature ends at
/// the first line ending in `:`; a docstring is a line opening with a triple quote (`r`/`u`
/// prefixes allowed).
fn strip_docstrings(source: &str) -> (String, Vec<(String, u32, String)>) {
    let lines: Vec<&str> = source.lines().collect();
    let mut kept: Vec<String> = Vec::new();
    let mut cases = Vec::new();
    // The module's docstring: its first statement.
    let mut i = lines
        .iter()
        .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .unwrap_or(lines.len());
    kept.extend(lines[..i].iter().map(|l| (*l).to_owned()));
    skip_docstring(&lines, &mut i);
    while i < lines.len() {
        let line = lines[i];
        kept.push(line.to_owned());
        i += 1;
        let Some(found) = python_definition().captures(line) else {
            continue;
        };
        let def_line = kept.len() as u32;
        let indent = found["indent"].len();
        // The rest of a multi-line signature.
        let mut signature_end = line;
        while !signature_end.trim_end().ends_with(':') && i < lines.len() {
            signature_end = lines[i];
            kept.push(signature_end.to_owned());
            i += 1;
        }
        let Some(doc) = skip_docstring(&lines, &mut i) else {
            continue;
        };
        let body_left = lines[i..]
            .iter()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.len() - l.trim_start().len() > indent);
        if !body_left {
            kept.push(format!("{}pass", " ".repeat(indent + 4)));
        }
        if found.name("def").is_some() {
            if let Some(query) = first_sentence(&doc) {
                cases.push((query, def_line, found["name"].to_owned()));
            }
        }
    }
    (kept.join("\n"), cases)
}

/// When `lines[*i]` opens a docstring: moves `*i` past it and returns its lines.
fn skip_docstring(lines: &[&str], i: &mut usize) -> Option<Vec<String>> {
    let opened = lines.get(*i)?.trim_start();
    let opened = opened.trim_start_matches(['r', 'u', 'R', 'U']);
    let quote = ["\"\"\"", "'''"]
        .into_iter()
        .find(|q| opened.starts_with(q))?;
    let mut doc = Vec::new();
    let mut rest = &opened[3..];
    loop {
        if let Some(end) = rest.find(quote) {
            doc.push(rest[..end].to_owned());
            *i += 1;
            return Some(doc);
        }
        doc.push(rest.to_owned());
        *i += 1;
        match lines.get(*i) {
            Some(next) => rest = next,
            None => return Some(doc),
        }
    }
}

/// The first sentence of a doc block, without markdown or JSDoc decoration; `None` when too
/// short or too long to be a query someone would type.
pub fn first_sentence(doc: &[String]) -> Option<String> {
    let paragraph: Vec<&str> = doc
        .iter()
        .map(|l| l.trim())
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    let text = paragraph.join(" ");
    let end = text
        .char_indices()
        .find(|(i, c)| *c == '.' && (i + 1 == text.len() || text[i + 1..].starts_with(' ')))
        .map_or(text.len(), |(i, _)| i);
    static LINK: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let link = LINK.get_or_init(|| Regex::new(r"\{@link\s+([^}|\s]+)[^}]*\}").unwrap());
    let sentence = link.replace_all(&text[..end], "$1");
    let sentence: String = sentence
        .chars()
        .filter(|c| !matches!(c, '`' | '[' | ']' | '*'))
        .collect();
    let words = sentence.split_whitespace().count();
    (4..=30).contains(&words).then_some(sentence)
}

/// The name-blind twin of a case's query: identifier-like tokens and the words of the target's
/// own name (and their plain inflections) removed; `None` when fewer than three words remain.
pub fn name_blind(query: &str, name: &str) -> Option<String> {
    let name_words = identifier_words(name);
    static IDENTIFIER_LIKE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let identifier_like = IDENTIFIER_LIKE
        .get_or_init(|| Regex::new(r"[a-z][A-Z]|[A-Za-z0-9]_[A-Za-z0-9]|::|\.\w|\(\)").unwrap());
    let kept: Vec<&str> = query
        .split_whitespace()
        .filter(|token| {
            let word = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
            if word.is_empty() || identifier_like.is_match(word) {
                return false;
            }
            let lower = word.to_lowercase();
            !name_words.iter().any(|n| {
                lower == *n
                    || ["s", "es", "ed", "d", "ing", "er", "ers"]
                        .iter()
                        .any(|suffix| lower.strip_suffix(suffix) == Some(n.as_str()))
            })
        })
        .collect();
    (kept.len() >= 3).then(|| kept.join(" "))
}

/// `read_to_end` -> read, to, end; `parseHTTPHeader` -> parse, http, header.
fn identifier_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in name.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<char> = part.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let boundary = (chars[i].is_uppercase() && chars[i - 1].is_lowercase())
                || (chars[i].is_uppercase()
                    && chars[i - 1].is_uppercase()
                    && chars.get(i + 1).is_some_and(|c| c.is_lowercase()));
            if boundary {
                words.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        words.push(chars[start..].iter().collect::<String>().to_lowercase());
    }
    words
}

/// The hand-written questions of `benches/fixtures/python_questions.tsv` (file, function,
/// question) as cases on the stripped copy in `repo`: each answer is the line of the file's
/// top-level `def` of that function. A question whose function is not found panics: the
/// fixture and the pinned corpus must agree.
pub fn python_questions(repo: &Path) -> Vec<Case> {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/fixtures/python_questions.tsv");
    let text = std::fs::read_to_string(&fixture).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let mut fields = line.splitn(3, '\t');
            let (path, name, query) = (
                fields.next().unwrap(),
                fields.next().unwrap(),
                fields.next().unwrap(),
            );
            let source = std::fs::read_to_string(repo.join(path)).unwrap();
            let def = format!("def {name}(");
            let line = source
                .lines()
                .position(|l| l.starts_with(&def))
                .unwrap_or_else(|| panic!("python_questions: no `{def}` in {path}"));
            Case {
                query: query.to_owned(),
                path: path.to_owned(),
                line: line as u32 + 1,
                name: name.to_owned(),
            }
        })
        .collect()
}
