//! What the sync loop reports: one run's result, the standing status, and the events
//! listeners receive.

use serde::Serialize;

/// Where sync stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncState {
    /// The engine was opened without `sync`.
    Disabled,
    /// A remote-only engine: every call reads and writes the server, there is nothing to sync.
    Remote,
    /// Waiting for the next run; the last one succeeded (or none ran yet).
    Idle,
    /// A run is going.
    Syncing,
    /// The last run could not reach the server; retrying with back-off.
    Offline,
    /// The last run failed otherwise (auth, schema, server error); retrying with back-off.
    Error,
}

/// A failed run, as status and events report it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncFailure {
    /// The error's `ENGRAM_*` code.
    pub code: String,
    /// What went wrong.
    pub message: String,
    /// When (ms since the epoch, engine clock).
    pub at: i64,
}

/// One successful run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    /// Frames the replica received.
    pub frames: u64,
    /// The replica's frame number afterwards.
    pub frame_no: Option<u64>,
    /// Outbox changes pushed to the server.
    pub pushed: u64,
    /// Server rows written or deleted by the push.
    pub pushed_rows: u64,
    /// Server log changes read.
    pub pulled: u64,
    /// Local rows written or deleted by the pull.
    pub pulled_rows: u64,
    /// Memories archived because another device's active memory had the same content.
    pub duplicates: u64,
    /// Local changes still waiting for the server after the run.
    pub pending: u64,
    /// Wall time of the run.
    pub duration_ms: f64,
}

/// Running totals since the engine opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncTotals {
    /// Successful runs.
    pub syncs: u64,
    /// Failed runs.
    pub failures: u64,
    /// Frames received.
    pub frames: u64,
    /// Changes pushed.
    pub pushed: u64,
    /// Changes pulled.
    pub pulled: u64,
}

/// The sync status of an engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    /// Where sync stands.
    pub state: SyncState,
    /// The server (without credentials), when sync is on.
    pub url: Option<String>,
    /// `forwarded` | `offline_writes` | `remote`, when sync is on.
    pub mode: Option<&'static str>,
    /// This file's device id on the server.
    pub device_id: Option<String>,
    /// The configured interval between runs.
    pub interval_ms: u64,
    /// Local changes waiting for the server (the outbox).
    pub pending: u64,
    /// When the last run started.
    pub last_attempt_at: Option<i64>,
    /// When the last successful run ended.
    pub last_success_at: Option<i64>,
    /// The last successful run.
    pub last_report: Option<SyncReport>,
    /// The last failure (kept after a later success, for diagnostics).
    pub last_error: Option<SyncFailure>,
    /// Failed runs since the last success (the back-off grows with it).
    pub consecutive_failures: u32,
    /// When the loop runs next (ms since the epoch), unless woken by a write or `sync()`.
    pub next_attempt_at: Option<i64>,
    /// Running totals.
    pub totals: SyncTotals,
}

impl SyncStatus {
    /// The status of a remote-only engine on `url`.
    pub fn remote(url: &str) -> Self {
        SyncStatus {
            state: SyncState::Remote,
            url: Some(url.to_owned()),
            mode: Some("remote"),
            ..SyncStatus::disabled()
        }
    }

    /// The status of an engine without sync.
    pub fn disabled() -> Self {
        SyncStatus {
            state: SyncState::Disabled,
            url: None,
            mode: None,
            device_id: None,
            interval_ms: 0,
            pending: 0,
            last_attempt_at: None,
            last_success_at: None,
            last_report: None,
            last_error: None,
            consecutive_failures: 0,
            next_attempt_at: None,
            totals: SyncTotals::default(),
        }
    }
}

/// What listeners receive after every run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SyncEvent {
    /// A run succeeded.
    #[serde(rename_all = "camelCase")]
    Synced {
        /// What it did.
        report: SyncReport,
    },
    /// A run failed; the loop retries after `retryInMs`.
    #[serde(rename_all = "camelCase")]
    Failed {
        /// What went wrong.
        error: SyncFailure,
        /// Failed runs since the last success.
        consecutive_failures: u32,
        /// The back-off before the next run.
        retry_in_ms: u64,
    },
}
