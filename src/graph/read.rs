//! Graph reads: one node, a filtered BFS from a node over the edges, ancestors and descendants
//! from the closure table, and the subgraph induced by a set of nodes.

use std::collections::{BTreeSet, HashMap, VecDeque};

use libsql::{Connection, Row};
use serde::Serialize;

use super::closure::{parse_path, NodeId};
use super::model::{Direction, GraphEdge, GraphNode, GraphSource};
use crate::error::{DbContext, Error, Result};

/// Deepest traversal allowed.
pub const MAX_TRAVERSE_DEPTH: u32 = 10;
/// Most nodes a read returns.
pub const MAX_READ_NODES: u32 = 10_000;

/// Checks a read's `limit`.
pub(crate) fn check_limit(limit: u32) -> Result<()> {
    if limit == 0 || limit > MAX_READ_NODES {
        return Err(Error::invalid(format!(
            "limit must be within 1..={MAX_READ_NODES}, got {limit}"
        )));
    }
    Ok(())
}

/// Columns of a node row, in the order [`node_from_row`] reads them.
pub(crate) const NODE_COLUMNS: &str = "n.id, n.key, n.layer, n.kind, n.label, n.file_path, \
    n.start_line, n.end_line, n.source, n.confidence, n.metadata, n.created_at, n.updated_at, \
    n.stale_at";

/// Nodes by id `?1` (JSON), for the reader's statement cache.
pub(crate) static NODES_BY_ID: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {NODE_COLUMNS} FROM graph_nodes n WHERE n.id IN (SELECT value FROM json_each(?1))"
    )
});

/// The edges among the nodes `?1` (JSON ids). The `+` keeps `to_id` out of the index lookup:
/// with both ends looked up, SQLite probed the edge index once per (from, to) pair of the
/// list, n² probes (250 ms for 1,000 nodes); now once per node, its edges then filtered.
pub(crate) static SUBGRAPH_EDGES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {EDGE_COLUMNS} FROM graph_edges e
         JOIN graph_nodes f ON f.id = e.from_id JOIN graph_nodes t ON t.id = e.to_id
         WHERE e.from_id IN (SELECT value FROM json_each(?1))
           AND +e.to_id IN (SELECT value FROM json_each(?1))
         ORDER BY f.key, t.key, e.kind"
    )
});

/// A filter list as the JSON text a `json_each(?N)` parameter takes (None: no filter).
pub(crate) fn json_filter<T: serde::Serialize>(list: Option<&Vec<T>>) -> Option<String> {
    list.map(|l| serde_json::to_string(l).unwrap_or_default())
}

/// Reads a node row selected with [`NODE_COLUMNS`] starting at column `at`.
pub(crate) fn node_from_row(row: &Row, at: i32) -> Result<(NodeId, GraphNode)> {
    let c = |i: i32| at + i;
    // The JSON and the source are parsed from the row's own text, not copied out first.
    let metadata = row.get_str(c(10)).ctx("graph node")?;
    let source = row.get_str(c(8)).ctx("graph node")?;
    Ok((
        row.get(c(0)).ctx("graph node")?,
        GraphNode {
            key: row.get(c(1)).ctx("graph node")?,
            layer: row.get::<u32>(c(2)).ctx("graph node")? as u8,
            kind: row.get(c(3)).ctx("graph node")?,
            label: row.get(c(4)).ctx("graph node")?,
            file_path: row.get(c(5)).ctx("graph node")?,
            start_line: row.get(c(6)).ctx("graph node")?,
            end_line: row.get(c(7)).ctx("graph node")?,
            source: GraphSource::parse(source).unwrap_or(GraphSource::Agent),
            confidence: row.get(c(9)).ctx("graph node")?,
            metadata: serde_json::from_str(metadata).unwrap_or_default(),
            created_at: row.get(c(11)).ctx("graph node")?,
            updated_at: row.get(c(12)).ctx("graph node")?,
            stale_at: row.get(c(13)).ctx("graph node")?,
        },
    ))
}

const EDGE_COLUMNS: &str = "f.key, t.key, e.kind, e.layer, e.weight, e.source, e.confidence, \
    e.metadata, e.created_at, e.updated_at, e.stale_at";

