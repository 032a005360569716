//! Exact top-10 vector search in the in-process index at 10k, 50k and 200k 384-d vectors: p50/p99
//! per query, vectors rescored per query, memory per vector; then criterion timings.
//!
//! The vectors are built from real all-MiniLM-L6-v2 embeddings of tokio's chunks (each stored
//! vector mixes two real chunk vectors plus noise, so the score distribution is that of real
//! code, not of random vectors), and the queries are real query embeddings. Without the model
//! installed it falls back to clustered random vectors and says so.
//! Run: `cargo bench --no-default-features --bench vector`

#[path = "source_trees/mod.rs"]
mod source_trees;

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use engram::embed::{locate, Embedder, LocalEmbedder, LocalModelOptions};
use engram::vector::VectorIndex;

const SIZES: [usize; 3] = [10_000, 50_000, 200_000];
const QUERIES: [&str; 12] = [
    "spawn a task on the runtime",
    "read bytes from a tcp stream asynchronously",
    "timeout a future after a duration",
    "mpsc channel send and receive",
    "mutex lock guard across await",
    "shutdown the runtime and wait for tasks",
    "parse a socket address",
    "interval ticker missed tick behaviour",
    "waker registration for io readiness",
    "blocking thread pool for sync code",
    "broadcast channel lagged receiver",
    "file system read to string",
];

struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
    fn below(&mut self, n: usize) -> usize {
        ((self.next() + 0.5) * n as f32) as usize % n
    }
}

/// (base vectors, query vectors, what they are).
fn base_vectors(dims: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>, &'static str) {
    if let Ok(files) = locate(None) {
        let model = LocalEmbedder::load(&files, &LocalModelOptions::default()).unwrap();
        let texts = source_trees::tokio_chunk_texts(1500);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let base = model.embed(&refs).unwrap();
        let queries = model.embed(&QUERIES).unwrap();
        return (base, queries, "mixes of real MiniLM chunk vectors");
    }
    let mut rng = Xorshift(42);
    let centres: Vec<Vec<f32>> = (0..200)
        .map(|_| (0..dims).map(|_| rng.next()).collect())
        .collect();
    let queries = (0..QUERIES.len()).map(|i| centres[i * 7].clone()).collect();
    (
        centres,
        queries,
        "clustered random vectors (no model installed)",
    )
}

fn build(n: usize, base: &[Vec<f32>], dims: usize) -> VectorIndex {
    let mut rng = Xorshift(7);
    let mut index = VectorIndex::new(dims);
    for id in 0..n {
        let (a, b) = (&base[id % base.len()], &base[rng.below(base.len())]);
        let v: Vec<f32> = a
            .iter()
            .zip(b)
            .map(|(x, y)| x + 0.3 * y + 0.02 * rng.next())
            .collect();
        index.upsert(id as i64, &v).unwrap();
    }
    index
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn bench(c: &mut Criterion) {
    let dims = 384;
    let (base, queries, what) = base_vectors(dims);
    println!(
        "vector: {what}, {} base vectors, {} queries",
        base.len(),
        queries.len()
    );
    let mut group = c.benchmark_group("vector_search_top10");
    for n in SIZES {
        let started = Instant::now();
        let index = build(n, &base, dims);
        let build_s = started.elapsed().as_secs_f64();
        let mut times = Vec::new();
        let mut rescored = Vec::new();
        for round in 0..40 {
            for q in &queries {
                let t = Instant::now();
                let outcome = index.search(q, 10, None).unwrap();
                if round > 0 {
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                    rescored.push(outcome.rescored as f64);
                }
            }
        }
        times.sort_by(f64::total_cmp);
        rescored.sort_by(f64::total_cmp);
        println!(
            "vector: n={n} top-10 p50 {:.3} ms p99 {:.3} ms; rescored p50 {} max {}; {} B/vector ({:.0} MB); built in {build_s:.2} s",
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            percentile(&rescored, 0.5),
            rescored.last().unwrap(),
            index.bytes_per_vector(),
            (index.bytes_per_vector() * n) as f64 / 1e6,
        );
        group.bench_function(format!("{n}"), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                index.search(&queries[i % queries.len()], 10, None).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
