//! The memory rows `impact()` answers with, kept beside the served graph index (issue 38): a
//! file target's answer carries ~60 memories on the bench graph, and reading them from SQLite
//! (one random row lookup each) was most of what the index left of its time.
//!
//! Filled lazily by the answers themselves (what a read found, or that a seq has no memory that
//! is not forgotten), emptied of every seq `memory_row_log` names when the served index replays
//! its logs (a trigger logs every update and delete of a memory, whoever wrote it: an update, a
//! touch, a forget, a sync pull), and cleared whole when the log was trimmed past it, when a
//! replay would drop more rows than it is worth reading, or when it passes its byte cap.
//!
//! Why an answer may fill it under the index's read lock: a replay takes the write lock, so no
//! replay runs while an answer fills; the answer's reader started after the refresh that
//! brought the index to log position P, so what it reads is at least as new as P; and any
//! change after P is logged after P, so the next replay drops it.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use crate::error::{DbContext, Result};
use crate::memory::model::Memory;
use crate::memory::rows::{from_row, COLUMN_COUNT, SELECT_M};
use crate::store::Reader;

/// Bytes of memory rows kept at most (content and fields); past it the cache starts over.
const MAX_BYTES: usize = 32 << 20;

/// Estimated bytes of a cached memory beyond its content: its other fields and the map entry.
const MEMORY_OVERHEAD: usize = 640;

/// The memories (forgotten ones too) among seqs `?1` (JSON), with their seq.
static MEMORIES_BY_SEQ_ANY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {cols}, m.seq FROM memories m WHERE m.seq IN (SELECT value FROM json_each(?1))",
        cols = *SELECT_M
    )
});

/// The memories `sql` selects (with [`SELECT_M`]'s columns, then the seq) for seqs `?1`
/// (given as JSON), by seq.
pub(crate) async fn memories_by_seq(
    reader: &mut Reader<'_>,
    sql: &'static str,
    seqs: &[i64],
) -> Result<HashMap<i64, Memory>> {
    let rows = reader
        .query_cached(
            sql,
            [serde_json::to_string(seqs).unwrap_or_default()],
            |row| Ok((row.get::<i64>(COLUMN_COUNT).ctx("memory")?, from_row(row)?)),
        )
        .await?;
    Ok(rows.into_iter().collect())
}

/// Cached memory rows by seq: `None` for a seq with no memory or a forgotten one.
#[derive(Debug, Default)]
pub(crate) struct MemoryRows {
    cached: Mutex<Cached>,
}

#[derive(Debug, Default)]
struct Cached {
    rows: HashMap<i64, Option<Memory>>,
    bytes: usize,
}

impl MemoryRows {
    /// The memories among `seqs` that exist and are not forgotten, by seq: from the cache,
    /// the rest read through `reader` (and cached).
    pub(crate) async fn read(
        &self,
        reader: &mut Reader<'_>,
        seqs: &[i64],
    ) -> Result<HashMap<i64, Memory>> {
        let mut found = HashMap::with_capacity(seqs.len());
        let mut missing = Vec::new();
        {
            let cached = self.lock();
            for &seq in seqs {
                match cached.rows.get(&seq) {
                    Some(Some(memory)) => {
                        found.insert(seq, memory.clone());
                    }
                    Some(None) => {}
                    None => missing.push(seq),
                }
            }
        }
        if missing.is_empty() {
            return Ok(found);
        }
        let read = memories_by_seq(reader, MEMORIES_BY_SEQ_ANY.as_str(), &missing).await?;
        let mut cached = self.lock();
        for seq in missing {
            let memory = read.get(&seq).filter(|m| !m.deprecated).cloned();
            cached.bytes += memory
                .as_ref()
                .map_or(0, |m| m.content.len() + MEMORY_OVERHEAD);
            if let Some(memory) = &memory {
                found.insert(seq, memory.clone());
            }
            cached.rows.insert(seq, memory);
        }
        if cached.bytes > MAX_BYTES {
            *cached = Cached::default();
        }
        Ok(found)
    }

    /// Drops what is cached of `seqs` (changed or gone since it was read).
    pub(crate) fn forget(&self, seqs: &[i64]) {
        let mut cached = self.lock();
        for seq in seqs {
            if let Some(Some(memory)) = cached.rows.remove(seq) {
                cached.bytes = cached
                    .bytes
                    .saturating_sub(memory.content.len() + MEMORY_OVERHEAD);
            }
        }
    }

    /// Drops everything cached.
    pub(crate) fn clear(&self) {
        *self.lock() = Cached::default();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cached> {
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }
}