/// Reads an edge selected with [`EDGE_COLUMNS`] starting at column `at`.
fn edge_from_row(row: &Row, at: i32) -> Result<GraphEdge> {
    let c = |i: i32| at + i;
    let metadata = row.get_str(c(7)).ctx("graph edge")?;
    let source = row.get_str(c(5)).ctx("graph edge")?;
    Ok(GraphEdge {
        from: row.get(c(0)).ctx("graph edge")?,
        to: row.get(c(1)).ctx("graph edge")?,
        kind: row.get(c(2)).ctx("graph edge")?,
        layer: row.get::<u32>(c(3)).ctx("graph edge")? as u8,
        weight: row.get(c(4)).ctx("graph edge")?,
        source: GraphSource::parse(source).unwrap_or(GraphSource::Agent),
        confidence: row.get(c(6)).ctx("graph edge")?,
        metadata: serde_json::from_str(metadata).unwrap_or_default(),
        created_at: row.get(c(8)).ctx("graph edge")?,
        updated_at: row.get(c(9)).ctx("graph edge")?,
        stale_at: row.get(c(10)).ctx("graph edge")?,
    })
}

/// One node, by key.
pub(crate) async fn node(
    conn: &Connection,
    project_id: &str,
    key: &str,
) -> Result<Option<(NodeId, GraphNode)>> {
    let sql =
        format!("SELECT {NODE_COLUMNS} FROM graph_nodes n WHERE n.project_id = ?1 AND n.key = ?2");
    let mut rows = conn
        .query(&sql, (project_id, key))
        .await
        .ctx("reading a graph node")?;
    match rows.next().await.ctx("reading a graph node")? {
        Some(row) => Ok(Some(node_from_row(&row, 0)?)),
        None => Ok(None),
    }
}

/// The node a key names, or `ENGRAM_NOT_FOUND`.
pub(crate) async fn require_node(
    conn: &Connection,
    project_id: &str,
    key: &str,
) -> Result<(NodeId, GraphNode)> {
    node(conn, project_id, key)
        .await?
        .ok_or_else(|| Error::not_found("graph node", key))
}

/// Options of a BFS over the edges.
#[derive(Debug, Clone)]
pub struct TraverseOptions {
    /// Hops from the start (default 2, at most [`MAX_TRAVERSE_DEPTH`]).
    pub max_depth: u32,
    /// Which way edges are followed.
    pub direction: Direction,
    /// Only edges of these kinds (None: all).
    pub kinds: Option<Vec<String>>,
    /// Only edges of these layers (None: all).
    pub layers: Option<Vec<u8>>,
    /// Most nodes returned, the start excluded (default 500).
    pub limit: u32,
}

impl Default for TraverseOptions {
    fn default() -> Self {
        TraverseOptions {
            max_depth: 2,
            direction: Direction::Out,
            kinds: None,
            layers: None,
            limit: 500,
        }
    }
}

/// A node reached by a traversal or a closure lookup.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReachedNode {
    /// The node.
    pub node: GraphNode,
    /// Hops from the start.
    pub depth: u32,
    /// Summed weight of the path's edges.
    pub weight: f64,
    /// Keys of the path's nodes between the start and this node (empty for a neighbour).
    pub via: Vec<String>,
}

/// Nodes and the edges among them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subgraph {
    /// The start node, for traversals (None for `subgraph`).
    pub start: Option<GraphNode>,
    /// Reached nodes, nearest first.
    pub nodes: Vec<ReachedNode>,
    /// Edges followed (traverse) or among the nodes (subgraph).
    pub edges: Vec<GraphEdge>,
    /// True when `limit` cut the result.
    pub truncated: bool,
}

