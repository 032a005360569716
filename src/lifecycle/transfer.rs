//! Export, import and delete-all (seed 003 section 16, GDPR controls).
//!
//! - **JSON** (`engram.memories`, version 1) is lossless: every field of every memory (ids,
//!   counters, times, flags), its whole history and its event log. Importing it into an empty
//!   project restores exactly what was exported.
//! - **Markdown** is for people (see [`super::markdown`]): readable, editable, importable.
//!   Importing it updates the memories whose id it names (a versioned change, when the text or
//!   the type changed) and remembers the rest as new memories.
//! - **Delete all** hard-deletes a project's memories with their history, events, vectors and
//!   links: account deletion.
//!
//! Both imports validate every memory before writing any (one bad entry fails the call,
//! naming its index) and write in batches of [`BATCH`] per transaction, so readers are never
//! blocked; the privacy filter runs again on every imported text (a file may have been edited
//! by hand): every text field of every memory and of every past version (`memory::scrub`), and
//! every event's body and author.

use std::collections::HashSet;

use libsql::params;
use serde::{Deserialize, Serialize};

use super::events::MemoryEvent;
use super::markdown::{self, MarkdownMemory};
use crate::error::{DbContext, Error, Result};
use crate::memory::dedup::content_hash;
use crate::memory::privacy::redact;
use crate::memory::rows::{self, from_row, to_params, SELECT_M};
use crate::memory::scrub::scrub;
use crate::memory::snapshot;
use crate::memory::{
    self, Ctx, Memory, MemoryPatch, MemoryScope, MemorySource, MemoryType, RememberInput,
    ShareScope,
};
use crate::store::begin_write;

/// Memories per write transaction of an import or a deletion.
pub const BATCH: usize = 1000;

/// The `format` tag of engram's JSON export.
pub const JSON_FORMAT: &str = "engram.memories";
/// The version of the JSON export this build writes and reads.
pub const JSON_VERSION: u32 = 1;

/// Largest import file read (256 MiB): far above any real export (a memory's content is at
/// most 64 KiB by default), and a bound on what a wrong path (`/dev/zero`, a huge log) can
/// make the process allocate.
pub const MAX_IMPORT_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The text of an import file. Fails with `ENGRAM_INVALID_ARG` for anything but a regular
/// file (a FIFO, device or directory is refused before it is opened, so nothing blocks), a
/// file over [`MAX_IMPORT_FILE_BYTES`] or one that is not UTF-8, and with `ENGRAM_IO` when it
/// cannot be read.
pub(crate) fn read_import_file(path: &std::path::Path) -> Result<String> {
    let what = format!("the import file {}", path.display());
    let bytes = crate::file_read::read_regular(path, MAX_IMPORT_FILE_BYTES, &what)?;
    String::from_utf8(bytes).map_err(|e| {
        Error::invalid(format!(
            "{what} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// What an export holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Lossless JSON (memories, history, events).
    Json,
    /// Human-readable Markdown, importable.
    Markdown,
}

impl ExportFormat {
    /// Parses `json | markdown`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "json" => Ok(ExportFormat::Json),
            "markdown" => Ok(ExportFormat::Markdown),
            other => Err(Error::invalid(format!(
                "unknown export format {other:?}; expected one of: json, markdown"
            ))),
        }
    }
}

/// How to export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The format.
    pub format: ExportFormat,
    /// Forgotten memories too (default: yes for JSON, no for Markdown).
    pub include_forgotten: Option<bool>,
}

/// An export: the text and how many memories it holds.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The document.
    pub text: String,
    /// Memories in it.
    pub memories: u64,
}

/// A past state in the JSON export.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExportedVersion {
    pub(crate) memory_id: String,
    pub(crate) version: u32,
    pub(crate) ended_by: String,
    pub(crate) ended_at: i64,
    pub(crate) memory: Memory,
}

/// The JSON document.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Document {
    pub(crate) format: String,
    pub(crate) version: u32,
    pub(crate) project_id: String,
    pub(crate) exported_at: i64,
    pub(crate) memories: Vec<Memory>,
    #[serde(default)]
    pub(crate) versions: Vec<ExportedVersion>,
    #[serde(default)]
    pub(crate) events: Vec<MemoryEvent>,
}

