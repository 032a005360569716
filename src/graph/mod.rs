//! The knowledge graph: nodes and edges of three layers (structural from the code index,
//! semantic modules, knowledge written by agents and users), a depth-capped closure table kept
//! exact in the transaction of every edge change, and the reads built on it (traversal,
//! ancestors/descendants, subgraphs).
//!
//! API boundary: every operation takes a [`GraphCtx`]; writes run in one `BEGIN IMMEDIATE`
//! transaction that also updates the closure, so a failed write (e.g. `ENGRAM_CYCLE`) leaves
//! nothing behind.
//!
//! Tables (home `code`, local to the device; the authored part also lives by key in the main
//! home, see `knowledge.rs`):
//! - `graph_nodes(project_id, key)`: all three layers; `source = 'ast'` rows are the indexer's
//!   (files `src/a.ts`, symbols `src/a.ts:Qualified.name` with a `content_hash` of their text,
//!   modules `src/auth/`), the others come from `injectGraph`. Integer ids keep the closure
//!   small; `graph_nodes(project_id, label)` finds the symbols of a name.
//! - `graph_edges(from_id, to_id, kind)`: direction is dependency; weight = references
//!   aggregated. `contains` is left out of the closure.
//! - `graph_closure`: one shortest path per (ancestor, descendant) pair within the project's
//!   depth (`graph_state.closure_depth`): depth, summed weight, interior node ids. Clustered by
//!   `(descendant_id, depth, ancestor_id)`, so impact's "what depends on X, nearest first" is
//!   one contiguous range per seed carrying weight and path; the unique `(ancestor_id,
//!   descendant_id)` index serves descendants and keeps one row per pair. Depth 0 there means
//!   *pending*: a wide write left no rows, built by the first reader or the idle writer
//!   (`closure.rs`).
//! - `graph_log(seq, project_id, node_id)`: the nodes whose row, edges or closure rows a
//!   write changed (NULL: the whole project), replayed by the in-process indexes
//!   (`served.rs`, which answer `impact()`, `reach()`, `neighbours()` and the file
//!   neighbourhood once loaded); trimmed after index runs. The memory rows their `impact()`
//!   answers carry are cached beside them (`memory_rows.rs`), dropped as `memory_row_log`
//!   (main home) names them.

pub mod closure;
pub mod code_layer;
pub mod impact;
#[doc(hidden)]
pub mod index;
pub(crate) mod knowledge;
pub(crate) mod memory_rows;
pub mod model;
pub mod module_layer;
pub mod rank;
pub mod read;
pub mod semantic;
pub(crate) mod served;
pub mod write;

pub use code_layer::GraphSyncSummary;
pub use impact::{
    AttachedMemory, Impact, ImpactOptions, DEFAULT_LIMIT as DEFAULT_IMPACT_LIMIT,
    DEFAULT_MEMORY_LIMIT as DEFAULT_IMPACT_MEMORY_LIMIT,
};
#[doc(hidden)]
pub use index::{GraphIndex, GraphIndexSize};
pub use model::{Direction, EdgeInput, GraphEdge, GraphNode, GraphSource, NodeInput};
pub use rank::{CentralityMethod, CentralityOptions, Neighbour, NeighbourOptions, NodeScore};
pub use read::{GraphStats, ReachedNode, Side, Subgraph, TraverseOptions};
pub use semantic::{DerivedSummary, ModuleSummary};
pub use write::InjectSummary;

use crate::clock::Clock;
use crate::error::{DbContext, Error, Result};
use crate::store::{begin_write, Store, Writer};

/// Closure depth used when the engine options give none.
pub const DEFAULT_CLOSURE_DEPTH: u32 = 4;
/// Deepest closure allowed (rows grow roughly with fan-in to this power).
pub const MAX_CLOSURE_DEPTH: u32 = 8;

/// Everything a graph operation needs.
pub(crate) struct GraphCtx<'a> {
    pub store: &'a Store,
    pub project_root: Option<&'a std::path::Path>,
    pub clock: &'a dyn Clock,
    pub project_id: &'a str,
    pub closure_depth: u32,
}

/// The depth a closure read asks for (default: the closure depth, which is also the most).
fn closure_depth(ctx: &GraphCtx<'_>, max_depth: Option<u32>) -> Result<u32> {
    let depth = max_depth.unwrap_or(ctx.closure_depth);
    if depth == 0 || depth > ctx.closure_depth {
        return Err(Error::invalid(format!(
            "maxDepth must be within 1..={} (the closure depth); traverse() goes deeper",
            ctx.closure_depth
        )));
    }
    Ok(depth)
}

