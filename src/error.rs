//! The one error type of the core, with the stable codes that reach JavaScript.
//!
//! Every failure is data: it carries a machine-readable [`Error::code`] (listed in `index.d.ts`)
//! and, where there is one, the underlying cause (a libSQL or I/O error) as its `source()`.
//! The binding maps each variant to a JS `Error` whose `code` is this string.

use std::fmt;

/// Result alias used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed underlying cause (libSQL, I/O, JSON...).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Every way an engram operation can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The handle was closed; every later call fails with this.
    #[error("the engram handle is closed")]
    Closed,
    /// An argument was missing, of the wrong type, out of range or over a limit.
    #[error("invalid argument: {0}")]
    InvalidArg(String),
    /// The thing asked for does not exist (in this project).
    #[error("{what} not found: {id}")]
    NotFound {
        /// What kind of thing was looked up ("memory", "version"...).
        what: &'static str,
        /// The identifier that was not found.
        id: String,
    },
    /// The change would break a uniqueness rule (e.g. an update that makes a memory identical to
    /// another active one in the same scope).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A graph write would close a cycle among edges of a kind that must stay acyclic
    /// (`supersedes`, `caused_by`, `part_of`, `derived_from`); the whole write was rolled back.
    #[error("cycle: {0}")]
    Cycle(String),
    /// Another process holds a lock on the database longer than the busy timeout, or a
    /// remote server interrupted the statement (its transaction was rolled back): retry.
    #[error("database is busy: {context}")]
    Busy {
        /// What engram was doing.
        context: String,
        /// The libSQL error.
        #[source]
        source: Cause,
    },
    /// The file is not a database, or its pages are damaged.
    #[error("database file is corrupt or not a database ({context})")]
    Corrupt {
        /// What engram was doing and which file.
        context: String,
        /// The libSQL error.
        #[source]
        source: Cause,
    },
    /// The file was written by a newer engram whose schema this build does not know.
    #[error(
        "database schema '{home}' is at version {found}, newer than the {supported} this engram supports; upgrade engram"
    )]
    SchemaTooNew {
        /// Which schema home (e.g. "main").
        home: &'static str,
        /// Version found in the file.
        found: i64,
        /// Highest version this build knows.
        supported: i64,
    },
    /// A file-system operation failed (cannot open, disk full, permission...).
    #[error("I/O error: {context}")]
    Io {
        /// What engram was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: Cause,
    },
    /// Any other database failure.
    #[error("database error: {context}")]
    Db {
        /// What engram was doing.
        context: String,
        /// The libSQL error.
        #[source]
        source: Cause,
    },
    /// The operation was cancelled through its AbortSignal / cancellation token.
    #[error("operation aborted")]
    Aborted,
    /// A function the app supplied (e.g. a relation deriver) threw, rejected, or returned
    /// something that is not what it must return.
    #[error("callback failed: {0}")]
    Callback(String),
    /// No embedding model is available (not installed, files missing or not a supported model).
    /// The engine keeps working without the dense path.
    #[error("embedding model unavailable: {0}")]
    ModelUnavailable(String),
    /// The embedding provider failed (inference error, server error or malformed answer).
    #[error("embedding failed: {0}")]
    Embedding(String),
    /// The reranker failed (server down or refusing, callback error, malformed scores). Recall
    /// reports it in `skipped` and keeps the fused order.
    #[error("rerank failed: {0}")]
    Rerank(String),
    /// The sync server cannot be reached (refused, timed out, name not resolved). Local reads
    /// and writes go on; changes wait in the outbox and the sync loop retries with back-off.
    #[error("sync server unreachable: {0}")]
    SyncUnreachable(String),
    /// The sync server refused the credentials (a missing, wrong or expired auth token).
    #[error("sync server refused the credentials: {0}")]
    SyncAuth(String),
    /// The sync settings are invalid or do not match the file (another server URL than the
    /// one the file syncs with, a replica file opened as a plain database, sync not set up).
    #[error("sync configuration: {0}")]
    SyncConfig(String),
    /// The server does not speak the protocol the chosen sync mode needs (offline writes are a
    /// Turso Cloud protocol a self-hosted `sqld` answers with 404).
    #[error("sync mode unsupported by the server: {0}")]
    SyncUnsupported(String),
    /// Any other failure while syncing (the server answered with an error).
    #[error("sync failed: {0}")]
    Sync(String),
    /// Downloading the built-in model failed: the network, an HTTP status, or a file whose
    /// SHA-256 did not match the pinned one. What was fully received is kept for the next run.
    #[error("model download failed: {0}")]
    Download(String),
    /// A bug: an invariant broke or a panic was caught. Please report it.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The stable, machine-readable code JS code can branch on.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Closed => "ENGRAM_CLOSED",
            Error::InvalidArg(_) => "ENGRAM_INVALID_ARG",
            Error::NotFound { .. } => "ENGRAM_NOT_FOUND",
            Error::Conflict(_) => "ENGRAM_CONFLICT",
            Error::Cycle(_) => "ENGRAM_CYCLE",
            Error::Busy { .. } => "ENGRAM_SQLITE_BUSY",
            Error::Corrupt { .. } => "ENGRAM_CORRUPT",
            Error::SchemaTooNew { .. } => "ENGRAM_SCHEMA_TOO_NEW",
            Error::Io { .. } => "ENGRAM_IO",
            Error::Db { .. } => "ENGRAM_DB",
            Error::Aborted => "ENGRAM_ABORTED",
            Error::Callback(_) => "ENGRAM_CALLBACK",
            Error::ModelUnavailable(_) => "ENGRAM_MODEL_UNAVAILABLE",
            Error::Embedding(_) => "ENGRAM_EMBEDDING",
            Error::Rerank(_) => "ENGRAM_RERANK",
            Error::SyncUnreachable(_) => "ENGRAM_SYNC_UNREACHABLE",
            Error::SyncAuth(_) => "ENGRAM_SYNC_AUTH",
            Error::SyncConfig(_) => "ENGRAM_SYNC_CONFIG",
            Error::SyncUnsupported(_) => "ENGRAM_SYNC_UNSUPPORTED",
            Error::Sync(_) => "ENGRAM_SYNC",
            Error::Download(_) => "ENGRAM_DOWNLOAD",
            Error::Internal(_) => "ENGRAM_INTERNAL",
        }
    }

    /// Shorthand for [`Error::InvalidArg`].
    pub fn invalid(msg: impl fmt::Display) -> Self {
        Error::InvalidArg(msg.to_string())
    }

    /// Shorthand for [`Error::NotFound`].
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        Error::NotFound {
            what,
            id: id.into(),
        }
    }

    /// Classifies a libSQL error by its SQLite result code.
    ///
    /// Why by code: callers branch on "busy" (retry later), "corrupt" (restore a backup) and
    /// "I/O" (disk full, permissions) very differently, and the message text is not stable.
    pub fn db(context: impl Into<String>, err: libsql::Error) -> Self {
        let context = context.into();
        // A remote-only engine's statements are requests: a refused token or an unreachable
        // server is a sync failure, not a database one.
        if matches!(err, libsql::Error::Hrana(_)) {
            if let Some(failure) = crate::sync::remote_failure(&context, &err) {
                return failure;
            }
            // sqld interrupts a stream's statement now and then (seen with 0.24 while a fresh
            // schema is built, and about once in 2,000 writes after): the server rolled the
            // transaction back, and the same request succeeds when sent again.
            if crate::sync::remote_interrupted(&err) {
                return Error::Busy {
                    context: format!("{context} (the server interrupted it; retry)"),
                    source: Box::new(err),
                };
            }
        }
        let primary = match &err {
            libsql::Error::SqliteFailure(code, _) => Some(code & 0xff),
            _ => None,
        };
        let source: Cause = Box::new(err);
        match primary {
            Some(SQLITE_BUSY) | Some(SQLITE_LOCKED) => Error::Busy { context, source },
            Some(SQLITE_CORRUPT) | Some(SQLITE_NOTADB) => Error::Corrupt { context, source },
            Some(SQLITE_IOERR)
            | Some(SQLITE_FULL)
            | Some(SQLITE_CANTOPEN)
            | Some(SQLITE_PERM)
            | Some(SQLITE_READONLY) => Error::Io { context, source },
            _ => Error::Db { context, source },
        }
    }

    /// Wraps an I/O error with what engram was doing.
    pub fn io(context: impl Into<String>, err: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source: Box::new(err),
        }
    }
}

