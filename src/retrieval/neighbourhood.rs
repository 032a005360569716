//! Which files sit next to which in the code: one edge of the graph (an import, a call, an
//! inheritance, or an agent's or LLM's relation) between anything in one file and anything in
//! another. Containment is not a neighbourhood (a file contains its own symbols).
//!
//! Serves the graph neighbourhood boost (candidates next to the top results) and the graph
//! candidate path (neighbours of the files the agent is working in). This is the tables'
//! answer; `Engram::file_neighbours` gives the in-process graph index's (`graph/index.rs`,
//! the same answer) once it is loaded.

use std::collections::{BTreeSet, HashMap};

use libsql::params;

use crate::error::{DbContext, Result};
use crate::store::Store;

/// For each file, the other files one edge away.
pub type FileNeighbours = HashMap<String, BTreeSet<String>>;

/// Most files looked up in one call (the top results' files, or the agent's recent files).
pub const MAX_FILES: usize = 200;

/// Both directions of one-edge links between files in `?2` (a JSON array of paths) and other
/// files. Reads the nodes of the given files by `graph_nodes_file`, their edges by the edge
/// table's unique key (from) and `graph_edges_to` (to).
const FILE_NEIGHBOURS: &str = "
    WITH given AS (
      SELECT id, file_path FROM graph_nodes
      WHERE project_id = ?1 AND file_path IN (SELECT value FROM json_each(?2)))
    SELECT g.file_path, o.file_path FROM given g
      JOIN graph_edges e ON e.from_id = g.id JOIN graph_nodes o ON o.id = e.to_id
      WHERE e.kind != 'contains' AND o.file_path IS NOT NULL AND o.file_path != g.file_path
    UNION
    SELECT g.file_path, o.file_path FROM given g
      JOIN graph_edges e ON e.to_id = g.id JOIN graph_nodes o ON o.id = e.from_id
      WHERE e.kind != 'contains' AND o.file_path IS NOT NULL AND o.file_path != g.file_path";

/// For each of `files` (at most [`MAX_FILES`] are looked up), the other files one edge away.
/// Files with no neighbour are absent.
pub async fn file_neighbours(
    store: &Store,
    project_id: &str,
    files: &[String],
) -> Result<FileNeighbours> {
    let mut out = FileNeighbours::new();
    if files.is_empty() {
        return Ok(out);
    }
    let files = &files[..files.len().min(MAX_FILES)];
    let json = serde_json::to_string(files).unwrap_or_else(|_| "[]".to_owned());
    let reader = store.reader().await;
    let mut rows = reader
        .query(FILE_NEIGHBOURS, params![project_id, json])
        .await
        .ctx("reading file neighbours")?;
    while let Some(row) = rows.next().await.ctx("reading file neighbours")? {
        let from: String = row.get(0).ctx("file")?;
        let to: String = row.get(1).ctx("neighbour")?;
        out.entry(from).or_default().insert(to);
    }
    Ok(out)
}
