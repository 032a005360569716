//! Consolidation (seed 004): merging near-duplicate memories into the strongest of them.
//!
//! Candidates are the project's active memories that are not disputed, not superseded and
//! not tied to an agent file (an agent file's rules follow the file; see `agent_import`).
//! Memories are compared only with memories of the same type, scope and share scope (merging
//! a personal memory into a project one would share it). Two are near-duplicates when their
//! vectors for the current embedding model have cosine ≥ `threshold` (default 0.95), or their
//! word sets have Jaccard ≥ `word_threshold` (default 0.9; this is what works without a
//! model, and it also catches pairs the vector test misses) — see [`super::near_dups`].
//!
//! Two memories that contradict each other (linked `conflicts_with`, or read so by
//! [`super::contradiction`]: "must" against "must not" is a small change of words) are never
//! merged; such a pair that is not linked yet (the write-time scan looks at a bounded set of
//! candidates, and skips bulk writes) is linked `conflicts_with` both ways and put in the
//! review queue. In each group the strongest memory is kept: pinned first, then user-verified, then the
//! highest current confidence, then the most used, then the oldest. It takes the union of
//! the others' tags, files, modules, triggers and impacted nodes, their highest stored
//! confidence, one reinforcement per merged memory, and a `derived_from` relation to each;
//! the others are forgotten with reason "merged into <id>". Both are versioned changes ended
//! by `consolidate`, so a merge can be rolled back memory by memory. Groups are written in
//! transactions of at most [`BATCH`] memories; cancelling stops between them, keeping the
//! groups already merged. `dry_run` reports the groups and writes nothing.

use std::sync::atomic::{AtomicBool, Ordering};

use libsql::params;
use serde::Serialize;

use super::agent_import::TAG_PREFIX;
use super::contradiction::contradiction;
use super::decay::current_confidence;
use super::links;
use super::near_dups::{self, Basis, Record};
use crate::embed::EmbedderId;
use crate::error::{DbContext, Error, Result};
use crate::memory::rows::{from_row, SELECT_M};
use crate::memory::{self, Ctx, Memory, MemoryRelation, MemoryType, RelationType};
use crate::store::begin_write;

/// Default cosine similarity at or above which two memories are merged.
pub const DEFAULT_VECTOR_THRESHOLD: f64 = 0.95;
/// Default word-set Jaccard similarity at or above which two memories are merged.
pub const DEFAULT_WORD_THRESHOLD: f64 = 0.9;
/// Memories changed per write transaction.
pub const BATCH: usize = 500;

/// Recorded as the change that ended a version when consolidation changes a memory.
const ENDED_BY: &str = "consolidate";

/// How to consolidate.
#[derive(Debug, Clone, Default)]
pub struct ConsolidateOptions {
    /// Cosine similarity threshold in (0, 1] (default [`DEFAULT_VECTOR_THRESHOLD`], moved to the
    /// model's scale by [`EmbedderId::rescaled_threshold`]: 0.992 for multilingual-e5-small).
    pub threshold: Option<f64>,
    /// Word-set Jaccard threshold in (0, 1] (default [`DEFAULT_WORD_THRESHOLD`]).
    pub word_threshold: Option<f64>,
    /// Report the groups, change nothing.
    pub dry_run: bool,
}

/// One group of near-duplicates.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeGroup {
    /// The memory kept.
    pub kept: String,
    /// The memories merged into it (forgotten unless this was a dry run).
    pub merged: Vec<String>,
    /// Their type.
    pub memory_type: MemoryType,
    /// The least similarity among the pairs that formed the group.
    pub similarity: f64,
    /// How that pair was found: `meaning` (vectors) or `words`.
    pub basis: &'static str,
}

/// What consolidation found and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidateReport {
    /// Memories compared.
    pub scanned: u64,
    /// Of those, memories with a vector for the current model.
    pub with_vectors: u64,
    /// The groups, in the order of their oldest member.
    pub groups: Vec<MergeGroup>,
    /// Memories merged away (forgotten); 0 in a dry run.
    pub merged: u64,
    /// Pairs of near-duplicates found to contradict each other and not linked yet: each pair
    /// is now linked `conflicts_with` both ways and put in the review queue (in a dry run,
    /// counted only).
    pub conflicts: u64,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

