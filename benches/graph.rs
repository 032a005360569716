//! Criterion benches of the knowledge graph (no JS boundary).
//!
//! - `impact/synthetic_50k/{file,symbol}`: `impact()` with attached memories on a generated
//!   code-shaped graph of 50,000 nodes (5,000 files of 9 symbols; imports, calls and contains
//!   edges in the proportions of the real corpora) carrying 5,000 memories.
//! - `impact/<corpus>/file`: `impact()` on every file of a real corpus indexed from source.
//! - `graph_update/<corpus>/one_file`: `index_paths` of one edited file of that corpus (the
//!   watcher's work), alternately adding and removing a function that calls a symbol of the
//!   file; the file is the one with the most dependents, the worst case for the closure.
//!
//! - `impact/synthetic_50k/{file,symbol}_index`: the same targets answered from the in-process
//!   graph index (issue 38), after its load time and size are printed; `..._served`: through
//!   `impact()` as callers get it, the engine's own index checking the change logs first.
//! - `reach/synthetic_50k/{ancestors,descendants}_{tables,served}`: `reach()` of file targets
//!   (limit 500) from the closure table and from the served index.
//! - `neighbourhood/synthetic_50k/{tables,served}`: retrieval's file neighbourhood of 8 random
//!   files at once, both ways; `neighbours/synthetic_50k/{tables,served}`: `neighbours()` of
//!   a file (standing for its symbols, limit 50).
//! - Beside the file targets' profile, the SQLite floor under them: `impact()`'s own six
//!   statements run alone on a connection of their own (`engram::graph::impact::statements`).
//!
//! Criterion reports means and medians; the tail matters for impact, so each part first runs
//! every target once untimed by criterion and prints p50/p99/max, sizes of the graph and the
//! closure, and (for updates) the graph sync's share of the re-index.
//!
//! Run: `cargo bench --no-default-features --bench graph [-- <filter>]`. A filter also skips
//! the setup of the parts it cannot match (building the synthetic graph takes minutes, indexing
//! the corpora more), so `-- impact/synthetic_50k/file` builds only the synthetic graph, and
//! with `ENGRAM_BENCH_KEEP=<file>` naming a database an earlier run kept, not even that.

mod source_trees;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engram::code::indexer::IndexOptions;
use engram::graph::{
    Direction, EdgeInput, GraphIndex, ImpactOptions, NeighbourOptions, NodeInput, Side,
    TraverseOptions,
};
use engram::memory::{MemoryType, RememberInput};
use engram::{Engram, OpenOptions};
use source_trees::{copy_tree, corpora};

const FILES: usize = 5_000;
const SYMBOLS_PER_FILE: usize = 9;
const MEMORIES: usize = 5_000;
/// Impact targets sampled for the latency profile.
const PROFILE_TARGETS: usize = 2_000;

/// splitmix64: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

fn file_key(f: usize) -> String {
    format!("m{}/f{f}.ts", f / 50)
}

fn symbol_key(f: usize, s: usize) -> String {
    format!("{}:S{s}", file_key(f))
}

