//! Sessions as the lifecycle sees them (seed 003 section 13): what an agent was given and what
//! it learned in one session, the session-end summary built from that, and the end of a
//! session, which is when trust progresses.
//!
//! "Used" comes from `session_memory_use`, which `recall` (with `trackAccess` and a
//! `sessionId`), step injection and `markUsed` fill; "learned" are the memories created with
//! the session's id. Ending a session records its counts in `lifecycle_sessions` and lets
//! [`super::trust`] move the project's level. Ending it again refreshes its counts.
//!
//! **Tokens saved** is an estimate, labelled as one: each distinct memory used counts the
//! tokens an agent typically spends rediscovering that kind of knowledge
//! ([`discovery_tokens`]: reading the files again, retrying the error, walking into the dead
//! end). The figures are our assumption, not a measurement; the observer's A/B sessions are
//! where a measured figure would come from.

use libsql::{params, Connection};
use serde::Serialize;

use super::counts::count_row;
use super::trust::{self, SummaryMode, TrustLevel};
use crate::error::{DbContext, Error, Result};
use crate::memory::rows::{from_row, SELECT_M};
use crate::memory::{Ctx, Memory, MemoryType};
use crate::retrieval::packing::MAX_CITATION_CHARS;
use crate::store::begin_write;

/// Most memories listed per half of a summary (used, learned).
pub const SUMMARY_LIMIT: usize = 200;

/// Estimated tokens an agent spends rediscovering knowledge of this type (see the module
/// doc: an assumption, not a measurement).
pub fn discovery_tokens(memory_type: MemoryType) -> u64 {
    match memory_type {
        MemoryType::DeadEnd => 2_000,
        MemoryType::Gotcha | MemoryType::ErrorPattern => 1_500,
        MemoryType::Decision | MemoryType::CausalDependency | MemoryType::ModuleInsight => 1_000,
        MemoryType::WorkflowRecipe | MemoryType::Pattern | MemoryType::Requirement => 800,
        MemoryType::WorkState | MemoryType::WorkUnitOutcome | MemoryType::E2eObservation => 600,
        MemoryType::Preference | MemoryType::PrefetchPattern => 300,
        MemoryType::TaskCalibration | MemoryType::ContextCost => 200,
    }
}

/// The chip text an agent writes to cite a memory: `[Memory #<id>: <brief>]`, the brief being
/// the memory's own citation text or the start of its content (what the app's renderer looks
/// for, seed 003 section 13).
pub fn citation(memory: &Memory) -> String {
    let brief = match memory.citation_text.as_deref().map(str::trim) {
        Some(own) if !own.is_empty() => own.to_owned(),
        _ => memory
            .content
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    };
    let brief: String = if brief.chars().count() > MAX_CITATION_CHARS {
        let mut clipped: String = brief.chars().take(MAX_CITATION_CHARS - 1).collect();
        clipped.push('…');
        clipped
    } else {
        brief
    };
    format!("[Memory #{}: {}]", memory.id, brief.replace(']', ")"))
}

/// A memory the agent was given in the session.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsedMemory {
    /// The memory as it is now.
    pub memory: Memory,
    /// Times it was given in the session.
    pub uses: u64,
    /// Its citation chip text.
    pub citation: String,
}

/// A memory the session created.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LearnedMemory {
    /// The memory as it is now (confirm, edit or reject it by id).
    pub memory: Memory,
    /// Its citation chip text.
    pub citation: String,
}

/// The session-end summary.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The session.
    pub session_id: String,
    /// What the agent was given, most used first.
    pub used: Vec<UsedMemory>,
    /// What the session created and is still active, oldest first; with `reviewOnly` mode the
    /// app shows those needing review.
    pub learned: Vec<LearnedMemory>,
    /// Learned memories still waiting for a person.
    pub needs_review: u64,
    /// Feedback calling a memory wrong or correcting it, given in the session.
    pub corrections: u64,
    /// Estimated tokens of discovery saved (see the module doc).
    pub tokens_saved_estimate: u64,
    /// The project's trust level.
    pub trust_level: TrustLevel,
    /// How much of this summary the app shows at that level.
    pub mode: SummaryMode,
    /// When the session was ended (ms), if it was.
    pub ended_at: Option<i64>,
    /// When ending it moved the project up a level: the level before.
    pub previous_trust_level: Option<TrustLevel>,
}

