//! The `Engram` JS class: a handle on one project's memory in one database file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{
    optional, optional_object, optional_object_with, required, required_list, required_object,
};
use super::code_types::{
    CodeChunk, CodeHit, CodeSearchOptions, IndexOptions, IndexProgress, IndexSummary, WatchEvent,
    WatchOptions,
};
use super::derive;
use super::error::{promise, rejected, to_js_error};
use super::json::{promise_json, promise_json_inline_first, JsonText};
use super::reporter::{CallbackFailure, Reporter};
use super::strict::Count;
use super::types::{
    ListFilter, Memory, MemoryPatch, MemoryVersion, OpenOptions, RememberInput, RememberResult,
    SearchHit, SearchOptions, Stats,
};
use crate::error::Error as CoreError;
use crate::memory::RememberInput as CoreInput;

/// A handle on one project's memories in one database file.
///
/// Every handle on the same file in this process, from the main thread or any worker thread,
/// shares one engine: writes are serialised through one writer, reads run concurrently.
/// Methods return Promises; failures reject with an `Error` whose `code` is an `ErrorCode`.
///
/// ```ts
/// const memory = await Engram.open({ path: '.engram/memory.db', projectRoot: process.cwd() })
/// await memory.remember({ type: 'gotcha', content: 'Run migrations before seeding' })
/// const hits = await memory.search('migrations')
/// await memory.close()
/// ```
#[napi]
pub struct Engram {
    /// The core handle until `close()`; shared with the `ObserverSession`s made from this
    /// handle, which close with it.
    inner: Slot,
    /// What `close()` awaits (kept for a second `close()`).
    closing: Mutex<Option<crate::Closing>>,
    /// The running `watch()`, stopped by `unwatch()` and `close()`.
    watcher: Arc<Mutex<Option<crate::code::Watcher>>>,
    /// Sync listeners this handle added, removed by `close()`.
    sync_listeners: Mutex<Vec<u64>>,
}

/// A JS object's core handle, `None` once closed.
pub(super) type Slot = Arc<RwLock<Option<crate::Engram>>>;

/// The live core handle in `slot`, or `ENGRAM_CLOSED`.
pub(super) fn live_handle(slot: &Slot) -> std::result::Result<crate::Engram, CoreError> {
    slot.read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .ok_or(CoreError::Closed)
}

impl Engram {
    /// Stops the watcher, if any (waits for its thread: a running update is cancelled).
    fn stop_watching(&self) -> bool {
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        watcher.map(crate::code::Watcher::stop).is_some()
    }

    pub(super) fn remember_sync_listener(&self, id: u64) {
        self.sync_listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id);
    }

    pub(super) fn forget_sync_listener(&self, id: u64) {
        self.sync_listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|i| *i != id);
    }

    /// The live core handle, or `ENGRAM_CLOSED`.
    pub(super) fn handle(&self) -> std::result::Result<crate::Engram, CoreError> {
        live_handle(&self.inner)
    }

    /// The handle's slot, for objects that close with it.
    pub(super) fn slot(&self) -> Slot {
        Arc::clone(&self.inner)
    }
}