/// Builds the synthetic graph and its memories into `db`.
fn synthetic(rt: &tokio::runtime::Runtime, db: &Path) -> Engram {
    let engram = rt.block_on(Engram::open(OpenOptions::new(db))).unwrap();
    let mut rng = Rng(42);
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let mut imports: Vec<Vec<usize>> = Vec::with_capacity(FILES);
    for f in 0..FILES {
        let mut file = NodeInput::new(file_key(f), "file");
        file.layer = 1;
        file.file_path = Some(file_key(f));
        nodes.push(file);
        for s in 0..SYMBOLS_PER_FILE {
            let mut symbol = NodeInput::new(symbol_key(f, s), "function");
            symbol.layer = 1;
            symbol.file_path = Some(file_key(f));
            nodes.push(symbol);
            edges.push(layer_one(file_key(f), symbol_key(f, s), "contains"));
        }
        // Three imports of earlier files, mostly nearby ones (code imports its neighbours).
        let mut imported = Vec::new();
        for _ in 0..3.min(f) {
            let g = if rng.chance(0.7) {
                f - 1 - rng.below(f.min(200))
            } else {
                rng.below(f)
            };
            if !imported.contains(&g) {
                imported.push(g);
                edges.push(layer_one(file_key(f), file_key(g), "imports"));
            }
        }
        for s in 0..SYMBOLS_PER_FILE {
            if !imported.is_empty() && rng.chance(0.8) {
                let g = imported[rng.below(imported.len())];
                let t = rng.below(SYMBOLS_PER_FILE);
                edges.push(layer_one(symbol_key(f, s), symbol_key(g, t), "calls"));
            }
            if s > 0 && rng.chance(0.3) {
                let t = rng.below(s);
                edges.push(layer_one(symbol_key(f, s), symbol_key(f, t), "calls"));
            }
        }
        imports.push(imported);
    }
    eprintln!(
        "synthetic graph: {} nodes, {} edges",
        nodes.len(),
        edges.len()
    );
    for batch in nodes.chunks(10_000) {
        rt.block_on(engram.inject_graph(batch, &[])).unwrap();
    }
    for batch in edges.chunks(50_000) {
        rt.block_on(engram.inject_graph(&[], batch)).unwrap();
    }
    let mut memories = Vec::with_capacity(MEMORIES);
    for m in 0..MEMORIES {
        let (f, s) = (rng.below(FILES), rng.below(SYMBOLS_PER_FILE));
        let mut input = RememberInput::new(
            MemoryType::Gotcha,
            format!("S{s} of f{f} must be called after its setup ({m})"),
        );
        input.target_node_id = Some(symbol_key(f, s));
        input.related_files = vec![file_key(f)];
        if m % 3 == 0 {
            input.impacted_node_ids = (0..2)
                .map(|_| symbol_key(rng.below(FILES), rng.below(SYMBOLS_PER_FILE)))
                .collect();
        }
        memories.push(input);
    }
    for batch in memories.chunks(1_000) {
        rt.block_on(engram.remember_many(batch.to_vec())).unwrap();
    }
    engram
}

fn layer_one(from: String, to: String, kind: &str) -> EdgeInput {
    let mut edge = EdgeInput::new(from, to, kind);
    edge.layer = 1;
    edge
}

/// Where an `impact` answer comes from.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// The graph tables.
    Tables,
    /// An index loaded by the bench.
    Index(&'a GraphIndex),
    /// `impact()` as callers get it: the engine's served index, refreshed from the change
    /// logs before each answer.
    Served,
}

/// `impact` of `target` from `source`.
fn impact_of(
    rt: &tokio::runtime::Runtime,
    engram: &Engram,
    source: Source<'_>,
    target: &str,
) -> engram::graph::Impact {
    // The answer size of the first measurements (the defaults until 2026-11-29),
    // kept so that figures compare across days; today's defaults answer less.
    let options = ImpactOptions {
        limit: 500,
        memory_limit: 100,
        ..ImpactOptions::default()
    };
    match source {
        Source::Tables => rt.block_on(engram.impact_from_tables(target, &options)),
        Source::Index(index) => rt.block_on(engram.impact_through(index, target, &options)),
        Source::Served => rt.block_on(engram.impact(target, &options)),
    }
    .unwrap()
}

/// Runs `impact` once per target and prints the latency distribution and answer sizes.
fn profile_impact(
    rt: &tokio::runtime::Runtime,
    engram: &Engram,
    source: Source<'_>,
    label: &str,
    targets: &[String],
) {
    let mut times = Vec::with_capacity(targets.len());
    let (mut affected, mut memories) = (0usize, 0usize);
    for target in targets {
        let started = Instant::now();
        let impact = impact_of(rt, engram, source, target);
        times.push(started.elapsed());
        affected += impact.affected.len();
        memories += impact.memories.len();
    }
    let n = targets.len().max(1) as f64;
    eprintln!(
        "{label}: {} targets, p50 {:?}, p99 {:?}, max {:?}; mean {:.1} affected, {:.1} memories",
        targets.len(),
        quantile(&mut times, 0.5),
        quantile(&mut times, 0.99),
        quantile(&mut times, 1.0),
        affected as f64 / n,
        memories as f64 / n,
    );
}

