//! Functions an app passes to be told things (`onProgress`, `onEvent`, sync listeners), called
//! from any thread through a threadsafe function that is weak (it never keeps the process
//! alive) and bounded (a full queue drops a report instead of blocking).
//!
//! Why a wrapper: napi-rs calls such a function with no one to catch what it throws, so a throw
//! (or a returned promise that rejects) became an uncaught exception that ended the host: an
//! Electron main process included. Here every call is made with a return handler that takes the
//! exception off the env, and a returned promise gets a rejection handler. The first failure is
//! kept as a [`CallbackFailure`]; an operation that asked for it ([`Reporter::stop_on_failure`])
//! is cancelled and rejects with `ENGRAM_CALLBACK` naming the callback and its error.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::JsValue;

use crate::error::Error as CoreError;

type Tsfn<T> = ThreadsafeFunction<T, Unknown<'static>, T, Status, false, true, 64>;

/// The first failure of a callback: shared by the calls in flight and the operation.
#[derive(Clone)]
pub(super) struct CallbackFailure {
    /// Where the callback came from, e.g. `options.onProgress`.
    name: String,
    first: Arc<Mutex<Option<String>>>,
    /// Raised on the first failure when the operation stops on it.
    cancel: Option<Arc<AtomicBool>>,
    /// Calls queued for the JS thread and not yet answered.
    in_flight: Arc<InFlight>,
}

/// Calls of a callback queued for the JS thread and not yet answered (a returned promise
/// counts until the microtasks after the call have run, so an `async` function's rejection is
/// seen): the operation waits for them before it settles, or it could resolve before its
/// callback's last report had run and thrown.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    drained: tokio::sync::Notify,
}

impl InFlight {
    fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    fn done(&self) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.drained.notify_waiters();
        }
    }

    /// Waits until no call is in flight, at most `limit` (a JS thread kept busy elsewhere
    /// must not hold the operation's answer back for long).
    async fn drain(&self, limit: Duration) {
        let wait = async {
            loop {
                let drained = self.drained.notified();
                if self.count.load(Ordering::SeqCst) == 0 {
                    return;
                }
                drained.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }
}

impl CallbackFailure {
    fn record(&self, what: String) {
        // Seen also when the operation has already settled (its result then stands).
        tracing::warn!(callback = %self.name, "an app callback failed: {what}");
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(what);
            if let Some(cancel) = &self.cancel {
                cancel.store(true, Ordering::Relaxed);
            }
        }
    }

    fn happened(&self) -> bool {
        self.first
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// The operation's result, told apart: a run stopped because its callback failed rejects
    /// with `ENGRAM_CALLBACK` (not `ENGRAM_ABORTED`, which is for the app's own signal).
    ///
    /// A run that finished while its callback's failure was already known rejects the same
    /// way, so the app hears of its callback's bug whether or not the run got to stop: the
    /// reports still queued are answered first.
    pub(super) async fn settle<T>(
        &self,
        result: std::result::Result<T, CoreError>,
    ) -> std::result::Result<T, CoreError> {
        self.in_flight.drain(Duration::from_secs(2)).await;
        let first = self.first.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match (result, first) {
            (Err(CoreError::Aborted), Some(what)) => Err(CoreError::Callback(format!(
                "{} {what}; the run stopped there and what it committed is kept",
                self.name
            ))),
            (Ok(_), Some(what)) => Err(CoreError::Callback(format!(
                "{} {what}; the run finished and what it did is kept",
                self.name
            ))),
            (result, _) => result,
        }
    }
}

/// A callback of the app, safe to call from any thread, any number of times.
pub(super) struct Reporter<T: ToNapiValue + 'static> {
    tsfn: Tsfn<T>,
    failure: CallbackFailure,
}

