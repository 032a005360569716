//! Retrieval quality on real code (the dev evaluation): tokio's `src/` from the cargo registry,
//! indexed with every `///` and `//!` line stripped; each documented function gives one query,
//! the first sentence of its doc, whose right answer is the chunk holding the function's
//! definition line. Reports Recall@1, Recall@10 and MRR@10 per retrieval path (BM25 through
//! `search_code`, dense through `dense_search`), the table the retrieval issue extends with the
//! hybrid paths.
//! Needs the model for the dense path (`engram model install`); without it only BM25 is scored.
//! Run: `cargo bench --no-default-features --bench retrieval_eval`

#[path = "source_trees/mod.rs"]
mod source_trees;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use engram::code::IndexOptions;
use engram::vector::{DenseQuery, ItemKind};
use engram::{Engram, OpenOptions};

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
    let (mut bm25, mut dense_score) = (Score::default(), Score::default());
    for case in &cases {
        let hits: Vec<_> = e
            .search_code(&case.query, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|h| (h.chunk.path, h.chunk.start_line, h.chunk.end_line))
            .collect();
        bm25.add(rank_of(case, &hits));
        if dense {
            let query = DenseQuery {
                limit: 10,
                kinds: vec![ItemKind::Chunk],
                ..DenseQuery::default()
            };
            let hits: Vec<_> = e
                .dense_search(&case.query, query)
                .await
                .unwrap()
                .into_iter()
                .map(|h| (h.path.unwrap(), h.start_line.unwrap(), h.end_line.unwrap()))
                .collect();
            dense_score.add(rank_of(case, &hits));
        }
    }
    println!("| path | Recall@1 | Recall@10 | MRR@10 |\n| --- | --- | --- | --- |");
    println!("{}", bm25.row("BM25 (search_code)"));
    if dense {
        println!("{}", dense_score.row("dense (all-MiniLM-L6-v2, exact)"));
    }
}
