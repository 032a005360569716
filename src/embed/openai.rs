//! The OpenAI-compatible provider: `POST {baseUrl}/embeddings` with `{model, input: [..]}` (and
//! `dimensions` when asked), answered `{data: [{index, embedding: [..]}, ..]}`. Any base URL, so
//! the same code talks to OpenAI, Azure-style gateways, vLLM, llama.cpp's server, LM Studio or
//! LocalAI.
//!
//! OpenAI caps an input at 8,192 tokens and a request at 300,000 tokens and 2,048 inputs. A
//! token covers at least one byte, so clipping each text to 8,000 bytes and a request to 290,000
//! bytes keeps every request within the caps whatever the tokenizer (code runs ~4 bytes per
//! token, so real chunks are seldom clipped). Servers that ignore `dimensions` are caught by the
//! width check of every answer.

use serde_json::{json, Value};

use crate::embed::http::{HttpFailure, HttpOptions, JsonClient};
use crate::embed::remote::{number_array, Backend, BatchLimits, InputPrefixes};
use crate::error::{Error, Result};
use crate::text::clip_bytes;

/// OpenAI's own endpoint.
pub const DEFAULT_OPENAI_URL: &str = "https://api.openai.com/v1";

/// Bytes of one text sent unless told otherwise (below the 8,192-token input cap for any
/// tokenizer).
pub const DEFAULT_MAX_TEXT_BYTES: usize = 8_000;

/// Bytes of one request (below the 300,000-token request cap for any tokenizer).
const MAX_REQUEST_BYTES: usize = 290_000;

/// Inputs per request the API accepts.
pub const MAX_BATCH: usize = 2048;

/// Options of the OpenAI-compatible provider.
#[derive(Clone)]
pub struct OpenAiOptions {
    /// The API root (default [`DEFAULT_OPENAI_URL`]); `/embeddings` is appended.
    pub base_url: String,
    /// The model (`text-embedding-3-small`, or whatever the server serves).
    pub model: String,
    /// Sent as `Authorization: Bearer`; local servers usually need none.
    pub api_key: Option<String>,
    /// Output width to ask for (`text-embedding-3-*` shorten on request).
    pub dimensions: Option<usize>,
    /// Texts per request (default 64, at most [`MAX_BATCH`]).
    pub batch_size: usize,
    /// Bytes of one text sent (default [`DEFAULT_MAX_TEXT_BYTES`]); lower for short-context
    /// models.
    pub max_text_bytes: usize,
    /// Timeouts and retries.
    pub http: HttpOptions,
    /// Prefixes put before queries and stored texts, for models trained with them.
    pub prefixes: InputPrefixes,
}

impl std::fmt::Debug for OpenAiOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiOptions")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            // Never the key itself.
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("dimensions", &self.dimensions)
            .field("batch_size", &self.batch_size)
            .field("max_text_bytes", &self.max_text_bytes)
            .field("http", &self.http)
            .field("prefixes", &self.prefixes)
            .finish()
    }
}

impl OpenAiOptions {
    /// Options for `model` at OpenAI, with no key yet.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_OPENAI_URL.to_owned(),
            model: model.into(),
            api_key: None,
            dimensions: None,
            batch_size: 64,
            max_text_bytes: DEFAULT_MAX_TEXT_BYTES,
            http: HttpOptions::default(),
            prefixes: InputPrefixes::default(),
        }
    }
}

/// The OpenAI wire format.
pub(crate) struct OpenAi {
    options: OpenAiOptions,
    url: String,
    client: JsonClient,
}

impl OpenAi {
    pub(crate) fn new(options: OpenAiOptions) -> Self {
        let url = format!("{}/embeddings", options.base_url.trim_end_matches('/'));
        let client = JsonClient::new(&options.http, options.api_key.clone());
        Self {
            options,
            url,
            client,
        }
    }

