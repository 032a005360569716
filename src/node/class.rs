//! The `Engram` JS class: a handle on one project's memory in one database file.

use std::path::PathBuf;
use std::sync::RwLock;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional, optional_object, required, required_object};
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
}
