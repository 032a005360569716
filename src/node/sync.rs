//! The sync surface of the binding: the `sync` open option (with the JS auth-token function),
//! `sync()`, `syncStatus()` and the sync event listeners.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use super::class::Engram;
use super::error::promise;
use super::reporter::Reporter;
use super::strict::Count;
use crate::error::Error as CoreError;
use crate::sync as core;

/// The `sync` option of `Engram.open`: keep this file in sync with a libSQL server (Turso
/// Cloud or a self-hosted `sqld`) through an embedded replica.
///
/// Everything stays local and fast: reads, searches and writes use the local file, and an
/// unreachable server never fails or slows them. Memories (with their history) and the
/// observer's statistics are pushed to the server shortly after each write and pulled from it
/// every `intervalSecs`; personal memories (`shareScope: 'personal'`) and anything the privacy
/// filter redacted never leave the device; the code index, graph and vectors are rebuilt on
/// each device. A file is bound to the first server it syncs with.
///
/// ```ts
/// // Turso Cloud: one database per user (or per user and project)
/// sync: { url: 'libsql://memory-alice.turso.io', authToken: process.env.TURSO_TOKEN }
/// // a self-hosted sqld, and a token your backend issues
/// sync: { url: 'http://sqld.internal:8080', getAuthToken: async () => fetchToken() }
/// ```
#[napi(object, object_to_js = false)]
pub struct SyncOptions {
    /// The server: `libsql://…` (Turso), `https://…`, or `http://…` (e.g. a local `sqld`).
    pub url: String,
    /// The database's auth token (a Turso token, or a JWT your `sqld` verifies).
    pub auth_token: Option<String>,
    /// Called for a token at the first sync and again (with `refresh: true`) whenever the
    /// server refuses one: for tokens that expire.
    #[napi(ts_type = "(refresh: boolean) => string | Promise<string>")]
    pub get_auth_token: Option<TokenFunction>,
    /// How long one `getAuthToken` call may take, in ms (default 30000); past it the sync run
    /// fails with `ENGRAM_CALLBACK`.
    #[napi(ts_type = "number")]
    pub token_timeout_ms: Option<Count>,
    /// Seconds between syncs (default 60, at least 0.1). A local write also starts one
    /// shortly after it (50 ms after writes settle, and at least 250 ms, or the interval if
    /// shorter, after the previous run); `sync()` starts one at once.
    pub interval_secs: Option<f64>,
    /// Push changes as offline writes sent with each sync instead of forwarding each push
    /// transaction to the primary (Turso Cloud's protocol; a self-hosted `sqld` does not offer
    /// it, which syncs report as `ENGRAM_SYNC_UNSUPPORTED`). Default false.
    pub offline_writes: Option<bool>,
}

/// The core's sync options for the JS option.
pub(crate) fn core_sync(o: SyncOptions) -> std::result::Result<core::SyncOptions, CoreError> {
    let mut options = core::SyncOptions::new(o.url);
    options.auth_token = o.auth_token.filter(|t| !t.is_empty());
    if let Some(secs) = o.interval_secs {
        if !secs.is_finite() || secs <= 0.0 {
            return Err(CoreError::SyncConfig(format!(
                "sync.intervalSecs must be a positive number, got {secs}"
            )));
        }
        options.interval = Duration::from_secs_f64(secs.min(1e9));
    }
    if o.offline_writes == Some(true) {
        options.mode = core::SyncMode::OfflineWrites;
    }
    let token_timeout = super::strict::callback_timeout(
        o.token_timeout_ms,
        Duration::from_secs(30),
        "sync.tokenTimeoutMs",
    )?;
    if let Some(TokenFunction(function)) = o.get_auth_token {
        options.token_source = Some(Arc::new(JsTokenSource(Arc::new(function), token_timeout)));
    }
    Ok(options)
}

/// What a JS `getAuthToken` may return.
type TokenReturn = Either<Promise<String>, String>;