fn core_open_options(o: OpenOptions) -> std::result::Result<crate::OpenOptions, CoreError> {
    let path = match o.path {
        Some(path) if path.is_empty() => {
            return Err(CoreError::invalid("path must not be empty"));
        }
        Some(path) => PathBuf::from(path),
        // Remote-only: the core reads an empty path with sync options as "no file".
        None if o.sync.is_some() => PathBuf::new(),
        None => {
            return Err(CoreError::invalid(
                "give a database file path, or sync.url for a remote-only engine",
            ));
        }
    };
    let mut options = crate::OpenOptions::new(path);
    options.project_root = o.project_root.map(PathBuf::from);
    options.project_id = o.project_id;
    if let Some(ms) = o.busy_timeout_ms {
        options.engine.store.busy_timeout = Duration::from_millis(u64::from(ms));
    }
    if let Some(depth) = o.closure_depth {
        options.engine.closure_depth = depth.get();
    }
    if let Some(mb) = o.graph_index_max_mb {
        options.engine.graph_index_max_bytes = u64::from(mb.get()) << 20;
    }
    if let Some(n) = o.read_connections {
        if n.get() == 0 || n.get() > 64 {
            return Err(CoreError::invalid(
                "readConnections must be between 1 and 64",
            ));
        }
        options.engine.store.read_connections = n.into();
    }
    if let Some(e) = o.embeddings {
        options.engine.auto_embed = e.auto_embed.unwrap_or(false);
        options.engine.chunk_vectors = if e.definition_vectors.unwrap_or(true) {
            crate::vector::ChunkVectors::WithParts
        } else {
            crate::vector::ChunkVectors::ChunksOnly
        };
        options.engine.embeddings = super::embed_options::core_provider(e)?;
    }
    if let Some(r) = o.reranker {
        options.engine.reranker = super::rerank_options::core_reranker(r)?;
    }
    if let Some(s) = o.sync {
        options.engine.sync = Some(super::sync::core_sync(s)?);
    }
    if let Some(n) = o.max_content_bytes {
        if n.get() == 0 {
            return Err(CoreError::invalid("maxContentBytes must be positive"));
        }
        options.engine.limits.max_content_bytes = n.into();
    }
    Ok(options)
}

#[napi]
impl Engram {
    /// Not for use: an `Engram` comes from `await Engram.open(options)`. Throws
    /// `ENGRAM_INVALID_ARG` saying so (napi's own refusal carried no code).
    #[napi(constructor)]
    pub fn new(env: &Env) -> Result<Self> {
        Err(to_js_error(
            env,
            &CoreError::invalid(
                "an Engram is opened, not constructed: use `await Engram.open(options)`",
            ),
        ))
    }

