//! The closure table: for every node, the nodes it reaches within the project's depth cap over
//! transitive edges, each with the length, summed weight and interior of one shortest path.
//!
//! Maintained incrementally, in the transaction that changes the edges, from the set of
//! *hops* (ordered node pairs joined by at least one transitive edge) whose existence or
//! weight changed:
//!
//! 1. Removal. A row whose stored path does not use a changed hop is still a valid path, and
//!    removing hops never shortens anything, so it stays exact. Rows that do use one are found
//!    among the pairs (a, d) with a reaching u and v reaching d at exactly
//!    `depth(a,u) + 1 + depth(v,d)`, and recomputed by a bounded BFS from a over the graph
//!    without the changed hops.
//! 2. Insertion. Each new or re-weighted hop (u, v) is then added on top of that exact closure,
//!    one at a time: every (a, d) with a reaching u and v reaching d within the cap gets the
//!    path through (u, v) if it is shorter than what it has.
//!
//! Big changes (a cold index, a cap change, a write of more than [`REBUILD_THRESHOLD`] hops)
//! leave the closure *pending* instead ([`mark_pending`]: no rows, `graph_state.closure_depth`
//! = [`PENDING`]), so the write that made them does not pay for ~140,000 row inserts (CPython's
//! cold index: 0.3-0.6 s of a single-core tail). It is built from an in-memory adjacency, which
//! is far cheaper than per-hop propagation at that size, by the first of:
//!
//! - the engine's idle-time work after the write (`graph::settle_closure_when_idle`);
//! - a read of the closure from the tables (`graph::settle_closure`, before the SQL paths of
//!   `impact()`, `reach()` and `stats()`);
//! - the next graph write, which rebuilds at its end ([`rebuild`], logged as a whole-project
//!   change) unless it is wide too.
//!
//! The in-process graph index never waits for it: a load that finds the closure pending
//! computes the same rows from the edges it loaded ([`rows_in_memory`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use libsql::{Connection, Statement};

use crate::error::{DbContext, Result};

/// A node's row id.
pub(crate) type NodeId = i64;

/// The SQL condition on `graph_edges` that selects transitive edges (see
/// [`super::model::NON_TRANSITIVE_KINDS`]).
pub(crate) const TRANSITIVE_EDGE: &str = "kind <> 'contains'";

/// More changed hops than this in one write rebuild the closure instead of propagating.
pub(crate) const REBUILD_THRESHOLD: usize = 2_000;

/// A hop whose weight changed in a write: `before`/`after` are the hop's weight (the largest of
/// its transitive edges') before and after, `None` when there was / is no such edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HopChange {
    pub from: NodeId,
    pub to: NodeId,
    pub before: Option<f64>,
    pub after: Option<f64>,
}

/// One closure row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reach {
    pub depth: u32,
    pub weight: f64,
    /// Interior nodes of the path, in order (empty for one hop).
    pub interior: Vec<NodeId>,
}

/// The current weight of hop (from, to), if any transitive edge joins them.
pub(crate) async fn hop_weight(conn: &Connection, from: NodeId, to: NodeId) -> Result<Option<f64>> {
    let sql = format!(
        "SELECT MAX(weight) FROM graph_edges WHERE from_id = ?1 AND to_id = ?2 AND {TRANSITIVE_EDGE}"
    );
    let mut rows = conn.query(&sql, (from, to)).await.ctx("reading a hop")?;
    let row = rows.next().await.ctx("reading a hop")?;
    Ok(match row {
        Some(row) => row.get::<Option<f64>>(0).ctx("reading a hop")?,
        None => None,
    })
}