/// Leaves the project's closure pending when it was built with another depth than this
/// engine's (a reopen with a new `closureDepth`): opening does not wait for the rebuild, and
/// every read builds or computes the rows first (see `closure.rs`). Returns whether the
/// closure is pending, for the caller to build it in the background.
pub(crate) async fn align_closure_depth(ctx: &GraphCtx<'_>) -> Result<bool> {
    let stored = {
        let reader = ctx.store.reader().await;
        closure::state(&reader, ctx.project_id).await?
    };
    match stored {
        None => Ok(false),
        Some(depth) if depth == ctx.closure_depth => Ok(false),
        Some(closure::PENDING) => Ok(true),
        Some(_) => {
            let now = ctx.clock.now_ms();
            let conn = ctx.store.writer().await;
            let tx = begin_write(&conn).await?;
            // Read again under the write lock: another process may have rebuilt it.
            if closure::state(&tx, ctx.project_id).await? != Some(ctx.closure_depth) {
                closure::mark_pending(&tx, ctx.project_id, now).await?;
            }
            tx.commit()
                .await
                .ctx("committing the closure's new depth")?;
            Ok(true)
        }
    }
}

/// Builds the project's closure rows if they are pending (a wide write or a new depth left
/// them so); true if it built them. What the tables' readers of the closure call first.
pub(crate) async fn settle_closure(ctx: &GraphCtx<'_>) -> Result<bool> {
    if !closure_pending(ctx).await? {
        return Ok(false);
    }
    let conn = ctx.store.writer().await;
    settle_on(ctx, &conn).await
}

/// [`settle_closure`] as background work: it waits until the writer has been idle for
/// `idle`, so that a burst of writes is not held up by the build, and gives up while waiting
/// once `keep_going` says no (every handle closed: the next open or read builds it).
pub(crate) async fn settle_closure_when_idle(
    ctx: &GraphCtx<'_>,
    idle: std::time::Duration,
    keep_going: &(dyn Fn() -> bool + Sync),
) -> Result<bool> {
    if !closure_pending(ctx).await? {
        return Ok(false);
    }
    loop {
        if !keep_going() {
            return Ok(false);
        }
        match ctx.store.writer_if_idle(idle) {
            Ok(conn) => return settle_on(ctx, &conn).await,
            Err(wait) => tokio::time::sleep(wait).await,
        }
    }
}

/// Whether the project's closure is pending (one indexed read).
async fn closure_pending(ctx: &GraphCtx<'_>) -> Result<bool> {
    let reader = ctx.store.reader().await;
    Ok(closure::state(&reader, ctx.project_id).await? == Some(closure::PENDING))
}

/// Builds a pending closure on the writer `conn`, if it is still pending under its lock.
async fn settle_on(ctx: &GraphCtx<'_>, conn: &Writer<'_>) -> Result<bool> {
    let tx = begin_write(conn).await?;
    if closure::state(&tx, ctx.project_id).await? != Some(closure::PENDING) {
        tx.commit().await.ctx("ending a read of graph state")?;
        return Ok(false);
    }
    let started = std::time::Instant::now();
    let rows =
        closure::materialize(&tx, ctx.project_id, ctx.closure_depth, ctx.clock.now_ms()).await?;
    tx.commit().await.ctx("committing the closure")?;
    tracing::debug!(
        project = ctx.project_id,
        rows,
        ms = started.elapsed().as_millis() as u64,
        "pending closure built"
    );
    Ok(true)
}

/// Upserts a batch of nodes and edges in one transaction.
pub(crate) async fn inject(
    ctx: &GraphCtx<'_>,
    nodes: &[NodeInput],
    edges: &[EdgeInput],
) -> Result<InjectSummary> {
    write::validate_batch(nodes, edges)?;
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let summary = write::inject(&tx, ctx.project_id, ctx.closure_depth, now, nodes, edges).await?;
    let node_keys: Vec<&str> = nodes.iter().map(|n| n.key.as_str()).collect();
    knowledge::record_nodes(&tx, ctx.project_id, &node_keys).await?;
    let edge_keys: Vec<(&str, &str, &str)> = edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str(), e.kind.as_str()))
        .collect();
    knowledge::record_edges(&tx, ctx.project_id, &edge_keys).await?;
    tx.commit().await.ctx("committing graph inject")?;
    Ok(summary)
}

