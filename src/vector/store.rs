//! Vectors in libSQL: reading what an in-memory index needs (everything, or what the change log
//! says moved), finding items without a vector for a model, and writing vectors.
//!
//! Chunk vectors are keyed by (model, hash of the embedding text) in the `code` home; memory
//! vectors by (memory, model) in the `main` home. Both homes keep a change log that indexes
//! replay (`code_vector_log`: chunk id ranges from the indexer, text hashes by trigger;
//! `memory_vector_log`: memories, by trigger). Chunk ranges are logged by the indexer's batch
//! writer and `delete_contents`, the only places chunks are inserted or deleted, rather than by
//! a trigger: a trigger per chunk cost ~15% of a cold index.
//!
//! `memory_vectors(memory_seq, embedder)` holds one little-endian f32 blob per memory and model
//! with the hash of its embedding text, dropped by trigger when the memory's content, type,
//! files or modules change. `code_vectors(embedder, text_hash)` holds one vector per model and
//! text: the embedding cache, whose rows no chunk uses stay until pruned.

use std::collections::HashMap;

use libsql::{params, Row};

use crate::code::chunk::{embedding_text, text_hash};
use crate::error::{DbContext, Error, Result};
use crate::store::{begin_write, Reader, Store};

/// What a vector belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ItemKind {
    /// A code chunk (id = `code_chunks.id`).
    Chunk,
    /// A memory (id = `memories.seq`).
    Memory,
}

impl ItemKind {
    /// `chunk` or `memory`.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::Chunk => "chunk",
            ItemKind::Memory => "memory",
        }
    }
}

/// An item that has no vector for a model yet, with the text to embed.
#[derive(Debug, Clone)]
pub struct PendingItem {
    /// Chunk id or memory seq.
    pub id: i64,
    /// The embedding text.
    pub text: String,
    /// Its hash (the key of a chunk's vector).
    pub hash: [u8; 16],
    /// True when the stored row had no hash yet (rows from before schema v4).
    pub hash_missing: bool,
    /// The memory's version when read (0 for chunks): its vector is stored only if the memory
    /// is still at that version.
    pub version: i64,
}

/// Little-endian f32 bytes.
pub fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`encode`]; `None` for a blob of another size.
pub fn decode(bytes: &[u8], dims: usize) -> Option<Vec<f32>> {
    (bytes.len() == dims * 4).then(|| {
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    })
}

/// The lowest and highest seq in a kind's change log (`None` when it is empty).
pub async fn log_bounds(reader: &mut Reader<'_>, kind: ItemKind) -> Result<Option<(i64, i64)>> {
    // Two subqueries, not `min(seq), max(seq)` in one SELECT: SQLite answers a lone min() or
    // max() from the end of the index, but both together scan the whole log (3 ms per dense
    // search at 76k logged chunks).
    const CHUNK: &str =
        "SELECT (SELECT min(seq) FROM code_vector_log), (SELECT max(seq) FROM code_vector_log)";
    const MEMORY: &str =
        "SELECT (SELECT min(seq) FROM memory_vector_log), (SELECT max(seq) FROM memory_vector_log)";
    let sql = match kind {
        ItemKind::Chunk => CHUNK,
        ItemKind::Memory => MEMORY,
    };
    let rows = reader
        .query_cached(sql, (), |row| {
            Ok((
                row.get::<Option<i64>>(0).ctx("log min")?,
                row.get::<Option<i64>>(1).ctx("log max")?,
            ))
        })
        .await?;
    Ok(match rows.first() {
        Some((Some(min), Some(max))) => Some((*min, *max)),
        _ => None,
    })
}

/// An item's current state for an index: its hash (chunks) and its vector for the model, if any.
#[derive(Debug, Clone)]
pub struct ItemState {
    /// Chunk id or memory seq.
    pub id: i64,
    /// A chunk's embedding-text hash (`None` for memories and pre-v4 chunks).
    pub hash: Option<[u8; 16]>,
    /// The vector, when the item has one for the model.
    pub vector: Option<Vec<f32>>,
}

/// What the change log names after a seq: items to re-read, and chunk text hashes whose vector
/// was stored or dropped.
#[derive(Debug, Default)]
pub struct ChangeSet {
    /// Items to re-read (deduplicated).
    pub ids: Vec<i64>,
    /// Chunk text hashes whose vector changed.
    pub hashes: Vec<[u8; 16]>,
}

