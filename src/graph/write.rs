//! Graph writes: the idempotent batch inject, node and edge deletion, and the acyclicity check,
//! each inside one write transaction that also brings the closure table up to date.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use libsql::Connection;
use serde::Serialize;

use super::closure::{self, HopChange, NodeId};
use super::model::{
    is_acyclic, is_transitive, validate_edge, validate_node, EdgeInput, NodeInput, MAX_BATCH_EDGES,
    MAX_BATCH_NODES,
};
use crate::error::{DbContext, Error, Result};
use crate::memory::privacy::redact;

/// What an inject changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InjectSummary {
    /// Nodes that did not exist before.
    pub nodes_created: u32,
    /// Existing nodes written again (changed or not).
    pub nodes_updated: u32,
    /// Edges that did not exist before.
    pub edges_created: u32,
    /// Existing edges written again (changed or not).
    pub edges_updated: u32,
}

/// Validates a batch before any lock is taken.
pub(crate) fn validate_batch(nodes: &[NodeInput], edges: &[EdgeInput]) -> Result<()> {
    if nodes.len() > MAX_BATCH_NODES || edges.len() > MAX_BATCH_EDGES {
        return Err(Error::invalid(format!(
            "a graph batch holds at most {MAX_BATCH_NODES} nodes and {MAX_BATCH_EDGES} edges \
             (got {} and {}); split it",
            nodes.len(),
            edges.len()
        )));
    }
    nodes.iter().try_for_each(validate_node)?;
    edges.iter().try_for_each(validate_edge)
}

/// Hop weights seen before a write's first change to each pair, so the closure gets exactly
/// the hops whose weight changed. Past [`closure::REBUILD_THRESHOLD`] hops it stops looking
/// (the closure will be rebuilt anyway).
///
/// It also collects the nodes whose row or edges the write changes, which `apply` logs to `graph_log` with the closure's touched descendants, for the
/// in-process graph indexes (`served.rs`). Rust-side rather than by trigger: a trigger on the
/// node or edge table gives every insert a statement journal, which cost a cold index of
/// CPython 5.7 s in the graph sync (1.5 s without).
#[derive(Default)]
pub(crate) struct HopLog {
    before: BTreeMap<(NodeId, NodeId), Option<f64>>,
    overflow: bool,
    nodes: BTreeSet<NodeId>,
}

impl HopLog {
    /// Records the current weight of (from, to) unless already recorded.
    pub(crate) async fn touch(
        &mut self,
        conn: &Connection,
        from: NodeId,
        to: NodeId,
    ) -> Result<()> {
        if self.overflow {
            return Ok(());
        }
        if self.before.len() >= closure::REBUILD_THRESHOLD {
            self.overflow = true;
            self.before.clear();
            return Ok(());
        }
        if let std::collections::btree_map::Entry::Vacant(slot) = self.before.entry((from, to)) {
            slot.insert(closure::hop_weight(conn, from, to).await?);
        }
        Ok(())
    }

    /// Records that node `id`'s row changes (or goes).
    pub(crate) fn node(&mut self, id: NodeId) {
        self.nodes.insert(id);
    }

    /// Records that an edge `from -> to` (of any kind: the graph index holds them all) comes,
    /// changes or goes: both ends.
    pub(crate) fn edge(&mut self, from: NodeId, to: NodeId) {
        self.nodes.extend([from, to]);
    }

