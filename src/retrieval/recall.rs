//! Recall: memories and code chunks for a query, ranked together and packed into a context.
//!
//! 1. Candidates, the three paths concurrently, each [`CANDIDATES`] deep per kind: BM25 over
//!    chunks and over memories; the query's vector against both vector indexes; and the
//!    graph, from the agent's recent files and the files one edge away: their chunks that
//!    share a term with the query, and the memories attached to them.
//! 2. Fusion: the keyword path's BM25 scores over code, dense similarities, the other ranks,
//!    weighted per query (`weights.rs`), the filters, the optional graph neighbourhood boost,
//!    then each memory's standing (phase, source, confidence, use).
//! 3. Rerank, when a reranker is configured.
//! 4. Packing into the token budget (`packing.rs`).
//!
//! A path that cannot run (no embedding model, an embedding server down) is skipped and named
//! in `skipped`; recall still answers from the others.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::cascade;
use super::fusion::{self, CandidatePath, Fused, ItemRef, RankedList};
use super::hyde::{self, Hyde, HydeOptions, HydeRequest};
use super::packing::{self, phase_budget};
use super::query_kind::{self, QueryKind};
use super::request::{under_any, RecallFilters, RecallRequest};
use super::scoring::{current_confidence, memory_factor};
use super::term_counts::TermCounts;
use super::typo;
use super::weights::{self, Evidence, FusionWeights, Present};
use crate::code::read::{self as code_read, CodeChunk, CodeHit};
use crate::embed::InputKind;
use crate::error::Result;
use crate::memory::{self, ListFilter, Memory, SearchMode, SearchOptions};
use crate::store::Reader;
use crate::text::fts_query::FtsQuery;
use crate::vector::{DenseQuery, ItemKind};
use crate::Engram;

/// Candidates each path contributes per kind (the fusion's depth).
pub const CANDIDATES: u32 = 50;

/// Most memories one recall puts first because a trigger pattern matched.
pub const MAX_TRIGGERED: usize = 3;

/// What a recalled item is.
// Unboxed: a recall holds at most 200 items, built once and moved rarely.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ItemContent {
    /// A code chunk.
    Chunk(CodeChunk),
    /// A memory.
    Memory(Memory),
}

/// Whether and how an item went into the packed context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackState {
    /// Packing did not run.
    NotPacked,
    /// In the context, whole.
    Packed,
    /// In the context, its head only (it was bigger than the room left).
    Clipped,
    /// Left out: it overlaps the lines of a chunk already packed.
    Overlap,
    /// Left out: no room left in the budget.
    OverBudget,
}

impl PackState {
    /// Lower-case name, as results report it.
    pub fn as_str(self) -> &'static str {
        match self {
            PackState::NotPacked => "none",
            PackState::Packed => "packed",
            PackState::Clipped => "clipped",
            PackState::Overlap => "overlap",
            PackState::OverBudget => "budget",
        }
    }

    /// True when the item is (at least partly) in the context.
    pub fn in_context(self) -> bool {
        matches!(self, PackState::Packed | PackState::Clipped)
    }
}

/// Where each stage ranked an item (1-based).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageRanks {
    /// In its keyword list (chunks and memories are ranked separately).
    pub keyword: Option<u32>,
    /// In its dense list.
    pub dense: Option<u32>,
    /// In its graph list.
    pub graph: Option<u32>,
    /// In the cascade's list (the walk from the top hits).
    pub cascade: Option<u32>,
    /// After fusion and the filters, before the memory factors and the rerank (0 for a
    /// memory that only its trigger pattern brought).
    pub fused: u32,
    /// After the reranker, when one ran.
    pub rerank: Option<u32>,
}

/// One recalled item.
#[derive(Debug, Clone)]
pub struct RecallItem {
    /// The chunk or memory.
    pub content: ItemContent,
    /// Its final score (higher is better; comparable within one recall only).
    pub score: f64,
    /// Its rank in each stage.
    pub ranks: StageRanks,
    /// What the graph neighbourhood boost added to its fused score.
    pub boost: f64,
    /// The factor its standing put on a memory's score (1 for chunks, or with scoring off).
    pub factor: f64,
    /// Whether it is in the packed context.
    pub pack: PackState,
    /// Tokens it takes in the context (0 when not packed).
    pub tokens: u32,
    /// A short reference to it (at most 40 characters).
    pub citation: String,
    /// The reranker's score, when it scored this item.
    pub rerank_score: Option<f32>,
    /// The memory's trigger pattern found in the query or a recent file: it was put first
    /// whatever it ranked (see [`MAX_TRIGGERED`]).
    pub triggered_by: Option<String>,
    /// Its cosine similarity to the query's vector, when the dense path found it.
    pub similarity: Option<f32>,
    /// Its BM25 score for the query (higher is better; FTS5's `bm25()` negated), when the
    /// keyword path found it (with the typo-corrected query's score when only that found
    /// it). Fusion reads a chunk's against its list's best (`fusion::KEYWORD_SCORE_POWER`); a
    /// memory's is only reported. Not in the JS items: it is for studying fusion.
    pub keyword_score: Option<f32>,
    /// For a chunk that holds several definitions (a `block`, a class that fit whole): the
    /// qualified name of the one whose own vector matched the query best, when the dense path
    /// found the chunk by it.
    pub matched_symbol: Option<String>,
}

