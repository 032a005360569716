//! The indexer: walks the project root (honouring `.gitignore`, the default and configured
//! ignore lists and the size cap), skips files whose size and mtime or content hash are
//! unchanged, analyses the rest on worker threads, and writes them in batched transactions
//! while parsing goes on. Files gone from disk are removed; calls and base types are resolved
//! once at the end.
//!
//! Cancellation: the caller's flag is checked between files, inside long parses and between
//! batches. Every batch is committed whole, so an aborted run leaves a consistent index that
//! the next run completes (finished files are then unchanged and skipped).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::analyze::{AnalyzeOptions, FileIssue};
use super::parse_pool::{self, InFlight, Job};
use super::store::{self, FileRecord};
use super::walk::walk;
use crate::clock::Clock;
use crate::error::{DbContext, Error, Result};
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
}

const MAX_PROBLEMS: usize = 1000;
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
}

/// Indexes the project under `ctx.root`.
pub(crate) async fn index(
    ctx: &IndexCtx<'_>,
    options: &IndexOptions,
    on_progress: &(dyn Fn(&IndexProgress) + Send + Sync),
    cancel: &Arc<AtomicBool>,
) -> Result<IndexSummary> {
    let started = Instant::now();
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

    let mut known = {
        let reader = ctx.store.reader().await;
        store::known_files(&reader, ctx.project_id).await?
    };
    let mut summary = IndexSummary {
        files_seen: walked.len() as u64,
        ..IndexSummary::default()
    };
    let mut jobs = Vec::new();
    for file in walked {
        let previous = known.remove(&file.rel);
        // Same size and mtime as indexed (or as skipped): not read again, as git does it.
        let same_stat = previous.as_ref().is_some_and(|k| {
            k.size_bytes == file.size as i64
                && k.mtime_ns == file.mtime_ns
                && file.mtime_ns.is_some()
                && !(k.too_large && file.size <= options.max_file_bytes)
        });
        if same_stat {
            summary.files_unchanged += 1;
        } else {
            jobs.push(Job {
                file,
                known: previous,
            });
        }
    }
    let removed: Vec<i64> = known.values().map(|k| k.id).collect();
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
    let mut rx = parse_pool::spawn(jobs, Arc::new(project), options, &in_flight, &stop);
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
            batch_chunks += parsed.record.analysis.chunks.len();
            batch_cost += parsed.cost;
            batch.push(parsed.record);
            let full = batch.len() >= BATCH_FILES || batch_chunks >= BATCH_CHUNKS;
            if full {
                write(ctx, &mut summary, &mut batch).await?;
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
        write(ctx, &mut summary, &mut batch).await
    }
    .await;
    // Raising `stop` (and dropping the receiver) ends the workers after their current file.
    stop.store(true, Ordering::Relaxed);
    drop(rx);
    result?;

    if !removed.is_empty() {
        let writer = ctx.store.writer().await;
        let tx = begin_write(&writer).await?;
        store::remove_files(&tx, &removed).await?;
        tx.commit().await.ctx("committing removals")?;
        summary.files_removed = removed.len() as u64;
    }
    on_progress(&IndexProgress {
        phase: IndexPhase::Resolving,
        files_done: done,
        files_total: total,
    });
    if summary.files_indexed > 0 || summary.files_removed > 0 {
        let writer = ctx.store.writer().await;
        store::resolve_symbols(&writer, ctx.project_id, None).await?;
    }
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
        if summary.problems.len() < MAX_PROBLEMS {
            summary.problems.push(FileProblem {
                path: record.path.clone(),
                issue,
            });
        }
    }
}

async fn write(
    ctx: &IndexCtx<'_>,
    summary: &mut IndexSummary,
    batch: &mut Vec<FileRecord>,
) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let now = ctx.clock.now_ms();
    let writer = ctx.store.writer().await;
    let tx = begin_write(&writer).await?;
    let written = store::write_batch(&tx, ctx.project_id, batch, now).await?;
    tx.commit().await.ctx("committing an index batch")?;
    summary.chunks += written.chunks;
    summary.symbols += written.symbols;
    summary.references += written.references;
    batch.clear();
    Ok(())
}
