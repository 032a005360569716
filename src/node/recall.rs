//! `recall()` and `stepInjection()`: the retrieval pipeline's JS surface. Options are converted and checked here;
//! the result crosses as JSON (see `json.rs`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional_object, required, required_object};
use super::class::Engram;
use super::code_types::CodeChunk;
use super::json::{promise_json, JsonText};
use super::strict::{callback_timeout, Count};
use super::text_callback::{TextFunction, TextRequest};
use super::types::{Memory, MemoryScope, MemoryType, ShareScope};
use crate::error::Error as CoreError;
use crate::retrieval::hyde::{Hyde, HydeOptions, HydeRequest};
use crate::retrieval::injection::{StepContext as CoreStepContext, ToolCall};
use crate::retrieval::recall as core;
use crate::retrieval::request::{RecallFilters as CoreFilters, RecallRequest, Stages};
use crate::retrieval::scoring::Phase;
use crate::vector::ItemKind;

/// What a recall may return. Every filter left out allows everything.
#[napi(object, object_to_js = false)]
pub struct RecallFilters {
    /// Chunks, memories, or both (the default).
    #[napi(ts_type = "Array<'chunk' | 'memory'>")]
    pub kinds: Option<Vec<String>>,
    /// Memories of these types only (chunks are not affected).
    pub types: Option<Vec<MemoryType>>,
    /// Memories in these scopes only.
    pub scopes: Option<Vec<MemoryScope>>,
    /// Memories in these share scopes only (personal, project, team, organization).
    pub share_scopes: Option<Vec<ShareScope>>,
    /// Chunks in these files or directories, memories related to a file in them (relative to
    /// the project root, or absolute inside it).
    pub files: Option<Vec<String>>,
    /// Chunks under these module directories (`src/auth/`), memories naming one of them or
    /// related to a file under one.
    pub modules: Option<Vec<String>>,
    /// Memories whose current confidence (decayed since their last use) is at least this.
    pub min_confidence: Option<f64>,
    /// Also memories marked stale because the code they are about changed (default false).
    pub include_stale: Option<bool>,
}

/// Which stages run: each can be switched off for a call (how ablations are measured).
#[napi(object, object_to_js = false)]
pub struct RecallStages {
    /// BM25 over chunks and memories (default true).
    pub keyword: Option<bool>,
    /// Vector similarity (default true; skipped and reported when no model is available).
    pub dense: Option<bool>,
    /// Neighbours of `recentFiles` in the code graph and the memories attached to them
    /// (default true).
    pub graph: Option<bool>,
    /// The graph neighbourhood boost of candidates 11-50 next to the top 10 (default false: it
    /// did not help on the dev evaluation).
    pub boost: Option<bool>,
    /// Each memory's standing: phase weight, source trust, decayed confidence, use (default
    /// true).
    pub scoring: Option<bool>,
    /// The configured reranker, when there is one (default true).
    pub rerank: Option<bool>,
    /// The packed context (default true; off: `context` is empty).
    pub packing: Option<bool>,
    /// Correcting misspelt terms when exact keyword search finds too little (default true).
    pub typo: Option<bool>,
    /// The cascade: a walk from the top hits to their files, the files one code edge away and
    /// the memories they relate to, whose finds join the fusion (default false).
    pub cascade: Option<bool>,
}

