//! Layer 2 from a language model: the app's deriver (an LLM behind a callback) receives a
//! summary of each module (files, entry points, module imports both ways, symbols) and
//! returns relations; those replace the relations it returned for the same modules before,
//! in one transaction that keeps the closure exact. Everything it writes is `source = 'llm'`
//! and layer 2; it can change neither code rows nor what agents and users wrote
//! (ENGRAM_CONFLICT).

use std::collections::HashSet;

use libsql::Connection;
use serde::Serialize;

use super::closure::NodeId;
use super::model::{is_transitive, EdgeInput, GraphSource, NodeInput};
use super::write::{edge_source, ensure_cap, inject, node_id, validate_batch, HopLog};
use crate::error::{DbContext, Error, Result};

/// Modules sent to the deriver per call.
pub const MODULES_PER_REQUEST: usize = 25;
/// Most files, and most symbols, listed per module.
const MAX_LISTED: u32 = 100;

/// What the deriver is told about one module.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSummary {
    /// The module's key (`src/auth/`): edges returned for it start or end here.
    pub key: String,
    /// Its files (at most 100, in key order).
    pub files: Vec<String>,
    /// Its entry-point files (`index.ts`, `main.go`, `__main__.py`...).
    pub entry_points: Vec<String>,
    /// Modules it imports.
    pub imports: Vec<String>,
    /// Modules importing it.
    pub imported_by: Vec<String>,
    /// Keys of the symbols its files define (at most 100, in key order).
    pub symbols: Vec<String>,
}

/// What one derivation wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DerivedSummary {
    /// Modules the deriver was asked about.
    pub modules: u32,
    /// Nodes created or rewritten.
    pub nodes_written: u32,
    /// Edges created or rewritten.
    pub edges_written: u32,
    /// Edges the deriver returned for these modules before but not this time.
    pub edges_removed: u32,
    /// Derived nodes that only the dropped edges held, deleted.
    pub nodes_removed: u32,
}

impl DerivedSummary {
    /// Adds another derivation's counts.
    pub fn add(&mut self, other: &DerivedSummary) {
        self.modules += other.modules;
        self.nodes_written += other.nodes_written;
        self.edges_written += other.edges_written;
        self.edges_removed += other.edges_removed;
        self.nodes_removed += other.nodes_removed;
    }
}

/// Keys of the project's module nodes, in key order.
pub(crate) async fn module_keys(conn: &Connection, project_id: &str) -> Result<Vec<String>> {
    strings(
        conn,
        "SELECT key FROM graph_nodes WHERE project_id = ?1 AND layer = 2 AND kind = 'module'
         AND source = 'ast' ORDER BY key",
        libsql::params![project_id],
    )
    .await
}

/// Summaries of the modules named by `keys` (keys that are not modules are skipped).
pub(crate) async fn module_summaries(
    conn: &Connection,
    project_id: &str,
    keys: &[String],
) -> Result<Vec<ModuleSummary>> {
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let mut rows = conn
            .query(
                "SELECT id, metadata FROM graph_nodes
                 WHERE project_id = ?1 AND key = ?2 AND kind = 'module' AND source = 'ast'",
                (project_id, key.as_str()),
            )
            .await
            .ctx("reading a module")?;
        let Some(row) = rows.next().await.ctx("reading a module")? else {
            continue;
        };
        let id: NodeId = row.get(0).ctx("module")?;
        let metadata: serde_json::Value =
            serde_json::from_str(&row.get::<String>(1).ctx("module")?).unwrap_or_default();
        drop(rows);
        let neighbours = |sql: &'static str| strings(conn, sql, libsql::params![id, MAX_LISTED]);
        out.push(ModuleSummary {
            key: key.clone(),
            files: neighbours(
                "SELECT t.key FROM graph_edges e JOIN graph_nodes t ON t.id = e.to_id
                 WHERE e.from_id = ?1 AND e.kind = 'contains' AND t.kind = 'file'
                 ORDER BY t.key LIMIT ?2",
            )
            .await?,
            entry_points: metadata
                .get("entryPoints")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            imports: neighbours(
                "SELECT t.key FROM graph_edges e JOIN graph_nodes t ON t.id = e.to_id
                 WHERE e.from_id = ?1 AND e.kind = 'imports' AND e.layer = 2
                 ORDER BY t.key LIMIT ?2",
            )
            .await?,
            imported_by: neighbours(
                "SELECT f.key FROM graph_edges e JOIN graph_nodes f ON f.id = e.from_id
                 WHERE e.to_id = ?1 AND e.kind = 'imports' AND e.layer = 2
                 ORDER BY f.key LIMIT ?2",
            )
            .await?,
            symbols: neighbours(
                "SELECT s.key FROM graph_edges m
                 JOIN graph_edges c ON c.from_id = m.to_id AND c.kind = 'contains'
                 JOIN graph_nodes s ON s.id = c.to_id
                 WHERE m.from_id = ?1 AND m.kind = 'contains'
                 ORDER BY s.key LIMIT ?2",
            )
            .await?,
        });
    }
    Ok(out)
}

