//! The engine's in-process graph indexes (issue 38), one per project, shared by every handle:
//! loaded in the background on first use, then brought up to date before each use by
//! replaying `graph_log` and `memory_link_log` from the seqs they last saw.
//!
//! Every graph write logs what it touched in its own transaction (the graph code, through
//! `write.rs`'s `HopLog`, for nodes, the edges at either end and closure rows; a trigger for
//! memory links), so writes from any path, thread or process reach the index, and a write that
//! never committed (a crash) is never seen. SQLite stays the source of truth: while an index is not loaded,
//! or must be reloaded (a closure rebuild, a log trimmed past it, a replay too large to be
//! worth it), callers are answered from the tables and the load runs in the background.
//!
//! Memory: each index has a budget (`graphIndexMaxMb`, default 256 MiB). A load stops once
//! its rows' estimate passes it, and a replay that takes the estimate past it calls for a
//! reload, which measures; a graph found over budget is answered from the tables for the
//! engine's lifetime. A budget of 0 turns the index off.
//!
//! Locks: `refresh` serialises replays and loads of one index; `state` is read-locked while an
//! answer is built from it (its memories are read from SQLite meanwhile) and write-locked only
//! to apply a replay or install a load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::closure::NodeId;
use super::index::GraphIndex;
use super::memory_rows::MemoryRows;
use crate::error::{DbContext, Result};
use crate::store::{Reader, Store};

/// Most distinct nodes a replay re-reads; past it a reload in the background is cheaper than
/// making the caller wait (~12 us per node re-read, against ~1 s to load 50k nodes).
const MAX_REPLAY_NODES: usize = 20_000;

/// Most memory-link keys a replay re-reads.
const MAX_REPLAY_KEYS: usize = 20_000;

/// Log rows kept by [`trim_logs`]: an index further behind reloads, as it would after a
/// change this large anyway.
const LOG_KEEP: i64 = 100_000;

/// Trims both logs to their last [`LOG_KEEP`] rows (never the newest, so seqs only grow and
/// a reader can tell it fell behind). Run after each index run's graph sync.
pub(crate) async fn trim_logs(conn: &libsql::Connection) -> Result<()> {
    for sql in [
        "DELETE FROM graph_log WHERE seq <= (SELECT max(seq) FROM graph_log) - ?1",
        "DELETE FROM memory_link_log WHERE seq <= (SELECT max(seq) FROM memory_link_log) - ?1",
    ] {
        conn.execute(sql, [LOG_KEEP])
            .await
            .ctx("trimming the graph change logs")?;
    }
    Ok(())
}

/// Default memory budget of one project's index: 256 MiB, about 190,000 nodes of a code graph
/// like the bench's (1,351 bytes per node with its edges, closure rows and links).
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

/// The graph indexes of one engine.
#[derive(Debug)]
pub(crate) struct GraphIndexes {
    slots: Mutex<HashMap<String, Arc<GraphSlot>>>,
    /// Each project's budget (0: no index, the tables answer everything).
    max_bytes: u64,
}

impl GraphIndexes {
    /// No index yet, each to hold at most `max_bytes`.
    pub(crate) fn new(max_bytes: u64) -> GraphIndexes {
        GraphIndexes {
            slots: Mutex::default(),
            max_bytes,
        }
    }

    /// The slot of `project_id`'s index (empty until loaded).
    pub(crate) fn slot(&self, project_id: &str) -> Arc<GraphSlot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .entry(project_id.to_owned())
            .or_insert_with(|| Arc::new(GraphSlot::new(self.max_bytes)))
            .clone()
    }
}

/// One project's index, the memory rows its `impact()` answers read, and where both are in
/// the logs.
#[derive(Debug)]
pub(crate) struct Served {
    /// The index.
    pub index: GraphIndex,
    /// Memory rows read by answers, kept until `memory_row_log` names them.
    pub memories: MemoryRows,
    position: LogPosition,
}

/// The last seq of each log an index reflects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct LogPosition {
    graph: i64,
    links: i64,
    memories: i64,
}

/// One project's index, or none yet.
#[derive(Debug)]
pub(crate) struct GraphSlot {
    refresh: tokio::sync::Mutex<()>,
    state: tokio::sync::RwLock<Option<Served>>,
    /// A load was claimed and has not finished.
    loading: AtomicBool,
    /// Told when a claimed load ends (however it ends).
    load_ended: tokio::sync::Notify,
    /// Loads completed (tests tell a replay from a reload with it).
    loads: AtomicU64,
    /// The index's memory budget (0: never loaded).
    max_bytes: u64,
    /// A load found the graph over budget: the tables answer for the engine's lifetime (a
    /// graph that large rarely shrinks, and each attempt reads until the budget is spent).
    over_budget: AtomicBool,
}

