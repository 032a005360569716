//! Data for the app's memory panel (seed 003 section 13): health counts with a 0-100 score,
//! and module coverage.
//!
//! **Health score.** With `active` the project's active memories (none: the score is 0,
//! there is nothing to be healthy about):
//!
//! ```text
//! score = round(100 × (0.30 × reviewed + 0.25 × fresh + 0.25 × used + 0.20 × agreed))
//!   reviewed = 1 − needsReview / active   people have looked at what memory holds
//!   fresh    = 1 − stale / active         the code under it has not changed since
//!   used     = activeLast30Days / active  it is earning its keep
//!   agreed   = 1 − contested / active     not disputed, not superseded by a newer memory
//! ```
//!
//! Review weighs most because an unconfirmed memory is the one most likely to mislead an
//! agent; agreement least because disputes and supersessions are already visible as such.
//!
//! **Module coverage.** A module is a directory of indexed code two levels deep at most
//! (`src/auth/` for `src/auth/jwt/verify.ts`, `src/` for `src/main.rs`, `./` for files at the
//! root); a file is covered when an active memory is attached to it.

use std::collections::{BTreeMap, HashSet};

use libsql::params;
use serde::Serialize;

use super::counts::count_row;
use super::decay::DAY_MS;
use crate::error::{DbContext, Result};
use crate::memory::Ctx;

/// Days of "active" in the health counts.
pub const ACTIVE_DAYS: i64 = 30;

/// The four parts of the health score, each 0..=1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthParts {
    /// 1 − needsReview / active.
    pub reviewed: f64,
    /// 1 − stale / active.
    pub fresh: f64,
    /// activeLast30Days / active.
    pub used: f64,
    /// 1 − (disputed or superseded) / active.
    pub agreed: f64,
}

/// Health counts of a project's memories.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Every memory, forgotten ones included.
    pub total: u64,
    /// Memories not forgotten.
    pub active: u64,
    /// Active memories used in the last 30 days.
    pub active_last_30_days: u64,
    /// Active memories waiting for review.
    pub needs_review: u64,
    /// Active memories whose code changed since they were written.
    pub stale: u64,
    /// Active memories with related files changed in git since their `commitSha` (unless
    /// pinned, their confidence was lowered by the share changed: `git_drift`).
    pub changed_in_git: u64,
    /// Active memories under dispute.
    pub disputed: u64,
    /// Active memories a newer one supersedes.
    pub superseded: u64,
    /// Memories forgotten (kept until `prune` deletes them).
    pub forgotten: u64,
    /// Open memory gaps (recalls that found nothing).
    pub open_gaps: u64,
    /// Estimated tokens saved in the session asked about (0 without one).
    pub tokens_saved_this_session: u64,
    /// 0-100, see the module doc.
    pub score: u32,
    /// The parts of the score.
    pub parts: HealthParts,
}

/// The score and its parts from the counts (see the module doc).
pub fn score(
    active: u64,
    needs_review: u64,
    stale: u64,
    used: u64,
    contested: u64,
) -> (u32, HealthParts) {
    if active == 0 {
        let zero = HealthParts {
            reviewed: 0.0,
            fresh: 0.0,
            used: 0.0,
            agreed: 0.0,
        };
        return (0, zero);
    }
    let share = |n: u64| (n.min(active) as f64) / active as f64;
    let parts = HealthParts {
        reviewed: 1.0 - share(needs_review),
        fresh: 1.0 - share(stale),
        used: share(used),
        agreed: 1.0 - share(contested),
    };
    let weighted =
        0.30 * parts.reviewed + 0.25 * parts.fresh + 0.25 * parts.used + 0.20 * parts.agreed;
    ((weighted * 100.0).round() as u32, parts)
}