/// Consolidates the project's memories (see the module doc). `embedder` is the current
/// model's id when one is configured: its stored vectors are used, nothing is embedded here.
pub(crate) async fn consolidate(
    ctx: &Ctx<'_>,
    options: &ConsolidateOptions,
    embedder: Option<&EmbedderId>,
    cancel: &AtomicBool,
) -> Result<ConsolidateReport> {
    let v = ctx.validator();
    // The default is on the built-in model's scale; a model that crowds its cosines (e5)
    // gets it moved to its own, or unrelated memories would pass it.
    let default_vector = embedder.map_or(DEFAULT_VECTOR_THRESHOLD, |m| {
        m.rescaled_threshold(DEFAULT_VECTOR_THRESHOLD)
    });
    let vector_threshold = threshold(&v, "threshold", options.threshold, default_vector)?;
    let word_threshold = threshold(
        &v,
        "wordThreshold",
        options.word_threshold,
        DEFAULT_WORD_THRESHOLD,
    )?;
    let (memories, vectors) = load(ctx, embedder).await?;
    let with_vectors = vectors.iter().filter(|v| v.is_some()).count() as u64;
    let records = records(&memories, vectors);
    // CPU-bound for large projects: off the async workers.
    let found = tokio::task::spawn_blocking(move || {
        near_dups::groups(&records, Some(word_threshold), Some(vector_threshold))
    })
    .await
    .map_err(|e| Error::Internal(format!("consolidation task failed: {e}")))?;
    let now = ctx.clock.now_ms();
    let mut report = ConsolidateReport {
        scanned: memories.len() as u64,
        with_vectors,
        dry_run: options.dry_run,
        ..ConsolidateReport::default()
    };
    let mut plans = Vec::with_capacity(found.len());
    let mut conflicts: Vec<(String, String, f64)> = Vec::new();
    for group in found {
        let mut members: Vec<&Memory> = group.members.iter().map(|&i| &memories[i]).collect();
        members.sort_by(|a, b| strength_order(a, b, now));
        let kept = members[0];
        // Similar words can say opposite things ("must" / "must not"): those stay apart, and
        // a contradiction the write-time scan missed is linked now.
        for other in &members[1..] {
            if let Some(similarity) = unlinked_contradiction(kept, other) {
                conflicts.push((kept.id.clone(), other.id.clone(), similarity));
            }
        }
        members.retain(|m| m.id == kept.id || !at_odds(kept, m));
        if members.len() < 2 {
            continue;
        }
        report.groups.push(MergeGroup {
            kept: kept.id.clone(),
            merged: members[1..].iter().map(|m| m.id.clone()).collect(),
            memory_type: kept.memory_type,
            similarity: group.similarity,
            basis: match group.basis {
                Basis::Meaning => "meaning",
                Basis::Words => "words",
            },
        });
        plans.push(members);
    }
    report.conflicts = conflicts.len() as u64;
    if options.dry_run {
        return Ok(report);
    }
    let mut start = 0;
    while start < plans.len() {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Aborted);
        }
        let mut end = start;
        let mut size = 0;
        while end < plans.len() && (end == start || size + plans[end].len() <= BATCH) {
            size += plans[end].len();
            end += 1;
        }
        let conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        for members in &plans[start..end] {
            report.merged += merge(ctx, &tx, members).await?;
        }
        tx.commit().await.ctx("committing consolidation")?;
        start = end;
    }
    // After the merges, which skip memories changed since they were loaded: linking first
    // would change the kept memories.
    if cancel.load(Ordering::Relaxed) {
        return Err(Error::Aborted);
    }
    if !conflicts.is_empty() {
        let conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        for (a, b, similarity) in &conflicts {
            links::flag_conflict(ctx, &tx, a, b, *similarity).await?;
            links::flag_conflict(ctx, &tx, b, a, *similarity).await?;
        }
        tx.commit()
            .await
            .ctx("committing contradictions found by consolidation")?;
    }
    Ok(report)
}

fn threshold(
    v: &crate::memory::input::Validator<'_>,
    field: &str,
    value: Option<f64>,
    default: f64,
) -> Result<f64> {
    let value = v.unit(field, value.unwrap_or(default))?;
    if value == 0.0 {
        return Err(Error::invalid(format!("{field} must be above 0")));
    }
    Ok(value)
}

/// The candidates (see the module doc) with their vectors for `embedder`, in seq order.
async fn load(
    ctx: &Ctx<'_>,
    embedder: Option<&EmbedderId>,
) -> Result<(Vec<Memory>, Vec<Option<Vec<f32>>>)> {
    let sql = format!(
        "SELECT {}, v.vector FROM memories m
         LEFT JOIN memory_vectors v ON v.memory_seq = m.seq AND v.embedder = ?2
         WHERE m.project_id = ?1 AND m.deprecated = 0 AND m.disputed_at IS NULL
           AND m.superseded_by IS NULL
           AND NOT EXISTS (SELECT 1 FROM json_each(m.tags) t
                           WHERE substr(t.value, 1, length(?3)) = ?3)
         ORDER BY m.seq",
        *SELECT_M
    );
    let key = embedder.map(EmbedderId::key).unwrap_or_default();
    let dims = embedder.map_or(0, |e| e.dims);
    let vector_column = crate::memory::rows::COLUMN_COUNT;
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(&sql, params![ctx.project_id, key, TAG_PREFIX])
        .await
        .ctx("loading memories to consolidate")?;
    let mut memories = Vec::new();
    let mut vectors = Vec::new();
    while let Some(row) = rows.next().await.ctx("loading memories to consolidate")? {
        memories.push(from_row(&row)?);
        let blob: Option<Vec<u8>> = row.get(vector_column).ctx("memory vector")?;
        vectors.push(blob.and_then(|b| crate::vector::decode_vector(&b, dims)));
    }
    Ok((memories, vectors))
}

