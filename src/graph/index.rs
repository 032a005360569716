//! An in-process copy of one project's graph for `impact()`, `reach()`, `neighbours()` and the
//! file neighbourhood of retrieval: every node row, every edge at both of its ends (kind,
//! layer, weight; what a node contains is read from them too), the nodes of each file, the
//! closure rows into and out of each node, and the memory links by node key, loaded from
//! SQLite in four reads (issue 38) and brought up to date by replaying the change logs.
//!
//! Why: a file target's answer touches hundreds of rows at random (its seeds' closure rows,
//! then each affected node and its key's memory links), ~12 us each through SQLite on the
//! 50k-node bench graph, so a 500-node answer took ~10 ms across JS. Here those are hash
//! lookups; only the memories returned are read from SQLite (they are the large rows), or,
//! for the engine's served index, from the rows earlier answers read (`memory_rows.rs`).
//!
//! The answer is built by the same functions as the SQL path's (`impact.rs`: the nearest row
//! per node, the order, the paths, the memory ranking), from the same rows, so the two agree
//! exactly; `neighbours()` shares its ranking with the SQL path (`rank::rank_links`), and
//! `reach()` and `file_neighbours()` follow their statements' order and joins.
//! `tests/graph_index.rs` checks all four on every node of real indexed projects.
//!
//! Exact as of its load and of each replay: `replay` re-reads what the change logs named
//! (`served.rs` decides when, and keeps the engine's copy). Replays leave dead paths in the
//! arena; past half of it they are compacted. `picture` gives the whole index in a canonical
//! order, so tests can check that an index that followed writes equals a fresh load.
//! `cargo bench --bench graph` reports its load time, its bytes per node and per edge, and
//! `impact()`, `reach()`, `neighbours()` and the file neighbourhood through it.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::LazyLock;

use super::closure::{self, parse_path, NodeId};
use super::impact::{
    affected_nodes, attached_memories, attachment_depths, choose_nearest, target_keys, Impact,
    ImpactOptions, IntoSeed, PathRef, MAX_SEEDS,
};
use super::memory_rows::MemoryRows;
use super::model::Direction;
use super::rank::{rank_links, Link, Neighbour, NeighbourOptions, MAX_EXPANDED};
use super::read::{check_limit, node_from_row, ReachedNode, Side, Subgraph, NODE_COLUMNS};
use super::GraphNode;
use crate::error::{DbContext, Error, Result};
use crate::store::Reader;
use libsql::Row;

/// Closure rows an `impact()` answer may walk on the calling thread (~0.2 ms of work); past
/// it, the answer yields to the runtime first.
pub(crate) const INLINE_CLOSURE_ROWS: usize = 5_000;

/// Every node of project `?1`.
static PROJECT_NODES: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {NODE_COLUMNS} FROM graph_nodes n WHERE n.project_id = ?1"));

/// The nodes of project `?1` among ids `?2` (JSON).
static NODES_OF: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {NODE_COLUMNS} FROM json_each(?2) j
         CROSS JOIN graph_nodes n ON n.id = j.value AND n.project_id = ?1"
    )
});

/// What the index reads of an edge, in the order [`GraphIndex::take_edge`] takes it.
const EDGE_COLUMNS: &str = "e.from_id, e.to_id, e.kind, e.layer, e.weight";

/// Every edge of project `?1`.
static PROJECT_EDGES: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {EDGE_COLUMNS} FROM graph_edges e WHERE e.project_id = ?1"));

/// The edges of project `?1` from nodes `?2` (JSON ids).
static EDGES_FROM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EDGE_COLUMNS} FROM json_each(?2) j
         CROSS JOIN graph_edges e ON e.from_id = j.value WHERE e.project_id = ?1"
    )
});

/// The edges of project `?1` into nodes `?2` (JSON ids).
static EDGES_TO: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EDGE_COLUMNS} FROM json_each(?2) j
         CROSS JOIN graph_edges e ON e.to_id = j.value WHERE e.project_id = ?1"
    )
});

/// The project's closure rows, through the descendant index (the closure has no project column).
const PROJECT_CLOSURE: &str = "SELECT c.descendant_id, c.ancestor_id, c.depth, c.weight, c.path
    FROM graph_closure c
    WHERE c.descendant_id IN (SELECT id FROM graph_nodes WHERE project_id = ?1)";

/// Closure rows into nodes `?2` (JSON ids) of project `?1` (a node id reused by another
/// project's node is not this project's).
const CLOSURE_OF: &str = "SELECT c.descendant_id, c.ancestor_id, c.depth, c.weight, c.path
    FROM json_each(?2) j
    CROSS JOIN graph_nodes n ON n.id = j.value AND n.project_id = ?1
    CROSS JOIN graph_closure c ON c.descendant_id = n.id";

/// Every memory link of project `?1`.
const PROJECT_LINKS: &str =
    "SELECT node_key, memory_seq, role FROM memory_links WHERE project_id = ?1";

/// The memory links of keys `?2` (JSON) in project `?1`.
const LINKS_OF: &str = "SELECT l.node_key, l.memory_seq, l.role FROM json_each(?2) j
    CROSS JOIN memory_links l ON l.project_id = ?1 AND l.node_key = j.value";

/// Estimated bytes a node, an edge end, a closure row and a memory link cost the index beyond
/// their strings, with the maps' entries they take (a hash map holds up to 8/7 of its entries
/// in slots of the entry's size plus a control byte; vectors grow by doubling). The estimate
/// decides when a load stops early and when a replay calls for a reload that measures again;
/// `tests/graph_index.rs` checks it against [`GraphIndex::size`].
const NODE_BYTES: u64 = 320;
const EDGE_END_BYTES: u64 = 40;
const REACH_BYTES: u64 = 56;
const NODE_ID_BYTES: u64 = std::mem::size_of::<NodeId>() as u64;
const LINK_BYTES: u64 = 96;

