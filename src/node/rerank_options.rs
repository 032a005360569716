//! The `reranker` open option: stage 3 of `recall()`, either a rerank server (the Cohere-style
//! wire format) or the app's own function, validated into the core's reranker; and the bridge
//! that lets the core call a JS `rerank` function.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use super::strict::Count;
use crate::error::Error as CoreError;
use crate::retrieval::rerank::{
    CallbackReranker, HttpRerankOptions, HttpReranker, RerankFn, RerankerProvider,
};

/// What a JS `rerank` function may return: scores or a Promise of them.
type RerankReturn = Either<Promise<Vec<f64>>, Vec<f64>>;

/// A JS `rerank(query, documents)` function callable from any thread. Weak: it does not keep
/// the process alive on its own (a pending `recall()` does).
type RerankCallback = ThreadsafeFunction<
    FnArgs<(String, Vec<String>)>,
    RerankReturn,
    FnArgs<(String, Vec<String>)>,
    Status,
    false,
    true,
    0,
>;

/// The `reranker` option of `Engram.open`: stage 3 of `recall()`, which scores the fused top
/// items again (`rerankDepth`, default 30) with a model that reads the query and each item
/// together. None by default. A reranker that fails or times out never fails a recall: the
/// stage is named in `skipped` (`rerank: ENGRAM_RERANK: ...`) and the fused order stands.
///
/// ```ts
/// // Cohere, or any server speaking its format (Jina, Voyage, Infinity, llama.cpp...)
/// reranker: { url: 'https://api.cohere.com/v1/rerank', model: 'rerank-v3.5',
///             apiKey: process.env.COHERE_API_KEY }
/// // Your own function: one score per document, higher is more relevant
/// reranker: { model: 'my-cross-encoder', rerank: async (query, documents) => scores }
/// ```
#[napi(object, object_to_js = false)]
pub struct RerankerOptions {
    /// The model's name (sent to the server; names a callback in messages).
    pub model: String,
    /// The rerank endpoint itself (`https://api.cohere.com/v1/rerank`); required unless
    /// `rerank` is given. It is POSTed `{model, query, documents, top_n}` and must answer
    /// `{results: [{index, relevance_score}]}` (`data` or a bare array, and `score`, are
    /// accepted too).
    pub url: Option<String>,
    /// Sent as `Authorization: Bearer` to the server.
    pub api_key: Option<String>,
    /// Bytes of one document sent to the server (default 4000).
    #[napi(ts_type = "number")]
    pub max_document_bytes: Option<Count>,
    /// How long one rerank may take, in ms (default 10000 for a server, 30000 for a function).
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Count>,
    /// Your own reranker: called with the query and the documents (a chunk's contextual
    /// prefix and text, or a memory's content); returns one score per document, in order.
    #[napi(ts_type = "(query: string, documents: string[]) => number[] | Promise<number[]>")]
    pub rerank: Option<RerankFunction>,
}

/// The core's reranker for the JS option.
pub(crate) fn core_reranker(
    o: RerankerOptions,
) -> std::result::Result<RerankerProvider, CoreError> {
    let model = o.model.trim().to_owned();
    if model.is_empty() {
        return Err(CoreError::invalid("reranker.model must not be empty"));
    }
    if o.timeout_ms == Some(Count(0)) {
        return Err(CoreError::invalid("reranker.timeoutMs must be positive"));
    }
    let timeout = o.timeout_ms.map(|ms| Duration::from_millis(u64::from(ms)));
    match (o.rerank, o.url) {
        (Some(_), Some(_)) => Err(CoreError::invalid(
            "reranker takes either url (a server) or rerank (a function), not both",
        )),
        (None, None) => Err(CoreError::invalid(
            "reranker needs url (a rerank server) or rerank (a function)",
        )),
        (Some(function), None) => {
            let mut reranker = CallbackReranker::new(model, rerank_fn(function));
            if let Some(timeout) = timeout {
                reranker = reranker.with_timeout(timeout);
            }
            Ok(RerankerProvider(Some(Arc::new(reranker))))
        }
        (None, Some(url)) => {
            let url = super::embed_options::http_url(url, "reranker.url")?;
            let mut options = HttpRerankOptions::new(url, model);
            options.api_key = o.api_key.filter(|k| !k.is_empty());
            if let Some(bytes) = o.max_document_bytes.map(u32::from) {
                if bytes < 64 {
                    return Err(CoreError::invalid(format!(
                        "reranker.maxDocumentBytes must be at least 64, got {bytes}"
                    )));
                }
                options.max_document_bytes = bytes as usize;
            }
            if let Some(timeout) = timeout {
                options.http.timeout = timeout;
            }
            Ok(RerankerProvider(Some(Arc::new(HttpReranker::new(options)))))
        }
    }
}

/// A JS `rerank` function, checked to be one before it is wrapped.
pub struct RerankFunction(RerankCallback);

impl TypeName for RerankFunction {
    fn type_name() -> &'static str {
        "Function"
    }

    fn value_type() -> ValueType {
        ValueType::Function
    }
}

impl ValidateNapiValue for RerankFunction {}

impl FromNapiValue for RerankFunction {
    unsafe fn from_napi_value(
        env: napi::sys::napi_env,
        value: napi::sys::napi_value,
    ) -> Result<Self> {
        // SAFETY: the caller hands a live value of `env`'s current scope.
        unsafe { super::args::js_function(env, value, "reranker.rerank") }.map(RerankFunction)
    }
}

/// The core's view of a JS `rerank` function.
fn rerank_fn(RerankFunction(function): RerankFunction) -> RerankFn {
    let function = Arc::new(function);
    Arc::new(move |query: String, documents: Vec<String>| {
        let function = Arc::clone(&function);
        Box::pin(async move {
            let answer = function
                .call_async_catch((query, documents).into())
                .await
                .map_err(|e| failed("threw or returned something else than scores", e))?;
            let scores = match answer {
                Either::A(promise) => promise
                    .await
                    .map_err(|e| failed("rejected or resolved to something else than scores", e))?,
                Either::B(scores) => scores,
            };
            Ok(scores.into_iter().map(|s| s as f32).collect())
        })
    })
}

fn failed(how: &str, e: napi::Error) -> CoreError {
    CoreError::Rerank(format!("reranker.rerank {how}: {}", e.reason))
}
