//! Sync with a libSQL server (Turso Cloud or self-hosted `sqld`) through an embedded replica.
//!
//! The shape: the engine keeps working on its local file, which
//! holds both homes, so every read, search and transaction stays local and nothing waits on
//! the network. Writes to the tables that sync ([`tables::TABLES`]: memories, their history,
//! the observer's cross-session record) are captured by triggers into an outbox in the same
//! transaction. A background loop per engine syncs the replica's frames, pushes the outbox
//! to the primary (through the replica's write delegation, or as offline writes), and applies
//! the server's change log, as the replica holds it, back to the local file. Personal and
//! redacted memories never leave the device; the code index, the structural graph and vectors
//! are rebuilt per device and never sync.
//!
//! Architecture invariant: an unreachable or slow server never fails or blocks a local read
//! or write. Only the loop touches the network, and it never holds the local writer while it
//! does.
//!
//! ```text
//!  device A working file (both homes)                     server (sqld / Turso): main home
//!  write ──► memories ──trigger──► sync_changes (outbox)   memories ... sync_changes (change log)
//!                                     │ push: batch ──────► apply rows, counters += deltas,
//!                                     │                     sync_devices[A] = batch's last seq
//!  pull ◄── replica (<path>.sync/) ◄── frames ◄───────────┘   (triggers log every change)
//!    apply server rows not pending locally, mark pulled_seq
//! ```
//!
//! Why not serve reads from the replica: a write through a replica is a round trip to the
//! primary (and fails offline), `ATTACH` is refused on replicas, and the code index must stay
//! local. Keeping the engine on a plain local file makes sync an add-on that cannot slow or
//! break local work; the cost is the synced tables stored twice per device (small: memories).
//! Rows move as JSON objects of their columns (read from the schema, `seq` excluded: rowids are
//! per file), one statement per table per batch. Memories are replaced whole (last writer
//! wins; history travels as `memory_versions` rows); observer counters travel as increments.
//! The server's schema is migrated through the replica by the first device that needs it (each
//! migration step re-checks the version under the write lock: devices race on a fresh server).
//! The graph's authored part syncs by key (`graph::knowledge`).
//!
//! Tables (home `main`, migration 010): `sync_changes(seq AUTOINCREMENT, tbl, key JSON, delta
//! JSON)` is on a device the outbox and on the server the change log (both filled by the
//! capture triggers, which exist only where sync is on); `sync_state(name, value)` holds the
//! URL a file is bound to, its device id and its pull mark; `sync_devices(device_id,
//! pushed_seq)` holds, on the server, each device's push mark.
//!
//! Runs and the engine's lifetime: a push reads the outbox, commits one server transaction per
//! batch (with the device's push mark, so a lost acknowledgement is not applied twice), then
//! prunes; a pull reads the replica's change log and applies it in one local transaction with
//! its mark. Keys with unpushed local changes are not pulled (local wins until pushed; the
//! push's own log entry brings the merged row back). Rows that are not shareable (personal,
//! redacted) never enter the outbox and are never deleted by a pull. When the last handle
//! closes, the loop drops its run and the replica, and runs no more until a handle opens; the
//! loop holds the engine's files (`engine::lifetime`) until the replica's runtime is shut down
//! (waiting up to 2 s for what a dropped run left on its blocking threads), so `close()` of the
//! last handle resolves only when nothing writes the file or `<path>.sync/` any more, and a new
//! engine of the file waits for that before it opens the replica (without holding the
//! registry's creation lock, so other files open meanwhile). A failed run only drops its
//! replica; the next run opens a new one after `replica::probe` finds the server's host known
//! and not refusing TCP connections (offline that fails in milliseconds, where libSQL's
//! handshake retries took 3 s a run; a host that does not answer is left to libSQL). Waiting
//! for the replica's runtime there deadlocked after an offline-writes run that sqld refused
//! (libSQL leaves a blocking task that never ends), so that wait is the close path's alone, and
//! bounded: a close after such a run takes the 2 s grace, then leaves that task behind
//! (`tests/sync.rs` reopens the file after it and finds the unpushed write still pending). Not
//! covered: an engine opened with no async runtime (no loop ever starts), and a runtime shut
//! down under the loop (its `SyncService` drop can only shut the replica runtime down in the
//! background).
//!
//! Threads: the loop is one tokio task on the runtime that opened the engine. It sleeps until its
//! interval (or back-off) ends, `sync()` or `stop()` wakes it, or a write releases the writer
//! (`Store::written`) and, `WRITE_SETTLE` (50 ms) later (and at least 250 ms after its previous run
//! ended), the outbox is not empty. A run pushes only what the outbox held when it began: chasing
//! writes made meanwhile kept one run going as long as the app wrote. Between runs the task holds
//! the engine only weakly. The run itself is spawned on the service's own runtime, whose threads
//! run at a lower priority (`thread_priority`): its local reads, row comparisons and libSQL's frame
//! work take no worker of the app's runtime, and get about a tenth of a core the app's calls also
//! want. The sections that take the local writer (applying a pulled batch, pruning the pushed
//! outbox, recording the server's id) go back to the engine's runtime (`AppSide::write`): a writer
//! held by a lowered thread would make every app write queue behind it (priority inversion); debug
//! builds assert it (`Store::writer`). Dropping the loop's wait on a run aborts it (`AbortOnDrop`),
//! and the run holds the run lock until it is gone, so a release that follows waits for it. A write
//! section it had started is aborted too, but may still be finishing on the engine's runtime after
//! the release: it holds the engine (so `close()` still waits for it), and its transaction commits
//! whole or rolls back.

