//! The observer's synthesis callback: the app's function (which calls its LLM) as the core's
//! `SynthesizeFn`, and `engram.synthesize()` for the threshold and scheduled modes.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use super::class::Engram;
use super::json::{promise_json, JsonText};
use super::strict::{Checked, Count};
use super::types::{Memory, MemoryType};
use crate::error::Error as CoreError;
use crate::observer::{self as core, SynthesisMode};

/// One statistic a synthesis request carries.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisSignal {
    /// The signal (`'file_access'`, `'co_access'`, `'error_retry'`...).
    pub signal: String,
    /// Its key (a file; `'a\nb'` for a pair; an error fingerprint...).
    pub key: String,
    /// The latest wording of what it saw.
    pub content: String,
    /// Sessions that showed it.
    pub sessions: u32,
}

/// What the synthesis function is asked. `prompt` is the seed's prompt filled in: pass it to a
/// model and parse the JSON array it answers, or build your own from `signals`.
#[napi(object)]
pub struct SynthesisRequest {
    /// `'session'` (one finalized session), `'threshold'` (a module reached 5, 10, 20, 50 or
    /// 100 sessions) or `'scheduled'` (two modules often used together).
    #[napi(ts_type = "'session' | 'threshold' | 'scheduled'")]
    pub mode: String,
    /// The session id, the module (`'src/auth/'`) or the pair (`'src/a/ + src/b/'`).
    pub subject: String,
    /// The modules concerned.
    pub modules: Vec<String>,
    /// Sessions behind the statistics.
    pub sessions: u32,
    /// The statistics.
    pub signals: Vec<SynthesisSignal>,
    /// The seed's prompt, filled in.
    pub prompt: String,
    /// The most memories kept from the answer (3, 5 or 2 by mode).
    pub max_memories: u32,
}

/// A memory the synthesis function proposes.
#[napi(object, object_to_js = false)]
pub struct SynthesizedMemory {
    /// Its type.
    #[napi(js_name = "type")]
    pub memory_type: MemoryType,
    /// Its text (1-3 sentences).
    pub content: String,
    /// Files it concerns (paths outside the project are dropped).
    pub related_files: Option<Vec<String>>,
    /// 0..1 (default 0.7; at most 0.9 is kept: it still needs review).
    pub confidence: Option<f64>,
}

/// What one synthesis call did.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisResult {
    /// Which mode.
    #[napi(ts_type = "'session' | 'threshold' | 'scheduled'")]
    pub mode: String,
    /// What it was about.
    pub subject: String,
    /// Sessions behind it.
    pub sessions: u32,
    /// The memories stored (`needsReview`, tagged `synthesized`).
    pub memories: Vec<Memory>,
    /// Proposals dropped (empty, already known, over the count).
    pub dropped: u32,
    /// Why the call failed, if it did (it is retried at the next run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub(super) fn synthesis_result(c: core::SynthesisCall) -> SynthesisResult {
    SynthesisResult {
        mode: c.mode.as_str().to_owned(),
        subject: c.subject,
        sessions: c.sessions,
        memories: c.memories.into_iter().map(Memory::from).collect(),
        dropped: c.dropped,
        error: c.error,
    }
}

/// What a JS synthesis function may return.
type SynthesisReturn =
    Either<Promise<Checked<Vec<SynthesizedMemory>>>, Checked<Vec<SynthesizedMemory>>>;

/// A JS synthesis function callable from any thread (weak: a pending call keeps the process).
type SynthesisCallback =
    ThreadsafeFunction<SynthesisRequest, SynthesisReturn, SynthesisRequest, Status, false, true, 0>;

/// A JS synthesis function, checked to be one.
pub struct SynthesisFunction(SynthesisCallback);

impl TypeName for SynthesisFunction {
    fn type_name() -> &'static str {
        "Function"
    }

    fn value_type() -> ValueType {
        ValueType::Function
    }
}

impl ValidateNapiValue for SynthesisFunction {}

impl FromNapiValue for SynthesisFunction {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        // SAFETY: the caller hands a live value of `env`'s current scope.
        unsafe { super::args::js_function(env, value, "synthesize") }.map(SynthesisFunction)
    }
}

/// The core's view of a JS synthesis function.
/// How long one call of the app's synthesis function may take unless `timeoutMs` says.
pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

