//! Work a write leaves for after it, one queue per engine: the memories a write created wait
//! here for the contradiction scan, and one background task drains the queue on the writer.
//! The engine owns the queue and its schedule; what a pass does is the lifecycle's
//! (`lifecycle::conflict_scan`), handed in by the handle as a [`Pass`], so the engine names no
//! lifecycle policy.
//!
//! Why after the write and not inside it: the scan costs about as much as storing the memory
//! and only ever adds flags; done in the write it doubled the latency of `remember`. A pass
//! runs when the writer has been idle for [`IDLE`] (so a burst of writes is not slowed by it),
//! or at once when [`BACKLOG`] memories wait, someone awaits `settled`, or the engine is
//! closing. It runs on the writer connection, whose page cache holds the keyword index's fresh
//! pages (a read connection's cache is emptied by every commit, and the same scan cost it
//! ~2.5x as much). The price is that the memory `remember` returns does not show the
//! contradictions yet: `Engram::settled` waits for them.
//!
//! Invariants: a queued memory is scanned only after the write that created it has committed
//! or rolled back (writes queue while they hold the writer, and a pass takes the writer);
//! `settled` resolves only when every memory queued before it was called has been scanned (or
//! its pass failed).

use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::{watch, Notify};

use crate::error::{Error, Result};
use crate::store::{Store, Writer};

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

/// A memory waiting for its scan.
#[derive(Debug)]
pub(crate) struct Queued {
    /// The project the memory belongs to.
    pub(crate) project_id: String,
    /// The memory.
    pub(crate) memory_id: String,
}

/// What one pass does with the memories it took off the queue (the handle passes the
/// lifecycle's contradiction scan).
pub(crate) trait Pass: Sync {
    /// Works through `queued` on the writer `conn`. With a `budget`, begins no memory once the
    /// pass has run that long (the first always is). `begun` counts the memories of `queued`,
    /// from its start, that were begun (also when the pass then fails): the rest go back to
    /// the head of the queue.
    fn run<'p>(
        &'p self,
        queued: &'p [Queued],
        conn: Writer<'p>,
        budget: Option<Duration>,
        begun: &'p mut usize,
    ) -> BoxFuture<'p, Result<()>>;
}

#[derive(Debug, Default)]
struct State {
    queue: Vec<Queued>,
    /// A task is draining the queue.
    running: bool,
    /// Memories ever queued (what `settled` waits for).
    queued: u64,
    /// Callers waiting in `settled`.
    waiting: usize,
    /// Passes that failed, and how the last one did (`CODE: message`).
    failures: u64,
    last_error: Option<String>,
}

/// One engine's queue of memories waiting for the work that follows their write, and how far
/// that work is.
#[derive(Debug)]
pub(crate) struct AfterWrite {
    state: Mutex<State>,
    /// Memories scanned so far (or whose pass failed).
    done: watch::Sender<u64>,
    /// Someone awaits `settled`: passes stop waiting for the writer to be idle.
    hurry: Notify,
}

impl Default for AfterWrite {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            done: watch::channel(0).0,
            hurry: Notify::new(),
        }
    }
}

/// One caller in `settled`, counted out when dropped.
struct Waiting<'a>(&'a AfterWrite);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.lock().waiting -= 1;
    }
}

impl AfterWrite {
    /// Adds memories of `project_id` to the queue; true when the caller must start the
    /// draining task (none is running).
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

    /// The draining task's loop: runs `pass` over the queue, a pass at a time, on the writer
    /// of `store`, until the queue is empty. While `closing()` is true (no handle is open)
    /// passes do not wait for an idle writer: the engine stays until the queue is empty.
    pub(crate) async fn drain(&self, store: &Store, pass: &impl Pass, closing: impl Fn() -> bool) {
        // The writer's release count after this task's last idle pass.
        let mut own_release = None;
        loop {
            let (conn, hurried) = self.writer_when_idle(store, &closing, own_release).await;
            let mut taken = {
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
            let release = store.writer_releases() + 1;
            let mut begun = 0;
            let outcome = std::panic::AssertUnwindSafe(pass.run(&taken, conn, budget, &mut begun))
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
            let rest: Vec<Queued> = taken.drain(begun.min(taken.len())..).collect();
            if !rest.is_empty() {
                self.lock().queue.splice(0..0, rest);
            }
            self.done.send_modify(|done| *done += begun as u64);
        }
    }

    /// The writer, once it has been free for [`IDLE`] (or at once when `own_release`, the
    /// release count after this task's last pass, shows no write came in since); and whether
    /// the pass is hurried: it gets the writer at once (waiting in line) when the backlog is
    /// long, someone awaits `settled` or the engine is closing.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_settled_wait_stops_hurrying_the_scanner() {
        let queue = AfterWrite::default();
        // Queued, and no task started: `settled` can only time out.
        assert!(queue.push("p", vec!["m".into()]));
        let wait = tokio::time::timeout(Duration::from_millis(20), queue.settled()).await;
        assert!(wait.is_err());
        assert_eq!(queue.lock().waiting, 0, "the dropped wait was counted out");
        assert!(
            !queue.push("p", vec!["n".into()]),
            "the task is still running"
        );
        assert_eq!(queue.lock().queue.len(), 2);
    }
}
