//! Graph syncs still owed by index runs (table `code_index_pending`).
//!
//! A run commits analysed files in batches and resolves references and syncs the graph's
//! structural layer once, at the end. A `kill -9` in between used to leave the files indexed
//! (so the next run found them unchanged and skipped them) but their references unresolved and
//! the graph without them, for good. Now each batch's transaction also records its run here,
//! and the graph sync's transaction removes the run: a row that is still there when a run
//! starts was left by a run that died, and that run resolves every reference and syncs the
//! whole graph (derived data heals itself on the next run).
//!
//! One row per run, not one flag: a run that heals removes only the rows it saw at its start,
//! so the row of a run still going on in another process comes back with that run's next batch.

use std::sync::atomic::{AtomicU64, Ordering};

use libsql::{params, Connection};
use serde_json::json;

use crate::error::{DbContext, Result};

/// A run id unique among the processes that share a file: the process id, the time and a
/// counter.
pub(crate) fn new_run_id(now_ms: i64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{now_ms}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Records, in the transaction writing a batch, that `run` owes a graph sync.
pub(crate) async fn mark(tx: &Connection, project_id: &str, run: &str, now_ms: i64) -> Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO code_index_pending(project_id, run_id, since) VALUES (?1, ?2, ?3)",
        params![project_id, run, now_ms],
    )
    .await
    .ctx("marking a pending graph sync")?;
    Ok(())
}

/// The runs that owe a graph sync (read at a run's start: runs that died).
pub(crate) async fn left_behind(conn: &Connection, project_id: &str) -> Result<Vec<String>> {
    let mut rows = conn
        .query(
            "SELECT run_id FROM code_index_pending WHERE project_id = ?1",
            params![project_id],
        )
        .await
        .ctx("reading pending graph syncs")?;
    let mut runs = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading pending graph syncs")? {
        runs.push(row.get::<String>(0).ctx("reading pending graph syncs")?);
    }
    Ok(runs)
}

/// Removes `runs`, in the transaction of the graph sync that covers them.
pub(crate) async fn clear(tx: &Connection, project_id: &str, runs: &[String]) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    tx.execute(
        "DELETE FROM code_index_pending
         WHERE project_id = ?1 AND run_id IN (SELECT value FROM json_each(?2))",
        params![project_id, json!(runs).to_string()],
    )
    .await
    .ctx("clearing pending graph syncs")?;
    Ok(())
}