mod pull;
mod push;
pub(crate) mod remote;
mod replica;
mod status;
pub(crate) mod tables;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use libsql::params;

pub use replica::{is_replica_file, SyncMode};
pub(crate) use replica::{remote_failure, remote_interrupted};
pub use status::{SyncEvent, SyncFailure, SyncReport, SyncState, SyncStatus, SyncTotals};

use crate::engine::lifetime::Lifetime;
use crate::engine::Engine;
use crate::error::{DbContext, Error, Result};
use crate::store::{begin_write, Store};
use replica::Replica;
use tables::Columns;

/// The interval between runs when none is given.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// The shortest interval accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// The longest back-off after failures (and the longest interval accepted is a day).
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Outbox or log batches one run moves at most (the rest waits for the next run, which
/// follows at once after a full run).
const MAX_BATCHES_PER_RUN: u32 = 20;
/// How often the primary's identity is checked at the latest (see `attempt`).
const IDENTITY_CHECK: Duration = Duration::from_secs(300);
/// How long the loop lets a burst of local writes settle before pushing them.
const WRITE_SETTLE: Duration = Duration::from_millis(50);
/// The least time between the end of a run and a run for local writes (capped by the
/// interval). While an app writes steadily, each run costs the same few round trips whatever
/// it carries: runs back to back pushed a handful of changes each and kept the server and the
/// sync thread busy all along (on loopback, local reads' p99 rose 4x); spaced, one run carries
/// what a quarter second wrote.
const PUSH_GAP: Duration = Duration::from_millis(250);

/// Supplies the auth token, and a fresh one when the server refused the last (an app whose
/// tokens expire passes a function; a fixed token needs none).
pub trait TokenSource: Send + Sync + std::fmt::Debug {
    /// A token to use. `refresh` is true after the server refused the previous one.
    fn token(&self, refresh: bool) -> BoxFuture<'static, Result<String>>;
}

/// How an engine syncs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// The server: `libsql://…` (Turso), `https://…` or `http://…` (e.g. a local `sqld`).
    pub url: String,
    /// The auth token (Turso database token, or a JWT `sqld` verifies); empty for none.
    pub auth_token: Option<String>,
    /// Called for a token at the first run and whenever the server refuses one.
    pub token_source: Option<Arc<dyn TokenSource>>,
    /// Time between runs (a local write also starts one shortly after it).
    pub interval: Duration,
    /// How writes reach the server.
    pub mode: SyncMode,
}

impl SyncOptions {
    /// Forwarded writes to `url`, every minute, without a token.
    pub fn new(url: impl Into<String>) -> Self {
        SyncOptions {
            url: url.into(),
            auth_token: None,
            token_source: None,
            interval: DEFAULT_INTERVAL,
            mode: SyncMode::Forwarded,
        }
    }
}

/// Checks a server URL and puts it in the form stored with the file: `libsql://` becomes
/// `https://`, no trailing slash; credentials in the URL are refused (they would be stored).
pub fn normalize_url(url: &str) -> Result<String> {
    let url = url.trim().trim_end_matches('/');
    let url = match url.strip_prefix("libsql://") {
        Some(rest) => format!("https://{rest}"),
        None => url.to_owned(),
    };
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| {
            Error::SyncConfig(format!(
                "sync url must start with libsql://, https:// or http://, got {:?}",
                crate::text::clip_bytes(&url, 200)
            ))
        })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err(Error::SyncConfig(format!("sync url {url:?} names no host")));
    }
    if authority.contains('@') {
        return Err(Error::SyncConfig(
            "sync url must not carry credentials; pass authToken instead".into(),
        ));
    }
    // A port that is not a number fails here, once, not at every run.
    replica::host_and_port(&url)?;
    Ok(url)
}

/// A listener of sync events.
pub type Listener = Arc<dyn Fn(&SyncEvent) + Send + Sync>;

