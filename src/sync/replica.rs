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
        crate::store::process::configure();
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

    /// Brings the server's schema up to this build's (through the replica, whose view must be
    /// fresh: see [`primary_state`]), makes the server log its changes for other devices, and
    /// names the server if it has no id yet (the first device to get here does; the insert is
    /// a no-op for the rest).
    pub(crate) async fn prepare_server(&self) -> Result<()> {
        if schema_version(&self.conn).await? < Home::Main.latest() {
            crate::store::migrate(&self.conn, &[Home::Main])
                .await
                .map_err(|e| match e {
                    Error::Db { context, source } => {
                        Error::Sync(format!("{context} on the server: {source}"))
                    }
                    other => other,
                })?;
        }
        prepare_primary(&self.conn).await
    }

    /// The server's main schema version as the replica last saw it (0 for an empty server).
    pub(crate) async fn schema_version(&self) -> Result<i64> {
        schema_version(&self.conn).await
    }

    /// Closes the replica and deletes its files (it mirrors a database that no longer
    /// exists); the next open starts a fresh one.
    pub(crate) fn discard(self, path: &Path) -> Result<()> {
        drop(self);
        let dir = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entries = std::fs::read_dir(dir)
            .map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&name) {
                let p = entry.path();
                let removed = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
                removed.map_err(|e| Error::io(format!("removing {}", p.display()), e))?;
            }
        }
        Ok(())
    }
}

/// Makes a migrated server database a sync primary: capture triggers (so its change log
/// records every write, pushed or made by a remote-only engine) and its identity.
pub(crate) async fn prepare_primary(conn: &Connection) -> Result<()> {
    tables::install_capture(conn).await?;
    conn.execute(
        "INSERT INTO sync_state(name, value) VALUES ('server_id', ?1)
         ON CONFLICT(name) DO NOTHING",
        [uuid::Uuid::now_v7().to_string()],
    )
    .await
    .ctx("naming the server")?;
    Ok(())
}

/// The primary's main schema version and identity (its `sync_state.server_id`), asked over
/// the remote protocol: a replica's copy may be of another database that had this URL.
pub(crate) async fn primary_state(url: &str, token: &str) -> Result<(i64, Option<String>)> {
    let context = "asking the server who it is";
    let db = Builder::new_remote(url.to_owned(), token.to_owned())
        .build()
        .await
        .map_err(|e| classify(context, e, SyncMode::Forwarded))?;
    let conn = db
        .connect()
        .map_err(|e| classify(context, e, SyncMode::Forwarded))?;
    let one = |sql: &'static str| {
        let conn = conn.clone();
        async move {
            match conn.query(sql, ()).await {
                Ok(mut rows) => match rows.next().await {
                    Ok(Some(row)) => Ok(Some(row.get_value(0).ok())),
                    Ok(None) => Ok(Some(None)),
                    Err(e) => Err(e),
                },
                // A new, empty server.
                Err(e) if e.to_string().contains("no such table") => Ok(None),
                Err(e) => Err(e),
            }
        }
    };
    let probe = async {
        let version = one("SELECT version FROM engram_schema WHERE home = 'main'").await?;
        let id = one("SELECT value FROM sync_state WHERE name = 'server_id'").await?;
        Ok::<_, libsql::Error>((version, id))
    };
    let (version, id) = tokio::time::timeout(std::time::Duration::from_secs(10), probe)
        .await
        .map_err(|_| Error::SyncUnreachable(format!("{context}: no answer in 10 s")))?
        .map_err(|e| classify(context, e, SyncMode::Forwarded))?;
    let version = match version.flatten() {
        Some(libsql::Value::Integer(v)) => v,
        _ => 0,
    };
    let id = match id.flatten() {
        Some(libsql::Value::Text(t)) => Some(t),
        _ => None,
    };
    Ok((version, id))
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

