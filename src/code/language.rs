//! The language registry: which files we understand, with which tree-sitter grammar, and the
//! queries (from `grammars/<language>/*.scm`) that say what to extract from them.
//!
//! Grammars and compiled queries are process-wide and built on first use; a `Grammar` is
//! immutable and shared by every indexing thread (each thread keeps its own `Parser`). A
//! language's four query files are compiled into one query so a tree is walked once.

use std::path::Path;
use std::sync::OnceLock;

use tree_sitter::Query;

use crate::error::{Error, Result};

/// A programming language with a tree-sitter grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// TypeScript (`.ts`, `.mts`, `.cts`).
    TypeScript,
    /// TypeScript with JSX (`.tsx`).
    Tsx,
    /// JavaScript incl. JSX (`.js`, `.jsx`, `.mjs`, `.cjs`).
    JavaScript,
    /// Python (`.py`, `.pyi`).
    Python,
    /// Rust (`.rs`).
    Rust,
    /// Go (`.go`).
    Go,
}

/// A text format without a grammar, chunked by sections and paragraphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextFormat {
    /// Markdown: chunked at headings.
    Markdown,
    /// JSON, YAML, TOML, INI and plain text: chunked at blank lines.
    Plain,
}

/// How a file is chunked, decided by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// Source code with a grammar.
    Code(Language),
    /// Text with no grammar.
    Text(TextFormat),
}

impl FileKind {
    /// The kind for `path`, or `None` for files the indexer does not read (images, archives,
    /// lock files of unknown formats...).
    pub fn of(path: &Path) -> Option<FileKind> {
        let name = path.file_name()?.to_str()?;
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        let kind = match ext.as_deref()? {
            "ts" | "mts" | "cts" => FileKind::Code(Language::TypeScript),
            "tsx" => FileKind::Code(Language::Tsx),
            "js" | "jsx" | "mjs" | "cjs" => FileKind::Code(Language::JavaScript),
            "py" | "pyi" => FileKind::Code(Language::Python),
            "rs" => FileKind::Code(Language::Rust),
            "go" => FileKind::Code(Language::Go),
            "md" | "mdx" | "markdown" => FileKind::Text(TextFormat::Markdown),
            "json" | "jsonc" | "json5" | "yaml" | "yml" | "toml" | "ini" | "cfg" | "txt"
            | "rst" => FileKind::Text(TextFormat::Plain),
            _ => return None,
        };
        Some(kind)
    }

    /// The language name stored with chunks: the grammar's name, or `markdown` / `text`.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Code(language) => language.name(),
            FileKind::Text(TextFormat::Markdown) => "markdown",
            FileKind::Text(TextFormat::Plain) => "text",
        }
    }
}

impl Language {
    /// Every language, in registry order.
    pub const ALL: [Language; 6] = [
        Language::TypeScript,
        Language::Tsx,
        Language::JavaScript,
        Language::Python,
        Language::Rust,
        Language::Go,
    ];

    /// The stable name stored with chunks and shown to users.
    pub fn name(self) -> &'static str {
        match self {
            Language::TypeScript => "typescript",
            Language::Tsx => "tsx",
            Language::JavaScript => "javascript",
            Language::Python => "python",
            Language::Rust => "rust",
            Language::Go => "go",
        }
    }

    /// The compiled grammar and queries, built on first use.
    pub fn grammar(self) -> Result<&'static Grammar> {
        static CELLS: [OnceLock<Result<Grammar, String>>; 6] = [const { OnceLock::new() }; 6];
        let slot = Language::ALL.iter().position(|l| *l == self).unwrap_or(0);
        CELLS[slot]
            .get_or_init(|| Grammar::build(self))
            .as_ref()
            .map_err(|e| Error::Internal(format!("{} grammar: {e}", self.name())))
    }

    fn ts_language(self) -> tree_sitter::Language {
        match self {
            Language::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Language::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Language::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Language::Python => tree_sitter_python::LANGUAGE.into(),
            Language::Rust => tree_sitter_rust::LANGUAGE.into(),
            Language::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }

    fn query_sources(self) -> QuerySources {
        macro_rules! sources {
            ($dir:literal) => {
                QuerySources {
                    definitions: include_str!(concat!("../../grammars/", $dir, "/definitions.scm")),
                    imports: include_str!(concat!("../../grammars/", $dir, "/imports.scm")),
                    calls: include_str!(concat!("../../grammars/", $dir, "/calls.scm")),
                    inherits: include_str!(concat!("../../grammars/", $dir, "/inherits.scm")),
                }
            };
        }
        match self {
            // TSX is a superset of TypeScript's grammar with the same node names.
            Language::TypeScript | Language::Tsx => sources!("typescript"),
            Language::JavaScript => sources!("javascript"),
            Language::Python => sources!("python"),
            Language::Rust => sources!("rust"),
            Language::Go => sources!("go"),
        }
    }
}

