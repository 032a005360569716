//! The authored part of the graph (nodes and edges written through the API by agents, users
//! or an LLM) kept by key in the main home (`knowledge_nodes`, `knowledge_edges`), so that it
//! syncs; and the replay of synced rows into a device's own graph.
//!
//! The graph tables are local (integer ids, a closure table derived from them), so they never
//! sync themselves. Every API write copies what it wrote, as stored (redacted), into the keyed
//! tables in the same transaction; a pull hands the keys it changed to [`replay`], which
//! writes the graph through the same code as the API (closure, cycle checks) without copying
//! back. What cannot be replayed yet (an edge to a code node this device has not indexed, an
//! edge that would close a cycle here) is skipped and picked up by [`replay_pending_edges`],
//! which the indexer runs after every index of the project.

use libsql::{params, Connection};

use super::model::{EdgeInput, GraphSource, NodeInput};
use super::write;
use crate::error::{DbContext, Error, Result};

/// Copies the API-written nodes `keys` of `project_id` from the graph into
/// `knowledge_nodes`.
pub(crate) async fn record_nodes(conn: &Connection, project_id: &str, keys: &[&str]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    conn.execute(
        "INSERT INTO knowledge_nodes (project_id, key, layer, kind, label, file_path, start_line,
           end_line, source, confidence, metadata, created_at, updated_at)
         SELECT project_id, key, layer, kind, label, file_path, start_line, end_line, source,
           confidence, metadata, created_at, updated_at
         FROM graph_nodes
         WHERE project_id = ?1 AND key IN (SELECT value FROM json_each(?2)) AND source <> 'ast'
         ON CONFLICT (project_id, key) DO UPDATE SET
           layer = excluded.layer, kind = excluded.kind, label = excluded.label,
           file_path = excluded.file_path, start_line = excluded.start_line,
           end_line = excluded.end_line, source = excluded.source,
           confidence = excluded.confidence, metadata = excluded.metadata,
           updated_at = excluded.updated_at",
        params![project_id, json_list(keys)],
    )
    .await
    .ctx("recording authored graph nodes")?;
    Ok(())
}

/// Copies edges `?2` (JSON `[from, to, kind]` triples) of project `?1` from the graph into
/// `knowledge_edges`. CROSS JOIN fixes the loop order (the list first, then indexed lookups):
/// without statistics the planner looped over every node of the project and re-read the whole
/// list inside that loop: injecting 50,000 edges into a 50,000-node graph had run for 16
/// minutes when it was stopped.
const RECORD_EDGES: &str =
    "INSERT INTO knowledge_edges (project_id, from_key, to_key, kind, layer, weight, source,
      confidence, metadata, created_at, updated_at)
    SELECT e.project_id, f.key, t.key, e.kind, e.layer, e.weight, e.source, e.confidence,
      e.metadata, e.created_at, e.updated_at
    FROM json_each(?2) j
    CROSS JOIN graph_nodes f ON f.project_id = ?1 AND f.key = json_extract(j.value, '$[0]')
    CROSS JOIN graph_nodes t ON t.project_id = ?1 AND t.key = json_extract(j.value, '$[1]')
    CROSS JOIN graph_edges e ON e.from_id = f.id AND e.to_id = t.id
      AND e.kind = json_extract(j.value, '$[2]')
    WHERE e.source <> 'ast'
    ON CONFLICT (project_id, from_key, to_key, kind) DO UPDATE SET
      layer = excluded.layer, weight = excluded.weight, source = excluded.source,
      confidence = excluded.confidence, metadata = excluded.metadata,
      updated_at = excluded.updated_at";

/// Copies the API-written edges (from, to, kind) of `project_id` into `knowledge_edges`.
pub(crate) async fn record_edges(
    conn: &Connection,
    project_id: &str,
    edges: &[(&str, &str, &str)],
) -> Result<()> {
    if edges.is_empty() {
        return Ok(());
    }
    let list = serde_json::to_string(edges).expect("strings serialise");
    conn.execute(RECORD_EDGES, params![project_id, list])
        .await
        .ctx("recording authored graph edges")?;
    Ok(())
}

