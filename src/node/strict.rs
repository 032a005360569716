//! Strict reading of what JS passes: whole numbers that are checked ([`Count`]), and options
//! objects whose keys are known ([`Shape`], [`StrictObject`], the `strict_objects!` list).
//!
//! napi's own conversions are lenient where a typo or a wrong value should be an error: its
//! `u32` wraps -1 to 4294967295 and truncates 1.5, a `#[napi(object)]` ignores keys it does
//! not know (`{ limt: 5 }` is an empty options object) and reads fields off any value (a
//! string passes as an empty object, `null` throws a TypeError without our code). So every
//! argument goes through [`Shape::check`] before napi converts it (see `args.rs`): it walks
//! the value along its Rust type, refusing unknown keys of options objects, values that are no
//! plain object where one is expected, non-finite numbers and BigInts in JSON, each with
//! `ENGRAM_INVALID_ARG` and the path of the value at fault (`options.filters.kinds`,
//! `inputs[2]`). Leaves napi checks itself (strings, booleans, enums) are not looked at.

use std::fmt;

use napi::bindgen_prelude::*;
use napi::sys;

use crate::error::Error as CoreError;

type Converted<T> = std::result::Result<T, CoreError>;

/// Where a value sits in the arguments, for messages: `options`, `options.filters`,
/// `inputs[3].relations[0]`. Built on the stack while walking; formatted only on error.
#[derive(Clone, Copy)]
pub(crate) enum At<'a> {
    /// A named argument.
    Arg(&'a str),
    /// A property of an object.
    Key(&'a At<'a>, &'a str),
    /// An element of an array.
    Index(&'a At<'a>, u32),
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Arg(name) => f.write_str(name),
            At::Key(parent, key) => write!(f, "{parent}.{key}"),
            At::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// Checks a JS value against what a Rust type reads from it, before napi converts it.
pub(crate) trait Shape {
    /// Whether [`Shape::check`] looks at the value at all: `false` for leaves napi checks on
    /// its own, so that containers skip reading them.
    const DEEP: bool = false;

    /// `ENGRAM_INVALID_ARG` naming `at` when the value cannot be what the type reads.
    ///
    /// # Safety
    ///
    /// `value` must be a live value of `env`'s current scope.
    unsafe fn check(_env: sys::napi_env, _value: sys::napi_value, _at: &At<'_>) -> Converted<()> {
        Ok(())
    }
}

/// The type of the check of one field, kept in [`Fields`].
pub(crate) type Check =
    unsafe fn(env: sys::napi_env, value: sys::napi_value, at: &At<'_>) -> Converted<()>;

impl<T: Shape> Shape for Option<T> {
    const DEEP: bool = T::DEEP;

    unsafe fn check(env: sys::napi_env, value: sys::napi_value, at: &At<'_>) -> Converted<()> {
        // SAFETY (both calls): the caller's contract.
        match unsafe { type_of(env, value) } {
            sys::ValueType::napi_undefined | sys::ValueType::napi_null => Ok(()),
            _ => unsafe { T::check(env, value, at) },
        }
    }
}

impl<T: Shape> Shape for Vec<T> {
    const DEEP: bool = T::DEEP;

    unsafe fn check(env: sys::napi_env, value: sys::napi_value, at: &At<'_>) -> Converted<()> {
        // SAFETY: the caller's contract.
        if !T::DEEP || !unsafe { is_array(env, value) } {
            // Not an array: napi's conversion says so.
            return Ok(());
        }
        let mut len = 0u32;
        // SAFETY: `value` is an array of this env.
        unsafe { sys::napi_get_array_length(env, value, &mut len) };
        for i in 0..len {
            let mut item = std::ptr::null_mut();
            // SAFETY: as above; `i` is in bounds.
            unsafe { sys::napi_get_element(env, value, i, &mut item) };
            // SAFETY: `item` was just returned by napi for this env.
            unsafe { T::check(env, item, &At::Index(at, i)) }?;
        }
        Ok(())
    }
}

impl Shape for f64 {
    const DEEP: bool = true;

    unsafe fn check(env: sys::napi_env, value: sys::napi_value, at: &At<'_>) -> Converted<()> {
        // SAFETY: the caller's contract.
        match unsafe { number(env, value) } {
            Some(n) if !n.is_finite() => Err(CoreError::invalid(format!(
                "{at} must be a finite number, got {}",
                js_number(n)
            ))),
            // Not a number: napi's conversion says so.
            _ => Ok(()),
        }
    }
}

/// JSON values (`metadata`): no BigInt (it would lose digits or become a string silently), no
/// NaN or Infinity (JSON has neither).
impl Shape for serde_json::Value {
    const DEEP: bool = true;

    unsafe fn check(env: sys::napi_env, value: sys::napi_value, at: &At<'_>) -> Converted<()> {
        // SAFETY: the caller's contract.
        unsafe { check_json(env, value, at, 0) }
    }
}

/// Deeper than this, napi's conversion refuses the value itself.
const MAX_JSON_DEPTH: u32 = 256;

unsafe fn check_json(
    env: sys::napi_env,
    value: sys::napi_value,
    at: &At<'_>,
    depth: u32,
) -> Converted<()> {
    if depth > MAX_JSON_DEPTH {
        return Ok(());
    }
    // SAFETY (every napi call below): the caller's contract; values napi returns are live.
    match unsafe { type_of(env, value) } {
        sys::ValueType::napi_bigint => Err(CoreError::invalid(format!(
            "{at} is a BigInt, which JSON cannot hold exactly: pass it as a string"
        ))),
        sys::ValueType::napi_number => {
            let n = unsafe { number(env, value) }.unwrap_or_default();
            if n.is_finite() {
                Ok(())
            } else {
                Err(CoreError::invalid(format!(
                    "{at} must be a finite number (JSON has no {}), got {0}",
                    js_number(n)
                )))
            }
        }
        sys::ValueType::napi_object if unsafe { is_array(env, value) } => {
            let mut len = 0u32;
            unsafe { sys::napi_get_array_length(env, value, &mut len) };
            for i in 0..len {
                let mut item = std::ptr::null_mut();
                unsafe { sys::napi_get_element(env, value, i, &mut item) };
                unsafe { check_json(env, item, &At::Index(at, i), depth + 1) }?;
            }
            Ok(())
        }
        sys::ValueType::napi_object => {
            for (key, name) in unsafe { own_keys(env, value) }? {
                let mut item = std::ptr::null_mut();
                unsafe { sys::napi_get_property(env, value, key, &mut item) };
                unsafe { check_json(env, item, &At::Key(at, &name), depth + 1) }?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Leaves napi checks well enough on its own.
macro_rules! shallow {
    ($($ty:ty),* $(,)?) => {
        $(impl Shape for $ty {})*
    };
}

shallow!(String, bool, Unknown<'_>);

/// A whole number from 0 to 4,294,967,295 read from a JS number: negative numbers, fractions,
/// NaN and the infinities are refused (napi's `u32` would wrap -1 to 4294967295 and cut 1.5
/// to 1). Typed `number` in `index.d.ts` (fields holding one say `ts_type = "number"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Count(pub u32);

impl Count {
    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl From<Count> for u32 {
    fn from(c: Count) -> u32 {
        c.0
    }
}

impl From<Count> for usize {
    fn from(c: Count) -> usize {
        c.0 as usize
    }
}

impl From<Count> for u64 {
    fn from(c: Count) -> u64 {
        u64::from(c.0)
    }
}

/// `value` as a whole number within `u32`, else the reason (`must be a whole number >= 0, got
/// -1`), to be prefixed with what the value is.
pub(crate) fn whole(value: f64) -> std::result::Result<u32, String> {
    if !(value.is_finite() && value >= 0.0 && value.fract() == 0.0) {
        Err(format!(
            "must be a whole number >= 0, got {}",
            js_number(value)
        ))
    } else if value > f64::from(u32::MAX) {
        Err(format!("must be at most {}, got {value}", u32::MAX))
    } else {
        Ok(value as u32)
    }
}

/// Checked here too (not only when napi converts it), so that a message names the element of
/// an array at fault: `options.layers[1]`.
impl Shape for Count {
    const DEEP: bool = true;

    unsafe fn check(env: sys::napi_env, value: sys::napi_value, at: &At<'_>) -> Converted<()> {
        // SAFETY: the caller's contract.
        unsafe { Count::from_napi_value(env, value) }
            .map(drop)
            .map_err(|e| CoreError::invalid(format!("{at} {}", e.reason)))
    }
}

impl TypeName for Count {
    fn type_name() -> &'static str {
        "number"
    }

    fn value_type() -> ValueType {
        ValueType::Number
    }
}

impl ValidateNapiValue for Count {}

impl FromNapiValue for Count {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        // SAFETY: the caller hands a live value of `env`'s current scope.
        let Some(n) = (unsafe { number(env, value) }) else {
            // SAFETY: as above.
            let kind = unsafe { type_of(env, value) };
            return Err(Error::new(
                Status::InvalidArg,
                format!("must be a whole number, got {}", type_name(kind)),
            ));
        };
        whole(n)
            .map(Count)
            .map_err(|reason| Error::new(Status::InvalidArg, reason))
    }
}

impl ToNapiValue for Count {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        // SAFETY: the caller's contract.
        unsafe { u32::to_napi_value(env, value.0) }
    }
}

/// A JS number as JS prints it (`NaN`, `Infinity`, `-1`, `1.5`).
pub(crate) fn js_number(n: f64) -> String {
    if n.is_nan() {
        "NaN".into()
    } else if n.is_infinite() {
        if n > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        n.to_string()
    }
}

fn type_name(kind: sys::napi_valuetype) -> &'static str {
    match kind {
        sys::ValueType::napi_undefined => "undefined",
        sys::ValueType::napi_null => "null",
        sys::ValueType::napi_boolean => "a boolean",
        sys::ValueType::napi_number => "a number",
        sys::ValueType::napi_string => "a string",
        sys::ValueType::napi_symbol => "a symbol",
        sys::ValueType::napi_object => "an object",
        sys::ValueType::napi_function => "a function",
        sys::ValueType::napi_bigint => "a BigInt",
        _ => "an external value",
    }
}

/// # Safety
///
/// `value` must be a live value of `env`'s current scope (so for every helper below).
pub(crate) unsafe fn type_of(env: sys::napi_env, value: sys::napi_value) -> sys::napi_valuetype {
    let mut kind = sys::ValueType::napi_undefined;
    // SAFETY: the caller's contract.
    unsafe { sys::napi_typeof(env, value, &mut kind) };
    kind
}

unsafe fn is_array(env: sys::napi_env, value: sys::napi_value) -> bool {
    let mut array = false;
    // SAFETY: the caller's contract.
    unsafe { sys::napi_is_array(env, value, &mut array) };
    array
}

/// The value as a double when it is a JS number.
unsafe fn number(env: sys::napi_env, value: sys::napi_value) -> Option<f64> {
    // SAFETY: the caller's contract.
    if unsafe { type_of(env, value) } != sys::ValueType::napi_number {
        return None;
    }
    let mut n = 0.0;
    // SAFETY: a number of this env.
    unsafe { sys::napi_get_value_double(env, value, &mut n) };
    Some(n)
}

/// The object's own enumerable string keys, as napi values and as text.
unsafe fn own_keys(
    env: sys::napi_env,
    object: sys::napi_value,
) -> Converted<Vec<(sys::napi_value, String)>> {
    let mut names = std::ptr::null_mut();
    // SAFETY: the caller's contract.
    let status = unsafe {
        sys::napi_get_all_property_names(
            env,
            object,
            sys::KeyCollectionMode::own_only,
            sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
            sys::KeyConversion::numbers_to_strings,
            &mut names,
        )
    };
    if status != sys::Status::napi_ok {
        // A Proxy whose ownKeys trap throws: leave the exception to napi's conversion.
        return Ok(Vec::new());
    }
    let mut len = 0u32;
    // SAFETY: `names` is an array napi just made.
    unsafe { sys::napi_get_array_length(env, names, &mut len) };
    let mut keys = Vec::with_capacity(len as usize);
    for i in 0..len {
        let mut key = std::ptr::null_mut();
        // SAFETY: as above; `i` is in bounds, and the keys are strings.
        unsafe { sys::napi_get_element(env, names, i, &mut key) };
        keys.push((key, unsafe { string(env, key) }));
    }
    Ok(keys)
}

/// A JS string's text.
unsafe fn string(env: sys::napi_env, value: sys::napi_value) -> String {
    let mut len = 0usize;
    // SAFETY: the caller's contract; a null buffer asks for the length only.
    unsafe { sys::napi_get_value_string_utf8(env, value, std::ptr::null_mut(), 0, &mut len) };
    let mut buf = vec![0u8; len + 1];
    let mut written = 0usize;
    // SAFETY: `buf` has `len + 1` writable bytes for the text and its NUL.
    unsafe {
        sys::napi_get_value_string_utf8(
            env,
            value,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut written,
        )
    };
    buf.truncate(written);
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// One field of an options object: its JS name and, when its value needs a look, the check.
pub(crate) struct Field {
    name: String,
    check: Option<Check>,
}

impl Field {
    /// The field `name` of `S`, checked as its Rust type `T` (found from `get`, a closure
    /// reading the field, so that the list cannot give a field another type than it has).
    pub(crate) fn of<S, T: Shape>(name: String, _get: fn(&S) -> &T) -> Field {
        Field {
            name,
            check: T::DEEP.then_some(T::check as Check),
        }
    }
}

/// The fields of one options object type.
pub(crate) struct Fields {
    list: Vec<Field>,
}

impl Fields {
    pub(crate) fn new(list: Vec<Field>) -> Fields {
        Fields { list }
    }

    fn find(&self, key: &str) -> Option<&Field> {
        self.list.iter().find(|f| f.name == key)
    }

    /// The JS names, in declaration order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|f| f.name.as_str())
    }
}

/// A `#[napi(object)]` type read from JS: the list of its fields (see `strict_objects!`).
pub(crate) trait StrictObject {
    fn fields() -> &'static Fields;
}

/// An options object without a Rust type, whose keys a method reads itself (see
/// `args::check_keys`).
pub(crate) struct NoFields;

impl StrictObject for NoFields {
    fn fields() -> &'static Fields {
        static FIELDS: std::sync::OnceLock<Fields> = std::sync::OnceLock::new();
        FIELDS.get_or_init(|| Fields::new(Vec::new()))
    }
}

/// The JS name napi gives a Rust field: `max_text_bytes` -> `maxTextBytes`.
pub(crate) fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Checks that `value` is a plain object whose own keys are fields of `S` (or one of `extra`,
/// keys the method reads itself, such as `onProgress`), and its fields' values.
///
/// A key that is not known is refused unless its value is `undefined` (which carries nothing,
/// and which callers get from spreading optional values). A known key set to `null` is
/// refused too: napi would take `null` as a value (a TypeError for an object, a conversion
/// error for the rest), while the typings declare fields as `field?: T`.
///
/// # Safety
///
/// `value` must be a live value of `env`'s current scope.
pub(crate) unsafe fn check_object<S: StrictObject>(
    env: sys::napi_env,
    value: sys::napi_value,
    at: &At<'_>,
    extra: &[&str],
) -> Converted<()> {
    // SAFETY (every napi call below): the caller's contract; values napi returns are live.
    let kind = unsafe { type_of(env, value) };
    if kind != sys::ValueType::napi_object || unsafe { is_array(env, value) } {
        let got = if kind == sys::ValueType::napi_object {
            "an array"
        } else {
            type_name(kind)
        };
        return Err(CoreError::invalid(format!(
            "{at} must be a plain object, got {got}"
        )));
    }
    let fields = S::fields();
    for (key, name) in unsafe { own_keys(env, value) }? {
        let field = fields.find(&name);
        if field.is_none() && extra.contains(&name.as_str()) {
            continue;
        }
        let mut item = std::ptr::null_mut();
        unsafe { sys::napi_get_property(env, value, key, &mut item) };
        match (field, unsafe { type_of(env, item) }) {
            // Absent, whatever the key.
            (_, sys::ValueType::napi_undefined) => {}
            (None, _) => return Err(unknown_key(at, &name, fields, extra)),
            // napi reads a null field as a value (and throws an uncoded TypeError reading
            // fields off it), not as an absent one.
            (Some(_), sys::ValueType::napi_null) => {
                return Err(CoreError::invalid(format!(
                    "{} must not be null: leave it out for the default",
                    At::Key(at, &name)
                )));
            }
            (Some(Field { check: None, .. }), _) => {}
            (
                Some(Field {
                    check: Some(check), ..
                }),
                _,
            ) => unsafe { check(env, item, &At::Key(at, &name)) }?,
        }
    }
    Ok(())
}

fn unknown_key(at: &At<'_>, key: &str, fields: &Fields, extra: &[&str]) -> CoreError {
    let valid: Vec<&str> = fields.names().chain(extra.iter().copied()).collect();
    let near = valid
        .iter()
        .map(|v| (edit_distance(&key.to_lowercase(), &v.to_lowercase()), v))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, v)| format!(" (did you mean '{v}'?)"))
        .unwrap_or_default();
    CoreError::invalid(format!(
        "{at} has an unknown key '{key}'{near}; the keys it takes are: {}",
        valid.join(", ")
    ))
}

/// Levenshtein distance, for the "did you mean" of a mistyped key (keys are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// napi's message for a failed `#[napi(object)]` conversion with its field suffixes (`... on
/// RecallFilters.minConfidence on RecallOptions.filters`) turned into a path after `name`:
/// `options.filters.minConfidence must be ...`.
pub(crate) fn napi_reason(name: &str, reason: &str) -> String {
    let mut rest = reason;
    let mut fields = Vec::new();
    while let Some(i) = rest.rfind(" on ") {
        let suffix = &rest[i + 4..];
        let Some((owner, field)) = suffix.split_once('.') else {
            break;
        };
        let ident = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        };
        if !ident(owner) || !ident(field) {
            break;
        }
        fields.push(field);
        rest = &rest[..i];
    }
    let mut path = name.to_owned();
    for field in fields.iter().rev() {
        path.push('.');
        path.push_str(field);
    }
    if let Some(missing) = rest
        .strip_prefix("Missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        return format!("{path}.{missing} is required");
    }
    if rest.starts_with("must ") {
        format!("{path} {rest}")
    } else {
        format!("{path}: {rest}")
    }
}

/// A value an app's function returned, checked like an argument ([`Shape::check`]) before napi
/// converts it: `{ nodez: [...] }` from a deriver is an error naming the unknown key, not an
/// empty answer. The error comes back as napi's, which the callback bridges turn into
/// `ENGRAM_CALLBACK`.
pub(crate) struct Checked<T>(pub T);

impl<T: Shape + FromNapiValue> FromNapiValue for Checked<T> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        // SAFETY: napi hands a live value of `env`'s current scope.
        unsafe { T::check(env, value, &At::Arg("the returned value")) }
            .map_err(|e| napi::Error::new(Status::InvalidArg, e.to_string()))?;
        // SAFETY: as above.
        unsafe { T::from_napi_value(env, value) }.map(Checked)
    }
}

