//! The observer's JS surface: `engram.observe(options)` returns an `ObserverSession` whose
//! `observe(message)` is synchronous.
//!
//! Messages are read field by field with raw Node-API calls, not converted as a whole: only
//! the fields the message's type (and the tool's family) needs are looked up, and long texts
//! (tool output, edited text) are copied at most `MAX_TEXT_BYTES` into a buffer while their
//! full length is read without copying. A 100 KB `Read` result costs the same as a short one.

use std::ffi::c_char;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use super::args::{optional, required_object};
use super::class::{live_handle, Engram, Slot};
use super::error::to_js_error;
use super::json::{promise_json, JsonText};
use super::types::{Memory, MemoryType};
use crate::error::Error as CoreError;
use crate::observer::fingerprint::hash_text;
use crate::observer::protocol::MAX_TEXT_BYTES;
use crate::observer::tools::{
    ToolKind, COMMAND_KEYS, EDIT_NEW_KEYS, EDIT_OLD_KEYS, PATH_KEYS, PATTERN_KEYS, URL_KEYS,
};
use crate::observer::{self as core, Message, RecordEntry, SessionOutcome, SessionType};

type Converted<T> = std::result::Result<T, CoreError>;

/// How an observed session is opened.
#[napi(object, object_to_js = false)]
pub struct ObserveOptions {
    /// The session's id, unique in the project. Opening it again (from this or another handle
    /// on the same database, in any thread) joins the open session.
    pub session_id: String,
    /// Which promotion gate applies (default `'build'`): `'build'` (every signal, up to 20
    /// memories, only on success), `'insights'` (5), `'roadmap'` (3, recorded decisions and
    /// requirements), `'terminal'` (3), `'changelog'` (none), `'spec_creation'` (3),
    /// `'pr_review'` (8).
    #[napi(
        ts_type = "'build' | 'insights' | 'roadmap' | 'terminal' | 'changelog' | 'spec_creation' | 'pr_review'"
    )]
    pub session_type: Option<String>,
    /// The work unit (spec / subtask label), stored with what the session promotes.
    pub work_unit: Option<String>,
    /// The methodology plugin (`'native'`, `'bmad'`, `'tdd'`...).
    pub methodology: Option<String>,
    /// Steps the plan expects: the step-overrun signal compares the steps run with it.
    pub planned_steps: Option<f64>,
    /// Most bytes the scratchpad may hold (default 50 MiB, least 64 KiB).
    pub max_scratchpad_bytes: Option<f64>,
}

/// `memory:tool-call`: the agent called a tool. Only the arguments the tool's family uses are
/// read: the file (`file_path`, `filePath`, `path`...), pattern (`pattern`, `query`, `glob`),
/// command (`command`, `cmd`), URL (`url`), and an edit's `old_string` / `new_string`.
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // declares the TS shape; messages are read field by field (see `read_message`)
pub struct ToolCallMessage {
    /// The message type.
    #[napi(js_name = "type", ts_type = "'memory:tool-call'")]
    pub kind: String,
    /// The tool (`Read`, `Edit`, `Write`, `Bash`, `Grep`, `Glob`, `WebFetch`, `WebSearch`, or
    /// any other name; common aliases such as `read_file` are recognised).
    pub tool_name: String,
    /// The tool's arguments.
    #[napi(ts_type = "Record<string, unknown>")]
    pub args: Option<serde_json::Value>,
    /// The step the call was made in.
    pub step_index: u32,
    /// The framework's id of the call (pairs the result exactly).
    pub tool_call_id: Option<String>,
    /// When (ms since the epoch); default: now.
    pub timestamp: Option<f64>,
}

/// `memory:tool-result`: a tool answered.
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // declares the TS shape
pub struct ToolResultMessage {
    /// The message type.
    #[napi(js_name = "type", ts_type = "'memory:tool-result'")]
    pub kind: String,
    /// The tool.
    pub tool_name: String,
    /// Its output (the first 16 KiB are looked at; its length counts as context cost).
    pub result: Option<String>,
    /// Whether it failed.
    pub is_error: Option<bool>,
    /// The step.
    pub step_index: u32,
    /// The call's id, when the framework has one.
    pub tool_call_id: Option<String>,
    /// When (ms since the epoch); default: now.
    pub timestamp: Option<f64>,
}

/// `memory:reasoning`: text the model produced (self-corrections and dead ends are found in it).
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // declares the TS shape
pub struct ReasoningMessage {
    /// The message type.
    #[napi(js_name = "type", ts_type = "'memory:reasoning'")]
    pub kind: String,
    /// The text.
    pub text: String,
    /// The step.
    pub step_index: u32,
}

/// `memory:step-complete`: a step of the loop ended.
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // declares the TS shape
pub struct StepCompleteMessage {
    /// The message type.
    #[napi(js_name = "type", ts_type = "'memory:step-complete'")]
    pub kind: String,
    /// The step.
    pub step_number: u32,
    /// Input tokens of the step's model call, when known.
    pub input_tokens: Option<u32>,
}