/// Every item of `project` an index of `kind` holds or waits for: chunks with or without a
/// vector for `embedder`, live memories with one.
pub async fn load_project(
    reader: &mut Reader<'_>,
    kind: ItemKind,
    project_id: &str,
    embedder: &str,
    dims: usize,
) -> Result<Vec<ItemState>> {
    const CHUNK: &str = "SELECT c.id, c.embed_hash, v.vector FROM code_files f
        JOIN code_chunks c ON c.file_id = f.id
        LEFT JOIN code_vectors v ON v.embedder = ?2 AND v.text_hash = c.embed_hash
        WHERE f.project_id = ?1";
    const MEMORY: &str = "SELECT m.seq, NULL, v.vector FROM memories m
        JOIN memory_vectors v ON v.memory_seq = m.seq AND v.embedder = ?2
        WHERE m.project_id = ?1 AND m.deprecated = 0";
    let sql = match kind {
        ItemKind::Chunk => CHUNK,
        ItemKind::Memory => MEMORY,
    };
    reader
        .query_cached(sql, params![project_id, embedder], |row| {
            item_row(row, dims)
        })
        .await
}

/// The log entries after `after_seq` up to `through_seq`.
pub async fn read_changes(
    reader: &mut Reader<'_>,
    kind: ItemKind,
    after_seq: i64,
    through_seq: i64,
) -> Result<ChangeSet> {
    const CHUNK: &str = "SELECT first_chunk, last_chunk, text_hash FROM code_vector_log
        WHERE seq > ?1 AND seq <= ?2";
    const MEMORY: &str =
        "SELECT DISTINCT memory_seq FROM memory_vector_log WHERE seq > ?1 AND seq <= ?2";
    let mut changes = ChangeSet::default();
    match kind {
        ItemKind::Chunk => {
            let rows = reader
                .query_cached(CHUNK, params![after_seq, through_seq], |row| {
                    Ok((
                        row.get::<Option<i64>>(0).ctx("first chunk")?,
                        row.get::<Option<i64>>(1).ctx("last chunk")?,
                        row.get::<Option<Vec<u8>>>(2).ctx("text hash")?,
                    ))
                })
                .await?;
            let mut ids = std::collections::HashSet::new();
            for (first, last, hash) in rows {
                if let (Some(first), Some(last)) = (first, last) {
                    ids.extend(first..=last);
                }
                if let Some(hash) = hash.and_then(|h| <[u8; 16]>::try_from(h.as_slice()).ok()) {
                    changes.hashes.push(hash);
                }
            }
            changes.ids = ids.into_iter().collect();
        }
        ItemKind::Memory => {
            changes.ids = reader
                .query_cached(MEMORY, params![after_seq, through_seq], |row| {
                    row.get::<i64>(0).ctx("memory seq")
                })
                .await?;
        }
    }
    Ok(changes)
}

// Both statements are written with CROSS JOIN, which fixes SQLite's loop order: the id list
// first, then one indexed lookup per id. Left to itself (engram's files have no statistics),
// the planner looped over every chunk (memory) of the project and re-read the whole list
// inside that loop, so one batch cost as much as the project was large.

/// Chunks `?3` (JSON ids) of project `?1` with their vector from embedder `?2`, if any.
const CHUNK_STATES: &str = "SELECT c.id, c.embed_hash, v.vector FROM json_each(?3) j
    CROSS JOIN code_chunks c ON c.id = j.value
    CROSS JOIN code_files f ON f.id = c.file_id AND f.project_id = ?1
    LEFT JOIN code_vectors v ON v.embedder = ?2 AND v.text_hash = c.embed_hash";

/// Active memories `?3` (JSON seqs) of project `?1` that have a vector from embedder `?2`.
const MEMORY_STATES: &str = "SELECT m.seq, NULL, v.vector FROM json_each(?3) j
    CROSS JOIN memories m ON m.seq = j.value AND m.project_id = ?1 AND m.deprecated = 0
    CROSS JOIN memory_vectors v ON v.memory_seq = m.seq AND v.embedder = ?2";

/// The current state of `ids` in `project` (items gone, or of another project, are absent).
pub async fn load_items(
    reader: &mut Reader<'_>,
    kind: ItemKind,
    project_id: &str,
    embedder: &str,
    dims: usize,
    ids: &[i64],
) -> Result<Vec<ItemState>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = match kind {
        ItemKind::Chunk => CHUNK_STATES,
        ItemKind::Memory => MEMORY_STATES,
    };
    let ids = serde_json::to_string(ids).map_err(|e| Error::Internal(e.to_string()))?;
    reader
        .query_cached(sql, params![project_id, embedder, ids], |row| {
            item_row(row, dims)
        })
        .await
}

