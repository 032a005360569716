//! Built-in embedder throughput: real code chunks (tokio's sources, chunked by our own AST
//! chunker, with their contextual prefixes) through all-MiniLM-L6-v2 on this machine's cores.
//!
//! Prints chunks/s for the whole set (the target: >= 50 chunks/s at <= 128 tokens on two
//! cores, baseline 25/s) and query-embedding latency, then criterion timings, among them a
//! query on one thread or split across all, alone and beside a thread keeping a core busy.
//! Then how close the query paths' vectors are to the f32 weights' (cosine, and the share of
//! the top 10 over the chunks they keep). `EMBED_BENCH_QUERIES_ONLY=1` prints only the query
//! figures. Needs the model (`engram model install`, or `ENGRAM_MODEL_DIR`); exits with a
//! notice without it.
//! Run: `cargo bench --no-default-features --bench embed`

#[path = "source_trees/mod.rs"]
mod source_trees;

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engram::embed::{
    locate, Embedder, FewTokenWeights, LocalEmbedder, LocalModelOptions, ModelFiles,
};

/// A question of 96 words, cut to the first n for the query-length sweep.
const LONG_QUESTION: &str = "Returns the bound address the address family name and port of the \
    socket as reported by the operating system when the server is listening on an ephemeral \
    port and the client asks for it again later in the session with options that name the \
    interface the protocol family and whether the socket should be reused after it closes so \
    that a restarted process can bind the same port without waiting for the kernel to release \
    it which matters for tests that start and stop servers many times in a row on one machine \
    and for supervisors";

/// The model on `threads` threads, its few-token products through `weights`.
fn load_with(files: &ModelFiles, threads: usize, weights: FewTokenWeights) -> LocalEmbedder {
    let options = LocalModelOptions {
        threads,
        few_token_weights: weights,
        ..LocalModelOptions::default()
    };
    LocalEmbedder::load(files, &options).unwrap()
}

