//! Retrieval quality on real code (the dev evaluation): tokio's `src/` from the cargo registry,
//! indexed with every `///` and `//!` line stripped; each documented function gives one query,
//! the first sentence of its doc, whose right answer is the chunk holding the function's
//! definition line. Reports Recall@1, Recall@10 and MRR@10 per retrieval path (BM25 through
//! `search_code`, dense through `dense_search`, each 50 deep) and for their fusions (the
//! default, the seed's settings, the graph neighbourhood boost). `EVAL_GRID=1` adds the grid of
//! RRF constants, keyword weights per query kind and boost shares the defaults were chosen from.
//! The same questions then go through `recall()` with stages switched on and off (the ablation
//! table), with no recent files, with a file next to the answer's as the agent's recent file,
//! and with an unrelated one, and with the cascade.
//! Needs the model for the dense path (`engram model install`); without it only BM25 is scored.
//! Run: `cargo bench --no-default-features --bench retrieval_eval`

#[path = "source_trees/mod.rs"]
mod source_trees;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use std::collections::HashMap;

use engram::code::IndexOptions;
use engram::retrieval::fusion::{self, CandidatePath, ItemRef, RankedList};
use engram::retrieval::query_kind;
use engram::retrieval::recall::ItemContent;
use engram::retrieval::request::RecallRequest;
use engram::vector::{DenseQuery, ItemKind};
use engram::{Engram, OpenOptions};

/// Candidates each path contributes to the fusion (the pipeline's stage-1 depth).
const CANDIDATES: u32 = 50;

/// One query and where its answer is.
struct Case {
    query: String,
    path: String,
    /// The definition line in the stripped copy, 1-based.
    line: u32,
}

/// The first sentence of a doc block, without markdown decoration; `None` when too short or
/// too long to be a query someone would type.
fn first_sentence(doc: &[String]) -> Option<String> {
    let paragraph: Vec<&str> = doc
        .iter()
        .map(|l| l.trim())
        .take_while(|l| !l.is_empty())
        .collect();
    let text = paragraph.join(" ");
    let end = text
        .char_indices()
        .find(|(i, c)| *c == '.' && (i + 1 == text.len() || text[i + 1..].starts_with(' ')))
        .map_or(text.len(), |(i, _)| i);
    let sentence: String = text[..end]
        .chars()
        .filter(|c| !matches!(c, '`' | '[' | ']' | '*'))
        .collect();
    let words = sentence.split_whitespace().count();
    (4..=30).contains(&words).then_some(sentence)
}

/// Writes `source` without doc lines to `out` and returns the cases it holds.
fn strip_and_collect(rel: &str, source: &str, out: &Path) -> Vec<Case> {
    let fn_line = regex::Regex::new(
        r#"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"[^"]*"\s+)?fn\s+\w+"#,
    )
    .unwrap();
    let mut kept = Vec::new();
    let mut cases = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    for line in source.lines() {
        let trimmed = line.trim_start();
        if let Some(text) = trimmed.strip_prefix("///") {
            doc.push(text.to_owned());
            continue;
        }
        if trimmed.starts_with("//!") {
            continue;
        }
        kept.push(line);
        if trimmed.starts_with("#[") {
            continue; // attributes between the doc and the item
        }
        if fn_line.is_match(line) && !doc.is_empty() {
            if let Some(query) = first_sentence(&doc) {
                cases.push(Case {
                    query,
                    path: rel.to_owned(),
                    line: kept.len() as u32,
                });
            }
        }
        doc.clear();
    }
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(out, kept.join("\n")).unwrap();
    cases
}

#[derive(Default)]
struct Score {
    n: usize,
    at1: usize,
    at10: usize,
    reciprocal: f64,
}

impl Score {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(rank) = rank {
            self.at1 += usize::from(rank == 1);
            self.at10 += usize::from(rank <= 10);
            self.reciprocal += 1.0 / rank as f64;
        }
    }

    fn row(&self, name: &str) -> String {
        let n = self.n.max(1) as f64;
        format!(
            "| {name} | {:.3} | {:.3} | {:.3} |",
            self.at1 as f64 / n,
            self.at10 as f64 / n,
            self.reciprocal / n
        )
    }
}

