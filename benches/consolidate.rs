//! Criterion benches of consolidation over 100,000 memories (no JS boundary).
//!
//! `consolidate/dry_run_100k`: 100,000 memories in three types (the bench corpus's Zipf
//! texts), of which 1,000 are near-copies of others (one word added); a dry run loads every
//! memory and finds the groups by words (no model: the model-free path). The same store every
//! iteration.
//!
//! `consolidate/merge_100k`: the same, merging the 1,000 groups (2,000 versioned changes);
//! every iteration works on a fresh copy of the file (the copy and the open are setup).
//!
//! `near_dups/vectors_100k_384d`: the meaning test alone, pure: 100,000 random 384-dimension
//! unit vectors, 1,000 of them near-copies of others (cosine ≈ 0.99), through the LSH buckets
//! and the exact cosine check.
//!
//! Run: `cargo bench --no-default-features --bench consolidate`

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engram::lifecycle::near_dups::{groups, Record};
use engram::lifecycle::ConsolidateOptions;
use engram::memory::{MemoryType, RememberInput};
use engram::{Engram, OpenOptions};

// The shared corpus module: this bench uses its Zipf memories and `copy_database`.
#[allow(dead_code)]
mod corpus;

const TOTAL: usize = 100_000;
const NEAR_COPIES: usize = 1_000;
const TYPES: [MemoryType; 3] = [
    MemoryType::Gotcha,
    MemoryType::Decision,
    MemoryType::Preference,
];

fn open(rt: &tokio::runtime::Runtime, path: &Path) -> Engram {
    rt.block_on(Engram::open(OpenOptions::new(path))).unwrap()
}

/// The 100k-memory store (see the module doc).
fn template(rt: &tokio::runtime::Runtime, dir: &Path) -> PathBuf {
    let path = dir.join("template.db");
    let texts = corpus::Zipf::new().memories(TOTAL - NEAR_COPIES, 11);
    let db = open(rt, &path);
    let mut inputs: Vec<RememberInput> = texts
        .iter()
        .enumerate()
        .map(|(i, m)| RememberInput::new(TYPES[i % 3], m.content.clone()))
        .collect();
    for (i, m) in texts.iter().take(NEAR_COPIES).enumerate() {
        inputs.push(RememberInput::new(
            TYPES[i % 3],
            format!("{} again", m.content),
        ));
    }
    for chunk in inputs.chunks(1000) {
        rt.block_on(db.remember_many(chunk.to_vec())).unwrap();
    }
    path
}

fn unit_vectors(count: usize, near: usize, dims: usize) -> Vec<Record> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let mut vectors: Vec<Vec<f32>> = (0..count - near)
        .map(|_| (0..dims).map(|_| next()).collect())
        .collect();
    for i in 0..near {
        let copy: Vec<f32> = vectors[i].iter().map(|x| x + next() * 0.05).collect();
        vectors.push(copy);
    }
    vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| Record {
            partition: (i % 3) as u32,
            words: Vec::new(),
            vector: Some(v),
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let template = template(&rt, dir.path());

    let mut group = c.benchmark_group("consolidate");
    group.sample_size(10);
    {
        let db = open(&rt, &template);
        let dry = ConsolidateOptions {
            dry_run: true,
            ..ConsolidateOptions::default()
        };
        let report = rt
            .block_on(db.consolidate(&dry, &AtomicBool::new(false)))
            .unwrap();
        assert_eq!(report.scanned, TOTAL as u64);
        assert!(
            report.groups.len() >= NEAR_COPIES * 9 / 10,
            "{} groups",
            report.groups.len()
        );
        eprintln!("dry run: {} groups", report.groups.len());
        group.bench_function("dry_run_100k", |b| {
            b.iter(|| {
                rt.block_on(db.consolidate(&dry, &AtomicBool::new(false)))
                    .unwrap()
            })
        });
    }
    let mut run = 0;
    group.bench_function("merge_100k", |b| {
        b.iter_batched(
            || {
                run += 1;
                let path = dir.path().join(format!("run{run}.db"));
                corpus::copy_database(&template, &path);
                open(&rt, &path)
            },
            |db| {
                let report = rt
                    .block_on(
                        db.consolidate(&ConsolidateOptions::default(), &AtomicBool::new(false)),
                    )
                    .unwrap();
                assert!(report.merged >= (NEAR_COPIES * 9 / 10) as u64);
                db
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();

    let records = unit_vectors(TOTAL, NEAR_COPIES, 384);
    let found = groups(&records, None, Some(0.95));
    eprintln!(
        "vectors: {} of {NEAR_COPIES} near-copies found",
        found.len()
    );
    let mut group = c.benchmark_group("near_dups");
    group.sample_size(10);
    group.bench_function("vectors_100k_384d", |b| {
        b.iter(|| groups(&records, None, Some(0.95)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
