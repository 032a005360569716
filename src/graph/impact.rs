//! Impact analysis: everything that depends on a file, a symbol or any node, within the closure
//! depth, and the memories attached to any of it, from two indexed lookups (the closure's
//! descendant-ordered table and the memory-link index), never a walk of the graph. The
//! statements run through the reader's statement cache: preparing them costs more than
//! running them. The steps between the reads are functions of their own, shared with the
//! in-process graph index (`index.rs`), which answers from the same rows.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use serde::Serialize;

use super::closure::{parse_path, NodeId};
use super::memory_rows::{memories_by_seq, MemoryRows};
use super::read::{json_filter, node_from_row, ReachedNode, NODES_BY_ID, NODE_COLUMNS};
use super::GraphNode;
use crate::error::{DbContext, Error, Result};
use crate::memory::input::confine_path;
use crate::memory::rows::SELECT_M;
use crate::memory::Memory;
use crate::store::Reader;

/// Most nodes a target stands for (itself and what it contains); past it, the lowest ids.
pub(crate) const MAX_SEEDS: u32 = 20_000;

/// Options of [`impact`].
#[derive(Debug, Clone)]
pub struct ImpactOptions {
    /// Hops (default and at most: the closure depth).
    pub max_depth: Option<u32>,
    /// Most affected nodes returned, nearest first (default [`DEFAULT_LIMIT`]); memories
    /// are attached from the nodes kept.
    pub limit: u32,
    /// Most memories returned, nearest first (default [`DEFAULT_MEMORY_LIMIT`]).
    pub memory_limit: u32,
    /// Only affected nodes of these layers (None: all; memories still come from all).
    pub layers: Option<Vec<u8>>,
}

/// Affected nodes an answer holds unless asked for more. An answer crosses to JS as JSON at
/// a few microseconds per item, so its size is its latency there (docs/PERFORMANCE.md,
/// "impact()'s answer size"); the nearest hundred is what a screen or an agent's context
/// takes in, and `truncated` says when there are more.
pub const DEFAULT_LIMIT: u32 = 100;

/// Memories an answer holds unless asked for more: the nearest twenty (each is a whole
/// `Memory`, ~600 bytes of JSON); `memories_truncated` says when there are more.
pub const DEFAULT_MEMORY_LIMIT: u32 = 20;

impl Default for ImpactOptions {
    fn default() -> Self {
        ImpactOptions {
            max_depth: None,
            limit: DEFAULT_LIMIT,
            memory_limit: DEFAULT_MEMORY_LIMIT,
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
    /// nearest first (ties: heavier path, then older node); `via` lists the path's nodes
    /// between each and the target.
    pub affected: Vec<ReachedNode>,
    /// Memories on the target, its symbols and the affected nodes, nearest first.
    pub memories: Vec<AttachedMemory>,
    /// True when `limit` cut `affected`.
    pub truncated: bool,
    /// True when `memory_limit` cut `memories`.
    pub memories_truncated: bool,
}

// A cached statement whose LIMIT is a bare parameter is re-prepared by SQLite at every
// rebinding (it may plan by the value; measured: a third of impact's time), so LIMITs here
// are written `?N + 0`, an expression the planner does not look into.

/// One node by key, through the reader's statement cache.
static NODE_BY_KEY: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {NODE_COLUMNS} FROM graph_nodes n WHERE n.project_id = ?1 AND n.key = ?2")
});

async fn node_by_key(
    reader: &mut Reader<'_>,
    project_id: &str,
    key: &str,
) -> Result<Option<(NodeId, GraphNode)>> {
    let mut found = reader
        .query_cached(&NODE_BY_KEY, (project_id, key), |row| node_from_row(row, 0))
        .await?;
    Ok(found.pop())
}

/// The node keys a target may name, in the order they are tried: the target itself, as a
/// project path (absolute inside the root, or relative), and as `path:Qualified.name`.
pub(crate) fn target_keys(root: Option<&std::path::Path>, target: &str) -> Vec<String> {
    let mut keys = vec![target.to_owned()];
    if let Ok(path) = confine_path(target, root) {
        keys.push(path);
    }
    if let Some((path, symbol)) = target.rsplit_once(':') {
        if let Ok(path) = confine_path(path, root) {
            keys.push(super::code_layer::symbol_key(&path, symbol));
        }
    }
    keys
}

/// Finds the node a target names (see [`target_keys`]).
pub(crate) async fn resolve_target(
    reader: &mut Reader<'_>,
    project_id: &str,
    root: Option<&std::path::Path>,
    target: &str,
) -> Result<(NodeId, GraphNode)> {
    for key in target_keys(root, target) {
        if let Some(found) = node_by_key(reader, project_id, &key).await? {
            return Ok(found);
        }
    }
    Err(Error::not_found("graph node", target))
}