/// Options of `recall()`.
#[napi(object, object_to_js = false)]
pub struct RecallOptions {
    /// What the agent is doing: weighs memory types (a gotcha counts more while implementing)
    /// and sets the default budget (define 2500, implement 3000, validate 2500, refine 2000,
    /// explore 2000, reflect 1500 tokens).
    #[napi(ts_type = "'define' | 'implement' | 'validate' | 'refine' | 'explore' | 'reflect'")]
    pub phase: Option<String>,
    /// Files the agent read or edited lately, most recent first: the graph path starts there.
    pub recent_files: Option<Vec<String>>,
    /// The agent's recent tool calls by name (`Grep`, `Read`...), most recent first: a run of
    /// searches makes the query structural.
    pub recent_tool_calls: Option<Vec<String>>,
    /// What may be returned.
    pub filters: Option<RecallFilters>,
    /// Tokens the packed context may use (1..200000; default: the phase's budget, else 2500).
    #[napi(ts_type = "number")]
    pub budget_tokens: Option<Count>,
    /// Ranked items returned (1..200, default 20).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
    /// Items the configured reranker scores again, from the top of the fused list (1..200,
    /// default 30).
    #[napi(ts_type = "number")]
    pub rerank_depth: Option<Count>,
    /// Stages to switch off for this call.
    pub stages: Option<RecallStages>,
    /// Count the memories put into the context as used (access count and last access, which
    /// keep their confidence from decaying). Set it when the context goes into an agent's
    /// prompt; leave it off for browsing. Default false.
    pub track_access: Option<bool>,
    /// The agent session (1 to 256 bytes). With `trackAccess`, the memories used count for
    /// the session's summary, and a recall that finds no memory is noted as a memory gap.
    pub session_id: Option<String>,
    /// Leave out memories whose current confidence is not above the project's trust-level
    /// injection threshold (0.80 at level 1 ... 0.45 at level 4; with `filters.minConfidence`
    /// the stricter wins). Default false.
    pub apply_trust: Option<bool>,
    /// The HyDE fallback: when fewer than `minResults` items are close to the query's vector,
    /// your model writes the memory that would answer it and the dense path searches with that
    /// too. For searches an agent asks for, not for context injected unasked.
    pub hyde: Option<RecallHyde>,
}

/// What `hyde.generate` is asked.
#[napi(object, object_from_js = false)]
pub struct HydeGenerateRequest {
    /// The recall's query.
    pub query: String,
    /// The spec's prompt for a fast model: "Write a 2-sentence memory that would perfectly
    /// answer: ...".
    pub prompt: String,
}

impl TextRequest for HydeGenerateRequest {
    const FUNCTION: &'static str = "hyde.generate";
}

/// The HyDE fallback of `recall()`.
#[napi(object, object_to_js = false)]
pub struct RecallHyde {
    /// Your fast model: returns the hypothetical memory (text), or null for none. Its
    /// failures (a throw, a rejection, another type, `timeoutMs`) are named in `skipped` and
    /// the first result stands; what it writes is searched with, never stored.
    #[napi(ts_type = "(request: HydeGenerateRequest) => string | null | Promise<string | null>")]
    pub generate: TextFunction<HydeGenerateRequest>,
    /// Items needed close to the query for the fallback not to run (1..200, default 3).
    #[napi(ts_type = "number")]
    pub min_results: Option<Count>,
    /// Cosine similarity to the query an item needs to count as close (-1..1; default 0.5 for
    /// the built-in model, moved to another local model's scale: 0.917 for
    /// multilingual-e5-small).
    pub min_similarity: Option<f64>,
    /// How long `generate` may take, in ms (default 10,000).
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Count>,
}

/// Where each stage ranked an item (1-based; absent where a path did not find it).
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallRanks {
    /// In its keyword (BM25) list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword: Option<u32>,
    /// In its dense list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense: Option<u32>,
    /// In its graph list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<u32>,
    /// In the cascade's list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cascade: Option<u32>,
    /// After fusion and filtering, before memory scoring and rerank.
    pub fused: u32,
    /// After the reranker, when one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<u32>,
}

