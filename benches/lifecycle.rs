//! Criterion benches of the memory lifecycle over 100,000 memories (no JS boundary).
//!
//! `prune/100k`: a project left alone for 200 days. Of its 100,000 memories, 40,000 attached
//! gotchas (60-day half-life) have expired and are forgotten with a version each, 20,000 work
//! states forgotten 200 days ago are past the grace period and deleted for good, and 40,000
//! decisions and preferences stay. Every iteration prunes a fresh copy of the same file (the
//! copy and the open are setup, not measured). Target (issue 9): <= 2 s.
//!
//! `prune/100k_next_day`: the same store the day after that prune, which is what a daily
//! schedule meets: every memory is scanned, nothing has expired since.
//!
//! `transfer/export_json_100k` and `transfer/import_json_100k`: the same 100,000 memories (with
//! the 20,000 forgotten ones' versions) exported as lossless JSON, and that document imported
//! into an empty project. Targets (issue 9): <= 10 s each.
//!
//! Run: `cargo bench --no-default-features --bench lifecycle`

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engram::clock::ManualClock;
use engram::lifecycle::{ExportFormat, ExportOptions, OnConflict, PruneOptions};
use engram::memory::{MemoryType, RememberInput};
use engram::{EngineOptions, Engram, OpenOptions};

// The shared corpus module: this bench uses its Zipf memories and `copy_database`.
#[allow(dead_code)]
mod corpus;

const T0: i64 = 1_700_000_000_000;
const DAY: i64 = 86_400_000;

fn open(rt: &tokio::runtime::Runtime, path: &Path, now: i64) -> Engram {
    let mut options = OpenOptions::new(path);
    options.engine = EngineOptions {
        clock: Arc::new(ManualClock::new(now)),
        ..Default::default()
    };
    rt.block_on(Engram::open(options)).unwrap()
}

/// Stores `texts` as memories of `memory_type`, attached to a file or not, 1,000 per batch.
fn fill(
    rt: &tokio::runtime::Runtime,
    db: &Engram,
    texts: &[corpus::Memory],
    memory_type: MemoryType,
    attached: bool,
) {
    for chunk in texts.chunks(1000) {
        let inputs = chunk
            .iter()
            .map(|m| {
                let mut input = RememberInput::new(memory_type, m.content.clone());
                input.tags = vec![m.tag.clone()];
                if attached {
                    input.related_files = vec![m.file.clone()];
                }
                input
            })
            .collect();
        rt.block_on(db.remember_many(inputs)).unwrap();
    }
}

/// Builds the 100k-memory template (see the module doc); returns its path.
fn template(rt: &tokio::runtime::Runtime, dir: &Path) -> PathBuf {
    let path = dir.join("template.db");
    let texts = corpus::Zipf::new().memories(100_000, 7);
    {
        // Day 0: 20,000 orphan work states, expired and forgotten by day 40.
        let db = open(rt, &path, T0);
        fill(rt, &db, &texts[..20_000], MemoryType::WorkState, false);
    }
    {
        let db = open(rt, &path, T0 + 40 * DAY);
        let report = rt
            .block_on(db.prune(&PruneOptions::default(), &AtomicBool::new(false)))
            .unwrap();
        assert_eq!(report.expired, 20_000);
        // Day 40: the rest.
        fill(rt, &db, &texts[20_000..60_000], MemoryType::Gotcha, true);
        fill(rt, &db, &texts[60_000..80_000], MemoryType::Decision, true);
        fill(rt, &db, &texts[80_000..], MemoryType::Preference, false);
    }
    path
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let template = template(&rt, dir.path());
    let now = T0 + 240 * DAY;
    let mut run = 0;

    let mut group = c.benchmark_group("prune");
    group.sample_size(10);
    group.bench_function("100k", |b| {
        b.iter_batched(
            || {
                run += 1;
                let path = dir.path().join(format!("run{run}.db"));
                corpus::copy_database(&template, &path);
                open(&rt, &path, now)
            },
            |db| {
                let report = rt
                    .block_on(db.prune(&PruneOptions::default(), &AtomicBool::new(false)))
                    .unwrap();
                assert_eq!((report.expired, report.deleted), (40_000, 20_000));
                db
            },
            BatchSize::PerIteration,
        )
    });
    let pruned = dir.path().join("pruned.db");
    corpus::copy_database(&template, &pruned);
    rt.block_on(open(&rt, &pruned, now).prune(&PruneOptions::default(), &AtomicBool::new(false)))
        .unwrap();
    group.bench_function("100k_next_day", |b| {
        b.iter_batched(
            || {
                run += 1;
                let path = dir.path().join(format!("run{run}.db"));
                corpus::copy_database(&pruned, &path);
                open(&rt, &path, now + DAY)
            },
            |db| {
                let report = rt
                    .block_on(db.prune(&PruneOptions::default(), &AtomicBool::new(false)))
                    .unwrap();
                assert_eq!((report.expired, report.deleted), (0, 0));
                db
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();

    let source_path = dir.path().join("source.db");
    corpus::copy_database(&template, &source_path);
    let source = open(&rt, &source_path, now);
    let json = ExportOptions {
        format: ExportFormat::Json,
        include_forgotten: None,
    };
    let document = rt.block_on(source.export_memories(&json)).unwrap();
    assert_eq!(document.memories, 100_000);
    let mut group = c.benchmark_group("transfer");
    group.sample_size(10);
    group.bench_function("export_json_100k", |b| {
        b.iter(|| rt.block_on(source.export_memories(&json)).unwrap().memories)
    });
    group.bench_function("import_json_100k", |b| {
        b.iter_batched(
            || {
                run += 1;
                open(&rt, &dir.path().join(format!("import{run}.db")), now)
            },
            |db| {
                let report = rt
                    .block_on(db.import_memories(
                        ExportFormat::Json,
                        &document.text,
                        OnConflict::Skip,
                    ))
                    .unwrap();
                assert_eq!(report.imported, 100_000);
                db
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
