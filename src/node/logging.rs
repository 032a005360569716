//! `Engram.setLogger`: engram's log lines handed to a JS function, for apps that route logs
//! somewhere else than stderr. The core owns the subscriber, the filters and the redaction
//! (`crate::log`); this file only wraps the function.
//!
//! The function is called through a weak (it never keeps the process alive), bounded,
//! non-blocking threadsafe function on the JS thread of the env that set it: a full queue drops
//! the line (counted, and reported by a `warn` line once the queue has room again). It is
//! called with a return-value callback, so napi captures and clears what the function throws
//! instead of raising it as an uncaught exception: a throwing logger loses its line, never the
//! process. When the env that set it is torn down (a worker exiting), a cleanup hook removes
//! the sink, so no line is queued to a dead env and the filter goes back to off.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::CleanupEnvHook;
use napi_derive::napi;

use super::class::Engram;
use crate::error::Error as CoreError;
use crate::log::{self as core, FieldValue, LogRecord, LogSink};

/// Lines waiting for the JS thread, at most; past it lines are dropped and counted.
const QUEUE: usize = 1024;

/// What the JS function receives: level, target, message, fields.
type Args = FnArgs<(&'static str, &'static str, String, Fields)>;

/// The JS logger, weak and bounded.
type LoggerFn = ThreadsafeFunction<Args, Unknown<'static>, Args, Status, false, true, QUEUE>;

/// Options of `Engram.setLogger`.
#[napi(object, object_to_js = false)]
pub struct LoggerOptions {
    /// The finest level delivered (default `info`), for every target. Ignored when `filter`
    /// is given.
    #[napi(ts_type = "'error' | 'warn' | 'info' | 'debug' | 'trace'")]
    pub level: Option<String>,
    /// A filter in the syntax of `ENGRAM_LOG` (tracing's `EnvFilter`): comma-separated
    /// `level` or `target=level` directives, e.g. `'warn,engram::sync=debug'`.
    pub filter: Option<String>,
}

#[napi]
impl Engram {
    /// Sends engram's log lines to `logger` (for every engine and thread of this process), or
    /// stops sending them with `null`. One logger per process: a second call replaces the
    /// first. Off by default; independent of `ENGRAM_LOG`, which writes lines to stderr.
    ///
    /// Calls arrive asynchronously on the JS thread that set the logger, as
    /// `(level, target, message, fields)`: `target` is the Rust module that logged
    /// (`engram::sync`, `engram::code::indexer`, `engram::store::migrations`,
    /// `engram::store` for slow statements...), `fields` a plain object of strings, numbers and
    /// booleans. Every message and string field passed engram's privacy filter first: no
    /// secret reaches a logger. A logger that throws loses that line, never crashes the
    /// process; up to 1,024 lines wait for the JS thread, more are dropped and counted in a
    /// later `warn` line. The logger never keeps the process alive; when the thread that set
    /// it ends (a worker exiting), it is removed.
    ///
    /// `options.level` (default `'info'`) or `options.filter` (`ENGRAM_LOG`'s syntax) choose
    /// what is sent; `info` is quiet in steady state (index runs, migrations, model loads,
    /// sync recoveries), `warn` has failures and slow statements, `debug` every sync and
    /// index update. `ENGRAM_INVALID_ARG` for a level or filter that does not parse.
    ///
    /// ```ts
    /// Engram.setLogger((level, target, message, fields) => {
    ///   appLog[level === 'trace' ? 'debug' : level]({ target, ...fields }, message)
    /// }, { filter: 'info,engram::sync=debug' })
    /// // later
    /// Engram.setLogger(null)
    /// ```
    #[napi(
        ts_args_type = "logger: ((level: 'error' | 'warn' | 'info' | 'debug' | 'trace', target: string, message: string, fields: Record<string, string | number | boolean>) => void) | null, options?: LoggerOptions"
    )]
    pub fn set_logger(env: &Env, logger: Unknown<'_>, options: Option<Unknown<'_>>) -> Result<()> {
        let to_js = |e: CoreError| super::error::to_js_error(env, &e);
        let options: Option<LoggerOptions> =
            super::args::optional_object(env, options.as_ref(), "options").map_err(to_js)?;
        if matches!(logger.get_type()?, ValueType::Null | ValueType::Undefined) {
            forget_hook(env);
            core::remove_sink(None);
            return Ok(());
        }
        if logger.get_type()? != ValueType::Function {
            return Err(to_js(CoreError::invalid(
                "logger must be a function or null",
            )));
        }
        let filter = filter_of(options).map_err(to_js)?;
        // SAFETY: checked to be a function handle of this scope.
        let function: Function<Args, Unknown<'static>> =
            unsafe { Function::from_napi_value(env.raw(), logger.raw()) }?;
        let tsfn: LoggerFn = function
            .build_threadsafe_function()
            .weak::<true>()
            .callee_handled::<false>()
            .max_queue_size::<QUEUE>()
            .build()?;
        let sink = Arc::new(JsLogger {
            tsfn,
            dropped: AtomicU64::new(0),
        });
        let id = core::set_sink(sink, &filter).map_err(to_js)?;
        forget_hook(env);
        let hook = env.add_env_cleanup_hook(id, |id| {
            HOOK.with(|hook| hook.borrow_mut().take());
            core::remove_sink(Some(id));
        })?;
        HOOK.with(|slot| *slot.borrow_mut() = Some(hook));
        Ok(())
    }
}