pub(super) fn synthesize_fn(
    SynthesisFunction(function): SynthesisFunction,
    limit: Duration,
) -> core::SynthesizeFn {
    let function = Arc::new(function);
    Arc::new(move |request: core::SynthesisRequest| {
        let function = Arc::clone(&function);
        let request = SynthesisRequest {
            mode: request.mode.as_str().to_owned(),
            subject: request.subject,
            modules: request.modules,
            sessions: request.sessions,
            signals: request
                .signals
                .into_iter()
                .map(|s| SynthesisSignal {
                    signal: s.signal,
                    key: s.key,
                    content: s.content,
                    sessions: s.sessions,
                })
                .collect(),
            prompt: request.prompt,
            max_memories: request.max_memories,
        };
        Box::pin(async move {
            let call = async {
                let answer = function
                    .call_async_catch(request)
                    .await
                    .map_err(|e| failed("threw or returned something else than memories", e))?;
                match answer {
                    Either::A(promise) => promise.await.map_err(|e| {
                        failed("rejected or resolved to something else than memories", e)
                    }),
                    Either::B(memories) => Ok(memories),
                }
            };
            let Checked(memories) = tokio::time::timeout(limit, call).await.map_err(|_| {
                CoreError::Callback(format!(
                    "synthesize timed out after {} ms",
                    limit.as_millis()
                ))
            })??;
            Ok(memories
                .into_iter()
                .map(|m| core::SynthesizedMemory {
                    memory_type: m.memory_type.into(),
                    content: m.content,
                    related_files: m.related_files.unwrap_or_default(),
                    confidence: m.confidence,
                })
                .collect())
        })
    })
}

fn failed(how: &str, e: napi::Error) -> CoreError {
    CoreError::Callback(format!("synthesize {how}: {}", e.reason))
}

/// Options of `finalize()`.
#[napi(object, object_to_js = false)]
pub struct FinalizeOptions {
    /// The app's LLM: called once, after the promotion is stored, for a successful session
    /// that promoted signal memories, with those signals and the seed's prompt; up to 3 of the
    /// memories it returns are stored for review. A failure is reported in `synthesis.error`.
    #[napi(
        ts_type = "(request: SynthesisRequest) => SynthesizedMemory[] | Promise<SynthesizedMemory[]>"
    )]
    pub synthesize: Option<SynthesisFunction>,
    /// How long the `synthesize` call may take, in ms (default 300000); past it the call is
    /// abandoned and reported in `synthesis.error`.
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Count>,
}

/// Options of `synthesize()`.
#[napi(object, object_to_js = false)]
pub struct SynthesizeOptions {
    /// `'threshold'`: modules whose session count reached 5, 10, 20, 50 or 100 since their
    /// last synthesis (the seed's mode 2, e.g. after each finalize); `'scheduled'`: pairs of
    /// modules often used together, once each (mode 3, e.g. weekly).
    #[napi(ts_type = "'threshold' | 'scheduled'")]
    pub mode: String,
    /// The app's LLM (see `FinalizeOptions.synthesize`).
    #[napi(
        ts_type = "(request: SynthesisRequest) => SynthesizedMemory[] | Promise<SynthesizedMemory[]>"
    )]
    pub synthesize: SynthesisFunction,
    /// Most calls in this run (default 3).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
    /// How long one `synthesize` call may take, in ms (default 300000); past it the call is
    /// abandoned and reported in its result's `error`.
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Count>,
}

#[napi]
impl Engram {
    /// Cross-session synthesis with the app's LLM: one call per module that reached a
    /// session-count threshold (`'threshold'`) or per pair of modules often used together
    /// (`'scheduled'`), with the statistics and the seed's prompt; what the function returns is
    /// stored for review (`needsReview`, tagged `synthesized`). Each trigger is synthesized
    /// once; a failed call is reported and retried at the next run. Mode 1, the incremental
    /// statistics, needs no call: `finalize()` keeps them.
    ///
    /// ```ts
    /// const calls = await memory.synthesize({
    ///   mode: 'threshold',
    ///   synthesize: async ({ prompt }) => JSON.parse((await generateText({ model, prompt })).text),
    /// })
    /// ```
    #[napi(
        ts_args_type = "options: SynthesizeOptions",
        ts_return_type = "Promise<SynthesisResult[]>"
    )]
    pub fn synthesize<'env>(
        &self,
        env: &'env Env,
        options: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: SynthesizeOptions =
            arg!(env, super::args::required_object(env, &options, "options"));
        let mode = match options.mode.as_str() {
            "threshold" => SynthesisMode::Threshold,
            "scheduled" => SynthesisMode::Scheduled,
            other => {
                return super::error::rejected(
                    env,
                    CoreError::invalid(format!(
                        "options.mode must be 'threshold' or 'scheduled', got {other:?}"
                    )),
                )
            }
        };
        let limit = options.limit.map_or(3, usize::from);
        let limit_ms = arg!(
            env,
            super::strict::callback_timeout(
                options.timeout_ms,
                DEFAULT_TIMEOUT,
                "options.timeoutMs"
            )
        );
        let synthesize = synthesize_fn(options.synthesize, limit_ms);
        promise_json(
            env,
            async move { handle.synthesize(mode, &synthesize, limit).await },
            |calls| calls.into_iter().map(synthesis_result).collect::<Vec<_>>(),
        )
    }
}
