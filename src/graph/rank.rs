//! Ranking helpers for retrieval: the 1-hop neighbourhood of a set of nodes (a file or module
//! standing for what it contains), and degree or PageRank centrality over the subgraph a set
//! of keys induces. `contains` edges are structure, not relations: neither helper follows
//! them except to expand a container into its contents.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde::Serialize;

use super::closure::NodeId;
use super::model::Direction;
use super::read::{json_filter, node_from_row, NODES_BY_ID};
use super::GraphNode;
use crate::error::{DbContext, Error, Result};
use crate::store::Reader;

/// Most keys a ranking helper accepts.
pub const MAX_RANK_KEYS: usize = 10_000;
/// Most rows of the expansion (a node per container it is reached from, at each depth; a
/// module stands for every file and symbol in it).
pub(crate) const MAX_EXPANDED: u32 = 20_000;

/// Options of [`neighbours`].
#[derive(Debug, Clone)]
pub struct NeighbourOptions {
    /// `Out`: what the set depends on; `In`: what depends on it; `Both` (default).
    pub direction: Direction,
    /// Only edges of these kinds (None: all but `contains`).
    pub kinds: Option<Vec<String>>,
    /// Only edges of these layers (None: all).
    pub layers: Option<Vec<u8>>,
    /// A file or module also stands for what it contains (default true).
    pub include_contained: bool,
    /// Most neighbours returned, heaviest first (default 100).
    pub limit: u32,
}

impl Default for NeighbourOptions {
    fn default() -> Self {
        NeighbourOptions {
            direction: Direction::Both,
            kinds: None,
            layers: None,
            include_contained: true,
            limit: 100,
        }
    }
}

/// A node one edge away from the set.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Neighbour {
    /// The node.
    pub node: GraphNode,
    /// Summed weight of the edges between it and the set (a call made three times weighs 3).
    pub weight: f64,
    /// Number of those edges.
    pub edges: u32,
    /// Keys of the set's members it is linked to (the given keys, not their contents).
    pub linked_to: Vec<String>,
}

/// Expands keys `?2` (JSON) of project `?1` to themselves and, when `?3` is 1, everything
/// they contain; `one` holds each node once with the nearest given node containing it
/// (itself when given; the lowest id among equally near ones), so a file given with its
/// module is not counted twice.
const EXPANDED: &str = "WITH RECURSIVE
     given(id) AS (
       SELECT id FROM graph_nodes
       WHERE project_id = ?1 AND key IN (SELECT value FROM json_each(?2))),
     inside(id, origin, depth) AS (
       SELECT id, id, 0 FROM given
       UNION
       SELECT e.to_id, inside.origin, inside.depth + 1
       FROM graph_edges e JOIN inside ON e.from_id = inside.id
       WHERE ?3 = 1 AND e.kind = 'contains'
       LIMIT ?4 + 0),
     one(id, origin) AS MATERIALIZED (
       SELECT id, origin FROM (
         SELECT id, origin,
                ROW_NUMBER() OVER (PARTITION BY id ORDER BY depth, origin) AS nth
         FROM inside)
       WHERE nth = 1)";

/// Edges between the expanded set and the rest, one row per edge: the neighbour, the key of
/// the given node it links to, the weight. `one` is materialised once and drives both edge
/// lookups (`CROSS JOIN` fixes the order): without statistics the planner otherwise scanned
/// the whole edge table for the outgoing half (15 ms a call at 108k edges). `?5` 1 to follow edges out, `?6` 1 to follow them
/// in, `?7` kinds (JSON or NULL: all but contains), `?8` layers (JSON or NULL).
static NEIGHBOUR_LINKS: LazyLock<String> = LazyLock::new(|| {
    let filter = "(CASE WHEN ?7 IS NULL THEN e.kind <> 'contains'
                        ELSE e.kind IN (SELECT value FROM json_each(?7)) END)
                  AND (?8 IS NULL OR e.layer IN (SELECT value FROM json_each(?8)))";
    format!(
        "{EXPANDED},
         links(other, origin, weight) AS (
           SELECT e.to_id, s.origin, e.weight FROM one s CROSS JOIN graph_edges e ON e.from_id = s.id
           WHERE ?5 = 1 AND {filter}
           UNION ALL
           SELECT e.from_id, s.origin, e.weight FROM one s CROSS JOIN graph_edges e ON e.to_id = s.id
           WHERE ?6 = 1 AND {filter})
         SELECT l.other, g.key, l.weight
         FROM links l JOIN graph_nodes g ON g.id = l.origin
         WHERE l.other NOT IN (SELECT id FROM one)"
    )
});

