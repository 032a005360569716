//! The Node-API binding (napi-rs v3). It only converts types, maps errors and wires promises:
//! every behaviour lives in the core modules, which know nothing of JavaScript.
//!
//! Conventions:
//! - Every method that touches the database returns a Promise and runs on the tokio runtime;
//!   the JS thread never waits for SQLite.
//! - Arguments arrive as `Unknown` and are converted here, so a wrong type from JS rejects with
//!   `ENGRAM_INVALID_ARG` (not napi's generic `InvalidArg` / `StringExpected` codes).
//! - Errors become JS `Error`s with a stable `code` and a `cause`; panics are caught and become
//!   `ENGRAM_INTERNAL`.

/// Converts an argument, or returns a Promise rejected with `ENGRAM_INVALID_ARG`.
macro_rules! arg {
    ($env:expr, $result:expr) => {
        match $result {
            Ok(v) => v,
            Err(e) => return $crate::node::error::rejected($env, e),
        }
    };
}

mod agent;
mod agent_file_types;
mod agent_files;
mod args;
mod class;
mod code_types;
mod consolidate;
mod derive;
mod e2e;
mod embed;
mod embed_options;
mod error;
mod graph_class;
mod graph_types;
mod hook;
mod integrity;
mod json;
mod lifecycle;
mod lifecycle_types;
mod logging;
mod observer;
mod panel;
mod panel_types;
mod privacy;
mod recall;
mod reporter;
mod rerank_options;
mod strict;
mod sync;
mod synthesis;
mod text_callback;
mod types;
mod vector;

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Every `code` an engram error can carry. Branch on `err.code`, never on the message.
#[napi(string_enum)]
pub enum ErrorCode {
    /// The handle was closed; open a new one.
    #[napi(value = "ENGRAM_CLOSED")]
    Closed,
    /// An argument is missing, of the wrong type, out of range or over a limit.
    #[napi(value = "ENGRAM_INVALID_ARG")]
    InvalidArg,
    /// No such memory (in this project), version or graph node.
    #[napi(value = "ENGRAM_NOT_FOUND")]
    NotFound,
    /// The change would duplicate another active memory in the same scope, or an index run of
    /// the project is already in progress.
    #[napi(value = "ENGRAM_CONFLICT")]
    Conflict,
    /// A graph write would close a cycle of an acyclic edge kind (`supersedes`, `caused_by`,
    /// `part_of`, `derived_from`); nothing of the write was kept.
    #[napi(value = "ENGRAM_CYCLE")]
    Cycle,
    /// Another process held the database lock longer than `busyTimeoutMs`, or a remote server
    /// interrupted the statement (nothing of it was written); retry later.
    #[napi(value = "ENGRAM_SQLITE_BUSY")]
    SqliteBusy,
    /// The file is not a database or is damaged; restore a backup.
    #[napi(value = "ENGRAM_CORRUPT")]
    Corrupt,
    /// The file was written by a newer engram; upgrade.
    #[napi(value = "ENGRAM_SCHEMA_TOO_NEW")]
    SchemaTooNew,
    /// A file-system failure (cannot open, disk full, permissions).
    #[napi(value = "ENGRAM_IO")]
    Io,
    /// Any other database failure.
    #[napi(value = "ENGRAM_DB")]
    Db,
    /// Cancelled through an AbortSignal.
    #[napi(value = "ENGRAM_ABORTED")]
    Aborted,
    /// A function you passed (`deriveRelations`, an `onProgress`, an `embed` function) threw,
    /// rejected, or returned something of the wrong shape; the message says which.
    #[napi(value = "ENGRAM_CALLBACK")]
    Callback,
    /// No embedding model is available (not installed, files missing, unsupported); the engine
    /// keeps working on BM25 and the graph. `engram model install` fixes it.
    #[napi(value = "ENGRAM_MODEL_UNAVAILABLE")]
    ModelUnavailable,
    /// The embedding provider failed (inference error, server error, malformed answer).
    #[napi(value = "ENGRAM_EMBEDDING")]
    Embedding,
    /// The reranker failed; recall names it in `skipped` and keeps the fused order.
    #[napi(value = "ENGRAM_RERANK")]
    Rerank,
    /// The sync server cannot be reached. Local reads and writes go on; changes wait in the
    /// outbox and the sync loop retries with back-off (`syncStatus()` says when).
    #[napi(value = "ENGRAM_SYNC_UNREACHABLE")]
    SyncUnreachable,
    /// The sync server refused the auth token (missing, wrong or expired).
    #[napi(value = "ENGRAM_SYNC_AUTH")]
    SyncAuth,
    /// Invalid sync options, or options that do not match the file (another server URL than
    /// the one it syncs with, a replica file opened as a plain database, sync not set up).
    #[napi(value = "ENGRAM_SYNC_CONFIG")]
    SyncConfig,
    /// The server does not offer the chosen sync mode (`offlineWrites` needs Turso Cloud's
    /// sync protocol; a self-hosted `sqld` answers 404).
    #[napi(value = "ENGRAM_SYNC_UNSUPPORTED")]
    SyncUnsupported,
    /// Any other sync failure (the server answered with an error).
    #[napi(value = "ENGRAM_SYNC")]
    Sync,
    /// Downloading the model failed: the network, an HTTP status, or a file whose SHA-256 did
    /// not match the pinned one. What was fully received is kept; run the install again to resume.
    #[napi(value = "ENGRAM_DOWNLOAD")]
    Download,
    /// A bug in engram (including a caught panic); please report it.
    #[napi(value = "ENGRAM_INTERNAL")]
    Internal,
}

/// Number of database engines alive in this process (one per open file, shared by every
/// handle and thread). For diagnostics and tests.
#[napi]
pub fn open_engine_count() -> u32 {
    crate::engine::open_engines() as u32
}

/// Test hook: the keys each options object takes (its JS field names), by Rust type name, for
/// the test that compares them with `index.d.ts`. Not part of the API.
#[napi(js_name = "__strictFieldsForTests", skip_typescript)]
pub fn strict_fields_for_tests() -> std::collections::HashMap<String, Vec<String>> {
    strict::registry()
        .into_iter()
        .map(|(name, fields)| (name.to_owned(), fields))
        .collect()
}

/// Test hook: panics inside the runtime so tests can check that a panic reaches JS as
/// `ENGRAM_INTERNAL` instead of crashing the process. Not part of the API.
#[napi(js_name = "__panicForTests", skip_typescript)]
pub fn panic_for_tests(env: &Env) -> Result<PromiseRaw<'_, ()>> {
    error::promise(env, async { panic!("deliberate test panic") }, |()| ())
}
