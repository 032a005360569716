//! `prune()`: the lifecycle's garbage collection (seed 003 section 18, seed 000 `decay.go`).
//!
//! One run, in this order:
//!
//! 1. **Expire**: active memories idle for three effective half-lives (see [`super::decay`]:
//!    pinned memories, decisions and timeless types never expire) are forgotten with reason
//!    `expired`, each leaving its previous state in its history like any `forget`.
//! 2. **Delete**: memories forgotten longer ago than the grace period (30 days by default) are
//!    deleted for good, with their history and events, except those a person verified.
//! 3. **Orphan nodes**: knowledge-layer graph nodes an agent or an LLM created that have no
//!    edge and no memory attached, untouched for the grace period, are deleted (nodes a user
//!    created stay until the user deletes them).
//! 4. **Vectors**: vectors of forgotten memories are evicted (retrieval never reads them; a
//!    restored memory is embedded again).
//! 5. **Compaction**: when anything left the keyword index, its segments are merged.
//!
//! The writes go in batches of [`BATCH`] memories, one transaction each, so readers (WAL) are
//! never blocked and other writes interleave between batches; cancellation is checked between
//! batches and leaves every finished batch in place.
//!
//! What a batch costs is mostly pages written: deprecating a memory removes it from the
//! dedup index, whose entries are in content-hash order, so every expiry batch dirties pages
//! all over that index (on 100,000 memories, ~800 of the ~1,100 pages a batch writes). Hence:
//! the versions are built by SQLite where the rows are ([`snapshot::SQL`]) instead of loaded
//! and written back, batches go in `seq` order, and the WAL is checkpointed every dozen
//! batches or so rather than after each (see [`WAL_AUTOCHECKPOINT`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use libsql::{params, Row};

use super::decay::{default_half_life_days, DecayInputs, DAY_MS};
use crate::error::{DbContext, Error, Result};
use crate::memory::snapshot;
use crate::memory::{Ctx, MemoryType};
use crate::store::begin_write;

/// Memories per write transaction.
pub const BATCH: usize = 1000;

/// The writer's WAL checkpoint threshold (pages) while `prune` writes, instead of SQLite's
/// 1,000. An expiry batch writes ~1,100 pages, so the default checkpoints after every batch:
/// two fsyncs each, and the same dedup-index pages copied to the database over and over. At
/// 16,000 (a WAL of up to ~64 MB) 100,000 memories checkpoint about three times. Measured on
/// `prune/100k`: 4,000 did as well on a quiet machine, but was 0.8 s slower with another
/// build running, where every checkpoint's fsyncs wait. A passive checkpoint follows the run,
/// so the next small write does not pay for it. Remote stores are left alone: their server
/// checkpoints.
const WAL_AUTOCHECKPOINT: i64 = 16_000;

/// The threshold the writer runs with otherwise: SQLite's default (`store::pragmas` sets
/// none). Restored as a constant, not as read before the run, so that two overlapping runs
/// cannot leave each other's raised value behind.
const SQLITE_AUTOCHECKPOINT: i64 = 1000;

/// Days a forgotten memory is kept before `prune` deletes it (the seed's grace period).
pub const DEFAULT_GRACE_DAYS: f64 = 30.0;

/// How `prune` runs.
#[derive(Debug, Clone)]
pub struct PruneOptions {
    /// Days a forgotten memory (and an orphan node) is kept (default [`DEFAULT_GRACE_DAYS`]).
    pub grace_days: f64,
    /// Count what would be done, change nothing.
    pub dry_run: bool,
}

impl Default for PruneOptions {
    fn default() -> Self {
        PruneOptions {
            grace_days: DEFAULT_GRACE_DAYS,
            dry_run: false,
        }
    }
}

/// What a `prune` run did (or, dry, would do).
#[derive(Debug, Clone, Default)]
pub struct PruneReport {
    /// Memories forgotten because they expired.
    pub expired: u64,
    /// Forgotten memories deleted for good.
    pub deleted: u64,
    /// Forgotten memories past the grace period kept because a person verified them.
    pub kept_verified: u64,
    /// Orphan knowledge nodes deleted.
    pub orphan_nodes: u64,
    /// Vectors of forgotten memories evicted.
    pub vectors_evicted: u64,
    /// Whether the keyword index was compacted.
    pub compacted: bool,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Wall time of the run in milliseconds.
    pub duration_ms: f64,
}

fn check(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(Error::Aborted)
    } else {
        Ok(())
    }
}

