//! Pulling: the server's change log, as the replica holds it after a sync, applied to the
//! device's working file.
//!
//! The replica is read locally (no network); the working file is written in one transaction
//! per batch, with the pull mark advanced in the same transaction, so a crash mid-pull
//! re-reads the batch. Keys with local changes still in the outbox are skipped: the local
//! state wins until it is pushed, and the push's own entry in the server log brings the
//! merged row back. Rows equal to the local ones are not rewritten. Pulled graph rows are
//! replayed into the device's own graph in the same transaction.

use std::collections::{BTreeMap, HashSet};

use libsql::{params, Connection};

use super::tables::{self, Applied, Columns, RowSet, SyncedTable, Target, TABLES};
use super::AppSide;
use crate::error::{DbContext, Result};
use crate::store::{begin_write, Store};

/// Server log entries read per batch.
pub(crate) const BATCH_ENTRIES: i64 = 1000;

/// What one pull did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pulled {
    /// Server log entries read.
    pub changes: u64,
    /// Rows written or deleted in the working file.
    pub rows: u64,
    /// Keys skipped because the device has unpushed changes to them.
    pub skipped_pending: u64,
}

/// What applying pulled rows needs from the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Apply {
    /// The engine clock's now.
    pub now: i64,
    /// The engine's closure depth (graph rows are replayed into the graph).
    pub closure_depth: u32,
}

/// The server log seq this device has applied up to (`sync_state.pulled_seq`).
async fn pulled_seq(conn: &Connection) -> Result<i64> {
    tables::query_i64(
        conn,
        "SELECT CAST(value AS INTEGER) FROM sync_state WHERE name = 'pulled_seq'",
    )
    .await
}

/// Applies the replica's change log past the device's mark to `store`, up to `max_batches`
/// batches.
pub(crate) async fn pull(
    app: &AppSide,
    replica: &Connection,
    columns: &Columns,
    Apply { now, closure_depth }: Apply,
    max_batches: u32,
) -> Result<Pulled> {
    let store = app.store();
    let mut pulled = Pulled::default();
    let mut cursor = pulled_seq(&*store.reader().await).await?;
    for _ in 0..max_batches {
        let mut entries = replica
            .query(
                "SELECT seq, tbl, key FROM sync_changes WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                params![cursor, BATCH_ENTRIES],
            )
            .await
            .ctx("reading the server's change log")?;
        let mut next = cursor;
        let mut keys: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        let mut count = 0u64;
        while let Some(row) = entries
            .next()
            .await
            .ctx("reading the server's change log")?
        {
            next = row.get(0).ctx("reading the server's change log")?;
            count += 1;
            let tbl: String = row.get(1).ctx("reading the server's change log")?;
            let key: String = row.get(2).ctx("reading the server's change log")?;
            if let Some(t) = tables::table(&tbl) {
                let list = keys.entry(t.name).or_default();
                if !list.contains(&key) {
                    list.push(key);
                }
            }
        }
        drop(entries);
        if count == 0 {
            break;
        }

        // What to apply, table by table: what differs from what is here.
        let mut work = Vec::new();
        {
            let reader = store.reader().await;
            for t in TABLES {
                let Some(wanted) = keys.remove(t.name) else {
                    continue;
                };
                let mut theirs = tables::read_rows(replica, columns, t, &wanted).await?;
                let ours = tables::read_rows(&reader, columns, t, &wanted).await?;
                let mut changed = Vec::with_capacity(wanted.len());
                for key in wanted {
                    match (theirs.get(&key), ours.get(&key)) {
                        (Some(a), Some(b)) if a == b => {
                            theirs.remove(&key);
                        }
                        // Gone on the server and not here either (or here but not
                        // shareable, which `apply` keeps): nothing to do.
                        (None, None) => {}
                        _ => changed.push(key),
                    }
                }
                if !changed.is_empty() {
                    work.push((t, changed, theirs));
                }
            }
        }

        // On the app's runtime: see `AppSide`.
        let columns = columns.clone();
        let (rows, skipped_pending) = app
            .write(move |engine| async move {
                apply_batch(
                    &engine.store,
                    &columns,
                    work,
                    next,
                    Apply { now, closure_depth },
                )
                .await
            })
            .await?;
        pulled.rows += rows;
        pulled.skipped_pending += skipped_pending;
        pulled.changes += count;
        cursor = next;
    }
    Ok(pulled)
}

/// One batch of pulled rows applied to the working file in one transaction, with the pull
/// mark `next`: rows written or deleted, and keys skipped because they have local changes
/// still to push.
async fn apply_batch(
    store: &Store,
    columns: &Columns,
    work: Vec<(&'static SyncedTable, Vec<String>, RowSet)>,
    next: i64,
    Apply { now, closure_depth }: Apply,
) -> Result<(u64, u64)> {
    let (mut written, mut skipped_pending) = (0, 0);
    let writer = store.writer().await;
    let tx = begin_write(&writer).await?;
    let before = max_outbox_seq(&tx).await?;
    let mut touched = Vec::new();
    for (t, mut changed, mut rows) in work {
        // Keys with local changes not yet pushed keep the local state. Checked under the
        // writer: a local write that landed since the rows were read is pending now.
        let pending = pending_keys(&tx, t.name, &changed).await?;
        if !pending.is_empty() {
            skipped_pending += pending.len() as u64;
            changed.retain(|k| !pending.contains(k));
            rows.retain(|k, _| !pending.contains(k));
            if changed.is_empty() {
                continue;
            }
        }
        let Applied {
            upserted, deleted, ..
        } = tables::apply(&tx, columns, t, &changed, rows, Target::Device, now).await?;
        written += upserted + deleted;
        if tables::is_knowledge(t.name) {
            crate::graph::knowledge::replay(&tx, t.name, &changed, closure_depth, now).await?;
        }
        touched.extend(changed.into_iter().map(|k| (t.name, k)));
    }
    // The capture triggers saw these writes; they came from the server, so they must not
    // go back to it. (A local duplicate archived by `apply` keeps its entry: the server
    // must learn of that.)
    if !touched.is_empty() {
        let list = serde_json::to_string(&touched).expect("strings serialise");
        tx.execute(
            "DELETE FROM sync_changes WHERE seq > ?1 AND (tbl, key) IN (
               SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
               FROM json_each(?2))",
            params![before, list],
        )
        .await
        .ctx("dropping pulled changes from the outbox")?;
    }
    tx.execute(
        "INSERT INTO sync_state(name, value) VALUES ('pulled_seq', ?1)
         ON CONFLICT(name) DO UPDATE SET value = excluded.value",
        params![next.to_string()],
    )
    .await
    .ctx("recording the pull mark")?;
    tx.commit().await.ctx("committing a pull")?;
    Ok((written, skipped_pending))
}

async fn pending_keys(conn: &Connection, tbl: &str, keys: &[String]) -> Result<HashSet<String>> {
    let list = format!("[{}]", keys.join(","));
    let mut rows = conn
        .query(
            "SELECT DISTINCT key FROM sync_changes
             WHERE tbl = ?1 AND key IN (SELECT value FROM json_each(?2))",
            params![tbl, list],
        )
        .await
        .ctx("reading pending changes")?;
    let mut out = HashSet::new();
    while let Some(row) = rows.next().await.ctx("reading pending changes")? {
        out.insert(row.get::<String>(0).ctx("reading pending changes")?);
    }
    Ok(out)
}

async fn max_outbox_seq(conn: &Connection) -> Result<i64> {
    tables::query_i64(conn, "SELECT coalesce(max(seq), 0) FROM sync_changes").await
}