/// Every memory of the project (forgotten ones if asked), oldest first.
async fn all_memories(ctx: &Ctx<'_>, include_forgotten: bool) -> Result<Vec<Memory>> {
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            &format!(
                "SELECT {} FROM memories m WHERE m.project_id = ?1 AND (?2 OR m.deprecated = 0)
                 ORDER BY m.seq",
                *SELECT_M
            ),
            params![ctx.project_id, include_forgotten],
        )
        .await
        .ctx("reading memories to export")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading memories to export")? {
        out.push(from_row(&row)?);
    }
    Ok(out)
}

/// Exports the project's memories; see the module doc.
pub(crate) async fn export(ctx: &Ctx<'_>, options: &ExportOptions) -> Result<Exported> {
    let include_forgotten = options
        .include_forgotten
        .unwrap_or(options.format == ExportFormat::Json);
    let memories = all_memories(ctx, include_forgotten).await?;
    let count = memories.len() as u64;
    let text = match options.format {
        ExportFormat::Markdown => {
            let items: Vec<MarkdownMemory> = memories.iter().map(to_markdown).collect();
            markdown::render(ctx.project_id, &items)
        }
        ExportFormat::Json => {
            let ids: HashSet<&str> = memories.iter().map(|m| m.id.as_str()).collect();
            let (versions, events) = history_of(ctx, &ids).await?;
            let doc = Document {
                format: JSON_FORMAT.to_owned(),
                version: JSON_VERSION,
                project_id: ctx.project_id.to_owned(),
                exported_at: ctx.clock.now_ms(),
                memories,
                versions,
                events,
            };
            serde_json::to_string(&doc)
                .map_err(|e| Error::Internal(format!("serialising the export: {e}")))?
        }
    };
    Ok(Exported {
        text,
        memories: count,
    })
}

/// The history and events of the project's memories among `ids`.
async fn history_of(
    ctx: &Ctx<'_>,
    ids: &HashSet<&str>,
) -> Result<(Vec<ExportedVersion>, Vec<MemoryEvent>)> {
    let conn = ctx.store.reader().await;
    let mut versions = Vec::new();
    let mut rows = conn
        .query(
            "SELECT v.memory_id, v.version, v.ended_by, v.ended_at, v.snapshot
             FROM memories m CROSS JOIN memory_versions v ON v.memory_id = m.id
             WHERE m.project_id = ?1 ORDER BY m.seq, v.version",
            params![ctx.project_id],
        )
        .await
        .ctx("reading history to export")?;
    while let Some(row) = rows.next().await.ctx("reading history to export")? {
        let memory_id: String = row.get(0).ctx("version")?;
        if !ids.contains(memory_id.as_str()) {
            continue;
        }
        let snapshot: String = row.get(4).ctx("version")?;
        versions.push(ExportedVersion {
            memory_id,
            version: row.get::<i64>(1).ctx("version")? as u32,
            ended_by: row.get(2).ctx("version")?,
            ended_at: row.get(3).ctx("version")?,
            memory: snapshot::decode(&snapshot)?,
        });
    }
    drop(rows);
    let mut events = Vec::new();
    let mut rows = conn
        .query(
            &format!(
                "SELECT {} FROM memory_events WHERE project_id = ?1 ORDER BY created_at, id",
                super::events::COLUMNS
            ),
            params![ctx.project_id],
        )
        .await
        .ctx("reading events to export")?;
    while let Some(row) = rows.next().await.ctx("reading events to export")? {
        let event = super::events::from_row(&row)?;
        if ids.contains(event.memory_id.as_str()) {
            events.push(event);
        }
    }
    Ok((versions, events))
}

fn to_markdown(m: &Memory) -> MarkdownMemory {
    MarkdownMemory {
        id: m.id.clone(),
        memory_type: m.memory_type.as_str().to_owned(),
        content: m.content.clone(),
        confidence: m.confidence,
        tags: m.tags.clone(),
        related_files: m.related_files.clone(),
        related_modules: m.related_modules.clone(),
        scope: m.scope.as_str().to_owned(),
        share_scope: m.share_scope.as_str().to_owned(),
        source: m.source.as_str().to_owned(),
        pinned: m.pinned,
        user_verified: m.user_verified,
        needs_review: m.needs_review,
        deprecated: m.deprecated,
        created_at: m.created_at,
    }
}

/// What to do with an imported memory whose id the project already has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnConflict {
    /// Keep the stored one (the default).
    #[default]
    Skip,
    /// Replace it, history and events included, with the imported one.
    Replace,
}