/// The floor under `impact(file)`: its six statements run on a connection of their own to
/// the same file, prepared once, every row stepped but only the ids and keys the next
/// statement needs read. What is left above this is engram's own work (decoding, choosing,
/// ordering); this is what SQLite takes, on this machine, for answers of this size.
fn profile_impact_floor(rt: &tokio::runtime::Runtime, db: &Path, targets: &[String]) {
    let [by_key, seeds, closure, nodes, links, memories] = engram::graph::impact::statements();
    let times = rt.block_on(async {
        let conn = libsql::Builder::new_local(db)
            .build()
            .await
            .unwrap()
            .connect()
            .unwrap();
        // The engine's reader settings (`store::pragmas`).
        for pragma in ["PRAGMA cache_size = -2048", "PRAGMA mmap_size = 1073741824"] {
            let mut rows = conn.query(pragma, ()).await.unwrap();
            while rows.next().await.unwrap().is_some() {}
        }
        let mut rows = conn
            .query("SELECT project_id FROM graph_nodes LIMIT 1", ())
            .await
            .unwrap();
        let project: String = rows.next().await.unwrap().unwrap().get(0).unwrap();
        drop(rows);
        let project = project.as_str();
        let prepared = futures::future::try_join_all(
            [by_key, seeds, closure, nodes, links, memories].map(|sql| conn.prepare(sql)),
        )
        .await
        .unwrap();
        let [by_key, seeds, closure, nodes, links, memories] =
            <[libsql::Statement; 6]>::try_from(prepared)
                .unwrap_or_else(|_| unreachable!("six statements"));
        let mut times = Vec::with_capacity(targets.len());
        for target in targets {
            let started = Instant::now();
            let mut target_id = 0i64;
            each_row(&by_key, (project, target.as_str()), |row| {
                target_id = row.get(0).unwrap();
            })
            .await;
            let (mut seed_ids, mut keys) = (Vec::new(), Vec::new());
            each_row(&seeds, (target_id, 20_000), |row| {
                seed_ids.push(row.get::<i64>(0).unwrap());
                keys.push(row.get::<String>(1).unwrap());
            })
            .await;
            let seed_list = serde_json::to_string(&seed_ids).unwrap();
            let mut affected = std::collections::BTreeSet::new();
            let closure_params = libsql::params![seed_list, 4, libsql::Value::Null];
            each_row(&closure, closure_params, |row| {
                let ancestor: i64 = row.get(0).unwrap();
                if !seed_ids.contains(&ancestor) {
                    affected.insert(ancestor);
                }
            })
            .await;
            let affected: Vec<i64> = affected.into_iter().take(500).collect();
            let affected_list = [serde_json::to_string(&affected).unwrap()];
            each_row(&nodes, affected_list, |row| {
                keys.push(row.get::<String>(1).unwrap())
            })
            .await;
            let key_list = serde_json::to_string(&keys).unwrap();
            let mut seqs = std::collections::BTreeSet::new();
            each_row(&links, (project, key_list), |row| {
                seqs.insert(row.get::<i64>(0).unwrap());
            })
            .await;
            let seqs: Vec<i64> = seqs.into_iter().take(100).collect();
            each_row(&memories, [serde_json::to_string(&seqs).unwrap()], |_| {}).await;
            times.push(started.elapsed());
        }
        times
    });
    let mut times = times;
    eprintln!(
        "impact synthetic_50k file, SQLite floor: {} targets, p50 {:?}, p99 {:?}",
        targets.len(),
        quantile(&mut times, 0.5),
        quantile(&mut times, 0.99),
    );
}

/// Runs a prepared statement, hands each row to `f`, and resets it for the next use.
async fn each_row(
    statement: &libsql::Statement,
    params: impl libsql::params::IntoParams,
    mut f: impl FnMut(&libsql::Row),
) {
    let mut rows = statement.query(params).await.unwrap();
    while let Some(row) = rows.next().await.unwrap() {
        f(&row);
    }
    drop(rows);
    statement.reset();
}

