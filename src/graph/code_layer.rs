//! Layer 1, structural: file and symbol nodes and their `contains`, `imports`, `calls`,
//! `extends` and `implements` edges, derived from the code index after each index run.
//!
//! The sync is a diff, not a rewrite: node ids stay stable across re-indexes (memories and
//! agent edges hang on them), an edit that leaves a file's edges alone touches no edge, and
//! only hops that really changed reach the closure. Its scope after an incremental run is the
//! changed files plus the references elsewhere to names those files define or defined (their
//! resolution may have moved); a full run or a very wide change syncs everything, a few
//! hundred files at a time (every part's nodes, then every part's edges, then the nodes of
//! files that left the index), so that what it holds in memory does not grow with the
//! project.
//!
//! Symbols are keyed `path:Qualified.name`; definitions sharing a qualified name in one file
//! (overloads, redefinitions) are one node. A symbol whose text hash changed, or that
//! disappeared, marks the memories attached to it stale and in need of review.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use libsql::Connection;
use serde::Serialize;

use super::closure::NodeId;
use super::module_layer::{self, module_of};
use super::write::{detach, ensure_cap, HopLog};
use crate::error::{DbContext, Result};

/// What a sync covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SyncScope<'a> {
    /// Every file of the project.
    All,
    /// These files (changed, added or removed), and references elsewhere to these names.
    Files {
        paths: &'a [String],
        defined_names: &'a [String],
    },
}

/// What a sync changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphSyncSummary {
    /// Wall time of the sync (the code index's re-resolution of references before it is not
    /// included).
    pub duration: std::time::Duration,
    /// Nodes created or changed.
    pub nodes_written: u64,
    /// Nodes deleted with their files or definitions.
    pub nodes_removed: u64,
    /// Edges created or re-weighted.
    pub edges_written: u64,
    /// Edges deleted.
    pub edges_removed: u64,
    /// Memories newly marked stale because a symbol they are attached to changed or went away.
    pub memories_marked_stale: u64,
    /// Modules whose files or imports the sync touched (those still present), for a
    /// deriver of LLM relations.
    pub modules_changed: Vec<String>,
    /// Agent, user and LLM nodes newly marked stale: they have an edge to or from a symbol
    /// whose text changed or that went away.
    pub graph_nodes_marked_stale: u64,
    /// LLM relations newly marked stale: they touch a module the sync changed.
    pub edges_marked_stale: u64,
}

/// A desired or existing layer-1 node.
#[derive(Debug, Clone, PartialEq)]
struct NodeRow {
    kind: String,
    label: String,
    file_path: String,
    start_line: Option<u32>,
    end_line: Option<u32>,
    content_hash: Option<String>,
}

/// The key of a symbol node.
pub fn symbol_key(path: &str, qualified_name: &str) -> String {
    format!("{path}:{qualified_name}")
}

/// Files per part of a whole-project sync. A part's nodes, keys and edges are all the sync
/// holds in memory at once, so this, not the project's size, bounds it: syncing 225k nodes
/// and 330k edges in one piece took ~230 MB on top of the index run (PERFORMANCE.md).
const PART_FILES: usize = 512;

/// Brings layer 1 up to date with the code index for `scope`, in the caller's transaction.
pub(crate) async fn sync(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
    scope: SyncScope<'_>,
) -> Result<GraphSyncSummary> {
    sync_in_parts(conn, project_id, cap, now, scope, PART_FILES).await
}

/// [`sync`], a whole project `part_files` files at a time.
pub(crate) async fn sync_in_parts(
    conn: &Connection,
    project_id: &str,
    cap: u32,
    now: i64,
    scope: SyncScope<'_>,
    part_files: usize,
) -> Result<GraphSyncSummary> {
    ensure_cap(conn, project_id, cap, now).await?;
    let mut run = LayerSync {
        conn,
        project_id,
        now,
        summary: GraphSyncSummary::default(),
        hops: HopLog::default(),
        modules: BTreeSet::new(),
        stale_keys: Vec::new(),
        removed_keys: Vec::new(),
    };
    match scope {
        SyncScope::Files {
            paths,
            defined_names,
        } => {
            let part = Part::Files {
                paths_json: serde_json::to_string(paths).unwrap_or_default(),
                defined_names,
            };
            run.nodes(&part).await?;
            run.edges(&part).await?;
        }
        SyncScope::All => {
            let paths = indexed_paths(conn, project_id).await?;
            let parts: Vec<Part<'_>> = paths
                .chunks(part_files.max(1))
                .map(|chunk| Part::Files {
                    paths_json: serde_json::to_string(chunk).unwrap_or_default(),
                    defined_names: &[],
                })
                .collect();
            drop(paths);
            // Every part's nodes before any part's edges: an edge may end in another part.
            for part in parts.iter().chain([&Part::Orphans]) {
                run.nodes(part).await?;
            }
            for part in &parts {
                run.edges(part).await?;
            }
        }
    }
    run.finish(cap).await
}

