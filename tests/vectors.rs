//! Vectors end to end with the real all-MiniLM-L6-v2 model: embedding a project's chunks and
//! memories, dense search, and the indexes following re-indexing, edits, deletes, forgets and
//! model changes. Skipped without the model, except under CI (see tests/embed_local.rs).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use engram::code::IndexOptions;
use engram::embed::{EmbeddingProvider, LocalModelOptions};
use engram::memory::{MemoryPatch, MemoryType, RememberInput};
use engram::vector::{ChunkVectors, DenseQuery, EmbedProgress, ItemKind};
use engram::{Engram, OpenOptions};

mod common;

const PASSWORD_TS: &str = r#"import { createHash, timingSafeEqual } from "crypto";

export function hashPassword(plain: string, salt: string): string {
  return createHash("sha256").update(salt + plain).digest("hex");
}

export function verifyPassword(plain: string, salt: string, stored: string): boolean {
  const candidate = Buffer.from(hashPassword(plain, salt), "hex");
  return timingSafeEqual(candidate, Buffer.from(stored, "hex"));
}
"#;

const LRU_RS: &str = r#"use std::collections::{HashMap, VecDeque};

/// A fixed-capacity cache that drops the least recently used entry when full.
pub struct LruCache {
    capacity: usize,
    map: HashMap<String, String>,
    order: VecDeque<String>,
}

impl LruCache {
    pub fn put(&mut self, key: String, value: String) {
        if self.map.len() == self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.map.remove(&oldest);
            }
        }
        self.order.push_back(key.clone());
        self.map.insert(key, value);
    }
}
"#;

const RETRY_GO: &str = r#"package httpx

import "time"

// RetryWithBackoff calls fn until it succeeds, sleeping twice as long after each failure.
func RetryWithBackoff(attempts int, fn func() error) error {
	delay := 100 * time.Millisecond
	var err error
	for i := 0; i < attempts; i++ {
		if err = fn(); err == nil {
			return nil
		}
		time.Sleep(delay)
		delay *= 2
	}
	return err
}
"#;