/// A JS `getAuthToken(refresh)` callable from the sync loop. Weak: it never keeps the process
/// alive.
type TokenCallback = ThreadsafeFunction<bool, TokenReturn, bool, Status, false, true, 0>;

/// A JS `getAuthToken` function, checked to be one before it is wrapped.
pub struct TokenFunction(TokenCallback);

impl TypeName for TokenFunction {
    fn type_name() -> &'static str {
        "Function"
    }

    fn value_type() -> ValueType {
        ValueType::Function
    }
}

impl ValidateNapiValue for TokenFunction {}

impl FromNapiValue for TokenFunction {
    unsafe fn from_napi_value(
        env: napi::sys::napi_env,
        value: napi::sys::napi_value,
    ) -> Result<Self> {
        // SAFETY: the caller hands a live value of `env`'s current scope.
        unsafe { super::args::js_function(env, value, "sync.getAuthToken") }.map(TokenFunction)
    }
}

/// The core's view of a JS `getAuthToken` function.
struct JsTokenSource(Arc<TokenCallback>, Duration);

impl std::fmt::Debug for JsTokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsTokenSource")
    }
}

impl core::TokenSource for JsTokenSource {
    fn token(&self, refresh: bool) -> futures::future::BoxFuture<'static, crate::Result<String>> {
        let function = Arc::clone(&self.0);
        let limit = self.1;
        Box::pin(async move {
            let failed = |how: &str, e: napi::Error| {
                CoreError::Callback(format!("sync.getAuthToken {how}: {}", e.reason))
            };
            let call = async {
                let answer = function
                    .call_async_catch(refresh)
                    .await
                    .map_err(|e| failed("threw or returned something else than a string", e))?;
                match answer {
                    Either::A(promise) => promise.await.map_err(|e| {
                        failed("rejected or resolved to something else than a string", e)
                    }),
                    Either::B(token) => Ok(token),
                }
            };
            tokio::time::timeout(limit, call).await.map_err(|_| {
                CoreError::Callback(format!(
                    "sync.getAuthToken timed out after {} ms",
                    limit.as_millis()
                ))
            })?
        })
    }
}

/// A failed sync.
#[napi(object)]
#[derive(Clone)]
pub struct SyncFailure {
    /// The error's `ErrorCode` (`ENGRAM_SYNC_UNREACHABLE`, `ENGRAM_SYNC_AUTH`...).
    pub code: String,
    /// What went wrong.
    pub message: String,
    /// When (ms since the epoch).
    pub at: f64,
}

impl From<core::SyncFailure> for SyncFailure {
    fn from(f: core::SyncFailure) -> Self {
        SyncFailure {
            code: f.code,
            message: f.message,
            at: f.at as f64,
        }
    }
}

/// What one sync did.
#[napi(object)]
#[derive(Clone)]
pub struct SyncReport {
    /// Frames the replica received from the server.
    pub frames: f64,
    /// The replica's frame number afterwards.
    pub frame_no: Option<f64>,
    /// Local changes pushed to the server.
    pub pushed: f64,
    /// Server rows written or deleted by the push.
    pub pushed_rows: f64,
    /// Server changes read.
    pub pulled: f64,
    /// Local rows written or deleted by the pull.
    pub pulled_rows: f64,
    /// Memories archived because another device's active memory had the same content.
    pub duplicates: f64,
    /// Local changes still waiting for the server.
    pub pending: f64,
    /// Wall time of the sync, in ms.
    pub duration_ms: f64,
}

impl From<core::SyncReport> for SyncReport {
    fn from(r: core::SyncReport) -> Self {
        SyncReport {
            frames: r.frames as f64,
            frame_no: r.frame_no.map(|f| f as f64),
            pushed: r.pushed as f64,
            pushed_rows: r.pushed_rows as f64,
            pulled: r.pulled as f64,
            pulled_rows: r.pulled_rows as f64,
            duplicates: r.duplicates as f64,
            pending: r.pending as f64,
            duration_ms: r.duration_ms,
        }
    }
}

