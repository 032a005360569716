//! The indexer: walks the project root (honouring `.gitignore`, the default and configured
//! ignore lists and the size cap), skips files whose size and mtime or content hash are
//! unchanged, analyses the rest on worker threads, and writes them in batched transactions
//! while parsing goes on. Files gone from disk are removed; calls and base types are resolved
//! once at the end.
//!
//! Cancellation: the caller's flag is checked between files, inside long parses and between
//! batches. Every batch is committed whole, so an aborted run leaves a consistent index that
//! the next run completes (finished files are then unchanged and skipped).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use ignore::overrides::OverrideBuilder;
use ignore::WalkBuilder;
use tokio::sync::mpsc;

use super::analyze::{analyze, looks_binary, AnalyzeOptions, FileAnalysis, FileIssue};
use super::chunk::content_hash;
use super::extract::RefKind;
use super::language::FileKind;
use super::resolve::ProjectFiles;
use super::store::{self, FileRecord, KnownFile};
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

/// Everything a run needs from the handle.
pub(crate) struct IndexCtx<'a> {
    pub store: &'a Store,
    pub clock: &'a dyn Clock,
    pub project_id: &'a str,
    pub root: &'a Path,
}

struct Walked {
    rel: String,
    abs: PathBuf,
    size: u64,
    mtime_ns: Option<i64>,
    kind: FileKind,
}

struct Job {
    file: Walked,
    known: Option<KnownFile>,
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
    let mut rx = spawn_workers(jobs, Arc::new(project), options, &stop);
    let result = async {
        let mut batch: Vec<FileRecord> = Vec::new();
        let mut batch_chunks = 0;
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
            let Some(record) = next else { break };
            done += 1;
            tally(&mut summary, &record);
            batch_chunks += record.analysis.chunks.len();
            batch.push(record);
            let full = batch.len() >= BATCH_FILES || batch_chunks >= BATCH_CHUNKS;
            if full {
                write(ctx, &mut summary, &mut batch).await?;
                batch_chunks = 0;
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
    // Dropping the receiver (and raising `stop`) ends the workers after their current file.
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

/// Starts the parser threads; they pull jobs from one queue and send finished records until the jobs
/// run out, `stop` is raised or the receiver is dropped.
fn spawn_workers(
    jobs: Vec<Job>,
    project: Arc<ProjectFiles>,
    options: &IndexOptions,
    stop: &Arc<AtomicBool>,
) -> mpsc::Receiver<FileRecord> {
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    }
    .clamp(1, 64)
    .min(jobs.len().max(1));
    let (tx, rx) = mpsc::channel(64);
    let queue = Arc::new(Mutex::new(jobs.into_iter()));
    for i in 0..threads {
        let (queue, tx, stop, project) = (queue.clone(), tx.clone(), stop.clone(), project.clone());
        let options = options.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("engram-index-{i}"))
            // Deep syntax trees recurse in the chunker (bounded by MAX_DEPTH): give it room.
            .stack_size(16 * 1024 * 1024)
            .spawn(move || {
                let mut parser = tree_sitter::Parser::new();
                while !stop.load(Ordering::Relaxed) {
                    let Some(job) = queue.lock().ok().and_then(|mut q| q.next()) else {
                        break;
                    };
                    let record = process(&mut parser, job, &project, &options, &stop);
                    if tx.blocking_send(record).is_err() {
                        break;
                    }
                }
            });
        if spawned.is_err() {
            // Fewer threads than asked is still progress; with none, the receiver just ends.
            break;
        }
    }
    rx
}

/// Reads and analyses one file (or records why it is skipped).
fn process(
    parser: &mut tree_sitter::Parser,
    job: Job,
    project: &ProjectFiles,
    options: &IndexOptions,
    stop: &AtomicBool,
) -> FileRecord {
    let Job { file, known } = job;
    let mut record = FileRecord {
        existing_id: known.as_ref().map(|k| k.id),
        size_bytes: file.size as i64,
        mtime_ns: file.mtime_ns,
        language: None,
        content_hash: None,
        unchanged: false,
        analysis: FileAnalysis::default(),
        resolved: Vec::new(),
        path: file.rel,
    };
    if file.size > options.max_file_bytes {
        record.analysis.issues.push(FileIssue::TooLarge);
        return record;
    }
    let bytes = match std::fs::read(&file.abs) {
        Ok(bytes) => bytes,
        Err(_) => {
            record.analysis.issues.push(FileIssue::Unreadable);
            return record;
        }
    };
    record.size_bytes = bytes.len() as i64;
    if looks_binary(&bytes) {
        record.analysis.issues.push(FileIssue::Binary);
        return record;
    }
    let hash = content_hash(&bytes);
    if known.as_ref().and_then(|k| k.content_hash.as_deref()) == Some(hash.as_str()) {
        record.unchanged = true;
        return record;
    }
    record.analysis = analyze(
        parser,
        &record.path,
        &bytes,
        file.kind,
        &options.analyze,
        stop,
    );
    record.language = Some(file.kind.name());
    record.content_hash = Some(hash);
    record.resolved = record
        .analysis
        .references
        .iter()
        .map(|r| match (r.kind, file.kind) {
            (RefKind::Imports, FileKind::Code(language)) => {
                project.resolve(language, &record.path, r)
            }
            _ => None,
        })
        .collect();
    record
}

/// Lists the files to index (sorted by path) and the project's path set for import resolution.
fn walk(root: &Path, options: &IndexOptions) -> Result<(Vec<Walked>, ProjectFiles)> {
    let mut overrides = OverrideBuilder::new(root);
    let patterns = options
        .use_default_ignores
        .then_some(DEFAULT_IGNORES)
        .into_iter()
        .flatten()
        .map(|p| (*p).to_owned())
        .chain(options.ignore.iter().cloned());
    for pattern in patterns {
        // An override without `!` would mean "include only"; negated, it ignores.
        overrides
            .add(&format!("!{}", pattern.trim()))
            .map_err(|e| Error::invalid(format!("ignore pattern {pattern:?}: {e}")))?;
    }
    let overrides = overrides
        .build()
        .map_err(|e| Error::invalid(format!("ignore patterns: {e}")))?;
    let walker = WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .overrides(overrides)
        .build();
    let mut files = Vec::new();
    let mut project = ProjectFiles::default();
    for entry in walker.flatten() {
        // Symlinks are not followed: no loops, and nothing outside the root is read.
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        if !file_type.is_file() {
            continue;
        }
        let abs = entry.path();
        let Some(rel) = abs.strip_prefix(root).ok().and_then(|p| p.to_str()) else {
            continue;
        };
        let rel = rel.replace('\\', "/");
        if abs.file_name().is_some_and(|n| n == "go.mod") {
            if let Ok(text) = std::fs::read_to_string(abs) {
                project.add_go_mod(&rel, &text);
            }
        }
        let Some(kind) = FileKind::of(abs) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as i64);
        project.insert(&rel);
        files.push(Walked {
            rel,
            abs: abs.to_path_buf(),
            size: meta.len(),
            mtime_ns,
            kind,
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((files, project))
}
