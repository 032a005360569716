//! The engine's in-memory vector indexes, one per (project, item kind, model), loaded on first
//! search and brought up to date before every search by replaying the change log from the last
//! seq they saw. The log is written by triggers, so every writer (the indexer, memory updates,
//! the embedding job, another thread or process on the same file) reaches the indexes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use super::index::VectorIndex;
use super::store::{load_all, load_changed, log_bounds, ItemKind};
use crate::embed::EmbedderId;
use crate::error::Result;
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct IndexKey {
    project_id: String,
    kind: ItemKind,
    embedder: String,
}

/// One index and the last change-log seq it reflects.
#[derive(Debug)]
pub struct LoadedIndex {
    /// The vectors.
    pub index: VectorIndex,
    /// Every log entry up to here is reflected.
    pub seen_seq: i64,
}

/// A slot for one index: refreshes are serialised, searches share a read lock.
#[derive(Debug, Default)]
pub struct IndexSlot {
    refresh: tokio::sync::Mutex<()>,
    state: RwLock<Option<LoadedIndex>>,
}

impl IndexSlot {
    /// Runs `f` on the loaded index (after [`VectorIndexes::current`] it is always loaded).
    pub fn with<T>(&self, f: impl FnOnce(&LoadedIndex) -> T) -> Option<T> {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        state.as_ref().map(f)
    }
}

/// All of an engine's vector indexes.
#[derive(Debug, Default)]
pub struct VectorIndexes {
    slots: Mutex<HashMap<IndexKey, Arc<IndexSlot>>>,
}

impl VectorIndexes {
    /// The index of `kind` items of `project_id` for `embedder`, loaded or refreshed so that it
    /// reflects every write committed before this call.
    pub async fn current(
        &self,
        store: &Store,
        project_id: &str,
        kind: ItemKind,
        embedder: &EmbedderId,
    ) -> Result<Arc<IndexSlot>> {
        let key = IndexKey {
            project_id: project_id.to_owned(),
            kind,
            embedder: embedder.key(),
        };
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.entry(key.clone()).or_default().clone()
        };
        let _refreshing = slot.refresh.lock().await;
        let mut reader = store.reader().await;
        // The log's bounds are read before the rows, so the rows are at least as new as the
        // seq recorded; anything later has a higher seq and is replayed next time.
        let bounds = log_bounds(&mut reader, kind).await?;
        let seen = slot.with(|loaded| loaded.seen_seq);
        let through = bounds.map_or(0, |(_, max)| max);
        let dims = embedder.dims;
        let full_reload = match (seen, bounds) {
            (None, _) => true,
            (Some(seen), None) => seen != 0,
            // Entries after `seen` were trimmed away: replaying cannot catch up.
            (Some(seen), Some((min, _))) => min > seen + 1,
        };
        if full_reload {
            let vectors = load_all(&mut reader, kind, &key.project_id, &key.embedder, dims).await?;
            let mut index = VectorIndex::new(dims);
            for (id, vector) in vectors {
                // A zero or non-finite vector has no direction: leave it out of the index.
                let _ = index.upsert(id, &vector);
            }
            *slot.state.write().unwrap_or_else(|e| e.into_inner()) = Some(LoadedIndex {
                index,
                seen_seq: through,
            });
            return Ok(slot.clone());
        }
        let seen = seen.unwrap_or(0);
        if through > seen {
            let (changed, present) = load_changed(
                &mut reader,
                kind,
                &key.project_id,
                &key.embedder,
                dims,
                seen,
                through,
            )
            .await?;
            let mut state = slot.state.write().unwrap_or_else(|e| e.into_inner());
            let loaded = state.as_mut().expect("loaded above");
            for id in changed {
                loaded.index.remove(id);
            }
            for (id, vector) in present {
                let _ = loaded.index.upsert(id, &vector);
            }
            loaded.seen_seq = through;
        }
        Ok(slot.clone())
    }
}
