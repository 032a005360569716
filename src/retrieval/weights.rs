//! Per-query path weights: how much each candidate path counts in this query's fusion, read
//! from the query's kind and from what the paths themselves found.
//!
//! The query's kind sets the graph path's share (see `query_kind`); the rest is split between
//! the keyword and the dense path by what is searched and what the paths found:
//! - **code, when a word of the query names a definition among the keyword path's top hits**
//!   (`Split slices s into substrings`, `how does parse_config fail`) and the word is not
//!   common in the code: keyword-led, 0.55:0.45. Without the commonness guard, ordinary words
//!   (`new`, `reader`, `value`) named some definition in 39-45% of the name-blind dev queries;
//!   with it 12-27%, and MRR@10 moved by -0.002 to +0.008 on the code sets;
//! - **code otherwise**: dense-led, 0.35:0.65;
//! - **memories** (prose, which the built-in model reads well): dense-led, 0.3:0.7.
//!
//! The shares moved towards the dense path when fusion began reading its similarities
//! (`fusion.rs`): a dense hit far below the best now counts little whatever the share, so a
//! larger share no longer lifts the dense path's weak hits. On the dumps of one eval run,
//! shares were searched on a grid together with the temperature (named 0.4-0.75, code
//! 0.2-0.55, memories 0.2-0.5): the region around these is flat within 0.003 MRR@10 per set,
//! and choosing on six sets and scoring the seventh gave the default's margin over its best
//! single path at +0.012 or more on each held-out set (was +0.003 on memories, +0.006 on
//! `go-blind`, with rank fusion and the earlier shares 0.7 / 0.45 / 0.4).
//!
//! Chosen on seven dev sets together (`benches/retrieval_eval.rs`, `docs/BENCHMARK.md`): doc
//! sentences and their name-blind twins over Rust, TypeScript and Go trees, and questions over
//! agent memories. The fixed keyword-led row this replaces (0.7:0.3 for descriptions) lost to
//! the dense path alone on the memory set by 0.07 MRR@10 and to keyword alone on Go docs;
//! an even split everywhere lost 0.03 on Go docs. Signals measured and not used: whether the
//! all-terms keyword query matched (it almost never does for a sentence), and the dense path's
//! top similarity and margin (no set's winner changed with them). Both are still reported in
//! [`Evidence`] so that a recall can be explained.

use std::collections::HashMap;

use super::fusion::{CandidatePath, ItemRef, RankedList};
use super::query_kind::{PathWeights, QueryKind};
use super::term_counts::TermCounts;
use crate::code::read::CodeChunk;
use crate::error::Result;
use crate::store::Store;
use crate::text::fts_query::FtsQuery;

/// Keyword share of the keyword + dense weight for code when the query names a definition.
const NAMED_KEYWORD_SHARE: f64 = 0.55;
/// ...for code otherwise.
const CODE_KEYWORD_SHARE: f64 = 0.35;
/// ...for memories.
const MEMORY_KEYWORD_SHARE: f64 = 0.3;
/// How many of the keyword path's top chunks are checked for a definition the query names.
const NAMED_DEPTH: usize = 10;
/// Query words shorter than this never count as naming a definition (`a`, `to`, `io`).
const MIN_NAME_CHARS: usize = 3;
/// A word in more than this share of all chunks is too common to name a definition (`new`,
/// `value`, `reader` in a project where every other chunk reads)...
const COMMON_NAME_SHARE: f64 = 0.02;
/// ...unless it is in fewer chunks than this (a small project keeps every word).
const COMMON_NAME_MIN_CHUNKS: f64 = 20.0;
/// Distinct candidate words whose frequency is looked up, at most.
const MAX_NAME_CHECKS: usize = 3;

/// What the candidate paths found for one query, as fusion reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// The definition a word of the query names, among the keyword path's top chunks.
    pub named: Option<String>,
    /// Items (chunks and memories) the keyword path's all-terms query matched, before it
    /// widened to any term.
    pub all_terms: u32,
    /// The dense path's best cosine similarity to the query.
    pub dense_top: Option<f32>,
}

impl Evidence {
    /// Reads the evidence from the query (as typed, and as typo-corrected when it was), the
    /// keyword path's chunks (its lists in order, each best first) with their rows, its
    /// all-terms count and the dense path's similarities.
    ///
    /// A word names a definition only when it is not common in the code: its chunk count
    /// comes from `counts` (filled already when the keyword path's OR fill weighed the same
    /// word) or from the FTS index, read only when some word names a definition.
    pub(crate) async fn read(
        queries: &[&str],
        keyword_chunks: &[i64],
        chunks: &HashMap<i64, CodeChunk>,
        all_terms: u32,
        similarities: &HashMap<ItemRef, f32>,
        store: &Store,
        counts: &mut TermCounts,
    ) -> Result<Self> {
        let mut named = None;
        let candidates = named_candidates(queries, keyword_chunks, chunks);
        if !candidates.is_empty() {
            let mut reader = store.reader().await;
            let reader = &mut reader;
            let total = counts.total(reader).await? as f64;
            let common = (total * COMMON_NAME_SHARE).max(COMMON_NAME_MIN_CHUNKS);
            for (symbol, word) in candidates {
                let Some(term) = FtsQuery::parse(&word) else {
                    continue;
                };
                if (counts.of(reader, &term.and_expr()).await? as f64) <= common {
                    named = Some(symbol);
                    break;
                }
            }
        }
        Ok(Evidence {
            named,
            all_terms,
            dense_top: similarities.values().copied().max_by(f32::total_cmp),
        })
    }
}

