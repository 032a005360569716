//! Pushing the outbox: the device's captured changes, oldest first, applied to the server in
//! batches, each in one server transaction.
//!
//! Exactly once, in order: a batch is the outbox entries up to a seq, and the server records
//! that seq for the device (`sync_devices`) in the batch's own transaction. A batch whose
//! commit was acknowledged is pruned from the outbox; one whose acknowledgement was lost is
//! sent again and recognised by the mark (rows would be harmless to re-apply, counter
//! increments would not). Nothing here holds the device's writer while the network is used.

use std::collections::BTreeMap;

use libsql::{params, Connection};
use serde_json::Value;

use super::tables::{self, Columns, Merge, RowSet, Target, TABLES};
use crate::error::{DbContext, Result};
use crate::store::{begin_write, Store};

/// Outbox entries per batch (a batch is one server transaction: a few statements per table,
/// whatever its size, since rows travel as one JSON parameter).
pub(crate) const BATCH_ENTRIES: i64 = 500;

/// What one push did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pushed {
    /// Outbox entries sent (and pruned).
    pub changes: u64,
    /// Rows written or deleted on the server.
    pub rows: u64,
    /// Arriving memories the server archived as duplicates of one it had.
    pub duplicates: u64,
}

/// One batch read from the outbox: per table, the distinct keys and (counter tables) the
/// summed increments per key.
#[derive(Debug, Default)]
struct Batch {
    max_seq: i64,
    entries: u64,
    keys: BTreeMap<&'static str, Vec<String>>,
    deltas: BTreeMap<(&'static str, String), Vec<f64>>,
}

async fn read_batch(conn: &Connection) -> Result<Batch> {
    let mut rows = conn
        .query(
            "SELECT seq, tbl, key, delta FROM sync_changes ORDER BY seq LIMIT ?1",
            params![BATCH_ENTRIES],
        )
        .await
        .ctx("reading the sync outbox")?;
    let mut batch = Batch::default();
    while let Some(row) = rows.next().await.ctx("reading the sync outbox")? {
        let seq: i64 = row.get(0).ctx("reading the sync outbox")?;
        let tbl: String = row.get(1).ctx("reading the sync outbox")?;
        let key: String = row.get(2).ctx("reading the sync outbox")?;
        let delta: Option<String> = row.get(3).ctx("reading the sync outbox")?;
        batch.max_seq = seq;
        batch.entries += 1;
        // An entry of a table this build does not sync (written by a newer one) is skipped.
        let Some(t) = tables::table(&tbl) else {
            continue;
        };
        let keys = batch.keys.entry(t.name).or_default();
        if !keys.contains(&key) {
            keys.push(key.clone());
        }
        if let Some(delta) = delta {
            let parts: Vec<f64> = serde_json::from_str::<Vec<Value>>(&delta)
                .unwrap_or_default()
                .iter()
                .map(|v| v.as_f64().unwrap_or(0.0))
                .collect();
            let sum = batch.deltas.entry((t.name, key)).or_default();
            sum.resize(sum.len().max(parts.len()), 0.0);
            for (s, p) in sum.iter_mut().zip(parts) {
                *s += p;
            }
        }
    }
    Ok(batch)
}

/// The rows a batch carries, per table in [`TABLES`] order. Counter columns are replaced by
/// the batch's increments.
async fn payload(
    conn: &Connection,
    columns: &Columns,
    batch: &Batch,
) -> Result<Vec<(&'static tables::SyncedTable, Vec<String>, RowSet)>> {
    let mut out = Vec::new();
    for t in TABLES {
        let Some(keys) = batch.keys.get(t.name) else {
            continue;
        };
        let mut rows = tables::read_rows(conn, columns, t, keys).await?;
        if t.merge == Merge::Count {
            for (key, row) in rows.iter_mut() {
                let sums = batch.deltas.get(&(t.name, key.clone()));
                for (i, c) in t.counters.iter().enumerate() {
                    let v = sums.and_then(|s| s.get(i)).copied().unwrap_or(0.0);
                    // A column keeps its JSON number kind: an INTEGER column's sum is whole.
                    let json = if row.get(*c).is_some_and(Value::is_f64) {
                        Value::from(v)
                    } else {
                        Value::from(v.round() as i64)
                    };
                    row.insert((*c).to_string(), json);
                }
            }
        }
        out.push((t, keys.clone(), rows));
    }
    Ok(out)
}

/// Pushes up to `max_batches` batches of the outbox of `store` to `server` (a connection whose
/// writes reach the primary: an embedded replica's, or the replica file itself in
/// offline-writes mode).
pub(crate) async fn push(
    store: &Store,
    server: &Connection,
    columns: &Columns,
    device_id: &str,
    now: i64,
    max_batches: u32,
) -> Result<Pushed> {
    let mut pushed = Pushed::default();
    for _ in 0..max_batches {
        let (batch, payload) = {
            let reader = store.reader().await;
            let batch = read_batch(&reader).await?;
            if batch.entries == 0 {
                break;
            }
            let payload = payload(&reader, columns, &batch).await?;
            (batch, payload)
        };

        let tx = begin_write(server).await?;
        let mut marks = tx
            .query(
                "SELECT pushed_seq FROM sync_devices WHERE device_id = ?1",
                params![device_id],
            )
            .await
            .ctx("reading the server's push mark")?;
        let mark: i64 = match marks.next().await.ctx("reading the server's push mark")? {
            Some(row) => row.get(0).ctx("reading the server's push mark")?,
            None => 0,
        };
        drop(marks);
        if mark < batch.max_seq {
            for (t, keys, rows) in payload {
                let applied =
                    tables::apply(&tx, columns, t, &keys, rows, Target::Server, now).await?;
                pushed.rows += applied.upserted + applied.deleted;
                pushed.duplicates += applied.duplicates;
            }
            tx.execute(
                "INSERT INTO sync_devices(device_id, pushed_seq, pushed_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(device_id) DO UPDATE
                 SET pushed_seq = excluded.pushed_seq, pushed_at = excluded.pushed_at",
                params![device_id, batch.max_seq, now],
            )
            .await
            .ctx("recording the push mark")?;
        }
        tx.commit().await.ctx("committing a push")?;

        let writer = store.writer().await;
        writer
            .execute(
                "DELETE FROM sync_changes WHERE seq <= ?1",
                params![batch.max_seq],
            )
            .await
            .ctx("pruning the sync outbox")?;
        pushed.changes += batch.entries;
    }
    Ok(pushed)
}