// SQLite primary result codes (sqlite3.h); libsql reports extended codes, we mask to these.
const SQLITE_PERM: i32 = 3;
const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;
const SQLITE_READONLY: i32 = 8;
const SQLITE_IOERR: i32 = 10;
const SQLITE_CORRUPT: i32 = 11;
const SQLITE_FULL: i32 = 13;
const SQLITE_CANTOPEN: i32 = 14;
const SQLITE_NOTADB: i32 = 26;

/// Extension to attach context to libSQL results.
pub trait DbContext<T> {
    /// Maps a libSQL error into [`Error`] with a description of what was being done.
    fn ctx(self, context: &str) -> Result<T>;
}

impl<T> DbContext<T> for std::result::Result<T, libsql::Error> {
    fn ctx(self, context: &str) -> Result<T> {
        self.map_err(|e| Error::db(context, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_sqlite_codes() {
        let busy = Error::db(
            "x",
            libsql::Error::SqliteFailure(5, "database is locked".into()),
        );
        assert_eq!(busy.code(), "ENGRAM_SQLITE_BUSY");
        // Extended code SQLITE_BUSY_SNAPSHOT (517) masks to BUSY.
        let busy_ext = Error::db("x", libsql::Error::SqliteFailure(517, "snap".into()));
        assert_eq!(busy_ext.code(), "ENGRAM_SQLITE_BUSY");
        let notadb = Error::db("x", libsql::Error::SqliteFailure(26, "not a db".into()));
        assert_eq!(notadb.code(), "ENGRAM_CORRUPT");
        let other = Error::db("x", libsql::Error::SqliteFailure(1, "syntax".into()));
        assert_eq!(other.code(), "ENGRAM_DB");
        assert!(std::error::Error::source(&other).is_some());
    }
}
