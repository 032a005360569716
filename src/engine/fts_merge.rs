//! Merges a keyword index's (FTS5) segments into one after bulk writes, in short steps while
//! the writer is idle.
//!
//! Why: each committed write adds a segment to an FTS5 index, and its automerge leaves up to
//! three per level, so a bulk-written index (a cold `index()`, a branch switch, thousands of
//! memories) keeps several. Every `MATCH` seeks each segment once per term, and recall's
//! keyword and graph paths run dozens of them. Measured at 47,762 chunks (9 segments) and
//! 10,000 memories (5): recall() p50 9.4 -> 8.2 ms and p99 23 -> 17 ms once both were merged,
//! for ~0.2 s of merging (`docs/PERFORMANCE.md`, "Keyword index segments").
//!
//! How: FTS5's `'merge'` command with a negative page count merges every segment, as
//! `'optimize'` does, but writes only about that many pages per statement. A step of
//! [`STEP_PAGES`] holds the writer a few milliseconds (median 2.8 ms, at most 7.3 ms on those
//! 47k chunks). The task takes the writer only once it has been free for
//! [`after_write::IDLE`], or at once when no write came in since its own last step, so a
//! write waits at most one step.
//!
//! When: after index runs and at open, for an index whose segments outside its largest hold
//! at least [`SCATTERED_SHARE`] of its pages ([`worth_merging`]). A small edit adds a tiny
//! segment that automerge folds in later; merging it at once would rewrite the whole index.
//! Each step commits on its own and FTS5 resumes a merge where it stopped, so a process that
//! exits mid-way leaves a valid index and the next open goes on.
//!
//! [`merge_now`] does the same in the caller's time, taking the writer as any write does: for
//! a process about to exit after bulk writes (the CLI's `engram index`), which would otherwise
//! leave before the writer is ever idle (`Engram::optimize`).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::engine::after_write;
use crate::error::{DbContext, Result};
use crate::store::{Reader, Store, Writer};

/// A keyword index this keeps merged, with its statements.
#[derive(Debug)]
pub(crate) struct KeywordIndex {
    /// What it indexes, as the API names it: `code` or `memories`.
    pub(crate) name: &'static str,
    /// The FTS5 table.
    pub(crate) table: &'static str,
    /// Leaf pages per segment, from its `_idx` shadow table (one entry per leaf page).
    layout: &'static str,
    /// One merge step; `?1` is minus the pages to write.
    merge: &'static str,
}

/// Spells out a [`KeywordIndex`]'s statements for the FTS5 table `$table` (identifiers cannot
/// be bound as parameters; these are constants).
macro_rules! keyword_index {
    ($name:literal, $table:literal) => {
        KeywordIndex {
            name: $name,
            table: $table,
            layout: concat!("SELECT count(*) FROM ", $table, "_idx GROUP BY segid"),
            merge: concat!(
                "INSERT INTO ",
                $table,
                "(",
                $table,
                ", rank) VALUES ('merge', ?1)"
            ),
        }
    };
}

/// The keyword indexes: code chunks and memories.
pub(crate) const INDEXES: [KeywordIndex; 2] = [
    keyword_index!("code", "code_chunks_fts"),
    keyword_index!("memories", "memories_fts"),
];

/// Pages written per merge step.
const STEP_PAGES: i64 = 64;

/// A merge is worth it once this share of the pages lies outside the largest segment.
const SCATTERED_SHARE: f64 = 0.1;

/// How an FTS5 index's pages are spread over its segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Layout {
    /// Segments in the index.
    pub(crate) segments: u64,
    /// Leaf pages in all of them (counted by their entries in the `_idx` shadow table).
    pub(crate) pages: u64,
    /// Leaf pages of the largest segment.
    pub(crate) largest: u64,
}

/// Whether merging `layout` into one segment is worth rewriting the whole index.
pub(crate) fn worth_merging(layout: &Layout) -> bool {
    let scattered = layout.pages - layout.largest;
    layout.segments > 1 && scattered as f64 >= layout.pages as f64 * SCATTERED_SHARE
}

/// The segments of `index`.
pub(crate) async fn layout(reader: &mut Reader<'_>, index: &KeywordIndex) -> Result<Layout> {
    let pages: Vec<u64> = reader
        .query_cached(index.layout, (), |row| {
            Ok(row.get::<i64>(0).ctx("segment pages")?.max(0) as u64)
        })
        .await?;
    Ok(Layout {
        segments: pages.len() as u64,
        pages: pages.iter().sum(),
        largest: pages.iter().copied().max().unwrap_or(0),
    })
}

/// One merge step on `index`: true when it merged something (FTS5 signals that by the
/// changes it counts: two or more).
async fn merge_step(conn: &Writer<'_>, index: &KeywordIndex) -> Result<bool> {
    let before = conn.total_changes();
    conn.execute(index.merge, [-STEP_PAGES])
        .await
        .ctx("merging keyword index segments")?;
    Ok(conn.total_changes() - before >= 2)
}

/// What `Engram::optimize` found and left in one keyword index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeywordIndexMerge {
    /// What the index holds: `code` (the `code_chunks_fts` table) or `memories`
    /// (`memories_fts`).
    pub index: &'static str,
    /// Its segments before.
    pub segments_before: u64,
    /// Its segments after: 1 once merged (more if writes landed meanwhile), unchanged when it
    /// was not worth merging.
    pub segments_after: u64,
    /// Merge steps run on it.
    pub steps: u64,
}

