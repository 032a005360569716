//! Dense search for one project: the query vector against the chunk and memory indexes of the
//! current model, with optional filters, hits described by what they point at.

use std::collections::HashSet;

use libsql::params;

use super::index::{VectorHit, VectorIndex};
use super::service::VectorIndexes;
use super::store::{split_key, ItemKind};
use crate::embed::EmbedderId;
use crate::error::{DbContext, Error, Result};
use crate::store::{Reader, Store};

/// Most hits one dense search returns.
pub const MAX_DENSE_LIMIT: usize = 1000;

/// What to search and how many hits to return.
#[derive(Debug, Clone)]
pub struct DenseQuery {
    /// Hits wanted (1..=1000), over all kinds together.
    pub limit: usize,
    /// Which items to search (both when empty).
    pub kinds: Vec<ItemKind>,
    /// Chunks only under these paths (a file, or a directory with or without its trailing
    /// `/`); all chunks when empty.
    pub paths: Vec<String>,
    /// Memories only of these types (`decision`, `gotcha`, ...); all types when empty.
    pub memory_types: Vec<String>,
}

impl Default for DenseQuery {
    fn default() -> Self {
        DenseQuery {
            limit: 10,
            kinds: Vec::new(),
            paths: Vec::new(),
            memory_types: Vec::new(),
        }
    }
}

/// One dense hit.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseHit {
    /// A chunk or a memory.
    pub kind: ItemKind,
    /// Cosine similarity to the query.
    pub score: f32,
    /// For chunks: `code_chunks.id`.
    pub chunk_id: Option<i64>,
    /// For chunks: the file, relative to the project root.
    pub path: Option<String>,
    /// For chunks: the qualified name of the definition the chunk holds whose own vector
    /// matched best (a part), else of the definition the chunk is.
    pub symbol: Option<String>,
    /// For chunks: first line, 1-based.
    pub start_line: Option<u32>,
    /// For chunks: last line, inclusive.
    pub end_line: Option<u32>,
    /// For memories: the memory's id.
    pub memory_id: Option<String>,
    /// For memories: its type.
    pub memory_type: Option<String>,
}

/// Searches `project_id`'s indexes of `model` for `query_vector`.
pub(crate) async fn dense_search(
    store: &Store,
    indexes: &VectorIndexes,
    project_id: &str,
    model: &EmbedderId,
    query_vector: Vec<f32>,
    query: &DenseQuery,
) -> Result<Vec<DenseHit>> {
    let scored = dense_ranking(store, indexes, project_id, model, query_vector, query).await?;
    describe(store, scored).await
}

/// One hit of [`dense_ranking`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RankedHit {
    /// A chunk or a memory.
    pub kind: ItemKind,
    /// `code_chunks.id` or a memory's `seq`, and the cosine similarity of its best vector.
    pub hit: VectorHit,
    /// For a grouped chunk whose best vector was one of its parts': the part's ordinal.
    pub part: Option<i64>,
}

/// [`dense_search`] without describing the hits: best first, at most `query.limit`, each an
/// item kind and its id (`code_chunks.id`, or a memory's `seq`). A chunk scores by the best of
/// its own vector and its parts'. For callers that read the items themselves (recall fetches
/// its candidates' rows in one pass after fusion).
pub(crate) async fn dense_ranking(
    store: &Store,
    indexes: &VectorIndexes,
    project_id: &str,
    model: &EmbedderId,
    query_vector: Vec<f32>,
    query: &DenseQuery,
) -> Result<Vec<RankedHit>> {
    if !(1..=MAX_DENSE_LIMIT).contains(&query.limit) {
        return Err(Error::invalid(format!(
            "limit must be within 1..={MAX_DENSE_LIMIT}, got {}",
            query.limit
        )));
    }
    for memory_type in &query.memory_types {
        crate::memory::MemoryType::parse(memory_type)?;
    }
    let kinds = if query.kinds.is_empty() {
        vec![ItemKind::Chunk, ItemKind::Memory]
    } else {
        query.kinds.clone()
    };
    let query_vector = std::sync::Arc::new(query_vector);
    let mut scored: Vec<RankedHit> = Vec::new();
    for kind in kinds {
        let allowed = allowed_ids(store, project_id, kind, query).await?;
        let slot = indexes.current(store, project_id, kind, model).await?;
        let (limit, vector) = (query.limit, query_vector.clone());
        // The scan is CPU work of up to a few ms: keep it off the async workers.
        let hits = tokio::task::spawn_blocking(move || {
            // A part's key passes when its chunk does.
            let allow = allowed.map(|set| move |key: i64| set.contains(&split_key(key).0));
            slot.with(|loaded| {
                let filter = allow.as_ref().map(|f| f as &(dyn Fn(i64) -> bool + Sync));
                best_per_item(&loaded.index, &vector, limit, filter)
            })
            .unwrap_or_else(|| Ok(Vec::new()))
        })
        .await
        .map_err(|e| Error::Internal(format!("vector search task failed: {e}")))??;
        scored.extend(
            hits.into_iter()
                .map(|(hit, part)| RankedHit { kind, hit, part }),
        );
    }
    scored.sort_by(|a, b| b.hit.score.total_cmp(&a.hit.score));
    scored.truncate(query.limit);
    Ok(scored)
}

