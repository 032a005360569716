//! Supersedes and contradicts links between memories, and what they do.
//!
//! A memory that supersedes another names it in a `supersedes` relation; the older one gets
//! `superseded_by` and decays twice as fast from then on (it is not forgotten: a person may
//! still want it). Two memories that contradict each other are linked both ways with
//! `conflicts_with`, both are kept and both are flagged for review (seed 004). Contradictions
//! are found on write by [`super::contradiction`] among the memories the keyword index puts on
//! the same topic.

use libsql::params;

use super::contradiction::Profiled;
use crate::error::{DbContext, Error, Result};
use crate::memory::{change_in, Ctx, Memory, MemoryRelation, RelationType, Remembered};
use crate::store::{begin_write, WriteTx, Writer};

/// Writes of at most this many memories are scanned for contradictions; larger batches (bulk
/// loads, imports) skip the scan, which costs a keyword query per memory.
pub const CONFLICT_SCAN_MAX_BATCH: usize = 32;

/// At most this many contradictions are linked per new memory.
pub const MAX_CONFLICTS_PER_MEMORY: usize = 3;

/// Candidates the keyword index proposes per new memory.
const CANDIDATES: i64 = 32;

/// Most words a new memory is looked up by (each costs a walk of its keyword index entries).
const MAX_TERMS: usize = 8;

/// The [`CANDIDATES`] newest active memories of the project matching an FTS5 query, other than
/// the one named. The index is the outer loop and yields rowids in descending order, so there
/// is no sort: rows of other projects, forgotten rows and the memory itself are skipped as
/// they stream by, and the limit counts only candidates (`+ 0`: see `store::statements`).
const SAME_TOPIC: &str =
    "SELECT m.id, m.content FROM memories_fts f CROSS JOIN memories m ON m.seq = f.rowid
     WHERE memories_fts MATCH ?1 AND m.project_id = ?2 AND m.deprecated = 0 AND m.id <> ?3
     ORDER BY f.rowid DESC LIMIT ?4 + 0";

/// Longest `superseded_by` chain followed when checking for a cycle.
const MAX_CHAIN: usize = 256;

/// What a write did with links: called by `remember` inside its transaction after the batch
/// is stored. Applies the `supersedes` and `conflicts_with` relations the new memories name,
/// then (for small batches) links the contradictions it finds. Updates `out` in place.
pub(crate) async fn after_insert(
    ctx: &Ctx<'_>,
    conn: &mut Writer<'_>,
    tx: &WriteTx,
    out: &mut [Remembered],
) -> Result<()> {
    let scan = out.len() <= CONFLICT_SCAN_MAX_BATCH;
    for written in out.iter_mut() {
        if !written.created {
            continue;
        }
        let new = written.memory.clone();
        for relation in &new.relations {
            let Some(target) = relation.target_memory_id.as_deref() else {
                continue;
            };
            if target == new.id {
                continue;
            }
            match relation.relation_type {
                RelationType::Supersedes => {
                    let by = new.id.clone();
                    change_in(ctx, tx, target, "supersede", |m| {
                        m.superseded_by = Some(by);
                    })
                    .await?;
                }
                RelationType::ConflictsWith => {
                    flag_conflict(ctx, tx, target, &new.id, relation.confidence).await?;
                    // The new memory holds the link already; it is flagged as well.
                    written.memory = change_in(ctx, tx, &new.id, "conflict", |m| {
                        m.needs_review = true;
                    })
                    .await?
                    .0;
                }
                _ => {}
            }
        }
        if scan {
            for (other, similarity) in contradictions_of(ctx, conn, &written.memory).await? {
                flag_conflict(ctx, tx, &other, &new.id, similarity).await?;
                written.memory = flag_conflict(ctx, tx, &new.id, &other, similarity).await?;
            }
        }
    }
    Ok(())
}