impl<T: ToNapiValue + 'static> Reporter<T> {
    /// `options[name]` as a reporter, if it is a function (`undefined`/`null`: none).
    pub(super) fn option(
        options: &Object,
        name: &str,
    ) -> std::result::Result<Option<Self>, CoreError> {
        let value: Unknown = options
            .get_named_property(name)
            .map_err(|e| CoreError::invalid(format!("options.{name}: {}", e.reason)))?;
        match value.get_type() {
            Ok(ValueType::Undefined | ValueType::Null) => return Ok(None),
            Ok(ValueType::Function) => {}
            _ => {
                return Err(CoreError::invalid(format!(
                    "options.{name} must be a function"
                )))
            }
        }
        let function: Function<T, Unknown<'static>> = options
            .get_named_property(name)
            .map_err(|e| CoreError::invalid(format!("options.{name}: {}", e.reason)))?;
        Self::new(function, &format!("options.{name}")).map(Some)
    }

    /// A reporter calling `function`; `name` says where it came from in error messages.
    pub(super) fn new(
        function: Function<T, Unknown<'static>>,
        name: &str,
    ) -> std::result::Result<Self, CoreError> {
        let tsfn = function
            .build_threadsafe_function()
            .weak::<true>()
            .callee_handled::<false>()
            .max_queue_size::<64>()
            .build()
            .map_err(|e| CoreError::Internal(format!("{name}: {}", e.reason)))?;
        Ok(Self {
            tsfn,
            failure: CallbackFailure {
                name: name.to_owned(),
                first: Arc::default(),
                cancel: None,
                in_flight: Arc::default(),
            },
        })
    }

    /// Makes the first failure raise `cancel`, so the operation stops at its next check (and,
    /// through [`CallbackFailure::explain`], rejects with `ENGRAM_CALLBACK`). A callback that
    /// failed is not called again.
    pub(super) fn stop_on_failure(mut self, cancel: Arc<AtomicBool>) -> Self {
        self.failure.cancel = Some(cancel);
        self
    }

    /// What the operation needs to tell its callback's failure from other errors.
    pub(super) fn failure(&self) -> CallbackFailure {
        self.failure.clone()
    }

    /// Calls the function with `value` on its JS thread; best effort (a full queue drops it).
    pub(super) fn report(&self, value: T) {
        if self.failure.cancel.is_some() && self.failure.happened() {
            return;
        }
        let failure = self.failure.clone();
        let in_flight = Arc::clone(&self.failure.in_flight);
        in_flight.add();
        let status = self.tsfn.call_with_return_value(
            value,
            ThreadsafeFunctionCallMode::NonBlocking,
            move |returned, env| {
                let answered = Arc::clone(&failure.in_flight);
                match returned {
                    Err(thrown) => {
                        failure.record(format!("threw: {}", thrown.reason));
                        answered.done();
                    }
                    Ok(value) => {
                        let promise = value.is_promise().unwrap_or(false);
                        on_rejection(&env, value, move |reason| {
                            failure.record(format!("rejected: {reason}"))
                        });
                        let later = Arc::clone(&answered);
                        if !promise || after_microtasks(&env, move || later.done()).is_err() {
                            clear_pending_exception(&env);
                            answered.done();
                        }
                    }
                }
                // Never an error: napi-rs would hand it to napi_fatal_exception.
                Ok(())
            },
        );
        if status != Status::Ok {
            // Not queued (a full queue, or the env is going away): nothing will answer it.
            in_flight.done();
        }
    }
}

/// Gives a returned promise a rejection handler that passes the reason to `handler`, so that
/// an `async` callback which throws is a failure of that callback, not an unhandled rejection
/// (which ends a Node process by default).
pub(super) fn on_rejection(env: &Env, value: Unknown<'static>, handler: impl Fn(String) + 'static) {
    if !value.is_promise().unwrap_or(false) {
        return;
    }
    let attach = || -> Result<()> {
        // SAFETY: checked to be a promise, which is an object, of this env's current scope.
        let promise = unsafe { Object::from_napi_value(env.raw(), value.raw()) }?;
        let catch: Function<Function<Unknown, ()>, Unknown> =
            promise.get_named_property("catch")?;
        let on_rejected = env.create_function_from_closure("onRejected", move |ctx| {
            let reason = ctx
                .get::<Unknown>(0)
                .map(|r| describe(&r))
                .unwrap_or_else(|_| "a rejection".to_owned());
            // Whatever describing it left pending must not make this handler throw (that
            // would be an unhandled rejection of the promise `catch` returns).
            clear_pending_exception(ctx.env);
            handler(reason);
            Ok(())
        })?;
        catch.apply(promise, on_rejected)?;
        Ok(())
    };
    // A promise whose `catch` cannot be reached (a subclass that throws) is left as it is,
    // with no exception left pending in the env.
    if attach().is_err() {
        clear_pending_exception(env);
    }
}

/// Runs `then` on the JS thread after the microtasks queued so far (a rejection handler
/// attached to an already rejected promise among them), through `Promise.resolve().then`.
fn after_microtasks(env: &Env, then: impl FnOnce() + 'static) -> Result<()> {
    let global = env.get_global()?;
    let promise_class: Object = global.get_named_property("Promise")?;
    let resolve: Function<(), Object> = promise_class.get_named_property("resolve")?;
    let resolved = resolve.apply(promise_class, ())?;
    let then_method: Function<Function<Unknown, ()>, Unknown> =
        resolved.get_named_property("then")?;
    let once = std::cell::Cell::new(Some(then));
    let callback = env.create_function_from_closure("afterMicrotasks", move |_ctx| {
        if let Some(then) = once.take() {
            then();
        }
        Ok(())
    })?;
    then_method.apply(resolved, callback)?;
    Ok(())
}

/// Takes a pending JS exception (if any) off the env, so that returning to JS does not throw it.
fn clear_pending_exception(env: &Env) {
    let mut exception = std::ptr::null_mut();
    // SAFETY: a valid env of the current JS thread; the call only reads and clears its state.
    unsafe { napi::sys::napi_get_and_clear_last_exception(env.raw(), &mut exception) };
}

/// A rejection reason as text, without running user code where avoidable: an object's own
/// `message`, a string as it is, anything else by its type.
pub(super) fn describe(reason: &Unknown) -> String {
    match reason.get_type() {
        Ok(ValueType::String) => {
            // SAFETY: checked to be a string of this scope.
            unsafe { String::from_napi_value(reason.env(), reason.raw()) }
                .unwrap_or_else(|_| "a string".to_owned())
        }
        Ok(ValueType::Object) => {
            // SAFETY: checked to be an object of this scope.
            unsafe { Object::from_napi_value(reason.env(), reason.raw()) }
                .and_then(|o| o.get_named_property::<String>("message"))
                .unwrap_or_else(|_| "an object without a message".to_owned())
        }
        Ok(other) => format!("a {other:?} value"),
        Err(_) => "an unknown value".to_owned(),
    }
}