/// The texts to compare, partitioned by (type, scope, share scope).
fn records(memories: &[Memory], vectors: Vec<Option<Vec<f32>>>) -> Vec<Record> {
    let mut partitions = std::collections::HashMap::new();
    memories
        .iter()
        .zip(vectors)
        .map(|(m, vector)| {
            let key = (m.memory_type, m.scope, m.share_scope);
            let next = partitions.len() as u32;
            let partition = *partitions.entry(key).or_insert(next);
            Record {
                partition,
                words: near_dups::words(&m.content),
                vector,
            }
        })
        .collect()
}

/// Whether `x` names `y` as conflicting.
fn linked(x: &Memory, y: &Memory) -> bool {
    x.relations.iter().any(|r| {
        r.relation_type == RelationType::ConflictsWith
            && r.target_memory_id.as_deref() == Some(y.id.as_str())
    })
}

/// Whether two memories contradict: linked as conflicting, or read so by the contradiction
/// rule.
fn at_odds(a: &Memory, b: &Memory) -> bool {
    linked(a, b) || linked(b, a) || contradiction(&a.content, &b.content).is_some()
}

/// The similarity of a contradiction between two memories that are not linked yet.
fn unlinked_contradiction(a: &Memory, b: &Memory) -> Option<f64> {
    if linked(a, b) || linked(b, a) {
        return None;
    }
    contradiction(&a.content, &b.content).map(|c| c.similarity)
}

/// Strongest first: pinned, verified, current confidence, uses, oldest.
fn strength_order(a: &Memory, b: &Memory, now: i64) -> std::cmp::Ordering {
    b.pinned
        .cmp(&a.pinned)
        .then(b.user_verified.cmp(&a.user_verified))
        .then(current_confidence(b, now).total_cmp(&current_confidence(a, now)))
        .then(b.access_count.cmp(&a.access_count))
        .then(a.created_at.cmp(&b.created_at))
        .then(a.id.cmp(&b.id))
}

/// Merges `members[1..]` into `members[0]` inside `tx`; returns how many were merged away.
/// Memories changed since they were loaded (another writer ran in between) are left alone:
/// the whole group when it is the kept one, else just that member.
async fn merge(ctx: &Ctx<'_>, tx: &crate::store::WriteTx, members: &[&Memory]) -> Result<u64> {
    let kept = members[0];
    let unchanged = |now: &Memory, then: &Memory| now.version == then.version && !now.deprecated;
    if !unchanged(&memory::load(ctx, tx, &kept.id).await?, kept) {
        return Ok(0);
    }
    let cap = ctx.limits.max_list_len;
    let mut merged = 0;
    let mut absorbed: Vec<Memory> = Vec::new();
    for other in &members[1..] {
        if !unchanged(&memory::load(ctx, tx, &other.id).await?, other) {
            continue;
        }
        let reason = format!("merged into {}", kept.id);
        let (now_state, changed) =
            memory::forget_in(ctx, tx, &other.id, Some(reason), ENDED_BY).await?;
        if changed {
            merged += 1;
            absorbed.push(now_state);
        }
    }
    if absorbed.is_empty() {
        return Ok(0);
    }
    memory::change_in(ctx, tx, &kept.id, ENDED_BY, move |m| {
        let union = |into: &mut Vec<String>, from: &[String]| {
            for item in from {
                if into.len() >= cap {
                    break;
                }
                if !into.contains(item) {
                    into.push(item.clone());
                }
            }
        };
        for other in &absorbed {
            union(&mut m.tags, &other.tags);
            union(&mut m.related_files, &other.related_files);
            union(&mut m.related_modules, &other.related_modules);
            union(&mut m.triggers, &other.triggers);
            union(&mut m.impacted_node_ids, &other.impacted_node_ids);
            m.confidence = m.confidence.max(other.confidence);
            m.pinned |= other.pinned;
            m.user_verified |= other.user_verified;
            m.reinforce_count += 1;
            if m.relations.len() < cap {
                m.relations.push(MemoryRelation {
                    target_memory_id: Some(other.id.clone()),
                    target_file_path: None,
                    relation_type: RelationType::DerivedFrom,
                    confidence: 1.0,
                    auto_extracted: true,
                });
            }
        }
    })
    .await?;
    Ok(merged)
}
