//! Cascade retrieval (the jcode seed's): a breadth-first walk from recall's top hits over the
//! edges that join what they are about, each hop weighted and decayed, whose finds join the
//! fusion as one more ranked list (`ranks.cascade`).
//!
//! From the top [`SEEDS`] fused items, each weighted by its score over the top score:
//! - hop 1: a chunk's file and a memory's related files ([`SAME_FILE`]), and the memories a
//!   memory names in its relations (the relation's confidence);
//! - hop 2: the files one code edge (an import, a call, an inheritance, an agent's or LLM's
//!   relation) from a hop-1 file ([`CODE_EDGE`]).
//!
//! Each hop also multiplies by [`DECAY`]; a file or memory reached twice keeps its best score.
//! What the walk returns: in each reached file, the chunks sharing a term with the query (by
//! the terms' rarity, like the graph path's) and the memories attached to it, at their file's
//! score, and the related memories at theirs; the seeds themselves are left out (they are
//! ranked already). The walk is bounded: at most [`MAX_FILES`] files, [`CANDIDATES`] items.

use std::collections::HashMap;

use futures::future::BoxFuture;

use super::fusion::ItemRef;
use super::neighbourhood::FileNeighbours;
use super::term_counts::TermCounts;
use crate::code::read::CodeHit;
use crate::error::Result;
use crate::memory::{self, Ctx, Memory};

/// Top fused items the walk starts from.
pub const SEEDS: usize = 5;
/// The weight of the step from an item to its own file.
pub const SAME_FILE: f64 = 1.0;
/// The weight of a code edge between two files.
pub const CODE_EDGE: f64 = 0.6;
/// What each hop keeps of the score it carries.
pub const DECAY: f64 = 0.5;
/// Files the walk reaches at most.
pub const MAX_FILES: usize = 60;
/// Items it returns at most.
pub const CANDIDATES: usize = 50;

/// Where the walk starts: one top item.
pub struct Seed {
    /// The item.
    pub item: ItemRef,
    /// Its fused score over the top score (1 for the first).
    pub weight: f64,
    /// The files it is about (a chunk's file, a memory's related files).
    pub files: Vec<String>,
    /// The memories it names in its relations, with the relation's confidence.
    pub related: Vec<(String, f64)>,
}

/// What the walk found, best first, with the rows it read.
#[derive(Default)]
pub struct Cascade {
    /// The ranked list.
    pub items: Vec<ItemRef>,
    /// Chunks it read (by the same query the graph path uses).
    pub chunks: Vec<CodeHit>,
    /// Memories attached to reached files.
    pub memories: Vec<Memory>,
}

/// Walks from `seeds` (see the module doc). `chunk_scope` limits the chunks (the request's
/// file and module filters); `chunks`/`memories` say which kinds the request wants;
/// `file_neighbours` answers the first hop (the engine's, served from its graph index).
pub(crate) async fn walk<'a>(
    ctx: &Ctx<'_>,
    file_neighbours: impl Fn(Vec<String>) -> BoxFuture<'a, Result<FileNeighbours>>,
    query: &str,
    seeds: &[Seed],
    chunk_scope: &[String],
    (chunks, memories): (bool, bool),
    counts: &mut TermCounts,
) -> Result<Cascade> {
    let mut files: HashMap<String, f64> = HashMap::new();
    let mut related: HashMap<String, f64> = HashMap::new();
    for seed in seeds {
        for file in &seed.files {
            keep_best(&mut files, file, seed.weight * SAME_FILE * DECAY);
        }
        for (id, confidence) in &seed.related {
            keep_best(&mut related, id, seed.weight * confidence * DECAY);
        }
    }
    if files.is_empty() && related.is_empty() {
        return Ok(Cascade::default());
    }
    let first_hop: Vec<String> = by_score(&files).into_iter().take(MAX_FILES).collect();
    let neighbours = file_neighbours(first_hop.clone()).await?;
    for from in &first_hop {
        let carried = files[from] * CODE_EDGE * DECAY;
        for next in neighbours.get(from).into_iter().flatten() {
            keep_best(&mut files, next, carried);
        }
    }
    let reached: Vec<String> = by_score(&files).into_iter().take(MAX_FILES).collect();

    let mut scored: Vec<(ItemRef, f64)> = Vec::new();
    let mut out = Cascade::default();
    if chunks {
        let hits = super::graph_chunks::rank_in_scope(
            ctx.store,
            ctx.project_id,
            counts,
            query,
            &reached,
            chunk_scope,
            CANDIDATES,
        )
        .await?;
        // Within a file, the order of the term match breaks ties.
        for (rank, hit) in hits.iter().enumerate() {
            let score = files.get(&hit.chunk.path).copied().unwrap_or(0.0);
            scored.push((ItemRef::Chunk(hit.chunk.id), score - rank as f64 * 1e-9));
        }
        out.chunks = hits;
    }
    if memories {
        let attached = memory::attached_to_files(ctx, &reached, CANDIDATES as u32).await?;
        for (index, m) in attached {
            let score = files.get(&reached[index]).copied().unwrap_or(0.0);
            scored.push((ItemRef::Memory(m.id.clone()), score));
            out.memories.push(m);
        }
        for (id, score) in &related {
            scored.push((ItemRef::Memory(id.clone()), *score));
        }
    }
    let seeded: Vec<&ItemRef> = seeds.iter().map(|s| &s.item).collect();
    scored.retain(|(item, _)| !seeded.contains(&item));
    // Best score per item, then best first (ties by item, for a stable order).
    let mut best: HashMap<ItemRef, f64> = HashMap::new();
    for (item, score) in scored {
        let entry = best.entry(item).or_insert(f64::MIN);
        *entry = entry.max(score);
    }
    let mut ranked: Vec<(ItemRef, f64)> = best.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out.items = ranked
        .into_iter()
        .take(CANDIDATES)
        .map(|(item, _)| item)
        .collect();
    Ok(out)
}

fn keep_best(scores: &mut HashMap<String, f64>, key: &str, score: f64) {
    let entry = scores.entry(key.to_owned()).or_insert(score);
    *entry = entry.max(score);
}

/// Keys best score first (ties by name).
fn by_score(scores: &HashMap<String, f64>) -> Vec<String> {
    let mut keys: Vec<(&String, f64)> = scores.iter().map(|(k, v)| (k, *v)).collect();
    keys.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    keys.into_iter().map(|(k, _)| k.clone()).collect()
}