/// Running totals since the engine opened.
#[napi(object)]
pub struct SyncTotals {
    /// Successful syncs.
    pub syncs: f64,
    /// Failed syncs.
    pub failures: f64,
    /// Frames received.
    pub frames: f64,
    /// Changes pushed.
    pub pushed: f64,
    /// Changes pulled.
    pub pulled: f64,
}

/// Where sync stands.
#[napi(object)]
pub struct SyncStatus {
    /// `disabled` (opened without `sync`), `remote` (a remote-only engine: every call goes to
    /// the server), `idle`, `syncing`, `offline` (the last sync could not reach the server) or
    /// `error` (it failed otherwise; see `lastError`).
    #[napi(ts_type = "'disabled' | 'remote' | 'idle' | 'syncing' | 'offline' | 'error'")]
    pub state: String,
    /// The server (normalised: `libsql://` shown as `https://`).
    pub url: Option<String>,
    /// `forwarded`, `offline_writes`, or `remote` for a remote-only engine.
    pub mode: Option<String>,
    /// This file's device id on the server.
    pub device_id: Option<String>,
    /// The configured interval, in ms.
    pub interval_ms: f64,
    /// Local changes waiting for the server.
    pub pending: f64,
    /// When the last sync started.
    pub last_attempt_at: Option<f64>,
    /// When the last successful sync ended.
    pub last_success_at: Option<f64>,
    /// The last successful sync.
    pub last_report: Option<SyncReport>,
    /// The last failure (kept after later successes, for diagnostics).
    pub last_error: Option<SyncFailure>,
    /// Failed syncs since the last success (the back-off doubles with each, up to 5 min).
    pub consecutive_failures: u32,
    /// When the next sync is due (a write or `sync()` may start one sooner).
    pub next_attempt_at: Option<f64>,
    /// Running totals.
    pub totals: SyncTotals,
}

impl From<core::SyncStatus> for SyncStatus {
    fn from(s: core::SyncStatus) -> Self {
        let state = match s.state {
            core::SyncState::Disabled => "disabled",
            core::SyncState::Remote => "remote",
            core::SyncState::Idle => "idle",
            core::SyncState::Syncing => "syncing",
            core::SyncState::Offline => "offline",
            core::SyncState::Error => "error",
        };
        SyncStatus {
            state: state.into(),
            url: s.url,
            mode: s.mode.map(str::to_owned),
            device_id: s.device_id,
            interval_ms: s.interval_ms as f64,
            pending: s.pending as f64,
            last_attempt_at: s.last_attempt_at.map(|t| t as f64),
            last_success_at: s.last_success_at.map(|t| t as f64),
            last_report: s.last_report.map(SyncReport::from),
            last_error: s.last_error.map(SyncFailure::from),
            consecutive_failures: s.consecutive_failures,
            next_attempt_at: s.next_attempt_at.map(|t| t as f64),
            totals: SyncTotals {
                syncs: s.totals.syncs as f64,
                failures: s.totals.failures as f64,
                frames: s.totals.frames as f64,
                pushed: s.totals.pushed as f64,
                pulled: s.totals.pulled as f64,
            },
        }
    }
}

/// What a sync listener receives after every sync, from the loop or from `sync()`.
#[napi(object)]
#[derive(Clone)]
pub struct SyncEvent {
    /// `synced` or `failed`.
    #[napi(ts_type = "'synced' | 'failed'")]
    pub r#type: String,
    /// What a successful sync did.
    pub report: Option<SyncReport>,
    /// Why a sync failed.
    pub error: Option<SyncFailure>,
    /// Failed syncs since the last success (failed events).
    pub consecutive_failures: Option<u32>,
    /// The back-off before the next try, in ms (failed events).
    pub retry_in_ms: Option<f64>,
}