/// A node to create: key, kind, label, file path, first and last line, content hash.
type NewNode<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    Option<u32>,
    Option<u32>,
    Option<&'a str>,
);

/// Creates the layer-1 nodes `?2` (a JSON array of [`NewNode`]s) of project `?1` at `?3`;
/// returns each one's id, key and whether it is a file.
const INSERT_NODES: &str = "INSERT INTO graph_nodes (project_id, key, layer, kind, label,
       file_path, start_line, end_line, source, confidence, content_hash, created_at, updated_at)
     SELECT ?1, n.value ->> 0, 1, n.value ->> 1, n.value ->> 2, n.value ->> 3, n.value ->> 4,
       n.value ->> 5, 'ast', 1.0, n.value ->> 6, ?3, ?3
     FROM json_each(?2) n
     RETURNING id, key, kind = 'file'";

/// Creates or re-weighs the layer-1 edges `?2` (a JSON array of `[from, to, kind, weight]`)
/// of project `?1` at `?3`. (`WHERE true`: SQLite's parser needs it before an upsert clause.)
const UPSERT_EDGES: &str = "INSERT INTO graph_edges (project_id, from_id, to_id, kind, layer,
       weight, source, confidence, created_at, updated_at)
     SELECT ?1, e.value ->> 0, e.value ->> 1, e.value ->> 2, 1, e.value ->> 3, 'ast', 1.0, ?3, ?3
     FROM json_each(?2) e WHERE true
     ON CONFLICT (from_id, to_id, kind) DO UPDATE SET
       weight = excluded.weight, updated_at = excluded.updated_at";

/// A piece of a sync's scope, synced at once.
enum Part<'a> {
    /// These files (`paths_json`, a JSON array), and references elsewhere to `defined_names`.
    Files {
        paths_json: String,
        defined_names: &'a [String],
    },
    /// Nodes stored for files that are no longer indexed (a whole-project sync's last part).
    Orphans,
}

/// The state of one sync across its parts.
struct LayerSync<'c> {
    conn: &'c Connection,
    project_id: &'c str,
    now: i64,
    summary: GraphSyncSummary,
    hops: HopLog,
    /// Modules whose aggregated imports may change: those of the files synced, and those of
    /// files importing a file that went away.
    modules: BTreeSet<String>,
    /// Symbols whose text changed or that went away: their memories go stale.
    stale_keys: Vec<String>,
    /// Nodes that went away: memories about those files go stale.
    removed_keys: Vec<String>,
}