/// Checks the number of keys a ranking helper is given.
pub(crate) fn check_keys(keys: &[String]) -> Result<()> {
    if keys.len() > MAX_RANK_KEYS {
        return Err(Error::invalid(format!(
            "at most {MAX_RANK_KEYS} keys, got {}",
            keys.len()
        )));
    }
    Ok(())
}

/// The nodes one edge away from `keys` (unknown keys are skipped), heaviest link first.
pub(crate) async fn neighbours(
    reader: &mut Reader<'_>,
    project_id: &str,
    keys: &[String],
    options: &NeighbourOptions,
) -> Result<Vec<Neighbour>> {
    check_keys(keys)?;
    super::read::check_limit(options.limit)?;
    let (out, inward) = match options.direction {
        Direction::Out => (1, 0),
        Direction::In => (0, 1),
        Direction::Both => (1, 1),
    };
    let links: Vec<Link> = reader
        .query_cached(
            &NEIGHBOUR_LINKS,
            libsql::params![
                project_id,
                serde_json::to_string(keys).unwrap_or_default(),
                options.include_contained as i32,
                MAX_EXPANDED,
                out,
                inward,
                json_filter(options.kinds.as_ref()),
                json_filter(options.layers.as_ref()),
            ],
            |row| {
                Ok(Link {
                    other: row.get(0).ctx("neighbour")?,
                    origin: row.get(1).ctx("neighbour")?,
                    weight: row.get(2).ctx("neighbour")?,
                })
            },
        )
        .await?;
    let ranked = rank_links(links, options.limit);
    let ids: Vec<NodeId> = ranked.iter().map(|r| r.0).collect();
    let mut nodes: HashMap<NodeId, GraphNode> = reader
        .query_cached(
            &NODES_BY_ID,
            [serde_json::to_string(&ids).unwrap_or_default()],
            |row| node_from_row(row, 0),
        )
        .await?
        .into_iter()
        .collect();
    Ok(ranked
        .into_iter()
        .filter_map(|(id, weight, edges, linked)| {
            nodes.remove(&id).map(|node| Neighbour {
                node,
                weight,
                edges,
                linked_to: linked.into_iter().collect(),
            })
        })
        .collect())
}

/// One edge between the expanded set and a node outside it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Link {
    /// The node outside.
    pub other: NodeId,
    /// Key of the given node the edge's end inside stands for.
    pub origin: String,
    /// The edge's weight.
    pub weight: f64,
}

/// A ranked neighbour: its id, summed weight, edge count and the keys it links to (sorted).
pub(crate) type RankedNeighbour = (NodeId, f64, u32, Vec<String>);

/// Ranks `links` (in any order) by neighbour, heaviest first, the ties going to more of the
/// set linked, then the older node; the best `limit`. The tables' and the graph index's
/// answers go through here, and the weights are summed in one order whatever order the links
/// came in, so the two agree to the bit.
pub(crate) fn rank_links(mut links: Vec<Link>, limit: u32) -> Vec<RankedNeighbour> {
    links.sort_by(|a, b| {
        (a.other, &a.origin)
            .cmp(&(b.other, &b.origin))
            .then(a.weight.total_cmp(&b.weight))
    });
    let mut ranked: Vec<RankedNeighbour> = Vec::new();
    for link in links {
        match ranked.last_mut() {
            Some(last) if last.0 == link.other => {
                last.1 += link.weight;
                last.2 += 1;
                if last.3.last() != Some(&link.origin) {
                    last.3.push(link.origin);
                }
            }
            _ => ranked.push((link.other, link.weight, 1, vec![link.origin])),
        }
    }
    ranked.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(b.3.len().cmp(&a.3.len()))
            .then(a.0.cmp(&b.0))
    });
    ranked.truncate(limit as usize);
    ranked
}

/// How [`centrality`] scores nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CentralityMethod {
    /// Summed weight of a node's edges within the subgraph (in and out), divided by the
    /// largest such sum, so the best connected node scores 1.
    Degree,
    /// Weighted PageRank along the edges (a node depended upon by important nodes is
    /// important); scores sum to 1.
    PageRank {
        /// Probability of following an edge rather than jumping (0..1, usually 0.85).
        damping: f64,
        /// Most power iterations.
        max_iterations: u32,
    },
}

impl Default for CentralityMethod {
    fn default() -> Self {
        CentralityMethod::PageRank {
            damping: 0.85,
            max_iterations: 100,
        }
    }
}