/// One use in session `?2` at `?3` of each of the memories `?4` (JSON ids) of project `?1`.
/// `+m.project_id` makes SQLite find the memories by id, not walk every memory of the
/// project through the (project, type) index (see `memory::write::TOUCH`). Not a CROSS JOIN
/// over the list: an id listed twice must still count once.
pub(crate) const RECORD_USE: &str = "INSERT INTO session_memory_use
       (project_id, session_id, memory_id, uses, first_used_at, last_used_at)
     SELECT ?1, ?2, m.id, 1, ?3, ?3 FROM memories m
     WHERE +m.project_id = ?1 AND m.id IN (SELECT value FROM json_each(?4))
     ON CONFLICT (project_id, session_id, memory_id)
     DO UPDATE SET uses = uses + 1, last_used_at = excluded.last_used_at";

/// Records that memories were given to an agent in `session_id` (inside the caller's
/// transaction; unknown ids are ignored).
pub(crate) async fn record_use_in(
    tx: &Connection,
    project_id: &str,
    session_id: &str,
    ids_json: &str,
    now: i64,
) -> Result<()> {
    tx.execute(RECORD_USE, params![project_id, session_id, now, ids_json])
        .await
        .ctx("recording session use")?;
    Ok(())
}

fn check_session(ctx: &Ctx<'_>, session_id: &str) -> Result<String> {
    ctx.validator()
        .opt_id("sessionId", Some(session_id))?
        .ok_or_else(|| Error::invalid("sessionId must not be blank"))
}

/// Counts for one session: (used, learned, corrections, tokens saved).
async fn counts(conn: &Connection, project_id: &str, session_id: &str) -> Result<[u64; 4]> {
    let [used, learned, corrections] = count_row(
        conn,
        "SELECT
           (SELECT count(*) FROM session_memory_use WHERE project_id = ?1 AND session_id = ?2),
           (SELECT count(*) FROM memories WHERE project_id = ?1 AND session_id = ?2
              AND deprecated = 0),
           (SELECT count(*) FROM memory_events WHERE project_id = ?1 AND session_id = ?2
              AND kind IN ('wrong', 'correction'))",
        params![project_id, session_id],
        "counting session",
    )
    .await?;
    let tokens = tokens_saved(conn, project_id, session_id).await?;
    Ok([used, learned, corrections, tokens])
}

/// Estimated tokens saved in a session: [`discovery_tokens`] of each distinct memory used.
pub(crate) async fn tokens_saved(
    conn: &Connection,
    project_id: &str,
    session_id: &str,
) -> Result<u64> {
    let mut rows = conn
        .query(
            "SELECT m.type FROM session_memory_use u
             JOIN memories m ON m.project_id = u.project_id AND m.id = u.memory_id
             WHERE u.project_id = ?1 AND u.session_id = ?2",
            params![project_id, session_id],
        )
        .await
        .ctx("estimating tokens saved")?;
    let mut tokens = 0;
    while let Some(row) = rows.next().await.ctx("estimating tokens saved")? {
        let kind: String = row.get(0).ctx("memory type")?;
        if let Ok(kind) = MemoryType::parse(&kind) {
            tokens += discovery_tokens(kind);
        }
    }
    Ok(tokens)
}

/// The summary of a session (ended or not).
pub(crate) async fn summary(ctx: &Ctx<'_>, session_id: &str) -> Result<SessionSummary> {
    let session_id = check_session(ctx, session_id)?;
    let conn = ctx.store.reader().await;
    summary_in(&conn, ctx.project_id, &session_id, None).await
}