impl RecallItem {
    /// An item as stage 2 makes it: not boosted, factor 1, not packed, not reranked.
    pub fn new(content: ItemContent, score: f64, ranks: StageRanks) -> Self {
        RecallItem {
            content,
            score,
            ranks,
            boost: 0.0,
            factor: 1.0,
            pack: PackState::NotPacked,
            tokens: 0,
            citation: String::new(),
            rerank_score: None,
            triggered_by: None,
            similarity: None,
            keyword_score: None,
            matched_symbol: None,
        }
    }
}

/// How long each stage took, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecallTimings {
    /// The keyword path.
    pub keyword_us: u64,
    /// The dense path, query embedding included.
    pub dense_us: u64,
    /// Of which embedding the query.
    pub embed_us: u64,
    /// The graph path.
    pub graph_us: u64,
    /// The cascade (part of `fusion_us`), when it ran.
    pub cascade_us: u64,
    /// Stage 1 as a whole (its paths run concurrently).
    pub candidates_us: u64,
    /// Fusion, loading the candidates' rows, filters, boost, scoring and the triggered
    /// memories.
    pub fusion_us: u64,
    /// The reranker.
    pub rerank_us: u64,
    /// Packing.
    pub packing_us: u64,
    /// The whole recall.
    pub total_us: u64,
}

/// What a recall found.
#[derive(Debug, Clone)]
pub struct Recall {
    /// How the query was read.
    pub query_kind: QueryKind,
    /// The items, best first.
    pub items: Vec<RecallItem>,
    /// The packed context (empty when packing was off or nothing was found).
    pub context: String,
    /// The budget packing worked to.
    pub budget_tokens: u32,
    /// Tokens the context uses.
    pub used_tokens: u32,
    /// Time per stage.
    pub timings: RecallTimings,
    /// Paths that could not run, with why (`dense: ENGRAM_MODEL_UNAVAILABLE: ...`).
    pub skipped: Vec<String>,
    /// The query the keyword path searched after correcting words no index holds
    /// (`dokcer compose` -> `docker* compose`), when exact search found too little.
    pub corrected_query: Option<String>,
    /// The app model's hypothetical answer the dense path also searched with, when the HyDE
    /// fallback ran (see `hyde`).
    pub hypothetical: Option<String>,
    /// The weight each candidate path had in this query's fusion, for chunks and memories
    /// (for a blank query, which runs no path: the weights its kind would start from).
    pub weights: FusionWeights,
    /// What the paths found, from which the weights were read.
    pub evidence: Evidence,
}

/// Rows loaded while gathering candidates, by item.
#[derive(Default)]
struct Rows {
    chunks: HashMap<i64, CodeChunk>,
    memories: HashMap<String, Memory>,
}

/// What one stage-1 path produced.
#[derive(Default)]
struct PathOutput {
    lists: Vec<RankedList>,
    rows: Rows,
    skipped: Option<String>,
    micros: u64,
    embed_micros: u64,
    /// The keyword path's query after typo correction, when it was corrected.
    corrected_query: Option<String>,
    /// The dense path: each item's cosine similarity to the query's vector.
    similarities: HashMap<ItemRef, f32>,
    /// The keyword path: each item's BM25 score in the first list that found it.
    keyword_scores: HashMap<ItemRef, f32>,
    /// The dense path: the definition whose own vector scored a chunk (see `code_chunk_parts`).
    matched_symbols: HashMap<i64, String>,
    /// The keyword path: items the all-terms query found (before any-term fill).
    all_terms: u32,
    /// Whether the path ran for chunks and for memories (see `weights::Present`).
    ran_for: [bool; 2],
}

impl PathOutput {
    /// Adds a ranked list of chunks found by `path`, keeping their rows; the keyword path's
    /// list keeps their BM25 scores, which fusion reads.
    fn add_chunks(&mut self, path: CandidatePath, hits: Vec<CodeHit>) {
        self.ran_for[weights::CHUNKS] = true;
        let items: Vec<ItemRef> = hits.iter().map(|h| ItemRef::Chunk(h.chunk.id)).collect();
        let mut list = RankedList::ranked(path, items);
        if path == CandidatePath::Keyword {
            list.scores = hits.iter().map(|h| h.score as f32).collect();
            self.report_scores(&list.items, &list.scores);
        }
        // The weight is set per query once every path has run (`weights`).
        self.lists.push(list);
        self.rows
            .chunks
            .extend(hits.into_iter().map(|h| (h.chunk.id, h.chunk)));
    }

    /// Adds a ranked list of memories found by `path`, keeping their rows. The keyword path's
    /// BM25 `scores` (parallel to `memories`) are only reported: fused by score, memories did
    /// no better than by rank (MRR@10 0.774 vs 0.780 on the memory dev set; see `fusion.rs`).
    fn add_memories(&mut self, path: CandidatePath, memories: Vec<Memory>, scores: &[f32]) {
        self.ran_for[weights::MEMORIES] = true;
        let items: Vec<ItemRef> = memories
            .iter()
            .map(|m| ItemRef::Memory(m.id.clone()))
            .collect();
        self.report_scores(&items, scores);
        self.lists.push(RankedList::ranked(path, items));
        self.rows
            .memories
            .extend(memories.into_iter().map(|m| (m.id.clone(), m)));
    }

