//! The indexer: walks the project root (honouring `.gitignore`, the default and configured
//! ignore lists and the size cap), skips files whose size and mtime or content hash are
//! unchanged, analyses the rest on worker threads, and writes them in batched transactions
//! while parsing goes on. Files gone from disk are removed; calls and base types are resolved
//! once at the end, and the graph's structural layer is synced from what changed.
//!
//! Cancellation: the caller's flag is checked between files, inside long parses and between
//! batches. Every batch is committed whole, so an aborted run leaves a consistent index that
//! the next run completes (finished files are then unchanged and skipped).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::analyze::{AnalyzeOptions, FileIssue};
use super::parse_pool::{self, InFlight, Job};
use super::resolve::ProjectFiles;
use super::store::{self, FileRecord, KnownFile, ResolveScope};
use super::walk::{scan_paths, walk, PathRules, Walked};
use crate::clock::Clock;
use crate::error::{DbContext, Error, Result};
use crate::graph::code_layer::{self, SyncScope};
use crate::graph::GraphSyncSummary;
use crate::memory;
use crate::store::{begin_write, Store};

/// Ignored in every project unless `use_default_ignores` is off (gitignore syntax).
pub const DEFAULT_IGNORES: &[&str] = &[
    "node_modules/",
    "target/",
    "dist/",
    "build/",
    "out/",
    "coverage/",
    ".next/",
    "vendor/",
    "__pycache__/",
    ".venv/",
    "*.min.js",
    "*.map",
    "package-lock.json",
    "pnpm-lock.yaml",
];

/// Settings for one index run.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// Extra ignore patterns (gitignore syntax), on top of `.gitignore` files.
    pub ignore: Vec<String>,
    /// Whether [`DEFAULT_IGNORES`] apply.
    pub use_default_ignores: bool,
    /// Files larger than this are recorded as skipped (`too_large`), never read.
    pub max_file_bytes: u64,
    /// Parser threads (0: one per core).
    pub threads: usize,
    /// Chunk budgets and parse limits.
    pub analyze: AnalyzeOptions,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            ignore: Vec::new(),
            use_default_ignores: true,
            max_file_bytes: 1024 * 1024,
            threads: 0,
            analyze: AnalyzeOptions::default(),
        }
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexPhase {
    /// Walking the project tree.
    Scanning,
    /// Parsing and writing files.
    Indexing,
    /// Resolving calls and base types across files.
    Resolving,
    /// Finished.
    Done,
}

impl IndexPhase {
    /// The name reported to JS.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexPhase::Scanning => "scanning",
            IndexPhase::Indexing => "indexing",
            IndexPhase::Resolving => "resolving",
            IndexPhase::Done => "done",
        }
    }
}

/// A progress report.
#[derive(Debug, Clone)]
pub struct IndexProgress {
    /// Current phase.
    pub phase: IndexPhase,
    /// Files handled so far (including unchanged ones).
    pub files_done: u64,
    /// Files found by the walk.
    pub files_total: u64,
}

/// A file that was skipped or degraded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    /// Project-relative path.
    pub path: String,
    /// What happened.
    pub issue: FileIssue,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct IndexSummary {
    /// Files the walk found (after ignores).
    pub files_seen: u64,
    /// Files parsed and written.
    pub files_indexed: u64,
    /// Files whose content was already indexed.
    pub files_unchanged: u64,
    /// Files recorded as skipped (binary, too large, unreadable).
    pub files_skipped: u64,
    /// Files removed from the index (deleted or now ignored).
    pub files_removed: u64,
    /// Chunks written.
    pub chunks: u64,
    /// Definitions written.
    pub symbols: u64,
    /// References written.
    pub references: u64,
    /// Lines in the files written.
    pub lines: u64,
    /// Bytes of the files written.
    pub bytes: u64,
    /// Wall time.
    pub duration: Duration,
    /// Skipped and degraded files (first 1,000).
    pub problems: Vec<FileProblem>,
    /// Paths read and written (skipped ones included), first 1,000 in commit order.
    pub indexed_paths: Vec<String>,
    /// Paths removed from the index, first 1,000, sorted.
    pub removed_paths: Vec<String>,
    /// What the structural graph sync changed.
    pub graph: GraphSyncSummary,
    /// Memories on files this run found edited more than 30 days after the memory was last
    /// written, flagged for review (`memory::review`).
    pub memories_flagged_for_review: u64,
    /// What the git staleness pass after a full run found (`lifecycle::git_drift`; the
    /// default when the run was partial or the project is in no repository).
    pub git: super::git::GitStaleness,
}

