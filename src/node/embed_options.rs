//! The `embeddings` open option: which provider an engine embeds with (the built-in model, an
//! Ollama or OpenAI-compatible server, or the app's own function), validated into the core's
//! [`EmbeddingProvider`], and the bridge that lets the core call a JS `embed` function.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use super::strict::Count;
use crate::embed::{
    CallbackOptions, EmbedFn, EmbeddingProvider, FewTokenWeights, HttpOptions, InputPrefixes,
    LocalModelOptions, OllamaOptions, OpenAiOptions,
};
use crate::error::Error as CoreError;

type Converted<T> = std::result::Result<T, CoreError>;

/// What a JS `embed` function may return: vectors or a Promise of them.
type EmbedReturn = Either<Promise<JsVectors>, JsVectors>;

/// A JS `embed` function callable from the embedding threads. Weak: it does not keep the
/// process alive on its own (a running `embedPending()` or `embed()` does).
pub type EmbedCallback =
    ThreadsafeFunction<Vec<String>, EmbedReturn, Vec<String>, Status, false, true, 0>;

/// The `embeddings` option of `Engram.open`: which embedder the engine uses. The first open of a
/// file decides (like every engine option). Models load on first use, never at open; a server
/// is first called then too.
///
/// ```ts
/// // Ollama, falling back to the built-in model when Ollama is not running
/// embeddings: { provider: 'ollama', model: 'nomic-embed-text', fallback: [{ provider: 'local' }] }
/// // OpenAI (or any compatible server: set baseUrl)
/// embeddings: { provider: 'openai', model: 'text-embedding-3-small', dimensions: 1024,
///               apiKey: process.env.OPENAI_API_KEY }
/// // Your own function
/// embeddings: { model: 'my-model-v1', embed: async (texts) => myModel.embed(texts) }
/// ```
#[napi(object, object_to_js = false)]
pub struct EmbeddingsOptions {
    /// `'local'` (default: the built-in all-MiniLM-L6-v2, no network), `'ollama'`
    /// (`POST {baseUrl}/api/embed`), `'openai'` (`POST {baseUrl}/embeddings`, OpenAI or any
    /// compatible server), `'callback'` (the `embed` function; the default when `embed` is
    /// given) or `'none'` (no dense path; retrieval runs on BM25 and the graph).
    #[napi(ts_type = "'local' | 'ollama' | 'openai' | 'callback' | 'none'")]
    pub provider: Option<String>,
    /// The model's name: required for `'ollama'`, `'openai'` and `'callback'`. Stored with every
    /// vector (`provider:model:dims`): vectors of different models are never compared, and a
    /// new name re-embeds. Name a callback's model so that it changes when the model does.
    pub model: Option<String>,
    /// Server root: default `http://localhost:11434` for `'ollama'`,
    /// `https://api.openai.com/v1` for `'openai'` (point it at vLLM, llama.cpp, LM Studio...).
    pub base_url: Option<String>,
    /// `'openai'`: sent as `Authorization: Bearer`. Default: `OPENAI_API_KEY`, only when
    /// `baseUrl` is OpenAI's own (a key is never sent to another server unasked). Never stored
    /// or shown in errors.
    pub api_key: Option<String>,
    /// Vector width to ask the server for (`text-embedding-3-*`, Matryoshka models). Answers of
    /// another width are an error (`ENGRAM_MODEL_UNAVAILABLE` at first use): leave it unset for
    /// servers that ignore it.
    #[napi(ts_type = "number")]
    pub dimensions: Option<Count>,
    /// Texts per request or callback call (default 64; at most 2048).
    #[napi(ts_type = "number")]
    pub batch_size: Option<Count>,
    /// `'openai'`: bytes of one text sent (default 8000, below OpenAI's 8,192-token input cap
    /// for any tokenizer). Lower it for servers whose model has a shorter context (a 512-token
    /// model: ~2000), which otherwise answer 400 to long chunks.
    #[napi(ts_type = "number")]
    pub max_text_bytes: Option<Count>,
    /// Whole-request timeout of the HTTP providers, and how long one call of the `embed`
    /// function may take before it fails with `ENGRAM_CALLBACK` ("timed out"), in ms
    /// (default 60000).
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Count>,
    /// Retries of an HTTP request answered 408, 429, 500, 502, 503 or 504, after the wait the server asks
    /// (`retry-after-ms`, `Retry-After`; at most 60 s) or 0.5 s doubling (default 3, at most 10).
    #[napi(ts_type = "number")]
    pub max_retries: Option<Count>,
    /// `'callback'`: computes one vector per text, in order (`Float32Array` or `number[]`, any
    /// width, normalised for you). Called with at most `batchSize` texts at a time, from the
    /// thread that opened the engine. A throw, a rejection or a promise that does not settle
    /// within `timeoutMs` fails the embedding with `ENGRAM_CALLBACK`. With `queryPrefix` or
    /// `documentPrefix`, the texts arrive with the prefix in place.
    #[napi(
        ts_type = "(texts: string[]) => Promise<Array<Float32Array | number[]>> | Array<Float32Array | number[]>"
    )]
    pub embed: Option<EmbedFunction>,
    /// `'ollama'`, `'openai'`, `'callback'`: put before every search query, for models trained
    /// with one (`'query: '` for e5, `'search_query: '` for nomic-embed-text, an instruction
    /// for bge). Changing it re-embeds nothing.
    pub query_prefix: Option<String>,
    /// `'ollama'`, `'openai'`, `'callback'`: put before every text stored with a vector
    /// (chunks, definitions, memories): `'passage: '` for e5, `'search_document: '` for
    /// nomic-embed-text. Part of the model's identity (`model+d` and a short hash of it), so
    /// changing it re-embeds.
    pub document_prefix: Option<String>,
    /// `'local'`: directory holding the model files (`config.json`, `tokenizer.json`,
    /// `model.safetensors`), or `e5-small-q4.bin` for the opt-in multilingual-e5-small (which
    /// puts its `query: ` / `passage: ` prefixes itself). Default: `ENGRAM_MODEL_DIR`, else the
    /// per-user cache where `engram model install` puts the default model.
    pub model_dir: Option<String>,
    /// `'local'`: tokens kept per text, including `[CLS]`/`[SEP]` (default 128; at most the
    /// model's 512). Part of the model's identity.
    #[napi(ts_type = "number")]
    pub max_tokens: Option<Count>,
    /// `'local'`: threads one `embed()` call uses (default: the machine's available parallelism).
    #[napi(ts_type = "number")]
    pub threads: Option<Count>,
    /// `'local'`: the copy of the weights that inputs of up to 128 tokens in all (a query, a
    /// short memory) run through, on one thread. `'int8'` (default) needs AVX-512 VNNI, `'f16'`
    /// AVX2 with F16C; each falls back to the next where the CPU lacks it, and `'f32'` is the
    /// weights as shipped (longer batches always use them). Not part of the model's identity:
    /// the paths' vectors agree to a cosine above 0.998, and int8 embeds a query in about 0.6x
    /// of f16's time.
    #[napi(ts_type = "'int8' | 'f16' | 'f32'")]
    pub query_precision: Option<String>,
    /// Providers to try, in order, when this one cannot be loaded at first use (server down,
    /// model not pulled, no key). The first that works is used for the engine's life and named
    /// in `embeddingStatus()`. Entries take the same fields except `fallback` and `autoEmbed`;
    /// each has its own prefixes (none are inherited).
    pub fallback: Option<Vec<EmbeddingsOptions>>,
    /// Embed new and changed chunks and memories in the background at open (whatever an
    /// earlier process or another model left) and after `index()`, `indexPaths()`, watch
    /// updates, `remember()` and `update()` (default `false`: a run keeps the cores busy for a
    /// while). One run per project at a time; `embeddingStatus().background`
    /// says whether one is going and how the last one ended; `embedPending()` waits for it and
    /// finishes what is left.
    pub auto_embed: Option<bool>,
    /// Give each definition inside a grouped chunk (small neighbouring functions the chunker
    /// packs together, methods of a class that fits one chunk) its own vector, so that a hit
    /// names the definition that matched (`symbol`) (default `true`). `false` embeds chunks
    /// only: on code of many small definitions that is a third to half fewer texts, for paid
    /// embedding APIs. Switching it back on embeds the definitions at the next run, without a
    /// re-index; vectors already stored stay in use.
    pub definition_vectors: Option<bool>,
}