/// One recalled item: a code chunk or a memory.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallItem {
    /// `'chunk'` or `'memory'`.
    #[napi(ts_type = "'chunk' | 'memory'")]
    pub kind: String,
    /// The memory's id, or the chunk's id as a string.
    pub id: String,
    /// Final score, higher is better (comparable within one recall only).
    pub score: f64,
    /// Its rank in each stage, for debugging and ablations.
    pub ranks: RecallRanks,
    /// What the graph neighbourhood boost added to its fused score.
    pub boost: f64,
    /// The factor a memory's standing put on its score (1 for chunks).
    pub factor: f64,
    /// `'packed'` or `'clipped'` (in the context), `'overlap'` (its lines are already there),
    /// `'budget'` (no room left), `'none'` (packing off).
    #[napi(ts_type = "'packed' | 'clipped' | 'overlap' | 'budget' | 'none'")]
    pub pack: String,
    /// Tokens it takes in the context.
    pub tokens: u32,
    /// A short reference (at most 40 characters): `src/auth.ts:10-42`, `gotcha: never...`.
    pub citation: String,
    /// The reranker's score, when it scored this item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank_score: Option<f64>,
    /// Memories: the trigger pattern found in the query or a recent file, which put it first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triggered_by: Option<String>,
    /// Cosine similarity to the query's vector (-1..1), when the dense path found the item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// Chunks: the file, relative to the project root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Chunks: the qualified name of the definition the chunk is; when the dense path found
    /// the chunk through one of the definitions it holds (one of a `block` of small ones, or a
    /// member of a class that fit whole), that definition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Chunks: first line, 1-based.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u32>,
    /// Chunks: last line, inclusive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
    /// Memories: the type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_type: Option<MemoryType>,
    /// Chunks: the chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<CodeChunk>,
    /// Memories: the memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
}

/// Milliseconds per stage of one recall.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallTimings {
    /// The keyword path.
    pub keyword_ms: f64,
    /// The dense path, query embedding included.
    pub dense_ms: f64,
    /// Of which embedding the query.
    pub embed_ms: f64,
    /// The graph path.
    pub graph_ms: f64,
    /// The cascade, when it ran (part of `fusionMs`).
    pub cascade_ms: f64,
    /// Stage 1 as a whole (its paths run concurrently).
    pub candidates_ms: f64,
    /// Fusion, loading rows, filters, boost, memory scoring and the triggered memories.
    pub fusion_ms: f64,
    /// The reranker.
    pub rerank_ms: f64,
    /// Packing the context.
    pub packing_ms: f64,
    /// The whole recall, inside the engine (with `hyde`, both runs and the model's answer;
    /// the stages are the last run's).
    pub total_ms: f64,
}

/// What `recall()` found.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallResult {
    /// How the query was read, which sets the graph path's weight.
    #[napi(ts_type = "'identifier' | 'semantic' | 'structural'")]
    pub query_kind: String,
    /// The items, best first.
    pub items: Vec<RecallItem>,
    /// The packed context: memories, then code grouped by file, each labelled `[rank]`.
    pub context: String,
    /// The budget the context was packed to.
    pub budget_tokens: u32,
    /// Tokens the context uses (estimated: 4 bytes a token).
    pub used_tokens: u32,
    /// Time per stage.
    pub timings: RecallTimings,
    /// Paths that could not run and why (`dense: ENGRAM_MODEL_UNAVAILABLE: ...`).
    pub skipped: Vec<String>,
    /// The query the keyword path searched after correcting words no index holds
    /// (`dokcer compose` -> `docker* compose`), when exact search found too little.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected_query: Option<String>,
    /// The hypothetical answer of `hyde.generate` the dense path also searched with, when the
    /// fallback ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hypothetical: Option<String>,
    /// The weight each candidate path had in this recall's fusion, read per query from
    /// `evidence` (for chunks and for memories).
    pub weights: RecallWeights,
    /// What the paths found, from which the weights were read.
    pub evidence: RecallEvidence,
}

/// The weight of each candidate path for one kind of item (0 for a path that could not rank
/// that kind: its weight went to the other).
#[napi(object)]
#[derive(serde::Serialize)]
pub struct RecallPathWeights {
    /// BM25 over this kind of item.
    pub keyword: f64,
    /// Vector similarity.
    pub dense: f64,
    /// The graph path: what is next to the recent files.
    pub graph: f64,
}

/// The paths' weights in one recall's fusion.
#[napi(object)]
#[derive(serde::Serialize)]
pub struct RecallWeights {
    /// For code chunks: keyword-led when a word of the query names a definition among the
    /// keyword path's top hits, dense-led otherwise.
    pub chunks: RecallPathWeights,
    /// For memories: dense-led.
    pub memories: RecallPathWeights,
}