    fn failure(&self, failure: HttpFailure) -> Error {
        let at = &self.options.base_url;
        match failure {
            HttpFailure::Status {
                status: 401 | 403,
                message,
            } => Error::ModelUnavailable(format!(
                "{at} refused the API key ({message}): set embeddings.apiKey"
            )),
            HttpFailure::Status {
                status: 404,
                message,
            } => Error::ModelUnavailable(format!(
                "{at} has no model '{}' or no /embeddings endpoint ({message})",
                self.options.model
            )),
            HttpFailure::Status {
                status: status @ (400 | 413),
                message,
            } => Error::Embedding(format!(
                "{at}: HTTP {status}: {message} (if a text is too long for the model, lower \
                 embeddings.maxTextBytes)"
            )),
            other => Error::Embedding(format!("{at}: {other}")),
        }
    }
}

impl Backend for OpenAi {
    fn provider(&self) -> &'static str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.options.model
    }

    fn dimensions(&self) -> Option<usize> {
        self.options.dimensions
    }

    fn limits(&self) -> BatchLimits {
        BatchLimits {
            max_texts: self.options.batch_size.min(MAX_BATCH),
            max_bytes: MAX_REQUEST_BYTES,
        }
    }

    fn location(&self) -> String {
        self.options.base_url.clone()
    }

    fn call(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let input: Vec<&str> = texts
            .iter()
            .map(|t| clip_bytes(t, self.options.max_text_bytes))
            .collect();
        let mut body = json!({ "model": self.options.model, "input": input });
        // Only when set: servers that do not know the field may reject it.
        if let Some(dims) = self.options.dimensions {
            body["dimensions"] = json!(dims);
        }
        let answer = self
            .client
            .post(&self.url, &body)
            .map_err(|f| self.failure(f))?;
        parse_data(&answer, texts.len())
            .map_err(|why| Error::Embedding(format!("{} answered {why}", self.options.base_url)))
    }
}

/// `{data: [{index, embedding}]}` as vectors in input order: sorted by `index` (the API does not
/// promise order), each index in `0..expected` exactly once.
fn parse_data(answer: &Value, expected: usize) -> std::result::Result<Vec<Vec<f32>>, String> {
    let data = answer
        .get("data")
        .and_then(Value::as_array)
        .ok_or("without a `data` array")?;
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        // An item without an index is taken to be in order (some servers omit it).
        let index = item
            .get("index")
            .map(|i| i.as_u64().map(|i| i as usize).ok_or("a non-integer index"))
            .transpose()?
            .unwrap_or(position);
        let embedding = item.get("embedding").ok_or("an item without `embedding`")?;
        if embedding.is_string() {
            return Err("base64 embeddings (ask the server for floats)".to_owned());
        }
        let vector = number_array(embedding).ok_or("an embedding that is not a number array")?;
        let slot = slots
            .get_mut(index)
            .ok_or_else(|| format!("index {index} for {expected} inputs"))?;
        if slot.replace(vector).is_some() {
            return Err(format!("index {index} twice"));
        }
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| format!("no embedding for input {i}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_put_in_input_order_and_checked() {
        let answer = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]}
        ]});
        assert_eq!(
            parse_data(&answer, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        let unindexed = json!({"data": [{"embedding": [1.0]}, {"embedding": [2.0]}]});
        assert_eq!(
            parse_data(&unindexed, 2).unwrap(),
            vec![vec![1.0], vec![2.0]]
        );
        for (bad, why) in [
            (json!({}), "data"),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}]}),
                "no embedding for input 1",
            ),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
                "twice",
            ),
            (
                json!({"data": [{"index": 5, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
                "index 5",
            ),
            (
                json!({"data": [{"index": 0, "embedding": "AACAPw=="}]}),
                "base64",
            ),
        ] {
            let err = parse_data(&bad, 2).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let mut options = OpenAiOptions::new("m");
        options.api_key = Some("sk-secret-value".into());
        let shown = format!("{options:?} {:?}", OpenAi::new(options.clone()).client);
        assert!(!shown.contains("sk-secret-value"), "{shown}");
    }
}