/// Turns the JS option into the core provider (a fallback list when `fallback` is given).
pub(super) fn core_provider(mut o: EmbeddingsOptions) -> Converted<EmbeddingProvider> {
    let rest = o.fallback.take();
    let first = one_provider(o, "embeddings")?;
    let Some(rest) = rest else {
        return Ok(first);
    };
    if matches!(first, EmbeddingProvider::Disabled) {
        return Err(CoreError::invalid(
            "embeddings.fallback makes no sense with provider 'none'",
        ));
    }
    let mut list = vec![first];
    for (i, entry) in rest.into_iter().enumerate() {
        let name = format!("embeddings.fallback[{i}]");
        if entry.fallback.is_some() {
            return Err(CoreError::invalid(format!(
                "{name}.fallback: fallback lists do not nest"
            )));
        }
        if entry.auto_embed.is_some() {
            return Err(CoreError::invalid(format!(
                "{name}.autoEmbed: set it once, next to the first provider"
            )));
        }
        if entry.definition_vectors.is_some() {
            return Err(CoreError::invalid(format!(
                "{name}.definitionVectors: set it once, next to the first provider"
            )));
        }
        match one_provider(entry, &name)? {
            EmbeddingProvider::Disabled => {
                return Err(CoreError::invalid(format!(
                    "{name}: 'none' cannot be a fallback (leave the list shorter)"
                )))
            }
            provider => list.push(provider),
        }
    }
    Ok(EmbeddingProvider::Fallback(list))
}