impl From<&core::SyncEvent> for SyncEvent {
    fn from(e: &core::SyncEvent) -> Self {
        match e {
            core::SyncEvent::Synced { report } => SyncEvent {
                r#type: "synced".into(),
                report: Some((*report).into()),
                error: None,
                consecutive_failures: None,
                retry_in_ms: None,
            },
            core::SyncEvent::Failed {
                error,
                consecutive_failures,
                retry_in_ms,
            } => SyncEvent {
                r#type: "failed".into(),
                report: None,
                error: Some(error.clone().into()),
                consecutive_failures: Some(*consecutive_failures),
                retry_in_ms: Some(*retry_in_ms as f64),
            },
        }
    }
}

#[napi]
impl Engram {
    /// Syncs now (after a running sync, if any: two never overlap) and resolves with what it
    /// did. Rejects with the sync's error (`ENGRAM_SYNC_UNREACHABLE`, `ENGRAM_SYNC_AUTH`,
    /// `ENGRAM_SYNC_UNSUPPORTED`, `ENGRAM_SCHEMA_TOO_NEW`, `ENGRAM_SYNC`), which listeners and
    /// `syncStatus()` also get; a failed sync changes nothing local and loses nothing.
    /// `ENGRAM_SYNC_CONFIG` when the file was opened without `sync`.
    #[napi(ts_return_type = "Promise<SyncReport>")]
    pub fn sync<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, SyncReport>> {
        let handle = arg!(env, self.handle());
        promise(env, async move { handle.sync().await }, SyncReport::from)
    }

    /// Where sync stands: state, pending local changes, the last sync and the last failure.
    #[napi(ts_return_type = "Promise<SyncStatus>")]
    pub fn sync_status<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, SyncStatus>> {
        let handle = arg!(env, self.handle());
        promise(
            env,
            async move { handle.sync_status().await },
            SyncStatus::from,
        )
    }

    /// Calls `listener` after every sync of this file's engine (from the loop, from `sync()`,
    /// from any handle): `{ type: 'synced', report }` or `{ type: 'failed', error,
    /// consecutiveFailures, retryInMs }`. Returns an id for `offSyncEvent`; `close()` removes
    /// this handle's listeners. The listener never keeps the process alive, and one that
    /// throws keeps being called (its error never reaches the process).
    /// `ENGRAM_SYNC_CONFIG` when the file was opened without `sync`.
    #[napi(ts_args_type = "listener: (event: SyncEvent) => void")]
    pub fn on_sync_event(&self, env: &Env, listener: Unknown<'_>) -> Result<u32> {
        let to_js = |e: CoreError| super::error::to_js_error(env, &e);
        let handle = self.handle().map_err(to_js)?;
        let service = handle.sync_service().map_err(to_js)?.clone();
        if listener.get_type()? != ValueType::Function {
            return Err(to_js(CoreError::invalid("listener must be a function")));
        }
        // SAFETY: checked to be a function handle of this scope.
        let function: Function<SyncEvent, Unknown<'static>> =
            unsafe { Function::from_napi_value(env.raw(), listener.raw()) }?;
        // A listener that throws keeps being called: a later sync may concern it.
        let listener = Reporter::new(function, "the sync listener").map_err(to_js)?;
        let id = service.subscribe(Arc::new(move |event: &core::SyncEvent| {
            listener.report(SyncEvent::from(event));
        }));
        self.remember_sync_listener(id);
        Ok(id as u32)
    }

    /// Removes a listener added by `onSyncEvent`; returns whether it was there.
    #[napi(ts_args_type = "id: number")]
    pub fn off_sync_event(&self, env: &Env, id: Unknown<'_>) -> Result<bool> {
        let id: Count = super::args::required(env, &id, "id")
            .map_err(|e| super::error::to_js_error(env, &e))?;
        let id = id.get();
        let Ok(handle) = self.handle() else {
            return Ok(false);
        };
        let Ok(service) = handle.sync_service() else {
            return Ok(false);
        };
        self.forget_sync_listener(u64::from(id));
        Ok(service.unsubscribe(u64::from(id)))
    }
}