/// `memory:session-complete`: the loop ended.
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // declares the TS shape
pub struct SessionCompleteMessage {
    /// The message type.
    #[napi(js_name = "type", ts_type = "'memory:session-complete'")]
    pub kind: String,
    /// How it ended.
    #[napi(ts_type = "'success' | 'partial' | 'failure' | 'abandoned'")]
    pub outcome: String,
    /// Steps run.
    pub steps_executed: u32,
}

/// What the agent asked to remember (`record_memory`).
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // declares the TS shape
pub struct RecordedEntry {
    /// Memory type (default `'gotcha'`).
    #[napi(js_name = "type")]
    pub memory_type: Option<MemoryType>,
    /// The text.
    pub content: String,
    /// Files it concerns.
    pub related_files: Option<Vec<String>>,
}

/// `memory:record`: a scratchpad entry, promoted at `finalize` as `agent_explicit`.
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // declares the TS shape
pub struct RecordMessage {
    /// The message type.
    #[napi(js_name = "type", ts_type = "'memory:record'")]
    pub kind: String,
    /// The IPC request id (not used by the observer).
    pub request_id: Option<String>,
    /// The entry.
    pub entry: RecordedEntry,
    /// The step.
    pub step_index: Option<u32>,
}

/// `memory:search`: the agent searched memory.
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // declares the TS shape
pub struct SearchMessage {
    /// The message type.
    #[napi(js_name = "type", ts_type = "'memory:search'")]
    pub kind: String,
    /// The IPC request id (not used by the observer).
    pub request_id: Option<String>,
    /// What it searched for.
    pub query: String,
}

/// An early trigger that fired: its signal is promoted without waiting for other sessions.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EarlyTrigger {
    /// The signal (`'self_correction'`, `'repeated_grep'`, `'config_touch'`, `'error_retry'`).
    #[napi(ts_type = "'self_correction' | 'repeated_grep' | 'config_touch' | 'error_retry'")]
    pub signal: String,
    /// The seed's priority.
    pub priority: f64,
    /// The step it fired at.
    pub step: u32,
}

/// A session's scratchpad so far.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSnapshot {
    /// The session.
    pub session_id: String,
    /// Its type.
    #[napi(
        ts_type = "'build' | 'insights' | 'roadmap' | 'terminal' | 'changelog' | 'spec_creation' | 'pr_review'"
    )]
    pub session_type: String,
    /// Its A/B group: `'control'` (5 %, no injection), `'passive'` (10 %), `'full'` (85 %).
    #[napi(ts_type = "'control' | 'passive' | 'full'")]
    pub ab_group: String,
    /// Messages observed.
    pub events: f64,
    /// The highest step seen.
    pub current_step: u32,
    /// Tool calls held.
    pub tool_calls: u32,
    /// Distinct files read or changed.
    pub files_touched: u32,
    /// Distinct files changed.
    pub files_edited: u32,
    /// Errors (every occurrence).
    pub errors: u32,
    /// Self-corrections said.
    pub self_corrections: u32,
    /// Entries recorded.
    pub recorded: u32,
    /// Early triggers that fired.
    pub early_triggers: Vec<EarlyTrigger>,
    /// The first step with a web fetch or search: later conclusions are flagged for review.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_step: Option<u32>,
    /// Bytes the scratchpad holds.
    pub bytes: f64,
    /// Its cap.
    pub max_bytes: f64,
    /// Calls dropped to stay under the cap.
    pub evicted_calls: f64,
}

/// A candidate memory of a finalized session and what became of it.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserverCandidate {
    /// The signal that produced it (one of the 17, e.g. `'co_access'`, `'error_retry'`).
    #[napi(
        ts_type = "'file_access' | 'co_access' | 'error_retry' | 'backtrack' | 'read_abandon' | 'repeated_grep' | 'tool_sequence' | 'time_anomaly' | 'self_correction' | 'external_reference' | 'glob_ignore' | 'import_chase' | 'test_order' | 'config_touch' | 'step_overrun' | 'parallel_conflict' | 'context_token_spike'"
    )]
    pub signal: String,
    /// What identifies it across sessions (a file, a pair of files, a fingerprint...).
    pub key: String,
    /// The memory type it would become.
    #[napi(js_name = "type")]
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// Its text.
    pub content: String,
    /// Sessions that showed it, this one included.
    pub sessions: u32,
    /// The seed's signal value (0..1; under 0.4 is dropped).
    pub value: f64,
    /// It originated after a web fetch or search.
    pub tainted: bool,
    /// Parallel agents whose own pads showed it (1 outside merged sessions): 2 or more
    /// confirm it without other sessions and raise its confidence by 10 % per extra agent.
    pub agents: u32,
    /// What became of it.
    #[napi(
        ts_type = "'promoted' | 'reinforced' | 'outcome' | 'session_type' | 'too_few_sessions' | 'low_value' | 'not_novel' | 'already_promoted' | 'over_cap' | 'not_an_import'"
    )]
    pub decision: String,
    /// The memory it became.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<String>,
}