/// One provider from its fields; `name` prefixes errors.
fn one_provider(o: EmbeddingsOptions, name: &str) -> Converted<EmbeddingProvider> {
    let default = if o.embed.is_some() {
        "callback"
    } else {
        "local"
    };
    let provider = o.provider.clone().unwrap_or_else(|| default.to_owned());
    if o.embed.is_some() && provider != "callback" {
        return Err(CoreError::invalid(format!(
            "{name}.embed is only used with provider 'callback', not '{provider}'"
        )));
    }
    let model = |o: &EmbeddingsOptions| -> Converted<String> {
        match o.model.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => Ok(m.to_owned()),
            _ => Err(CoreError::invalid(format!(
                "{name}.model is required for provider '{provider}'"
            ))),
        }
    };
    let prefixes = input_prefixes(&o, name, &provider)?;
    let batch_size = in_range(o.batch_size, 1, 2048, name, "batchSize")?.unwrap_or(64) as usize;
    let dimensions = in_range(o.dimensions, 1, 65_536, name, "dimensions")?.map(|d| d as usize);
    let mut http = HttpOptions::default();
    if let Some(ms) = in_range(o.timeout_ms, 1, 3_600_000, name, "timeoutMs")? {
        http.timeout = Duration::from_millis(ms as u64);
    }
    if let Some(n) = in_range(o.max_retries, 0, 10, name, "maxRetries")? {
        http.max_retries = n;
    }
    match provider.as_str() {
        "none" => Ok(EmbeddingProvider::Disabled),
        "local" => {
            let mut options = LocalModelOptions::default();
            // The model's own ceiling (512 for MiniLM) is checked when it loads.
            if let Some(n) = in_range(o.max_tokens, 2, 8192, name, "maxTokens")? {
                options.max_tokens = n as usize;
            }
            if let Some(n) = in_range(o.threads, 1, 256, name, "threads")? {
                options.threads = n as usize;
            }
            if let Some(precision) = o.query_precision {
                options.few_token_weights =
                    FewTokenWeights::from_name(&precision).ok_or_else(|| {
                        CoreError::invalid(format!(
                            "{name}.queryPrecision must be 'int8', 'f16' or 'f32', got '{precision}'"
                        ))
                    })?;
            }
            Ok(EmbeddingProvider::Local {
                model_dir: o.model_dir.map(Into::into),
                options,
            })
        }
        "ollama" => {
            let mut options = OllamaOptions::new(model(&o)?);
            if let Some(url) = o.base_url {
                options.base_url = http_url(url, &format!("{name}.baseUrl"))?;
            }
            options.dimensions = dimensions;
            options.batch_size = batch_size;
            options.http = http;
            options.prefixes = prefixes;
            Ok(EmbeddingProvider::Ollama(options))
        }
        "openai" => {
            let mut options = OpenAiOptions::new(model(&o)?);
            if let Some(url) = o.base_url {
                options.base_url = http_url(url, &format!("{name}.baseUrl"))?;
            }
            let official = options.base_url == crate::embed::openai::DEFAULT_OPENAI_URL;
            options.api_key = o
                .api_key
                .filter(|k| !k.trim().is_empty())
                .or_else(|| official.then(|| std::env::var("OPENAI_API_KEY").ok()).flatten());
            options.dimensions = dimensions;
            options.batch_size = batch_size;
            options.http = http;
            if let Some(n) = in_range(o.max_text_bytes, 64, 1 << 20, name, "maxTextBytes")? {
                options.max_text_bytes = n as usize;
            }
            options.prefixes = prefixes;
            Ok(EmbeddingProvider::OpenAi(options))
        }
        "callback" => {
            let model = model(&o)?;
            let Some(function) = o.embed else {
                return Err(CoreError::invalid(format!(
                    "{name}.embed (a function) is required for provider 'callback'"
                )));
            };
            let mut options = CallbackOptions::new(model, embed_fn(function));
            options.batch_size = batch_size;
            options.timeout = http.timeout;
            options.prefixes = prefixes;
            Ok(EmbeddingProvider::Callback(options))
        }
        other => Err(CoreError::invalid(format!(
            "{name}.provider must be 'local', 'ollama', 'openai', 'callback' or 'none', got '{other}'"
        ))),
    }
}

