//! The Ollama provider: `POST {baseUrl}/api/embed` with `{model, input: [..], truncate: true}`
//! (and `dimensions` when asked), answered `{embeddings: [[..], ..]}` in input order.
//!
//! Ollama truncates a text to the model's context itself (`truncate: true`); we only cap the
//! bytes sent. A model that is not pulled is answered 404 and becomes
//! `ENGRAM_MODEL_UNAVAILABLE` with the `ollama pull` that fixes it.

use serde_json::{json, Value};

use crate::embed::http::{HttpFailure, HttpOptions, JsonClient};
use crate::embed::remote::{Backend, BatchLimits, InputPrefixes};
use crate::error::{Error, Result};
use crate::text::clip_bytes;

/// Where Ollama listens unless told otherwise.
pub const DEFAULT_OLLAMA_URL: &str = "http://localhost:11434";

/// Bytes of one text sent: the server truncates to the model's context anyway, so this only
/// bounds the request (it is above any local embedding model's context).
const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Options of the Ollama provider.
#[derive(Debug, Clone)]
pub struct OllamaOptions {
    /// The server (default [`DEFAULT_OLLAMA_URL`]); `/api/embed` is appended.
    pub base_url: String,
    /// The model, as `ollama pull` names it (`nomic-embed-text`, `qwen3-embedding:4b`).
    pub model: String,
    /// Output width to ask for (models with Matryoshka training; others answer their width).
    pub dimensions: Option<usize>,
    /// Texts per request (default 64).
    pub batch_size: usize,
    /// Timeouts and retries.
    pub http: HttpOptions,
    /// Prefixes put before queries and stored texts, for models trained with them.
    pub prefixes: InputPrefixes,
}

impl OllamaOptions {
    /// Options for `model` on the default server.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_OLLAMA_URL.to_owned(),
            model: model.into(),
            dimensions: None,
            batch_size: 64,
            http: HttpOptions::default(),
            prefixes: InputPrefixes::default(),
        }
    }
}

/// The Ollama wire format.
pub(crate) struct Ollama {
    options: OllamaOptions,
    url: String,
    client: JsonClient,
}

impl Ollama {
    pub(crate) fn new(options: OllamaOptions) -> Self {
        let url = format!("{}/api/embed", options.base_url.trim_end_matches('/'));
        let client = JsonClient::new(&options.http, None);
        Self {
            options,
            url,
            client,
        }
    }
}

impl Backend for Ollama {
    fn provider(&self) -> &'static str {
        "ollama"
    }

    fn model(&self) -> &str {
        &self.options.model
    }

    fn dimensions(&self) -> Option<usize> {
        self.options.dimensions
    }

    fn limits(&self) -> BatchLimits {
        BatchLimits {
            max_texts: self.options.batch_size,
            max_bytes: 4 * 1024 * 1024,
        }
    }

    fn location(&self) -> String {
        self.options.base_url.clone()
    }

    fn call(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let input: Vec<&str> = texts
            .iter()
            .map(|t| clip_bytes(t, MAX_TEXT_BYTES))
            .collect();
        let mut body = json!({ "model": self.options.model, "input": input, "truncate": true });
        if let Some(dims) = self.options.dimensions {
            body["dimensions"] = json!(dims);
        }
        let answer = self
            .client
            .post(&self.url, &body)
            .map_err(|failure| match failure {
                HttpFailure::Status {
                    status: 404,
                    message,
                } => Error::ModelUnavailable(format!(
                    "ollama at {} has no model '{}' ({message}): run `ollama pull {}`",
                    self.options.base_url, self.options.model, self.options.model
                )),
                other => Error::Embedding(format!("ollama at {}: {other}", self.options.base_url)),
            })?;
        parse_embeddings(&answer).ok_or_else(|| {
            Error::Embedding(format!(
                "ollama at {} answered without an `embeddings` array of number arrays",
                self.options.base_url
            ))
        })
    }
}

/// `{embeddings: [[number]]}` as vectors.
fn parse_embeddings(answer: &Value) -> Option<Vec<Vec<f32>>> {
    answer
        .get("embeddings")?
        .as_array()?
        .iter()
        .map(crate::embed::remote::number_array)
        .collect()
}