/// The seed's section-19 metrics of a session.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMetrics {
    /// Tool calls.
    pub tool_calls: u32,
    /// Read calls.
    pub file_reads: u32,
    /// Reads of a file already read in the session.
    pub repeat_reads: u32,
    /// Files this session read that an earlier session read too (the seed's cross-session
    /// re-reads, which memory should bring down; among the first 64 files read).
    pub files_read_before: u32,
    /// Distinct files changed.
    pub files_edited: u32,
    /// Failed tool calls.
    pub errors: u32,
    /// Self-corrections.
    pub self_corrections: u32,
    /// Input tokens reported (else output characters / 4).
    pub tokens: f64,
    /// Steps run.
    pub steps: u32,
    /// Memories promoted.
    pub memories_promoted: u32,
    /// Calls dropped to stay under the scratchpad cap.
    pub evicted_calls: f64,
}

/// What `finalize()` did.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalizeResult {
    /// The session.
    pub session_id: String,
    /// How it ended.
    #[napi(ts_type = "'success' | 'partial' | 'failure' | 'abandoned'")]
    pub outcome: String,
    /// Its A/B group.
    #[napi(ts_type = "'control' | 'passive' | 'full'")]
    pub ab_group: String,
    /// The directory module it worked in (most edits, else most reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The memories promoted (new or reinforced).
    pub promoted: Vec<Memory>,
    /// Every candidate and its fate.
    pub candidates: Vec<ObserverCandidate>,
    /// The session's metrics (also stored in `observer_sessions`).
    pub metrics: SessionMetrics,
    /// The synthesis call, when `finalize()` was given `synthesize` and the session succeeded
    /// with signal memories promoted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthesis: Option<super::synthesis::SynthesisResult>,
}

fn finalize_result(f: core::Finalized) -> FinalizeResult {
    FinalizeResult {
        session_id: f.session_id,
        outcome: f.outcome.as_str().to_owned(),
        ab_group: f.ab_group.as_str().to_owned(),
        module: f.module,
        promoted: f.promoted.into_iter().map(Memory::from).collect(),
        candidates: f
            .candidates
            .into_iter()
            .map(|c| ObserverCandidate {
                signal: c.signal.as_str().to_owned(),
                key: c.key,
                memory_type: c.memory_type.into(),
                content: c.content,
                sessions: c.sessions,
                value: c.value,
                tainted: c.tainted,
                agents: c.agents,
                decision: serde_json::to_value(c.decision)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                memory_id: c.memory_id,
            })
            .collect(),
        metrics: SessionMetrics {
            tool_calls: f.metrics.tool_calls,
            file_reads: f.metrics.file_reads,
            repeat_reads: f.metrics.repeat_reads,
            files_read_before: f.metrics.files_read_before,
            files_edited: f.metrics.files_edited,
            errors: f.metrics.errors,
            self_corrections: f.metrics.self_corrections,
            tokens: f.metrics.tokens as f64,
            steps: f.metrics.steps,
            memories_promoted: f.metrics.memories_promoted,
            evicted_calls: f.metrics.evicted_calls as f64,
        },
        synthesis: f.synthesis.map(super::synthesis::synthesis_result),
    }
}

fn snapshot(s: core::SessionSnapshot) -> SessionSnapshot {
    SessionSnapshot {
        session_id: s.session_id,
        session_type: s.session_type.as_str().to_owned(),
        ab_group: s.ab_group.as_str().to_owned(),
        events: s.events as f64,
        current_step: s.current_step,
        tool_calls: s.tool_calls,
        files_touched: s.files_touched,
        files_edited: s.files_edited,
        errors: s.errors,
        self_corrections: s.self_corrections,
        recorded: s.recorded,
        early_triggers: s
            .early_triggers
            .into_iter()
            .map(|t| EarlyTrigger {
                signal: t.signal.as_str().to_owned(),
                priority: t.priority,
                step: t.step,
            })
            .collect(),
        external_step: s.external_step,
        bytes: s.bytes as f64,
        max_bytes: s.max_bytes as f64,
        evicted_calls: s.evicted_calls as f64,
    }
}

/// A whole number in `0..=u32::MAX` (napi's own u32 conversion wraps negatives).
fn whole(value: f64, name: &str) -> Converted<u32> {
    super::strict::whole(value).map_err(|reason| CoreError::invalid(format!("{name} {reason}")))
}

fn session_options(o: ObserveOptions) -> Converted<core::SessionOptions> {
    let mut options = core::SessionOptions::new(o.session_id);
    if let Some(t) = o.session_type {
        options.session_type = SessionType::parse(&t)?;
    }
    options.work_unit = o.work_unit;
    options.methodology = o.methodology;
    options.planned_steps = o
        .planned_steps
        .map(|n| whole(n, "plannedSteps"))
        .transpose()?;
    if let Some(max) = o.max_scratchpad_bytes {
        options.max_bytes = whole(max, "maxScratchpadBytes")? as usize;
    }
    Ok(options)
}