/// The query and document prefixes, which only remote models take (the built-in model was
/// trained without any: a prefix would only shift its vectors).
fn input_prefixes(o: &EmbeddingsOptions, name: &str, provider: &str) -> Converted<InputPrefixes> {
    let remote = matches!(provider, "ollama" | "openai" | "callback");
    for (field, value) in [
        ("queryPrefix", &o.query_prefix),
        ("documentPrefix", &o.document_prefix),
    ] {
        if value.is_some() && !remote {
            return Err(CoreError::invalid(format!(
                "{name}.{field} applies to providers 'ollama', 'openai' and 'callback', \
                 not '{provider}'"
            )));
        }
    }
    InputPrefixes {
        query: o.query_prefix.clone().unwrap_or_default(),
        document: o.document_prefix.clone().unwrap_or_default(),
    }
    .validated([
        &format!("{name}.queryPrefix"),
        &format!("{name}.documentPrefix"),
    ])
}

/// `value` when within `min..=max`.
fn in_range(
    value: Option<Count>,
    min: u32,
    max: u32,
    name: &str,
    field: &str,
) -> Converted<Option<u32>> {
    match value.map(Count::get) {
        Some(v) if v < min || v > max => Err(CoreError::invalid(format!(
            "{name}.{field} must be between {min} and {max}, got {v}"
        ))),
        other => Ok(other),
    }
}

/// An `http://` or `https://` URL without its trailing slashes; `field` names the option in
/// messages (`embeddings.baseUrl`, `reranker.url`).
pub(super) fn http_url(url: String, field: &str) -> Converted<String> {
    let trimmed = url.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"));
    let Some(rest) = rest.filter(|r| !r.is_empty()) else {
        return Err(CoreError::invalid(format!(
            "{field} must be an http:// or https:// URL, got '{url}'"
        )));
    };
    // Credentials in the URL would show in every error message that names the server.
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err(CoreError::invalid(format!(
            "{field} must not carry credentials (user:password@): pass a key as apiKey"
        )));
    }
    Ok(trimmed.to_owned())
}

/// A JS `embed` function, checked to be one before it is wrapped.
pub struct EmbedFunction(EmbedCallback);

impl TypeName for EmbedFunction {
    fn type_name() -> &'static str {
        "Function"
    }

    fn value_type() -> ValueType {
        ValueType::Function
    }
}

impl ValidateNapiValue for EmbedFunction {}

impl FromNapiValue for EmbedFunction {
    unsafe fn from_napi_value(
        env: napi::sys::napi_env,
        value: napi::sys::napi_value,
    ) -> Result<Self> {
        // SAFETY: the caller hands a live value of `env`'s current scope.
        unsafe { super::args::js_function(env, value, "embed") }.map(EmbedFunction)
    }
}

/// The core's view of a JS `embed` function.
fn embed_fn(EmbedFunction(function): EmbedFunction) -> EmbedFn {
    let function = Arc::new(function);
    Arc::new(move |texts: Vec<String>| {
        let function = Arc::clone(&function);
        Box::pin(async move {
            let answer = function
                .call_async_catch(texts)
                .await
                .map_err(|e| failed("threw or returned something else than vectors", e))?;
            let vectors = match answer {
                Either::A(promise) => promise.await.map_err(|e| {
                    failed("rejected or resolved to something else than vectors", e)
                })?,
                Either::B(vectors) => vectors,
            };
            Ok(vectors.0)
        })
    })
}

fn failed(how: &str, e: napi::Error) -> CoreError {
    CoreError::Callback(format!("embeddings.embed {how}: {}", e.reason))
}

/// An array of `Float32Array` or `number[]`, copied out on the JS thread.
pub struct JsVectors(Vec<Vec<f32>>);

impl TypeName for JsVectors {
    fn type_name() -> &'static str {
        "Array<Float32Array | number[]>"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for JsVectors {}

impl FromNapiValue for JsVectors {
    unsafe fn from_napi_value(
        env: napi::sys::napi_env,
        value: napi::sys::napi_value,
    ) -> Result<Self> {
        // SAFETY: the caller hands a live value of `env`'s current scope.
        let items: Vec<Either<Float32Array, Vec<f64>>> =
            unsafe { Vec::from_napi_value(env, value) }.map_err(|e| {
                Error::new(
                    Status::InvalidArg,
                    format!(
                        "expected an array of Float32Array or number[] ({})",
                        e.reason
                    ),
                )
            })?;
        Ok(JsVectors(
            items
                .into_iter()
                .map(|item| match item {
                    Either::A(typed) => typed.to_vec(),
                    Either::B(numbers) => numbers.into_iter().map(|x| x as f32).collect(),
                })
                .collect(),
        ))
    }
}
