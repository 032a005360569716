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
//! A grouped chunk's parts (`code_chunk_parts`: the small definitions it holds) have vectors
//! of their own in the same chunk index, under negative keys ([`part_key`]); they come and go
//! with their chunk, so the chunk ranges of the log cover them. An engine that turns them off
//! ([`ChunkVectors::ChunksOnly`], for paid embedding APIs) leaves the rows without vectors: the
//! run neither counts nor embeds them, and turning them back on embeds them without a re-index.
//!
//! `memory_vectors(memory_seq, embedder)` holds one little-endian f32 blob per memory and model
//! with the hash of its embedding text, dropped by trigger when the memory's content, type,
//! files or modules change. `code_vectors(embedder, text_hash)` holds one vector per model and
//! text: the embedding cache, whose rows no chunk uses stay until pruned.

use std::collections::HashMap;

use libsql::{params, Row};

use crate::code::chunk::{embedding_text, text_hash, MAX_PARTS};
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

/// The chunk index's key for part `ordinal` of chunk `chunk_id`: negative, so it never meets a
/// chunk's own key (its id).
pub fn part_key(chunk_id: i64, ordinal: i64) -> i64 {
    -(chunk_id * MAX_PARTS as i64 + ordinal) - 1
}

/// The chunk a key of the chunk index belongs to, and the part's ordinal for a part's key.
pub fn split_key(key: i64) -> (i64, Option<i64>) {
    if key >= 0 {
        return (key, None);
    }
    let n = -(key + 1);
    (n / MAX_PARTS as i64, Some(n % MAX_PARTS as i64))
}

/// An item that has no vector for a model yet, with the text to embed.
#[derive(Debug, Clone)]
pub struct PendingItem {
    /// Chunk id, a part's key ([`part_key`]) or memory seq.
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
    /// Chunk id, a part's key ([`part_key`]) or memory seq.
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
    const CHUNK: &str = "SELECT c.id, NULL, c.embed_hash, v.vector FROM code_files f
        JOIN code_chunks c ON c.file_id = f.id
        LEFT JOIN code_vectors v ON v.embedder = ?2 AND v.text_hash = c.embed_hash
        WHERE f.project_id = ?1
        UNION ALL
        SELECT p.chunk_id, p.ordinal, p.embed_hash, v.vector FROM code_files f
        JOIN code_chunks c ON c.file_id = f.id
        JOIN code_chunk_parts p ON p.chunk_id = c.id
        LEFT JOIN code_vectors v ON v.embedder = ?2 AND v.text_hash = p.embed_hash
        WHERE f.project_id = ?1";
    const MEMORY: &str = "SELECT m.seq, NULL, NULL, v.vector FROM memories m
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

/// Chunks `?3` (JSON ids) of project `?1` and their parts, with their vector from embedder
/// `?2`, if any.
const CHUNK_STATES: &str = "SELECT c.id, NULL, c.embed_hash, v.vector FROM json_each(?3) j
    CROSS JOIN code_chunks c ON c.id = j.value
    CROSS JOIN code_files f ON f.id = c.file_id AND f.project_id = ?1
    LEFT JOIN code_vectors v ON v.embedder = ?2 AND v.text_hash = c.embed_hash
    UNION ALL
    SELECT p.chunk_id, p.ordinal, p.embed_hash, v.vector FROM json_each(?3) j
    CROSS JOIN code_chunks c ON c.id = j.value
    CROSS JOIN code_files f ON f.id = c.file_id AND f.project_id = ?1
    CROSS JOIN code_chunk_parts p ON p.chunk_id = c.id
    LEFT JOIN code_vectors v ON v.embedder = ?2 AND v.text_hash = p.embed_hash";

/// Active memories `?3` (JSON seqs) of project `?1` that have a vector from embedder `?2`.
const MEMORY_STATES: &str = "SELECT m.seq, NULL, NULL, v.vector FROM json_each(?3) j
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

/// Reads (id, part ordinal, hash, vector).
fn item_row(row: &Row, dims: usize) -> Result<ItemState> {
    let id: i64 = row.get(0).ctx("item id")?;
    let ordinal: Option<i64> = row.get(1).ctx("part ordinal")?;
    let hash: Option<Vec<u8>> = row.get(2).ctx("embed hash")?;
    let vector: Option<Vec<u8>> = row.get(3).ctx("vector")?;
    Ok(ItemState {
        id: ordinal.map_or(id, |ordinal| part_key(id, ordinal)),
        hash: hash.and_then(|h| <[u8; 16]>::try_from(h.as_slice()).ok()),
        // A blob of another width cannot come from this model's key; treat it as missing.
        vector: vector.and_then(|v| decode(&v, dims)),
    })
}

/// Chunk `c` has no vector for embedder `?2`.
macro_rules! chunk_unembedded {
    () => {
        "(c.embed_hash IS NULL
          OR NOT EXISTS (SELECT 1 FROM code_vectors v WHERE v.embedder = ?2 AND v.text_hash = c.embed_hash))"
    };
}

