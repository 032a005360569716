//! Checkpoints: a session's scratchpad saved at a subtask boundary and restored after a crash
//! (the seed's `scratchpadStore.checkpoint(workUnitRef, sessionId)`), in the local-only home.

use std::path::Path;
use std::sync::Arc;

use libsql::params;
use serde::Serialize;

use super::scratchpad::Scratchpad;
use super::{Session, Sessions};
use crate::clock::Clock;
use crate::error::{DbContext, Error, Result};
use crate::memory::Ctx;
use crate::store::begin_write;

/// What a checkpoint saved.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The session.
    pub session_id: String,
    /// The highest step the pad had seen.
    pub step: u32,
    /// Bytes of the saved state.
    pub bytes: usize,
    /// When (ms since the epoch).
    pub saved_at: i64,
}

/// Saves `session`'s scratchpad, replacing its previous checkpoint.
pub(crate) async fn save(ctx: &Ctx<'_>, session: &Session) -> Result<Checkpoint> {
    // Copied under the lock, serialised outside it: observe() from other threads waits only
    // for the copy.
    let pad = session.copy()?;
    let state = serde_json::to_string(&pad)
        .map_err(|e| Error::Internal(format!("serialising a scratchpad: {e}")))?;
    let saved_at = ctx.clock.now_ms();
    let checkpoint = Checkpoint {
        session_id: pad.session_id.clone(),
        step: pad.analytics.current_step,
        bytes: state.len(),
        saved_at,
    };
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    tx.execute(
        "INSERT OR REPLACE INTO observer_checkpoints(project_id, session_id, saved_at, step, state)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            ctx.project_id,
            pad.session_id.as_str(),
            saved_at,
            i64::from(checkpoint.step),
            state
        ],
    )
    .await
    .ctx("saving a checkpoint")?;
    tx.commit().await.ctx("saving a checkpoint")?;
    Ok(checkpoint)
}

/// The open session `session_id`, else the one restored from its checkpoint, else `None`.
pub(crate) async fn resume(
    ctx: &Ctx<'_>,
    sessions: &Sessions,
    project_id: &Arc<str>,
    session_id: &str,
    clock: Arc<dyn Clock>,
    root: Option<Arc<Path>>,
) -> Result<Option<Arc<Session>>> {
    if let Some(open) = sessions.get(project_id, session_id) {
        return Ok(Some(open));
    }
    let mut reader = ctx.store.reader().await;
    let saved = reader
        .query_cached(
            "SELECT state FROM observer_checkpoints WHERE project_id = ?1 AND session_id = ?2",
            params![ctx.project_id, session_id.trim()],
            |row| row.get::<String>(0).ctx("reading a checkpoint"),
        )
        .await?;
    drop(reader);
    let Some(state) = saved.into_iter().next() else {
        return Ok(None);
    };
    let mut pad: Scratchpad = serde_json::from_str(&state)
        .map_err(|e| Error::Internal(format!("checkpoint of {session_id:?} is unreadable: {e}")))?;
    pad.after_restore();
    Ok(Some(sessions.insert_restored(project_id, pad, clock, root)))
}