    /// Opens the memory database at `options.path` (created if missing) for one project, or,
    /// with `sync.url` and no `path`, the database on that server (remote-only).
    ///
    /// Rejects with `ENGRAM_CORRUPT` for a file that is not a database,
    /// `ENGRAM_SCHEMA_TOO_NEW` for a file written by a newer engram, `ENGRAM_IO` when the file
    /// cannot be opened, `ENGRAM_INVALID_ARG` for bad options and for another application's
    /// SQLite database (it has tables but is not engram's: "not an engram database (it has
    /// tables: ...)"). Each of these files is left untouched: nothing is written to it, not
    /// even the switch to WAL. An empty SQLite file is engram's to fill.
    #[napi(
        ts_args_type = "options: OpenOptions",
        ts_return_type = "Promise<Engram>"
    )]
    pub fn open<'env>(env: &'env Env, options: Unknown<'env>) -> Result<PromiseRaw<'env, Engram>> {
        let options: OpenOptions = arg!(env, required_object(env, &options, "options"));
        let options = arg!(env, core_open_options(options));
        promise(env, crate::Engram::open(options), |handle| Engram {
            inner: Arc::new(RwLock::new(Some(handle))),
            closing: Mutex::default(),
            watcher: Arc::default(),
            sync_listeners: Mutex::default(),
        })
    }

    /// Closes this handle: later calls (and those of the `ObserverSession`s it made) reject
    /// with `ENGRAM_CLOSED` at once; calls already running finish normally; a running
    /// `watch()` stops. The engine closes when its last handle does: its background sync stops
    /// (a background sync going on is dropped; nothing is lost, the outbox keeps what was not
    /// pushed).
    ///
    /// The Promise resolves at once while another handle on the file (in any thread) is open;
    /// after the last one, once the engine has let go of the file: calls still running have
    /// finished (a background embedding run stops at its next step; an explicit `sync()`
    /// running against a server that does not answer is waited for until the connection
    /// times out), the sync loop has ended and the replica in `<path>.sync/` is closed. Then
    /// the file and its `.sync/` directory can be moved or deleted (an app quitting, a test
    /// removing its temporary directory). It never rejects; closing again resolves the same way.
    ///
    /// ```ts
    /// await memory.close()
    /// rmSync(dir, { recursive: true })
    /// ```
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        self.stop_watching();
        let handle = self.inner.write().unwrap_or_else(|p| p.into_inner()).take();
        let listeners = std::mem::take(
            &mut *self
                .sync_listeners
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        if let Some(sync) = handle.as_ref().and_then(|h| h.sync_service().ok()) {
            for id in listeners {
                sync.unsubscribe(id);
            }
        }
        let closing = {
            let mut slot = self.closing.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(handle) = handle {
                // Drops the engine here when nothing else holds it, as before the Promise.
                *slot = Some(handle.close());
            }
            slot.clone()
        };
        promise(
            env,
            async move {
                if let Some(closing) = closing {
                    closing.await;
                }
                Ok(())
            },
            |()| (),
        )
    }

    /// Whether `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// The project id this handle reads and writes (`null` once closed).
    #[napi(getter)]
    pub fn project_id(&self) -> Option<String> {
        self.handle().ok().map(|h| h.project_id().to_owned())
    }

    /// The canonical database path (`null` once closed); for a remote-only engine, `remote:`
    /// and the server URL.
    #[napi(getter)]
    pub fn path(&self) -> Option<String> {
        self.handle()
            .ok()
            .map(|h| h.engine().path().display().to_string())
    }

    /// Stores a memory. Secrets in it are replaced by `[REDACTED]` first; an identical active
    /// memory in the same project and scope is reinforced instead of duplicated
    /// (`created: false`). Contradictions with older memories are looked for just after the
    /// write: both get a `conflicts_with` relation and `needsReview` within milliseconds, but
    /// the memory returned here does not show them yet (await `settled()` to see them).
    #[napi(
        ts_args_type = "input: RememberInput",
        ts_return_type = "Promise<RememberResult>"
    )]
    pub fn remember<'env>(
        &self,
        env: &'env Env,
        input: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let input: RememberInput = arg!(env, required_object(env, &input, "input"));
        arg!(env, input.check_lists("input"));
        promise_json_inline_first(
            env,
            async move { handle.remember(input.into()).await },
            RememberResult::from,
        )
    }

    /// Stores many memories in one transaction: all are stored or, if any input is invalid,
    /// none (the error message names the input's index). Far faster than one call each.
    #[napi(
        ts_args_type = "inputs: RememberInput[]",
        ts_return_type = "Promise<RememberResult[]>"
    )]
    pub fn remember_many<'env>(
        &self,
        env: &'env Env,
        inputs: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let inputs: Vec<RememberInput> = arg!(env, required_list(env, &inputs, "inputs"));
        for (i, input) in inputs.iter().enumerate() {
            arg!(env, input.check_lists(&format!("inputs[{i}]")));
        }
        let inputs: Vec<CoreInput> = inputs.into_iter().map(Into::into).collect();
        promise_json(
            env,
            async move { handle.remember_many(inputs).await },
            |out| {
                out.into_iter()
                    .map(RememberResult::from)
                    .collect::<Vec<_>>()
            },
        )
    }

    /// Resolves once the contradiction scans of every memory written before the call (by any
    /// handle or thread on this file) are done, so that `get`, `list` and `reviewQueue` show
    /// the `conflicts_with` links they made. Rejects with `ENGRAM_INTERNAL` if one of those
    /// scans failed (its memories stay unflagged until `consolidate` finds them).
    ///
    /// ```ts
    /// const { memory } = await db.remember({ type: 'decision', content: 'The API listens on port 8080' })
    /// await db.settled()
    /// const flagged = await db.get(memory.id) // needsReview, if it contradicts an older memory
    /// ```
    #[napi(ts_return_type = "Promise<void>")]
    pub fn settled<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let handle = arg!(env, self.handle());
        promise(env, async move { handle.settled().await }, |()| ())
    }

    /// One memory by id (forgotten ones included). Rejects with `ENGRAM_NOT_FOUND`.
    #[napi(ts_args_type = "id: string", ts_return_type = "Promise<Memory>")]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        // One indexed row: on the calling thread when a reader is free (see `remember`).
        promise_json_inline_first(env, async move { handle.get(&id).await }, Memory::from)
    }

    /// Changes fields of a memory. The previous state is kept (see `history`, `rollback`).
    /// Rejects with `ENGRAM_CONFLICT` if the new content duplicates another active memory.
    #[napi(
        ts_args_type = "id: string, patch: MemoryPatch",
        ts_return_type = "Promise<Memory>"
    )]
    pub fn update<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        patch: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let patch: MemoryPatch = arg!(env, required_object(env, &patch, "patch"));
        arg!(env, patch.check_lists("patch"));
        promise_json(
            env,
            async move { handle.update(&id, patch.into()).await },
            Memory::from,
        )
    }

    /// Archives a memory: it leaves `search` and `list` but stays readable by id, in its
    /// history, and restorable with `rollback`. Nothing is deleted.
    #[napi(
        ts_args_type = "id: string, reason?: string",
        ts_return_type = "Promise<Memory>"
    )]
    pub fn forget<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        reason: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let reason: Option<String> = arg!(env, optional(env, reason.as_ref(), "reason"));
        promise_json(
            env,
            async move { handle.forget(&id, reason).await },
            Memory::from,
        )
    }

    /// Every state of a memory, oldest first; the last entry is the current state.
    #[napi(
        ts_args_type = "id: string",
        ts_return_type = "Promise<MemoryVersion[]>"
    )]
    pub fn history<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        promise_json(env, async move { handle.history(&id).await }, |v| {
            v.into_iter().map(MemoryVersion::from).collect::<Vec<_>>()
        })
    }

    /// Makes a past version current again, recorded as a new version (history is never
    /// rewritten). Rolling back past a `forget` restores the memory.
    #[napi(
        ts_args_type = "id: string, version: number",
        ts_return_type = "Promise<Memory>"
    )]
    pub fn rollback<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
        version: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        let version: Count = arg!(env, required(env, &version, "version"));
        let version = version.get();
        promise_json(
            env,
            async move { handle.rollback(&id, version).await },
            Memory::from,
        )
    }

    /// A filtered page of memories, newest first by default.
    #[napi(
        ts_args_type = "filter?: ListFilter",
        ts_return_type = "Promise<Memory[]>"
    )]
    pub fn list<'env>(
        &self,
        env: &'env Env,
        filter: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let filter: Option<ListFilter> = arg!(env, optional_object(env, filter.as_ref(), "filter"));
        let filter = arg!(
            env,
            filter
                .map(ListFilter::into_core)
                .transpose()
                .map(Option::unwrap_or_default)
        );
        promise_json(env, async move { handle.list(&filter).await }, |v| {
            v.into_iter().map(Memory::from).collect::<Vec<_>>()
        })
    }

    /// Keyword search (BM25 over content, tags and files). Any text is a valid query:
    /// `"exact phrase"`, `prefix*` and `-exclude` are understood, everything else is a word.
    /// All terms must match first; if that finds fewer than half of `limit`, hits matching
    /// any term fill the rest (`matchedAll: false`).
    #[napi(
        ts_args_type = "query: string, options?: SearchOptions",
        ts_return_type = "Promise<SearchHit[]>"
    )]
    pub fn search<'env>(
        &self,
        env: &'env Env,
        query: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let query: String = arg!(env, required(env, &query, "query"));
        let options: Option<SearchOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let options = arg!(
            env,
            options
                .map(SearchOptions::into_core)
                .transpose()
                .map(Option::unwrap_or_default)
        );
        promise_json(
            env,
            async move { handle.search(&query, &options).await },
            |v| v.into_iter().map(SearchHit::from).collect::<Vec<_>>(),
        )
    }

    /// Counts over this project's memories, plus schema version and file path.
    #[napi(ts_return_type = "Promise<Stats>")]
    pub fn stats<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Stats>> {
        let handle = arg!(env, self.handle());
        let path = handle.engine().path().display().to_string();
        let schema_version = handle.engine().schema().first().map_or(0, |s| s.version) as u32;
        promise(env, async move { handle.stats().await }, move |s| Stats {
            total: s.total as u32,
            active: s.active as u32,
            forgotten: s.forgotten as u32,
            needs_review: s.needs_review as u32,
            pinned: s.pinned as u32,
            with_redactions: s.with_redactions as u32,
            by_type: s.by_type.into_iter().map(|(k, v)| (k, v as u32)).collect(),
            versions: s.versions as u32,
            schema_version,
            path,
        })
    }

    /// Indexes the code under `projectRoot` (the handle must have one): TypeScript, TSX,
    /// JavaScript, Python, Rust and Go are cut at definitions by tree-sitter; Markdown and
    /// other text by sections and paragraphs. Honours `.gitignore`, the default ignore list and
    /// `options.ignore`; skips unchanged files; parses on worker threads. `onProgress` receives
    /// progress reports (throttled, best effort); aborting `signal` rejects with
    /// `ENGRAM_ABORTED` and keeps what was committed, so the next run continues. An
    /// `onProgress` that throws or rejects stops the run the same way, rejecting with
    /// `ENGRAM_CALLBACK` (its error is in the message); it never reaches the process.
    /// `deriveRelations` (see `deriveRelations()`) is then asked about the modules the run
    /// changed; its outcome is in `summary.derivedRelations`, or its failure in
    /// `summary.derivedRelationsError` (the index itself stays committed).
    ///
    /// ```ts
    /// const summary = await memory.index({ onProgress: (p) => console.log(p.phase, p.filesDone, p.filesTotal) })
    /// ```
    #[napi(
        ts_args_type = "options?: IndexOptions & { onProgress?: (progress: IndexProgress) => void; signal?: AbortSignal; deriveRelations?: (request: RelationRequest) => GraphBatch | null | undefined | Promise<GraphBatch | null | undefined> }",
        ts_return_type = "Promise<IndexSummary>"
    )]
    pub fn index<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, IndexSummary>> {
        let handle = arg!(env, self.handle());
        let parsed: Option<IndexOptions> = arg!(
            env,
            optional_object_with(
                env,
                options.as_ref(),
                "options",
                &["onProgress", "signal", "deriveRelations"]
            )
        );
        let core_options = arg!(env, parsed.unwrap_or_default().into_core());
        let cancel = Arc::new(AtomicBool::new(false));
        let (mut progress, mut deriver) = (None, None);
        if let Some(options) = options.filter(|o| matches!(o.get_type(), Ok(ValueType::Object))) {
            // SAFETY: checked to be an object handle of this scope.
            let options = unsafe { Object::from_napi_value(env.raw(), options.raw()) }?;
            arg!(env, watch_signal(env, &options, &cancel));
            progress = arg!(
                env,
                Reporter::<IndexProgress>::option(&options, "onProgress")
            )
            .map(|r| r.stop_on_failure(cancel.clone()));
            deriver = arg!(env, derive::deriver_option(&options, "deriveRelations"));
        }
        let failure = progress.as_ref().map(Reporter::failure);
        let work = async move {
            let report = move |p: &crate::code::IndexProgress| {
                if let Some(callback) = &progress {
                    // Progress is best effort: a full queue drops a report instead of blocking.
                    callback.report(IndexProgress::from(p));
                }
            };
            let summary = settle(
                &failure,
                handle.index(&core_options, &report, &cancel).await,
            )
            .await?;
            let modules = summary.graph.modules_changed.clone();
            let derived = match deriver {
                Some(deriver) if !modules.is_empty() => {
                    let timeout = derive::DEFAULT_TIMEOUT;
                    Some(derive::run(&handle, deriver, Some(modules), timeout, &cancel).await)
                }
                _ => None,
            };
            Ok((summary, derived))
        };
        promise(env, work, |(summary, derived)| {
            let mut out = IndexSummary::from(summary);
            match derived {
                Some(Ok(done)) => out.derived_relations = Some(done.into()),
                Some(Err(e)) => {
                    out.derived_relations_error = Some(format!("{}: {e}", e.code()));
                }
                None => {}
            }
            out
        })
    }

    /// Re-indexes some paths now (relative to the project root, or absolute inside it): changed
    /// files are read again, directories walked, and paths that are gone or ignored removed with
    /// everything under them. For tools that know what they just wrote; `watch()` does the same
    /// from file events. Waits while a full `index()` of the project runs.
    ///
    /// ```ts
    /// await memory.indexPaths(['src/auth/tokens.ts'])
    /// ```
    #[napi(
        ts_args_type = "paths: string[], options?: IndexOptions",
        ts_return_type = "Promise<IndexSummary>"
    )]
    pub fn index_paths<'env>(
        &self,
        env: &'env Env,
        paths: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, IndexSummary>> {
        let handle = arg!(env, self.handle());
        let paths: Vec<String> = arg!(env, required(env, &paths, "paths"));
        let parsed: Option<IndexOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let core_options = arg!(env, parsed.unwrap_or_default().into_core());
        promise(
            env,
            async move { handle.index_paths(&paths, &core_options).await },
            IndexSummary::from,
        )
    }

    /// Watches the project root and keeps the index current: changed files are re-indexed once
    /// the tree has been quiet for `debounceMs` (default 500), new directories are followed,
    /// deleted and renamed paths removed, `.gitignore` edits re-checked. Directories the index
    /// ignores (node_modules/, target/...) are not watched. `onEvent` receives each update
    /// that changed the index and each failure (best effort, like progress; a handler that
    /// throws is called again for the next update, and never reaches the process). Stop with
    /// `unwatch()` or `close()`. Run `index()` first: the watcher only follows changes. One
    /// watch per handle: a second call rejects with `ENGRAM_CONFLICT`.
    ///
    /// ```ts
    /// await memory.index()
    /// await memory.watch({ onEvent: (e) => console.log(e.type, e.summary?.indexedPaths) })
    /// // ... later
    /// memory.unwatch()
    /// ```
    #[napi(
        ts_args_type = "options?: WatchOptions & { onEvent?: (event: WatchEvent) => void }",
        ts_return_type = "Promise<void>"
    )]
    pub fn watch<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let handle = arg!(env, self.handle());
        let parsed: Option<WatchOptions> = arg!(
            env,
            optional_object_with(env, options.as_ref(), "options", &["onEvent"])
        );
        let core_options = arg!(env, parsed.unwrap_or_default().into_core());
        let mut callback = None;
        if let Some(options) = options.filter(|o| matches!(o.get_type(), Ok(ValueType::Object))) {
            // SAFETY: checked to be an object handle of this scope.
            let options = unsafe { Object::from_napi_value(env.raw(), options.raw()) }?;
            // A handler that throws is not stopped on: later events still reach it.
            callback = arg!(env, Reporter::<WatchEvent>::option(&options, "onEvent"));
        }
        let already =
            || CoreError::Conflict("this handle is already watching; call unwatch() first".into());
        if self
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return rejected(env, already());
        }
        let slot = self.watcher.clone();
        let work = async move {
            let on_event: crate::code::OnWatchEvent = Arc::new(move |event| {
                if let Some(callback) = &callback {
                    callback.report(WatchEvent::from(event));
                }
            });
            // Adding a watch per directory walks the tree: off the JS thread.
            let watcher = tokio::task::spawn_blocking(move || handle.watch(core_options, on_event))
                .await
                .map_err(|e| CoreError::Internal(format!("watch start panicked: {e}")))??;
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_some() {
                return Err(already());
            }
            *slot = Some(watcher);
            Ok(())
        };
        promise(env, work, |()| ())
    }

    /// Stops `watch()` (a running update is cancelled; what it committed stays). Returns
    /// whether a watch was running.
    #[napi]
    pub fn unwatch(&self) -> bool {
        self.stop_watching()
    }

    /// The indexed chunks of one file (`path` relative to the project root, or absolute inside
    /// it), in file order; empty when the file is not indexed. Paths outside the root reject
    /// with `ENGRAM_INVALID_ARG`.
    #[napi(ts_args_type = "path: string", ts_return_type = "Promise<CodeChunk[]>")]
    pub fn chunks_of<'env>(
        &self,
        env: &'env Env,
        path: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let path: String = arg!(env, required(env, &path, "path"));
        promise_json(
            env,
            async move { handle.chunks_of(&path).await },
            |chunks| chunks.into_iter().map(CodeChunk::from).collect::<Vec<_>>(),
        )
    }

    /// Keyword search (BM25) over the project's indexed code: definition names (split at case
    /// changes and underscores) weigh most, then path and kind, then the text. Any text is a
    /// valid query.
    #[napi(
        ts_args_type = "query: string, options?: CodeSearchOptions",
        ts_return_type = "Promise<CodeHit[]>"
    )]
    pub fn search_code<'env>(
        &self,
        env: &'env Env,
        query: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let query: String = arg!(env, required(env, &query, "query"));
        let options: Option<CodeSearchOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let limit = options.and_then(|o| o.limit).map_or(10, u32::from);
        promise_json(
            env,
            async move { handle.search_code(&query, limit).await },
            |hits| {
                hits.into_iter()
                    .map(|h| CodeHit {
                        chunk: CodeChunk::from(h.chunk),
                        score: h.score,
                    })
                    .collect::<Vec<_>>()
            },
        )
    }
}

