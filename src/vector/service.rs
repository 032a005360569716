//! The engine's in-memory vector indexes, one per (project, item kind, model), loaded on first
//! search and brought up to date before every search by replaying the change log from the last
//! seq they saw. Every writer logs there (the indexer's batch writer, triggers on vectors and
//! memories), so every write, from any thread or process on the file, reaches the indexes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use super::index::VectorIndex;
use super::store::{
    cached_chunk_vectors, load_items, load_project, log_bounds, read_changes, split_key, ItemKind,
    ItemState,
};
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
    /// Chunks without a vector yet, by text hash: when the log says a hash got its vector,
    /// these join the index (the log names the hash, not every chunk that shares it).
    waiting: HashMap<[u8; 16], Vec<i64>>,
    waiting_hash: HashMap<i64, [u8; 16]>,
    /// The part keys known for each grouped chunk, so a chunk that changes or goes takes its
    /// parts with it.
    parts_of: HashMap<i64, Vec<i64>>,
}

impl LoadedIndex {
    fn new(dims: usize, seen_seq: i64) -> Self {
        LoadedIndex {
            index: VectorIndex::new(dims),
            seen_seq,
            waiting: HashMap::new(),
            waiting_hash: HashMap::new(),
            parts_of: HashMap::new(),
        }
    }

    /// Drops whatever the index knew about chunk or memory `id`, and a chunk's parts.
    fn forget_with_parts(&mut self, id: i64) {
        for part in self.parts_of.remove(&id).unwrap_or_default() {
            self.forget(part);
        }
        self.forget(id);
    }

    /// Drops whatever the index knew about key `id`.
    fn forget(&mut self, id: i64) {
        self.index.remove(id);
        if let Some(hash) = self.waiting_hash.remove(&id) {
            if let Some(ids) = self.waiting.get_mut(&hash) {
                ids.retain(|other| *other != id);
                if ids.is_empty() {
                    self.waiting.remove(&hash);
                }
            }
        }
    }

    /// Takes in an item's current state (a chunk's parts are items of their own).
    fn apply(&mut self, item: ItemState) {
        self.forget(item.id);
        if let (chunk, Some(_)) = split_key(item.id) {
            let parts = self.parts_of.entry(chunk).or_default();
            if !parts.contains(&item.id) {
                parts.push(item.id);
            }
        }
        match (item.vector, item.hash) {
            // A zero or non-finite vector has no direction: it stays out of the index.
            (Some(vector), _) => {
                let _ = self.index.upsert(item.id, &vector);
            }
            (None, Some(hash)) => {
                self.waiting.entry(hash).or_default().push(item.id);
                self.waiting_hash.insert(item.id, hash);
            }
            (None, None) => {}
        }
    }
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
            let items =
                load_project(&mut reader, kind, &key.project_id, &key.embedder, dims).await?;
            let mut loaded = LoadedIndex::new(dims, through);
            for item in items {
                loaded.apply(item);
            }
            *slot.state.write().unwrap_or_else(|e| e.into_inner()) = Some(loaded);
            return Ok(slot.clone());
        }
        let seen = seen.unwrap_or(0);
        if through > seen {
            let changes = read_changes(&mut reader, kind, seen, through).await?;
            let items = load_items(
                &mut reader,
                kind,
                &key.project_id,
                &key.embedder,
                dims,
                &changes.ids,
            )
            .await?;
            let hashes = {
                let state = slot.state.read().unwrap_or_else(|e| e.into_inner());
                let waiting = &state.as_ref().expect("loaded above").waiting;
                let wanted: Vec<[u8; 16]> = changes
                    .hashes
                    .iter()
                    .filter(|h| waiting.contains_key(*h))
                    .copied()
                    .collect();
                wanted
            };
            let vectors = cached_chunk_vectors(&mut reader, &key.embedder, dims, &hashes).await?;
            let mut state = slot.state.write().unwrap_or_else(|e| e.into_inner());
            let loaded = state.as_mut().expect("loaded above");
            // Every changed chunk is forgotten with its parts, then what is there now comes
            // back: a re-chunked block may hold fewer parts than before.
            for id in &changes.ids {
                loaded.forget_with_parts(*id);
            }
            for item in items {
                loaded.apply(item);
            }
            // Hashes that got a vector: their waiting chunks join. (A hash whose vector was
            // dropped meanwhile finds none and its chunks keep waiting.)
            for (hash, vector) in vectors {
                for id in loaded.waiting.remove(&hash).unwrap_or_default() {
                    loaded.waiting_hash.remove(&id);
                    let _ = loaded.index.upsert(id, &vector);
                }
            }
            loaded.seen_seq = through;
        }
        Ok(slot.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::part_key;
    use super::*;

    fn state(id: i64, seed: f32) -> ItemState {
        ItemState {
            id,
            hash: Some([seed as u8; 16]),
            vector: Some(vec![1.0, seed, 0.5]),
        }
    }

    #[test]
    fn a_changed_chunk_takes_its_parts_with_it() {
        let mut loaded = LoadedIndex::new(3, 0);
        for item in [
            state(5, 1.0),
            state(part_key(5, 0), 2.0),
            state(part_key(5, 1), 3.0),
            state(6, 4.0),
            state(part_key(6, 0), 5.0),
        ] {
            loaded.apply(item);
        }
        assert_eq!(loaded.index.len(), 5);
        // Chunk 5 is re-chunked with one part: what it had goes, what it has comes back.
        loaded.forget_with_parts(5);
        assert_eq!(loaded.index.len(), 2);
        assert!(loaded.index.contains(6) && loaded.index.contains(part_key(6, 0)));
        loaded.apply(state(5, 1.0));
        loaded.apply(state(part_key(5, 0), 2.0));
        assert_eq!(loaded.index.len(), 4);
        // A part waiting for its vector goes with its chunk too.
        loaded.apply(ItemState {
            id: part_key(6, 1),
            hash: Some([9; 16]),
            vector: None,
        });
        loaded.forget_with_parts(6);
        assert_eq!(loaded.index.len(), 2);
        assert!(loaded.waiting.is_empty() && loaded.waiting_hash.is_empty());
    }

    #[test]
    fn part_keys_never_meet_chunk_ids_and_split_back() {
        for (chunk, ordinal) in [(1, 0), (1, 1023), (7_000_000_000, 5)] {
            let key = part_key(chunk, ordinal);
            assert!(key < 0);
            assert_eq!(split_key(key), (chunk, Some(ordinal)));
        }
        assert_eq!(split_key(42), (42, None));
        assert_ne!(part_key(1, 1023), part_key(2, 0));
    }
}
