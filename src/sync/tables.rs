//! The tables that sync, declared once, and how their rows move between the two ends: the
//! capture triggers that record changed keys, reading rows as JSON, and applying them.
//!
//! Why rows and not operations: a row's current state is idempotent to apply (a push whose
//! acknowledgement was lost can be sent again), and every write path, today's and future
//! ones, is captured by the triggers without knowing about sync. Counter columns are the
//! exception: two devices counting the same key must both be counted, so their changes travel
//! as increments (made exactly-once by the server's per-device push mark, see `push.rs`).
//!
//! SQL here is built from the identifiers of [`TABLES`] and column names read from the schema
//! (never from user input); every value is a bound parameter.

use std::collections::{BTreeMap, HashMap};

use libsql::{params, Connection};
use serde_json::{Map, Value};

use crate::error::{DbContext, Result};

/// How a synced table's rows are merged on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    /// The pushed row replaces the server's (last writer wins per row).
    Replace,
    /// `counters` are added to the server's values; other columns replace.
    Count,
}

/// One table whose rows sync.
#[derive(Debug)]
pub(crate) struct SyncedTable {
    /// Table name.
    pub name: &'static str,
    /// Its key columns (a primary or unique key on both ends).
    pub key: &'static [&'static str],
    /// Condition on a row (written against `{r}`) for it to leave the device; `None`: always.
    pub shareable: Option<&'static str>,
    /// How pushes merge.
    pub merge: Merge,
    /// Columns that travel as increments (with `Merge::Count`).
    pub counters: &'static [&'static str],
    /// Columns local to each file (rowids other tables refer to): never copied.
    pub local_columns: &'static [&'static str],
}

/// Personal memories and anything the privacy filter redacted stay on the device (the seed's
/// section 16).
const MEMORY_SHAREABLE: &str = "{r}.share_scope != 'personal' AND {r}.redactions = 0";
const VERSION_SHAREABLE: &str = "EXISTS (SELECT 1 FROM memories sm WHERE sm.id = {r}.memory_id \
     AND sm.share_scope != 'personal' AND sm.redactions = 0)";

/// What cannot be recomputed on another device: memories with their history, the observer's
/// cross-session record and the graph's authored nodes and edges. Order matters: a memory is
/// applied before its versions, a node before its edges.
/// Everything else (the code index, the structural graph, vectors, vocabularies, links derived
/// by triggers) is rebuilt on each device from what syncs or from its own files.
pub(crate) const TABLES: &[SyncedTable] = &[
    SyncedTable {
        name: "memories",
        key: &["id"],
        shareable: Some(MEMORY_SHAREABLE),
        merge: Merge::Replace,
        counters: &[],
        local_columns: &["seq"],
    },
    SyncedTable {
        name: "memory_versions",
        key: &["memory_id", "version"],
        shareable: Some(VERSION_SHAREABLE),
        merge: Merge::Replace,
        counters: &[],
        local_columns: &[],
    },
    // Feedback, review decisions and dispute threads (src/lifecycle/events.rs): they follow
    // their memory's shareability.
    SyncedTable {
        name: "memory_events",
        key: &["id"],
        shareable: Some(VERSION_SHAREABLE),
        merge: Merge::Replace,
        counters: &[],
        local_columns: &[],
    },
    // The related files the git staleness pass counted against a memory's confidence
    // (src/lifecycle/git_drift.rs): the lowered confidence syncs with the memory, so what was
    // counted must too, or another device would count the same change again.
    SyncedTable {
        name: "memory_git_changes",
        key: &["memory_id", "commit_sha", "path"],
        shareable: Some(VERSION_SHAREABLE),
        merge: Merge::Replace,
        counters: &[],
        local_columns: &[],
    },
    SyncedTable {
        name: "observer_signal_counts",
        key: &["project_id", "signal", "key"],
        shareable: None,
        merge: Merge::Count,
        counters: &[
            "session_count",
            "occurrences",
            "measure_sum",
            "measure_count",
        ],
        local_columns: &[],
    },
    SyncedTable {
        name: "observer_sessions",
        key: &["project_id", "session_id"],
        shareable: None,
        merge: Merge::Replace,
        counters: &[],
        local_columns: &[],
    },
    SyncedTable {
        name: "observer_synthesis_log",
        key: &["project_id", "subject", "trigger_count"],
        shareable: None,
        merge: Merge::Replace,
        counters: &[],
        local_columns: &[],
    },
    // The graph's authored part, by key (src/graph/knowledge.rs): nodes before the edges
    // between them. A pull replays these into the device's own graph.
    SyncedTable {
        name: "knowledge_nodes",
        key: &["project_id", "key"],
        shareable: None,
        merge: Merge::Replace,
        counters: &[],
        local_columns: &[],
    },
    SyncedTable {
        name: "knowledge_edges",
        key: &["project_id", "from_key", "to_key", "kind"],
        shareable: None,
        merge: Merge::Replace,
        counters: &[],
        local_columns: &[],
    },
];

