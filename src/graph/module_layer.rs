//! Layer 2, semantic without an LLM: a module node per directory holding indexed files
//! (`src/auth/`), `contains` edges from each module to its files and child modules, and
//! module-level `imports` edges aggregated from the file imports (weight: how many file
//! imports cross between the two modules). Entry-point files (`main.*`, `index.*`,
//! `__main__.py`, `lib.rs`) are listed in their module's metadata.
//!
//! Kept up to date by the structural sync: modules appear with their first file and go with
//! their last; the imports of a module are aggregated again whenever one of its files, or a
//! file one of its files imported, changed.

use std::collections::{BTreeMap, BTreeSet};

use libsql::Connection;

use super::closure::NodeId;
use super::write::{detach, node_id, HopLog};
use crate::error::{DbContext, Result};

/// The module key of the directory holding `path` (`None` at the project root).
pub fn module_of(path: &str) -> Option<String> {
    let trimmed = path.trim_end_matches('/');
    trimmed.rsplit_once('/').map(|(dir, _)| format!("{dir}/"))
}

/// Whether a file is an entry point of its module.
pub fn is_entry_point(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    matches!(
        stem,
        "main" | "index" | "__main__" | "__init__" | "mod" | "lib" | "app" | "server"
    )
}

/// Makes sure the module of `file_key` (and its ancestors) exist and contain it.
pub(crate) async fn add_file(
    conn: &Connection,
    project_id: &str,
    now: i64,
    hops: &mut HopLog,
    (file_key, file_id): (&str, NodeId),
) -> Result<()> {
    let Some(module) = module_of(file_key) else {
        return Ok(());
    };
    let module_id = ensure_module(conn, project_id, now, hops, &module).await?;
    contain(conn, project_id, now, hops, (module_id, file_id)).await?;
    if is_entry_point(file_key) {
        hops.node(module_id);
        conn.execute(
            "UPDATE graph_nodes SET metadata = json_set(metadata, '$.entryPoints',
               json((SELECT json_group_array(value) FROM (
                 SELECT value FROM json_each(json_extract(metadata, '$.entryPoints'))
                 UNION SELECT ?2 ORDER BY 1))))
             WHERE id = ?1",
            (module_id, file_key),
        )
        .await
        .ctx("recording an entry point")?;
    }
    Ok(())
}

/// Deletes modules left without anything to contain, from `module` up.
pub(crate) async fn prune(
    conn: &Connection,
    project_id: &str,
    hops: &mut HopLog,
    module: &str,
) -> Result<()> {
    let mut current = Some(module.to_owned());
    while let Some(key) = current {
        let Some((id, _)) = node_id(conn, project_id, &key).await? else {
            return Ok(());
        };
        let mut rows = conn
            .query(
                "SELECT 1 FROM graph_edges WHERE from_id = ?1 AND kind = 'contains' LIMIT 1",
                [id],
            )
            .await
            .ctx("checking a module")?;
        if rows.next().await.ctx("checking a module")?.is_some() {
            return Ok(());
        }
        drop(rows);
        detach(conn, hops, &[id]).await?;
        hops.node(id);
        conn.execute("DELETE FROM graph_nodes WHERE id = ?1", [id])
            .await
            .ctx("deleting an empty module")?;
        current = module_of(&key);
    }
    Ok(())
}

async fn ensure_module(
    conn: &Connection,
    project_id: &str,
    now: i64,
    hops: &mut HopLog,
    key: &str,
) -> Result<NodeId> {
    if let Some((id, _)) = node_id(conn, project_id, key).await? {
        return Ok(id);
    }
    let label = key
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(key)
        .to_owned();
    let mut rows = conn
        .query(
            "INSERT INTO graph_nodes (project_id, key, layer, kind, label, source, confidence,
               created_at, updated_at)
             VALUES (?1, ?2, 2, 'module', ?3, 'ast', 1.0, ?4, ?4) RETURNING id",
            libsql::params![project_id, key, label, now],
        )
        .await
        .ctx("writing a module node")?;
    let id: NodeId = rows
        .next()
        .await
        .ctx("writing a module node")?
        .ok_or_else(|| crate::error::Error::Internal("module insert returned no row".into()))?
        .get(0)
        .ctx("module node")?;
    drop(rows);
    hops.node(id);
    if let Some(parent) = module_of(key) {
        let parent_id = Box::pin(ensure_module(conn, project_id, now, hops, &parent)).await?;
        contain(conn, project_id, now, hops, (parent_id, id)).await?;
    }
    Ok(id)
}

