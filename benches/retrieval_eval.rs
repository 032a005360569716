//! Retrieval quality on dev sets of several kinds, through `recall()` (the dev evaluation):
//!
//! - `<language>-doc`: the first sentence of a function's doc comment -> the chunk holding its
//!   definition, in a copy of a real tree with its docs stripped (Rust: tokio; TypeScript:
//!   `@types/node` and `zod`; Go: part of its standard library; Python: networkx), see
//!   `eval/code_sets.rs`;
//! - `<language>-blind`: the same sentences with identifiers and the target's own name removed;
//! - `python-questions`: questions as a person types them about networkx functions, written
//!   by hand (`benches/fixtures/python_questions.tsv`), on the python tree;
//! - `memory`: questions over agent memories, answered by one to three of them, among
//!   thousands of distractors (`eval/memory_set.rs`).
//!
//! Every set runs through the same rows of stage switches and prints Recall@1, Recall@10 and
//! MRR@10 (of the first right item; for the memory set also all-evidence@10, the share of
//! questions with every answering memory in the top 10) in one table, then the default's
//! latency per set. `EVAL_QUERIES` caps the queries per set (default 500, an even sample);
//! `EVAL_MAX_TOKENS=n` embeds with the built-in model cut at `n` tokens instead of 128 (its
//! vectors are kept beside the default's, under the model's other identity);
//! `EVAL_QUERY_WEIGHTS=f32|f16|int8` picks the weights queries (inputs of at most 128 tokens)
//! run through, for comparing them (one model identity: stored vectors are reused).
//! `EVAL_ONLY=python,memory` runs only those groups (languages and `memory`; `sets.json` then
//! holds only them).
//! `EVAL_DUMP=path` writes one JSON line per query with the default's top 100 and each item's path
//! ranks, similarity and BM25 score, for studying fusion offline. Every set's queries and answers
//! go to `target/retrieval-eval/sets.json`, which `benches/js/seed_eval.mjs` reads to run the
//! baselines (plain FTS5 BM25, the seed's stack) on the same queries (`EVAL_SETS_ONLY=1` stops
//! after writing it). The code trees, their databases
//! and vectors stay in `target/retrieval-eval/`, so a rerun re-embeds no code that did not
//! change; the memory set is written and embedded afresh each run.
//! Needs the model (`engram model install`); `scripts/eval.sh` fetches the Go sources and
//! networkx and runs this. Run: `npm run eval`, or `cargo bench --no-default-features --bench
//! retrieval_eval`.

#[path = "eval/code_sets.rs"]
mod code_sets;
#[path = "eval/memory_set.rs"]
mod memory_set;
#[path = "source_trees/mod.rs"]
mod source_trees;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use engram::code::IndexOptions;
use engram::embed::local::{FewTokenWeights, LocalModelOptions};
use engram::embed::service::EmbeddingProvider;
use engram::memory::{MemoryType, RememberInput};
use engram::retrieval::recall::{ItemContent, Recall};
use engram::retrieval::request::RecallRequest;
use engram::vector::ItemKind;
use engram::{Engram, OpenOptions};

/// A question and how to tell its right items.
struct Query {
    text: String,
    answer: Answer,
    /// For code sets: a file one graph edge from the answer's, found before the rows run.
    next_door: Option<String>,
}

enum Answer {
    /// The chunk of `path` holding `line`, where `name` is defined.
    Definition {
        path: String,
        line: u32,
        name: String,
    },
    /// Every one of these memories.
    Memories(Vec<String>),
}

impl Answer {
    fn matches(&self, content: &ItemContent) -> bool {
        match (self, content) {
            (Answer::Definition { path, line, .. }, ItemContent::Chunk(c)) => {
                c.path == *path && (c.start_line..=c.end_line).contains(line)
            }
            (Answer::Memories(ids), ItemContent::Memory(m)) => ids.contains(&m.id),
            _ => false,
        }
    }

    fn needed(&self) -> usize {
        match self {
            Answer::Definition { .. } => 1,
            Answer::Memories(ids) => ids.len(),
        }
    }
}

/// The stage switches every set runs through.
#[derive(Clone, Copy, PartialEq)]
enum Row {
    Keyword,
    Dense,
    Default,
    NextDoor,
    Cascade,
}