impl LayerSync<'_> {
    /// Updates, removes and creates the part's nodes.
    async fn nodes(&mut self, part: &Part<'_>) -> Result<()> {
        let (conn, project_id, now) = (self.conn, self.project_id, self.now);
        let desired = match part {
            Part::Files { paths_json, .. } => desired_nodes(conn, project_id, paths_json).await?,
            Part::Orphans => BTreeMap::new(),
        };
        let existing = existing_nodes(conn, project_id, part).await?;
        let mut stale_keys = Vec::new();
        let mut removed_ids = Vec::new();
        // Prepared once: an edit can change every symbol of a file.
        let update = conn
            .prepare(
                "UPDATE graph_nodes SET kind = ?2, label = ?3, start_line = ?4, end_line = ?5,
                   content_hash = ?6, updated_at = ?7, stale_at = NULL
                 WHERE id = ?1",
            )
            .await
            .ctx("preparing layer-1 node update")?;
        for (key, (id, row)) in &existing {
            match desired.get(key) {
                None => {
                    removed_ids.push(*id);
                    stale_keys.push(key.clone());
                    self.removed_keys.push(key.clone());
                }
                Some(want) => {
                    if want != row {
                        if row.content_hash.is_some() && want.content_hash != row.content_hash {
                            stale_keys.push(key.clone());
                        }
                        self.hops.node(*id);
                        update.reset();
                        update
                            .execute(libsql::params![
                                *id,
                                want.kind.as_str(),
                                want.label.as_str(),
                                want.start_line,
                                want.end_line,
                                want.content_hash.as_deref(),
                                now
                            ])
                            .await
                            .ctx("updating a layer-1 node")?;
                        self.summary.nodes_written += 1;
                    }
                }
            }
        }
        self.modules.extend(
            desired
                .iter()
                .chain(existing.iter().map(|(k, (_, row))| (k, row)))
                .filter(|(_, row)| row.kind == "file")
                .filter_map(|(key, _)| module_of(key)),
        );
        // Knowledge written about changed or removed code (agent, user and LLM nodes with an
        // edge to or from it) may be outdated now: flag it before removed nodes lose their
        // edges.
        let changed_ids: Vec<NodeId> = stale_keys
            .iter()
            .filter_map(|k| existing.get(k).map(|(id, _)| *id))
            .collect();
        self.summary.graph_nodes_marked_stale +=
            mark_neighbours_stale(conn, project_id, &mut self.hops, &changed_ids, now).await?;
        self.stale_keys.append(&mut stale_keys);
        if !removed_ids.is_empty() {
            self.modules
                .extend(importer_modules(conn, &removed_ids).await?);
            detach(conn, &mut self.hops, &removed_ids).await?;
            removed_ids.iter().for_each(|id| self.hops.node(*id));
            conn.execute(
                "DELETE FROM graph_nodes WHERE id IN (SELECT value FROM json_each(?1))",
                [serde_json::to_string(&removed_ids).unwrap_or_default()],
            )
            .await
            .ctx("deleting layer-1 nodes")?;
            self.summary.nodes_removed += removed_ids.len() as u64;
            for (key, (_, row)) in &existing {
                if row.kind == "file" && !desired.contains_key(key) {
                    if let Some(module) = module_of(key) {
                        module_layer::prune(conn, project_id, &mut self.hops, &module).await?;
                    }
                }
            }
        }
        // New nodes in one statement: a statement per node spent more on the statement than
        // on the row (PERFORMANCE.md, "peak RSS of an index run").
        let new: Vec<NewNode<'_>> = desired
            .iter()
            .filter(|(key, _)| !existing.contains_key(*key))
            .map(|(key, row)| {
                (
                    key.as_str(),
                    row.kind.as_str(),
                    row.label.as_str(),
                    row.file_path.as_str(),
                    row.start_line,
                    row.end_line,
                    row.content_hash.as_deref(),
                )
            })
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let mut rows = conn
            .query(
                INSERT_NODES,
                libsql::params![
                    project_id,
                    serde_json::to_string(&new).unwrap_or_default(),
                    now
                ],
            )
            .await
            .ctx("writing layer-1 nodes")?;
        let mut files = Vec::new();
        while let Some(row) = rows.next().await.ctx("writing layer-1 nodes")? {
            let id: NodeId = row.get(0).ctx("layer-1 node")?;
            self.hops.node(id);
            self.summary.nodes_written += 1;
            if row.get::<i64>(2).ctx("layer-1 node")? == 1 {
                files.push((row.get::<String>(1).ctx("layer-1 node")?, id));
            }
        }
        drop(rows);
        for (key, id) in files {
            module_layer::add_file(conn, project_id, now, &mut self.hops, (&key, id)).await?;
        }
        Ok(())
    }

    /// Brings the edges out of the part's nodes, and the references elsewhere whose
    /// resolution may move, up to date. Every node they may end at exists by now.
    async fn edges(&mut self, part: &Part<'_>) -> Result<()> {
        let Part::Files {
            paths_json,
            defined_names,
        } = part
        else {
            return Ok(());
        };
        let (conn, project_id, now) = (self.conn, self.project_id, self.now);
        let wanted = {
            let nodes = desired_nodes(conn, project_id, paths_json).await?;
            desired_edges(conn, project_id, paths_json, defined_names, &nodes).await?
        };
        let have = existing_edges(conn, project_id, paths_json, defined_names).await?;
        // Imports of a directory (Go packages) point at its module node, `dir/`.
        let package_keys: Vec<String> = wanted
            .keys()
            .filter(|(_, _, kind)| kind == "imports")
            .map(|(_, to, _)| format!("{to}/"))
            .collect();
        let mut keys: Vec<&str> = wanted
            .keys()
            .flat_map(|(from, to, _)| [from.as_str(), to.as_str()])
            .chain(package_keys.iter().map(String::as_str))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let ids = ids_of(conn, project_id, &keys).await?;
        drop(keys);

        let mut wanted_by_id: BTreeMap<(NodeId, NodeId, String), f64> = BTreeMap::new();
        for ((from, to, kind), weight) in wanted {
            let to_id = match ids.get(&to) {
                Some(id) => Some(id),
                None if kind == "imports" => ids.get(&format!("{to}/")),
                None => None,
            };
            if let (Some(&f), Some(&t)) = (ids.get(&from), to_id) {
                if f != t {
                    wanted_by_id.insert((f, t, kind), weight);
                }
            }
        }
        let delete = conn
            .prepare("DELETE FROM graph_edges WHERE from_id = ?1 AND to_id = ?2 AND kind = ?3")
            .await
            .ctx("preparing layer-1 edge delete")?;
        for ((from, to, kind), weight) in &have {
            match wanted_by_id.get(&(*from, *to, kind.clone())) {
                Some(w) if w == weight => {}
                _ => {
                    if super::model::is_transitive(kind) {
                        self.hops.touch(conn, *from, *to).await?;
                    }
                    self.hops.edge(*from, *to);
                    if !wanted_by_id.contains_key(&(*from, *to, kind.clone())) {
                        delete.reset();
                        delete
                            .execute((*from, *to, kind.as_str()))
                            .await
                            .ctx("deleting a layer-1 edge")?;
                        self.summary.edges_removed += 1;
                    }
                }
            }
        }
        let mut upserts: Vec<(NodeId, NodeId, &str, f64)> = Vec::new();
        for ((from, to, kind), weight) in &wanted_by_id {
            if have.get(&(*from, *to, kind.clone())) == Some(weight) {
                continue;
            }
            if super::model::is_transitive(kind) {
                self.hops.touch(conn, *from, *to).await?;
            }
            self.hops.edge(*from, *to);
            upserts.push((*from, *to, kind.as_str(), *weight));
        }
        if !upserts.is_empty() {
            // In one statement, as the nodes are.
            conn.execute(
                UPSERT_EDGES,
                libsql::params![
                    project_id,
                    serde_json::to_string(&upserts).unwrap_or_default(),
                    now
                ],
            )
            .await
            .ctx("writing layer-1 edges")?;
            self.summary.edges_written += upserts.len() as u64;
        }
        Ok(())
    }

    /// What follows the parts: module imports, staleness, the closure.
    async fn finish(mut self, cap: u32) -> Result<GraphSyncSummary> {
        let (conn, project_id, now) = (self.conn, self.project_id, self.now);
        let mut summary = self.summary;
        summary.edges_written +=
            module_layer::aggregate_imports(conn, project_id, now, &mut self.hops, &self.modules)
                .await?;
        summary.modules_changed = existing_keys(conn, project_id, &self.modules).await?;
        // What the app's LLM said about a changed module is stale until it is derived again.
        summary.edges_marked_stale = conn
            .execute(
                "UPDATE graph_edges SET stale_at = ?3
                 WHERE source = 'llm' AND stale_at IS NULL
                   AND (from_id IN (SELECT id FROM graph_nodes WHERE project_id = ?1
                                      AND key IN (SELECT value FROM json_each(?2)))
                        OR to_id IN (SELECT id FROM graph_nodes WHERE project_id = ?1
                                       AND key IN (SELECT value FROM json_each(?2))))",
                libsql::params![
                    project_id,
                    serde_json::to_string(&summary.modules_changed).unwrap_or_default(),
                    now
                ],
            )
            .await
            .ctx("marking derived relations stale")?;
        self.hops.apply(conn, project_id, cap, now).await?;

        summary.memories_marked_stale =
            mark_memories_stale(conn, project_id, MEMORIES_ON_NODES, &self.stale_keys, now).await?;
        // A memory about a file that left the index (deleted, or ignored now) describes code
        // that is gone: stale, for review. Only on removal: an edit of a file leaves what is
        // known about it standing (its symbols' memories above go stale when those symbols
        // change).
        summary.memories_marked_stale +=
            mark_memories_stale(conn, project_id, MEMORIES_ON_FILES, &self.removed_keys, now)
                .await?;
        Ok(summary)
    }
}

