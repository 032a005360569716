//! [`Engram`]: a handle on one project's memory inside an engine. This is the core API; the
//! Node binding wraps it one-to-one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::code::indexer::{self, IndexCtx, IndexOptions, IndexProgress, IndexSummary};
use crate::code::read::{self as code_read, CodeChunk, CodeHit};
use crate::code::walk::PathRules;
use crate::code::watch::{self, OnWatchEvent, WatchOptions, Watcher};
use crate::embed::EmbeddingStatus;
use crate::engine::after_write::{Pass, Queued};
use crate::engine::{Engine, EngineOptions};
use crate::error::{Error, Result};
use crate::graph::{
    self, CentralityOptions, DerivedBatch, DerivedSummary, EdgeInput, GraphCtx, GraphNode,
    GraphStats, Impact, ImpactOptions, InjectSummary, ModuleSummary, Neighbour, NeighbourOptions,
    NodeInput, NodeScore, Side, Subgraph, TraverseOptions,
};
use crate::memory::{
    self, Ctx, ListFilter, Memory, MemoryPatch, MemoryVersion, RememberInput, Remembered,
    SearchHit, SearchOptions, Stats,
};
use crate::retrieval::neighbourhood::FileNeighbours;
use crate::store::{WriteTx, Writer};

/// The project id used when none is given: one database per project is the common layout.
pub const DEFAULT_PROJECT_ID: &str = "default";

/// Everything `Engram::open` needs.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// The database file (created if missing, with its directory).
    pub path: PathBuf,
    /// The project's root directory: file paths given to memories are stored relative to it
    /// and may not leave it.
    pub project_root: Option<PathBuf>,
    /// Which project this handle reads and writes (default `"default"`).
    pub project_id: Option<String>,
    /// Engine settings (used only if this open creates the engine).
    pub engine: EngineOptions,
}

impl OpenOptions {
    /// Options for `path` with every default.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        OpenOptions {
            path: path.into(),
            project_root: None,
            project_id: None,
            engine: EngineOptions::default(),
        }
    }
}

/// Most texts one [`Engram::embed`] call takes (a bound on one call's memory and latency).
pub const MAX_TEXTS_PER_EMBED: usize = 4096;

/// A handle on one project's memories in one database file. Clones are the same handle (they
/// share whether it is open; see [`Engram::close`]).
#[derive(Debug, Clone)]
pub struct Engram {
    engine: Arc<Engine>,
    project_id: Arc<str>,
    project_root: Option<Arc<Path>>,
    /// Counts this handle as open on the engine until it is closed or every clone dropped.
    lease: Arc<crate::engine::lifetime::Lease>,
}

/// What [`Engram::close`] returns: await it (or a clone) to know when the file is released.
#[derive(Debug, Clone)]
pub struct Closing {
    lifetime: Arc<crate::engine::lifetime::Lifetime>,
}

impl Closing {
    /// Resolves once the engine has released its files (the database and `<path>.sync/`), or
    /// at once while another handle keeps the engine open (or opens it again meanwhile).
    pub async fn wait(&self) {
        self.lifetime.closed().await;
    }
}

impl std::future::IntoFuture for Closing {
    type Output = ();
    type IntoFuture = futures::future::BoxFuture<'static, ()>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.wait().await })
    }
}

/// What [`Engram::optimize`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimized {
    /// Each keyword index: its segments before and after, and the merge steps run.
    pub keyword_indexes: Vec<crate::engine::KeywordIndexMerge>,
    /// Whether this project's graph closure was pending and got built.
    pub closure_built: bool,
    /// Wall time of the whole call.
    pub duration_ms: f64,
}

/// The lifecycle's part in memory writes, wired in here so that neither `memory` nor the
/// engine imports `lifecycle`: links after an insert and the contradiction scan they queue, a
/// session's use after a touch. Both run inside the write's transaction.
impl memory::WriteHooks for Engram {
    fn inserted<'a>(
        &'a self,
        ctx: &'a Ctx<'_>,
        tx: &'a WriteTx,
        written: &'a mut [Remembered],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let to_scan = crate::lifecycle::links::after_insert(ctx, tx, written).await?;
            // Queued while this write holds the writer, so the scan, which takes the writer,
            // only ever sees it committed (or rolled back).
            if !to_scan.is_empty() && self.engine.after_write.push(&self.project_id, to_scan) {
                self.start_conflict_scanner();
            }
            Ok(())
        })
    }

    fn used_in_session<'a>(
        &'a self,
        tx: &'a libsql::Connection,
        project_id: &'a str,
        session_id: &'a str,
        ids_json: &'a str,
        now: i64,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(crate::lifecycle::record_session_use_in(
            tx, project_id, session_id, ids_json, now,
        ))
    }
}

/// The lifecycle's contradiction scan as the engine's after-write pass.
struct ContradictionScan<'c>(&'c Ctx<'c>);

impl Pass for ContradictionScan<'_> {
    fn run<'p>(
        &'p self,
        queued: &'p [Queued],
        conn: Writer<'p>,
        budget: Option<Duration>,
        begun: &'p mut usize,
    ) -> BoxFuture<'p, Result<()>> {
        Box::pin(async move {
            let memories: Vec<(&str, &str)> = queued
                .iter()
                .map(|q| (q.project_id.as_str(), q.memory_id.as_str()))
                .collect();
            crate::lifecycle::conflict_scan::scan_pass(&memories, self.0, conn, budget, begun).await
        })
    }
}

impl Engram {
    /// Opens (or joins) the engine for `options.path` and returns a handle on one project.
    pub async fn open(options: OpenOptions) -> Result<Engram> {
        let project_id = options
            .project_id
            .as_deref()
            .map(str::trim)
            .unwrap_or(DEFAULT_PROJECT_ID)
            .to_owned();
        if project_id.is_empty() || project_id.len() > 256 {
            return Err(Error::invalid("projectId must be 1 to 256 bytes"));
        }
        let project_root = match &options.project_root {
            None => None,
            Some(root) => {
                let canonical = std::fs::canonicalize(root)
                    .map_err(|e| Error::invalid(format!("projectRoot {}: {e}", root.display())))?;
                if !canonical.is_dir() {
                    return Err(Error::invalid(format!(
                        "projectRoot {} is not a directory",
                        root.display()
                    )));
                }
                Some(Arc::from(canonical.as_path()))
            }
        };
        let engine = Engine::open(&options.path, options.engine).await?;
        let lease = Arc::new(engine.lifetime.lease());
        let handle = Engram {
            engine,
            project_id: Arc::from(project_id),
            project_root,
            lease,
        };
        if graph::align_closure_depth(&handle.graph_ctx()).await? {
            handle.settle_closure_in_background();
        }
        // What an earlier process wrote in bulk and left unmerged (a one-shot CLI index).
        handle.merge_keyword_indexes_in_background();
        // With auto-embedding, what a previous process left unembedded (a crash, a cancelled
        // run, a new model) is picked up now rather than at the next write.
        handle.schedule_embedding();
        Ok(handle)
    }

