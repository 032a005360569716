//! Stage 3 of recall: an optional reranker that reads the query and each of the fused top
//! items together (a cross-encoder, usually) and scores them again. None is configured by
//! default; recall then keeps the fused order.
//!
//! Two providers: an HTTP server speaking the common rerank wire format (Cohere's `/v1/rerank`,
//! which Jina, Voyage, Mixedbread and local servers such as Infinity or llama.cpp's also speak):
//! `POST {model, query, documents, top_n}` answered `{results: [{index, relevance_score}]}`;
//! and the application's own async function. A reranker that fails never fails the recall: the
//! stage is reported in `skipped` and the fused order stands.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::embed::{HttpFailure, HttpOptions, JsonClient};
use crate::error::{Error, Result};
use crate::text::clip_bytes;

/// Items reranked when the request does not say (the fused top 30).
pub const DEFAULT_RERANK_DEPTH: u32 = 30;
/// Most items one recall reranks.
pub const MAX_RERANK_DEPTH: u32 = 200;
/// Bytes of one document sent unless told otherwise (rerank models read ~512 tokens).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 4_000;

/// Scores documents against a query. Implementations must be cheap to call concurrently.
pub trait Reranker: Send + Sync {
    /// `provider:model`, for messages.
    fn name(&self) -> String;

    /// One relevance score per document, in the documents' order; higher is more relevant.
    /// Scores need only be comparable within one call.
    fn rerank(&self, query: String, documents: Vec<String>)
        -> BoxFuture<'static, Result<Vec<f32>>>;
}

/// The configured reranker of an engine, if any (an engine option).
#[derive(Clone, Default)]
pub struct RerankerProvider(pub Option<Arc<dyn Reranker>>);

impl std::fmt::Debug for RerankerProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(reranker) => write!(f, "RerankerProvider({})", reranker.name()),
            None => f.write_str("RerankerProvider(none)"),
        }
    }
}

/// The function of the callback provider: query and documents in, one score per document out.
pub type RerankFn =
    Arc<dyn Fn(String, Vec<String>) -> BoxFuture<'static, Result<Vec<f32>>> + Send + Sync>;

/// The application's own reranking function.
pub struct CallbackReranker {
    model: String,
    timeout: Duration,
    rerank: RerankFn,
}

impl CallbackReranker {
    /// `rerank` under the name `model`, given 30 s per call.
    pub fn new(model: impl Into<String>, rerank: RerankFn) -> Self {
        Self {
            model: model.into(),
            timeout: Duration::from_secs(30),
            rerank,
        }
    }

    /// How long one call may take before it fails with `ENGRAM_RERANK`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl Reranker for CallbackReranker {
    fn name(&self) -> String {
        format!("callback:{}", self.model)
    }

    fn rerank(
        &self,
        query: String,
        documents: Vec<String>,
    ) -> BoxFuture<'static, Result<Vec<f32>>> {
        let expected = documents.len();
        let answer = (self.rerank)(query, documents);
        let timeout = self.timeout;
        Box::pin(async move {
            let scores = tokio::time::timeout(timeout, answer).await.map_err(|_| {
                Error::Rerank(format!(
                    "the rerank callback did not answer within {} ms",
                    timeout.as_millis()
                ))
            })??;
            checked(scores, expected).map_err(|why| Error::Rerank(format!("the callback {why}")))
        })
    }
}

/// Options of the HTTP provider.
#[derive(Clone)]
pub struct HttpRerankOptions {
    /// The endpoint itself (`https://api.cohere.com/v1/rerank`, `http://localhost:7997/rerank`).
    pub url: String,
    /// The model (`rerank-v3.5`, `jina-reranker-v2-base-multilingual`, ...).
    pub model: String,
    /// Sent as `Authorization: Bearer`; local servers usually need none.
    pub api_key: Option<String>,
    /// Bytes of one document sent (default [`DEFAULT_MAX_DOCUMENT_BYTES`]).
    pub max_document_bytes: usize,
    /// Timeouts and retries (default 10 s and one retry: a recall waits for this).
    pub http: HttpOptions,
}

impl HttpRerankOptions {
    /// Options for `model` at `url`, with no key.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            model: model.into(),
            api_key: None,
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            http: HttpOptions {
                timeout: Duration::from_secs(10),
                max_retries: 1,
            },
        }
    }
}

impl std::fmt::Debug for HttpRerankOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRerankOptions")
            .field("url", &self.url)
            .field("model", &self.model)
            // Never the key itself.
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_document_bytes", &self.max_document_bytes)
            .field("http", &self.http)
            .finish()
    }
}

/// A rerank server.
pub struct HttpReranker(Arc<HttpInner>);

struct HttpInner {
    options: HttpRerankOptions,
    client: JsonClient,
}

impl HttpReranker {
    /// A client of the server `options` names (nothing is sent until the first recall).
    pub fn new(options: HttpRerankOptions) -> Self {
        let client = JsonClient::new(&options.http, options.api_key.clone());
        HttpReranker(Arc::new(HttpInner { options, client }))
    }
}

impl Reranker for HttpReranker {
    fn name(&self) -> String {
        format!("http:{}", self.0.options.model)
    }

