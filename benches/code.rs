//! Criterion benches of the code index on real corpora installed on this machine (no JS
//! boundary): a cold index (walk, parse, chunk, extract, write, resolve) into a fresh database,
//! with throughput in lines; files and MB per run are printed once per corpus so files/s and
//! MB/s follow from the median time.
//!
//! Corpora: those of `source_trees/mod.rs` (CPython, tokio, @types/node, @napi-rs/cli, or
//! `ENGRAM_BENCH_CORPUS`), each skipped when missing.
//!
//! `ceiling/<corpus>` bounds what a cold index can reach on this machine: the same corpus's
//! code files, read into memory first, only parsed (`parse`), then parsed, queried, chunked and
//! extracted without writing (`analyze`), on as many threads as there are cores.
//!
//! Then `reindex_one_file`: one edited 1,000-line file re-indexed in a project holding the
//! tokio corpus (the watcher's work after its debounce).
//!
//! Run: `cargo bench --no-default-features --bench code [-- <corpus>]`

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod source_trees;

use source_trees::{copy_tree, corpora};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use engram::code::indexer::IndexOptions;
use engram::code::{AnalyzeOptions, FileKind};
use engram::{Engram, OpenOptions};

fn open(rt: &tokio::runtime::Runtime, db: &Path, root: &Path) -> Engram {
    let mut options = OpenOptions::new(db);
    options.project_root = Some(root.to_path_buf());
    rt.block_on(Engram::open(options)).unwrap()
}

fn index(rt: &tokio::runtime::Runtime, engram: &Engram) -> engram::code::indexer::IndexSummary {
    let cancel = Arc::new(AtomicBool::new(false));
    rt.block_on(engram.index(&IndexOptions::default(), &|_| {}, &cancel))
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for (name, root) in corpora() {
        let scratch = tempfile::tempdir().unwrap();
        // One untimed run sizes the corpus for the throughput figures.
        let summary = index(&rt, &open(&rt, &scratch.path().join("size.db"), &root));
        eprintln!(
            "corpus {name} ({}): {} files indexed, {} lines, {:.1} MB, {} chunks, {} skipped",
            root.display(),
            summary.files_indexed,
            summary.lines,
            summary.bytes as f64 / 1e6,
            summary.chunks,
            summary.files_skipped,
        );
        let mut group = c.benchmark_group(format!("index_cold/{name}"));
        group.sample_size(10);
        group.throughput(Throughput::Elements(summary.lines));
        let mut run = 0;
        group.bench_function("lines", |b| {
            b.iter_batched(
                || {
                    run += 1;
                    open(&rt, &scratch.path().join(format!("cold-{run}.db")), &root)
                },
                // The handle is returned so that closing it is not timed.
                |engram| (index(&rt, &engram), engram),
                BatchSize::PerIteration,
            )
        });
        group.finish();
    }
}

/// A realistic 1,000-line Python module: a class of methods with calls between them.
fn thousand_line_module(variant: usize) -> String {
    let mut text = String::from("import os\nfrom typing import Optional\n\n\nclass Service:\n");
    let mut method: usize = 0;
    while text.lines().count() < 990 {
        text.push_str(&format!(
            "    def handle_{method}(self, request: dict, retries: int = {variant}) -> Optional[str]:\n\
             \x20       \"\"\"Handles request kind {method}.\"\"\"\n\
             \x20       if not request:\n\
             \x20           return None\n\
             \x20       value = self.handle_{prev}(request, retries - 1) if retries else None\n\
             \x20       return os.path.join(str(value), \"{method}\")\n\n",
            prev = method.saturating_sub(1),
        ));
        method += 1;
    }
    text
}