/// Removes a deleted node's copy and the copies of every edge touching it.
pub(crate) async fn forget_node(conn: &Connection, project_id: &str, key: &str) -> Result<()> {
    conn.execute(
        "DELETE FROM knowledge_edges WHERE project_id = ?1 AND (from_key = ?2 OR to_key = ?2)",
        params![project_id, key],
    )
    .await
    .ctx("forgetting an authored node's edges")?;
    conn.execute(
        "DELETE FROM knowledge_nodes WHERE project_id = ?1 AND key = ?2",
        params![project_id, key],
    )
    .await
    .ctx("forgetting an authored node")?;
    Ok(())
}

/// Removes a deleted edge's copy.
pub(crate) async fn forget_edge(
    conn: &Connection,
    project_id: &str,
    (from, to, kind): (&str, &str, &str),
) -> Result<()> {
    conn.execute(
        "DELETE FROM knowledge_edges
         WHERE project_id = ?1 AND from_key = ?2 AND to_key = ?3 AND kind = ?4",
        params![project_id, from, to, kind],
    )
    .await
    .ctx("forgetting an authored edge")?;
    Ok(())
}

/// What a replay did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replayed {
    /// Graph nodes and edges written or deleted.
    pub applied: u64,
    /// Rows that could not be applied here yet (missing end, cycle, a code node's key).
    pub deferred: u64,
}

/// Brings the graph in line with the keyed rows of `table` (`knowledge_nodes` or
/// `knowledge_edges`) at `keys` (sync keys: JSON arrays of the key columns) that a pull just
/// wrote or deleted, in the caller's transaction. `cap` is the engine's closure depth.
pub(crate) async fn replay(
    conn: &Connection,
    table: &str,
    keys: &[String],
    cap: u32,
    now: i64,
) -> Result<Replayed> {
    let mut done = Replayed::default();
    for key in keys {
        let parts: Vec<String> = serde_json::from_str(key)
            .map_err(|e| Error::Sync(format!("a synced graph key {key:?}: {e}")))?;
        let outcome = match (table, parts.as_slice()) {
            ("knowledge_nodes", [project, node]) => {
                replay_node(conn, project, node, cap, now).await
            }
            ("knowledge_edges", [project, from, to, kind]) => {
                replay_edge(conn, project, (from, to, kind), cap, now).await
            }
            _ => {
                return Err(Error::Sync(format!(
                    "a synced graph key {key:?} of {table}"
                )))
            }
        };
        match outcome {
            Ok(()) => done.applied += 1,
            // Resolved later (the end node appears) or never (it stays in the keyed table,
            // and the other devices' graphs, where it was valid).
            Err(Error::NotFound { .. } | Error::Cycle(_) | Error::Conflict(_)) => {
                done.deferred += 1
            }
            Err(other) => return Err(other),
        }
    }
    Ok(done)
}

async fn replay_node(
    conn: &Connection,
    project: &str,
    key: &str,
    cap: u32,
    now: i64,
) -> Result<()> {
    match read_node(conn, project, key).await? {
        Some(node) => write::inject(conn, project, cap, now, &[node], &[])
            .await
            .map(drop),
        None => write::delete_node(conn, project, cap, now, key)
            .await
            .map(drop),
    }
}

async fn replay_edge(
    conn: &Connection,
    project: &str,
    edge: (&str, &str, &str),
    cap: u32,
    now: i64,
) -> Result<()> {
    match read_edges(conn, project, Some(edge)).await?.pop() {
        Some(input) => write::inject(conn, project, cap, now, &[], &[input])
            .await
            .map(drop),
        None => write::delete_edge(conn, project, cap, now, edge)
            .await
            .map(drop),
    }
}

/// Writes into the graph every keyed edge of `project_id` whose two ends now exist but which
/// the graph lacks (deferred by an earlier replay), in the caller's transaction.
pub(crate) async fn replay_pending_edges(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
) -> Result<Replayed> {
    let mut done = Replayed::default();
    for edge in read_edges(conn, project_id, None).await? {
        match write::inject(conn, project_id, cap, now, &[], std::slice::from_ref(&edge)).await {
            Ok(_) => done.applied += 1,
            Err(Error::NotFound { .. } | Error::Cycle(_) | Error::Conflict(_)) => {
                done.deferred += 1
            }
            Err(other) => return Err(other),
        }
    }
    Ok(done)
}