    fn rerank(
        &self,
        query: String,
        documents: Vec<String>,
    ) -> BoxFuture<'static, Result<Vec<f32>>> {
        let inner = Arc::clone(&self.0);
        // One deadline for the whole call: the client's timeout is per attempt, and a
        // retry may wait for the server's Retry-After.
        let deadline = inner.options.http.timeout;
        Box::pin(async move {
            // The client blocks: keep it off the async workers.
            let call = tokio::task::spawn_blocking(move || inner.call(&query, &documents));
            tokio::time::timeout(deadline, call)
                .await
                .map_err(|_| {
                    Error::Rerank(format!(
                        "the rerank server did not answer within {} ms",
                        deadline.as_millis()
                    ))
                })?
                .map_err(|e| Error::Internal(format!("rerank task failed: {e}")))?
        })
    }
}

impl HttpInner {
    fn call(&self, query: &str, documents: &[String]) -> Result<Vec<f32>> {
        let at = &self.options.url;
        let clipped: Vec<&str> = documents
            .iter()
            .map(|d| clip_bytes(d, self.options.max_document_bytes))
            .collect();
        let body = json!({
            "model": self.options.model,
            "query": query,
            "documents": clipped,
            "top_n": documents.len(),
            "return_documents": false,
        });
        let answer = self
            .client
            .post(at, &body)
            .map_err(|failure| match failure {
                HttpFailure::Status {
                    status: 401 | 403,
                    message,
                } => Error::Rerank(format!(
                    "{at} refused the API key ({message}): set reranker.apiKey"
                )),
                HttpFailure::Status {
                    status: 404,
                    message,
                } => Error::Rerank(format!(
                    "{at} has no model '{}' or is no rerank endpoint ({message})",
                    self.options.model
                )),
                other => Error::Rerank(format!("{at}: {other}")),
            })?;
        scores_from_answer(&answer, documents.len())
            .map_err(|why| Error::Rerank(format!("{at} answered {why}")))
    }
}

/// The scores of a rerank answer in document order: `{results | data: [{index,
/// relevance_score | score}]}` or a bare array of such items (Hugging Face's TEI). Documents
/// the server left out (it ranked fewer than asked) score lowest (`f32::MIN`).
fn scores_from_answer(answer: &Value, expected: usize) -> std::result::Result<Vec<f32>, String> {
    let items = answer
        .get("results")
        .or_else(|| answer.get("data"))
        .unwrap_or(answer)
        .as_array()
        .ok_or("without a `results` array")?;
    let mut scores: Vec<Option<f32>> = vec![None; expected];
    for item in items {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .ok_or("an item without an integer `index`")? as usize;
        let score = item
            .get("relevance_score")
            .or_else(|| item.get("score"))
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite())
            .ok_or("an item without a finite `relevance_score`")?;
        let slot = scores
            .get_mut(index)
            .ok_or_else(|| format!("index {index} for {expected} documents"))?;
        if slot.replace(score as f32).is_some() {
            return Err(format!("index {index} twice"));
        }
    }
    Ok(scores.into_iter().map(|s| s.unwrap_or(f32::MIN)).collect())
}

/// `scores` when it holds one finite score per document.
pub(crate) fn checked(scores: Vec<f32>, expected: usize) -> std::result::Result<Vec<f32>, String> {
    if scores.len() != expected {
        return Err(format!(
            "returned {} scores for {expected} documents",
            scores.len()
        ));
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(format!(
            "returned a score that is not a finite number at {i}"
        ));
    }
    Ok(scores)
}

/// The order of positions by descending score; equal scores keep their order.
pub(crate) fn order_by_scores(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_of_every_common_shape_become_scores_in_document_order() {
        let cohere = json!({"results": [
            {"index": 2, "relevance_score": 0.9},
            {"index": 0, "relevance_score": 0.5}
        ]});
        assert_eq!(
            scores_from_answer(&cohere, 3).unwrap(),
            vec![0.5, f32::MIN, 0.9]
        );
        let voyage = json!({"data": [{"index": 0, "relevance_score": 0.1}]});
        assert_eq!(scores_from_answer(&voyage, 1).unwrap(), vec![0.1]);
        let tei = json!([{"index": 1, "score": 2.0}, {"index": 0, "score": -1.0}]);
        assert_eq!(scores_from_answer(&tei, 2).unwrap(), vec![-1.0, 2.0]);
    }

    #[test]
    fn malformed_answers_are_refused_with_the_reason() {
        let no_results = scores_from_answer(&json!({"ok": true}), 1).unwrap_err();
        assert!(no_results.contains("results"), "{no_results}");
        let out_of_range =
            scores_from_answer(&json!({"results": [{"index": 5, "relevance_score": 1}]}), 2)
                .unwrap_err();
        assert!(out_of_range.contains("index 5"), "{out_of_range}");
        let twice = json!({"results": [
            {"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 2}
        ]});
        assert!(scores_from_answer(&twice, 1).unwrap_err().contains("twice"));
        let no_score = json!({"results": [{"index": 0}]});
        assert!(scores_from_answer(&no_score, 1)
            .unwrap_err()
            .contains("relevance_score"));
        assert!(checked(vec![1.0], 2)
            .unwrap_err()
            .contains("1 scores for 2"));
        assert!(checked(vec![f32::NAN], 1).unwrap_err().contains("finite"));
    }

    #[test]
    fn the_order_is_by_descending_score_and_stable() {
        assert_eq!(order_by_scores(&[0.1, 0.9, 0.1, 0.5]), vec![1, 3, 0, 2]);
        assert!(order_by_scores(&[]).is_empty());
    }
}
