//! `kill -9` during indexing, 20 rounds: a child process (this test binary, re-run on its
//! ignored `child_indexes_until_killed` test) indexes a real Python and TypeScript tree that
//! changes between rounds, and is killed at a random moment: while it waits in the resolving
//! phase (its batches committed, the graph not yet synced), during indexing, or after a random
//! delay. After each kill the next `index()` must leave the code index and the knowledge graph
//! equal to a clean rebuild of the same tree: the derived data heals itself.
//!
//! The same kills with this process holding the engine open: its in-process graph index
//! (issue 38) follows the child's committed writes through the change logs, so after each kill
//! and after the healing run it equals a fresh load from SQLite.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engram::code::IndexOptions;
use engram::{Engram, OpenOptions};

mod common;
use common::Rng;

const ROUNDS: u64 = 20;
const PY_MODULES: usize = 40;
const TS_MODULES: usize = 30;

/// Module `i` of the Python package, in its `version`: imports two earlier modules, calls
/// their functions, and subclasses one of their classes.
fn python_module(i: usize, version: u64) -> String {
    let mut text = String::new();
    let deps: Vec<usize> = [i / 2, i / 3].into_iter().filter(|&d| d < i).collect();
    for d in &deps {
        text.push_str(&format!("from pkg.m{d} import helper_{d}, Base{d}\n"));
    }
    text.push_str(&format!(
        "\n\nclass Base{i}:\n    def run(self, value):\n        return value + {version}\n"
    ));
    let base = deps
        .first()
        .map(|d| format!("Base{d}"))
        .unwrap_or_else(|| "object".into());
    text.push_str(&format!(
        "\n\nclass Worker{i}({base}):\n    def work(self, value):\n        return self.run(value) * 2\n"
    ));
    text.push_str(&format!("\n\ndef helper_{i}(value):\n"));
    for d in &deps {
        text.push_str(&format!("    value = helper_{d}(value)\n"));
    }
    text.push_str(&format!("    return value + {version}\n"));
    if version % 2 == 1 {
        text.push_str(&format!(
            "\n\ndef extra_{i}_{version}(value):\n    return helper_{i}(value) - 1\n"
        ));
    }
    text
}

/// TypeScript module `i`: imports an earlier one and calls its export.
fn ts_module(i: usize, version: u64) -> String {
    let mut text = String::new();
    if i > 0 {
        let d = i / 2;
        text.push_str(&format!("import {{ compute{d} }} from './t{d}'\n\n"));
        text.push_str(&format!(
            "export function compute{i}(n: number): number {{\n  return compute{d}(n) + {version}\n}}\n"
        ));
    } else {
        text.push_str(&format!(
            "export function compute0(n: number): number {{\n  return n + {version}\n}}\n"
        ));
    }
    text.push_str(&format!(
        "\nexport class Service{i} {{\n  handle(n: number): number {{\n    return compute{i}(n)\n  }}\n}}\n"
    ));
    text
}

/// Changes the tree for `round`: edits some modules, deletes or brings back a few (module 0 of
/// each language stays), then writes it.
fn mutate_tree(
    rng: &mut Rng,
    root: &Path,
    py: &mut [Option<u64>],
    ts: &mut [Option<u64>],
    round: u64,
) {
    for _ in 0..8 {
        let i = rng.below(PY_MODULES as u64) as usize;
        py[i] = match rng.below(6) {
            0 if i > 0 => None,
            _ => Some(round + 1),
        };
        let j = rng.below(TS_MODULES as u64) as usize;
        ts[j] = match rng.below(6) {
            0 if j > 0 => None,
            _ => Some(round + 1),
        };
    }
    write_tree(root, py, ts);
}

