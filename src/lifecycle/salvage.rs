//! `engram doctor`: what is wrong with a database file, and salvage: the memories that can
//! still be read, copied with their history and events into a new file.
//!
//! Both work on the file with a read-only connection of their own, never through an engine
//! (opening one migrates, which writes). Salvage reads memories one row at a time by their
//! `seq`, found from every structure that may still answer (a table scan until it fails, the
//! largest `seq`, the list-order index), so one damaged page costs the rows on it, not the
//! rest. Only memories are salvaged: the code index and the graph's structural layers are
//! derived (index the project again); observer sessions, trust levels and sync state start
//! over in the new file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use libsql::{params, Connection, OpenFlags};
use serde::Serialize;

use super::events::{self, MemoryEvent};
use super::transfer::{self, Document, ExportedVersion, OnConflict, JSON_FORMAT, JSON_VERSION};
use crate::error::{DbContext, Error, Result};
use crate::memory::rows::{from_row, SELECT_M};
use crate::memory::Memory;
use crate::store::integrity;

/// Rows beyond which salvage does not probe every `seq` up to the largest one (a table whose
/// largest `seq` is this big but whose scan failed early is read from its indexes only).
const MAX_PROBED_SEQS: i64 = 5_000_000;

/// What `doctor` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// What the header and length check found (a file cut short), if anything.
    pub header: Option<String>,
    /// What SQLite's `quick_check` found (empty: every page is sound).
    pub problems: Vec<String>,
    /// Memories that can be read (salvage would copy these).
    pub readable_memories: u64,
    /// Memory rows that could not be read.
    pub unreadable_memories: u64,
    /// Whether the file is sound.
    pub ok: bool,
}

/// What `salvage` copied.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SalvageReport {
    /// The new file.
    pub path: PathBuf,
    /// Projects found.
    pub projects: u32,
    /// Memories copied.
    pub memories: u64,
    /// Memory rows that could not be read.
    pub lost: u64,
    /// Past versions copied.
    pub versions: u64,
    /// Events copied.
    pub events: u64,
}

/// Opens `path` read-only (fails with `ENGRAM_IO` when it is missing).
async fn open_read_only(path: &Path) -> Result<(libsql::Database, Connection)> {
    if !path.is_file() {
        return Err(Error::io(
            format!("reading {}", path.display()),
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        ));
    }
    crate::store::process::configure();
    let db = libsql::Builder::new_local(path)
        .flags(OpenFlags::SQLITE_OPEN_READ_ONLY)
        .build()
        .await
        .map_err(|e| Error::db(format!("opening {} read-only", path.display()), e))?;
    let conn = db.connect().ctx("connecting read-only")?;
    Ok((db, conn))
}

/// Checks the file at `path`: header and length, every page (`quick_check`), and how many
/// memory rows can be read. Never writes.
pub async fn doctor(path: &Path) -> Result<DoctorReport> {
    let (_db, conn) = open_read_only(path).await?;
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let header = integrity::check_header(path).err();
    let problems = integrity::quick_check(&conn).await?;
    let (memories, lost) = readable_memories(&conn).await;
    Ok(DoctorReport {
        path: path.to_path_buf(),
        bytes,
        ok: header.is_none() && problems.is_empty() && lost == 0,
        header,
        problems,
        readable_memories: memories.len() as u64,
        unreadable_memories: lost,
    })
}

/// Copies the memories of `from` that can be read, with their versions and events, into a new
/// engram database at `to` (which must not exist yet, or be empty), project by project.
pub async fn salvage(from: &Path, to: &Path) -> Result<SalvageReport> {
    if std::fs::metadata(to).is_ok_and(|m| m.len() > 0) {
        return Err(Error::invalid(format!(
            "{} exists: salvage writes a new file, give a path that does not exist",
            to.display()
        )));
    }
    let (_db, conn) = open_read_only(from).await?;
    let (memories, lost) = readable_memories(&conn).await;
    let mut by_project: BTreeMap<String, Vec<Memory>> = BTreeMap::new();
    for m in memories {
        by_project.entry(m.project_id.clone()).or_default().push(m);
    }
    let mut report = SalvageReport {
        path: to.to_path_buf(),
        lost,
        ..SalvageReport::default()
    };
    for (project_id, memories) in by_project {
        let mut versions = Vec::new();
        let mut events = Vec::new();
        for m in &memories {
            versions.extend(versions_of(&conn, &m.id).await);
            events.extend(events_of(&conn, &m.id).await);
        }
        let doc = Document {
            format: JSON_FORMAT.to_owned(),
            version: JSON_VERSION,
            project_id: project_id.clone(),
            exported_at: 0,
            memories,
            versions,
            events,
        };
        let text = serde_json::to_string(&doc)
            .map_err(|e| Error::Internal(format!("serialising salvaged memories: {e}")))?;
        let mut options = crate::OpenOptions::new(to);
        options.project_id = Some(project_id);
        let handle = crate::Engram::open(options).await?;
        let imported = transfer::import_json(&handle.ctx(), &text, OnConflict::Skip).await;
        handle.close().wait().await;
        let imported = imported?;
        report.projects += 1;
        report.memories += imported.imported + imported.updated;
        report.versions += imported.versions;
        report.events += imported.events;
    }
    Ok(report)
}