/// What a target stands for, with keys: itself and everything it contains (a file its
/// symbols, a module its files), and for a file whose package is imported as a whole (Go)
/// also that package. `?1` target id, `?2` most seeds.
const SEEDS: &str = "WITH RECURSIVE inside(id) AS (
       SELECT ?1
       UNION
       SELECT e.to_id FROM graph_edges e JOIN inside ON e.from_id = inside.id
       WHERE e.kind = 'contains'),
     seeds(id) AS (
       SELECT id FROM inside
       UNION
       SELECT pm.from_id FROM graph_edges pm
       WHERE pm.to_id = ?1 AND pm.kind = 'contains' AND pm.layer = 2
         AND EXISTS (SELECT 1 FROM graph_edges i
                     WHERE i.to_id = pm.from_id AND i.kind = 'imports' AND i.layer = 1)
       ORDER BY 1 LIMIT ?2 + 0)
     SELECT s.id, n.key FROM seeds s JOIN graph_nodes n ON n.id = s.id";

/// Closure rows into the seeds `?1` (JSON ids) within depth `?2` whose ancestor is of the
/// layers `?3` (JSON, or NULL for all): ancestor, depth, weight, path, seed. Choosing the
/// nearest row per ancestor and ordering them happens in Rust: SQLite's GROUP BY and sorts
/// cost more than the rows (three temp B-trees for ~100 rows).
const CLOSURE_INTO_SEEDS: &str = "SELECT c.ancestor_id, c.depth, c.weight, c.path, c.descendant_id
     FROM graph_closure c
     WHERE c.descendant_id IN (SELECT value FROM json_each(?1)) AND c.depth <= ?2
       AND (?3 IS NULL OR EXISTS (
             SELECT 1 FROM graph_nodes l WHERE l.id = c.ancestor_id
               AND l.layer IN (SELECT value FROM json_each(?3))))";

/// The nearest closure row of one ancestor.
pub(crate) struct Nearest {
    depth: u32,
    weight: f64,
    path: Vec<NodeId>,
    seed: NodeId,
}

/// Links from memories, forgotten ones included, to the node keys `?2` (JSON) of project `?1`.
/// Whether a memory is forgotten is read with the memory itself: checking it here cost a
/// lookup per link (~110 per file target), most of them of memories read again right after.
const MEMORY_LINKS: &str = "SELECT l.memory_seq, l.node_key, l.role FROM memory_links l
     WHERE l.project_id = ?1 AND l.node_key IN (SELECT value FROM json_each(?2))";

/// The memories not forgotten whose seqs are `?1` (JSON), each followed by its seq.
static MEMORIES_BY_SEQ: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {cols}, m.seq FROM memories m
         WHERE m.seq IN (SELECT value FROM json_each(?1)) AND m.deprecated = 0",
        cols = *SELECT_M
    )
});

/// The statements [`impact`] runs, in order: the target by key, its seeds, the closure rows
/// into them, the affected nodes, the memory links, the memories. For the graph bench, which
/// measures what SQLite alone takes to run them (the floor under `impact`). Not a stable API.
#[doc(hidden)]
pub fn statements() -> [&'static str; 6] {
    [
        NODE_BY_KEY.as_str(),
        SEEDS,
        CLOSURE_INTO_SEEDS,
        NODES_BY_ID.as_str(),
        MEMORY_LINKS,
        MEMORIES_BY_SEQ.as_str(),
    ]
}

