//! Recall end to end on a small TypeScript project whose right answers are known: real
//! tree-sitter parses, a real libSQL file, the real graph. The dense path runs through a
//! callback embedder with a tiny fixed vocabulary of concepts (so that "credentials" is near
//! "password" and the assertions below can say exactly what the dense path must find).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use engram::clock::ManualClock;
use engram::code::IndexOptions;
use engram::embed::{CallbackOptions, EmbeddingProvider};
use engram::engine::EngineOptions;
use engram::lifecycle::TrustLevel;
use engram::memory::{MemoryType, RememberInput};
use engram::retrieval::hyde::{Hyde, HydeOptions, HydeRequest};
use engram::retrieval::injection::{InjectionKind, StepContext, ToolCall};
use engram::retrieval::recall::{ItemContent, PackState, Recall, RecallItem};
use engram::retrieval::request::RecallRequest;
use engram::retrieval::rerank::{
    CallbackReranker, HttpRerankOptions, HttpReranker, RerankFn, RerankerProvider,
};
use engram::retrieval::scoring::Phase;
use engram::vector::ItemKind;
use engram::{Engram, OpenOptions};
use serde_json::json;

mod common;

/// One definition per file, so that each chunk is one symbol.
const FILES: &[(&str, &str)] = &[
    (
        "src/auth/password.ts",
        r#"export function checkPassword(stored: string, given: string): boolean {
  // constant-time comparison of the salted hashes
  let diff = 0
  for (let i = 0; i < stored.length; i++) diff |= stored.charCodeAt(i) ^ given.charCodeAt(i)
  return diff === 0
}
"#,
    ),
    (
        "src/auth/login.ts",
        r#"import { findUser } from '../db/users'
import { checkPassword } from './password'

export async function login(name: string, password: string) {
  const user = await findUser(name)
  if (!user) throw new Error('unknown user')
  return checkPassword(user.hash, password)
}
"#,
    ),
    (
        "src/db/users.ts",
        r#"export async function findUser(name: string): Promise<{ name: string; hash: string } | undefined> {
  const rows = await db.query('SELECT * FROM users WHERE name = ?', [name])
  return rows[0]
}
"#,
    ),
    (
        "src/ui/button.ts",
        r#"export function renderButton(label: string): string {
  return `<button class="primary">${label}</button>`
}
"#,
    ),
];

/// Concepts of the test embedder: words in one group map to the same dimension.
const CONCEPTS: &[&[&str]] = &[
    &[
        "password",
        "credentials",
        "secret",
        "hashes",
        "verify",
        "checkpassword",
    ],
    &["button", "render", "renderbutton", "widget", "ui"],
    &["user", "users", "finduser", "account", "lookup"],
    &["login", "sign", "signin"],
    &["deleted", "soft", "deletes", "deletedat", "tombstone"],
];

fn concept_vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; CONCEPTS.len() + 1];
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let word = word.to_lowercase();
        if let Some(i) = CONCEPTS.iter().position(|g| g.contains(&word.as_str())) {
            v[i] += 1.0;
        }
    }
    v[CONCEPTS.len()] = 0.05; // never zero
    v
}

fn concept_embedder() -> EmbeddingProvider {
    EmbeddingProvider::Callback(CallbackOptions::new(
        "concepts",
        Arc::new(|texts: Vec<String>| {
            Box::pin(async move { Ok(texts.iter().map(|t| concept_vector(t)).collect()) })
        }),
    ))
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    clock: Arc<ManualClock>,
    e: Engram,
}

async fn fixture(embeddings: EmbeddingProvider) -> Fixture {
    fixture_with(embeddings, RerankerProvider::default()).await
}

async fn fixture_with(embeddings: EmbeddingProvider, reranker: RerankerProvider) -> Fixture {
    let files: Vec<(String, String)> = FILES
        .iter()
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .collect();
    fixture_of(&files, embeddings, reranker).await
}

/// A project of `files` (path, text) indexed, with a manual clock.
async fn fixture_of(
    files: &[(String, String)],
    embeddings: EmbeddingProvider,
    reranker: RerankerProvider,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    for (path, text) in files {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut options = OpenOptions::new(dir.path().join("recall.db"));
    options.project_root = Some(root.clone());
    options.engine = EngineOptions {
        clock: clock.clone(),
        embeddings,
        reranker,
        ..EngineOptions::default()
    };
    let e = Engram::open(options).await.unwrap();
    e.index(
        &IndexOptions::default(),
        &|_| {},
        &Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
    Fixture {
        root: root.canonicalize().unwrap(),
        _dir: dir,
        clock,
        e,
    }
}

async fn remember(e: &Engram, t: MemoryType, content: &str, files: &[&str]) -> String {
    let mut input = RememberInput::new(t, content);
    input.related_files = files.iter().map(|f| f.to_string()).collect();
    e.remember(input).await.unwrap().memory.id
}

async fn embed(e: &Engram) {
    e.embed_pending(|_| {}, &AtomicBool::new(false))
        .await
        .unwrap();
}

fn symbol(item: &RecallItem) -> Option<&str> {
    match &item.content {
        ItemContent::Chunk(c) => c.symbols.first().map(String::as_str),
        ItemContent::Memory(_) => None,
    }
}

fn memory_id(item: &RecallItem) -> Option<&str> {
    match &item.content {
        ItemContent::Memory(m) => Some(&m.id),
        ItemContent::Chunk(_) => None,
    }
}

fn find_symbol<'a>(recall: &'a Recall, name: &str) -> Option<&'a RecallItem> {
    recall.items.iter().find(|i| symbol(i) == Some(name))
}

fn find_memory<'a>(recall: &'a Recall, id: &str) -> Option<&'a RecallItem> {
    recall.items.iter().find(|i| memory_id(i) == Some(id))
}