/// Options of [`centrality`].
#[derive(Debug, Clone, Default)]
pub struct CentralityOptions {
    /// Degree or PageRank (default PageRank, damping 0.85).
    pub method: CentralityMethod,
    /// Only edges of these kinds (None: all but `contains`).
    pub kinds: Option<Vec<String>>,
    /// Only edges of these layers (None: all).
    pub layers: Option<Vec<u8>>,
}

/// A node's centrality.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeScore {
    /// The node's key.
    pub key: String,
    /// Its score (see [`CentralityMethod`]).
    pub score: f64,
}

/// Nodes of keys `?2` (JSON) in project `?1`, and the edges among them that pass the kinds
/// `?3` and layers `?4` filters, as (from, to, weight) rows after the (id, key, NULL) rows.
/// `+e.to_id`: one edge-index probe per node, not one per pair of nodes (see
/// `read::SUBGRAPH_EDGES`).
const SUBGRAPH_EDGES: &str = "WITH ids(id, key) AS (
       SELECT id, key FROM graph_nodes
       WHERE project_id = ?1 AND key IN (SELECT value FROM json_each(?2)))
     SELECT id, key, NULL FROM ids
     UNION ALL
     SELECT e.from_id, e.to_id, e.weight FROM graph_edges e
     WHERE e.from_id IN (SELECT id FROM ids) AND +e.to_id IN (SELECT id FROM ids)
       AND (CASE WHEN ?3 IS NULL THEN e.kind <> 'contains'
                 ELSE e.kind IN (SELECT value FROM json_each(?3)) END)
       AND (?4 IS NULL OR e.layer IN (SELECT value FROM json_each(?4)))";

/// Centrality of the nodes named by `keys` (unknown keys skipped) within the subgraph they
/// induce, best first.
pub(crate) async fn centrality(
    reader: &mut Reader<'_>,
    project_id: &str,
    keys: &[String],
    options: &CentralityOptions,
) -> Result<Vec<NodeScore>> {
    check_keys(keys)?;
    if let CentralityMethod::PageRank {
        damping,
        max_iterations,
    } = options.method
    {
        if !(damping > 0.0 && damping < 1.0) || max_iterations == 0 || max_iterations > 1_000 {
            return Err(Error::invalid(format!(
                "PageRank needs 0 < damping < 1 and 1..=1000 iterations, got {damping} and \
                 {max_iterations}"
            )));
        }
    }
    enum Row {
        Node(NodeId, String),
        Edge(NodeId, NodeId, f64),
    }
    let rows = reader
        .query_cached(
            SUBGRAPH_EDGES,
            libsql::params![
                project_id,
                serde_json::to_string(keys).unwrap_or_default(),
                json_filter(options.kinds.as_ref()),
                json_filter(options.layers.as_ref()),
            ],
            |row| {
                let a: NodeId = row.get(0).ctx("subgraph")?;
                Ok(match row.get::<Option<f64>>(2).ctx("subgraph")? {
                    None => Row::Node(a, row.get(1).ctx("subgraph")?),
                    Some(weight) => Row::Edge(a, row.get(1).ctx("subgraph")?, weight),
                })
            },
        )
        .await?;
    let mut index: HashMap<NodeId, usize> = HashMap::new();
    let mut node_keys = Vec::new();
    let mut edges = Vec::new();
    for row in rows {
        match row {
            Row::Node(id, key) => {
                index.insert(id, node_keys.len());
                node_keys.push(key);
            }
            Row::Edge(from, to, weight) => edges.push((from, to, weight)),
        }
    }
    let edges: Vec<(usize, usize, f64)> = edges
        .into_iter()
        .filter_map(|(f, t, w)| Some((*index.get(&f)?, *index.get(&t)?, w)))
        .collect();
    let scores = match options.method {
        CentralityMethod::Degree => degree(node_keys.len(), &edges),
        CentralityMethod::PageRank {
            damping,
            max_iterations,
        } => pagerank(node_keys.len(), &edges, damping, max_iterations),
    };
    let mut out: Vec<NodeScore> = node_keys
        .into_iter()
        .zip(scores)
        .map(|(key, score)| NodeScore { key, score })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
    Ok(out)
}

