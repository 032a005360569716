//! Core errors -> JS `Error` objects with a stable `code` and a `cause`; panic containment.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use napi::bindgen_prelude::*;

use crate::error::Error as CoreError;

/// Builds the JS error for a core error: `message`, `code` (see `ErrorCode`) and, when the
/// failure has an underlying cause (libSQL, I/O), `cause` as a nested `Error`.
///
/// Why a JS object instead of `napi::Error::new(status, ..)`: napi's `code` is its own
/// `Status` enum; a JS error object created here and converted with `From<Unknown>` is
/// rejected/thrown as-is, so our `code` survives.
pub(crate) fn to_js_error(env: &Env, err: &CoreError) -> napi::Error {
    match build(env, err) {
        Ok(e) => e,
        // Creating an error object can only fail when the env is shutting down.
        Err(fallback) => fallback,
    }
}

fn build(env: &Env, err: &CoreError) -> napi::Result<napi::Error> {
    let mut obj = env.create_error(napi::Error::from_reason(err.to_string()))?;
    obj.set_named_property("code", err.code())?;
    if let Some(source) = std::error::Error::source(err) {
        let cause = env.create_error(napi::Error::from_reason(source.to_string()))?;
        obj.set_named_property("cause", cause)?;
    }
    Ok(napi::Error::from(obj.to_unknown()))
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

/// Runs a core future on the tokio runtime and returns a Promise of its mapped result.
/// A core error rejects with a coded JS error; a panic rejects with `ENGRAM_INTERNAL`.
pub(crate) fn promise<'env, T, V, F, M>(
    env: &'env Env,
    fut: F,
    map: M,
) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
    F: Future<Output = crate::error::Result<T>> + Send + 'static,
    M: FnOnce(T) -> V + 'static,
{
    let guarded = AssertUnwindSafe(fut).catch_unwind().map(|outcome| {
        Ok::<_, napi::Error>(match outcome {
            Ok(result) => result,
            Err(payload) => Err(CoreError::Internal(format!(
                "panic: {}",
                panic_message(payload)
            ))),
        })
    });
    env.spawn_future_with_callback(guarded, move |env, result| match result {
        Ok(value) => Ok(map(value)),
        Err(err) => Err(to_js_error(env, &err)),
    })
}

/// A Promise already rejected with `err` (for argument errors found before any work starts,
/// so that async methods always report failures through their Promise).
pub(crate) fn rejected<'env, V: ToNapiValue + Send + 'static>(
    env: &'env Env,
    err: CoreError,
) -> napi::Result<PromiseRaw<'env, V>> {
    promise(env, async move { Err::<V, _>(err) }, |v| v)
}