/// Memories of project `?1` about (`target`) or affected through (`impacted`) the nodes
/// keyed `?2` (JSON).
const MEMORIES_ON_NODES: &str = "SELECT memory_seq FROM memory_links
     WHERE project_id = ?1 AND role IN ('target', 'impacted')
       AND node_key IN (SELECT value FROM json_each(?2))";

/// Memories of project `?1` on the files keyed `?2` (JSON).
const MEMORIES_ON_FILES: &str = "SELECT memory_seq FROM memory_links
     WHERE project_id = ?1 AND role = 'file' AND node_key IN (SELECT value FROM json_each(?2))";

/// Marks the live memories `links` finds for `keys` stale and in need of review at `now`;
/// returns how many.
async fn mark_memories_stale(
    conn: &Connection,
    project_id: &str,
    links: &str,
    keys: &[String],
    now: i64,
) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    conn.execute(
        &format!(
            "UPDATE memories SET stale_at = ?3, needs_review = 1
             WHERE seq IN ({links}) AND deprecated = 0 AND stale_at IS NULL"
        ),
        libsql::params![
            project_id,
            serde_json::to_string(keys).unwrap_or_default(),
            now
        ],
    )
    .await
    .ctx("marking memories on changed code stale")
}

/// Paths of the project's indexed files, in order (neighbouring files share a part).
async fn indexed_paths(conn: &Connection, project_id: &str) -> Result<Vec<String>> {
    texts(
        conn,
        "SELECT path FROM code_files
         WHERE project_id = ?1 AND content_hash IS NOT NULL ORDER BY path",
        libsql::params![project_id],
        "reading indexed files",
    )
    .await
}

