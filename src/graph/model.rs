//! The graph's public types: nodes and edges as given to `inject` and as read back, layers,
//! sources, and which edge kinds are transitive (in the closure) or acyclic (cycles rejected).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Edge kinds that must never form a cycle among edges of the same kind: a cycle of
/// `supersedes` or `caused_by` is a contradiction, so the write that would close one fails
/// with `ENGRAM_CYCLE` and rolls back.
/// The indexer's own edges (`contains`, `extends`...) are not checked: they describe the code
/// as it is, and name resolution may well meet a cyclic inheritance in broken code.
pub const ACYCLIC_KINDS: &[&str] = &["supersedes", "caused_by", "part_of", "derived_from"];

/// Edge kinds left out of the closure table. `contains` is hierarchy (a file contains its
/// symbols, a module its files): following it from a symbol up to its file would make every
/// importer of a file an ancestor of each of its symbols and multiply the table; traversal
/// answers hierarchy questions from the edges directly.
pub const NON_TRANSITIVE_KINDS: &[&str] = &["contains"];

/// Whether edges of this kind are in the closure table.
pub fn is_transitive(kind: &str) -> bool {
    !NON_TRANSITIVE_KINDS.contains(&kind)
}

/// Whether edges of this kind must stay acyclic.
pub fn is_acyclic(kind: &str) -> bool {
    ACYCLIC_KINDS.contains(&kind)
}

/// Who asserted a node or edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphSource {
    /// Extracted from source code by the indexer (layers 1 and 2).
    Ast,
    /// Written by a coding agent.
    Agent,
    /// Written by a person.
    User,
    /// Derived by a language model (through the app's callback).
    Llm,
}

impl GraphSource {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            GraphSource::Ast => "ast",
            GraphSource::Agent => "agent",
            GraphSource::User => "user",
            GraphSource::Llm => "llm",
        }
    }

    /// Parses a stored or user-given name.
    pub fn parse(s: &str) -> Result<GraphSource> {
        Ok(match s {
            "ast" => GraphSource::Ast,
            "agent" => GraphSource::Agent,
            "user" => GraphSource::User,
            "llm" => GraphSource::Llm,
            other => {
                return Err(Error::invalid(format!(
                    "source must be agent, user or llm, got {other:?}"
                )));
            }
        })
    }
}

/// A node to create or update; its `key` is its identity within the project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInput {
    /// Unique within the project. Code nodes use the file path (`src/a.ts`), the path and
    /// qualified name (`src/a.ts:Auth.login`) and the directory with a slash (`src/auth/`);
    /// those keys belong to the indexer.
    pub key: String,
    /// 1 structural, 2 semantic, 3 knowledge (default 3).
    pub layer: u8,
    /// e.g. `concept`, `decision`, `service`.
    pub kind: String,
    /// Display name (default: the key).
    pub label: String,
    /// A file the node lives in, relative to the project root.
    pub file_path: Option<String>,
    /// First line (1-based).
    pub start_line: Option<u32>,
    /// Last line.
    pub end_line: Option<u32>,
    /// Who asserts it.
    pub source: GraphSource,
    /// 0..=1.
    pub confidence: f64,
    /// Free-form JSON object.
    pub metadata: serde_json::Value,
}

impl NodeInput {
    /// A knowledge-layer node written by an agent, with every other field at its default.
    pub fn new(key: impl Into<String>, kind: impl Into<String>) -> NodeInput {
        NodeInput {
            key: key.into(),
            layer: 3,
            kind: kind.into(),
            label: String::new(),
            file_path: None,
            start_line: None,
            end_line: None,
            source: GraphSource::Agent,
            confidence: 1.0,
            metadata: serde_json::Value::Object(Default::default()),
        }
    }
}

/// An edge to create or update; (from, to, kind) is its identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EdgeInput {
    /// Key of the node it starts from (the dependent: `a imports b` starts at a).
    pub from: String,
    /// Key of the node it points to.
    pub to: String,
    /// e.g. `calls`, `imports`, `depends_on`, `supersedes`.
    pub kind: String,
    /// 1, 2 or 3 (default 3).
    pub layer: u8,
    /// > 0; summed along closure paths (default 1).
    pub weight: f64,
    /// Who asserts it.
    pub source: GraphSource,
    /// 0..=1.
    pub confidence: f64,
    /// Free-form JSON object.
    pub metadata: serde_json::Value,
}

impl EdgeInput {
    /// A knowledge-layer edge of weight 1 written by an agent.
    pub fn new(
        from: impl Into<String>,
        to: impl Into<String>,
        kind: impl Into<String>,
    ) -> EdgeInput {
        EdgeInput {
            from: from.into(),
            to: to.into(),
            kind: kind.into(),
            layer: 3,
            weight: 1.0,
            source: GraphSource::Agent,
            confidence: 1.0,
            metadata: serde_json::Value::Object(Default::default()),
        }
    }

    /// The same edge with another weight.
    pub fn weighted(mut self, weight: f64) -> EdgeInput {
        self.weight = weight;
        self
    }
}

