//! One walk of a language's extraction query over a syntax tree. The four query files of a
//! language are compiled into a single tree-sitter query (see `language.rs`), so the tree is
//! walked once instead of four times; the walk was most of the extraction cost. Matches are
//! sorted back into the file their pattern came from, in the order the cursor produced them.

use std::ops::Range;

use tree_sitter::{Node, QueryCursor, StreamingIterator, Tree};

use super::language::{Grammar, QueryFile};

/// One match: its pattern (numbered within the combined query) and its captures.
#[derive(Debug, Clone)]
pub(crate) struct QueryMatch {
    /// Pattern index in the combined query (definitions come first, so their indices are the
    /// same as in `definitions.scm` alone).
    pub pattern: usize,
    captures: Range<usize>,
}

/// Every match of one walk, grouped by query file.
pub(crate) struct Matches<'t> {
    captures: Vec<(&'static str, Node<'t>)>,
    /// Matches of `definitions.scm`.
    pub definitions: Vec<QueryMatch>,
    /// Matches of `imports.scm`.
    pub imports: Vec<QueryMatch>,
    /// Matches of `calls.scm`.
    pub calls: Vec<QueryMatch>,
    /// Matches of `inherits.scm`.
    pub inherits: Vec<QueryMatch>,
}

impl<'t> Matches<'t> {
    /// The captures of `m` as (capture name, node).
    pub fn captures(&self, m: &QueryMatch) -> &[(&'static str, Node<'t>)] {
        &self.captures[m.captures.clone()]
    }
}

/// Runs the grammar's combined query over `tree` once.
pub(crate) fn run<'t>(grammar: &'static Grammar, tree: &'t Tree, source: &[u8]) -> Matches<'t> {
    let names = grammar.query.capture_names();
    let mut out = Matches {
        captures: Vec::new(),
        definitions: Vec::new(),
        imports: Vec::new(),
        calls: Vec::new(),
        inherits: Vec::new(),
    };
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(&grammar.query, tree.root_node(), source);
    while let Some(m) = matches.next() {
        let start = out.captures.len();
        out.captures
            .extend(m.captures.iter().map(|c| (names[c.index as usize], c.node)));
        let found = QueryMatch {
            pattern: m.pattern_index,
            captures: start..out.captures.len(),
        };
        match grammar.file_of_pattern(m.pattern_index) {
            QueryFile::Definitions => out.definitions.push(found),
            QueryFile::Imports => out.imports.push(found),
            QueryFile::Calls => out.calls.push(found),
            QueryFile::Inherits => out.inherits.push(found),
        }
    }
    out
}
