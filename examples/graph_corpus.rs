//! Indexes a directory into a temporary database and reports the knowledge graph it built:
//! index time, graph sync, node/edge/closure counts and impact latency over every file.
//!
//! Run: `cargo run --release --no-default-features --example graph_corpus -- <dir> [depth]`

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use engram::code::indexer::IndexOptions;
use engram::graph::ImpactOptions;
use engram::{EngineOptions, Engram, OpenOptions};

#[tokio::main]
async fn main() -> engram::Result<()> {
    let mut args = std::env::args().skip(1);
    let root = args
        .next()
        .expect("usage: graph_corpus <dir> [closure depth]");
    let depth: u32 = args.next().map_or(4, |d| d.parse().expect("depth"));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(root.clone().into());
    options.engine = EngineOptions {
        closure_depth: depth,
        ..EngineOptions::default()
    };
    let e = Engram::open(options).await?;
    let started = Instant::now();
    let summary = e
        .index(
            &IndexOptions::default(),
            &|_| {},
            &Arc::new(AtomicBool::new(false)),
        )
        .await?;
    println!(
        "indexed {} files, {} lines, {} symbols, {} refs in {:.2?} (closure depth {depth})",
        summary.files_indexed,
        summary.lines,
        summary.symbols,
        summary.references,
        started.elapsed()
    );
    println!("graph sync: {:?}", summary.graph);
    let stats = e.graph_stats().await?;
    println!("{stats:?}");

    let files = e.node_keys(Some("file"), Some(1), 100_000).await?;
    // The answer size of PERFORMANCE's row (the defaults until 2026-11-29).
    let answer_size = ImpactOptions {
        limit: 500,
        memory_limit: 100,
        ..ImpactOptions::default()
    };
    let mut times = Vec::with_capacity(files.len());
    let mut affected = 0usize;
    for file in &files {
        let t = Instant::now();
        let impact = e.impact(file, &answer_size).await?;
        times.push(t.elapsed());
        affected += impact.affected.len();
    }
    times.sort();
    if !times.is_empty() {
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        println!(
            "impact over {} files: p50 {:?}, p99 {:?}, max {:?}, mean affected {:.1}",
            times.len(),
            at(0.5),
            at(0.99),
            times[times.len() - 1],
            affected as f64 / times.len() as f64
        );
    }
    Ok(())
}
