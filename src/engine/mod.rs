//! The engine: one per database file per process, shared by every handle that opens the file
//! from any thread (main thread or worker threads).
//!
//! Architecture invariant: engines are only created through [`registry::open`], which maps a
//! canonical path to one live `Arc<Engine>`. Two engines on one file would be two writers
//! racing for SQLite's lock (and, with replicas, two sync loops corrupting a file).
//!
//! An engine holds a file's shared state (store, embedder, vector indexes, sessions, sync, the
//! after-write queue), not policy: what runs on that state is wired in by the handle
//! (`Engram`), so the engine never imports `lifecycle` (`tests/layering.rs`).

pub(crate) mod after_write;
#[cfg(test)]
mod closure_pending_tests;
pub(crate) mod fts_merge;
#[cfg(test)]
mod fts_merge_tests;
#[cfg(test)]
mod graph_sync_parts_tests;
pub(crate) mod lifetime;
mod registry;
#[cfg(test)]
mod vector_replay_tests;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::memory::Limits;
use crate::store::{SchemaStatus, Store, StoreOptions};

pub use fts_merge::KeywordIndexMerge;
pub use registry::{canonical_db_path, is_open, open_engines};

/// Engine-level settings. They apply when the engine is created; a later `open` of the same
/// file joins the existing engine and its settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Busy timeout and pool size.
    pub store: StoreOptions,
    /// Input limits.
    pub limits: Limits,
    /// Time source (tests inject a manual clock).
    pub clock: Arc<dyn Clock>,
    /// How many hops the graph's closure table covers (1..=8, default 4). Deeper answers
    /// more impact questions from one lookup; the table grows with fan-in to this power.
    pub closure_depth: u32,
    /// The embedding provider (default: the built-in local model, loaded on first use).
    pub embeddings: crate::embed::EmbeddingProvider,
    /// Embed new and changed chunks and memories in the background after each write that
    /// leaves some without a vector, and at open for whatever an earlier process left (a
    /// cancelled run, a new model) (default off: a run keeps the cores busy).
    pub auto_embed: bool,
    /// Which code vectors embedding runs give: chunks and their parts (default: every
    /// definition of a grouped chunk gets its own vector, +55-100% texts on code of many small
    /// definitions), or chunks only (for paid embedding APIs; hits then name no definition
    /// inside a grouped chunk).
    pub chunk_vectors: crate::vector::ChunkVectors,
    /// Stage 3 of recall: the reranker of the fused top items (default none).
    pub reranker: crate::retrieval::rerank::RerankerProvider,
    /// Sync with a libSQL server (default none: the file stays on this device).
    pub sync: Option<crate::sync::SyncOptions>,
    /// Most bytes one project's in-process graph index may hold (default 256 MiB, about
    /// 190,000 nodes of a code graph). A larger graph is answered from the tables, as is
    /// every graph read with 0.
    pub graph_index_max_bytes: u64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            store: StoreOptions::default(),
            limits: Limits::default(),
            clock: Arc::new(SystemClock),
            closure_depth: crate::graph::DEFAULT_CLOSURE_DEPTH,
            embeddings: crate::embed::EmbeddingProvider::default(),
            auto_embed: false,
            chunk_vectors: crate::vector::ChunkVectors::WithParts,
            reranker: crate::retrieval::rerank::RerankerProvider::default(),
            sync: None,
            graph_index_max_bytes: crate::graph::served::DEFAULT_MAX_BYTES,
        }
    }
}

impl EngineOptions {
    /// Whether an engine opened with these options embeds in the background (`auto_embed`
    /// with embeddings not disabled).
    pub(crate) fn runs_auto_embed(&self) -> bool {
        self.auto_embed && !matches!(self.embeddings, crate::embed::EmbeddingProvider::Disabled)
    }

    /// Sets the busy timeout.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.store.busy_timeout = timeout;
        self
    }
}

