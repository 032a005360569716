//! An in-process copy of one project's graph for `impact()`: every node row, what each node
//! contains, the closure rows into each node, and the memory links by node key, loaded from
//! SQLite in four reads (issue 38).
//!
//! Why: a file target's answer touches hundreds of rows at random (its seeds' closure rows,
//! then each affected node and its key's memory links), ~12 us each through SQLite on the
//! 50k-node bench graph, so a 500-node answer took ~10 ms across JS. Here those are hash
//! lookups; only the memories returned are still read from SQLite (they are the large rows,
//! and their confidence decays with time).
//!
//! The answer is built by the same functions as the SQL path's (`impact.rs`: the nearest row
//! per node, the order, the paths, the memory ranking), from the same rows, so the two agree
//! exactly; `tests/graph_index.rs` checks that on every node of real indexed projects.
//!
//! Not yet served to callers: SQLite stays the source of truth, and this copy is only exact
//! as of its load. Following graph writes (a change log written in the same transactions, as
//! the vector indexes follow theirs) is the next step; until then it is built and measured
//! here (`cargo bench --bench graph` reports its load time, its bytes per node and per edge,
//! and `impact()` through it).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::LazyLock;

use super::closure::{parse_path, NodeId};
use super::impact::{
    affected_nodes, attached_memories, attachment_depths, choose_nearest, target_keys, Impact,
    ImpactOptions, IntoSeed, PathRef, MAX_SEEDS,
};
use super::read::{node_from_row, NODE_COLUMNS};
use super::GraphNode;
use crate::error::{DbContext, Error, Result};
use crate::store::Reader;