/// Latency of re-indexing one edited 1,000-line file through `index_paths` (the watcher's
/// path after its debounce): read, parse, mark stale, replace rows, re-resolve, commit. The
/// project around it is the tokio corpus copied in, so the tables are not empty.
fn reindex_one(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    if let Some((_, tokio)) = corpora().into_iter().find(|(name, _)| name == "rust") {
        copy_tree(&tokio, &root.join("vendor_tokio"));
    }
    let edited = root.join("service.py");
    std::fs::write(&edited, thousand_line_module(0)).unwrap();
    let engram = open(&rt, &scratch.path().join("reindex.db"), &root);
    let options = IndexOptions {
        use_default_ignores: false, // index the copied corpus too
        ..IndexOptions::default()
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let summary = rt
        .block_on(engram.index(&options, &|_| {}, &cancel))
        .unwrap();
    eprintln!(
        "re-index bench project: {} files, {} chunks; edited file {} lines",
        summary.files_indexed,
        summary.chunks,
        thousand_line_module(0).lines().count()
    );
    let paths = vec!["service.py".to_owned()];
    let mut variant = 0;
    // An untimed pass first: how much of a re-index the graph sync takes.
    let (mut totals, mut syncs) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        variant += 1;
        std::fs::write(&edited, thousand_line_module(variant)).unwrap();
        let summary = rt.block_on(engram.index_paths(&paths, &options)).unwrap();
        totals.push(summary.duration);
        syncs.push(summary.graph.duration);
    }
    totals.sort();
    syncs.sort();
    eprintln!(
        "re-index one file: median {:?}, of which the graph sync {:?}",
        totals[totals.len() / 2],
        syncs[syncs.len() / 2]
    );
    c.bench_function("reindex_one_file/1000_lines", |b| {
        b.iter_batched(
            || {
                variant += 1;
                std::fs::write(&edited, thousand_line_module(variant)).unwrap();
            },
            |()| {
                let summary = rt.block_on(engram.index_paths(&paths, &options)).unwrap();
                assert_eq!(summary.files_indexed, 1);
            },
            BatchSize::PerIteration,
        )
    });
}

/// The corpus's code files (the indexer's walk: `.gitignore` honoured), read into memory.
fn code_files(root: &Path) -> Vec<(String, Vec<u8>, FileKind)> {
    let mut files = Vec::new();
    for entry in ignore::WalkBuilder::new(root).build().flatten() {
        let path = entry.path();
        let Some(kind @ FileKind::Code(_)) = FileKind::of(path) else {
            continue;
        };
        if let Ok(bytes) = std::fs::read(path) {
            let relative = path.strip_prefix(root).unwrap_or(path);
            files.push((relative.to_string_lossy().into_owned(), bytes, kind));
        }
    }
    files
}

/// Runs `work` over `files` split across the cores (files interleaved so both threads get a
/// mix of sizes), as the indexer's parse pool does.
fn on_every_core<F>(files: &[(String, Vec<u8>, FileKind)], work: F)
where
    F: Fn(&mut tree_sitter::Parser, &(String, Vec<u8>, FileKind)) + Sync,
{
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for first in 0..threads {
            let work = &work;
            scope.spawn(move || {
                let mut parser = tree_sitter::Parser::new();
                for file in files.iter().skip(first).step_by(threads) {
                    work(&mut parser, file);
                }
            });
        }
    });
}

/// The ceiling of a cold index: parsing alone, then everything but the writes.
fn ceiling(c: &mut Criterion) {
    let never = AtomicBool::new(false);
    let options = AnalyzeOptions::default();
    for (name, root) in corpora() {
        let files = code_files(&root);
        let lines: u64 = files
            .iter()
            .map(|(_, bytes, _)| bytes.iter().filter(|b| **b == b'\n').count() as u64)
            .sum();
        eprintln!(
            "ceiling {name}: {} code files, {lines} lines, {:.1} MB",
            files.len(),
            files.iter().map(|f| f.1.len()).sum::<usize>() as f64 / 1e6
        );
        let mut group = c.benchmark_group(format!("ceiling/{name}"));
        group.sample_size(10);
        group.throughput(Throughput::Elements(lines));
        group.bench_function("parse", |b| {
            b.iter(|| {
                on_every_core(&files, |parser, (_, bytes, kind)| {
                    let FileKind::Code(language) = kind else {
                        return;
                    };
                    parser
                        .set_language(&language.grammar().unwrap().ts_language)
                        .unwrap();
                    std::hint::black_box(parser.parse(bytes, None));
                })
            })
        });
        group.bench_function("analyze", |b| {
            b.iter(|| {
                on_every_core(&files, |parser, (path, bytes, kind)| {
                    std::hint::black_box(engram::code::analyze(
                        parser, path, bytes, *kind, &options, &never,
                    ));
                })
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench, ceiling, reindex_one);
criterion_main!(benches);
