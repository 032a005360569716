//! The contradiction scan after a write: memories a write creates are queued, and one
//! background task per engine compares each with the older memories the keyword index puts on
//! the same topic, then links and flags the contradictions it finds (see [`super::links`]).
//!
//! Why after the write and not inside it: the scan is a keyword query plus a comparison per
//! candidate, about as much work as storing the memory, and it only ever adds flags. Done in
//! the write it doubled the latency of `remember`. Here it runs when the writer has been idle
//! for [`IDLE`] (so a burst of writes is not slowed by it), or at once when [`BACKLOG`]
//! memories wait or someone awaits `settled`. It runs on the writer connection, whose page
//! cache holds the keyword index's fresh pages (a read connection's cache is emptied by every
//! commit, and the same scan cost it ~2.5x as much). The price is that the memory `remember`
//! returns does not show the contradictions yet: `Engram::settled` waits for them.
//!
//! Invariants: a queued memory is scanned only after the write that created it has committed
//! or rolled back (writes queue while they hold the writer, and the scan takes the writer); it
//! is compared only with memories older than itself, so a pair is found once, by its newer
//! memory, as when the scan ran inside the write; `settled` resolves only when every memory
//! queued before it was called has been scanned (or its scan failed).

use std::sync::Mutex;
use std::time::Duration;

use futures::FutureExt;
use libsql::params;
use tokio::sync::{watch, Notify};

use super::contradiction::Profiled;
use super::links::flag_conflict;
use crate::error::{DbContext, Error, Result};
use crate::memory::rows::{from_row, SELECT_BY_ID};
use crate::memory::{Ctx, Memory};
use crate::store::{begin_write, Store, Writer};

/// Candidates the keyword index proposes per new memory.
const CANDIDATES: i64 = 32;

/// Most words a new memory is looked up by (each costs a walk of its keyword index entries).
const MAX_TERMS: usize = 8;

/// At most this many contradictions are linked per new memory.
pub const MAX_CONFLICTS_PER_MEMORY: usize = 3;

/// At most this many queued memories are scanned per pass: one hold of the writer that a
/// write arriving meanwhile waits for.
const PASS: usize = 16;

/// A pass started because the writer was idle (not hurried) stops taking memories once it
/// has held the writer this long, so a write arriving meanwhile waits about a millisecond,
/// not a whole pass (3-5 ms at 16 memories, which was a remember's p99); the next pass follows
/// at once if no write came in between. A hurried pass takes [`PASS`] memories whatever the
/// time: someone is waiting for all of them.
const IDLE_PASS_BUDGET: Duration = Duration::from_millis(1);

/// How long the writer must have been free before a pass starts.
pub const IDLE: Duration = Duration::from_millis(5);

/// With this many memories waiting, passes run without waiting for the writer to be idle: a
/// stream of writes this long then pays for its scans a pass at a time. (The queue holds
/// two ids per memory, ~100 bytes; 10,000 is more than an agent writes one at a time in a
/// session, so in practice scans wait for a pause.)
pub const BACKLOG: usize = 10_000;

/// The [`CANDIDATES`] newest active memories of the project older than the one named (`?3`)
/// matching an FTS5 query. The index is the outer loop and yields rowids in descending order,
/// from below the memory's own row, so there is no sort: rows of other projects and forgotten
/// rows are skipped as they stream by, and the limit counts only candidates (`+ 0`: see
/// `store::statements`).
const SAME_TOPIC: &str =
    "SELECT m.id, m.content FROM memories_fts f CROSS JOIN memories m ON m.seq = f.rowid
     WHERE memories_fts MATCH ?1
       AND f.rowid < (SELECT seq FROM memories WHERE id = ?3)
       AND m.project_id = ?2 AND m.deprecated = 0
     ORDER BY f.rowid DESC LIMIT ?4 + 0";

/// A memory waiting for its scan.
#[derive(Debug)]
struct Queued {
    project_id: String,
    memory_id: String,
}

#[derive(Debug, Default)]
struct State {
    queue: Vec<Queued>,
    /// A scanner task is draining the queue.
    running: bool,
    /// Memories ever queued (what `settled` waits for).
    queued: u64,
    /// Callers waiting in `settled`.
    waiting: usize,
    /// Passes that failed, and how the last one did (`CODE: message`).
    failures: u64,
    last_error: Option<String>,
}

/// One engine's queue of memories to scan for contradictions, and how far the scans are.
#[derive(Debug)]
pub(crate) struct ConflictScans {
    state: Mutex<State>,
    /// Memories scanned so far (or whose pass failed).
    done: watch::Sender<u64>,
    /// Someone awaits `settled`: passes stop waiting for the writer to be idle.
    hurry: Notify,
}

impl Default for ConflictScans {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            done: watch::channel(0).0,
            hurry: Notify::new(),
        }
    }
}