/// What depends on `target`, and the memories on any of it, read from SQLite.
pub(crate) async fn impact(
    reader: &mut Reader<'_>,
    project_id: &str,
    root: Option<&std::path::Path>,
    target: &str,
    depth: u32,
    options: &ImpactOptions,
) -> Result<Impact> {
    let (target_id, target_node) = resolve_target(reader, project_id, root, target).await?;
    let seeds: Vec<(NodeId, String)> = reader
        .query_cached(SEEDS, (target_id, MAX_SEEDS), |row| {
            Ok((row.get(0).ctx("seed")?, row.get(1).ctx("seed")?))
        })
        .await?;
    let seed_ids: Vec<NodeId> = seeds.iter().map(|s| s.0).collect();
    let rows = reader
        .query_cached(
            CLOSURE_INTO_SEEDS,
            libsql::params![
                serde_json::to_string(&seed_ids).unwrap_or_default(),
                depth,
                json_filter(options.layers.as_ref())
            ],
            |row| {
                Ok((
                    row.get::<NodeId>(0).ctx("impact row")?,
                    row.get::<u32>(1).ctx("impact row")?,
                    row.get::<f64>(2).ctx("impact row")?,
                    row.get::<String>(3).ctx("impact row")?,
                    row.get::<NodeId>(4).ctx("impact row")?,
                ))
            },
        )
        .await?;
    let (chosen, truncated) = choose_nearest(
        rows.iter()
            .map(|(ancestor, depth, weight, path, seed)| IntoSeed {
                ancestor: *ancestor,
                depth: *depth,
                weight: *weight,
                path: PathRef::Text(path),
                seed: *seed,
            }),
        &seeds,
        options.limit,
    );
    // The nodes, and those on their paths (nearly always among them already).
    let nodes: HashMap<NodeId, GraphNode> = reader
        .query_cached(
            &NODES_BY_ID,
            [serde_json::to_string(&wanted_nodes(&chosen)).unwrap_or_default()],
            |row| node_from_row(row, 0),
        )
        .await?
        .into_iter()
        .collect();
    let affected = affected_nodes(chosen, target_id, &seeds, |id| nodes.get(&id));
    let depth_of = attachment_depths(&seeds, &affected);
    let node_keys: Vec<&str> = depth_of.keys().copied().collect();
    let links: Vec<(i64, String, String)> = reader
        .query_cached(
            MEMORY_LINKS,
            (
                project_id,
                serde_json::to_string(&node_keys).unwrap_or_default(),
            ),
            |row| {
                Ok((
                    row.get(0).ctx("memory link")?,
                    row.get(1).ctx("memory link")?,
                    row.get(2).ctx("memory link")?,
                ))
            },
        )
        .await?;
    let (memories, memories_truncated) =
        attached_memories(reader, links, &depth_of, options.memory_limit, None).await?;
    Ok(Impact {
        target: target_node,
        affected,
        memories,
        truncated,
        memories_truncated,
    })
}

/// A closure path as read: the stored text (parsed only for the rows kept) or ids.
pub(crate) enum PathRef<'a> {
    /// `graph_closure.path`, see [`parse_path`].
    Text(&'a str),
    /// Already parsed.
    Ids(&'a [NodeId]),
}

/// One closure row into a seed of the target.
pub(crate) struct IntoSeed<'a> {
    /// The node that depends on the seed.
    pub ancestor: NodeId,
    /// Hops from it to the seed.
    pub depth: u32,
    /// Summed weight of the path's edges.
    pub weight: f64,
    /// The path's interior, from the ancestor down.
    pub path: PathRef<'a>,
    /// The seed reached.
    pub seed: NodeId,
}

/// Per ancestor (not itself a seed) its nearest row (ties: the heavier, then the one into the
/// lowest seed id, so that the order rows come in never matters), sorted nearest first, then
/// heavier, then older, and cut at `limit`; with whether `limit` cut anything.
pub(crate) fn choose_nearest<'a>(
    rows: impl Iterator<Item = IntoSeed<'a>>,
    seeds: &[(NodeId, String)],
    limit: u32,
) -> (Vec<(NodeId, Nearest)>, bool) {
    let is_seed: HashSet<NodeId> = seeds.iter().map(|s| s.0).collect();
    let mut nearest: HashMap<NodeId, Nearest> = HashMap::new();
    for row in rows {
        if is_seed.contains(&row.ancestor) {
            continue;
        }
        let better = nearest
            .get(&row.ancestor)
            .is_none_or(|n| (row.depth, -row.weight, row.seed) < (n.depth, -n.weight, n.seed));
        if better {
            let path = match row.path {
                PathRef::Text(text) => parse_path(text),
                PathRef::Ids(ids) => ids.to_vec(),
            };
            nearest.insert(
                row.ancestor,
                Nearest {
                    depth: row.depth,
                    weight: row.weight,
                    path,
                    seed: row.seed,
                },
            );
        }
    }
    let mut chosen: Vec<(NodeId, Nearest)> = nearest.into_iter().collect();
    chosen.sort_by(|(a, x), (b, y)| {
        x.depth
            .cmp(&y.depth)
            .then(y.weight.total_cmp(&x.weight))
            .then(a.cmp(b))
    });
    let truncated = chosen.len() > limit as usize;
    chosen.truncate(limit as usize);
    (chosen, truncated)
}

