//! Disputes (seed 003 section 15): a team member disputes a memory with a comment, others
//! comment in its thread, and someone resolves it. While disputed, a memory is still used, at
//! its confidence x 0.8 (see `decay::current_confidence`). The thread is the memory's event
//! log; the memory itself only carries `disputed_at`.

use libsql::params;

use super::events::{self, EventKind, EventNote, MemoryEvent};
use super::feedback::validate_note;
use crate::error::{DbContext, Error, Result};
use crate::memory::{load, Ctx, Memory};
use crate::store::begin_write;

/// What a dispute call did.
#[derive(Debug, Clone)]
pub struct DisputeOutcome {
    /// The memory as it is now.
    pub memory: Memory,
    /// The event recorded.
    pub event: MemoryEvent,
}

/// Opens a dispute on a memory (or adds to the open one): `note.body` is the reason and is
/// required.
pub(crate) async fn dispute(ctx: &Ctx<'_>, id: &str, note: EventNote) -> Result<DisputeOutcome> {
    step(ctx, id, note, EventKind::Dispute).await
}

/// Adds a comment to a memory's thread; `note.body` is required.
pub(crate) async fn comment(ctx: &Ctx<'_>, id: &str, note: EventNote) -> Result<DisputeOutcome> {
    step(ctx, id, note, EventKind::Comment).await
}

/// Resolves the open dispute (`ENGRAM_CONFLICT` when there is none); `note.body` says how.
pub(crate) async fn resolve(ctx: &Ctx<'_>, id: &str, note: EventNote) -> Result<DisputeOutcome> {
    step(ctx, id, note, EventKind::Resolve).await
}

async fn step(ctx: &Ctx<'_>, id: &str, note: EventNote, kind: EventKind) -> Result<DisputeOutcome> {
    let note = validate_note(ctx, note, kind != EventKind::Resolve)?;
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let current = load(ctx, &tx, id).await?;
    match kind {
        EventKind::Dispute if current.disputed_at.is_none() => {
            tx.execute(
                "UPDATE memories SET disputed_at = ?3 WHERE id = ?1 AND project_id = ?2",
                params![id, ctx.project_id, now],
            )
            .await
            .ctx("disputing a memory")?;
        }
        EventKind::Resolve => {
            if current.disputed_at.is_none() {
                return Err(Error::Conflict(format!("memory {id} is not disputed")));
            }
            tx.execute(
                "UPDATE memories SET disputed_at = NULL WHERE id = ?1 AND project_id = ?2",
                params![id, ctx.project_id],
            )
            .await
            .ctx("resolving a dispute")?;
        }
        _ => {}
    }
    let event = events::record(&tx, ctx.project_id, id, kind, &note, now).await?;
    let memory = load(ctx, &tx, id).await?;
    tx.commit().await.ctx("committing dispute")?;
    Ok(DisputeOutcome { memory, event })
}