impl Default for GraphSlot {
    fn default() -> Self {
        GraphSlot::new(DEFAULT_MAX_BYTES)
    }
}

/// What [`GraphSlot::refresh`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refreshed {
    /// The index reflects every graph write committed before the call.
    Current,
    /// A load is going on (answer from the tables meanwhile).
    Loading,
    /// The index must be loaded, and the caller claimed the load: it runs
    /// [`GraphSlot::load`] (in the background).
    LoadClaimed,
    /// No index: its budget is 0, or the graph was found over it.
    Off,
}

/// The bounds of the three logs, read in one statement.
const LOG_BOUNDS: &str =
    "SELECT (SELECT min(seq) FROM graph_log), (SELECT max(seq) FROM graph_log),
    (SELECT min(seq) FROM memory_link_log), (SELECT max(seq) FROM memory_link_log),
    (SELECT min(seq) FROM memory_row_log), (SELECT max(seq) FROM memory_row_log)";

/// The nodes project `?3`'s graph log names after seq `?1` up to `?2` (NULL: all of them).
const LOGGED_NODES: &str = "SELECT DISTINCT node_id FROM graph_log
    WHERE seq > ?1 AND seq <= ?2 AND project_id = ?3";

/// The node keys project `?3`'s link log names after seq `?1` up to `?2`.
const LOGGED_KEYS: &str = "SELECT DISTINCT node_key FROM memory_link_log
    WHERE seq > ?1 AND seq <= ?2 AND project_id = ?3";

/// The memories the row log names after seq `?1` up to `?2` (any project: seqs are unique in
/// the file).
const LOGGED_MEMORIES: &str = "SELECT DISTINCT memory_seq FROM memory_row_log
    WHERE seq > ?1 AND seq <= ?2";

/// Most memory-row log entries a replay reads; past it the cached rows are dropped whole
/// (they are refilled by the answers that need them).
const MAX_REPLAY_MEMORIES: i64 = 10_000;

/// The logs' (min, max) seqs (graph, links, memory rows), `(0, 0)` for an empty log.
type Bounds = [(i64, i64); 3];

impl GraphSlot {
    /// No index yet, to hold at most `max_bytes` (0: never loaded).
    pub(crate) fn new(max_bytes: u64) -> GraphSlot {
        GraphSlot {
            refresh: tokio::sync::Mutex::default(),
            state: tokio::sync::RwLock::default(),
            loading: AtomicBool::default(),
            load_ended: tokio::sync::Notify::new(),
            loads: AtomicU64::default(),
            max_bytes,
            over_budget: AtomicBool::default(),
        }
    }

    /// Whether the index is off: a budget of 0, or a graph found over it.
    pub(crate) fn is_off(&self) -> bool {
        self.max_bytes == 0 || self.over_budget.load(Ordering::Acquire)
    }

    /// Brings the index up to date with every graph write committed before this call, or says
    /// why it cannot answer yet.
    pub(crate) async fn refresh(&self, store: &Store, project_id: &str) -> Result<Refreshed> {
        if self.is_off() {
            return Ok(Refreshed::Off);
        }
        if self.loading.load(Ordering::Acquire) {
            return Ok(Refreshed::Loading);
        }
        let _refreshing = self.refresh.lock().await;
        if self.loading.load(Ordering::Acquire) {
            return Ok(Refreshed::Loading);
        }
        let Some(seen) = self.state.read().await.as_ref().map(|s| s.position) else {
            return Ok(self.claim_load());
        };
        let mut reader = store.reader().await;
        // One statement outside a transaction first: nothing logged since `seen` (the common
        // case) needs no snapshot. A replay of graph writes or memory links (any project's:
        // the logs are the file's) or of many memory rows reads rows for milliseconds, so a
        // caller polling on a JS thread (see `node::error::promise_inline_first`) hands it to
        // the runtime here, before the read transaction opens; a recall's few touches replay
        // inline. (A graph write committed between this statement and the transaction's first
        // is replayed without the yield: a window of microseconds.)
        let [graph, links, rows] = log_bounds(&mut reader).await?;
        if graph.1 == seen.graph && links.1 == seen.links && rows.1 == seen.memories {
            return Ok(Refreshed::Current);
        }
        if graph.1 != seen.graph || links.1 != seen.links || rows.1 - seen.memories > 1_000 {
            tokio::task::yield_now().await;
        }
        begin_read(&reader).await?;
        let replayed = self.replay(&mut reader, project_id, seen).await;
        end_read(&reader, replayed.is_ok()).await?;
        match replayed {
            Ok(true) => Ok(Refreshed::Current),
            Ok(false) => {
                *self.state.write().await = None;
                Ok(self.claim_load())
            }
            // A replay that failed part way leaves the index between two states.
            Err(error) => {
                *self.state.write().await = None;
                Err(error)
            }
        }
    }

