//! Criterion benches of the core memory operations (no JS boundary): remember one at a time
//! (uniform stress corpus, then the realistic one), remember in batches, and keyword search
//! over 10,000 memories with 1-5 word queries on the realistic Zipf corpus and the uniform
//! stress corpus (see `corpus/mod.rs`).
//!
//! Run: `cargo bench --no-default-features --bench memory`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engram::memory::{MemoryType, RememberInput, SearchOptions};
use engram::{Engram, OpenOptions};

mod corpus;

fn input(m: &corpus::Memory) -> RememberInput {
    let mut input = RememberInput::new(MemoryType::Gotcha, m.content.clone());
    input.tags = vec![m.tag.clone()];
    input.related_files = vec![m.file.clone()];
    input
}

/// Opens `file` in `dir` as a project holding exactly `corpus`.
fn load(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    file: &str,
    corpus: &[corpus::Memory],
) -> Engram {
    let db = rt
        .block_on(Engram::open(OpenOptions::new(dir.join(file))))
        .unwrap();
    for chunk in corpus.chunks(1000) {
        rt.block_on(db.remember_many(chunk.iter().map(input).collect()))
            .unwrap();
    }
    db
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = rt
        .block_on(Engram::open(OpenOptions::new(dir.path().join("bench.db"))))
        .unwrap();
    let writes = corpus::uniform_memories(60_000, 1);
    let mut next = writes.iter().cycle().enumerate().map(|(i, m)| {
        // Unique content per call: a repeat would be a dedup reinforce, not an insert.
        let mut input = input(m);
        input.content = format!("{} [{i}]", input.content);
        input
    });

    c.bench_function("remember/single", |b| {
        b.iter_batched(
            || next.next().unwrap(),
            |m| rt.block_on(db.remember(m)).unwrap(),
            BatchSize::SmallInput,
        )
    });

    let mut group = c.benchmark_group("remember_many");
    group.throughput(criterion::Throughput::Elements(1000));
    group.sample_size(20);
    group.bench_function("batch_1000", |b| {
        b.iter_batched(
            || next.by_ref().take(1000).collect::<Vec<_>>(),
            |batch| rt.block_on(db.remember_many(batch)).unwrap(),
            BatchSize::LargeInput,
        )
    });
    group.finish();

    // Search over exactly 10,000 memories, each corpus in its own file.
    let zipf = corpus::Zipf::new();
    let zipf_memories = zipf.memories(10_000, 3);
    let zipf_queries = zipf.queries(&zipf_memories, 2000, 99);
    let realistic = load(&rt, dir.path(), "zipf.db", &zipf_memories);
    let stress = load(
        &rt,
        dir.path(),
        "uniform.db",
        &corpus::uniform_memories(10_000, 3),
    );
    let options = SearchOptions::default();
    for words in 1..=5usize {
        let queries: Vec<&String> = zipf_queries
            .iter()
            .filter(|q| q.split(' ').count() == words)
            .collect();
        let mut q = 0;
        c.bench_function(&format!("search_10k_zipf/{words}_words"), |b| {
            b.iter(|| {
                q = (q + 1) % queries.len();
                black_box(rt.block_on(realistic.search(queries[q], &options)).unwrap())
            })
        });
    }
    let stress_queries = corpus::uniform_queries(2000, 99);
    let mut q = 0;
    c.bench_function("search_10k_uniform_stress/1-5_words", |b| {
        b.iter(|| {
            q = (q + 1) % stress_queries.len();
            black_box(
                rt.block_on(stress.search(&stress_queries[q], &options))
                    .unwrap(),
            )
        })
    });

    // One at a time into the realistic file (10,000 memories and growing): the target's corpus,
    // where the write-time contradiction scan finds few keyword matches, unlike the uniform
    // stress corpus of `remember/single`. Last, so that the search benches see 10,000.
    let zipf_corpus = zipf.memories(60_000, 4);
    let mut zipf_writes = zipf_corpus.iter().cycle().enumerate().map(|(i, m)| {
        // Unique content per call, however long the bench runs.
        let mut input = input(m);
        input.content = format!("{} [{i}]", input.content);
        input
    });
    c.bench_function("remember/single_zipf", |b| {
        b.iter_batched(
            || zipf_writes.next().unwrap(),
            |m| rt.block_on(realistic.remember(m)).unwrap(),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
