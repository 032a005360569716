//! A pending closure (see `graph::closure`): a write of more than 2,000 hops leaves no closure
//! rows and the project's `graph_state.closure_depth` at `PENDING`; the in-process graph index
//! loads it by computing exactly the rows a build stores; the tables' readers (`impact()`,
//! `reach()`, `stats()`) build it first; a small write onto it builds it with its own change;
//! the engine builds it by itself once the writer is idle after an index run or a reopen with
//! another depth. (Here, above the graph layer, because it needs a whole engine.)

use std::path::Path;
use std::time::{Duration, Instant};

use crate::graph::closure;
use crate::graph::code_layer::{sync_in_parts, SyncScope};
use crate::graph::{EdgeInput, ImpactOptions, NodeInput, Side};
use crate::store::begin_write;
use crate::{Engram, OpenOptions};

/// TypeScript files in the generated project: each imports three others and each of its
/// three functions calls two functions of those files, so that a whole-project sync changes
/// ~2,250 hops, past `closure::REBUILD_THRESHOLD`.
const FILES: usize = 250;

/// The files file `i` imports.
fn deps(i: usize) -> [usize; 3] {
    [(i + 1) % FILES, (i + 7) % FILES, (i + 31) % FILES]
}

/// File `i`'s directory: two modules, so that module nodes and their imports exist too.
fn dir_of(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "a"
    } else {
        "b"
    }
}

fn write_project(root: &Path) {
    for i in 0..FILES {
        let mut text = String::new();
        for d in deps(i) {
            text.push_str(&format!(
                "import {{ f{d}_0, f{d}_1, f{d}_2 }} from '../{}/m{d}'\n",
                dir_of(d)
            ));
        }
        let [a, b, c] = deps(i);
        for k in 0..3 {
            let (x, y) = [(a, b), (b, c), (c, a)][k];
            text.push_str(&format!(
                "\nexport function f{i}_{k}(n: number): number {{\n  \
                 return n > 0 ? f{x}_{k}(n - 1) + f{y}_{}(n - 2) : {i}\n}}\n",
                (k + 1) % 3
            ));
        }
        let dir = root.join("src").join(dir_of(i));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("m{i}.ts")), text).unwrap();
    }
}

async fn open(dir: &Path, depth: u32) -> Engram {
    let mut options = OpenOptions::new(dir.join("engram.db"));
    options.project_root = Some(dir.join("project"));
    options.engine.closure_depth = depth;
    Engram::open(options).await.unwrap()
}

/// An engine with closure depth `depth` over the generated project, indexed, its closure
/// built by the engine after the run.
async fn indexed(dir: &Path, depth: u32) -> Engram {
    write_project(&dir.join("project"));
    let e = open(dir, depth).await;
    e.index_with_defaults().await;
    wait_until_built(&e, depth).await;
    e
}

/// The project's closure state.
async fn state(e: &Engram) -> Option<u32> {
    let reader = e.engine().store.reader().await;
    closure::state(&reader, e.project_id()).await.unwrap()
}