/// One caller in `settled`, counted out when dropped.
struct Waiting<'a>(&'a ConflictScans);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.lock().waiting -= 1;
    }
}

/// Where a write hands the memories it created (implemented by the handle, which can start
/// the engine's scanner).
pub(crate) trait ScanQueue: Send + Sync {
    /// Queues `memory_ids` of the calling project for a scan and makes sure a scanner runs.
    fn queue_scan(&self, memory_ids: Vec<String>);
}

impl ConflictScans {
    /// Adds memories of `project_id` to the queue; true when the caller must start the
    /// scanner (none is running).
    pub(crate) fn push(&self, project_id: &str, memory_ids: Vec<String>) -> bool {
        let mut state = self.lock();
        state.queued += memory_ids.len() as u64;
        state
            .queue
            .extend(memory_ids.into_iter().map(|memory_id| Queued {
                project_id: project_id.to_owned(),
                memory_id,
            }));
        if state.running || state.queue.is_empty() {
            return false;
        }
        state.running = true;
        true
    }

    /// Resolves once every memory queued before the call has been scanned; fails (with
    /// `ENGRAM_INTERNAL`, naming the cause) when a pass failed meanwhile: its memories stay
    /// unflagged until consolidation finds their contradictions.
    pub(crate) async fn settled(&self) -> Result<()> {
        let (target, failures) = {
            let mut state = self.lock();
            state.waiting += 1;
            (state.queued, state.failures)
        };
        // Counted out however the wait ends (a caller may drop this future).
        let _waiting = Waiting(self);
        self.hurry.notify_one();
        let mut done = self.done.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail.
        let _ = done.wait_for(|scanned| *scanned >= target).await;
        let state = self.lock();
        match &state.last_error {
            Some(cause) if state.failures > failures => Err(Error::Internal(format!(
                "the contradiction scan after a write failed: {cause}"
            ))),
            _ => Ok(()),
        }
    }

