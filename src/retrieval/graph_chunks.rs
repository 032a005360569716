//! The graph path's chunk ranking: among the chunks of a few files (the recent files and their
//! neighbours), those containing query terms, scored by the summed inverse document frequency
//! of the terms each contains, a term in the chunk's name counting three times.
//!
//! Why not BM25 restricted to those files: FTS5's `bm25()` computes every term's document
//! frequency by walking its whole doclist on each statement and then scores every match of the
//! project before the file filter applies (18 ms for a four-word query at 76k chunks). Here each
//! term costs one count and one walk of its doclist restricted to the files' id range, and the
//! files are few, so the number of matches that matter is small.

use std::collections::{HashMap, HashSet};

use libsql::params;

use super::term_counts::TermCounts;
use crate::code::read::{hits_in_order, CodeHit};
use crate::error::{DbContext, Result};
use crate::store::Reader;
use crate::text::fts_query::FtsQuery;

/// Most rowid ranges one term is looked up in: the files' chunks are runs of consecutive ids
/// (a file's chunks are written together), merged across the smallest gaps down to this many.
const MAX_RANGES: usize = 16;

/// What a term in a chunk's name adds, in multiples of its idf (on top of the idf every
/// match gets).
const NAME_BONUS: f64 = 2.0;

/// Query terms looked up (in their order).
const MAX_TERMS: usize = 8;

/// Terms in more than this share of all chunks are left out...
const UBIQUITOUS_SHARE: f64 = 0.5;
/// ...once they are in this many (in a small project every term counts).
const UBIQUITOUS_MIN_CHUNKS: f64 = 1000.0;

/// The best `limit` chunks for the query text `query` in those of `files` inside `scope` (all
/// of them when `scope` is empty), best first; none when the query has no searchable term.
/// What the graph path and the cascade ask of the files they reach.
pub(crate) async fn rank_in_scope(
    store: &crate::store::Store,
    project_id: &str,
    counts: &mut TermCounts,
    query: &str,
    files: &[String],
    scope: &[String],
    limit: usize,
) -> Result<Vec<CodeHit>> {
    let Some(parsed) = FtsQuery::parse(query) else {
        return Ok(Vec::new());
    };
    let in_scope: Vec<String> = files
        .iter()
        .filter(|f| scope.is_empty() || super::request::under_any(f, scope))
        .cloned()
        .collect();
    if in_scope.is_empty() {
        return Ok(Vec::new());
    }
    let mut reader = store.reader().await;
    rank_in_files(&mut reader, counts, project_id, &parsed, &in_scope, limit).await
}

