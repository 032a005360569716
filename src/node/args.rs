//! Argument conversion from JS values with engram's own error code.

use napi::bindgen_prelude::*;

use crate::error::Error as CoreError;

/// Converts a required argument, or fails with `ENGRAM_INVALID_ARG` naming it.
pub(crate) fn required<T: FromNapiValue>(
    env: &Env,
    value: &Unknown<'_>,
    name: &str,
) -> std::result::Result<T, CoreError> {
    match value.get_type() {
        Ok(ValueType::Undefined) | Ok(ValueType::Null) => {
            return Err(CoreError::invalid(format!("{name} is required")))
        }
        _ => {}
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
) -> std::result::Result<T, CoreError> {
    match value.get_type() {
        Ok(ValueType::Object) if !value.is_array().unwrap_or(false) => required(env, value, name),
        Ok(ValueType::Undefined) | Ok(ValueType::Null) => {
            Err(CoreError::invalid(format!("{name} is required")))
        }
        _ => Err(CoreError::invalid(format!("{name} must be a plain object"))),
    }
}

/// Converts an optional plain-object argument: `undefined` and `null` are `None`.
pub(crate) fn optional_object<T: FromNapiValue>(
    env: &Env,
    value: Option<&Unknown<'_>>,
    name: &str,
) -> std::result::Result<Option<T>, CoreError> {
    match value {
        None => Ok(None),
        Some(v) => match v.get_type() {
            Ok(ValueType::Undefined) | Ok(ValueType::Null) => Ok(None),
            _ => required_object(env, v, name).map(Some),
        },
    }
}

/// Converts an optional argument: `undefined` and `null` are `None`.
pub(crate) fn optional<T: FromNapiValue>(
    env: &Env,
    value: Option<&Unknown<'_>>,
    name: &str,
) -> std::result::Result<Option<T>, CoreError> {
    match value {
        None => Ok(None),
        Some(v) => match v.get_type() {
            Ok(ValueType::Undefined) | Ok(ValueType::Null) => Ok(None),
            _ => required(env, v, name).map(Some),
        },
    }
}