/// A database file opened by this process.
#[derive(Debug)]
pub struct Engine {
    path: PathBuf,
    pub(crate) store: Store,
    pub(crate) limits: Limits,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) closure_depth: u32,
    pub(crate) embeddings: crate::embed::EmbeddingService,
    /// In-memory vector indexes, kept current from the vector change logs.
    pub(crate) vectors: crate::vector::VectorIndexes,
    /// In-process graph indexes, kept current from the graph change logs (issue 38).
    pub(crate) graphs: crate::graph::served::GraphIndexes,
    /// Background embedding runs, when the engine was opened with `auto_embed`.
    pub(crate) auto_embed: Option<crate::vector::AutoEmbed>,
    /// Which code vectors embedding runs give.
    pub(crate) chunk_vectors: crate::vector::ChunkVectors,
    /// Stage 3 of recall, when configured.
    pub(crate) reranker: crate::retrieval::rerank::RerankerProvider,
    /// The indexed terms, for recall's typo tolerance (built on first need).
    pub(crate) vocabulary: crate::retrieval::typo::VocabularyCache,
    /// The memories' terms alone, for memory search's typo tolerance.
    pub(crate) memory_vocabulary: crate::retrieval::typo::VocabularyCache,
    /// Per project, held while an embedding run is going (runs queue behind each other).
    embed_runs: Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Projects with an index run in progress.
    indexing: Mutex<HashSet<String>>,
    /// Observed agent sessions not yet finalized (shared by every handle and thread).
    pub(crate) sessions: crate::observer::Sessions,
    /// Sync with a libSQL server, when configured.
    pub(crate) sync: Option<Arc<crate::sync::SyncService>>,
    /// Memories written but not yet scanned for contradictions (the scan itself is the
    /// lifecycle's: the engine keeps the queue and its schedule, not the policy).
    pub(crate) after_write: after_write::AfterWrite,
    /// The keyword indexes' segment merge after bulk writes (one task at a time).
    pub(crate) fts_merge: fts_merge::FtsMerge,
    /// The runtime the engine was opened on, where its background work runs (never a
    /// caller's own runtime: a watcher thread's is dropped, and waited for, when it stops).
    pub(crate) runtime: Option<tokio::runtime::Handle>,
    /// The open handles, and when the files are released.
    pub(crate) lifetime: Arc<lifetime::Lifetime>,
    /// The engine's own hold on its files. Last: fields drop in order, so it ends after the
    /// store's connections have closed.
    _hold: lifetime::Hold,
}

/// Held while a project is being indexed; dropping it lets the next run start.
pub(crate) struct IndexingGuard<'a> {
    engine: &'a Engine,
    project_id: String,
}

impl Drop for IndexingGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut running) = self.engine.indexing.lock() {
            running.remove(&self.project_id);
        }
    }
}

