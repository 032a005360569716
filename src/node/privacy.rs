//! `redactSecrets()`: the privacy filter every stored text goes through, for text an app or a
//! hook keeps outside the database (the agent hooks' journal of tool calls).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::required;
use super::error::to_js_error;

/// Text with its secrets replaced.
#[napi(object, object_from_js = false)]
pub struct RedactedText {
    /// The text, each secret replaced by a marker naming its kind.
    pub text: String,
    /// How many secrets were replaced.
    pub redactions: u32,
}

/// Replaces the secrets in `text` (API keys and tokens of 70+ kinds, private keys, passwords in
/// URLs, command lines and assignments) with `[REDACTED]`, exactly as engram does before it
/// stores anything. Throws `ENGRAM_INVALID_ARG` when `text` is not a string.
///
/// ```ts
/// redactSecrets('export OPENAI_API_KEY=sk-proj-...').text // 'export OPENAI_API_KEY=[REDACTED]'
/// ```
#[napi(ts_args_type = "text: string")]
pub fn redact_secrets(env: Env, text: Unknown<'_>) -> Result<RedactedText> {
    let text: String = required(&env, &text, "text").map_err(|e| to_js_error(&env, &e))?;
    let redacted = crate::memory::privacy::redact(&text);
    Ok(RedactedText {
        text: redacted.text,
        redactions: redacted.count,
    })
}