    /// Keeps each item's first keyword score, for the recall's items.
    fn report_scores(&mut self, items: &[ItemRef], scores: &[f32]) {
        for (item, score) in items.iter().zip(scores) {
            self.keyword_scores.entry(item.clone()).or_insert(*score);
        }
    }
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

fn wants(filters: &RecallFilters, kind: ItemKind) -> bool {
    filters.kinds.is_empty() || filters.kinds.contains(&kind)
}

/// Files and modules the filters confine chunks to (empty: anywhere); computed once per recall.
fn chunk_scope(filters: &RecallFilters) -> Vec<String> {
    let mut scope = filters.files.clone();
    scope.extend(filters.modules.iter().cloned());
    scope
}

/// Runs a validated request.
pub(crate) async fn run(handle: &Engram, request: RecallRequest) -> Result<Recall> {
    let recall = execute(handle, &request, None).await?;
    track(handle, &request, &recall).await?;
    Ok(recall)
}

/// [`run`] with the HyDE fallback: when the result has too few items close to the query's
/// vector, once more with the app model's hypothetical answer in the dense path (`hyde`).
pub(crate) async fn run_with_hyde(
    handle: &Engram,
    request: RecallRequest,
    fallback: Hyde,
) -> Result<Recall> {
    let started = Instant::now();
    let mut recall = execute(handle, &request, None).await?;
    let dense_ran = request.stages.dense && !recall.skipped.iter().any(|s| s.starts_with("dense:"));
    // A limit below `min_results` could never hold enough: the bound is the smaller.
    let options = HydeOptions {
        min_results: fallback.options.min_results.min(request.limit_or_default()),
        ..fallback.options
    };
    // The bound's default is on the model's scale; the model is loaded, since dense ran.
    let too_little = dense_ran
        && match handle.loaded_embedder().await {
            Ok(model) => hyde::found_too_little(
                recall.items.iter().map(|i| i.similarity),
                &options,
                model.id(),
            ),
            Err(_) => false,
        };
    if too_little && !request.query.trim().is_empty() {
        let asked = HydeRequest {
            query: request.query.clone(),
            prompt: hyde::prompt(&request.query),
        };
        match (fallback.generate)(asked).await {
            Ok(answer) => {
                if let Some(text) = hyde::searchable(answer) {
                    recall = execute(handle, &request, Some(&text)).await?;
                    // Unless its embedding failed (named in `skipped`), it was searched with.
                    if !recall.skipped.iter().any(|s| s.starts_with("hyde:")) {
                        recall.hypothetical = Some(text);
                    }
                }
            }
            Err(e) => recall.skipped.push(format!("hyde: {}: {e}", e.code())),
        }
    }
    recall.timings.total_us = micros(started);
    track(handle, &request, &recall).await?;
    Ok(recall)
}

/// Stages 1-4 for `request`; the dense path also searches with `hypothetical` when given.
async fn execute(
    handle: &Engram,
    request: &RecallRequest,
    hypothetical: Option<&str>,
) -> Result<Recall> {
    let started = Instant::now();
    let kind = query_kind::detect(&request.query, &request.recent_tool_calls);
    if request.query.trim().is_empty() {
        // Like `search`, a blank query is valid and finds nothing (and notes no memory gap).
        return Ok(Recall {
            query_kind: kind,
            items: Vec::new(),
            context: String::new(),
            budget_tokens: request
                .budget_tokens
                .unwrap_or_else(|| phase_budget(request.phase)),
            used_tokens: 0,
            timings: RecallTimings {
                total_us: started.elapsed().as_micros() as u64,
                ..RecallTimings::default()
            },
            skipped: Vec::new(),
            corrected_query: None,
            hypothetical: None,
            weights: weights::for_query(kind, &Evidence::default()),
            evidence: Evidence::default(),
        });
    }
    let stages = request.stages;
    let scope = chunk_scope(&request.filters);
    // The dense path runs as its own task so that its query embedding and vector scans (on
    // the blocking pool) overlap the keyword and graph paths, whose SQL runs to completion on
    // this thread without yielding (`join!` on one task ran the paths in turn). The yield lets
    // the new task start its embedding before this thread turns to SQL: a freshly spawned task
    // waits in this worker's LIFO slot, which no other worker steals.
    let dense = stages.dense.then(|| {
        let (handle, request, scope) = (handle.clone(), request.clone(), scope.clone());
        let hypothetical = hypothetical.map(str::to_owned);
        tokio::spawn(async move {
            let hypothetical = hypothetical.as_deref();
            dense_path(&handle, &request, &scope, hypothetical).await
        })
    });
    if dense.is_some() {
        tokio::task::yield_now().await;
    }
    let mut counts = TermCounts::default();
    let keyword = if stages.keyword {
        keyword_path(handle, request, &scope, &mut counts).await
    } else {
        Ok(PathOutput::default())
    };
    let graph = if stages.graph {
        graph_path(handle, request, &scope, &mut counts).await
    } else {
        Ok(PathOutput::default())
    };
    let dense = match dense {
        Some(task) => task
            .await
            .map_err(|e| crate::error::Error::Internal(format!("dense path failed: {e}")))?,
        None => Ok(PathOutput::default()),
    };
    let (mut keyword, mut dense, graph) = (keyword?, dense?, graph?);
    let corrected_query = keyword.corrected_query.clone();
    let mut timings = RecallTimings {
        keyword_us: keyword.micros,
        dense_us: dense.micros,
        embed_us: dense.embed_micros,
        graph_us: graph.micros,
        candidates_us: micros(started),
        ..RecallTimings::default()
    };
    let fusion_started = Instant::now();
    let mut rows = Rows::default();
    let mut lists = Vec::new();
    let mut skipped = Vec::new();
    let similarities = std::mem::take(&mut dense.similarities);
    let keyword_scores = std::mem::take(&mut keyword.keyword_scores);
    let matched_symbols = std::mem::take(&mut dense.matched_symbols);
    // The keyword path's chunk lists in order: the query's, then the corrected query's.
    let keyword_chunks: Vec<i64> = keyword
        .lists
        .iter()
        .flat_map(|l| l.items.iter())
        .filter_map(|item| match item {
            ItemRef::Chunk(id) => Some(*id),
            ItemRef::Memory(_) => None,
        })
        .collect();
    let mut queries = vec![request.query.as_str()];
    queries.extend(keyword.corrected_query.as_deref());
    let evidence = Evidence::read(
        &queries,
        &keyword_chunks,
        &keyword.rows.chunks,
        keyword.all_terms,
        &similarities,
        &handle.engine().store,
        &mut counts,
    )
    .await?;
    let chosen = weights::for_query(kind, &evidence);
    let mut present = Present {
        keyword: keyword.ran_for,
        dense: [false; 2],
    };
    for list in dense.lists.iter() {
        match list.items.first() {
            Some(ItemRef::Chunk(_)) => present.dense[weights::CHUNKS] = true,
            Some(ItemRef::Memory(_)) => present.dense[weights::MEMORIES] = true,
            None => {}
        }
    }
    for output in [keyword, dense, graph] {
        rows.chunks.extend(output.rows.chunks);
        rows.memories.extend(output.rows.memories);
        lists.extend(output.lists);
        skipped.extend(output.skipped);
    }
    let weights = weights::apply(&mut lists, chosen, present, CASCADE_WEIGHT);
    let mut fused = fusion::fuse(&lists);
    load_missing(handle, &fused, &mut rows).await?;
    let now = handle.engine().clock.now_ms();
    fused.retain(|f| passes(&f.item, &rows, &request.filters, &scope, now));
    if stages.cascade && !fused.is_empty() {
        let cascade_started = Instant::now();
        let seeds = cascade_seeds(&fused, &rows);
        let kinds = (
            wants(&request.filters, ItemKind::Chunk),
            wants(&request.filters, ItemKind::Memory),
        );
        let found = cascade::walk(
            &handle.ctx(),
            |files: Vec<String>| Box::pin(async move { handle.file_neighbours(&files).await }),
            &request.query,
            &seeds,
            &scope,
            kinds,
            &mut counts,
        )
        .await?;
        rows.chunks
            .extend(found.chunks.into_iter().map(|h| (h.chunk.id, h.chunk)));
        rows.memories
            .extend(found.memories.into_iter().map(|m| (m.id.clone(), m)));
        lists.push(RankedList::ranked(CandidatePath::Cascade, found.items));
        weights::apply(&mut lists, chosen, present, CASCADE_WEIGHT);
        fused = fusion::fuse(&lists);
        load_missing(handle, &fused, &mut rows).await?;
        fused.retain(|f| passes(&f.item, &rows, &request.filters, &scope, now));
        timings.cascade_us = micros(cascade_started);
    }
    if stages.boost {
        boost(handle, &mut fused, &rows).await?;
    }
    let mut items: Vec<RecallItem> = fused
        .into_iter()
        .enumerate()
        .filter_map(|(index, f)| to_item(f, index, &mut rows, &similarities, &keyword_scores))
        .map(|mut item| {
            if let ItemContent::Chunk(chunk) = &item.content {
                item.matched_symbol = matched_symbols.get(&chunk.id).cloned();
            }
            item
        })
        .collect();
    if stages.scoring {
        for item in &mut items {
            if let ItemContent::Memory(m) = &item.content {
                item.factor = memory_factor(m, request.phase, now);
                item.score *= item.factor;
            }
        }
        items.sort_by(|a, b| b.score.total_cmp(&a.score));
    }
    timings.fusion_us = micros(fusion_started);

    if stages.rerank {
        if let Some(reranker) = handle.engine().reranker.0.clone() {
            let rerank_started = Instant::now();
            if let Err(e) = rerank(&*reranker, request, &mut items).await {
                skipped.push(format!("rerank: {}: {e}", e.code()));
            }
            timings.rerank_us = micros(rerank_started);
        }
    }
    let triggers_started = Instant::now();
    put_triggered_first(handle, request, &mut items, now).await?;
    timings.fusion_us += micros(triggers_started);
    items.truncate(request.limit_or_default());

    let packing_started = Instant::now();
    let budget = request
        .budget_tokens
        .unwrap_or_else(|| phase_budget(request.phase));
    let (context, used_tokens) = if stages.packing {
        let packed = packing::pack(&mut items, request.phase, budget);
        (packed.text, packed.tokens)
    } else {
        for item in &mut items {
            item.citation = packing::citation(&item.content);
        }
        (String::new(), 0)
    };
    timings.packing_us = micros(packing_started);
    timings.total_us = micros(started);
    Ok(Recall {
        query_kind: kind,
        items,
        context,
        budget_tokens: budget,
        used_tokens,
        timings,
        skipped,
        corrected_query,
        hypothetical: None,
        weights,
        evidence,
    })
}

/// With `track_access`: the memories in the context count as used, and a recall that could
/// hold memories but found none is noted as a memory gap.
async fn track(handle: &Engram, request: &RecallRequest, recall: &Recall) -> Result<()> {
    // A blank query finds nothing and asks for nothing: no gap either.
    if !request.track_access || request.query.trim().is_empty() {
        return Ok(());
    }
    let (items, stages) = (&recall.items, request.stages);
    {
        let could_hold_memories = wants(&request.filters, ItemKind::Memory);
        let found_memories = items
            .iter()
            .any(|i| matches!(i.content, ItemContent::Memory(_)));
        let used: Vec<String> = items
            .iter()
            .filter(|i| !stages.packing || i.pack.in_context())
            .filter_map(|i| match &i.content {
                ItemContent::Memory(m) => Some(m.id.clone()),
                ItemContent::Chunk(_) => None,
            })
            .collect();
        memory::touch(&handle.ctx(), &used, request.session_id.as_deref()).await?;
        if could_hold_memories {
            crate::lifecycle::note_recall_for_gaps(
                &handle.ctx(),
                &request.query,
                request.session_id.as_deref(),
                found_memories,
            )
            .await?;
        }
    }
    Ok(())
}

/// Fewer keyword hits than this (chunks and memories together) and the query's unknown words
/// are corrected (see `typo`).
const TYPO_TRIGGER: usize = 5;

/// BM25 over chunks and memories; when that finds too little, once more with the words no
/// index holds corrected to the closest indexed terms.
async fn keyword_path(
    handle: &Engram,
    request: &RecallRequest,
    scope: &[String],
    counts: &mut TermCounts,
) -> Result<PathOutput> {
    let started = Instant::now();
    let filters = &request.filters;
    let mut out = keyword_lists(handle, &request.query, filters, scope, counts).await?;
    let found: usize = out.lists.iter().map(|l| l.items.len()).sum();
    if request.stages.typo && found < TYPO_TRIGGER {
        let ctx = handle.ctx();
        let vocabulary = &handle.engine().vocabulary;
        if let Some(corrected) =
            typo::corrected_query(&ctx, vocabulary, &request.query, counts).await?
        {
            let more = keyword_lists(handle, &corrected, filters, scope, counts).await?;
            for (item, score) in more.keyword_scores {
                out.keyword_scores.entry(item).or_insert(score);
            }
            out.lists.extend(more.lists);
            out.rows.chunks.extend(more.rows.chunks);
            out.rows.memories.extend(more.rows.memories);
            out.all_terms += more.all_terms;
            out.corrected_query = Some(corrected);
        }
    }
    out.micros = micros(started);
    Ok(out)
}

/// BM25 over chunks (all terms, then any term to fill the depth) and over memories.
async fn keyword_lists(
    handle: &Engram,
    query: &str,
    filters: &RecallFilters,
    scope: &[String],
    counts: &mut TermCounts,
) -> Result<PathOutput> {
    let mut out = PathOutput::default();
    if wants(filters, ItemKind::Chunk) {
        if let Some(parsed) = FtsQuery::parse(query) {
            let mut reader = handle.engine().store.reader().await;
            let mut hits = code_read::search_chunks(
                &reader,
                handle.project_id(),
                &parsed.and_expr(),
                CANDIDATES,
                scope,
            )
            .await?;
            out.all_terms += hits.len() as u32;
            if parsed.has_alternatives() && (hits.len() as u32) < CANDIDATES / 2 {
                let fill = distinctive_terms(&mut reader, counts, &parsed).await?;
                let more = code_read::search_chunks(
                    &reader,
                    handle.project_id(),
                    &fill.or_expr(),
                    CANDIDATES,
                    scope,
                )
                .await?;
                let seen: HashSet<i64> = hits.iter().map(|h| h.chunk.id).collect();
                hits.extend(more.into_iter().filter(|h| !seen.contains(&h.chunk.id)));
                hits.truncate(CANDIDATES as usize);
            }
            out.add_chunks(CandidatePath::Keyword, hits);
        }
    }
    if wants(filters, ItemKind::Memory) {
        let options = SearchOptions {
            limit: Some(CANDIDATES),
            mode: SearchMode::Auto,
            filter: ListFilter {
                types: filters.types.clone(),
                scopes: filters.scopes.clone(),
                share_scopes: filters.share_scopes.clone(),
                // Stored confidence bounds the decayed one from above: a safe pre-filter.
                min_confidence: filters.min_confidence,
                ..ListFilter::default()
            },
            // The keyword path corrects the query itself, for chunks and memories alike.
            typo: false,
        };
        let hits = handle.search(query, &options).await?;
        out.all_terms += hits.iter().filter(|h| h.matched_all).count() as u32;
        let scores: Vec<f32> = hits.iter().map(|h| h.score as f32).collect();
        let memories = hits.into_iter().map(|h| h.memory).collect();
        out.add_memories(CandidatePath::Keyword, memories, &scores);
    }
    Ok(out)
}

/// Share of all chunks above which a term is too common to widen the OR fill on its own...
const COMMON_TERM_SHARE: f64 = 0.02;
/// ...once it is in this many chunks (scoring a few hundred matches costs nothing worth saving,
/// and a small project keeps every term).
const COMMON_TERM_MIN_CHUNKS: f64 = 1000.0;

/// The query reduced to the terms that pick chunks out, for the OR fill (see
/// [`FtsQuery::distinctive`]): those in at most [`COMMON_TERM_SHARE`] of the chunks or fewer
/// than [`COMMON_TERM_MIN_CHUNKS`]. Measured: `copy` is in a fifth of all code chunks (11 ms
/// for "copy a directory tree recursively" at 76k chunks, 1 ms without `copy`).
async fn distinctive_terms(
    reader: &mut Reader<'_>,
    counts: &mut TermCounts,
    query: &FtsQuery,
) -> Result<FtsQuery> {
    let total = counts.total(reader).await? as f64;
    let mut frequencies = Vec::with_capacity(query.positive.len());
    for expr in query.term_exprs() {
        frequencies.push(counts.of(reader, &expr).await?);
    }
    let common = (total * COMMON_TERM_SHARE).max(COMMON_TERM_MIN_CHUNKS) as u64;
    Ok(query.distinctive(&frequencies, common))
}

/// The query's vector against the chunk and memory indexes of the current model.
async fn dense_path(
    handle: &Engram,
    request: &RecallRequest,
    scope: &[String],
    hypothetical: Option<&str>,
) -> Result<PathOutput> {
    let started = Instant::now();
    let mut out = PathOutput::default();
    let mut vectors = Vec::new();
    match handle.embed_one(&request.query, InputKind::Query).await {
        Ok(found) => vectors.push(found),
        Err(e) => {
            out.skipped = Some(format!("dense: {}: {e}", e.code()));
            out.micros = micros(started);
            return Ok(out);
        }
    }
    if let Some(text) = hypothetical {
        // A hypothetical that cannot be embedded leaves the query's own lists standing. It is
        // an answer, written like what is stored: a document to a model that tells them apart.
        match handle.embed_one(text, InputKind::Document).await {
            Ok(found) => vectors.push(found),
            Err(e) => out.skipped = Some(format!("hyde: {}: {e}", e.code())),
        }
    }
    out.embed_micros = micros(started);
    // The query's vector first: its similarities are the ones reported; the hypothetical's
    // lists join the path's (fusion keeps an item's best rank within a path).
    for (index, (model, vector)) in vectors.into_iter().enumerate() {
        dense_lists(handle, request, scope, &model, vector, index == 0, &mut out).await?;
    }
    out.micros = micros(started);
    Ok(out)
}

/// The dense path's lists for one query vector, per kind the filters allow; with
/// `keep_similarity`, each item's cosine similarity goes into `out.similarities`.
#[allow(clippy::too_many_arguments)]
async fn dense_lists(
    handle: &Engram,
    request: &RecallRequest,
    scope: &[String],
    model: &crate::embed::EmbedderId,
    vector: Vec<f32>,
    keep_similarity: bool,
    out: &mut PathOutput,
) -> Result<()> {
    let filters = &request.filters;
    let kinds: Vec<ItemKind> = [ItemKind::Chunk, ItemKind::Memory]
        .into_iter()
        .filter(|kind| wants(filters, *kind))
        .collect();
    let queries: Vec<DenseQuery> = kinds
        .iter()
        .map(|&kind| DenseQuery {
            limit: CANDIDATES as usize,
            kinds: vec![kind],
            paths: if kind == ItemKind::Chunk {
                scope.to_vec()
            } else {
                Vec::new()
            },
            memory_types: if kind == ItemKind::Memory {
                filters
                    .types
                    .iter()
                    .map(|t| t.as_str().to_owned())
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    let store = &handle.engine().store;
    // Both indexes at once: each scan runs on the blocking pool, so the memories' overlaps the
    // chunks' instead of waiting for it.
    let rankings = futures::future::try_join_all(queries.iter().map(|query| {
        crate::vector::dense_ranking(
            store,
            &handle.engine().vectors,
            handle.project_id(),
            model,
            vector.clone(),
            query,
        )
    }))
    .await?;
    for (kind, ranked) in kinds.into_iter().zip(rankings) {
        if keep_similarity && kind == ItemKind::Chunk {
            let mut reader = store.reader().await;
            for ((chunk, _), symbol) in crate::vector::part_symbols(&mut reader, &ranked).await? {
                out.matched_symbols.insert(chunk, symbol);
            }
        }
        // Chunks are named by their id already (their rows are read after fusion, where a
        // chunk deleted meanwhile drops out); memories by id, not by the index's seq.
        let scored: Vec<(ItemRef, f32)> = match kind {
            ItemKind::Chunk => ranked
                .into_iter()
                .map(|r| (ItemRef::Chunk(r.hit.id), r.hit.score))
                .collect(),
            ItemKind::Memory => crate::vector::describe(store, ranked)
                .await?
                .into_iter()
                .filter_map(|h| Some((ItemRef::Memory(h.memory_id?), h.score)))
                .collect(),
        };
        if keep_similarity {
            out.similarities.extend(scored.iter().cloned());
        }
        let (items, similarities) = scored.into_iter().unzip();
        out.lists.push(RankedList {
            similarities,
            temperature: fusion::dense_temperature(model),
            ..RankedList::ranked(CandidatePath::Dense, items)
        });
    }
    Ok(())
}

/// From the recent files and their graph neighbours: the chunks there sharing a term with the
/// query (by the terms' rarity, see `graph_chunks`), and the memories attached to them
/// (recent files first).
async fn graph_path(
    handle: &Engram,
    request: &RecallRequest,
    scope: &[String],
    counts: &mut TermCounts,
) -> Result<PathOutput> {
    let started = Instant::now();
    let mut out = PathOutput::default();
    if request.recent_files.is_empty() {
        return Ok(out);
    }
    let neighbours = handle.file_neighbours(&request.recent_files).await?;
    let mut files: Vec<String> = request.recent_files.clone();
    for recent in &request.recent_files {
        for next in neighbours.get(recent).into_iter().flatten() {
            if !files.contains(next) {
                files.push(next.clone());
            }
        }
    }
    files.truncate(super::neighbourhood::MAX_FILES);
    let filters = &request.filters;
    if wants(filters, ItemKind::Chunk) {
        let hits = super::graph_chunks::rank_in_scope(
            &handle.engine().store,
            handle.project_id(),
            counts,
            &request.query,
            &files,
            scope,
            CANDIDATES as usize,
        )
        .await?;
        out.add_chunks(CandidatePath::Graph, hits);
    }
    if wants(filters, ItemKind::Memory) {
        let attached = memory::attached_to_files(&handle.ctx(), &files, CANDIDATES).await?;
        let memories = attached.into_iter().map(|(_, m)| m).collect();
        out.add_memories(CandidatePath::Graph, memories, &[]);
    }
    out.micros = micros(started);
    Ok(out)
}

/// The memories whose trigger pattern is in the query or a recent file's path go first (the
/// seed's negative memories: "never commit .env files" when `.env` is in play), at most
/// [`MAX_TRIGGERED`], most confident first, when the filters allow them.
async fn put_triggered_first(
    handle: &Engram,
    request: &RecallRequest,
    items: &mut Vec<RecallItem>,
    now: i64,
) -> Result<()> {
    if !wants(&request.filters, ItemKind::Memory) {
        return Ok(());
    }
    let query = request.query.to_lowercase();
    let files: Vec<String> = request
        .recent_files
        .iter()
        .map(|f| f.to_lowercase())
        .collect();
    let mut chosen: Vec<(Memory, String)> = Vec::new();
    for memory in memory::triggered(&handle.ctx()).await? {
        if chosen.len() >= MAX_TRIGGERED {
            break;
        }
        let Some(pattern) = memory
            .triggers
            .iter()
            .find(|t| query.contains(t.as_str()) || files.iter().any(|f| f.contains(t.as_str())))
            .cloned()
        else {
            continue;
        };
        if memory_passes(&memory, &request.filters, now) {
            chosen.push((memory, pattern));
        }
    }
    let top_score = items.iter().map(|i| i.score).fold(0.0, f64::max);
    for (memory, pattern) in chosen.into_iter().rev() {
        let found = items
            .iter()
            .position(|i| matches!(&i.content, ItemContent::Memory(m) if m.id == memory.id));
        let mut item = match found {
            Some(at) => items.remove(at),
            None => RecallItem::new(
                ItemContent::Memory(memory),
                top_score,
                StageRanks::default(),
            ),
        };
        item.triggered_by = Some(pattern);
        items.insert(0, item);
    }
    Ok(())
}

/// Stage 3: the reranker scores the top of the list again and that part is put in its order
/// (the rest keeps the fused order after it). On failure the list is left as it was.
async fn rerank(
    reranker: &dyn super::rerank::Reranker,
    request: &RecallRequest,
    items: &mut Vec<RecallItem>,
) -> Result<()> {
    let depth = request
        .rerank_depth
        .unwrap_or(super::rerank::DEFAULT_RERANK_DEPTH) as usize;
    let depth = depth.min(items.len());
    if depth == 0 {
        return Ok(());
    }
    let documents: Vec<String> = items[..depth]
        .iter()
        .map(|item| match &item.content {
            // The contextual prefix says where the code sits, as it does for the other stages.
            ItemContent::Chunk(c) => format!("{}\n{}", c.context, c.content),
            ItemContent::Memory(m) => m.content.clone(),
        })
        .collect();
    let scores = reranker.rerank(request.query.clone(), documents).await?;
    // Any `Reranker` may be plugged in: one finite score per item, or the order stands.
    let scores = super::rerank::checked(scores, depth)
        .map_err(|why| crate::error::Error::Rerank(format!("{} {why}", reranker.name())))?;
    let mut head: Vec<Option<RecallItem>> = items.drain(..depth).map(Some).collect();
    let reordered: Vec<RecallItem> = super::rerank::order_by_scores(&scores)
        .into_iter()
        .enumerate()
        .filter_map(|(position, i)| {
            let mut item = head[i].take()?;
            item.ranks.rerank = Some(position as u32 + 1);
            item.rerank_score = Some(scores[i]);
            Some(item)
        })
        .collect();
    items.splice(0..0, reordered);
    Ok(())
}

/// Reads the rows of fused items no path loaded (dense hits carry ids only).
async fn load_missing(handle: &Engram, fused: &[Fused], rows: &mut Rows) -> Result<()> {
    let mut chunk_ids = Vec::new();
    let mut memory_ids = Vec::new();
    for f in fused {
        match &f.item {
            ItemRef::Chunk(id) if !rows.chunks.contains_key(id) => chunk_ids.push(*id),
            ItemRef::Memory(id) if !rows.memories.contains_key(id) => memory_ids.push(id.clone()),
            _ => {}
        }
    }
    if !chunk_ids.is_empty() {
        let reader = handle.engine().store.reader().await;
        for chunk in code_read::chunks_by_ids(&reader, handle.project_id(), &chunk_ids).await? {
            rows.chunks.insert(chunk.id, chunk);
        }
    }
    for memory in memory::get_many(&handle.ctx(), &memory_ids).await? {
        rows.memories.insert(memory.id.clone(), memory);
    }
    Ok(())
}

/// Whether an item exists (it may have gone since a vector index was read) and passes the
/// filters.
fn passes(
    item: &ItemRef,
    rows: &Rows,
    filters: &RecallFilters,
    scope: &[String],
    now: i64,
) -> bool {
    match item {
        ItemRef::Chunk(id) => {
            wants(filters, ItemKind::Chunk)
                && rows
                    .chunks
                    .get(id)
                    .is_some_and(|c| scope.is_empty() || under_any(&c.path, scope))
        }
        ItemRef::Memory(id) => rows
            .memories
            .get(id)
            .is_some_and(|m| memory_passes(m, filters, now)),
    }
}

/// Whether a memory may be returned under `filters` (`now` decays its confidence).
fn memory_passes(m: &Memory, filters: &RecallFilters, now: i64) -> bool {
    wants(filters, ItemKind::Memory)
        && !m.deprecated
        && (filters.include_stale || m.stale_at.is_none())
        && (filters.types.is_empty() || filters.types.contains(&m.memory_type))
        && (filters.scopes.is_empty() || filters.scopes.contains(&m.scope))
        && (filters.share_scopes.is_empty() || filters.share_scopes.contains(&m.share_scope))
        && filters
            .min_confidence
            .is_none_or(|min| current_confidence(m, now) >= min)
        && (filters.files.is_empty()
            || m.related_files.iter().any(|f| under_any(f, &filters.files)))
        && (filters.modules.is_empty()
            || m.related_modules.iter().any(|module| {
                filters
                    .modules
                    .iter()
                    .any(|f| f == module.trim_end_matches('/'))
            })
            || m.related_files
                .iter()
                .any(|f| under_any(f, &filters.modules)))
}

/// The graph neighbourhood boost over the filtered candidates: an item's files are a chunk's
/// file or a memory's related files.
async fn boost(handle: &Engram, fused: &mut [Fused], rows: &Rows) -> Result<()> {
    let files_of = |item: &ItemRef| -> Vec<String> {
        match item {
            ItemRef::Chunk(id) => rows.chunks.get(id).map(|c| vec![c.path.clone()]),
            ItemRef::Memory(id) => rows.memories.get(id).map(|m| m.related_files.clone()),
        }
        .unwrap_or_default()
    };
    let mut top_files: Vec<String> = Vec::new();
    for f in fused.iter().take(fusion::BOOST_TOP) {
        for file in files_of(&f.item) {
            if !top_files.contains(&file) {
                top_files.push(file);
            }
        }
    }
    let neighbours = handle.file_neighbours(&top_files).await?;
    fusion::neighbourhood_boost(fused, |top, candidate| {
        let candidate_files = files_of(candidate);
        files_of(top).iter().any(|t| {
            neighbours
                .get(t)
                .is_some_and(|n| candidate_files.iter().any(|c| n.contains(c)))
        })
    });
    Ok(())
}

/// The cascade list's weight, as a share of the query kind's graph weight.
const CASCADE_WEIGHT: f64 = 1.0;

/// The cascade's starting points: the top fused items with their files and related memories.
fn cascade_seeds(fused: &[Fused], rows: &Rows) -> Vec<cascade::Seed> {
    let top = fused
        .first()
        .map_or(1.0, |f| f.score)
        .max(f64::MIN_POSITIVE);
    fused
        .iter()
        .take(cascade::SEEDS)
        .map(|f| {
            let (files, related) = match &f.item {
                ItemRef::Chunk(id) => (
                    rows.chunks
                        .get(id)
                        .map(|c| vec![c.path.clone()])
                        .unwrap_or_default(),
                    Vec::new(),
                ),
                ItemRef::Memory(id) => rows
                    .memories
                    .get(id)
                    .map(|m| {
                        let related = m
                            .relations
                            .iter()
                            .filter_map(|r| Some((r.target_memory_id.clone()?, r.confidence)))
                            .collect();
                        (m.related_files.clone(), related)
                    })
                    .unwrap_or_default(),
            };
            cascade::Seed {
                item: f.item.clone(),
                weight: f.score / top,
                files,
                related,
            }
        })
        .collect()
}

/// The item for a fused candidate at `index` (its rows move out of `rows`).
fn to_item(
    f: Fused,
    index: usize,
    rows: &mut Rows,
    similarities: &HashMap<ItemRef, f32>,
    keyword_scores: &HashMap<ItemRef, f32>,
) -> Option<RecallItem> {
    let similarity = similarities.get(&f.item).copied();
    let keyword_score = keyword_scores.get(&f.item).copied();
    let content = match &f.item {
        ItemRef::Chunk(id) => ItemContent::Chunk(rows.chunks.remove(id)?),
        ItemRef::Memory(id) => ItemContent::Memory(rows.memories.remove(id)?),
    };
    Some(RecallItem {
        boost: f.boost,
        similarity,
        keyword_score,
        ..RecallItem::new(
            content,
            f.score,
            StageRanks {
                keyword: f.ranks.keyword,
                dense: f.ranks.dense,
                graph: f.ranks.graph,
                cascade: f.ranks.cascade,
                fused: index as u32 + 1,
                rerank: None,
            },
        )
    })
}
