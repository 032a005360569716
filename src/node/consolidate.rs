//! The `Engram` class's `consolidate`: merging near-duplicate memories, with its options and
//! report types (their `///` docs become `index.d.ts`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::optional_object_with;
use super::class::{watch_signal, Engram};
use super::json::{promise_json, JsonText};
use super::types::MemoryType;
use crate::lifecycle as core;

/// Options of `consolidate`.
#[napi(object, object_to_js = false)]
pub struct ConsolidateOptions {
    /// Cosine similarity of the current model's vectors at or above which two memories merge
    /// (default 0.95; 0.992 under multilingual-e5-small, whose cosines crowd a sixth as wide).
    /// Only memories already embedded are compared this way.
    pub threshold: Option<f64>,
    /// Word-set (Jaccard) similarity at or above which two memories merge (default 0.9); the
    /// test that works without a model.
    pub word_threshold: Option<f64>,
    /// Report the groups, change nothing.
    pub dry_run: Option<bool>,
}

impl From<ConsolidateOptions> for core::ConsolidateOptions {
    fn from(o: ConsolidateOptions) -> Self {
        core::ConsolidateOptions {
            threshold: o.threshold,
            word_threshold: o.word_threshold,
            dry_run: o.dry_run.unwrap_or(false),
        }
    }
}

/// One group of near-duplicates.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeGroup {
    /// The memory kept: pinned, else verified, else the most confident, most used, oldest.
    pub kept: String,
    /// The memories merged into it (forgotten with reason "merged into <kept>").
    pub merged: Vec<String>,
    /// Their type.
    #[napi(js_name = "type")]
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// The least similarity among the pairs that formed the group.
    pub similarity: f64,
    /// How that pair was found.
    #[napi(ts_type = "'meaning' | 'words'")]
    pub basis: String,
}

/// What `consolidate` found and did.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidateReport {
    /// Memories compared (active, not disputed, superseded or from an agent file).
    pub scanned: u32,
    /// Of those, memories with a vector for the current model.
    pub with_vectors: u32,
    /// The groups.
    pub groups: Vec<MergeGroup>,
    /// Memories merged away; 0 in a dry run.
    pub merged: u32,
    /// Near-duplicates found to contradict each other ("must" / "must not") and not linked
    /// yet: now linked `conflicts_with` both ways and in the review queue (counted only in a
    /// dry run).
    pub conflicts: u32,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

fn count(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl From<core::ConsolidateReport> for ConsolidateReport {
    fn from(r: core::ConsolidateReport) -> Self {
        ConsolidateReport {
            scanned: count(r.scanned),
            with_vectors: count(r.with_vectors),
            groups: r
                .groups
                .into_iter()
                .map(|g| MergeGroup {
                    kept: g.kept,
                    merged: g.merged,
                    memory_type: g.memory_type.into(),
                    similarity: g.similarity,
                    basis: g.basis.to_owned(),
                })
                .collect(),
            merged: count(r.merged),
            conflicts: count(r.conflicts),
            dry_run: r.dry_run,
        }
    }
}

#[napi]
impl Engram {
    /// Merges near-duplicate memories of the same type, scope and share scope into the
    /// strongest of each group: by meaning (stored vectors of the current model, cosine ≥
    /// `threshold`) and by words (Jaccard ≥ `wordThreshold`, works without a model).
    /// Contradicting, disputed, superseded and agent-file memories are never merged. The kept
    /// memory gains the others' tags and files and a `derived_from` link to each; the others
    /// are forgotten (`rollback` undoes it). Aborting `signal` rejects with `ENGRAM_ABORTED`
    /// between batches, keeping the groups merged so far.
    ///
    /// ```ts
    /// const preview = await memory.consolidate({ dryRun: true })
    /// for (const g of preview.groups) console.log(g.kept, '<=', g.merged, g.basis, g.similarity)
    /// ```
    #[napi(
        ts_args_type = "options?: ConsolidateOptions & { signal?: AbortSignal }",
        ts_return_type = "Promise<ConsolidateReport>"
    )]
    pub fn consolidate<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let parsed: Option<ConsolidateOptions> = arg!(
            env,
            optional_object_with(env, options.as_ref(), "options", &["signal"])
        );
        let core_options: core::ConsolidateOptions = parsed.map(Into::into).unwrap_or_default();
        let cancel = Arc::new(AtomicBool::new(false));
        if let Some(options) = options.filter(|o| matches!(o.get_type(), Ok(ValueType::Object))) {
            // SAFETY: checked to be an object handle of this scope.
            let options = unsafe { Object::from_napi_value(env.raw(), options.raw()) }?;
            arg!(env, watch_signal(env, &options, &cancel));
        }
        promise_json(
            env,
            async move { handle.consolidate(&core_options, &cancel).await },
            ConsolidateReport::from,
        )
    }
}
