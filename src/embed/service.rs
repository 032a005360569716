//! The engine's embedding service: which provider the engine was opened with, loading it on first
//! use (never at open: the local model is ~90 MB and open must stay fast), and what `status()`
//! reports.
//!
//! Loaded local models are shared process-wide: every engine (one per database file) asking for
//! the same model directory and settings gets the same weights, so two open files do not hold two
//! copies. A failed load is not remembered: installing the model later makes the next call work.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use crate::embed::{locate, Embedder, EmbedderId, LocalEmbedder, LocalModelOptions};
use crate::error::{Error, Result};

/// Which embedder an engine uses.
#[derive(Debug, Clone)]
pub enum EmbeddingProvider {
    /// No dense path: retrieval runs on BM25 and the graph.
    Disabled,
    /// The built-in model, from `model_dir` or the default search path.
    Local {
        /// Directory holding the model files (else `ENGRAM_MODEL_DIR`, else the per-user cache).
        model_dir: Option<PathBuf>,
        /// Token limit and threads.
        options: LocalModelOptions,
    },
}

impl Default for EmbeddingProvider {
    fn default() -> Self {
        EmbeddingProvider::Local {
            model_dir: None,
            options: LocalModelOptions::default(),
        }
    }
}

/// Where the dense path stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingState {
    /// Turned off by the open options.
    Disabled,
    /// The model's files were found; it loads on first use.
    Available,
    /// Loaded and in use.
    Ready,
    /// No usable model; `reason` says why.
    Unavailable,
}

impl EmbeddingState {
    /// Lower-case name, as JS sees it.
    pub fn as_str(self) -> &'static str {
        match self {
            EmbeddingState::Disabled => "disabled",
            EmbeddingState::Available => "available",
            EmbeddingState::Ready => "ready",
            EmbeddingState::Unavailable => "unavailable",
        }
    }
}

/// What [`EmbeddingService::status`] reports.
#[derive(Debug, Clone)]
pub struct EmbeddingStatus {
    /// `local` or `disabled`.
    pub provider: &'static str,
    /// Where the dense path stands.
    pub state: EmbeddingState,
    /// The loaded model's identity (only when `Ready`).
    pub model: Option<EmbedderId>,
    /// The model directory found (when `Available` or `Ready`).
    pub model_dir: Option<PathBuf>,
    /// Why the dense path is unavailable (when `Unavailable`).
    pub reason: Option<String>,
}

/// Process-wide loaded local models, by (canonical directory, token limit, threads).
type ModelKey = (PathBuf, usize, usize);

fn loaded_models() -> &'static Mutex<HashMap<ModelKey, Weak<LocalEmbedder>>> {
    static MODELS: std::sync::OnceLock<Mutex<HashMap<ModelKey, Weak<LocalEmbedder>>>> =
        std::sync::OnceLock::new();
    MODELS.get_or_init(Default::default)
}

/// Loads (or reuses) the local model in `dir`. Blocking.
fn shared_local_model(
    model_dir: Option<&std::path::Path>,
    options: &LocalModelOptions,
) -> Result<(Arc<LocalEmbedder>, PathBuf)> {
    let files = locate(model_dir)?;
    let dir = std::fs::canonicalize(&files.dir).unwrap_or_else(|_| files.dir.clone());
    let key = (dir.clone(), options.max_tokens, options.threads);
    // Held across the load so that concurrent first uses load once, not twice.
    let mut models = loaded_models().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(model) = models.get(&key).and_then(Weak::upgrade) {
        return Ok((model, dir));
    }
    let model = Arc::new(LocalEmbedder::load(&files, options)?);
    models.retain(|_, weak| weak.strong_count() > 0);
    models.insert(key, Arc::downgrade(&model));
    Ok((model, dir))
}

/// One engine's embedder, loaded on first use.
pub struct EmbeddingService {
    provider: EmbeddingProvider,
    loaded: Mutex<Option<(Arc<dyn Embedder>, PathBuf)>>,
}

impl std::fmt::Debug for EmbeddingService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingService")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

impl EmbeddingService {
    /// A service for `provider`; nothing is loaded yet.
    pub fn new(provider: EmbeddingProvider) -> Self {
        Self {
            provider,
            loaded: Mutex::new(None),
        }
    }

    /// The embedder, loading it if this is the first use. Blocking (reads and hashes the
    /// weights): call from a worker thread. `ENGRAM_MODEL_UNAVAILABLE` when disabled or missing.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((embedder, _)) = loaded.as_ref() {
            return Ok(embedder.clone());
        }
        match &self.provider {
            EmbeddingProvider::Disabled => Err(Error::ModelUnavailable(
                "embeddings are disabled for this engine (open option embeddings.provider = 'none')"
                    .to_owned(),
            )),
            EmbeddingProvider::Local { model_dir, options } => {
                let (model, dir) = shared_local_model(model_dir.as_deref(), options)?;
                let embedder: Arc<dyn Embedder> = model;
                *loaded = Some((embedder.clone(), dir));
                Ok(embedder)
            }
        }
    }

    /// Where the dense path stands, without loading anything.
    pub fn status(&self) -> EmbeddingStatus {
        let provider = match self.provider {
            EmbeddingProvider::Disabled => "disabled",
            EmbeddingProvider::Local { .. } => "local",
        };
        // A load in progress holds the lock for up to a second: report "available" rather than
        // wait for it.
        let loaded = match self.loaded.try_lock() {
            Ok(guard) => guard.clone(),
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().clone(),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some((embedder, dir)) = loaded.as_ref() {
            return EmbeddingStatus {
                provider,
                state: EmbeddingState::Ready,
                model: Some(embedder.id().clone()),
                model_dir: Some(dir.clone()),
                reason: None,
            };
        }
        let (state, model_dir, reason) = match &self.provider {
            EmbeddingProvider::Disabled => (EmbeddingState::Disabled, None, None),
            EmbeddingProvider::Local { model_dir, .. } => match locate(model_dir.as_deref()) {
                Ok(files) => (EmbeddingState::Available, Some(files.dir), None),
                Err(err) => (EmbeddingState::Unavailable, None, Some(err.to_string())),
            },
        };
        EmbeddingStatus {
            provider,
            state,
            model: None,
            model_dir,
            reason,
        }
    }
}
