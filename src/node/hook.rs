//! `runHookEvent()`: one Claude Code hook event run in this process, for `engram hook <event>`
//! (the native `engram-hook` launcher runs the same core, `crate::hook`, without Node).

use std::sync::Mutex;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::required;
use super::error::promise;
use crate::hook::{run, HookArgs};

/// The database handle of the last event run, left open: the CLI exits right after the
/// answer, and a close would checkpoint and fsync the WAL first for nothing. One is kept at a
/// time, so that a long-lived caller does not gather them.
static LAST_HANDLE: Mutex<Option<crate::Engram>> = Mutex::new(None);

/// Runs one Claude Code hook event: `args` are the words after `engram hook`
/// (`<event> [--root DIR] [--db FILE] [--project ID]`), `payload` the JSON the agent sent on
/// stdin. Resolves to the line to print on stdout, or `null`; a failure of the event itself
/// never rejects (a failing hook must not disturb the agent: the error goes to
/// `<root>/.engram/hooks/hook.log`), only arguments of the wrong type do
/// (`ENGRAM_INVALID_ARG`). Used by the CLI; an app has no need of it.
#[napi(
    ts_args_type = "args: string[], payload: string",
    ts_return_type = "Promise<string | null>"
)]
pub fn run_hook_event<'env>(
    env: &'env Env,
    args: Unknown<'env>,
    payload: Unknown<'env>,
) -> Result<PromiseRaw<'env, Option<String>>> {
    let args: Vec<String> = arg!(env, required(env, &args, "args"));
    let payload: String = arg!(env, required(env, &payload, "payload"));
    promise(
        env,
        async move {
            let outcome = run(HookArgs::parse(&args), payload.as_bytes()).await;
            if let Some(handle) = outcome.handle {
                let previous = LAST_HANDLE
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .replace(handle);
                drop(previous);
            }
            Ok(outcome.stdout)
        },
        |out| out,
    )
}