/// One of chunk `c`'s parts has no vector for embedder `?2`.
macro_rules! part_unembedded {
    () => {
        "EXISTS (SELECT 1 FROM code_chunk_parts p
               WHERE p.chunk_id = c.id AND length(p.embed_hash) = 16 AND NOT EXISTS
               (SELECT 1 FROM code_vectors v WHERE v.embedder = ?2 AND v.text_hash = p.embed_hash))"
    };
}

/// Which vectors of code an embedding run gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkVectors {
    /// Every chunk's, and each of its parts' (the definitions a grouped chunk holds).
    WithParts,
    /// Chunks' own only: parts stay without one (they are kept, so that switching back embeds
    /// them without a re-index).
    ChunksOnly,
}

/// A page of [`pending`] items.
#[derive(Debug, Default)]
pub struct PendingPage {
    /// The items, with their embedding texts.
    pub items: Vec<PendingItem>,
    /// The chunk id or memory seq the next page starts after; `None` when nothing is left.
    /// A page may hold no items and still have a next one (its chunks' missing parts were
    /// embedded by another run between its two reads).
    pub next_after: Option<i64>,
}

/// Items of `project` with no vector for `embedder`, after `after_id` (a chunk id or memory
/// seq), in id order: up to `limit` memories, or chunks that lack a vector themselves or for one
/// of their parts, each with its parts that lack one, cut at a chunk once `limit` items are
/// reached.
pub async fn pending(
    reader: &mut Reader<'_>,
    kind: ItemKind,
    project_id: &str,
    embedder: &str,
    after_id: i64,
    limit: i64,
    vectors: ChunkVectors,
) -> Result<PendingPage> {
    const CHUNK_OR_PART: &str = concat!(
        "SELECT c.id, c.context, c.content, c.embed_hash, ",
        chunk_unembedded!(),
        " FROM code_files f JOIN code_chunks c ON c.file_id = f.id
         WHERE f.project_id = ?1 AND c.id > ?3 AND (",
        chunk_unembedded!(),
        " OR ",
        part_unembedded!(),
        ") ORDER BY c.id LIMIT ?4 + 0"
    );
    const CHUNK_ONLY: &str = concat!(
        "SELECT c.id, c.context, c.content, c.embed_hash, 1
         FROM code_files f JOIN code_chunks c ON c.file_id = f.id
         WHERE f.project_id = ?1 AND c.id > ?3 AND ",
        chunk_unembedded!(),
        " ORDER BY c.id LIMIT ?4 + 0"
    );
    const MEMORY: &str =
        "SELECT m.seq, m.type, m.content, m.related_files, m.related_modules, m.version FROM memories m
        WHERE m.project_id = ?1 AND m.deprecated = 0 AND m.seq > ?3
          AND NOT EXISTS
               (SELECT 1 FROM memory_vectors v WHERE v.memory_seq = m.seq AND v.embedder = ?2)
        ORDER BY m.seq LIMIT ?4 + 0";
    match kind {
        ItemKind::Chunk => {
            let sql = match vectors {
                ChunkVectors::WithParts => CHUNK_OR_PART,
                ChunkVectors::ChunksOnly => CHUNK_ONLY,
            };
            let chunks = reader
                .query_cached(sql, params![project_id, embedder, after_id, limit], |row| {
                    let id: i64 = row.get(0).ctx("chunk id")?;
                    let context: String = row.get(1).ctx("context")?;
                    let content: String = row.get(2).ctx("content")?;
                    let stored: Option<Vec<u8>> = row.get(3).ctx("embed hash")?;
                    let own_missing = row.get::<i64>(4).ctx("vector missing")? != 0;
                    let own = own_missing.then(|| {
                        let text = embedding_text(&context, &content);
                        let hash = text_hash(&text);
                        PendingItem {
                            id,
                            hash_missing: stored.as_deref() != Some(&hash[..]),
                            text,
                            hash,
                            version: 0,
                        }
                    });
                    Ok((id, content, own))
                })
                .await?;
            let ids: Vec<i64> = chunks.iter().map(|(id, ..)| *id).collect();
            let mut parts = match vectors {
                ChunkVectors::WithParts => pending_parts(reader, embedder, &ids).await?,
                ChunkVectors::ChunksOnly => HashMap::new(),
            };
            let mut page = PendingPage::default();
            for (id, content, own) in chunks {
                if page.items.len() >= limit.max(1) as usize {
                    break; // this chunk starts the next page
                }
                page.items.extend(own);
                for (ordinal, context, range, hash) in parts.remove(&id).unwrap_or_default() {
                    // A range that does not cut the content at characters cannot come from the
                    // chunker; such a part is embedded by its prefix (its name) alone, so that it
                    // is not pending for ever.
                    let body = content.get(range).unwrap_or_default();
                    page.items.push(PendingItem {
                        id: part_key(id, ordinal),
                        text: embedding_text(&context, body),
                        hash,
                        hash_missing: false,
                        version: 0,
                    });
                }
                page.next_after = Some(id);
            }
            Ok(page)
        }
        ItemKind::Memory => {
            let items = reader
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
                        let seq: i64 = row.get(0).ctx("memory seq")?;
                        Ok(PendingItem {
                            id: seq,
                            hash: text_hash(&text),
                            hash_missing: false,
                            version: row.get(5).ctx("version")?,
                            text,
                        })
                    },
                )
                .await?;
            Ok(PendingPage {
                next_after: items.last().map(|item| item.id),
                items,
            })
        }
    }
}