/// The weights of each path, for chunks and for memories.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusionWeights {
    /// For the lists of code chunks.
    pub chunks: PathWeights,
    /// For the lists of memories.
    pub memories: PathWeights,
}

/// The weights for a query of `kind` with `evidence`.
pub fn for_query(kind: QueryKind, evidence: &Evidence) -> FusionWeights {
    let row = kind.path_weights();
    let text = row.keyword + row.dense;
    let split = |keyword_share: f64| PathWeights {
        keyword: text * keyword_share,
        dense: text * (1.0 - keyword_share),
        graph: row.graph,
    };
    FusionWeights {
        chunks: split(if evidence.named.is_some() {
            NAMED_KEYWORD_SHARE
        } else {
            CODE_KEYWORD_SHARE
        }),
        memories: split(MEMORY_KEYWORD_SHARE),
    }
}

/// Which of the keyword and dense paths could speak for each kind of item in one recall.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Present {
    /// The keyword path ran for chunks and for memories (found something or not).
    pub keyword: [bool; 2],
    /// The dense path found chunks and memories. It has no similarity floor, so an empty list
    /// means it could not rank that kind: no model, the stage off, nothing embedded yet.
    pub dense: [bool; 2],
}

/// Index of chunks in [`Present`]'s pairs.
pub const CHUNKS: usize = 0;
/// Index of memories in [`Present`]'s pairs.
pub const MEMORIES: usize = 1;

/// Gives each list its path's weight for the kind of item it holds, and returns the weights
/// in effect; the cascade counts `cascade_share` of the graph path (the same for both kinds).
///
/// The split moves weight between the keyword and the dense path only where both could speak
/// for a kind: where one could not (`present`), the other gets the kind's weight of both. A
/// keyword search that ran and matched nothing keeps its weight, so memories no word matched
/// do not rise on their dense ranks alone.
pub fn apply(
    lists: &mut [RankedList],
    weights: FusionWeights,
    present: Present,
    cascade_share: f64,
) -> FusionWeights {
    let effective = |row: PathWeights, kind: usize| {
        let text = row.keyword + row.dense;
        match (present.keyword[kind], present.dense[kind]) {
            (true, false) => PathWeights {
                keyword: text,
                dense: 0.0,
                ..row
            },
            (false, true) => PathWeights {
                keyword: 0.0,
                dense: text,
                ..row
            },
            _ => row,
        }
    };
    let used = FusionWeights {
        chunks: effective(weights.chunks, CHUNKS),
        memories: effective(weights.memories, MEMORIES),
    };
    for list in lists {
        let row = match list.items.first() {
            Some(ItemRef::Memory(_)) => used.memories,
            _ => used.chunks,
        };
        list.weight = match list.path {
            CandidatePath::Keyword => row.keyword,
            CandidatePath::Dense => row.dense,
            CandidatePath::Graph => row.graph,
            CandidatePath::Cascade => row.graph * cascade_share,
        };
    }
    used
}