/// Deletes a node written through the API and its edges. False if there was none.
pub(crate) async fn delete_node(ctx: &GraphCtx<'_>, key: &str) -> Result<bool> {
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let deleted = write::delete_node(&tx, ctx.project_id, ctx.closure_depth, now, key).await?;
    knowledge::forget_node(&tx, ctx.project_id, key).await?;
    tx.commit().await.ctx("committing node delete")?;
    Ok(deleted)
}

/// Deletes one edge written through the API. False if there was none.
pub(crate) async fn delete_edge(
    ctx: &GraphCtx<'_>,
    from: &str,
    to: &str,
    kind: &str,
) -> Result<bool> {
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let deleted = write::delete_edge(
        &tx,
        ctx.project_id,
        ctx.closure_depth,
        now,
        (from, to, kind),
    )
    .await?;
    knowledge::forget_edge(&tx, ctx.project_id, (from, to, kind)).await?;
    tx.commit().await.ctx("committing edge delete")?;
    Ok(deleted)
}

/// One node by key.
pub(crate) async fn node(ctx: &GraphCtx<'_>, key: &str) -> Result<Option<GraphNode>> {
    let reader = ctx.store.reader().await;
    Ok(read::node(&reader, ctx.project_id, key)
        .await?
        .map(|(_, n)| n))
}

/// BFS from a node over the edges.
pub(crate) async fn traverse(
    ctx: &GraphCtx<'_>,
    start: &str,
    options: &TraverseOptions,
) -> Result<Subgraph> {
    let reader = ctx.store.reader().await;
    read::traverse(&reader, ctx.project_id, start, options).await
}

/// Ancestors or descendants from the closure table.
pub(crate) async fn closure_of(
    ctx: &GraphCtx<'_>,
    key: &str,
    side: Side,
    max_depth: Option<u32>,
    limit: u32,
) -> Result<Subgraph> {
    let depth = closure_depth(ctx, max_depth)?;
    settle_closure(ctx).await?;
    let reader = ctx.store.reader().await;
    read::closure_of(&reader, ctx.project_id, key, side, depth, limit).await
}

/// The nodes named by `keys` and the edges among them.
pub(crate) async fn subgraph(ctx: &GraphCtx<'_>, keys: &[String]) -> Result<Subgraph> {
    let reader = ctx.store.reader().await;
    read::subgraph(&reader, ctx.project_id, keys).await
}

/// What depends on a file, symbol or node, and the memories attached to any of it.
pub(crate) async fn impact(
    ctx: &GraphCtx<'_>,
    target: &str,
    options: &ImpactOptions,
) -> Result<Impact> {
    let depth = closure_depth(ctx, options.max_depth)?;
    read::check_limit(options.limit)?;
    settle_closure(ctx).await?;
    let mut reader = ctx.store.reader().await;
    impact::impact(
        &mut reader,
        ctx.project_id,
        ctx.project_root,
        target,
        depth,
        options,
    )
    .await
}

/// Whether the project's in-process index is current (see `served.rs`): brought up to date
/// with every graph write committed before the call. False: answer from the tables;
/// `start_load` was called when the caller claimed the index's load. The index may still be
/// emptied by a concurrent reload before the caller read-locks it.
///
/// For an answer that `reads_closure`, while the closure is pending (just after a cold index)
/// the tables would answer only once it is built, which takes longer than a load that computes
/// it (CPython: ~0.3 s of inserts, against a load of ~0.1-0.2 s): then the caller loads the
/// index itself, or waits for the load going on, off the JS thread.
async fn index_is_current(
    ctx: &GraphCtx<'_>,
    slot: &served::GraphSlot,
    start_load: impl FnOnce(),
    reads_closure: bool,
) -> bool {
    let refreshed = slot.refresh(ctx.store, ctx.project_id).await;
    let not_current = matches!(
        refreshed,
        Ok(served::Refreshed::LoadClaimed | served::Refreshed::Loading)
    );
    if reads_closure && not_current && closure_pending(ctx).await.unwrap_or(false) {
        tokio::task::yield_now().await;
        match refreshed {
            Ok(served::Refreshed::LoadClaimed) => {
                let loaded = slot.load(ctx.store, ctx.project_id, ctx.closure_depth, &|| true);
                if let Err(error) = loaded.await {
                    tracing::warn!(code = error.code(), "graph index load failed: {error}");
                    return false;
                }
            }
            _ => slot.wait_for_load().await,
        }
        return matches!(
            slot.refresh(ctx.store, ctx.project_id).await,
            Ok(served::Refreshed::Current)
        );
    }
    match refreshed {
        Ok(served::Refreshed::Current) => true,
        Ok(served::Refreshed::LoadClaimed) => {
            start_load();
            false
        }
        Ok(served::Refreshed::Loading | served::Refreshed::Off) => false,
        // The tables answer; the index is reloaded on a later call.
        Err(error) => {
            tracing::warn!(code = error.code(), "graph index refresh failed: {error}");
            false
        }
    }
}