/// The first column of `sql`'s rows, as text; `what` names the read in errors.
async fn texts(
    conn: &Connection,
    sql: &str,
    params: impl libsql::params::IntoParams,
    what: &'static str,
) -> Result<Vec<String>> {
    let mut rows = conn.query(sql, params).await.ctx(what)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx(what)? {
        out.push(row.get(0).ctx(what)?);
    }
    Ok(out)
}

/// Sets `stale_at` `?3` on the non-code nodes of project `?1` with an edge to or from any of
/// the nodes `?2` (JSON ids). `+project_id`: the planner otherwise walked the project's
/// (project, label) index, every node of the project, to re-index one file.
const MARK_NEIGHBOURS_STALE: &str = "UPDATE graph_nodes SET stale_at = ?3
     WHERE +project_id = ?1 AND source <> 'ast' AND stale_at IS NULL
       AND id IN (SELECT e.from_id FROM graph_edges e
                  WHERE e.to_id IN (SELECT value FROM json_each(?2))
                  UNION
                  SELECT e.to_id FROM graph_edges e
                  WHERE e.from_id IN (SELECT value FROM json_each(?2)))
     RETURNING id";

/// Flags the non-code nodes with an edge to or from any of `ids`; returns how many.
async fn mark_neighbours_stale(
    conn: &Connection,
    project_id: &str,
    hops: &mut HopLog,
    ids: &[NodeId],
    now: i64,
) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut rows = conn
        .query(
            MARK_NEIGHBOURS_STALE,
            libsql::params![
                project_id,
                serde_json::to_string(ids).unwrap_or_default(),
                now
            ],
        )
        .await
        .ctx("marking knowledge about changed code stale")?;
    let mut marked = 0;
    while let Some(row) = rows
        .next()
        .await
        .ctx("marking knowledge about changed code stale")?
    {
        hops.node(row.get(0).ctx("stale node")?);
        marked += 1;
    }
    Ok(marked)
}

/// Those of `keys` that name a node.
async fn existing_keys(
    conn: &Connection,
    project_id: &str,
    keys: &BTreeSet<String>,
) -> Result<Vec<String>> {
    texts(
        conn,
        "SELECT key FROM graph_nodes
         WHERE project_id = ?1 AND key IN (SELECT value FROM json_each(?2)) ORDER BY key",
        libsql::params![project_id, serde_json::to_string(keys).unwrap_or_default()],
        "reading changed modules",
    )
    .await
}

