//! Staleness from git (the spec's layer 3): a memory written at a commit (`commitSha`) whose
//! related files changed in git since then loses confidence in proportion to the share of
//! them that changed, and goes to the review queue once most of them have.
//!
//! - Each related file counts once per (memory, commit): a file changed again later, or the
//!   pass run again, changes nothing (`memory_git_changes` remembers what was counted, and it
//!   syncs with the memories, so a second clone does not count the same change again). A new
//!   `commitSha` on the memory starts the count afresh.
//! - The loss is [`MAX_LOSS`] of the confidence times the share newly changed: a memory whose
//!   every related file changed keeps half its confidence. It stays usable; whether it is
//!   still right is a person's call, which the review flag asks for at [`REVIEW_SHARE`].
//! - Pinned memories keep their confidence and stay out of review (a person said they hold);
//!   forgotten and stale ones are left alone. A commit the repository does not hold (another clone's, rebased away,
//!   beyond a shallow clone) says nothing: the memory is skipped and counted in
//!   [`GitStaleness::unknown_commits`].
//!
//! The history is read with `code::git` on one blocking thread; the memories are read before
//! and written after it in one transaction. Run at the end of every full `index()`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use libsql::params;

use crate::code::git::{GitStaleness, History};
use crate::error::{DbContext, Error, Result};
use crate::memory::Ctx;
use crate::store::begin_write;

/// The share of its confidence a memory loses when every related file changed.
pub const MAX_LOSS: f64 = 0.5;
/// The share of its related files changed since its commit at which a memory goes to review.
pub const REVIEW_SHARE: f64 = 0.5;

/// One memory the pass looks at.
struct Candidate {
    id: String,
    commit: String,
    related: Vec<String>,
    /// Related files already counted for this commit.
    counted: HashSet<String>,
    pinned: bool,
}

/// What to write for one memory: the related files found changed and not counted yet.
struct Change {
    id: String,
    commit: String,
    related: usize,
    newly: Vec<String>,
    pinned: bool,
}

/// Lowers the confidence of the project's memories whose related files changed in git since
/// their `commitSha` (see the module doc), reading the repository `project_root` is in.
pub(crate) async fn apply(ctx: &Ctx<'_>, project_root: &Path) -> Result<GitStaleness> {
    let started = std::time::Instant::now();
    let mut found = pass(ctx, project_root).await?;
    found.duration = started.elapsed();
    Ok(found)
}

async fn pass(ctx: &Ctx<'_>, project_root: &Path) -> Result<GitStaleness> {
    let candidates = candidates(ctx).await?;
    if candidates.is_empty() {
        return Ok(GitStaleness::default());
    }
    let root = project_root.to_path_buf();
    let commits: Vec<String> = candidates
        .iter()
        .map(|c| c.commit.clone())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let history = tokio::task::spawn_blocking(move || changes_since(&root, &commits))
        .await
        .map_err(|e| Error::Internal(format!("git staleness task failed: {e}")))??;
    let Some((head, changed)) = history else {
        return Ok(GitStaleness::default());
    };
    let mut drift = GitStaleness {
        head: Some(head.clone()),
        checked: candidates.len() as u64,
        ..GitStaleness::default()
    };
    let mut changes = Vec::new();
    for c in candidates {
        let Some(changed) = changed.get(&c.commit).and_then(Option::as_ref) else {
            drift.unknown_commits += 1;
            continue;
        };
        let newly: Vec<String> = c
            .related
            .iter()
            .filter(|f| changed.contains(f.as_str()) && !c.counted.contains(f.as_str()))
            .cloned()
            .collect();
        if newly.is_empty() {
            continue;
        }
        changes.push(Change {
            id: c.id,
            commit: c.commit,
            related: c.related.len(),
            newly,
            pinned: c.pinned,
        });
    }
    let (lowered, flagged) = write(ctx, &head, &changes).await?;
    drift.lowered = lowered;
    drift.flagged_for_review = flagged;
    Ok(drift)
}