/// Adds a `conflicts_with` link from `id` to `other` (unless it has one) and flags `id` for
/// review; returns the memory as it is now.
pub(crate) async fn flag_conflict(
    ctx: &Ctx<'_>,
    tx: &WriteTx,
    id: &str,
    other: &str,
    confidence: f64,
) -> Result<Memory> {
    let cap = ctx.limits.max_list_len;
    let other = other.to_owned();
    let (m, _) = change_in(ctx, tx, id, "conflict", move |m| {
        let linked = m.relations.iter().any(|r| {
            r.relation_type == RelationType::ConflictsWith
                && r.target_memory_id.as_deref() == Some(other.as_str())
        });
        if !linked && m.relations.len() < cap {
            m.relations.push(MemoryRelation {
                target_memory_id: Some(other),
                target_file_path: None,
                relation_type: RelationType::ConflictsWith,
                confidence: confidence.clamp(0.0, 1.0),
                auto_extracted: true,
            });
        }
        m.needs_review = true;
    })
    .await?;
    Ok(m)
}

/// Active memories of the project that contradict `memory`, with how similar they are, most
/// similar first: the keyword index proposes the [`CANDIDATES`] newest memories sharing one of
/// its most distinctive words, the contradiction rule decides. Memories it already relates to
/// (a memory it supersedes contradicts it by design) are left out.
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
    // Run on the writer inside the caller's transaction (it is the same connection), from
    // the writer's cached statement: preparing this join costs about as much as running it.
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

/// Records that `newer` supersedes `older` (both memories of the project): `newer` gets a
/// `supersedes` relation, `older` gets `superseded_by`. Both changes are versioned. Fails with
/// `ENGRAM_CYCLE` if `older` already supersedes `newer`, directly or through a chain.
pub(crate) async fn supersede(ctx: &Ctx<'_>, older: &str, newer: &str) -> Result<(Memory, Memory)> {
    if older == newer {
        return Err(Error::invalid("a memory cannot supersede itself"));
    }
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    ensure_no_cycle(ctx, &tx, older, newer).await?;
    let cap = ctx.limits.max_list_len;
    let target = older.to_owned();
    let (newer_m, _) = change_in(ctx, &tx, newer, "supersede", move |m| {
        let linked = m.relations.iter().any(|r| {
            r.relation_type == RelationType::Supersedes
                && r.target_memory_id.as_deref() == Some(target.as_str())
        });
        if !linked && m.relations.len() < cap {
            m.relations.push(MemoryRelation {
                target_memory_id: Some(target),
                target_file_path: None,
                relation_type: RelationType::Supersedes,
                confidence: 1.0,
                auto_extracted: false,
            });
        }
    })
    .await?;
    let by = newer.to_owned();
    let (older_m, _) = change_in(ctx, &tx, older, "supersede", move |m| {
        m.superseded_by = Some(by);
    })
    .await?;
    tx.commit().await.ctx("committing supersede")?;
    Ok((older_m, newer_m))
}

/// Fails with `ENGRAM_CYCLE` when following `superseded_by` from `newer` reaches `older`
/// (`older` already supersedes `newer`, directly or through a chain), and with
/// `ENGRAM_NOT_FOUND` when `newer` is not a memory of the project.
async fn ensure_no_cycle(ctx: &Ctx<'_>, tx: &WriteTx, older: &str, newer: &str) -> Result<()> {
    let mut current = Some(newer.to_owned());
    let mut steps = 0;
    while let Some(id) = current {
        if id == older {
            return Err(Error::Cycle(format!(
                "memory {older} already supersedes {newer} (directly or through a chain)"
            )));
        }
        steps += 1;
        if steps > MAX_CHAIN {
            break;
        }
        let mut rows = tx
            .query(
                "SELECT superseded_by FROM memories WHERE id = ?1 AND project_id = ?2",
                params![id.as_str(), ctx.project_id],
            )
            .await
            .ctx("following supersessions")?;
        current = match rows.next().await.ctx("following supersessions")? {
            Some(row) => row
                .get::<Option<String>>(0)
                .ctx("following supersessions")?,
            None if steps == 1 => return Err(Error::not_found("memory", newer)),
            None => None,
        };
    }
    Ok(())
}