/// File and symbol nodes the index implies for the files `paths_json` (a JSON array).
async fn desired_nodes(
    conn: &Connection,
    project_id: &str,
    paths_json: &str,
) -> Result<BTreeMap<String, NodeRow>> {
    let filter = "AND f.path IN (SELECT value FROM json_each(?2))";
    let mut out = BTreeMap::new();
    let sql = format!(
        "SELECT f.path, f.line_count FROM code_files f
         WHERE f.project_id = ?1 AND f.content_hash IS NOT NULL {filter}"
    );
    let mut rows = conn
        .query(&sql, libsql::params![project_id, paths_json])
        .await
        .ctx("reading indexed files")?;
    while let Some(row) = rows.next().await.ctx("reading indexed files")? {
        let path: String = row.get(0).ctx("file")?;
        let lines: u32 = row.get(1).ctx("file")?;
        let label = path.rsplit('/').next().unwrap_or(&path).to_owned();
        out.insert(
            path.clone(),
            NodeRow {
                kind: "file".into(),
                label,
                file_path: path,
                start_line: Some(1),
                end_line: Some(lines.max(1)),
                content_hash: None,
            },
        );
    }
    let sql = format!(
        "SELECT f.path, s.kind, s.name, s.qualified_name, s.start_line, s.end_line, s.content_hash
         FROM code_symbols s JOIN code_files f ON f.id = s.file_id
         WHERE f.project_id = ?1 {filter} ORDER BY s.id"
    );
    let mut rows = conn
        .query(&sql, libsql::params![project_id, paths_json])
        .await
        .ctx("reading symbols")?;
    while let Some(row) = rows.next().await.ctx("reading symbols")? {
        let path: String = row.get(0).ctx("symbol")?;
        let qualified: String = row.get(3).ctx("symbol")?;
        let start: u32 = row.get(4).ctx("symbol")?;
        let end: u32 = row.get(5).ctx("symbol")?;
        let hash: Option<String> = row.get(6).ctx("symbol")?;
        let key = symbol_key(&path, &qualified);
        match out.get_mut(&key) {
            // Same qualified name twice in a file: one node spanning both, hashed over both.
            Some(node) => {
                node.start_line = node.start_line.map(|s| s.min(start));
                node.end_line = node.end_line.map(|e| e.max(end));
                node.content_hash = match (&node.content_hash, hash) {
                    (Some(a), Some(b)) => Some(crate::code::chunk::content_hash(
                        format!("{a}{b}").as_bytes(),
                    )),
                    _ => None,
                };
            }
            None => {
                out.insert(
                    key,
                    NodeRow {
                        kind: row.get(1).ctx("symbol")?,
                        label: row.get(2).ctx("symbol")?,
                        file_path: path,
                        start_line: Some(start),
                        end_line: Some(end),
                        content_hash: hash,
                    },
                );
            }
        }
    }
    Ok(out)
}

/// Columns of the layer-1 node reads, as a literal for `concat!`.
macro_rules! layer_one_node_columns {
    () => {
        "SELECT id, key, kind, label, file_path, start_line, end_line, content_hash FROM graph_nodes"
    };
}

/// Layer-1 nodes of project `?1` whose files are no longer indexed.
const NODES_OF_LOST_FILES: &str = concat!(
    layer_one_node_columns!(),
    " WHERE project_id = ?1 AND layer = 1 AND source = 'ast'
       AND (file_path IS NULL OR file_path NOT IN
              (SELECT path FROM code_files WHERE project_id = ?1 AND content_hash IS NOT NULL))"
);

/// Layer-1 nodes of project `?1` in the files `?2` (JSON paths), found through the file index:
/// `+layer` keeps SQLite from choosing the (project, layer) index instead, which read every
/// code node of the project to re-index one file.
const NODES_OF_FILES: &str = concat!(
    layer_one_node_columns!(),
    " WHERE project_id = ?1 AND +layer = 1 AND source = 'ast'
       AND file_path IS NOT NULL AND file_path IN (SELECT value FROM json_each(?2))"
);

/// Layer-1 nodes stored for the part's files.
async fn existing_nodes(
    conn: &Connection,
    project_id: &str,
    part: &Part<'_>,
) -> Result<BTreeMap<String, (NodeId, NodeRow)>> {
    let (sql, params) = match part {
        Part::Files { paths_json, .. } => (
            NODES_OF_FILES,
            libsql::params::Params::Positional(vec![project_id.into(), paths_json.as_str().into()]),
        ),
        Part::Orphans => (
            NODES_OF_LOST_FILES,
            libsql::params::Params::Positional(vec![project_id.into()]),
        ),
    };
    let mut rows = conn.query(sql, params).await.ctx("reading layer-1 nodes")?;
    let mut out = BTreeMap::new();
    while let Some(row) = rows.next().await.ctx("reading layer-1 nodes")? {
        out.insert(
            row.get::<String>(1).ctx("node")?,
            (
                row.get::<NodeId>(0).ctx("node")?,
                NodeRow {
                    kind: row.get(2).ctx("node")?,
                    label: row.get(3).ctx("node")?,
                    file_path: row
                        .get::<Option<String>>(4)
                        .ctx("node")?
                        .unwrap_or_default(),
                    start_line: row.get(5).ctx("node")?,
                    end_line: row.get(6).ctx("node")?,
                    content_hash: row.get(7).ctx("node")?,
                },
            ),
        );
    }
    Ok(out)
}

