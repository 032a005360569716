//! The write operations. Each runs in one immediate transaction on the single writer
//! connection: validation happens before the lock is taken, and a failure anywhere rolls the
//! whole call back (a batch is all or nothing).

use std::sync::LazyLock;

use libsql::{params, Connection};

use super::dedup::content_hash;
use super::input::{MemoryPatch, RememberInput};
use super::model::{Memory, MemoryScope, MemorySource, ShareScope};
use super::rows::{self, from_row, to_params, SELECT_BY_ID, SELECT_M};
use super::Ctx;
use crate::error::{DbContext, Error, Result};
use crate::store::{begin_write, WriteTx, Writer};

/// How much a duplicate raises the existing memory's confidence (capped at 1.0).
pub const REINFORCE_BOOST: f64 = 0.05;

/// Uncorrected uses between two trust raises (see [`touch`]).
pub const TRUST_USES: i64 = 5;
/// How much each raise adds to the stored confidence.
pub const TRUST_BOOST: f64 = 0.05;
/// The raises stop at this confidence.
pub const TRUST_CAP: f64 = 0.95;
/// Uncorrected uses after which a memory no longer waits for review.
pub const REVIEW_CLEARING_USES: i64 = 10;

/// The result of `remember`: the stored memory and whether it was new.
#[derive(Debug, Clone)]
pub struct Remembered {
    /// The memory as stored now.
    pub memory: Memory,
    /// `true` when a new memory was created; `false` when an identical active memory in the
    /// same (project, scope) was reinforced instead.
    pub created: bool,
}

/// A validated, redacted, ready-to-store memory and its dedup key.
struct Prepared {
    memory: Memory,
    hash: String,
}

fn prepare(ctx: &Ctx<'_>, input: RememberInput, now: i64) -> Result<Prepared> {
    let v = ctx.validator();
    let content = v.content(&input.content)?;
    let (tags, r_tags) = v.list("tags", &input.tags)?;
    let (related_files, r_files) = v.files(&input.related_files)?;
    let (related_modules, r_modules) = v.list("relatedModules", &input.related_modules)?;
    let (impacted_node_ids, r_impacted) = v.list("impactedNodeIds", &input.impacted_node_ids)?;
    let (citation_text, r_cite) = v.citation(input.citation_text.as_deref())?;
    let (metadata, r_meta) = v.metadata(input.metadata.as_ref())?;
    let (triggers, r_triggers) = v.triggers(&input.triggers)?;
    let (commit_sha, r_commit) = v.opt_text("commitSha", input.commit_sha.as_deref())?;
    let (methodology, r_methodology) = v.opt_text("methodology", input.methodology.as_deref())?;
    let (target_node_id, r_target) = v.opt_text("targetNodeId", input.target_node_id.as_deref())?;
    let (work_unit_ref, r_unit) = v.work_unit(input.work_unit_ref.as_ref())?;
    let session_id = v.opt_id("sessionId", input.session_id.as_deref())?;
    let confidence = v.unit("confidence", input.confidence.unwrap_or(0.8))?;
    let decay_half_life_days = input
        .decay_half_life_days
        .map(|d| v.half_life(d))
        .transpose()?;
    let hash = content_hash(&content.text);
    let memory = Memory {
        id: uuid::Uuid::now_v7().to_string(),
        project_id: ctx.project_id.to_owned(),
        memory_type: input.memory_type,
        content: content.text,
        confidence,
        tags,
        related_files,
        related_modules,
        scope: input.scope.unwrap_or(MemoryScope::Global),
        share_scope: input.share_scope.unwrap_or(ShareScope::Project),
        source: input.source.unwrap_or(MemorySource::AgentExplicit),
        provenance_session_ids: session_id.iter().cloned().collect(),
        session_id,
        commit_sha,
        work_unit_ref,
        methodology,
        target_node_id,
        impacted_node_ids,
        relations: v.relations(&input.relations)?,
        decay_half_life_days,
        needs_review: input.needs_review.unwrap_or(false),
        user_verified: input.user_verified.unwrap_or(false),
        citation_text,
        pinned: input.pinned.unwrap_or(false),
        deprecated: false,
        deprecated_at: None,
        deprecated_reason: None,
        stale_at: None,
        redactions: content.count
            + r_tags
            + r_files
            + r_modules
            + r_impacted
            + r_cite
            + r_meta
            + r_triggers
            + r_commit
            + r_methodology
            + r_target
            + r_unit,
        reinforce_count: 0,
        access_count: 0,
        created_at: now,
        updated_at: now,
        last_accessed_at: now,
        version: 1,
        metadata,
        triggers,
        superseded_by: None,
        disputed_at: None,
        helpful_count: 0,
        wrong_count: 0,
        uncorrected_uses: 0,
    };
    Ok(Prepared { memory, hash })
}