/// `EventTarget.prototype.addEventListener(type, listener)`.
type AddEventListener<'a> = Function<'a, FnArgs<(&'a str, Function<'a, (), ()>)>, ()>;

/// `result`, or `ENGRAM_CALLBACK` when the app's callback failed during the run.
pub(super) async fn settle<T>(
    failure: &Option<CallbackFailure>,
    result: std::result::Result<T, CoreError>,
) -> std::result::Result<T, CoreError> {
    match failure {
        Some(failure) => failure.settle(result).await,
        None => result,
    }
}

/// The options object of a method that reads its keys itself: a plain object whose keys are
/// among `keys` (`None` for `undefined` and `null`), its `signal` watched into `cancel`.
pub(super) fn options_with_signal<'env>(
    env: &Env,
    options: Option<&Unknown<'env>>,
    keys: &[&str],
    cancel: &Arc<AtomicBool>,
) -> std::result::Result<Option<Object<'env>>, CoreError> {
    super::args::check_keys(env, options, "options", keys)?;
    match options.map(|o| o.get_type()) {
        None | Some(Ok(ValueType::Undefined | ValueType::Null)) => Ok(None),
        Some(Ok(ValueType::Object)) => {
            let value = options.expect("matched Some");
            // SAFETY: checked to be an object handle of this scope.
            let object = unsafe { Object::from_napi_value(env.raw(), value.raw()) }
                .map_err(|_| CoreError::invalid("options must be an object"))?;
            watch_signal(env, &object, cancel)?;
            Ok(Some(object))
        }
        _ => Err(CoreError::invalid("options must be an object")),
    }
}

