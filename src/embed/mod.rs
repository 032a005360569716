//! Embeddings: the [`Embedder`] trait, the built-in local model and its installation, and the
//! providers that run elsewhere (Ollama, OpenAI-compatible servers, an application's callback).
//!
//! Every vector is L2-normalised, so cosine similarity is a dot product, and carries the
//! [`EmbedderId`] that produced it: vectors of different models are never compared.

mod bert;
pub mod callback;
pub mod download;
mod e5_file;
mod half_panels;
mod http;
pub mod install;
mod int8_panels;
pub mod local;
pub mod model_files;
pub mod ollama;
pub mod openai;
mod q4;
pub mod remote;
pub mod service;
mod tensors;
mod tiles;
mod unigram;

pub use callback::{CallbackOptions, EmbedFn};
pub use download::{download_model, HubFile, HubSource};
pub use http::HttpOptions;
pub(crate) use http::{HttpFailure, JsonClient};
pub use install::install_model;
pub use local::{FewTokenWeights, LocalEmbedder, LocalModelOptions};
pub use model_files::{locate, ModelFiles};
pub use ollama::OllamaOptions;
pub use openai::OpenAiOptions;
pub use remote::{InputPrefixes, RemoteEmbedder, MAX_PREFIX_BYTES};
pub use service::{EmbeddingProvider, EmbeddingService, EmbeddingState, EmbeddingStatus};

use crate::error::Result;

/// Identity of an embedding model; vectors are comparable only within one identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EmbedderId {
    /// Who runs the model: `local`, `ollama`, `openai`, `callback`.
    pub provider: String,
    /// The model's name as the provider knows it (for `local`, with its token limit).
    pub model: String,
    /// Vector width.
    pub dims: usize,
}

impl EmbedderId {
    /// One string naming the identity, stored with every vector (`provider:model:dims`).
    pub fn key(&self) -> String {
        format!("{}:{}:{}", self.provider, self.model, self.dims)
    }

    /// How wide this model spreads its cosine similarities, relative to the built-in model: 1
    /// for it and any model not known to differ. multilingual-e5-small's cosines crowd into a
    /// band about a sixth as wide (the median gap from a result list's best similarity to its
    /// 30th is 0.018-0.038 on the dev sets, against 0.117-0.234; `docs/BENCHMARK.md`), so its
    /// spread is 1/6. Distances and thresholds tuned on the built-in model are scaled by it.
    pub fn similarity_spread(&self) -> f64 {
        let e5 =
            self.model.starts_with("multilingual-e5-small") || self.model.starts_with("e5-small-");
        if self.provider == "local" && e5 {
            1.0 / 6.0
        } else {
            1.0
        }
    }

    /// A cosine threshold set on the built-in model's scale, moved to this model's: the same
    /// distance below a perfect match, times [`Self::similarity_spread`].
    pub fn rescaled_threshold(&self, threshold: f64) -> f64 {
        1.0 - (1.0 - threshold) * self.similarity_spread()
    }
}

/// Turns texts into vectors.
///
/// `embed` blocks (it runs a model or waits on a server): call it from a worker thread, never from
/// the JS thread.
pub trait Embedder: Send + Sync {
    /// Which model this is.
    fn id(&self) -> &EmbedderId;

    /// One L2-normalised vector of `id().dims` floats per text, in input order: texts to be
    /// stored and found (chunks, definitions, memories).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;

    /// [`Embedder::embed`] for search queries. A model trained with a query prefix or
    /// instruction gets it here (see [`InputPrefixes`]); for a symmetric model such as the
    /// built-in one, the same as `embed`.
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed(texts)
    }
}

/// What a text to embed is: a search query or a text to store. Picks
/// [`Embedder::embed_queries`] or [`Embedder::embed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputKind {
    /// A text stored with its vector and searched for (the default).
    #[default]
    Document,
    /// A search query.
    Query,
}

impl InputKind {
    /// `texts` embedded as this kind of input.
    pub fn embed(self, embedder: &dyn Embedder, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        match self {
            InputKind::Document => embedder.embed(texts),
            InputKind::Query => embedder.embed_queries(texts),
        }
    }
}
