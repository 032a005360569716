//! The observation protocol: the messages an agent loop reports (the seed's worker IPC
//! messages, section 11), the session's settings, and how a session ends.
//!
//! Messages carry only what the signals use. Long texts (file contents, tool output) are
//! clipped by whoever builds the message (the binding reads at most [`MAX_TEXT_BYTES`] of
//! them and their full length), so observing never copies a whole file.

use crate::error::{Error, Result};

/// Most bytes of one text (tool output, reasoning) an observation keeps.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;

/// One message of an agent loop.
#[derive(Debug, Clone)]
pub enum Message {
    /// `memory:tool-call`: the agent called a tool.
    ToolCall(ToolCall),
    /// `memory:tool-result`: a tool answered.
    ToolResult(ToolResult),
    /// `memory:reasoning`: text the model produced.
    Reasoning {
        /// The text (clipped).
        text: String,
        /// The step it belongs to.
        step: u32,
    },
    /// `memory:step-complete`: a step of the loop ended.
    StepComplete {
        /// The step number.
        step: u32,
        /// Input tokens the step's model call used, when the loop knows.
        input_tokens: Option<u32>,
    },
    /// `memory:session-complete`: the loop ended (the outcome is recorded; `finalize` runs
    /// the promotion).
    SessionComplete {
        /// How it ended.
        outcome: SessionOutcome,
        /// Steps the loop ran.
        steps_executed: u32,
    },
    /// `memory:record`: the agent asked to remember something (a scratchpad entry, promoted
    /// at `finalize` with source `agent_explicit`).
    Record(RecordEntry),
    /// `memory:search`: the agent searched memory (kept for gap detection and injection).
    Search {
        /// What it searched for.
        query: String,
    },
}

/// A tool call, reduced to what the signals use.
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    /// The tool's name as the agent framework calls it.
    pub tool: String,
    /// The step it was made in.
    pub step: u32,
    /// The framework's id of the call, when it has one (pairs the result exactly).
    pub call_id: Option<String>,
    /// The file it reads or changes.
    pub path: Option<String>,
    /// The search or glob pattern.
    pub pattern: Option<String>,
    /// The shell command.
    pub command: Option<String>,
    /// The URL fetched (or web search query).
    pub url: Option<String>,
    /// Hash of the text an edit replaces (see [`super::fingerprint::hash_text`]).
    pub old_text_hash: Option<u64>,
    /// Hash of the edit's new text.
    pub new_text_hash: Option<u64>,
    /// When the call was made (ms since the epoch), if the caller timestamps messages.
    pub at_ms: Option<i64>,
}

/// A tool's answer.
#[derive(Debug, Clone, Default)]
pub struct ToolResult {
    /// The tool's name.
    pub tool: String,
    /// The step.
    pub step: u32,
    /// The call's id, when the framework has one.
    pub call_id: Option<String>,
    /// Whether the tool failed.
    pub is_error: bool,
    /// The start of the output (at most [`MAX_TEXT_BYTES`]).
    pub text: String,
    /// The output's full length in characters (UTF-16 units from JS): its token cost.
    pub full_len: u32,
    /// When the answer came (ms since the epoch), if the caller timestamps messages.
    pub at_ms: Option<i64>,
}

/// What the agent asked to remember.
#[derive(Debug, Clone)]
pub struct RecordEntry {
    /// Memory type (default `gotcha`).
    pub memory_type: crate::memory::MemoryType,
    /// The text.
    pub content: String,
    /// Files it concerns.
    pub related_files: Vec<String>,
    /// The step it was recorded in.
    pub step: u32,
}

crate::memory::model::string_enum!(
    /// How a session ended. Only `success` passes the validation filter in full: the other
    /// outcomes keep dead ends only (what failed is worth knowing; how it failed is not a
    /// recipe).
    SessionOutcome, "session outcome" {
        /// The work was done (for a build: QA passed).
        Success = "success",
        /// Some of the work was done.
        Partial = "partial",
        /// The work failed.
        Failure = "failure",
        /// The session was stopped.
        Abandoned = "abandoned",
    }
);

