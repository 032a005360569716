//! Review flags the code index raises (the spec's staleness layer 4): a memory about a file
//! that was edited more than 30 days after the memory was last written may describe code that
//! has moved on since, so it goes back to the review queue (`needs_review`), while it stays
//! usable; the symbol-level staleness of the graph (`graph::code_layer`) is the stronger mark.
//!
//! Only edits count: the indexer passes the files whose content changed since they were last
//! indexed, with their modification time. A file's mtime alone says little (a checkout or a
//! copy sets it to now), and a first index of a cloned repository flags nothing.

use libsql::Connection;

use crate::error::{DbContext, Result};

/// How much newer than a memory an edit of its file must be to flag it for review.
pub const REVIEW_AFTER_EDIT_MS: i64 = 30 * 86_400_000;

/// Flags for review the active memories of `project_id` attached to one of `edits` (project
/// path, modification time in ms) whose last write is more than [`REVIEW_AFTER_EDIT_MS`] older
/// than that edit, in the caller's transaction; returns how many it flagged.
pub(crate) async fn flag_after_late_edits(
    tx: &Connection,
    project_id: &str,
    edits: &[(&str, i64)],
) -> Result<u64> {
    if edits.is_empty() {
        return Ok(0);
    }
    let json = serde_json::to_string(edits).unwrap_or_default();
    // Not correlated with the outer row (that made SQLite scan every memory and rerun the
    // join for each: 12 s at 500 memories and 50 edits): the set is built once from the
    // edits, through the link index.
    tx.execute(
        "UPDATE memories SET needs_review = 1 WHERE seq IN (
           SELECT m.seq FROM json_each(?2) e
             CROSS JOIN memory_links l ON l.project_id = ?1 AND l.role = 'file'
                                      AND l.node_key = e.value ->> 0
             JOIN memories m ON m.seq = l.memory_seq
           WHERE m.deprecated = 0 AND m.needs_review = 0 AND m.stale_at IS NULL
             AND m.updated_at + ?3 < e.value ->> 1)",
        libsql::params![project_id, json, REVIEW_AFTER_EDIT_MS],
    )
    .await
    .ctx("flagging memories on late-edited files for review")
}
