//! The contradiction scan after a write: what one pass does with the memories a write created.
//! Each is compared with the older memories the keyword index puts on the same topic, and the
//! contradictions found are linked and flagged (see [`super::links`]). The queue, and when a
//! pass runs (once the writer has been idle, on the writer connection), are the engine's
//! (`engine::after_write`); the handle hands [`scan_pass`] to it.
//!
//! Invariant: a memory is compared only with memories older than itself, so a pair is found
//! once, by its newer memory, as when the scan ran inside the write.

use std::time::Duration;

use libsql::params;

use super::contradiction::Profiled;
use super::links::flag_conflict;
use crate::error::{DbContext, Result};
use crate::memory::rows::{from_row, SELECT_BY_ID};
use crate::memory::{Ctx, Memory};
use crate::store::{begin_write, Writer};

/// Candidates the keyword index proposes per new memory.
const CANDIDATES: i64 = 32;

/// Most words a new memory is looked up by (each costs a walk of its keyword index entries).
const MAX_TERMS: usize = 8;

/// At most this many contradictions are linked per new memory.
pub const MAX_CONFLICTS_PER_MEMORY: usize = 3;

/// The [`CANDIDATES`] newest active memories of the project older than the one named (`?3`)
/// matching an FTS5 query. The index is the outer loop and yields rowids in descending order,
/// from below the memory's own row, so there is no sort: rows of other projects and forgotten
/// rows are skipped as they stream by, and the limit counts only candidates (`+ 0`: see
/// `store::statements`).
const SAME_TOPIC: &str =
    "SELECT m.id, m.content FROM memories_fts f CROSS JOIN memories m ON m.seq = f.rowid
     WHERE memories_fts MATCH ?1
       AND f.rowid < (SELECT seq FROM memories WHERE id = ?3)
       AND m.project_id = ?2 AND m.deprecated = 0
     ORDER BY f.rowid DESC LIMIT ?4 + 0";

/// Scans one pass of queued memories, `(project id, memory id)` in queue order, on the writer:
/// reads first, then one write transaction for whatever was found. `base` gives the store,
/// clock and limits (its project is replaced by each memory's). With a `budget`, no memory is
/// begun once the pass has run that long (the first always is). `scanned` counts the memories
/// of `pass`, from its start, that were begun (also when the pass then fails).
pub(crate) async fn scan_pass(
    pass: &[(&str, &str)],
    base: &Ctx<'_>,
    mut conn: Writer<'_>,
    budget: Option<Duration>,
    scanned: &mut usize,
) -> Result<()> {
    let started = std::time::Instant::now();
    let mut found: Vec<Found<'_>> = Vec::new();
    for &(project, memory_id) in pass {
        if *scanned > 0 && budget.is_some_and(|b| started.elapsed() >= b) {
            break;
        }
        *scanned += 1;
        let ctx = base.for_project(project);
        // None: its write rolled back.
        let Some(memory) = load_cached(&ctx, &mut conn, memory_id).await? else {
            continue;
        };
        if memory.deprecated {
            continue;
        }
        let conflicts = contradictions_of(&ctx, &mut conn, &memory).await?;
        if !conflicts.is_empty() {
            found.push(Found {
                project,
                memory_id: memory.id,
                conflicts,
            });
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let tx = begin_write(&conn).await?;
    for f in &found {
        let ctx = base.for_project(f.project);
        for (other, similarity) in &f.conflicts {
            flag_conflict(&ctx, &tx, other, &f.memory_id, *similarity).await?;
            flag_conflict(&ctx, &tx, &f.memory_id, other, *similarity).await?;
        }
    }
    tx.commit().await.ctx("committing contradiction links")?;
    Ok(())
}

/// The memory `id` of the project, through the writer's cached statement (preparing the
/// full-row select costs about as much as the rest of a scan of a short memory).
async fn load_cached(ctx: &Ctx<'_>, conn: &mut Writer<'_>, id: &str) -> Result<Option<Memory>> {
    let statement = conn.cached(&SELECT_BY_ID).await?;
    let mut rows = statement
        .query(params![id, ctx.project_id])
        .await
        .ctx("loading a memory to scan")?;
    let row = rows.next().await.ctx("loading a memory to scan")?;
    row.map(|r| from_row(&r)).transpose()
}

/// A scanned memory and the older ones it contradicts (with their similarity).
struct Found<'a> {
    project: &'a str,
    memory_id: String,
    conflicts: Vec<(String, f64)>,
}

/// Active memories of the project older than `memory` that contradict it, with how similar
/// they are, most similar first: the keyword index proposes the [`CANDIDATES`] newest memories
/// sharing one of its most distinctive words, the contradiction rule decides. Memories it
/// already relates to (a memory it supersedes contradicts it by design) are left out.
async fn contradictions_of(
    ctx: &Ctx<'_>,
    conn: &mut Writer<'_>,
    memory: &Memory,
) -> Result<Vec<(String, f64)>> {
    let profiled = Profiled::new(&memory.content);
    let terms = profiled.topic_terms(MAX_TERMS);
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    // Every term is letters, digits, `.` and `_` only, so quoting makes it a literal word (or
    // a phrase of the parts FTS5 cuts it into).
    let query = terms
        .iter()
        .map(|t| format!("content:\"{t}\""))
        .collect::<Vec<_>>()
        .join(" OR ");
    // Newest first, not best-ranked: FTS5 streams matches in rowid order and stops at the
    // limit, while ranking scores every match (tens of milliseconds when the words are common
    // across 60,000 memories, against a fraction of one).
    // The writer's cached statement: preparing this join costs about as much as running it.
    let statement = conn.cached(SAME_TOPIC).await?;
    let mut rows = statement
        .query(params![
            query,
            ctx.project_id,
            memory.id.as_str(),
            CANDIDATES
        ])
        .await
        .ctx("finding memories on the same topic")?;
    let mut out = Vec::new();
    while let Some(row) = rows
        .next()
        .await
        .ctx("finding memories on the same topic")?
    {
        let id: String = row.get(0).ctx("memory id")?;
        let content: String = row.get(1).ctx("memory content")?;
        let related = memory
            .relations
            .iter()
            .any(|r| r.target_memory_id.as_deref() == Some(id.as_str()));
        if related {
            continue;
        }
        if let Some(c) = profiled.contradiction(&content) {
            out.push((id, c.similarity));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out.truncate(MAX_CONFLICTS_PER_MEMORY);
    Ok(out)
}
