//! The chunk model shared by the AST chunker and the text fallback, and the pieces both use:
//! line numbering, token estimates, content hashes, contextual prefixes, line packing.

use sha2::{Digest, Sha256};

use super::definitions::DefKind;

/// What a chunk holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChunkKind {
    /// One definition (or the header and fields of a definition too big for one chunk).
    Def(DefKind),
    /// Code outside any definition: imports, top-level statements.
    Code,
    /// Several small adjacent definitions merged up to the budget.
    Block,
    /// A Markdown section (a heading and its text).
    Section,
    /// Lines of a file with no grammar.
    Text,
}

impl ChunkKind {
    /// The stable name stored and returned to JS.
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkKind::Def(kind) => kind.as_str(),
            ChunkKind::Code => "code",
            ChunkKind::Block => "block",
            ChunkKind::Section => "section",
            ChunkKind::Text => "text",
        }
    }
}

/// Budgets, in estimated tokens (about 4 bytes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// A node larger than this is split at its children (functions never are).
    pub max_tokens: usize,
    /// Items smaller than this are merged with small neighbours...
    pub small_tokens: usize,
    /// ...up to this many tokens per merged chunk.
    pub merge_tokens: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            max_tokens: 512,
            small_tokens: 64,
            merge_tokens: 256,
        }
    }
}

/// A piece of a file that is indexed, embedded and returned on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// What it holds.
    pub kind: ChunkKind,
    /// The definition's name, when the chunk is one definition (or part of one).
    pub name: Option<String>,
    /// The name qualified by enclosing definitions (`Class.method`).
    pub qualified_name: Option<String>,
    /// Qualified names of every definition that starts in this chunk, outermost first.
    pub symbols: Vec<String>,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, 1-based, inclusive.
    pub end_line: u32,
    /// Byte range in the file (of the text as indexed: invalid UTF-8 replaced).
    pub start_byte: usize,
    /// End of the byte range (exclusive).
    pub end_byte: usize,
    /// The chunk's text.
    pub content: String,
    /// 128 bits of SHA-256 over `content`, hex.
    pub content_hash: String,
    /// About a quarter of the byte length.
    pub token_estimate: u32,
    /// `File: path | kind: name | Lines: a-b | In: <enclosing signature>`, prepended for
    /// embedding and indexed for BM25.
    pub context: String,
    /// First 16 bytes of SHA-256 of [`embedding_text`]: the key of the chunk's vector.
    pub embed_hash: [u8; 16],
    /// For a [`ChunkKind::Block`], each definition it groups; for a class or impl that fit
    /// whole, each member when it has two or more. Embedded on their own so that a search
    /// finds (and names) one small function among its neighbours. Empty otherwise.
    pub parts: Vec<ChunkPart>,
}

/// One definition inside a chunk that holds several, with its own vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkPart {
    /// What it defines.
    pub kind: DefKind,
    /// Its qualified name (`Class.method`).
    pub symbol: String,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, 1-based, inclusive.
    pub end_line: u32,
    /// Byte range of its text (with leading comments) within the chunk's `content`.
    pub content_range: std::ops::Range<usize>,
    /// Its own contextual prefix (`File: path | function: name | Lines: a-b | In: ...`).
    pub context: String,
    /// Hash of its [`embedding_text`]: the key of its vector.
    pub embed_hash: [u8; 16],
}

/// Upper bound on the parts of one chunk. A grouped chunk holds at most `merge_tokens` (256)
/// estimated tokens, so even one-line definitions stay far below it; definitions past it have
/// only the chunk's vector. Part keys in the vector index are built from it (`vector::store`).
pub const MAX_PARTS: usize = 1024;

/// The text a chunk is embedded as: its contextual prefix without the line range, a blank line,
/// then its content. Line numbers carry no meaning for the model, and leaving them out means an
/// edit above a function does not make it look new (which would re-embed everything below).
pub fn embedding_text(context: &str, content: &str) -> String {
    let prefix: Vec<&str> = context
        .split(" | ")
        .filter(|part| !part.starts_with("Lines: "))
        .collect();
    format!("{}\n\n{content}", prefix.join(" | "))
}

/// First 16 bytes of SHA-256 of `text`: how vectors are keyed.
pub fn text_hash(text: &str) -> [u8; 16] {
    let digest = Sha256::digest(text.as_bytes());
    let mut hash = [0u8; 16];
    hash.copy_from_slice(&digest[..16]);
    hash
}

/// Estimated tokens of `len` bytes of code or prose.
pub fn estimate_tokens(len: usize) -> usize {
    len.div_ceil(4)
}

/// Hex of the first 128 bits of SHA-256.
pub fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    hex::encode(&digest[..16])
}

/// Number of lines in `text` (a trailing newline does not start another).
pub fn count_lines(text: &str) -> u32 {
    let newlines = memchr_newlines(text.as_bytes()).count() as u32;
    newlines + 1 - u32::from(text.ends_with('\n'))
}

/// Maps byte offsets to 1-based line numbers.
pub struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    /// Indexes the line starts of `text`.
    pub fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(memchr_newlines(text.as_bytes()).map(|i| i + 1));
        Lines { starts }
    }

    /// The 1-based line holding byte `offset`.
    pub fn line_of(&self, offset: usize) -> u32 {
        (self.starts.partition_point(|&s| s <= offset)) as u32
    }
}

fn memchr_newlines(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i)
}

/// What a chunk is about, before its text is cut: filled in by the chunkers.
pub(crate) struct ChunkHead {
    pub kind: ChunkKind,
    pub name: Option<String>,
    pub qualified_name: Option<String>,
    pub symbols: Vec<String>,
    pub enclosing: Option<String>,
}

