//! JS types of the knowledge graph: inject batches, nodes, edges, traversal and impact
//! results, and their conversions. Results cross as JSON (see `json.rs`); the serde derives
//! mirror napi's (camelCase, `None` omitted).

use napi_derive::napi;
use serde::Serialize;
use serde_json::Value as Json;

use super::strict::Count;
use super::types::Memory;
use crate::error::Error as CoreError;
use crate::graph as core;

/// A node to create or update. `key` is its identity within the project: code nodes are
/// keyed by path (`src/a.ts`), `path:Qualified.name` and directory (`src/auth/`) and belong to
/// the indexer; choose keys like `concept:auth-flow` for your own.
#[napi(object)]
pub struct GraphNodeInput {
    /// Unique within the project.
    pub key: String,
    /// e.g. `concept`, `decision`, `service`.
    pub kind: String,
    /// 1 structural, 2 semantic, 3 knowledge (default 3).
    #[napi(ts_type = "number")]
    pub layer: Option<Count>,
    /// Display name (default: the key).
    pub label: Option<String>,
    /// File it lives in (relative to the project root).
    pub file_path: Option<String>,
    /// First line.
    #[napi(ts_type = "number")]
    pub start_line: Option<Count>,
    /// Last line.
    #[napi(ts_type = "number")]
    pub end_line: Option<Count>,
    /// Who asserts it (default `agent`).
    #[napi(ts_type = "'agent' | 'user' | 'llm'")]
    pub source: Option<String>,
    /// 0..1 (default 1).
    pub confidence: Option<f64>,
    /// Free-form object.
    #[napi(ts_type = "Record<string, unknown>")]
    pub metadata: Option<Json>,
}

/// An edge to create or update; (from, to, kind) is its identity. Direction is dependency:
/// `a -imports-> b` means a depends on b, so b's impact includes a.
#[napi(object)]
pub struct GraphEdgeInput {
    /// Key of the dependent node.
    pub from: String,
    /// Key of the node depended on.
    pub to: String,
    /// e.g. `calls`, `depends_on`, `supersedes`. `supersedes`, `caused_by`, `part_of` and
    /// `derived_from` must stay acyclic; `contains` is left out of the closure.
    pub kind: String,
    /// 1, 2 or 3 (default 3).
    #[napi(ts_type = "number")]
    pub layer: Option<Count>,
    /// > 0, summed along paths (default 1).
    pub weight: Option<f64>,
    /// Who asserts it (default `agent`).
    #[napi(ts_type = "'agent' | 'user' | 'llm'")]
    pub source: Option<String>,
    /// 0..1 (default 1).
    pub confidence: Option<f64>,
    /// Free-form object.
    #[napi(ts_type = "Record<string, unknown>")]
    pub metadata: Option<Json>,
}

/// Nodes and edges written together in one transaction by `injectGraph`.
#[napi(object)]
pub struct GraphBatch {
    /// Nodes to create or update (at most 10,000).
    pub nodes: Option<Vec<GraphNodeInput>>,
    /// Edges to create or update (at most 50,000); endpoints may be nodes of this batch.
    pub edges: Option<Vec<GraphEdgeInput>>,
}

fn layer(value: Option<Count>) -> Result<u8, CoreError> {
    match value.map_or(3, Count::get) {
        l @ 1..=3 => Ok(l as u8),
        other => Err(CoreError::invalid(format!(
            "layer must be 1, 2 or 3, got {other}"
        ))),
    }
}

fn source(value: Option<String>) -> Result<core::GraphSource, CoreError> {
    match value.as_deref() {
        None => Ok(core::GraphSource::Agent),
        Some("ast") => Err(CoreError::invalid(
            "source 'ast' is reserved for the code indexer; use agent, user or llm",
        )),
        Some(s) => core::GraphSource::parse(s),
    }
}

