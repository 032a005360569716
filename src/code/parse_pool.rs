//! The parser threads: they take files from one queue (largest first), read and analyse them
//! off the JS and async threads, and hand finished records to the writer. What is in flight
//! (read but not yet committed) is capped in bytes, so parsing runs ahead of a slow batch write
//! without holding an unbounded amount of source in memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;

use super::analyze::{analyze, looks_binary, FileAnalysis, FileIssue};
use super::chunk::content_hash;
use super::extract::RefKind;
use super::indexer::IndexOptions;
use super::language::FileKind;
use super::resolve::ProjectFiles;
use super::store::{FileRecord, KnownFile};
use super::walk::Walked;

/// A file to read, with what the index knew of it.
pub(crate) struct Job {
    pub file: Walked,
    pub known: Option<KnownFile>,
}

/// A finished record and the bytes it holds of the in-flight budget (give them back with
/// [`InFlight::release`] once the record is committed or dropped).
pub(crate) struct Parsed {
    pub record: FileRecord,
    pub cost: u64,
}

/// The in-flight byte budget shared by the parser threads and the writer.
pub(crate) struct InFlight {
    limit: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

impl InFlight {
    pub fn new(limit: u64) -> Arc<InFlight> {
        Arc::new(InFlight {
            limit,
            used: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Takes `cost` bytes, waiting while they do not fit (a file over the whole limit waits for
    /// an empty pipeline). False when `stop` was raised while waiting.
    fn acquire(&self, cost: u64, stop: &AtomicBool) -> bool {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        while *used > 0 && *used + cost > self.limit {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            used = self
                .freed
                .wait_timeout(used, Duration::from_millis(50))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *used += cost;
        true
    }

    /// Gives back bytes taken by [`InFlight::acquire`].
    pub fn release(&self, cost: u64) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        *used = used.saturating_sub(cost);
        self.freed.notify_all();
    }
}

/// What a file costs of the budget: its size (nothing is read past the size cap), with a floor
/// for the per-record overhead.
fn cost_of(file: &Walked, options: &IndexOptions) -> u64 {
    if file.size > options.max_file_bytes {
        return 1024;
    }
    file.size.max(1024)
}

/// Starts the parser threads; they pull jobs from one queue and send finished records until the jobs
/// run out, `stop` is raised or the receiver is dropped.
pub(crate) fn spawn(
    mut jobs: Vec<Job>,
    project: Arc<ProjectFiles>,
    options: &IndexOptions,
    in_flight: &Arc<InFlight>,
    stop: &Arc<AtomicBool>,
) -> mpsc::UnboundedReceiver<Parsed> {
    // Largest files first: a big file met last would leave the other threads idle meanwhile.
    jobs.sort_by_key(|j| std::cmp::Reverse(j.file.size));
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    }
    .clamp(1, 64)
    .min(jobs.len().max(1));
    // Unbounded in records, bounded in bytes by `in_flight`.
    let (tx, rx) = mpsc::unbounded_channel();
    let queue = Arc::new(Mutex::new(jobs.into_iter()));
    for i in 0..threads {
        let (queue, tx, stop, project) = (queue.clone(), tx.clone(), stop.clone(), project.clone());
        let in_flight = in_flight.clone();
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
                    let cost = cost_of(&job.file, &options);
                    if !in_flight.acquire(cost, &stop) {
                        break;
                    }
                    let record = process(&mut parser, job, &project, &options, &stop);
                    if tx.send(Parsed { record, cost }).is_err() {
                        in_flight.release(cost);
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
        reread_after_upgrade: known.as_ref().and_then(|k| k.content_hash.as_deref())
            == Some(super::store::REREAD_AFTER_UPGRADE),
        analysis: FileAnalysis::default(),
        resolved: Vec::new(),
        path: file.rel,
    };
    if file.size > options.max_file_bytes {
        record.analysis.issues.push(FileIssue::TooLarge);
        return record;
    }
    // Only a regular file, never past the cap: the walk saw one, but it may have been replaced
    // since by a FIFO (whose open would block this thread) or grown.
    let bytes = match crate::file_read::read_regular(&file.abs, options.max_file_bytes, "a file") {
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
