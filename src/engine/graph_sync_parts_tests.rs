//! A whole-project sync of layer 1 done a few files at a time writes the graph a sync in one
//! piece writes, and, run again over a synced graph, repairs exactly what was tampered with:
//! an edge or node in one part may end in another, and nodes of files that left the index
//! are found by the last part. (Here, above the graph layer, because it needs a whole engine.)

use std::path::Path;

use crate::graph::code_layer::{sync_in_parts, GraphSyncSummary, SyncScope};
use crate::store::begin_write;
use crate::{Engram, OpenOptions};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/graph");

/// An engine over a temp copy of the fixture project in `language`, indexed.
async fn indexed(dir: &Path, language: &str, db: &str) -> Engram {
    let root = dir.join("project");
    if !root.exists() {
        copy_tree(&Path::new(FIXTURES).join(language), &root);
    }
    let mut options = OpenOptions::new(dir.join(db));
    options.project_root = Some(root);
    let e = Engram::open(options).await.unwrap();
    e.index_with_defaults().await;
    e
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Every node, edge and closure row of the graph, by key (ids differ between files).
async fn dump(e: &Engram) -> Vec<String> {
    let conn = e.engine().store.writer().await;
    let mut out = Vec::new();
    for sql in [
        "SELECT 'node', key, layer, kind, label, file_path, start_line, end_line, source,
                content_hash, stale_at FROM graph_nodes",
        "SELECT 'edge', f.key, t.key, e.kind, e.layer, e.weight, e.source
         FROM graph_edges e JOIN graph_nodes f ON f.id = e.from_id
         JOIN graph_nodes t ON t.id = e.to_id",
        "SELECT 'reach', a.key, d.key, c.depth, c.weight
         FROM graph_closure c JOIN graph_nodes a ON a.id = c.ancestor_id
         JOIN graph_nodes d ON d.id = c.descendant_id",
    ] {
        let mut rows = conn.query(sql, ()).await.unwrap();
        while let Some(row) = rows.next().await.unwrap() {
            let cells: Vec<String> = (0..row.column_count())
                .map(|i| match row.get_value(i).unwrap() {
                    libsql::Value::Text(text) => text,
                    libsql::Value::Integer(n) => n.to_string(),
                    libsql::Value::Real(x) => x.to_string(),
                    other => format!("{other:?}"),
                })
                .collect();
            out.push(cells.join(" "));
        }
    }
    out.sort();
    out
}

/// Runs a whole-project sync `part_files` files at a time after `before` (SQL) in the same
/// transaction.
async fn sync_all(e: &Engram, before: &[&str], part_files: usize) -> GraphSyncSummary {
    let engine = e.engine();
    let writer = engine.store.writer().await;
    let tx = begin_write(&writer).await.unwrap();
    for sql in before {
        tx.execute(sql, ()).await.unwrap();
    }
    let summary = sync_in_parts(
        &tx,
        e.project_id(),
        engine.closure_depth,
        1,
        SyncScope::All,
        part_files,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    summary
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_in_parts_writes_the_graph_a_sync_in_one_piece_writes() {
    for language in ["py", "ts"] {
        let dir = tempfile::tempdir().unwrap();
        let whole = dump(&indexed(dir.path(), language, "whole.db").await).await;
        assert!(whole.iter().any(|r| r.starts_with("edge ")), "{whole:?}");
        for part_files in [1, 2] {
            let e = indexed(dir.path(), language, &format!("parts-{part_files}.db")).await;
            let cleared = [
                "DELETE FROM graph_closure",
                "DELETE FROM graph_edges",
                "DELETE FROM graph_nodes",
            ];
            let summary = sync_all(&e, &cleared, part_files).await;
            assert!(summary.nodes_written > 0 && summary.edges_written > 0);
            assert_eq!(
                dump(&e).await,
                whole,
                "{language}, {part_files} file(s) a part"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_in_parts_repairs_only_what_differs_from_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let e = indexed(dir.path(), "py", "engram.db").await;
    let synced = dump(&e).await;

    // Nothing differs: nothing is written.
    let summary = sync_all(&e, &[], 2).await;
    assert_eq!(
        (
            summary.nodes_written,
            summary.nodes_removed,
            summary.edges_written,
            summary.edges_removed
        ),
        (0, 0, 0, 0),
        "{summary:?}"
    );
    assert_eq!(dump(&e).await, synced);

    // A node with a wrong label, a lost call edge, and a node of a file no longer indexed.
    let tampered = [
        "UPDATE graph_nodes SET label = 'wrong' WHERE key = 'app/util.py:format_date'",
        "DELETE FROM graph_edges WHERE kind = 'calls'
           AND to_id = (SELECT id FROM graph_nodes WHERE key = 'app/util.py:format_date')",
        "INSERT INTO graph_nodes (project_id, key, layer, kind, label, file_path, source,
           confidence, created_at, updated_at)
         SELECT project_id, 'gone.py', 1, 'file', 'gone.py', 'gone.py', 'ast', 1.0, 1, 1
         FROM graph_nodes LIMIT 1",
    ];
    let summary = sync_all(&e, &tampered, 2).await;
    assert_eq!(summary.nodes_written, 1, "{summary:?}");
    assert_eq!(summary.nodes_removed, 1, "{summary:?}");
    assert!(summary.edges_written >= 1, "{summary:?}");
    assert_eq!(summary.edges_removed, 0, "{summary:?}");
    assert_eq!(dump(&e).await, synced);
}