/// Layer filters as the core takes them: each 1, 2 or 3.
fn layers(values: Option<Vec<Count>>) -> Result<Option<Vec<u8>>, CoreError> {
    let Some(values) = values else {
        return Ok(None);
    };
    values
        .into_iter()
        .enumerate()
        .map(|(i, l)| match l.get() {
            l @ 1..=3 => Ok(l as u8),
            other => Err(CoreError::invalid(format!(
                "options.layers[{i}] must be 1, 2 or 3, got {other}"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Parses `'out' | 'in' | 'both'` (absent: `default`).
fn direction(value: Option<&str>, default: core::Direction) -> Result<core::Direction, CoreError> {
    match value {
        None => Ok(default),
        Some("out") => Ok(core::Direction::Out),
        Some("in") => Ok(core::Direction::In),
        Some("both") => Ok(core::Direction::Both),
        Some(other) => Err(CoreError::invalid(format!(
            "direction must be 'out', 'in' or 'both', got {other:?}"
        ))),
    }
}

fn metadata(value: Option<Json>) -> Json {
    value.unwrap_or_else(|| Json::Object(Default::default()))
}

impl GraphBatch {
    /// The core inputs (the core validates ranges and sizes).
    pub fn into_core(self) -> Result<(Vec<core::NodeInput>, Vec<core::EdgeInput>), CoreError> {
        let nodes = self
            .nodes
            .unwrap_or_default()
            .into_iter()
            .map(|n| {
                Ok(core::NodeInput {
                    label: n.label.unwrap_or_default(),
                    layer: layer(n.layer)?,
                    file_path: n.file_path,
                    start_line: n.start_line.map(u32::from),
                    end_line: n.end_line.map(u32::from),
                    source: source(n.source)?,
                    confidence: n.confidence.unwrap_or(1.0),
                    metadata: metadata(n.metadata),
                    ..core::NodeInput::new(n.key, n.kind)
                })
            })
            .collect::<Result<Vec<_>, CoreError>>()?;
        let edges = self
            .edges
            .unwrap_or_default()
            .into_iter()
            .map(|e| {
                Ok(core::EdgeInput {
                    layer: layer(e.layer)?,
                    weight: e.weight.unwrap_or(1.0),
                    source: source(e.source)?,
                    confidence: e.confidence.unwrap_or(1.0),
                    metadata: metadata(e.metadata),
                    ..core::EdgeInput::new(e.from, e.to, e.kind)
                })
            })
            .collect::<Result<Vec<_>, CoreError>>()?;
        Ok((nodes, edges))
    }
}

/// What `injectGraph` changed.
#[napi(object)]
pub struct InjectSummary {
    /// Nodes that did not exist.
    pub nodes_created: u32,
    /// Existing nodes written again (changed or not: only `updatedAt` moves when equal).
    pub nodes_updated: u32,
    /// Edges that did not exist.
    pub edges_created: u32,
    /// Existing edges written again.
    pub edges_updated: u32,
}

impl From<core::InjectSummary> for InjectSummary {
    fn from(s: core::InjectSummary) -> Self {
        InjectSummary {
            nodes_created: s.nodes_created,
            nodes_updated: s.nodes_updated,
            edges_created: s.edges_created,
            edges_updated: s.edges_updated,
        }
    }
}

/// A stored graph node.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    /// Unique within the project.
    pub key: String,
    /// 1 structural (files, symbols), 2 semantic (modules), 3 knowledge.
    pub layer: u32,
    /// `file`, `function`, `class`, `module`... or your own kind.
    pub kind: String,
    /// Display name.
    pub label: String,
    /// File it lives in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
    /// First line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u32>,
    /// Last line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
    /// `ast`, `agent`, `user` or `llm`.
    #[napi(ts_type = "'ast' | 'agent' | 'user' | 'llm'")]
    pub source: String,
    /// 0..1.
    pub confidence: f64,
    /// Free-form object (modules list their `entryPoints`).
    #[napi(ts_type = "Record<string, unknown>")]
    pub metadata: Json,
    /// Created (ms since epoch).
    pub created_at: f64,
    /// Last written (ms).
    pub updated_at: f64,
    /// For a node you or an LLM wrote: when code it has an edge to or from changed or went
    /// away (ms); cleared by writing the node again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_at: Option<f64>,
}

impl From<core::GraphNode> for GraphNode {
    fn from(n: core::GraphNode) -> Self {
        GraphNode {
            key: n.key,
            layer: u32::from(n.layer),
            kind: n.kind,
            label: n.label,
            file_path: n.file_path,
            start_line: n.start_line,
            end_line: n.end_line,
            source: n.source.as_str().to_owned(),
            confidence: n.confidence,
            metadata: n.metadata,
            created_at: n.created_at as f64,
            updated_at: n.updated_at as f64,
            stale_at: n.stale_at.map(|t| t as f64),
        }
    }
}

/// A stored graph edge.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
    /// Key of the dependent node.
    pub from: String,
    /// Key of the node depended on.
    pub to: String,
    /// What it means.
    pub kind: String,
    /// 1, 2 or 3.
    pub layer: u32,
    /// Weight (for code: how many references it aggregates).
    pub weight: f64,
    /// `ast`, `agent`, `user` or `llm`.
    #[napi(ts_type = "'ast' | 'agent' | 'user' | 'llm'")]
    pub source: String,
    /// 0..1.
    pub confidence: f64,
    /// Free-form object.
    #[napi(ts_type = "Record<string, unknown>")]
    pub metadata: Json,
    /// Created (ms).
    pub created_at: f64,
    /// For an LLM relation: when the index changed a module it touches (ms); cleared when it
    /// is derived again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_at: Option<f64>,
    /// Last written (ms).
    pub updated_at: f64,
}

impl From<core::GraphEdge> for GraphEdge {
    fn from(e: core::GraphEdge) -> Self {
        GraphEdge {
            from: e.from,
            to: e.to,
            kind: e.kind,
            layer: u32::from(e.layer),
            weight: e.weight,
            source: e.source.as_str().to_owned(),
            confidence: e.confidence,
            metadata: e.metadata,
            created_at: e.created_at as f64,
            updated_at: e.updated_at as f64,
            stale_at: e.stale_at.map(|t| t as f64),
        }
    }
}

/// A node reached from a start node.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReachedNode {
    /// The node.
    pub node: GraphNode,
    /// Hops from the start.
    pub depth: u32,
    /// Summed weight of the path's edges.
    pub weight: f64,
    /// Keys of the nodes between the start and this one (empty for a neighbour).
    pub via: Vec<String>,
}

impl From<core::ReachedNode> for ReachedNode {
    fn from(r: core::ReachedNode) -> Self {
        ReachedNode {
            node: r.node.into(),
            depth: r.depth,
            weight: r.weight,
            via: r.via,
        }
    }
}

/// Nodes reached from a start node, and the edges among them.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subgraph {
    /// The start node (absent for `subgraph()`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<GraphNode>,
    /// Reached nodes, nearest first.
    pub nodes: Vec<ReachedNode>,
    /// Edges followed (traverse) or among the nodes (subgraph); empty for ancestors and
    /// descendants.
    pub edges: Vec<GraphEdge>,
    /// True when `limit` cut the result.
    pub truncated: bool,
}

impl From<core::Subgraph> for Subgraph {
    fn from(s: core::Subgraph) -> Self {
        Subgraph {
            start: s.start.map(GraphNode::from),
            nodes: s.nodes.into_iter().map(ReachedNode::from).collect(),
            edges: s.edges.into_iter().map(GraphEdge::from).collect(),
            truncated: s.truncated,
        }
    }
}

/// Options of `traverse()`.
#[napi(object)]
pub struct TraverseOptions {
    /// Hops (1..10, default 2).
    #[napi(ts_type = "number")]
    pub max_depth: Option<Count>,
    /// `out` follows edges (what the start depends on), `in` goes against them (what depends
    /// on it), `both` either way. Default `out`.
    #[napi(ts_type = "'out' | 'in' | 'both'")]
    pub direction: Option<String>,
    /// Only edges of these kinds.
    pub kinds: Option<Vec<String>>,
    /// Only edges of these layers.
    #[napi(ts_type = "Array<number>")]
    pub layers: Option<Vec<Count>>,
    /// Most nodes returned (1..10000, default 500).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
}

impl TraverseOptions {
    /// The core options.
    pub fn into_core(self) -> Result<core::TraverseOptions, CoreError> {
        let defaults = core::TraverseOptions::default();
        Ok(core::TraverseOptions {
            max_depth: self.max_depth.map_or(defaults.max_depth, u32::from),
            direction: direction(self.direction.as_deref(), defaults.direction)?,
            kinds: self.kinds,
            layers: layers(self.layers)?,
            limit: self.limit.map_or(defaults.limit, u32::from),
        })
    }
}

/// Options of `neighbours()`.
#[napi(object)]
pub struct NeighbourOptions {
    /// `out`: what the keys depend on; `in`: what depends on them; `both` (default).
    #[napi(ts_type = "'out' | 'in' | 'both'")]
    pub direction: Option<String>,
    /// Only edges of these kinds (default: all but `contains`).
    pub kinds: Option<Vec<String>>,
    /// Only edges of these layers.
    #[napi(ts_type = "Array<number>")]
    pub layers: Option<Vec<Count>>,
    /// A file or module also stands for what it contains (default true).
    pub include_contained: Option<bool>,
    /// Most neighbours, heaviest first (1..10000, default 100).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
}

impl NeighbourOptions {
    /// The core options.
    pub fn into_core(self) -> Result<core::NeighbourOptions, CoreError> {
        let defaults = core::NeighbourOptions::default();
        Ok(core::NeighbourOptions {
            direction: direction(self.direction.as_deref(), defaults.direction)?,
            kinds: self.kinds,
            layers: layers(self.layers)?,
            include_contained: self.include_contained.unwrap_or(defaults.include_contained),
            limit: self.limit.map_or(defaults.limit, u32::from),
        })
    }
}

/// A node one edge away from the keys given to `neighbours()`.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Neighbour {
    /// The node.
    pub node: GraphNode,
    /// Summed weight of its edges to the set (a call made three times weighs 3).
    pub weight: f64,
    /// Number of those edges.
    pub edges: u32,
    /// The given keys it is linked to.
    pub linked_to: Vec<String>,
}

impl From<core::Neighbour> for Neighbour {
    fn from(n: core::Neighbour) -> Self {
        Neighbour {
            node: n.node.into(),
            weight: n.weight,
            edges: n.edges,
            linked_to: n.linked_to,
        }
    }
}

/// Options of `centrality()`.
#[napi(object)]
pub struct CentralityOptions {
    /// `pagerank` (default: a node depended upon by important nodes is important; scores
    /// sum to 1) or `degree` (summed edge weight, the best connected node scores 1).
    #[napi(ts_type = "'pagerank' | 'degree'")]
    pub method: Option<String>,
    /// PageRank's probability of following an edge (0..1, default 0.85).
    pub damping: Option<f64>,
    /// PageRank's most iterations (1..1000, default 100).
    #[napi(ts_type = "number")]
    pub max_iterations: Option<Count>,
    /// Only edges of these kinds (default: all but `contains`).
    pub kinds: Option<Vec<String>>,
    /// Only edges of these layers.
    #[napi(ts_type = "Array<number>")]
    pub layers: Option<Vec<Count>>,
}

impl CentralityOptions {
    /// The core options.
    pub fn into_core(self) -> Result<core::CentralityOptions, CoreError> {
        let method = match self.method.as_deref() {
            None | Some("pagerank") => core::CentralityMethod::PageRank {
                damping: self.damping.unwrap_or(0.85),
                max_iterations: self.max_iterations.map_or(100, u32::from),
            },
            Some("degree") => core::CentralityMethod::Degree,
            Some(other) => {
                return Err(CoreError::invalid(format!(
                    "method must be 'pagerank' or 'degree', got {other:?}"
                )))
            }
        };
        Ok(core::CentralityOptions {
            method,
            kinds: self.kinds,
            layers: layers(self.layers)?,
        })
    }
}

/// A node's centrality score.
#[napi(object)]
#[derive(Serialize)]
pub struct NodeScore {
    /// The node's key.
    pub key: String,
    /// Its score.
    pub score: f64,
}

impl From<core::NodeScore> for NodeScore {
    fn from(s: core::NodeScore) -> Self {
        NodeScore {
            key: s.key,
            score: s.score,
        }
    }
}

/// Options of `ancestors()` and `descendants()`.
#[napi(object)]
pub struct ReachOptions {
    /// Hops (default and at most: the engine's `closureDepth`).
    #[napi(ts_type = "number")]
    pub max_depth: Option<Count>,
    /// Most nodes returned (1..10000, default 500).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
}

/// The most memories `impact()` attaches.
const MAX_IMPACT_MEMORIES: u32 = 10_000;

/// Options of `impact()`.
#[napi(object)]
pub struct ImpactOptions {
    /// Hops (default and at most: the engine's `closureDepth`).
    #[napi(ts_type = "number")]
    pub max_depth: Option<Count>,
    /// Most affected nodes, nearest first (1..10000, default 100; `truncated` tells when
    /// there were more). Memories are attached from the nodes kept.
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
    /// Most memories, nearest first (0..10000, default 20; `memoriesTruncated` tells when
    /// there were more).
    #[napi(ts_type = "number")]
    pub memory_limit: Option<Count>,
    /// Only affected nodes of these layers (memories still come from all).
    #[napi(ts_type = "Array<number>")]
    pub layers: Option<Vec<Count>>,
}

impl ImpactOptions {
    /// The core options.
    pub fn into_core(self) -> Result<core::ImpactOptions, CoreError> {
        let defaults = core::ImpactOptions::default();
        let memory_limit = self.memory_limit.map_or(defaults.memory_limit, u32::from);
        if memory_limit > MAX_IMPACT_MEMORIES {
            return Err(CoreError::invalid(format!(
                "memoryLimit must be between 0 and {MAX_IMPACT_MEMORIES}, got {memory_limit}"
            )));
        }
        Ok(core::ImpactOptions {
            max_depth: self.max_depth.map(u32::from),
            limit: self.limit.map_or(defaults.limit, u32::from),
            memory_limit,
            layers: layers(self.layers)?,
        })
    }
}

/// A memory attached to the impact's target or to an affected node.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachedMemory {
    /// The memory.
    pub memory: Memory,
    /// Key of the node it is attached to.
    pub node_key: String,
    /// `target` (its targetNodeId), `impacted` (impactedNodeIds) or `file` (relatedFiles).
    #[napi(ts_type = "'target' | 'impacted' | 'file'")]
    pub role: String,
    /// Hops from the target to that node (0: the target or something it contains).
    pub depth: u32,
}