/// The engine's sync: settings, the replica, the loop's state and the listeners.
pub struct SyncService {
    url: String,
    mode: SyncMode,
    interval: Duration,
    token_source: Option<Arc<dyn TokenSource>>,
    replica_path: PathBuf,
    device_id: String,
    columns: Columns,
    /// The engine's closure depth, for replaying pulled graph rows.
    closure_depth: u32,
    status: Mutex<SyncStatus>,
    /// Held for a whole run: no run starts while one runs.
    run: Arc<tokio::sync::Mutex<RunState>>,
    /// Where runs and libSQL's work for the replica go (at a lower thread priority); shut
    /// down, waiting for that work, whenever the replica is let go: libSQL does not wait for
    /// everything it hands to blocking threads when its future is dropped, so only the
    /// shutdown really lets go of the replica's files.
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    /// Wakes the loop for a forced run or to stop.
    wake: tokio::sync::Notify,
    /// Tells a waiting loop that `sync()` ran, so its next run is due an interval later.
    rescheduled: tokio::sync::Notify,
    stopped: AtomicBool,
    listeners: Mutex<Vec<(u64, Listener)>>,
    next_listener: AtomicU64,
}

impl Drop for SyncService {
    fn drop(&mut self) {
        // Normally the loop has shut it down already (waiting for its work); this may run on
        // an async thread, where a blocking shutdown would panic.
        let runtime = self
            .runtime
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(rt) = runtime {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for SyncService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncService")
            .field("url", &self.url)
            .field("mode", &self.mode)
            .finish()
    }
}

struct RunState {
    replica: Option<Replica>,
    server_ready: bool,
    token: Option<String>,
    /// The replica's frame number after the last run (a lower one means another database).
    frame_no: Option<u64>,
    /// When the primary's identity was last checked (engine clock, ms).
    checked_at: i64,
}

impl SyncService {
    /// Binds the file `store` (at `db_path`) to the server of `options`: records the URL and a
    /// device id on first use (and queues every shareable row for the first push), refuses
    /// another URL than the recorded one, and installs the capture triggers. No network.
    pub(crate) async fn setup(
        store: &Store,
        db_path: &Path,
        options: &SyncOptions,
        closure_depth: u32,
    ) -> Result<SyncService> {
        let url = normalize_url(&options.url)?;
        if options.interval < MIN_INTERVAL || options.interval > Duration::from_secs(86_400) {
            return Err(Error::SyncConfig(format!(
                "sync intervalSecs must be within 0.1..=86400, got {}",
                options.interval.as_secs_f64()
            )));
        }
        let replica_path = replica::replica_path(db_path, options.mode);
        replica::check_replica_file(&replica_path)?;

        let writer = store.writer().await;
        let tx = begin_write(&writer).await?;
        let recorded = state_value(&tx, "url").await?;
        match recorded {
            Some(bound) if bound != url => {
                return Err(Error::SyncConfig(format!(
                    "{} syncs with {bound}, not {url}; open it with that url, or copy the \
                     memories to a new file to sync them elsewhere",
                    db_path.display()
                )))
            }
            Some(_) => {}
            None => {
                set_state_value(&tx, "url", &url).await?;
                set_state_value(&tx, "device_id", &uuid::Uuid::now_v7().to_string()).await?;
            }
        }
        tables::install_capture(&tx).await?;
        if state_value(&tx, "seeded").await?.is_none() {
            // Rows written before sync was on were never captured: queue them all once.
            tables::queue_all(&tx).await?;
            set_state_value(&tx, "seeded", "1").await?;
        }
        let device_id = state_value(&tx, "device_id")
            .await?
            .ok_or_else(|| Error::Internal("sync device id missing".into()))?;
        let columns = Columns::read(&tx).await?;
        tx.commit().await.ctx("committing sync setup")?;
        drop(writer);

        tracing::debug!(
            url = %url,
            device_id = %device_id,
            mode = options.mode.as_str(),
            interval_ms = options.interval.as_millis() as u64,
            "sync set up"
        );
        let mut status = SyncStatus::disabled();
        status.state = SyncState::Idle;
        status.url = Some(url.clone());
        status.mode = Some(options.mode.as_str());
        status.device_id = Some(device_id.clone());
        status.interval_ms = options.interval.as_millis() as u64;
        Ok(SyncService {
            url,
            mode: options.mode,
            interval: options.interval,
            token_source: options.token_source.clone(),
            replica_path,
            device_id,
            columns,
            closure_depth,
            status: Mutex::new(status),
            run: Arc::new(tokio::sync::Mutex::new(RunState {
                replica: None,
                server_ready: false,
                token: options.auth_token.clone(),
                frame_no: None,
                checked_at: 0,
            })),
            runtime: Mutex::new(None),
            wake: tokio::sync::Notify::new(),
            rescheduled: tokio::sync::Notify::new(),
            stopped: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
            next_listener: AtomicU64::new(1),
        })
    }

