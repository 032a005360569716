//! The dense-search surface of the binding: `embedPending()` (give everything indexed a vector,
//! with progress and an AbortSignal) and `denseSearch()`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional_object, required};
use super::class::{options_with_signal, settle, Engram};
use super::error::promise;
use super::reporter::Reporter;
use super::strict::Count;
use crate::error::Error as CoreError;
use crate::vector::{DenseQuery, ItemKind};

/// Where an `embedPending()` run stands.
#[napi(object)]
pub struct EmbedProgress {
    /// `'chunk'` (embedded first) or `'memory'`.
    pub kind: String,
    /// Items of this kind given a vector so far in this run (chunks count their parts).
    pub done: u32,
    /// Items of this kind without a vector when the run started (grows if more arrive).
    pub total: u32,
}

/// What an `embedPending()` run did.
#[napi(object)]
pub struct EmbedReport {
    /// The model the vectors belong to (`local:all-minilm-l6-v2@128:384`).
    pub model: String,
    /// Chunks given a vector.
    pub chunks: u32,
    /// Definitions inside chunks that hold several (a `block` of small ones, the members of a
    /// class that fit whole) given a vector of their own: a dense hit on one ranks its chunk
    /// and names the definition as the hit's `symbol`.
    pub parts: u32,
    /// Memories given a vector.
    pub memories: u32,
    /// Texts that actually ran through the model (the rest came from the embedding cache or
    /// shared an identical text).
    pub texts_embedded: u32,
}

/// Options of `denseSearch()`.
#[napi(object)]
pub struct DenseSearchOptions {
    /// Hits wanted, over chunks and memories together (1..=1000, default 10).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
    /// `['chunk']`, `['memory']` or both (the default).
    pub kinds: Option<Vec<String>>,
    /// Chunks only under these paths (files or directories, relative to the project root).
    pub paths: Option<Vec<String>>,
    /// Memories only of these types.
    pub memory_types: Option<Vec<String>>,
}

/// One `denseSearch()` hit.
#[napi(object)]
pub struct DenseHit {
    /// `'chunk'` or `'memory'`.
    pub kind: String,
    /// Cosine similarity to the query (-1..1).
    pub score: f64,
    /// Chunks: the chunk's id (as in `chunksOf()`).
    pub chunk_id: Option<i64>,
    /// Chunks: the file, relative to the project root.
    pub path: Option<String>,
    /// Chunks: the qualified name of the definition the chunk is, or of the definition it holds
    /// (one of a `block`, a member of a class that fit whole) whose own vector matched best.
    pub symbol: Option<String>,
    /// Chunks: first line, 1-based.
    pub start_line: Option<u32>,
    /// Chunks: last line, inclusive.
    pub end_line: Option<u32>,
    /// Memories: the memory's id.
    pub memory_id: Option<String>,
    /// Memories: its type.
    pub memory_type: Option<String>,
}

fn clamp_u32(n: u64) -> u32 {
    n.min(u64::from(u32::MAX)) as u32
}

fn kinds(names: Option<Vec<String>>) -> std::result::Result<Vec<ItemKind>, CoreError> {
    names
        .unwrap_or_default()
        .iter()
        .map(|name| match name.as_str() {
            "chunk" => Ok(ItemKind::Chunk),
            "memory" => Ok(ItemKind::Memory),
            other => Err(CoreError::invalid(format!(
                "kinds may hold 'chunk' and 'memory', got '{other}'"
            ))),
        })
        .collect()
}