/// The file a tool call's `args` names (`file_path`, `filePath`, `path`...), if any; `args`
/// must be an object (or null / undefined: no file).
pub(super) fn read_tool_target(env: &Env, args: &Unknown<'_>) -> Converted<Option<String>> {
    match args.get_type() {
        Ok(ValueType::Undefined | ValueType::Null) => Ok(None),
        Ok(ValueType::Object) if !args.is_array().unwrap_or(false) => {
            JsObject::new(env.raw(), args.raw()).first_string(PATH_KEYS)
        }
        _ => Err(CoreError::invalid("args must be a plain object")),
    }
}

/// One JS object read property by property.
struct JsObject {
    env: sys::napi_env,
    object: sys::napi_value,
}

/// A NUL-terminated copy of a short property name, on the stack.
fn c_name(name: &str) -> [u8; 32] {
    let mut buf = [0u8; 32];
    let n = name.len().min(31);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    buf
}

impl JsObject {
    /// `object` must be a live value of `env`'s current scope.
    fn new(env: sys::napi_env, object: sys::napi_value) -> Self {
        JsObject { env, object }
    }

    /// The property's value and type, `None` when undefined or null.
    fn get(&self, name: &str) -> Converted<Option<(sys::napi_value, sys::napi_valuetype)>> {
        let key = c_name(name);
        let mut value = std::ptr::null_mut();
        // SAFETY: `self.object` is live (constructor contract) and `key` is NUL-terminated.
        let status = unsafe {
            sys::napi_get_named_property(
                self.env,
                self.object,
                key.as_ptr() as *const c_char,
                &mut value,
            )
        };
        if status != sys::Status::napi_ok {
            return Err(CoreError::invalid(format!("could not read {name}")));
        }
        let mut kind = 0;
        // SAFETY: `value` was just returned by napi for this env.
        unsafe { sys::napi_typeof(self.env, value, &mut kind) };
        if kind == sys::ValueType::napi_undefined || kind == sys::ValueType::napi_null {
            return Ok(None);
        }
        Ok(Some((value, kind)))
    }

    fn expect(
        &self,
        name: &str,
        what: sys::napi_valuetype,
        type_name: &str,
    ) -> Converted<Option<sys::napi_value>> {
        match self.get(name)? {
            None => Ok(None),
            Some((v, kind)) if kind == what => Ok(Some(v)),
            Some(_) => Err(CoreError::invalid(format!("{name} must be a {type_name}"))),
        }
    }

    /// A string property: at most `MAX_TEXT_BYTES` of it copied, and its full length in
    /// UTF-16 units (read without copying).
    fn text(&self, name: &str) -> Converted<Option<(String, u32)>> {
        let Some(value) = self.expect(name, sys::ValueType::napi_string, "string")? else {
            return Ok(None);
        };
        Ok(Some(self.read_string(value)))
    }

    fn read_string(&self, value: sys::napi_value) -> (String, u32) {
        let mut full = 0usize;
        // SAFETY: a null buffer asks napi for the length only.
        unsafe {
            sys::napi_get_value_string_utf16(self.env, value, std::ptr::null_mut(), 0, &mut full)
        };
        let mut buf = vec![0u8; (full * 3).min(MAX_TEXT_BYTES) + 1];
        let mut written = 0usize;
        // SAFETY: `buf` has `buf.len()` writable bytes; napi writes whole characters and a NUL.
        unsafe {
            sys::napi_get_value_string_utf8(
                self.env,
                value,
                buf.as_mut_ptr() as *mut c_char,
                buf.len(),
                &mut written,
            )
        };
        buf.truncate(written);
        let text = String::from_utf8(buf)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        (text, full.min(u32::MAX as usize) as u32)
    }

    fn string(&self, name: &str) -> Converted<Option<String>> {
        Ok(self.text(name)?.map(|(t, _)| t))
    }

    fn first_string(&self, names: &[&str]) -> Converted<Option<String>> {
        for name in names {
            if let Some(s) = self.string(name)? {
                return Ok(Some(s));
            }
        }
        Ok(None)
    }

    fn number(&self, name: &str) -> Converted<Option<f64>> {
        let Some(value) = self.expect(name, sys::ValueType::napi_number, "number")? else {
            return Ok(None);
        };
        let mut n = 0.0;
        // SAFETY: `value` is a number of this env.
        unsafe { sys::napi_get_value_double(self.env, value, &mut n) };
        Ok(Some(n))
    }

    fn whole(&self, name: &str) -> Converted<Option<u32>> {
        self.number(name)?.map(|n| whole(n, name)).transpose()
    }

