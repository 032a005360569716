//! Storage: one libSQL database (a local file, or a remote server for remote-only engines),
//! its connections, pragmas and schema migrations.
//!
//! Architecture invariant: a [`Store`] is the only owner of connections to its file in this
//! process (the engine registry guarantees one `Store` per canonical path). Writes go through
//! the single writer connection behind an async mutex, so writers queue instead of fighting
//! over SQLite's lock; reads take a connection from a small pool and run concurrently (WAL).

mod checkpoint;
pub mod integrity;
mod migrations;
#[cfg(test)]
pub(crate) mod plan;
mod pool;
mod pragmas;
pub(crate) mod process;
mod statements;
mod tx;

pub(crate) use migrations::migrate;
pub use migrations::{Home, SchemaStatus};
pub use pool::Reader;
pub use statements::Cached;
pub use tx::{begin_write, RemoteConnection, WriteTarget, WriteTx};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use libsql::{Builder, Connection, Database};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::error::{DbContext, Error, Result};
use pool::ReaderPool;
use statements::StatementCache;

/// Tuning knobs for opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How long a statement waits for another process's lock before failing with
    /// `ENGRAM_SQLITE_BUSY`.
    pub busy_timeout: Duration,
    /// Number of pooled read connections (reads beyond this many wait for a free one).
    pub read_connections: usize,
    /// Whether a local file gets its whole-file integrity check in the background, a few
    /// seconds after it opens (see `store::integrity`).
    pub background_integrity_check: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            busy_timeout: Duration::from_secs(5),
            read_connections: 4,
            background_integrity_check: true,
        }
    }
}

/// An open database: one writer connection and a pool of readers.
pub struct Store {
    /// First: its thread and connection end before anything else of the store.
    checkpointer: Option<checkpoint::Checkpointer>,
    /// The background integrity check (local files), stopped with the store.
    integrity_check: Option<integrity::Background>,
    /// Damage found in the file: writes are refused once it is known.
    damage: Arc<integrity::Damage>,
    path: PathBuf,
    // Kept alive for as long as connections exist; libSQL ties connections to it.
    _db: Database,
    writer: Arc<Mutex<WriterConn>>,
    /// The connections are Hrana streams to a server (a remote-only engine).
    remote: bool,
    readers: ReaderPool,
    schema: Vec<SchemaStatus>,
    /// Notified whenever the writer is released (a write may have happened): the sync loop
    /// pushes soon after local writes instead of waiting for its interval.
    written: std::sync::Arc<tokio::sync::Notify>,
    /// The writer's releases (for the checkpointer and idle-time work).
    released: Arc<Releases>,
}

/// A thread of lowered priority must not take the writer (see `thread_priority`): app
/// writes would queue behind a holder that gets a tenth of a busy core.
fn debug_assert_not_lowered() {
    debug_assert!(
        !crate::thread_priority::is_lowered(),
        "a thread of lowered priority took the store's writer; run the section on the \
         engine's runtime"
    );
}

/// What the writer's releases leave behind for background work, without a syscall on the
/// write path: how many there were, and when the last one was (microseconds since the store
/// opened).
#[derive(Debug)]
pub(crate) struct Releases {
    origin: std::time::Instant,
    last_micros: std::sync::atomic::AtomicU64,
    count: std::sync::atomic::AtomicU64,
}

impl Releases {
    fn new() -> Self {
        Releases {
            origin: std::time::Instant::now(),
            last_micros: Default::default(),
            count: Default::default(),
        }
    }

