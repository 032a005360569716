//! Impact analysis: everything that depends on a file, a symbol or any node, within the closure
//! depth, and the memories attached to any of it, from two indexed lookups (the closure's
//! descendant index and the memory-link index), never a walk of the graph.

use std::collections::{BTreeMap, BTreeSet};

use libsql::Connection;
use serde::Serialize;

use super::closure::{parse_path, NodeId};
use super::read::{keys_of, node, node_from_row, ReachedNode, NODE_COLUMNS};
use super::GraphNode;
use crate::error::{DbContext, Error, Result};
use crate::memory::input::confine_path;
use crate::memory::rows::{from_row, COLUMN_COUNT, SELECT_M};
use crate::memory::Memory;

/// Most nodes a target stands for (itself and what it contains).
const MAX_SEEDS: u32 = 20_000;

/// Options of [`impact`].
#[derive(Debug, Clone)]
pub struct ImpactOptions {
    /// Hops (default and at most: the closure depth).
    pub max_depth: Option<u32>,
    /// Most affected nodes returned, nearest first (default 500).
    pub limit: u32,
    /// Most memories returned (default 100).
    pub memory_limit: u32,
    /// Only affected nodes of these layers (None: all; memories still come from all).
    pub layers: Option<Vec<u8>>,
}

impl Default for ImpactOptions {
    fn default() -> Self {
        ImpactOptions {
            max_depth: None,
            limit: 500,
            memory_limit: 100,
            layers: None,
        }
    }
}

/// A memory attached to the target or to an affected node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachedMemory {
    /// The memory.
    pub memory: Memory,
    /// Key of the node it is attached to.
    pub node_key: String,
    /// How: `target` (its targetNodeId), `impacted` (in impactedNodeIds) or `file` (in
    /// relatedFiles).
    pub role: String,
    /// Hops from the target to that node (0: the target itself or, for a file, one of its
    /// symbols).
    pub depth: u32,
}

/// The answer of [`impact`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Impact {
    /// The node the target named.
    pub target: GraphNode,
    /// Nodes that depend on the target (for a file: on the file or any of its symbols),
    /// nearest first; `via` lists the path's nodes between each and the target.
    pub affected: Vec<ReachedNode>,
    /// Memories on the target, its symbols and the affected nodes, nearest first.
    pub memories: Vec<AttachedMemory>,
    /// True when `limit` cut `affected`.
    pub truncated: bool,
}

/// Finds the node a target names: a node key, a project path (absolute inside the root, or
/// relative), or `path:Qualified.name`.
pub(crate) async fn resolve_target(
    conn: &Connection,
    project_id: &str,
    root: Option<&std::path::Path>,
    target: &str,
) -> Result<(NodeId, GraphNode)> {
    if let Some(found) = node(conn, project_id, target).await? {
        return Ok(found);
    }
    if let Ok(path) = confine_path(target, root) {
        if let Some(found) = node(conn, project_id, &path).await? {
            return Ok(found);
        }
    }
    if let Some((path, symbol)) = target.rsplit_once(':') {
        if let Ok(path) = confine_path(path, root) {
            let key = super::code_layer::symbol_key(&path, symbol);
            if let Some(found) = node(conn, project_id, &key).await? {
                return Ok(found);
            }
        }
    }
    Err(Error::not_found("graph node", target))
}