/// Weighted degree (in + out) of `n` nodes, divided by the largest (all 0 without edges).
pub fn degree(n: usize, edges: &[(usize, usize, f64)]) -> Vec<f64> {
    let mut sums = vec![0.0; n];
    for &(from, to, weight) in edges {
        sums[from] += weight;
        sums[to] += weight;
    }
    let max = sums.iter().copied().fold(0.0, f64::max);
    if max > 0.0 {
        sums.iter_mut().for_each(|s| *s /= max);
    }
    sums
}

/// Weighted PageRank of `n` nodes by power iteration: each node passes `damping` of its
/// score along its out-edges in proportion to their weight; a node without out-edges spreads
/// its score over every node (so scores keep summing to 1). Stops when no score moves by
/// more than 1e-9, or after `max_iterations`.
pub fn pagerank(
    n: usize,
    edges: &[(usize, usize, f64)],
    damping: f64,
    max_iterations: u32,
) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let mut out_weight = vec![0.0; n];
    for &(from, _, weight) in edges {
        out_weight[from] += weight;
    }
    let uniform = 1.0 / n as f64;
    let mut rank = vec![uniform; n];
    let mut next = vec![0.0; n];
    for _ in 0..max_iterations {
        let dangling: f64 = (0..n)
            .filter(|&i| out_weight[i] == 0.0)
            .map(|i| rank[i])
            .sum();
        let base = (1.0 - damping) * uniform + damping * dangling * uniform;
        next.iter_mut().for_each(|v| *v = base);
        for &(from, to, weight) in edges {
            next[to] += damping * rank[from] * weight / out_weight[from];
        }
        let moved = rank
            .iter()
            .zip(&next)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        std::mem::swap(&mut rank, &mut next);
        if moved < 1e-9 {
            break;
        }
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn pagerank_of_a_cycle_is_uniform_and_sums_to_one() {
        let edges = [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0)];
        let rank = pagerank(3, &edges, 0.85, 100);
        assert!(close(&rank, &[1.0 / 3.0; 3]), "{rank:?}");
    }

    #[test]
    fn pagerank_satisfies_its_equations_on_a_chain_with_a_dangling_end() {
        // a -> b; b has no out-edge, so its score is spread over both: with d = 0.85 and
        // n = 2, a = 0.075 + 0.425 b and b = 0.075 + 0.425 b + 0.85 a.
        let rank = pagerank(2, &[(0, 1, 1.0)], 0.85, 1_000);
        let (a, b) = (rank[0], rank[1]);
        assert!((a + b - 1.0).abs() < 1e-9, "{rank:?}");
        assert!((a - (0.075 + 0.425 * b)).abs() < 1e-6, "{rank:?}");
        assert!(
            (b - (0.075 + 0.425 * b + 0.85 * a)).abs() < 1e-6,
            "{rank:?}"
        );
    }

    #[test]
    fn pagerank_ranks_the_hub_of_a_star_first_and_weights_edges() {
        // Three leaves depend on node 0; leaf 3 depends on node 4 with triple weight.
        let edges = [(1, 0, 1.0), (2, 0, 1.0), (3, 0, 1.0), (3, 4, 3.0)];
        let rank = pagerank(5, &edges, 0.85, 100);
        assert!(rank[0] > rank[4] && rank[4] > rank[1], "{rank:?}");
        assert!((rank.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn degree_is_weighted_and_normalised() {
        let edges = [(0, 1, 1.0), (1, 2, 2.0)];
        assert!(close(&degree(4, &edges), &[1.0 / 3.0, 1.0, 2.0 / 3.0, 0.0]));
        assert!(close(&degree(2, &[]), &[0.0, 0.0]));
    }
}

#[cfg(test)]
mod plan_tests {
    use super::SUBGRAPH_EDGES;
    use crate::store::plan::{mentions, query_plan};

    /// Both halves of the neighbour links look their edges up by the expanded nodes.
    #[tokio::test]
    async fn neighbour_links_look_edges_up_by_node() {
        let plan = query_plan(&super::NEIGHBOUR_LINKS).await;
        assert!(!mentions(&plan, "SCAN e"), "{plan:#?}");
        assert!(mentions(&plan, "MATERIALIZE one"), "{plan:#?}");
        assert!(
            mentions(&plan, "e USING INDEX graph_edges_to (to_id=?)"),
            "{plan:#?}"
        );
    }

    #[tokio::test]
    async fn subgraph_edges_probe_the_edge_index_once_per_node() {
        let plan = query_plan(SUBGRAPH_EDGES).await;
        assert!(mentions(&plan, "(from_id=?)"), "{plan:#?}");
        assert!(!mentions(&plan, "to_id=?"), "{plan:#?}");
    }
}