const ROWS: [(Row, &str); 5] = [
    (Row::Keyword, "keyword stage only"),
    (Row::Dense, "dense stage only"),
    (Row::Default, "default"),
    (Row::NextDoor, "default + recentFiles next door"),
    (Row::Cascade, "default + cascade"),
];

#[derive(Default, Clone)]
struct Score {
    n: usize,
    at1: usize,
    at10: usize,
    all10: usize,
    reciprocal: f64,
}

impl Score {
    fn add(&mut self, first: Option<usize>, all_found: bool) {
        self.n += 1;
        if let Some(rank) = first {
            self.at1 += usize::from(rank == 1);
            self.at10 += usize::from(rank <= 10);
            self.reciprocal += if rank <= 10 { 1.0 / rank as f64 } else { 0.0 };
        }
        self.all10 += usize::from(all_found);
    }

    fn cells(&self) -> String {
        let n = self.n.max(1) as f64;
        format!(
            "{:.3} | {:.3} | {:.3} | {:.3}",
            self.at1 as f64 / n,
            self.at10 as f64 / n,
            self.reciprocal / n,
            self.all10 as f64 / n
        )
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// An even sample of at most `cap` items, in their order.
fn sample<T>(items: Vec<T>, cap: usize) -> Vec<T> {
    if items.len() <= cap {
        return items;
    }
    let step = items.len() as f64 / cap as f64;
    let mut out = Vec::with_capacity(cap);
    for (i, item) in items.into_iter().enumerate() {
        if (out.len() as f64) * step <= i as f64 && out.len() < cap {
            out.push(item);
        }
    }
    out
}

async fn open(dir: &Path, root: &Path) -> Engram {
    std::fs::create_dir_all(root).unwrap();
    let mut options = OpenOptions::new(dir.join("eval.db"));
    options.project_root = Some(root.to_path_buf());
    let max_tokens = std::env::var("EVAL_MAX_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok());
    let query_weights = std::env::var("EVAL_QUERY_WEIGHTS").ok().map(|v| {
        FewTokenWeights::from_name(&v)
            .unwrap_or_else(|| panic!("EVAL_QUERY_WEIGHTS={v}: expected f32, f16 or int8"))
    });
    if max_tokens.is_some() || query_weights.is_some() {
        let defaults = LocalModelOptions::default();
        options.engine.embeddings = EmbeddingProvider::Local {
            model_dir: None,
            options: LocalModelOptions {
                max_tokens: max_tokens.unwrap_or(defaults.max_tokens),
                few_token_weights: query_weights.unwrap_or(defaults.few_token_weights),
                ..defaults
            },
        };
    }
    Engram::open(options).await.unwrap()
}

async fn embed(e: &Engram, what: &str) -> bool {
    match e.embed_pending(|_| {}, &AtomicBool::new(false)).await {
        Ok(report) => {
            println!(
                "eval: {what}: {} chunks and {} memories embedded with {}",
                report.chunks,
                report.memories,
                report.model.key()
            );
            true
        }
        Err(err) => {
            println!("eval: {what}: dense path skipped: {err}");
            false
        }
    }
}

/// The code sets of one language: the tree copied without docs and indexed; its doc and
/// name-blind queries.
async fn code_sets(
    corpus: &code_sets::CodeCorpus,
    work: &Path,
    cap: usize,
) -> (Engram, Vec<(String, Vec<Query>)>) {
    let dir = work.join(corpus.language);
    let repo = dir.join("repo");
    let cases = corpus.materialise(&repo);
    let e = open(&dir, &repo).await;
    let started = Instant::now();
    let summary = e
        .index(
            &IndexOptions::default(),
            &|_| {},
            &Arc::new(AtomicBool::new(false)),
        )
        .await
        .unwrap();
    println!(
        "eval: {}: {} files indexed ({} unchanged) in {:.1} s, {} chunks, {} documented functions",
        corpus.language,
        summary.files_indexed,
        summary.files_unchanged,
        started.elapsed().as_secs_f64(),
        summary.chunks,
        cases.len()
    );
    embed(&e, corpus.language).await;
    let cases = sample(cases, cap);
    let mut doc = Vec::new();
    let mut blind = Vec::new();
    for case in cases {
        let next_door = next_door_of(&e, &case.path).await;
        let answer = || Answer::Definition {
            path: case.path.clone(),
            line: case.line,
            name: case.name.clone(),
        };
        if let Some(text) = code_sets::name_blind(&case.query, &case.name) {
            blind.push(Query {
                text,
                answer: answer(),
                next_door: next_door.clone(),
            });
        }
        doc.push(Query {
            text: case.query.clone(),
            answer: answer(),
            next_door,
        });
    }
    let mut sets = vec![
        (format!("{}-doc", corpus.language), doc),
        (format!("{}-blind", corpus.language), blind),
    ];
    if corpus.language == "python" {
        let mut questions = Vec::new();
        for case in code_sets::python_questions(&repo) {
            questions.push(Query {
                next_door: next_door_of(&e, &case.path).await,
                text: case.query,
                answer: Answer::Definition {
                    path: case.path,
                    line: case.line,
                    name: case.name,
                },
            });
        }
        sets.push(("python-questions".to_owned(), questions));
    }
    (e, sets)
}

/// A file one graph edge from `path` (the "next door" row's recent file), if any.
async fn next_door_of(e: &Engram, path: &str) -> Option<String> {
    e.file_neighbours(&[path.to_owned()])
        .await
        .unwrap()
        .remove(path)
        .and_then(|n| n.into_iter().next())
}

/// The memory set: its memories and the distractors remembered into a fresh database.
async fn memory_sets(work: &Path, cap: usize) -> Option<MemoryGroup> {
    let set = memory_set::load()?;
    let dir = work.join("memory");
    let _ = std::fs::remove_dir_all(&dir);
    let e = open(&dir, &dir.join("project")).await;
    let mut ids = std::collections::HashMap::new();
    let inputs: Vec<RememberInput> = set
        .memories
        .iter()
        .map(|m| {
            let mut input = RememberInput::new(
                MemoryType::parse(&m.memory_type).unwrap(),
                m.content.clone(),
            );
            input.related_files = m.files.clone();
            input.tags = m.tags.clone();
            input
        })
        .collect();
    for (m, stored) in set
        .memories
        .iter()
        .zip(e.remember_many(inputs).await.unwrap())
    {
        ids.insert(m.id.clone(), stored.memory.id);
    }
    // Every memory as the baselines read it (`sets.json`): id, type, text, files, tags.
    let mut written: Vec<serde_json::Value> = set
        .memories
        .iter()
        .map(|m| {
            serde_json::json!({
                "id": ids[&m.id], "type": m.memory_type, "content": m.content,
                "files": m.files, "tags": m.tags,
            })
        })
        .collect();
    let distractors = memory_set::distractors(3000);
    let count = distractors.len();
    for batch in distractors.chunks(200) {
        let inputs = batch
            .iter()
            .map(|text| RememberInput::new(MemoryType::ModuleInsight, text.clone()))
            .collect();
        for stored in e.remember_many(inputs).await.unwrap() {
            written.push(serde_json::json!({
                "id": stored.memory.id, "type": "module_insight", "content": stored.memory.content,
                "files": [], "tags": [],
            }));
        }
    }
    println!(
        "eval: memory: {} memories written for the set, {count} README paragraphs as distractors, {} questions",
        set.memories.len(),
        set.questions.len()
    );
    embed(&e, "memory").await;
    let mut by_style: std::collections::BTreeMap<String, usize> = Default::default();
    let queries: Vec<Query> = set
        .questions
        .into_iter()
        .map(|q| {
            *by_style.entry(q.style.clone()).or_default() += 1;
            Query {
                text: q.question,
                answer: Answer::Memories(q.evidence.iter().map(|id| ids[id].clone()).collect()),
                next_door: None,
            }
        })
        .collect();
    println!("eval: memory: questions by style {by_style:?}");
    Some((
        e,
        vec![("memory".to_owned(), sample(queries, cap))],
        written,
    ))
}

fn request(query: &Query, row: Row, memory: bool, limit: u32) -> RecallRequest {
    let mut request = RecallRequest::new(query.text.clone());
    request.filters.kinds = vec![if memory {
        ItemKind::Memory
    } else {
        ItemKind::Chunk
    }];
    request.limit = Some(limit);
    request.stages.packing = false;
    request.track_access = false;
    match row {
        Row::Keyword => request.stages.dense = false,
        Row::Dense => request.stages.keyword = false,
        Row::NextDoor => request.recent_files = query.next_door.iter().cloned().collect(),
        Row::Cascade => request.stages.cascade = true,
        Row::Default => {}
    }
    request
}

/// Right answers in the top 10 that are grouped chunks (kind `block`), and how many of those
/// name the answer's definition as the item's matched symbol.
#[derive(Default)]
struct Naming {
    grouped: usize,
    named: usize,
}

impl Naming {
    fn add(&mut self, query: &Query, recall: &Recall) {
        let Answer::Definition { name, .. } = &query.answer else {
            return;
        };
        let right = recall
            .items
            .iter()
            .take(10)
            .find(|item| query.answer.matches(&item.content));
        let Some(item) = right else { return };
        let ItemContent::Chunk(chunk) = &item.content else {
            return;
        };
        if chunk.kind == "block" {
            self.grouped += 1;
            let own = |symbol: &String| symbol.rsplit(['.', ':']).next() == Some(name.as_str());
            self.named += usize::from(item.matched_symbol.as_ref().is_some_and(own));
        }
    }
}

/// Rank of the first right item and whether every right item is in the top 10.
fn judge(query: &Query, recall: &Recall) -> (Option<usize>, bool) {
    let right: Vec<usize> = recall
        .items
        .iter()
        .enumerate()
        .filter(|(_, item)| query.answer.matches(&item.content))
        .map(|(i, _)| i + 1)
        .collect();
    let in_top10 = right.iter().filter(|&&r| r <= 10).count();
    (right.first().copied(), in_top10 >= query.answer.needed())
}

fn dump_line(set: &str, query: &Query, recall: &Recall) -> String {
    let items: Vec<serde_json::Value> = recall
        .items
        .iter()
        .map(|item| {
            serde_json::json!({
                "right": query.answer.matches(&item.content),
                "keyword": item.ranks.keyword,
                "dense": item.ranks.dense,
                "similarity": item.similarity,
                "keyword_score": item.keyword_score,
                "graph": item.ranks.graph,
                "names": match &item.content {
                    ItemContent::Chunk(c) => c.symbols.clone(),
                    ItemContent::Memory(_) => Vec::new(),
                },
                "id": match &item.content {
                    ItemContent::Chunk(c) => format!("c{}", c.id),
                    ItemContent::Memory(m) => m.id.clone(),
                },
            })
        })
        .collect();
    serde_json::json!({
        "set": set,
        "query": query.text,
        "kind": recall.query_kind.as_str(),
        "needed": query.answer.needed(),
        "all_terms": recall.evidence.all_terms,
        "dense_top": recall.evidence.dense_top,
        "named": recall.evidence.named,
        "items": items,
    })
    .to_string()
}

/// A code corpus's engine and its sets.
type CodeGroup = (Engram, Vec<(String, Vec<Query>)>);

/// The memory set as [`memory_sets`] returns it: the engine, the set, every memory written.
type MemoryGroup = (Engram, Vec<(String, Vec<Query>)>, Vec<serde_json::Value>);

/// Writes every set's queries and answers to `sets.json` in `work`, for the baselines that run
/// the same queries outside engram (`benches/js/seed_eval.mjs`): per language its tree, its
/// database and each set's query texts with the answer's path and line; for the memory set
/// every memory written and each question with its answering memories' ids.
fn write_sets(work: &Path, groups: &[(bool, CodeGroup)], memory: Option<&MemoryGroup>) {
    let queries_json = |queries: &[Query]| -> Vec<serde_json::Value> {
        queries
            .iter()
            .map(|q| match &q.answer {
                Answer::Definition { path, line, name } => serde_json::json!({
                    "text": q.text, "path": path, "line": line, "name": name,
                }),
                Answer::Memories(ids) => serde_json::json!({ "text": q.text, "evidence": ids }),
            })
            .collect()
    };
    let sets_json = |sets: &[(String, Vec<Query>)]| -> Vec<serde_json::Value> {
        sets.iter()
            .map(|(name, queries)| serde_json::json!({ "name": name, "queries": queries_json(queries) }))
            .collect()
    };
    let languages: Vec<serde_json::Value> = groups
        .iter()
        .filter_map(|(_, (_, sets))| {
            let language = sets.first()?.0.split('-').next()?.to_owned();
            let dir = work.join(&language);
            Some(serde_json::json!({
                "language": language,
                "repo": dir.join("repo"),
                "db": dir.join("eval.db"),
                "sets": sets_json(sets),
            }))
        })
        .collect();
    let memory = memory.map(
        |(_, sets, memories)| serde_json::json!({ "memories": memories, "sets": sets_json(sets) }),
    );
    let json = serde_json::json!({ "languages": languages, "memory": memory }).to_string();
    std::fs::write(work.join("sets.json"), json).unwrap();
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` probes every bench
    }
    let cap: usize = std::env::var("EVAL_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    // EVAL_WORK: another work directory, so a run with another model (ENGRAM_MODEL_DIR) keeps
    // the default's databases.
    let work = std::env::var_os("EVAL_WORK")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/retrieval-eval"));
    let mut dump = std::env::var_os("EVAL_DUMP").map(|p| std::fs::File::create(p).unwrap());
    let mut groups = Vec::new();
    // EVAL_ONLY=python,memory: only these groups (languages, `memory`), for a quick look.
    let only = std::env::var("EVAL_ONLY").ok();
    let wanted = |group: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|g| g == group))
    };
    for corpus in code_sets::corpora() {
        if wanted(corpus.language) {
            groups.push((false, code_sets(&corpus, &work, cap).await));
        }
    }
    let memory = if wanted("memory") {
        memory_sets(&work, cap).await
    } else {
        None
    };
    write_sets(&work, &groups, memory.as_ref());
    if std::env::var_os("EVAL_SETS_ONLY").is_some() {
        return;
    }
    if let Some((e, sets, _)) = memory {
        groups.push((true, (e, sets)));
    }
    let mut table = vec![
        "| set | stages | queries | Recall@1 | Recall@10 | MRR@10 | all@10 |".to_owned(),
        "| --- | --- | --- | --- | --- | --- | --- |".to_owned(),
    ];
    let mut latency = Vec::new();
    let mut naming = Vec::new();
    for (memory, (e, sets)) in &groups {
        for (name, queries) in sets {
            for (row, label) in ROWS {
                if *memory && matches!(row, Row::NextDoor | Row::Cascade) {
                    continue; // no code to walk
                }
                let mut score = Score::default();
                let mut millis = Vec::new();
                let mut named = Naming::default();
                for query in queries {
                    let started = Instant::now();
                    let recall = e.recall(request(query, row, *memory, 10)).await.unwrap();
                    millis.push(started.elapsed().as_secs_f64() * 1e3);
                    let (first, all) = judge(query, &recall);
                    score.add(first, all);
                    named.add(query, &recall);
                }
                if row == Row::Default && !*memory {
                    naming.push(format!("| {name} | {} | {} |", named.grouped, named.named));
                }
                table.push(format!(
                    "| {name} | {label} | {} | {} |",
                    score.n,
                    score.cells()
                ));
                if row == Row::Default {
                    millis.sort_by(f64::total_cmp);
                    latency.push(format!(
                        "| {name} | {} | {:.2} | {:.2} | {:.2} |",
                        millis.len(),
                        percentile(&millis, 0.5),
                        percentile(&millis, 0.9),
                        percentile(&millis, 0.99)
                    ));
                }
            }
            if let Some(file) = dump.as_mut() {
                for query in queries {
                    let recall = e
                        .recall(request(query, Row::Default, *memory, 100))
                        .await
                        .unwrap();
                    writeln!(file, "{}", dump_line(name, query, &recall)).unwrap();
                }
            }
        }
    }
    println!("{}", table.join("\n"));
    println!(
        "\n| set | queries | default recall p50 ms | p90 | p99 |\n| --- | --- | --- | --- | --- |"
    );
    println!("{}", latency.join("\n"));
    println!(
        "\n| set | right answers in a grouped chunk (default, top 10) | named by the matched part |\n| --- | --- | --- |"
    );
    println!("{}", naming.join("\n"));
}
