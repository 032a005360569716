//! The engine's embedding service: which provider the engine was opened with, loading it on first
//! use (never at open: the local model is ~90 MB, a server may be down, and open must stay fast),
//! and what `status()` reports.
//!
//! Loaded local models are shared process-wide: every engine (one per database file) asking for
//! the same model directory and settings gets the same weights, so two open files do not hold two
//! copies. A failed load is not remembered: installing the model or starting the server later
//! makes the next call work. A fallback list loads the first of its providers that works.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use crate::embed::callback::Callback;
use crate::embed::ollama::Ollama;
use crate::embed::openai::{OpenAi, DEFAULT_OPENAI_URL};
use crate::embed::remote::{Backend, InputPrefixes, RemoteEmbedder};
use crate::embed::{
    locate, CallbackOptions, Embedder, EmbedderId, LocalEmbedder, LocalModelOptions, OllamaOptions,
    OpenAiOptions,
};
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
    /// A model served by Ollama (`/api/embed`).
    Ollama(OllamaOptions),
    /// A model served over the OpenAI embeddings API (OpenAI itself or a compatible server).
    OpenAi(OpenAiOptions),
    /// The application's own function.
    Callback(CallbackOptions),
    /// The first of these that loads, tried in order at first use (for example Ollama, then
    /// the built-in model). The one chosen stays for the engine's life; vectors record which.
    Fallback(Vec<EmbeddingProvider>),
}

impl Default for EmbeddingProvider {
    fn default() -> Self {
        EmbeddingProvider::Local {
            model_dir: None,
            options: LocalModelOptions::default(),
        }
    }
}

