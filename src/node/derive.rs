//! The bridge to an app's relation deriver: a JS function (plain or async) that receives
//! summaries of modules and returns the relations its language model sees among them, as a
//! graph batch. Called through a threadsafe function from the engine's runtime; a throw, a
//! rejection, a batch of the wrong shape or a call that does not settle within its timeout
//! ([`DEFAULT_TIMEOUT`]: a language model is slow, but a promise that never settles must not
//! hold the call forever) becomes `ENGRAM_CALLBACK`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde::Serialize;

use super::graph_types::GraphBatch;
use super::strict::Checked;
use crate::error::Error as CoreError;
use crate::graph as core;

/// How long one call of a relation deriver may take by default (5 minutes: one language-model
/// request per batch of modules).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// What a relation deriver is told about one module.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSummary {
    /// The module's key (`src/auth/`). An edge returned belongs to the module it starts
    /// from, or (starting at a concept or other node) to the module it ends at; that module
    /// must be one asked about.
    pub key: String,
    /// Its files (at most 100).
    pub files: Vec<String>,
    /// Its entry-point files.
    pub entry_points: Vec<String>,
    /// Modules it imports.
    pub imports: Vec<String>,
    /// Modules importing it.
    pub imported_by: Vec<String>,
    /// Keys of symbols its files define (at most 100).
    pub symbols: Vec<String>,
}

impl From<core::ModuleSummary> for ModuleSummary {
    fn from(m: core::ModuleSummary) -> Self {
        ModuleSummary {
            key: m.key,
            files: m.files,
            entry_points: m.entry_points,
            imports: m.imports,
            imported_by: m.imported_by,
            symbols: m.symbols,
        }
    }
}

/// The argument of a relation deriver: up to 25 modules per call.
#[napi(object)]
pub struct RelationRequest {
    /// The modules to describe.
    pub modules: Vec<ModuleSummary>,
}

/// What a derivation wrote.
#[napi(object)]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DerivedSummary {
    /// Modules the deriver was asked about.
    pub modules: u32,
    /// Nodes created or rewritten.
    pub nodes_written: u32,
    /// Edges created or rewritten.
    pub edges_written: u32,
    /// Edges returned for these modules before but not this time, deleted.
    pub edges_removed: u32,
    /// Derived nodes left without edges, deleted.
    pub nodes_removed: u32,
}

impl From<core::DerivedSummary> for DerivedSummary {
    fn from(s: core::DerivedSummary) -> Self {
        DerivedSummary {
            modules: s.modules,
            nodes_written: s.nodes_written,
            edges_written: s.edges_written,
            edges_removed: s.edges_removed,
            nodes_removed: s.nodes_removed,
        }
    }
}

type DeriverReturn = Either<Promise<Option<Checked<GraphBatch>>>, Option<Checked<GraphBatch>>>;

/// A relation deriver callable from any thread; it keeps the process alive while held.
pub type Deriver =
    Arc<ThreadsafeFunction<RelationRequest, DeriverReturn, RelationRequest, Status, false>>;

/// `value` as a [`Deriver`]; `what` names it in errors.
pub fn deriver(value: &Unknown, what: &str) -> std::result::Result<Deriver, CoreError> {
    if !matches!(value.get_type(), Ok(ValueType::Function)) {
        return Err(CoreError::invalid(format!("{what} must be a function")));
    }
    // SAFETY: checked to be a function handle of this scope.
    let function: Function<RelationRequest, DeriverReturn> =
        unsafe { Function::from_napi_value(value.env(), value.raw()) }
            .map_err(|e| CoreError::invalid(format!("{what}: {}", e.reason)))?;
    function
        .build_threadsafe_function()
        .callee_handled::<false>()
        .build()
        .map(Arc::new)
        .map_err(|e| CoreError::Internal(format!("{what}: {}", e.reason)))
}

/// `options[name]` as a [`Deriver`], if present.
pub fn deriver_option(
    options: &Object,
    name: &str,
) -> std::result::Result<Option<Deriver>, CoreError> {
    let value: Unknown = options
        .get_named_property(name)
        .map_err(|e| CoreError::invalid(format!("options.{name}: {}", e.reason)))?;
    match value.get_type() {
        Ok(ValueType::Undefined | ValueType::Null) => Ok(None),
        _ => deriver(&value, &format!("options.{name}")).map(Some),
    }
}

/// Runs a derivation over `modules` (None: all) through `deriver`, each call within
/// `timeout`.
pub async fn run(
    handle: &crate::Engram,
    deriver: Deriver,
    modules: Option<Vec<String>>,
    timeout: Duration,
    cancel: &AtomicBool,
) -> std::result::Result<core::DerivedSummary, CoreError> {
    let ask = move |summaries: Vec<core::ModuleSummary>| {
        let deriver = Arc::clone(&deriver);
        async move {
            let request = RelationRequest {
                modules: summaries.into_iter().map(ModuleSummary::from).collect(),
            };
            let call = async {
                let answer = deriver
                    .call_async_catch(request)
                    .await
                    .map_err(|e| failed("threw or returned the wrong shape", e))?;
                match answer {
                    Either::A(promise) => promise
                        .await
                        .map_err(|e| failed("rejected or resolved to the wrong shape", e)),
                    Either::B(batch) => Ok(batch),
                }
            };
            let batch = tokio::time::timeout(timeout, call).await.map_err(|_| {
                CoreError::Callback(format!(
                    "deriveRelations timed out after {} ms without settling",
                    timeout.as_millis()
                ))
            })??;
            batch.map(|Checked(b)| b.into_core()).transpose()
        }
    };
    handle
        .derive_relations(modules.as_deref(), ask, cancel)
        .await
}

fn failed(how: &str, e: napi::Error) -> CoreError {
    CoreError::Callback(format!("deriveRelations {how}: {}", e.reason))
}