    /// Brings the closure up to date and logs what changed to `graph_log`: per-hop
    /// propagation; past the threshold the closure is left pending (built later, see
    /// `closure.rs`); a write onto a pending closure that is not that wide builds it, with
    /// the write's changes in it. Either of the last two logs the whole project.
    pub(crate) async fn apply(
        self,
        conn: &Connection,
        project_id: &str,
        cap: u32,
        now: i64,
    ) -> Result<()> {
        if self.overflow {
            return closure::mark_pending(conn, project_id, now).await;
        }
        if self.before.is_empty() && self.nodes.is_empty() {
            return Ok(());
        }
        if closure::state(conn, project_id).await? == Some(closure::PENDING) {
            closure::rebuild(conn, project_id, cap, now).await?;
            return Ok(());
        }
        let mut changes = Vec::with_capacity(self.before.len());
        for ((from, to), before) in self.before {
            let after = closure::hop_weight(conn, from, to).await?;
            if after != before {
                changes.push(HopChange {
                    from,
                    to,
                    before,
                    after,
                });
            }
        }
        let mut touched = closure::apply(conn, cap, &changes).await?;
        touched.extend(self.nodes);
        closure::log_changes(conn, project_id, Some(&touched)).await
    }
}

/// Makes sure the project's closure was built with `cap`, rebuilding it if not; a pending
/// closure stays pending (the write's [`HopLog::apply`] builds it if the write is not wide).
pub(crate) async fn ensure_cap(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
) -> Result<()> {
    match closure::state(conn, project_id).await? {
        Some(depth) if depth == cap || depth == closure::PENDING => Ok(()),
        _ => closure::rebuild(conn, project_id, cap, now).await.map(drop),
    }
}

/// The row id and source of a node, by key.
pub(crate) async fn node_id(
    conn: &Connection,
    project_id: &str,
    key: &str,
) -> Result<Option<(NodeId, String)>> {
    let mut rows = conn
        .query(
            "SELECT id, source FROM graph_nodes WHERE project_id = ?1 AND key = ?2",
            (project_id, key),
        )
        .await
        .ctx("looking up a graph node")?;
    match rows.next().await.ctx("looking up a graph node")? {
        Some(row) => Ok(Some((
            row.get(0).ctx("graph node")?,
            row.get(1).ctx("graph node")?,
        ))),
        None => Ok(None),
    }
}

