//! The callback provider: an application's own function computes the vectors (a JS function in
//! the binding; any async closure in Rust). The embedder's thread waits for its future, so the
//! function may run anywhere, including on the JS thread while this one blocks.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::embed::remote::{Backend, BatchLimits};
use crate::error::Result;

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
    /// The function.
    pub embed: EmbedFn,
}

impl std::fmt::Debug for CallbackOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackOptions")
            .field("model", &self.model)
            .field("batch_size", &self.batch_size)
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
        // Blocking is the embedder's contract: this runs on the blocking pool.
        futures::executor::block_on((self.0.embed)(owned))
    }
}