/// The best `limit` chunks of `files` (project-relative paths) for `query`, best first. A chunk
/// must contain at least one positive term and none of the excluded ones.
pub(crate) async fn rank_in_files(
    reader: &mut Reader<'_>,
    counts: &mut TermCounts,
    project_id: &str,
    query: &FtsQuery,
    files: &[String],
    limit: usize,
) -> Result<Vec<CodeHit>> {
    const CHUNKS_OF_FILES: &str = "SELECT c.id FROM json_each(?2) p
        CROSS JOIN code_files f ON f.project_id = ?1 AND f.path = p.value
        CROSS JOIN code_chunks c ON c.file_id = f.id";
    if files.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let files_json = serde_json::to_string(files).unwrap_or_else(|_| "[]".to_owned());
    let in_files: HashSet<i64> = reader
        .query_cached(CHUNKS_OF_FILES, params![project_id, files_json], |row| {
            row.get::<i64>(0).ctx("chunk id")
        })
        .await?
        .into_iter()
        .collect();
    let ranges = id_ranges(&in_files, MAX_RANGES);
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    let total = counts.total(reader).await? as f64;
    let mut scores: HashMap<i64, f64> = HashMap::new();
    // A long agent query would cost two statements per term and range: its first terms do.
    for expr in query.term_exprs().into_iter().take(MAX_TERMS) {
        let df = counts.of(reader, &expr).await? as f64;
        // A term in most chunks (`file`, which every contextual prefix holds) weighs next to
        // nothing and walking its matches would cost the most.
        if df == 0.0 || df > (total * UBIQUITOUS_SHARE).max(UBIQUITOUS_MIN_CHUNKS) {
            continue;
        }
        let idf = idf(total, df);
        // The term anywhere, then the term in the chunk's name: a name says what the chunk
        // is (the keyword path's BM25 weighs the name column 4x for the same reason). The
        // column filter applies to the exclusions too, so a name match counts only for a
        // chunk the plain match (exclusions and all) took.
        let mut matched: HashSet<i64> = HashSet::new();
        for id in matches_in(reader, &expr, &ranges).await? {
            if in_files.contains(&id) && matched.insert(id) {
                *scores.entry(id).or_default() += idf;
            }
        }
        for id in matches_in(reader, &format!("symbol : ({expr})"), &ranges).await? {
            if matched.contains(&id) {
                *scores.entry(id).or_default() += idf * NAME_BONUS;
            }
        }
    }
    let mut ranked: Vec<(i64, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(limit);
    hits_in_order(reader, project_id, ranked).await
}

/// Rowids matching `expr` within the inclusive `ranges`.
async fn matches_in(
    reader: &mut Reader<'_>,
    expr: &str,
    ranges: &[(i64, i64)],
) -> Result<Vec<i64>> {
    const MATCHES_IN_RANGE: &str = "SELECT rowid FROM code_chunks_fts
        WHERE code_chunks_fts MATCH ?1 AND rowid >= ?2 AND rowid <= ?3";
    let mut out = Vec::new();
    for &(low, high) in ranges {
        out.extend(
            reader
                .query_cached(MATCHES_IN_RANGE, params![expr, low, high], |row| {
                    row.get::<i64>(0).ctx("rowid")
                })
                .await?,
        );
    }
    Ok(out)
}

/// `ids` as at most `max` inclusive ranges covering them all: runs of consecutive ids, with
/// the smallest gaps between runs closed until few enough remain.
fn id_ranges(ids: &HashSet<i64>, max: usize) -> Vec<(i64, i64)> {
    let mut sorted: Vec<i64> = ids.iter().copied().collect();
    sorted.sort_unstable();
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for id in sorted {
        match runs.last_mut() {
            Some((_, high)) if *high + 1 == id => *high = id,
            _ => runs.push((id, id)),
        }
    }
    if runs.len() <= max.max(1) {
        return runs;
    }
    // Close the (len - max) smallest gaps: a gap i lies between runs i and i + 1.
    let mut gaps: Vec<(i64, usize)> = runs
        .windows(2)
        .enumerate()
        .map(|(i, pair)| (pair[1].0 - pair[0].1, i))
        .collect();
    gaps.sort_unstable();
    let mut closed = vec![false; runs.len()];
    for &(_, i) in &gaps[..runs.len() - max.max(1)] {
        closed[i] = true;
    }
    let mut merged: Vec<(i64, i64)> = Vec::new();
    let mut open = runs[0];
    for (i, run) in runs.iter().enumerate().skip(1) {
        if closed[i - 1] {
            open.1 = run.1;
        } else {
            merged.push(open);
            open = *run;
        }
    }
    merged.push(open);
    merged
}

/// Inverse document frequency of a term in `df` of `total` documents: BM25's, with the `+ 1`
/// inside the log (as Lucene has it) so that it stays positive for a term in most documents
/// where FTS5's `bm25()` clamps it to a tiny constant.
pub(crate) fn idf(total: f64, df: f64) -> f64 {
    ((total - df + 0.5) / (df + 0.5) + 1.0).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_ranges_are_runs_merged_across_the_smallest_gaps() {
        let ids: HashSet<i64> = [1, 2, 3, 10, 11, 13, 40, 41].into_iter().collect();
        assert_eq!(
            id_ranges(&ids, 8),
            vec![(1, 3), (10, 11), (13, 13), (40, 41)]
        );
        // Gaps: 7 (3..10), 2 (11..13), 27 (13..40): two ranges close the gap of 2 and then 7.
        assert_eq!(id_ranges(&ids, 2), vec![(1, 13), (40, 41)]);
        assert_eq!(id_ranges(&ids, 1), vec![(1, 41)]);
        assert!(id_ranges(&HashSet::new(), 4).is_empty());
    }
}