/// Writes the tree for `versions` (one per module; `None`: the module is deleted).
fn write_tree(root: &Path, py: &[Option<u64>], ts: &[Option<u64>]) {
    std::fs::create_dir_all(root.join("pkg")).unwrap();
    std::fs::create_dir_all(root.join("web")).unwrap();
    std::fs::write(root.join("pkg/__init__.py"), "").unwrap();
    for (i, v) in py.iter().enumerate() {
        let path = root.join(format!("pkg/m{i}.py"));
        match v {
            Some(v) => std::fs::write(path, python_module(i, *v)).unwrap(),
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }
    for (i, v) in ts.iter().enumerate() {
        let path = root.join(format!("web/t{i}.ts"));
        match v {
            Some(v) => std::fs::write(path, ts_module(i, *v)).unwrap(),
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

async fn open(db: &Path, root: &Path) -> Engram {
    let mut options = OpenOptions::new(db);
    options.project_root = Some(root.to_path_buf());
    Engram::open(options).await.unwrap()
}

async fn index(e: &Engram) {
    e.index(
        &IndexOptions::default(),
        &|_| {},
        &Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
}

/// What must equal a clean rebuild: files, chunks, symbols, references and their resolution,
/// graph nodes, edges and closure depths, by content (row ids differ between databases).
async fn fingerprint(db: &Path) -> Vec<(String, Vec<String>)> {
    let queries = [
        (
            "files",
            "SELECT path, content_hash FROM code_files ORDER BY path",
        ),
        (
            "chunks",
            "SELECT f.path, c.start_line, c.end_line, c.kind FROM code_chunks c
             JOIN code_files f ON f.id = c.file_id ORDER BY 1, 2, 3, 4",
        ),
        (
            "symbols",
            "SELECT f.path, s.qualified_name, s.start_line FROM code_symbols s
             JOIN code_files f ON f.id = s.file_id ORDER BY 1, 2, 3",
        ),
        (
            "refs",
            "SELECT f.path, r.kind, r.target, r.line, r.resolved_path,
                    coalesce(sf.path || ':' || s.qualified_name, '-')
             FROM code_refs r JOIN code_files f ON f.id = r.file_id
             LEFT JOIN code_symbols s ON s.id = r.resolved_symbol_id
             LEFT JOIN code_files sf ON sf.id = s.file_id
             ORDER BY 1, 2, 3, 4, 5, 6",
        ),
        (
            "nodes",
            "SELECT key, layer, kind, label, coalesce(file_path, '-'), coalesce(start_line, -1)
             FROM graph_nodes ORDER BY key",
        ),
        (
            "edges",
            "SELECT a.key, b.key, e.kind, e.layer, e.weight FROM graph_edges e
             JOIN graph_nodes a ON a.id = e.from_id JOIN graph_nodes b ON b.id = e.to_id
             ORDER BY 1, 2, 3",
        ),
        // Depth only: a row keeps the weight and interior of *one* shortest path (see
        // `graph::closure`), and which one depends on the order edges arrived in.
        (
            "closure",
            "SELECT a.key, d.key, c.depth FROM graph_closure c
             JOIN graph_nodes a ON a.id = c.ancestor_id JOIN graph_nodes d ON d.id = c.descendant_id
             ORDER BY 1, 2",
        ),
        ("pending", "SELECT count(*) FROM code_index_pending"),
    ];
    let database = libsql::Builder::new_local(db).build().await.unwrap();
    let conn = database.connect().unwrap();
    let mut out = Vec::new();
    for (name, sql) in queries {
        let mut rows = conn.query(sql, ()).await.unwrap();
        let mut lines = Vec::new();
        while let Some(row) = rows.next().await.unwrap() {
            let cols: Vec<String> = (0..row.column_count())
                .map(|i| match row.get_value(i).unwrap() {
                    libsql::Value::Null => "NULL".to_owned(),
                    libsql::Value::Integer(n) => n.to_string(),
                    libsql::Value::Real(r) => format!("{r:.6}"),
                    libsql::Value::Text(t) => t,
                    other => format!("{other:?}"),
                })
                .collect();
            lines.push(cols.join(" | "));
        }
        out.push((name.to_owned(), lines));
    }
    out
}

/// The first difference between two fingerprints, for the failure message.
fn first_difference(
    got: &[(String, Vec<String>)],
    want: &[(String, Vec<String>)],
) -> Option<String> {
    for ((name, g), (_, w)) in got.iter().zip(want) {
        if g != w {
            let missing: Vec<_> = w.iter().filter(|l| !g.contains(l)).take(3).collect();
            let extra: Vec<_> = g.iter().filter(|l| !w.contains(l)).take(3).collect();
            return Some(format!(
                "{name}: {} rows, clean rebuild {}; missing {missing:?}; extra {extra:?}",
                g.len(),
                w.len()
            ));
        }
    }
    None
}

/// How the child is stopped.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// In the resolving phase: batches committed, the graph sync not done.
    WhileResolving,
    /// Some milliseconds after indexing started.
    DuringIndexing(u64),
    /// Some milliseconds after the process started.
    AfterDelay(u64),
    /// Some milliseconds into the resolving phase, the child not waiting there: during the
    /// resolution or the graph sync, or after the run committed.
    DuringGraphSync(u64),
    /// Not killed before the run is done.
    AfterDone,
}

/// Runs the child indexer on `db`/`root` and kills it (SIGKILL) as `kill` says. Returns
/// whether the kill landed before the child finished.
fn run_child_and_kill(db: &Path, root: &Path, kill: Kill) -> bool {
    let marker = db.with_extension("phase");
    let _ = std::fs::remove_file(&marker);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_indexes_until_killed",
            "--ignored",
            "--test-threads=1",
        ])
        .env("ENGRAM_KILL_CHILD_DB", db)
        .env("ENGRAM_KILL_CHILD_ROOT", root)
        .env(
            "ENGRAM_KILL_CHILD_PAUSE",
            if matches!(kill, Kill::DuringGraphSync(_)) {
                "0"
            } else {
                "1"
            },
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wait_for_phase = |child: &mut std::process::Child, wanted: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&marker).is_ok_and(|p| p == wanted)
            && child.try_wait().unwrap().is_none()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    match kill {
        Kill::AfterDelay(ms) => std::thread::sleep(Duration::from_millis(ms)),
        Kill::WhileResolving => wait_for_phase(&mut child, "resolving"),
        Kill::DuringIndexing(ms) => {
            wait_for_phase(&mut child, "indexing");
            std::thread::sleep(Duration::from_millis(ms));
        }
        Kill::DuringGraphSync(ms) => {
            wait_for_phase(&mut child, "resolving");
            std::thread::sleep(Duration::from_millis(ms));
        }
        Kill::AfterDone => wait_for_phase(&mut child, "done"),
    }
    let landed = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    landed
}

/// The child: indexes `ENGRAM_KILL_CHILD_ROOT` into `ENGRAM_KILL_CHILD_DB`, writing each phase
/// to `<db>.phase`; in the resolving phase it waits (long enough to be killed there) unless
/// `ENGRAM_KILL_CHILD_PAUSE` is `0`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by index_is_rebuilt_after_kill_9_at_random_moments"]
async fn child_indexes_until_killed() {
    let (Some(db), Some(root)) = (
        std::env::var_os("ENGRAM_KILL_CHILD_DB"),
        std::env::var_os("ENGRAM_KILL_CHILD_ROOT"),
    ) else {
        return;
    };
    let db = PathBuf::from(db);
    let e = open(&db, Path::new(&root)).await;
    let marker = db.with_extension("phase");
    let pause = std::env::var("ENGRAM_KILL_CHILD_PAUSE").is_ok_and(|v| v == "1");
    let on_progress = move |p: &engram::code::IndexProgress| {
        std::fs::write(&marker, p.phase.as_str()).unwrap();
        if pause && p.phase.as_str() == "resolving" {
            std::thread::sleep(Duration::from_secs(5));
        }
    };
    e.index(
        &IndexOptions::default(),
        &on_progress,
        &Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn index_is_rebuilt_after_kill_9_at_random_moments() {
    let seed = std::env::var("ENGRAM_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let db = dir.path().join("killed.db");
    let mut py: Vec<Option<u64>> = vec![Some(0); PY_MODULES];
    let mut ts: Vec<Option<u64>> = vec![Some(0); TS_MODULES];
    let mut landed = [0u32; 3];
    for round in 0..ROUNDS {
        mutate_tree(&mut rng, &root, &mut py, &mut ts, round);
        let kill = match round % 3 {
            0 => Kill::WhileResolving,
            1 => Kill::DuringIndexing(rng.below(40)),
            _ => Kill::AfterDelay(20 + rng.below(400)),
        };
        if run_child_and_kill(&db, &root, kill) {
            landed[(round % 3) as usize] += 1;
        }

        // The next run heals: the index and graph equal a clean rebuild of the same tree.
        let e = open(&db, &root).await;
        index(&e).await;
        e.close().wait().await;
        let clean_db = dir.path().join(format!("clean-{round}.db"));
        let clean = open(&clean_db, &root).await;
        index(&clean).await;
        clean.close().wait().await;
        let got = fingerprint(&db).await;
        let want = fingerprint(&clean_db).await;
        if let Some(diff) = first_difference(&got, &want) {
            panic!("round {round} (seed {seed:#x}, kill {kill:?}): {diff}");
        }
        assert!(
            want.iter().find(|(n, _)| n == "edges").unwrap().1.len() > 100,
            "the tree makes a real graph"
        );
    }
    // The kills did land where they were aimed (most of them: a kill after a delay may come
    // after a fast child finished).
    assert!(
        landed[0] >= 6,
        "kills while resolving that landed: {landed:?}"
    );
    assert!(
        landed[1] >= 5,
        "kills during indexing that landed: {landed:?}"
    );
}

/// Asserts that `e`'s served graph index equals a fresh load of the tables.
async fn assert_served_graph_is_current(e: &Engram, what: &str) {
    let served = e
        .served_graph_picture()
        .await
        .unwrap()
        .expect("loaded here");
    let fresh = e.load_graph_index().await.unwrap().picture();
    if let Some(difference) = served.first_difference(&fresh) {
        panic!("{what}: the served graph index differs from a fresh load: {difference}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_served_graph_index_follows_a_writer_killed_mid_write() {
    let seed = std::env::var("ENGRAM_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9a1f_u64);
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let db = dir.path().join("followed.db");
    let mut py: Vec<Option<u64>> = vec![Some(0); PY_MODULES];
    let mut ts: Vec<Option<u64>> = vec![Some(0); TS_MODULES];
    write_tree(&root, &py, &ts);
    let watcher = open(&db, &root).await;
    index(&watcher).await;
    assert_served_graph_is_current(&watcher, "after the first index").await;
    let mut nodes_seen = 0;
    let mut followed_child = 0;
    for round in 0..10u64 {
        mutate_tree(&mut rng, &root, &mut py, &mut ts, round);
        let kill = match round % 3 {
            _ if round == 9 => Kill::AfterDone,
            0 => Kill::DuringIndexing(rng.below(40)),
            1 => Kill::WhileResolving,
            _ => Kill::DuringGraphSync(rng.below(60)),
        };
        let before = watcher.served_graph_picture().await.unwrap().unwrap();
        run_child_and_kill(&db, &root, kill);
        let what = format!("round {round} (seed {seed:#x}, kill {kill:?})");
        assert_served_graph_is_current(&watcher, &format!("{what}, after the kill")).await;
        let after = watcher.served_graph_picture().await.unwrap().unwrap();
        followed_child += u32::from(after != before);
        if matches!(kill, Kill::AfterDone) {
            assert_ne!(
                after, before,
                "{what}: the child's whole run reached this index"
            );
        }
        index(&watcher).await;
        assert_served_graph_is_current(&watcher, &format!("{what}, healed")).await;
        nodes_seen = watcher
            .load_graph_index()
            .await
            .unwrap()
            .picture()
            .node_count();
    }
    assert!(
        nodes_seen > 100,
        "the tree makes a real graph: {nodes_seen}"
    );
    // The child's committed graph writes reached this process's index by replay, not reload.
    eprintln!("rounds whose child changed the graph before its kill: {followed_child} of 10");
    assert!(
        followed_child >= 1,
        "rounds whose child changed the graph: {followed_child}"
    );
    assert_eq!(watcher.served_graph_loads(), 1, "one load, then replays");
}