/// Raises `cancel` when `options.signal` (an AbortSignal) is or becomes aborted.
pub(super) fn watch_signal(
    env: &Env,
    options: &Object,
    cancel: &Arc<AtomicBool>,
) -> std::result::Result<(), CoreError> {
    let invalid =
        |what: &str| CoreError::invalid(format!("options.signal must be an AbortSignal ({what})"));
    let value: Unknown = options
        .get_named_property("signal")
        .map_err(|_| invalid("unreadable"))?;
    match value.get_type() {
        Ok(ValueType::Undefined | ValueType::Null) => return Ok(()),
        Ok(ValueType::Object) => {}
        _ => return Err(invalid("not an object")),
    }
    // SAFETY: checked to be an object handle of this scope.
    let signal = unsafe { Object::from_napi_value(env.raw(), value.raw()) }
        .map_err(|_| invalid("not an object"))?;
    let aborted: bool = signal
        .get_named_property("aborted")
        .map_err(|_| invalid("no aborted flag"))?;
    if aborted {
        cancel.store(true, Ordering::Relaxed);
        return Ok(());
    }
    let flag = cancel.clone();
    let listener = env
        .create_function_from_closure("onAbort", move |_| {
            flag.store(true, Ordering::Relaxed);
            Ok(())
        })
        .map_err(|e| CoreError::Internal(format!("abort listener: {}", e.reason)))?;
    let add: AddEventListener = signal
        .get_named_property("addEventListener")
        .map_err(|_| invalid("no addEventListener"))?;
    add.apply(signal, FnArgs::from(("abort", listener)))
        .map_err(|_| invalid("addEventListener failed"))?;
    Ok(())
}