/// Whether rows of `table` are replayed into the device's graph after a pull.
pub(crate) fn is_knowledge(table: &str) -> bool {
    table.starts_with("knowledge_")
}

/// The declaration of `name`.
pub(crate) fn table(name: &str) -> Option<&'static SyncedTable> {
    TABLES.iter().find(|t| t.name == name)
}

impl SyncedTable {
    fn condition(&self, alias: &str) -> Option<String> {
        self.shareable.map(|c| c.replace("{r}", alias))
    }

    /// `WHERE <shareable>` for rows aliased `alias`, or nothing.
    fn where_shareable(&self, alias: &str) -> String {
        self.condition(alias)
            .map(|c| format!("WHERE {c}"))
            .unwrap_or_default()
    }

    fn key_json(&self, alias: &str) -> String {
        let cols: Vec<String> = self.key.iter().map(|k| format!("{alias}.{k}")).collect();
        format!("json_array({})", cols.join(", "))
    }

    /// `json_array(new.c - old.c, ...)` (or the new values for an insert).
    fn delta_json(&self, old: Option<&str>) -> String {
        if self.counters.is_empty() {
            return "NULL".into();
        }
        let parts: Vec<String> = self
            .counters
            .iter()
            .map(|c| match old {
                Some(old) => format!("new.{c} - {old}.{c}"),
                None => format!("new.{c}"),
            })
            .collect();
        format!("json_array({})", parts.join(", "))
    }

    /// The three capture triggers of this table (idempotent DDL).
    pub(crate) fn capture_ddl(&self) -> String {
        let t = self.name;
        let when = |cond: Option<String>| cond.map(|c| format!("WHEN {c}")).unwrap_or_default();
        let on_update = match (self.condition("new"), self.condition("old")) {
            (Some(n), Some(o)) => Some(format!("({n}) OR ({o})")),
            _ => None,
        };
        format!(
            "CREATE TRIGGER IF NOT EXISTS sync_capture_{t}_insert AFTER INSERT ON {t} {wi}
             BEGIN INSERT INTO sync_changes(tbl, key, delta) VALUES ('{t}', {kn}, {di}); END;
             CREATE TRIGGER IF NOT EXISTS sync_capture_{t}_update AFTER UPDATE ON {t} {wu}
             BEGIN INSERT INTO sync_changes(tbl, key, delta) VALUES ('{t}', {kn}, {du}); END;
             CREATE TRIGGER IF NOT EXISTS sync_capture_{t}_delete AFTER DELETE ON {t} {wd}
             BEGIN INSERT INTO sync_changes(tbl, key, delta) VALUES ('{t}', {ko}, NULL); END;",
            wi = when(self.condition("new")),
            wu = when(on_update),
            wd = when(self.condition("old")),
            kn = self.key_json("new"),
            ko = self.key_json("old"),
            di = self.delta_json(None),
            du = self.delta_json(Some("old")),
        )
    }

    /// Outbox entries for every shareable row (the first push of a file that existed before
    /// it synced). Counter rows carry their whole values as the increment.
    pub(crate) fn seed_sql(&self) -> String {
        let delta = if self.counters.is_empty() {
            "NULL".to_string()
        } else {
            let parts: Vec<String> = self.counters.iter().map(|c| format!("r.{c}")).collect();
            format!("json_array({})", parts.join(", "))
        };
        format!(
            "INSERT INTO sync_changes(tbl, key, delta) SELECT '{t}', {k}, {delta} FROM {t} r {w}",
            t = self.name,
            k = self.key_json("r"),
            w = self.where_shareable("r"),
        )
    }

    /// `r.k1 = json_extract(j.value, '$[0]') AND ...`: joins keys given as JSON arrays.
    fn key_join(&self, alias: &str) -> String {
        self.key
            .iter()
            .enumerate()
            .map(|(i, k)| format!("{alias}.{k} = json_extract(j.value, '$[{i}]')"))
            .collect::<Vec<_>>()
            .join(" AND ")
    }
}