/// Problems and paths listed in a summary, at most.
const MAX_LISTED: usize = 1000;
/// A batch is written when it holds this many files...
const BATCH_FILES: usize = 256;
/// ...or this many chunks.
const BATCH_CHUNKS: usize = 4096;
/// Source bytes read but not yet committed, at most (files over it go through one at a time).
/// Parsing runs ahead of a batch write by up to this much.
const IN_FLIGHT_BYTES: u64 = 64 * 1024 * 1024;

/// Everything a run needs from the handle.
pub(crate) struct IndexCtx<'a> {
    pub store: &'a Store,
    pub clock: &'a dyn Clock,
    pub project_id: &'a str,
    pub root: &'a Path,
    /// Depth cap of the graph's closure table.
    pub closure_depth: u32,
}

/// Indexes the project under `ctx.root`.
pub(crate) async fn index(
    ctx: &IndexCtx<'_>,
    options: &IndexOptions,
    on_progress: &(dyn Fn(&IndexProgress) + Send + Sync),
    cancel: &Arc<AtomicBool>,
) -> Result<IndexSummary> {
    let started = Instant::now();
    tracing::debug!(
        root = %ctx.root.display(),
        project = ctx.project_id,
        "index run started"
    );
    let result = index_all(ctx, options, on_progress, cancel, started).await;
    log_run("index run", ctx, &result, started, tracing::Level::INFO);
    result
}

/// [`index`] without its log lines.
async fn index_all(
    ctx: &IndexCtx<'_>,
    options: &IndexOptions,
    on_progress: &(dyn Fn(&IndexProgress) + Send + Sync),
    cancel: &Arc<AtomicBool>,
    started: Instant,
) -> Result<IndexSummary> {
    on_progress(&IndexProgress {
        phase: IndexPhase::Scanning,
        files_done: 0,
        files_total: 0,
    });
    let root = ctx.root.to_path_buf();
    let walk_options = options.clone();
    let (walked, project) = tokio::task::spawn_blocking(move || walk(&root, &walk_options))
        .await
        .map_err(|e| Error::Internal(format!("walk panicked: {e}")))??;
    if cancel.load(Ordering::Relaxed) {
        return Err(Error::Aborted);
    }
    let known = {
        let reader = ctx.store.reader().await;
        store::known_files(&reader, ctx.project_id, None).await?
    };
    let plan = Plan::new(walked, known, project, options);
    run(ctx, options, plan, on_progress, cancel, started).await
}

/// Re-indexes the given project-relative paths (after file events): files are re-read,
/// directories walked, paths gone from disk (or now ignored) removed with everything under
/// them. Paths outside the root are ignored.
pub(crate) async fn update_paths(
    ctx: &IndexCtx<'_>,
    options: &IndexOptions,
    rules: &Arc<PathRules>,
    paths: &[String],
    cancel: &Arc<AtomicBool>,
) -> Result<IndexSummary> {
    let started = Instant::now();
    tracing::debug!(
        root = %ctx.root.display(),
        project = ctx.project_id,
        paths = paths.len(),
        "index update started"
    );
    let result = update_listed(ctx, options, rules, paths, cancel, started).await;
    // Watch updates are the steady state: debug only.
    log_run("index update", ctx, &result, started, tracing::Level::DEBUG);
    result
}

/// [`update_paths`] without its log lines.
async fn update_listed(
    ctx: &IndexCtx<'_>,
    options: &IndexOptions,
    rules: &Arc<PathRules>,
    paths: &[String],
    cancel: &Arc<AtomicBool>,
    started: Instant,
) -> Result<IndexSummary> {
    let root = ctx.root.to_path_buf();
    let (rules_for_scan, paths_for_scan) = (rules.clone(), paths.to_vec());
    let scan =
        tokio::task::spawn_blocking(move || scan_paths(&root, &rules_for_scan, &paths_for_scan))
            .await
            .map_err(|e| Error::Internal(format!("scan panicked: {e}")))?;
    let (known, project) = {
        let reader = ctx.store.reader().await;
        let known = store::known_files(&reader, ctx.project_id, Some(&scan.prefixes)).await?;
        let mut project = store::project_files(&reader, ctx.project_id).await?;
        for file in &scan.files {
            project.insert(&file.rel);
        }
        for (rel, text) in &scan.go_mods {
            project.add_go_mod(rel, text);
        }
        (known, project)
    };
    // Known files under the event paths that the scan did not find are gone (or ignored now).
    let plan = Plan::new(scan.files, known, project, options);
    run(ctx, options, plan, &|_| {}, cancel, started).await
}

