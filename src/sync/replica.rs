//! The embedded replica of the server's database: opening it (no network needed), syncing
//! frames, bringing the server's schema up to this build's, and naming what went wrong.
//!
//! The replica is the transport and the server's truth as last seen; the engine never serves
//! reads from it (the working file does), so a replica that cannot sync costs nothing but
//! staleness.

use std::path::{Path, PathBuf};

use libsql::{Builder, Connection, Database};

use super::tables;
use crate::error::{DbContext, Error, Result};
use crate::store::Home;

/// How writes reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Each push transaction runs on the primary through the replica (libSQL's write
    /// delegation); works with Turso Cloud and self-hosted `sqld`.
    Forwarded,
    /// Pushes are written to the replica file and sent as frames on sync (libSQL's offline
    /// writes; a Turso Cloud protocol).
    OfflineWrites,
}

impl SyncMode {
    /// The mode's name in options and status (`forwarded` | `offline_writes`).
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::Forwarded => "forwarded",
            SyncMode::OfflineWrites => "offline_writes",
        }
    }
}

/// One frame sync's result.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Frames {
    /// Frames applied by this sync.
    pub synced: u64,
    /// The replica's frame number after it (`None` before the first frame).
    pub frame_no: Option<u64>,
}

/// An open replica file and its connection.
pub(crate) struct Replica {
    db: Database,
    conn: Connection,
    mode: SyncMode,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica").field("mode", &self.mode).finish()
    }
}

/// Where the replica of the working file `db_path` lives: a directory beside it, so that
/// libSQL's companion files (`-info`, `-wal`, `-client_wal_index`) stay together.
pub(crate) fn replica_path(db_path: &Path, mode: SyncMode) -> PathBuf {
    let mut dir = db_path.as_os_str().to_owned();
    dir.push(".sync");
    let file = match mode {
        SyncMode::Forwarded => "replica.db",
        SyncMode::OfflineWrites => "offline.db",
    };
    PathBuf::from(dir).join(file)
}

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether `path` is an embedded replica: engram's marker beside it (written when it created
/// the replica) or libSQL's `-info` (written after the first handshake).
pub fn is_replica_file(path: &Path) -> bool {
    companion(path, MARKER).exists() || companion(path, "-info").exists()
}

/// Engram's mark beside a replica file it created.
const MARKER: &str = "-engram";

/// Refuses a plain database where the replica must be: libSQL would replicate frames into
/// it and corrupt both.
pub(crate) fn check_replica_file(path: &Path) -> Result<()> {
    if path.exists() && !is_replica_file(path) {
        return Err(Error::SyncConfig(format!(
            "{} exists but is not an embedded replica; move it away to let engram create the \
             replica",
            path.display()
        )));
    }
    Ok(())
}

impl Replica {
    /// Opens (creating) the replica at `path`. Touches no network: the first [`Replica::sync`]
    /// does.
    pub(crate) async fn open(path: &Path, url: &str, token: &str, mode: SyncMode) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        check_replica_file(path)?;
        let marker = companion(path, MARKER);
        if !marker.exists() {
            std::fs::write(
                &marker,
                format!("{{\"url\":{url:?},\"mode\":\"{}\"}}\n", mode.as_str()),
            )
            .map_err(|e| Error::io(format!("writing {}", marker.display()), e))?;
        }
        let db = match mode {
            SyncMode::Forwarded => {
                Builder::new_remote_replica(path, url.to_owned(), token.to_owned())
                    // V1 (frames over HTTP) is what sqld and Turso both serve for replicas;
                    // Auto would probe the server at build time and fail offline.
                    .sync_protocol(libsql::SyncProtocol::V1)
                    .read_your_writes(true)
                    .build()
                    .await
            }
            SyncMode::OfflineWrites => {
                Builder::new_synced_database(path, url.to_owned(), token.to_owned())
                    .read_your_writes(true)
                    .build()
                    .await
            }
        }
        .map_err(|e| classify("opening the replica", e, mode))?;
        let conn = db
            .connect()
            .map_err(|e| classify("connecting to the replica", e, mode))?;
        Ok(Replica { db, conn, mode })
    }

    /// The connection push and pull use (writes in a transaction reach the primary).
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Pulls (and in offline-writes mode pushes) frames.
    pub(crate) async fn sync(&self, url: &str, token: &str) -> Result<Frames> {
        match self.db.sync().await {
            Ok(r) => Ok(Frames {
                synced: r.frames_synced() as u64,
                frame_no: r.frame_no(),
            }),
            Err(e) => {
                let err = classify("syncing the replica", e, self.mode);
                // libSQL's replicator retries every client error of the handshake, a refused
                // token included, and then reports a timeout: ask the server directly why.
                if matches!(&err, Error::SyncUnreachable(m) if m.contains("handshake")) {
                    if let Some(better) = diagnose(url, token).await {
                        return Err(better);
                    }
                }
                Err(err)
            }
        }
    }

    /// Brings the server's main schema up to this build's and makes it log its changes for
    /// other devices. Fails with `ENGRAM_SCHEMA_TOO_NEW` when another device's newer engram
    /// migrated it past what this build knows (local work goes on; sync waits for an upgrade).
    pub(crate) async fn prepare_server(&self) -> Result<()> {
        let found = schema_version(&self.conn).await?;
        if found > Home::Main.latest() {
            return Err(Error::SchemaTooNew {
                home: Home::Main.name(),
                found,
                supported: Home::Main.latest(),
            });
        }
        if found < Home::Main.latest() {
            crate::store::migrate(&self.conn, &[Home::Main])
                .await
                .map_err(|e| match e {
                    Error::Db { context, source } => {
                        Error::Sync(format!("{context} on the server: {source}"))
                    }
                    other => other,
                })?;
        }
        tables::install_capture(&self.conn).await
    }
}