async fn summary_in(
    conn: &Connection,
    project_id: &str,
    session_id: &str,
    previous_trust_level: Option<TrustLevel>,
) -> Result<SessionSummary> {
    let [_, _, corrections, tokens] = counts(conn, project_id, session_id).await?;
    let mut used = Vec::new();
    let mut rows = conn
        .query(
            &format!(
                "SELECT {}, u.uses FROM session_memory_use u
                 JOIN memories m ON m.project_id = u.project_id AND m.id = u.memory_id
                 WHERE u.project_id = ?1 AND u.session_id = ?2
                 ORDER BY u.uses DESC, u.first_used_at LIMIT {SUMMARY_LIMIT}",
                *SELECT_M
            ),
            params![project_id, session_id],
        )
        .await
        .ctx("reading session use")?;
    while let Some(row) = rows.next().await.ctx("reading session use")? {
        let memory = from_row(&row)?;
        used.push(UsedMemory {
            citation: citation(&memory),
            uses: row
                .get::<i64>(crate::memory::rows::COLUMN_COUNT)
                .ctx("uses")?
                .max(0) as u64,
            memory,
        });
    }
    drop(rows);
    let mut learned = Vec::new();
    let mut rows = conn
        .query(
            &format!(
                "SELECT {} FROM memories m WHERE m.project_id = ?1 AND m.session_id = ?2
                   AND m.deprecated = 0
                 ORDER BY m.created_at, m.seq LIMIT {SUMMARY_LIMIT}",
                *SELECT_M
            ),
            params![project_id, session_id],
        )
        .await
        .ctx("reading learned memories")?;
    while let Some(row) = rows.next().await.ctx("reading learned memories")? {
        let memory = from_row(&row)?;
        learned.push(LearnedMemory {
            citation: citation(&memory),
            memory,
        });
    }
    drop(rows);
    let mut rows = conn
        .query(
            "SELECT ended_at FROM lifecycle_sessions WHERE project_id = ?1 AND session_id = ?2",
            params![project_id, session_id],
        )
        .await
        .ctx("reading session")?;
    let ended_at = match rows.next().await.ctx("reading session")? {
        Some(row) => Some(row.get::<i64>(0).ctx("session end")?),
        None => None,
    };
    drop(rows);
    let level = trust::level_in(conn, project_id).await?;
    Ok(SessionSummary {
        session_id: session_id.to_owned(),
        needs_review: learned.iter().filter(|l| l.memory.needs_review).count() as u64,
        used,
        learned,
        corrections,
        tokens_saved_estimate: tokens,
        trust_level: level,
        mode: level.summary_mode(),
        ended_at,
        previous_trust_level,
    })
}

/// Ends a session: records its counts, lets trust progress, and returns its summary.
pub(crate) async fn end(ctx: &Ctx<'_>, session_id: &str) -> Result<SessionSummary> {
    let session_id = check_session(ctx, session_id)?;
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let before = trust::level_in(&tx, ctx.project_id).await?;
    let [used, learned, corrections, tokens] = counts(&tx, ctx.project_id, &session_id).await?;
    tx.execute(
        "INSERT INTO lifecycle_sessions (project_id, session_id, ended_at, trust_level, used,
           learned, corrections, tokens_saved)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (project_id, session_id) DO UPDATE SET used = excluded.used,
           learned = excluded.learned, corrections = excluded.corrections,
           tokens_saved = excluded.tokens_saved",
        params![
            ctx.project_id,
            session_id.as_str(),
            now,
            before.number() as i64,
            used as i64,
            learned as i64,
            corrections as i64,
            tokens as i64
        ],
    )
    .await
    .ctx("recording session end")?;
    let after = trust::progress_in(&tx, ctx.project_id, now).await?;
    let out = summary_in(
        &tx,
        ctx.project_id,
        &session_id,
        (after != before).then_some(before),
    )
    .await?;
    tx.commit().await.ctx("committing session end")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_a_discovery_cost() {
        for t in MemoryType::ALL {
            assert!(discovery_tokens(*t) > 0, "{t:?}");
        }
    }

    #[tokio::test]
    async fn a_use_finds_its_memories_by_id() {
        let plan = crate::store::plan::query_plan(RECORD_USE).await;
        assert!(crate::store::plan::mentions(&plan, "(id=?)"), "{plan:#?}");
        assert!(
            !crate::store::plan::mentions(&plan, "(project_id=?)"),
            "{plan:#?}"
        );
    }
}