crate::memory::model::string_enum!(
    /// What kind of session, which decides its promotion gate (the seed's section 5 table).
    SessionType, "session type" {
        /// A build (coding) session: every signal, up to 20 memories, only when QA passed.
        Build = "build",
        /// An insights session: co-access, self-correction, repeated grep; up to 5.
        Insights = "insights",
        /// A roadmap session: recorded decisions and requirements; up to 3.
        Roadmap = "roadmap",
        /// An agent terminal: error-retry and tool sequences; up to 3.
        Terminal = "terminal",
        /// A changelog session: nothing is promoted.
        Changelog = "changelog",
        /// Spec creation: file access and module insights; up to 3, when the spec is accepted.
        SpecCreation = "spec_creation",
        /// A PR review: error-retry and self-correction; up to 8, when the review completed.
        PrReview = "pr_review",
    }
);

impl SessionType {
    /// The most memories one session of this type promotes (the seed's hard cap).
    pub fn max_promoted(self) -> usize {
        match self {
            SessionType::Build => 20,
            SessionType::Insights => 5,
            SessionType::PrReview => 8,
            SessionType::Changelog => 0,
            SessionType::Roadmap | SessionType::Terminal | SessionType::SpecCreation => 3,
        }
    }

    /// Whether the gate opens only when the session succeeded (QA passed, spec accepted,
    /// review completed); the others promote at session end whatever the outcome (still
    /// through the validation filter).
    pub fn needs_success(self) -> bool {
        matches!(
            self,
            SessionType::Build | SessionType::SpecCreation | SessionType::PrReview
        )
    }
}

/// How a session is opened.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The session's id (unique per project; a second `observe` with it joins the session).
    pub session_id: String,
    /// What kind of session.
    pub session_type: SessionType,
    /// The work unit (spec / subtask label), stored with what the session promotes.
    pub work_unit: Option<String>,
    /// The methodology plugin (`native`, `bmad`, `tdd`...).
    pub methodology: Option<String>,
    /// Steps the plan expected: the step-overrun signal compares the steps run with it.
    pub planned_steps: Option<u32>,
    /// Most bytes the scratchpad may hold (default [`DEFAULT_MAX_SCRATCHPAD_BYTES`]).
    pub max_bytes: usize,
}

/// The seed's scratchpad cap: 50 MB.
pub const DEFAULT_MAX_SCRATCHPAD_BYTES: usize = 50 * 1024 * 1024;

impl SessionOptions {
    /// A build session with every default.
    pub fn new(session_id: impl Into<String>) -> Self {
        SessionOptions {
            session_id: session_id.into(),
            session_type: SessionType::Build,
            work_unit: None,
            methodology: None,
            planned_steps: None,
            max_bytes: DEFAULT_MAX_SCRATCHPAD_BYTES,
        }
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<()> {
        let id = self.session_id.trim();
        if id.is_empty() || id.len() > 256 {
            return Err(Error::invalid("sessionId must be 1 to 256 bytes"));
        }
        if self.max_bytes < 64 * 1024 {
            return Err(Error::invalid("maxScratchpadBytes must be at least 65536"));
        }
        for (name, value) in [
            ("workUnit", &self.work_unit),
            ("methodology", &self.methodology),
        ] {
            if value.as_ref().is_some_and(|v| v.len() > 1024) {
                return Err(Error::invalid(format!("{name} must be at most 1024 bytes")));
            }
        }
        Ok(())
    }
}

/// Reading the protocol's JS shape (`{ type: 'memory:tool-call', toolName, args, stepIndex }`)
/// from JSON: what recorded sessions (fixtures, logs) are stored as. The Node binding reads
/// the same fields straight from JS objects.
pub mod json {
    use serde_json::Value;

    use super::*;
    use crate::observer::fingerprint::hash_text;
    use crate::observer::tools::{
        COMMAND_KEYS, EDIT_NEW_KEYS, EDIT_OLD_KEYS, PATH_KEYS, PATTERN_KEYS, URL_KEYS,
    };

    fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
        v.get(key).and_then(Value::as_str)
    }

    fn first_str<'a>(args: &'a Value, keys: &[&str]) -> Option<&'a str> {
        keys.iter().find_map(|k| str_field(args, k))
    }

    fn step(v: &Value, key: &str) -> Result<u32> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(0),
            Some(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| Error::invalid(format!("{key} must be a non-negative integer"))),
        }
    }

    fn clip(text: &str) -> String {
        crate::text::clip_bytes(text, MAX_TEXT_BYTES).to_owned()
    }

    /// One message from its JSON form.
    pub fn message(v: &Value) -> Result<Message> {
        let kind =
            str_field(v, "type").ok_or_else(|| Error::invalid("message.type is required"))?;
        let at_ms = v.get("timestamp").and_then(Value::as_i64);
        let tool = || {
            str_field(v, "toolName")
                .map(str::to_owned)
                .ok_or_else(|| Error::invalid(format!("{kind}: toolName is required")))
        };
        Ok(match kind {
            "memory:tool-call" => {
                let empty = Value::Null;
                let args = v.get("args").unwrap_or(&empty);
                Message::ToolCall(ToolCall {
                    tool: tool()?,
                    step: step(v, "stepIndex")?,
                    call_id: str_field(v, "toolCallId").map(str::to_owned),
                    path: first_str(args, PATH_KEYS).map(str::to_owned),
                    pattern: first_str(args, PATTERN_KEYS).map(clip),
                    command: first_str(args, COMMAND_KEYS).map(clip),
                    url: first_str(args, URL_KEYS).map(clip),
                    old_text_hash: first_str(args, EDIT_OLD_KEYS).map(|t| hash_text(&clip(t))),
                    new_text_hash: first_str(args, EDIT_NEW_KEYS).map(|t| hash_text(&clip(t))),
                    at_ms,
                })
            }
            "memory:tool-result" => {
                let text = str_field(v, "result").unwrap_or("");
                Message::ToolResult(ToolResult {
                    tool: tool()?,
                    step: step(v, "stepIndex")?,
                    call_id: str_field(v, "toolCallId").map(str::to_owned),
                    is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
                    text: clip(text),
                    full_len: text.encode_utf16().count().min(u32::MAX as usize) as u32,
                    at_ms,
                })
            }
            "memory:reasoning" => Message::Reasoning {
                text: clip(str_field(v, "text").unwrap_or("")),
                step: step(v, "stepIndex")?,
            },
            "memory:step-complete" => Message::StepComplete {
                step: step(v, "stepNumber")?,
                input_tokens: v
                    .get("inputTokens")
                    .and_then(Value::as_u64)
                    .map(|n| n.min(u64::from(u32::MAX)) as u32),
            },
            "memory:session-complete" => Message::SessionComplete {
                outcome: SessionOutcome::parse(str_field(v, "outcome").unwrap_or("success"))?,
                steps_executed: step(v, "stepsExecuted")?,
            },
            "memory:record" => {
                let entry = v.get("entry").unwrap_or(v);
                let content = str_field(entry, "content")
                    .ok_or_else(|| Error::invalid("memory:record: entry.content is required"))?;
                Message::Record(RecordEntry {
                    memory_type: match str_field(entry, "type") {
                        Some(t) => crate::memory::MemoryType::parse(t)?,
                        None => crate::memory::MemoryType::Gotcha,
                    },
                    content: clip(content),
                    related_files: entry
                        .get("relatedFiles")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default(),
                    step: step(v, "stepIndex")?,
                })
            }
            "memory:search" => Message::Search {
                query: clip(str_field(v, "query").unwrap_or("")),
            },
            other => {
                return Err(Error::invalid(format!(
                    "unknown message type {other:?}; expected memory:tool-call, \
                     memory:tool-result, memory:reasoning, memory:step-complete, \
                     memory:session-complete, memory:record or memory:search"
                )))
            }
        })
    }
}