fn write(dir: &tempfile::TempDir, rel: &str, text: &str) {
    let path = dir.path().join("repo").join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

async fn open_with(dir: &tempfile::TempDir, max_tokens: usize) -> Engram {
    open_giving(dir, max_tokens, ChunkVectors::WithParts).await
}

async fn open_giving(
    dir: &tempfile::TempDir,
    max_tokens: usize,
    chunk_vectors: ChunkVectors,
) -> Engram {
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(dir.path().join("repo"));
    options.engine.chunk_vectors = chunk_vectors;
    options.engine.embeddings = EmbeddingProvider::Local {
        model_dir: None,
        options: LocalModelOptions {
            max_tokens,
            ..LocalModelOptions::default()
        },
    };
    Engram::open(options).await.unwrap()
}

async fn index(e: &Engram) {
    e.index(
        &IndexOptions::default(),
        &|_| {},
        &Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
}

async fn embed(e: &Engram) -> engram::vector::EmbedReport {
    e.embed_pending(|_| {}, &AtomicBool::new(false))
        .await
        .unwrap()
}

/// Paths of the chunk hits for `query`, best first.
async fn top_paths(e: &Engram, query: &str, limit: usize) -> Vec<String> {
    let options = DenseQuery {
        limit,
        kinds: vec![ItemKind::Chunk],
        ..DenseQuery::default()
    };
    e.dense_search(query, options)
        .await
        .unwrap()
        .into_iter()
        .map(|hit| hit.path.unwrap())
        .collect()
}

/// Four small functions: the chunker groups them into one chunk of kind `block`.
const HELPERS_PY: &str = r#"def celsius_to_fahrenheit(celsius):
    return celsius * 9 / 5 + 32


def shuffle_deck(cards, rng):
    rng.shuffle(cards)
    return cards


def parse_semver(text):
    major, minor, patch = text.split(".")
    return int(major), int(minor), int(patch)


def slugify(title):
    return "-".join(title.lower().split())
"#;

/// A class that fits one chunk whole: its two methods get vectors of their own.
const INVENTORY_PY: &str = r#"class Inventory:
    def add_stock(self, name, count):
        self.items[name] = self.items.get(name, 0) + count

    def email_invoice(self, address, total):
        self.mailer.send(address, f"Your invoice: {total} EUR is due in 30 days")
"#;

/// The best chunk hit's path and symbol for `query`.
async fn top_symbol(e: &Engram, query: &str) -> (String, Option<String>) {
    let options = DenseQuery {
        limit: 5,
        kinds: vec![ItemKind::Chunk],
        ..DenseQuery::default()
    };
    let hits = e.dense_search(query, options).await.unwrap();
    let ids: std::collections::HashSet<_> = hits.iter().map(|h| h.chunk_id).collect();
    assert_eq!(ids.len(), hits.len(), "a chunk is listed once: {hits:?}");
    let top = hits.into_iter().next().expect("a hit");
    (top.path.unwrap(), top.symbol)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grouped_chunk_is_found_by_each_definition_and_names_it() {
    if !common::model_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(&dir, "util/helpers.py", HELPERS_PY);
    write(&dir, "shop/inventory.py", INVENTORY_PY);
    write(&dir, "src/httpx/retry.go", RETRY_GO);
    let e = open_with(&dir, 128).await;
    index(&e).await;
    let chunks = e.chunks_of("util/helpers.py").await.unwrap();
    assert_eq!(
        chunks.iter().map(|c| c.kind.as_str()).collect::<Vec<_>>(),
        ["block"],
        "the fixture must group its functions"
    );
    let report = embed(&e).await;
    assert_eq!(report.parts, 4 + 2, "{report:?}");
    assert_eq!(
        top_symbol(&e, "send the customer a bill by email").await,
        (
            "shop/inventory.py".to_owned(),
            Some("Inventory.email_invoice".to_owned())
        )
    );

    for (query, symbol) in [
        (
            "convert a temperature from celsius to fahrenheit",
            "celsius_to_fahrenheit",
        ),
        (
            "split a version string into major minor and patch numbers",
            "parse_semver",
        ),
        ("turn a title into a url slug", "slugify"),
    ] {
        assert_eq!(
            top_symbol(&e, query).await,
            ("util/helpers.py".to_owned(), Some(symbol.to_owned())),
            "{query}"
        );
    }

    // The file changes: the chunk and its parts are replaced, never left behind.
    write(
        &dir,
        "util/helpers.py",
        &HELPERS_PY.replace("def parse_semver", "def parse_version_triple"),
    );
    index(&e).await;
    let again = embed(&e).await;
    assert_eq!((again.parts, again.texts_embedded), (1, 2), "{again:?}");
    assert_eq!(
        top_symbol(
            &e,
            "split a version string into major minor and patch numbers"
        )
        .await,
        (
            "util/helpers.py".to_owned(),
            Some("parse_version_triple".to_owned())
        )
    );
    let stale = e
        .dense_search(
            "anything at all",
            DenseQuery {
                limit: 50,
                ..DenseQuery::default()
            },
        )
        .await
        .unwrap();
    assert!(
        stale
            .iter()
            .all(|h| h.symbol.as_deref() != Some("parse_semver")),
        "{stale:?}"
    );
    // A reopened engine reads the parts from the file.
    drop(e);
    let e = open_with(&dir, 128).await;
    assert_eq!(
        top_symbol(&e, "turn a title into a url slug")
            .await
            .1
            .as_deref(),
        Some("slugify")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_definition_vectors_only_chunks_are_embedded_until_switched_back() {
    if !common::model_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(&dir, "util/helpers.py", HELPERS_PY);
    write(&dir, "shop/inventory.py", INVENTORY_PY);
    let e = open_giving(&dir, 128, ChunkVectors::ChunksOnly).await;
    index(&e).await;
    let chunks = e.chunks_of("util/helpers.py").await.unwrap().len()
        + e.chunks_of("shop/inventory.py").await.unwrap().len();
    let steps: Mutex<Vec<EmbedProgress>> = Mutex::default();
    let report = e
        .embed_pending(|p| steps.lock().unwrap().push(p), &AtomicBool::new(false))
        .await
        .unwrap();
    assert_eq!(
        (
            report.chunks as usize,
            report.parts,
            report.texts_embedded as usize
        ),
        (chunks, 0, chunks),
        "{report:?}"
    );
    // Nothing is left pending: the parts are not counted as waiting for a vector.
    let first = steps.lock().unwrap().first().copied().unwrap();
    assert_eq!(
        (first.kind, first.total as usize),
        (ItemKind::Chunk, chunks)
    );
    assert_eq!(embed(&e).await.chunks + embed(&e).await.parts, 0);
    // The grouped chunk is still found, by its own vector, without naming a definition inside.
    let (path, symbol) = top_symbol(&e, "turn a title into a url slug").await;
    assert_eq!(path, "util/helpers.py");
    assert_ne!(symbol.as_deref(), Some("slugify"));

    // Switched back on: the parts are embedded at the next run, without a re-index.
    drop(e);
    let e = open_giving(&dir, 128, ChunkVectors::WithParts).await;
    let again = embed(&e).await;
    assert_eq!((again.chunks, again.parts), (0, 4 + 2), "{again:?}");
    assert_eq!(
        top_symbol(&e, "turn a title into a url slug").await,
        ("util/helpers.py".to_owned(), Some("slugify".to_owned()))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chunks_are_embedded_once_and_found_by_meaning_through_edits_and_deletes() {
    if !common::model_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(&dir, "src/auth/password.ts", PASSWORD_TS);
    write(&dir, "src/cache/lru.rs", LRU_RS);
    write(&dir, "src/httpx/retry.go", RETRY_GO);
    let e = open_with(&dir, 128).await;
    index(&e).await;
    assert!(
        top_paths(&e, "anything", 5).await.is_empty(),
        "nothing is embedded yet"
    );

    let steps: Mutex<Vec<EmbedProgress>> = Mutex::default();
    let report = e
        .embed_pending(|p| steps.lock().unwrap().push(p), &AtomicBool::new(false))
        .await
        .unwrap();
    let chunk_count = e.chunks_of("src/auth/password.ts").await.unwrap().len()
        + e.chunks_of("src/cache/lru.rs").await.unwrap().len()
        + e.chunks_of("src/httpx/retry.go").await.unwrap().len();
    assert_eq!(report.chunks as usize, chunk_count);
    assert_eq!(report.model.key(), "local:all-minilm-l6-v2@128:384");
    let last = steps
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|p| p.kind == ItemKind::Chunk)
        .copied();
    // Progress counts the parts of grouped chunks with the chunks.
    let items = report.chunks + report.parts;
    assert_eq!(last.map(|p| (p.done, p.total)), Some((items, items)));

    assert_eq!(
        top_paths(&e, "check that a password matches the stored hash", 1).await,
        ["src/auth/password.ts"]
    );
    assert_eq!(
        top_paths(
            &e,
            "evict the least recently used entry when the cache is full",
            1
        )
        .await,
        ["src/cache/lru.rs"]
    );
    assert_eq!(
        top_paths(&e, "retry a failing call with exponential backoff", 1).await,
        ["src/httpx/retry.go"]
    );
    let hit = &e
        .dense_search(
            "retry with backoff",
            DenseQuery {
                limit: 1,
                ..DenseQuery::default()
            },
        )
        .await
        .unwrap()[0];
    assert_eq!(hit.kind, ItemKind::Chunk);
    assert!(hit.score > 0.3 && hit.score <= 1.0, "{hit:?}");
    assert!(hit.start_line.unwrap() <= hit.end_line.unwrap());

    // Nothing left: a second run embeds nothing.
    let again = embed(&e).await;
    assert_eq!((again.chunks, again.texts_embedded), (0, 0));

    // Filters: only chunks under a directory.
    let under = DenseQuery {
        limit: 10,
        kinds: vec![ItemKind::Chunk],
        paths: vec!["src/cache/".into()],
        ..DenseQuery::default()
    };
    let paths: Vec<_> = e
        .dense_search("password hash", under)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.path.unwrap())
        .collect();
    assert!(
        !paths.is_empty() && paths.iter().all(|p| p == "src/cache/lru.rs"),
        "{paths:?}"
    );
    // A file by its path; a prefix that is not a whole directory name matches nothing.
    for (filter, expected) in [
        ("src/cache/lru.rs", vec!["src/cache/lru.rs"]),
        ("src/auth", vec!["src/auth/password.ts"]),
        ("src/cach", vec![]),
    ] {
        let query = DenseQuery {
            limit: 10,
            kinds: vec![ItemKind::Chunk],
            paths: vec![filter.into()],
            ..DenseQuery::default()
        };
        let mut found: Vec<String> = e
            .dense_search("password hash", query)
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.path.unwrap())
            .collect();
        found.dedup();
        assert_eq!(found, expected, "{filter}");
    }

    // Deleting a file takes its chunks out of search at once (no embedding run needed).
    std::fs::remove_file(dir.path().join("repo/src/httpx/retry.go")).unwrap();
    index(&e).await;
    let paths = top_paths(&e, "retry a failing call with exponential backoff", 10).await;
    assert!(!paths.iter().any(|p| p.ends_with("retry.go")), "{paths:?}");

    // Bringing it back finds its vectors in the cache: found again with no model call.
    write(&dir, "src/httpx/retry.go", RETRY_GO);
    index(&e).await;
    assert_eq!(
        top_paths(&e, "retry a failing call with exponential backoff", 1).await,
        ["src/httpx/retry.go"],
        "a chunk whose text has a vector is searchable as soon as it is indexed"
    );
    let report = embed(&e).await;
    assert_eq!((report.chunks, report.texts_embedded), (0, 0));

    // Editing a file: the new text needs the model; once embedded, the new meaning is found.
    write(
        &dir,
        "src/auth/password.ts",
        "export function parseCsvLine(line: string): string[] {\n  return line.split(\",\").map((cell) => cell.trim());\n}\n",
    );
    index(&e).await;
    assert!(top_paths(&e, "split a comma separated line into cells", 5)
        .await
        .iter()
        .all(|p| p != "src/auth/password.ts"));
    let report = embed(&e).await;
    assert!(
        report.chunks >= 1 && report.texts_embedded >= 1,
        "{report:?}"
    );
    assert_eq!(
        top_paths(&e, "split a comma separated line into cells", 1).await,
        ["src/auth/password.ts"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn memories_follow_updates_and_forgets_and_models_do_not_mix() {
    if !common::model_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let e = open_with(&dir, 128).await;
    let mut decision = RememberInput::new(
        MemoryType::Decision,
        "We store sessions in Redis so that any web node can serve a logged-in user",
    );
    decision.related_files = vec!["src/session/store.ts".into()];
    let decision = e.remember(decision).await.unwrap().memory;
    let gotcha = e
        .remember(RememberInput::new(
            MemoryType::Gotcha,
            "The CI runner has no GPU: tests that need CUDA must be skipped there",
        ))
        .await
        .unwrap()
        .memory;
    let report = embed(&e).await;
    assert_eq!((report.chunks, report.memories), (0, 2));

    let search = |query: &'static str| {
        let e = e.clone();
        async move {
            e.dense_search(
                query,
                DenseQuery {
                    limit: 5,
                    ..DenseQuery::default()
                },
            )
            .await
            .unwrap()
            .into_iter()
            .map(|h| (h.memory_id.unwrap(), h.memory_type.unwrap()))
            .collect::<Vec<_>>()
        }
    };
    let hits = search("where do we keep user sessions").await;
    assert_eq!(hits[0], (decision.id.clone(), "decision".to_owned()));
    let typed = e
        .dense_search(
            "where do we keep user sessions",
            DenseQuery {
                memory_types: vec!["gotcha".into()],
                ..DenseQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(typed.len(), 1);
    assert_eq!(typed[0].memory_id.as_deref(), Some(gotcha.id.as_str()));

    // A new text drops the old vector at once; the next run embeds the new one.
    let patch = MemoryPatch {
        content: Some("Feature flags are read from LaunchDarkly at startup".into()),
        ..MemoryPatch::default()
    };
    e.update(&decision.id, patch).await.unwrap();
    assert!(!search("where do we keep user sessions")
        .await
        .iter()
        .any(|(id, _)| *id == decision.id));
    assert_eq!(embed(&e).await.memories, 1);
    assert_eq!(
        search("which service serves feature flags").await[0].0,
        decision.id
    );

    // A forgotten memory leaves search.
    e.forget(&gotcha.id, None).await.unwrap();
    assert!(!search("tests that need a GPU")
        .await
        .iter()
        .any(|(id, _)| *id == gotcha.id));

    // Another model (another token limit is another identity): nothing of the first is used,
    // everything is embedded again, and both models' vectors are kept.
    drop(e);
    let other = open_with(&dir, 64).await;
    assert!(search_with(&other, "feature flags").await.is_empty());
    let report = embed(&other).await;
    assert_eq!(report.memories, 1);
    assert_eq!(report.model.key(), "local:all-minilm-l6-v2@64:384");
    assert_eq!(search_with(&other, "feature flags").await, [decision.id]);
}

async fn search_with(e: &Engram, query: &str) -> Vec<String> {
    e.dense_search(query, DenseQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter_map(|h| h.memory_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_run_keeps_its_vectors_and_the_next_run_finishes() {
    if !common::model_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Enough chunks for several steps of the job (one small file is one chunk).
    for i in 0..100 {
        write(
            &dir,
            &format!("src/steps/step{i}.ts"),
            &format!("export function step{i}(input: number): number {{\n  return input * {i} + {};\n}}\n", i * 7),
        );
    }
    let e = open_with(&dir, 128).await;
    index(&e).await;
    let total = 100;

    let cancel = AtomicBool::new(false);
    let err = e
        .embed_pending(
            |p| {
                if p.done > 0 {
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            },
            &cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_ABORTED");
    let rest = embed(&e).await;
    assert!(
        rest.chunks > 0 && rest.chunks < total,
        "{rest:?} of {total}"
    );

    // Rows from before schema v4 have no embedding hash: a run computes it, and the texts'
    // vectors are already stored, so the model does not run again.
    let raw = libsql::Builder::new_local(dir.path().join("engram.db"))
        .build()
        .await
        .unwrap()
        .connect()
        .unwrap();
    raw.execute("UPDATE code_chunks SET embed_hash = NULL", ())
        .await
        .unwrap();
    assert!(top_paths(&e, "multiply the input by forty two", 3)
        .await
        .is_empty());
    let rehashed = embed(&e).await;
    assert_eq!((rehashed.chunks, rehashed.texts_embedded), (total, 0));
    assert_eq!(
        top_paths(&e, "step42 multiplies its input", 3).await.len(),
        3
    );

    let disabled = {
        let mut options = OpenOptions::new(dir.path().join("other.db"));
        options.engine.embeddings = EmbeddingProvider::Disabled;
        Engram::open(options).await.unwrap()
    };
    let err = disabled
        .embed_pending(|_| {}, &AtomicBool::new(false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
    let err = disabled
        .dense_search("x", DenseQuery::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
    let err = e
        .dense_search(
            "x",
            DenseQuery {
                limit: 0,
                ..DenseQuery::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
    assert_eq!(
        e.dense_search("  ", DenseQuery::default())
            .await
            .unwrap_err()
            .code(),
        "ENGRAM_INVALID_ARG"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_embed_runs_in_the_background_after_index_and_remember() {
    if !common::model_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(&dir, "src/auth/password.ts", PASSWORD_TS);
    write(&dir, "src/cache/lru.rs", LRU_RS);
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(dir.path().join("repo"));
    options.engine.auto_embed = true;
    let e = Engram::open(options).await.unwrap();
    assert!(e.background_embedding().is_some());
    index(&e).await;
    // Claimed before index() returned.
    assert_eq!(e.background_embedding().map(|b| b.running), Some(true));
    e.remember(RememberInput::new(
        MemoryType::Gotcha,
        "Never log the password salt",
    ))
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while e.background_embedding().unwrap().running {
        assert!(
            std::time::Instant::now() < deadline,
            "background run never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(e.background_embedding().unwrap().last_error, None);
    let report = embed(&e).await;
    assert_eq!(
        (report.chunks, report.memories),
        (0, 0),
        "all done in the background"
    );
    assert_eq!(
        top_paths(&e, "check that a password matches the stored hash", 1).await,
        ["src/auth/password.ts"]
    );
}