async fn strings(
    conn: &Connection,
    sql: &str,
    params: impl libsql::params::IntoParams,
) -> Result<Vec<String>> {
    let mut rows = conn.query(sql, params).await.ctx("reading a module")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading a module")? {
        out.push(row.get(0).ctx("module")?);
    }
    Ok(out)
}

/// Replaces the LLM relations of `modules` with `nodes` and `edges`, in the caller's
/// transaction; all are written as layer 2, `source = 'llm'`. An edge belongs to the module
/// it starts from, or (when it starts at a concept or any other non-module node) to the module
/// it ends at: that module must be one of `modules`, and only edges belonging to `modules`
/// are replaced, so answering for one module never drops what another's answer said. Nodes
/// and edges written by agents or users are refused (`ENGRAM_CONFLICT`), like code rows.
pub(crate) async fn apply(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
    modules: &[String],
    mut nodes: Vec<NodeInput>,
    mut edges: Vec<EdgeInput>,
) -> Result<DerivedSummary> {
    validate_batch(&nodes, &edges)?;
    let asked: HashSet<&str> = modules.iter().map(String::as_str).collect();
    let from_keys: Vec<&str> = edges.iter().map(|e| e.from.as_str()).collect();
    let module_starts: HashSet<String> = strings(
        conn,
        "SELECT key FROM graph_nodes WHERE project_id = ?1 AND kind = 'module' AND source = 'ast'
           AND key IN (SELECT value FROM json_each(?2))",
        libsql::params![
            project_id,
            serde_json::to_string(&from_keys).unwrap_or_default()
        ],
    )
    .await?
    .into_iter()
    .collect();
    for edge in &edges {
        let owner = if module_starts.contains(&edge.from) {
            &edge.from
        } else {
            &edge.to
        };
        if !asked.contains(owner.as_str()) {
            return Err(Error::invalid(format!(
                "a derived edge belongs to the module it starts from, or else to the module it \
                 ends at, and that module must be one asked about; {} -[{}]-> {} belongs to {owner}",
                edge.from, edge.kind, edge.to
            )));
        }
    }
    for node in &mut nodes {
        node.layer = 2;
        node.source = GraphSource::Llm;
        if let Some((_, source)) = node_id(conn, project_id, &node.key).await? {
            if source != "llm" {
                return Err(Error::Conflict(format!(
                    "node {} was written by the {source} source; a deriver cannot replace it",
                    node.key
                )));
            }
        }
    }
    for edge in &mut edges {
        edge.layer = 2;
        edge.source = GraphSource::Llm;
        let (Some((from, _)), Some((to, _))) = (
            node_id(conn, project_id, &edge.from).await?,
            node_id(conn, project_id, &edge.to).await?,
        ) else {
            continue;
        };
        if let Some(source) = edge_source(conn, from, to, &edge.kind).await? {
            if source != "llm" {
                return Err(Error::Conflict(format!(
                    "edge {} -[{}]-> {} was written by the {source} source; a deriver cannot \
                     replace it",
                    edge.from, edge.kind, edge.to
                )));
            }
        }
    }
    ensure_cap(conn, project_id, cap, now).await?;
    let mut module_ids = Vec::new();
    for key in modules {
        if let Some((id, _)) = node_id(conn, project_id, key).await? {
            module_ids.push(id);
        }
    }

    // The previous answers' edges belonging to these modules that this one does not repeat
    // go (repeated ones are upserted below and keep their closure rows).
    let keep: HashSet<(&str, &str, &str)> = edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str(), e.kind.as_str()))
        .collect();
    let mut rows = conn
        .query(
            "SELECT e.from_id, e.to_id, e.kind, f.key, t.key FROM graph_edges e
             JOIN graph_nodes f ON f.id = e.from_id JOIN graph_nodes t ON t.id = e.to_id
             WHERE e.source = 'llm'
               AND (e.from_id IN (SELECT value FROM json_each(?1))
                    OR (e.to_id IN (SELECT value FROM json_each(?1))
                        AND NOT (f.kind = 'module' AND f.source = 'ast')))",
            [serde_json::to_string(&module_ids).unwrap_or_default()],
        )
        .await
        .ctx("reading derived edges")?;
    let mut gone = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading derived edges")? {
        let kind: String = row.get(2).ctx("derived edge")?;
        let (from_key, to_key): (String, String) = (
            row.get(3).ctx("derived edge")?,
            row.get(4).ctx("derived edge")?,
        );
        if !keep.contains(&(from_key.as_str(), to_key.as_str(), kind.as_str())) {
            gone.push((
                row.get::<NodeId>(0).ctx("derived edge")?,
                row.get::<NodeId>(1).ctx("derived edge")?,
                kind,
            ));
        }
    }
    drop(rows);
    let mut hops = HopLog::default();
    for (from, to, kind) in &gone {
        if is_transitive(kind) {
            hops.touch(conn, *from, *to).await?;
        }
        hops.edge(*from, *to);
        conn.execute(
            "DELETE FROM graph_edges WHERE from_id = ?1 AND to_id = ?2 AND kind = ?3",
            (*from, *to, kind.as_str()),
        )
        .await
        .ctx("deleting a derived edge")?;
    }
    hops.apply(conn, project_id, cap, now).await?;

    let written = inject(conn, project_id, cap, now, &nodes, &edges).await?;
    // Derived nodes that only the dropped edges held, and that this answer does not name.
    let ends: HashSet<NodeId> = gone.iter().flat_map(|(f, t, _)| [*f, *t]).collect();
    let named: Vec<&str> = nodes.iter().map(|n| n.key.as_str()).collect();
    let nodes_removed = conn
        .execute(
            "DELETE FROM graph_nodes WHERE id IN (SELECT value FROM json_each(?1))
               AND source = 'llm' AND layer = 2
               AND key NOT IN (SELECT value FROM json_each(?2))
               AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.from_id = graph_nodes.id)
               AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.to_id = graph_nodes.id)",
            (
                serde_json::to_string(&ends).unwrap_or_default(),
                serde_json::to_string(&named).unwrap_or_default(),
            ),
        )
        .await
        .ctx("deleting orphaned derived nodes")?;
    if nodes_removed > 0 {
        let ends: std::collections::BTreeSet<NodeId> = ends.into_iter().collect();
        super::closure::log_changes(conn, project_id, Some(&ends)).await?;
    }
    Ok(DerivedSummary {
        modules: modules.len() as u32,
        nodes_written: written.nodes_created + written.nodes_updated,
        edges_written: written.edges_created + written.edges_updated,
        edges_removed: gone.len() as u32,
        nodes_removed: nodes_removed as u32,
    })
}