/// Brings the closure up to date after `changes` (hops whose weight differs from before);
/// returns the descendants whose rows it wrote, for `graph_log`.
pub(crate) async fn apply(
    conn: &Connection,
    cap: u32,
    changes: &[HopChange],
) -> Result<BTreeSet<NodeId>> {
    let changes: Vec<HopChange> = changes
        .iter()
        .copied()
        .filter(|c| c.before != c.after)
        .collect();
    if changes.is_empty() {
        return Ok(BTreeSet::new());
    }
    let changed: BTreeSet<(NodeId, NodeId)> = changes.iter().map(|c| (c.from, c.to)).collect();
    let mut adjacency = Adjacency::new(conn, changed.clone()).await?;

    // 1. Rows through a removed or re-weighted hop, recomputed without the changed hops.
    let mut affected: BTreeMap<NodeId, BTreeSet<NodeId>> = BTreeMap::new();
    for change in changes.iter().filter(|c| c.before.is_some()) {
        for (ancestor, descendant) in rows_through(conn, change.from, change.to).await? {
            affected.entry(ancestor).or_default().insert(descendant);
        }
    }
    let mut writer = RowWriter::new(conn).await?;
    if !affected.is_empty() {
        for (ancestor, descendants) in &affected {
            let reach = adjacency.bfs(*ancestor, cap).await?;
            for descendant in descendants {
                match reach.get(descendant) {
                    Some(r) => writer.set(*ancestor, *descendant, r).await?,
                    None => writer.delete(*ancestor, *descendant).await?,
                }
            }
        }
    }

    // 2. New and re-weighted hops, one at a time on top of an exact closure.
    for change in &changes {
        let Some(weight) = change.after else { continue };
        insert_hop(conn, &mut writer, cap, change.from, change.to, weight).await?;
    }
    Ok(writer.touched)
}

/// Writes `graph_log` rows: one per node in `nodes`, or one naming the whole project (`None`,
/// after a rebuild).
pub(crate) async fn log_changes(
    conn: &Connection,
    project_id: &str,
    nodes: Option<&BTreeSet<NodeId>>,
) -> Result<()> {
    match nodes {
        None => conn
            .execute(
                "INSERT INTO graph_log (project_id, node_id) VALUES (?1, NULL)",
                [project_id],
            )
            .await
            .ctx("logging a closure rebuild")?,
        Some(ids) if ids.is_empty() => return Ok(()),
        Some(ids) => {
            let ids = serde_json::to_string(ids).expect("ids serialize");
            conn.execute(
                "INSERT INTO graph_log (project_id, node_id) SELECT ?1, value FROM json_each(?2)",
                (project_id, ids),
            )
            .await
            .ctx("logging closure changes")?
        }
    };
    Ok(())
}

/// Pairs (a, d) whose stored shortest path runs through hop (u, v).
async fn rows_through(conn: &Connection, u: NodeId, v: NodeId) -> Result<Vec<(NodeId, NodeId)>> {
    // Only pairs whose depth equals a path through (u, v) can use it; the stored path says
    // whether theirs does (another shortest path may have been recorded).
    let mut rows = conn
        .query(
            "WITH a(id, depth) AS (
               SELECT ?1, 0 UNION ALL
               SELECT ancestor_id, depth FROM graph_closure WHERE descendant_id = ?1),
             d(id, depth) AS (
               SELECT ?2, 0 UNION ALL
               SELECT descendant_id, depth FROM graph_closure WHERE ancestor_id = ?2)
             SELECT c.ancestor_id, c.descendant_id, c.path
             FROM a, d, graph_closure c
             WHERE c.ancestor_id = a.id AND c.descendant_id = d.id
               AND c.depth = a.depth + 1 + d.depth",
            (u, v),
        )
        .await
        .ctx("finding closure rows through a hop")?;
    let mut out = Vec::new();
    while let Some(row) = rows
        .next()
        .await
        .ctx("finding closure rows through a hop")?
    {
        let ancestor: NodeId = row.get(0).ctx("closure row")?;
        let descendant: NodeId = row.get(1).ctx("closure row")?;
        let interior = parse_path(&row.get::<String>(2).ctx("closure row")?);
        let mut full = Vec::with_capacity(interior.len() + 2);
        full.push(ancestor);
        full.extend(interior);
        full.push(descendant);
        if full.windows(2).any(|w| w[0] == u && w[1] == v) {
            out.push((ancestor, descendant));
        }
    }
    Ok(out)
}