/// See [`NODE_BYTES`]: the node's strings count too, its key twice (the node and the id map).
fn estimated_node_bytes(node: &GraphNode) -> u64 {
    let path = node.file_path.as_ref().map_or(0, String::len);
    (2 * node.key.len() + node.kind.len() + node.label.len() + 2 * path) as u64 + NODE_BYTES
}

/// One closure row, stored under its descendant: 24 bytes (depth and the path's length fit a
/// byte, as the closure depth is at most 8).
#[derive(Debug, Clone, Copy)]
struct Reach {
    ancestor: NodeId,
    weight: f64,
    /// The path's interior nodes: `paths[path_start .. path_start + path_len]`.
    path_start: u32,
    path_len: u8,
    depth: u8,
}

impl Reach {
    fn path_range(&self) -> std::ops::Range<usize> {
        let start = self.path_start as usize;
        start..start + usize::from(self.path_len)
    }
}

/// One project's graph, as of [`GraphIndex::load`].
#[derive(Debug, Default)]
pub struct GraphIndex {
    nodes: HashMap<NodeId, GraphNode>,
    ids: HashMap<String, NodeId>,
    /// Every edge, at both of its ends: `neighbours()` and the file neighbourhood.
    edges: HashMap<NodeId, Vec<EdgeEnd>>,
    /// Edge kinds by [`EdgeEnd::kind`], and the other way round.
    kinds: Vec<String>,
    kind_ids: HashMap<String, u16>,
    /// The nodes of each file path (a file and its symbols).
    by_file: HashMap<String, Vec<NodeId>>,
    /// Closure rows by descendant.
    closure: HashMap<NodeId, Vec<Reach>>,
    /// The other way round: for each ancestor, the descendants whose rows in `closure` name
    /// it, for `reach()`'s descendants.
    reached_from: HashMap<NodeId, Vec<NodeId>>,
    /// Interior nodes of every stored path, end to end.
    paths: Vec<NodeId>,
    /// Memory links by node key: (memory seq, role).
    links: HashMap<String, Vec<(i64, String)>>,
    /// Entries of `paths` no row points at any more (left by replays).
    dead_path_ids: usize,
    /// See [`GraphIndex::approx_bytes`].
    approx_bytes: u64,
}

/// An edge seen from one of its ends: 24 bytes.
#[derive(Debug, Clone, Copy)]
struct EdgeEnd {
    other: NodeId,
    weight: f64,
    /// Index into [`GraphIndex::kinds`].
    kind: u16,
    layer: u8,
    /// This end is the edge's `from`.
    outgoing: bool,
}

/// Which end of an edge a read is about: a load reads every edge once (both ends); a replay
/// reads the edges from and to the nodes it re-reads, one end each, so an edge between two
/// of them is taken once per map.
#[derive(Debug, Clone, Copy)]
enum EdgeEnds {
    Both,
    From,
    To,
}

/// What an index holds, in canonical order (see [`GraphIndex::picture`]).
#[derive(Debug, PartialEq)]
pub struct GraphPicture {
    nodes: Vec<NodePicture>,
    ids: Vec<(String, NodeId)>,
    files: Vec<(String, Vec<NodeId>)>,
    loose_links: Vec<(String, Vec<(i64, String)>)>,
}

impl GraphPicture {
    /// Nodes pictured.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The first difference from `other`, for a test's failure message.
    pub fn first_difference(&self, other: &GraphPicture) -> Option<String> {
        if self == other {
            return None;
        }
        for (mine, theirs) in self.nodes.iter().zip(&other.nodes) {
            if mine != theirs {
                return Some(format!("node {mine:?}\n  vs {theirs:?}"));
            }
        }
        if self.nodes.len() != other.nodes.len() {
            return Some(format!(
                "{} nodes vs {}",
                self.nodes.len(),
                other.nodes.len()
            ));
        }
        if self.ids != other.ids {
            return Some("key maps differ".into());
        }
        if self.files != other.files {
            return Some("file maps differ".into());
        }
        Some(format!(
            "links on unindexed keys: {:?} vs {:?}",
            self.loose_links, other.loose_links
        ))
    }
}

/// One node of a [`GraphPicture`].
#[derive(Debug, PartialEq)]
struct NodePicture {
    id: NodeId,
    node: String,
    edges: Vec<(NodeId, bool, String, u8, u64)>,
    reach: Vec<(NodeId, u8, u64, Vec<NodeId>)>,
    reached_from: Vec<NodeId>,
    links: Vec<(i64, String)>,
}

/// How big an index is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphIndexSize {
    /// Nodes held.
    pub nodes: usize,
    /// Closure rows held.
    pub closure_rows: usize,
    /// Memory links held.
    pub links: usize,
    /// Heap bytes, estimated from the lengths and capacities of what is held: all of it...
    pub bytes: usize,
    /// ...of which the node rows and the key map...
    pub node_bytes: usize,
    /// ...and the closure rows and their paths.
    pub closure_bytes: usize,
}

impl GraphIndex {
    /// Reads project `project_id`'s graph and memory links, in one read transaction so that
    /// the four reads see one state of the database.
    pub(crate) async fn load(
        reader: &mut Reader<'_>,
        project_id: &str,
        closure_depth: u32,
    ) -> Result<GraphIndex> {
        reader
            .execute("BEGIN", ())
            .await
            .ctx("graph index: beginning a read")?;
        let loaded = Self::read(reader, project_id, closure_depth, &|| true, u64::MAX).await;
        let end = if loaded.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = reader
            .execute(end, ())
            .await
            .ctx("graph index: ending a read");
        let index = loaded?;
        ended?;
        index.ok_or_else(|| Error::Internal("graph index: over an unlimited budget".into()))
    }