thread_local! {
    /// The cleanup hook this thread's env holds for the sink it set (an env lives on one
    /// thread).
    static HOOK: RefCell<Option<CleanupEnvHook<u64>>> = const { RefCell::new(None) };
}

/// Removes this env's cleanup hook, if it has one.
fn forget_hook(env: &Env) {
    if let Some(hook) = HOOK.with(|hook| hook.borrow_mut().take()) {
        // Fails only when the env is going away, when the hook is about to run anyway.
        let _ = env.remove_env_cleanup_hook(hook);
    }
}

/// The filter the options ask for (`info` without options).
fn filter_of(options: Option<LoggerOptions>) -> std::result::Result<String, CoreError> {
    let options = options.unwrap_or(LoggerOptions {
        level: None,
        filter: None,
    });
    if let Some(filter) = options.filter {
        return Ok(filter);
    }
    match options.level.as_deref() {
        None => Ok("info".into()),
        Some(level @ ("error" | "warn" | "info" | "debug" | "trace")) => Ok(level.into()),
        Some(other) => Err(CoreError::invalid(format!(
            "options.level must be 'error', 'warn', 'info', 'debug' or 'trace', got {other:?}"
        ))),
    }
}

/// The sink that queues records to the JS function.
struct JsLogger {
    tsfn: LoggerFn,
    /// Lines dropped on a full queue since the last report.
    dropped: AtomicU64,
}

impl JsLogger {
    fn send(&self, record: LogRecord) -> Status {
        let args = FnArgs::from((
            core::level_name(record.level),
            record.target,
            record.message,
            Fields(record.fields),
        ));
        // With a return-value callback napi takes what the function threw out of the env and
        // hands it here, where it is let go: a logger's failure is not the app's. An async
        // logger's rejection is caught the same way (never an unhandled rejection).
        self.tsfn.call_with_return_value(
            args,
            ThreadsafeFunctionCallMode::NonBlocking,
            |returned, env| {
                if let Ok(value) = returned {
                    super::reporter::on_rejection(&env, value, |_| {});
                }
                Ok(())
            },
        )
    }
}

impl LogSink for JsLogger {
    fn log(&self, record: LogRecord) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let notice = LogRecord {
                level: tracing::Level::WARN,
                target: "engram::log",
                message: format!("{dropped} log lines were dropped: the logger's queue was full"),
                fields: vec![("dropped", FieldValue::U64(dropped))],
            };
            if self.send(notice) != Status::Ok {
                self.dropped.fetch_add(dropped, Ordering::Relaxed);
            }
        }
        if self.send(record) == Status::QueueFull {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A record's fields as a plain JS object (integers become numbers).
struct Fields(Vec<(&'static str, FieldValue)>);

impl ToNapiValue for Fields {
    unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        let env = Env::from_raw(env);
        let mut object = Object::new(&env)?;
        for (name, value) in val.0 {
            match value {
                FieldValue::Str(text) => object.set(name, text)?,
                FieldValue::I64(n) => object.set(name, n as f64)?,
                FieldValue::U64(n) => object.set(name, n as f64)?,
                FieldValue::F64(n) => object.set(name, n)?,
                FieldValue::Bool(b) => object.set(name, b)?,
            }
        }
        Ok(object.raw())
    }
}

/// Installs the process's subscriber when `ENGRAM_LOG` asks for stderr lines (once per
/// process; every env that loads the addon calls it).
#[napi(module_exports)]
pub fn init_logging(_exports: Object<'_>) -> Result<()> {
    core::init_from_env();
    Ok(())
}