/// Adds hop (u, v) of `weight` to an exact closure.
async fn insert_hop(
    conn: &Connection,
    writer: &mut RowWriter,
    cap: u32,
    u: NodeId,
    v: NodeId,
    weight: f64,
) -> Result<()> {
    let before = reach_rows(conn, "descendant_id = ?1", u, cap - 1).await?;
    let after = reach_rows(conn, "ancestor_id = ?1", v, cap - 1).await?;
    let mut ancestors = vec![(u, Reach::zero())];
    ancestors.extend(before);
    let mut descendants = vec![(v, Reach::zero())];
    descendants.extend(after);
    for (a, to_u) in &ancestors {
        for (d, from_v) in &descendants {
            let depth = to_u.depth + 1 + from_v.depth;
            if a == d || depth > cap {
                continue;
            }
            let mut interior = Vec::with_capacity(depth as usize - 1);
            interior.extend(&to_u.interior);
            if *a != u {
                interior.push(u);
            }
            if *d != v {
                interior.push(v);
            }
            interior.extend(&from_v.interior);
            let reach = Reach {
                depth,
                weight: to_u.weight + weight + from_v.weight,
                interior,
            };
            writer.set_if_shorter(*a, *d, &reach).await?;
        }
    }
    Ok(())
}

/// Closure rows on one side of a node: `side` is `ancestor_id = ?1` (what it reaches) or
/// `descendant_id = ?1` (what reaches it); the other end of each row is returned.
async fn reach_rows(
    conn: &Connection,
    side: &str,
    node: NodeId,
    max_depth: u32,
) -> Result<Vec<(NodeId, Reach)>> {
    if max_depth == 0 {
        return Ok(Vec::new());
    }
    let other = if side.starts_with("ancestor") {
        "descendant_id"
    } else {
        "ancestor_id"
    };
    let sql = format!(
        "SELECT {other}, depth, weight, path FROM graph_closure WHERE {side} AND depth <= ?2"
    );
    let mut rows = conn
        .query(&sql, (node, max_depth))
        .await
        .ctx("reading closure rows")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading closure rows")? {
        out.push((
            row.get::<NodeId>(0).ctx("closure row")?,
            Reach {
                depth: row.get::<u32>(1).ctx("closure row")?,
                weight: row.get::<f64>(2).ctx("closure row")?,
                interior: parse_path(&row.get::<String>(3).ctx("closure row")?),
            },
        ));
    }
    Ok(out)
}

impl Reach {
    fn zero() -> Reach {
        Reach {
            depth: 0,
            weight: 0.0,
            interior: Vec::new(),
        }
    }
}

/// Transitive out-hops, read from `graph_edges` on demand and remembered for one write.
struct Adjacency {
    /// Hops left out (the changed ones, while the removal step recomputes without them).
    excluded: BTreeSet<(NodeId, NodeId)>,
    cache: HashMap<NodeId, Vec<(NodeId, f64)>>,
    stmt: Statement,
}

impl Adjacency {
    async fn new(conn: &Connection, excluded: BTreeSet<(NodeId, NodeId)>) -> Result<Self> {
        let sql = format!(
            "SELECT to_id, MAX(weight) FROM graph_edges WHERE from_id = ?1 AND {TRANSITIVE_EDGE}
             GROUP BY to_id ORDER BY to_id"
        );
        let stmt = conn.prepare(&sql).await.ctx("preparing the hop query")?;
        Ok(Adjacency {
            excluded,
            cache: HashMap::new(),
            stmt,
        })
    }

    async fn out(&mut self, node: NodeId) -> Result<&[(NodeId, f64)]> {
        if !self.cache.contains_key(&node) {
            self.stmt.reset();
            let mut rows = self.stmt.query([node]).await.ctx("reading hops")?;
            let mut hops = Vec::new();
            while let Some(row) = rows.next().await.ctx("reading hops")? {
                let to: NodeId = row.get(0).ctx("hop")?;
                if !self.excluded.contains(&(node, to)) {
                    hops.push((to, row.get::<f64>(1).ctx("hop")?));
                }
            }
            self.cache.insert(node, hops);
        }
        Ok(&self.cache[&node])
    }

    /// Shortest paths from `start` within `cap` hops (ties: lowest node ids first).
    async fn bfs(&mut self, start: NodeId, cap: u32) -> Result<HashMap<NodeId, Reach>> {
        let mut reached: HashMap<NodeId, Reach> = HashMap::new();
        let mut queue = VecDeque::from([(start, Reach::zero())]);
        let mut seen = BTreeSet::from([start]);
        while let Some((node, reach)) = queue.pop_front() {
            if reach.depth == cap {
                continue;
            }
            let hops = self.out(node).await?.to_vec();
            for (next, weight) in hops {
                if !seen.insert(next) {
                    continue;
                }
                let mut interior = reach.interior.clone();
                if node != start {
                    interior.push(node);
                }
                let next_reach = Reach {
                    depth: reach.depth + 1,
                    weight: reach.weight + weight,
                    interior,
                };
                reached.insert(next, next_reach.clone());
                queue.push_back((next, next_reach));
            }
        }
        Ok(reached)
    }
}