/// What the candidate paths found for one query.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallEvidence {
    /// The definition a word of the query names, among the keyword path's top chunks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub named: Option<String>,
    /// Items the keyword path's all-terms query matched, before it widened to any term.
    pub all_terms: u32,
    /// The dense path's best cosine similarity to the query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense_top: Option<f64>,
}

fn path_weights(w: crate::retrieval::query_kind::PathWeights) -> RecallPathWeights {
    RecallPathWeights {
        keyword: w.keyword,
        dense: w.dense,
        graph: w.graph,
    }
}

/// One recent tool call of the agent, for `stepInjection()`.
#[napi(object, object_to_js = false)]
pub struct AgentToolCall {
    /// The tool's name: `Read`, `Edit`, `Write`, `MultiEdit` (file tools), `Grep`, `Glob`
    /// (searches); others are ignored.
    pub tool: String,
    /// The file a file tool read or changed.
    pub file_path: Option<String>,
    /// The pattern a search tool looked for.
    pub pattern: Option<String>,
}

/// What the agent did lately and what it has been shown, for `stepInjection()`.
#[napi(object, object_to_js = false)]
pub struct StepContext {
    /// Recent tool calls, oldest first (the last 50 are looked at).
    pub tool_calls: Vec<AgentToolCall>,
    /// Memories already injected in this session: never injected twice.
    pub injected_ids: Option<Vec<String>>,
    /// The agent session: what is injected counts for its `sessionSummary`.
    pub session_id: Option<String>,
}

/// A message to put in front of the agent before its next step.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepInjection {
    /// `'gotcha_injection'`: pitfalls of files it just touched; `'scratchpad_reflection'`:
    /// what it recorded since the last step (observed sessions only); `'search_short_circuit'`:
    /// a memory answering what it is searching for.
    #[napi(
        js_name = "type",
        ts_type = "'gotcha_injection' | 'scratchpad_reflection' | 'search_short_circuit'"
    )]
    #[serde(rename = "type")]
    pub kind: String,
    /// The text to add as a system message.
    pub content: String,
    /// The memories it holds (add their ids to `injectedIds`).
    pub memories: Vec<Memory>,
}

fn kinds(names: Vec<String>) -> std::result::Result<Vec<ItemKind>, CoreError> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "chunk" => Ok(ItemKind::Chunk),
            "memory" => Ok(ItemKind::Memory),
            other => Err(CoreError::invalid(format!(
                "filters.kinds may hold 'chunk' and 'memory', got '{other}'"
            ))),
        })
        .collect()
}

