//! Argument conversion from JS values with engram's own error code.

use napi::bindgen_prelude::*;

use super::strict::{check_object, napi_reason, At, NoFields, Shape, StrictObject};
use crate::error::Error as CoreError;

type Converted<T> = std::result::Result<T, CoreError>;

fn is_nullish(value: &Unknown<'_>) -> bool {
    matches!(
        value.get_type(),
        Ok(ValueType::Undefined) | Ok(ValueType::Null)
    )
}

/// Converts a required argument, or fails with `ENGRAM_INVALID_ARG` naming it (and, inside
/// it, the value at fault: `options.filters.minConfidence`). The value is checked first (see
/// `strict.rs`): napi would wrap negative numbers, ignore unknown keys and read fields off
/// any value.
pub(crate) fn required<T: FromNapiValue + Shape>(
    env: &Env,
    value: &Unknown<'_>,
    name: &str,
) -> Converted<T> {
    if is_nullish(value) {
        return Err(CoreError::invalid(format!("{name} is required")));
    }
    // SAFETY: `value` is a live handle of this env's current scope.
    unsafe { T::check(env.raw(), value.raw(), &At::Arg(name)) }?;
    convert(env, value, name)
}

fn convert<T: FromNapiValue>(env: &Env, value: &Unknown<'_>, name: &str) -> Converted<T> {
    // SAFETY: `value` is a live handle of this env's current scope.
    unsafe { T::from_napi_value(env.raw(), value.raw()) }
        .map_err(|e| CoreError::invalid(napi_reason(name, &e.reason)))
}

/// Converts a required array argument element by element, so that a message names the
/// element at fault (`inputs[3].content is required`).
pub(crate) fn required_list<T: FromNapiValue + Shape>(
    env: &Env,
    value: &Unknown<'_>,
    name: &str,
) -> Converted<Vec<T>> {
    if is_nullish(value) {
        return Err(CoreError::invalid(format!("{name} is required")));
    }
    if !value.is_array().unwrap_or(false) {
        return Err(CoreError::invalid(format!("{name} must be an array")));
    }
    // SAFETY: checked to be an array handle of this scope.
    let array = unsafe { Array::from_napi_value(env.raw(), value.raw()) }
        .map_err(|e| CoreError::invalid(format!("{name}: {}", e.reason)))?;
    let mut out = Vec::with_capacity(array.len() as usize);
    for i in 0..array.len() {
        let item: Unknown = array
            .get(i)
            .ok()
            .flatten()
            .ok_or_else(|| CoreError::invalid(format!("{name}[{i}] could not be read")))?;
        let at = format!("{name}[{i}]");
        // SAFETY: `item` is a live handle of this env's current scope.
        unsafe { T::check(env.raw(), item.raw(), &At::Arg(&at)) }?;
        out.push(convert(env, &item, &at)?);
    }
    Ok(out)
}

/// Converts a required plain-object argument (options, inputs, patches): its keys must be
/// fields of `T`.
pub(crate) fn required_object<T: FromNapiValue + StrictObject>(
    env: &Env,
    value: &Unknown<'_>,
    name: &str,
) -> Converted<T> {
    required_object_with(env, value, name, &[])
}

/// [`required_object`] that also lets the keys in `extra` through: options the method reads
/// itself (`onProgress`, `signal`).
pub(crate) fn required_object_with<T: FromNapiValue + StrictObject>(
    env: &Env,
    value: &Unknown<'_>,
    name: &str,
    extra: &[&str],
) -> Converted<T> {
    if is_nullish(value) {
        return Err(CoreError::invalid(format!("{name} is required")));
    }
    // SAFETY: `value` is a live handle of this env's current scope.
    unsafe { check_object::<T>(env.raw(), value.raw(), &At::Arg(name), extra) }?;
    convert(env, value, name)
}

/// Checks an options object that has no Rust type (the method reads its keys itself): a plain
/// object whose keys are among `keys`. `undefined` and `null` pass.
pub(crate) fn check_keys(
    env: &Env,
    value: Option<&Unknown<'_>>,
    name: &str,
    keys: &[&str],
) -> Converted<()> {
    match value {
        // SAFETY: `v` is a live handle of this env's current scope.
        Some(v) if !is_nullish(v) => unsafe {
            check_object::<NoFields>(env.raw(), v.raw(), &At::Arg(name), keys)
        },
        _ => Ok(()),
    }
}

/// Converts an optional argument: `undefined` and `null` are `None`.
pub(crate) fn optional<T: FromNapiValue + Shape>(
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
pub(crate) fn optional_object<T: FromNapiValue + StrictObject>(
    env: &Env,
    value: Option<&Unknown<'_>>,
    name: &str,
) -> Converted<Option<T>> {
    optional_object_with(env, value, name, &[])
}

/// [`optional_object`] with the extra keys of [`required_object_with`].
pub(crate) fn optional_object_with<T: FromNapiValue + StrictObject>(
    env: &Env,
    value: Option<&Unknown<'_>>,
    name: &str,
    extra: &[&str],
) -> Converted<Option<T>> {
    match value {
        Some(v) if !is_nullish(v) => required_object_with(env, v, name, extra).map(Some),
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