/// Breadth-first search from `start` along the edges that pass the filters.
pub(crate) async fn traverse(
    conn: &Connection,
    project_id: &str,
    start: &str,
    options: &TraverseOptions,
) -> Result<Subgraph> {
    if options.max_depth == 0 || options.max_depth > MAX_TRAVERSE_DEPTH {
        return Err(Error::invalid(format!(
            "maxDepth must be within 1..={MAX_TRAVERSE_DEPTH}, got {}",
            options.max_depth
        )));
    }
    check_limit(options.limit)?;
    let (start_id, start_node) = require_node(conn, project_id, start).await?;
    let kinds = json_filter(options.kinds.as_ref());
    let layers = json_filter(options.layers.as_ref());
    // One statement per direction; the filters are parameters (NULL = no filter) and short
    // lists, so the (from_id, ...) and (to_id, kind) indexes still drive the lookups.
    let filter = "(?2 IS NULL OR e.kind IN (SELECT value FROM json_each(?2)))
                  AND (?3 IS NULL OR e.layer IN (SELECT value FROM json_each(?3)))";
    let out_sql = format!(
        "SELECT e.to_id, {EDGE_COLUMNS} FROM graph_edges e
         JOIN graph_nodes f ON f.id = e.from_id JOIN graph_nodes t ON t.id = e.to_id
         WHERE e.from_id = ?1 AND {filter} ORDER BY e.to_id, e.kind"
    );
    let in_sql = format!(
        "SELECT e.from_id, {EDGE_COLUMNS} FROM graph_edges e
         JOIN graph_nodes f ON f.id = e.from_id JOIN graph_nodes t ON t.id = e.to_id
         WHERE e.to_id = ?1 AND {filter} ORDER BY e.from_id, e.kind"
    );
    let mut statements = Vec::new();
    if matches!(options.direction, Direction::Out | Direction::Both) {
        statements.push(conn.prepare(&out_sql).await.ctx("preparing traversal")?);
    }
    if matches!(options.direction, Direction::In | Direction::Both) {
        statements.push(conn.prepare(&in_sql).await.ctx("preparing traversal")?);
    }

    // Per reached node: depth, weight, the node it was reached from.
    let mut reached: HashMap<NodeId, (u32, f64, NodeId)> = HashMap::new();
    let mut order: Vec<NodeId> = Vec::new();
    let mut edges = Vec::new();
    let mut edge_seen = BTreeSet::new();
    let mut queue = VecDeque::from([(start_id, 0u32, 0.0f64)]);
    let mut truncated = false;
    'bfs: while let Some((node, depth, weight)) = queue.pop_front() {
        if depth == options.max_depth {
            continue;
        }
        for stmt in statements.iter_mut() {
            stmt.reset();
            let mut rows = stmt
                .query(libsql::params![node, kinds.as_deref(), layers.as_deref()])
                .await
                .ctx("traversing the graph")?;
            while let Some(row) = rows.next().await.ctx("traversing the graph")? {
                let next: NodeId = row.get(0).ctx("graph edge")?;
                // The neighbour's id comes first, the edge columns follow.
                let edge = edge_from_row(&row, 1)?;
                let edge_weight = edge.weight;
                if edge_seen.insert((edge.from.clone(), edge.to.clone(), edge.kind.clone())) {
                    edges.push(edge);
                }
                if next == start_id || reached.contains_key(&next) {
                    continue;
                }
                if order.len() as u32 == options.limit {
                    truncated = true;
                    break 'bfs;
                }
                reached.insert(next, (depth + 1, weight + edge_weight, node));
                order.push(next);
                queue.push_back((next, depth + 1, weight + edge_weight));
            }
        }
    }

    let keys = keys_of(conn, order.iter().copied().chain([start_id])).await?;
    let nodes = nodes_by_id(conn, &order).await?;
    let mut out = Vec::with_capacity(order.len());
    for id in &order {
        let (depth, weight, mut parent) = reached[id];
        let mut via = Vec::new();
        while parent != start_id {
            via.push(keys[&parent].clone());
            parent = reached[&parent].2;
        }
        via.reverse();
        if let Some(node) = nodes.get(id) {
            out.push(ReachedNode {
                node: node.clone(),
                depth,
                weight,
                via,
            });
        }
    }
    // Keep only edges between nodes in the result (a cut traversal may have seen more).
    let inside: BTreeSet<&str> = out
        .iter()
        .map(|r| r.node.key.as_str())
        .chain([start_node.key.as_str()])
        .collect();
    edges.retain(|e| inside.contains(e.from.as_str()) && inside.contains(e.to.as_str()));
    Ok(Subgraph {
        start: Some(start_node),
        nodes: out,
        edges,
        truncated,
    })
}

/// Which end of the closure to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// What reaches the node (depends on it).
    Ancestors,
    /// What the node reaches (it depends on).
    Descendants,
}