/// Runs the pruning job over the handle's project; see the module doc.
pub(crate) async fn prune(
    ctx: &Ctx<'_>,
    options: &PruneOptions,
    cancel: &AtomicBool,
) -> Result<PruneReport> {
    if !options.grace_days.is_finite() || options.grace_days < 0.0 {
        return Err(Error::invalid(format!(
            "graceDays must be a number of days >= 0, got {}",
            options.grace_days
        )));
    }
    let started = Instant::now();
    let now = ctx.clock.now_ms();
    let cutoff = now - (options.grace_days * DAY_MS) as i64;
    let mut report = PruneReport {
        dry_run: options.dry_run,
        ..PruneReport::default()
    };

    let mut expired = expired_memories(ctx, now).await?;
    report.expired = expired.len() as u64;
    let mut deletable = forgotten_before(ctx, cutoff).await?;
    report.kept_verified = deletable.verified;
    report.deleted = deletable.seqs.len() as u64;
    let orphans = orphan_nodes(ctx, cutoff).await?;
    report.orphan_nodes = orphans.len() as u64;
    if options.dry_run {
        report.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        return Ok(report);
    }

    // In `seq` order, a batch's rows share pages, and so do the history rows it adds (keyed
    // by memory id, a UUIDv7 in the same order): SQLite fills B-tree pages when keys arrive
    // in ascending order, and leaves them half empty when they arrive descending, as the
    // scan's index returns them.
    expired.sort_unstable();
    deletable.seqs.sort_unstable();
    // Only a run with batches to write changes the threshold (a daily run mostly has none).
    let raised = !ctx.store.is_remote() && expired.len() + deletable.seqs.len() > 0;
    if raised {
        set_checkpoint_threshold(ctx, WAL_AUTOCHECKPOINT).await?;
    }
    let written = write(
        ctx,
        &mut report,
        &expired,
        &deletable,
        &orphans,
        now,
        cancel,
    )
    .await;
    // Put back whatever happened (an error, a cancellation), then checkpoint the run's pages.
    // Passive: it copies what no reader still needs and never waits for, or blocks, anyone;
    // without it the next small write would pay for the whole run's checkpoint.
    let restored = if raised {
        match set_checkpoint_threshold(ctx, SQLITE_AUTOCHECKPOINT).await {
            Ok(()) => writer_pragma(ctx, "PRAGMA wal_checkpoint(PASSIVE)").await,
            Err(e) => Err(e),
        }
    } else {
        Ok(())
    };
    written?;
    restored?;
    report.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(report)
}

/// The writing part of [`prune`], in batches (see the module doc).
async fn write(
    ctx: &Ctx<'_>,
    report: &mut PruneReport,
    expired: &[i64],
    deletable: &Deletable,
    orphans: &[(i64, String)],
    now: i64,
    cancel: &AtomicBool,
) -> Result<()> {
    for batch in expired.chunks(BATCH) {
        check(cancel)?;
        report.expired -= (batch.len() - expire(ctx, batch, now).await?) as u64;
    }
    for batch in deletable.seqs.chunks(BATCH) {
        check(cancel)?;
        delete_memories(ctx, batch).await?;
    }
    check(cancel)?;
    delete_nodes(ctx, orphans).await?;
    check(cancel)?;
    report.vectors_evicted = evict_vectors(ctx).await?;
    if report.deleted > 0 {
        check(cancel)?;
        let conn = ctx.store.writer().await;
        conn.execute(
            "INSERT INTO memories_fts(memories_fts) VALUES ('optimize')",
            (),
        )
        .await
        .ctx("compacting the keyword index")?;
        report.compacted = true;
    }
    Ok(())
}

/// Runs a pragma on the writer, reading whatever it answers.
async fn writer_pragma(ctx: &Ctx<'_>, sql: &str) -> Result<()> {
    let conn = ctx.store.writer().await;
    let mut rows = conn.query(sql, ()).await.ctx(sql)?;
    while rows.next().await.ctx(sql)?.is_some() {}
    Ok(())
}

/// Sets the writer's WAL checkpoint threshold, in pages.
async fn set_checkpoint_threshold(ctx: &Ctx<'_>, pages: i64) -> Result<()> {
    writer_pragma(ctx, &format!("PRAGMA wal_autocheckpoint = {pages}")).await
}

/// The columns decay depends on, of `memories` aliased `m`, as [`decay_inputs`] reads them
/// (after the seq). Selected rows are never pinned.
const DECAY_COLUMNS: &str = "m.seq, m.type, m.decay_half_life_days, m.last_accessed_at,
    m.superseded_by IS NOT NULL,
    m.related_files = '[]' AND m.related_modules = '[]' AND m.target_node_id IS NULL
      AND m.impacted_node_ids = '[]' AND m.relations = '[]'";