impl Engine {
    /// Claims the right to index `project_id`; fails with `ENGRAM_CONFLICT` while another run
    /// (from any handle or thread) is in progress.
    pub(crate) fn start_indexing(&self, project_id: &str) -> Result<IndexingGuard<'_>> {
        let mut running = self
            .indexing
            .lock()
            .map_err(|_| Error::Internal("indexing registry poisoned".into()))?;
        if !running.insert(project_id.to_owned()) {
            return Err(Error::Conflict(format!(
                "project {project_id:?} is already being indexed"
            )));
        }
        Ok(IndexingGuard {
            engine: self,
            project_id: project_id.to_owned(),
        })
    }

    /// Like [`Engine::start_indexing`], but waits (checking `cancel`) while another run holds
    /// the project: file-event updates queue behind a full index instead of failing.
    pub(crate) async fn wait_indexing(
        &self,
        project_id: &str,
        cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<IndexingGuard<'_>> {
        loop {
            match self.start_indexing(project_id) {
                Err(Error::Conflict(_)) => {
                    if cancel.load(std::sync::atomic::Ordering::Relaxed) {
                        return Err(Error::Aborted);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                other => return other,
            }
        }
    }

    /// The lock an embedding run of `project_id` holds, so that two runs never embed the same
    /// items twice.
    pub(crate) fn embed_run_lock(&self, project_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut runs = self.embed_runs.lock().unwrap_or_else(|e| e.into_inner());
        runs.entry(project_id.to_owned()).or_default().clone()
    }

    /// Returns the process's engine for `path`, creating it (and the file) if none is open.
    pub async fn open(path: &Path, options: EngineOptions) -> Result<Arc<Engine>> {
        registry::open(path, options).await
    }

    async fn create(path: PathBuf, options: EngineOptions) -> Result<Engine> {
        if !(1..=crate::graph::MAX_CLOSURE_DEPTH).contains(&options.closure_depth) {
            return Err(Error::invalid(format!(
                "closureDepth must be within 1..={}, got {}",
                crate::graph::MAX_CLOSURE_DEPTH,
                options.closure_depth
            )));
        }
        if crate::sync::remote::url_of(&path).is_some() {
            let sync = options
                .sync
                .as_ref()
                .expect("a remote key comes from sync options");
            let store = crate::sync::remote::open_store(sync, &options.store).await?;
            return Ok(Engine::assemble(path, store, None, options));
        }
        if crate::sync::is_replica_file(&path) {
            return Err(Error::SyncConfig(format!(
                "{} is an embedded replica that engram manages; open the database file it \
                 belongs to, with the same sync options",
                path.display()
            )));
        }
        let store = Store::open(&path, &options.store).await?;
        let sync = match &options.sync {
            Some(sync) => Some(Arc::new(
                crate::sync::SyncService::setup(&store, &path, sync, options.closure_depth).await?,
            )),
            None => None,
        };
        Ok(Engine::assemble(path, store, sync, options))
    }

    fn assemble(
        path: PathBuf,
        store: Store,
        sync: Option<Arc<crate::sync::SyncService>>,
        options: EngineOptions,
    ) -> Engine {
        let auto_embed = options
            .runs_auto_embed()
            .then(|| crate::vector::AutoEmbed::new(tokio::runtime::Handle::try_current().ok()));
        let runtime = tokio::runtime::Handle::try_current().ok();
        let (lifetime, hold) = lifetime::Lifetime::new(path.clone());
        Engine {
            path,
            store,
            limits: options.limits,
            clock: options.clock,
            closure_depth: options.closure_depth,
            embeddings: crate::embed::EmbeddingService::new(options.embeddings),
            vectors: crate::vector::VectorIndexes::default(),
            graphs: crate::graph::served::GraphIndexes::new(options.graph_index_max_bytes),
            auto_embed,
            chunk_vectors: options.chunk_vectors,
            reranker: options.reranker,
            vocabulary: Default::default(),
            memory_vocabulary: crate::retrieval::typo::VocabularyCache::new(
                crate::retrieval::typo::Terms::Memories,
            ),
            embed_runs: Mutex::default(),
            indexing: Mutex::new(HashSet::new()),
            sessions: Default::default(),
            sync,
            after_write: Default::default(),
            fts_merge: Default::default(),
            runtime,
            lifetime,
            _hold: hold,
        }
    }

    /// The canonical path of the database file (for a remote-only engine, `remote:` and the
    /// server URL).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The server a remote-only engine reads and writes (`None` for a file).
    pub fn remote_url(&self) -> Option<&str> {
        self.store
            .is_remote()
            .then(|| crate::sync::remote::url_of(&self.path))
            .flatten()
    }

    /// Schema versions after opening.
    pub fn schema(&self) -> &[SchemaStatus] {
        self.store.schema()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        tracing::debug!(path = %self.path.display(), "closed the engine (no handle or call holds it)");
        // The loop drops the replica and ends its hold; the registry forgets this engine when
        // the last hold ends (see `lifetime`).
        if let Some(sync) = &self.sync {
            sync.stop();
        }
    }
}
