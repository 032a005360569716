//! The `Engram` class's lifecycle methods: feedback, the review queue, supersedes, disputes,
//! use tracking, pruning and upkeep (`optimize`), export, import and delete-all.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional_object, optional_object_with, required, required_object};
use super::class::{options_with_signal, watch_signal, Engram};
use super::error::promise;
use super::json::{promise_json, JsonText};
use super::lifecycle_types::{
    ConfirmOptions, DeleteAllOptions, DisputeResult, EventNote, ExportOptions, ExportResult,
    FeedbackInput, FeedbackResult, ImportOptions, ImportReport, MarkUsedOptions, MemoryEvent,
    OptimizeReport, PruneOptions, PruneReport, ReviewQueueOptions, SupersedeResult,
};
use super::types::Memory;
use crate::lifecycle::EventNote as CoreNote;

/// An optional `EventNote` argument as the core note.
fn note_of(env: &Env, value: Option<&Unknown<'_>>) -> std::result::Result<CoreNote, crate::Error> {
    let note: Option<EventNote> = optional_object(env, value, "note")?;
    Ok(note.map(Into::into).unwrap_or_default())
}

#[napi]
impl Engram {
    /// Feedback on a memory an agent was given: `helpful` raises its confidence by 0.05,
    /// `wrong` lowers it by 0.1 and puts it back in the review queue, `correction` stores the
    /// corrected text as a new user-verified memory that supersedes it (the old one is
    /// forgotten). Every piece of feedback is kept in the memory's `events`.
    ///
    /// ```ts
    /// await memory.feedback(id, { kind: 'correction', correction: 'Sessions last 8 hours', author: 'ana' })
    /// ```
    #[napi(
        ts_args_type = "id: string, input: FeedbackInput",
        ts_return_type = "Promise<FeedbackResult>"
    )]
    pub fn feedback<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        input: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let input: FeedbackInput = arg!(env, required_object(env, &input, "input"));
        let input = arg!(env, input.into_core());
        promise_json(
            env,
            async move { handle.feedback(&id, input).await },
            FeedbackResult::from,
        )
    }

    /// The review queue: active memories waiting for a person (`needsReview`), newest first.
    #[napi(
        ts_args_type = "options?: ReviewQueueOptions",
        ts_return_type = "Promise<Memory[]>"
    )]
    pub fn review_queue<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: Option<ReviewQueueOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let (limit, offset) = options.map_or((None, None), |o| {
            (o.limit.map(u32::from), o.offset.map(u32::from))
        });
        promise_json(
            env,
            async move { handle.review_queue(limit, offset).await },
            |v| v.into_iter().map(Memory::from).collect::<Vec<_>>(),
        )
    }

    /// Confirms a memory (after applying `options.patch`, an edit, if given): it leaves the
    /// review queue and counts as verified by a person (`prune` never deletes it).
    #[napi(
        ts_args_type = "id: string, options?: ConfirmOptions",
        ts_return_type = "Promise<Memory>"
    )]
    pub fn confirm<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let options: Option<ConfirmOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        if let Some(patch) = options.as_ref().and_then(|o| o.patch.as_ref()) {
            arg!(env, patch.check_lists("options.patch"));
        }
        let (patch, note) = match options {
            Some(o) => (
                o.patch.map(Into::into),
                CoreNote {
                    session_id: o.session_id,
                    author: o.author,
                    body: o.comment,
                },
            ),
            None => (None, CoreNote::default()),
        };
        promise_json(
            env,
            async move { handle.confirm(&id, patch, note).await },
            Memory::from,
        )
    }

    /// Rejects a memory in review: it is forgotten, the note's comment becoming the reason.
    #[napi(
        ts_args_type = "id: string, note?: EventNote",
        ts_return_type = "Promise<Memory>"
    )]
    pub fn reject<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        note: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let note = arg!(env, note_of(env, note.as_ref()));
        promise_json(
            env,
            async move { handle.reject(&id, note).await },
            Memory::from,
        )
    }

    /// Records that `newer` supersedes `older`: `older` gets `supersededBy` and decays twice
    /// as fast from now on (it is not forgotten). Rejects with `ENGRAM_CYCLE` when `older`
    /// already supersedes `newer`, directly or through a chain.
    #[napi(
        ts_args_type = "older: string, newer: string",
        ts_return_type = "Promise<SupersedeResult>"
    )]
    pub fn supersede<'env>(
        &self,
        env: &'env Env,
        older: Unknown<'env>,
        newer: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let older: String = arg!(env, required(env, &older, "older"));
        let newer: String = arg!(env, required(env, &newer, "newer"));
        promise_json(
            env,
            async move { handle.supersede(&older, &newer).await },
            |(older, newer)| SupersedeResult {
                older: older.into(),
                newer: newer.into(),
            },
        )
    }

    /// Disputes a memory (`note.comment`, the reason, is required). Agents still use it, at
    /// confidence x 0.8, until `resolveDispute`. The thread is in `events(id)`.
    #[napi(
        ts_args_type = "id: string, note: EventNote",
        ts_return_type = "Promise<DisputeResult>"
    )]
    pub fn dispute<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        note: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let note = arg!(env, note_of(env, Some(&note)));
        promise_json(
            env,
            async move { handle.dispute(&id, note).await },
            DisputeResult::from,
        )
    }

    /// Adds a comment (`note.comment`, required) to a memory's thread.
    #[napi(
        ts_args_type = "id: string, note: EventNote",
        ts_return_type = "Promise<DisputeResult>"
    )]
    pub fn comment<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        note: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let note = arg!(env, note_of(env, Some(&note)));
        promise_json(
            env,
            async move { handle.comment(&id, note).await },
            DisputeResult::from,
        )
    }

    /// Resolves a memory's open dispute; rejects with `ENGRAM_CONFLICT` when there is none.
    #[napi(
        ts_args_type = "id: string, note?: EventNote",
        ts_return_type = "Promise<DisputeResult>"
    )]
    pub fn resolve_dispute<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        note: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let note = arg!(env, note_of(env, note.as_ref()));
        promise_json(
            env,
            async move { handle.resolve_dispute(&id, note).await },
            DisputeResult::from,
        )
    }

    /// A memory's event log, oldest first: feedback, review decisions, its dispute thread.
    #[napi(ts_args_type = "id: string", ts_return_type = "Promise<MemoryEvent[]>")]
    pub fn events<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        promise_json(env, async move { handle.events(&id).await }, |v| {
            v.into_iter().map(MemoryEvent::from).collect::<Vec<_>>()
        })
    }

    /// Counts memories as used now, for apps that put memories into a prompt themselves
    /// (`recall` with `trackAccess` does it for what it packs): the access count and last use
    /// move, decay starts over, and every 5th use without a `wrong` or a correction raises the
    /// confidence by 0.05 (to 0.95); the 10th clears `needsReview`. Unknown ids are ignored.
    /// With `options.sessionId`, the use counts for that session's summary.
    #[napi(
        ts_args_type = "ids: string[], options?: MarkUsedOptions",
        ts_return_type = "Promise<void>"
    )]
    pub fn mark_used<'env>(
        &self,
        env: &'env Env,
        ids: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let handle = arg!(env, self.handle());
        let ids: Vec<String> = arg!(env, required(env, &ids, "ids"));
        let options: Option<MarkUsedOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let session_id = options.and_then(|o| o.session_id);
        promise(
            env,
            async move { handle.mark_used(&ids, session_id.as_deref()).await },
            |()| (),
        )
    }

    /// Runs the pruning job: memories unused for three half-lives are forgotten (decisions,
    /// timeless types and pinned memories never expire); memories forgotten longer than the
    /// grace period are deleted for good unless a person verified them; orphan knowledge nodes
    /// and the vectors of forgotten memories go; the keyword index is compacted. Readers are
    /// never blocked (batches of 1,000). Run it when the app chooses (idle time, daily);
    /// aborting `signal` rejects with `ENGRAM_ABORTED` between batches.
    ///
    /// ```ts
    /// const report = await memory.prune({ graceDays: 30 })
    /// console.log(`${report.expired} expired, ${report.deleted} deleted`)
    /// ```
    #[napi(
        ts_args_type = "options?: PruneOptions & { signal?: AbortSignal }",
        ts_return_type = "Promise<PruneReport>"
    )]
    pub fn prune<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, PruneReport>> {
        let handle = arg!(env, self.handle());
        let parsed: Option<PruneOptions> = arg!(
            env,
            optional_object_with(env, options.as_ref(), "options", &["signal"])
        );
        let core_options: crate::lifecycle::PruneOptions =
            parsed.map(Into::into).unwrap_or_default();
        let cancel = Arc::new(AtomicBool::new(false));
        if let Some(options) = options.filter(|o| matches!(o.get_type(), Ok(ValueType::Object))) {
            // SAFETY: checked to be an object handle of this scope.
            let options = unsafe { Object::from_napi_value(env.raw(), options.raw()) }?;
            arg!(env, watch_signal(env, &options, &cancel));
        }
        promise(
            env,
            async move { handle.prune(&core_options, &cancel).await },
            PruneReport::from,
        )
    }

    /// Does now the upkeep the engine otherwise does in the background once the database is
    /// idle after bulk writes: merges the keyword indexes (code and memories) that bulk writes
    /// left in scattered segments, which keeps keyword search and `recall()` fast, and builds
    /// this project's graph closure if a wide write left it pending. Long-lived processes
    /// (apps, `engram mcp`, `engram watch`) never need it; call it before a short-lived
    /// process exits after `index()` or many `remember()`s, as the CLI's `engram index` does.
    /// Writes interleave with it; aborting `signal` rejects with `ENGRAM_ABORTED` between merge
    /// steps and keeps what was merged (a closure build, once begun, runs to its end).
    ///
    /// ```ts
    /// await memory.index()
    /// const report = await memory.optimize()
    /// console.log(report.keywordIndexes.map((i) => `${i.index}: ${i.segmentsBefore} -> ${i.segmentsAfter}`))
    /// ```
    #[napi(
        ts_args_type = "options?: { signal?: AbortSignal }",
        ts_return_type = "Promise<OptimizeReport>"
    )]
    pub fn optimize<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, OptimizeReport>> {
        let handle = arg!(env, self.handle());
        let cancel = Arc::new(AtomicBool::new(false));
        arg!(
            env,
            options_with_signal(env, options.as_ref(), &["signal"], &cancel)
        );
        promise(
            env,
            async move { handle.optimize(&cancel).await },
            OptimizeReport::from,
        )
    }
}