/// Upserts nodes and edges (already validated) in the caller's transaction.
pub(crate) async fn inject(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
    nodes: &[NodeInput],
    edges: &[EdgeInput],
) -> Result<InjectSummary> {
    ensure_cap(conn, project_id, cap, now).await?;
    let mut summary = InjectSummary::default();
    let mut ids: HashMap<&str, NodeId> = HashMap::new();
    let mut hops = HopLog::default();

    let upsert_node = conn
        .prepare(
            "INSERT INTO graph_nodes (project_id, key, layer, kind, label, file_path, start_line,
               end_line, source, confidence, metadata, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12)
             ON CONFLICT (project_id, key) DO UPDATE SET
               layer = excluded.layer, kind = excluded.kind, label = excluded.label,
               file_path = excluded.file_path, start_line = excluded.start_line,
               end_line = excluded.end_line, source = excluded.source,
               confidence = excluded.confidence, metadata = excluded.metadata,
               updated_at = excluded.updated_at, stale_at = NULL
             RETURNING id",
        )
        .await
        .ctx("preparing node upsert")?;
    for node in nodes {
        let existing = node_id(conn, project_id, &node.key).await?;
        if let Some((_, source)) = &existing {
            if source == "ast" {
                return Err(owned_by_indexer("node", &node.key));
            }
        }
        let label = if node.label.is_empty() {
            &node.key
        } else {
            &node.label
        };
        upsert_node.reset();
        let mut rows = upsert_node
            .query(libsql::params![
                project_id,
                node.key.as_str(),
                node.layer,
                node.kind.as_str(),
                redact(label).text,
                node.file_path.as_deref(),
                node.start_line,
                node.end_line,
                node.source.as_str(),
                node.confidence,
                redact_json(&node.metadata).to_string(),
                now,
            ])
            .await
            .ctx("writing a graph node")?;
        let row = rows
            .next()
            .await
            .ctx("writing a graph node")?
            .ok_or_else(|| Error::Internal("node upsert returned no row".into()))?;
        let id: NodeId = row.get(0).ctx("graph node")?;
        hops.node(id);
        if existing.is_some() {
            summary.nodes_updated += 1;
        } else {
            summary.nodes_created += 1;
        }
        ids.insert(&node.key, id);
    }

    let upsert_edge = conn
        .prepare(
            "INSERT INTO graph_edges (project_id, from_id, to_id, kind, layer, weight, source,
               confidence, metadata, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
             ON CONFLICT (from_id, to_id, kind) DO UPDATE SET
               layer = excluded.layer, weight = excluded.weight, source = excluded.source,
               confidence = excluded.confidence, metadata = excluded.metadata,
               updated_at = excluded.updated_at, stale_at = NULL",
        )
        .await
        .ctx("preparing edge upsert")?;
    for edge in edges {
        let from = resolve(conn, project_id, &ids, &edge.from).await?;
        let to = resolve(conn, project_id, &ids, &edge.to).await?;
        let existing = edge_source(conn, from, to, &edge.kind).await?;
        match existing.as_deref() {
            Some("ast") => {
                return Err(owned_by_indexer(
                    "edge",
                    &format!("{} -[{}]-> {}", edge.from, edge.kind, edge.to),
                ));
            }
            Some(_) => summary.edges_updated += 1,
            None => {
                if is_acyclic(&edge.kind) && reaches(conn, to, from, &edge.kind).await? {
                    return Err(Error::Cycle(format!(
                        "{} -[{}]-> {} would close a cycle of '{}' edges",
                        edge.from, edge.kind, edge.to, edge.kind
                    )));
                }
                summary.edges_created += 1;
            }
        }
        if is_transitive(&edge.kind) {
            hops.touch(conn, from, to).await?;
        }
        hops.edge(from, to);
        upsert_edge.reset();
        upsert_edge
            .execute(libsql::params![
                project_id,
                from,
                to,
                edge.kind.as_str(),
                edge.layer,
                edge.weight,
                edge.source.as_str(),
                edge.confidence,
                redact_json(&edge.metadata).to_string(),
                now,
            ])
            .await
            .ctx("writing a graph edge")?;
    }
    hops.apply(conn, project_id, cap, now).await?;
    Ok(summary)
}

/// Deletes a node written through the API, detaching its edges. Returns false if absent.
pub(crate) async fn delete_node(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
    key: &str,
) -> Result<bool> {
    ensure_cap(conn, project_id, cap, now).await?;
    let Some((id, source)) = node_id(conn, project_id, key).await? else {
        return Ok(false);
    };
    if source == "ast" {
        return Err(owned_by_indexer("node", key));
    }
    let mut hops = HopLog::default();
    detach(conn, &mut hops, &[id]).await?;
    hops.node(id);
    hops.apply(conn, project_id, cap, now).await?;
    conn.execute("DELETE FROM graph_nodes WHERE id = ?1", [id])
        .await
        .ctx("deleting a graph node")?;
    Ok(true)
}

/// Deletes the edges of `ids` (in and out), recording their hops for the closure.
pub(crate) async fn detach(conn: &Connection, hops: &mut HopLog, ids: &[NodeId]) -> Result<()> {
    let select = conn
        .prepare(
            "SELECT from_id, to_id, kind FROM graph_edges WHERE from_id = ?1
             UNION ALL
             SELECT from_id, to_id, kind FROM graph_edges WHERE to_id = ?1",
        )
        .await
        .ctx("preparing edge lookup")?;
    let delete = conn
        .prepare("DELETE FROM graph_edges WHERE from_id = ?1 OR to_id = ?1")
        .await
        .ctx("preparing edge delete")?;
    for &id in ids {
        select.reset();
        let mut rows = select.query([id]).await.ctx("reading a node's edges")?;
        let mut pairs = Vec::new();
        while let Some(row) = rows.next().await.ctx("reading a node's edges")? {
            let kind: String = row.get(2).ctx("edge")?;
            let (from, to) = (
                row.get::<NodeId>(0).ctx("edge")?,
                row.get::<NodeId>(1).ctx("edge")?,
            );
            hops.edge(from, to);
            if is_transitive(&kind) {
                pairs.push((from, to));
            }
        }
        drop(rows);
        for (from, to) in pairs {
            hops.touch(conn, from, to).await?;
        }
        delete.reset();
        delete.execute([id]).await.ctx("deleting a node's edges")?;
    }
    Ok(())
}

