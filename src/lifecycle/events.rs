//! The memory event log (`memory_events`): what people and agents said about memories, in
//! order. Feedback, review decisions and dispute threads all land here, and trust progression
//! and session summaries are computed from it. Rows are keyed by UUIDv7 so that events from
//! several devices merge through sync.

use libsql::{params, Connection};
use serde::{Deserialize, Serialize};

use crate::error::{DbContext, Result};
use crate::memory::model::string_enum;
use crate::memory::Ctx;

string_enum!(
    /// What an event records.
    EventKind, "event kind" {
        /// Feedback: the memory helped.
        Helpful = "helpful",
        /// Feedback: the memory is wrong.
        Wrong = "wrong",
        /// Feedback: the memory was corrected (the body is the correction; a new memory
        /// supersedes it).
        Correction = "correction",
        /// Review: a person confirmed it.
        Confirm = "confirm",
        /// Review: a person rejected it (it was forgotten).
        Reject = "reject",
        /// A team member disputed it.
        Dispute = "dispute",
        /// A comment in its dispute thread.
        Comment = "comment",
        /// The dispute was resolved.
        Resolve = "resolve",
    }
);

/// One entry of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryEvent {
    /// UUIDv7.
    pub id: String,
    /// The memory it is about.
    pub memory_id: String,
    /// What happened.
    pub kind: EventKind,
    /// The session it happened in, if given.
    pub session_id: Option<String>,
    /// Who (a user name, an agent id), if given.
    pub author: Option<String>,
    /// Free text: a comment, a correction, a reason.
    pub body: Option<String>,
    /// When (ms since epoch).
    pub created_at: i64,
}

/// Who said it, in which session, with what words: the optional parts of an event.
#[derive(Debug, Clone, Default)]
pub struct EventNote {
    /// The session, if any.
    pub session_id: Option<String>,
    /// Who, if known (privacy-filtered by the caller, like the body).
    pub author: Option<String>,
    /// Free text (already privacy-filtered by the caller).
    pub body: Option<String>,
}

/// Appends an event inside the caller's transaction and returns it.
pub(crate) async fn record(
    tx: &Connection,
    project_id: &str,
    memory_id: &str,
    kind: EventKind,
    note: &EventNote,
    now: i64,
) -> Result<MemoryEvent> {
    let event = MemoryEvent {
        id: uuid::Uuid::now_v7().to_string(),
        memory_id: memory_id.to_owned(),
        kind,
        session_id: note.session_id.clone(),
        author: note.author.clone(),
        body: note.body.clone(),
        created_at: now,
    };
    tx.execute(
        "INSERT INTO memory_events (id, project_id, memory_id, kind, session_id, author, body, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            event.id.as_str(),
            project_id,
            memory_id,
            kind.as_str(),
            event.session_id.clone(),
            event.author.clone(),
            event.body.clone(),
            now
        ],
    )
    .await
    .ctx("recording a memory event")?;
    Ok(event)
}

/// The columns [`from_row`] reads, in order.
pub(crate) const COLUMNS: &str = "id, memory_id, kind, session_id, author, body, created_at";

/// Reads an event from a row selected with [`COLUMNS`].
pub(crate) fn from_row(row: &libsql::Row) -> Result<MemoryEvent> {
    let kind: String = row.get(2).ctx("event")?;
    Ok(MemoryEvent {
        id: row.get(0).ctx("event")?,
        memory_id: row.get(1).ctx("event")?,
        kind: EventKind::parse(&kind)
            .map_err(|e| crate::Error::Internal(format!("stored event: {e}")))?,
        session_id: row.get(3).ctx("event")?,
        author: row.get(4).ctx("event")?,
        body: row.get(5).ctx("event")?,
        created_at: row.get(6).ctx("event")?,
    })
}

/// Every event about one memory of the project, oldest first.
pub(crate) async fn of_memory(ctx: &Ctx<'_>, memory_id: &str) -> Result<Vec<MemoryEvent>> {
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            &format!(
                "SELECT {COLUMNS} FROM memory_events
                 WHERE memory_id = ?1 AND project_id = ?2 ORDER BY created_at, id"
            ),
            params![memory_id, ctx.project_id],
        )
        .await
        .ctx("reading memory events")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading memory events")? {
        out.push(from_row(&row)?);
    }
    Ok(out)
}
