//! Argument conversion from JS values with engram's own error code.

use napi::bindgen_prelude::*;

use crate::error::Error as CoreError;

type Converted<T> = std::result::Result<T, CoreError>;

fn is_nullish(value: &Unknown<'_>) -> bool {
    matches!(
        value.get_type(),
        Ok(ValueType::Undefined) | Ok(ValueType::Null)
    )
}

/// Converts a required argument, or fails with `ENGRAM_INVALID_ARG` naming it.
pub(crate) fn required<T: FromNapiValue>(
    env: &Env,
    value: &Unknown<'_>,
    name: &str,
) -> Converted<T> {
    if is_nullish(value) {
        return Err(CoreError::invalid(format!("{name} is required")));
    }
    // SAFETY: `value` is a live handle of this env's current scope.
    unsafe { T::from_napi_value(env.raw(), value.raw()) }
        .map_err(|e| CoreError::invalid(format!("{name}: {}", e.reason)))
}

/// Converts a required plain-object argument (options, inputs, patches). Checked first because
/// napi reads fields off any value, so a string would otherwise pass as an empty object.
pub(crate) fn required_object<T: FromNapiValue>(
    env: &Env,
    value: &Unknown<'_>,
    name: &str,
) -> Converted<T> {
    let plain_object =
        matches!(value.get_type(), Ok(ValueType::Object)) && !value.is_array().unwrap_or(false);
    if !plain_object && !is_nullish(value) {
        return Err(CoreError::invalid(format!("{name} must be a plain object")));
    }
    required(env, value, name)
}

/// Converts an optional argument: `undefined` and `null` are `None`.
pub(crate) fn optional<T: FromNapiValue>(
    env: &Env,
    value: Option<&Unknown<'_>>,
    name: &str,
) -> Converted<Option<T>> {
    match value {
        Some(v) if !is_nullish(v) => required(env, v, name).map(Some),
        _ => Ok(None),
    }
}

/// Converts an optional plain-object argument: `undefined` and `null` are `None`.
pub(crate) fn optional_object<T: FromNapiValue>(
    env: &Env,
    value: Option<&Unknown<'_>>,
    name: &str,
) -> Converted<Option<T>> {
    match value {
        Some(v) if !is_nullish(v) => required_object(env, v, name).map(Some),
        _ => Ok(None),
    }
}

/// `value` as `T` (a threadsafe function type) when it is a JS function; else `InvalidArg`
/// saying that `what` must be one.
///
/// # Safety
///
/// `value` must be a live value of `env`'s current scope.
pub(super) unsafe fn js_function<T: FromNapiValue>(
    env: napi::sys::napi_env,
    value: napi::sys::napi_value,
    what: &str,
) -> Result<T> {
    // SAFETY (both calls): the caller's contract.
    let kind = unsafe { Unknown::from_napi_value(env, value) }?.get_type()?;
    if kind != ValueType::Function {
        return Err(Error::new(
            Status::InvalidArg,
            format!("{what} must be a function, got {kind}"),
        ));
    }
    unsafe { T::from_napi_value(env, value) }
}