/// Deletes the project's closure rows. When no other project has nodes in the database (one
/// database per project, the usual case) the whole table goes in one statement with no
/// `WHERE`, which SQLite runs by freeing the table's and its index's pages without visiting a
/// row: CPython's ~141,800 rows took 0.34-0.88 s one by one through the pair index, 5-24 ms so
/// (PERFORMANCE.md). Rows of nodes already deleted, if any were left, go too: the table holds
/// nothing else.
async fn clear(conn: &Connection, project_id: &str) -> Result<()> {
    // Two seeks on a (project_id, ...) index; `<>` would scan it.
    let mut rows = conn
        .query(
            "SELECT EXISTS (SELECT 1 FROM graph_nodes WHERE project_id < ?1)
                 OR EXISTS (SELECT 1 FROM graph_nodes WHERE project_id > ?1)",
            [project_id],
        )
        .await
        .ctx("looking for other projects' nodes")?;
    let shared: bool = match rows.next().await.ctx("looking for other projects' nodes")? {
        Some(row) => row.get(0).ctx("looking for other projects' nodes")?,
        None => true,
    };
    drop(rows);
    if shared {
        conn.execute(
            "DELETE FROM graph_closure WHERE ancestor_id IN
               (SELECT id FROM graph_nodes WHERE project_id = ?1)",
            [project_id],
        )
        .await
        .ctx("clearing the closure")?;
    } else {
        conn.execute("DELETE FROM graph_closure", ())
            .await
            .ctx("clearing the closure")?;
    }
    Ok(())
}

/// `graph_state.closure_depth` of a project whose closure is pending: no rows are stored, and
/// every reader either builds them first or computes them (see the module doc). Depths are
/// 1..=8 otherwise.
pub(crate) const PENDING: u32 = 0;

/// The project's `graph_state.closure_depth`: the cap its rows were built with, [`PENDING`],
/// or `None` before its first graph write.
pub(crate) async fn state(conn: &Connection, project_id: &str) -> Result<Option<u32>> {
    let mut rows = conn
        .query(
            "SELECT closure_depth FROM graph_state WHERE project_id = ?1",
            [project_id],
        )
        .await
        .ctx("reading graph state")?;
    match rows.next().await.ctx("reading graph state")? {
        Some(row) => Ok(Some(row.get(0).ctx("reading graph state")?)),
        None => Ok(None),
    }
}

/// Records the depth the project's closure rows were built with (or [`PENDING`]).
async fn set_state(conn: &Connection, project_id: &str, depth: u32, now: i64) -> Result<()> {
    conn.execute(
        "INSERT INTO graph_state (project_id, closure_depth, rebuilt_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (project_id) DO UPDATE SET closure_depth = ?2, rebuilt_at = ?3",
        (project_id, depth, now),
    )
    .await
    .ctx("writing graph state")?;
    Ok(())
}

/// Drops the project's closure rows and marks the closure pending, logged as a change of the
/// whole project (an in-process index reloads, computing the rows itself).
pub(crate) async fn mark_pending(conn: &Connection, project_id: &str, now: i64) -> Result<()> {
    clear(conn, project_id).await?;
    set_state(conn, project_id, PENDING, now).await?;
    log_changes(conn, project_id, None).await
}

/// Rebuilds the project's closure with `cap` and logs it as a change of the whole project.
pub(crate) async fn rebuild(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
) -> Result<u64> {
    let written = materialize(conn, project_id, cap, now).await?;
    log_changes(conn, project_id, None).await?;
    Ok(written)
}