    /// The reads of [`GraphIndex::load`], row by row and uncached (they run once; the
    /// reader's statement cache keeps the statements of the hot paths); `ENGRAM_ABORTED` once
    /// `keep_going` says no; `None` once the index would hold more than `max_bytes` (checked on
    /// the rows' estimate as they come, so a graph far over budget is not read whole, then on
    /// the index's measured size). A pending closure (see `closure.rs`) is computed from the
    /// edges read, within `closure_depth`, to the rows building it would store.
    pub(crate) async fn read(
        reader: &Reader<'_>,
        project_id: &str,
        closure_depth: u32,
        keep_going: &(dyn Fn() -> bool + Sync),
        max_bytes: u64,
    ) -> Result<Option<GraphIndex>> {
        let rows = Self::read_rows(reader, project_id, closure_depth, keep_going, max_bytes);
        let Some(mut index) = rows.await? else {
            return Ok(None);
        };
        // From here on the estimate starts from the measured size.
        index.approx_bytes = index.size().bytes as u64;
        Ok((index.approx_bytes <= max_bytes).then_some(index))
    }

    /// [`GraphIndex::read`] up to its measure: `approx_bytes` is the rows' estimate.
    async fn read_rows(
        reader: &Reader<'_>,
        project_id: &str,
        closure_depth: u32,
        keep_going: &(dyn Fn() -> bool + Sync),
        max_bytes: u64,
    ) -> Result<Option<GraphIndex>> {
        let mut index = GraphIndex::default();
        let mut rows_read = 0u32;
        // Every 4,096 rows: a load nobody will use any more (every handle closed) stops, and
        // so does one past its budget.
        let mut within_budget = |index: &GraphIndex| {
            rows_read = rows_read.wrapping_add(1);
            if !rows_read.is_multiple_of(4096) {
                return Ok(true);
            }
            if !keep_going() {
                return Err(Error::Aborted);
            }
            Ok(index.approx_bytes <= max_bytes)
        };
        let mut rows = reader
            .query(&PROJECT_NODES, [project_id])
            .await
            .ctx("graph index: reading nodes")?;
        while let Some(row) = rows.next().await.ctx("graph index: reading nodes")? {
            if !within_budget(&index)? {
                return Ok(None);
            }
            index.take_node(&row)?;
        }
        let mut rows = reader
            .query(PROJECT_EDGES.as_str(), [project_id])
            .await
            .ctx("graph index: reading edges")?;
        while let Some(row) = rows.next().await.ctx("graph index: reading edges")? {
            if !within_budget(&index)? {
                return Ok(None);
            }
            index.take_edge(&row, EdgeEnds::Both)?;
        }
        if closure::state(reader, project_id).await? == Some(closure::PENDING) {
            if !index.compute_closure(closure_depth, &mut within_budget)? {
                return Ok(None);
            }
        } else {
            let mut rows = reader
                .query(PROJECT_CLOSURE, [project_id])
                .await
                .ctx("graph index: reading the closure")?;
            while let Some(row) = rows.next().await.ctx("graph index: reading the closure")? {
                if !within_budget(&index)? {
                    return Ok(None);
                }
                index.take_reach_row(&row)?;
            }
        }
        // Growth slack would be a third of the closure's bytes.
        index.paths.shrink_to_fit();
        index.closure.values_mut().for_each(Vec::shrink_to_fit);
        index.reached_from.values_mut().for_each(Vec::shrink_to_fit);
        index.edges.values_mut().for_each(Vec::shrink_to_fit);
        let mut rows = reader
            .query(PROJECT_LINKS, [project_id])
            .await
            .ctx("graph index: reading memory links")?;
        while let Some(row) = rows.next().await.ctx("graph index: reading memory links")? {
            if !within_budget(&index)? {
                return Ok(None);
            }
            index.take_link(&row)?;
        }
        Ok(Some(index))
    }

    /// Bytes the index holds: measured at its load, then raised by every row a replay takes
    /// and never lowered by what a replay drops, so it only overstates. What the engine's
    /// memory budget is checked against after a replay (a reload measures it again).
    pub(crate) fn approx_bytes(&self) -> u64 {
        self.approx_bytes
    }

    /// Re-reads, in the reader's current transaction, everything the index holds about nodes
    /// `ids` (their rows, the `contains` and `imports` edges at either end, their closure rows
    /// as descendants) and the memory links of `keys`: what `graph_log` and
    /// `memory_link_log` named since the index last looked.
    pub(crate) async fn replay(
        &mut self,
        reader: &mut Reader<'_>,
        project_id: &str,
        ids: &[NodeId],
        keys: &[String],
    ) -> Result<()> {
        if !ids.is_empty() {
            let id_list = serde_json::to_string(ids).map_err(|e| Error::Internal(e.to_string()))?;
            self.forget_nodes(ids);
            let params = || (project_id.to_owned(), id_list.clone());
            reader
                .query_cached(NODES_OF.as_str(), params(), |row| self.take_node(row))
                .await?;
            reader
                .query_cached(EDGES_FROM.as_str(), params(), |row| {
                    self.take_edge(row, EdgeEnds::From)
                })
                .await?;
            reader
                .query_cached(EDGES_TO.as_str(), params(), |row| {
                    self.take_edge(row, EdgeEnds::To)
                })
                .await?;
            reader
                .query_cached(CLOSURE_OF, params(), |row| self.take_reach_row(row))
                .await?;
            if self.dead_path_ids > self.paths.len() / 2 {
                self.compact_paths();
            }
        }
        if !keys.is_empty() {
            let key_list =
                serde_json::to_string(keys).map_err(|e| Error::Internal(e.to_string()))?;
            for key in keys {
                self.links.remove(key);
            }
            reader
                .query_cached(LINKS_OF, (project_id.to_owned(), key_list), |row| {
                    self.take_link(row)
                })
                .await?;
        }
        Ok(())
    }

    /// A node row selected with [`NODE_COLUMNS`].
    fn take_node(&mut self, row: &Row) -> Result<()> {
        let (id, node) = node_from_row(row, 0)?;
        self.approx_bytes += estimated_node_bytes(&node);
        if let Some(path) = &node.file_path {
            self.by_file.entry(path.clone()).or_default().push(id);
        }
        self.ids.insert(node.key.clone(), id);
        self.nodes.insert(id, node);
        Ok(())
    }