impl<T: TypeName> TypeName for Checked<T> {
    fn type_name() -> &'static str {
        T::type_name()
    }

    fn value_type() -> ValueType {
        T::value_type()
    }
}

impl<T: ValidateNapiValue> ValidateNapiValue for Checked<T> {
    unsafe fn validate(env: sys::napi_env, value: sys::napi_value) -> Result<sys::napi_value> {
        // SAFETY: the caller's contract.
        unsafe { T::validate(env, value) }
    }
}

/// `ms` as a callback's time limit, `default` when absent; `what` names the option in errors.
pub(crate) fn callback_timeout(
    ms: Option<Count>,
    default: std::time::Duration,
    what: &str,
) -> Converted<std::time::Duration> {
    match ms.map(Count::get) {
        None => Ok(default),
        Some(0) => Err(CoreError::invalid(format!("{what} must be positive"))),
        Some(ms) => Ok(std::time::Duration::from_millis(ms.into())),
    }
}

/// Declares the fields of the options objects read from JS: `Type { field, field as "js" }`
/// implements [`StrictObject`] and [`Shape`] for each, and `registry()` lists them all (for
/// the test that compares them with `index.d.ts`). Every field of the struct must be named:
/// a missing or extra one fails to compile (the list is matched against the struct).
macro_rules! strict_objects {
    ($($ty:ident { $($field:ident $(as $js:literal)?),* $(,)? })*) => {
        $(
            impl $crate::node::strict::StrictObject for $ty {
                fn fields() -> &'static $crate::node::strict::Fields {
                    static FIELDS: std::sync::OnceLock<$crate::node::strict::Fields> =
                        std::sync::OnceLock::new();
                    FIELDS.get_or_init(|| {
                        $crate::node::strict::Fields::new(vec![$(
                            $crate::node::strict::Field::of(
                                strict_objects!(@js $field $($js)?),
                                |s: &$ty| &s.$field,
                            ),
                        )*])
                    })
                }
            }

            impl $crate::node::strict::Shape for $ty {
                const DEEP: bool = true;

                unsafe fn check(
                    env: napi::sys::napi_env,
                    value: napi::sys::napi_value,
                    at: &$crate::node::strict::At<'_>,
                ) -> std::result::Result<(), $crate::error::Error> {
                    // SAFETY: the caller's contract.
                    unsafe { $crate::node::strict::check_object::<$ty>(env, value, at, &[]) }
                }
            }

            const _: () = {
                /// Fails to compile when the list above misses a field of the struct.
                #[allow(dead_code)]
                fn every_field_listed(value: $ty) {
                    let $ty { $($field: _,)* } = value;
                }
            };
        )*

        /// Every options object type with its JS field names.
        pub(crate) fn registry() -> Vec<(&'static str, Vec<String>)> {
            vec![$((
                stringify!($ty),
                <$ty as $crate::node::strict::StrictObject>::fields()
                    .names()
                    .map(str::to_owned)
                    .collect(),
            ),)*]
        }
    };
    (@js $field:ident $js:literal) => {
        $js.to_owned()
    };
    (@js $field:ident) => {
        $crate::node::strict::camel(stringify!($field))
    };
}

