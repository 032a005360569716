//! Checkpoints off the write path: a thread of the store copies the WAL back into the
//! database file while the writer goes on writing.
//!
//! Why: SQLite's automatic checkpoint runs inside the commit that pushes the WAL past 1,000
//! pages, so that commit also copies those pages and waits for two `fsync`s: one `remember`
//! in ~70 took 5-7 ms instead of ~0.3. A passive checkpoint needs no write lock, so a
//! connection of its own can do the same work beside the writer.
//!
//! While writes never pause, a passive checkpoint cannot reach the end of the WAL, and the WAL
//! only starts over from its beginning once one has. So when the WAL holds more than
//! [`RESTART_FRAMES`], the thread takes the store's writer (a write then waits, on the runtime
//! and never on a JS thread) and checkpoints to the end. The writer's own automatic
//! checkpoint stays, far above that, as a backstop should this thread be gone.
//!
//! Invariant: the thread and its connection are gone when the [`Checkpointer`] is dropped
//! (the store drops it first), so nothing touches the file after the store is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libsql::Connection;

use super::Releases;

/// Writer releases (writes, roughly) after which the thread checkpoints even if writes go on.
pub const EVERY_RELEASES: u64 = 64;

/// A pause in writes this long gets the WAL checkpointed at once.
pub const AFTER_QUIET: Duration = Duration::from_millis(100);

/// How often the thread looks at the release count.
const POLL: Duration = Duration::from_millis(10);

/// WAL frames beyond which the thread checkpoints holding the writer (see the module doc).
pub const RESTART_FRAMES: i64 = 4000;

/// The writer's own automatic checkpoint, a backstop (pages of WAL).
pub const WRITER_BACKSTOP_PAGES: u32 = 40_000;

/// The checkpoint thread of one store; stops (and closes its connection) when dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on its own connection `conn` to the file, watching `releases`, with
    /// `writer` to hold when the WAL must be checkpointed to its end.
    pub(crate) fn start<W: Send + 'static>(
        conn: Connection,
        releases: Arc<Releases>,
        writer: Arc<tokio::sync::Mutex<W>>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("engram-checkpoint".into())
            .spawn(move || run(&conn, &releases, &writer, &stopped))?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // At most one checkpoint in progress to wait for.
            let _ = thread.join();
        }
    }
}

fn run<W>(
    conn: &Connection,
    releases: &Releases,
    writer: &tokio::sync::Mutex<W>,
    stop: &AtomicBool,
) {
    let mut checkpointed_at = releases.count();
    let mut last_seen = checkpointed_at;
    let mut last_change = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(POLL);
        let now = releases.count();
        if now != last_seen {
            last_seen = now;
            last_change = Instant::now();
        }
        let pending = now - checkpointed_at;
        let quiet = last_change.elapsed() >= AFTER_QUIET;
        if pending >= EVERY_RELEASES || (pending > 0 && quiet) {
            // A failed checkpoint (the file is busy, or going away) is retried at the next
            // turn; the writer's backstop bounds the WAL meanwhile.
            let Some(wal_frames) = futures::executor::block_on(checkpoint(conn)) else {
                continue;
            };
            if wal_frames > RESTART_FRAMES {
                // No write appends while this is held: the checkpoint reaches the end of the
                // WAL, and the next write starts it over.
                let _writer = writer.blocking_lock();
                futures::executor::block_on(checkpoint(conn));
            }
            checkpointed_at = now;
        }
    }
}

/// One passive checkpoint: copies what it can without waiting for anyone. Returns how many
/// frames the WAL holds (`None` if the checkpoint failed).
async fn checkpoint(conn: &Connection) -> Option<i64> {
    let mut rows = conn
        .query("PRAGMA wal_checkpoint(PASSIVE)", ())
        .await
        .ok()?;
    // One row: busy (0 or 1), frames in the WAL, frames checkpointed.
    let row = rows.next().await.ok()??;
    row.get::<i64>(1).ok()
}