/// Health of the handle's project; `session_id` adds that session's tokens-saved estimate.
pub(crate) async fn health(ctx: &Ctx<'_>, session_id: Option<&str>) -> Result<Health> {
    let session_id = ctx.validator().opt_id("sessionId", session_id)?;
    let since = ctx.clock.now_ms() - (ACTIVE_DAYS as f64 * DAY_MS) as i64;
    let conn = ctx.store.reader().await;
    let [total, active, used, needs_review, stale, disputed, superseded, contested, open_gaps, changed_in_git] =
        count_row(
            &conn,
            "SELECT count(*),
               coalesce(sum(deprecated = 0), 0),
               coalesce(sum(deprecated = 0 AND last_accessed_at >= ?2 AND access_count > 0), 0),
               coalesce(sum(deprecated = 0 AND needs_review = 1), 0),
               coalesce(sum(deprecated = 0 AND stale_at IS NOT NULL), 0),
               coalesce(sum(deprecated = 0 AND disputed_at IS NOT NULL), 0),
               coalesce(sum(deprecated = 0 AND superseded_by IS NOT NULL), 0),
               coalesce(sum(deprecated = 0 AND (disputed_at IS NOT NULL OR superseded_by IS NOT NULL)), 0),
               (SELECT count(*) FROM memory_gaps g WHERE g.project_id = ?1 AND g.resolved_at IS NULL),
               coalesce(sum(deprecated = 0 AND commit_sha IS NOT NULL AND EXISTS (
                 SELECT 1 FROM memory_git_changes c
                  WHERE c.memory_id = memories.id AND c.commit_sha = memories.commit_sha)), 0)
             FROM memories WHERE project_id = ?1",
            params![ctx.project_id, since],
            "counting memory health",
        )
        .await?;
    let tokens = match session_id {
        Some(s) => super::session::tokens_saved(&conn, ctx.project_id, &s).await?,
        None => 0,
    };
    let (score, parts) = score(active, needs_review, stale, used, contested);
    Ok(Health {
        total,
        active,
        active_last_30_days: used,
        needs_review,
        stale,
        changed_in_git,
        disputed,
        superseded,
        forgotten: total - active,
        open_gaps,
        tokens_saved_this_session: tokens,
        score,
        parts,
    })
}

/// One module's coverage.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleCoverage {
    /// The module directory, ending in `/` (`./` for the root).
    pub module: String,
    /// Indexed files in it.
    pub files: u64,
    /// Of those, files with an active memory attached.
    pub covered_files: u64,
    /// Distinct active memories attached to its files.
    pub memories: u64,
    /// covered_files / files.
    pub coverage: f64,
}

/// The module a project-relative path belongs to (see the module doc).
pub fn module_of(path: &str) -> String {
    let dirs: Vec<&str> = path.split('/').collect();
    let depth = dirs.len().saturating_sub(1).min(2);
    if depth == 0 {
        "./".to_owned()
    } else {
        format!("{}/", dirs[..depth].join("/"))
    }
}

/// Coverage of every module with indexed code, least covered first (then by name).
pub(crate) async fn module_coverage(ctx: &Ctx<'_>) -> Result<Vec<ModuleCoverage>> {
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            "SELECT f.path, l.memory_seq FROM code_files f
             LEFT JOIN memory_links l ON l.project_id = f.project_id AND l.node_key = f.path
               AND l.role = 'file'
               AND EXISTS (SELECT 1 FROM memories m WHERE m.seq = l.memory_seq AND m.deprecated = 0)
             WHERE f.project_id = ?1 AND f.language IS NOT NULL",
            params![ctx.project_id],
        )
        .await
        .ctx("reading module coverage")?;
    #[derive(Default)]
    struct Tally {
        files: HashSet<String>,
        covered: HashSet<String>,
        memories: HashSet<i64>,
    }
    let mut modules: BTreeMap<String, Tally> = BTreeMap::new();
    while let Some(row) = rows.next().await.ctx("reading module coverage")? {
        let path: String = row.get(0).ctx("file path")?;
        let seq: Option<i64> = row.get(1).ctx("memory link")?;
        let tally = modules.entry(module_of(&path)).or_default();
        if let Some(seq) = seq {
            tally.covered.insert(path.clone());
            tally.memories.insert(seq);
        }
        tally.files.insert(path);
    }
    let mut out: Vec<ModuleCoverage> = modules
        .into_iter()
        .map(|(module, t)| ModuleCoverage {
            module,
            files: t.files.len() as u64,
            covered_files: t.covered.len() as u64,
            memories: t.memories.len() as u64,
            coverage: t.covered.len() as f64 / t.files.len().max(1) as f64,
        })
        .collect();
    out.sort_by(|a, b| {
        a.coverage
            .total_cmp(&b.coverage)
            .then_with(|| a.module.cmp(&b.module))
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_directories_two_levels_deep_at_most() {
        assert_eq!(module_of("README.md"), "./");
        assert_eq!(module_of("src/main.rs"), "src/");
        assert_eq!(module_of("src/auth/login.ts"), "src/auth/");
        assert_eq!(module_of("src/auth/jwt/verify.ts"), "src/auth/");
    }

    #[test]
    fn score_follows_the_documented_formula() {
        assert_eq!(score(0, 0, 0, 0, 0).0, 0);
        assert_eq!(score(10, 0, 0, 10, 0).0, 100);
        // reviewed 0.8, fresh 1.0, used 0.4, agreed 0.9:
        // 100 × (0.24 + 0.25 + 0.10 + 0.18) = 77
        let (s, p) = score(10, 2, 0, 4, 1);
        assert_eq!((p.reviewed, p.used, p.agreed), (0.8, 0.4, 0.9));
        assert_eq!(s, 77);
        assert_eq!(score(10, 10, 10, 0, 10).0, 0);
    }
}