    fn now_micros(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn mark(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.last_micros.store(self.now_micros(), Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    /// How many times the writer was released.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How long ago the writer was last released.
    fn since_last(&self) -> Duration {
        let at = self.last_micros.load(std::sync::atomic::Ordering::Relaxed);
        Duration::from_micros(self.now_micros().saturating_sub(at))
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path`, applies pragmas and migrates every
    /// schema home to the newest version this build knows.
    ///
    /// Fails with `ENGRAM_CORRUPT` for a file that is not a database, `ENGRAM_INVALID_ARG` for
    /// a SQLite database of another application (tables but no `engram_schema`: nothing is
    /// written to it, not even the WAL switch), `ENGRAM_SCHEMA_TOO_NEW` for a file written by a
    /// newer engram, and `ENGRAM_IO` when the file cannot be opened.
    pub async fn open(path: &Path, options: &StoreOptions) -> Result<Store> {
        let display = path.display().to_string();
        // The cheap part of the integrity check: header and length, before SQLite reads it.
        if let Err(what) = integrity::check_header(path) {
            return Err(integrity::corrupt(path, &what));
        }
        process::configure();
        let db = Builder::new_local(path)
            .build()
            .await
            .map_err(|e| Error::db(format!("opening {display}"), e))?;

        let writer = db.connect().ctx("connecting writer")?;
        // Before the first write (the WAL switch is one): another application's database is
        // refused untouched. A closing engine of this file may hold a lock: wait for it.
        writer
            .busy_timeout(options.busy_timeout)
            .ctx("setting busy timeout")?;
        migrations::refuse_foreign(&writer, &display)
            .await
            .map_err(|e| e.with_path(&display))?;
        pragmas::apply_writer(&writer, options.busy_timeout)
            .await
            .map_err(|e| e.with_path(&display))?;
        let schema = migrations::migrate(&writer, Home::ALL)
            .await
            .map_err(|e| e.with_path(&display))?;

        let mut readers = Vec::with_capacity(options.read_connections.max(1));
        for _ in 0..options.read_connections.max(1) {
            let conn = db.connect().ctx("connecting reader")?;
            pragmas::apply_reader(&conn, options.busy_timeout).await?;
            readers.push(conn);
        }

        let released = Arc::new(Releases::new());
        let checkpoints = db.connect().ctx("connecting checkpointer")?;
        pragmas::apply_checkpointer(&checkpoints, options.busy_timeout).await?;
        let mut store = Store::assemble(
            path.to_path_buf(),
            db,
            writer,
            readers,
            schema,
            false,
            released,
        );
        let checkpointer = checkpoint::Checkpointer::start(
            checkpoints,
            Arc::clone(&store.released),
            Arc::clone(&store.writer),
        )
        .map_err(|e| Error::io("starting the checkpoint thread", e))?;
        store.checkpointer = Some(checkpointer);
        if options.background_integrity_check {
            let checks = store._db.connect().ctx("connecting the integrity check")?;
            pragmas::apply_scanner(&checks, options.busy_timeout).await?;
            store.integrity_check = Some(
                integrity::Background::start(checks, Arc::clone(&store.damage))
                    .map_err(|e| Error::io("starting the integrity check thread", e))?,
            );
        }
        Ok(store)
    }

    /// Connects to the database `url` on a libSQL server (remote-only: every statement is a
    /// request to the server) and migrates every schema home there. `display` names it in
    /// errors and [`Store::path`].
    ///
    /// There are no pragmas to apply: the server runs WAL with foreign keys on, and busy
    /// waits are its business.
    pub async fn open_remote(
        url: &str,
        token: &str,
        display: PathBuf,
        options: &StoreOptions,
    ) -> Result<Store> {
        let db = Builder::new_remote(url.to_owned(), token.to_owned())
            .build()
            .await
            .map_err(|e| Error::db(format!("connecting to {url}"), e))?;
        let writer = db.connect().ctx("connecting writer")?;
        let schema = Store::migrate_remote(&writer).await?;
        let readers = (0..options.read_connections.max(1))
            .map(|_| db.connect().ctx("connecting reader"))
            .collect::<Result<Vec<_>>>()?;
        let released = Arc::new(Releases::new());
        Ok(Store::assemble(
            display, db, writer, readers, schema, true, released,
        ))
    }

    /// Applies the migrations on a server, again when the server interrupts one: each
    /// migration is atomic and re-checked under the write lock, so a second pass applies only
    /// what the first did not.
    async fn migrate_remote(writer: &Connection) -> Result<Vec<SchemaStatus>> {
        const ATTEMPTS: u32 = 5;
        let mut attempt = 1;
        loop {
            match migrations::migrate(&RemoteConnection(writer), Home::ALL).await {
                Err(Error::Busy { context, .. }) if attempt < ATTEMPTS => {
                    tracing::debug!(attempt, %context, "the server interrupted a migration; again");
                    tokio::time::sleep(std::time::Duration::from_millis(20 << attempt)).await;
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    fn assemble(
        path: PathBuf,
        db: Database,
        writer: Connection,
        readers: Vec<Connection>,
        schema: Vec<SchemaStatus>,
        remote: bool,
        released: Arc<Releases>,
    ) -> Store {
        Store {
            checkpointer: None,
            integrity_check: None,
            damage: Arc::new(integrity::Damage::new(path.clone())),
            path,
            _db: db,
            writer: Arc::new(Mutex::new(WriterConn {
                conn: writer,
                statements: StatementCache::new(remote),
            })),
            remote,
            readers: ReaderPool::new(readers, remote),
            schema,
            written: Default::default(),
            released,
        }
    }

    /// The database file this store owns (for a remote-only store, `remote:` and the URL).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this store talks to a server instead of a local file.
    pub fn is_remote(&self) -> bool {
        self.remote
    }

    /// The damage found in the file so far (by [`Store::check_integrity`] or the background
    /// check), if any: writes are refused with `ENGRAM_CORRUPT` once it is known.
    pub fn damage(&self) -> Option<String> {
        self.damage.found()
    }

    /// Runs SQLite's `quick_check` over the whole file now (O(file size)) on a reader, marks
    /// what it finds, and returns the problems (empty: sound). Remote stores are the server's
    /// business: always empty.
    pub async fn check_integrity(&self) -> Result<Vec<String>> {
        if self.remote {
            return Ok(Vec::new());
        }
        let problems = {
            let reader = self.reader().await;
            integrity::quick_check(&reader).await?
        };
        self.damage.mark_problems(&problems);
        Ok(problems)
    }

    /// Schema version per home, as found after migration.
    pub fn schema(&self) -> &[SchemaStatus] {
        &self.schema
    }

    /// Waits for the single writer connection. Hold the guard only for the duration of one
    /// write transaction: every other writer in the process queues behind it. A wait or a
    /// hold longer than `ENGRAM_SLOW_MS` is logged with the caller's location.
    #[track_caller]
    pub fn writer(&self) -> impl std::future::Future<Output = Writer<'_>> + '_ {
        let site = std::panic::Location::caller();
        async move {
            debug_assert_not_lowered();
            let held = Held::asked(site);
            let conn = Arc::clone(&self.writer).lock_owned().await;
            Writer {
                conn: Some(conn),
                written: &self.written,
                released: &self.released,
                remote: self.remote,
                damage: &self.damage,
                held: held.taken(),
            }
        }
    }

    /// The writer, if it is free and has been for at least `idle` (for background work that
    /// must not delay a burst of writes); otherwise how long to wait before asking again.
    #[track_caller]
    pub(crate) fn writer_if_idle(
        &self,
        idle: Duration,
    ) -> std::result::Result<Writer<'_>, Duration> {
        let since = self.released.since_last();
        if since < idle {
            return Err(idle - since);
        }
        debug_assert_not_lowered();
        match Arc::clone(&self.writer).try_lock_owned() {
            Ok(conn) => Ok(Writer {
                conn: Some(conn),
                written: &self.written,
                released: &self.released,
                remote: self.remote,
                damage: &self.damage,
                held: Held::asked(std::panic::Location::caller()),
            }),
            Err(_) => Err(idle),
        }
    }

    /// The writer, if it is free and nobody has taken it since it was released for the
    /// `count`th time (see [`Store::writer_releases`]): background work that yields the
    /// writer between short passes goes on at once when no write came in between.
    #[track_caller]
    pub(crate) fn writer_if_unused_since(&self, count: u64) -> Option<Writer<'_>> {
        debug_assert_not_lowered();
        let conn = Arc::clone(&self.writer).try_lock_owned().ok()?;
        // Counted once the writer is ours (releases are counted before the unlock), so no
        // write can slip in between; backing out drops the bare guard, which counts nothing.
        if self.released.count() != count {
            return None;
        }
        Some(Writer {
            conn: Some(conn),
            written: &self.written,
            released: &self.released,
            remote: self.remote,
            damage: &self.damage,
            held: Held::asked(std::panic::Location::caller()),
        })
    }

    /// How many times the writer has been released so far.
    pub(crate) fn writer_releases(&self) -> u64 {
        self.released.count()
    }

    /// Notified (to current waiters only) each time the writer is released.
    pub(crate) fn written(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.written.clone()
    }

    /// Takes a pooled read connection (waits when all are busy). A wait or a hold longer than
    /// `ENGRAM_SLOW_MS` is logged with the caller's location.
    #[track_caller]
    pub fn reader(&self) -> impl std::future::Future<Output = Reader<'_>> + '_ {
        let site = std::panic::Location::caller();
        async move { self.readers.get(Held::asked(site)).await }
    }
}

/// The writer connection and its prepared statements.
struct WriterConn {
    conn: Connection,
    statements: StatementCache,
}

/// When a connection was asked for and taken, and by whom: a slow wait or hold is logged
/// (`engram::store`, warn) when the connection goes back.
pub(crate) struct Held {
    site: &'static std::panic::Location<'static>,
    asked: std::time::Instant,
    waited: Duration,
}

impl Held {
    /// Asked for now, by the code at `site`.
    fn asked(site: &'static std::panic::Location<'static>) -> Held {
        Held {
            site,
            asked: std::time::Instant::now(),
            waited: Duration::ZERO,
        }
    }

    /// Taken now: the time since it was asked for was a wait.
    pub(crate) fn taken(mut self) -> Held {
        self.waited = self.asked.elapsed();
        self
    }

    /// Logs the use if it was slow; `what` names the connection, `sql` the slowest statement
    /// known to have run on it.
    pub(crate) fn end(&self, what: &'static str, sql: Option<&'static str>) {
        let total = self.asked.elapsed();
        let threshold = crate::log::slow_threshold();
        if total < threshold {
            return;
        }
        let held = total.saturating_sub(self.waited);
        tracing::warn!(
            at = %self.site,
            waited_ms = crate::log::ms(self.waited),
            held_ms = crate::log::ms(held),
            sql = sql.map(collapse_whitespace),
            "slow {what}: {} ms (over {} ms)",
            total.as_millis(),
            threshold.as_millis()
        );
    }
}

/// `sql` on one line, at most 200 bytes (for log lines).
fn collapse_whitespace(sql: &str) -> String {
    let one_line = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::text::clip_bytes(&one_line, 200).to_owned()
}

/// The writer connection, held exclusively (see [`Store::writer`]).
pub struct Writer<'a> {
    /// Always present until drop (taken there to hand a remote rollback to a task).
    conn: Option<OwnedMutexGuard<WriterConn>>,
    written: &'a tokio::sync::Notify,
    released: &'a Releases,
    remote: bool,
    /// The store's damage: a write transaction begun on a damaged file is refused.
    damage: &'a integrity::Damage,
    held: Held,
}

impl Writer<'_> {
    fn held(&self) -> &WriterConn {
        self.conn.as_ref().expect("present until drop")
    }

    /// The writer's cached statement for `sql`, usable inside a transaction begun on this
    /// connection (it is the same connection). Hot write paths use it: preparing an insert
    /// of every memory column costs more than running it.
    pub async fn cached(&mut self, sql: &'static str) -> Result<Cached> {
        let WriterConn { conn, statements } =
            &mut **self.conn.as_mut().expect("present until drop");
        statements.get(conn, sql).await
    }
}

impl std::ops::Deref for Writer<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.held().conn
    }
}

impl WriteTarget for Writer<'_> {
    fn connection(&self) -> &Connection {
        &self.held().conn
    }

    fn is_remote(&self) -> bool {
        self.remote
    }

    fn refused(&self) -> Option<Error> {
        self.damage.refusal()
    }
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        // Counted before the unlock: whoever takes the writer next sees this release.
        self.released.mark();
        if let Some(held) = self.conn.take() {
            // A remote transaction left open (an error between BEGIN and COMMIT) is rolled
            // back by a task that keeps the writer until it is done, so the next writer
            // starts clean and the server's write lock is not held until then.
            if self.remote && !held.conn.is_autocommit() {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        if held.conn.execute("ROLLBACK", ()).await.is_err() {
                            held.conn.reset().await;
                        }
                        drop(held);
                    });
                }
            }
        }
        self.written.notify_waiters();
        self.held.end("write", None);
    }
}

impl Error {
    /// Adds the file path to a corruption or I/O error's context (callers branch on the code;
    /// humans need to know which file).
    pub(crate) fn with_path(self, path: &str) -> Error {
        match self {
            Error::Corrupt { context, source } => Error::Corrupt {
                context: format!("{context}: {path}"),
                source,
            },
            Error::Io { context, source } => Error::Io {
                context: format!("{context}: {path}"),
                source,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reader_dropped_inside_a_transaction_is_rolled_back_before_reuse() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("reuse.db"), &StoreOptions::default())
            .await
            .unwrap();
        let write = |sql: &'static str| {
            let store = &store;
            async move { store.writer().await.execute(sql, ()).await.unwrap() }
        };
        write("CREATE TABLE seen (n INTEGER)").await;
        write("INSERT INTO seen VALUES (1)").await;
        let count = "SELECT count(*) FROM seen";
        let mut reader = store.reader().await;
        reader.execute("BEGIN", ()).await.unwrap();
        assert_eq!(reader.query_integer(count, ()).await.unwrap(), 1);
        drop(reader); // as a cancelled future drops it: no COMMIT
        write("INSERT INTO seen VALUES (2)").await;
        // The pool hands the last returned connection out first.
        let mut reader = store.reader().await;
        assert!(reader.is_autocommit());
        assert_eq!(reader.query_integer(count, ()).await.unwrap(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_write_and_a_slow_read_are_logged_with_their_caller() {
        let (dispatch, out) = crate::log::testing::capture("engram::store=warn");
        // The test's body runs on this thread, and so do the guards' drops.
        let _scope = tracing::dispatcher::set_default(&dispatch);
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("slow.db"), &StoreOptions::default())
            .await
            .unwrap();
        let slow = crate::log::slow_threshold() + Duration::from_millis(20);
        drop(store.writer().await);
        drop(store.reader().await);
        assert_eq!(out.text(), "", "quick uses are not logged");

        let write_line = line!() + 1;
        let writer = store.writer().await;
        tokio::time::sleep(slow).await;
        drop(writer);
        let read_line = line!() + 1;
        let mut reader = store.reader().await;
        reader.query_integer("SELECT   1\n  + 1", ()).await.unwrap();
        tokio::time::sleep(slow).await;
        drop(reader);

        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("WARN engram::store: slow write:"),
            "{text}"
        );
        assert!(
            lines[0].contains(&format!(" at=src/store/mod.rs:{write_line}:")),
            "{text}"
        );
        assert!(
            lines[1].contains("WARN engram::store: slow read:"),
            "{text}"
        );
        assert!(
            lines[1].contains(&format!(" at=src/store/mod.rs:{read_line}:")),
            "{text}"
        );
        assert!(lines[1].contains(" sql=\"SELECT 1 + 1\""), "{text}");
    }
}