    /// An edge row of [`EDGE_COLUMNS`], into the maps of the given end.
    fn take_edge(&mut self, row: &Row, ends: EdgeEnds) -> Result<()> {
        let (from, to): (NodeId, NodeId) = (row.get(0).ctx("edge")?, row.get(1).ctx("edge")?);
        let kind = row.get_str(2).ctx("edge")?;
        let layer = u8::try_from(row.get::<u32>(3).ctx("edge")?)
            .map_err(|_| Error::Internal("graph index: edge layer out of range".into()))?;
        let weight: f64 = row.get(4).ctx("edge")?;
        let kind_id = match self.kind_ids.get(kind) {
            Some(&id) => id,
            None => {
                let id = u16::try_from(self.kinds.len())
                    .map_err(|_| Error::Internal("graph index: too many edge kinds".into()))?;
                self.kinds.push(kind.to_owned());
                self.kind_ids.insert(kind.to_owned(), id);
                id
            }
        };
        let end = |other, outgoing| EdgeEnd {
            other,
            weight,
            kind: kind_id,
            layer,
            outgoing,
        };
        let ends_taken = if matches!(ends, EdgeEnds::Both) { 2 } else { 1 };
        self.approx_bytes += ends_taken * EDGE_END_BYTES;
        if matches!(ends, EdgeEnds::Both | EdgeEnds::From) {
            self.edges.entry(from).or_default().push(end(to, true));
        }
        if matches!(ends, EdgeEnds::Both | EdgeEnds::To) {
            self.edges.entry(to).or_default().push(end(from, false));
        }
        Ok(())
    }

    /// A closure row as the tables give it: descendant, ancestor, depth, weight, path.
    fn take_reach_row(&mut self, row: &Row) -> Result<()> {
        let path = parse_path(row.get_str(4).ctx("closure row")?);
        self.take_reach(
            row.get(0).ctx("closure row")?,
            row.get(1).ctx("closure row")?,
            row.get(2).ctx("closure row")?,
            row.get(3).ctx("closure row")?,
            &path,
        )
    }

    /// A closure row: descendant, ancestor, depth, weight and the path's interior nodes.
    fn take_reach(
        &mut self,
        descendant: NodeId,
        ancestor: NodeId,
        depth: u32,
        weight: f64,
        path: &[NodeId],
    ) -> Result<()> {
        let too_large = || Error::Internal("graph index: closure too large".into());
        let start = self.paths.len();
        self.paths.extend_from_slice(path);
        let reach = Reach {
            ancestor,
            weight,
            path_start: u32::try_from(start).map_err(|_| too_large())?,
            path_len: u8::try_from(path.len()).map_err(|_| too_large())?,
            depth: u8::try_from(depth).map_err(|_| too_large())?,
        };
        self.approx_bytes += REACH_BYTES + u64::from(reach.path_len) * NODE_ID_BYTES;
        // One row per (ancestor, descendant) pair: the closure keeps one shortest path.
        self.reached_from
            .entry(reach.ancestor)
            .or_default()
            .push(descendant);
        self.closure.entry(descendant).or_default().push(reach);
        Ok(())
    }

    /// Computes a pending closure from the edges loaded, within `cap`: the rows a build of it
    /// stores (`closure::rows_in_memory` over the same hops), held in the order a load from
    /// the table would hold them (each descendant's rows by depth, then ancestor; each
    /// ancestor's descendants ascending). False once `within_budget` says no.
    fn compute_closure(
        &mut self,
        cap: u32,
        within_budget: &mut impl FnMut(&GraphIndex) -> Result<bool>,
    ) -> Result<bool> {
        let contains = self.kind_ids.get("contains").copied();
        let mut hops: closure::Hops = HashMap::new();
        for (&from, ends) in &self.edges {
            let mut out: Vec<(NodeId, f64)> = ends
                .iter()
                .filter(|end| end.outgoing && Some(end.kind) != contains)
                .map(|end| (end.other, end.weight))
                .collect();
            if out.is_empty() {
                continue;
            }
            // One hop per pair, with its edges' largest weight (the build's GROUP BY).
            out.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
            out.dedup_by_key(|hop| hop.0);
            hops.insert(from, out);
        }
        let mut outcome = Ok(true);
        closure::rows_in_memory(&hops, cap, |ancestor, descendant, reach| {
            if !matches!(outcome, Ok(true)) {
                return;
            }
            outcome = within_budget(self).and_then(|within| {
                if within {
                    let depth = reach.depth;
                    self.take_reach(descendant, ancestor, depth, reach.weight, &reach.interior)?;
                }
                Ok(within)
            });
        });
        if !outcome? {
            return Ok(false);
        }
        for rows in self.closure.values_mut() {
            rows.sort_unstable_by_key(|r| (r.depth, r.ancestor));
        }
        for descendants in self.reached_from.values_mut() {
            descendants.sort_unstable();
        }
        Ok(true)
    }

    /// A memory link row: node key, memory seq, role.
    fn take_link(&mut self, row: &Row) -> Result<()> {
        let key: String = row.get(0).ctx("memory link")?;
        let link: (i64, String) = (
            row.get(1).ctx("memory link")?,
            row.get(2).ctx("memory link")?,
        );
        self.approx_bytes += (key.len() + link.1.len()) as u64 + LINK_BYTES;
        self.links.entry(key).or_default().push(link);
        Ok(())
    }

    /// Drops what the index holds about nodes `ids` as nodes, containers, contained nodes,
    /// import targets, relations' ends and descendants (their edges' other ends are logged
    /// too, and re-read).
    fn forget_nodes(&mut self, ids: &[NodeId]) {
        let mut ancestors = HashSet::new();
        for &id in ids {
            if let Some(node) = self.nodes.remove(&id) {
                if self.ids.get(&node.key) == Some(&id) {
                    self.ids.remove(&node.key);
                }
                if let Some(path) = &node.file_path {
                    if let Some(of_file) = self.by_file.get_mut(path) {
                        of_file.retain(|&other| other != id);
                        if of_file.is_empty() {
                            self.by_file.remove(path);
                        }
                    }
                }
            }
            self.edges.remove(&id);
            for reach in self.closure.remove(&id).unwrap_or_default() {
                self.dead_path_ids += usize::from(reach.path_len);
                ancestors.insert(reach.ancestor);
            }
        }
        // Each ancestor's list once, whatever number of its descendants go (a replay may
        // name thousands under one ancestor).
        let forgotten: HashSet<NodeId> = ids.iter().copied().collect();
        for ancestor in ancestors {
            if let Some(descendants) = self.reached_from.get_mut(&ancestor) {
                descendants.retain(|d| !forgotten.contains(d));
                if descendants.is_empty() {
                    self.reached_from.remove(&ancestor);
                }
            }
        }
    }

