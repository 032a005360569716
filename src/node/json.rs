//! Results cross to JS as one JSON document each: serialised on the worker thread, turned
//! into JS values by V8's `JSON.parse` on the JS thread.
//!
//! Why: napi-rs builds a `#[napi(object)]` value with one `napi_define_properties` call per
//! object, internalising every property name each time; for a `Memory` (36 fields) that was
//! ~25 us per object on the JS thread, more than the search itself. `JSON.parse` builds the
//! same objects in a few microseconds, and the serialisation moves off the JS thread (which is
//! an Electron app's UI-critical main thread). The shapes stay those of the `#[napi(object)]`
//! types in `types.rs`, whose `serde` derives mirror napi's (camelCase names, `None` fields
//! omitted); `__test__/shape.test.mjs` checks every declared field against `index.d.ts`.

use std::future::Future;

use napi::bindgen_prelude::*;
use serde::Serialize;

use super::error::{promise, promise_inline_first};
use crate::error::Error as CoreError;

/// A JSON document that becomes a JS value through `JSON.parse`.
pub struct JsonText(String);

impl JsonText {
    /// Wraps serialised JSON (for synchronous methods; async ones use [`promise_json`]).
    pub(crate) fn new(json: String) -> Self {
        JsonText(json)
    }
}

impl ToNapiValue for JsonText {
    unsafe fn to_napi_value(raw: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let env = Env::from_raw(raw);
        let json: Object = env.get_global()?.get_named_property("JSON")?;
        let parse: Function<String, Unknown> = json.get_named_property("parse")?;
        Ok(parse.call(val.0)?.raw())
    }
}

/// Like [`promise`], but `map` runs on the worker thread and its result reaches JS as JSON.
/// The method declares the JS type with `ts_return_type`.
pub(crate) fn promise_json<'env, T, S, F, M>(
    env: &'env Env,
    fut: F,
    map: M,
) -> napi::Result<PromiseRaw<'env, JsonText>>
where
    T: Send + 'static,
    S: Serialize + 'static,
    F: Future<Output = crate::error::Result<T>> + Send + 'static,
    M: FnOnce(T) -> S + Send + 'static,
{
    promise(env, serialised(fut, map), |text| text)
}

/// [`promise_json`] through [`promise_inline_first`]: for short calls (see there).
pub(crate) fn promise_json_inline_first<'env, T, S, F, M>(
    env: &'env Env,
    fut: F,
    map: M,
) -> napi::Result<PromiseRaw<'env, JsonText>>
where
    T: Send + 'static,
    S: Serialize + 'static,
    F: Future<Output = crate::error::Result<T>> + Send + 'static,
    M: FnOnce(T) -> S + Send + 'static,
{
    promise_inline_first(env, serialised(fut, map), |text| text)
}

/// `fut`'s result, mapped and serialised (where `fut` runs).
async fn serialised<T, S: Serialize>(
    fut: impl Future<Output = crate::error::Result<T>>,
    map: impl FnOnce(T) -> S,
) -> crate::error::Result<JsonText> {
    let value = map(fut.await?);
    serde_json::to_string(&value)
        .map(JsonText)
        .map_err(|e| CoreError::Internal(format!("serialising a result: {e}")))
}