type EdgeKey = (String, String, String);

/// Edges the index implies: `contains` from each of the files `paths_json` to its symbols
/// (`nodes`), and every resolved reference of those files and, elsewhere, to
/// `defined_names`.
async fn desired_edges(
    conn: &Connection,
    project_id: &str,
    paths_json: &str,
    defined_names: &[String],
    nodes: &BTreeMap<String, NodeRow>,
) -> Result<BTreeMap<EdgeKey, f64>> {
    let mut out: BTreeMap<EdgeKey, f64> = BTreeMap::new();
    for (key, node) in nodes {
        if node.kind != "file" {
            out.insert(
                (node.file_path.clone(), key.clone(), "contains".into()),
                1.0,
            );
        }
    }
    const SELECT: &str = "SELECT f.path, r.kind, r.from_symbol, r.resolved_path, tf.path,
           ts.qualified_name, COUNT(*)
         FROM code_refs r JOIN code_files f ON f.id = r.file_id
         LEFT JOIN code_symbols ts ON ts.id = r.resolved_symbol_id
         LEFT JOIN code_files tf ON tf.id = ts.file_id";
    const GROUP: &str = "AND (r.resolved_path IS NOT NULL OR r.resolved_symbol_id IS NOT NULL)
         GROUP BY f.path, r.kind, r.from_symbol, r.resolved_path, tf.path, ts.qualified_name";
    let mut queries: Vec<(String, libsql::params::Params)> = vec![(
        format!(
            "{SELECT} WHERE f.project_id = ?1
               AND f.path IN (SELECT value FROM json_each(?2)) {GROUP}"
        ),
        part_params(project_id, paths_json, None),
    )];
    if !defined_names.is_empty() {
        queries.push((
            format!(
                "{SELECT} WHERE r.project_id = ?1 AND r.kind <> 'imports'
                   AND r.target IN (SELECT value FROM json_each(?3))
                   AND f.path NOT IN (SELECT value FROM json_each(?2)) {GROUP}"
            ),
            part_params(project_id, paths_json, Some(defined_names)),
        ));
    }
    for (sql, params) in queries {
        let mut rows = conn.query(&sql, params).await.ctx("reading references")?;
        while let Some(row) = rows.next().await.ctx("reading references")? {
            let path: String = row.get(0).ctx("reference")?;
            let kind: String = row.get(1).ctx("reference")?;
            let from_symbol: Option<String> = row.get(2).ctx("reference")?;
            let resolved_path: Option<String> = row.get(3).ctx("reference")?;
            let target_path: Option<String> = row.get(4).ctx("reference")?;
            let target_symbol: Option<String> = row.get(5).ctx("reference")?;
            let count: f64 = row.get::<i64>(6).ctx("reference")? as f64;
            let from = match from_symbol {
                Some(symbol) if kind != "imports" => symbol_key(&path, &symbol),
                _ => path.clone(),
            };
            let to = if kind == "imports" {
                match resolved_path {
                    Some(p) => p,
                    None => continue,
                }
            } else {
                match (target_path, target_symbol) {
                    (Some(p), Some(q)) => symbol_key(&p, &q),
                    _ => continue,
                }
            };
            *out.entry((from, to, kind)).or_insert(0.0) += count;
        }
    }
    Ok(out)
}

/// Parameters of a part's reads: `?1` the project, `?2` its paths (JSON), `?3` the names it
/// defines (JSON) when given.
fn part_params(
    project_id: &str,
    paths_json: &str,
    defined_names: Option<&[String]>,
) -> libsql::params::Params {
    let mut values: Vec<libsql::Value> = vec![project_id.into(), paths_json.into()];
    if let Some(names) = defined_names {
        values.push(serde_json::to_string(names).unwrap_or_default().into());
    }
    libsql::params::Params::Positional(values)
}

/// The columns of the layer-1 edge reads, as a literal for `concat!`.
macro_rules! layer_one_edge_select {
    () => {
        "SELECT e.from_id, e.to_id, e.kind, e.weight FROM graph_edges e"
    };
}

/// Layer-1 edges out of the nodes of the files `?2` (JSON paths) of project `?1`.
const EDGES_OUT_OF_FILES: &str = concat!(
    layer_one_edge_select!(),
    " JOIN graph_nodes f ON f.id = e.from_id
     WHERE f.project_id = ?1 AND f.file_path IS NOT NULL
       AND f.file_path IN (SELECT value FROM json_each(?2))
       AND e.layer = 1 AND e.source = 'ast'"
);