/// How long [`probe`] waits for the server's host to accept a connection.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Fails at once with `ENGRAM_SYNC_UNREACHABLE` when the server's host cannot be resolved or
/// refuses a TCP connection on every address. libSQL's replicator retries a failed handshake
/// three times, a second apart, before it reports one: offline, each run took 3 s to fail,
/// and a `sync()` waited 6 s behind the loop's own run. A host that does not answer within
/// 3 s is left to libSQL: its connector races the addresses (happy eyeballs), where this
/// tries them in turn, so a dead IPv6 route would stall here but not there. Meant for a
/// replica opened afresh (a run after a failure, the first run of an engine, after a token
/// refresh), so that a working connection pays no extra round trip.
pub(crate) async fn probe(url: &str) -> Result<()> {
    let (host, port) = host_and_port(url)?;
    let connect = tokio::net::TcpStream::connect((host, port));
    match tokio::time::timeout(PROBE_TIMEOUT, connect).await {
        Ok(Err(e)) => Err(Error::SyncUnreachable(format!(
            "connecting to {host}:{port}: {e}"
        ))),
        Ok(Ok(_)) | Err(_) => Ok(()),
    }
}

/// The host and port of a normalised server URL (`http://` or `https://`; see
/// `sync::normalize_url`), the scheme's port when none is given.
pub(crate) fn host_and_port(url: &str) -> Result<(&str, u16)> {
    let (rest, default_port) = match url.strip_prefix("https://") {
        Some(rest) => (rest, 443),
        None => (url.strip_prefix("http://").unwrap_or(url), 80),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let bad = || {
        Error::SyncConfig(format!(
            "sync url {url:?} has no host and port to connect to"
        ))
    };
    let (host, port) = match authority.strip_prefix('[') {
        // An IPv6 literal: `[::1]` or `[::1]:8080`.
        Some(v6) => {
            let (host, after) = v6.split_once(']').ok_or_else(bad)?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| bad())?,
        None => default_port,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host, port))
}

/// An HTTP 401/403 as libSQL's and hyper's messages print one.
static AUTH_STATUS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"(status[ :=(]*|http error |\()40[13]\b|\b40[13] (unauthorized|forbidden)")
        .expect("valid regex")
});

/// Names a libSQL failure met while syncing. libSQL's network errors are opaque boxes, so
/// the kind is read from the message chain: refusals and timeouts are `unreachable`, 401/403
/// are `auth`, a 404 from the offline-writes protocol is `unsupported`; SQL errors the
/// server answered keep their database code.
pub(crate) fn classify(context: &str, err: libsql::Error, mode: SyncMode) -> Error {
    if let libsql::Error::SqliteFailure(..) = err {
        return Error::db(context, err);
    }
    let text = error_chain(&err);
    let lower = text.to_lowercase();
    let message = format!("{context}: {}", crate::text::clip_bytes(&text, 600));
    if let Some(failure) = transport_failure(&lower, &message) {
        failure
    } else if mode == SyncMode::OfflineWrites
        && ["(404", "404 not found", "pulldb(404"]
            .iter()
            .any(|n| lower.contains(n))
    {
        Error::SyncUnsupported(format!(
            "{message} (offline writes need Turso Cloud's sync protocol; use the forwarded mode \
             with a self-hosted sqld)"
        ))
    } else {
        Error::Sync(message)
    }
}

/// A remote statement's failure as an `ENGRAM_SYNC_AUTH` or `ENGRAM_SYNC_UNREACHABLE` error
/// when the server refused the token or could not be reached (`None` for an error the server
/// answered, such as a constraint). For remote-only engines, whose every statement is a
/// request.
pub(crate) fn remote_failure(context: &str, err: &libsql::Error) -> Option<Error> {
    let text = error_chain(err);
    let message = format!("{context}: {}", crate::text::clip_bytes(&text, 600));
    transport_failure(&text.to_lowercase(), &message)
}