impl EmbeddingProvider {
    /// The provider's name as `status()` reports it before loading: `local`, `ollama`,
    /// `openai`, `callback`, `disabled`, or the names of a fallback list joined by `,`.
    pub fn name(&self) -> String {
        match self {
            EmbeddingProvider::Disabled => "disabled".to_owned(),
            EmbeddingProvider::Local { .. } => "local".to_owned(),
            EmbeddingProvider::Ollama(_) => "ollama".to_owned(),
            EmbeddingProvider::OpenAi(_) => "openai".to_owned(),
            EmbeddingProvider::Callback(_) => "callback".to_owned(),
            EmbeddingProvider::Fallback(list) => list
                .iter()
                .map(EmbeddingProvider::name)
                .collect::<Vec<_>>()
                .join(","),
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
    /// The loaded provider, else the configured one (see [`EmbeddingProvider::name`]).
    pub provider: String,
    /// Where the dense path stands.
    pub state: EmbeddingState,
    /// The loaded model's identity (only when `Ready`).
    pub model: Option<EmbedderId>,
    /// The local model directory found (when `Available` or `Ready`).
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
        tracing::debug!(dir = %dir.display(), "reusing the loaded local model");
        return Ok((model, dir));
    }
    let started = std::time::Instant::now();
    let model = match LocalEmbedder::load(&files, options) {
        Ok(model) => Arc::new(model),
        Err(e) => {
            tracing::warn!(
                dir = %dir.display(),
                code = e.code(),
                error = %e,
                "loading the local model failed"
            );
            return Err(e);
        }
    };
    tracing::info!(
        dir = %dir.display(),
        max_tokens = options.max_tokens as u64,
        threads = options.threads as u64,
        ms = crate::log::ms(started.elapsed()),
        "loaded the local model"
    );
    models.retain(|_, weak| weak.strong_count() > 0);
    models.insert(key, Arc::downgrade(&model));
    Ok((model, dir))
}

/// An embedder and, for the local model, the directory it came from.
type Loaded = (Arc<dyn Embedder>, Option<PathBuf>);

/// Loads `provider` (connecting to a server, or reading the weights). Blocking.
fn load(provider: &EmbeddingProvider) -> Result<Loaded> {
    let remote = |backend: Box<dyn Backend>, prefixes: &InputPrefixes| -> Result<Loaded> {
        Ok((
            Arc::new(RemoteEmbedder::connect(backend, prefixes.clone())?),
            None,
        ))
    };
    match provider {
        EmbeddingProvider::Disabled => Err(Error::ModelUnavailable(
            "embeddings are disabled for this engine (open option embeddings.provider = 'none')"
                .to_owned(),
        )),
        EmbeddingProvider::Local { model_dir, options } => {
            let (model, dir) = shared_local_model(model_dir.as_deref(), options)?;
            Ok((model, Some(dir)))
        }
        EmbeddingProvider::Ollama(options) => {
            remote(Box::new(Ollama::new(options.clone())), &options.prefixes)
        }
        EmbeddingProvider::OpenAi(options) => {
            if let Some(reason) = missing_key(options) {
                return Err(Error::ModelUnavailable(reason));
            }
            remote(Box::new(OpenAi::new(options.clone())), &options.prefixes)
        }
        EmbeddingProvider::Callback(options) => {
            remote(Box::new(Callback(options.clone())), &options.prefixes)
        }
        EmbeddingProvider::Fallback(list) => {
            let mut reasons = Vec::with_capacity(list.len());
            for candidate in list {
                match load(candidate) {
                    Ok(loaded) => return Ok(loaded),
                    Err(e) => reasons.push(format!("{}: {e}", candidate.name())),
                }
            }
            Err(Error::ModelUnavailable(format!(
                "no provider of the fallback list loaded ({})",
                reasons.join("; ")
            )))
        }
    }
}

/// Why OpenAI itself cannot be asked: it needs a key (compatible servers often do not).
fn missing_key(options: &OpenAiOptions) -> Option<String> {
    let official = options.base_url.trim_end_matches('/') == DEFAULT_OPENAI_URL;
    (official && options.api_key.is_none())
        .then(|| "OpenAI needs an API key: set embeddings.apiKey (or OPENAI_API_KEY)".to_owned())
}

/// Where an unloaded `provider` stands, without loading it or calling a server: the local model
/// is looked for on disk; a server or callback is assumed reachable until a first use fails
/// (the service then reports that failure).
fn unloaded_state(
    provider: &EmbeddingProvider,
) -> (EmbeddingState, Option<PathBuf>, Option<String>) {
    match provider {
        EmbeddingProvider::Disabled => (EmbeddingState::Disabled, None, None),
        EmbeddingProvider::Local { model_dir, .. } => match locate(model_dir.as_deref()) {
            Ok(files) => (EmbeddingState::Available, Some(files.dir), None),
            Err(err) => (EmbeddingState::Unavailable, None, Some(err.to_string())),
        },
        EmbeddingProvider::OpenAi(options) => match missing_key(options) {
            Some(reason) => (EmbeddingState::Unavailable, None, Some(reason)),
            None => (EmbeddingState::Available, None, None),
        },
        EmbeddingProvider::Ollama(_) | EmbeddingProvider::Callback(_) => {
            (EmbeddingState::Available, None, None)
        }
        EmbeddingProvider::Fallback(list) => {
            let mut reasons = Vec::new();
            for candidate in list {
                match unloaded_state(candidate) {
                    (EmbeddingState::Available, dir, _) => {
                        return (EmbeddingState::Available, dir, None)
                    }
                    (_, _, reason) => reasons.push(format!(
                        "{}: {}",
                        candidate.name(),
                        reason.unwrap_or_else(|| "disabled".to_owned())
                    )),
                }
            }
            (EmbeddingState::Unavailable, None, Some(reasons.join("; ")))
        }
    }
}

/// After a remote provider failed to load, calls fail at once with the same reason for this
/// long instead of probing again: an unreachable host costs a connect timeout per probe, and
/// every dense search would pay it.
const REMOTE_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(15);

/// One engine's embedder, loaded on first use.
pub struct EmbeddingService {
    provider: EmbeddingProvider,
    loaded: Mutex<Option<Loaded>>,
    /// The last failed load of a remote provider: when, and why (what `status()` reports).
    last_failure: Mutex<Option<(std::time::Instant, String)>>,
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
            last_failure: Mutex::new(None),
        }
    }

    /// The embedder, loading it if this is the first use. Blocking (reads the weights, or
    /// makes one probe call to a server): call from a worker thread. `ENGRAM_MODEL_UNAVAILABLE`
    /// when disabled, missing or unreachable.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((embedder, _)) = loaded.as_ref() {
            return Ok(embedder.clone());
        }
        // The local model is looked for on every call: installing it must work at once.
        let remote = !matches!(
            self.provider,
            EmbeddingProvider::Local { .. } | EmbeddingProvider::Disabled
        );
        let mut last_failure = self.last_failure.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, reason)) = last_failure.as_ref() {
            if remote && at.elapsed() < REMOTE_RETRY_AFTER {
                return Err(Error::ModelUnavailable(format!(
                    "{reason} (tried {} s ago; next try after {} s)",
                    at.elapsed().as_secs(),
                    REMOTE_RETRY_AFTER.as_secs()
                )));
            }
        }
        let started = std::time::Instant::now();
        match load(&self.provider) {
            Ok((embedder, dir)) => {
                tracing::debug!(
                    provider = %self.provider.name(),
                    model = %embedder.id().key(),
                    ms = crate::log::ms(started.elapsed()),
                    "embedding provider ready"
                );
                *last_failure = None;
                *loaded = Some((embedder.clone(), dir));
                Ok(embedder)
            }
            Err(error) => {
                // A local model that is not installed is an expected state, asked about on
                // every dense call until it is: debug. Anything else is worth a warning
                // (a remote provider is asked again after 15 s at the earliest).
                if remote || !matches!(error, Error::ModelUnavailable(_)) {
                    tracing::warn!(
                        provider = %self.provider.name(),
                        code = error.code(),
                        error = %error,
                        "the embedding provider is unavailable"
                    );
                } else {
                    tracing::debug!(
                        provider = %self.provider.name(),
                        error = %error,
                        "no embedding model"
                    );
                }
                if remote {
                    let reason = match &error {
                        Error::ModelUnavailable(why) => why.clone(),
                        other => other.to_string(),
                    };
                    *last_failure = Some((std::time::Instant::now(), reason));
                }
                Err(error)
            }
        }
    }

    /// Where the dense path stands, without loading anything or calling a server.
    pub fn status(&self) -> EmbeddingStatus {
        // A load in progress holds the lock for up to a second (or a server's answer): report
        // "available" rather than wait for it.
        let loaded = match self.loaded.try_lock() {
            Ok(guard) => guard.clone(),
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().clone(),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some((embedder, dir)) = loaded {
            return EmbeddingStatus {
                provider: embedder.id().provider.clone(),
                state: EmbeddingState::Ready,
                model: Some(embedder.id().clone()),
                model_dir: dir,
                reason: None,
            };
        }
        let failure = match self.last_failure.try_lock() {
            Ok(guard) => guard.as_ref().map(|(_, reason)| reason.clone()),
            Err(std::sync::TryLockError::Poisoned(e)) => {
                e.into_inner().as_ref().map(|(_, reason)| reason.clone())
            }
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        let (state, model_dir, reason) = match failure {
            // What the last attempt found beats the guess made without calling anyone.
            Some(reason) => (EmbeddingState::Unavailable, None, Some(reason)),
            None => unloaded_state(&self.provider),
        };
        EmbeddingStatus {
            provider: self.provider.name(),
            state,
            model: None,
            model_dir,
            reason,
        }
    }
}