/// Reads or writes a whole file off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    context: String,
) -> crate::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| crate::Error::Internal(format!("file task: {e}")))?
        .map_err(|e| crate::Error::io(context, e))
}

#[napi]
impl Engram {
    /// Exports this project's memories: `json` is lossless (every field, the history and the
    /// event log) and re-importable with `importMemories`; `markdown` is for people (one
    /// section per type, the content quoted verbatim) and importable too. With `path`, the
    /// document is written there instead of returned.
    ///
    /// ```ts
    /// const { text } = await memory.exportMemories({ format: 'json' })
    /// await memory.exportMemories({ format: 'markdown', path: 'memories.md' })
    /// ```
    #[napi(
        ts_args_type = "options: ExportOptions",
        ts_return_type = "Promise<ExportResult>"
    )]
    pub fn export_memories<'env>(
        &self,
        env: &'env Env,
        options: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, ExportResult>> {
        let handle = arg!(env, self.handle());
        let options: ExportOptions = arg!(env, required_object(env, &options, "options"));
        let core_options = crate::lifecycle::ExportOptions {
            format: arg!(env, crate::lifecycle::ExportFormat::parse(&options.format)),
            include_forgotten: options.include_forgotten,
        };
        let path = options.path;
        let work = async move {
            let exported = handle.export_memories(&core_options).await?;
            let bytes = exported.text.len() as f64;
            let memories = exported.memories as u32;
            match path {
                Some(path) => {
                    let text = exported.text;
                    let target = path.clone();
                    blocking(
                        move || std::fs::write(&target, text),
                        format!("writing the export to {path}"),
                    )
                    .await?;
                    Ok(ExportResult {
                        text: None,
                        path: Some(path),
                        memories,
                        bytes,
                    })
                }
                None => Ok(ExportResult {
                    text: Some(exported.text),
                    path: None,
                    memories,
                    bytes,
                }),
            }
        };
        promise(env, work, |r| r)
    }

    /// Imports a document made by `exportMemories` into this project (whatever project it
    /// was exported from). JSON restores every memory with its id, history and events (an id
    /// already here is skipped, or replaced with `onConflict: 'replace'`); Markdown updates
    /// the memories whose id it names and remembers the others as new. Everything passes the
    /// privacy filter and the input limits again; one invalid memory fails the call before
    /// anything is written. A `path` must name a regular file of at most 256 MiB: a FIFO, a
    /// device (`/dev/zero`), a directory or a larger file fails with `ENGRAM_INVALID_ARG`
    /// at once, without blocking.
    #[napi(
        ts_args_type = "options: ImportOptions",
        ts_return_type = "Promise<ImportReport>"
    )]
    pub fn import_memories<'env>(
        &self,
        env: &'env Env,
        options: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, ImportReport>> {
        let handle = arg!(env, self.handle());
        let options: ImportOptions = arg!(env, required_object(env, &options, "options"));
        let format = arg!(env, crate::lifecycle::ExportFormat::parse(&options.format));
        let on_conflict = arg!(
            env,
            options
                .on_conflict
                .as_deref()
                .map(crate::lifecycle::OnConflict::parse)
                .transpose()
        )
        .unwrap_or_default();
        let source = match (options.text, options.path) {
            (Some(text), None) => Ok(text),
            (None, Some(path)) => Err(path),
            _ => {
                return super::error::rejected(
                    env,
                    crate::Error::invalid("importMemories needs exactly one of text and path"),
                )
            }
        };
        let work = async move {
            match source {
                Ok(text) => handle.import_memories(format, &text, on_conflict).await,
                Err(path) => {
                    handle
                        .import_memories_from_file(format, path.into(), on_conflict)
                        .await
                }
            }
        };
        promise(env, work, ImportReport::from)
    }

    /// Deletes every memory of this project for good, with history, events, vectors and
    /// links: account deletion. Pass `{ confirm: true }`; resolves to the number deleted.
    #[napi(
        ts_args_type = "options: DeleteAllOptions",
        ts_return_type = "Promise<number>"
    )]
    pub fn delete_all<'env>(
        &self,
        env: &'env Env,
        options: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, u32>> {
        let handle = arg!(env, self.handle());
        let options: DeleteAllOptions = arg!(env, required_object(env, &options, "options"));
        if !options.confirm {
            return super::error::rejected(
                env,
                crate::Error::invalid("deleteAll deletes for good: pass { confirm: true }"),
            );
        }
        promise(env, async move { handle.delete_all().await }, |n| n as u32)
    }
}