    /// Replays the logs after `seen`; false when the index must be reloaded instead.
    async fn replay(
        &self,
        reader: &mut Reader<'_>,
        project_id: &str,
        seen: LogPosition,
    ) -> Result<bool> {
        let [graph, links, rows] = log_bounds(reader).await?;
        // Logs only grow (a trim keeps the newest row): one that went back is not the one
        // the index followed.
        if graph.1 < seen.graph || links.1 < seen.links || rows.1 < seen.memories {
            return Ok(false);
        }
        if graph.1 == seen.graph && links.1 == seen.links && rows.1 == seen.memories {
            return Ok(true);
        }
        // Entries after `seen` were trimmed away: replaying cannot catch up.
        let trimmed = |(min, max): (i64, i64), seen: i64| max > seen && min > seen + 1;
        if trimmed(graph, seen.graph) || trimmed(links, seen.links) {
            return Ok(false);
        }
        // The memory rows the log names since `seen`, or None: drop them all.
        let changed_memories: Option<Vec<i64>> = if rows.1 == seen.memories {
            Some(Vec::new())
        } else if trimmed(rows, seen.memories) || rows.1 - seen.memories > MAX_REPLAY_MEMORIES {
            None
        } else {
            Some(
                reader
                    .query_cached(LOGGED_MEMORIES, (seen.memories, rows.1), |row| {
                        row.get::<i64>(0).ctx("memory row log")
                    })
                    .await?,
            )
        };
        // (A recall's touches move only the memory row log: no statement for the others.)
        let ids: Vec<Option<NodeId>> = if graph.1 == seen.graph {
            Vec::new()
        } else {
            reader
                .query_cached(
                    LOGGED_NODES,
                    (seen.graph, graph.1, project_id.to_owned()),
                    |row| row.get::<Option<NodeId>>(0).ctx("graph log"),
                )
                .await?
        };
        // A NULL row is a closure rebuild: everything changed.
        let ids: Option<Vec<NodeId>> = ids.into_iter().collect();
        let Some(ids) = ids.filter(|ids| ids.len() <= MAX_REPLAY_NODES) else {
            return Ok(false);
        };
        let keys: Vec<String> = if links.1 == seen.links {
            Vec::new()
        } else {
            reader
                .query_cached(
                    LOGGED_KEYS,
                    (seen.links, links.1, project_id.to_owned()),
                    |row| row.get::<String>(0).ctx("memory link log"),
                )
                .await?
        };
        if keys.len() > MAX_REPLAY_KEYS {
            return Ok(false);
        }
        let mut state = self.state.write().await;
        let Some(served) = state.as_mut() else {
            return Ok(false);
        };
        served.index.replay(reader, project_id, &ids, &keys).await?;
        match changed_memories {
            Some(seqs) => served.memories.forget(&seqs),
            None => served.memories.clear(),
        }
        served.position = LogPosition {
            graph: graph.1,
            links: links.1,
            memories: rows.1,
        };
        // Grown past the budget by the estimate (which only overstates): a reload measures.
        Ok(served.index.approx_bytes() <= self.max_bytes)
    }