struct QuerySources {
    definitions: &'static str,
    imports: &'static str,
    calls: &'static str,
    inherits: &'static str,
}

/// The query file a pattern of the combined query comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueryFile {
    /// `definitions.scm`.
    Definitions,
    /// `imports.scm`.
    Imports,
    /// `calls.scm`.
    Calls,
    /// `inherits.scm`.
    Inherits,
}

/// A language's grammar with its compiled extraction query.
pub struct Grammar {
    /// Which language this is.
    pub language: Language,
    /// The tree-sitter language to give a `Parser`.
    pub ts_language: tree_sitter::Language,
    /// The four query files compiled as one query (in the order definitions, imports, calls,
    /// inherits), so that one walk of the tree finds everything.
    pub(crate) query: Query,
    /// Byte offset in the combined source where each file after the first starts.
    file_starts: [(usize, QueryFile); 3],
}

impl std::fmt::Debug for Grammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammar")
            .field("language", &self.language)
            .finish_non_exhaustive()
    }
}

impl Grammar {
    fn build(language: Language) -> Result<Grammar, String> {
        let ts_language = language.ts_language();
        let sources = language.query_sources();
        let files = [
            ("definitions", QueryFile::Definitions, sources.definitions),
            ("imports", QueryFile::Imports, sources.imports),
            ("calls", QueryFile::Calls, sources.calls),
            ("inherits", QueryFile::Inherits, sources.inherits),
        ];
        let mut combined = String::new();
        let mut starts = Vec::new();
        for (_, file, source) in files {
            starts.push((combined.len(), file));
            combined.push_str(source);
            combined.push('\n');
        }
        let query = Query::new(&ts_language, &combined).map_err(|e| {
            // Name the file at fault: compile each alone (only on this error path).
            files
                .iter()
                .find_map(|(name, _, source)| {
                    Query::new(&ts_language, source)
                        .err()
                        .map(|e| format!("{name}.scm: {e}"))
                })
                .unwrap_or_else(|| format!("combined query: {e}"))
        })?;
        Ok(Grammar {
            language,
            ts_language,
            query,
            file_starts: [starts[1], starts[2], starts[3]],
        })
    }

    /// The query file that pattern `index` of the combined query came from.
    pub(crate) fn file_of_pattern(&self, index: usize) -> QueryFile {
        let offset = self.query.start_byte_for_pattern(index);
        self.file_starts
            .iter()
            .rev()
            .find(|(start, _)| offset >= *start)
            .map_or(QueryFile::Definitions, |(_, file)| *file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_compiles_its_queries() {
        for language in Language::ALL {
            if let Err(e) = language.grammar() {
                panic!("{e}");
            }
        }
    }

    #[test]
    fn files_are_recognised_by_extension() {
        let kind = |p: &str| FileKind::of(Path::new(p));
        assert_eq!(kind("src/a.TS"), Some(FileKind::Code(Language::TypeScript)));
        assert_eq!(kind("a.tsx"), Some(FileKind::Code(Language::Tsx)));
        assert_eq!(kind("a.jsx"), Some(FileKind::Code(Language::JavaScript)));
        assert_eq!(
            kind("README.md"),
            Some(FileKind::Text(TextFormat::Markdown))
        );
        assert_eq!(kind("Cargo.toml"), Some(FileKind::Text(TextFormat::Plain)));
        assert_eq!(kind("logo.png"), None);
        assert_eq!(kind("Makefile"), None);
    }
}