/// The seq and decay inputs of a row selected with [`DECAY_COLUMNS`].
fn decay_inputs(row: &Row) -> Result<(i64, DecayInputs)> {
    let kind: String = row.get(1).ctx("memory type")?;
    let inputs = DecayInputs {
        memory_type: MemoryType::parse(&kind)
            .map_err(|e| Error::Internal(format!("stored memory: {e}")))?,
        own_half_life_days: row.get(2).ctx("half-life")?,
        pinned: false,
        orphan: row.get::<i64>(5).ctx("orphan")? != 0,
        superseded: row.get::<i64>(4).ctx("superseded")? != 0,
        last_accessed_at: row.get(3).ctx("last access")?,
    };
    Ok((row.get(0).ctx("seq")?, inputs))
}

/// The seqs of the project's active memories that have expired at `now`. Reads only the
/// columns decay depends on.
async fn expired_memories(ctx: &Ctx<'_>, now: i64) -> Result<Vec<i64>> {
    let decaying: Vec<&str> = MemoryType::ALL
        .iter()
        .filter(|t| default_half_life_days(**t).is_some())
        .map(|t| t.as_str())
        .collect();
    let decaying = serde_json::to_string(&decaying).expect("strings serialise");
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            &format!(
                "SELECT {DECAY_COLUMNS} FROM memories m
                 WHERE m.project_id = ?1 AND m.deprecated = 0 AND m.pinned = 0
                   AND m.type <> 'decision'
                   AND (m.decay_half_life_days IS NOT NULL
                        OR m.type IN (SELECT value FROM json_each(?2)))"
            ),
            params![ctx.project_id, decaying],
        )
        .await
        .ctx("finding expired memories")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("finding expired memories")? {
        let (seq, inputs) = decay_inputs(&row)?;
        if inputs.expired(now) {
            out.push(seq);
        }
    }
    Ok(out)
}

/// Forgets one batch of expired memories, each leaving its previous state in its history.
/// Rows changed since the scan are checked again (by the same narrow read and the same decay
/// rule); returns how many were forgotten.
async fn expire(ctx: &Ctx<'_>, seqs: &[i64], now: i64) -> Result<usize> {
    let list = serde_json::to_string(seqs).expect("integers serialise");
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let mut rows = tx
        .query(
            &format!(
                "SELECT {DECAY_COLUMNS}
                 FROM json_each(?1) j CROSS JOIN memories m ON m.seq = j.value
                 WHERE m.deprecated = 0 AND m.pinned = 0"
            ),
            params![list],
        )
        .await
        .ctx("checking expired memories")?;
    let mut still_expired = Vec::with_capacity(seqs.len());
    while let Some(row) = rows.next().await.ctx("checking expired memories")? {
        let (seq, inputs) = decay_inputs(&row)?;
        if inputs.expired(now) {
            still_expired.push(seq);
        }
    }
    drop(rows);
    if still_expired.is_empty() {
        return Ok(0);
    }
    let list = serde_json::to_string(&still_expired).expect("integers serialise");
    // The old state, snapshotted by SQLite from the row itself (the history's compact form,
    // see `memory::snapshot`): loading 1,000 whole memories into Rust to write them back
    // cost more than the rest of the batch's statements.
    tx.execute(
        &format!(
            "INSERT OR REPLACE INTO memory_versions
               (memory_id, version, snapshot, ended_by, ended_at)
             SELECT m.id, m.version, {}, 'expire', ?2
             FROM json_each(?1) j CROSS JOIN memories m ON m.seq = j.value",
            *snapshot::SQL
        ),
        params![list.as_str(), now],
    )
    .await
    .ctx("saving versions of expired memories")?;
    tx.execute(
        "UPDATE memories SET deprecated = 1, deprecated_at = ?2,
           deprecated_reason = 'expired: unused for three half-lives',
           version = version + 1, updated_at = ?2
         WHERE seq IN (SELECT value FROM json_each(?1))",
        params![list, now],
    )
    .await
    .ctx("forgetting expired memories")?;
    tx.commit().await.ctx("committing expiry")?;
    Ok(still_expired.len())
}

/// Forgotten memories past the grace period: those to delete, and how many are kept.
struct Deletable {
    seqs: Vec<i64>,
    verified: u64,
}

async fn forgotten_before(ctx: &Ctx<'_>, cutoff: i64) -> Result<Deletable> {
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            "SELECT seq, user_verified FROM memories INDEXED BY memories_forgotten_at
             WHERE project_id = ?1 AND deprecated = 1 AND deprecated_at < ?2",
            params![ctx.project_id, cutoff],
        )
        .await
        .ctx("finding forgotten memories")?;
    let mut out = Deletable {
        seqs: Vec::new(),
        verified: 0,
    };
    while let Some(row) = rows.next().await.ctx("finding forgotten memories")? {
        if row.get::<i64>(1).ctx("verified")? != 0 {
            out.verified += 1;
        } else {
            out.seqs.push(row.get(0).ctx("seq")?);
        }
    }
    Ok(out)
}