    /// The server URL this engine syncs with (normalised).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Starts the loop on `runtime` (or the current runtime). It holds the engine weakly, syncs
    /// while a handle is open, and ends when the engine is dropped, after dropping the replica:
    /// until then it keeps a hold on the engine's files (see `engine::lifetime`).
    pub(crate) fn start(
        self: &Arc<Self>,
        engine: Weak<Engine>,
        lifetime: &Arc<Lifetime>,
        runtime: Option<tokio::runtime::Handle>,
    ) {
        let service = Arc::clone(self);
        let lifetime = Arc::clone(lifetime);
        let hold = lifetime.hold();
        let task = async move {
            run_loop(&service, &engine, &lifetime).await;
            service.release_replica().await;
            drop(hold);
        };
        match runtime.or_else(|| tokio::runtime::Handle::try_current().ok()) {
            Some(rt) => {
                rt.spawn(task);
            }
            None => {
                let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
                status.state = SyncState::Error;
                status.last_error = Some(SyncFailure {
                    code: "ENGRAM_INTERNAL".into(),
                    message: "no async runtime to run the sync loop on; call sync() yourself"
                        .into(),
                    at: 0,
                });
            }
        }
    }

    /// The runtime the replica's work runs on (built for the first run after a release).
    fn replica_runtime(&self) -> Result<tokio::runtime::Handle> {
        let mut slot = self.runtime.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rt) = slot.as_ref() {
            return Ok(rt.handle().clone());
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("engram-sync")
            .on_thread_start(crate::thread_priority::lower_current_thread)
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the sync runtime", e))?;
        let handle = rt.handle().clone();
        *slot = Some(rt);
        Ok(handle)
    }

    /// Closes the replica and lets go of its files: waits for a run going on to end, then for
    /// what libSQL still had running on the replica's runtime (a frame write or a file open
    /// whose future was dropped with an abandoned run). The next run opens it again.
    async fn release_replica(&self) {
        let mut run = self.run.lock().await;
        self.release_locked(&mut run).await;
    }

    /// [`SyncService::release_replica`] with the run lock held.
    async fn release_locked(&self, run: &mut RunState) {
        let replica = run.replica.take();
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(rt) = runtime {
            {
                // Anything libSQL spawns while the replica drops lands on its own runtime,
                // whose shutdown below waits for it (for a bounded time).
                let _inside = rt.handle().enter();
                drop(replica);
            }
            // Dropping a runtime blocks until its blocking threads are done: not on this one.
            let stop = StopRuntime(Some(rt));
            let _ = tokio::task::spawn_blocking(move || stop.wait()).await;
        } else {
            drop(replica);
        }
    }

    /// Moves the loop's next run to an interval (or back-off) from now: a run just happened.
    pub(crate) fn reschedule(&self) {
        self.rescheduled.notify_waiters();
    }

