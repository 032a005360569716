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
use super::AppSide;
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

/// One batch read from the outbox: per table, the distinct keys, and the counter tables'
/// increments with the seq of their entry.
#[derive(Debug, Default)]
struct Batch {
    max_seq: i64,
    entries: u64,
    keys: BTreeMap<&'static str, Vec<String>>,
    deltas: Vec<(i64, &'static str, String, Vec<f64>)>,
}

impl Batch {
    /// The increments per key of the entries past `mark`: a batch retried after a lost
    /// acknowledgement may have grown, and the server already counted up to its mark.
    fn sums_after(&self, mark: i64) -> BTreeMap<(&'static str, &str), Vec<f64>> {
        let mut sums: BTreeMap<(&'static str, &str), Vec<f64>> = BTreeMap::new();
        for (seq, table, key, parts) in &self.deltas {
            if *seq <= mark {
                continue;
            }
            let sum = sums.entry((table, key.as_str())).or_default();
            sum.resize(sum.len().max(parts.len()), 0.0);
            for (s, p) in sum.iter_mut().zip(parts) {
                *s += p;
            }
        }
        sums
    }
}

/// The outbox's newest entry (0 when empty): a push goes no further.
async fn newest_entry(store: &Store) -> Result<i64> {
    store
        .reader()
        .await
        .query_integer("SELECT max(seq) FROM sync_changes", ())
        .await
}

async fn read_batch(conn: &Connection, upto: i64) -> Result<Batch> {
    let mut rows = conn
        .query(
            "SELECT seq, tbl, key, delta FROM sync_changes WHERE seq <= ?1 ORDER BY seq LIMIT ?2",
            params![upto, BATCH_ENTRIES],
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
            batch.deltas.push((seq, t.name, key, parts));
        }
    }
    Ok(batch)
}

type Payload = Vec<(&'static tables::SyncedTable, Vec<String>, RowSet)>;

/// The rows a batch carries, per table in [`TABLES`] order.
async fn payload(conn: &Connection, columns: &Columns, batch: &Batch) -> Result<Payload> {
    let mut out = Vec::new();
    for t in TABLES {
        let Some(keys) = batch.keys.get(t.name) else {
            continue;
        };
        let rows = tables::read_rows(conn, columns, t, keys).await?;
        out.push((t, keys.clone(), rows));
    }
    Ok(out)
}

/// Replaces the counter columns of counter tables' rows by the increments past `mark`.
fn set_increments(payload: &mut Payload, batch: &Batch, mark: i64) {
    let sums = batch.sums_after(mark);
    for (t, _, rows) in payload.iter_mut() {
        if t.merge != Merge::Count {
            continue;
        }
        for (key, row) in rows.iter_mut() {
            let sums = sums.get(&(t.name, key.as_str()));
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
}

/// Applies one batch in the server transaction `tx`, unless the device's mark says the
/// server has it already. Returns the rows written and the duplicates archived.
async fn apply_batch(
    tx: &Connection,
    columns: &Columns,
    device_id: &str,
    batch: &Batch,
    mut payload: Payload,
    now: i64,
) -> Result<(u64, u64)> {
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
    if mark >= batch.max_seq {
        return Ok((0, 0));
    }
    set_increments(&mut payload, batch, mark);
    let (mut rows, mut duplicates) = (0, 0);
    for (t, keys, set) in payload {
        let applied = tables::apply(tx, columns, t, &keys, set, Target::Server, now).await?;
        rows += applied.upserted + applied.deleted;
        duplicates += applied.duplicates;
    }
    tx.execute(
        "INSERT INTO sync_devices(device_id, pushed_seq, pushed_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(device_id) DO UPDATE
         SET pushed_seq = excluded.pushed_seq, pushed_at = excluded.pushed_at",
        params![device_id, batch.max_seq, now],
    )
    .await
    .ctx("recording the push mark")?;
    Ok((rows, duplicates))
}

/// Pushes up to `max_batches` batches of the outbox of `store` to `server` (a connection whose
/// writes reach the primary: an embedded replica's, or the replica file itself in
/// offline-writes mode).
///
/// Only what the outbox held when the push began: writes made meanwhile wait for the next
/// run. Chasing them kept a run going for as long as the app wrote (a batch of a few entries
/// per ~30 ms of round trips on loopback), where the loop's next run carries them in one batch.
pub(crate) async fn push(
    app: &AppSide,
    server: &Connection,
    columns: &Columns,
    device_id: &str,
    now: i64,
    max_batches: u32,
) -> Result<Pushed> {
    let store = app.store();
    let mut pushed = Pushed::default();
    let upto = newest_entry(store).await?;
    for _ in 0..max_batches {
        let (batch, payload) = {
            let reader = store.reader().await;
            let batch = read_batch(&reader, upto).await?;
            if batch.entries == 0 {
                break;
            }
            let payload = payload(&reader, columns, &batch).await?;
            (batch, payload)
        };

        let tx = begin_write(server).await?;
        match apply_batch(&tx, columns, device_id, &batch, payload, now).await {
            Ok((rows, duplicates)) => {
                pushed.rows += rows;
                pushed.duplicates += duplicates;
                tx.commit().await.ctx("committing a push")?;
            }
            Err(e) => {
                // A server transaction is not rolled back by dropping it: end it now so that
                // other devices' pushes do not wait for the server to expire it.
                let _ = tx.rollback().await;
                return Err(e);
            }
        }

        // On the app's runtime: see `AppSide`.
        let max_seq = batch.max_seq;
        app.write(move |engine| async move {
            engine
                .store
                .writer()
                .await
                .execute("DELETE FROM sync_changes WHERE seq <= ?1", params![max_seq])
                .await
                .ctx("pruning the sync outbox")?;
            Ok(())
        })
        .await?;
        pushed.changes += batch.entries;
    }
    Ok(pushed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increments_count_only_entries_past_the_servers_mark() {
        let key = "[\"p\",\"co_access\",\"a|b\"]".to_string();
        let batch = Batch {
            max_seq: 5,
            entries: 5,
            keys: BTreeMap::new(),
            deltas: (1..=5)
                .map(|seq| (seq, "observer_signal_counts", key.clone(), vec![1.0, 2.0]))
                .collect(),
        };
        let all = batch.sums_after(0);
        assert_eq!(
            all[&("observer_signal_counts", key.as_str())],
            vec![5.0, 10.0]
        );
        // The server counted entries 1..=3 before the acknowledgement was lost.
        let rest = batch.sums_after(3);
        assert_eq!(
            rest[&("observer_signal_counts", key.as_str())],
            vec![2.0, 4.0]
        );
        assert!(batch.sums_after(5).is_empty());
    }
}