    /// The scanner's loop: drains the queue pass by pass until it is empty; `base` gives the
    /// store, clock and limits (its project is replaced by each queued memory's). While
    /// `closing()` is true (no handle is open) passes do not wait for an idle writer: the
    /// engine stays until the queue is empty.
    pub(crate) async fn drain(&self, base: &Ctx<'_>, closing: impl Fn() -> bool) {
        // The writer's release count after this scanner's last idle pass.
        let mut own_release = None;
        loop {
            let (conn, hurried) = self
                .writer_when_idle(base.store, &closing, own_release)
                .await;
            let mut pass = {
                let mut state = self.lock();
                if state.queue.is_empty() {
                    state.running = false;
                    return;
                }
                let take = state.queue.len().min(PASS);
                state.queue.drain(..take).collect::<Vec<_>>()
            };
            let budget = (!hurried).then_some(IDLE_PASS_BUDGET);
            // The writer is ours until the pass drops it: that release is the next one.
            let release = base.store.writer_releases() + 1;
            let mut scanned = 0;
            let outcome =
                std::panic::AssertUnwindSafe(scan_pass(&pass, base, conn, budget, &mut scanned))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|_| Err(Error::Internal("contradiction scan panicked".into())));
            own_release = (!hurried).then_some(release);
            if let Err(e) = outcome {
                // The memories begun in the failed pass count as done (settled reports the
                // failure); those it never reached go back to the queue.
                let mut state = self.lock();
                state.failures += 1;
                state.last_error = Some(format!("{}: {e}", e.code()));
            }
            // What the budget left goes back to the head of the queue, in order.
            let rest: Vec<Queued> = pass.drain(scanned.min(pass.len())..).collect();
            if !rest.is_empty() {
                self.lock().queue.splice(0..0, rest);
            }
            self.done.send_modify(|done| *done += scanned as u64);
        }
    }

    /// The writer, once it has been free for [`IDLE`] (or at once when `own_release`, the
    /// release count after this scanner's last pass, shows no write came in since); and
    /// whether the pass is hurried: it gets the writer at once (waiting in line) when the
    /// backlog is long, someone awaits `settled` or the engine is closing.
    async fn writer_when_idle<'s>(
        &self,
        store: &'s Store,
        closing: &impl Fn() -> bool,
        mut own_release: Option<u64>,
    ) -> (Writer<'s>, bool) {
        loop {
            {
                let state = self.lock();
                if state.waiting > 0 || state.queue.len() >= BACKLOG || closing() {
                    break;
                }
            }
            if let Some(writer) = own_release
                .take()
                .and_then(|count| store.writer_if_unused_since(count))
            {
                return (writer, false);
            }
            match store.writer_if_idle(IDLE) {
                Ok(writer) => return (writer, false),
                Err(wait) => {
                    let hurried = self.hurry.notified();
                    tokio::select! {
                        _ = hurried => {}
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
        (store.writer().await, true)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Scans one pass of queued memories on the writer: reads first, then one write transaction
/// for whatever was found. With a `budget`, no memory is begun once the pass has run that
/// long (the first always is). `scanned` counts the memories of `pass`, from its start, that
/// were begun (also when the pass then fails).
async fn scan_pass(
    pass: &[Queued],
    base: &Ctx<'_>,
    mut conn: Writer<'_>,
    budget: Option<Duration>,
    scanned: &mut usize,
) -> Result<()> {
    let started = std::time::Instant::now();
    let mut found: Vec<Found<'_>> = Vec::new();
    for queued in pass {
        if *scanned > 0 && budget.is_some_and(|b| started.elapsed() >= b) {
            break;
        }
        *scanned += 1;
        let ctx = base.for_project(&queued.project_id);
        // None: its write rolled back.
        let Some(memory) = load_cached(&ctx, &mut conn, &queued.memory_id).await? else {
            continue;
        };
        if memory.deprecated {
            continue;
        }
        let conflicts = contradictions_of(&ctx, &mut conn, &memory).await?;
        if !conflicts.is_empty() {
            found.push(Found {
                project: &queued.project_id,
                memory_id: memory.id,
                conflicts,
            });
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let tx = begin_write(&conn).await?;
    for f in &found {
        let ctx = base.for_project(f.project);
        for (other, similarity) in &f.conflicts {
            flag_conflict(&ctx, &tx, other, &f.memory_id, *similarity).await?;
            flag_conflict(&ctx, &tx, &f.memory_id, other, *similarity).await?;
        }
    }
    tx.commit().await.ctx("committing contradiction links")?;
    Ok(())
}

/// The memory `id` of the project, through the writer's cached statement (preparing the
/// full-row select costs about as much as the rest of a scan of a short memory).
async fn load_cached(ctx: &Ctx<'_>, conn: &mut Writer<'_>, id: &str) -> Result<Option<Memory>> {
    let statement = conn.cached(&SELECT_BY_ID).await?;
    let mut rows = statement
        .query(params![id, ctx.project_id])
        .await
        .ctx("loading a memory to scan")?;
    let row = rows.next().await.ctx("loading a memory to scan")?;
    row.map(|r| from_row(&r)).transpose()
}

/// A scanned memory and the older ones it contradicts (with their similarity).
struct Found<'a> {
    project: &'a str,
    memory_id: String,
    conflicts: Vec<(String, f64)>,
}

/// Active memories of the project older than `memory` that contradict it, with how similar
/// they are, most similar first: the keyword index proposes the [`CANDIDATES`] newest memories
/// sharing one of its most distinctive words, the contradiction rule decides. Memories it
/// already relates to (a memory it supersedes contradicts it by design) are left out.
async fn contradictions_of(
    ctx: &Ctx<'_>,
    conn: &mut Writer<'_>,
    memory: &Memory,
) -> Result<Vec<(String, f64)>> {
    let profiled = Profiled::new(&memory.content);
    let terms = profiled.topic_terms(MAX_TERMS);
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    // Every term is letters, digits, `.` and `_` only, so quoting makes it a literal word (or
    // a phrase of the parts FTS5 cuts it into).
    let query = terms
        .iter()
        .map(|t| format!("content:\"{t}\""))
        .collect::<Vec<_>>()
        .join(" OR ");
    // Newest first, not best-ranked: FTS5 streams matches in rowid order and stops at the
    // limit, while ranking scores every match (tens of milliseconds when the words are common
    // across 60,000 memories, against a fraction of one).
    // The writer's cached statement: preparing this join costs about as much as running it.
    let statement = conn.cached(SAME_TOPIC).await?;
    let mut rows = statement
        .query(params![
            query,
            ctx.project_id,
            memory.id.as_str(),
            CANDIDATES
        ])
        .await
        .ctx("finding memories on the same topic")?;
    let mut out = Vec::new();
    while let Some(row) = rows
        .next()
        .await
        .ctx("finding memories on the same topic")?
    {
        let id: String = row.get(0).ctx("memory id")?;
        let content: String = row.get(1).ctx("memory content")?;
        let related = memory
            .relations
            .iter()
            .any(|r| r.target_memory_id.as_deref() == Some(id.as_str()));
        if related {
            continue;
        }
        if let Some(c) = profiled.contradiction(&content) {
            out.push((id, c.similarity));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out.truncate(MAX_CONFLICTS_PER_MEMORY);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_settled_wait_stops_hurrying_the_scanner() {
        let scans = ConflictScans::default();
        // Queued, and no scanner started: `settled` can only time out.
        assert!(scans.push("p", vec!["m".into()]));
        let wait = tokio::time::timeout(Duration::from_millis(20), scans.settled()).await;
        assert!(wait.is_err());
        assert_eq!(scans.lock().waiting, 0, "the dropped wait was counted out");
        assert!(
            !scans.push("p", vec!["n".into()]),
            "the scanner is still running"
        );
        assert_eq!(scans.lock().queue.len(), 2);
    }
}