    /// Stops the loop (the engine is going away).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Adds a listener of sync events; returns its id for [`SyncService::unsubscribe`].
    pub fn subscribe(&self, listener: Listener) -> u64 {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed);
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, listener));
        id
    }

    /// Removes a listener; `false` if there was none with that id.
    pub fn unsubscribe(&self, id: u64) -> bool {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        let before = listeners.len();
        listeners.retain(|(i, _)| *i != id);
        listeners.len() != before
    }

    /// The status, with the outbox size read now.
    pub(crate) async fn status(&self, store: &Store) -> Result<SyncStatus> {
        let pending = outbox_len(store).await?;
        let mut status = self
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        status.pending = pending;
        Ok(status)
    }

    fn backoff(&self, failures: u32) -> Duration {
        if failures == 0 {
            return self.interval;
        }
        let factor = 1u32 << (failures - 1).min(16);
        let base = self
            .interval
            .saturating_mul(factor)
            .min(MAX_BACKOFF.max(self.interval));
        // Up to 10 % of jitter, so that devices that lost the server together do not all
        // return at the same instant.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as u64);
        let jitter = nanos % (base.as_millis() as u64 / 10 + 1);
        base + Duration::from_millis(jitter)
    }

    /// One run now (waiting for a running one to end first): frames, server schema, push,
    /// pull. Records the status and tells the listeners either way.
    ///
    /// The run itself goes on the replica's runtime, whose threads run at a lower priority
    /// (`thread_priority`): its local reads, comparisons and row decoding take no worker of
    /// the app's runtime, and give way to the app's calls when both want a core (on two cores
    /// with a loopback server, synced searches' p99 fell ~8%). Its sections that take the
    /// local writer go back to the app's runtime ([`AppSide`]). Dropping this future cancels
    /// the run.
    pub(crate) async fn run_once(self: &Arc<Self>, engine: &Arc<Engine>) -> Result<SyncReport> {
        let store = &engine.store;
        let clock = &*engine.clock;
        let mut run = Arc::clone(&self.run).lock_owned().await;
        let started_at = clock.now_ms();
        let t0 = Instant::now();
        tracing::debug!(url = %self.url, mode = self.mode.as_str(), "sync started");
        {
            let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
            status.state = SyncState::Syncing;
            status.last_attempt_at = Some(started_at);
        }
        // Taken with the run lock held, so that no release shuts it down under the run.
        let mut result = match self.replica_runtime() {
            Ok(rt) => {
                let service = Arc::clone(self);
                let app = AppSide {
                    engine: Arc::clone(engine),
                    // The runtime polling this call is alive and driven; the engine's may be
                    // a current-thread runtime nobody drives now.
                    runtime: tokio::runtime::Handle::try_current()
                        .ok()
                        .or_else(|| engine.runtime.clone()),
                };
                let task = rt.spawn(async move {
                    let mut result = service.attempt(&mut run, &app, false).await;
                    if matches!(result, Err(Error::SyncAuth(_))) && service.token_source.is_some() {
                        result = service.attempt(&mut run, &app, true).await;
                    }
                    if result.is_err() {
                        // A broken connection is not reused: the next run opens the replica
                        // afresh.
                        run.replica = None;
                    }
                    result
                });
                match AbortOnDrop(task).await {
                    Ok(result) => result,
                    Err(e) => {
                        if e.is_panic() {
                            // Its replica may be half way through something: let go of it
                            // and of what it left on its runtime, as a close does.
                            self.release_replica().await;
                        }
                        Err(unfinished(e))
                    }
                }
            }
            Err(e) => {
                drop(run);
                Err(e)
            }
        };
        let pending = outbox_len(store).await.unwrap_or(0);
        let ended_at = clock.now_ms();
        let event = {
            let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
            status.pending = pending;
            match &mut result {
                Ok(report) => {
                    report.pending = pending;
                    report.duration_ms = t0.elapsed().as_secs_f64() * 1e3;
                    status.state = SyncState::Idle;
                    status.last_success_at = Some(ended_at);
                    status.last_report = Some(*report);
                    status.totals.syncs += 1;
                    status.totals.frames += report.frames;
                    status.totals.pushed += report.pushed;
                    status.totals.pulled += report.pulled;
                    status.next_attempt_at = Some(ended_at + self.interval.as_millis() as i64);
                    let after_failures = std::mem::take(&mut status.consecutive_failures);
                    log_synced(report, after_failures);
                    SyncEvent::Synced { report: *report }
                }
                Err(e) => {
                    let failure = SyncFailure {
                        code: e.code().to_owned(),
                        message: e.to_string(),
                        at: ended_at,
                    };
                    status.state = if matches!(e, Error::SyncUnreachable(_)) {
                        SyncState::Offline
                    } else {
                        SyncState::Error
                    };
                    status.consecutive_failures += 1;
                    status.totals.failures += 1;
                    status.last_error = Some(failure.clone());
                    let retry = self.backoff(status.consecutive_failures);
                    status.next_attempt_at = Some(ended_at + retry.as_millis() as i64);
                    log_failed(e, status.consecutive_failures, retry, t0.elapsed(), pending);
                    SyncEvent::Failed {
                        error: failure,
                        consecutive_failures: status.consecutive_failures,
                        retry_in_ms: retry.as_millis() as u64,
                    }
                }
            }
        };
        let listeners: Vec<Listener> = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(_, l)| Arc::clone(l))
            .collect();
        for listener in listeners {
            listener(&event);
        }
        result
    }

    async fn attempt(
        &self,
        run: &mut RunState,
        app: &AppSide,
        refresh_token: bool,
    ) -> Result<SyncReport> {
        let (store, clock) = (app.store(), &*app.engine.clock);
        if let Some(source) = &self.token_source {
            if refresh_token || run.token.is_none() {
                tracing::debug!(refresh = refresh_token, "asking getAuthToken for a token");
                run.token = Some(source.token(refresh_token).await?);
                run.replica = None;
            }
        }
        if run.replica.is_none() {
            // Offline, this fails in milliseconds where libSQL's handshake retries take 3 s.
            replica::probe(&self.url).await?;
            tracing::debug!(
                url = %self.url,
                replica = %self.replica_path.display(),
                "opening the embedded replica"
            );
            let token = run.token.clone().unwrap_or_default();
            run.replica =
                Some(Replica::open(&self.replica_path, &self.url, &token, self.mode).await?);
            // A replica opened afresh (at start, after a failure) checks the server first.
            run.server_ready = false;
        }
        let replica = run.replica.as_ref().expect("opened above");
        let mode = self.mode;
        let server = |e: Error| reclassify(e, mode);
        let token = run.token.clone().unwrap_or_default();
        let frames = replica.sync(&self.url, &token).await?;
        // The primary is asked who it is when the replica was just opened, when the replica's
        // frame number went backwards, and every few minutes: a database recreated at the same
        // URL must not be mistaken for the one this file synced with.
        let went_back = matches!((run.frame_no, frames.frame_no), (Some(a), Some(b)) if b < a);
        let now = clock.now_ms();
        if !run.server_ready
            || went_back
            || now - run.checked_at > IDENTITY_CHECK.as_millis() as i64
        {
            let (version, id) = replica::primary_state(&self.url, &token).await?;
            if version > crate::store::Home::Main.latest() {
                return Err(Error::SchemaTooNew {
                    home: crate::store::Home::Main.name(),
                    found: version,
                    supported: crate::store::Home::Main.latest(),
                });
            }
            let recorded = state_value(&*store.reader().await, "server_id").await?;
            if recorded.is_some() && id != recorded {
                // Another database answers at this URL: the replica mirrors the old one.
                tracing::warn!(
                    url = %self.url,
                    "another database answers at the sync URL; replacing the replica"
                );
                let stale = run.replica.take().expect("opened above");
                stale.discard(&self.replica_path)?;
                let fresh = Replica::open(&self.replica_path, &self.url, &token, self.mode).await?;
                fresh.sync(&self.url, &token).await?;
                run.replica = Some(fresh);
            }
            let replica = run.replica.as_ref().expect("opened above");
            replica.prepare_server().await.map_err(server)?;
            let id = match id {
                Some(id) if recorded.is_none() || Some(&id) == recorded.as_ref() => id,
                // Just named (by this device or a racing one): ask again.
                _ => replica::primary_state(&self.url, &token)
                    .await?
                    .1
                    .ok_or_else(|| Error::Sync("the server has no id after naming it".into()))?,
            };
            bind_server(app, &id).await?;
            run.server_ready = true;
            run.checked_at = now;
        } else if run
            .replica
            .as_ref()
            .expect("opened above")
            .schema_version()
            .await?
            > crate::store::Home::Main.latest()
        {
            run.server_ready = false;
            return Err(Error::Sync(
                "the server's schema changed; checking it again at the next sync".into(),
            ));
        }
        let replica = run.replica.as_ref().expect("opened above");
        let now = clock.now_ms();
        let pushed = push::push(
            app,
            replica.conn(),
            &self.columns,
            &self.device_id,
            now,
            MAX_BATCHES_PER_RUN,
        )
        .await
        .map_err(server)?;
        let mut frames_total = frames.synced;
        let mut frame_no = frames.frame_no;
        if pushed.changes > 0 && self.mode == SyncMode::OfflineWrites {
            let after = replica.sync(&self.url, &token).await?;
            frames_total += after.synced;
            frame_no = after.frame_no.or(frame_no);
        }
        let pulled = pull::pull(
            app,
            replica.conn(),
            &self.columns,
            pull::Apply {
                now,
                closure_depth: self.closure_depth,
            },
            MAX_BATCHES_PER_RUN,
        )
        .await
        .map_err(server)?;
        run.frame_no = frame_no.or(run.frame_no);
        Ok(SyncReport {
            frames: frames_total,
            frame_no,
            pushed: pushed.changes,
            pushed_rows: pushed.rows,
            pulled: pulled.changes,
            pulled_rows: pulled.rows,
            duplicates: pushed.duplicates,
            pending: 0,
            duration_ms: 0.0,
        })
    }
}