    fn boolean(&self, name: &str) -> Converted<Option<bool>> {
        let Some(value) = self.expect(name, sys::ValueType::napi_boolean, "boolean")? else {
            return Ok(None);
        };
        let mut b = false;
        // SAFETY: `value` is a boolean of this env.
        unsafe { sys::napi_get_value_bool(self.env, value, &mut b) };
        Ok(Some(b))
    }

    fn object(&self, name: &str) -> Converted<Option<JsObject>> {
        Ok(self
            .expect(name, sys::ValueType::napi_object, "object")?
            .map(|v| JsObject::new(self.env, v)))
    }
}

/// `timestamp`, ms since the epoch: a finite number (a fraction is cut).
fn timestamp(o: &JsObject) -> Converted<Option<i64>> {
    match o.number("timestamp")? {
        Some(t) if !t.is_finite() => Err(CoreError::invalid(format!(
            "timestamp must be a finite number (ms since the epoch), got {}",
            super::strict::js_number(t)
        ))),
        t => Ok(t.map(|t| t as i64)),
    }
}

/// Reads one protocol message from a JS object (see the message interfaces above).
fn read_message(env: sys::napi_env, value: sys::napi_value) -> Converted<Message> {
    let mut kind = 0;
    // SAFETY: `value` is a live argument of this call.
    unsafe { sys::napi_typeof(env, value, &mut kind) };
    if kind != sys::ValueType::napi_object {
        return Err(CoreError::invalid("message must be an object"));
    }
    let o = JsObject::new(env, value);
    let message_type = o
        .string("type")?
        .ok_or_else(|| CoreError::invalid("message.type is required"))?;
    let tool_name = || {
        o.string("toolName")?
            .ok_or_else(|| CoreError::invalid(format!("{message_type}: toolName is required")))
    };
    Ok(match message_type.as_str() {
        "memory:tool-call" => {
            let tool = tool_name()?;
            let mut call = core::ToolCall {
                step: o.whole("stepIndex")?.unwrap_or(0),
                call_id: o.string("toolCallId")?,
                at_ms: timestamp(&o)?,
                ..core::ToolCall::default()
            };
            if let Some(args) = o.object("args")? {
                let kind = ToolKind::of(&tool);
                match kind {
                    ToolKind::Read | ToolKind::Write => call.path = args.first_string(PATH_KEYS)?,
                    ToolKind::Edit => {
                        call.path = args.first_string(PATH_KEYS)?;
                        call.old_text_hash =
                            args.first_string(EDIT_OLD_KEYS)?.map(|t| hash_text(&t));
                        call.new_text_hash =
                            args.first_string(EDIT_NEW_KEYS)?.map(|t| hash_text(&t));
                    }
                    ToolKind::Bash => call.command = args.first_string(COMMAND_KEYS)?,
                    ToolKind::Grep | ToolKind::Glob => {
                        call.pattern = args.first_string(PATTERN_KEYS)?
                    }
                    ToolKind::WebFetch | ToolKind::WebSearch => {
                        call.url = args.first_string(URL_KEYS)?;
                        if call.url.is_none() {
                            call.pattern = args.first_string(PATTERN_KEYS)?;
                        }
                    }
                    ToolKind::Other => {}
                }
            }
            call.tool = tool;
            Message::ToolCall(call)
        }
        "memory:tool-result" => {
            let (text, full_len) = o.text("result")?.unwrap_or_default();
            Message::ToolResult(core::ToolResult {
                tool: tool_name()?,
                step: o.whole("stepIndex")?.unwrap_or(0),
                call_id: o.string("toolCallId")?,
                is_error: o.boolean("isError")?.unwrap_or(false),
                text,
                full_len,
                at_ms: timestamp(&o)?,
            })
        }
        "memory:reasoning" => Message::Reasoning {
            text: o.string("text")?.unwrap_or_default(),
            step: o.whole("stepIndex")?.unwrap_or(0),
        },
        "memory:step-complete" => Message::StepComplete {
            step: o.whole("stepNumber")?.unwrap_or(0),
            input_tokens: o.whole("inputTokens")?,
        },
        "memory:session-complete" => Message::SessionComplete {
            outcome: SessionOutcome::parse(
                &o.string("outcome")?.unwrap_or_else(|| "success".into()),
            )?,
            steps_executed: o.whole("stepsExecuted")?.unwrap_or(0),
        },
        "memory:record" => {
            let entry = o
                .object("entry")?
                .ok_or_else(|| CoreError::invalid("memory:record: entry is required"))?;
            let content = entry
                .string("content")?
                .ok_or_else(|| CoreError::invalid("memory:record: entry.content is required"))?;
            let memory_type = match entry.string("type")? {
                Some(t) => crate::memory::MemoryType::parse(&t)?,
                None => crate::memory::MemoryType::Gotcha,
            };
            let mut related_files = Vec::new();
            if let Some((files, _)) = entry.get("relatedFiles")? {
                // SAFETY: `files` is a live value of this env.
                let list: Vec<String> = unsafe { Vec::<String>::from_napi_value(env, files) }
                    .map_err(|_| {
                        CoreError::invalid("entry.relatedFiles must be an array of strings")
                    })?;
                related_files = list;
            }
            Message::Record(RecordEntry {
                memory_type,
                content,
                related_files,
                step: o.whole("stepIndex")?.unwrap_or(0),
            })
        }
        "memory:search" => Message::Search {
            query: o.string("query")?.unwrap_or_default(),
        },
        other => {
            return Err(CoreError::invalid(format!(
                "unknown message type {other:?}; expected memory:tool-call, memory:tool-result, \
                 memory:reasoning, memory:step-complete, memory:session-complete, \
                 memory:record or memory:search"
            )))
        }
    })
}

