//! The `Engram` JS class: a handle on one project's memory in one database file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use super::args::{optional, optional_object, required, required_object};
use super::code_types::{
    CodeChunk, CodeHit, CodeSearchOptions, IndexOptions, IndexProgress, IndexSummary,
};
use super::error::{promise, rejected};
use super::json::{promise_json, JsonText};
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
/// memory.close()
/// ```
#[napi]
pub struct Engram {
    inner: RwLock<Option<crate::Engram>>,
}

/// Converts an argument, or returns a Promise rejected with `ENGRAM_INVALID_ARG`.
macro_rules! arg {
    ($env:expr, $result:expr) => {
        match $result {
            Ok(v) => v,
            Err(e) => return rejected($env, e),
        }
    };
}

impl Engram {
    /// The live core handle, or `ENGRAM_CLOSED`.
    fn handle(&self) -> std::result::Result<crate::Engram, CoreError> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or(CoreError::Closed)
    }
}

fn core_open_options(o: OpenOptions) -> std::result::Result<crate::OpenOptions, CoreError> {
    let mut options = crate::OpenOptions::new(PathBuf::from(o.path));
    options.project_root = o.project_root.map(PathBuf::from);
    options.project_id = o.project_id;
    if let Some(ms) = o.busy_timeout_ms {
        options.engine.store.busy_timeout = Duration::from_millis(ms as u64);
    }
    if let Some(n) = o.read_connections {
        if n == 0 || n > 64 {
            return Err(CoreError::invalid(
                "readConnections must be between 1 and 64",
            ));
        }
        options.engine.store.read_connections = n as usize;
    }
    if let Some(n) = o.max_content_bytes {
        if n == 0 {
            return Err(CoreError::invalid("maxContentBytes must be positive"));
        }
        options.engine.limits.max_content_bytes = n as usize;
    }
    Ok(options)
}

#[napi]
impl Engram {
    /// Opens the memory database at `options.path` (created if missing) for one project.
    ///
    /// Rejects with `ENGRAM_CORRUPT` for a file that is not an engram database,
    /// `ENGRAM_SCHEMA_TOO_NEW` for a file written by a newer engram, `ENGRAM_IO` when the file
    /// cannot be opened, `ENGRAM_INVALID_ARG` for bad options.
    #[napi(
        ts_args_type = "options: OpenOptions",
        ts_return_type = "Promise<Engram>"
    )]
    pub fn open<'env>(env: &'env Env, options: Unknown<'env>) -> Result<PromiseRaw<'env, Engram>> {
        let options: OpenOptions = arg!(env, required_object(env, &options, "options"));
        let options = arg!(env, core_open_options(options));
        promise(env, crate::Engram::open(options), |handle| Engram {
            inner: RwLock::new(Some(handle)),
        })
    }

    /// Closes this handle: later calls reject with `ENGRAM_CLOSED`. Calls already running
    /// finish normally. The engine (and its file) closes when its last handle does.
    #[napi]
    pub fn close(&self) {
        self.inner.write().unwrap_or_else(|p| p.into_inner()).take();
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

    /// The canonical database path (`null` once closed).
    #[napi(getter)]
    pub fn path(&self) -> Option<String> {
        self.handle()
            .ok()
            .map(|h| h.engine().path().display().to_string())
    }

    /// Stores a memory. Secrets in it are replaced by `[REDACTED]` first; an identical active
    /// memory in the same project and scope is reinforced instead of duplicated
    /// (`created: false`).
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
        promise_json(
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
        let inputs: Vec<RememberInput> = arg!(env, required(env, &inputs, "inputs"));
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

    /// One memory by id (forgotten ones included). Rejects with `ENGRAM_NOT_FOUND`.
    #[napi(ts_args_type = "id: string", ts_return_type = "Promise<Memory>")]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        promise_json(env, async move { handle.get(&id).await }, Memory::from)
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
        let version: u32 = arg!(env, required(env, &version, "version"));
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
    /// `ENGRAM_ABORTED` and keeps what was committed, so the next run continues.
    ///
    /// ```ts
    /// const summary = await memory.index({ onProgress: (p) => console.log(p.phase, p.filesDone, p.filesTotal) })
    /// ```
    #[napi(
        ts_args_type = "options?: IndexOptions & { onProgress?: (progress: IndexProgress) => void; signal?: AbortSignal }",
        ts_return_type = "Promise<IndexSummary>"
    )]
    pub fn index<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, IndexSummary>> {
        let handle = arg!(env, self.handle());
        let parsed: Option<IndexOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let core_options = arg!(env, parsed.unwrap_or_default().into_core());
        let cancel = Arc::new(AtomicBool::new(false));
        let mut progress = None;
        if let Some(options) = options.filter(|o| matches!(o.get_type(), Ok(ValueType::Object))) {
            // SAFETY: checked to be an object handle of this scope.
            let options = unsafe { Object::from_napi_value(env.raw(), options.raw()) }?;
            arg!(env, watch_signal(env, &options, &cancel));
            progress = arg!(env, progress_callback(&options));
        }
        let work = async move {
            let report = move |p: &crate::code::IndexProgress| {
                if let Some(callback) = &progress {
                    // Progress is best effort: a full queue drops a report instead of blocking.
                    callback.call(
                        IndexProgress::from(p),
                        ThreadsafeFunctionCallMode::NonBlocking,
                    );
                }
            };
            handle.index(&core_options, &report, &cancel).await
        };
        promise(env, work, IndexSummary::from)
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
        let limit = options.and_then(|o| o.limit).unwrap_or(10);
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

type ProgressCallback =
    ThreadsafeFunction<IndexProgress, (), IndexProgress, Status, false, true, 64>;

/// `options.onProgress` as a weak (it never keeps the process alive), bounded threadsafe
/// function.
fn progress_callback(options: &Object) -> std::result::Result<Option<ProgressCallback>, CoreError> {
    let value: Unknown = options
        .get_named_property("onProgress")
        .map_err(|e| CoreError::invalid(format!("options.onProgress: {}", e.reason)))?;
    match value.get_type() {
        Ok(ValueType::Undefined | ValueType::Null) => return Ok(None),
        Ok(ValueType::Function) => {}
        _ => return Err(CoreError::invalid("options.onProgress must be a function")),
    }
    let function: Function<IndexProgress, ()> = options
        .get_named_property("onProgress")
        .map_err(|e| CoreError::invalid(format!("options.onProgress: {}", e.reason)))?;
    function
        .build_threadsafe_function()
        .weak::<true>()
        .callee_handled::<false>()
        .max_queue_size::<64>()
        .build()
        .map(Some)
        .map_err(|e| CoreError::Internal(format!("progress callback: {}", e.reason)))
}

/// Raises `cancel` when `options.signal` (an AbortSignal) is or becomes aborted.
fn watch_signal(
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