/// Records the server's identity on first contact. A different one later means the database
/// behind the URL was recreated: the pull mark is reset and every shareable row is queued
/// again, so the new server gets everything this device has. Returns whether that happened.
/// A successful run: `debug` (a run per write burst and per interval is the steady state),
/// `info` when it ends a run of failures.
fn log_synced(report: &SyncReport, after_failures: u32) {
    macro_rules! synced {
        ($level:expr, $message:expr) => {
            tracing::event!(
                $level,
                pushed = report.pushed,
                pushed_rows = report.pushed_rows,
                pulled = report.pulled,
                pulled_rows = report.pulled_rows,
                frames = report.frames,
                duplicates = report.duplicates,
                pending = report.pending,
                ms = (report.duration_ms * 100.0).round() / 100.0,
                after_failures,
                $message
            )
        };
    }
    if after_failures > 0 {
        synced!(tracing::Level::INFO, "sync recovered");
    } else {
        synced!(tracing::Level::DEBUG, "synced");
    }
}

/// A failed run: `warn` for the first of a streak, `debug` for the retries that follow (the
/// back-off grows to 5 minutes; `syncStatus()` has the count).
fn log_failed(e: &Error, failures: u32, retry: Duration, took: Duration, pending: u64) {
    macro_rules! failed {
        ($level:expr) => {
            tracing::event!(
                $level,
                code = e.code(),
                error = %e,
                consecutive_failures = failures,
                retry_in_ms = retry.as_millis() as u64,
                ms = crate::log::ms(took),
                pending,
                "sync failed"
            )
        };
    }
    if failures <= 1 {
        failed!(tracing::Level::WARN);
    } else {
        failed!(tracing::Level::DEBUG);
    }
}