/// Every node of project `?1`.
static PROJECT_NODES: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {NODE_COLUMNS} FROM graph_nodes n WHERE n.project_id = ?1"));

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
    /// `contains` edges, container to contained (every layer).
    contains: HashMap<NodeId, Vec<NodeId>>,
    /// Layer-2 `contains` edges, contained to container (a Go file's package).
    packages_of: HashMap<NodeId, Vec<NodeId>>,
    /// Nodes a layer-1 `imports` edge points at.
    imported: HashSet<NodeId>,
    /// Closure rows by descendant.
    closure: HashMap<NodeId, Vec<Reach>>,
    /// Interior nodes of every stored path, end to end.
    paths: Vec<NodeId>,
    /// Memory links by node key: (memory seq, role).
    links: HashMap<String, Vec<(i64, String)>>,
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
    pub(crate) async fn load(reader: &mut Reader<'_>, project_id: &str) -> Result<GraphIndex> {
        reader
            .execute("BEGIN", ())
            .await
            .ctx("graph index: beginning a read")?;
        let loaded = Self::read(reader, project_id).await;
        let end = if loaded.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = reader
            .execute(end, ())
            .await
            .ctx("graph index: ending a read");
        let index = loaded?;
        ended?;
        Ok(index)
    }

    /// The reads of [`GraphIndex::load`], row by row and uncached (they run once; the
    /// reader's statement cache keeps the statements of the hot paths).
    async fn read(reader: &Reader<'_>, project_id: &str) -> Result<GraphIndex> {
        let mut index = GraphIndex::default();
        let mut rows = reader
            .query(&PROJECT_NODES, [project_id])
            .await
            .ctx("graph index: reading nodes")?;
        while let Some(row) = rows.next().await.ctx("graph index: reading nodes")? {
            let (id, node) = node_from_row(&row, 0)?;
            index.ids.insert(node.key.clone(), id);
            index.nodes.insert(id, node);
        }
        const EDGES: &str = "SELECT from_id, to_id, kind = 'imports', layer FROM graph_edges
            WHERE project_id = ?1 AND (kind = 'contains' OR (kind = 'imports' AND layer = 1))";
        let mut rows = reader
            .query(EDGES, [project_id])
            .await
            .ctx("graph index: reading edges")?;
        while let Some(row) = rows.next().await.ctx("graph index: reading edges")? {
            let (from, to): (NodeId, NodeId) = (row.get(0).ctx("edge")?, row.get(1).ctx("edge")?);
            if row.get::<bool>(2).ctx("edge")? {
                index.imported.insert(to);
                continue;
            }
            index.contains.entry(from).or_default().push(to);
            if row.get::<u32>(3).ctx("edge")? == 2 {
                index.packages_of.entry(to).or_default().push(from);
            }
        }
        // The project's rows through the descendant index (the closure has no project column).
        const CLOSURE: &str = "SELECT c.descendant_id, c.ancestor_id, c.depth, c.weight, c.path
            FROM graph_closure c
            WHERE c.descendant_id IN (SELECT id FROM graph_nodes WHERE project_id = ?1)";
        let too_large = || Error::Internal("graph index: closure too large".into());
        let mut rows = reader
            .query(CLOSURE, [project_id])
            .await
            .ctx("graph index: reading the closure")?;
        while let Some(row) = rows.next().await.ctx("graph index: reading the closure")? {
            let start = index.paths.len();
            index
                .paths
                .extend(parse_path(row.get_str(4).ctx("closure row")?));
            let reach = Reach {
                ancestor: row.get(1).ctx("closure row")?,
                weight: row.get(3).ctx("closure row")?,
                path_start: u32::try_from(start).map_err(|_| too_large())?,
                path_len: u8::try_from(index.paths.len() - start).map_err(|_| too_large())?,
                depth: u8::try_from(row.get::<u32>(2).ctx("closure row")?)
                    .map_err(|_| too_large())?,
            };
            let descendant: NodeId = row.get(0).ctx("closure row")?;
            index.closure.entry(descendant).or_default().push(reach);
        }
        // Growth slack would be a third of the closure's bytes.
        index.paths.shrink_to_fit();
        index.closure.values_mut().for_each(Vec::shrink_to_fit);
        const LINKS: &str =
            "SELECT node_key, memory_seq, role FROM memory_links WHERE project_id = ?1";
        let mut rows = reader
            .query(LINKS, [project_id])
            .await
            .ctx("graph index: reading memory links")?;
        while let Some(row) = rows.next().await.ctx("graph index: reading memory links")? {
            let key: String = row.get(0).ctx("memory link")?;
            let link = (
                row.get(1).ctx("memory link")?,
                row.get(2).ctx("memory link")?,
            );
            index.links.entry(key).or_default().push(link);
        }
        Ok(index)
    }

    /// What depends on `target` within `depth` hops, and the memories on any of it: the
    /// answer of the SQL path for the same graph. The memories are read through `reader`.
    pub(crate) async fn impact(
        &self,
        reader: &mut Reader<'_>,
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
        let memories = attached_memories(reader, links, &depth_of, options.memory_limit).await?;
        Ok(Impact {
            target: target_node,
            affected,
            memories,
            truncated,
        })
    }

    /// The target and everything it contains, and a package a `contains` edge of layer 2 puts
    /// it in when that package is imported as a whole (Go); past [`MAX_SEEDS`], the lowest ids.
    fn seeds(&self, target: NodeId) -> Vec<NodeId> {
        let mut seen = HashSet::from([target]);
        let mut out = vec![target];
        let mut queue = VecDeque::from([target]);
        while let Some(node) = queue.pop_front() {
            for &child in self.contains.get(&node).into_iter().flatten() {
                if seen.insert(child) {
                    out.push(child);
                    queue.push_back(child);
                }
            }
        }
        for &package in self.packages_of.get(&target).into_iter().flatten() {
            if self.imported.contains(&package) && seen.insert(package) {
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
            + self.ids.keys().map(String::capacity).sum::<usize>();
        let adjacency_bytes: usize = [&self.contains, &self.packages_of]
            .iter()
            .map(|m| {
                m.capacity() * map_entry(size_of::<NodeId>(), size_of::<Vec<NodeId>>())
                    + m.values()
                        .map(|v| v.capacity() * size_of::<NodeId>())
                        .sum::<usize>()
            })
            .sum::<usize>()
            + self.imported.capacity() * map_entry(size_of::<NodeId>(), 0);
        let closure_bytes = self.closure.capacity()
            * map_entry(size_of::<NodeId>(), size_of::<Vec<Reach>>())
            + self
                .closure
                .values()
                .map(|v| v.capacity() * size_of::<Reach>())
                .sum::<usize>()
            + self.paths.capacity() * size_of::<NodeId>();
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