/// The memory rows that can be read, and how many could not.
async fn readable_memories(conn: &Connection) -> (Vec<Memory>, u64) {
    let seqs = known_seqs(conn).await;
    let sql = format!("SELECT {} FROM memories m WHERE m.seq = ?1", *SELECT_M);
    let mut found = Vec::with_capacity(seqs.len());
    let mut lost = 0;
    for seq in seqs {
        let row = async {
            let mut rows = conn.query(&sql, params![seq]).await.ctx("salvage")?;
            match rows.next().await.ctx("salvage")? {
                Some(row) => from_row(&row).map(Some),
                None => Ok(None),
            }
        }
        .await;
        match row {
            Ok(Some(m)) => found.push(m),
            Ok(None) => {} // a gap in the numbering, not a lost row
            Err(_) => lost += 1,
        }
    }
    (found, lost)
}

/// Every `seq` any structure of the table still names.
async fn known_seqs(conn: &Connection) -> BTreeSet<i64> {
    let mut seqs = BTreeSet::new();
    for sql in [
        "SELECT seq FROM memories",
        "SELECT seq FROM memories INDEXED BY idx_memories_project_created",
        "SELECT seq FROM memories INDEXED BY idx_memories_project_type",
    ] {
        collect_until_error(conn, sql, &mut seqs).await;
    }
    let largest = async {
        let mut rows = conn.query("SELECT max(seq) FROM memories", ()).await.ok()?;
        rows.next().await.ok()??.get::<i64>(0).ok()
    }
    .await;
    if let Some(max) = largest.filter(|&m| m <= MAX_PROBED_SEQS) {
        seqs.extend(1..=max);
    }
    seqs
}

async fn collect_until_error(conn: &Connection, sql: &str, into: &mut BTreeSet<i64>) {
    let Ok(mut rows) = conn.query(sql, ()).await else {
        return;
    };
    while let Ok(Some(row)) = rows.next().await {
        if let Ok(seq) = row.get::<i64>(0) {
            into.insert(seq);
        }
    }
}

/// The readable past versions of memory `id`.
async fn versions_of(conn: &Connection, id: &str) -> Vec<ExportedVersion> {
    let mut out = Vec::new();
    let Ok(mut rows) = conn
        .query(
            "SELECT version, ended_by, ended_at, snapshot FROM memory_versions
             WHERE memory_id = ?1 ORDER BY version",
            params![id],
        )
        .await
    else {
        return out;
    };
    while let Ok(Some(row)) = rows.next().await {
        let version = async {
            Ok::<_, Error>(ExportedVersion {
                memory_id: id.to_owned(),
                version: row.get::<i64>(0).ctx("version")? as u32,
                ended_by: row.get(1).ctx("version")?,
                ended_at: row.get(2).ctx("version")?,
                memory: crate::memory::snapshot::decode(&row.get::<String>(3).ctx("version")?)?,
            })
        }
        .await;
        if let Ok(version) = version {
            out.push(version);
        }
    }
    out
}

/// The readable events of memory `id`.
async fn events_of(conn: &Connection, id: &str) -> Vec<MemoryEvent> {
    let mut out = Vec::new();
    let sql = format!(
        "SELECT {} FROM memory_events WHERE memory_id = ?1 ORDER BY created_at, id",
        events::COLUMNS
    );
    let Ok(mut rows) = conn.query(&sql, params![id]).await else {
        return out;
    };
    while let Ok(Some(row)) = rows.next().await {
        if let Ok(event) = events::from_row(&row) {
            out.push(event);
        }
    }
    out
}
