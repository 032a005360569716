//! A function of the app that answers a request with text: the e2e classifier
//! (`observeE2E`'s `classify`) and the HyDE generator (`recall`'s `hyde.generate`), both a call
//! of the app's LLM. One type and one call for all of them: the function may return text,
//! null, or a promise of either; a throw, a rejection, another type or the time limit is an
//! error message naming the function, which the caller reports (none of them throws at the
//! app: an agent's call must not fail because a memory pipeline's model did).

use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;

use super::strict::Checked;

/// What a text function may return.
type TextReturn = Either<Promise<Checked<Option<String>>>, Checked<Option<String>>>;

/// A text function callable from the engine's tasks (weak: it never keeps the process alive).
type TextCallback<R> = ThreadsafeFunction<R, TextReturn, R, Status, false, true, 0>;

/// A request type of a text function, naming the function in errors.
pub(crate) trait TextRequest: ToNapiValue + 'static {
    /// The option or argument the function came in (`classify`, `hyde.generate`).
    const FUNCTION: &'static str;
}

/// A JS function answering `R` with text, checked to be a function.
pub struct TextFunction<R: TextRequest>(TextCallback<R>);

impl<R: TextRequest> TypeName for TextFunction<R> {
    fn type_name() -> &'static str {
        "Function"
    }

    fn value_type() -> ValueType {
        ValueType::Function
    }
}

impl<R: TextRequest> ValidateNapiValue for TextFunction<R> {}

// Checked by `from_napi_value` (a function, or `ENGRAM_INVALID_ARG` naming it).
impl<R: TextRequest> super::strict::Shape for TextFunction<R> {}

impl<R: TextRequest> FromNapiValue for TextFunction<R> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        // SAFETY: the caller hands a live value of `env`'s current scope.
        unsafe { super::args::js_function(env, value, R::FUNCTION) }.map(TextFunction)
    }
}

impl<R: TextRequest> TextFunction<R> {
    /// The function's answer to `request` within `limit`, or why there is none (a message
    /// naming the function: `classify timed out after 30000 ms`).
    pub(crate) async fn call(
        &self,
        request: R,
        limit: Duration,
    ) -> std::result::Result<Option<String>, String> {
        let name = R::FUNCTION;
        let call = async {
            let answer = self.0.call_async_catch(request).await.map_err(|e| {
                format!(
                    "{name} threw or returned something else than text: {}",
                    e.reason
                )
            })?;
            match answer {
                Either::A(promise) => promise.await.map_err(|e| {
                    format!(
                        "{name} rejected or resolved to something else than text: {}",
                        e.reason
                    )
                }),
                Either::B(reply) => Ok(reply),
            }
        };
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(Checked(reply))) => Ok(reply),
            Ok(Err(message)) => Err(message),
            Err(_) => Err(format!("{name} timed out after {} ms", limit.as_millis())),
        }
    }
}