async fn bind_server(app: &AppSide, server_id: &str) -> Result<bool> {
    let recorded = state_value(&*app.store().reader().await, "server_id").await?;
    if recorded.as_deref() == Some(server_id) {
        return Ok(false);
    }
    let server_id = server_id.to_owned();
    app.write(move |engine| async move {
        let writer = engine.store.writer().await;
        let tx = begin_write(&writer).await?;
        let recorded = state_value(&tx, "server_id").await?;
        if recorded.is_some() {
            tx.execute("DELETE FROM sync_state WHERE name = 'pulled_seq'", ())
                .await
                .ctx("resetting the pull mark")?;
            tables::queue_all(&tx).await?;
        }
        set_state_value(&tx, "server_id", &server_id).await?;
        tx.commit().await.ctx("recording the server id")?;
        Ok(recorded.is_some())
    })
    .await
}

/// The app's side of a run: the engine, and the runtime where the run's sections that take
/// the local writer go. The run itself goes on the replica's runtime, whose threads run at a
/// lower priority; a section holding the writer there would make the app's writes queue
/// behind a thread that gets a tenth of a busy core (see `thread_priority`).
pub(crate) struct AppSide {
    engine: Arc<Engine>,
    /// The runtime that called for the run (else the engine's): normal priority. `None` only
    /// outside any tokio runtime, where a run's writes fail with `ENGRAM_INTERNAL`.
    runtime: Option<tokio::runtime::Handle>,
}

impl AppSide {
    /// The engine's store, for reads.
    pub(crate) fn store(&self) -> &Store {
        &self.engine.store
    }

    /// Runs a section that takes the local writer on the app's runtime and waits for it;
    /// cancelled with the run.
    pub(crate) async fn write<T, F, Fut>(&self, section: F) -> Result<T>
    where
        F: FnOnce(Arc<Engine>) -> Fut,
        Fut: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        match &self.runtime {
            Some(rt) => AbortOnDrop(rt.spawn(section(Arc::clone(&self.engine))))
                .await
                .unwrap_or_else(|e| Err(unfinished(e))),
            // Not on the lowered thread: that is the priority inversion this avoids.
            None => Err(Error::Internal(
                "sync needs a tokio runtime for its local writes; call sync() from one".into(),
            )),
        }
    }
}

/// A database error met on the replica's connection may be the network failing under a
/// delegated statement: name it like a sync failure.
fn reclassify(e: Error, mode: SyncMode) -> Error {
    match e {
        Error::Db { context, source } => match source.downcast::<libsql::Error>() {
            Ok(err) => replica::classify(&context, *err, mode),
            Err(source) => Error::Db { context, source },
        },
        other => other,
    }
}

/// The loop: a run at start, then every interval (or back-off after failures), and shortly
/// after local writes that left changes in the outbox; `sync()` and `stop()` wake it. While no
/// handle is open (every one closed, and calls still running keep the engine a moment) it
/// does not run and has let go of the replica. Returns when the engine is gone.
async fn run_loop(service: &Arc<SyncService>, engine: &Weak<Engine>, lifetime: &Lifetime) {
    let mut delay = Duration::ZERO;
    let push_gap = PUSH_GAP.min(service.interval);
    let mut last_run_end = tokio::time::Instant::now();
    loop {
        let mut deadline = tokio::time::Instant::now() + delay;
        // Wait for the deadline, a wake-up, or (when not backing off) a settled local write
        // that left something to push.
        loop {
            let written = match engine.upgrade() {
                Some(e) => e.store.written(),
                None => return,
            };
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                _ = service.wake.notified() => break,
                _ = service.rescheduled.notified() => {
                    // A sync() ran: the next run is an interval (or back-off) from now.
                    let failures = service.status.lock().unwrap_or_else(|p| p.into_inner()).consecutive_failures;
                    deadline = tokio::time::Instant::now() + service.backoff(failures);
                }
                _ = written.notified() => {
                    if service.status.lock().unwrap_or_else(|p| p.into_inner()).consecutive_failures > 0 {
                        continue;
                    }
                    let settled = tokio::time::Instant::now() + WRITE_SETTLE;
                    tokio::time::sleep_until(settled.max(last_run_end + push_gap)).await;
                    let Some(e) = engine.upgrade() else { return };
                    if outbox_len(&e.store).await.unwrap_or(0) > 0 {
                        break;
                    }
                }
            }
        }
        if service.stopped.load(Ordering::SeqCst) {
            return;
        }
        if lifetime.open_handles() == 0 {
            // Every handle closed (or none is open yet): no run, and no replica held open,
            // until one opens; `stop()` ends the wait when the engine goes.
            service.release_replica().await;
            tokio::select! {
                () = lifetime.until_used() => {}
                _ = service.wake.notified() => {}
            }
            delay = Duration::ZERO;
            continue;
        }
        // While a run goes on, this task holds the engine: when every handle has closed, the
        // run is dropped (its transactions roll back; the outbox keeps what was not pushed)
        // so that the engine closes now, not after a network timeout.
        let outcome = {
            let Some(engine) = engine.upgrade() else {
                return;
            };
            tokio::select! {
                result = service.run_once(&engine) => Some(result),
                () = lifetime.until_unused() => None,
            }
        };
        let Some(result) = outcome else {
            // Abandoned. The replica's last sync was cut short: it is not reused. The next
            // pass ends the loop if the engine is gone, else waits for a handle.
            service.release_replica().await;
            {
                // Nothing runs any more: a handle that opens the engine again must not read
                // `syncing`.
                let mut status = service.status.lock().unwrap_or_else(|p| p.into_inner());
                if status.state == SyncState::Syncing {
                    status.state = SyncState::Idle;
                }
            }
            delay = Duration::ZERO;
            continue;
        };
        let failures = service
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .consecutive_failures;
        last_run_end = tokio::time::Instant::now();
        delay = match result {
            // More than one run's worth was waiting: go on at once.
            Ok(report) if report.pending > 0 && carried_a_full_run(&report) => Duration::ZERO,
            // Written while the run went on: the next run carries it after the gap.
            Ok(report) if report.pending > 0 => push_gap,
            _ => service.backoff(failures),
        };
    }
}