async fn contain(
    conn: &Connection,
    project_id: &str,
    now: i64,
    hops: &mut HopLog,
    (parent, child): (NodeId, NodeId),
) -> Result<()> {
    hops.edge(parent, child);
    // `contains` is not transitive: no closure work.
    conn.execute(
        "INSERT INTO graph_edges (project_id, from_id, to_id, kind, layer, weight, source,
           confidence, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'contains', 2, 1.0, 'ast', 1.0, ?4, ?4)
         ON CONFLICT (from_id, to_id, kind) DO NOTHING",
        libsql::params![project_id, parent, child, now],
    )
    .await
    .ctx("writing a contains edge")?;
    Ok(())
}

/// Aggregates the file imports of `modules` into module-level `imports` edges.
pub(crate) async fn aggregate_imports(
    conn: &Connection,
    project_id: &str,
    now: i64,
    hops: &mut HopLog,
    modules: &BTreeSet<String>,
) -> Result<u64> {
    let mut written = 0;
    for module in modules {
        let Some((module_id, _)) = node_id(conn, project_id, module).await? else {
            continue;
        };
        // The module of each imported file (or the imported module itself: Go imports name
        // packages), counted over the module's own files.
        let mut rows = conn
            .query(
                "SELECT CASE WHEN t.layer = 2 THEN t.id ELSE pm.from_id END, COUNT(*)
                 FROM graph_edges c
                 JOIN graph_edges i ON i.from_id = c.to_id AND i.kind = 'imports' AND i.layer = 1
                 JOIN graph_nodes t ON t.id = i.to_id
                 LEFT JOIN graph_edges pm ON pm.to_id = i.to_id AND pm.kind = 'contains'
                   AND pm.layer = 2
                 WHERE c.from_id = ?1 AND c.kind = 'contains' AND c.layer = 2
                 GROUP BY 1",
                [module_id],
            )
            .await
            .ctx("aggregating module imports")?;
        let mut wanted: BTreeMap<NodeId, f64> = BTreeMap::new();
        while let Some(row) = rows.next().await.ctx("aggregating module imports")? {
            let Some(target) = row.get::<Option<NodeId>>(0).ctx("module import")? else {
                continue;
            };
            if target != module_id {
                wanted.insert(target, row.get::<i64>(1).ctx("module import")? as f64);
            }
        }
        drop(rows);
        let mut rows = conn
            .query(
                "SELECT to_id, weight FROM graph_edges
                 WHERE from_id = ?1 AND kind = 'imports' AND layer = 2 AND source = 'ast'",
                [module_id],
            )
            .await
            .ctx("reading module imports")?;
        let mut have: BTreeMap<NodeId, f64> = BTreeMap::new();
        while let Some(row) = rows.next().await.ctx("reading module imports")? {
            have.insert(
                row.get(0).ctx("module import")?,
                row.get(1).ctx("module import")?,
            );
        }
        drop(rows);
        for (target, weight) in &have {
            if wanted.get(target) != Some(weight) {
                hops.touch(conn, module_id, *target).await?;
                hops.edge(module_id, *target);
            }
            if !wanted.contains_key(target) {
                conn.execute(
                    "DELETE FROM graph_edges WHERE from_id = ?1 AND to_id = ?2 AND kind = 'imports'",
                    (module_id, *target),
                )
                .await
                .ctx("deleting a module import")?;
                written += 1;
            }
        }
        for (target, weight) in &wanted {
            if have.get(target) == Some(weight) {
                continue;
            }
            hops.touch(conn, module_id, *target).await?;
            hops.edge(module_id, *target);
            conn.execute(
                "INSERT INTO graph_edges (project_id, from_id, to_id, kind, layer, weight, source,
                   confidence, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'imports', 2, ?4, 'ast', 1.0, ?5, ?5)
                 ON CONFLICT (from_id, to_id, kind) DO UPDATE SET
                   weight = excluded.weight, updated_at = excluded.updated_at",
                libsql::params![project_id, module_id, *target, *weight, now],
            )
            .await
            .ctx("writing a module import")?;
            written += 1;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_directories_with_a_slash() {
        assert_eq!(module_of("src/auth/login.ts").as_deref(), Some("src/auth/"));
        assert_eq!(module_of("src/auth/").as_deref(), Some("src/"));
        assert_eq!(module_of("src/").as_deref(), None);
        assert_eq!(module_of("main.go"), None);
        assert!(is_entry_point("cmd/server/main.go"));
        assert!(is_entry_point("src/index.ts"));
        assert!(!is_entry_point("src/indexer.rs"));
    }
}
