//! The HTTP and callback embedding providers end to end: an engine embeds and searches through a
//! local HTTP server speaking Ollama's `/api/embed` or OpenAI's `/v1/embeddings` wire format (the
//! only test doubles allowed: those services cannot run here), and through a Rust callback.
//!
//! The servers answer with a real, if small, model: hashed bag-of-words vectors, so texts that
//! share words are close and the dense search results below mean something.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use engram::embed::{
    CallbackOptions, EmbeddingProvider, HttpOptions, InputKind, InputPrefixes, OllamaOptions,
    OpenAiOptions,
};
use engram::memory::{MemoryType, RememberInput};
use engram::retrieval::request::RecallRequest;
use engram::vector::DenseQuery;
use engram::{Engram, OpenOptions};
use serde_json::{json, Value};

mod common;

use common::{ok, Answer, Seen, Server};

// ---------------------------------------------------------------------------------------------
// The servers' model

/// Hashed bag of lower-cased words, `dims` wide (not normalised: the client must do it).
fn bag_of_words(text: &str, dims: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; dims];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
    {
        let hash = word
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            });
        v[(hash % dims as u64) as usize] += 3.0;
    }
    // Never the zero vector.
    v[0] += 0.01;
    v
}

fn inputs(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .expect("input is an array")
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

/// Ollama's `/api/embed`, honouring `dimensions`.
fn ollama_model(seen: &Seen, model: &str) -> Answer {
    if seen.path != "/api/embed" {
        return Answer {
            status: 404,
            headers: Vec::new(),
            body: json!({"error": "404 page not found"}),
        };
    }
    if seen.body["model"] != model {
        return Answer {
            status: 404,
            headers: Vec::new(),
            body: json!({"error": format!("model \"{}\" not found, try pulling it first", seen.body["model"].as_str().unwrap())}),
        };
    }
    let dims = seen.body["dimensions"].as_u64().unwrap_or(64) as usize;
    let embeddings: Vec<Vec<f32>> = inputs(&seen.body)
        .iter()
        .map(|t| bag_of_words(t, dims))
        .collect();
    ok(json!({"model": model, "embeddings": embeddings, "total_duration": 1000}))
}

/// OpenAI's `/v1/embeddings`, answering in reverse order (the API does not promise order).
fn openai_model(seen: &Seen, honour_dimensions: bool) -> Answer {
    let dims = match seen.body.get("dimensions") {
        Some(d) if honour_dimensions => d.as_u64().unwrap() as usize,
        _ => 64,
    };
    let mut data: Vec<Value> = inputs(&seen.body)
        .iter()
        .enumerate()
        .map(
            |(i, t)| json!({"object": "embedding", "index": i, "embedding": bag_of_words(t, dims)}),
        )
        .collect();
    data.reverse();
    ok(
        json!({"object": "list", "data": data, "model": seen.body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
    )
}

// ---------------------------------------------------------------------------------------------
// Helpers

async fn open(dir: &tempfile::TempDir, provider: EmbeddingProvider) -> Engram {
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.engine.embeddings = provider;
    Engram::open(options).await.unwrap()
}

fn quick_http(max_retries: u32) -> HttpOptions {
    HttpOptions {
        timeout: Duration::from_secs(10),
        max_retries,
    }
}

const MEMORIES: [&str; 3] = [
    "The upload client retries flaky network requests three times with backoff",
    "Database migrations run inside one transaction and roll back on failure",
    "The login page stores the session token in an httpOnly cookie",
];

/// Remembers [`MEMORIES`], embeds them, and returns the memory id the query about retries finds
/// first next to the id it should be.
async fn remember_embed_and_search(e: &Engram) -> (String, String) {
    let mut ids = Vec::new();
    for text in MEMORIES {
        let memory = e
            .remember(RememberInput::new(MemoryType::Pattern, text))
            .await
            .unwrap()
            .memory;
        ids.push(memory.id);
    }
    let (embedded, hits) = embed_and_search(e).await;
    assert_eq!(embedded, 3);
    (hits[0].memory_id.clone().unwrap(), ids[0].clone())
}

/// Embeds what is pending, then searches for the memory about retries: (memories embedded,
/// hits, of which there must be one per memory).
async fn embed_and_search(e: &Engram) -> (u64, Vec<engram::vector::DenseHit>) {
    let report = e
        .embed_pending(|_| {}, &AtomicBool::new(false))
        .await
        .unwrap();
    let hits = e
        .dense_search(
            "how are flaky upload requests retried",
            DenseQuery::default(),
        )
        .await
        .unwrap();
    assert_eq!(hits.len(), MEMORIES.len());
    (report.memories, hits)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

// ---------------------------------------------------------------------------------------------
// Ollama

#[tokio::test(flavor = "multi_thread")]
async fn ollama_embeds_and_searches_through_api_embed() {
    let server = Server::start(|seen, _| ollama_model(seen, "bow-embed"));
    let dir = tempfile::tempdir().unwrap();
    let mut options = OllamaOptions::new("bow-embed");
    options.base_url = format!("{}/", server.url); // a trailing slash is tolerated
    options.batch_size = 2;
    let e = open(&dir, EmbeddingProvider::Ollama(options)).await;
    assert_eq!(e.embedding_status().state.as_str(), "available");
    assert_eq!(e.embedding_status().provider, "ollama");

    let (found, expected) = remember_embed_and_search(&e).await;
    assert_eq!(found, expected);
    let status = e.embedding_status();
    assert_eq!(status.state.as_str(), "ready");
    assert_eq!(status.model.unwrap().key(), "ollama:bow-embed:64");

    let requests = server.requests();
    // The probe, two batches of at most two memories, and the query.
    assert_eq!(requests.len(), 4, "{requests:#?}");
    for r in &requests {
        assert_eq!(r.path, "/api/embed");
        assert_eq!(r.body["model"], "bow-embed");
        assert_eq!(r.body["truncate"], true);
        assert!(r.body.get("dimensions").is_none(), "not asked: not sent");
        assert!(inputs(&r.body).len() <= 2);
        assert!(r.header("authorization").is_none());
    }
    // Memories are embedded with their context line, the query as it is.
    assert!(inputs(&requests[1].body)[0].contains("Type: pattern"));
    assert_eq!(
        inputs(&requests[3].body),
        vec!["how are flaky upload requests retried"]
    );

    // Vectors come back normalised and in order.
    let texts = vec!["alpha beta gamma".to_owned(), "delta epsilon".to_owned()];
    let vectors = e.embed(texts.clone(), InputKind::Document).await.unwrap();
    for (v, t) in vectors.iter().zip(&texts) {
        let expected = normalised(bag_of_words(t, 64));
        assert!((cosine(v, &expected) - 1.0).abs() < 1e-5);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama_asks_for_dimensions_when_told() {
    let server = Server::start(|seen, _| ollama_model(seen, "mrl"));
    let dir = tempfile::tempdir().unwrap();
    let mut options = OllamaOptions::new("mrl");
    options.base_url = server.url.clone();
    options.dimensions = Some(32);
    let e = open(&dir, EmbeddingProvider::Ollama(options)).await;
    let vectors = e
        .embed(vec!["one two three".into()], InputKind::Document)
        .await
        .unwrap();
    assert_eq!(vectors[0].len(), 32);
    assert!(server.requests().iter().all(|r| r.body["dimensions"] == 32));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_ollama_has_not_pulled_is_unavailable_with_the_fix() {
    let server = Server::start(|seen, _| ollama_model(seen, "pulled-model"));
    let dir = tempfile::tempdir().unwrap();
    let mut options = OllamaOptions::new("qwen3-embedding:4b");
    options.base_url = server.url.clone();
    let e = open(&dir, EmbeddingProvider::Ollama(options)).await;
    let err = e
        .embed(vec!["x".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
    let message = err.to_string();
    assert!(
        message.contains("ollama pull qwen3-embedding:4b"),
        "{message}"
    );
    assert!(
        message.contains("not found, try pulling it first"),
        "{message}"
    );
    // Status now says why, and the next calls fail at once without asking the server again.
    let status = e.embedding_status();
    assert_eq!(status.state.as_str(), "unavailable");
    assert!(status.reason.unwrap().contains("ollama pull"));
    let asked = server.requests().len();
    let again = e
        .embed(vec!["x".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(again.code(), "ENGRAM_MODEL_UNAVAILABLE");
    assert!(again.to_string().contains("next try after"), "{again}");
    assert_eq!(server.requests().len(), asked);
}

// ---------------------------------------------------------------------------------------------
// OpenAI-compatible

#[tokio::test(flavor = "multi_thread")]
async fn openai_sends_the_key_asks_for_dimensions_and_orders_by_index() {
    let server = Server::start(|seen, _| {
        if seen.header("authorization") != Some("Bearer sk-test-123") {
            return Answer {
                status: 401,
                headers: Vec::new(),
                body: json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}),
            };
        }
        openai_model(seen, true)
    });
    let dir = tempfile::tempdir().unwrap();
    let mut options = OpenAiOptions::new("text-embedding-3-small");
    options.base_url = format!("{}/v1", server.url);
    options.api_key = Some("sk-test-123".into());
    options.dimensions = Some(96);
    let e = open(&dir, EmbeddingProvider::OpenAi(options.clone())).await;

    let texts: Vec<String> = ["red green", "blue yellow", "green blue red"]
        .map(String::from)
        .to_vec();
    let vectors = e.embed(texts.clone(), InputKind::Document).await.unwrap();
    for (v, t) in vectors.iter().zip(&texts) {
        assert_eq!(v.len(), 96);
        let expected = normalised(bag_of_words(t, 96));
        assert!((cosine(v, &expected) - 1.0).abs() < 1e-5, "order kept");
    }
    let (found, expected) = remember_embed_and_search(&e).await;
    assert_eq!(found, expected);
    assert_eq!(
        e.embedding_status().model.unwrap().key(),
        "openai:text-embedding-3-small:96"
    );
    for r in server.requests() {
        assert_eq!(r.path, "/v1/embeddings");
        assert_eq!(r.body["dimensions"], 96);
        assert_eq!(r.body["model"], "text-embedding-3-small");
    }

    // A wrong key: unavailable, saying so, and the key is not in the message.
    let dir = tempfile::tempdir().unwrap();
    options.api_key = Some("sk-wrong-456".into());
    let e = open(&dir, EmbeddingProvider::OpenAi(options)).await;
    let err = e
        .embed(vec!["x".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
    let message = err.to_string();
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(!message.contains("sk-wrong-456"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_ignores_dimensions_is_caught() {
    let server = Server::start(|seen, _| openai_model(seen, false));
    let dir = tempfile::tempdir().unwrap();
    let mut options = OpenAiOptions::new("local-model");
    options.base_url = format!("{}/v1", server.url);
    options.dimensions = Some(32);
    let e = open(&dir, EmbeddingProvider::OpenAi(options)).await;
    let err = e
        .embed(vec!["x".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
    let message = err.to_string();
    assert!(
        message.contains("64 dimensions, expected 32") && message.contains("leave it unset"),
        "{message}"
    );
    // Without `dimensions` the field is not sent and the server's width is used.
    let dir = tempfile::tempdir().unwrap();
    let mut options = OpenAiOptions::new("local-model");
    options.base_url = format!("{}/v1", server.url);
    let before = server.requests().len();
    let e = open(&dir, EmbeddingProvider::OpenAi(options)).await;
    assert_eq!(
        e.embed(vec!["x".into()], InputKind::Document)
            .await
            .unwrap()[0]
            .len(),
        64
    );
    assert!(server.requests()[before..]
        .iter()
        .all(|r| r.body.get("dimensions").is_none()));
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limits_are_retried_after_the_wait_the_server_asks() {
    // Every request is first refused twice (429, then 503), then answered.
    let server = Server::start(|seen, index| match index % 3 {
        0 => Answer {
            status: 429,
            headers: vec![("retry-after-ms", "20".into())],
            body: json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}),
        },
        1 => Answer {
            status: 503,
            headers: vec![("retry-after", "0")]
                .into_iter()
                .map(|(n, v)| (n, v.to_owned()))
                .collect(),
            body: json!({"error": {"message": "overloaded", "code": 503}}),
        },
        _ => openai_model(seen, true),
    });
    let dir = tempfile::tempdir().unwrap();
    let mut options = OpenAiOptions::new("m");
    options.base_url = server.url.clone();
    options.http = quick_http(2);
    let e = open(&dir, EmbeddingProvider::OpenAi(options.clone())).await;
    let vectors = e
        .embed(vec!["a b c d".into()], InputKind::Document)
        .await
        .unwrap();
    assert_eq!(vectors.len(), 1);
    // Probe and call, three requests each.
    assert_eq!(server.requests().len(), 6);

    // With one retry allowed, the second refusal ends the call with the server's words.
    let dir = tempfile::tempdir().unwrap();
    options.http = quick_http(1);
    let before = server.requests().len();
    assert_eq!(before % 3, 0);
    let e = open(&dir, EmbeddingProvider::OpenAi(options)).await;
    let err = e
        .embed(vec!["a".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE", "the probe failed");
    let message = err.to_string();
    assert!(
        message.contains("HTTP 503") && message.contains("overloaded"),
        "{message}"
    );
    assert!(message.contains("after 1 retries"), "{message}");
    assert_eq!(server.requests().len() - before, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_asking_for_a_long_wait_is_not_waited_for() {
    let server = Server::start(|_, _| Answer {
        status: 429,
        headers: vec![("retry-after", "3600".into())],
        body: json!({"error": {"message": "quota exceeded"}}),
    });
    let dir = tempfile::tempdir().unwrap();
    let mut options = OpenAiOptions::new("m");
    options.base_url = server.url.clone();
    let e = open(&dir, EmbeddingProvider::OpenAi(options)).await;
    let err = e
        .embed(vec!["a".into()], InputKind::Document)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("more than 60 s"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_itself_needs_a_key_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(
        &dir,
        EmbeddingProvider::OpenAi(OpenAiOptions::new("text-embedding-3-small")),
    )
    .await;
    let status = e.embedding_status();
    assert_eq!(status.state.as_str(), "unavailable");
    assert!(status.reason.unwrap().contains("API key"));
    let err = e
        .embed(vec!["x".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
}

// ---------------------------------------------------------------------------------------------
// Offline, fallback, callback

/// A loopback URL nothing listens on.
fn dead_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_server_makes_the_dense_path_unavailable_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = OllamaOptions::new("nomic-embed-text");
    options.base_url = dead_url();
    let e = open(&dir, EmbeddingProvider::Ollama(options)).await;
    let memory = e
        .remember(RememberInput::new(
            MemoryType::Gotcha,
            "Never run the integration tests against production",
        ))
        .await
        .unwrap()
        .memory;
    let err = e
        .dense_search("integration tests", DenseQuery::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
    assert!(err.to_string().contains("no answer"), "{err}");
    let err = e
        .embed_pending(|_| {}, &AtomicBool::new(false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
    // Storage and keyword search are untouched.
    assert_eq!(e.get(&memory.id).await.unwrap().content, memory.content);
    let hits = e
        .search(
            "integration tests",
            &engram::memory::SearchOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(hits[0].memory.id, memory.id);
}

/// A callback provider computing [`bag_of_words`] in Rust, counting its calls.
fn bow_callback(model: &str, calls: Arc<AtomicUsize>) -> CallbackOptions {
    CallbackOptions::new(
        model,
        Arc::new(move |texts: Vec<String>| {
            calls.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move { Ok(texts.iter().map(|t| bag_of_words(t, 24)).collect()) })
        }),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fallback_list_loads_the_first_provider_that_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut ollama = OllamaOptions::new("nomic-embed-text");
    ollama.base_url = dead_url();
    let calls = Arc::new(AtomicUsize::new(0));
    let e = open(
        &dir,
        EmbeddingProvider::Fallback(vec![
            EmbeddingProvider::Ollama(ollama),
            EmbeddingProvider::Callback(bow_callback("bow-24", calls.clone())),
        ]),
    )
    .await;
    let status = e.embedding_status();
    assert_eq!(
        (status.provider.as_str(), status.state.as_str()),
        ("ollama,callback", "available")
    );
    let (found, expected) = remember_embed_and_search(&e).await;
    assert_eq!(found, expected);
    let status = e.embedding_status();
    assert_eq!(status.provider, "callback");
    assert_eq!(status.model.unwrap().key(), "callback:bow-24:24");
    // Probe, one batch of memories, one query.
    assert_eq!(calls.load(Ordering::Relaxed), 3);

    // A list where nothing loads says why for each.
    let dir = tempfile::tempdir().unwrap();
    let mut ollama = OllamaOptions::new("nomic-embed-text");
    ollama.base_url = dead_url();
    let e = open(
        &dir,
        EmbeddingProvider::Fallback(vec![
            EmbeddingProvider::Ollama(ollama),
            EmbeddingProvider::OpenAi(OpenAiOptions::new("text-embedding-3-small")),
        ]),
    )
    .await;
    let err = e
        .embed(vec!["x".into()], InputKind::Document)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("ollama: ") && message.contains("openai: ") && message.contains("API key"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_callback_with_a_wrong_answer_is_an_embedding_error() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let e = open(
        &dir,
        // Right for the probe, one vector short afterwards.
        EmbeddingProvider::Callback(CallbackOptions::new(
            "short",
            Arc::new(move |texts: Vec<String>| {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let count = if n == 0 { texts.len() } else { texts.len() - 1 };
                Box::pin(async move { Ok(vec![vec![1.0, 2.0]; count]) })
            }),
        )),
    )
    .await;
    let err = e
        .embed(vec!["a".into(), "b".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_EMBEDDING");
    assert!(err.to_string().contains("1 vectors for 2 texts"), "{err}");
}

/// Waits for this project's background embedding run to end.
async fn background_settles(e: &Engram) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while e.background_embedding().unwrap().running {
        assert!(std::time::Instant::now() < deadline, "run never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(e.background_embedding().unwrap().last_error, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_embed_resumes_at_open_and_re_embeds_for_a_new_model() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    // A first process embeds with model A and stops.
    let e = open(
        &dir,
        EmbeddingProvider::Callback(bow_callback("model-a", calls.clone())),
    )
    .await;
    let (found, expected) = remember_embed_and_search(&e).await;
    assert_eq!(found, expected);
    e.close().await;

    // The next opens with model B and auto-embedding: with no write at all, a run starts at
    // open and gives every memory a model-B vector.
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.engine.embeddings = EmbeddingProvider::Callback(bow_callback("model-b", calls.clone()));
    options.engine.auto_embed = true;
    let before = calls.load(Ordering::Relaxed);
    let e = Engram::open(options).await.unwrap();
    background_settles(&e).await;
    // No write happened: only a run started at open can have called model B.
    assert!(
        calls.load(Ordering::Relaxed) > before,
        "a run started at open"
    );
    assert_eq!(
        e.embedding_status().model.unwrap().key(),
        "callback:model-b:24"
    );
    let (embedded, hits) = embed_and_search(&e).await;
    assert_eq!(embedded, 0, "the background run did them all");
    assert_eq!(hits[0].memory_id.as_deref(), Some(found.as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_callback_that_never_answers_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = CallbackOptions::new(
        "silent",
        Arc::new(|texts: Vec<String>| {
            Box::pin(async move {
                if texts.iter().any(|t| t == "hang") {
                    futures::future::pending::<()>().await;
                }
                Ok(texts.iter().map(|t| bag_of_words(t, 8)).collect())
            })
        }),
    );
    options.timeout = Duration::from_millis(200);
    let e = open(&dir, EmbeddingProvider::Callback(options)).await;
    assert_eq!(
        e.embed(vec!["fine".into()], InputKind::Document)
            .await
            .unwrap()
            .len(),
        1
    );
    let err = e
        .embed(vec!["hang".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_CALLBACK");
    assert!(err.to_string().contains("200 ms"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_callback_that_never_answers_its_first_call_is_a_callback_error() {
    // The first call is the probe that learns the width: a function that never settles there
    // is still the app's function failing (ENGRAM_CALLBACK, saying it timed out), not a model
    // that is missing.
    let dir = tempfile::tempdir().unwrap();
    let mut options = CallbackOptions::new(
        "silent-from-the-start",
        Arc::new(|_texts: Vec<String>| {
            Box::pin(async move {
                futures::future::pending::<()>().await;
                Ok(Vec::new())
            })
        }),
    );
    options.timeout = Duration::from_millis(200);
    let e = open(&dir, EmbeddingProvider::Callback(options)).await;
    let started = std::time::Instant::now();
    let err = e
        .embed(vec!["x".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.code(), "ENGRAM_CALLBACK", "{err}");
    assert!(err.to_string().contains("timed out after 200 ms"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Query and document prefixes

/// Every text the server was sent, in order.
fn sent(server: &Server) -> Vec<String> {
    server
        .requests()
        .iter()
        .flat_map(|r| inputs(&r.body))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn prefixes_mark_queries_and_stored_texts_and_the_document_one_names_the_model() {
    let server = Server::start(|seen, _| openai_model(seen, false));
    let dir = tempfile::tempdir().unwrap();
    let mut options = OpenAiOptions::new("e5-small");
    options.base_url = format!("{}/v1", server.url);
    options.prefixes = InputPrefixes {
        query: "query: ".into(),
        document: "passage: ".into(),
    };
    let e = open(&dir, EmbeddingProvider::OpenAi(options.clone())).await;
    let (found, expected) = remember_embed_and_search(&e).await;
    assert_eq!(found, expected);
    let key = e.embedding_status().model.unwrap().key();
    assert!(
        key.starts_with("openai:e5-small+d") && key.ends_with(":64"),
        "{key}"
    );

    // The probe goes bare; memories as passages; the search as a query, never as a passage.
    let texts = sent(&server);
    assert_eq!(texts[0], "engram embedding probe");
    for memory in MEMORIES {
        let as_passage = |t: &String| t.starts_with("passage: ") && t.ends_with(memory);
        assert!(texts.iter().any(as_passage), "{texts:?}");
    }
    let query = "how are flaky upload requests retried";
    assert!(texts.contains(&format!("query: {query}")), "{texts:?}");
    assert!(!texts
        .iter()
        .any(|t| t.contains(&format!("passage: {query}"))));

    // recall() embeds its query as a query; embed() does what it is told.
    let recall = e
        .recall(RecallRequest::new("where is the session token kept"))
        .await
        .unwrap();
    assert!(recall.skipped.is_empty(), "{:?}", recall.skipped);
    e.embed(vec!["red green".into()], InputKind::Query)
        .await
        .unwrap();
    e.embed(vec!["blue yellow".into()], InputKind::Document)
        .await
        .unwrap();
    let texts = sent(&server);
    for wanted in [
        "query: where is the session token kept",
        "query: red green",
        "passage: blue yellow",
    ] {
        assert!(texts.iter().any(|t| t == wanted), "{wanted}: {texts:?}");
    }
    e.close().await;

    // Another query prefix is the same model: nothing to embed again.
    let mut reopened = options.clone();
    reopened.prefixes.query = "search: ".into();
    let e = open(&dir, EmbeddingProvider::OpenAi(reopened)).await;
    let (embedded, _) = embed_and_search(&e).await;
    assert_eq!(embedded, 0);
    assert_eq!(e.embedding_status().model.unwrap().key(), key);
    e.close().await;

    // Another document prefix is another model: every memory is embedded again, with it.
    let mut reopened = options;
    reopened.prefixes.document = "search_document: ".into();
    let e = open(&dir, EmbeddingProvider::OpenAi(reopened)).await;
    let (embedded, hits) = embed_and_search(&e).await;
    assert_eq!(embedded, 3);
    assert_eq!(hits[0].memory_id.as_deref(), Some(found.as_str()));
    assert_ne!(e.embedding_status().model.unwrap().key(), key);
    let texts = sent(&server);
    assert!(texts
        .iter()
        .any(|t| t.starts_with("search_document: ") && t.ends_with(MEMORIES[0])));
}
