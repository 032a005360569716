//! One file, start to finish and without I/O: classify the bytes, parse, find definitions, cut
//! chunks, extract references. Bad input degrades instead of failing: binary content is
//! skipped, invalid UTF-8 is replaced, a parse that runs too long or is cancelled falls back
//! to line chunks, and each degradation is reported as a [`FileIssue`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tree_sitter::{ParseOptions, Parser};

use super::ast_chunker;
use super::chunk::{count_lines, Chunk, ChunkOptions};
use super::definitions::{self, Definition};
use super::extract::{self, Reference};
use super::language::{FileKind, TextFormat};
use super::query_pass;
use super::text_chunker;

/// Why a file was not indexed, or indexed only in part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileIssue {
    /// NUL bytes: not text. The file is skipped.
    Binary,
    /// Larger than the size cap. The file is skipped.
    TooLarge,
    /// Not valid UTF-8: invalid sequences were replaced before indexing.
    InvalidUtf8,
    /// The parser reported syntax errors; chunks and symbols cover what it recovered.
    SyntaxErrors,
    /// Nesting deeper than the chunker follows: those parts were cut by lines.
    TooDeep,
    /// Parsing took longer than the limit: the file was cut by lines, without symbols.
    ParseTimeout,
    /// The file could not be read.
    Unreadable,
    /// The path leaves the project root (a symlink pointing outside).
    OutsideRoot,
}

impl FileIssue {
    /// The stable name stored with the file and reported to JS.
    pub fn as_str(self) -> &'static str {
        match self {
            FileIssue::Binary => "binary",
            FileIssue::TooLarge => "too_large",
            FileIssue::InvalidUtf8 => "invalid_utf8",
            FileIssue::SyntaxErrors => "syntax_errors",
            FileIssue::TooDeep => "too_deep",
            FileIssue::ParseTimeout => "parse_timeout",
            FileIssue::Unreadable => "unreadable",
            FileIssue::OutsideRoot => "outside_root",
        }
    }

    /// Whether the file is left out of the index entirely.
    pub fn skips_file(self) -> bool {
        matches!(
            self,
            FileIssue::Binary
                | FileIssue::TooLarge
                | FileIssue::Unreadable
                | FileIssue::OutsideRoot
        )
    }
}

/// Everything extracted from one file.
#[derive(Debug, Default)]
pub struct FileAnalysis {
    /// The chunks, in file order.
    pub chunks: Vec<Chunk>,
    /// Definitions, outer before inner.
    pub definitions: Vec<Definition>,
    /// Imports, calls and inheritance.
    pub references: Vec<Reference>,
    /// Lines in the file.
    pub line_count: u32,
    /// What went wrong, if anything (empty for a clean file).
    pub issues: Vec<FileIssue>,
}

/// Settings for [`analyze`].
#[derive(Debug, Clone)]
pub struct AnalyzeOptions {
    /// Chunk budgets.
    pub chunk: ChunkOptions,
    /// Longest a single parse may run before the file falls back to line chunks.
    pub parse_timeout: Duration,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            chunk: ChunkOptions::default(),
            parse_timeout: Duration::from_secs(5),
        }
    }
}

/// Whether `bytes` look binary (a NUL in the first 8 KiB, as git decides).
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0)
}

/// Analyzes one file. `path` is the project-relative path shown in context prefixes; `cancel`
/// stops a running parse (the result is then the line-chunk fallback, and the caller is
/// expected to discard it).
pub fn analyze(
    parser: &mut Parser,
    path: &str,
    bytes: &[u8],
    kind: FileKind,
    options: &AnalyzeOptions,
    cancel: &AtomicBool,
) -> FileAnalysis {
    let mut analysis = FileAnalysis::default();
    if looks_binary(bytes) {
        analysis.issues.push(FileIssue::Binary);
        return analysis;
    }
    let text = String::from_utf8_lossy(bytes);
    if matches!(text, std::borrow::Cow::Owned(_)) {
        analysis.issues.push(FileIssue::InvalidUtf8);
    }
    analysis.line_count = count_lines(&text);
    let language = match kind {
        FileKind::Text(format) => {
            analysis.chunks = text_chunker::chunk(path, &text, format, &options.chunk);
            return analysis;
        }
        FileKind::Code(language) => language,
    };
    let parsed = language.grammar().ok().and_then(|grammar| {
        parser.set_language(&grammar.ts_language).ok()?;
        Some((
            grammar,
            parse(parser, text.as_bytes(), options.parse_timeout, cancel)?,
        ))
    });
    let Some((grammar, tree)) = parsed else {
        analysis.issues.push(FileIssue::ParseTimeout);
        analysis.chunks = text_chunker::chunk(path, &text, TextFormat::Plain, &options.chunk);
        return analysis;
    };
    if tree.root_node().has_error() {
        analysis.issues.push(FileIssue::SyntaxErrors);
    }
    let source = text.as_bytes();
    let matches = query_pass::run(grammar, &tree, source);
    analysis.definitions = definitions::find(&matches, source);
    let cut = ast_chunker::chunk(path, &text, &tree, &analysis.definitions, &options.chunk);
    if cut.too_deep {
        analysis.issues.push(FileIssue::TooDeep);
    }
    analysis.chunks = cut.chunks;
    analysis.references = extract::references(&matches, source, &analysis.definitions);
    analysis
}

fn parse(
    parser: &mut Parser,
    source: &[u8],
    timeout: Duration,
    cancel: &AtomicBool,
) -> Option<tree_sitter::Tree> {
    let deadline = Instant::now() + timeout;
    // Returning true from the progress callback halts the parse.
    let mut should_stop =
        |_: &tree_sitter::ParseState| cancel.load(Ordering::Relaxed) || Instant::now() >= deadline;
    let options = ParseOptions::new().progress_callback(&mut should_stop);
    let len = source.len();
    parser.parse_with_options(
        &mut |offset, _| if offset < len { &source[offset..] } else { &[] },
        None,
        Some(options),
    )
}