/// An observed agent session (the seed's MemoryObserver for one session). `observe()` is
/// synchronous and cheap (microseconds, no I/O); `finalize()` promotes what the session
/// showed into memories in one transaction. The session closes with the handle that made it:
/// after its `close()`, `stepInjection()`, `checkpoint()` and `finalize()` reject with
/// `ENGRAM_CLOSED` (the scratchpad stays in the engine while another handle is open, which can
/// `resumeSession()` it).
#[napi]
pub struct ObserverSession {
    /// The slot of the handle that made the session.
    owner: Slot,
    session: Arc<core::Session>,
    session_id: String,
}

impl ObserverSession {
    /// The slot of the handle that made the session.
    pub(super) fn owner(&self) -> &Slot {
        &self.owner
    }

    /// The core session.
    pub(super) fn core(&self) -> &Arc<core::Session> {
        &self.session
    }
}

#[napi]
impl ObserverSession {
    /// Not for use: a session comes from `db.observe(options)` or `db.resumeSession(id)`.
    /// Throws `ENGRAM_INVALID_ARG` saying so (napi's own refusal carried no code).
    #[napi(constructor)]
    pub fn new(env: &Env) -> Result<Self> {
        Err(super::error::to_js_error(
            env,
            &CoreError::invalid(
                "an ObserverSession is started, not constructed: use `db.observe(options)`",
            ),
        ))
    }

    /// The session's id.
    #[napi(getter)]
    pub fn session_id(&self) -> String {
        self.session_id.clone()
    }

