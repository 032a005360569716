//! The embedding job: gives every chunk and memory of a project a vector from the current model.
//!
//! Stateless by design, so it is resumable for free: what is left to do is read from the
//! database each time (items without a vector for this model), so a run that was cancelled,
//! crashed or ran under another model simply picks up where the vectors stop. Changing the
//! model therefore re-embeds everything, and the old model's vectors stay until pruned.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::store::{
    cached_chunk_vectors, count_pending, pending, split_key, trim_log, write_vectors, ChunkVectors,
    ItemKind, PendingItem,
};
use crate::clock::Clock;
use crate::embed::{Embedder, EmbedderId};
use crate::error::{Error, Result};
use crate::store::Store;

/// Items read and embedded per step (a chunk's parts are not split across steps): about a second
/// of work for the local model on two cores, which bounds how long a cancellation waits.
const STEP: i64 = 64;

/// Change-log entries kept after a run; an index further behind reloads in full.
const LOG_KEEP: i64 = 200_000;

/// Where a run stands, reported after every step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedProgress {
    /// What is being embedded now.
    pub kind: ItemKind,
    /// Items of this kind given a vector so far in this run (for chunks: chunks and parts).
    pub done: u64,
    /// Items of this kind without a vector when the run started.
    pub total: u64,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedReport {
    /// The model the vectors belong to.
    pub model: EmbedderId,
    /// Chunks given a vector.
    pub chunks: u64,
    /// Parts of chunks (definitions a chunk of several holds) given a vector.
    pub parts: u64,
    /// Memories given a vector.
    pub memories: u64,
    /// Texts actually run through the model (chunks with identical text share one).
    pub texts_embedded: u64,
}

/// Embeds every chunk (and its parts, as `vectors` says), then every memory, of `project_id`
/// that has no vector for `embedder`. `ENGRAM_ABORTED` when `cancel` is raised (everything
/// stored so far stays).
pub async fn embed_pending(
    store: &Store,
    clock: &dyn Clock,
    project_id: &str,
    embedder: Arc<dyn Embedder>,
    vectors: ChunkVectors,
    on_progress: &(dyn Fn(EmbedProgress) + Send + Sync),
    cancel: &AtomicBool,
) -> Result<EmbedReport> {
    let model = embedder.id().clone();
    let key = model.key();
    let mut report = EmbedReport {
        model,
        chunks: 0,
        parts: 0,
        memories: 0,
        texts_embedded: 0,
    };
    for kind in [ItemKind::Chunk, ItemKind::Memory] {
        let total = {
            let mut reader = store.reader().await;
            count_pending(&mut reader, kind, project_id, &key, vectors).await?
        };
        let mut done = 0u64;
        let mut after_id = 0i64;
        on_progress(EmbedProgress { kind, done, total });
        loop {
            if cancel.load(Ordering::Relaxed) {
                return Err(Error::Aborted);
            }
            let page = {
                let mut reader = store.reader().await;
                pending(&mut reader, kind, project_id, &key, after_id, STEP, vectors).await?
            };
            let Some(next_after) = page.next_after else {
                break;
            };
            after_id = next_after;
            let items = page.items;
            if items.is_empty() {
                continue;
            }
            // Chunks whose hash was only computed now (rows from before schema v4) may find
            // their text's vector stored already.
            let cached = match kind {
                ItemKind::Chunk => {
                    let missing: Vec<[u8; 16]> = items
                        .iter()
                        .filter(|item| item.hash_missing)
                        .map(|item| item.hash)
                        .collect();
                    let mut reader = store.reader().await;
                    cached_chunk_vectors(&mut reader, &key, report.model.dims, &missing).await?
                }
                ItemKind::Memory => HashMap::new(),
            };
            let (vectors, distinct) = embed_items(embedder.clone(), &items, &cached).await?;
            write_vectors(store, kind, &key, &items, &vectors, clock.now_ms()).await?;
            report.texts_embedded += distinct;
            done += items.len() as u64;
            match kind {
                ItemKind::Chunk => {
                    let parts = items
                        .iter()
                        .filter(|item| split_key(item.id).1.is_some())
                        .count() as u64;
                    report.parts += parts;
                    report.chunks += items.len() as u64 - parts;
                }
                ItemKind::Memory => report.memories += items.len() as u64,
            }
            // Items added while running can push `done` past the first count.
            on_progress(EmbedProgress {
                kind,
                done,
                total: total.max(done),
            });
        }
        if done > 0 {
            trim_log(store, kind, LOG_KEEP).await?;
        }
    }
    Ok(report)
}

/// One vector per item, and how many distinct texts ran through the model: items with a
/// `cached` vector take it, items with the same text share one model call. Runs the model on the
/// blocking pool.
async fn embed_items(
    embedder: Arc<dyn Embedder>,
    items: &[PendingItem],
    cached: &HashMap<[u8; 16], Vec<f32>>,
) -> Result<(Vec<Vec<f32>>, u64)> {
    let mut slot_of: HashMap<[u8; 16], usize> = HashMap::new();
    let mut texts: Vec<String> = Vec::new();
    let slots: Vec<Option<usize>> = items
        .iter()
        .map(|item| {
            (!cached.contains_key(&item.hash)).then(|| {
                *slot_of.entry(item.hash).or_insert_with(|| {
                    texts.push(item.text.clone());
                    texts.len() - 1
                })
            })
        })
        .collect();
    if texts.is_empty() {
        return Ok((
            items
                .iter()
                .map(|item| cached[&item.hash].clone())
                .collect(),
            0,
        ));
    }
    let distinct = texts.len() as u64;
    let dims = embedder.id().dims;
    let vectors = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder.embed(&refs)
    })
    .await
    .map_err(|e| Error::Internal(format!("embedding worker failed: {e}")))??;
    if vectors.len() != distinct as usize || vectors.iter().any(|v| v.len() != dims) {
        return Err(Error::Embedding(format!(
            "the embedder returned {} vectors for {distinct} texts (expected {dims} dimensions each)",
            vectors.len()
        )));
    }
    let out = items
        .iter()
        .zip(slots)
        .map(|(item, slot)| match slot {
            Some(slot) => vectors[slot].clone(),
            None => cached[&item.hash].clone(),
        })
        .collect();
    Ok((out, distinct))
}
