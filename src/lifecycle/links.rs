//! Supersedes and contradicts links between memories, and what they do.
//!
//! A memory that supersedes another names it in a `supersedes` relation; the older one gets
//! `superseded_by` and decays twice as fast from then on (it is not forgotten: a person may
//! still want it). Two memories that contradict each other are linked both ways with
//! `conflicts_with`, both are kept and both are flagged for review (seed 004). Contradictions
//! are found just after the write by [`super::conflict_scan`]: [`after_insert`] names the
//! memories to scan, and the handle queues them.

use libsql::params;

use crate::error::{DbContext, Error, Result};
use crate::memory::{change_in, Ctx, Memory, MemoryRelation, RelationType, Remembered};
use crate::store::{begin_write, WriteTx};

/// Writes of at most this many memories are scanned for contradictions; larger batches (bulk
/// loads, imports) skip the scan, which costs a keyword query per memory.
pub const CONFLICT_SCAN_MAX_BATCH: usize = 32;

/// Longest `superseded_by` chain followed when checking for a cycle.
const MAX_CHAIN: usize = 256;

/// What a write did with links: called by `remember` inside its transaction after the batch
/// is stored (through the handle's `memory::WriteHooks`). Applies the `supersedes` and
/// `conflicts_with` relations the new memories name (updating `out` in place), then returns
/// the new memories to queue for the contradiction scan (none for a batch over
/// [`CONFLICT_SCAN_MAX_BATCH`]), which runs once the write is over (see
/// [`super::conflict_scan`]).
pub(crate) async fn after_insert(
    ctx: &Ctx<'_>,
    tx: &WriteTx,
    out: &mut [Remembered],
) -> Result<Vec<String>> {
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
    }
    if !scan {
        return Ok(Vec::new());
    }
    Ok(out
        .iter()
        .filter(|w| w.created)
        .map(|w| w.memory.id.clone())
        .collect())
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