/// `answer` from the project's in-process index when it is current, else `None`; `reads_closure`:
/// see [`index_is_current`].
pub(crate) async fn from_current_index<T>(
    ctx: &GraphCtx<'_>,
    slot: &served::GraphSlot,
    start_load: impl FnOnce(),
    reads_closure: bool,
    answer: impl FnOnce(&GraphIndex) -> T,
) -> Option<T> {
    if !index_is_current(ctx, slot, start_load, reads_closure).await {
        return None;
    }
    let served = slot.read().await;
    served.as_ref().map(|served| answer(&served.index))
}

/// [`impact`] from the project's in-process index when it is current, else from the tables.
pub(crate) async fn impact_served(
    ctx: &GraphCtx<'_>,
    slot: &served::GraphSlot,
    start_load: impl FnOnce(),
    target: &str,
    options: &ImpactOptions,
) -> Result<Impact> {
    let depth = closure_depth(ctx, options.max_depth)?;
    read::check_limit(options.limit)?;
    if index_is_current(ctx, slot, start_load, true).await {
        // The reader before the lock: a refresh holds a reader while it waits to write the
        // index, so waiting for a reader under the read lock could wait forever.
        let mut reader = ctx.store.reader().await;
        let served = slot.read().await;
        if let Some(served) = served.as_ref() {
            return served
                .index
                .impact(
                    &mut reader,
                    Some(&served.memories),
                    ctx.project_root,
                    target,
                    depth,
                    options,
                )
                .await;
        }
    }
    // The tables' answer takes milliseconds: a caller polling on a JS thread (see
    // `node::error::promise_inline_first`) hands it to the runtime here.
    tokio::task::yield_now().await;
    impact(ctx, target, options).await
}

/// [`closure_of`] from the project's in-process index when it is current, else from the
/// tables.
pub(crate) async fn closure_of_served(
    ctx: &GraphCtx<'_>,
    slot: &served::GraphSlot,
    start_load: impl FnOnce(),
    key: &str,
    side: Side,
    max_depth: Option<u32>,
    limit: u32,
) -> Result<Subgraph> {
    let depth = closure_depth(ctx, max_depth)?;
    read::check_limit(limit)?;
    let from_index = |index: &GraphIndex| index.reach(key, side, depth, limit);
    match from_current_index(ctx, slot, start_load, true, from_index).await {
        Some(answer) => answer,
        None => closure_of(ctx, key, side, max_depth, limit).await,
    }
}

/// The project's graph loaded into memory (see `index.rs`).
pub(crate) async fn load_index(ctx: &GraphCtx<'_>) -> Result<GraphIndex> {
    let mut reader = ctx.store.reader().await;
    GraphIndex::load(&mut reader, ctx.project_id, ctx.closure_depth).await
}

/// [`impact`] answered from `index` (memories still read from SQLite).
pub(crate) async fn impact_through(
    ctx: &GraphCtx<'_>,
    index: &GraphIndex,
    target: &str,
    options: &ImpactOptions,
) -> Result<Impact> {
    let depth = closure_depth(ctx, options.max_depth)?;
    read::check_limit(options.limit)?;
    let mut reader = ctx.store.reader().await;
    index
        .impact(&mut reader, None, ctx.project_root, target, depth, options)
        .await
}

/// [`closure_of`] answered from `index`.
pub(crate) fn closure_of_through(
    ctx: &GraphCtx<'_>,
    index: &GraphIndex,
    key: &str,
    side: Side,
    max_depth: Option<u32>,
    limit: u32,
) -> Result<Subgraph> {
    let depth = closure_depth(ctx, max_depth)?;
    index.reach(key, side, depth, limit)
}