/// A memory that becomes shareable (personal made project-wide) takes its whole history and
/// event log along: they were not captured while it was private, and `update` saves the
/// version it ends before the row changes.
/// (Version 2 of the trigger also carries the event log; files synced before it have the first
/// version, which is dropped.)
const SHARED_HISTORY_DDL: &str = "
DROP TRIGGER IF EXISTS sync_capture_memories_shared;
CREATE TRIGGER IF NOT EXISTS sync_capture_memories_shared_v2 AFTER UPDATE ON memories
WHEN (new.share_scope != 'personal' AND new.redactions = 0)
  AND NOT (old.share_scope != 'personal' AND old.redactions = 0)
BEGIN
  INSERT INTO sync_changes(tbl, key, delta)
  SELECT 'memory_versions', json_array(v.memory_id, v.version), NULL
  FROM memory_versions v WHERE v.memory_id = new.id;
  INSERT INTO sync_changes(tbl, key, delta)
  SELECT 'memory_events', json_array(e.id), NULL
  FROM memory_events e WHERE e.memory_id = new.id;
END;";

/// Queues every shareable row of every synced table (a file's first sync, or a new server).
pub(crate) async fn queue_all(conn: &Connection) -> Result<()> {
    for t in TABLES {
        conn.execute(&t.seed_sql(), ())
            .await
            .ctx("queueing every shareable row for the server")?;
    }
    Ok(())
}

/// Creates the capture triggers of every synced table on `conn` (a device's working file or
/// the server, through its replica).
pub(crate) async fn install_capture(conn: &Connection) -> Result<()> {
    let mut ddl: String = TABLES.iter().map(SyncedTable::capture_ddl).collect();
    ddl.push_str(SHARED_HISTORY_DDL);
    conn.execute_batch(&ddl)
        .await
        .ctx("creating sync capture triggers")?;
    Ok(())
}

/// The copied columns of each synced table, read from `conn`'s schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Columns(HashMap<&'static str, Vec<String>>);

impl Columns {
    /// Reads the columns of every synced table.
    pub(crate) async fn read(conn: &Connection) -> Result<Columns> {
        let mut out = HashMap::new();
        for t in TABLES {
            let mut rows = conn
                .query(
                    "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
                    params![t.name],
                )
                .await
                .ctx("reading synced table columns")?;
            let mut cols = Vec::new();
            while let Some(row) = rows.next().await.ctx("reading synced table columns")? {
                let name: String = row.get(0).ctx("reading synced table columns")?;
                if !t.local_columns.contains(&name.as_str()) {
                    cols.push(name);
                }
            }
            out.insert(t.name, cols);
        }
        Ok(Columns(out))
    }

    fn of(&self, t: &SyncedTable) -> &[String] {
        self.0.get(t.name).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// Rows of one table by key, as JSON objects keyed by the JSON text of their key.
pub(crate) type RowSet = BTreeMap<String, Map<String, Value>>;

/// Reads the rows of `t` whose keys are in `keys` (JSON arrays), shareable ones only.
pub(crate) async fn read_rows(
    conn: &Connection,
    columns: &Columns,
    t: &SyncedTable,
    keys: &[String],
) -> Result<RowSet> {
    let mut out = RowSet::new();
    if keys.is_empty() {
        return Ok(out);
    }
    let cols = columns.of(t);
    let object: Vec<String> = cols.iter().map(|c| format!("'{c}', r.{c}")).collect();
    let sql = format!(
        "SELECT {key}, json_object({object}) FROM json_each(?1) j CROSS JOIN {t} r ON {join} {w}",
        key = t.key_json("r"),
        object = object.join(", "),
        t = t.name,
        join = t.key_join("r"),
        w = t.where_shareable("r"),
    );
    let list = format!("[{}]", keys.join(","));
    let mut rows = conn
        .query(&sql, params![list])
        .await
        .ctx("reading synced rows")?;
    while let Some(row) = rows.next().await.ctx("reading synced rows")? {
        let key: String = row.get(0).ctx("reading synced rows")?;
        let json: String = row.get(1).ctx("reading synced rows")?;
        let Value::Object(map) = serde_json::from_str(&json)
            .map_err(|e| crate::error::Error::Internal(format!("synced row JSON: {e}")))?
        else {
            continue;
        };
        out.insert(key, map);
    }
    Ok(out)
}

/// Which end a batch is applied to; they resolve a duplicate memory differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// The server: rows arrive from one device; the server's active memory with the same
    /// content wins (the arriving one is stored archived), and counters add up.
    Server,
    /// A device's working file: the server's rows are the truth; a local active duplicate of
    /// an arriving memory is archived, and its rows that are not shareable are never touched.
    Device,
}

/// What applying one batch did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Applied {
    /// Rows inserted or updated.
    pub upserted: u64,
    /// Rows deleted.
    pub deleted: u64,
    /// Memories archived as duplicates of another active memory with the same content.
    pub duplicates: u64,
}