/// Ancestors or descendants of a node within `max_depth` (at most the closure depth), nearest
/// first, from the closure table.
pub(crate) async fn closure_of(
    conn: &Connection,
    project_id: &str,
    key: &str,
    side: Side,
    max_depth: u32,
    limit: u32,
) -> Result<Subgraph> {
    check_limit(limit)?;
    let (id, start) = require_node(conn, project_id, key).await?;
    let (this_end, other_end) = match side {
        Side::Ancestors => ("descendant_id", "ancestor_id"),
        Side::Descendants => ("ancestor_id", "descendant_id"),
    };
    let sql = format!(
        "SELECT c.depth, c.weight, c.path, {NODE_COLUMNS} FROM graph_closure c
         JOIN graph_nodes n ON n.id = c.{other_end}
         WHERE c.{this_end} = ?1 AND c.depth <= ?2
         ORDER BY c.depth, c.weight DESC, n.key LIMIT ?3"
    );
    let mut rows = conn
        .query(&sql, (id, max_depth, limit + 1))
        .await
        .ctx("reading the closure")?;
    let mut found = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading the closure")? {
        let depth: u32 = row.get(0).ctx("closure row")?;
        let weight: f64 = row.get(1).ctx("closure row")?;
        let mut path = parse_path(&row.get::<String>(2).ctx("closure row")?);
        if side == Side::Ancestors {
            // Stored paths run ancestor -> descendant; report them from the start node out.
            path.reverse();
        }
        let (_, node) = node_from_row(&row, 3)?;
        found.push((node, depth, weight, path));
    }
    let truncated = found.len() as u32 > limit;
    found.truncate(limit as usize);
    let keys = keys_of(conn, found.iter().flat_map(|f| f.3.iter().copied())).await?;
    Ok(Subgraph {
        start: Some(start),
        nodes: found
            .into_iter()
            .map(|(node, depth, weight, path)| ReachedNode {
                node,
                depth,
                weight,
                via: path.iter().filter_map(|id| keys.get(id).cloned()).collect(),
            })
            .collect(),
        edges: Vec::new(),
        truncated,
    })
}

/// The nodes named by `keys` (unknown keys are skipped) and every edge among them.
pub(crate) async fn subgraph(
    conn: &Connection,
    project_id: &str,
    keys: &[String],
) -> Result<Subgraph> {
    if keys.len() > MAX_READ_NODES as usize {
        return Err(Error::invalid(format!(
            "subgraph takes at most {MAX_READ_NODES} keys, got {}",
            keys.len()
        )));
    }
    let keys_json = serde_json::to_string(keys).unwrap_or_default();
    let sql = format!(
        "SELECT {NODE_COLUMNS} FROM graph_nodes n
         WHERE n.project_id = ?1 AND n.key IN (SELECT value FROM json_each(?2)) ORDER BY n.key"
    );
    let mut rows = conn
        .query(&sql, (project_id, keys_json.as_str()))
        .await
        .ctx("reading a subgraph")?;
    let mut nodes = Vec::new();
    let mut ids = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading a subgraph")? {
        let (id, node) = node_from_row(&row, 0)?;
        ids.push(id);
        nodes.push(ReachedNode {
            node,
            depth: 0,
            weight: 0.0,
            via: Vec::new(),
        });
    }
    let ids_json = serde_json::to_string(&ids).unwrap_or_default();
    let mut rows = conn
        .query(&SUBGRAPH_EDGES, [ids_json])
        .await
        .ctx("reading a subgraph")?;
    let mut edges = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading a subgraph")? {
        edges.push(edge_from_row(&row, 0)?);
    }
    Ok(Subgraph {
        start: None,
        nodes,
        edges,
        truncated: false,
    })
}

/// Keys of node ids.
pub(crate) async fn keys_of(
    conn: &Connection,
    ids: impl IntoIterator<Item = NodeId>,
) -> Result<HashMap<NodeId, String>> {
    let ids: BTreeSet<NodeId> = ids.into_iter().collect();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let json = serde_json::to_string(&ids).unwrap_or_default();
    let mut rows = conn
        .query(
            "SELECT id, key FROM graph_nodes WHERE id IN (SELECT value FROM json_each(?1))",
            [json],
        )
        .await
        .ctx("reading node keys")?;
    let mut out = HashMap::with_capacity(ids.len());
    while let Some(row) = rows.next().await.ctx("reading node keys")? {
        out.insert(row.get(0).ctx("node key")?, row.get(1).ctx("node key")?);
    }
    Ok(out)
}

