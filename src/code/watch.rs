//! Keeping the index current while files change: a notify watcher on every directory the walk
//! would enter (ignored trees such as `node_modules/` and `target/` are never watched), a
//! debounce that gathers event paths until the tree is quiet, and a targeted re-index of those
//! paths (files re-read, new directories walked and watched, deleted or renamed paths removed,
//! references marked stale first and re-resolved after).
//!
//! The watcher runs on its own thread with its own small runtime, so it needs nothing from the
//! caller's runtime and never runs on the JS thread. Dropping the [`Watcher`] stops it: the
//! running update is cancelled at its next check, and no event is delivered after the drop
//! returns.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ignore::WalkBuilder;
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use super::indexer::{IndexOptions, IndexSummary};
use super::walk::PathRules;
use crate::error::{Error, Result};
use crate::Engram;

/// Settings for [`Engram::watch`](crate::Engram::watch).
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Ignore rules, size cap and parse settings (as for a full index).
    pub index: IndexOptions,
    /// Quiet time after the last event before the gathered paths are re-indexed.
    pub debounce: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            index: IndexOptions::default(),
            debounce: Duration::from_millis(500),
        }
    }
}

/// What the watcher reports.
#[derive(Debug, Clone)]
pub enum WatchEvent {
    /// Changed paths were re-indexed (`indexed_paths` / `removed_paths` say which).
    Updated(Box<IndexSummary>),
    /// An update failed; the watcher goes on, and the paths are retried with the next event.
    Failed {
        /// The error code (`ENGRAM_...`).
        code: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// A running watch. Drop it (or call [`Watcher::stop`]) to stop watching.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    wake: mpsc::UnboundedSender<PathBuf>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Watcher {
    /// Stops watching and waits for the watcher thread to finish (a running update is
    /// cancelled; what it committed stays).
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // An empty path wakes the loop so it sees the flag at once.
        let _ = self.wake.send(PathBuf::new());
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Callback for watch events (called on the watcher thread).
pub type OnWatchEvent = Arc<dyn Fn(&WatchEvent) + Send + Sync>;

/// Starts watching `engram`'s project root.
pub(crate) fn start(
    engram: Engram,
    root: PathBuf,
    options: WatchOptions,
    on_event: OnWatchEvent,
) -> Result<Watcher> {
    let rules = Arc::new(PathRules::new(&root, &options.index)?);
    let (tx, rx) = mpsc::unbounded_channel::<PathBuf>();
    let events = tx.clone();
    let notify_watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // A watcher error (e.g. an overflowed kernel queue) comes without paths: rescan the
            // root, the one safe answer.
            let paths = match event {
                // Reads (ours included) change nothing.
                Ok(event) if matches!(event.kind, notify::EventKind::Access(_)) => return,
                // The kernel queue overflowed: events were lost, rescan everything.
                Ok(event) if event.need_rescan() => vec![PathBuf::from("/")],
                Ok(event) => event.paths,
                Err(e) if e.paths.is_empty() => vec![PathBuf::from("/")],
                Err(e) => e.paths,
            };
            for path in paths {
                let _ = events.send(path);
            }
        })
        .map_err(|e| Error::Internal(format!("starting the file watcher: {e}")))?;
    let notify_watcher = Arc::new(Mutex::new(notify_watcher));
    watch_tree(&notify_watcher, &root, &root, &rules)?;

    let stop = Arc::new(AtomicBool::new(false));
    let loop_stop = stop.clone();
    let thread = std::thread::Builder::new()
        .name("engram-watch".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    on_event(&WatchEvent::Failed {
                        code: "ENGRAM_INTERNAL",
                        message: format!("watcher runtime: {e}"),
                    });
                    return;
                }
            };
            let state = Loop {
                engram,
                root,
                options,
                rules,
                notify_watcher,
                on_event,
                stop: loop_stop,
            };
            runtime.block_on(state.run(rx));
        })
        .map_err(|e| Error::Internal(format!("starting the watcher thread: {e}")))?;
    Ok(Watcher {
        stop,
        wake: tx,
        thread: Some(thread),
    })
}