/// Why a handshake failed, from one query over the remote protocol with the same URL and
/// token: `ENGRAM_SYNC_AUTH` for a refused token; `None` when that says nothing more.
async fn diagnose(url: &str, token: &str) -> Option<Error> {
    let probe = async {
        let db = Builder::new_remote(url.to_owned(), token.to_owned())
            .build()
            .await?;
        db.connect()?.execute("SELECT 1", ()).await
    };
    match tokio::time::timeout(std::time::Duration::from_secs(5), probe).await {
        Ok(Err(e)) => match classify("checking the server", e, SyncMode::Forwarded) {
            auth @ Error::SyncAuth(_) => Some(auth),
            _ => None,
        },
        _ => None,
    }
}

/// The server's main schema version as the replica last saw it (0 for an empty server).
async fn schema_version(conn: &Connection) -> Result<i64> {
    let mut rows = conn
        .query(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'engram_schema'",
            (),
        )
        .await
        .ctx("reading the server schema")?;
    let exists: i64 = match rows.next().await.ctx("reading the server schema")? {
        Some(row) => row.get(0).ctx("reading the server schema")?,
        None => 0,
    };
    drop(rows);
    if exists == 0 {
        return Ok(0);
    }
    let mut rows = conn
        .query(
            "SELECT version FROM engram_schema WHERE home = ?1",
            [Home::Main.name()],
        )
        .await
        .ctx("reading the server schema")?;
    match rows.next().await.ctx("reading the server schema")? {
        Some(row) => row.get(0).ctx("reading the server schema"),
        None => Ok(0),
    }
}

/// Names a libSQL failure met while syncing. libSQL's network errors are opaque boxes, so
/// the kind is read from the message chain: refusals and timeouts are `unreachable`, 401/403
/// are `auth`, a 404 from the offline-writes protocol is `unsupported`; SQL errors the
/// server answered keep their database code.
pub(crate) fn classify(context: &str, err: libsql::Error, mode: SyncMode) -> Error {
    if let libsql::Error::SqliteFailure(..) = err {
        return Error::db(context, err);
    }
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    let lower = text.to_lowercase();
    let message = format!("{context}: {}", crate::text::clip_bytes(&text, 600));
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if has(&[
        "unauthorized",
        "401",
        "403",
        "forbidden",
        "invalid token",
        "jwt",
    ]) {
        Error::SyncAuth(message)
    } else if mode == SyncMode::OfflineWrites && has(&["(404", "404 not found", "pulldb(404"]) {
        Error::SyncUnsupported(format!(
            "{message} (offline writes need Turso Cloud's sync protocol; use the forwarded mode \
             with a self-hosted sqld)"
        ))
    } else if has(&[
        "connection refused",
        "handshake",
        "timed out",
        "timeout",
        "dns",
        "error trying to connect",
        "connection reset",
        "broken pipe",
        "network is unreachable",
        "no route to host",
        "connection closed",
        "connection error",
        "tcp connect",
        "unavailable",
        "failed to lookup",
        "connectionfailed",
    ]) {
        Error::SyncUnreachable(message)
    } else {
        Error::Sync(message)
    }
}