async fn nodes_by_id(conn: &Connection, ids: &[NodeId]) -> Result<HashMap<NodeId, GraphNode>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let json = serde_json::to_string(ids).unwrap_or_default();
    let sql = format!(
        "SELECT {NODE_COLUMNS} FROM graph_nodes n WHERE n.id IN (SELECT value FROM json_each(?1))"
    );
    let mut rows = conn.query(&sql, [json]).await.ctx("reading graph nodes")?;
    let mut out = HashMap::with_capacity(ids.len());
    while let Some(row) = rows.next().await.ctx("reading graph nodes")? {
        let (id, node) = node_from_row(&row, 0)?;
        out.insert(id, node);
    }
    Ok(out)
}

/// Sizes of a project's graph.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphStats {
    /// Nodes in layers 1, 2 and 3.
    pub nodes_by_layer: [u64; 3],
    /// Edges in layers 1, 2 and 3.
    pub edges_by_layer: [u64; 3],
    /// Rows of the closure table.
    pub closure_rows: u64,
    /// Depth cap the closure was built with.
    pub closure_depth: u32,
}

/// Counts a project's nodes, edges and closure rows.
pub(crate) async fn stats(conn: &Connection, project_id: &str) -> Result<GraphStats> {
    let mut out = GraphStats::default();
    for (sql, target) in [
        (
            "SELECT layer, COUNT(*) FROM graph_nodes WHERE project_id = ?1 GROUP BY layer",
            0,
        ),
        (
            "SELECT layer, COUNT(*) FROM graph_edges WHERE project_id = ?1 GROUP BY layer",
            1,
        ),
    ] {
        let mut rows = conn
            .query(sql, [project_id])
            .await
            .ctx("counting the graph")?;
        while let Some(row) = rows.next().await.ctx("counting the graph")? {
            let layer: usize = row.get::<u32>(0).ctx("graph count")? as usize;
            let count: u64 = row.get(1).ctx("graph count")?;
            if (1..=3).contains(&layer) {
                let slot = if target == 0 {
                    &mut out.nodes_by_layer
                } else {
                    &mut out.edges_by_layer
                };
                slot[layer - 1] = count;
            }
        }
    }
    let mut rows = conn
        .query(
            "SELECT (SELECT COUNT(*) FROM graph_closure WHERE ancestor_id IN
                       (SELECT id FROM graph_nodes WHERE project_id = ?1)),
                    (SELECT closure_depth FROM graph_state WHERE project_id = ?1)",
            [project_id],
        )
        .await
        .ctx("counting the closure")?;
    if let Some(row) = rows.next().await.ctx("counting the closure")? {
        out.closure_rows = row.get(0).ctx("closure count")?;
        out.closure_depth = row.get::<Option<u32>>(1).ctx("closure count")?.unwrap_or(0);
    }
    Ok(out)
}

/// Keys of a project's nodes, optionally of one kind and layer, in key order.
pub(crate) async fn keys(
    conn: &Connection,
    project_id: &str,
    kind: Option<&str>,
    layer: Option<u8>,
    limit: u32,
) -> Result<Vec<String>> {
    let mut rows = conn
        .query(
            "SELECT key FROM graph_nodes WHERE project_id = ?1
               AND (?2 IS NULL OR kind = ?2) AND (?3 IS NULL OR layer = ?3)
             ORDER BY key LIMIT ?4",
            libsql::params![project_id, kind, layer.map(u32::from), limit],
        )
        .await
        .ctx("listing graph nodes")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("listing graph nodes")? {
        out.push(row.get(0).ctx("node key")?);
    }
    Ok(out)
}

#[cfg(test)]
mod plan_tests {
    use super::SUBGRAPH_EDGES;
    use crate::store::plan::{mentions, query_plan};

    #[tokio::test]
    async fn subgraph_edges_probe_the_edge_index_once_per_node() {
        let plan = query_plan(&SUBGRAPH_EDGES).await;
        assert!(mentions(&plan, "(from_id=?)"), "{plan:#?}");
        assert!(!mentions(&plan, "to_id=?"), "{plan:#?}");
    }
}