/// Applies `rows` of `t` inside the caller's transaction on `conn`: keys in `keys` without a
/// row are deleted, the others upserted. With `Merge::Count` on the server, the rows' counter
/// columns hold increments.
pub(crate) async fn apply(
    conn: &Connection,
    columns: &Columns,
    t: &SyncedTable,
    keys: &[String],
    mut rows: RowSet,
    target: Target,
    now: i64,
) -> Result<Applied> {
    let mut applied = Applied::default();
    let gone: Vec<&String> = keys.iter().filter(|k| !rows.contains_key(*k)).collect();
    if !gone.is_empty() {
        applied.deleted = delete_rows(conn, t, &gone, target).await?;
    }
    if rows.is_empty() {
        return Ok(applied);
    }
    let is_memories = t.name == "memories";
    let first_new_seq = if is_memories {
        let max = query_i64(conn, "SELECT coalesce(max(seq), 0) FROM memories").await?;
        applied.duplicates = resolve_duplicates(conn, &mut rows, target, now).await?;
        max + 1
    } else {
        0
    };
    // Archived rows first: an arriving archive may free the content an arriving active
    // memory takes.
    let (archived, active): (Vec<_>, Vec<_>) = rows
        .into_values()
        .partition(|r| r.get("deprecated").and_then(Value::as_i64) == Some(1));
    for part in [archived, active] {
        if part.is_empty() {
            continue;
        }
        let list = Value::Array(part.into_iter().map(Value::Object).collect()).to_string();
        applied.upserted += conn
            .execute(&upsert_sql(columns, t, target), params![list])
            .await
            .ctx("applying synced rows")?;
    }
    if is_memories {
        // Invariant 8: new memory rows reach the search index in the same transaction.
        conn.execute(
            "INSERT INTO memories_fts(rowid, content, tags, related_files)
             SELECT seq, content, tags, related_files FROM memories WHERE seq >= ?1",
            params![first_new_seq],
        )
        .await
        .ctx("indexing synced memories")?;
    }
    Ok(applied)
}

fn upsert_sql(columns: &Columns, t: &SyncedTable, target: Target) -> String {
    let cols = columns.of(t);
    let values: Vec<String> = cols
        .iter()
        .map(|c| format!("json_extract(j.value, '$.\"{c}\"')"))
        .collect();
    let sets: Vec<String> = cols
        .iter()
        .filter(|c| !t.key.contains(&c.as_str()))
        .map(|c| {
            if target == Target::Server
                && t.merge == Merge::Count
                && t.counters.contains(&c.as_str())
            {
                format!("{c} = {t}.{c} + excluded.{c}", t = t.name)
            } else if c == "first_seen_at" {
                format!("{c} = min({t}.{c}, excluded.{c})", t = t.name)
            } else {
                format!("{c} = excluded.{c}")
            }
        })
        .collect();
    // On a device, a row that is not shareable is the device's own (made personal here while
    // another device still edited it): the server's copy never overwrites it.
    let keep_own = match (target, t.condition(t.name)) {
        (Target::Device, Some(c)) => format!("WHERE {c}"),
        _ => String::new(),
    };
    format!(
        "INSERT INTO {t} ({cols}) SELECT {values} FROM json_each(?1) j WHERE true
         ON CONFLICT ({key}) DO UPDATE SET {sets} {keep_own}",
        t = t.name,
        cols = cols.join(", "),
        values = values.join(", "),
        key = t.key.join(", "),
        sets = sets.join(", "),
    )
}

