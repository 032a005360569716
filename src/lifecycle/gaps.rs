//! Memory gaps (seed 004): what an agent asked memory for and memory did not know, kept so
//! that the next extraction (end of session, the observer's synthesis, a person) can fill it.
//!
//! A gap is noted when a recall made for an agent (`trackAccess`) that could return memories
//! returned none. The same question asked again counts on the open gap (`hits`) instead of
//! adding one, and a later such recall that does find memories closes it. Queries are stored
//! after the privacy filter, normalised (lower case, single spaces) and clipped to
//! [`MAX_GAP_QUERY_CHARS`] characters.

use libsql::params;
use serde::Serialize;

use crate::error::{DbContext, Error, Result};
use crate::memory::privacy::redact;
use crate::memory::Ctx;
use crate::store::begin_write;

/// Longest query text kept for a gap.
pub const MAX_GAP_QUERY_CHARS: usize = 500;
/// Most gaps listed at once.
pub const MAX_GAPS_LISTED: u32 = 500;

/// One open (or closed) gap.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryGap {
    /// UUIDv7.
    pub id: String,
    /// The question, normalised and privacy-filtered.
    pub query: String,
    /// The session it was first asked in, if given.
    pub session_id: Option<String>,
    /// How many times it was asked while open.
    pub hits: u64,
    /// First asked (ms).
    pub created_at: i64,
    /// Last asked (ms).
    pub last_seen_at: i64,
    /// When memory learned the answer (ms); `None` while open.
    pub resolved_at: Option<i64>,
}

/// The stored form of a query: privacy-filtered, lower case, single spaces, clipped.
pub fn normalise(query: &str) -> String {
    let redacted = redact(query).text;
    let words: Vec<String> = redacted.split_whitespace().map(str::to_lowercase).collect();
    words.join(" ").chars().take(MAX_GAP_QUERY_CHARS).collect()
}

/// After a recall made for an agent: notes a gap when it found no memory, closes the open
/// gap of the same question when it did. Writes only when there is something to change.
pub(crate) async fn after_recall(
    ctx: &Ctx<'_>,
    query: &str,
    session_id: Option<&str>,
    found_memories: bool,
) -> Result<()> {
    let query = normalise(query);
    if query.is_empty() {
        return Ok(());
    }
    let now = ctx.clock.now_ms();
    if found_memories {
        let open = {
            let conn = ctx.store.reader().await;
            let mut rows = conn
                .query(
                    "SELECT 1 FROM memory_gaps
                     WHERE project_id = ?1 AND query = ?2 AND resolved_at IS NULL",
                    params![ctx.project_id, query.as_str()],
                )
                .await
                .ctx("looking up memory gap")?;
            rows.next().await.ctx("looking up memory gap")?.is_some()
        };
        if open {
            let conn = ctx.store.writer().await;
            conn.execute(
                "UPDATE memory_gaps SET resolved_at = ?3
                 WHERE project_id = ?1 AND query = ?2 AND resolved_at IS NULL",
                params![ctx.project_id, query.as_str(), now],
            )
            .await
            .ctx("closing memory gap")?;
        }
        return Ok(());
    }
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    tx.execute(
        "INSERT INTO memory_gaps (id, project_id, session_id, query, hits, created_at, last_seen_at)
         VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5)
         ON CONFLICT (project_id, query) WHERE resolved_at IS NULL
         DO UPDATE SET hits = hits + 1, last_seen_at = excluded.last_seen_at",
        params![
            uuid::Uuid::now_v7().to_string(),
            ctx.project_id,
            session_id,
            query.as_str(),
            now
        ],
    )
    .await
    .ctx("noting memory gap")?;
    tx.commit().await.ctx("committing memory gap")?;
    Ok(())
}

/// Open gaps (or all, with `include_resolved`), most asked first.
pub(crate) async fn list(
    ctx: &Ctx<'_>,
    include_resolved: bool,
    limit: Option<u32>,
) -> Result<Vec<MemoryGap>> {
    let limit = limit.unwrap_or(100);
    if limit == 0 || limit > MAX_GAPS_LISTED {
        return Err(Error::invalid(format!(
            "limit must be 1..={MAX_GAPS_LISTED}, got {limit}"
        )));
    }
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            "SELECT id, query, session_id, hits, created_at, last_seen_at, resolved_at
             FROM memory_gaps WHERE project_id = ?1 AND (?2 OR resolved_at IS NULL)
             ORDER BY resolved_at IS NOT NULL, hits DESC, last_seen_at DESC LIMIT ?3",
            params![ctx.project_id, include_resolved, limit as i64],
        )
        .await
        .ctx("listing memory gaps")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("listing memory gaps")? {
        out.push(MemoryGap {
            id: row.get(0).ctx("gap")?,
            query: row.get(1).ctx("gap")?,
            session_id: row.get(2).ctx("gap")?,
            hits: row.get::<i64>(3).ctx("gap")?.max(0) as u64,
            created_at: row.get(4).ctx("gap")?,
            last_seen_at: row.get(5).ctx("gap")?,
            resolved_at: row.get(6).ctx("gap")?,
        });
    }
    Ok(out)
}

/// Closes a gap by hand (a person or an extraction filled it); unknown ids are an error.
pub(crate) async fn resolve(ctx: &Ctx<'_>, id: &str) -> Result<()> {
    let conn = ctx.store.writer().await;
    let changed = conn
        .execute(
            "UPDATE memory_gaps SET resolved_at = coalesce(resolved_at, ?3)
             WHERE project_id = ?1 AND id = ?2",
            params![ctx.project_id, id, ctx.clock.now_ms()],
        )
        .await
        .ctx("closing memory gap")?;
    if changed == 0 {
        return Err(Error::not_found("memory gap", id));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_normalised_and_secrets_never_kept() {
        assert_eq!(
            normalise("  How do   we RETRY\tjobs? "),
            "how do we retry jobs?"
        );
        let kept = normalise("why does AKIAIOSFODNN7EXAMPLE fail");
        assert!(!kept.contains("akiaiosfodnn7example"), "{kept}");
        assert_eq!(normalise(&"x".repeat(2000)).len(), MAX_GAP_QUERY_CHARS);
    }
}