/// Whether a run moved as much as one run may: more is probably waiting (a backlog from an
/// offline spell, or another device's burst), so the next run follows at once.
fn carried_a_full_run(report: &SyncReport) -> bool {
    let most = u64::from(MAX_BATCHES_PER_RUN);
    report.pushed >= most * push::BATCH_ENTRIES as u64
        || report.pulled >= most * pull::BATCH_ENTRIES as u64
}

/// How long letting go of the replica waits for the blocking work libSQL left on its runtime.
/// A dropped frame write or file open ends in milliseconds; after sqld refuses the
/// offline-writes protocol (404) libSQL leaves a blocking task that never ends, and waiting
/// for it without a bound hung `close()` and every later open of the file.
const RUNTIME_STOP_GRACE: Duration = Duration::from_secs(2);

/// A runtime to shut down on a blocking thread, waiting (up to [`RUNTIME_STOP_GRACE`]) for its
/// blocking work; dropped without that (a blocking task that never ran), it shuts down in the
/// background instead of blocking an async thread.
struct StopRuntime(Option<tokio::runtime::Runtime>);

impl StopRuntime {
    fn wait(mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_timeout(RUNTIME_STOP_GRACE);
        }
    }
}

impl Drop for StopRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A run (or a run's write section) spawned on a runtime, cancelled when its caller lets go
/// of it (the loop abandons a run when every handle closes). The run holds the run lock until
/// it is dropped, so a release that follows waits for the cancellation to take effect.
struct AbortOnDrop<T>(tokio::task::JoinHandle<Result<T>>);

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = std::result::Result<Result<T>, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

/// The error of a spawned run or section that did not finish: its panic, or its runtime
/// shutting down (the replica's when the engine goes, the app's under a write section).
fn unfinished(e: tokio::task::JoinError) -> Error {
    if !e.is_panic() {
        return Error::Aborted;
    }
    let panic = e.into_panic();
    let message = panic
        .downcast_ref::<&str>()
        .map(|m| (*m).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    Error::Internal(format!("a sync run panicked: {message}"))
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn outbox_len(store: &Store) -> Result<u64> {
    let count = store
        .reader()
        .await
        .query_integer("SELECT count(*) FROM sync_changes", ())
        .await?;
    Ok(count as u64)
}

async fn state_value(conn: &libsql::Connection, name: &str) -> Result<Option<String>> {
    let mut rows = conn
        .query(
            "SELECT value FROM sync_state WHERE name = ?1",
            params![name],
        )
        .await
        .ctx("reading sync state")?;
    match rows.next().await.ctx("reading sync state")? {
        Some(row) => Ok(Some(row.get(0).ctx("reading sync state")?)),
        None => Ok(None),
    }
}

async fn set_state_value(conn: &libsql::Connection, name: &str, value: &str) -> Result<()> {
    conn.execute(
        "INSERT INTO sync_state(name, value) VALUES (?1, ?2)
         ON CONFLICT(name) DO UPDATE SET value = excluded.value",
        params![name, value],
    )
    .await
    .ctx("writing sync state")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalised_and_checked() {
        assert_eq!(
            normalize_url("libsql://db-org.turso.io/").unwrap(),
            "https://db-org.turso.io"
        );
        assert_eq!(
            normalize_url(" http://127.0.0.1:8080 ").unwrap(),
            "http://127.0.0.1:8080"
        );
        for bad in [
            "",
            "ftp://x",
            "127.0.0.1:8080",
            "https://",
            "https://u:p@host",
            "http://host:",
            "http://host:port",
        ] {
            let err = normalize_url(bad).unwrap_err();
            assert_eq!(err.code(), "ENGRAM_SYNC_CONFIG", "{bad}");
        }
    }
}