/// Layer-1 references from outside the files `?2` into symbols of project `?1` labelled
/// `?3` (JSON): found through the label index (`+t.layer` keeps the planner from walking
/// every code node of the project through the (project, layer) index instead).
const EDGES_INTO_NAMES: &str = concat!(
    layer_one_edge_select!(),
    " JOIN graph_nodes t ON t.id = e.to_id
     JOIN graph_nodes f ON f.id = e.from_id
     WHERE t.project_id = ?1 AND +t.layer = 1
       AND t.label IN (SELECT value FROM json_each(?3))
       AND e.layer = 1 AND e.source = 'ast'
       AND e.kind NOT IN ('imports', 'contains')
       AND f.file_path NOT IN (SELECT value FROM json_each(?2))"
);

/// Stored layer-1 edges the sync may change: out of the nodes of the files `paths_json`,
/// and the references from elsewhere into symbols named `defined_names`.
async fn existing_edges(
    conn: &Connection,
    project_id: &str,
    paths_json: &str,
    defined_names: &[String],
) -> Result<HashMap<(NodeId, NodeId, String), f64>> {
    let mut queries: Vec<(&str, libsql::params::Params)> = vec![(
        EDGES_OUT_OF_FILES,
        part_params(project_id, paths_json, None),
    )];
    if !defined_names.is_empty() {
        queries.push((
            EDGES_INTO_NAMES,
            part_params(project_id, paths_json, Some(defined_names)),
        ));
    }
    let mut out = HashMap::new();
    for (sql, params) in queries {
        let mut rows = conn.query(sql, params).await.ctx("reading layer-1 edges")?;
        while let Some(row) = rows.next().await.ctx("reading layer-1 edges")? {
            out.insert(
                (
                    row.get(0).ctx("edge")?,
                    row.get(1).ctx("edge")?,
                    row.get(2).ctx("edge")?,
                ),
                row.get(3).ctx("edge")?,
            );
        }
    }
    Ok(out)
}

/// Node ids of keys (unknown keys are left out).
async fn ids_of(
    conn: &Connection,
    project_id: &str,
    keys: &[&str],
) -> Result<HashMap<String, NodeId>> {
    let mut out = HashMap::new();
    if keys.is_empty() {
        return Ok(out);
    }
    let mut rows = conn
        .query(
            "SELECT key, id FROM graph_nodes
             WHERE project_id = ?1 AND key IN (SELECT value FROM json_each(?2))",
            (project_id, serde_json::to_string(keys).unwrap_or_default()),
        )
        .await
        .ctx("looking up node ids")?;
    while let Some(row) = rows.next().await.ctx("looking up node ids")? {
        out.insert(row.get(0).ctx("node")?, row.get(1).ctx("node")?);
    }
    Ok(out)
}

/// Modules of the files that import any of `ids`.
async fn importer_modules(conn: &Connection, ids: &[NodeId]) -> Result<Vec<String>> {
    let mut rows = conn
        .query(
            "SELECT DISTINCT f.file_path FROM graph_edges e JOIN graph_nodes f ON f.id = e.from_id
             WHERE e.to_id IN (SELECT value FROM json_each(?1)) AND e.kind = 'imports'
               AND e.layer = 1 AND f.file_path IS NOT NULL",
            [serde_json::to_string(ids).unwrap_or_default()],
        )
        .await
        .ctx("finding importers")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("finding importers")? {
        if let Some(module) = module_of(&row.get::<String>(0).ctx("importer")?) {
            out.push(module);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod plan_tests {
    use super::{EDGES_INTO_NAMES, MARK_NEIGHBOURS_STALE, NODES_OF_FILES};
    use crate::store::plan::{mentions, query_plan};

    #[tokio::test]
    async fn one_file_reads_only_what_touches_the_file() {
        for (sql, index) in [
            (
                NODES_OF_FILES,
                "graph_nodes_file (project_id=? AND file_path=?)",
            ),
            (
                EDGES_INTO_NAMES,
                "graph_nodes_label (project_id=? AND label=?)",
            ),
            (MARK_NEIGHBOURS_STALE, "INTEGER PRIMARY KEY (rowid=?)"),
        ] {
            let plan = query_plan(sql).await;
            assert!(mentions(&plan, index), "{sql}\n{plan:#?}");
            assert!(!mentions(&plan, "(project_id=?)"), "{sql}\n{plan:#?}");
            assert!(
                !mentions(&plan, "(project_id=? AND layer=?)"),
                "{sql}\n{plan:#?}"
            );
        }
    }
}