/// Merges now every index of [`INDEXES`] that is [`worth_merging`], a step at a time on the
/// writer (a write waiting between steps goes first), until each is one segment or `cancel`
/// is raised (`ENGRAM_ABORTED`; the steps done stay, FTS5 goes on from there next time). At
/// most twice the steps its pages need (plus a few): writes landing meanwhile keep adding
/// segments, and a caller about to exit must not wait on them (automerge and the next open
/// take over).
pub(crate) async fn merge_now(
    store: &Store,
    cancel: &AtomicBool,
) -> Result<Vec<KeywordIndexMerge>> {
    let mut merged = Vec::with_capacity(INDEXES.len());
    for index in &INDEXES {
        let before = layout(&mut store.reader().await, index).await?;
        let mut steps = 0;
        let max_steps = 2 * before.pages / STEP_PAGES as u64 + 8;
        if worth_merging(&before) {
            while steps < max_steps {
                if cancel.load(Ordering::Relaxed) {
                    return Err(crate::error::Error::Aborted);
                }
                let conn = store.writer().await;
                let progressed = merge_step(&conn, index).await?;
                drop(conn);
                steps += 1;
                if !progressed {
                    break;
                }
            }
        }
        let after = if steps == 0 {
            before
        } else {
            layout(&mut store.reader().await, index).await?
        };
        merged.push(KeywordIndexMerge {
            index: index.name,
            segments_before: before.segments,
            segments_after: after.segments,
            steps,
        });
    }
    Ok(merged)
}

/// Keeps one merge task per engine; a request while it runs makes it look again when done.
#[derive(Debug, Default)]
pub(crate) struct FtsMerge {
    running: AtomicBool,
    /// Asked for since the running task last began a pass (another index run, another open).
    again: AtomicBool,
}

/// Releases the claim however a pass ends: done, failed, panicked, or its future dropped
/// (a runtime shutting down).
struct Release<'a>(&'a AtomicBool);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl FtsMerge {
    /// Asks for a merge pass. True when the caller must run it ([`FtsMerge::run`]); false when
    /// a task is running, which then makes another pass before it ends.
    pub(crate) fn claim(&self) -> bool {
        self.again.store(true, Ordering::SeqCst);
        !self.running.swap(true, Ordering::SeqCst)
    }

    /// Whether a merge task holds the claim.
    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    /// Merges every index of [`INDEXES`] that is [`worth_merging`] on `store`'s writer while it
    /// is idle, until each is one segment or `keep_going` says stop, and again while passes are
    /// asked for meanwhile; returns the steps run. The caller [`claim`](Self::claim)ed it.
    pub(crate) async fn run(
        &self,
        store: &Store,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Result<u64> {
        let mut steps = 0;
        loop {
            self.again.store(false, Ordering::SeqCst);
            let release = Release(&self.running);
            let outcome = merge_all(store, keep_going).await;
            drop(release);
            steps += outcome?;
            // A request that came in before the release is ours to serve (its claim saw us
            // running); one after it has claimed a task of its own, and the swap says so.
            if !keep_going()
                || !self.again.load(Ordering::SeqCst)
                || self.running.swap(true, Ordering::SeqCst)
            {
                return Ok(steps);
            }
        }
    }
}

async fn merge_all(store: &Store, keep_going: &(dyn Fn() -> bool + Sync)) -> Result<u64> {
    let mut steps = 0;
    for index in &INDEXES {
        let found = layout(&mut store.reader().await, index).await?;
        if !worth_merging(&found) {
            continue;
        }
        let started = std::time::Instant::now();
        let mut own_release = None;
        loop {
            if !keep_going() {
                return Ok(steps);
            }
            let Some(conn) = writer_when_idle(store, own_release.take()).await else {
                continue;
            };
            // The writer is ours until the step drops it: that release is the next one.
            let release = store.writer_releases() + 1;
            let merged = merge_step(&conn, index).await?;
            drop(conn);
            steps += 1;
            if !merged {
                break;
            }
            own_release = Some(release);
        }
        tracing::debug!(
            table = index.table,
            segments = found.segments,
            pages = found.pages,
            ms = started.elapsed().as_millis() as u64,
            "keyword index merged"
        );
    }
    Ok(steps)
}

/// The writer at once when nobody took it since this task's last step (`own_release`), or
/// once it has been free for [`after_write::IDLE`]; `None` after a wait, to check again
/// whether to go on.
async fn writer_when_idle(store: &Store, own_release: Option<u64>) -> Option<Writer<'_>> {
    if let Some(conn) = own_release.and_then(|count| store.writer_if_unused_since(count)) {
        return Some(conn);
    }
    match store.writer_if_idle(after_write::IDLE) {
        Ok(conn) => Some(conn),
        Err(wait) => {
            tokio::time::sleep(wait).await;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_new_segment_is_not_worth_rewriting_the_index() {
        let layout = |pages: &[u64]| Layout {
            segments: pages.len() as u64,
            pages: pages.iter().sum(),
            largest: pages.iter().copied().max().unwrap_or(0),
        };
        // A cold index: pages all over.
        assert!(worth_merging(&layout(&[
            1204, 25, 36, 11, 429, 284, 58, 428, 441
        ])));
        // One merged segment, then an edited file's.
        assert!(!worth_merging(&layout(&[2916, 2])));
        assert!(!worth_merging(&layout(&[2916])));
        assert!(!worth_merging(&layout(&[])));
        // Edits adding up to a tenth of the index.
        assert!(worth_merging(&layout(&[900, 60, 40])));
    }
}