async fn delete_rows(
    conn: &Connection,
    t: &SyncedTable,
    keys: &[&String],
    target: Target,
) -> Result<u64> {
    let list = format!(
        "[{}]",
        keys.iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    // On a device, a row that is not shareable is the device's own (a memory made personal
    // here, whose deletion on the server comes back): never delete it.
    let guard = match (target, t.condition("r")) {
        (Target::Device, Some(c)) => format!("AND {c}"),
        _ => String::new(),
    };
    let mut deleted = 0;
    if t.name == "memories" {
        // A memory's history and event log go with it.
        for dependent in ["memory_versions", "memory_events"] {
            deleted += conn
                .execute(
                    &format!(
                        "DELETE FROM {dependent} WHERE memory_id IN (
                           SELECT r.id FROM json_each(?1) j CROSS JOIN memories r ON {join} {guard})",
                        join = t.key_join("r"),
                    ),
                    params![list.clone()],
                )
                .await
                .ctx("deleting synced rows")?;
        }
    }
    let keys_of = t.key.join(", ");
    deleted += conn
        .execute(
            &format!(
                "DELETE FROM {t} WHERE ({keys_of}) IN (
                   SELECT {cols} FROM json_each(?1) j CROSS JOIN {t} r ON {join} {guard})",
                t = t.name,
                cols = t
                    .key
                    .iter()
                    .map(|k| format!("r.{k}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                join = t.key_join("r"),
            ),
            params![list],
        )
        .await
        .ctx("deleting synced rows")?;
    Ok(deleted)
}

/// Finds active memories at the target with the content of an arriving active memory (same
/// project, scope and content hash, another id) and settles which one stays active: on the
/// server the one already there, on a device the server's. Returns how many were archived.
async fn resolve_duplicates(
    conn: &Connection,
    rows: &mut RowSet,
    target: Target,
    now: i64,
) -> Result<u64> {
    let arriving: Vec<Value> = rows
        .values()
        .filter(|r| r.get("deprecated").and_then(Value::as_i64) == Some(0))
        .map(|r| {
            serde_json::json!([
                r.get("id"),
                r.get("project_id"),
                r.get("scope"),
                r.get("content_hash")
            ])
        })
        .collect();
    if arriving.is_empty() {
        return Ok(0);
    }
    // A holder that arrives in the same batch is left out: its new state (archived, or other
    // content) is applied with the batch, archived rows first.
    let batch_ids: Vec<&Value> = rows.values().filter_map(|r| r.get("id")).collect();
    let mut found = conn
        .query(
            "SELECT json_extract(j.value, '$[0]'), h.id FROM json_each(?1) j
             CROSS JOIN memories h ON h.project_id = json_extract(j.value, '$[1]')
               AND h.scope = json_extract(j.value, '$[2]')
               AND h.content_hash = json_extract(j.value, '$[3]')
             WHERE h.deprecated = 0 AND h.id != json_extract(j.value, '$[0]')
               AND h.id NOT IN (SELECT value FROM json_each(?2))",
            params![
                Value::Array(arriving).to_string(),
                serde_json::to_string(&batch_ids).expect("ids serialise")
            ],
        )
        .await
        .ctx("finding duplicate memories")?;
    let mut pairs = Vec::new();
    while let Some(row) = found.next().await.ctx("finding duplicate memories")? {
        let incoming: String = row.get(0).ctx("finding duplicate memories")?;
        let holder: String = row.get(1).ctx("finding duplicate memories")?;
        pairs.push((incoming, holder));
    }
    drop(found);
    match target {
        Target::Server => {
            for (incoming, holder) in &pairs {
                let key = Value::Array(vec![Value::String(incoming.clone())]).to_string();
                if let Some(row) = rows.get_mut(&key) {
                    row.insert("deprecated".into(), 1.into());
                    row.insert("deprecated_at".into(), now.into());
                    row.insert(
                        "deprecated_reason".into(),
                        format!("duplicate of {holder} (sync)").into(),
                    );
                }
            }
        }
        Target::Device => {
            for (incoming, holder) in &pairs {
                crate::memory::archive_as_duplicate(conn, holder, incoming, now).await?;
            }
        }
    }
    Ok(pairs.len() as u64)
}

/// The first column of the first row of `sql` as an integer (0 without a row), on any
/// connection, a transaction's included (`Reader::query_integer` is for pooled readers).
pub(crate) async fn query_i64(conn: &Connection, sql: &str) -> Result<i64> {
    let mut rows = conn.query(sql, ()).await.ctx(sql)?;
    match rows.next().await.ctx(sql)? {
        Some(row) => row.get(0).ctx(sql),
        None => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_ddl_guards_by_shareability_and_records_counter_increments() {
        let ddl = table("memories").unwrap().capture_ddl();
        assert!(ddl.contains("WHEN new.share_scope != 'personal' AND new.redactions = 0"));
        assert!(ddl.contains("(new.share_scope != 'personal' AND new.redactions = 0) OR (old."));
        assert!(ddl.contains("json_array(old.id)"));
        let counts = table("observer_signal_counts").unwrap().capture_ddl();
        assert!(counts.contains("json_array(new.session_count - old.session_count, "));
        assert!(counts.contains("json_array(new.session_count, new.occurrences"));
        assert!(!counts.contains("WHEN"));
    }

    #[test]
    fn memories_are_applied_before_their_versions() {
        let pos = |n| TABLES.iter().position(|t| t.name == n).unwrap();
        assert!(pos("memories") < pos("memory_versions"));
    }
}