fn item_row(row: &Row, dims: usize) -> Result<ItemState> {
    let hash: Option<Vec<u8>> = row.get(1).ctx("embed hash")?;
    let vector: Option<Vec<u8>> = row.get(2).ctx("vector")?;
    Ok(ItemState {
        id: row.get(0).ctx("item id")?,
        hash: hash.and_then(|h| <[u8; 16]>::try_from(h.as_slice()).ok()),
        // A blob of another width cannot come from this model's key; treat it as missing.
        vector: vector.and_then(|v| decode(&v, dims)),
    })
}

/// Up to `limit` items of `project` with no vector for `embedder`, ids above `after_id`, in id
/// order, with their embedding texts.
pub async fn pending(
    reader: &mut Reader<'_>,
    kind: ItemKind,
    project_id: &str,
    embedder: &str,
    after_id: i64,
    limit: i64,
) -> Result<Vec<PendingItem>> {
    const CHUNK: &str = "SELECT c.id, c.context, c.content, c.embed_hash FROM code_files f
        JOIN code_chunks c ON c.file_id = f.id
        WHERE f.project_id = ?1 AND c.id > ?3
          AND (c.embed_hash IS NULL OR NOT EXISTS
               (SELECT 1 FROM code_vectors v WHERE v.embedder = ?2 AND v.text_hash = c.embed_hash))
        ORDER BY c.id LIMIT ?4 + 0";
    const MEMORY: &str =
        "SELECT m.seq, m.type, m.content, m.related_files, m.related_modules, m.version FROM memories m
        WHERE m.project_id = ?1 AND m.deprecated = 0 AND m.seq > ?3
          AND NOT EXISTS
               (SELECT 1 FROM memory_vectors v WHERE v.memory_seq = m.seq AND v.embedder = ?2)
        ORDER BY m.seq LIMIT ?4 + 0";
    match kind {
        ItemKind::Chunk => {
            reader
                .query_cached(
                    CHUNK,
                    params![project_id, embedder, after_id, limit],
                    |row| {
                        let text = embedding_text(
                            &row.get::<String>(1).ctx("context")?,
                            &row.get::<String>(2).ctx("content")?,
                        );
                        let stored: Option<Vec<u8>> = row.get(3).ctx("embed hash")?;
                        let hash = text_hash(&text);
                        Ok(PendingItem {
                            id: row.get(0).ctx("chunk id")?,
                            hash_missing: stored.as_deref() != Some(&hash[..]),
                            text,
                            hash,
                            version: 0,
                        })
                    },
                )
                .await
        }
        ItemKind::Memory => {
            reader
                .query_cached(
                    MEMORY,
                    params![project_id, embedder, after_id, limit],
                    |row| {
                        let list = |i: i32, what: &str| -> Result<Vec<String>> {
                            let json: String = row.get(i).ctx(what)?;
                            Ok(serde_json::from_str(&json).unwrap_or_default())
                        };
                        let text = crate::memory::model::embedding_text(
                            &row.get::<String>(1).ctx("type")?,
                            &row.get::<String>(2).ctx("content")?,
                            &list(3, "related files")?,
                            &list(4, "related modules")?,
                        );
                        Ok(PendingItem {
                            id: row.get(0).ctx("memory seq")?,
                            hash: text_hash(&text),
                            hash_missing: false,
                            version: row.get(5).ctx("version")?,
                            text,
                        })
                    },
                )
                .await
        }
    }
}

/// How many items of `project` have no vector for `embedder`.
pub async fn count_pending(
    reader: &mut Reader<'_>,
    kind: ItemKind,
    project_id: &str,
    embedder: &str,
) -> Result<u64> {
    const CHUNK: &str = "SELECT count(*) FROM code_files f
        JOIN code_chunks c ON c.file_id = f.id
        WHERE f.project_id = ?1
          AND (c.embed_hash IS NULL OR NOT EXISTS
               (SELECT 1 FROM code_vectors v WHERE v.embedder = ?2 AND v.text_hash = c.embed_hash))";
    const MEMORY: &str = "SELECT count(*) FROM memories m
        WHERE m.project_id = ?1 AND m.deprecated = 0
          AND NOT EXISTS
               (SELECT 1 FROM memory_vectors v WHERE v.memory_seq = m.seq AND v.embedder = ?2)";
    let sql = match kind {
        ItemKind::Chunk => CHUNK,
        ItemKind::Memory => MEMORY,
    };
    let rows = reader
        .query_cached(sql, params![project_id, embedder], |row| {
            row.get::<i64>(0).ctx("pending count")
        })
        .await?;
    Ok(rows.first().copied().unwrap_or(0).max(0) as u64)
}