/// Whether a remote statement failed because the server interrupted it (`SQLITE_INTERRUPT`).
pub(crate) fn remote_interrupted(err: &libsql::Error) -> bool {
    let text = error_chain(err).to_lowercase();
    text.contains("sqlite_interrupt") || text.contains("sqlite error: interrupted")
}

/// The error and its sources, one message.
fn error_chain(err: &libsql::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Auth refusals and network failures, read from the lower-cased message chain.
fn transport_failure(lower: &str, message: &str) -> Option<Error> {
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    // Status codes only where they read as HTTP statuses: bare digits also occur in frame
    // numbers, ports and ids.
    if AUTH_STATUS.is_match(lower) || has(&["unauthorized", "unauthenticated", "forbidden"]) {
        Some(Error::SyncAuth(message.to_owned()))
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
        Some(Error::SyncUnreachable(message.to_owned()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_connect_to_the_urls_host_and_port() {
        assert_eq!(
            host_and_port("http://127.0.0.1:8080").unwrap(),
            ("127.0.0.1", 8080)
        );
        assert_eq!(
            host_and_port("https://db-org.turso.io").unwrap(),
            ("db-org.turso.io", 443)
        );
        assert_eq!(
            host_and_port("http://example.com/x?y").unwrap(),
            ("example.com", 80)
        );
        assert_eq!(host_and_port("http://[::1]:9000/").unwrap(), ("::1", 9000));
        assert_eq!(host_and_port("https://[::1]").unwrap(), ("::1", 443));
        for bad in ["http://", "http://host:port", "http://[::1"] {
            assert_eq!(
                host_and_port(bad).unwrap_err().code(),
                "ENGRAM_SYNC_CONFIG",
                "{bad}"
            );
        }
    }

    fn code_of(message: &str) -> &'static str {
        classify(
            "syncing",
            libsql::Error::Sync(message.to_owned().into()),
            SyncMode::Forwarded,
        )
        .code()
    }

    #[test]
    fn failures_are_named_by_what_they_say_not_by_stray_digits() {
        assert_eq!(code_of("HTTP error 401 Unauthorized"), "ENGRAM_SYNC_AUTH");
        assert_eq!(code_of("status: 403, body: nope"), "ENGRAM_SYNC_AUTH");
        assert_eq!(code_of("Unauthenticated: bad jwt"), "ENGRAM_SYNC_AUTH");
        assert_eq!(
            code_of("server returned a conflict: sent=14030, got=4013"),
            "ENGRAM_SYNC"
        );
        assert_eq!(code_of("frame 4010 missing"), "ENGRAM_SYNC");
        assert_eq!(
            code_of("error trying to connect: tcp connect error: Connection refused"),
            "ENGRAM_SYNC_UNREACHABLE"
        );
        let offline = classify(
            "syncing",
            libsql::Error::Sync("PullDb(404, \"\")".to_owned().into()),
            SyncMode::OfflineWrites,
        );
        assert_eq!(offline.code(), "ENGRAM_SYNC_UNSUPPORTED");
    }

    #[test]
    fn a_server_interrupting_a_statement_is_busy_and_other_remote_errors_keep_their_codes() {
        let remote = |text: &str| Error::db("inserting memory", libsql::Error::Hrana(text.into()));
        let statement = "stream error: `Error { message: \"SQLite error: interrupted\", code: \"SQLITE_INTERRUPT\" }`";
        assert_eq!(remote(statement).code(), "ENGRAM_SQLITE_BUSY");
        let pipeline = remote("api error: `SQLite error: interrupted`");
        assert_eq!(pipeline.code(), "ENGRAM_SQLITE_BUSY");
        assert!(pipeline.to_string().contains("retry"), "{pipeline}");
        assert_eq!(
            remote("stream error: near \"SELEC\": syntax error").code(),
            "ENGRAM_DB"
        );
        assert_eq!(
            remote("error trying to connect: Connection refused").code(),
            "ENGRAM_SYNC_UNREACHABLE"
        );
    }
}