use super::agent::{
    PlannerContextOptions, PrefetchPlanOptions, QaContextOptions, SessionContextOptions,
};
use super::agent_file_types::{ExportAgentFileOptions, ImportAgentFilesOptions};
use super::code_types::{CodeSearchOptions, IndexOptions, WatchOptions};
use super::consolidate::ConsolidateOptions;
use super::e2e::ObserveE2EOptions;
use super::embed::{EmbedOptions, InstallModelOptions};
use super::embed_options::{EmbedFunction, EmbeddingsOptions};
use super::graph_class::DeriveOptions;
use super::graph_types::{
    CentralityOptions, GraphBatch, GraphEdgeInput, GraphNodeInput, ImpactOptions, NeighbourOptions,
    ReachOptions, TraverseOptions,
};
use super::lifecycle_types::{
    ConfirmOptions, DeleteAllOptions, EventNote, ExportOptions, FeedbackInput, ImportOptions,
    MarkUsedOptions, PruneOptions, ReviewQueueOptions,
};
use super::logging::LoggerOptions;
use super::observer::{ObserveOptions, StepLimitOptions};
use super::panel_types::{HealthOptions, MemoryGapsOptions};
use super::recall::{
    AgentToolCall, RecallFilters, RecallHyde, RecallOptions, RecallStages, StepContext,
};
use super::rerank_options::{RerankFunction, RerankerOptions};
use super::sync::{SyncOptions, TokenFunction};
use super::synthesis::{FinalizeOptions, SynthesisFunction, SynthesizeOptions, SynthesizedMemory};
use super::types::{
    ListFilter, MemoryPatch, MemoryRelation, OpenOptions, RememberInput, SearchOptions, WorkUnitRef,
};
use super::vector::DenseSearchOptions;