/// Cuts `text[start..end]` (trimmed of surrounding whitespace) into a finished chunk, or
/// `None` when only whitespace is left.
pub(crate) fn finish(
    path: &str,
    text: &str,
    lines: &Lines,
    start: usize,
    end: usize,
    head: ChunkHead,
) -> Option<Chunk> {
    let slice = &text[start..end];
    let lead = slice.len() - slice.trim_start().len();
    let content = slice.trim();
    if content.is_empty() {
        return None;
    }
    let (start, end) = (start + lead, start + lead + content.len());
    let (start_line, end_line) = (lines.line_of(start), lines.line_of(end - 1));
    let name = head.qualified_name.as_deref().or(head.name.as_deref());
    let context = context_prefix(
        path,
        head.kind,
        name,
        (start_line, end_line),
        head.enclosing.as_deref(),
    );
    Some(Chunk {
        kind: head.kind,
        name: head.name,
        qualified_name: head.qualified_name,
        symbols: head.symbols,
        start_line,
        end_line,
        start_byte: start,
        end_byte: end,
        content_hash: content_hash(content.as_bytes()),
        token_estimate: estimate_tokens(content.len()) as u32,
        embed_hash: text_hash(&embedding_text(&context, content)),
        content: content.to_owned(),
        context,
        parts: Vec::new(),
    })
}

/// `File: path | kind: name | Lines: a-b | In: <enclosing signature>`; a chunk of plain code or
/// text has no kind part, an unnamed one (a block, a section) only its kind.
fn context_prefix(
    path: &str,
    kind: ChunkKind,
    name: Option<&str>,
    (start_line, end_line): (u32, u32),
    enclosing: Option<&str>,
) -> String {
    let mut context = format!("File: {path}");
    if let Some(name) = name {
        context.push_str(&format!(" | {}: {name}", kind.as_str()));
    } else if !matches!(kind, ChunkKind::Code | ChunkKind::Text) {
        context.push_str(&format!(" | {}", kind.as_str()));
    }
    context.push_str(&format!(" | Lines: {start_line}-{end_line}"));
    if let Some(enclosing) = enclosing.filter(|s| !s.is_empty()) {
        context.push_str(&format!(" | In: {enclosing}"));
    }
    context
}

/// The part of `chunk` that is `text[start..end]` (a definition the chunk groups, with its
/// leading comments), named `symbol`; `None` when the range is blank or not inside the chunk.
pub(crate) fn part_of(
    chunk: &Chunk,
    path: &str,
    text: &str,
    lines: &Lines,
    (start, end): (usize, usize),
    (kind, symbol): (DefKind, &str),
    enclosing: Option<&str>,
) -> Option<ChunkPart> {
    let slice = text.get(start..end)?;
    let lead = slice.len() - slice.trim_start().len();
    let content = slice.trim();
    let start = start + lead;
    if content.is_empty() || start < chunk.start_byte || start + content.len() > chunk.end_byte {
        return None;
    }
    let (start_line, end_line) = (
        lines.line_of(start),
        lines.line_of(start + content.len() - 1),
    );
    let context = context_prefix(
        path,
        ChunkKind::Def(kind),
        Some(symbol),
        (start_line, end_line),
        enclosing,
    );
    let offset = start - chunk.start_byte;
    Some(ChunkPart {
        kind,
        symbol: symbol.to_owned(),
        start_line,
        end_line,
        content_range: offset..offset + content.len(),
        embed_hash: text_hash(&embedding_text(&context, content)),
        context,
    })
}

/// Splits `text[start..end]` into consecutive ranges of at most `max_tokens`, cutting at
/// blank lines when it can, else at line ends, else (one huge line) at char boundaries.
pub(crate) fn pack_lines(
    text: &str,
    start: usize,
    end: usize,
    max_tokens: usize,
) -> Vec<(usize, usize)> {
    let max_bytes = max_tokens.saturating_mul(4).max(64);
    let mut pieces = Vec::new();
    let mut piece_start = start;
    while end - piece_start > max_bytes {
        let window_end = crate::text::floor_char_boundary(text, piece_start + max_bytes);
        let window = &text[piece_start..window_end];
        let cut = window
            .rfind("\n\n")
            .map(|i| i + 2)
            .or_else(|| window.rfind('\n').map(|i| i + 1))
            .filter(|&i| i > 0)
            .unwrap_or(window.len());
        let cut = if cut == 0 {
            window_end - piece_start
        } else {
            cut
        };
        pieces.push((piece_start, piece_start + cut));
        piece_start += cut;
    }
    if piece_start < end {
        pieces.push((piece_start, end));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based_and_cover_the_last_line() {
        let text = "a\nbb\n\nccc";
        let lines = Lines::new(text);
        assert_eq!(lines.line_of(0), 1);
        assert_eq!(lines.line_of(2), 2);
        assert_eq!(lines.line_of(5), 3);
        assert_eq!(lines.line_of(8), 4);
        assert_eq!(count_lines(text), 4);
        assert_eq!(count_lines("x\n"), 1);
    }

    #[test]
    fn packing_prefers_blank_lines_and_never_cuts_a_char() {
        let para = "word ".repeat(40) + "\n";
        let text = format!("{para}{para}\n{para}");
        let pieces = pack_lines(&text, 0, text.len(), 110);
        assert!(pieces.len() >= 2);
        assert_eq!(
            pieces[0].1,
            2 * para.len() + 1,
            "first cut at the blank line"
        );
        let wide = "é".repeat(1000);
        for (s, e) in pack_lines(&wide, 0, wide.len(), 100) {
            assert!(wide.is_char_boundary(s) && wide.is_char_boundary(e));
        }
        let covered: usize = pack_lines(&wide, 0, wide.len(), 100)
            .iter()
            .map(|(s, e)| e - s)
            .sum();
        assert_eq!(covered, wide.len());
    }
}