/// The nodes one edge away from a set of nodes, heaviest link first.
pub(crate) async fn neighbours(
    ctx: &GraphCtx<'_>,
    keys: &[String],
    options: &NeighbourOptions,
) -> Result<Vec<Neighbour>> {
    let mut reader = ctx.store.reader().await;
    rank::neighbours(&mut reader, ctx.project_id, keys, options).await
}

/// [`neighbours`] from the project's in-process index when it is current (and the keys'
/// expansion within its bound), else from the tables.
pub(crate) async fn neighbours_served(
    ctx: &GraphCtx<'_>,
    slot: &served::GraphSlot,
    start_load: impl FnOnce(),
    keys: &[String],
    options: &NeighbourOptions,
) -> Result<Vec<Neighbour>> {
    rank::check_keys(keys)?;
    read::check_limit(options.limit)?;
    let from_index = |index: &GraphIndex| index.neighbours(keys, options);
    match from_current_index(ctx, slot, start_load, false, from_index).await {
        Some(Some(answer)) => Ok(answer),
        _ => neighbours(ctx, keys, options).await,
    }
}

/// Degree or PageRank centrality within the subgraph a set of keys induces, best first.
pub(crate) async fn centrality(
    ctx: &GraphCtx<'_>,
    keys: &[String],
    options: &CentralityOptions,
) -> Result<Vec<NodeScore>> {
    let mut reader = ctx.store.reader().await;
    rank::centrality(&mut reader, ctx.project_id, keys, options).await
}

/// A derived batch: nodes and edges, or None to leave the modules' relations as they are.
pub type DerivedBatch = Option<(Vec<NodeInput>, Vec<EdgeInput>)>;

/// Asks `derive` about `modules` (None: every module), at most
/// [`semantic::MODULES_PER_REQUEST`] per call, and writes each answer in its own transaction.
/// Stops with `ENGRAM_ABORTED` between calls once `cancel` is raised (answers written stay).
pub(crate) async fn derive_relations<F, Fut>(
    ctx: &GraphCtx<'_>,
    modules: Option<&[String]>,
    mut derive: F,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<DerivedSummary>
where
    F: FnMut(Vec<ModuleSummary>) -> Fut,
    Fut: std::future::Future<Output = Result<DerivedBatch>>,
{
    let keys = match modules {
        Some(keys) => keys.to_vec(),
        None => {
            let reader = ctx.store.reader().await;
            semantic::module_keys(&reader, ctx.project_id).await?
        }
    };
    let mut total = DerivedSummary::default();
    for chunk in keys.chunks(semantic::MODULES_PER_REQUEST) {
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Error::Aborted);
        }
        let summaries = {
            let reader = ctx.store.reader().await;
            semantic::module_summaries(&reader, ctx.project_id, chunk).await?
        };
        if summaries.is_empty() {
            continue;
        }
        let asked: Vec<String> = summaries.iter().map(|m| m.key.clone()).collect();
        let Some((nodes, edges)) = derive(summaries).await? else {
            continue;
        };
        let now = ctx.clock.now_ms();
        let conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        let written = semantic::apply(
            &tx,
            ctx.project_id,
            ctx.closure_depth,
            now,
            &asked,
            nodes,
            edges,
        )
        .await?;
        tx.commit().await.ctx("committing derived relations")?;
        total.add(&written);
    }
    Ok(total)
}

/// Sizes of the project's graph.
pub(crate) async fn stats(ctx: &GraphCtx<'_>) -> Result<GraphStats> {
    // Its closure rows and depth are those of the built closure.
    settle_closure(ctx).await?;
    let reader = ctx.store.reader().await;
    read::stats(&reader, ctx.project_id).await
}

/// Keys of the project's nodes, optionally of one kind and layer.
pub(crate) async fn keys(
    ctx: &GraphCtx<'_>,
    kind: Option<&str>,
    layer: Option<u8>,
    limit: u32,
) -> Result<Vec<String>> {
    if limit == 0 || limit > 100_000 {
        return Err(Error::invalid(format!(
            "limit must be within 1..=100000, got {limit}"
        )));
    }
    let reader = ctx.store.reader().await;
    read::keys(&reader, ctx.project_id, kind, layer, limit).await
}