    /// Records one message of the agent loop. Synchronous, O(1), never touches the database.
    /// Throws `ENGRAM_INVALID_ARG` for a malformed message and `ENGRAM_CONFLICT` after
    /// `finalize()`.
    ///
    /// ```ts
    /// worker.on('message', (m) => { if (m.type.startsWith('memory:')) session.observe(m) })
    /// ```
    #[napi(
        ts_args_type = "message: ToolCallMessage | ToolResultMessage | ReasoningMessage | StepCompleteMessage | SessionCompleteMessage | RecordMessage | SearchMessage"
    )]
    pub fn observe(&self, env: Env, message: Unknown<'_>) -> Result<()> {
        let message = read_message(env.raw(), message.raw()).map_err(|e| to_js_error(&env, &e))?;
        self.session
            .observe(message)
            .map_err(|e| to_js_error(&env, &e))
    }

    /// Records several messages at once (one lock, one call across the boundary).
    #[napi(
        ts_args_type = "messages: Array<ToolCallMessage | ToolResultMessage | ReasoningMessage | StepCompleteMessage | SessionCompleteMessage | RecordMessage | SearchMessage>"
    )]
    pub fn observe_many(&self, env: Env, messages: Unknown<'_>) -> Result<()> {
        let fail = |e: CoreError| to_js_error(&env, &e);
        if !messages.is_array().unwrap_or(false) {
            return Err(fail(CoreError::invalid("messages must be an array")));
        }
        // SAFETY: checked to be an array of this env.
        let array = unsafe { Array::from_napi_value(env.raw(), messages.raw()) }?;
        let mut read = Vec::with_capacity(array.len() as usize);
        for i in 0..array.len() {
            let item: Unknown = array
                .get(i)?
                .ok_or_else(|| fail(CoreError::invalid("hole in messages")))?;
            read.push(
                read_message(env.raw(), item.raw())
                    .map_err(|e| fail(CoreError::invalid(format!("messages[{i}]: {e}"))))?,
            );
        }
        self.session.observe_all(read).map_err(fail)
    }

    /// What to put in front of the agent before step `step`, or `null`: `stepInjection()`
    /// fed from this session (its recent tool calls, the memories it was already shown), with
    /// the scratchpad trigger between the gotchas and the search short-circuit: what the agent
    /// recorded since the last step, once. Sessions in the `control` and `passive` A/B groups
    /// always get `null` (no mid-session injection). What is injected counts as used.
    ///
    /// ```ts
    /// prepareStep: async ({ stepNumber, messages }) => {
    ///   const injection = await session.stepInjection(stepNumber)
    ///   return injection ? { messages: [...messages, { role: 'system', content: injection.content }] } : {}
    /// }
    /// ```
    #[napi(
        ts_args_type = "step: number",
        ts_return_type = "Promise<StepInjection | null>"
    )]
    pub fn step_injection<'env>(
        &self,
        env: &'env Env,
        step: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let step: f64 = arg!(env, super::args::required(env, &step, "step"));
        let step = arg!(env, whole(step, "step"));
        let handle = arg!(env, live_handle(&self.owner));
        let session = self.session.clone();
        promise_json(
            env,
            async move { handle.session_step_injection(&session, step).await },
            |found| found.map(super::recall::step_injection_result),
        )
    }

    /// Saves the scratchpad (at a subtask boundary; the seed checkpoints there), replacing the
    /// previous checkpoint of this session, so that `resumeSession()` can restore it after a
    /// crash. Observing can go on meanwhile. `finalize()` removes the checkpoint.
    ///
    /// ```ts
    /// onSubtaskDone: async () => { await session.checkpoint() }
    /// // after a restart:
    /// const session = (await memory.resumeSession(id)) ?? memory.observe({ sessionId: id })
    /// ```
    #[napi(ts_return_type = "Promise<CheckpointInfo>")]
    pub fn checkpoint<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, live_handle(&self.owner));
        let session = self.session.clone();
        promise_json(env, async move { handle.checkpoint(&session).await }, |c| {
            CheckpointInfo {
                session_id: c.session_id,
                step: c.step,
                bytes: c.bytes as f64,
                saved_at: c.saved_at as f64,
            }
        })
    }

    /// The scratchpad so far: counts, early triggers, the first web step, its size in bytes.
    #[napi(ts_return_type = "SessionSnapshot")]
    pub fn snapshot(&self, env: Env) -> Result<JsonText> {
        let s = self.session.snapshot().map_err(|e| to_js_error(&env, &e))?;
        let json = serde_json::to_string(&snapshot(s))
            .map_err(|e| to_js_error(&env, &CoreError::Internal(e.to_string())))?;
        Ok(JsonText::new(json))
    }

    /// Ends the session: runs the 17 signals' detectors and the promotion pipeline
    /// (validation, session-type gate, frequency across sessions, signal value, novelty, trust
    /// gate, cap) and stores the promoted memories, the signal counts and the session's
    /// metrics in one transaction. `outcome` defaults to what a `memory:session-complete`
    /// message said, else `'success'`. With `options.synthesize` (the app's LLM), a successful
    /// session that promoted signal memories gets one synthesis call after the promotion is
    /// stored (see `FinalizeResult.synthesis`). Rejects with `ENGRAM_CONFLICT` if already
    /// finalized (the scratchpad is kept on any failure, so the call can be retried).
    ///
    /// ```ts
    /// const { promoted, candidates } = await session.finalize('success')
    /// for (const c of candidates) console.log(c.signal, c.decision, c.content)
    /// ```
    #[napi(
        ts_args_type = "outcome?: 'success' | 'partial' | 'failure' | 'abandoned', options?: FinalizeOptions",
        ts_return_type = "Promise<FinalizeResult>"
    )]
    pub fn finalize<'env>(
        &self,
        env: &'env Env,
        outcome: Option<Unknown<'env>>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let outcome: Option<String> = arg!(env, optional(env, outcome.as_ref(), "outcome"));
        let outcome = arg!(
            env,
            outcome.as_deref().map(SessionOutcome::parse).transpose()
        );
        let options: Option<super::synthesis::FinalizeOptions> = arg!(
            env,
            super::args::optional_object(env, options.as_ref(), "options")
        );
        let synthesize = match options {
            Some(o) => {
                let limit = arg!(
                    env,
                    super::strict::callback_timeout(
                        o.timeout_ms,
                        super::synthesis::DEFAULT_TIMEOUT,
                        "options.timeoutMs"
                    )
                );
                o.synthesize
                    .map(|f| super::synthesis::synthesize_fn(f, limit))
            }
            None => None,
        };
        let handle = arg!(env, live_handle(&self.owner));
        let session = self.session.clone();
        promise_json(
            env,
            async move {
                match synthesize {
                    Some(f) => handle.finalize_with(&session, outcome, &f).await,
                    None => handle.finalize(&session, outcome).await,
                }
            },
            finalize_result,
        )
    }
}

/// What `checkpoint()` saved.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    /// The session.
    pub session_id: String,
    /// The highest step the scratchpad had seen.
    pub step: u32,
    /// Bytes saved.
    pub bytes: f64,
    /// When (ms since the epoch).
    pub saved_at: f64,
}

/// A step limit and where it came from.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepLimit {
    /// The limit to use.
    pub limit: u32,
    /// The factor applied (1 without enough calibration).
    pub factor: f64,
    /// Finalized sessions the factor comes from (0: none applied).
    pub sessions: u32,
}

/// Options of `stepLimit()`.
#[napi(object, object_to_js = false)]
pub struct StepLimitOptions {
    /// The module the task works in (a directory, `'src/auth/'`); default: the project root.
    pub module: Option<String>,
}