#[tokio::test(flavor = "multi_thread")]
async fn memories_and_chunks_rank_together_with_ranks_citations_and_context() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let gotcha = remember(
        &f.e,
        MemoryType::Gotcha,
        "checkPassword must stay constant-time: never return early on a mismatch",
        &["src/auth/password.ts"],
    )
    .await;
    let recall =
        f.e.recall(RecallRequest::new("checkPassword"))
            .await
            .unwrap();
    assert_eq!(recall.query_kind.as_str(), "identifier");
    let chunk = find_symbol(&recall, "checkPassword").expect("the definition is found");
    assert_eq!(chunk.ranks.keyword, Some(1));
    let memory = find_memory(&recall, &gotcha).expect("the gotcha is found");
    assert_eq!(memory.ranks.keyword, Some(1));
    // Every keyword hit reports its BM25 score, the first of a list the best of it.
    for item in &recall.items {
        match (item.ranks.keyword, item.keyword_score) {
            (Some(_), Some(score)) => assert!(score > 0.0, "{score}"),
            (None, None) => {}
            other => panic!("keyword rank and score disagree: {other:?}"),
        }
    }
    let chunk_scores: Vec<f32> = recall
        .items
        .iter()
        .filter(|i| memory_id(i).is_none())
        .filter_map(|i| i.keyword_score)
        .collect();
    assert_eq!(
        chunk.keyword_score,
        chunk_scores.iter().copied().reduce(f32::max),
        "the first keyword chunk has the list's best score"
    );
    // Both are first in their keyword list: they lead the results, ahead of `login` (which
    // only calls checkPassword).
    let top: Vec<_> = recall.items.iter().take(2).collect();
    assert!(top.iter().any(|i| symbol(i) == Some("checkPassword")));
    assert!(top.iter().any(|i| memory_id(i) == Some(gotcha.as_str())));
    for (rank, item) in recall.items.iter().enumerate() {
        assert_eq!(
            item.ranks.fused as usize,
            rank + 1,
            "no rerank, no phase: fused order"
        );
        assert!(item.citation.chars().count() <= 40, "{}", item.citation);
    }
    assert_eq!(chunk.citation, "src/auth/password.ts:1-6");
    assert!(memory.citation.starts_with("gotcha: checkPassword must"));
    // The dense path had no model: skipped and said so.
    assert!(
        recall
            .skipped
            .iter()
            .any(|s| s.starts_with("dense: ENGRAM_MODEL_UNAVAILABLE")),
        "{:?}",
        recall.skipped
    );
    // The context holds both, memories first, code grouped under its file.
    let memories_at = recall.context.find("## Memories").unwrap();
    let code_at = recall.context.find("## Code").unwrap();
    assert!(memories_at < code_at);
    assert!(recall
        .context
        .contains("### src/auth/password.ts (typescript)"));
    assert!(recall.context.contains("never return early"));
    assert!(recall.context.contains("diff |= stored.charCodeAt(i)"));
    assert!(recall.used_tokens > 0 && recall.used_tokens <= recall.budget_tokens);
    assert_eq!(recall.budget_tokens, 2500);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dense_path_finds_what_the_words_miss() {
    let f = fixture(concept_embedder()).await;
    embed(&f.e).await;
    // No word of the query is in checkPassword's chunk, but the concept is.
    let recall =
        f.e.recall(RecallRequest::new("verify the secret credentials"))
            .await
            .unwrap();
    assert!(recall.skipped.is_empty(), "{:?}", recall.skipped);
    let chunk = find_symbol(&recall, "checkPassword").expect("found by meaning");
    assert_eq!(chunk.ranks.keyword, None);
    assert!(chunk.ranks.dense.is_some());
    assert_eq!(symbol(&recall.items[0]), Some("checkPassword"));

    let mut without_dense = RecallRequest::new("verify the secret credentials");
    without_dense.stages.dense = false;
    let recall = f.e.recall(without_dense).await.unwrap();
    assert!(find_symbol(&recall, "checkPassword").is_none());
    assert_eq!(recall.timings.embed_us, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_graph_path_brings_memories_of_files_next_to_the_recent_ones() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    // Attached to users.ts, which login.ts imports; no word in common with the query.
    let soft_deletes = remember(
        &f.e,
        MemoryType::Gotcha,
        "rows are soft-deleted: filter on deletedAt",
        &["src/db/users.ts"],
    )
    .await;
    let elsewhere = remember(
        &f.e,
        MemoryType::Gotcha,
        "buttons need an aria label",
        &["src/ui/button.ts"],
    )
    .await;
    let mut request = RecallRequest::new("how does login work");
    request.recent_files = vec![f.root.join("src/auth/login.ts").display().to_string()];
    let recall = f.e.recall(request.clone()).await.unwrap();
    let found = find_memory(&recall, &soft_deletes).expect("attached to a neighbour");
    assert!(found.ranks.graph.is_some() && found.ranks.keyword.is_none());
    assert!(
        find_memory(&recall, &elsewhere).is_none(),
        "not a neighbour"
    );
    // The graph's chunk list: login.ts itself and users.ts, by the query's terms.
    let login = find_symbol(&recall, "login").unwrap();
    assert!(login.ranks.graph.is_some());

    request.stages.graph = false;
    let recall = f.e.recall(request).await.unwrap();
    assert!(find_memory(&recall, &soft_deletes).is_none());
    assert_eq!(recall.timings.graph_us, 0);

    // The graph's chunks are ranked by the rarity of the query words each holds, and only
    // the neighbourhood's: `diff` is in one chunk (password.ts), `name` in two (login.ts,
    // users.ts), `label` only in button.ts, which is no neighbour.
    let mut request = RecallRequest::new("name diff label");
    request.recent_files = vec![f.root.join("src/auth/login.ts").display().to_string()];
    request.stages.keyword = false;
    let recall = f.e.recall(request).await.unwrap();
    let graph_rank = |name: &str| find_symbol(&recall, name).and_then(|i| i.ranks.graph);
    let (rare, common) = (
        graph_rank("checkPassword").unwrap(),
        graph_rank("findUser").unwrap(),
    );
    assert!(rare < common, "diff is rarer than name: {rare} vs {common}");
    assert!(
        graph_rank("renderButton").is_none(),
        "button.ts is no neighbour"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn filters_decide_what_may_come_back() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let gotcha = remember(
        &f.e,
        MemoryType::Gotcha,
        "login retries are capped at 3",
        &["src/auth/login.ts"],
    )
    .await;
    let decision = remember(
        &f.e,
        MemoryType::Decision,
        "login uses sessions, not JWT",
        &[],
    )
    .await;
    let forgotten = remember(
        &f.e,
        MemoryType::Gotcha,
        "login used to need a captcha",
        &[],
    )
    .await;
    f.e.forget(&forgotten, None).await.unwrap();

    let everything = f.e.recall(RecallRequest::new("login")).await.unwrap();
    assert!(find_memory(&everything, &gotcha).is_some());
    assert!(find_memory(&everything, &decision).is_some());
    assert!(
        find_memory(&everything, &forgotten).is_none(),
        "forgotten never returns"
    );
    assert!(find_symbol(&everything, "login").is_some());

    let mut only_memories = RecallRequest::new("login");
    only_memories.filters.kinds = vec![ItemKind::Memory];
    let recall = f.e.recall(only_memories).await.unwrap();
    assert_eq!(recall.items.len(), 2);

    let mut decisions = RecallRequest::new("login");
    decisions.filters.types = vec![MemoryType::Decision];
    let recall = f.e.recall(decisions).await.unwrap();
    assert!(find_memory(&recall, &decision).is_some());
    assert!(find_memory(&recall, &gotcha).is_none());
    assert!(
        find_symbol(&recall, "login").is_some(),
        "types filter memories only"
    );

    let mut in_auth = RecallRequest::new("login");
    in_auth.filters.modules = vec!["src/auth/".into()];
    let recall = f.e.recall(in_auth).await.unwrap();
    assert!(find_memory(&recall, &gotcha).is_some());
    assert!(
        find_memory(&recall, &decision).is_none(),
        "no file under src/auth"
    );
    for item in &recall.items {
        if let ItemContent::Chunk(c) = &item.content {
            assert!(c.path.starts_with("src/auth/"), "{}", c.path);
        }
    }

    // A gotcha halves its confidence every 60 idle days: 0.8 -> 0.2 after 120.
    f.clock.advance(120 * 86_400_000);
    let mut confident = RecallRequest::new("login");
    confident.filters.min_confidence = Some(0.5);
    let recall = f.e.recall(confident).await.unwrap();
    assert!(find_memory(&recall, &gotcha).is_none(), "decayed");
    assert!(
        find_memory(&recall, &decision).is_some(),
        "decisions do not decay"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_memories_are_left_out_unless_asked_for() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let mut input = RememberInput::new(MemoryType::Gotcha, "findUser ignores deleted rows");
    input.target_node_id = Some("src/db/users.ts:findUser".into());
    let id = f.e.remember(input).await.unwrap().memory.id;
    let path = f.root.join("src/db/users.ts");
    let changed = std::fs::read_to_string(&path)
        .unwrap()
        .replace("return rows[0]", "return rows.find((r) => !r.deletedAt)");
    std::fs::write(&path, changed).unwrap();
    f.e.index_paths(&[path.display().to_string()], &IndexOptions::default())
        .await
        .unwrap();
    assert!(f.e.get(&id).await.unwrap().stale_at.is_some());
    let recall =
        f.e.recall(RecallRequest::new("findUser deleted"))
            .await
            .unwrap();
    assert!(find_memory(&recall, &id).is_none());
    let mut with_stale = RecallRequest::new("findUser deleted");
    with_stale.filters.include_stale = true;
    let recall = f.e.recall(with_stale).await.unwrap();
    assert!(find_memory(&recall, &id).is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_phase_decides_between_equally_matching_memories() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let gotcha = remember(
        &f.e,
        MemoryType::Gotcha,
        "the session cache expires hourly",
        &[],
    )
    .await;
    let decision = remember(
        &f.e,
        MemoryType::Decision,
        "the session cache lives in redis",
        &[],
    )
    .await;
    let first = |recall: &Recall| memory_id(&recall.items[0]).unwrap().to_owned();
    let mut request = RecallRequest::new("session cache");
    request.filters.kinds = vec![ItemKind::Memory];
    request.phase = Some(Phase::Implement);
    let implementing = f.e.recall(request.clone()).await.unwrap();
    assert_eq!(first(&implementing), gotcha);
    assert!(implementing.items[0].factor > 1.3);
    request.phase = Some(Phase::Explore);
    let exploring = f.e.recall(request.clone()).await.unwrap();
    assert_eq!(first(&exploring), decision);
    assert_eq!(exploring.budget_tokens, 2000);
    // With scoring off every factor is 1.
    request.stages.scoring = false;
    let plain = f.e.recall(request).await.unwrap();
    assert!(plain.items.iter().all(|i| i.factor == 1.0));
}

#[tokio::test(flavor = "multi_thread")]
async fn packing_keeps_to_the_budget() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    for i in 0..30 {
        remember(
            &f.e,
            MemoryType::Pattern,
            &format!(
                "render helper number {i}: {}",
                "keep markup small. ".repeat(20)
            ),
            &[],
        )
        .await;
    }
    let mut request = RecallRequest::new("render");
    request.budget_tokens = Some(300);
    request.limit = Some(40);
    let recall = f.e.recall(request).await.unwrap();
    assert!(recall.used_tokens <= 300, "{}", recall.used_tokens);
    let packed: u32 = recall
        .items
        .iter()
        .filter(|i| i.pack.in_context())
        .map(|i| i.tokens)
        .sum();
    assert_eq!(packed, recall.used_tokens);
    assert!(recall.items.iter().any(|i| i.pack == PackState::OverBudget));
    assert!(recall.items.iter().any(|i| i.pack.in_context()));

    let mut unpacked = RecallRequest::new("render");
    unpacked.stages.packing = false;
    let recall = f.e.recall(unpacked).await.unwrap();
    assert!(recall.context.is_empty());
    assert!(recall.items.iter().all(|i| i.pack == PackState::NotPacked));
    assert!(recall.items.iter().all(|i| !i.citation.is_empty()));
}

#[tokio::test(flavor = "multi_thread")]
async fn only_tracked_recalls_count_as_use() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let id = remember(
        &f.e,
        MemoryType::Gotcha,
        "login locks after five failures",
        &[],
    )
    .await;
    f.clock.advance(5_000);
    f.e.recall(RecallRequest::new("login failures"))
        .await
        .unwrap();
    let untouched = f.e.get(&id).await.unwrap();
    assert_eq!(untouched.access_count, 0);
    let mut tracked = RecallRequest::new("login failures");
    tracked.track_access = true;
    f.e.recall(tracked).await.unwrap();
    let used = f.e.get(&id).await.unwrap();
    assert_eq!(used.access_count, 1);
    assert_eq!(used.last_accessed_at, untouched.last_accessed_at + 5_000);
    assert_eq!(used.version, untouched.version, "not a versioned change");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_with_codes_and_odd_queries_are_safe() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    // A blank query is valid, like search's, and finds nothing.
    for blank in ["", "   \n\t"] {
        let found = f.e.recall(RecallRequest::new(blank)).await.unwrap();
        assert!(
            found.items.is_empty() && found.context.is_empty(),
            "{blank:?}"
        );
    }
    let mut blank = RecallRequest::new(" ");
    blank.limit = Some(0);
    assert_eq!(
        f.e.recall(blank).await.unwrap_err().code(),
        "ENGRAM_INVALID_ARG",
        "its options are still checked"
    );
    let mut outside = RecallRequest::new("x");
    outside.recent_files = vec!["../../etc/passwd".into()];
    assert_eq!(
        f.e.recall(outside).await.unwrap_err().code(),
        "ENGRAM_INVALID_ARG"
    );
    // FTS5 syntax in user text is text.
    for query in [
        "NEAR(login",
        "\"unbalanced",
        "login OR",
        "*",
        "col:login",
        "-login",
    ] {
        f.e.recall(RecallRequest::new(query)).await.unwrap();
    }
}

fn call(tool: &str, file: Option<&str>, pattern: Option<&str>) -> ToolCall {
    ToolCall {
        tool: tool.into(),
        file_path: file.map(Into::into),
        pattern: pattern.map(Into::into),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn step_injection_shows_unseen_gotchas_of_files_just_read_once() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let gotcha = remember(
        &f.e,
        MemoryType::Gotcha,
        "compare in constant time",
        &["src/auth/password.ts"],
    )
    .await;
    let dead_end = remember(
        &f.e,
        MemoryType::DeadEnd,
        "bcrypt in JS was too slow here",
        &["src/auth/password.ts"],
    )
    .await;
    // Not a pitfall type; and a gotcha of another file.
    remember(
        &f.e,
        MemoryType::Decision,
        "passwords are salted per user",
        &["src/auth/password.ts"],
    )
    .await;
    remember(
        &f.e,
        MemoryType::Gotcha,
        "buttons need labels",
        &["src/ui/button.ts"],
    )
    .await;
    let mut weak = RememberInput::new(MemoryType::Gotcha, "maybe hashes are cached");
    weak.related_files = vec!["src/auth/password.ts".into()];
    weak.confidence = Some(0.5);
    f.e.remember(weak).await.unwrap();

    let mut context = StepContext {
        tool_calls: vec![
            call("Grep", None, Some("checkPassword")),
            call(
                "Read",
                Some(&f.root.join("src/auth/password.ts").display().to_string()),
                None,
            ),
        ],
        injected_ids: Vec::new(),
        session_id: None,
    };
    assert!(
        f.e.step_injection(4, &context).await.unwrap().is_none(),
        "too early"
    );
    assert!(
        f.e.step_injection(5, &context).await.unwrap().is_none(),
        "a new project is cautious: only confidence above 0.80 is injected"
    );
    f.e.set_trust_level(TrustLevel::Standard).await.unwrap();
    let injection = f.e.step_injection(5, &context).await.unwrap().unwrap();
    assert_eq!(injection.kind, InjectionKind::Gotchas);
    let mut ids: Vec<&str> = injection.memories.iter().map(|m| m.id.as_str()).collect();
    ids.sort();
    let mut expected = vec![gotcha.as_str(), dead_end.as_str()];
    expected.sort();
    assert_eq!(ids, expected);
    assert!(injection.content.starts_with("MEMORY: known pitfalls"));
    assert!(injection
        .content
        .contains("[dead_end] (src/auth/password.ts) bcrypt"));
    assert_eq!(f.e.get(&gotcha).await.unwrap().access_count, 1);

    // Shown once: the next step falls through to the search trigger, which finds nothing
    // matching every word of "checkPassword" among the unseen memories.
    context.injected_ids = injection.memories.iter().map(|m| m.id.clone()).collect();
    assert!(f.e.step_injection(6, &context).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn step_injection_short_circuits_a_search_for_something_known() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    f.e.set_trust_level(TrustLevel::Standard).await.unwrap();
    let known = remember(
        &f.e,
        MemoryType::Pattern,
        "the session cookie is set in middleware/session.ts by setSessionCookie",
        &[],
    )
    .await;
    let context = StepContext {
        tool_calls: vec![
            call("Grep", None, Some("nothing like this")),
            call("Glob", None, Some("**/*.test.ts")),
            call("Grep", None, Some(r"session\s+cookie")),
            call("Read", Some("src/ui/button.ts"), None),
        ],
        injected_ids: Vec::new(),
        session_id: None,
    };
    let injection = f.e.step_injection(9, &context).await.unwrap().unwrap();
    assert_eq!(injection.kind, InjectionKind::SearchShortCircuit);
    assert_eq!(injection.memories[0].id, known);
    assert_eq!(
        injection.content,
        "MEMORY CONTEXT: the session cookie is set in middleware/session.ts by setSessionCookie"
    );
    // Only the last three searches count, and only when every word matches.
    let old = StepContext {
        tool_calls: vec![
            call("Grep", None, Some("session cookie")),
            call("Grep", None, Some("a")),
            call("Grep", None, Some("b")),
            call("Grep", None, Some("session biscuit")),
        ],
        injected_ids: Vec::new(),
        session_id: None,
    };
    assert!(f.e.step_injection(9, &old).await.unwrap().is_none());
}

/// A request with the dense path off (these engines have no embedder).
fn keyword_only(query: &str) -> RecallRequest {
    let mut request = RecallRequest::new(query);
    request.stages.dense = false;
    request
}

/// The rank order of the items' symbols or memory contents.
fn order(recall: &Recall) -> Vec<String> {
    recall
        .items
        .iter()
        .map(|i| match &i.content {
            ItemContent::Chunk(c) => c.qualified_name.clone().unwrap_or_default(),
            ItemContent::Memory(m) => m.content.clone(),
        })
        .collect()
}

/// A reranker that scores a document by how many times it says `word`.
fn counting(word: &'static str) -> RerankFn {
    Arc::new(move |_query: String, documents: Vec<String>| {
        let scores = documents
            .iter()
            .map(|d| d.matches(word).count() as f32)
            .collect();
        Box::pin(async move { Ok(scores) })
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_callback_reranker_reorders_the_top_of_the_list() {
    let reranker = CallbackReranker::new("count-name", counting("name"));
    let f = fixture_with(
        EmbeddingProvider::Disabled,
        RerankerProvider(Some(Arc::new(reranker))),
    )
    .await;
    let mut request = keyword_only("password user");
    request.stages.rerank = false;
    let fused = f.e.recall(request.clone()).await.unwrap();
    assert!(fused.items.len() >= 2, "{:?}", order(&fused));
    assert!(fused.items.iter().all(|i| i.ranks.rerank.is_none()));
    assert_eq!(fused.timings.rerank_us, 0);

    request.stages.rerank = true;
    let reranked = f.e.recall(request.clone()).await.unwrap();
    assert!(reranked.skipped.is_empty(), "{:?}", reranked.skipped);
    // The items saying `name` most come first, each with its rerank rank and score.
    let counts: Vec<f32> = reranked
        .items
        .iter()
        .map(|i| i.rerank_score.expect("every item was reranked"))
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    assert!(counts[0] > 0.0);
    for (position, item) in reranked.items.iter().enumerate() {
        assert_eq!(item.ranks.rerank, Some(position as u32 + 1));
    }
    let mut same = order(&reranked);
    same.sort();
    let mut before = order(&fused);
    before.sort();
    assert_eq!(same, before, "the same items, in another order");

    // Depth 1: only the first item is scored; the rest keep the fused order.
    request.rerank_depth = Some(1);
    let shallow = f.e.recall(request).await.unwrap();
    assert_eq!(order(&shallow), order(&fused));
    assert_eq!(shallow.items[0].ranks.rerank, Some(1));
    assert!(shallow.items[1..].iter().all(|i| i.ranks.rerank.is_none()));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_reranker_speaks_the_cohere_wire_format_and_its_failures_only_skip_the_stage() {
    // The server scores a document by how often it says `hash`; the second request fails,
    // and so does its one retry.
    let server = common::Server::start(|seen, index| {
        if index == 1 || index == 2 {
            return common::Answer {
                status: 500,
                headers: Vec::new(),
                body: json!({"message": "model crashed"}),
            };
        }
        let documents = seen.body["documents"].as_array().unwrap();
        let results: Vec<_> = documents
            .iter()
            .enumerate()
            .map(|(index, d)| {
                let score = d.as_str().unwrap().matches("hash").count() as f64;
                json!({"index": index, "relevance_score": score})
            })
            .collect();
        common::ok(json!({"id": "x", "results": results}))
    });
    let mut options = HttpRerankOptions::new(format!("{}/v1/rerank", server.url), "rerank-test");
    options.api_key = Some("sk-test".to_owned());
    let f = fixture_with(
        EmbeddingProvider::Disabled,
        RerankerProvider(Some(Arc::new(HttpReranker::new(options)))),
    )
    .await;
    let request = keyword_only("password user");
    let reranked = f.e.recall(request.clone()).await.unwrap();
    assert!(reranked.skipped.is_empty(), "{:?}", reranked.skipped);
    let seen = &server.requests()[0];
    assert_eq!(seen.path, "/v1/rerank");
    assert_eq!(seen.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(seen.body["model"], "rerank-test");
    assert_eq!(seen.body["query"], "password user");
    let sent = seen.body["documents"].as_array().unwrap().len();
    assert_eq!(seen.body["top_n"], sent);
    assert_eq!(sent, reranked.items.len());
    let first = &reranked.items[0];
    assert!(first.rerank_score.unwrap() > 0.0);
    assert!(matches!(&first.content, ItemContent::Chunk(c) if c.content.contains("hash")));

    // The server fails: the fused order stands and the stage is named in `skipped`.
    let failed = f.e.recall(request.clone()).await.unwrap();
    assert_eq!(failed.skipped.len(), 1, "{:?}", failed.skipped);
    assert!(
        failed.skipped[0].starts_with("rerank: ENGRAM_RERANK") && failed.skipped[0].contains("500"),
        "{:?}",
        failed.skipped
    );
    assert_eq!(server.requests().len(), 3, "one retry of the 500");
    assert!(failed.items.iter().all(|i| i.ranks.rerank.is_none()));
    let mut fused = request.clone();
    fused.stages.rerank = false;
    assert_eq!(order(&failed), order(&f.e.recall(fused).await.unwrap()));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_rerank_server_or_a_failing_callback_only_skip_the_stage() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let options = HttpRerankOptions::new(format!("http://127.0.0.1:{port}/rerank"), "m");
    let f = fixture_with(
        EmbeddingProvider::Disabled,
        RerankerProvider(Some(Arc::new(HttpReranker::new(options)))),
    )
    .await;
    let recall = f.e.recall(keyword_only("password")).await.unwrap();
    assert!(!recall.items.is_empty());
    assert!(
        recall.skipped[0].starts_with("rerank: ENGRAM_RERANK"),
        "{:?}",
        recall.skipped
    );

    let wrong_length: RerankFn = Arc::new(|_, _| Box::pin(async { Ok(vec![1.0f32]) }));
    let f = fixture_with(
        EmbeddingProvider::Disabled,
        RerankerProvider(Some(Arc::new(CallbackReranker::new("short", wrong_length)))),
    )
    .await;
    let recall = f.e.recall(keyword_only("password user")).await.unwrap();
    assert!(recall.items.len() > 1);
    assert!(
        recall.skipped[0].contains("1 scores for"),
        "{:?}",
        recall.skipped
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn misspelt_words_are_corrected_when_exact_search_finds_too_little() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let compose = remember(
        &f.e,
        MemoryType::Gotcha,
        "docker compose needs the .env file next to it",
        &[],
    )
    .await;
    // `dokcer` is in no index: the keyword path searches `docker*` instead and says so.
    let recall = f.e.recall(keyword_only("dokcer")).await.unwrap();
    assert_eq!(recall.corrected_query.as_deref(), Some("docker*"));
    let found = find_memory(&recall, &compose).expect("found by the corrected query");
    assert!(found.ranks.keyword.is_some());
    // Found only by the corrected query: it reports that query's score.
    assert!(
        found.keyword_score.is_some_and(|s| s > 0.0),
        "{:?}",
        found.keyword_score
    );
    // Identifiers too, and the words that were right stay as typed.
    let recall =
        f.e.recall(keyword_only("chekpassword stored"))
            .await
            .unwrap();
    assert_eq!(
        recall.corrected_query.as_deref(),
        Some("checkpassword* stored")
    );
    assert!(find_symbol(&recall, "checkPassword").is_some_and(|i| i.ranks.keyword.is_some()));

    // Switched off, or when the words are known, nothing is corrected.
    let mut off = keyword_only("dokcer");
    off.stages.typo = false;
    let recall = f.e.recall(off).await.unwrap();
    assert!(recall.corrected_query.is_none());
    assert!(find_memory(&recall, &compose).is_none());
    let exact = f.e.recall(keyword_only("docker")).await.unwrap();
    assert!(exact.corrected_query.is_none());
    assert!(find_memory(&exact, &compose).is_some());
    // A word nothing is near stays as it is.
    let far = f.e.recall(keyword_only("xylophone")).await.unwrap();
    assert!(far.corrected_query.is_none() && far.items.is_empty());

    // New terms reach the vocabulary once it is 30 s old: it is rebuilt when the indexes
    // changed, but not more often.
    let kube = remember(
        &f.e,
        MemoryType::Decision,
        "kubernetes runs the workers",
        &[],
    )
    .await;
    let recall = f.e.recall(keyword_only("kubernetse")).await.unwrap();
    assert!(
        find_memory(&recall, &kube).is_none(),
        "{:?}",
        recall.corrected_query
    );
    f.clock.advance(31_000);
    let recall = f.e.recall(keyword_only("kubernetse")).await.unwrap();
    assert!(
        find_memory(&recall, &kube).is_some(),
        "{:?}",
        recall.corrected_query
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn memories_with_a_trigger_in_the_query_or_a_recent_file_come_first() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let mut never_env = RememberInput::new(
        MemoryType::Gotcha,
        "never commit secrets files; the deploy reads them from the vault",
    );
    never_env.triggers = vec![".ENV".into(), "dotenv".into()];
    let never_env = f.e.remember(never_env).await.unwrap().memory;
    assert_eq!(
        never_env.triggers,
        vec![".env", "dotenv"],
        "stored in lower case"
    );
    let mut no_println = RememberInput::new(MemoryType::Gotcha, "log through tracing");
    no_println.triggers = vec!["println!".into()];
    let no_println = f.e.remember(no_println).await.unwrap().memory;

    // No word in common with the query: only the trigger brings it, first.
    let recall =
        f.e.recall(keyword_only("load the DotEnv config for login"))
            .await
            .unwrap();
    let first = &recall.items[0];
    assert_eq!(first.triggered_by.as_deref(), Some("dotenv"));
    assert!(matches!(&first.content, ItemContent::Memory(m) if m.id == never_env.id));
    assert!(find_memory(&recall, &no_println.id).is_none());
    assert!(
        recall.context.contains("never commit secrets"),
        "it is packed"
    );

    // A recent file's path triggers too; filters still apply.
    let mut request = keyword_only("checkPassword");
    request.recent_files = vec![f.root.join("src/auth/login.ts").display().to_string()];
    let plain = f.e.recall(request.clone()).await.unwrap();
    assert!(plain.items.iter().all(|i| i.triggered_by.is_none()));
    std::fs::write(f.root.join("config.env"), "X=1\n").unwrap();
    request
        .recent_files
        .push(f.root.join("config.env").display().to_string());
    let recall = f.e.recall(request.clone()).await.unwrap();
    assert_eq!(recall.items[0].triggered_by.as_deref(), Some(".env"));
    request.filters.types = vec![MemoryType::Decision];
    let filtered = f.e.recall(request).await.unwrap();
    assert!(filtered.items.iter().all(|i| i.triggered_by.is_none()));

    // An update replaces the patterns (and is versioned like any change).
    let patch = engram::memory::MemoryPatch {
        triggers: Some(vec!["DBG!".into()]),
        ..Default::default()
    };
    let updated = f.e.update(&no_println.id, patch).await.unwrap();
    assert_eq!(
        (updated.triggers.clone(), updated.version),
        (vec!["dbg!".to_owned()], 2)
    );
    let recall =
        f.e.recall(keyword_only("remove the dbg! calls"))
            .await
            .unwrap();
    assert_eq!(recall.items[0].triggered_by.as_deref(), Some("dbg!"));

    // Forgotten memories never come back; too short a trigger is refused.
    f.e.forget(&never_env.id, Some("moved to a doc".to_owned()))
        .await
        .unwrap();
    let recall = f.e.recall(keyword_only("dotenv")).await.unwrap();
    assert!(find_memory(&recall, &never_env.id).is_none());
    let mut bad = RememberInput::new(MemoryType::Gotcha, "x");
    bad.triggers = vec!["a".into()];
    assert_eq!(
        f.e.remember(bad).await.unwrap_err().code(),
        "ENGRAM_INVALID_ARG"
    );
}

/// A reranker of the application's own that answers with one score too many.
struct Overcounting;

impl engram::retrieval::rerank::Reranker for Overcounting {
    fn name(&self) -> String {
        "mine:overcounting".to_owned()
    }

    fn rerank(
        &self,
        _query: String,
        documents: Vec<String>,
    ) -> futures::future::BoxFuture<'static, engram::Result<Vec<f32>>> {
        let scores = vec![1.0; documents.len() + 1];
        Box::pin(async move { Ok(scores) })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reranker_of_ones_own_with_the_wrong_number_of_scores_only_skips_the_stage() {
    let f = fixture_with(
        EmbeddingProvider::Disabled,
        RerankerProvider(Some(Arc::new(Overcounting))),
    )
    .await;
    let recall = f.e.recall(keyword_only("password user")).await.unwrap();
    assert!(recall.items.len() > 1);
    assert!(recall.items.iter().all(|i| i.ranks.rerank.is_none()));
    assert!(
        recall.skipped[0].starts_with("rerank: ENGRAM_RERANK")
            && recall.skipped[0].contains("mine:overcounting"),
        "{:?}",
        recall.skipped
    );
}

/// A HyDE function answering with `answer`, counting its calls and keeping what it was asked.
fn hypothesis(
    answer: Result<Option<&'static str>, &'static str>,
    calls: Arc<std::sync::Mutex<Vec<HydeRequest>>>,
) -> Hyde {
    Hyde {
        options: HydeOptions::default(),
        generate: Box::new(move |asked: HydeRequest| {
            calls.lock().unwrap().push(asked);
            Box::pin(async move {
                answer
                    .map(|a| a.map(str::to_owned))
                    .map_err(|e| engram::Error::Callback(e.to_owned()))
            })
        }),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hyde_searches_with_the_models_answer_when_the_query_finds_too_little() {
    let f = fixture(concept_embedder()).await;
    let tombstone = remember(
        &f.e,
        MemoryType::Decision,
        "Rows are never removed: a tombstone column deletedAt marks soft deletes",
        &[],
    )
    .await;
    // Two memories that share no concept with anything: the test embedder puts them right on
    // a query without concepts (similarity 1), two strong items, one short of the bound.
    for text in [
        "Builds run on Node 20 in CI",
        "Release tags are made by hand",
    ] {
        remember(&f.e, MemoryType::Pattern, text, &[]).await;
    }
    embed(&f.e).await;
    let query = "how do we get rid of old records";
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));

    // Plain recall: no word and no concept of the query meets the memory: third in the
    // dense path's memories, far from the query.
    let plain = f.e.recall(RecallRequest::new(query)).await.unwrap();
    let before = find_memory(&plain, &tombstone).expect("third in the dense list");
    assert_eq!(before.ranks.dense, Some(3));
    assert!(before.similarity < Some(0.5));
    assert_eq!(plain.hypothetical, None);

    let answer = "Old records are soft deleted: deletedAt is set as a tombstone.";
    let with =
        f.e.recall_with_hyde(
            RecallRequest::new(query),
            hypothesis(Ok(Some(answer)), calls.clone()),
        )
        .await
        .unwrap();
    assert_eq!(with.hypothetical.as_deref(), Some(answer));
    let asked = calls.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].query, query);
    assert!(asked[0].prompt.contains(query), "{}", asked[0].prompt);
    // The answer's vector found it first: the path keeps its best rank, and it moves up.
    let after = find_memory(&with, &tombstone).unwrap();
    assert_eq!(after.ranks.dense, Some(1));
    assert!(after.ranks.fused < before.ranks.fused);
    // Similarity stays the query's own.
    assert_eq!(after.similarity, before.similarity);
    assert!(with.skipped.is_empty(), "{:?}", with.skipped);

    // Enough items close to the query: the function is not called.
    calls.lock().unwrap().clear();
    for text in [
        "verify credentials with constant-time password hashes",
        "password secret credentials are verified by checkPassword",
        "credentials: a secret password verify step",
    ] {
        remember(&f.e, MemoryType::Gotcha, text, &[]).await;
    }
    embed(&f.e).await;
    let strong =
        f.e.recall_with_hyde(
            RecallRequest::new("verify the secret credentials"),
            hypothesis(Ok(Some(answer)), calls.clone()),
        )
        .await
        .unwrap();
    assert!(calls.lock().unwrap().is_empty());
    assert_eq!(strong.hypothetical, None);
    assert!(
        strong
            .items
            .iter()
            .filter(|i| i.similarity >= Some(0.5))
            .count()
            >= 3
    );
    // A limit below minResults: a full page of close items is enough.
    let mut one = RecallRequest::new("verify the secret credentials");
    one.limit = Some(1);
    let page =
        f.e.recall_with_hyde(one, hypothesis(Ok(Some(answer)), calls.clone()))
            .await
            .unwrap();
    assert!(page.items[0].similarity >= Some(0.5));
    assert!(calls.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn hyde_failures_and_non_answers_leave_the_first_result() {
    let f = fixture(concept_embedder()).await;
    remember(
        &f.e,
        MemoryType::Decision,
        "a tombstone marks soft deletes",
        &[],
    )
    .await;
    embed(&f.e).await;
    let query = "how do we get rid of old records";
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let plain = f.e.recall(RecallRequest::new(query)).await.unwrap();
    let ids = |r: &Recall| {
        r.items
            .iter()
            .map(|i| i.citation.clone())
            .collect::<Vec<_>>()
    };

    let failed =
        f.e.recall_with_hyde(
            RecallRequest::new(query),
            hypothesis(Err("model down"), calls.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        failed.skipped,
        vec!["hyde: ENGRAM_CALLBACK: callback failed: model down".to_owned()]
    );
    assert_eq!(ids(&failed), ids(&plain));
    for answer in [None, Some("   ")] {
        let none =
            f.e.recall_with_hyde(
                RecallRequest::new(query),
                hypothesis(Ok(answer), calls.clone()),
            )
            .await
            .unwrap();
        assert_eq!(none.hypothetical, None);
        assert_eq!(ids(&none), ids(&plain));
    }
    assert_eq!(calls.lock().unwrap().len(), 3);

    // Without a dense path there is nothing to search with: the function is not asked.
    calls.lock().unwrap().clear();
    let mut keyword = RecallRequest::new(query);
    keyword.stages.dense = false;
    f.e.recall_with_hyde(keyword, hypothesis(Ok(Some("tombstone")), calls.clone()))
        .await
        .unwrap();
    let none = fixture(EmbeddingProvider::Disabled).await;
    none.e
        .recall_with_hyde(
            RecallRequest::new(query),
            hypothesis(Ok(Some("x")), calls.clone()),
        )
        .await
        .unwrap();
    assert!(calls.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cascade_walks_from_the_top_hits_to_related_memories_and_next_door_code() {
    let f = fixture(EmbeddingProvider::Disabled).await;
    let sessions = remember(
        &f.e,
        MemoryType::Decision,
        "Sessions expire after 30 minutes of idle time",
        &[],
    )
    .await;
    let mut input = RememberInput::new(
        MemoryType::Gotcha,
        "login compares the password before it opens a session",
    );
    input.relations = vec![engram::memory::MemoryRelation {
        target_memory_id: Some(sessions.clone()),
        target_file_path: None,
        relation_type: engram::memory::RelationType::RequiredWith,
        confidence: 0.9,
        auto_extracted: false,
    }];
    let login = f.e.remember(input).await.unwrap().memory.id;

    let query = "login compares the password";
    let plain = f.e.recall(keyword_only(query)).await.unwrap();
    assert!(find_memory(&plain, &login).is_some());
    assert!(
        find_memory(&plain, &sessions).is_none(),
        "no word of the query in it"
    );
    assert!(plain.items.iter().all(|i| i.ranks.cascade.is_none()));

    let mut request = keyword_only(query);
    request.stages.cascade = true;
    let walked = f.e.recall(request).await.unwrap();
    let related = find_memory(&walked, &sessions).expect("reached through the relation");
    assert!(related.ranks.cascade.is_some());
    assert_eq!(related.ranks.keyword, None);
    // The top hit itself is a seed, not a find of the walk.
    let seed = find_memory(&walked, &login).unwrap();
    assert_eq!(seed.ranks.cascade, None);
    // Code: login.ts leads on the query's words; the walk goes on to the files it imports and
    // brings the memory attached to one of them, which shares no word with the query.
    let constant_time = remember(
        &f.e,
        MemoryType::Gotcha,
        "compare in constant time: never return early",
        &["src/auth/password.ts"],
    )
    .await;
    let walk = |query: &str, on: bool| {
        let mut r = keyword_only(query);
        r.stages.cascade = on;
        r
    };
    let code = f.e.recall(walk("unknown user", true)).await.unwrap();
    assert_eq!(symbol(&code.items[0]), Some("login"));
    let next_door = find_memory(&code, &constant_time).expect("one import away");
    assert!(next_door.ranks.cascade.is_some(), "{:?}", next_door.ranks);
    let without = f.e.recall(walk("unknown user", false)).await.unwrap();
    assert!(find_memory(&without, &constant_time).is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn fusion_weights_are_read_per_query_from_what_the_paths_found() {
    let f = fixture(concept_embedder()).await;
    remember(
        &f.e,
        MemoryType::Gotcha,
        "the button label is escaped twice",
        &[],
    )
    .await;
    embed(&f.e).await;

    // A word of the query names a definition the keyword path found: code is keyword-led.
    let named =
        f.e.recall(RecallRequest::new(
            "renderButton and the secret credentials",
        ))
        .await
        .unwrap();
    assert_eq!(named.evidence.named.as_deref(), Some("renderButton"));
    let w = named.weights.chunks;
    assert!(w.keyword > w.dense, "{w:?}");
    // The dense path ranks checkPassword first by meaning; the name decides.
    let first_chunk = named.items.iter().find(|i| symbol(i).is_some()).unwrap();
    assert_eq!(symbol(first_chunk), Some("renderButton"));
    assert_eq!(
        find_symbol(&named, "checkPassword").unwrap().ranks.dense,
        Some(1)
    );

    // The same meaning without the name: code leans on the dense path.
    let unnamed =
        f.e.recall(RecallRequest::new("verify the secret credentials"))
            .await
            .unwrap();
    assert_eq!(unnamed.evidence.named, None);
    assert!(unnamed.evidence.dense_top.is_some_and(|s| s > 0.5));
    let w = unnamed.weights.chunks;
    assert!(w.dense > w.keyword, "{w:?}");
    // Memories are prose, which the model reads well: dense-led for either query.
    for recall in [&named, &unnamed] {
        let m = recall.weights.memories;
        assert!(m.dense > m.keyword, "{m:?}");
        assert!((m.keyword + m.dense + m.graph - 1.0).abs() < 1e-9);
    }

    // A word too short or naming nothing is no name.
    let plain = f.e.recall(RecallRequest::new("a button")).await.unwrap();
    assert_eq!(plain.evidence.named, None);

    // A memory no word matches, close in meaning: the keyword search over memories ran and
    // found nothing, which keeps its weight, so the memory's dense rank alone does not put it
    // above the definition the query names.
    let lookup = remember(
        &f.e,
        MemoryType::Decision,
        "account lookup results are cached for a minute",
        &[],
    )
    .await;
    embed(&f.e).await;
    let recall = f.e.recall(RecallRequest::new("findUser")).await.unwrap();
    assert_eq!(recall.evidence.named.as_deref(), Some("findUser"));
    let memory = find_memory(&recall, &lookup).expect("found by meaning");
    assert_eq!((memory.ranks.keyword, memory.ranks.dense), (None, Some(1)));
    assert_eq!(symbol(&recall.items[0]), Some("findUser"));
    assert!(recall.weights.memories.keyword > 0.0);
    let chunk = find_symbol(&recall, "findUser").unwrap();
    assert!(
        chunk.score > 1.2 * memory.score,
        "{} vs {}",
        chunk.score,
        memory.score
    );

    // Without a dense path, the keyword lists carry each kind's whole weight, and the
    // reported weights say so.
    let mut no_dense = RecallRequest::new("findUser");
    no_dense.stages.dense = false;
    let recall = f.e.recall(no_dense).await.unwrap();
    for w in [recall.weights.chunks, recall.weights.memories] {
        assert_eq!(w.dense, 0.0);
        assert!((w.keyword + w.graph - 1.0).abs() < 1e-9, "{w:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_word_common_in_the_code_does_not_name_a_definition() {
    // `render` is defined once and called from 30 other files; `parseWidget` is defined once
    // and called from one.
    let mut files = vec![
        (
            "src/render.ts".to_owned(),
            "export function render(n: number): string {\n  // render, render again\n  return String(n)\n}\n".to_owned(),
        ),
        (
            "src/parse.ts".to_owned(),
            "export function parseWidget(text: string): number {\n  return text.length\n}\n".to_owned(),
        ),
        (
            "src/use.ts".to_owned(),
            "export function useIt(): number {\n  return parseWidget('x')\n}\n".to_owned(),
        ),
    ];
    files.extend((0..30).map(|i| {
        (
            format!("src/w{i}.ts"),
            format!("export function widget{i}(): string {{\n  return render({i})\n}}\n"),
        )
    }));
    let f = fixture_of(
        &files,
        EmbeddingProvider::Disabled,
        RerankerProvider::default(),
    )
    .await;
    let e = &f.e;
    let common = e.recall(RecallRequest::new("render")).await.unwrap();
    assert!(find_symbol(&common, "render").is_some());
    assert_eq!(common.evidence.named, None, "render is in 31 of 33 chunks");
    let rare = e.recall(RecallRequest::new("parseWidget")).await.unwrap();
    assert_eq!(rare.evidence.named.as_deref(), Some("parseWidget"));
}
