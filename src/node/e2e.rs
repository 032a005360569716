//! `ObserverSession.observeE2E()`: the end-to-end observation pipeline's JS surface. The app's
//! model is a JS function called with the seed's prompt; its reply (a letter and a sentence) is
//! read and stored by the core (`agent::e2e`). Failures of the function (a throw, a rejection,
//! a wrong type, the time limit) are reported in the result, never thrown: an agent's tool
//! call must not fail because the memory pipeline did.

use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional_object, required};
use super::class::live_handle;
use super::json::{promise_json, JsonText};
use super::observer::ObserverSession;
use super::strict::{callback_timeout, Count};
use super::text_callback::{TextFunction, TextRequest};
use super::types::Memory;
use crate::agent::e2e;

/// What the app's classifier is given.
#[napi(object, object_from_js = false)]
pub struct E2EClassifyRequest {
    /// The tool that produced the result.
    pub tool_name: String,
    /// The first 400 characters of its result.
    pub result: String,
    /// The seed's prompt for a fast model: the tool, the result and the letters A-F; the
    /// reply is read as a letter and one sentence.
    pub prompt: String,
}

/// Options of `observeE2E()`.
#[napi(object, object_to_js = false)]
pub struct ObserveE2EOptions {
    /// The observation tools (default `take_screenshot`, `click_by_text`, `fill_input`,
    /// `get_page_structure`, `eval`), matched without case and after an MCP
    /// `mcp__<server>__` prefix; other tools are skipped without calling the classifier.
    pub tools: Option<Vec<String>>,
    /// How long the classifier may take, in ms (default 30,000).
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Count>,
}

/// What `observeE2E()` did.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct E2EObservation {
    /// The stored observation (`e2e_observation`, confidence 0.75, `needsReview`), or null.
    pub memory: Option<Memory>,
    /// Its category.
    #[napi(ts_type = "'precondition' | 'timing' | 'ui_behavior' | 'test_sequence' | 'mcp_gotcha'")]
    pub category: Option<String>,
    /// Why nothing was stored: `not_an_observation_tool` (the classifier was not called),
    /// `not_worth_remembering` (F, an empty or unreadable reply), `error`.
    #[napi(ts_type = "'not_an_observation_tool' | 'not_worth_remembering' | 'error'")]
    pub skipped: Option<String>,
    /// The classifier's failure (`ENGRAM_CALLBACK: ...`) or the store's, when `skipped` is
    /// `error`.
    pub error: Option<String>,
}

impl TextRequest for E2EClassifyRequest {
    const FUNCTION: &'static str = "classify";
}

/// How long the classifier may take unless `timeoutMs` says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

fn skipped(why: &str, error: Option<String>) -> E2EObservation {
    E2EObservation {
        memory: None,
        category: None,
        skipped: Some(why.to_owned()),
        error,
    }
}

#[napi]
impl ObserverSession {
    /// The end-to-end observation pipeline (the seed's `processMcpToolResult`): for a
    /// browser-tool result (`take_screenshot`, `click_by_text`, `fill_input`,
    /// `get_page_structure`, `eval`, or `options.tools`), asks `classify` (your fast model)
    /// whether it is a precondition, a timing, UI behaviour, a test sequence or a tool gotcha,
    /// and stores the one-sentence answer as an `e2e_observation` for review (confidence 0.75,
    /// `needsReview`, tagged with its category). `classify` gets `{ toolName, result, prompt }`
    /// and returns the model's reply to `prompt` (a letter A-F and a sentence) or null. Its
    /// failures are reported in `error`, never thrown.
    ///
    /// ```ts
    /// const seen = await session.observeE2E('take_screenshot', output, ({ prompt }) => fastModel(prompt))
    /// ```
    #[napi(
        js_name = "observeE2E",
        ts_args_type = "toolName: string, result: string, classify: (request: E2EClassifyRequest) => string | null | Promise<string | null>, options?: ObserveE2EOptions",
        ts_return_type = "Promise<E2EObservation>"
    )]
    pub fn observe_e2e<'env>(
        &self,
        env: &'env Env,
        tool_name: Unknown<'env>,
        result: Unknown<'env>,
        classify_fn: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let tool: String = arg!(env, required(env, &tool_name, "toolName"));
        let result: String = arg!(env, required(env, &result, "result"));
        let function: TextFunction<E2EClassifyRequest> =
            arg!(env, required(env, &classify_fn, "classify"));
        let options: Option<ObserveE2EOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let (tools, timeout) = match options {
            Some(o) => (o.tools.unwrap_or_default(), o.timeout_ms),
            None => (Vec::new(), None),
        };
        let limit = arg!(
            env,
            callback_timeout(timeout, DEFAULT_TIMEOUT, "options.timeoutMs")
        );
        let handle = arg!(env, live_handle(self.owner()));
        let session_id = self.core().id().to_owned();
        promise_json(
            env,
            async move {
                if !e2e::is_observation_tool(&tool, &tools) {
                    return Ok(skipped("not_an_observation_tool", None));
                }
                let request = E2EClassifyRequest {
                    tool_name: tool.clone(),
                    result: result.chars().take(e2e::RESULT_CHARS).collect(),
                    prompt: e2e::prompt(&tool, &result),
                };
                let reply = match function.call(request, limit).await {
                    Ok(Some(reply)) => reply,
                    Ok(None) => return Ok(skipped("not_worth_remembering", None)),
                    Err(error) => {
                        return Ok(skipped("error", Some(format!("ENGRAM_CALLBACK: {error}"))))
                    }
                };
                match handle
                    .store_e2e_observation(&session_id, &tool, &reply)
                    .await
                {
                    Ok(Some((category, memory))) => Ok(E2EObservation {
                        memory: Some(Memory::from(memory)),
                        category: Some(category.as_str().to_owned()),
                        skipped: None,
                        error: None,
                    }),
                    Ok(None) => Ok(skipped("not_worth_remembering", None)),
                    Err(e) => Ok(skipped("error", Some(format!("{}: {e}", e.code())))),
                }
            },
            |observation| observation,
        )
    }
}