/// Logs how a run ended: `level` when it finished (with what it did), `debug` when it was
/// cancelled, `warn` when it failed.
fn log_run(
    what: &'static str,
    ctx: &IndexCtx<'_>,
    result: &Result<IndexSummary>,
    started: Instant,
    level: tracing::Level,
) {
    let root = ctx.root.display();
    let ms = crate::log::ms(started.elapsed());
    match result {
        Ok(s) => {
            macro_rules! finished {
                ($level:expr) => {
                    tracing::event!(
                        $level,
                        root = %root,
                        project = ctx.project_id,
                        files_seen = s.files_seen,
                        files_changed = s.files_indexed,
                        files_unchanged = s.files_unchanged,
                        files_failed = s.files_skipped,
                        files_removed = s.files_removed,
                        problems = s.problems.len() as u64,
                        chunks = s.chunks,
                        ms,
                        "{what} finished"
                    )
                };
            }
            if level == tracing::Level::INFO {
                finished!(tracing::Level::INFO);
            } else {
                finished!(tracing::Level::DEBUG);
            }
        }
        Err(Error::Aborted) => {
            tracing::debug!(root = %root, project = ctx.project_id, ms, "{what} cancelled");
        }
        Err(e) => {
            tracing::warn!(
                root = %root,
                project = ctx.project_id,
                code = e.code(),
                error = %e,
                ms,
                "{what} failed"
            );
        }
    }
}

/// What a run will do: the files to read and the file ids to remove.
struct Plan {
    jobs: Vec<Job>,
    /// `(file id, path)`.
    removed: Vec<(i64, String)>,
    project: ProjectFiles,
    summary: IndexSummary,
}

impl Plan {
    /// Files found on disk against what the index knows of that part of the tree: changed
    /// files are read, known files not found are removed.
    fn new(
        found: Vec<Walked>,
        mut known: HashMap<String, KnownFile>,
        project: ProjectFiles,
        options: &IndexOptions,
    ) -> Plan {
        let mut plan = Plan {
            jobs: Vec::new(),
            removed: Vec::new(),
            project,
            summary: IndexSummary {
                files_seen: found.len() as u64,
                ..IndexSummary::default()
            },
        };
        for file in found {
            let previous = known.remove(&file.rel);
            plan.add(file, previous, options);
        }
        plan.removed = known.into_iter().map(|(path, k)| (k.id, path)).collect();
        plan
    }

    /// Queues `file` unless its size and mtime are those indexed (or skipped): then it is not
    /// read again, as git does it.
    fn add(&mut self, file: Walked, previous: Option<KnownFile>, options: &IndexOptions) {
        let same_stat = previous.as_ref().is_some_and(|k| {
            k.size_bytes == file.size as i64
                && k.mtime_ns == file.mtime_ns
                && file.mtime_ns.is_some()
                && !(k.too_large && file.size <= options.max_file_bytes)
        });
        if same_stat {
            self.summary.files_unchanged += 1;
        } else {
            self.jobs.push(Job {
                file,
                known: previous,
            });
        }
    }
}