/// Builds a pending closure's rows with `cap`, unlogged: an in-process index that loaded
/// while it was pending computed the same rows from the same edges (any edge written in
/// between logged the whole project, see [`mark_pending`] and [`rebuild`]), so it has nothing
/// to re-read.
pub(crate) async fn materialize(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
) -> Result<u64> {
    let written = write_all(conn, project_id, cap).await?;
    set_state(conn, project_id, cap, now).await?;
    Ok(written)
}

/// The project's transitive hops, as [`write_all`] and [`rows_in_memory`] take them: per
/// node, its out-hops in ascending order of the other end, each with the largest weight of
/// its edges.
pub(crate) type Hops = HashMap<NodeId, Vec<(NodeId, f64)>>;

/// Calls `row(ancestor, descendant, reach)` for every closure row of `hops` within `cap`,
/// ancestors in ascending order, each one's descendants in BFS order: the rows a rebuild
/// writes, in the order it writes them.
pub(crate) fn rows_in_memory(hops: &Hops, cap: u32, mut row: impl FnMut(NodeId, NodeId, Reach)) {
    for start in sorted_starts(hops) {
        for (descendant, reach) in bfs_in_memory(hops, start, cap) {
            row(start, descendant, reach);
        }
    }
}

/// Replaces the project's closure rows with those its edges give within `cap`.
async fn write_all(conn: &Connection, project_id: &str, cap: u32) -> Result<u64> {
    clear(conn, project_id).await?;
    let sql = format!(
        "SELECT from_id, to_id, MAX(weight) FROM graph_edges
         WHERE project_id = ?1 AND {TRANSITIVE_EDGE}
         GROUP BY from_id, to_id ORDER BY from_id, to_id"
    );
    let mut rows = conn
        .query(&sql, [project_id])
        .await
        .ctx("reading the project's hops")?;
    let mut adjacency: Hops = HashMap::new();
    while let Some(row) = rows.next().await.ctx("reading the project's hops")? {
        let from: NodeId = row.get(0).ctx("hop")?;
        adjacency
            .entry(from)
            .or_default()
            .push((row.get(1).ctx("hop")?, row.get(2).ctx("hop")?));
    }
    drop(rows);

    let insert = conn
        .prepare(
            "INSERT INTO graph_closure (ancestor_id, descendant_id, depth, weight, path)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .await
        .ctx("preparing closure insert")?;
    // One start's rows at a time (as `rows_in_memory` gives them), so that what is held does
    // not grow with the closure.
    let mut written = 0u64;
    for start in sorted_starts(&adjacency) {
        for (descendant, reach) in bfs_in_memory(&adjacency, start, cap) {
            insert.reset();
            insert
                .execute((
                    start,
                    descendant,
                    reach.depth,
                    reach.weight,
                    format_path(&reach.interior),
                ))
                .await
                .ctx("writing the closure")?;
            written += 1;
        }
    }
    Ok(written)
}

/// The nodes with out-hops, ascending.
fn sorted_starts(hops: &Hops) -> Vec<NodeId> {
    let mut starts: Vec<NodeId> = hops.keys().copied().collect();
    starts.sort_unstable();
    starts
}

/// Shortest paths from `start` within `cap` hops over an in-memory adjacency, in BFS order.
pub(crate) fn bfs_in_memory(adjacency: &Hops, start: NodeId, cap: u32) -> Vec<(NodeId, Reach)> {
    let mut out: Vec<(NodeId, Reach)> = Vec::new();
    let mut seen = BTreeSet::from([start]);
    let mut frontier: Vec<(NodeId, usize)> = vec![(start, usize::MAX)];
    for depth in 1..=cap {
        let mut next_frontier = Vec::new();
        for &(node, parent_index) in &frontier {
            let Some(hops) = adjacency.get(&node) else {
                continue;
            };
            for &(next, weight) in hops {
                if !seen.insert(next) {
                    continue;
                }
                let (interior, base) = if parent_index == usize::MAX {
                    (Vec::new(), 0.0)
                } else {
                    let parent = &out[parent_index].1;
                    let mut interior = parent.interior.clone();
                    interior.push(node);
                    (interior, parent.weight)
                };
                out.push((
                    next,
                    Reach {
                        depth,
                        weight: base + weight,
                        interior,
                    },
                ));
                next_frontier.push((next, out.len() - 1));
            }
        }
        if next_frontier.is_empty() {
            break;
        }
        frontier = next_frontier;
    }
    out
}

/// Writes closure rows with prepared statements, and remembers whose rows it wrote.
struct RowWriter {
    upsert: Statement,
    upsert_if_shorter: Statement,
    delete: Statement,
    /// Descendants of the rows written or deleted (for `graph_log`).
    touched: BTreeSet<NodeId>,
}

impl RowWriter {
    async fn new(conn: &Connection) -> Result<RowWriter> {
        const INSERT: &str =
            "INSERT INTO graph_closure (ancestor_id, descendant_id, depth, weight, path)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (ancestor_id, descendant_id) DO UPDATE SET
               depth = excluded.depth, weight = excluded.weight, path = excluded.path";
        Ok(RowWriter {
            upsert: conn.prepare(INSERT).await.ctx("preparing closure upsert")?,
            upsert_if_shorter: conn
                .prepare(&format!(
                    "{INSERT} WHERE excluded.depth < graph_closure.depth"
                ))
                .await
                .ctx("preparing closure upsert")?,
            delete: conn
                .prepare("DELETE FROM graph_closure WHERE ancestor_id = ?1 AND descendant_id = ?2")
                .await
                .ctx("preparing closure delete")?,
            touched: BTreeSet::new(),
        })
    }

    async fn set(&mut self, a: NodeId, d: NodeId, reach: &Reach) -> Result<()> {
        self.touched.insert(d);
        write_row(&self.upsert, a, d, reach).await
    }

    async fn set_if_shorter(&mut self, a: NodeId, d: NodeId, reach: &Reach) -> Result<()> {
        self.touched.insert(d);
        write_row(&self.upsert_if_shorter, a, d, reach).await
    }

    async fn delete(&mut self, a: NodeId, d: NodeId) -> Result<()> {
        self.touched.insert(d);
        self.delete.reset();
        self.delete
            .execute((a, d))
            .await
            .ctx("deleting a closure row")?;
        Ok(())
    }
}

/// Runs one of the closure upserts for the row (a, d).
async fn write_row(statement: &Statement, a: NodeId, d: NodeId, reach: &Reach) -> Result<()> {
    statement.reset();
    statement
        .execute((
            a,
            d,
            reach.depth,
            reach.weight,
            format_path(&reach.interior),
        ))
        .await
        .ctx("writing a closure row")?;
    Ok(())
}

/// `[1,2,3]` for the interior nodes of a path.
pub(crate) fn format_path(interior: &[NodeId]) -> String {
    let mut out = String::with_capacity(2 + interior.len() * 6);
    out.push('[');
    for (i, id) in interior.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&id.to_string());
    }
    out.push(']');
    out
}

