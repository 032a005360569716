//! Criterion benches of the code index on real corpora installed on this machine (no JS
//! boundary): a cold index (walk, parse, chunk, extract, write, resolve) into a fresh database,
//! with throughput in lines; files and MB per run are printed once per corpus so files/s and
//! MB/s follow from the median time.
//!
//! Corpora (each skipped when missing):
//! - `python`: the installed CPython standard library (`/usr/lib/python3.*`);
//! - `rust`: the tokio sources in the cargo registry (a dependency of libsql, so always fetched);
//! - `typescript`: `node_modules/@types/node` (`.d.ts` sources shipped in an npm package);
//! - `javascript`: `node_modules/@napi-rs/cli` (the CLI's shipped JavaScript);
//! - `ENGRAM_BENCH_CORPUS=/some/dir`: that directory only.
//!
//! Run: `cargo bench --no-default-features --bench code [-- <corpus>]`

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use engram::code::indexer::IndexOptions;
use engram::{Engram, OpenOptions};

/// The corpora present here, by name.
fn corpora() -> Vec<(String, PathBuf)> {
    if let Ok(dir) = std::env::var("ENGRAM_BENCH_CORPUS") {
        return vec![("custom".to_owned(), PathBuf::from(dir))];
    }
    let mut found = Vec::new();
    if let Some(python) = newest_dir("/usr/lib", "python3.", |d| d.join("os.py").is_file()) {
        found.push(("python".to_owned(), python));
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    if let Some(registry) = cargo_home.map(|h| h.join("registry/src")) {
        let tokio = std::fs::read_dir(&registry)
            .into_iter()
            .flatten()
            .flatten()
            .find_map(|index| newest_dir(index.path(), "tokio-1.", |_| true));
        if let Some(tokio) = tokio {
            found.push(("rust".to_owned(), tokio));
        }
    }
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("node_modules");
    for (name, dir) in [
        ("typescript", "@types/node"),
        ("javascript", "@napi-rs/cli"),
    ] {
        if modules.join(dir).is_dir() {
            found.push((name.to_owned(), modules.join(dir)));
        }
    }
    found
}

/// The last (by name) directory in `parent` whose name starts with `prefix` and that passes `ok`.
fn newest_dir(
    parent: impl AsRef<Path>,
    prefix: &str,
    ok: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .filter(|p| p.is_dir() && ok(p))
        .collect();
    dirs.sort();
    dirs.pop()
}

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

criterion_group!(benches, bench);
criterion_main!(benches);