/// The active memory of a project and scope with a content hash: `?1` project, `?2` scope,
/// `?3` hash.
static FIND_DUPLICATE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM memories m
         WHERE m.project_id = ?1 AND m.scope = ?2 AND m.content_hash = ?3 AND m.deprecated = 0",
        *SELECT_M
    )
});

/// Remembers every input in one transaction, in order. Validation of all inputs happens first:
/// one invalid input fails the call (its index is in the message) and nothing is written.
/// A duplicate of an earlier input of the same batch reinforces it, like any duplicate.
pub(crate) async fn remember_many(
    ctx: &Ctx<'_>,
    inputs: Vec<RememberInput>,
) -> Result<Vec<Remembered>> {
    let batch = prepare_batch(ctx, inputs)?;
    let mut conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let out = remember_in(ctx, &mut conn, &tx, batch).await?;
    tx.commit().await.ctx("committing remember")?;
    Ok(out)
}

/// Validated, redacted inputs ready for [`remember_in`].
pub(crate) struct PreparedBatch {
    items: Vec<Prepared>,
    now: i64,
}

/// Validates and redacts every input (before any lock is taken); the first invalid input
/// fails the batch, naming its index.
pub(crate) fn prepare_batch(ctx: &Ctx<'_>, inputs: Vec<RememberInput>) -> Result<PreparedBatch> {
    let now = ctx.clock.now_ms();
    let batch = inputs.len() > 1;
    let items = inputs
        .into_iter()
        .enumerate()
        .map(|(i, input)| {
            prepare(ctx, input, now).map_err(|e| match e {
                Error::InvalidArg(msg) if batch => Error::InvalidArg(format!("input {i}: {msg}")),
                other => other,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(PreparedBatch { items, now })
}

/// Stores a prepared batch inside the caller's write transaction `tx` on `conn` (so that other
/// writes, like the observer's counts, commit or roll back with it), then tells
/// [`super::WriteHooks::inserted`] in the same transaction.
pub(crate) async fn remember_in(
    ctx: &Ctx<'_>,
    conn: &mut Writer<'_>,
    tx: &WriteTx,
    batch: PreparedBatch,
) -> Result<Vec<Remembered>> {
    let PreparedBatch {
        items: prepared,
        now,
    } = batch;
    // The writer's cached statements: preparing these two costs more than a remember.
    let find = conn.cached(&FIND_DUPLICATE).await?;
    let insert = conn.cached(&rows::INSERT).await?;

    let mut out = Vec::with_capacity(prepared.len());
    // Rows inserted but not yet in the search index (see `index_for_search`).
    let mut unindexed: Vec<i64> = Vec::new();
    for p in prepared {
        let existing = {
            let mut found = find
                .query(params![
                    ctx.project_id,
                    p.memory.scope.as_str(),
                    p.hash.as_str()
                ])
                .await
                .ctx("dedup lookup")?;
            let row = found.next().await.ctx("dedup lookup")?;
            row.map(|r| from_row(&r)).transpose()?
        };
        find.reset();
        match existing {
            Some(old) => {
                // The update trigger removes the old row's terms from the index, so a row
                // inserted earlier in this batch must be indexed before it changes.
                index_for_search(conn, &mut unindexed).await?;
                let merged = reinforce(ctx, &old, p.memory, now);
                save_version(tx, &old, "reinforce", now).await?;
                write_row(tx, &merged).await?;
                out.push(Remembered {
                    memory: merged,
                    created: false,
                });
            }
            None => {
                insert
                    .execute(to_params(&p.memory, &p.hash))
                    .await
                    .ctx("inserting memory")?;
                insert.reset();
                unindexed.push(tx.last_insert_rowid());
                out.push(Remembered {
                    memory: p.memory,
                    created: true,
                });
            }
        }
    }
    drop(find);
    drop(insert);
    index_for_search(conn, &mut unindexed).await?;
    ctx.hooks.inserted(ctx, tx, &mut out).await?;
    Ok(out)
}

/// Adds the rows `seqs` to the full-text index in one statement, copying the indexed columns
/// from the table so that the index holds exactly what the update/delete triggers will later
/// remove. One statement per batch keeps FTS5's pending terms in memory until commit
/// (schema migration 003 explains why there is no insert trigger).
async fn index_for_search(writer: &mut Writer<'_>, seqs: &mut Vec<i64>) -> Result<()> {
    if seqs.is_empty() {
        return Ok(());
    }
    let list = serde_json::to_string(&seqs).expect("integers serialise");
    writer
        .cached(
            "INSERT INTO memories_fts(rowid, content, tags, related_files)
             SELECT m.seq, m.content, m.tags, m.related_files
             FROM json_each(?1) AS j CROSS JOIN memories m ON m.seq = j.value",
        )
        .await?
        .execute(params![list])
        .await
        .ctx("indexing memories for search")?;
    seqs.clear();
    Ok(())
}

/// Folds a duplicate into the existing memory: confidence up (never down), lists unioned,
/// provenance extended.
fn reinforce(ctx: &Ctx<'_>, old: &Memory, new: Memory, now: i64) -> Memory {
    let cap = ctx.limits.max_list_len;
    let union = |a: &[String], b: &[String]| {
        let mut out = a.to_vec();
        for item in b {
            if out.len() >= cap {
                break;
            }
            if !out.contains(item) {
                out.push(item.clone());
            }
        }
        out
    };
    let mut m = old.clone();
    m.confidence = (old.confidence.max(new.confidence) + REINFORCE_BOOST).min(1.0);
    m.tags = union(&old.tags, &new.tags);
    m.related_files = union(&old.related_files, &new.related_files);
    m.related_modules = union(&old.related_modules, &new.related_modules);
    m.triggers = union(&old.triggers, &new.triggers);
    m.impacted_node_ids = union(&old.impacted_node_ids, &new.impacted_node_ids);
    m.provenance_session_ids = union(&old.provenance_session_ids, &new.provenance_session_ids);
    m.pinned = old.pinned || new.pinned;
    m.reinforce_count += 1;
    m.updated_at = now;
    m.version += 1;
    m
}

/// Loads one memory of this project inside a transaction.
pub(crate) async fn load(ctx: &Ctx<'_>, conn: &Connection, id: &str) -> Result<Memory> {
    let mut found = conn
        .query(&SELECT_BY_ID, params![id, ctx.project_id])
        .await
        .ctx("loading memory")?;
    match found.next().await.ctx("loading memory")? {
        Some(row) => from_row(&row),
        None => Err(Error::not_found("memory", id)),
    }
}

/// Records `old` as a past version, ended by `change`.
async fn save_version(tx: &Connection, old: &Memory, change: &str, now: i64) -> Result<()> {
    let snapshot = super::snapshot::encode(old);
    tx.execute(
        "INSERT OR REPLACE INTO memory_versions(memory_id, version, snapshot, ended_by, ended_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![old.id.as_str(), old.version as i64, snapshot, change, now],
    )
    .await
    .ctx("saving memory version")?;
    Ok(())
}

/// Rewrites every mutable column of `m`.
async fn write_row(tx: &Connection, m: &Memory) -> Result<()> {
    let hash = content_hash(&m.content);
    tx.execute(&rows::UPDATE, to_params(m, &hash))
        .await
        .map_err(|e| match e {
            libsql::Error::SqliteFailure(code, ref msg)
                if code & 0xff == 19 && msg.contains("content_hash") =>
            {
                Error::Conflict(format!(
                    "another active memory in scope '{}' already has this content",
                    m.scope
                ))
            }
            other => Error::db("updating memory", other),
        })?;
    Ok(())
}

/// Fails with `ENGRAM_CONFLICT` when another active memory of the project has the same content
/// in the same scope (so the caller gets the other memory's id instead of a constraint error).
async fn ensure_unique(tx: &WriteTx, m: &Memory) -> Result<()> {
    if m.deprecated {
        return Ok(());
    }
    let mut rows = tx
        .query(
            "SELECT id FROM memories
             WHERE project_id = ?1 AND scope = ?2 AND content_hash = ?3 AND deprecated = 0 AND id <> ?4",
            params![
                m.project_id.as_str(),
                m.scope.as_str(),
                content_hash(&m.content),
                m.id.as_str()
            ],
        )
        .await
        .ctx("checking uniqueness")?;
    if let Some(row) = rows.next().await.ctx("checking uniqueness")? {
        let other: String = row.get(0).ctx("checking uniqueness")?;
        return Err(Error::Conflict(format!(
            "memory {other} in scope '{}' already has this content",
            m.scope
        )));
    }
    Ok(())
}

/// Applies a patch; the previous state becomes a version in the history.
pub(crate) async fn update(ctx: &Ctx<'_>, id: &str, patch: MemoryPatch) -> Result<Memory> {
    if patch.is_empty() {
        return Err(Error::invalid("update needs at least one field to change"));
    }
    // Validate everything before taking the writer.
    let apply = prepare_patch(ctx, patch)?;
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let (m, changed) = change_in(ctx, &tx, id, "update", apply).await?;
    if changed {
        tx.commit().await.ctx("committing update")?;
    }
    Ok(m)
}

/// Validates a patch (the privacy filter included) into the change it makes to a memory.
pub(crate) fn prepare_patch(
    ctx: &Ctx<'_>,
    patch: MemoryPatch,
) -> Result<impl FnOnce(&mut Memory) + Send + 'static> {
    let v = ctx.validator();
    // Validate everything before taking the writer.
    let content = patch.content.as_deref().map(|c| v.content(c)).transpose()?;
    let tags = patch
        .tags
        .as_deref()
        .map(|t| v.list("tags", t))
        .transpose()?;
    let files = patch
        .related_files
        .as_deref()
        .map(|f| v.files(f))
        .transpose()?;
    let modules = patch
        .related_modules
        .as_deref()
        .map(|m| v.list("relatedModules", m))
        .transpose()?;
    let impacted = patch
        .impacted_node_ids
        .as_deref()
        .map(|m| v.list("impactedNodeIds", m))
        .transpose()?;
    let relations = patch
        .relations
        .as_deref()
        .map(|r| v.relations(r))
        .transpose()?;
    let confidence = patch
        .confidence
        .map(|c| v.unit("confidence", c))
        .transpose()?;
    let half_life = patch
        .decay_half_life_days
        .map(|d| v.half_life(d))
        .transpose()?;
    let citation = patch
        .citation_text
        .as_deref()
        .map(|c| v.citation(Some(c)))
        .transpose()?;
    let triggers = patch
        .triggers
        .as_deref()
        .map(|t| v.triggers(t))
        .transpose()?;
    let metadata = patch
        .metadata
        .as_ref()
        .map(|m| v.metadata(Some(m)))
        .transpose()?;
    let commit_sha = patch
        .commit_sha
        .as_deref()
        .map(|s| v.opt_text("commitSha", Some(s)))
        .transpose()?;
    let methodology = patch
        .methodology
        .as_deref()
        .map(|s| v.opt_text("methodology", Some(s)))
        .transpose()?;
    let target = patch
        .target_node_id
        .as_deref()
        .map(|s| v.opt_text("targetNodeId", Some(s)))
        .transpose()?;

    Ok(move |m: &mut Memory| {
        if let Some(t) = patch.memory_type {
            m.memory_type = t;
        }
        if let Some(c) = content {
            m.redactions += c.count;
            m.content = c.text;
        }
        if let Some((t, r)) = tags {
            m.tags = t;
            m.redactions += r;
        }
        if let Some((f, r)) = files {
            m.related_files = f;
            m.redactions += r;
        }
        if let Some((mods, r)) = modules {
            m.related_modules = mods;
            m.redactions += r;
        }
        if let Some((ids, r)) = impacted {
            m.impacted_node_ids = ids;
            m.redactions += r;
        }
        if let Some(r) = relations {
            m.relations = r;
        }
        if let Some(c) = confidence {
            m.confidence = c;
        }
        if let Some(h) = half_life {
            m.decay_half_life_days = Some(h);
        }
        if let Some((c, r)) = citation {
            m.citation_text = c;
            m.redactions += r;
        }
        if let Some((t, r)) = triggers {
            m.triggers = t;
            m.redactions += r;
        }
        if let Some((meta, r)) = metadata {
            m.metadata = meta;
            m.redactions += r;
        }
        if let Some(s) = patch.scope {
            m.scope = s;
        }
        if let Some(s) = patch.share_scope {
            m.share_scope = s;
        }
        if let Some((c, r)) = commit_sha {
            m.commit_sha = c;
            m.redactions += r;
        }
        if let Some((mth, r)) = methodology {
            m.methodology = mth;
            m.redactions += r;
        }
        if let Some((t, r)) = target {
            m.target_node_id = t;
            m.redactions += r;
        }
        if let Some(b) = patch.needs_review {
            m.needs_review = b;
        }
        if let Some(b) = patch.user_verified {
            m.user_verified = b;
        }
        if let Some(b) = patch.pinned {
            m.pinned = b;
        }
    })
}

/// Makes one versioned change to a memory of the project inside the caller's transaction:
/// `apply` edits a copy; if anything changed, the old state becomes a version ended by
/// `ended_by` and the new one is written (uniqueness checked). Returns the memory as it is now
/// and whether it changed.
pub(crate) async fn change_in(
    ctx: &Ctx<'_>,
    tx: &WriteTx,
    id: &str,
    ended_by: &str,
    apply: impl FnOnce(&mut Memory),
) -> Result<(Memory, bool)> {
    let old = load(ctx, tx, id).await?;
    let mut m = old.clone();
    apply(&mut m);
    if m == old {
        // Nothing actually changed: no new version.
        return Ok((old, false));
    }
    m.version = old.version + 1;
    m.updated_at = ctx.clock.now_ms();
    ensure_unique(tx, &m).await?;
    save_version(tx, &old, ended_by, m.updated_at).await?;
    write_row(tx, &m).await?;
    Ok((m, true))
}

/// Archives a memory: it leaves search and `list` (unless asked for) but stays for audit and
/// rollback. Forgetting a forgotten memory changes nothing.
pub(crate) async fn forget(ctx: &Ctx<'_>, id: &str, reason: Option<String>) -> Result<Memory> {
    // The reason is kept in the row and its history: redacted like any text (not counted in
    // `redactions`, which is about the memory's own text).
    let (reason, _) = ctx.validator().opt_text("reason", reason.as_deref())?;
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let (m, changed) = forget_in(ctx, &tx, id, reason, "forget").await?;
    if changed {
        tx.commit().await.ctx("committing forget")?;
    }
    Ok(m)
}

/// [`forget`] inside the caller's transaction, recorded as ended by `ended_by`.
pub(crate) async fn forget_in(
    ctx: &Ctx<'_>,
    tx: &WriteTx,
    id: &str,
    reason: Option<String>,
    ended_by: &str,
) -> Result<(Memory, bool)> {
    let now = ctx.clock.now_ms();
    change_in(ctx, tx, id, ended_by, |m| {
        if !m.deprecated {
            m.deprecated = true;
            m.deprecated_at = Some(now);
            m.deprecated_reason = reason;
        }
    })
    .await
}

/// Archives the active memory `holder` because `winner`, arriving from the sync server with the
/// same content, is the one that stays active (one active memory per content and scope). Like
/// every change, the old state goes to the history first. Runs in the caller's transaction.
pub(crate) async fn archive_as_duplicate(
    tx: &Connection,
    holder: &str,
    winner: &str,
    now: i64,
) -> Result<()> {
    let mut found = tx
        .query(
            &format!("SELECT {} FROM memories m WHERE m.id = ?1", *SELECT_M),
            params![holder],
        )
        .await
        .ctx("loading duplicate memory")?;
    let old = match found.next().await.ctx("loading duplicate memory")? {
        Some(row) => from_row(&row)?,
        None => return Ok(()),
    };
    drop(found);
    let mut m = old.clone();
    m.deprecated = true;
    m.deprecated_at = Some(now);
    m.deprecated_reason = Some(format!("duplicate of {winner} (sync)"));
    m.version += 1;
    m.updated_at = now;
    save_version(tx, &old, "sync_duplicate", now).await?;
    write_row(tx, &m).await
}

/// The use of memories `?3` (JSON ids) of project `?1` at `?2`; `?4`-`?7` the trust rule's
/// constants. `+project_id` makes SQLite find the rows by id: with the project as a usable
/// index column it walked the project's (project, type) index, every memory of the project
/// (~40 ms at 50,000), while holding the writer.
pub(crate) const TOUCH: &str = "UPDATE memories SET access_count = access_count + 1,
       last_accessed_at = ?2,
       uncorrected_uses = uncorrected_uses + 1,
       confidence = CASE WHEN (uncorrected_uses + 1) % ?4 = 0 AND confidence < ?6
         THEN min(?6, confidence + ?5) ELSE confidence END,
       needs_review = CASE WHEN uncorrected_uses + 1 >= ?7 THEN 0 ELSE needs_review END
     WHERE +project_id = ?1 AND id IN (SELECT value FROM json_each(?3))";

/// Counts the memories `ids` of the project as used now (access count + 1, last access):
/// recall does this for what it put into an agent's context. Not a versioned change, and not
/// a text change, so neither history nor the search index is touched.
///
/// Use is also a trust signal (seed 003 section 18): every [`TRUST_USES`]th use since the
/// memory was last called wrong or corrected raises its confidence by [`TRUST_BOOST`] (to
/// [`TRUST_CAP`] at most), and the [`REVIEW_CLEARING_USES`]th clears `needs_review`.
///
/// With a `session_id`, the use is also counted for that session (its summary's "what the
/// agent remembered") through [`super::WriteHooks::used_in_session`], in the same transaction.
pub(crate) async fn touch(ctx: &Ctx<'_>, ids: &[String], session_id: Option<&str>) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let now = ctx.clock.now_ms();
    let ids = serde_json::to_string(ids).map_err(|e| Error::Internal(e.to_string()))?;
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    // SQLite evaluates every SET expression on the old row, so `uncorrected_uses + 1` is
    // the count after this use throughout.
    tx.execute(
        TOUCH,
        params![
            ctx.project_id,
            now,
            ids.as_str(),
            TRUST_USES,
            TRUST_BOOST,
            TRUST_CAP,
            REVIEW_CLEARING_USES
        ],
    )
    .await
    .ctx("recording access")?;
    if let Some(session_id) = session_id {
        ctx.hooks
            .used_in_session(&tx, ctx.project_id, session_id, &ids, now)
            .await?;
    }
    tx.commit().await.ctx("committing access")?;
    Ok(())
}

/// Makes a past version current again (as a new version; history is never rewritten).
/// Rolling back past a `forget` restores the memory.
pub(crate) async fn rollback(ctx: &Ctx<'_>, id: &str, version: u32) -> Result<Memory> {
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let current = load(ctx, &tx, id).await?;
    if version == current.version {
        return Ok(current);
    }
    let mut rows = tx
        .query(
            "SELECT snapshot FROM memory_versions WHERE memory_id = ?1 AND version = ?2",
            params![id, version as i64],
        )
        .await
        .ctx("loading version")?;
    let snapshot: String = match rows.next().await.ctx("loading version")? {
        Some(row) => row.get(0).ctx("loading version")?,
        None => return Err(Error::not_found("version", format!("{id}@{version}"))),
    };
    drop(rows);
    let mut m = super::snapshot::decode(&snapshot)?;
    // Counters that measure use, not content, keep running.
    m.access_count = current.access_count;
    m.last_accessed_at = current.last_accessed_at;
    m.reinforce_count = current.reinforce_count;
    m.version = current.version + 1;
    m.updated_at = now;
    ensure_unique(&tx, &m).await?;
    save_version(&tx, &current, "rollback", now).await?;
    write_row(&tx, &m).await?;
    tx.commit().await.ctx("committing rollback")?;
    Ok(m)
}

#[cfg(test)]
mod plan_tests {
    use super::TOUCH;
    use crate::store::plan::{mentions, query_plan};

    #[tokio::test]
    async fn a_use_finds_its_memories_by_id() {
        let plan = query_plan(TOUCH).await;
        assert!(mentions(&plan, "(id=?)"), "{plan:#?}");
        assert!(!mentions(&plan, "(project_id=?)"), "{plan:#?}");
    }
}
