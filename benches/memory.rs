//! Criterion benches of the core memory operations (no JS boundary): remember one at a time,
//! remember in batches, and keyword search over 10,000 memories with 1-5 word queries.
//!
//! Run: `cargo bench --no-default-features --bench memory`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use engram::memory::{MemoryType, RememberInput, SearchOptions};
use engram::{Engram, OpenOptions};

const WORDS: &[&str] = &[
    "auth",
    "token",
    "refresh",
    "session",
    "cookie",
    "database",
    "migration",
    "schema",
    "index",
    "query",
    "cache",
    "redis",
    "queue",
    "worker",
    "thread",
    "pool",
    "connection",
    "timeout",
    "retry",
    "backoff",
    "error",
    "panic",
    "exception",
    "stack",
    "trace",
    "log",
    "metric",
    "deploy",
    "docker",
    "container",
    "config",
    "env",
    "variable",
    "build",
    "compile",
    "test",
    "fixture",
    "route",
    "handler",
    "middleware",
    "request",
    "response",
    "header",
    "json",
    "parse",
    "stream",
    "buffer",
    "file",
    "path",
    "module",
    "import",
    "export",
    "function",
    "class",
    "method",
    "interface",
    "type",
    "generic",
    "trait",
    "async",
    "await",
    "promise",
    "lock",
    "mutex",
    "race",
    "deadlock",
    "transaction",
    "commit",
    "rollback",
    "replica",
    "sync",
    "offline",
    "network",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as usize
    }
    fn sentence(&mut self, min: usize, max: usize) -> String {
        let n = min + self.next() % (max - min + 1);
        (0..n)
            .map(|_| WORDS[self.next() % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn input(rng: &mut Rng, i: usize) -> RememberInput {
    let mut m = RememberInput::new(
        MemoryType::Gotcha,
        format!("{} (#{i})", rng.sentence(8, 24)),
    );
    m.tags = vec![WORDS[rng.next() % WORDS.len()].to_owned()];
    m
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
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut counter = 0usize;

    c.bench_function("remember/single", |b| {
        b.iter_batched(
            || {
                counter += 1;
                input(&mut rng, counter)
            },
            |m| rt.block_on(db.remember(m)).unwrap(),
            BatchSize::SmallInput,
        )
    });

    let mut group = c.benchmark_group("remember_many");
    group.throughput(criterion::Throughput::Elements(1000));
    group.sample_size(20);
    group.bench_function("batch_1000", |b| {
        b.iter_batched(
            || {
                (0..1000)
                    .map(|_| {
                        counter += 1;
                        input(&mut rng, counter)
                    })
                    .collect::<Vec<_>>()
            },
            |batch| rt.block_on(db.remember_many(batch)).unwrap(),
            BatchSize::LargeInput,
        )
    });
    group.finish();

    // A separate project holding exactly 10,000 memories.
    let mut opts = OpenOptions::new(dir.path().join("bench.db"));
    opts.project_id = Some("ten-k".into());
    let ten = rt.block_on(Engram::open(opts)).unwrap();
    for chunk in 0..10 {
        let batch = (0..1000)
            .map(|i| input(&mut rng, chunk * 1000 + i))
            .collect();
        rt.block_on(ten.remember_many(batch)).unwrap();
    }
    let options = SearchOptions::default();
    for words in [1usize, 3, 5] {
        let queries: Vec<String> = (0..256).map(|_| rng.sentence(words, words)).collect();
        let mut q = 0;
        c.bench_function(&format!("search_10k/{words}_words"), |b| {
            b.iter(|| {
                q = (q + 1) % queries.len();
                black_box(rt.block_on(ten.search(&queries[q], &options)).unwrap())
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