/// The definitions among the top `NAMED_DEPTH` keyword chunks whose own name (the last
/// segment of a qualified `Type.method` or `mod::f`) is a word of one of the `queries` (the
/// query as typed and as typo-corrected), compared without case: (symbol, word) pairs in rank
/// order, one per word, at most `MAX_NAME_CHECKS`.
fn named_candidates(
    queries: &[&str],
    keyword_chunks: &[i64],
    chunks: &HashMap<i64, CodeChunk>,
) -> Vec<(String, String)> {
    let words: Vec<String> = queries
        .iter()
        .flat_map(|q| q.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')))
        .filter(|w| w.chars().count() >= MIN_NAME_CHARS)
        .map(str::to_lowercase)
        .collect();
    let mut found: Vec<(String, String)> = Vec::new();
    if words.is_empty() {
        return found;
    }
    let symbols = keyword_chunks
        .iter()
        .take(NAMED_DEPTH)
        .filter_map(|id| chunks.get(id))
        .flat_map(|chunk| chunk.symbols.iter());
    for symbol in symbols {
        let own = symbol
            .rsplit(['.', ':'])
            .next()
            .unwrap_or(symbol)
            .to_lowercase();
        if words.contains(&own) && !found.iter().any(|(_, word)| *word == own) {
            found.push((symbol.clone(), own));
            if found.len() == MAX_NAME_CHECKS {
                break;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: i64, symbols: &[&str]) -> (i64, CodeChunk) {
        let chunk = CodeChunk {
            id,
            path: "src/lib.rs".into(),
            language: "rust".into(),
            kind: "block".into(),
            name: None,
            qualified_name: None,
            symbols: symbols.iter().map(|s| (*s).to_owned()).collect(),
            start_line: 1,
            end_line: 1,
            start_byte: 0,
            end_byte: 0,
            content_hash: String::new(),
            token_estimate: 1,
            context: String::new(),
            content: String::new(),
        };
        (id, chunk)
    }

    #[test]
    fn a_query_word_naming_a_top_keyword_definition_is_read() {
        let chunks: HashMap<i64, CodeChunk> = [
            chunk(1, &["Reader", "Reader.read_line"]),
            chunk(2, &["split"]),
        ]
        .into();
        let list = [1, 2];
        let named = |q: &str| {
            named_candidates(&[q], &list, &chunks)
                .into_iter()
                .next()
                .map(|(symbol, _)| symbol)
        };
        assert_eq!(
            named("Split slices s into substrings"),
            Some("split".into())
        );
        assert_eq!(
            named("how does read_line stop?"),
            Some("Reader.read_line".into())
        );
        // Words shorter than three characters and words naming nothing do not count.
        assert_eq!(named("read one line of text"), None);
        assert_eq!(named(""), None);
        // Only the top of the keyword list is read.
        let deep: Vec<i64> = std::iter::repeat_n(99, NAMED_DEPTH).chain([2]).collect();
        assert!(named_candidates(&["split it"], &deep, &chunks).is_empty());
        // The corrected query counts too, and case is compared beyond ASCII.
        assert_eq!(
            named_candidates(&["splti it", "split it"], &list, &chunks),
            [("split".to_owned(), "split".to_owned())]
        );
        let greek: HashMap<i64, CodeChunk> = [chunk(3, &["Σύνολο"])].into();
        assert_eq!(
            named_candidates(&["το σύνολο"], &[3], &greek),
            [("Σύνολο".to_owned(), "σύνολο".to_owned())]
        );
    }

    #[test]
    fn weights_follow_the_evidence_and_the_item_kind() {
        let plain = for_query(QueryKind::Semantic, &Evidence::default());
        let named = for_query(
            QueryKind::Semantic,
            &Evidence {
                named: Some("split".into()),
                ..Evidence::default()
            },
        );
        assert!(named.chunks.keyword > named.chunks.dense);
        assert!(plain.chunks.keyword < plain.chunks.dense);
        assert!(plain.memories.dense > plain.memories.keyword);
        for kind in [
            QueryKind::Identifier,
            QueryKind::Semantic,
            QueryKind::Structural,
        ] {
            let row = kind.path_weights();
            let evidence = Evidence {
                named: Some("split".into()),
                ..Evidence::default()
            };
            let (plain, named) = (
                for_query(kind, &Evidence::default()),
                for_query(kind, &evidence),
            );
            for w in [plain.chunks, plain.memories, named.chunks, named.memories] {
                // The kind's graph share and total stay; only the split moves.
                assert!((w.keyword + w.dense + w.graph - 1.0).abs() < 1e-9);
                assert_eq!(w.graph, row.graph);
            }
        }
        let mut lists = vec![
            RankedList::ranked(CandidatePath::Keyword, vec![ItemRef::Memory("m".into())]),
            RankedList::ranked(CandidatePath::Keyword, vec![ItemRef::Chunk(1)]),
        ];
        // No dense path for either kind: each keyword list carries its kind's whole text
        // weight, the same for chunks and memories, and that is what is reported.
        let keyword_only = Present {
            keyword: [true, true],
            dense: [false, false],
        };
        let used = apply(&mut lists, named, keyword_only, 0.5);
        let text = named.chunks.keyword + named.chunks.dense;
        assert!(
            (lists[0].weight - text).abs() < 1e-12,
            "{}",
            lists[0].weight
        );
        assert_eq!(lists[1].weight, text);
        assert_eq!((used.chunks.keyword, used.chunks.dense), (text, 0.0));
        // With both paths in, each kind's split holds, even where the keyword list is empty
        // (it ran and matched nothing: its weight does not pass to the dense ranks).
        lists[0].items.clear();
        lists.push(RankedList::ranked(
            CandidatePath::Dense,
            vec![ItemRef::Memory("m".into())],
        ));
        lists.push(RankedList::ranked(
            CandidatePath::Dense,
            vec![ItemRef::Chunk(1)],
        ));
        let both = Present {
            keyword: [true, true],
            dense: [true, true],
        };
        assert_eq!(apply(&mut lists, named, both, 0.5), named);
        assert_eq!(lists[1].weight, named.chunks.keyword);
        assert_eq!(lists[2].weight, named.memories.dense);
        assert_eq!(lists[3].weight, named.chunks.dense);
    }
}