impl OnConflict {
    /// Parses `skip | replace`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "skip" => Ok(OnConflict::Skip),
            "replace" => Ok(OnConflict::Replace),
            other => Err(Error::invalid(format!(
                "unknown onConflict {other:?}; expected one of: skip, replace"
            ))),
        }
    }
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Memories written as new rows (JSON: with their own ids).
    pub imported: u64,
    /// Memories that replaced or updated a stored one.
    pub updated: u64,
    /// Memories left out: their id was taken (JSON, `skip`) or nothing changed (Markdown).
    pub skipped: u64,
    /// Memories left out because an active memory with the same content and scope exists.
    pub duplicates: u64,
    /// Past versions written.
    pub versions: u64,
    /// Events written.
    pub events: u64,
}

/// Imports a JSON export into the handle's project (whatever project it came from).
pub(crate) async fn import_json(
    ctx: &Ctx<'_>,
    text: &str,
    on_conflict: OnConflict,
) -> Result<ImportReport> {
    let doc: Document = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("not an engram JSON export: {e}")))?;
    if doc.format != JSON_FORMAT {
        return Err(Error::invalid(format!(
            "not an engram JSON export (format {:?}, expected {JSON_FORMAT:?})",
            doc.format
        )));
    }
    if doc.version > JSON_VERSION {
        return Err(Error::invalid(format!(
            "this export is version {}, newer than the {JSON_VERSION} this engram reads; upgrade engram",
            doc.version
        )));
    }
    let memories = doc
        .memories
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            checked(ctx, m).map_err(|e| match e {
                Error::InvalidArg(msg) => Error::InvalidArg(format!("memory {i}: {msg}")),
                other => other,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut report = ImportReport::default();
    let mut written: HashSet<String> = HashSet::new();
    for batch in memories.chunks(BATCH) {
        let mut conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        // The writer's cached statements: preparing three statements per memory cost more
        // than the inserts.
        let owner = conn.cached(OWNER_OF_ID).await?;
        let duplicate = conn.cached(ACTIVE_DUPLICATE).await?;
        let insert = conn.cached(&rows::INSERT).await?;
        let mut seqs = Vec::with_capacity(batch.len());
        for m in batch {
            let exists = first_text(&owner, params![m.id.as_str()]).await?;
            match (&exists, on_conflict) {
                (Some(owner), _) if owner != ctx.project_id => {
                    return Err(Error::Conflict(format!(
                        "memory {} belongs to another project ({owner}) in this file",
                        m.id
                    )))
                }
                (Some(_), OnConflict::Skip) => {
                    report.skipped += 1;
                    continue;
                }
                (Some(_), OnConflict::Replace) => {
                    for sql in [
                        "DELETE FROM memory_versions WHERE memory_id = ?1",
                        "DELETE FROM memory_events WHERE memory_id = ?1",
                        "DELETE FROM memories WHERE id = ?1",
                    ] {
                        tx.execute(sql, params![m.id.as_str()])
                            .await
                            .ctx("replacing a memory")?;
                    }
                    report.updated += 1;
                }
                (None, _) => report.imported += 1,
            }
            let hash = content_hash(&m.content);
            let is_duplicate = !m.deprecated
                && first_text(
                    &duplicate,
                    params![m.project_id.as_str(), m.scope.as_str(), hash.as_str()],
                )
                .await?
                .is_some();
            if is_duplicate {
                if exists.is_some() {
                    report.updated -= 1;
                } else {
                    report.imported -= 1;
                }
                report.duplicates += 1;
                continue;
            }
            insert
                .execute(to_params(m, &hash))
                .await
                .ctx("importing a memory")?;
            insert.reset();
            seqs.push(tx.last_insert_rowid());
            written.insert(m.id.clone());
        }
        drop((owner, duplicate, insert));
        if !seqs.is_empty() {
            let list = serde_json::to_string(&seqs).expect("integers serialise");
            tx.execute(
                "INSERT INTO memories_fts(rowid, content, tags, related_files)
                 SELECT m.seq, m.content, m.tags, m.related_files
                 FROM json_each(?1) AS j CROSS JOIN memories m ON m.seq = j.value",
                params![list],
            )
            .await
            .ctx("indexing imported memories")?;
        }
        tx.commit().await.ctx("committing import")?;
    }
    // History and events of the memories written, in batches of their own.
    let versions: Vec<&ExportedVersion> = doc
        .versions
        .iter()
        .filter(|v| written.contains(&v.memory_id))
        .collect();
    for batch in versions.chunks(BATCH) {
        let rows: Vec<serde_json::Value> = batch
            .iter()
            .map(|v| {
                let mut past = v.memory.clone();
                past.project_id = ctx.project_id.to_owned();
                past.redactions += scrub(&mut past);
                serde_json::json!([
                    v.memory_id,
                    v.version,
                    snapshot::encode(&past),
                    v.ended_by,
                    v.ended_at
                ])
            })
            .collect();
        let conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        tx.execute(
            "INSERT OR REPLACE INTO memory_versions (memory_id, version, snapshot, ended_by, ended_at)
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(?1)",
            params![serde_json::Value::Array(rows).to_string()],
        )
        .await
        .ctx("importing history")?;
        tx.commit().await.ctx("committing history")?;
        report.versions += batch.len() as u64;
    }
    let events: Vec<&MemoryEvent> = doc
        .events
        .iter()
        .filter(|e| written.contains(&e.memory_id))
        .collect();
    for batch in events.chunks(BATCH) {
        let rows: Vec<serde_json::Value> = batch
            .iter()
            .map(|e| {
                let text = |t: &Option<String>| t.as_deref().map(|t| redact(t).text);
                serde_json::json!([
                    e.id,
                    e.memory_id,
                    e.kind.as_str(),
                    e.session_id,
                    text(&e.author),
                    text(&e.body),
                    e.created_at
                ])
            })
            .collect();
        let conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        tx.execute(
            "INSERT OR IGNORE INTO memory_events
               (id, project_id, memory_id, kind, session_id, author, body, created_at)
             SELECT value ->> 0, ?2, value ->> 1, value ->> 2, value ->> 3, value ->> 4,
                    value ->> 5, value ->> 6
             FROM json_each(?1)",
            params![serde_json::Value::Array(rows).to_string(), ctx.project_id],
        )
        .await
        .ctx("importing events")?;
        tx.commit().await.ctx("committing events")?;
        report.events += batch.len() as u64;
    }
    Ok(report)
}

/// An imported memory made safe to store: in this project, texts through the privacy filter,
/// fields within the limits `remember` applies.
fn checked(ctx: &Ctx<'_>, mut m: Memory) -> Result<Memory> {
    let v = ctx.validator();
    if uuid::Uuid::parse_str(&m.id).is_err() {
        return Err(Error::invalid(format!("id {:?} is not a UUID", m.id)));
    }
    m.project_id = ctx.project_id.to_owned();
    let content = v.content(&m.content)?;
    m.redactions += content.count;
    m.content = content.text;
    let (tags, r) = v.list("tags", &m.tags)?;
    m.tags = tags;
    m.redactions += r;
    let (files, r) = v.files(&m.related_files)?;
    m.related_files = files;
    m.redactions += r;
    let (modules, r) = v.list("relatedModules", &m.related_modules)?;
    m.related_modules = modules;
    m.redactions += r;
    let (metadata, r) = v.metadata(Some(&m.metadata))?;
    m.metadata = metadata;
    m.redactions += r;
    // Every other text field (citation, triggers, labels, the reason it was forgotten...).
    m.redactions += scrub(&mut m);
    v.unit("confidence", m.confidence)?;
    Ok(m)
}

/// The project owning a memory id in this file: `?1` id.
const OWNER_OF_ID: &str = "SELECT project_id FROM memories WHERE id = ?1";

/// An active memory of a project with a content hash in a scope: `?1` project, `?2` scope,
/// `?3` hash.
const ACTIVE_DUPLICATE: &str = "SELECT id FROM memories
     WHERE project_id = ?1 AND scope = ?2 AND content_hash = ?3 AND deprecated = 0";

/// The first column of the first row `statement` returns, if any.
async fn first_text(
    statement: &crate::store::Cached,
    params: impl libsql::params::IntoParams,
) -> Result<Option<String>> {
    let mut rows = statement.query(params).await.ctx("checking an import")?;
    let out = match rows.next().await.ctx("checking an import")? {
        Some(row) => Some(row.get(0).ctx("checking an import")?),
        None => None,
    };
    drop(rows);
    statement.reset();
    Ok(out)
}

/// Imports Markdown (see the module doc): memories with a known id are updated, the others
/// remembered as new.
pub(crate) async fn import_markdown(ctx: &Ctx<'_>, text: &str) -> Result<ImportReport> {
    let parsed = markdown::parse(text).map_err(|e| Error::invalid(format!("markdown: {e}")))?;
    let mut report = ImportReport::default();
    let mut new = Vec::new();
    for (i, item) in parsed.into_iter().enumerate() {
        let at = |e: Error| match e {
            Error::InvalidArg(msg) => Error::InvalidArg(format!("memory {i}: {msg}")),
            other => other,
        };
        let memory_type = MemoryType::parse(&item.memory_type).map_err(at)?;
        let known = if item.id.is_empty() {
            None
        } else {
            match memory::get(ctx, &item.id).await {
                Ok(m) => Some(m),
                Err(Error::NotFound { .. }) => None,
                Err(e) => return Err(e),
            }
        };
        match known {
            Some(stored) => {
                let mut patch = MemoryPatch::default();
                if stored.content != item.content.trim() {
                    patch.content = Some(item.content.clone());
                }
                if stored.memory_type != memory_type {
                    patch.memory_type = Some(memory_type);
                }
                if (stored.confidence - item.confidence).abs() > 1e-9 {
                    patch.confidence = Some(item.confidence);
                }
                if stored.tags != item.tags {
                    patch.tags = Some(item.tags.clone());
                }
                if stored.pinned != item.pinned {
                    patch.pinned = Some(item.pinned);
                }
                if patch.is_empty() {
                    report.skipped += 1;
                } else {
                    memory::update(ctx, &stored.id, patch).await.map_err(at)?;
                    report.updated += 1;
                }
            }
            None => {
                let mut input = RememberInput::new(memory_type, item.content.clone());
                input.confidence = Some(item.confidence);
                input.tags = item.tags.clone();
                input.related_files = item.related_files.clone();
                input.related_modules = item.related_modules.clone();
                input.scope = Some(MemoryScope::parse(&item.scope).map_err(at)?);
                input.share_scope = Some(ShareScope::parse(&item.share_scope).map_err(at)?);
                input.source = Some(MemorySource::parse(&item.source).map_err(at)?);
                input.pinned = Some(item.pinned);
                input.user_verified = Some(item.user_verified);
                input.needs_review = Some(item.needs_review);
                new.push(input);
            }
        }
    }
    for batch in new.chunks(BATCH) {
        for r in memory::remember_many(ctx, batch.to_vec()).await? {
            if r.created {
                report.imported += 1;
            } else {
                report.duplicates += 1;
            }
        }
    }
    Ok(report)
}

/// Deletes every memory of the project for good, with history, events, vectors and links
/// (account deletion); returns how many memories were deleted.
pub(crate) async fn delete_all(ctx: &Ctx<'_>) -> Result<u64> {
    let mut deleted = 0;
    loop {
        let conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        let mut rows = tx
            .query(
                "SELECT seq, id FROM memories WHERE project_id = ?1 LIMIT ?2",
                params![ctx.project_id, BATCH as i64],
            )
            .await
            .ctx("listing memories to delete")?;
        let (mut seqs, mut ids) = (Vec::new(), Vec::new());
        while let Some(row) = rows.next().await.ctx("listing memories to delete")? {
            seqs.push(row.get::<i64>(0).ctx("seq")?);
            ids.push(row.get::<String>(1).ctx("id")?);
        }
        drop(rows);
        if seqs.is_empty() {
            break;
        }
        let ids = serde_json::to_string(&ids).expect("strings serialise");
        let seqs_json = serde_json::to_string(&seqs).expect("integers serialise");
        tx.execute(
            "DELETE FROM memory_versions WHERE memory_id IN (SELECT value FROM json_each(?1))",
            params![ids.as_str()],
        )
        .await
        .ctx("deleting history")?;
        tx.execute(
            "DELETE FROM memory_events WHERE memory_id IN (SELECT value FROM json_each(?1))",
            params![ids.as_str()],
        )
        .await
        .ctx("deleting events")?;
        tx.execute(
            "DELETE FROM memories WHERE seq IN (SELECT value FROM json_each(?1))",
            params![seqs_json],
        )
        .await
        .ctx("deleting memories")?;
        tx.commit().await.ctx("committing deletion")?;
        deleted += seqs.len() as u64;
    }
    if deleted > 0 {
        let conn = ctx.store.writer().await;
        conn.execute(
            "INSERT INTO memories_fts(memories_fts) VALUES ('optimize')",
            (),
        )
        .await
        .ctx("compacting the keyword index")?;
    }
    Ok(deleted)
}