    /// Copies the paths still in use into a fresh arena (replays leave the old ones behind).
    fn compact_paths(&mut self) {
        let mut paths = Vec::with_capacity(self.paths.len() - self.dead_path_ids);
        for reach in self.closure.values_mut().flatten() {
            let start = paths.len();
            paths.extend_from_slice(&self.paths[reach.path_range()]);
            reach.path_start = start as u32;
        }
        self.paths = paths;
        self.dead_path_ids = 0;
    }

    /// Node `id`'s edge ends in a canonical order: (other, outgoing, kind, layer, weight bits).
    fn edge_picture(&self, id: NodeId) -> Vec<(NodeId, bool, String, u8, u64)> {
        let mut ends: Vec<_> = self
            .edges
            .get(&id)
            .into_iter()
            .flatten()
            .map(|e| {
                let kind = self.kinds[usize::from(e.kind)].clone();
                (e.other, e.outgoing, kind, e.layer, e.weight.to_bits())
            })
            .collect();
        ends.sort();
        ends
    }

    /// Everything the index holds, in a canonical order: two indexes of the same graph give
    /// equal pictures however they got there (a load, or a load and replays).
    pub fn picture(&self) -> GraphPicture {
        let sorted = |v: Option<&Vec<NodeId>>| {
            let mut v = v.cloned().unwrap_or_default();
            v.sort_unstable();
            v
        };
        let mut nodes: Vec<_> = self
            .nodes
            .iter()
            .map(|(id, node)| {
                let mut reach: Vec<(NodeId, u8, u64, Vec<NodeId>)> = self
                    .closure
                    .get(id)
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        let path = self.paths[r.path_range()].to_vec();
                        (r.ancestor, r.depth, r.weight.to_bits(), path)
                    })
                    .collect();
                reach.sort();
                let mut links = self.links.get(&node.key).cloned().unwrap_or_default();
                links.sort();
                NodePicture {
                    id: *id,
                    node: format!("{node:?}"),
                    edges: self.edge_picture(*id),
                    reach,
                    reached_from: sorted(self.reached_from.get(id)),
                    links,
                }
            })
            .collect();
        nodes.sort_by_key(|n| n.id);
        let mut ids: Vec<(String, NodeId)> =
            self.ids.iter().map(|(k, v)| (k.clone(), *v)).collect();
        ids.sort();
        // Links on keys no node has (a memory on a file not indexed yet) count too.
        let mut loose_links: Vec<(String, Vec<(i64, String)>)> = self
            .links
            .iter()
            .filter(|(key, links)| !self.ids.contains_key(*key) && !links.is_empty())
            .map(|(key, links)| {
                let mut links = links.clone();
                links.sort();
                (key.clone(), links)
            })
            .collect();
        loose_links.sort();
        let mut files: Vec<(String, Vec<NodeId>)> = self
            .by_file
            .iter()
            .map(|(path, ids)| (path.clone(), sorted(Some(ids))))
            .collect();
        files.sort();
        GraphPicture {
            nodes,
            ids,
            files,
            loose_links,
        }
    }

    /// What depends on `target` within `depth` hops, and the memories on any of it: the
    /// answer of the SQL path for the same graph. The memories are read through `reader`, or
    /// from `memories` where it holds them.
    pub(crate) async fn impact(
        &self,
        reader: &mut Reader<'_>,
        memories: Option<&MemoryRows>,
        root: Option<&std::path::Path>,
        target: &str,
        depth: u32,
        options: &ImpactOptions,
    ) -> Result<Impact> {
        let target_id = target_keys(root, target)
            .iter()
            .find_map(|key| self.ids.get(key).copied())
            .ok_or_else(|| Error::not_found("graph node", target))?;
        let target_node = self.nodes[&target_id].clone();
        let seeds: Vec<(NodeId, String)> = self
            .seeds(target_id)
            .into_iter()
            .filter_map(|id| Some((id, self.nodes.get(&id)?.key.clone())))
            .collect();
        // A module's answer, or a much-depended-on file's, walks many closure rows: a caller
        // polling on a JS thread (see `node::error::promise_inline_first`) hands such an
        // answer to the runtime here.
        let rows_to_walk: usize = seeds
            .iter()
            .map(|(seed, _)| self.closure.get(seed).map_or(0, Vec::len))
            .sum();
        if rows_to_walk > INLINE_CLOSURE_ROWS {
            tokio::task::yield_now().await;
        }
        let layer_allowed = |ancestor: NodeId| match &options.layers {
            None => true,
            Some(layers) => self
                .nodes
                .get(&ancestor)
                .is_some_and(|n| layers.contains(&n.layer)),
        };
        let rows = seeds.iter().flat_map(|(seed, _)| {
            self.closure
                .get(seed)
                .into_iter()
                .flatten()
                .filter(|r| u32::from(r.depth) <= depth && layer_allowed(r.ancestor))
                .map(|r| IntoSeed {
                    ancestor: r.ancestor,
                    depth: u32::from(r.depth),
                    weight: r.weight,
                    path: PathRef::Ids(&self.paths[r.path_range()]),
                    seed: *seed,
                })
        });
        let (chosen, truncated) = choose_nearest(rows, &seeds, options.limit);
        let affected = affected_nodes(chosen, target_id, &seeds, |id| self.nodes.get(&id));
        let depth_of = attachment_depths(&seeds, &affected);
        let links: Vec<(i64, String, String)> = depth_of
            .keys()
            .flat_map(|key| {
                self.links
                    .get(*key)
                    .into_iter()
                    .flatten()
                    .map(|(seq, role)| (*seq, (*key).to_owned(), role.clone()))
            })
            .collect();
        let (memories, memories_truncated) =
            attached_memories(reader, links, &depth_of, options.memory_limit, memories).await?;
        Ok(Impact {
            target: target_node,
            affected,
            memories,
            truncated,
            memories_truncated,
        })
    }

    /// The ancestors (what reaches `key`) or descendants (what it reaches) within `max_depth`,
    /// nearest first: the answer of the SQL path (`read::closure_of`) for the same graph.
    pub(crate) fn reach(
        &self,
        key: &str,
        side: Side,
        max_depth: u32,
        limit: u32,
    ) -> Result<Subgraph> {
        check_limit(limit)?;
        let id = *self
            .ids
            .get(key)
            .ok_or_else(|| Error::not_found("graph node", key))?;
        let within = |r: &&Reach| u32::from(r.depth) <= max_depth;
        // (other end, its row, the closure row): rows whose other end is not a node of the
        // project are left out, as the SQL join leaves them.
        let mut found: Vec<(&GraphNode, &Reach)> = match side {
            Side::Ancestors => self
                .closure
                .get(&id)
                .into_iter()
                .flatten()
                .filter(within)
                .filter_map(|r| Some((self.nodes.get(&r.ancestor)?, r)))
                .collect(),
            Side::Descendants => self
                .reached_from
                .get(&id)
                .into_iter()
                .flatten()
                .filter_map(|d| Some((self.nodes.get(d)?, self.closure.get(d)?)))
                .flat_map(|(node, rows)| {
                    rows.iter()
                        .filter(move |r| r.ancestor == id)
                        .filter(within)
                        .map(move |r| (node, r))
                })
                .collect(),
        };
        // ORDER BY depth, weight DESC, key (a node has one row: the key breaks every tie).
        found.sort_unstable_by(|a, b| {
            (a.1.depth.cmp(&b.1.depth))
                .then(b.1.weight.total_cmp(&a.1.weight))
                .then(a.0.key.cmp(&b.0.key))
        });
        let truncated = found.len() > limit as usize;
        found.truncate(limit as usize);
        let nodes = found
            .into_iter()
            .map(|(node, r)| {
                let mut via: Vec<String> = self.paths[r.path_range()]
                    .iter()
                    .filter_map(|id| Some(self.nodes.get(id)?.key.clone()))
                    .collect();
                if side == Side::Ancestors {
                    // Stored paths run ancestor -> descendant; report them from the start out.
                    via.reverse();
                }
                ReachedNode {
                    node: node.clone(),
                    depth: u32::from(r.depth),
                    weight: r.weight,
                    via,
                }
            })
            .collect();
        Ok(Subgraph {
            start: Some(self.nodes[&id].clone()),
            nodes,
            edges: Vec::new(),
            truncated,
        })
    }

    /// `neighbours()` of `keys`: the answer of the SQL path (`rank::neighbours`) for the same
    /// graph, or `None` when the keys expand past [`MAX_EXPANDED`] rows, where the SQL path
    /// cuts its expansion (the caller asks the tables then).
    pub(crate) fn neighbours(
        &self,
        keys: &[String],
        options: &NeighbourOptions,
    ) -> Option<Vec<Neighbour>> {
        let nearest = self.expand(keys, options.include_contained)?;
        let (out, inward) = match options.direction {
            Direction::Out => (true, false),
            Direction::In => (false, true),
            Direction::Both => (true, true),
        };
        let kind_passes = |kind: &str| match &options.kinds {
            None => kind != "contains",
            Some(kinds) => kinds.iter().any(|k| k == kind),
        };
        let layer_passes = |layer: u8| options.layers.as_ref().is_none_or(|l| l.contains(&layer));
        let mut links = Vec::new();
        for (&inside, &(_, origin)) in &nearest {
            let origin_key = &self.nodes.get(&origin)?.key;
            for edge in self.edges.get(&inside).into_iter().flatten() {
                let followed = if edge.outgoing { out } else { inward };
                if followed
                    && !nearest.contains_key(&edge.other)
                    && layer_passes(edge.layer)
                    && kind_passes(&self.kinds[usize::from(edge.kind)])
                {
                    links.push(Link {
                        other: edge.other,
                        origin: origin_key.clone(),
                        weight: edge.weight,
                    });
                }
            }
        }
        let ranked = rank_links(links, options.limit);
        Some(
            ranked
                .into_iter()
                .filter_map(|(id, weight, edges, linked_to)| {
                    Some(Neighbour {
                        node: self.nodes.get(&id)?.clone(),
                        weight,
                        edges,
                        linked_to,
                    })
                })
                .collect(),
        )
    }

    /// The nodes `keys` stand for, each with the nearest given node containing it (itself when
    /// given; the lowest id among equally near ones) and its depth below it: the SQL path's
    /// `one`. `None` past [`MAX_EXPANDED`] rows of its `inside` (one per node, given node and
    /// depth).
    fn expand(
        &self,
        keys: &[String],
        include_contained: bool,
    ) -> Option<HashMap<NodeId, (u32, NodeId)>> {
        let mut given: Vec<NodeId> = keys
            .iter()
            .filter_map(|k| self.ids.get(k).copied())
            .collect();
        given.sort_unstable();
        given.dedup();
        let mut rows = 0usize;
        let mut nearest: HashMap<NodeId, (u32, NodeId)> = HashMap::new();
        for &origin in &given {
            let mut level = vec![origin];
            let mut depth = 0u32;
            while !level.is_empty() {
                rows += level.len();
                if rows > MAX_EXPANDED as usize {
                    return None;
                }
                for &id in &level {
                    let entry = nearest.entry(id).or_insert((depth, origin));
                    *entry = (*entry).min((depth, origin));
                }
                if !include_contained {
                    break;
                }
                let mut next: Vec<NodeId> =
                    level.iter().flat_map(|&id| self.contained(id)).collect();
                next.sort_unstable();
                next.dedup();
                level = next;
                depth += 1;
            }
        }
        Some(nearest)
    }

    /// For each of `files` (project-relative paths), the other files one edge away: an edge
    /// other than `contains`, either way, between any node of the file and a node of another
    /// file. The answer of `retrieval::neighbourhood::file_neighbours`'s SQL for the same graph.
    pub(crate) fn file_neighbours(&self, files: &[String]) -> HashMap<String, BTreeSet<String>> {
        let mut out: HashMap<String, BTreeSet<String>> = HashMap::new();
        for file in files {
            for id in self.by_file.get(file).into_iter().flatten() {
                for edge in self.edges.get(id).into_iter().flatten() {
                    if self.kinds[usize::from(edge.kind)] == "contains" {
                        continue;
                    }
                    let Some(path) = self
                        .nodes
                        .get(&edge.other)
                        .and_then(|n| n.file_path.as_ref())
                    else {
                        continue;
                    };
                    if path != file {
                        out.entry(file.clone()).or_default().insert(path.clone());
                    }
                }
            }
        }
        out
    }

    /// The target and everything it contains, and a package a `contains` edge of layer 2 puts
    /// it in when that package is imported as a whole (Go); past [`MAX_SEEDS`], the lowest ids.
    fn seeds(&self, target: NodeId) -> Vec<NodeId> {
        let mut seen = HashSet::from([target]);
        let mut out = vec![target];
        let mut queue = VecDeque::from([target]);
        while let Some(node) = queue.pop_front() {
            for child in self.contained(node) {
                if seen.insert(child) {
                    out.push(child);
                    queue.push_back(child);
                }
            }
        }
        let packages = self
            .ends(target, false, "contains")
            .filter(|e| e.layer == 2);
        for package in packages.map(|e| e.other) {
            let imported = self.ends(package, false, "imports").any(|e| e.layer == 1);
            if imported && seen.insert(package) {
                out.push(package);
            }
        }
        // Past the cap, the lowest ids, as the SQL path keeps.
        if out.len() > MAX_SEEDS as usize {
            out.sort_unstable();
            out.truncate(MAX_SEEDS as usize);
        }
        out
    }

    /// The ends of `id`'s edges of `kind` on its `outgoing` side (none for a kind no edge has).
    fn ends<'a>(
        &'a self,
        id: NodeId,
        outgoing: bool,
        kind: &str,
    ) -> impl Iterator<Item = &'a EdgeEnd> + 'a {
        let kind = self.kind_ids.get(kind).copied();
        self.edges
            .get(&id)
            .into_iter()
            .flatten()
            .filter(move |e| e.outgoing == outgoing && Some(e.kind) == kind)
    }

    /// What `id` contains directly (its `contains` edges, every layer).
    fn contained(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.ends(id, true, "contains").map(|e| e.other)
    }

    /// The keys of every node held, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.ids.keys().map(String::as_str)
    }

    /// Counts and an estimate of the heap bytes held.
    pub fn size(&self) -> GraphIndexSize {
        use std::mem::size_of;
        let map_entry = |key: usize, value: usize| key + value + 1;
        let node_bytes: usize = self
            .nodes
            .values()
            .map(|n| {
                n.key.capacity()
                    + n.kind.capacity()
                    + n.label.capacity()
                    + n.file_path.as_ref().map_or(0, String::capacity)
                    + n.metadata.to_string().len()
            })
            .sum::<usize>()
            + self.nodes.capacity() * map_entry(size_of::<NodeId>(), size_of::<GraphNode>())
            + self.ids.capacity() * map_entry(size_of::<String>(), size_of::<NodeId>())
            + self.ids.keys().map(String::capacity).sum::<usize>()
            + self.by_file.capacity() * map_entry(size_of::<String>(), size_of::<Vec<NodeId>>())
            + self
                .by_file
                .iter()
                .map(|(path, ids)| path.capacity() + ids.capacity() * size_of::<NodeId>())
                .sum::<usize>();
        let adjacency_bytes = self.edges.capacity()
            * map_entry(size_of::<NodeId>(), size_of::<Vec<EdgeEnd>>())
            + self
                .edges
                .values()
                .map(|v| v.capacity() * size_of::<EdgeEnd>())
                .sum::<usize>();
        let closure_bytes = self.closure.capacity()
            * map_entry(size_of::<NodeId>(), size_of::<Vec<Reach>>())
            + self
                .closure
                .values()
                .map(|v| v.capacity() * size_of::<Reach>())
                .sum::<usize>()
            + self.paths.capacity() * size_of::<NodeId>()
            + self.reached_from.capacity()
                * map_entry(size_of::<NodeId>(), size_of::<Vec<NodeId>>())
            + self
                .reached_from
                .values()
                .map(|v| v.capacity() * size_of::<NodeId>())
                .sum::<usize>();
        let link_bytes = self.links.capacity()
            * map_entry(size_of::<String>(), size_of::<Vec<(i64, String)>>())
            + self
                .links
                .iter()
                .map(|(k, v)| {
                    k.capacity()
                        + v.capacity() * size_of::<(i64, String)>()
                        + v.iter().map(|(_, r)| r.capacity()).sum::<usize>()
                })
                .sum::<usize>();
        GraphIndexSize {
            nodes: self.nodes.len(),
            closure_rows: self.closure.values().map(Vec::len).sum(),
            links: self.links.values().map(Vec::len).sum(),
            bytes: node_bytes + adjacency_bytes + closure_bytes + link_bytes,
            node_bytes,
            closure_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `contains` edge's end at its container.
    fn contains(other: NodeId) -> EdgeEnd {
        EdgeEnd {
            other,
            weight: 1.0,
            kind: 0,
            layer: 1,
            outgoing: true,
        }
    }

    /// A container holding `children` nodes (ids 1..=children), under key "root" (id 0).
    fn fan(children: i64) -> GraphIndex {
        let mut index = GraphIndex::default();
        index.ids.insert("root".into(), 0);
        index.kinds.push("contains".into());
        index.kind_ids.insert("contains".into(), 0);
        index
            .edges
            .insert(0, (1..=children).map(contains).collect());
        index
    }

    /// The expansion stops where the SQL path's `LIMIT` would cut it: up to
    /// [`MAX_EXPANDED`] rows it is whole, past them the tables answer; a `contains` cycle
    /// (which only a bound stops) is past them too.
    #[test]
    fn the_expansion_is_whole_or_left_to_the_tables() {
        let keys = ["root".to_owned()];
        let bound = i64::from(MAX_EXPANDED);
        let whole = fan(bound - 1)
            .expand(&keys, true)
            .expect("within the bound");
        assert_eq!(whole.len(), MAX_EXPANDED as usize);
        assert_eq!(whole[&0], (0, 0));
        assert_eq!(whole[&7], (1, 0));
        assert!(fan(bound).expand(&keys, true).is_none());
        assert_eq!(fan(bound).expand(&keys, false).unwrap().len(), 1);
        let mut cycle = fan(1);
        cycle.edges.insert(1, vec![contains(0)]);
        assert!(cycle.expand(&keys, true).is_none());
    }
}

#[cfg(test)]
mod plan_tests {
    use super::{CLOSURE_OF, EDGES_FROM, EDGES_TO, LINKS_OF, NODES_OF};
    use crate::store::plan::{list_drives, query_plan, scans_only_the_list};

    #[tokio::test]
    async fn replay_reads_loop_over_the_given_ids() {
        for sql in [
            NODES_OF.as_str(),
            EDGES_FROM.as_str(),
            EDGES_TO.as_str(),
            CLOSURE_OF,
            LINKS_OF,
        ] {
            let plan = query_plan(sql).await;
            assert!(list_drives(&plan), "{sql}\n{plan:#?}");
            assert!(scans_only_the_list(&plan), "{sql}\n{plan:#?}");
        }
    }
}

/// The memory budget: the rows' estimate against the measured size.
#[cfg(test)]
mod budget_tests {
    use super::*;

    /// A code-like graph of `files` files of 9 symbols each (`contains` edges, calls to the
    /// next file's symbols, closure rows two deep, memory links on files), written with SQL.
    async fn generated_graph(files: i64) -> (tempfile::TempDir, crate::store::Store) {
        use crate::store::{Store, StoreOptions};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("g.db"), &StoreOptions::default())
            .await
            .unwrap();
        let writer = store.writer().await;
        for sql in [
            "WITH RECURSIVE f(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM f WHERE i < ?1 - 1)
             INSERT INTO graph_nodes (id, project_id, key, layer, kind, label, file_path,
               source, metadata, created_at, updated_at)
             SELECT i * 10 + 1, 'p', 'src/module_' || i || '/component.ts', 1, 'file',
               'component.ts', 'src/module_' || i || '/component.ts', 'ast', '{}', 0, 0 FROM f",
            "WITH RECURSIVE f(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM f WHERE i < ?1 - 1),
               s(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM s WHERE j < 9)
             INSERT INTO graph_nodes (id, project_id, key, layer, kind, label, file_path,
               start_line, end_line, source, content_hash, metadata, created_at, updated_at)
             SELECT i * 10 + 1 + j, 'p',
               'src/module_' || i || '/component.ts:Component' || i || '.method' || j, 1,
               'method', 'method' || j, 'src/module_' || i || '/component.ts', j * 10,
               j * 10 + 8, 'ast', 'a1b2c3d4e5f60718', '{}', 0, 0 FROM f, s",
            "WITH RECURSIVE f(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM f WHERE i < ?1 - 1),
               s(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM s WHERE j < 9)
             INSERT INTO graph_edges (project_id, from_id, to_id, kind, layer, source,
               created_at, updated_at)
             SELECT 'p', i * 10 + 1, i * 10 + 1 + j, 'contains', 1, 'ast', 0, 0 FROM f, s
             UNION ALL
             SELECT 'p', i * 10 + 1 + j, (i + 1) * 10 + 1 + j, 'calls', 1, 'ast', 0, 0
             FROM f, s WHERE i < ?1 - 1",
            "INSERT INTO graph_closure (ancestor_id, descendant_id, depth, weight, path)
             SELECT from_id, to_id, 1, 1.0, '[]' FROM graph_edges WHERE kind = 'calls'
             UNION ALL
             SELECT a.from_id, b.to_id, 2, 2.0, '[' || a.to_id || ']'
             FROM graph_edges a JOIN graph_edges b ON b.from_id = a.to_id
             WHERE a.kind = 'calls' AND b.kind = 'calls'",
        ] {
            writer.execute(sql, [files]).await.unwrap();
        }
        drop(writer);
        (dir, store)
    }

    /// The rows' estimate stays within a quarter of the measured size, and a budget decides
    /// whether the index loads: under the graph's size it does not, above it it does.
    #[tokio::test]
    async fn the_estimate_follows_the_size_and_the_budget_holds() {
        let (_dir, store) = generated_graph(1_000).await;
        let reader = store.reader().await;
        let index = GraphIndex::read_rows(&reader, "p", 4, &|| true, u64::MAX)
            .await
            .unwrap()
            .unwrap();
        let measured = index.size().bytes as f64;
        let ratio = index.approx_bytes as f64 / measured;
        assert!(
            (0.8..=1.25).contains(&ratio),
            "estimate {} against {measured} bytes",
            index.approx_bytes
        );
        assert!(index.size().closure_rows > 10_000, "{:?}", index.size());
        let budget = |share: f64| (measured * share) as u64;
        let over = GraphIndex::read(&reader, "p", 4, &|| true, budget(0.8)).await;
        assert!(over.unwrap().is_none());
        let within = GraphIndex::read(&reader, "p", 4, &|| true, budget(1.4)).await;
        let within = within.unwrap().expect("loads within its budget");
        assert_eq!(within.approx_bytes(), within.size().bytes as u64);
    }
}
