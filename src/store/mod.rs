//! Storage: one libSQL database (a local file, or a remote server for remote-only engines),
//! its connections, pragmas and schema migrations.
//!
//! Architecture invariant: a [`Store`] is the only owner of connections to its file in this
//! process (the engine registry guarantees one `Store` per canonical path). Writes go through
//! the single writer connection behind an async mutex, so writers queue instead of fighting
//! over SQLite's lock; reads take a connection from a small pool and run concurrently (WAL).

mod migrations;
mod pool;
mod pragmas;
mod statements;
mod tx;

pub(crate) use migrations::migrate;
pub use migrations::{Home, SchemaStatus};
pub use pool::Reader;
pub use statements::Cached;
pub use tx::{begin_write, WriteTarget, WriteTx};

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
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            busy_timeout: Duration::from_secs(5),
            read_connections: 4,
        }
    }
}

/// An open database: one writer connection and a pool of readers.
pub struct Store {
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
    /// Fails with `ENGRAM_CORRUPT` for a file that is not a database, `ENGRAM_SCHEMA_TOO_NEW`
    /// for a file written by a newer engram, and `ENGRAM_IO` when the file cannot be opened.
    pub async fn open(path: &Path, options: &StoreOptions) -> Result<Store> {
        let display = path.display().to_string();
        let db = Builder::new_local(path)
            .build()
            .await
            .map_err(|e| Error::db(format!("opening {display}"), e))?;

        let writer = db.connect().ctx("connecting writer")?;
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

        Ok(Store::assemble(
            path.to_path_buf(),
            db,
            writer,
            readers,
            schema,
            false,
        ))
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
        let schema = migrations::migrate(&writer, Home::ALL).await?;
        let readers = (0..options.read_connections.max(1))
            .map(|_| db.connect().ctx("connecting reader"))
            .collect::<Result<Vec<_>>>()?;
        Ok(Store::assemble(display, db, writer, readers, schema, true))
    }

    fn assemble(
        path: PathBuf,
        db: Database,
        writer: Connection,
        readers: Vec<Connection>,
        schema: Vec<SchemaStatus>,
        remote: bool,
    ) -> Store {
        Store {
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

    /// Schema version per home, as found after migration.
    pub fn schema(&self) -> &[SchemaStatus] {
        &self.schema
    }

    /// Waits for the single writer connection. Hold the guard only for the duration of one
    /// write transaction: every other writer in the process queues behind it.
    pub async fn writer(&self) -> Writer<'_> {
        Writer {
            conn: Some(Arc::clone(&self.writer).lock_owned().await),
            written: &self.written,
            remote: self.remote,
        }
    }

    /// Notified (to current waiters only) each time the writer is released.
    pub(crate) fn written(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.written.clone()
    }

    /// Takes a pooled read connection (waits when all are busy).
    pub async fn reader(&self) -> Reader<'_> {
        self.readers.get().await
    }
}

/// The writer connection and its prepared statements.
struct WriterConn {
    conn: Connection,
    statements: StatementCache,
}

/// The writer connection, held exclusively (see [`Store::writer`]).
pub struct Writer<'a> {
    /// Always present until drop (taken there to hand a remote rollback to a task).
    conn: Option<OwnedMutexGuard<WriterConn>>,
    written: &'a tokio::sync::Notify,
    remote: bool,
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
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
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