/// Deletes one edge written through the API. Returns false if absent.
pub(crate) async fn delete_edge(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
    (from_key, to_key, kind): (&str, &str, &str),
) -> Result<bool> {
    ensure_cap(conn, project_id, cap, now).await?;
    let (Some((from, _)), Some((to, _))) = (
        node_id(conn, project_id, from_key).await?,
        node_id(conn, project_id, to_key).await?,
    ) else {
        return Ok(false);
    };
    match edge_source(conn, from, to, kind).await?.as_deref() {
        None => return Ok(false),
        Some("ast") => {
            return Err(owned_by_indexer(
                "edge",
                &format!("{from_key} -[{kind}]-> {to_key}"),
            ));
        }
        Some(_) => {}
    }
    let mut hops = HopLog::default();
    if is_transitive(kind) {
        hops.touch(conn, from, to).await?;
    }
    hops.edge(from, to);
    conn.execute(
        "DELETE FROM graph_edges WHERE from_id = ?1 AND to_id = ?2 AND kind = ?3",
        (from, to, kind),
    )
    .await
    .ctx("deleting a graph edge")?;
    hops.apply(conn, project_id, cap, now).await?;
    Ok(true)
}

async fn resolve(
    conn: &Connection,
    project_id: &str,
    batch: &HashMap<&str, NodeId>,
    key: &str,
) -> Result<NodeId> {
    if let Some(&id) = batch.get(key) {
        return Ok(id);
    }
    match node_id(conn, project_id, key).await? {
        Some((id, _)) => Ok(id),
        None => Err(Error::not_found("graph node", key)),
    }
}

/// The source of the edge (from, to, kind), if it exists.
pub(crate) async fn edge_source(
    conn: &Connection,
    from: NodeId,
    to: NodeId,
    kind: &str,
) -> Result<Option<String>> {
    let mut rows = conn
        .query(
            "SELECT source FROM graph_edges WHERE from_id = ?1 AND to_id = ?2 AND kind = ?3",
            (from, to, kind),
        )
        .await
        .ctx("looking up a graph edge")?;
    match rows.next().await.ctx("looking up a graph edge")? {
        Some(row) => Ok(Some(row.get(0).ctx("graph edge")?)),
        None => Ok(None),
    }
}

/// Whether `from` reaches `to` over edges of `kind` (any length).
async fn reaches(conn: &Connection, from: NodeId, to: NodeId, kind: &str) -> Result<bool> {
    // UNION (not UNION ALL) drops revisited nodes, so the walk ends on any graph.
    let mut rows = conn
        .query(
            "WITH RECURSIVE walk(id) AS (
               SELECT ?1
               UNION
               SELECT e.to_id FROM graph_edges e JOIN walk ON e.from_id = walk.id
               WHERE e.kind = ?3)
             SELECT 1 FROM walk WHERE id = ?2 LIMIT 1",
            (from, to, kind),
        )
        .await
        .ctx("checking for a cycle")?;
    Ok(rows.next().await.ctx("checking for a cycle")?.is_some())
}

fn owned_by_indexer(what: &str, key: &str) -> Error {
    Error::Conflict(format!(
        "the {what} {key} belongs to the code index; it changes only when the code does"
    ))
}

/// Redacts secrets in every string of a JSON value (keys included), and values under keys that
/// name a secret (`privacy::redact_json`).
pub(crate) fn redact_json(value: &serde_json::Value) -> serde_json::Value {
    let mut value = value.clone();
    crate::memory::privacy::redact_json(&mut value);
    value
}