fn rank_of(case: &Case, hits: &[(String, u32, u32)]) -> Option<usize> {
    hits.iter()
        .position(|(path, start, end)| *path == case.path && (*start..=*end).contains(&case.line))
        .map(|i| i + 1)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` probes every bench
    }
    let (_, tokio_root) = source_trees::corpora()
        .into_iter()
        .find(|(name, _)| name == "rust")
        .expect("tokio in the cargo registry");
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    let mut cases = Vec::new();
    let mut files: Vec<_> = ignore::Walk::new(tokio_root.join("src"))
        .flatten()
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    for path in files {
        let rel = path
            .strip_prefix(&tokio_root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let Ok(source) = std::fs::read_to_string(&path) else {
            continue;
        };
        cases.extend(strip_and_collect(&rel, &source, &repo.join(&rel)));
    }
    let mut options = OpenOptions::new(work.path().join("eval.db"));
    options.project_root = Some(repo.clone());
    let e = Engram::open(options).await.unwrap();
    let summary = e
        .index(
            &IndexOptions::default(),
            &|_| {},
            &Arc::new(AtomicBool::new(false)),
        )
        .await
        .unwrap();
    println!(
        "eval: tokio src, docs stripped: {} files, {} chunks, {} queries",
        summary.files_indexed,
        summary.chunks,
        cases.len()
    );
    let dense = match e.embed_pending(|_| {}, &AtomicBool::new(false)).await {
        Ok(report) => {
            println!(
                "eval: {} chunks embedded with {}",
                report.chunks,
                report.model.key()
            );
            true
        }
        Err(err) => {
            println!("eval: dense path skipped: {err}");
            false
        }
    };
    let mut scores: Vec<(&str, Score)> = [
        "BM25 (search_code)",
        "dense (all-MiniLM-L6-v2, exact)",
        "hybrid (default): RRF k=10, keyword-led weights by query kind",
        "hybrid, the seed's settings: RRF k=60, its weights by query kind",
        "hybrid (default) + graph neighbourhood boost (share 0.1)",
    ]
    .into_iter()
    .map(|name| (name, Score::default()))
    .collect();
    // The same questions through `recall()`, one row per set of stages (the ablation table).
    let recall_rows = [
        "recall: keyword stage only",
        "recall: dense stage only",
        "recall: default stages (keyword + dense; no recent files, so no graph candidates)",
        "recall: default + graph neighbourhood boost",
        "recall: default + recentFiles = a file one graph edge from the answer's (simulated agent)",
        "recall: default + recentFiles = an unrelated file (control)",
        "recall: default + cascade (walk from the top 5 hits)",
        "recall: default + cascade + recentFiles = next door",
    ];
    let mut recall_scores: Vec<Score> = recall_rows.iter().map(|_| Score::default()).collect();
    let all_files: Vec<String> = {
        let mut files: Vec<String> = cases.iter().map(|c| c.path.clone()).collect();
        files.sort();
        files.dedup();
        files
    };
    let mut kinds = std::collections::BTreeMap::new();
    let mut grid: std::collections::BTreeMap<String, Score> = Default::default();
    // Where each chunk is, for scoring fused lists of ids.
    let mut spans: HashMap<i64, (String, u32, u32)> = HashMap::new();
    for case in &cases {
        let keyword: Vec<i64> = e
            .search_code(&case.query, CANDIDATES)
            .await
            .unwrap()
            .into_iter()
            .map(|h| {
                let c = h.chunk;
                spans.insert(c.id, (c.path, c.start_line, c.end_line));
                c.id
            })
            .collect();
        let semantic: Vec<i64> = if dense {
            let query = DenseQuery {
                limit: CANDIDATES as usize,
                kinds: vec![ItemKind::Chunk],
                ..DenseQuery::default()
            };
            e.dense_search(&case.query, query)
                .await
                .unwrap()
                .into_iter()
                .map(|h| {
                    let id = h.chunk_id.unwrap();
                    spans.insert(
                        id,
                        (h.path.unwrap(), h.start_line.unwrap(), h.end_line.unwrap()),
                    );
                    id
                })
                .collect()
        } else {
            Vec::new()
        };
        let kind = query_kind::detect(&case.query, &[]);
        *kinds.entry(kind.as_str()).or_insert(0) += 1;
        let lists = |keyword_weight: f64, dense_weight: f64| {
            let as_items = |ids: &[i64]| ids.iter().map(|&id| ItemRef::Chunk(id)).collect();
            vec![
                RankedList {
                    path: CandidatePath::Keyword,
                    weight: keyword_weight,
                    items: as_items(&keyword),
                },
                RankedList {
                    path: CandidatePath::Dense,
                    weight: dense_weight,
                    items: as_items(&semantic),
                },
            ]
        };
        let weights = kind.path_weights();
        let by_kind = fusion::weighted_rrf(&lists(weights.keyword, weights.dense));
        // The seed's rows (identifier / semantic / structural), keyword:dense without a graph path.
        let (seed_keyword, seed_dense) = match kind {
            query_kind::QueryKind::Identifier => (0.5, 0.2),
            query_kind::QueryKind::Semantic => (0.25, 0.5),
            query_kind::QueryKind::Structural => (0.25, 0.15),
        };
        let seed = fusion::weighted_rrf_with(&lists(seed_keyword, seed_dense), 60.0);
        let mut boosted = by_kind.clone();
        let chunk_file = |item: &ItemRef| match item {
            ItemRef::Chunk(id) => spans[id].0.clone(),
            ItemRef::Memory(_) => unreachable!("chunks only"),
        };
        let top_files: Vec<String> = boosted
            .iter()
            .take(10)
            .map(|f| chunk_file(&f.item))
            .collect();
        let neighbours = e.file_neighbours(&top_files).await.unwrap();
        fusion::neighbourhood_boost(&mut boosted, |top, candidate| {
            let (top, candidate) = (chunk_file(top), chunk_file(candidate));
            neighbours.get(&top).is_some_and(|n| n.contains(&candidate))
        });
        let ids = |fused: &[fusion::Fused]| -> Vec<(String, u32, u32)> {
            fused
                .iter()
                .take(10)
                .map(|f| match &f.item {
                    ItemRef::Chunk(id) => spans[id].clone(),
                    ItemRef::Memory(_) => unreachable!("chunks only"),
                })
                .collect()
        };
        let top10 = |list: &[i64]| -> Vec<(String, u32, u32)> {
            list.iter().take(10).map(|id| spans[id].clone()).collect()
        };
        let ranked = [
            top10(&keyword),
            top10(&semantic),
            ids(&by_kind),
            ids(&seed),
            ids(&boosted),
        ];
        if std::env::var_os("EVAL_GRID").is_some() {
            for k in [5.0, 10.0] {
                for w in [0.5, 0.6, 0.7, 0.8, 0.9] {
                    let fused = fusion::weighted_rrf_with(&lists(w, 1.0 - w), k);
                    let hit = rank_of(case, &ids(&fused));
                    grid.entry(format!("{} rrf k={k} keyword={w}", kind.as_str()))
                        .or_default()
                        .add(hit);
                    grid.entry(format!("all rrf k={k} keyword={w}"))
                        .or_default()
                        .add(hit);
                }
            }
            let base = fusion::weighted_rrf_with(&lists(0.7, 0.3), 10.0);
            for share in [0.05, 0.1, 0.2] {
                for cross_file_only in [false, true] {
                    let mut b = base.clone();
                    fusion::neighbourhood_boost_with(&mut b, share, |top, candidate| {
                        let (top, candidate) = (chunk_file(top), chunk_file(candidate));
                        (!cross_file_only && top == candidate)
                            || neighbours.get(&top).is_some_and(|n| n.contains(&candidate))
                    });
                    grid.entry(format!(
                        "all k=10 kw=0.7 boost {share} cross_file_only={cross_file_only}"
                    ))
                    .or_default()
                    .add(rank_of(case, &ids(&b)));
                }
            }
        }
        let next_door = e
            .file_neighbours(std::slice::from_ref(&case.path))
            .await
            .unwrap()
            .remove(&case.path)
            .and_then(|n| n.into_iter().next());
        let unrelated =
            all_files[(case.line as usize * 7919 + case.query.len()) % all_files.len()].clone();
        for (row, score) in recall_scores.iter_mut().enumerate() {
            let mut request = RecallRequest::new(case.query.clone());
            request.filters.kinds = vec![ItemKind::Chunk];
            request.limit = Some(10);
            request.stages.packing = false;
            match row {
                0 => request.stages.dense = false,
                1 => request.stages.keyword = false,
                3 => request.stages.boost = true,
                4 => request.recent_files = next_door.iter().cloned().collect(),
                5 => request.recent_files = vec![unrelated.clone()],
                6 => request.stages.cascade = true,
                7 => {
                    request.stages.cascade = true;
                    request.recent_files = next_door.iter().cloned().collect();
                }
                _ => {}
            }
            if !dense && row == 1 {
                continue;
            }
            let recall = e.recall(request).await.unwrap();
            let hits: Vec<(String, u32, u32)> = recall
                .items
                .iter()
                .filter_map(|i| match &i.content {
                    ItemContent::Chunk(c) => Some((c.path.clone(), c.start_line, c.end_line)),
                    ItemContent::Memory(_) => None,
                })
                .collect();
            score.add(rank_of(case, &hits));
        }
        for ((_, score), hits) in scores.iter_mut().zip(ranked) {
            if !hits.is_empty() || dense {
                score.add(rank_of(case, &hits));
            }
        }
    }
    println!("eval: query kinds {kinds:?}");
    for (name, score) in &grid {
        println!("{}", score.row(name));
    }
    println!("| path | Recall@1 | Recall@10 | MRR@10 |\n| --- | --- | --- | --- |");
    for (name, score) in &scores {
        if dense || *name == "BM25 (search_code)" {
            println!("{}", score.row(name));
        }
    }
    for (name, score) in recall_rows.iter().zip(&recall_scores) {
        if score.n > 0 {
            println!("{}", score.row(name));
        }
    }
}