/// Adds a non-recursive watch on `dir` and every directory under it that the walk enters.
fn watch_tree(
    watcher: &Mutex<RecommendedWatcher>,
    root: &Path,
    dir: &Path,
    rules: &Arc<PathRules>,
) -> Result<()> {
    let mut watcher = watcher.lock().unwrap_or_else(PoisonError::into_inner);
    let (walk_root, walk_rules) = (root.to_path_buf(), rules.clone());
    let walk = WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            entry.file_type().is_some_and(|t| t.is_dir())
                && entry
                    .path()
                    .strip_prefix(&walk_root)
                    .is_ok_and(|rel| !walk_rules.is_ignored(rel, true))
        })
        .build();
    for entry in walk.flatten() {
        match watcher.watch(entry.path(), RecursiveMode::NonRecursive) {
            Ok(()) => {}
            // Gone between the walk and the watch: its deletion event follows.
            Err(e) if matches!(e.kind, notify::ErrorKind::PathNotFound) => {}
            Err(e) if entry.path() == root => {
                return Err(Error::Internal(format!("watching {}: {e}", root.display())))
            }
            Err(_) => {} // e.g. out of inotify watches: that subtree is not followed
        }
    }
    Ok(())
}

struct Loop {
    engram: Engram,
    root: PathBuf,
    options: WatchOptions,
    rules: Arc<PathRules>,
    notify_watcher: Arc<Mutex<RecommendedWatcher>>,
    on_event: OnWatchEvent,
    stop: Arc<AtomicBool>,
}

impl Loop {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<PathBuf>) {
        let mut pending: BTreeSet<String> = BTreeSet::new();
        while !self.stop.load(Ordering::Relaxed) {
            let Some(first) = rx.recv().await else { return };
            self.gather(first, &mut pending);
            // Wait for quiet (at most ten debounce periods, so a busy tree still updates).
            let started = Instant::now();
            let cap = self.options.debounce * 10;
            loop {
                let quiet = tokio::time::sleep(self.options.debounce);
                tokio::select! {
                    next = rx.recv() => match next {
                        Some(path) => self.gather(path, &mut pending),
                        None => return,
                    },
                    _ = quiet => break,
                }
                if self.stop.load(Ordering::Relaxed) || started.elapsed() >= cap {
                    break;
                }
            }
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            if pending.is_empty() {
                continue;
            }
            let paths: Vec<String> = std::mem::take(&mut pending).into_iter().collect();
            self.update(paths, &mut pending).await;
        }
    }

    /// Adds an event path (absolute) to the pending set, as a project-relative path.
    fn gather(&self, path: PathBuf, pending: &mut BTreeSet<String>) {
        if path.as_os_str().is_empty() {
            return; // the stop wake-up
        }
        if path == Path::new("/") {
            pending.insert(String::new()); // rescan everything
            return;
        }
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return;
        };
        let Some(rel) = rel.to_str().map(|r| r.replace('\\', "/")) else {
            return;
        };
        if rel.is_empty() {
            return;
        }
        if rel == ".gitignore" || rel.ends_with("/.gitignore") {
            // The rules of that directory changed: re-check everything under it.
            self.rules.forget_gitignores();
            let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            pending.insert(dir.to_owned());
            return;
        }
        pending.insert(rel);
    }

    async fn update(&self, paths: Vec<String>, pending: &mut BTreeSet<String>) {
        let full = paths.iter().any(String::is_empty);
        if full {
            // Directories created or un-ignored meanwhile need watches too.
            let _ = watch_tree(&self.notify_watcher, &self.root, &self.root, &self.rules);
        }
        // New directories need watches before their files are read, so nothing slips by.
        for rel in paths.iter().filter(|p| !p.is_empty()) {
            let abs = self.root.join(rel);
            if std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir())
                && !self.rules.is_ignored(Path::new(rel), true)
            {
                let _ = watch_tree(&self.notify_watcher, &self.root, &abs, &self.rules);
            }
        }
        // The stop flag is the run's cancel flag: stopping aborts the update at its next check.
        let cancel = &self.stop;
        let result = if full {
            self.engram
                .index_waiting(&self.options.index, &|_| {}, cancel)
                .await
        } else {
            self.engram
                .update_paths(&self.options.index, &self.rules, &paths, cancel)
                .await
        };
        match result {
            Ok(summary) => {
                let changed = summary.files_indexed + summary.files_skipped + summary.files_removed;
                if changed > 0 {
                    (self.on_event)(&WatchEvent::Updated(Box::new(summary)));
                }
            }
            Err(Error::Aborted) => {}
            Err(e) => {
                // Retried with the next event.
                pending.extend(paths);
                (self.on_event)(&WatchEvent::Failed {
                    code: e.code(),
                    message: e.to_string(),
                });
            }
        }
    }
}