// JS functions: napi's conversion (`args::js_function`) checks them.
shallow!(
    EmbedFunction,
    RerankFunction,
    TokenFunction,
    SynthesisFunction
);

strict_objects! {
    OpenOptions {
        path, project_root, project_id, busy_timeout_ms, read_connections, max_content_bytes,
        closure_depth, graph_index_max_mb, embeddings, reranker, sync,
    }
    EmbeddingsOptions {
        provider, model, base_url, api_key, dimensions, batch_size, max_text_bytes, timeout_ms,
        max_retries, embed, query_prefix, document_prefix, model_dir, max_tokens, threads,
        query_precision, fallback, auto_embed, definition_vectors,
    }
    EmbedOptions { kind }
    RerankerOptions { model, url, api_key, max_document_bytes, timeout_ms, rerank }
    SyncOptions { url, auth_token, get_auth_token, token_timeout_ms, interval_secs, offline_writes }
    WorkUnitRef { methodology, hierarchy, label }
    MemoryRelation { target_memory_id, target_file_path, relation_type, confidence, auto_extracted }
    RememberInput {
        memory_type as "type", content, confidence, tags, related_files, related_modules, scope,
        share_scope, source, session_id, commit_sha, work_unit_ref, methodology, target_node_id,
        impacted_node_ids, relations, decay_half_life_days, needs_review, user_verified,
        citation_text, pinned, metadata, triggers,
    }
    MemoryPatch {
        memory_type as "type", content, confidence, tags, related_files, related_modules, scope,
        share_scope, commit_sha, methodology, target_node_id, impacted_node_ids, relations,
        decay_half_life_days, needs_review, user_verified, citation_text, pinned, metadata,
        triggers,
    }
    ListFilter {
        types, scopes, sources, share_scopes, tags, related_file, needs_review, pinned,
        min_confidence, include_forgotten, only_forgotten, order_by, limit, offset,
    }
    SearchOptions {
        limit, mode, types, scopes, sources, share_scopes, tags, related_file, min_confidence,
        include_forgotten, typo,
    }
    RecallFilters {
        kinds, types, scopes, share_scopes, files, modules, min_confidence, include_stale,
    }
    RecallStages { keyword, dense, graph, boost, scoring, rerank, packing, typo, cascade }
    RecallOptions {
        phase, recent_files, recent_tool_calls, filters, budget_tokens, limit, rerank_depth,
        stages, track_access, session_id, apply_trust, hyde,
    }
    RecallHyde { generate, min_results, min_similarity, timeout_ms }
    AgentToolCall { tool, file_path, pattern }
    StepContext { tool_calls, injected_ids, session_id }
    SessionContextOptions { session_type, task, modules, budget_tokens, session_id }
    PrefetchPlanOptions { modules, budget_tokens, max_files, with_content }
    PlannerContextOptions { modules, budget_tokens }
    ObserveE2EOptions { tools, timeout_ms }
    QaContextOptions { modules, budget_tokens }
    IndexOptions { ignore, use_default_ignores, max_file_bytes, threads }
    CodeSearchOptions { limit }
    WatchOptions { ignore, use_default_ignores, max_file_bytes, debounce_ms }
    DenseSearchOptions { limit, kinds, paths, memory_types }
    InstallModelOptions { from, dest, hub_url }
    GraphNodeInput {
        key, kind, layer, label, file_path, start_line, end_line, source, confidence, metadata,
    }
    GraphEdgeInput { from, to, kind, layer, weight, source, confidence, metadata }
    GraphBatch { nodes, edges }
    TraverseOptions { max_depth, direction, kinds, layers, limit }
    NeighbourOptions { direction, kinds, layers, include_contained, limit }
    CentralityOptions { method, damping, max_iterations, kinds, layers }
    ReachOptions { max_depth, limit }
    ImpactOptions { max_depth, limit, memory_limit, layers }
    DeriveOptions { modules, timeout_ms }
    EventNote { comment, author, session_id }
    FeedbackInput { kind, correction, comment, author, session_id }
    ConfirmOptions { patch, comment, author, session_id }
    ReviewQueueOptions { limit, offset }
    PruneOptions { grace_days, dry_run }
    ExportOptions { format, include_forgotten, path }
    ImportOptions { format, text, path, on_conflict }
    DeleteAllOptions { confirm }
    MarkUsedOptions { session_id }
    ConsolidateOptions { threshold, word_threshold, dry_run }
    ImportAgentFilesOptions { files }
    ExportAgentFileOptions { file, limit, write, types, min_confidence }
    MemoryGapsOptions { include_resolved, limit }
    HealthOptions { session_id }
    ObserveOptions {
        session_id, session_type, work_unit, methodology, planned_steps, max_scratchpad_bytes,
    }
    StepLimitOptions { module }
    FinalizeOptions { synthesize, timeout_ms }
    SynthesizeOptions { mode, synthesize, limit, timeout_ms }
    SynthesizedMemory { memory_type as "type", content, related_files, confidence }
    LoggerOptions { level, filter }
}
