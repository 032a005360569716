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
    let thrown = take_thrown(env, err);
    let err = thrown.as_ref().unwrap_or(err);
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
    V: ToNapiValue + 'static,
    F: Future<Output = crate::error::Result<T>> + Send + 'static,
    M: FnOnce(T) -> V + 'static,
{
    env.spawn_future_with_callback(guarded(fut), settle(map))
}

/// `fut` with a panic turned into `ENGRAM_INTERNAL` (and wrapped the way napi's spawn wants).
fn guarded<T, F>(fut: F) -> impl Future<Output = napi::Result<crate::error::Result<T>>>
where
    F: Future<Output = crate::error::Result<T>>,
{
    AssertUnwindSafe(fut).catch_unwind().map(|outcome| {
        Ok(match outcome {
            Ok(result) => result,
            Err(payload) => Err(CoreError::Internal(format!(
                "panic: {}",
                panic_message(payload)
            ))),
        })
    })
}

/// The JS thread's last step of a call: the mapped value, or the coded JS error.
fn settle<T, V>(
    map: impl FnOnce(T) -> V,
) -> impl FnOnce(&Env, crate::error::Result<T>) -> napi::Result<V> {
    move |env, result| match result {
        Ok(value) => Ok(map(value)),
        Err(err) => Err(to_js_error(env, &err)),
    }
}

/// Like [`promise`], but first runs `fut` on the calling JS thread for as long as it does not
/// have to wait: a call that completes that way (an uncontended write, typically ~0.2 ms)
/// returns a Promise already settled with its result, without the two thread hops of the
/// runtime (to a worker and back through the event loop, ~60 µs together here: more than a
/// third of a `remember`). A call that would wait (for the writer, held by another thread or
/// a long write) goes on on the runtime from where it stopped, like [`promise`].
///
/// Only for short work whose time on the JS thread is bounded like a synchronous call's: it
/// runs until its first wait, and blocks the event loop meanwhile.
pub(crate) fn promise_inline_first<'env, T, V, F, M>(
    env: &'env Env,
    fut: F,
    map: M,
) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    F: Future<Output = crate::error::Result<T>> + Send + 'static,
    M: FnOnce(T) -> V + 'static,
{
    let mut guarded = Box::pin(guarded(fut));
    // Inside the runtime's context, so that what the future spawns (the contradiction scan)
    // or asks of the runtime works as it would on a worker. The waker is a no-op: a pending
    // future is handed to the runtime, whose first poll registers its own.
    let first = within_runtime_if_available(|| {
        let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
        guarded.as_mut().poll(&mut cx)
    });
    match first {
        std::task::Poll::Ready(Ok(result)) => match settle(map)(env, result) {
            Ok(value) => PromiseRaw::resolve(env, value),
            Err(err) => PromiseRaw::reject(env, err),
        },
        std::task::Poll::Ready(Err(err)) => PromiseRaw::reject(env, err),
        std::task::Poll::Pending => env.spawn_future_with_callback(guarded, settle(map)),
    }
}

/// A Promise already rejected with `err` (for argument errors found before any work starts,
/// so that async methods always report failures through their Promise).
pub(crate) fn rejected<'env, V: ToNapiValue + Send + 'static>(
    env: &'env Env,
    err: CoreError,
) -> napi::Result<PromiseRaw<'env, V>> {
    let err = take_thrown(env, &err).unwrap_or(err);
    promise(env, async move { Err::<V, _>(err) }, |v| v)
}

/// `err` with what the app's own code threw while engram read one of its values (a Proxy
/// trap, a getter), when it threw: that exception is taken off the env, since returning with
/// it pending would throw it, uncoded, in place of engram's error. `None` when nothing threw.
fn take_thrown(env: &Env, err: &CoreError) -> Option<CoreError> {
    let mut pending = false;
    // SAFETY: a valid env of the current JS thread; the calls read and clear its state only.
    unsafe { napi::sys::napi_is_exception_pending(env.raw(), &mut pending) };
    if !pending {
        return None;
    }
    let mut exception = std::ptr::null_mut();
    // SAFETY: as above.
    unsafe { napi::sys::napi_get_and_clear_last_exception(env.raw(), &mut exception) };
    // SAFETY: the exception just taken is a live value of this scope.
    let thrown = unsafe { Unknown::from_raw_unchecked(env.raw(), exception) };
    let what = super::reporter::describe(&thrown);
    // Describing it may have thrown in turn (a thrown Proxy): that goes too.
    // SAFETY: as above.
    unsafe { napi::sys::napi_get_and_clear_last_exception(env.raw(), &mut exception) };
    Some(match err {
        CoreError::InvalidArg(message) => {
            CoreError::InvalidArg(format!("{message} (reading it threw: {what})"))
        }
        other => CoreError::invalid(format!("{other} (reading an argument threw: {what})")),
    })
}