    pub(crate) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            store: &self.engine.store,
            clock: &*self.engine.clock,
            limits: &self.engine.limits,
            project_id: &self.project_id,
            project_root: self.project_root.as_deref(),
            hooks: self,
        }
    }

    fn graph_ctx(&self) -> GraphCtx<'_> {
        GraphCtx {
            store: &self.engine.store,
            project_root: self.project_root.as_deref(),
            clock: &*self.engine.clock,
            project_id: &self.project_id,
            closure_depth: self.engine.closure_depth,
        }
    }

    /// Closes this handle (every clone of it): it no longer counts as open, and once no
    /// handle of the engine is open the sync loop stops (a run going on is dropped: its
    /// transactions roll back, the outbox keeps what was not pushed). Clones and calls still
    /// running keep working and keep the engine until they are dropped.
    ///
    /// Await the returned [`Closing`] to know when the file is released: when this was the
    /// last open handle, it resolves once the engine is dropped (every clone and call gone),
    /// its sync loop has ended and its replica is closed, so that the database file and
    /// `<path>.sync/` can be moved or deleted. While another handle keeps the engine open it
    /// resolves at once.
    ///
    /// ```no_run
    /// # async fn demo(memory: engram::Engram, dir: std::path::PathBuf) {
    /// memory.close().await;
    /// std::fs::remove_dir_all(dir).unwrap();
    /// # }
    /// ```
    pub fn close(self) -> Closing {
        tracing::debug!(
            path = %self.engine.path().display(),
            project = &*self.project_id,
            "closing a handle"
        );
        let closing = Closing {
            lifetime: Arc::clone(self.lease.lifetime()),
        };
        self.lease.close();
        closing
    }

    /// The shared engine behind this handle.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The project this handle works in.
    pub fn project_id(&self) -> &str {
        &self.project_id
    }

    /// The project root, if one was given.
    pub fn project_root(&self) -> Option<&Path> {
        self.project_root.as_deref()
    }

    /// Opens an observed agent session, or joins the open one with the same id (from any
    /// handle on this engine, in any thread). Observing is synchronous and never touches the
    /// database; [`Engram::finalize`] promotes what the session showed.
    pub fn observe(
        &self,
        options: &crate::observer::SessionOptions,
    ) -> Result<Arc<crate::observer::Session>> {
        self.engine.sessions.open(
            &self.project_id,
            options,
            self.engine.clock.clone(),
            self.project_root.clone(),
        )
    }

    /// Merges the open sessions `source_ids` (parallel sub-agents of one task) into a new open
    /// session: files several agents changed become parallel-conflict candidates, and what
    /// several agents showed or recorded needs no other sessions and gains confidence. The
    /// sources end. Finalize the merged session once.
    pub fn merge_sessions(
        &self,
        source_ids: &[String],
        options: &crate::observer::SessionOptions,
    ) -> Result<Arc<crate::observer::Session>> {
        self.engine.sessions.merge(
            &self.project_id,
            source_ids,
            options,
            self.engine.clock.clone(),
            self.project_root.clone(),
        )
    }

    /// Saves an observed session's scratchpad (at a subtask boundary), replacing its previous
    /// checkpoint, so that [`Engram::resume_session`] can restore it after a crash.
    pub async fn checkpoint(
        &self,
        session: &crate::observer::Session,
    ) -> Result<crate::observer::Checkpoint> {
        crate::observer::checkpoint::save(&self.ctx(), session).await
    }

    /// The open session `session_id`, else the one restored from its last checkpoint (after a
    /// crash or restart), else `None`.
    pub async fn resume_session(
        &self,
        session_id: &str,
    ) -> Result<Option<Arc<crate::observer::Session>>> {
        crate::observer::checkpoint::resume(
            &self.ctx(),
            &self.engine.sessions,
            &self.project_id,
            session_id,
            self.engine.clock.clone(),
            self.project_root.clone(),
        )
        .await
    }

    /// Ends an observed session: runs the signal detectors and the promotion pipeline and
    /// stores what passes, with the session's counts and metrics, in one transaction.
    /// `outcome` defaults to what a session-complete message reported, else `success`.
    pub async fn finalize(
        &self,
        session: &crate::observer::Session,
        outcome: Option<crate::observer::SessionOutcome>,
    ) -> Result<crate::observer::Finalized> {
        crate::observer::finalize(&self.ctx(), &self.engine.sessions, session, outcome, None).await
    }

    /// [`Engram::finalize`], then, for a successful session that promoted signal memories, one
    /// call of the app's synthesis function with those signals (up to 3 memories in prose,
    /// stored for review in their own transaction; a failed call is reported in
    /// `Finalized::synthesis`, never raised).
    pub async fn finalize_with(
        &self,
        session: &crate::observer::Session,
        outcome: Option<crate::observer::SessionOutcome>,
        synthesize: &crate::observer::SynthesizeFn,
    ) -> Result<crate::observer::Finalized> {
        crate::observer::finalize(
            &self.ctx(),
            &self.engine.sessions,
            session,
            outcome,
            Some(synthesize),
        )
        .await
    }

    /// Cross-session synthesis with the app's function: `Threshold` for modules whose session
    /// count reached 5, 10, 20, 50 or 100 since their last synthesis, `Scheduled` for module
    /// pairs often used together, once each; at most `limit` calls. A failed call is
    /// reported and retried at the next run.
    pub async fn synthesize(
        &self,
        mode: crate::observer::SynthesisMode,
        synthesize: &crate::observer::SynthesizeFn,
        limit: usize,
    ) -> Result<Vec<crate::observer::SynthesisCall>> {
        crate::observer::synthesis::run(&self.ctx(), mode, synthesize, limit).await
    }

    /// The step limit for a task of `base` planned steps in `module`: scaled by the module's
    /// measured overrun (1x to 2x, once 3 sessions measured it), at most 1,000.
    pub async fn step_limit(
        &self,
        base: u32,
        module: Option<&str>,
    ) -> Result<crate::observer::StepLimit> {
        crate::observer::calibration::step_limit(&self.ctx(), base, module).await
    }

    /// What to put in front of an observed session's agent before step `step`, or `None`:
    /// [`Engram::step_injection`] with the session's own recent tool calls and the memories it
    /// was already shown, plus the scratchpad trigger (what the agent recorded since the last
    /// step). Sessions in the `control` and `passive` A/B groups get nothing mid-session.
    pub async fn session_step_injection(
        &self,
        session: &crate::observer::Session,
        step: u32,
    ) -> Result<Option<crate::retrieval::injection::StepInjection>> {
        let pending = session.injection_context(step)?;
        if !pending.group.active_injection() {
            return Ok(None);
        }
        let found =
            crate::retrieval::injection::decide(self, step, &pending.context, &pending.notes)
                .await?;
        if let Some(injection) = &found {
            session.injected(
                injection.memories.iter().map(|m| m.id.clone()),
                pending.notes_through,
            );
        }
        Ok(found)
    }

    /// Reads every page of the database file now (SQLite's `quick_check`: O(file size)) and
    /// returns the problems found (empty: sound). Damage found, here or by the check that runs
    /// in the background a few seconds after a local file opens, makes every later write fail
    /// with `ENGRAM_CORRUPT`; reads go on. `lifecycle::salvage` copies what can be read.
    pub async fn check_integrity(&self) -> Result<Vec<String>> {
        self.engine.store.check_integrity().await
    }

    /// What an agent should know when it starts a session on this project (injection points
    /// 1 and 2): unfinished work, the last session's handoff, pinned and user-taught memories,
    /// memories for the task and modules, workflow recipes and stale warnings, packed into a
    /// token budget with citations (see `agent::session_context`).
    pub async fn session_context(
        &self,
        request: crate::agent::session_context::SessionContextRequest,
    ) -> Result<crate::agent::session_context::SessionContext> {
        crate::agent::session_context::build(self, request).await
    }

    /// The coder's prefetch plan (injection point 2): the files past sessions in these
    /// modules read in more than 80%, then more than 50% of their module's sessions, packed
    /// into a token budget (see `agent::prefetch`).
    pub async fn prefetch_plan(
        &self,
        request: crate::agent::prefetch::PrefetchRequest,
    ) -> Result<crate::agent::prefetch::PrefetchPlan> {
        crate::agent::prefetch::plan(&self.ctx(), request).await
    }

    /// The planner's context: task calibrations, dead ends, causal dependencies, recent
    /// outcomes and recipes for the task's modules, with the planning transformations as data
    /// (see `agent::planner`).
    pub async fn planner_context(
        &self,
        request: crate::agent::planner::PlannerRequest,
    ) -> Result<crate::agent::planner::PlannerContext> {
        crate::agent::planner::build(self, request).await
    }

    /// The QA context: requirements, end-to-end observations and error patterns for the
    /// modules under test (see `agent::qa`).
    pub async fn qa_context(
        &self,
        request: crate::agent::qa::QaRequest,
    ) -> Result<crate::agent::session_context::SessionContext> {
        crate::agent::qa::build(self, request).await
    }

    /// Stores, for review, the end-to-end observation the app's model made of `tool`'s
    /// result in `reply` (a letter A-E and a sentence; see `agent::e2e`); `None` for F or an
    /// unreadable reply.
    pub async fn store_e2e_observation(
        &self,
        session_id: &str,
        tool: &str,
        reply: &str,
    ) -> Result<Option<(crate::agent::e2e::E2eCategory, Memory)>> {
        crate::agent::e2e::store(self, session_id, tool, reply).await
    }

    /// The observer session `session_id` open in this engine, if any.
    pub(crate) fn open_session(&self, session_id: &str) -> Option<Arc<crate::observer::Session>> {
        self.engine.sessions.get(&self.project_id, session_id)
    }

    /// Injection point 3 for an observed session: the unseen gotchas of the file a file tool
    /// (`tool`) just read or changed, to append to its result; never what the session was
    /// already shown (by step injection, the session context or an earlier augmentation).
    /// Sessions outside the `full` A/B group get `None`, like step injection.
    pub async fn augment_tool_result(
        &self,
        session: &crate::observer::Session,
        tool: &str,
        file: Option<&str>,
    ) -> Result<Option<crate::retrieval::injection::StepInjection>> {
        let Some(file) = file else {
            return Ok(None);
        };
        let pending = session.injection_context(0)?;
        if !pending.group.active_injection() {
            return Ok(None);
        }
        let found =
            crate::retrieval::injection::for_tool_result(self, tool, file, &pending.context)
                .await?;
        if let Some(injection) = &found {
            session.injected(injection.memories.iter().map(|m| m.id.clone()), 0);
        }
        Ok(found)
    }

    /// Stores a memory (privacy-filtered, deduplicated within project and scope).
    pub async fn remember(&self, input: RememberInput) -> Result<Remembered> {
        let mut out = memory::remember_many(&self.ctx(), vec![input]).await?;
        self.schedule_embedding();
        Ok(out.pop().expect("one input gives one result"))
    }

    /// Stores many memories in one transaction: all or nothing.
    pub async fn remember_many(&self, inputs: Vec<RememberInput>) -> Result<Vec<Remembered>> {
        let out = memory::remember_many(&self.ctx(), inputs).await?;
        self.schedule_embedding();
        Ok(out)
    }

    /// Resolves once the contradiction scans of every memory written before the call are done
    /// (they run just after each write, so the memory `remember` returns does not show them
    /// yet). Fails with `ENGRAM_INTERNAL` when one of those scans failed: its memories stay
    /// unflagged until consolidation finds their contradictions.
    pub async fn settled(&self) -> Result<()> {
        self.engine.after_write.settled().await
    }

    /// One memory by id (forgotten ones included).
    pub async fn get(&self, id: &str) -> Result<Memory> {
        memory::get(&self.ctx(), id).await
    }

    /// Changes fields of a memory; the previous state is kept in its history.
    pub async fn update(&self, id: &str, patch: MemoryPatch) -> Result<Memory> {
        let out = memory::update(&self.ctx(), id, patch).await?;
        self.schedule_embedding();
        Ok(out)
    }

    /// Archives a memory (kept for audit and rollback; hidden from search and list).
    pub async fn forget(&self, id: &str, reason: Option<String>) -> Result<Memory> {
        memory::forget(&self.ctx(), id, reason).await
    }

    /// Every state of a memory, oldest first, the current one last.
    pub async fn history(&self, id: &str) -> Result<Vec<MemoryVersion>> {
        memory::history(&self.ctx(), id).await
    }

    /// Makes a past version current again (recorded as a new version).
    pub async fn rollback(&self, id: &str, version: u32) -> Result<Memory> {
        memory::rollback(&self.ctx(), id, version).await
    }

    /// A filtered page of memories.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<Memory>> {
        memory::list(&self.ctx(), filter).await
    }

    /// BM25 keyword search over memories; misspelt words are corrected when exact search
    /// finds too little (`SearchOptions::typo`).
    pub async fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        crate::retrieval::typo::search_memories(
            &self.ctx(),
            &self.engine.memory_vocabulary,
            query,
            options,
        )
        .await
    }

    /// Counts over the project's memories.
    pub async fn stats(&self) -> Result<Stats> {
        memory::stats(&self.ctx()).await
    }

    /// Runs a sync now (after the running one, if any) and returns what it did. Fails with the
    /// run's error (`ENGRAM_SYNC_UNREACHABLE`, `ENGRAM_SYNC_AUTH`...), which the status and
    /// the listeners also get; local data is never affected by a failure. Without sync:
    /// `ENGRAM_SYNC_CONFIG`.
    pub async fn sync(&self) -> Result<crate::sync::SyncReport> {
        let sync = self.sync_service()?;
        let report = sync.run_once(&self.engine).await;
        sync.reschedule();
        report
    }

    /// Where sync stands (`state: disabled` without sync).
    pub async fn sync_status(&self) -> Result<crate::sync::SyncStatus> {
        match (&self.engine.sync, self.engine.remote_url()) {
            (Some(sync), _) => sync.status(&self.engine.store).await,
            (None, Some(url)) => Ok(crate::sync::SyncStatus::remote(url)),
            (None, None) => Ok(crate::sync::SyncStatus::disabled()),
        }
    }

    /// The engine's sync service (`ENGRAM_SYNC_CONFIG` when the engine was opened without sync
    /// or is remote-only).
    pub fn sync_service(&self) -> Result<&Arc<crate::sync::SyncService>> {
        self.engine.sync.as_ref().ok_or_else(|| {
            Error::SyncConfig(if self.engine.remote_url().is_some() {
                "a remote-only engine reads and writes the server directly: there is nothing \
                 to sync"
                    .into()
            } else {
                "this database was opened without sync options".into()
            })
        })
    }

    /// Embeds `texts` with the engine's embedder (loading it on first use), off the async
    /// runtime's threads. One L2-normalised vector per text, in order. At most
    /// [`MAX_TEXTS_PER_EMBED`] texts per call; longer texts are truncated to the model's limit.
    /// `kind` says whether they are search queries or texts to store, for models that embed
    /// the two apart (a remote model with [`InputPrefixes`], multilingual-e5-small); the
    /// built-in model does not.
    ///
    /// [`InputPrefixes`]: crate::embed::InputPrefixes
    pub async fn embed(
        &self,
        texts: Vec<String>,
        kind: crate::embed::InputKind,
    ) -> Result<Vec<Vec<f32>>> {
        if texts.len() > MAX_TEXTS_PER_EMBED {
            return Err(Error::invalid(format!(
                "embed takes at most {MAX_TEXTS_PER_EMBED} texts per call, got {}",
                texts.len()
            )));
        }
        self.with_embedder(move |embedder| {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            kind.embed(embedder, &refs)
        })
        .await
    }

    /// Runs `work` with the engine's embedder (loaded if this is its first use) on the
    /// blocking pool: loading and embedding in one hop off the async workers.
    async fn with_embedder<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn crate::embed::Embedder) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || work(&*engine.embeddings.embedder()?))
            .await
            .map_err(|e| Error::Internal(format!("embedding task failed: {e}")))?
    }

    /// The engine's embedder, loaded on the blocking pool if this is its first use.
    pub(crate) async fn loaded_embedder(&self) -> Result<Arc<dyn crate::embed::Embedder>> {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || engine.embeddings.embedder())
            .await
            .map_err(|e| Error::Internal(format!("embedding task failed: {e}")))?
    }

    /// Gives every chunk and memory of the project that has no vector for the current model one
    /// (chunks first). Resumable: a cancelled or crashed run leaves what it stored, and the next
    /// run starts where the vectors stop. Runs of one project queue behind each other.
    /// `on_progress` is called after every step of about a second; raising `cancel` ends the run
    /// with `ENGRAM_ABORTED`. `ENGRAM_MODEL_UNAVAILABLE` without a model.
    pub async fn embed_pending(
        &self,
        on_progress: impl Fn(crate::vector::EmbedProgress) + Send + Sync,
        cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<crate::vector::EmbedReport> {
        let embedder = self.loaded_embedder().await?;
        let run = self.engine.embed_run_lock(&self.project_id);
        let _running = run.lock().await;
        crate::vector::embed_pending(
            &self.engine.store,
            &*self.engine.clock,
            &self.project_id,
            embedder,
            self.engine.chunk_vectors,
            &on_progress,
            cancel,
        )
        .await
    }

    /// Chunks and memories most similar in meaning to `query` (cosine similarity of the current
    /// model's vectors; exact, not approximate). Items not embedded yet are not found: see
    /// [`Engram::embed_pending`]. `ENGRAM_MODEL_UNAVAILABLE` without a model.
    pub async fn dense_search(
        &self,
        query: &str,
        options: crate::vector::DenseQuery,
    ) -> Result<Vec<crate::vector::DenseHit>> {
        if query.trim().is_empty() {
            return Err(Error::invalid("query must not be empty"));
        }
        let (model, vector) = self
            .embed_one(query, crate::embed::InputKind::Query)
            .await?;
        crate::vector::dense_search(
            &self.engine.store,
            &self.engine.vectors,
            &self.project_id,
            &model,
            vector,
            &options,
        )
        .await
    }

    /// The vector of one text (a query, or a hypothetical answer searched for as a document
    /// would be), with the model it belongs to (loading the model on first use).
    pub(crate) async fn embed_one(
        &self,
        text: &str,
        kind: crate::embed::InputKind,
    ) -> Result<(crate::embed::EmbedderId, Vec<f32>)> {
        let text = text.to_owned();
        self.with_embedder(move |embedder| {
            let vector = kind
                .embed(embedder, &[text.as_str()])?
                .pop()
                .ok_or_else(|| Error::Embedding("the embedder returned no vector".into()))?;
            Ok((embedder.id().clone(), vector))
        })
        .await
    }

    /// Memories and code chunks for `request.query`, ranked together, with the context packed
    /// into the token budget: the four-stage pipeline of `retrieval::recall`. Paths that cannot
    /// run (no embedding model) are skipped and named in [`Recall::skipped`].
    ///
    /// [`Recall::skipped`]: crate::retrieval::recall::Recall::skipped
    pub async fn recall(
        &self,
        request: crate::retrieval::request::RecallRequest,
    ) -> Result<crate::retrieval::recall::Recall> {
        let request = self.recall_request(request).await?;
        crate::retrieval::recall::run(self, request).await
    }

    /// [`Engram::recall`] with the HyDE fallback: when fewer than `min_results` items are close
    /// to the query's vector, `fallback.generate` (the app's model) writes a hypothetical
    /// answer and the dense path searches with it too (see `retrieval::hyde`). A failure of
    /// the function is named in `skipped`; the first result stands.
    pub async fn recall_with_hyde(
        &self,
        request: crate::retrieval::request::RecallRequest,
        fallback: crate::retrieval::hyde::Hyde,
    ) -> Result<crate::retrieval::recall::Recall> {
        let request = self.recall_request(request).await?;
        crate::retrieval::recall::run_with_hyde(self, request, fallback).await
    }

    /// `request` checked, with the trust level's threshold applied when it asks for it.
    async fn recall_request(
        &self,
        request: crate::retrieval::request::RecallRequest,
    ) -> Result<crate::retrieval::request::RecallRequest> {
        let mut request = request.validated(self.project_root.as_deref())?;
        if request.apply_trust {
            // "Above the threshold": the smallest step above it (confidences are f64 in 0..=1).
            let threshold = crate::lifecycle::trust::level(&self.ctx())
                .await?
                .injection_threshold()
                + 1e-9;
            let given = request.filters.min_confidence.unwrap_or(0.0);
            request.filters.min_confidence = Some(given.max(threshold));
        }
        Ok(request)
    }

    /// What to put in front of an agent before step `step`, if anything: unseen gotchas of the
    /// files it just read or changed, else a memory answering one of its latest searches (see
    /// `retrieval::injection`). What is returned counts as used.
    pub async fn step_injection(
        &self,
        step: u32,
        context: &crate::retrieval::injection::StepContext,
    ) -> Result<Option<crate::retrieval::injection::StepInjection>> {
        crate::retrieval::injection::decide(self, step, context, &[]).await
    }

    /// Where the dense path stands (never loads the model).
    pub fn embedding_status(&self) -> EmbeddingStatus {
        self.engine.embeddings.status()
    }

    /// This project's automatic embedding runs (`None` unless the engine has `auto_embed`).
    pub fn background_embedding(&self) -> Option<crate::vector::BackgroundStatus> {
        let auto = self.engine.auto_embed.as_ref()?;
        Some(auto.status(&self.project_id))
    }

    /// With `auto_embed`, starts a background embedding run for this project (or asks the one
    /// going to run once more). The run stops early when no handle on the engine is open.
    pub(crate) fn schedule_embedding(&self) {
        let Some(auto) = self.engine.auto_embed.as_ref() else {
            return;
        };
        // The engine's runtime, not the caller's: a watch update runs on the watcher thread's
        // own runtime, whose drop at `unwatch()`/`close()` would wait for this run (and a JS
        // embed callback in it would wait for the JS thread blocked in that very call).
        let Some(runtime) = auto.runtime().cloned() else {
            return;
        };
        if !auto.claim(&self.project_id) {
            return;
        }
        let handle = self.uncounted_clone();
        runtime.spawn(async move {
            loop {
                let cancel = AtomicBool::new(false);
                let lifetime = handle.lease.lifetime();
                let stop_when_alone = |_: crate::vector::EmbedProgress| {
                    // Every handle closed: the engine should close, not wait for this run.
                    if lifetime.open_handles() == 0 {
                        cancel.store(true, Ordering::Relaxed);
                    }
                };
                let outcome = handle.embed_pending(stop_when_alone, &cancel).await;
                let error = outcome.err().map(|e| format!("{}: {e}", e.code()));
                let auto = handle.engine.auto_embed.as_ref().expect("checked above");
                if !auto.finish(&handle.project_id, error) {
                    break;
                }
            }
        });
    }

    /// A clone of this handle that does not count as an open one: a handle dropped without
    /// `close()` (garbage-collected in JS) must still let the engine close and stop the
    /// background work the clone runs.
    fn uncounted_clone(&self) -> Engram {
        Engram {
            lease: Arc::new(self.lease.lifetime().uncounted_lease()),
            ..self.clone()
        }
    }

    /// The engine's runtime (else the caller's) and an uncounted clone to run background
    /// work on it.
    fn background_handle(&self) -> (tokio::runtime::Handle, Engram) {
        let runtime = self
            .engine
            .runtime
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok())
            .expect("engram runs inside a tokio runtime");
        (runtime, self.uncounted_clone())
    }

    /// Starts the engine's contradiction scanner (the queue said none is running).
    fn start_conflict_scanner(&self) {
        // The clone keeps the engine, so a `close()` resolves once the queued scans are done.
        let (runtime, handle) = self.background_handle();
        runtime.spawn(async move {
            let ctx = handle.ctx();
            let lifetime = handle.lease.lifetime();
            let closing = || lifetime.open_handles() == 0;
            let scan = ContradictionScan(&ctx);
            handle
                .engine
                .after_write
                .drain(&handle.engine.store, &scan, closing)
                .await;
        });
    }

    fn root_for_code(&self) -> Result<&Path> {
        self.project_root.as_deref().ok_or_else(|| {
            Error::invalid("code indexing needs the handle to be opened with projectRoot")
        })
    }

    /// Indexes the project root: parses changed files on worker threads, writes chunks,
    /// definitions and references, removes deleted files. `on_progress` is called from the
    /// writing task (every 100 ms, after each committed batch and at each phase); raising `cancel` aborts with
    /// `ENGRAM_ABORTED`, keeping the batches already committed. One run per project at a time
    /// (a second concurrent call fails with `ENGRAM_CONFLICT`).
    pub async fn index(
        &self,
        options: &IndexOptions,
        on_progress: &(dyn Fn(&IndexProgress) + Send + Sync),
        cancel: &Arc<AtomicBool>,
    ) -> Result<IndexSummary> {
        let root = self.root_for_code()?;
        let _running = self.engine.start_indexing(&self.project_id)?;
        let mut summary =
            indexer::index(&self.index_ctx(root), options, on_progress, cancel).await?;
        summary.git = self.git_staleness(root).await;
        self.schedule_embedding();
        self.settle_closure_in_background();
        self.merge_keyword_indexes_in_background();
        Ok(summary)
    }

    /// Does now the upkeep the engine otherwise does in the background once its writer is idle
    /// after bulk writes: merges the keyword indexes (code and memories, the whole database's)
    /// whose segments are scattered (`engine::fts_merge`), and builds this project's graph
    /// closure if a wide write left it pending. For a process about to exit after bulk writes,
    /// such as a one-shot CLI `index`, which would otherwise leave before the writer is ever
    /// idle. Each merge step takes the writer as a write does, so writes interleave with it.
    /// Raising `cancel` stops it between merge steps with `ENGRAM_ABORTED`, the steps done
    /// kept; the closure build, one transaction, runs to its end once begun. A remote-only
    /// engine leaves the merge to its server (`keyword_indexes` empty).
    pub async fn optimize(&self, cancel: &AtomicBool) -> Result<Optimized> {
        let started = std::time::Instant::now();
        let mut optimized = Optimized {
            keyword_indexes: Vec::new(),
            closure_built: false,
            duration_ms: 0.0,
        };
        if !self.engine.store.is_remote() {
            optimized.keyword_indexes =
                crate::engine::fts_merge::merge_now(&self.engine.store, cancel).await?;
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Aborted);
        }
        optimized.closure_built = graph::settle_closure(&self.graph_ctx()).await?;
        optimized.duration_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(optimized)
    }

    /// [`Engram::index`] with the default options, no progress callback and no way to cancel:
    /// the whole run the engine's own tests ask for.
    #[cfg(test)]
    pub(crate) async fn index_with_defaults(&self) -> IndexSummary {
        self.index(&IndexOptions::default(), &|_| {}, &Default::default())
            .await
            .expect("indexing the test project")
    }

    /// The git staleness pass after a full index run (`lifecycle::git_drift`). A repository
    /// that cannot be read never fails the run that indexed the files: it is logged.
    async fn git_staleness(&self, root: &Path) -> crate::code::git::GitStaleness {
        match crate::lifecycle::git_drift::apply(&self.ctx(), root).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(code = e.code(), error = %e, "git staleness pass failed");
                crate::code::git::GitStaleness::default()
            }
        }
    }

    /// Like [`Engram::index`], but waits for a running index of the project instead of failing.
    pub(crate) async fn index_waiting(
        &self,
        options: &IndexOptions,
        on_progress: &(dyn Fn(&IndexProgress) + Send + Sync),
        cancel: &Arc<AtomicBool>,
    ) -> Result<IndexSummary> {
        let root = self.root_for_code()?;
        let _running = self.engine.wait_indexing(&self.project_id, cancel).await?;
        let mut summary =
            indexer::index(&self.index_ctx(root), options, on_progress, cancel).await?;
        summary.git = self.git_staleness(root).await;
        self.schedule_embedding();
        self.settle_closure_in_background();
        self.merge_keyword_indexes_in_background();
        Ok(summary)
    }

    /// Re-indexes some paths now (relative to the project root, or absolute inside it): files
    /// are read again if they changed, directories are walked, paths that are gone or ignored
    /// are removed with everything under them. For editors and tools that know what they
    /// saved; [`Engram::watch`] does the same from file events. Waits while a full index of the
    /// project runs.
    pub async fn index_paths(
        &self,
        paths: &[String],
        options: &IndexOptions,
    ) -> Result<IndexSummary> {
        let root = self.root_for_code()?;
        let mut relative = Vec::with_capacity(paths.len());
        for (i, path) in paths.iter().enumerate() {
            let path = memory::input::confine_path(path, Some(root)).map_err(|e| match e {
                Error::InvalidArg(why) => Error::invalid(format!("paths[{i}]: {why}")),
                other => other,
            })?;
            relative.push(path);
        }
        let rules = Arc::new(PathRules::new(root, options)?);
        self.update_paths(
            options,
            &rules,
            &relative,
            &Arc::new(AtomicBool::new(false)),
        )
        .await
    }

    pub(crate) async fn update_paths(
        &self,
        options: &IndexOptions,
        rules: &Arc<PathRules>,
        paths: &[String],
        cancel: &Arc<AtomicBool>,
    ) -> Result<IndexSummary> {
        let root = self.root_for_code()?;
        let _running = self.engine.wait_indexing(&self.project_id, cancel).await?;
        let summary =
            indexer::update_paths(&self.index_ctx(root), options, rules, paths, cancel).await?;
        self.schedule_embedding();
        self.settle_closure_in_background();
        self.merge_keyword_indexes_in_background();
        Ok(summary)
    }

    /// Watches the project root and keeps the index current: changed files are re-indexed
    /// after `options.debounce` of quiet, new directories are followed, deleted and renamed
    /// paths are removed. `on_event` is called on the watcher's thread after each update
    /// that changed something, and when one fails (the watcher goes on). Drop the returned
    /// [`Watcher`] to stop. Run [`Engram::index`] first: the watcher only follows changes.
    pub fn watch(&self, options: WatchOptions, on_event: OnWatchEvent) -> Result<Watcher> {
        let root = self.root_for_code()?.to_path_buf();
        watch::start(self.clone(), root, options, on_event)
    }

    fn index_ctx<'a>(&'a self, root: &'a Path) -> IndexCtx<'a> {
        IndexCtx {
            store: &self.engine.store,
            clock: &*self.engine.clock,
            project_id: &self.project_id,
            root,
            closure_depth: self.engine.closure_depth,
        }
    }

    /// The indexed chunks of one file (`path` relative to the project root, or absolute inside
    /// it), in file order; empty when the file is not indexed.
    pub async fn chunks_of(&self, path: &str) -> Result<Vec<CodeChunk>> {
        let path = memory::input::confine_path(path, Some(self.root_for_code()?))?;
        let reader = self.engine.store.reader().await;
        code_read::chunks_of(&reader, &self.project_id, &path).await
    }

    /// BM25 keyword search over the project's code chunks (names weigh most); `limit` is 1 to
    /// 1,000.
    pub async fn search_code(&self, query: &str, limit: u32) -> Result<Vec<CodeHit>> {
        if !(1..=1000).contains(&limit) {
            return Err(Error::invalid(format!(
                "limit must be between 1 and 1000, got {limit}"
            )));
        }
        let reader = self.engine.store.reader().await;
        code_read::search_code(&reader, &self.project_id, query, limit).await
    }

    /// Upserts graph nodes and edges in one transaction (idempotent: re-sending the same batch
    /// changes only `updated_at`); the closure table is updated in the same transaction, or,
    /// for a batch of more than 2,000 changed hops, once the writer is idle afterwards.
    pub async fn inject_graph(
        &self,
        nodes: &[NodeInput],
        edges: &[EdgeInput],
    ) -> Result<InjectSummary> {
        let summary = graph::inject(&self.graph_ctx(), nodes, edges).await?;
        if edges.len() > crate::graph::closure::REBUILD_THRESHOLD {
            self.settle_closure_in_background();
        }
        Ok(summary)
    }

    /// Deletes a node written through [`Engram::inject_graph`] and its edges.
    pub async fn delete_node(&self, key: &str) -> Result<bool> {
        graph::delete_node(&self.graph_ctx(), key).await
    }

    /// Deletes one edge written through [`Engram::inject_graph`].
    pub async fn delete_edge(&self, from: &str, to: &str, kind: &str) -> Result<bool> {
        graph::delete_edge(&self.graph_ctx(), from, to, kind).await
    }

    /// One graph node by key.
    pub async fn node(&self, key: &str) -> Result<Option<GraphNode>> {
        graph::node(&self.graph_ctx(), key).await
    }

    /// Breadth-first search from a node over the edges.
    pub async fn traverse(&self, start: &str, options: &TraverseOptions) -> Result<Subgraph> {
        graph::traverse(&self.graph_ctx(), start, options).await
    }

    /// What depends on a node (or, with [`Side::Descendants`], what it depends on), from the
    /// closure (served from the in-process graph index once it is loaded).
    pub async fn reach(
        &self,
        key: &str,
        side: Side,
        max_depth: Option<u32>,
        limit: u32,
    ) -> Result<Subgraph> {
        let slot = self.engine.graphs.slot(&self.project_id);
        let start_load = || self.load_graph_in_background(slot.clone());
        let ctx = self.graph_ctx();
        graph::closure_of_served(&ctx, &slot, start_load, key, side, max_depth, limit).await
    }

    /// [`Engram::reach`] from the closure table, never the in-process index: for the index's
    /// equivalence tests and bench.
    #[doc(hidden)]
    pub async fn reach_from_tables(
        &self,
        key: &str,
        side: Side,
        max_depth: Option<u32>,
        limit: u32,
    ) -> Result<Subgraph> {
        graph::closure_of(&self.graph_ctx(), key, side, max_depth, limit).await
    }

    /// Builds this project's closure rows now if a wide write left them pending (the engine
    /// does it by itself once its writer is idle); true if it built them: for tests.
    #[doc(hidden)]
    pub async fn settle_closure(&self) -> Result<bool> {
        graph::settle_closure(&self.graph_ctx()).await
    }

    /// [`Engram::reach`] answered from `index` instead of the closure table.
    #[doc(hidden)]
    pub fn reach_through(
        &self,
        index: &crate::graph::GraphIndex,
        key: &str,
        side: Side,
        max_depth: Option<u32>,
        limit: u32,
    ) -> Result<Subgraph> {
        crate::graph::closure_of_through(&self.graph_ctx(), index, key, side, max_depth, limit)
    }

    /// The nodes named by `keys` and the edges among them.
    pub async fn subgraph(&self, keys: &[String]) -> Result<Subgraph> {
        graph::subgraph(&self.graph_ctx(), keys).await
    }

    /// What depends on `target` (a file path, `path:Qualified.name`, or a node key) within the
    /// closure depth, and the memories attached to the target or anything affected.
    pub async fn impact(&self, target: &str, options: &ImpactOptions) -> Result<Impact> {
        let slot = self.engine.graphs.slot(&self.project_id);
        let start_load = || self.load_graph_in_background(slot.clone());
        graph::impact_served(&self.graph_ctx(), &slot, start_load, target, options).await
    }

    /// Builds this project's closure rows on the engine's runtime once the writer is idle, if
    /// a wide write or a new closure depth left them pending (see `graph::closure`); given up
    /// while waiting once every handle is closed (a one-shot CLI call): then the next read of
    /// the closure from the tables, or the next graph write, builds them.
    fn settle_closure_in_background(&self) {
        let (runtime, handle) = self.background_handle();
        runtime.spawn(async move {
            let lifetime = handle.lease.lifetime().clone();
            let keep_going = move || lifetime.open_handles() > 0;
            let idle = crate::engine::after_write::IDLE;
            match graph::settle_closure_when_idle(&handle.graph_ctx(), idle, &keep_going).await {
                Ok(_) | Err(Error::Aborted | Error::Closed) => {}
                Err(error) => {
                    tracing::warn!(
                        code = error.code(),
                        "building the graph closure failed: {error}"
                    )
                }
            }
        });
    }

    /// Merges the keyword indexes' segments on the engine's runtime while the writer is idle,
    /// if bulk writes left them scattered (see `engine::fts_merge`); given up once every
    /// handle is closed (the next open goes on). A remote-only engine leaves that to its
    /// server.
    fn merge_keyword_indexes_in_background(&self) {
        if self.engine.store.is_remote() || !self.engine.fts_merge.claim() {
            return;
        }
        let (runtime, handle) = self.background_handle();
        runtime.spawn(async move {
            let lifetime = handle.lease.lifetime().clone();
            let keep_going = move || lifetime.open_handles() > 0;
            let engine = &handle.engine;
            match engine.fts_merge.run(&engine.store, &keep_going).await {
                Ok(_) | Err(Error::Aborted | Error::Closed) => {}
                Err(error) => {
                    tracing::warn!(
                        code = error.code(),
                        "merging the keyword indexes failed: {error}"
                    )
                }
            }
        });
    }

    /// Loads this project's in-process graph index on the engine's runtime (the caller
    /// claimed the load).
    fn load_graph_in_background(&self, slot: Arc<graph::served::GraphSlot>) {
        let (runtime, handle) = self.background_handle();
        runtime.spawn(async move {
            // Every handle closed (a one-shot CLI call): nobody will use the index.
            let lifetime = handle.lease.lifetime().clone();
            let keep_going = move || lifetime.open_handles() > 0;
            match slot
                .load(
                    &handle.engine.store,
                    &handle.project_id,
                    handle.engine.closure_depth,
                    &keep_going,
                )
                .await
            {
                Ok(()) | Err(Error::Aborted) => {}
                Err(error) => {
                    tracing::warn!(code = error.code(), "graph index load failed: {error}")
                }
            }
        });
    }

    /// [`Engram::impact`] from the graph tables, never the in-process index: for the index's
    /// equivalence tests and bench.
    #[doc(hidden)]
    pub async fn impact_from_tables(
        &self,
        target: &str,
        options: &ImpactOptions,
    ) -> Result<Impact> {
        graph::impact(&self.graph_ctx(), target, options).await
    }

    /// Brings this project's served graph index up to date, loading it here (not in the
    /// background) if it is not loaded; false while another caller's load runs or when the
    /// index is off (`graph_index_max_bytes` 0, or the graph over it). For tests and
    /// benches, which need the index in place before they measure or compare.
    #[doc(hidden)]
    pub async fn warm_graph_index(&self) -> Result<bool> {
        let slot = self.engine.graphs.slot(&self.project_id);
        let store = &self.engine.store;
        match slot.refresh(store, &self.project_id).await? {
            graph::served::Refreshed::Current => Ok(true),
            graph::served::Refreshed::Loading | graph::served::Refreshed::Off => Ok(false),
            graph::served::Refreshed::LoadClaimed => {
                let depth = self.engine.closure_depth;
                slot.load(store, &self.project_id, depth, &|| true).await?;
                // Over its budget the load leaves no index.
                Ok(!slot.is_off())
            }
        }
    }

    /// [`Engram::warm_graph_index`], then what the served index holds (`None` while another
    /// caller's load runs): for tests.
    #[doc(hidden)]
    pub async fn served_graph_picture(&self) -> Result<Option<crate::graph::index::GraphPicture>> {
        self.warm_graph_index().await?;
        let slot = self.engine.graphs.slot(&self.project_id);
        let served = slot.read().await;
        Ok(served.as_ref().map(|served| served.index.picture()))
    }

    /// How many times this project's served graph index was loaded from the tables (the
    /// other refreshes replayed the change logs): for tests.
    #[doc(hidden)]
    pub fn served_graph_loads(&self) -> u64 {
        self.engine.graphs.slot(&self.project_id).loads()
    }

    /// This project's graph loaded into memory, as of now, apart from the one
    /// [`Engram::impact`] is served from: for its equivalence tests and bench.
    #[doc(hidden)]
    pub async fn load_graph_index(&self) -> Result<crate::graph::GraphIndex> {
        crate::graph::load_index(&self.graph_ctx()).await
    }

    /// [`Engram::impact`] answered from `index` instead of the graph tables: the same answer
    /// while the graph has not changed since the index was loaded.
    #[doc(hidden)]
    pub async fn impact_through(
        &self,
        index: &crate::graph::GraphIndex,
        target: &str,
        options: &ImpactOptions,
    ) -> Result<Impact> {
        crate::graph::impact_through(&self.graph_ctx(), index, target, options).await
    }

    /// The nodes one edge away from `keys` (a file or module also standing for what it
    /// contains; unknown keys skipped), heaviest link first: retrieval's graph candidates.
    /// Served from the in-process graph index once it is loaded.
    pub async fn neighbours(
        &self,
        keys: &[String],
        options: &NeighbourOptions,
    ) -> Result<Vec<Neighbour>> {
        let slot = self.engine.graphs.slot(&self.project_id);
        let start_load = || self.load_graph_in_background(slot.clone());
        graph::neighbours_served(&self.graph_ctx(), &slot, start_load, keys, options).await
    }

    /// [`Engram::neighbours`] from the graph tables, never the in-process index: for the
    /// index's equivalence tests and bench.
    #[doc(hidden)]
    pub async fn neighbours_from_tables(
        &self,
        keys: &[String],
        options: &NeighbourOptions,
    ) -> Result<Vec<Neighbour>> {
        graph::neighbours(&self.graph_ctx(), keys, options).await
    }

    /// [`Engram::neighbours`] answered from `index` (`None` past its expansion bound, where
    /// the tables answer).
    #[doc(hidden)]
    pub fn neighbours_through(
        &self,
        index: &crate::graph::GraphIndex,
        keys: &[String],
        options: &NeighbourOptions,
    ) -> Option<Vec<Neighbour>> {
        index.neighbours(keys, options)
    }

    /// For each of `files` (project-relative paths, at most 200), the other files one graph edge
    /// away (imports, calls, inheritance, agent or LLM relations; not containment).
    /// Served from the in-process graph index once it is loaded.
    pub async fn file_neighbours(&self, files: &[String]) -> Result<FileNeighbours> {
        let files = &files[..files.len().min(crate::retrieval::neighbourhood::MAX_FILES)];
        let slot = self.engine.graphs.slot(&self.project_id);
        let start_load = || self.load_graph_in_background(slot.clone());
        let from_index = |index: &crate::graph::GraphIndex| index.file_neighbours(files);
        match graph::from_current_index(&self.graph_ctx(), &slot, start_load, false, from_index)
            .await
        {
            Some(answer) => Ok(answer),
            None => self.file_neighbours_from_tables(files).await,
        }
    }

    /// [`Engram::file_neighbours`] from the graph tables, never the in-process index: for the
    /// index's equivalence tests.
    #[doc(hidden)]
    pub async fn file_neighbours_from_tables(&self, files: &[String]) -> Result<FileNeighbours> {
        crate::retrieval::neighbourhood::file_neighbours(
            &self.engine.store,
            &self.project_id,
            files,
        )
        .await
    }

    /// [`Engram::file_neighbours`] answered from `index`.
    #[doc(hidden)]
    pub fn file_neighbours_through(
        &self,
        index: &crate::graph::GraphIndex,
        files: &[String],
    ) -> FileNeighbours {
        index.file_neighbours(&files[..files.len().min(crate::retrieval::neighbourhood::MAX_FILES)])
    }

    /// Degree or PageRank centrality of the nodes named by `keys` within the subgraph they
    /// induce, best first.
    pub async fn centrality(
        &self,
        keys: &[String],
        options: &CentralityOptions,
    ) -> Result<Vec<NodeScore>> {
        graph::centrality(&self.graph_ctx(), keys, options).await
    }

    /// Layer-2 relations from the app's language model: `derive` receives summaries of the
    /// modules (`modules`, or every module when None), 25 per call, and returns nodes and
    /// edges (or None to leave those modules alone). Each answer replaces what `derive`
    /// returned for the same modules before; all is written as layer 2 with source `llm`.
    /// An edge belongs to the module it starts from, or else to the module it ends at; that
    /// module must be one asked about (`ENGRAM_INVALID_ARG`), and only edges belonging to the
    /// modules asked about are replaced. Code rows and agent/user rows cannot be overwritten
    /// (`ENGRAM_CONFLICT`).
    pub async fn derive_relations<F, Fut>(
        &self,
        modules: Option<&[String]>,
        derive: F,
        cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<DerivedSummary>
    where
        F: FnMut(Vec<ModuleSummary>) -> Fut,
        Fut: std::future::Future<Output = Result<DerivedBatch>>,
    {
        graph::derive_relations(&self.graph_ctx(), modules, derive, cancel).await
    }

    /// Node, edge and closure counts of the project's graph.
    pub async fn graph_stats(&self) -> Result<GraphStats> {
        graph::stats(&self.graph_ctx()).await
    }

    /// Keys of the project's graph nodes, optionally of one kind (`file`, `module`,
    /// `function`...) and layer, in key order, at most `limit` (<= 100,000).
    pub async fn node_keys(
        &self,
        kind: Option<&str>,
        layer: Option<u8>,
        limit: u32,
    ) -> Result<Vec<String>> {
        graph::keys(&self.graph_ctx(), kind, layer, limit).await
    }
}