/// Carries out a plan: marks changed files stale, parses on the pool, writes in batches,
/// removes, re-resolves the names that changed.
async fn run(
    ctx: &IndexCtx<'_>,
    options: &IndexOptions,
    plan: Plan,
    on_progress: &(dyn Fn(&IndexProgress) + Send + Sync),
    cancel: &Arc<AtomicBool>,
    started: Instant,
) -> Result<IndexSummary> {
    let Plan {
        jobs,
        removed,
        project,
        mut summary,
    } = plan;
    let now = ctx.clock.now_ms();
    {
        let changed: Vec<i64> = jobs
            .iter()
            .filter_map(|j| j.known.as_ref().map(|k| k.id))
            .collect();
        let writer = ctx.store.writer().await;
        store::mark_stale(&writer, &changed, now).await?;
    }

    let total = summary.files_seen;
    let mut done = summary.files_unchanged;
    on_progress(&IndexProgress {
        phase: IndexPhase::Indexing,
        files_done: done,
        files_total: total,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let in_flight = InFlight::new(IN_FLIGHT_BYTES);
    let project = Arc::new(project);
    let mut rx = parse_pool::spawn(jobs, project.clone(), options, &in_flight, &stop);
    // What committed batches changed: re-resolved and synced into the graph even if the run
    // stops early; and the graph syncs that runs killed before they ended still owe.
    let mut touched = Touched {
        run: super::pending::new_run_id(now),
        project: Some(project.clone()),
        heal: {
            let reader = ctx.store.reader().await;
            super::pending::left_behind(&reader, ctx.project_id).await?
        },
        ..Touched::default()
    };
    if !touched.heal.is_empty() {
        tracing::info!(
            project = ctx.project_id,
            runs = touched.heal.len(),
            "an earlier index run ended before its graph sync: resolving and syncing everything"
        );
    }
    let result = async {
        let mut batch: Vec<FileRecord> = Vec::new();
        let (mut batch_chunks, mut batch_cost) = (0, 0);
        let mut last_report = Instant::now();
        loop {
            let next = tokio::select! {
                next = rx.recv() => next,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {
                    if cancel.load(Ordering::Relaxed) { return Err(Error::Aborted); }
                    continue;
                }
            };
            if cancel.load(Ordering::Relaxed) {
                return Err(Error::Aborted);
            }
            let Some(parsed) = next else { break };
            done += 1;
            tally(&mut summary, &parsed.record);
            if !parsed.record.unchanged {
                touched.add_analysis(&parsed.record.path, &parsed.record.analysis);
            }
            batch_chunks += parsed.record.analysis.chunks.len();
            batch_cost += parsed.cost;
            batch.push(parsed.record);
            // Also full at half the in-flight budget: the budget is only given back by a
            // write, so a batch must never be able to hold all of it.
            let full = batch.len() >= BATCH_FILES
                || batch_chunks >= BATCH_CHUNKS
                || batch_cost >= IN_FLIGHT_BYTES / 2;
            if full {
                write(ctx, &mut summary, &mut batch, &mut touched).await?;
                in_flight.release(batch_cost);
                (batch_chunks, batch_cost) = (0, 0);
            }
            // Reported after each commit too, so `files_done` always includes committed files.
            if full || last_report.elapsed() >= Duration::from_millis(100) {
                last_report = Instant::now();
                on_progress(&IndexProgress {
                    phase: IndexPhase::Indexing,
                    files_done: done,
                    files_total: total,
                });
            }
        }
        write(ctx, &mut summary, &mut batch, &mut touched).await?;
        Ok(())
    }
    .await;
    // Raising `stop` (and dropping the receiver) ends the workers after their current file.
    stop.store(true, Ordering::Relaxed);
    drop(rx);
    if let Err(e) = result {
        // What was committed stays: resolve its references and sync the graph before
        // reporting the stop.
        finish(ctx, touched).await?;
        return Err(e);
    }

    if !removed.is_empty() {
        let ids: Vec<i64> = removed.iter().map(|(id, _)| *id).collect();
        let writer = ctx.store.writer().await;
        let tx = begin_write(&writer).await?;
        if !touched.wide {
            touched.add_replaced(store::symbol_names_of(&tx, &ids).await?);
        }
        touched.add_paths(removed.iter().map(|(_, path)| path.clone()));
        store::remove_files(&tx, &ids).await?;
        touched.files_came_or_went = true;
        touched
            .removed
            .extend(removed.iter().map(|(_, path)| path.clone()));
        super::pending::mark(&tx, ctx.project_id, &touched.run, ctx.clock.now_ms()).await?;
        tx.commit().await.ctx("committing removals")?;
        summary.files_removed = removed.len() as u64;
        summary.removed_paths = removed
            .into_iter()
            .map(|(_, path)| path)
            .take(MAX_LISTED)
            .collect();
        summary.removed_paths.sort();
    }
    on_progress(&IndexProgress {
        phase: IndexPhase::Resolving,
        files_done: done,
        files_total: total,
    });
    summary.graph = finish(ctx, touched).await?;
    summary.duration = started.elapsed();
    on_progress(&IndexProgress {
        phase: IndexPhase::Done,
        files_done: done,
        files_total: total,
    });
    Ok(summary)
}

fn tally(summary: &mut IndexSummary, record: &FileRecord) {
    let a = &record.analysis;
    if record.unchanged {
        summary.files_unchanged += 1;
        return;
    }
    if a.issues.iter().any(|i| i.skips_file()) {
        summary.files_skipped += 1;
    } else {
        summary.files_indexed += 1;
        summary.lines += u64::from(a.line_count);
        summary.bytes += record.size_bytes as u64;
    }
    for &issue in &a.issues {
        tracing::debug!(
            path = %record.path,
            issue = issue.as_str(),
            skipped = issue.skips_file(),
            "file indexed with a problem"
        );
        if summary.problems.len() < MAX_LISTED {
            summary.problems.push(FileProblem {
                path: record.path.clone(),
                issue,
            });
        }
    }
}

/// What the committed part of a run changed.
#[derive(Default)]
struct Touched {
    /// Names defined by changed files, before and after: their unresolved references
    /// elsewhere are resolved again (those into replaced symbol rows, which the foreign key
    /// set to NULL). The changed files' own references are found by path.
    names: HashSet<String>,
    /// Definitions `(path, name, qualified name)` of changed files, counted +1 after and -1
    /// before. Resolution by name elsewhere, and the graph key it leads to, can only move for
    /// names with a count that is not zero at the end: an edit that keeps a file's
    /// definitions leaves every graph edge into it alone, while a rename or a definition
    /// moved to another file does not cancel out.
    definitions: HashMap<(String, String, String), i64>,
    /// Files written or removed.
    paths: Vec<String>,
    /// This run's id in `code_index_pending` (see `code::pending`).
    run: String,
    /// Runs that died before their graph sync, found at this run's start: this run resolves
    /// and syncs everything.
    heal: Vec<String>,
    /// Whether files were added or removed: imports elsewhere may now find (or lose) them.
    files_came_or_went: bool,
    /// The project's files, which imports resolve against.
    project: Option<Arc<ProjectFiles>>,
    /// Files removed (still in `project`, which was made before the removals).
    removed: Vec<String>,
    /// More than [`MAX_FILTER_NAMES`] files written: resolution and the graph sync will cover
    /// the whole project, so `names` and `definitions` are no longer needed nor collected
    /// (through a cold index of 6.5M lines they grew to ~90 MB).
    wide: bool,
}

impl Touched {
    fn add_analysis(&mut self, path: &str, analysis: &crate::code::analyze::FileAnalysis) {
        if self.wide {
            return;
        }
        self.names.extend(store::names_defined_in(analysis));
        for d in &analysis.definitions {
            *self
                .definitions
                .entry((path.to_owned(), d.name.clone(), d.qualified_name.clone()))
                .or_default() += 1;
        }
    }

    fn add_replaced(&mut self, old: Vec<(String, String, String)>) {
        if self.wide {
            return;
        }
        for (path, name, qualified_name) in old {
            self.names.insert(name.clone());
            *self
                .definitions
                .entry((path, name, qualified_name))
                .or_default() -= 1;
        }
    }

    /// Records files written or removed.
    fn add_paths(&mut self, paths: impl IntoIterator<Item = String>) {
        self.paths.extend(paths);
        if self.paths.len() > MAX_FILTER_NAMES && !self.wide {
            self.wide = true;
            self.names = HashSet::new();
            self.definitions = HashMap::new();
        }
    }

    /// Names whose definitions changed in number or qualified name.
    fn changed_definitions(&self) -> Vec<String> {
        let changed: BTreeSet<&String> = self
            .definitions
            .iter()
            .filter(|(_, count)| **count != 0)
            .map(|((_, name, _), _)| name)
            .collect();
        changed.into_iter().cloned().collect()
    }
}

/// Past this many names one pass over every reference is cheaper than filtering by name.
const MAX_FILTER_NAMES: usize = 5_000;

/// Resolves the references the run touched, then syncs the graph's structural layer.
async fn finish(ctx: &IndexCtx<'_>, mut touched: Touched) -> Result<GraphSyncSummary> {
    let healing = !touched.heal.is_empty();
    if touched.paths.is_empty() && touched.names.is_empty() && !healing {
        return Ok(GraphSyncSummary::default());
    }
    let defined = touched.changed_definitions();
    let written = touched.paths.clone();
    let writer = ctx.store.writer().await;
    if healing || touched.files_came_or_went {
        if let Some(project) = touched.project.as_deref() {
            let mut project = project.clone();
            for path in &touched.removed {
                project.remove(path);
            }
            let importers = store::re_resolve_imports(&writer, ctx.project_id, &project).await?;
            let known: HashSet<String> = touched.paths.iter().cloned().collect();
            touched
                .paths
                .extend(importers.into_iter().filter(|p| !known.contains(p)));
        }
    }
    if healing || touched.names.len() > MAX_FILTER_NAMES || written.len() > MAX_FILTER_NAMES {
        store::resolve_symbols(&writer, ctx.project_id, ResolveScope::All).await?;
    } else if !touched.names.is_empty() || !written.is_empty() {
        let names: Vec<String> = touched.names.into_iter().collect();
        let scope = ResolveScope::Changed {
            written: &written,
            defined: &names,
            redefined: &defined,
        };
        store::resolve_symbols(&writer, ctx.project_id, scope).await?;
    }
    let scope =
        if healing || defined.len() > MAX_FILTER_NAMES || touched.paths.len() > MAX_FILTER_NAMES {
            SyncScope::All
        } else {
            SyncScope::Files {
                paths: &touched.paths,
                defined_names: &defined,
            }
        };
    let now = ctx.clock.now_ms();
    let started = std::time::Instant::now();
    let tx = begin_write(&writer).await?;
    let mut synced = code_layer::sync(&tx, ctx.project_id, ctx.closure_depth, now, scope).await?;
    // Authored edges synced from another device before this one had indexed their code ends.
    crate::graph::knowledge::replay_pending_edges(&tx, ctx.project_id, ctx.closure_depth, now)
        .await?;
    let mut settled = touched.heal;
    settled.push(touched.run);
    super::pending::clear(&tx, ctx.project_id, &settled).await?;
    tx.commit().await.ctx("committing the graph sync")?;
    crate::graph::served::trim_logs(&writer).await?;
    synced.duration = started.elapsed();
    Ok(synced)
}

/// Writes a batch in one transaction; records what it replaced in `touched`.
async fn write(
    ctx: &IndexCtx<'_>,
    summary: &mut IndexSummary,
    batch: &mut Vec<FileRecord>,
    touched: &mut Touched,
) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let now = ctx.clock.now_ms();
    let writer = ctx.store.writer().await;
    let tx = begin_write(&writer).await?;
    let replaced: Vec<i64> = batch
        .iter()
        .filter(|f| !f.unchanged)
        .filter_map(|f| f.existing_id)
        .collect();
    if !touched.wide {
        touched.add_replaced(store::symbol_names_of(&tx, &replaced).await?);
    }
    let written = store::write_batch(&tx, ctx.project_id, batch, now).await?;
    // Files whose content changed since their last index (skipped ones have no content to
    // compare, files read again for a schema upgrade none known): memories on them written
    // long before the edit go back to review.
    let edits: Vec<(&str, i64)> = batch
        .iter()
        .filter(|f| !f.unchanged && !f.reread_after_upgrade)
        .filter(|f| f.existing_id.is_some() && f.content_hash.is_some())
        .filter_map(|f| Some((f.path.as_str(), f.mtime_ns? / 1_000_000)))
        .collect();
    summary.memories_flagged_for_review +=
        memory::review::flag_after_late_edits(&tx, ctx.project_id, &edits).await?;
    super::pending::mark(&tx, ctx.project_id, &touched.run, now).await?;
    tx.commit().await.ctx("committing an index batch")?;
    summary.chunks += written.chunks;
    summary.symbols += written.symbols;
    summary.references += written.references;
    for file in batch.iter().filter(|f| !f.unchanged) {
        touched.files_came_or_went |= file.existing_id.is_none();
        touched.add_paths([file.path.clone()]);
        if summary.indexed_paths.len() < MAX_LISTED {
            summary.indexed_paths.push(file.path.clone());
        }
    }
    batch.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Touched, MAX_FILTER_NAMES};

    /// Past [`MAX_FILTER_NAMES`] files a run resolves and syncs everything, so it stops
    /// holding the names and definitions that would have narrowed that work.
    #[test]
    fn a_wide_run_stops_collecting_names() {
        let mut touched = Touched::default();
        let definition = || vec![("a.py".to_owned(), "f".to_owned(), "f".to_owned())];
        touched.add_replaced(definition());
        touched.add_paths((0..MAX_FILTER_NAMES).map(|i| format!("{i}.py")));
        assert!(!touched.wide);
        assert_eq!(touched.changed_definitions(), vec!["f".to_owned()]);
        touched.add_paths(["last.py".to_owned()]);
        assert!(touched.wide);
        touched.add_replaced(definition());
        assert!(touched.names.is_empty() && touched.definitions.is_empty());
        assert_eq!(touched.paths.len(), MAX_FILTER_NAMES + 1);
    }
}