/// The core request for `query` and the JS options.
fn request(
    query: String,
    options: Option<RecallOptions>,
) -> std::result::Result<RecallRequest, CoreError> {
    let mut request = RecallRequest::new(query);
    let Some(o) = options else {
        return Ok(request);
    };
    request.phase = o.phase.as_deref().map(Phase::parse).transpose()?;
    request.recent_files = o.recent_files.unwrap_or_default();
    request.recent_tool_calls = o.recent_tool_calls.unwrap_or_default();
    request.budget_tokens = o.budget_tokens.map(u32::from);
    request.limit = o.limit.map(u32::from);
    request.rerank_depth = o.rerank_depth.map(u32::from);
    request.track_access = o.track_access.unwrap_or(false);
    request.session_id = o.session_id;
    request.apply_trust = o.apply_trust.unwrap_or(false);
    if let Some(f) = o.filters {
        request.filters = CoreFilters {
            kinds: kinds(f.kinds.unwrap_or_default())?,
            types: f
                .types
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            scopes: f
                .scopes
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            share_scopes: f
                .share_scopes
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            files: f.files.unwrap_or_default(),
            modules: f.modules.unwrap_or_default(),
            min_confidence: f.min_confidence,
            include_stale: f.include_stale.unwrap_or(false),
        };
    }
    if let Some(s) = o.stages {
        let d = Stages::default();
        request.stages = Stages {
            keyword: s.keyword.unwrap_or(d.keyword),
            dense: s.dense.unwrap_or(d.dense),
            graph: s.graph.unwrap_or(d.graph),
            boost: s.boost.unwrap_or(d.boost),
            scoring: s.scoring.unwrap_or(d.scoring),
            rerank: s.rerank.unwrap_or(d.rerank),
            packing: s.packing.unwrap_or(d.packing),
            typo: s.typo.unwrap_or(d.typo),
            cascade: s.cascade.unwrap_or(d.cascade),
        };
    }
    Ok(request)
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn item(i: core::RecallItem) -> RecallItem {
    let mut out = RecallItem {
        kind: String::new(),
        id: String::new(),
        score: i.score,
        ranks: RecallRanks {
            keyword: i.ranks.keyword,
            dense: i.ranks.dense,
            graph: i.ranks.graph,
            cascade: i.ranks.cascade,
            fused: i.ranks.fused,
            rerank: i.ranks.rerank,
        },
        boost: i.boost,
        factor: i.factor,
        pack: i.pack.as_str().to_owned(),
        tokens: i.tokens,
        citation: i.citation,
        rerank_score: i.rerank_score.map(f64::from),
        triggered_by: i.triggered_by,
        similarity: i.similarity.map(f64::from),
        path: None,
        symbol: None,
        start_line: None,
        end_line: None,
        memory_type: None,
        chunk: None,
        memory: None,
    };
    match i.content {
        core::ItemContent::Chunk(c) => {
            out.kind = "chunk".into();
            out.id = c.id.to_string();
            out.path = Some(c.path.clone());
            out.symbol = i
                .matched_symbol
                .or_else(|| c.qualified_name.clone())
                .or_else(|| c.name.clone());
            out.start_line = Some(c.start_line);
            out.end_line = Some(c.end_line);
            out.chunk = Some(CodeChunk::from(c));
        }
        core::ItemContent::Memory(m) => {
            out.kind = "memory".into();
            out.id = m.id.clone();
            out.memory_type = Some(m.memory_type.into());
            out.memory = Some(Memory::from(m));
        }
    }
    out
}

fn result(r: core::Recall) -> RecallResult {
    let t = r.timings;
    RecallResult {
        query_kind: r.query_kind.as_str().to_owned(),
        items: r.items.into_iter().map(item).collect(),
        context: r.context,
        budget_tokens: r.budget_tokens,
        used_tokens: r.used_tokens,
        timings: RecallTimings {
            keyword_ms: ms(t.keyword_us),
            dense_ms: ms(t.dense_us),
            embed_ms: ms(t.embed_us),
            graph_ms: ms(t.graph_us),
            cascade_ms: ms(t.cascade_us),
            candidates_ms: ms(t.candidates_us),
            fusion_ms: ms(t.fusion_us),
            rerank_ms: ms(t.rerank_us),
            packing_ms: ms(t.packing_us),
            total_ms: ms(t.total_us),
        },
        skipped: r.skipped,
        corrected_query: r.corrected_query,
        hypothetical: r.hypothetical,
        weights: RecallWeights {
            chunks: path_weights(r.weights.chunks),
            memories: path_weights(r.weights.memories),
        },
        evidence: RecallEvidence {
            named: r.evidence.named,
            all_terms: r.evidence.all_terms,
            dense_top: r.evidence.dense_top.map(f64::from),
        },
    }
}

/// How long `hyde.generate` may take unless `timeoutMs` says (an agent waits on the recall).
const HYDE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The core's fallback for the JS `hyde` option.
fn hyde(h: RecallHyde) -> std::result::Result<Hyde, CoreError> {
    let d = HydeOptions::default();
    let min_results = match h.min_results.map(u32::from) {
        None => d.min_results,
        Some(n @ 1..=200) => n as usize,
        Some(n) => {
            return Err(CoreError::invalid(format!(
                "hyde.minResults must be between 1 and 200, got {n}"
            )))
        }
    };
    let min_similarity = match h.min_similarity {
        None => d.min_similarity,
        Some(s) if (-1.0..=1.0).contains(&s) => Some(s as f32),
        Some(s) => {
            return Err(CoreError::invalid(format!(
                "hyde.minSimilarity must be between -1 and 1, got {s}"
            )))
        }
    };
    let limit = callback_timeout(h.timeout_ms, HYDE_TIMEOUT, "hyde.timeoutMs")?;
    let function = h.generate;
    Ok(Hyde {
        options: HydeOptions {
            min_results,
            min_similarity,
        },
        generate: Box::new(move |asked: HydeRequest| {
            Box::pin(async move {
                let request = HydeGenerateRequest {
                    query: asked.query,
                    prompt: asked.prompt,
                };
                function
                    .call(request, limit)
                    .await
                    .map_err(CoreError::Callback)
            })
        }),
    })
}

#[napi]
impl Engram {
    /// Memories and code chunks for `query`, ranked together, plus a context packed into a
    /// token budget with a citation per item: keyword (BM25), dense (when a model is available)
    /// and graph candidates (from `recentFiles`) fused by weights chosen from the kind of query,
    /// filtered, weighed by each memory's standing, packed by the phase's per-type shares.
    /// Any text is a valid query (at most 8 KiB). Rejects with `ENGRAM_INVALID_ARG` for a bad
    /// option or a path outside the project root.
    ///
    /// ```ts
    /// const { items, context } = await memory.recall('where are passwords checked', {
    ///   phase: 'implement',
    ///   recentFiles: ['src/auth/login.ts'],
    ///   trackAccess: true,
    /// })
    /// for (const i of items) console.log(i.kind, i.citation, i.ranks)
    /// prompt += context
    /// ```
    #[napi(
        ts_args_type = "query: string, options?: RecallOptions",
        ts_return_type = "Promise<RecallResult>"
    )]
    pub fn recall<'env>(
        &self,
        env: &'env Env,
        query: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let query: String = arg!(env, required(env, &query, "query"));
        let mut options: Option<RecallOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let hyde_option = options.as_mut().and_then(|o| o.hyde.take());
        let request = arg!(env, request(query, options));
        let fallback = arg!(env, hyde_option.map(hyde).transpose());
        promise_json(
            env,
            async move {
                match fallback {
                    Some(fallback) => handle.recall_with_hyde(request, fallback).await,
                    None => handle.recall(request).await,
                }
            },
            result,
        )
    }

    /// What to put in front of an agent before step `step` (0-based), or `null`: the seed's
    /// step injection. First the gotchas, error patterns and dead ends of the files it just
    /// read or changed (at most 4, current confidence at least 0.65, none it was shown before),
    /// else a memory matching every word of one of its last three Grep/Glob patterns (it is
    /// searching for something already known). Nothing before step 5. What is returned counts
    /// as used.
    ///
    /// ```ts
    /// prepareStep: async ({ stepNumber, messages }) => {
    ///   const injection = await memory.stepInjection(stepNumber, { toolCalls: recent, injectedIds })
    ///   if (!injection) return {}
    ///   injectedIds.push(...injection.memories.map((m) => m.id))
    ///   return { messages: [...messages, { role: 'system', content: injection.content }] }
    /// }
    /// ```
    #[napi(
        ts_args_type = "step: number, context: StepContext",
        ts_return_type = "Promise<StepInjection | null>"
    )]
    pub fn step_injection<'env>(
        &self,
        env: &'env Env,
        step: Unknown<'env>,
        context: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let step: Count = arg!(env, required(env, &step, "step"));
        let step = step.get();
        let context: StepContext = arg!(env, required_object(env, &context, "context"));
        let context = CoreStepContext {
            tool_calls: context
                .tool_calls
                .into_iter()
                .map(|c| ToolCall {
                    tool: c.tool,
                    file_path: c.file_path,
                    pattern: c.pattern,
                })
                .collect(),
            injected_ids: context.injected_ids.unwrap_or_default(),
            session_id: context.session_id,
        };
        promise_json(
            env,
            async move { handle.step_injection(step, &context).await },
            |found| found.map(step_injection_result),
        )
    }
}

/// The JS form of a step injection.
pub(super) fn step_injection_result(
    i: crate::retrieval::injection::StepInjection,
) -> StepInjection {
    StepInjection {
        kind: i.kind.as_str().to_owned(),
        content: i.content,
        memories: i.memories.into_iter().map(Memory::from).collect(),
    }
}