#[napi]
impl Engram {
    /// Gives every indexed chunk and every memory of the project that has no vector for the
    /// current model one, off the JS thread (chunks first). Resumable: an aborted or crashed run
    /// keeps what it stored and the next run starts where the vectors stop; changing the model
    /// (or its `maxTokens`) makes everything pending again. Chunks whose text was embedded
    /// before (an undo, a branch switch) take the stored vector without running the model.
    /// `onProgress` is called after every step (about a second of work); aborting `signal`
    /// rejects with `ENGRAM_ABORTED`; an `onProgress` that throws or rejects stops the run with
    /// `ENGRAM_CALLBACK`. Await it when everything must be searchable (benchmarks,
    /// the CLI). Rejects with `ENGRAM_MODEL_UNAVAILABLE` without a model.
    ///
    /// ```ts
    /// await memory.index()
    /// const report = await memory.embedPending({ onProgress: (p) => console.log(p.kind, p.done, p.total) })
    /// ```
    #[napi(
        ts_args_type = "options?: { onProgress?: (progress: EmbedProgress) => void; signal?: AbortSignal }",
        ts_return_type = "Promise<EmbedReport>"
    )]
    pub fn embed_pending<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, EmbedReport>> {
        let handle = arg!(env, self.handle());
        let cancel = Arc::new(AtomicBool::new(false));
        let options = arg!(
            env,
            options_with_signal(env, options.as_ref(), &["onProgress", "signal"], &cancel)
        );
        let progress = match &options {
            Some(options) => arg!(
                env,
                Reporter::<EmbedProgress>::option(options, "onProgress")
            )
            .map(|r| r.stop_on_failure(cancel.clone())),
            None => None,
        };
        let failure = progress.as_ref().map(Reporter::failure);
        let work = async move {
            let report = move |p: crate::vector::EmbedProgress| {
                if let Some(callback) = &progress {
                    callback.report(EmbedProgress {
                        kind: p.kind.as_str().to_owned(),
                        done: clamp_u32(p.done),
                        total: clamp_u32(p.total),
                    });
                }
            };
            settle(&failure, handle.embed_pending(report, &cancel).await).await
        };
        promise(env, work, |r| EmbedReport {
            model: r.model.key(),
            chunks: clamp_u32(r.chunks),
            parts: clamp_u32(r.parts),
            memories: clamp_u32(r.memories),
            texts_embedded: clamp_u32(r.texts_embedded),
        })
    }

    /// The chunks and memories closest in meaning to `query`: the query is embedded with the
    /// engine's model and compared (cosine, exact) with every vector of that model in the
    /// project. Only items `embedPending()` has reached are found. Filters: `paths` (chunks under
    /// these files or directories) and `memoryTypes`. Rejects with `ENGRAM_MODEL_UNAVAILABLE`
    /// without a model, `ENGRAM_INVALID_ARG` for an empty query or a bad option.
    ///
    /// ```ts
    /// const hits = await memory.denseSearch('where are passwords checked', { limit: 5, kinds: ['chunk'] })
    /// for (const h of hits) console.log(h.score.toFixed(3), h.path, h.symbol, h.startLine)
    /// ```
    #[napi(
        ts_args_type = "query: string, options?: DenseSearchOptions",
        ts_return_type = "Promise<DenseHit[]>"
    )]
    pub fn dense_search<'env>(
        &self,
        env: &'env Env,
        query: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, Vec<DenseHit>>> {
        let handle = arg!(env, self.handle());
        let query: String = arg!(env, required(env, &query, "query"));
        let options: Option<DenseSearchOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let options = options.unwrap_or(DenseSearchOptions {
            limit: None,
            kinds: None,
            paths: None,
            memory_types: None,
        });
        let core = DenseQuery {
            limit: options.limit.map_or(10, usize::from),
            kinds: arg!(env, kinds(options.kinds)),
            paths: options.paths.unwrap_or_default(),
            memory_types: options.memory_types.unwrap_or_default(),
        };
        promise(
            env,
            async move { handle.dense_search(&query, core).await },
            |hits| {
                hits.into_iter()
                    .map(|h| DenseHit {
                        kind: h.kind.as_str().to_owned(),
                        score: f64::from(h.score),
                        chunk_id: h.chunk_id,
                        path: h.path,
                        symbol: h.symbol,
                        start_line: h.start_line,
                        end_line: h.end_line,
                        memory_id: h.memory_id,
                        memory_type: h.memory_type,
                    })
                    .collect()
            },
        )
    }
}