async fn read_node(conn: &Connection, project: &str, key: &str) -> Result<Option<NodeInput>> {
    let mut rows = conn
        .query(
            "SELECT layer, kind, label, file_path, start_line, end_line, source, confidence,
               metadata
             FROM knowledge_nodes WHERE project_id = ?1 AND key = ?2",
            params![project, key],
        )
        .await
        .ctx("reading an authored node")?;
    let Some(row) = rows.next().await.ctx("reading an authored node")? else {
        return Ok(None);
    };
    let get = |e| Error::db("reading an authored node", e);
    Ok(Some(NodeInput {
        key: key.to_owned(),
        layer: row.get::<u32>(0).map_err(get)? as u8,
        kind: row.get(1).map_err(get)?,
        label: row.get(2).map_err(get)?,
        file_path: row.get(3).map_err(get)?,
        start_line: row.get(4).map_err(get)?,
        end_line: row.get(5).map_err(get)?,
        source: GraphSource::parse(&row.get::<String>(6).map_err(get)?)?,
        confidence: row.get(7).map_err(get)?,
        metadata: parse_object(&row.get::<String>(8).map_err(get)?),
    }))
}

/// The keyed edges of `project`: the one named by `only`, or (with `None`) every one the
/// graph lacks although both its ends exist.
async fn read_edges(
    conn: &Connection,
    project: &str,
    only: Option<(&str, &str, &str)>,
) -> Result<Vec<EdgeInput>> {
    const COLUMNS: &str = "k.from_key, k.to_key, k.kind, k.layer, k.weight, k.source,
        k.confidence, k.metadata";
    let mut rows = match only {
        Some((from, to, kind)) => {
            conn.query(
                &format!(
                    "SELECT {COLUMNS} FROM knowledge_edges k WHERE k.project_id = ?1
                     AND k.from_key = ?2 AND k.to_key = ?3 AND k.kind = ?4"
                ),
                params![project, from, to, kind],
            )
            .await
        }
        None => {
            conn.query(
                &format!(
                    "SELECT {COLUMNS} FROM knowledge_edges k
                     JOIN graph_nodes f ON f.project_id = k.project_id AND f.key = k.from_key
                     JOIN graph_nodes t ON t.project_id = k.project_id AND t.key = k.to_key
                     WHERE k.project_id = ?1 AND NOT EXISTS (
                       SELECT 1 FROM graph_edges e
                       WHERE e.from_id = f.id AND e.to_id = t.id AND e.kind = k.kind)"
                ),
                params![project],
            )
            .await
        }
    }
    .ctx("reading authored edges")?;
    let get = |e| Error::db("reading an authored edge", e);
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading authored edges")? {
        out.push(EdgeInput {
            from: row.get(0).map_err(get)?,
            to: row.get(1).map_err(get)?,
            kind: row.get(2).map_err(get)?,
            layer: row.get::<u32>(3).map_err(get)? as u8,
            weight: row.get(4).map_err(get)?,
            source: GraphSource::parse(&row.get::<String>(5).map_err(get)?)?,
            confidence: row.get(6).map_err(get)?,
            metadata: parse_object(&row.get::<String>(7).map_err(get)?),
        });
    }
    Ok(out)
}

/// Metadata as stored (always a JSON object; anything else reads as an empty one).
fn parse_object(text: &str) -> serde_json::Value {
    match serde_json::from_str(text) {
        Ok(value @ serde_json::Value::Object(_)) => value,
        _ => serde_json::Value::Object(Default::default()),
    }
}

fn json_list(keys: &[&str]) -> String {
    serde_json::to_string(keys).expect("strings serialise")
}

#[cfg(test)]
mod tests {
    use super::RECORD_EDGES;
    use crate::store::plan::{list_drives, query_plan};

    #[tokio::test]
    async fn recording_edges_loops_over_the_given_list() {
        let plan = query_plan(RECORD_EDGES).await;
        assert!(list_drives(&plan), "{plan:#?}");
    }
}
