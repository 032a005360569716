//! The callback provider: an application's own function computes the vectors (a JS function in
//! the binding; any async closure in Rust). The embedder's thread (on the blocking pool) waits
//! for its future, within a timeout, so the function may run anywhere, including on the JS
//! thread; nothing on the JS thread may wait for an embedding run (see `schedule_embedding`).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::embed::remote::{Backend, BatchLimits, InputPrefixes};
use crate::error::{Error, Result};

/// The function: texts in, one vector per text out (any width, normalised for it).
pub type EmbedFn =
    Arc<dyn Fn(Vec<String>) -> BoxFuture<'static, Result<Vec<Vec<f32>>>> + Send + Sync>;

/// Options of the callback provider.
#[derive(Clone)]
pub struct CallbackOptions {
    /// The model's name, stored with its vectors: change it when the function's model changes,
    /// or old and new vectors would be compared.
    pub model: String,
    /// Texts per call (default 64).
    pub batch_size: usize,
    /// How long one call may take before it fails with `ENGRAM_CALLBACK` (default 60 s): a
    /// promise that never settles must not hold an embedding thread forever.
    pub timeout: Duration,
    /// The function.
    pub embed: EmbedFn,
    /// Prefixes put before queries and stored texts, for models trained with them.
    pub prefixes: InputPrefixes,
}

impl CallbackOptions {
    /// Options for `embed`, naming its model `model`.
    pub fn new(model: impl Into<String>, embed: EmbedFn) -> Self {
        Self {
            model: model.into(),
            batch_size: 64,
            timeout: Duration::from_secs(60),
            embed,
            prefixes: InputPrefixes::default(),
        }
    }
}

impl std::fmt::Debug for CallbackOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackOptions")
            .field("model", &self.model)
            .field("batch_size", &self.batch_size)
            .field("timeout", &self.timeout)
            .field("prefixes", &self.prefixes)
            .finish_non_exhaustive()
    }
}

/// The callback "wire format": a direct call.
pub(crate) struct Callback(pub(crate) CallbackOptions);

impl Backend for Callback {
    fn provider(&self) -> &'static str {
        "callback"
    }

    fn model(&self) -> &str {
        &self.0.model
    }

    fn dimensions(&self) -> Option<usize> {
        None
    }

    fn limits(&self) -> BatchLimits {
        BatchLimits {
            max_texts: self.0.batch_size,
            max_bytes: usize::MAX,
        }
    }

    fn location(&self) -> String {
        "the embed callback".to_owned()
    }

    fn call(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let owned = texts.iter().map(|t| (*t).to_owned()).collect();
        let answer = (self.0.embed)(owned);
        // Blocking is the embedder's contract: this runs on the blocking pool, whose runtime
        // gives the timer; a caller outside any runtime waits without one.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime
                .block_on(tokio::time::timeout(self.0.timeout, answer))
                .unwrap_or_else(|_| {
                    Err(Error::Callback(format!(
                        "embeddings.embed timed out after {} ms without settling \
                         (embeddings.timeoutMs)",
                        self.0.timeout.as_millis()
                    )))
                }),
            Err(_) => futures::executor::block_on(answer),
        }
    }
}