/// A part's ordinal, prefix, byte range in its chunk's content, and vector key.
type PendingPart = (i64, String, std::ops::Range<usize>, [u8; 16]);

/// The parts of chunks `?2` (JSON ids) with no vector for embedder `?1`.
const PENDING_PARTS: &str =
    "SELECT p.chunk_id, p.ordinal, p.context, p.start_off, p.end_off, p.embed_hash
    FROM json_each(?2) j CROSS JOIN code_chunk_parts p ON p.chunk_id = j.value
    WHERE length(p.embed_hash) = 16 AND NOT EXISTS
      (SELECT 1 FROM code_vectors v WHERE v.embedder = ?1 AND v.text_hash = p.embed_hash)
    ORDER BY p.chunk_id, p.ordinal";

/// The parts of `chunk_ids` with no vector for `embedder`, by chunk, in ordinal order.
async fn pending_parts(
    reader: &mut Reader<'_>,
    embedder: &str,
    chunk_ids: &[i64],
) -> Result<HashMap<i64, Vec<PendingPart>>> {
    let mut parts: HashMap<i64, Vec<PendingPart>> = HashMap::new();
    if chunk_ids.is_empty() {
        return Ok(parts);
    }
    let ids = serde_json::to_string(chunk_ids).map_err(|e| Error::Internal(e.to_string()))?;
    let rows = reader
        .query_cached(PENDING_PARTS, params![embedder, ids], |row| {
            let offset = |i: i32, what: &str| -> Result<usize> {
                Ok(row.get::<i64>(i).ctx(what)?.max(0) as usize)
            };
            let hash: Vec<u8> = row.get(5).ctx("part hash")?;
            Ok((
                row.get::<i64>(0).ctx("chunk id")?,
                row.get::<i64>(1).ctx("part ordinal")?,
                row.get::<String>(2).ctx("part context")?,
                offset(3, "part start")?..offset(4, "part end")?,
                <[u8; 16]>::try_from(hash.as_slice()).ok(),
            ))
        })
        .await?;
    for (chunk_id, ordinal, context, range, hash) in rows {
        if let Some(hash) = hash {
            parts
                .entry(chunk_id)
                .or_default()
                .push((ordinal, context, range, hash));
        }
    }
    Ok(parts)
}

/// How many items of `project` have no vector for `embedder` (for chunks: chunks, and parts
/// unless `vectors` is [`ChunkVectors::ChunksOnly`]).
pub async fn count_pending(
    reader: &mut Reader<'_>,
    kind: ItemKind,
    project_id: &str,
    embedder: &str,
    vectors: ChunkVectors,
) -> Result<u64> {
    const CHUNK_ONLY: &str = concat!(
        "SELECT (SELECT count(*) FROM code_files f JOIN code_chunks c ON c.file_id = f.id
         WHERE f.project_id = ?1 AND ",
        chunk_unembedded!(),
        ")"
    );
    const CHUNK_OR_PART: &str = concat!(
        "SELECT (SELECT count(*) FROM code_files f JOIN code_chunks c ON c.file_id = f.id
         WHERE f.project_id = ?1 AND ",
        chunk_unembedded!(),
        ") + (SELECT count(*) FROM code_files f JOIN code_chunks c ON c.file_id = f.id
         JOIN code_chunk_parts p ON p.chunk_id = c.id
         WHERE f.project_id = ?1 AND length(p.embed_hash) = 16 AND NOT EXISTS
               (SELECT 1 FROM code_vectors v WHERE v.embedder = ?2 AND v.text_hash = p.embed_hash))"
    );
    const MEMORY: &str = "SELECT count(*) FROM memories m
        WHERE m.project_id = ?1 AND m.deprecated = 0
          AND NOT EXISTS
               (SELECT 1 FROM memory_vectors v WHERE v.memory_seq = m.seq AND v.embedder = ?2)";
    let sql = match (kind, vectors) {
        (ItemKind::Chunk, ChunkVectors::WithParts) => CHUNK_OR_PART,
        (ItemKind::Chunk, ChunkVectors::ChunksOnly) => CHUNK_ONLY,
        (ItemKind::Memory, _) => MEMORY,
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
    use super::{CHUNK_STATES, MEMORY_STATES, PENDING_PARTS};
    use crate::store::plan::{list_drives, query_plan, scans_only_the_list};

    #[tokio::test]
    async fn item_states_loop_over_the_given_ids() {
        for sql in [CHUNK_STATES, MEMORY_STATES, PENDING_PARTS] {
            let plan = query_plan(sql).await;
            assert!(list_drives(&plan), "{sql}\n{plan:#?}");
            // Every branch of a UNION ALL too: no table is scanned whole.
            assert!(scans_only_the_list(&plan), "{sql}\n{plan:#?}");
        }
    }
}