#[napi]
impl Engram {
    /// The step limit for a task of `baseMaxSteps` planned steps in `options.module` (a
    /// directory such as `'src/auth/'`): scaled by the module's measured overrun (the
    /// step-overrun signal's mean ratio of steps run to steps planned, once 3 finalized
    /// sessions with `plannedSteps` measured it; between 1x and 2x), at most 1,000. Use it for
    /// the agent loop's stop condition.
    ///
    /// ```ts
    /// const { limit, factor } = await memory.stepLimit(40, { module: 'src/auth/' })
    /// streamText({ ...config, stopWhen: stepCountIs(limit) })
    /// ```
    #[napi(
        ts_args_type = "baseMaxSteps: number, options?: StepLimitOptions",
        ts_return_type = "Promise<StepLimit>"
    )]
    pub fn step_limit<'env>(
        &self,
        env: &'env Env,
        base: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let base: f64 = arg!(env, super::args::required(env, &base, "baseMaxSteps"));
        let base = arg!(env, whole(base, "baseMaxSteps"));
        let options: Option<StepLimitOptions> = arg!(
            env,
            super::args::optional_object(env, options.as_ref(), "options")
        );
        let module = options.and_then(|o| o.module);
        promise_json(
            env,
            async move { handle.step_limit(base, module.as_deref()).await },
            |l| StepLimit {
                limit: l.limit,
                factor: l.factor,
                sessions: l.sessions,
            },
        )
    }

    /// Merges the open sessions `sessionIds` (parallel sub-agents of one task, each observed
    /// under its own id) into a new open session, and returns it; the sources end. Files more
    /// than one agent changed become parallel-conflict candidates, and what more than one
    /// agent showed or recorded needs no other sessions and gains 10 % confidence per extra
    /// agent. Finalize the merged session once. Throws `ENGRAM_NOT_FOUND` for an id that is not
    /// open, `ENGRAM_CONFLICT` if `options.sessionId` is open, `ENGRAM_INVALID_ARG` for fewer
    /// than two distinct ids; nothing changes on failure.
    ///
    /// ```ts
    /// const merged = memory.mergeSessions(['task-9/a', 'task-9/b'], { sessionId: 'task-9' })
    /// const { promoted } = await merged.finalize('success')
    /// ```
    #[napi(ts_args_type = "sessionIds: string[], options: ObserveOptions")]
    pub fn merge_sessions(
        &self,
        env: Env,
        session_ids: Unknown<'_>,
        options: Unknown<'_>,
    ) -> Result<ObserverSession> {
        let fail = |e: CoreError| to_js_error(&env, &e);
        let handle = self.handle().map_err(fail)?;
        let ids: Vec<String> =
            super::args::required(&env, &session_ids, "sessionIds").map_err(fail)?;
        let options: ObserveOptions = required_object(&env, &options, "options").map_err(fail)?;
        let options = session_options(options).map_err(fail)?;
        let session = handle.merge_sessions(&ids, &options).map_err(fail)?;
        Ok(ObserverSession {
            owner: self.slot(),
            session_id: options.session_id.trim().to_owned(),
            session,
        })
    }

    /// The open session `sessionId`, else the one restored from its last `checkpoint()` (after
    /// a crash or a restart), else `null`.
    #[napi(
        ts_args_type = "sessionId: string",
        ts_return_type = "Promise<ObserverSession | null>"
    )]
    pub fn resume_session<'env>(
        &self,
        env: &'env Env,
        session_id: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, Option<ObserverSession>>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, super::args::required(env, &session_id, "sessionId"));
        let owner = self.slot();
        super::error::promise(
            env,
            async move { handle.resume_session(&id).await },
            move |found| {
                found.map(|session| ObserverSession {
                    owner,
                    session_id: session.id().to_owned(),
                    session,
                })
            },
        )
    }

    /// Opens an observed agent session (or joins the open one with the same id, from any
    /// handle on this database in any thread: a worker and the main thread can both feed it).
    /// Throws `ENGRAM_INVALID_ARG` for bad options, `ENGRAM_CLOSED` on a closed handle.
    ///
    /// ```ts
    /// const session = memory.observe({ sessionId: crypto.randomUUID(), sessionType: 'build' })
    /// session.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/a.ts' }, stepIndex: 1 })
    /// const { promoted } = await session.finalize('success')
    /// ```
    #[napi(ts_args_type = "options: ObserveOptions")]
    pub fn observe(&self, env: Env, options: Unknown<'_>) -> Result<ObserverSession> {
        let fail = |e: CoreError| to_js_error(&env, &e);
        let handle = self.handle().map_err(fail)?;
        let options: ObserveOptions = required_object(&env, &options, "options").map_err(fail)?;
        let options = session_options(options).map_err(fail)?;
        let session = handle.observe(&options).map_err(fail)?;
        Ok(ObserverSession {
            owner: self.slot(),
            session_id: options.session_id.trim().to_owned(),
            session,
        })
    }
}