/// Parses what [`format_path`] wrote (anything else reads as an empty path).
pub(crate) fn parse_path(text: &str) -> Vec<NodeId> {
    text.trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .filter_map(|part| part.trim().parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip() {
        assert_eq!(format_path(&[]), "[]");
        assert_eq!(format_path(&[3, 14, 15]), "[3,14,15]");
        assert_eq!(parse_path("[3,14,15]"), vec![3, 14, 15]);
        assert!(parse_path("[]").is_empty());
    }

    #[test]
    fn in_memory_bfs_finds_shortest_paths_within_the_cap() {
        // 1 -> 2 -> 3 -> 4 and a shortcut 1 -> 3; a cycle 4 -> 1.
        let adjacency: HashMap<NodeId, Vec<(NodeId, f64)>> = HashMap::from([
            (1, vec![(2, 1.0), (3, 5.0)]),
            (2, vec![(3, 1.0)]),
            (3, vec![(4, 2.0)]),
            (4, vec![(1, 1.0)]),
        ]);
        let reach: HashMap<NodeId, Reach> = bfs_in_memory(&adjacency, 1, 2).into_iter().collect();
        assert_eq!(reach.len(), 3, "1 itself is never its own descendant");
        assert_eq!(reach[&3].depth, 1);
        assert_eq!(reach[&3].weight, 5.0);
        assert_eq!(reach[&4].depth, 2);
        assert_eq!(reach[&4].interior, vec![3]);
        assert_eq!(reach[&4].weight, 7.0);
        let capped: Vec<_> = bfs_in_memory(&adjacency, 1, 1);
        assert_eq!(capped.len(), 2);
    }
}