/// Deletes one batch of forgotten memories for good: their history, events and the links of
/// memories they superseded go with them (links, vectors and index entries follow by cascade
/// and triggers).
async fn delete_memories(ctx: &Ctx<'_>, seqs: &[i64]) -> Result<()> {
    let list = serde_json::to_string(seqs).expect("integers serialise");
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    // Still forgotten: a memory restored since the scan stays.
    let ids = "SELECT m.id FROM json_each(?1) j CROSS JOIN memories m
               ON m.seq = j.value AND m.deprecated = 1 AND m.user_verified = 0";
    for (what, sql) in [
        (
            "deleting history",
            format!("DELETE FROM memory_versions WHERE memory_id IN ({ids})"),
        ),
        (
            "deleting events",
            format!("DELETE FROM memory_events WHERE memory_id IN ({ids})"),
        ),
        (
            "unlinking superseded memories",
            format!("UPDATE memories SET superseded_by = NULL WHERE superseded_by IN ({ids})"),
        ),
        (
            "deleting memories",
            "DELETE FROM memories WHERE seq IN (SELECT value FROM json_each(?1))
               AND deprecated = 1 AND user_verified = 0"
                .to_owned(),
        ),
    ] {
        tx.execute(&sql, params![list.as_str()]).await.ctx(what)?;
    }
    tx.commit().await.ctx("committing deletion")?;
    Ok(())
}

/// Knowledge-layer nodes created by an agent or an LLM with no edge and no memory attached,
/// not updated since `cutoff`: (id, key).
async fn orphan_nodes(ctx: &Ctx<'_>, cutoff: i64) -> Result<Vec<(i64, String)>> {
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            "SELECT n.id, n.key FROM graph_nodes n
             WHERE n.project_id = ?1 AND n.layer = 3 AND n.source IN ('agent', 'llm')
               AND n.updated_at < ?2
               AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.from_id = n.id)
               AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.to_id = n.id)
               AND NOT EXISTS (SELECT 1 FROM memory_links l
                               WHERE l.project_id = n.project_id AND l.node_key = n.key)",
            params![ctx.project_id, cutoff],
        )
        .await
        .ctx("finding orphan nodes")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("finding orphan nodes")? {
        out.push((row.get(0).ctx("node")?, row.get(1).ctx("node")?));
    }
    Ok(out)
}

/// Deletes orphan nodes (they have no edges, so the closure table has nothing of theirs) and
/// their authored rows, so that the deletion syncs.
async fn delete_nodes(ctx: &Ctx<'_>, nodes: &[(i64, String)]) -> Result<()> {
    for batch in nodes.chunks(BATCH) {
        let conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        let ids: Vec<i64> = batch.iter().map(|(id, _)| *id).collect();
        let keys: Vec<&str> = batch.iter().map(|(_, key)| key.as_str()).collect();
        tx.execute(
            "DELETE FROM graph_nodes WHERE id IN (SELECT value FROM json_each(?1))
               AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.from_id = graph_nodes.id)
               AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.to_id = graph_nodes.id)",
            params![serde_json::to_string(&ids).expect("integers serialise")],
        )
        .await
        .ctx("deleting orphan nodes")?;
        // For the in-process graph indexes (they have no edges: nothing else changed).
        let deleted: std::collections::BTreeSet<i64> = ids.iter().copied().collect();
        crate::graph::closure::log_changes(&tx, ctx.project_id, Some(&deleted)).await?;
        tx.execute(
            "DELETE FROM knowledge_nodes WHERE project_id = ?1
               AND key IN (SELECT value FROM json_each(?2))
               AND NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.project_id = ?1 AND n.key = knowledge_nodes.key)",
            params![
                ctx.project_id,
                serde_json::to_string(&keys).expect("strings serialise")
            ],
        )
        .await
        .ctx("deleting orphan nodes' records")?;
        tx.commit().await.ctx("committing orphan nodes")?;
    }
    Ok(())
}

/// Deletes the vectors of the project's forgotten memories; returns how many.
async fn evict_vectors(ctx: &Ctx<'_>) -> Result<u64> {
    let conn = ctx.store.writer().await;
    conn.execute(
        "DELETE FROM memory_vectors WHERE memory_seq IN (
           SELECT seq FROM memories WHERE project_id = ?1 AND deprecated = 1)",
        params![ctx.project_id],
    )
    .await
    .ctx("evicting vectors of forgotten memories")
}