/// What depends on `target`, and the memories on any of it.
pub(crate) async fn impact(
    conn: &Connection,
    project_id: &str,
    root: Option<&std::path::Path>,
    target: &str,
    depth: u32,
    options: &ImpactOptions,
) -> Result<Impact> {
    let (target_id, target_node) = resolve_target(conn, project_id, root, target).await?;
    // A node stands for itself and everything it contains (a file its symbols, a module its
    // files); a file whose package is imported as a whole (Go) also for that package.
    let mut seeds = Vec::new();
    let mut rows = conn
        .query(
            "WITH RECURSIVE inside(id) AS (
               SELECT ?1
               UNION
               SELECT e.to_id FROM graph_edges e JOIN inside ON e.from_id = inside.id
               WHERE e.kind = 'contains')
             SELECT id FROM inside
             UNION
             SELECT pm.from_id FROM graph_edges pm
             WHERE pm.to_id = ?1 AND pm.kind = 'contains' AND pm.layer = 2
               AND EXISTS (SELECT 1 FROM graph_edges i
                           WHERE i.to_id = pm.from_id AND i.kind = 'imports' AND i.layer = 1)
             LIMIT ?2",
            libsql::params![target_id, MAX_SEEDS],
        )
        .await
        .ctx("reading what the target contains")?;
    while let Some(row) = rows.next().await.ctx("reading what the target contains")? {
        seeds.push(row.get::<NodeId>(0).ctx("seed")?);
    }
    drop(rows);
    let seeds_json = serde_json::to_string(&seeds).unwrap_or_default();
    // SQLite takes the bare columns of a MIN() aggregate from the row holding the minimum, so
    // each ancestor comes with its nearest path to any seed.
    let sql = format!(
        "SELECT MIN(c.depth), c.weight, c.path, c.descendant_id, {NODE_COLUMNS}
         FROM graph_closure c JOIN graph_nodes n ON n.id = c.ancestor_id
         WHERE c.descendant_id IN (SELECT value FROM json_each(?1)) AND c.depth <= ?2
           AND c.ancestor_id NOT IN (SELECT value FROM json_each(?1))
           AND (?4 IS NULL OR n.layer IN (SELECT value FROM json_each(?4)))
         GROUP BY c.ancestor_id
         ORDER BY 1, 2 DESC, n.key
         LIMIT ?3"
    );
    let mut rows = conn
        .query(
            &sql,
            libsql::params![
                seeds_json.as_str(),
                depth,
                options.limit + 1,
                options
                    .layers
                    .as_ref()
                    .map(|l| serde_json::to_string(l).unwrap_or_default())
            ],
        )
        .await
        .ctx("reading the impact")?;
    let mut found = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading the impact")? {
        let depth: u32 = row.get(0).ctx("impact row")?;
        let weight: f64 = row.get(1).ctx("impact row")?;
        let mut via = parse_path(&row.get::<String>(2).ctx("impact row")?);
        let seed: NodeId = row.get(3).ctx("impact row")?;
        via.reverse();
        if seed != target_id {
            // Reached through something the target contains: name it on the way.
            via.insert(0, seed);
        }
        let (_, node) = node_from_row(&row, 4)?;
        found.push((node, depth, weight, via));
    }
    let truncated = found.len() as u32 > options.limit;
    found.truncate(options.limit as usize);
    let keys = keys_of(conn, found.iter().flat_map(|f| f.3.iter().copied())).await?;
    let affected: Vec<ReachedNode> = found
        .into_iter()
        .map(|(node, depth, weight, via)| ReachedNode {
            node,
            depth,
            weight,
            via: via.iter().filter_map(|id| keys.get(id).cloned()).collect(),
        })
        .collect();

    // Memories on the target, its seeds and every affected node.
    let mut depth_of: BTreeMap<String, u32> = BTreeMap::new();
    depth_of.insert(target_node.key.clone(), 0);
    for key in keys_of(conn, seeds.iter().copied()).await?.into_values() {
        depth_of.insert(key, 0);
    }
    for reached in &affected {
        depth_of
            .entry(reached.node.key.clone())
            .or_insert(reached.depth);
    }
    let node_keys: Vec<&String> = depth_of.keys().collect();
    let sql = format!(
        "SELECT {cols}, l.node_key, l.role FROM memory_links l
         JOIN memories m ON m.seq = l.memory_seq
         WHERE l.project_id = ?1 AND l.node_key IN (SELECT value FROM json_each(?2))
           AND m.deprecated = 0",
        cols = *SELECT_M
    );
    let mut rows = conn
        .query(
            &sql,
            (
                project_id,
                serde_json::to_string(&node_keys).unwrap_or_default(),
            ),
        )
        .await
        .ctx("reading attached memories")?;
    let mut memories = Vec::new();
    let mut seen = BTreeSet::new();
    while let Some(row) = rows.next().await.ctx("reading attached memories")? {
        let memory = from_row(&row)?;
        let node_key: String = row.get(COLUMN_COUNT).ctx("memory link")?;
        let role: String = row.get(COLUMN_COUNT + 1).ctx("memory link")?;
        let depth = depth_of.get(&node_key).copied().unwrap_or(0);
        memories.push(AttachedMemory {
            memory,
            node_key,
            role,
            depth,
        });
    }
    // Nearest attachment first; a memory on several nodes is listed once, at its nearest.
    memories.sort_by(|a, b| {
        (a.depth, role_rank(&a.role), &a.memory.id).cmp(&(
            b.depth,
            role_rank(&b.role),
            &b.memory.id,
        ))
    });
    memories.retain(|m| seen.insert(m.memory.id.clone()));
    memories.truncate(options.memory_limit as usize);
    Ok(Impact {
        target: target_node,
        affected,
        memories,
        truncated,
    })
}

fn role_rank(role: &str) -> u8 {
    match role {
        "target" => 0,
        "impacted" => 1,
        _ => 2,
    }
}