/// Keys fetched per item wanted on the first try: several parts of one chunk may crowd a top
/// list. A wider list costs little (the scan reads every vector whatever `k` is; only the f32
/// rescoring grows), a second scan costs a whole one.
const KEYS_PER_ITEM: usize = 3;

/// The `limit` best items of `index`, each scored by its best key (a chunk's own vector or a
/// part's), with the part that scored it. The list is widened until `limit` distinct items are
/// found or the index has no more.
fn best_per_item(
    index: &VectorIndex,
    vector: &[f32],
    limit: usize,
    filter: Option<&(dyn Fn(i64) -> bool + Sync)>,
) -> Result<Vec<(VectorHit, Option<i64>)>> {
    let mut wanted = limit
        .saturating_mul(KEYS_PER_ITEM)
        .min(index.len().max(limit));
    loop {
        let hits = index.search(vector, wanted, filter)?.hits;
        let exhausted = hits.len() < wanted || wanted >= index.len();
        let mut best: Vec<(VectorHit, Option<i64>)> = Vec::with_capacity(limit);
        let mut seen = HashSet::new();
        // Hits come best first: an item's first hit is its best.
        for hit in hits {
            let (id, part) = split_key(hit.id);
            if seen.insert(id) {
                best.push((VectorHit { id, ..hit }, part));
            }
        }
        if best.len() >= limit || exhausted {
            best.truncate(limit);
            return Ok(best);
        }
        wanted = wanted.saturating_mul(2).min(index.len());
    }
}

/// The chunks of project `?1` in the file `?2` or under the directory `?3` (`?2` and a
/// slash). The range on the (project, path) index holds `?2` and everything under it (`'0'` is
/// the character after `/`), and some siblings the exact test drops; the exact test alone read
/// every file of the project for each path filter.
const UNDER_PATH: &str = "SELECT c.id FROM code_files f JOIN code_chunks c ON c.file_id = f.id
    WHERE f.project_id = ?1 AND f.path >= ?2 AND f.path < ?2 || '0'
      AND (f.path = ?2 OR substr(f.path, 1, length(?3)) = ?3)";

/// The ids the filters allow for `kind` (`None`: no filter applies).
async fn allowed_ids(
    store: &Store,
    project_id: &str,
    kind: ItemKind,
    query: &DenseQuery,
) -> Result<Option<HashSet<i64>>> {
    const OF_TYPES: &str = "SELECT seq FROM memories
        WHERE project_id = ?1 AND deprecated = 0 AND type IN (SELECT value FROM json_each(?2))";
    let filtered = match kind {
        ItemKind::Chunk => !query.paths.is_empty(),
        ItemKind::Memory => !query.memory_types.is_empty(),
    };
    if !filtered {
        // No reader taken: an unfiltered search does not wait for a pooled connection.
        return Ok(None);
    }
    let mut reader = store.reader().await;
    match kind {
        ItemKind::Chunk => {
            let mut ids = HashSet::new();
            for path in &query.paths {
                let file = path.trim_end_matches('/');
                let dir = format!("{file}/");
                ids.extend(ids_of(&mut reader, UNDER_PATH, params![project_id, file, dir]).await?);
            }
            Ok(Some(ids))
        }
        ItemKind::Memory => {
            let types = serde_json::to_string(&query.memory_types)
                .map_err(|e| Error::Internal(e.to_string()))?;
            let ids = ids_of(&mut reader, OF_TYPES, params![project_id, types]).await?;
            Ok(Some(ids.into_iter().collect()))
        }
    }
}

async fn ids_of(
    reader: &mut Reader<'_>,
    sql: &'static str,
    params: impl libsql::params::IntoParams,
) -> Result<Vec<i64>> {
    reader
        .query_cached(sql, params, |row| row.get::<i64>(0).ctx("item id"))
        .await
}