/// The default thread count of the model.
fn all_threads() -> usize {
    LocalModelOptions::default().threads
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Prints texts embedded per second over three runs of the whole set, and their median.
fn report(model: &LocalEmbedder, what: &str, texts: &[&str]) {
    let runs: Vec<f64> = (0..3)
        .map(|_| {
            let t = Instant::now();
            model.embed(texts).unwrap();
            texts.len() as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    println!(
        "embed: {what}/s over 3 runs {runs:.1?}, median {:.1}",
        median(runs.clone())
    );
}

fn bench(c: &mut Criterion) {
    let files = match locate(None) {
        Ok(files) => files,
        Err(err) => {
            eprintln!("embed bench skipped: {err}");
            return;
        }
    };
    let model = LocalEmbedder::load(&files, &LocalModelOptions::default()).unwrap();
    let texts = source_trees::tokio_chunk_texts(512);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    if std::env::var_os("EMBED_BENCH_QUERIES_ONLY").is_some() {
        query_length_sweep(&files, &model);
        fidelity(&files, &refs);
        return;
    }
    println!(
        "embed: {} chunks of tokio, model {}, {} threads",
        refs.len(),
        model.id().key(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    model.embed(&refs[..16]).unwrap(); // warm-up
    report(&model, "chunks", &refs);
    // Every text at the full token limit: the target's stated condition (real chunks are often
    // shorter, so the corpus figure above is higher).
    let full = "fn main() { let x = compute(1, 2); println!(\"{x}\"); } ".repeat(20);
    let full_refs: Vec<&str> = (0..128).map(|_| full.as_str()).collect();
    report(&model, "128-token texts", &full_refs);

    let query = "where do we retry the connection when the server goes away";
    let mut samples: Vec<f64> = (0..50)
        .map(|_| {
            let t = Instant::now();
            model.embed(&[query]).unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    println!(
        "embed: 10-word query p50 {:.2} ms, p99 {:.2} ms",
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100]
    );

    query_length_sweep(&files, &model);
    fidelity(&files, &refs);

    let mut group = c.benchmark_group("embed");
    group.sample_size(10);
    group.throughput(Throughput::Elements(64));
    group.bench_function("64_chunks", |b| {
        b.iter(|| model.embed(&refs[..64]).unwrap())
    });
    group.finish();
    c.bench_function("embed/query", |b| b.iter(|| model.embed(&[query]).unwrap()));

    // A query's matrix products split across threads (the default) or not, with the f16 panels
    // (the default) or the f32 weights, alone and while another thread keeps a core busy, as
    // recall's keyword SQL does during the embedding.
    let variant = |threads: usize, few_token_weights: FewTokenWeights| {
        load_with(&files, threads, few_token_weights)
    };
    let all = all_threads();
    let variants = [
        ("int8_1_thread", variant(1, FewTokenWeights::Int8)),
        ("f16_1_thread", variant(1, FewTokenWeights::F16)),
        ("f16_all_threads", variant(all, FewTokenWeights::F16)),
        ("f32_1_thread", variant(1, FewTokenWeights::F32)),
        ("f32_all_threads", variant(all, FewTokenWeights::F32)),
    ];
    let mut group = c.benchmark_group("embed_query");
    for busy in [false, true] {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(!busy));
        let spinner = {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut x = 1u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        };
        let state = if busy { "other_core_busy" } else { "idle" };
        for (name, m) in &variants {
            group.bench_function(format!("{state}/{name}"), |b| {
                b.iter(|| m.embed(&[query]).unwrap())
            });
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinner.join().unwrap();
    }
    group.finish();
}

/// Query embedding by length, median of 25, through the default weights (int8 panels where the
/// CPU runs them), the f16 panels, and the f32 weights split across every core. Long questions
/// (doc sentences with URLs, pasted errors) are recall's latency tail: the query's token count,
/// not the corpus, sets their cost.
fn query_length_sweep(files: &ModelFiles, model: &LocalEmbedder) {
    let f32_all = load_with(files, all_threads(), FewTokenWeights::F32);
    let f16 = load_with(files, all_threads(), FewTokenWeights::F16);
    let words: Vec<&str> = LONG_QUESTION.split(' ').collect();
    for n in [10, 20, 30, 40, 60, 90] {
        let query = words[..n.min(words.len())].join(" ");
        let p50 = |m: &LocalEmbedder| {
            median(
                (0..25)
                    .map(|_| {
                        let t = Instant::now();
                        m.embed(&[query.as_str()]).unwrap();
                        t.elapsed().as_secs_f64() * 1e3
                    })
                    .collect(),
            )
        };
        println!(
        "embed: {n}-word query p50 {:.2} ms (f16 weights: {:.2} ms; f32 weights, all threads: {:.2} ms)",
        p50(model),
        p50(&f16),
        p50(&f32_all)
    );
    }
}

/// First sentences of tokio's `///` doc blocks (3 to 60 words): query-like texts of real length.
fn doc_sentences(limit: usize) -> Vec<String> {
    let root = source_trees::tokio_dir().expect("tokio in the cargo registry");
    let files = source_trees::rust_files(&root);
    let mut sentences = Vec::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut block = String::new();
        for line in text.lines().chain(std::iter::once("")) {
            if let Some(doc) = line.trim_start().strip_prefix("///") {
                if !doc.trim().is_empty() || !block.is_empty() {
                    block.push_str(doc.trim());
                    block.push(' ');
                }
                continue;
            }
            let first = block.split(". ").next().unwrap_or("").trim().to_owned();
            block.clear();
            let words = first.split_whitespace().count();
            if (3..=60).contains(&words) && !sentences.contains(&first) {
                sentences.push(first);
                if sentences.len() == limit {
                    return sentences;
                }
            }
        }
    }
    sentences
}

/// How far a few-token path's query vectors are from the f32 weights' (cosine: lowest, 1st
/// percentile, median), and how much of the f32 query's top 10 over `corpus` it keeps: the
/// retrieval-level cost of rounding the weights.
fn fidelity(files: &ModelFiles, corpus: &[&str]) {
    let exact = load_with(files, all_threads(), FewTokenWeights::F32);
    let queries = doc_sentences(600);
    let docs = exact.embed(corpus).unwrap();
    let top10 = |q: &[f32]| {
        let mut scored: Vec<(f32, usize)> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), i))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored
            .into_iter()
            .take(10)
            .map(|(_, i)| i)
            .collect::<Vec<_>>()
    };
    let want: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| exact.embed(&[q.as_str()]).unwrap().pop().unwrap())
        .collect();
    for kind in [FewTokenWeights::F16, FewTokenWeights::Int8] {
        let model = load_with(files, all_threads(), kind);
        let mut cosines = Vec::new();
        let mut kept = 0usize;
        for (query, want) in queries.iter().zip(&want) {
            let got = model.embed(&[query.as_str()]).unwrap().pop().unwrap();
            cosines.push(
                got.iter()
                    .zip(want)
                    .map(|(a, b)| f64::from(a * b))
                    .sum::<f64>(),
            );
            let (a, b) = (top10(want), top10(&got));
            kept += b.iter().filter(|i| a.contains(i)).count();
        }
        cosines.sort_by(f64::total_cmp);
        println!(
            "embed: {kind:?} query vectors vs f32 weights over {} doc sentences: cosine lowest {:.5}, p1 {:.5}, median {:.6}; top-10 kept {:.4}",
            queries.len(),
            cosines[0],
            cosines[cosines.len() / 100],
            cosines[cosines.len() / 2],
            kept as f64 / (10 * queries.len()) as f64
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