/// The stored chunk vectors of `embedder` among `hashes` (the embedding cache).
pub async fn cached_chunk_vectors(
    reader: &mut Reader<'_>,
    embedder: &str,
    dims: usize,
    hashes: &[[u8; 16]],
) -> Result<HashMap<[u8; 16], Vec<f32>>> {
    const SQL: &str = "SELECT vector FROM code_vectors WHERE embedder = ?1 AND text_hash = ?2";
    let mut found = HashMap::new();
    for hash in hashes {
        let rows = reader
            .query_cached(SQL, params![embedder, hash.to_vec()], |row| {
                Ok(decode(&row.get::<Vec<u8>>(0).ctx("vector")?, dims))
            })
            .await?;
        if let Some(Some(vector)) = rows.into_iter().next() {
            found.insert(*hash, vector);
        }
    }
    Ok(found)
}

/// Stores the vectors of `items` (same order as `vectors`) for `embedder` in one transaction.
/// A chunk whose row lacked its hash gets it too; a memory that changed or went away since
/// it was read is skipped (the vector would describe its old text).
pub async fn write_vectors(
    store: &Store,
    kind: ItemKind,
    embedder: &str,
    items: &[PendingItem],
    vectors: &[Vec<f32>],
    now_ms: i64,
) -> Result<()> {
    const CHUNK: &str = "INSERT INTO code_vectors (embedder, text_hash, vector, created_at)
        VALUES (?1, ?2, ?3, ?4) ON CONFLICT (embedder, text_hash) DO NOTHING";
    const CHUNK_HASH: &str = "UPDATE code_chunks SET embed_hash = ?2 WHERE id = ?1";
    // Only while the memory is live and at the version that was read.
    const MEMORY: &str =
        "INSERT INTO memory_vectors (memory_seq, embedder, text_hash, vector, created_at)
        SELECT ?1, ?2, ?3, ?4, ?5 FROM memories WHERE seq = ?1 AND deprecated = 0 AND version = ?6
        ON CONFLICT (memory_seq, embedder) DO NOTHING";
    let mut conn = store.writer().await;
    let tx = begin_write(&conn).await?;
    match kind {
        ItemKind::Chunk => {
            let insert = conn.cached(CHUNK).await?;
            let rehash = conn.cached(CHUNK_HASH).await?;
            for (item, vector) in items.iter().zip(vectors) {
                if item.hash_missing {
                    rehash
                        .execute(params![item.id, item.hash.to_vec()])
                        .await
                        .ctx("storing a chunk's embedding hash")?;
                    rehash.reset();
                }
                insert
                    .execute(params![
                        embedder,
                        item.hash.to_vec(),
                        encode(vector),
                        now_ms
                    ])
                    .await
                    .ctx("storing a chunk vector")?;
                insert.reset();
            }
        }
        ItemKind::Memory => {
            let insert = conn.cached(MEMORY).await?;
            for (item, vector) in items.iter().zip(vectors) {
                insert
                    .execute(params![
                        item.id,
                        embedder,
                        item.hash.to_vec(),
                        encode(vector),
                        now_ms,
                        item.version
                    ])
                    .await
                    .ctx("storing a memory vector")?;
                insert.reset();
            }
        }
    }
    tx.commit().await.ctx("committing vectors")?;
    Ok(())
}

/// Keeps the last `keep` entries of a kind's change log (at least one, so a reader can always
/// tell whether it fell behind the trim).
pub async fn trim_log(store: &Store, kind: ItemKind, keep: i64) -> Result<()> {
    const CHUNK: &str =
        "DELETE FROM code_vector_log WHERE seq <= (SELECT max(seq) FROM code_vector_log) - ?1";
    const MEMORY: &str =
        "DELETE FROM memory_vector_log WHERE seq <= (SELECT max(seq) FROM memory_vector_log) - ?1";
    let sql = match kind {
        ItemKind::Chunk => CHUNK,
        ItemKind::Memory => MEMORY,
    };
    let conn = store.writer().await;
    conn.execute(sql, params![keep.max(1)])
        .await
        .ctx("trimming the vector change log")?;
    Ok(())
}

#[cfg(test)]
mod plan_tests {
    use super::{CHUNK_STATES, MEMORY_STATES};
    use crate::store::plan::{list_drives, query_plan};

    #[tokio::test]
    async fn item_states_loop_over_the_given_ids() {
        for sql in [CHUNK_STATES, MEMORY_STATES] {
            let plan = query_plan(sql).await;
            assert!(list_drives(&plan), "{sql}\n{plan:#?}");
        }
    }
}