/// A stored node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    /// Unique within the project.
    pub key: String,
    /// 1 structural, 2 semantic, 3 knowledge.
    pub layer: u8,
    /// What it is.
    pub kind: String,
    /// Display name.
    pub label: String,
    /// The file it lives in.
    pub file_path: Option<String>,
    /// First line (1-based).
    pub start_line: Option<u32>,
    /// Last line.
    pub end_line: Option<u32>,
    /// Who asserted it.
    pub source: GraphSource,
    /// 0..=1.
    pub confidence: f64,
    /// Free-form JSON object.
    pub metadata: serde_json::Value,
    /// Created (ms since epoch).
    pub created_at: i64,
    /// Last written (ms), also by an unchanged re-send.
    pub updated_at: i64,
    /// For a node you or an LLM wrote: when a code node it has an edge to or from changed or
    /// went away on re-index (cleared when the node is written again). Code nodes: None.
    pub stale_at: Option<i64>,
}

/// A stored edge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
    /// Key of the node it starts from.
    pub from: String,
    /// Key of the node it points to.
    pub to: String,
    /// What it means.
    pub kind: String,
    /// 1, 2 or 3.
    pub layer: u8,
    /// Weight.
    pub weight: f64,
    /// Who asserted it.
    pub source: GraphSource,
    /// 0..=1.
    pub confidence: f64,
    /// Free-form JSON object.
    pub metadata: serde_json::Value,
    /// Created (ms).
    pub created_at: i64,
    /// Last written (ms).
    pub updated_at: i64,
    /// When code it relates to changed after it was written (an LLM relation of a module
    /// the index changed); cleared when it is written again.
    pub stale_at: Option<i64>,
}

/// Which way to follow edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From a node along its edges (what it depends on).
    #[default]
    Out,
    /// Against edges (what depends on it).
    In,
    /// Both ways.
    Both,
}

/// Limits on a graph write, checked before the writer is taken.
pub const MAX_BATCH_NODES: usize = 10_000;
/// See [`MAX_BATCH_NODES`].
pub const MAX_BATCH_EDGES: usize = 50_000;
/// Longest key or kind.
pub const MAX_KEY_BYTES: usize = 1_024;
/// Largest metadata object, serialised.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;

/// Checks one node input.
pub(crate) fn validate_node(node: &NodeInput) -> Result<()> {
    check_key("node key", &node.key)?;
    check_key("node kind", &node.kind)?;
    if node.label.len() > MAX_KEY_BYTES * 4 {
        return Err(Error::invalid(format!(
            "node label of {:?} is longer than {} bytes",
            node.key,
            MAX_KEY_BYTES * 4
        )));
    }
    check_layer(node.layer)?;
    check_confidence(node.confidence)?;
    check_metadata(&node.metadata)?;
    if node.source == GraphSource::Ast {
        return Err(Error::invalid(
            "source 'ast' is reserved for the code indexer; use agent, user or llm",
        ));
    }
    Ok(())
}

/// Checks one edge input.
pub(crate) fn validate_edge(edge: &EdgeInput) -> Result<()> {
    check_key("edge from", &edge.from)?;
    check_key("edge to", &edge.to)?;
    check_key("edge kind", &edge.kind)?;
    check_layer(edge.layer)?;
    check_confidence(edge.confidence)?;
    check_metadata(&edge.metadata)?;
    if !(edge.weight.is_finite() && edge.weight > 0.0) {
        return Err(Error::invalid(format!(
            "edge weight must be a finite number > 0, got {}",
            edge.weight
        )));
    }
    if edge.from == edge.to {
        return Err(Error::invalid(format!(
            "edge {} -[{}]-> itself: self-loops carry no dependency",
            edge.from, edge.kind
        )));
    }
    if edge.source == GraphSource::Ast {
        return Err(Error::invalid(
            "source 'ast' is reserved for the code indexer; use agent, user or llm",
        ));
    }
    Ok(())
}

fn check_key(what: &str, key: &str) -> Result<()> {
    if key.trim().is_empty() {
        return Err(Error::invalid(format!("{what} must not be empty")));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::invalid(format!(
            "{what} is longer than {MAX_KEY_BYTES} bytes"
        )));
    }
    Ok(())
}

fn check_layer(layer: u8) -> Result<()> {
    if !(1..=3).contains(&layer) {
        return Err(Error::invalid(format!(
            "layer must be 1, 2 or 3, got {layer}"
        )));
    }
    Ok(())
}

fn check_confidence(confidence: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&confidence) {
        return Err(Error::invalid(format!(
            "confidence must be within 0..=1, got {confidence}"
        )));
    }
    Ok(())
}

fn check_metadata(metadata: &serde_json::Value) -> Result<()> {
    if !metadata.is_object() {
        return Err(Error::invalid("metadata must be a JSON object"));
    }
    if metadata.to_string().len() > MAX_METADATA_BYTES {
        return Err(Error::invalid(format!(
            "metadata is larger than {MAX_METADATA_BYTES} bytes"
        )));
    }
    Ok(())
}