/// What depends on a target, and the memories on any of it.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Impact {
    /// The node the target named.
    pub target: GraphNode,
    /// Dependents, nearest first.
    pub affected: Vec<ReachedNode>,
    /// Memories on the target, what it contains and the dependents, nearest first.
    pub memories: Vec<AttachedMemory>,
    /// True when `limit` cut `affected`.
    pub truncated: bool,
    /// True when `memoryLimit` cut `memories`.
    pub memories_truncated: bool,
}

impl From<core::Impact> for Impact {
    fn from(i: core::Impact) -> Self {
        Impact {
            target: i.target.into(),
            affected: i.affected.into_iter().map(ReachedNode::from).collect(),
            memories: i
                .memories
                .into_iter()
                .map(|m| AttachedMemory {
                    memory: m.memory.into(),
                    node_key: m.node_key,
                    role: m.role,
                    depth: m.depth,
                })
                .collect(),
            truncated: i.truncated,
            memories_truncated: i.memories_truncated,
        }
    }
}

/// Sizes of the project's graph.
#[napi(object)]
pub struct GraphStats {
    /// Nodes in layers 1, 2 and 3.
    pub nodes_by_layer: Vec<f64>,
    /// Edges in layers 1, 2 and 3.
    pub edges_by_layer: Vec<f64>,
    /// Rows of the closure table.
    pub closure_rows: f64,
    /// Depth cap the closure was built with (0 before the first graph write).
    pub closure_depth: u32,
}

impl From<core::GraphStats> for GraphStats {
    fn from(s: core::GraphStats) -> Self {
        GraphStats {
            nodes_by_layer: s.nodes_by_layer.iter().map(|&n| n as f64).collect(),
            edges_by_layer: s.edges_by_layer.iter().map(|&n| n as f64).collect(),
            closure_rows: s.closure_rows as f64,
            closure_depth: s.closure_depth,
        }
    }
}