/// The active, unstale memories with a commit and related files, with what was counted.
async fn candidates(ctx: &Ctx<'_>) -> Result<Vec<Candidate>> {
    let mut reader = ctx.store.reader().await;
    let rows = reader
        .query_cached(
            "SELECT m.id, m.commit_sha, m.related_files, m.pinned,
                    (SELECT json_group_array(g.path) FROM memory_git_changes g
                      WHERE g.memory_id = m.id AND g.commit_sha = m.commit_sha)
               FROM memories m
              WHERE m.project_id = ?1 AND m.deprecated = 0 AND m.stale_at IS NULL
                AND m.commit_sha IS NOT NULL AND m.related_files != '[]'",
            params![ctx.project_id],
            |row| {
                let json = |i: i32, what: &str| -> Result<Vec<String>> {
                    let text: String = row.get(i).ctx(what)?;
                    serde_json::from_str(&text)
                        .map_err(|e| Error::Internal(format!("{what} is not a JSON list: {e}")))
                };
                Ok(Candidate {
                    id: row.get(0).ctx("memory id")?,
                    commit: row.get(1).ctx("commit sha")?,
                    related: json(2, "related files")?,
                    pinned: row.get::<i64>(3).ctx("pinned")? != 0,
                    counted: json(4, "counted changes")?.into_iter().collect(),
                })
            },
        )
        .await?;
    Ok(rows)
}

/// `HEAD` and, per commit, the project's files changed since it (`None`: unknown commit);
/// `None` when the project is in no repository with a commit.
type Changes = HashMap<String, Option<std::sync::Arc<HashSet<String>>>>;

fn changes_since(root: &Path, commits: &[String]) -> Result<Option<(String, Changes)>> {
    let Some(mut history) = History::open(root)? else {
        return Ok(None);
    };
    let changed = history.changed_since_each(commits);
    Ok(Some((history.head(), changed)))
}

/// Writes `changes` in one transaction; returns (memories lowered, memories flagged). The
/// files are recorded first and only those this transaction recorded count (another process's
/// pass may have counted some since they were read), against the count already there.
async fn write(ctx: &Ctx<'_>, head: &str, changes: &[Change]) -> Result<(u64, u64)> {
    if changes.is_empty() {
        return Ok((0, 0));
    }
    let now = ctx.clock.now_ms();
    let conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let (mut lowered, mut flagged) = (0, 0);
    for change in changes {
        // The memory may have changed since it was read: only the commit it was counted for.
        let mut rows = tx
            .query(
                "SELECT (SELECT count(*) FROM memory_git_changes g
                          WHERE g.memory_id = m.id AND g.commit_sha = m.commit_sha)
                   FROM memories m
                  WHERE m.id = ?1 AND m.project_id = ?2 AND m.commit_sha = ?3
                    AND m.deprecated = 0",
                params![change.id.as_str(), ctx.project_id, change.commit.as_str()],
            )
            .await
            .ctx("reading a memory's counted git changes")?;
        let Some(row) = rows
            .next()
            .await
            .ctx("reading a memory's counted git changes")?
        else {
            continue;
        };
        let before: i64 = row.get(0).ctx("counted git changes")?;
        drop(rows);
        let mut recorded = 0u64;
        for path in &change.newly {
            recorded += tx
                .execute(
                    "INSERT OR IGNORE INTO memory_git_changes
                       (memory_id, commit_sha, path, project_id, head, found_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        change.id.as_str(),
                        change.commit.as_str(),
                        path.as_str(),
                        ctx.project_id,
                        head,
                        now
                    ],
                )
                .await
                .ctx("recording a file changed in git")?;
        }
        if recorded == 0 || change.pinned {
            continue;
        }
        let related = change.related as f64;
        let keep = 1.0 - MAX_LOSS * recorded as f64 / related;
        let share_before = before as f64 / related;
        let share_now = (before as u64 + recorded) as f64 / related;
        let review = share_now >= REVIEW_SHARE && share_before < REVIEW_SHARE;
        tx.execute(
            "UPDATE memories SET confidence = confidence * ?3,
                    needs_review = CASE WHEN ?4 THEN 1 ELSE needs_review END
              WHERE id = ?1 AND project_id = ?5 AND commit_sha = ?2",
            params![
                change.id.as_str(),
                change.commit.as_str(),
                keep,
                review,
                ctx.project_id
            ],
        )
        .await
        .ctx("lowering the confidence of a memory whose files changed in git")?;
        lowered += 1;
        flagged += u64::from(review);
    }
    tx.commit().await.ctx("committing the git staleness pass")?;
    Ok((lowered, flagged))
}