/// Adds what each hit points at; hits whose item went away since the index was read drop out.
pub(crate) async fn describe(store: &Store, scored: Vec<RankedHit>) -> Result<Vec<DenseHit>> {
    const CHUNKS: &str = "SELECT c.id, f.path, coalesce(c.qualified_name, c.name), c.start_line, c.end_line
        FROM json_each(?1) j JOIN code_chunks c ON c.id = j.value JOIN code_files f ON f.id = c.file_id";
    const MEMORIES: &str =
        "SELECT m.seq, m.id, m.type FROM json_each(?1) j JOIN memories m ON m.seq = j.value";
    let ids_of_kind = |kind: ItemKind| -> Result<String> {
        let ids: Vec<i64> = scored
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.hit.id)
            .collect();
        serde_json::to_string(&ids).map_err(|e| Error::Internal(e.to_string()))
    };
    let mut reader = store.reader().await;
    let chunks = reader
        .query_cached(CHUNKS, params![ids_of_kind(ItemKind::Chunk)?], |row| {
            Ok((
                row.get::<i64>(0).ctx("chunk id")?,
                (
                    row.get::<String>(1).ctx("path")?,
                    row.get::<Option<String>>(2).ctx("symbol")?,
                    row.get::<u32>(3).ctx("start line")?,
                    row.get::<u32>(4).ctx("end line")?,
                ),
            ))
        })
        .await?
        .into_iter()
        .collect::<std::collections::HashMap<_, _>>();
    let memories = reader
        .query_cached(MEMORIES, params![ids_of_kind(ItemKind::Memory)?], |row| {
            Ok((
                row.get::<i64>(0).ctx("memory seq")?,
                (
                    row.get::<String>(1).ctx("memory id")?,
                    row.get::<String>(2).ctx("memory type")?,
                ),
            ))
        })
        .await?
        .into_iter()
        .collect::<std::collections::HashMap<_, _>>();
    let matched = part_symbols(&mut reader, &scored).await?;
    Ok(scored
        .into_iter()
        .filter_map(|RankedHit { kind, hit, part }| {
            let mut out = DenseHit {
                kind,
                score: hit.score,
                chunk_id: None,
                path: None,
                symbol: None,
                start_line: None,
                end_line: None,
                memory_id: None,
                memory_type: None,
            };
            match kind {
                ItemKind::Chunk => {
                    let (path, symbol, start, end) = chunks.get(&hit.id)?.clone();
                    out.chunk_id = Some(hit.id);
                    out.path = Some(path);
                    out.symbol = part
                        .and_then(|ordinal| matched.get(&(hit.id, ordinal)).cloned())
                        .or(symbol);
                    out.start_line = Some(start);
                    out.end_line = Some(end);
                }
                ItemKind::Memory => {
                    let (id, memory_type) = memories.get(&hit.id)?.clone();
                    out.memory_id = Some(id);
                    out.memory_type = Some(memory_type);
                }
            }
            Some(out)
        })
        .collect())
}

/// Parts `?1` (JSON `[chunk id, ordinal]` pairs) with their symbols.
const PART_SYMBOLS: &str = "SELECT p.chunk_id, p.ordinal, p.symbol FROM json_each(?1) j
    CROSS JOIN code_chunk_parts p
      ON p.chunk_id = json_extract(j.value, '$[0]') AND p.ordinal = json_extract(j.value, '$[1]')";

/// The symbols of the parts that scored `scored`'s chunks, by (chunk id, ordinal).
pub(crate) async fn part_symbols(
    reader: &mut Reader<'_>,
    scored: &[RankedHit],
) -> Result<std::collections::HashMap<(i64, i64), String>> {
    let keys: Vec<(i64, i64)> = scored
        .iter()
        .filter_map(|r| Some((r.hit.id, r.part?)))
        .collect();
    if keys.is_empty() {
        return Ok(Default::default());
    }
    let keys = serde_json::to_string(&keys).map_err(|e| Error::Internal(e.to_string()))?;
    let rows = reader
        .query_cached(PART_SYMBOLS, params![keys], |row| {
            Ok((
                (
                    row.get::<i64>(0).ctx("chunk id")?,
                    row.get::<i64>(1).ctx("part ordinal")?,
                ),
                row.get::<String>(2).ctx("part symbol")?,
            ))
        })
        .await?;
    Ok(rows.into_iter().collect())
}

#[cfg(test)]
mod plan_tests {
    use super::{PART_SYMBOLS, UNDER_PATH};
    use crate::store::plan::{list_drives, mentions, query_plan, scans_only_the_list};

    #[tokio::test]
    async fn part_symbols_are_read_by_key() {
        let plan = query_plan(PART_SYMBOLS).await;
        assert!(
            list_drives(&plan) && scans_only_the_list(&plan),
            "{plan:#?}"
        );
        assert!(
            mentions(&plan, "PRIMARY KEY (chunk_id=? AND ordinal=?)"),
            "{plan:#?}"
        );
    }

    #[tokio::test]
    async fn a_path_filter_reads_a_range_of_the_path_index() {
        let plan = query_plan(UNDER_PATH).await;
        assert!(
            mentions(&plan, "(project_id=? AND path>? AND path<?)"),
            "{plan:#?}"
        );
    }
}