/// The chosen nodes and those on their paths.
pub(crate) fn wanted_nodes(chosen: &[(NodeId, Nearest)]) -> HashSet<NodeId> {
    chosen
        .iter()
        .flat_map(|(id, n)| std::iter::once(*id).chain(n.path.iter().copied()))
        .collect()
}

/// The affected nodes in the chosen order, each with the keys on its path from the target;
/// a node `node` no longer finds (deleted since its closure row was read) is left out, and so
/// is a path node.
pub(crate) fn affected_nodes<'a>(
    chosen: Vec<(NodeId, Nearest)>,
    target_id: NodeId,
    seeds: &[(NodeId, String)],
    node: impl Fn(NodeId) -> Option<&'a GraphNode>,
) -> Vec<ReachedNode> {
    let seed_keys: HashMap<NodeId, &str> = seeds.iter().map(|(id, k)| (*id, k.as_str())).collect();
    let key_of = |id: NodeId| -> Option<String> {
        match node(id) {
            Some(found) => Some(found.key.clone()),
            None => seed_keys.get(&id).map(|k| (*k).to_owned()),
        }
    };
    let mut affected = Vec::with_capacity(chosen.len());
    for (id, n) in chosen {
        let Some(found) = node(id) else {
            continue;
        };
        // Stored paths run from the ancestor down; `via` reads from the target up.
        let mut via: Vec<String> = n.path.iter().rev().filter_map(|&p| key_of(p)).collect();
        if n.seed != target_id {
            // Reached through something the target contains: name it on the way.
            via.splice(0..0, key_of(n.seed));
        }
        affected.push(ReachedNode {
            node: found.clone(),
            depth: n.depth,
            weight: n.weight,
            via,
        });
    }
    affected
}

/// The depth of each node memories may hang on: the seeds 0, the affected nodes theirs.
pub(crate) fn attachment_depths<'a>(
    seeds: &'a [(NodeId, String)],
    affected: &'a [ReachedNode],
) -> HashMap<&'a str, u32> {
    let mut depth_of: HashMap<&str, u32> = seeds.iter().map(|(_, k)| (k.as_str(), 0)).collect();
    for reached in affected {
        depth_of
            .entry(reached.node.key.as_str())
            .or_insert(reached.depth);
    }
    depth_of
}

/// The memories of `links` (memory seq, node key, role) not forgotten, nearest first, each
/// once, at most `limit`. The links are ranked first, so only the memories returned are read
/// in full: from `cache` when given (the served index's), else from SQLite.
pub(crate) async fn attached_memories(
    reader: &mut Reader<'_>,
    links: Vec<(i64, String, String)>,
    depth_of: &HashMap<&str, u32>,
    limit: u32,
    cache: Option<&MemoryRows>,
) -> Result<(Vec<AttachedMemory>, bool)> {
    // Nearest attachment first (then target before impacted before file, then oldest); a
    // memory on several nodes is listed once, at its nearest.
    let mut ranked: Vec<(u32, u8, i64, String, String)> = links
        .into_iter()
        .map(|(seq, key, role)| {
            let depth = depth_of.get(key.as_str()).copied().unwrap_or(0);
            (depth, role_rank(&role), seq, key, role)
        })
        .collect();
    ranked.sort_unstable();
    let mut seen = HashSet::new();
    ranked.retain(|r| seen.insert(r.2));
    // Read in rank order, a limit's worth (and one more, to tell whether the limit cut the
    // list) at a time, until that many are memories that are not forgotten: nearly always
    // one read.
    let wanted = limit as usize + 1;
    let mut out = Vec::with_capacity(wanted.min(ranked.len()));
    let mut ranked = ranked.into_iter().peekable();
    while out.len() < wanted && ranked.peek().is_some() {
        let chunk: Vec<_> = ranked.by_ref().take(wanted - out.len()).collect();
        let seqs: Vec<i64> = chunk.iter().map(|r| r.2).collect();
        let mut by_seq: HashMap<i64, Memory> = match cache {
            Some(cache) => cache.read(reader, &seqs).await?,
            None => memories_by_seq(reader, MEMORIES_BY_SEQ.as_str(), &seqs).await?,
        };
        out.extend(
            chunk
                .into_iter()
                .filter_map(|(depth, _, seq, node_key, role)| {
                    by_seq.remove(&seq).map(|memory| AttachedMemory {
                        memory,
                        node_key,
                        role,
                        depth,
                    })
                }),
        );
    }
    let cut = out.len() > limit as usize;
    out.truncate(limit as usize);
    Ok((out, cut))
}

fn role_rank(role: &str) -> u8 {
    match role {
        "target" => 0,
        "impacted" => 1,
        _ => 2,
    }
}