/// Waits (at most a minute) for the engine's idle-time work to build the closure.
async fn wait_until_built(e: &Engram, depth: u32) {
    let started = Instant::now();
    while state(e).await != Some(depth) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the closure was never built: {:?}",
            state(e).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every closure row, by key, with its weight and path.
async fn closure_rows(e: &Engram) -> Vec<String> {
    let reader = e.engine().store.reader().await;
    let mut rows = reader
        .query(
            "SELECT a.key, d.key, c.depth, c.weight, c.path FROM graph_closure c
             JOIN graph_nodes a ON a.id = c.ancestor_id
             JOIN graph_nodes d ON d.id = c.descendant_id ORDER BY 1, 2",
            (),
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.unwrap() {
        out.push(format!(
            "{} {} {} {} {}",
            row.get::<String>(0).unwrap(),
            row.get::<String>(1).unwrap(),
            row.get::<u32>(2).unwrap(),
            row.get::<f64>(3).unwrap(),
            row.get::<String>(4).unwrap()
        ));
    }
    out
}

/// A whole-project sync after the closure and the structural edges were deleted: every hop of
/// layer 1 changes, so the sync leaves the closure pending. Node ids stay (the nodes are kept).
async fn wide_write(e: &Engram) {
    let engine = e.engine();
    let writer = engine.store.writer().await;
    let tx = begin_write(&writer).await.unwrap();
    for sql in [
        "DELETE FROM graph_closure",
        "DELETE FROM graph_edges WHERE layer = 1",
    ] {
        tx.execute(sql, ()).await.unwrap();
    }
    let depth = engine.closure_depth;
    sync_in_parts(&tx, e.project_id(), depth, 1, SyncScope::All, 512)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// The closure rows a build from the current edges stores, built again in a transaction that
/// is rolled back.
async fn rebuilt_rows(e: &Engram) -> Vec<String> {
    let engine = e.engine();
    {
        let writer = engine.store.writer().await;
        writer.execute("SAVEPOINT probe", ()).await.unwrap();
        closure::rebuild(&writer, e.project_id(), engine.closure_depth, 1)
            .await
            .unwrap();
    }
    let rows = closure_rows(e).await;
    let writer = engine.store.writer().await;
    writer.execute("ROLLBACK TO probe", ()).await.unwrap();
    writer.execute("RELEASE probe", ()).await.unwrap();
    rows
}

async fn sorted_keys(e: &Engram) -> Vec<String> {
    let index = e.load_graph_index().await.unwrap();
    let mut keys: Vec<String> = index.keys().map(str::to_owned).collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wide_write_leaves_the_closure_pending_and_every_reader_gets_the_rows_a_build_stores() {
    let dir = tempfile::tempdir().unwrap();
    let e = indexed(dir.path(), 2).await;
    let built = closure_rows(&e).await;
    assert!(built.len() > 5_000, "{} rows", built.len());
    let built_index = e.load_graph_index().await.unwrap();
    let keys = sorted_keys(&e).await;
    let options = ImpactOptions::default();
    let mut answers = Vec::new();
    for key in &keys {
        answers.push(e.impact_from_tables(key, &options).await.unwrap());
    }

    wide_write(&e).await;
    assert_eq!(state(&e).await, Some(closure::PENDING));
    assert!(closure_rows(&e).await.is_empty());

    // `impact()` does not wait for the build: it loads the index, which computes the rows.
    let first = &keys[0];
    assert_eq!(e.served_graph_loads(), 0);
    assert_eq!(&e.impact(first, &options).await.unwrap(), &answers[0]);
    assert_eq!(e.served_graph_loads(), 1, "loaded by the call");
    assert_eq!(state(&e).await, Some(closure::PENDING), "not built by it");

    // The index computes the rows: the same picture (depths, weights, paths) as from the table.
    let pending_index = e.load_graph_index().await.unwrap();
    if let Some(difference) = pending_index
        .picture()
        .first_difference(&built_index.picture())
    {
        panic!("an index loaded while pending differs from one loaded from the rows: {difference}");
    }
    for (key, answer) in keys.iter().zip(&answers) {
        let through = e
            .impact_through(&pending_index, key, &options)
            .await
            .unwrap();
        assert_eq!(&through, answer, "{key}");
    }
    assert_eq!(
        state(&e).await,
        Some(closure::PENDING),
        "an index load writes nothing"
    );

    // The tables' readers build it first.
    let reach = e
        .reach_from_tables(&keys[keys.len() / 2], Side::Ancestors, None, 500)
        .await
        .unwrap();
    assert_eq!(state(&e).await, Some(2));
    assert_eq!(closure_rows(&e).await, built);
    let from_index = e
        .reach_through(
            &pending_index,
            &keys[keys.len() / 2],
            Side::Ancestors,
            None,
            500,
        )
        .unwrap();
    assert_eq!(reach, from_index);

    wide_write(&e).await;
    let stats = e.graph_stats().await.unwrap();
    assert_eq!(stats.closure_depth, 2);
    assert_eq!(stats.closure_rows, built.len() as u64);
    for (key, answer) in keys.iter().zip(&answers).step_by(50) {
        wide_write(&e).await;
        assert_eq!(
            &e.impact_from_tables(key, &options).await.unwrap(),
            answer,
            "{key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_small_write_onto_a_pending_closure_builds_it_and_the_served_index_follows() {
    let dir = tempfile::tempdir().unwrap();
    let e = indexed(dir.path(), 2).await;
    let keys = sorted_keys(&e).await;
    let assert_served_is_fresh = |step: &'static str| {
        let e = &e;
        async move {
            let served = e.served_graph_picture().await.unwrap().expect("loaded");
            let fresh = e.load_graph_index().await.unwrap().picture();
            if let Some(difference) = served.first_difference(&fresh) {
                panic!("{step}: the served index differs from a fresh load: {difference}");
            }
        }
    };

    // Loaded while pending: computed.
    wide_write(&e).await;
    assert_served_is_fresh("loaded while pending").await;
    assert_eq!(state(&e).await, Some(closure::PENDING));

    // A small write builds the closure with its own change in it.
    let node = NodeInput::new("note:hub", "note");
    let edges: Vec<EdgeInput> = keys
        .iter()
        .filter(|k| k.contains(":f"))
        .take(3)
        .map(|k| EdgeInput::new("note:hub", k.as_str(), "relates_to"))
        .collect();
    e.inject_graph(&[node], &edges).await.unwrap();
    assert_eq!(state(&e).await, Some(2));
    let rows = closure_rows(&e).await;
    assert!(rows.iter().any(|r| r.starts_with("note:hub ")));
    assert_eq!(rows, rebuilt_rows(&e).await);
    assert_served_is_fresh("after a small write onto a pending closure").await;

    // Built without a log entry: an index loaded while pending needs no reload, and replays
    // the next write exactly.
    wide_write(&e).await;
    assert_served_is_fresh("pending again").await;
    let loads = e.served_graph_loads();
    assert!(e.settle_closure().await.unwrap());
    assert!(!e.settle_closure().await.unwrap(), "built once");
    assert_eq!(closure_rows(&e).await, rebuilt_rows(&e).await);
    e.delete_edge("note:hub", &edges[0].to, "relates_to")
        .await
        .unwrap();
    assert_served_is_fresh("a write after an unlogged build").await;
    assert_eq!(e.served_graph_loads(), loads, "replayed, not reloaded");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reopen_with_another_depth_leaves_the_closure_for_the_engine_to_build() {
    let dir = tempfile::tempdir().unwrap();
    let e = indexed(dir.path(), 2).await;
    let at_two = closure_rows(&e).await.len();
    e.close().await;

    let e = open(dir.path(), 3).await;
    wait_until_built(&e, 3).await;
    let rows = closure_rows(&e).await;
    assert!(
        rows.len() > at_two,
        "{} rows at depth 3, {at_two} at 2",
        rows.len()
    );
    assert!(rows.iter().any(|r| r.split(' ').nth(2) == Some("3")));
    assert_eq!(rows, rebuilt_rows(&e).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn optimize_builds_a_pending_closure_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = indexed(dir.path(), 2).await;
    let not_cancelled = std::sync::atomic::AtomicBool::new(false);
    assert!(
        !e.optimize(&not_cancelled).await.unwrap().closure_built,
        "nothing pending"
    );

    wide_write(&e).await;
    assert_eq!(state(&e).await, Some(closure::PENDING));
    let optimized = e.optimize(&not_cancelled).await.unwrap();
    assert!(optimized.closure_built);
    assert_eq!(state(&e).await, Some(2));
    assert_eq!(closure_rows(&e).await, rebuilt_rows(&e).await);
}