    /// Claims the load unless another caller did.
    fn claim_load(&self) -> Refreshed {
        match self
            .loading
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Refreshed::LoadClaimed,
            Err(_) => Refreshed::Loading,
        }
    }

    /// Loads the index from the tables (after [`Refreshed::LoadClaimed`]), the logs' position
    /// read in the same transaction as the rows; stops (`ENGRAM_ABORTED`) once `keep_going`
    /// says no, so a closing engine does not wait for a load nobody will use.
    pub(crate) async fn load(
        &self,
        store: &Store,
        project_id: &str,
        closure_depth: u32,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Result<()> {
        let loaded = async {
            let _refreshing = self.refresh.lock().await;
            let mut reader = store.reader().await;
            begin_read(&reader).await?;
            let read = async {
                let [graph, links, rows] = log_bounds(&mut reader).await?;
                let index = GraphIndex::read(
                    &reader,
                    project_id,
                    closure_depth,
                    keep_going,
                    self.max_bytes,
                );
                let index = index.await?;
                Ok::<_, crate::error::Error>(index.map(|index| Served {
                    index,
                    memories: MemoryRows::default(),
                    position: LogPosition {
                        graph: graph.1,
                        links: links.1,
                        memories: rows.1,
                    },
                }))
            }
            .await;
            end_read(&reader, read.is_ok()).await?;
            let Some(served) = read? else {
                self.over_budget.store(true, Ordering::Release);
                *self.state.write().await = None;
                tracing::info!(
                    project = project_id,
                    max_bytes = self.max_bytes,
                    "the graph is larger than the graph index's budget: graph reads answer \
                     from the tables (raise graphIndexMaxMb to serve them from memory)"
                );
                return Ok(());
            };
            *self.state.write().await = Some(served);
            self.loads.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        .await;
        self.loading.store(false, Ordering::Release);
        self.load_ended.notify_waiters();
        loaded
    }

    /// Waits until no load is going on (one claimed before or during the call has ended).
    pub(crate) async fn wait_for_load(&self) {
        loop {
            let ended = self.load_ended.notified();
            tokio::pin!(ended);
            // Registered before the check, so an end between the two is not missed.
            ended.as_mut().enable();
            if !self.loading.load(Ordering::Acquire) {
                return;
            }
            ended.await;
        }
    }

    /// Loads completed so far.
    pub(crate) fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// The index, read-locked, if loaded (after [`Refreshed::Current`]; a concurrent reload
    /// may have emptied it since).
    pub(crate) async fn read(&self) -> tokio::sync::RwLockReadGuard<'_, Option<Served>> {
        self.state.read().await
    }
}

async fn log_bounds(reader: &mut Reader<'_>) -> Result<Bounds> {
    let rows = reader
        .query_cached(LOG_BOUNDS, (), |row| {
            let mut values = [0i64; 6];
            for (i, value) in values.iter_mut().enumerate() {
                *value = row
                    .get::<Option<i64>>(i as i32)
                    .ctx("graph log bounds")?
                    .unwrap_or(0);
            }
            Ok(values)
        })
        .await?;
    let v = rows.into_iter().next().unwrap_or_default();
    Ok([(v[0], v[1]), (v[2], v[3]), (v[4], v[5])])
}

/// Starts a read transaction: the log bounds and the rows they cover are one snapshot.
async fn begin_read(reader: &Reader<'_>) -> Result<()> {
    reader
        .execute("BEGIN", ())
        .await
        .ctx("graph index: beginning a read")?;
    Ok(())
}

async fn end_read(reader: &Reader<'_>, ok: bool) -> Result<()> {
    let end = if ok { "COMMIT" } else { "ROLLBACK" };
    reader
        .execute(end, ())
        .await
        .ctx("graph index: ending a read")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;

    /// A load that is told to stop (every handle closed) stops, leaves no index, and lets the
    /// next caller claim a load again.
    #[tokio::test]
    async fn a_load_nobody_wants_stops() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("g.db"), &StoreOptions::default())
            .await
            .unwrap();
        let writer = store.writer().await;
        writer
            .execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
                 INSERT INTO graph_nodes (project_id, key, layer, kind, label, source,
                   created_at, updated_at)
                 SELECT 'p', 'k' || i, 3, 'concept', 'k' || i, 'agent', 0, 0 FROM n",
                (),
            )
            .await
            .unwrap();
        drop(writer);
        let slot = GraphSlot::default();
        assert_eq!(
            slot.refresh(&store, "p").await.unwrap(),
            Refreshed::LoadClaimed
        );
        let stopped = slot.load(&store, "p", 4, &|| false).await;
        assert!(
            matches!(stopped, Err(crate::error::Error::Aborted)),
            "{stopped:?}"
        );
        assert!(slot.read().await.is_none());
        assert_eq!(slot.loads(), 0);
        assert_eq!(
            slot.refresh(&store, "p").await.unwrap(),
            Refreshed::LoadClaimed
        );
        slot.load(&store, "p", 4, &|| true).await.unwrap();
        assert_eq!(slot.refresh(&store, "p").await.unwrap(), Refreshed::Current);
        let served = slot.read().await;
        assert_eq!(served.as_ref().unwrap().index.size().nodes, 5000);
    }
}

#[cfg(test)]
mod plan_tests {
    use super::{LOGGED_KEYS, LOGGED_NODES};
    use crate::store::plan::{mentions, query_plan};

    #[tokio::test]
    async fn log_reads_are_a_range_of_seqs() {
        for sql in [LOGGED_NODES, LOGGED_KEYS] {
            let plan = query_plan(sql).await;
            assert!(
                mentions(&plan, "INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
                "{sql}\n{plan:#?}"
            );
        }
    }
}