fn quantile(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    times
        .get(((times.len().max(1) - 1) as f64 * q).round() as usize)
        .copied()
        .unwrap_or_default()
}

/// Criterion over `targets`, one per iteration, in turn (from `index` when given).
fn bench_impact(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    engram: &Engram,
    source: Source<'_>,
    name: &str,
    targets: &[String],
) {
    let mut next = targets.iter().cycle();
    c.bench_function(name, |b| {
        b.iter(|| impact_of(rt, engram, source, next.next().unwrap()))
    });
}

fn synthetic_impact(c: &mut Criterion) {
    let rt = runtime();
    if !selected(&[
        "impact/synthetic_50k/file",
        "impact/synthetic_50k/symbol",
        "impact/synthetic_50k/file_index",
        "impact/synthetic_50k/symbol_index",
        "impact/synthetic_50k/file_served",
        "impact/synthetic_50k/symbol_served",
        "reach/synthetic_50k/ancestors_tables",
        "reach/synthetic_50k/ancestors_served",
        "reach/synthetic_50k/descendants_tables",
        "reach/synthetic_50k/descendants_served",
        "neighbourhood/synthetic_50k/tables",
        "neighbourhood/synthetic_50k/served",
        "neighbours/synthetic_50k/tables",
        "neighbours/synthetic_50k/served",
    ]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // ENGRAM_BENCH_KEEP=<file> keeps the synthetic database for study with the sqlite3 shell,
    // and a later run with the same setting opens it instead of building it again (the
    // generator is deterministic, so the graph is the same).
    let kept = std::env::var_os("ENGRAM_BENCH_KEEP").map(std::path::PathBuf::from);
    let engram = match &kept {
        Some(db) if db.exists() => rt.block_on(Engram::open(OpenOptions::new(db))).unwrap(),
        Some(db) => synthetic(&rt, db),
        None => synthetic(&rt, &dir.path().join("synthetic.db")),
    };
    let stats = rt.block_on(engram.graph_stats()).unwrap();
    eprintln!(
        "synthetic graph built in {:?}: {stats:?}",
        started.elapsed()
    );
    let mut rng = Rng(7);
    let files: Vec<String> = (0..PROFILE_TARGETS)
        .map(|_| file_key(rng.below(FILES)))
        .collect();
    let symbols: Vec<String> = (0..PROFILE_TARGETS)
        .map(|_| symbol_key(rng.below(FILES), rng.below(SYMBOLS_PER_FILE)))
        .collect();
    profile_impact(
        &rt,
        &engram,
        Source::Tables,
        "impact synthetic_50k file",
        &files,
    );
    let db = kept.unwrap_or_else(|| dir.path().join("synthetic.db"));
    profile_impact_floor(&rt, &db, &files);
    profile_impact(
        &rt,
        &engram,
        Source::Tables,
        "impact synthetic_50k symbol",
        &symbols,
    );
    // The in-process index (issue 38): its load, its size, and the same targets through it.
    let started = Instant::now();
    let index = rt.block_on(engram.load_graph_index()).unwrap();
    let loaded = started.elapsed();
    let size = index.size();
    eprintln!(
        "graph index: loaded in {loaded:?}; {size:?}; {:.0} bytes per node, {:.0} per edge \
         (all of it over the graph's {} nodes and {} edges)",
        size.bytes as f64 / stats.nodes_by_layer.iter().sum::<u64>().max(1) as f64,
        size.bytes as f64 / stats.edges_by_layer.iter().sum::<u64>().max(1) as f64,
        stats.nodes_by_layer.iter().sum::<u64>(),
        stats.edges_by_layer.iter().sum::<u64>(),
    );
    let index = Source::Index(&index);
    // On this graph too (many equal weights, so many ties) the two answer alike.
    for target in files.iter().chain(&symbols).take(1000) {
        assert_eq!(
            impact_of(&rt, &engram, index, target),
            impact_of(&rt, &engram, Source::Tables, target),
            "{target}"
        );
    }
    profile_impact(
        &rt,
        &engram,
        index,
        "impact synthetic_50k file, index",
        &files,
    );
    profile_impact(
        &rt,
        &engram,
        index,
        "impact synthetic_50k symbol, index",
        &symbols,
    );
    bench_impact(
        c,
        &rt,
        &engram,
        Source::Tables,
        "impact/synthetic_50k/file",
        &files,
    );
    bench_impact(
        c,
        &rt,
        &engram,
        Source::Tables,
        "impact/synthetic_50k/symbol",
        &symbols,
    );
    bench_impact(
        c,
        &rt,
        &engram,
        index,
        "impact/synthetic_50k/file_index",
        &files,
    );
    bench_impact(
        c,
        &rt,
        &engram,
        index,
        "impact/synthetic_50k/symbol_index",
        &symbols,
    );
    // As callers get it: the engine's own index, loaded once, then a log check per answer.
    let started = Instant::now();
    assert!(rt.block_on(engram.warm_graph_index()).unwrap());
    eprintln!("served graph index: loaded in {:?}", started.elapsed());
    profile_impact(
        &rt,
        &engram,
        Source::Served,
        "impact synthetic_50k file, served",
        &files,
    );
    profile_impact(
        &rt,
        &engram,
        Source::Served,
        "impact synthetic_50k symbol, served",
        &symbols,
    );
    bench_impact(
        c,
        &rt,
        &engram,
        Source::Served,
        "impact/synthetic_50k/file_served",
        &files,
    );
    bench_impact(
        c,
        &rt,
        &engram,
        Source::Served,
        "impact/synthetic_50k/symbol_served",
        &symbols,
    );
    for side in [Side::Ancestors, Side::Descendants] {
        for served in [false, true] {
            let name = format!(
                "reach/synthetic_50k/{}_{}",
                format!("{side:?}").to_lowercase(),
                if served { "served" } else { "tables" }
            );
            profile_reach(&rt, &engram, side, served, &name, &files);
            let mut next = files.iter().cycle();
            c.bench_function(&name, |b| {
                b.iter(|| reach_of(&rt, &engram, side, served, next.next().unwrap()))
            });
        }
    }
    let file_sets: Vec<Vec<String>> = files.chunks(8).map(<[String]>::to_vec).collect();
    for set in &file_sets {
        assert_eq!(
            rt.block_on(engram.file_neighbours(set)).unwrap(),
            rt.block_on(engram.file_neighbours_from_tables(set))
                .unwrap()
        );
    }
    for served in [false, true] {
        let name = format!(
            "neighbourhood/synthetic_50k/{}",
            if served { "served" } else { "tables" }
        );
        let neighbours_of = |set: &[String]| {
            let answer = if served {
                rt.block_on(engram.file_neighbours(set))
            } else {
                rt.block_on(engram.file_neighbours_from_tables(set))
            };
            answer.unwrap().values().map(|n| n.len()).sum::<usize>()
        };
        let mut times = Vec::with_capacity(file_sets.len());
        let mut found = 0;
        for set in &file_sets {
            let started = Instant::now();
            found += neighbours_of(set);
            times.push(started.elapsed());
        }
        eprintln!(
            "{name}: {} sets of 8 files, p50 {:?}, p99 {:?}; mean {:.1} neighbouring files",
            file_sets.len(),
            quantile(&mut times, 0.5),
            quantile(&mut times, 0.99),
            found as f64 / file_sets.len().max(1) as f64
        );
        let mut next = file_sets.iter().cycle();
        c.bench_function(&name, |b| b.iter(|| neighbours_of(next.next().unwrap())));
    }
    let options = NeighbourOptions {
        limit: 50,
        ..NeighbourOptions::default()
    };
    for file in files.iter().take(500) {
        let keys = std::slice::from_ref(file);
        assert_eq!(
            rt.block_on(engram.neighbours(keys, &options)).unwrap(),
            rt.block_on(engram.neighbours_from_tables(keys, &options))
                .unwrap()
        );
    }
    for served in [false, true] {
        let name = format!(
            "neighbours/synthetic_50k/{}",
            if served { "served" } else { "tables" }
        );
        let neighbours_of = |file: &String| {
            let keys = std::slice::from_ref(file);
            let answer = if served {
                rt.block_on(engram.neighbours(keys, &options))
            } else {
                rt.block_on(engram.neighbours_from_tables(keys, &options))
            };
            answer.unwrap().len()
        };
        let mut times = Vec::with_capacity(files.len());
        let mut found = 0;
        for file in &files {
            let started = Instant::now();
            found += neighbours_of(file);
            times.push(started.elapsed());
        }
        eprintln!(
            "{name}: {} files, p50 {:?}, p99 {:?}; mean {:.1} neighbours",
            files.len(),
            quantile(&mut times, 0.5),
            quantile(&mut times, 0.99),
            found as f64 / files.len().max(1) as f64
        );
        let mut next = files.iter().cycle();
        c.bench_function(&name, |b| b.iter(|| neighbours_of(next.next().unwrap())));
    }
}

/// `reach()` of `key` (limit 500) from the served index or the closure table.
fn reach_of(
    rt: &tokio::runtime::Runtime,
    engram: &Engram,
    side: Side,
    served: bool,
    key: &str,
) -> engram::graph::Subgraph {
    let answer = if served {
        rt.block_on(engram.reach(key, side, None, 500))
    } else {
        rt.block_on(engram.reach_from_tables(key, side, None, 500))
    };
    answer.unwrap()
}

/// Runs `reach` once per target and prints the latency distribution and answer sizes.
fn profile_reach(
    rt: &tokio::runtime::Runtime,
    engram: &Engram,
    side: Side,
    served: bool,
    label: &str,
    targets: &[String],
) {
    let mut times = Vec::with_capacity(targets.len());
    let mut reached = 0usize;
    for target in targets {
        let started = Instant::now();
        reached += reach_of(rt, engram, side, served, target).nodes.len();
        times.push(started.elapsed());
    }
    eprintln!(
        "{label}: {} targets, p50 {:?}, p99 {:?}, max {:?}; mean {:.1} nodes",
        targets.len(),
        quantile(&mut times, 0.5),
        quantile(&mut times, 0.99),
        quantile(&mut times, 1.0),
        reached as f64 / targets.len().max(1) as f64,
    );
}

/// Impact over a real corpus and the cost of re-indexing one edited file in it.
fn real_corpora(c: &mut Criterion) {
    let rt = runtime();
    for (name, source) in corpora().into_iter().filter(|(name, _)| {
        matches!(name.as_str(), "rust" | "python" | "custom")
            && selected(&[
                format!("impact/{name}/file"),
                format!("graph_update/{name}/one_file"),
            ])
    }) {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("repo");
        std::fs::create_dir_all(&root).unwrap();
        copy_tree(&source, &root);
        let mut options = OpenOptions::new(scratch.path().join("engram.db"));
        options.project_root = Some(root.clone());
        let engram = rt.block_on(Engram::open(options)).unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let index = rt
            .block_on(engram.index(&IndexOptions::default(), &|_| {}, &cancel))
            .unwrap();
        let stats = rt.block_on(engram.graph_stats()).unwrap();
        eprintln!(
            "corpus {name}: {} files, {} lines indexed in {:?} (graph sync {:?}); {stats:?}",
            index.files_indexed, index.lines, index.duration, index.graph.duration
        );
        let files = rt
            .block_on(engram.node_keys(Some("file"), Some(1), 100_000))
            .unwrap();
        if files.is_empty() {
            continue;
        }
        profile_impact(
            &rt,
            &engram,
            Source::Tables,
            &format!("impact {name} file"),
            &files,
        );
        bench_impact(
            c,
            &rt,
            &engram,
            Source::Tables,
            &format!("impact/{name}/file"),
            &files,
        );
        bench_update(c, &rt, &engram, &name, &root, &files);
    }
}

/// The file with the most dependents, and a symbol of it a new function can call.
fn most_depended_on(
    rt: &tokio::runtime::Runtime,
    engram: &Engram,
    files: &[String],
) -> (String, Option<String>) {
    let mut best = (0, files[0].clone());
    // Counted up to 500 (the default until 2026-11-29), so the file chosen stays the same.
    let up_to_500 = ImpactOptions {
        limit: 500,
        memory_limit: 0,
        ..ImpactOptions::default()
    };
    for file in files {
        let impact = rt.block_on(engram.impact(file, &up_to_500)).unwrap();
        if impact.affected.len() > best.0 {
            best = (impact.affected.len(), file.clone());
        }
    }
    let contained = TraverseOptions {
        max_depth: 1,
        direction: Direction::Out,
        kinds: Some(vec!["contains".to_owned()]),
        ..TraverseOptions::default()
    };
    let symbols = rt.block_on(engram.traverse(&best.1, &contained)).unwrap();
    let callee = symbols
        .nodes
        .iter()
        .find(|n| n.node.kind == "function" && !n.node.label.contains('.'))
        .map(|n| n.node.label.clone());
    eprintln!(
        "edited file: {} ({} dependents), new function calls {callee:?}",
        best.1, best.0
    );
    (best.1, callee)
}

fn bench_update(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    engram: &Engram,
    name: &str,
    root: &Path,
    files: &[String],
) {
    let (path, callee) = most_depended_on(rt, engram, files);
    let original = std::fs::read_to_string(root.join(&path)).unwrap();
    let call = callee.map(|c| format!("{c}()")).unwrap_or_default();
    let edited = if path.ends_with(".py") {
        format!("{original}\n\ndef engram_bench_edit():\n    return {call}\n")
    } else {
        format!("{original}\n\nfn engram_bench_edit() {{\n    {call};\n}}\n")
    };
    let options = IndexOptions::default();
    let paths = vec![path.clone()];
    let mut flip = false;
    let mut edit = || {
        flip = !flip;
        let text = if flip { &edited } else { &original };
        std::fs::write(root.join(&path), text).unwrap();
    };
    let (mut totals, mut syncs) = (Vec::new(), Vec::new());
    for _ in 0..40 {
        edit();
        let summary = rt.block_on(engram.index_paths(&paths, &options)).unwrap();
        assert_eq!(summary.files_indexed, 1);
        totals.push(summary.duration);
        syncs.push(summary.graph.duration);
    }
    eprintln!(
        "update {name} one file: re-index p50 {:?} p99 {:?}; graph sync p50 {:?} p99 {:?}",
        quantile(&mut totals, 0.5),
        quantile(&mut totals, 0.99),
        quantile(&mut syncs, 0.5),
        quantile(&mut syncs, 0.99),
    );
    c.bench_function(&format!("graph_update/{name}/one_file"), |b| {
        b.iter_batched(
            &mut edit,
            |()| rt.block_on(engram.index_paths(&paths, &options)).unwrap(),
            BatchSize::PerIteration,
        )
    });
}

/// Whether criterion's name filter (the first free argument after `--`) selects any of
/// `names`. Criterion searches each name for the filter as a regex; a filter without regex
/// syntax is a plain substring, tested here exactly, and one with it keeps everything.
fn selected<S: AsRef<str>>(names: &[S]) -> bool {
    // Criterion's options that take a value, whose value is not a filter.
    const VALUED: &[&str] = &[
        "--save-baseline",
        "--baseline",
        "--load-baseline",
        "--measurement-time",
        "--warm-up-time",
        "--sample-size",
        "--profile-time",
        "--output-format",
        "--color",
        "--plotting-backend",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--nresamples",
    ];
    let mut args = std::env::args().skip(1);
    let mut filter = None;
    while let Some(arg) = args.next() {
        if VALUED.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filter = Some(arg);
            break;
        }
    }
    filter.is_none_or(|f| {
        let regex_free = !f.contains(['^', '$', '|', '(', '[', '*', '+', '?', '\\']);
        !regex_free || names.iter().any(|n| n.as_ref().contains(f.as_str()))
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

criterion_group!(benches, synthetic_impact, real_corpora);
criterion_main!(benches);
