//! Between an agent's steps: whether to put a memory in front of it now (the seed's
//! StepInjectionDecider). Three triggers, in order:
//!
//! 1. **Gotchas of files just touched.** After a `Read`/`Edit`/`Write`/`MultiEdit` of a file,
//!    the gotchas, error patterns and dead ends attached to it (or to a symbol in it) that the
//!    agent has not been shown yet, at most [`GOTCHA_LIMIT`].
//! 2. **Scratchpad reflection.** In an observed session, what the agent recorded
//!    (`memory:record`) since the previous step, once.
//! 3. **Search short-circuit.** When one of the last [`SEARCH_LOOKBACK`] `Grep`/`Glob` patterns
//!    matches a memory by every one of its words, that memory: the agent is searching for
//!    something already known.
//!
//! A memory is injected only when its current confidence is above the project's trust-level
//! threshold (0.80 for a new project, down to 0.45 at the autonomous level: see
//! `lifecycle::trust`), or when the user pinned or taught it (a file's gotchas). The first [`SKIP_STEPS`] steps never get an injection (the agent is
//! still reading its initial context). What is injected counts as used (access count, last
//! access).

use std::collections::HashSet;

use super::scoring::current_confidence;
use crate::error::Result;
use crate::memory::{self, ListFilter, Memory, MemoryType, SearchMode, SearchOptions};
use crate::Engram;

/// Steps before this one never get an injection.
pub const SKIP_STEPS: u32 = 5;
/// Most gotchas injected at once.
pub const GOTCHA_LIMIT: usize = 4;
/// How many of the latest searches are checked against memory.
pub const SEARCH_LOOKBACK: usize = 3;
/// Most tool calls of a context looked at.
pub const MAX_TOOL_CALLS: usize = 50;

/// Tools that read or change one file.
const FILE_TOOLS: &[&str] = &["Read", "Edit", "Write", "MultiEdit"];
/// Tools that search the code.
const SEARCH_TOOLS: &[&str] = &["Grep", "Glob"];

/// One recent tool call of the agent.
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    /// The tool's name (`Read`, `Edit`, `Grep`, `Glob`...).
    pub tool: String,
    /// The file it read or changed, for file tools.
    pub file_path: Option<String>,
    /// The pattern it searched for, for search tools.
    pub pattern: Option<String>,
}

/// What the agent did lately and what it has been shown.
#[derive(Debug, Clone, Default)]
pub struct StepContext {
    /// Recent tool calls, oldest first.
    pub tool_calls: Vec<ToolCall>,
    /// Memories already injected in this session (never injected twice).
    pub injected_ids: Vec<String>,
    /// The agent session: what is injected counts for its summary (see `lifecycle::session`).
    pub session_id: Option<String>,
}

/// Why a memory is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectionKind {
    /// Gotchas of files the agent just touched.
    Gotchas,
    /// A memory that answers what the agent is searching for.
    SearchShortCircuit,
    /// What the agent itself recorded in its scratchpad since the last step.
    ScratchpadReflection,
    /// Gotchas of the file a tool just read or changed, appended to the tool's result
    /// (injection point 3).
    ToolResult,
}

impl InjectionKind {
    /// `gotcha_injection` or `search_short_circuit` (the seed's names).
    pub fn as_str(self) -> &'static str {
        match self {
            InjectionKind::Gotchas => "gotcha_injection",
            InjectionKind::SearchShortCircuit => "search_short_circuit",
            InjectionKind::ScratchpadReflection => "scratchpad_reflection",
            InjectionKind::ToolResult => "tool_result_augmentation",
        }
    }
}

/// A message to put in front of the agent.
#[derive(Debug, Clone)]
pub struct StepInjection {
    /// Which trigger fired.
    pub kind: InjectionKind,
    /// The text to add as a system message.
    pub content: String,
    /// The memories it holds (add them to `injected_ids`).
    pub memories: Vec<Memory>,
}

/// Decides what, if anything, to inject before step `step`. `notes` are the scratchpad
/// entries the agent recorded since the last step (the seed's second trigger, between the
/// gotchas and the search short-circuit); only an observed session has them.
pub(crate) async fn decide(
    handle: &Engram,
    step: u32,
    context: &StepContext,
    notes: &[String],
) -> Result<Option<StepInjection>> {
    if step < SKIP_STEPS {
        return Ok(None);
    }
    let start = context.tool_calls.len().saturating_sub(MAX_TOOL_CALLS);
    let calls = &context.tool_calls[start..];
    let shown: HashSet<&str> = context.injected_ids.iter().map(String::as_str).collect();
    let threshold = crate::lifecycle::trust::level(&handle.ctx())
        .await?
        .injection_threshold();
    let gotchas = fresh_gotchas(handle, calls, &shown, threshold).await?;
    let picked = if !gotchas.is_empty() {
        Some((InjectionKind::Gotchas, gotchas))
    } else if !notes.is_empty() {
        Some((InjectionKind::ScratchpadReflection, Vec::new()))
    } else {
        known_answer(handle, calls, &shown, threshold)
            .await?
            .map(|m| (InjectionKind::SearchShortCircuit, vec![m]))
    };
    let Some((kind, memories)) = picked else {
        return Ok(None);
    };
    let ids: Vec<String> = memories.iter().map(|m| m.id.clone()).collect();
    let session_id = handle
        .ctx()
        .validator()
        .opt_id("sessionId", context.session_id.as_deref())?;
    memory::touch(&handle.ctx(), &ids, session_id.as_deref()).await?;
    Ok(Some(StepInjection {
        kind,
        content: format(kind, &memories, notes),
        memories,
    }))
}

/// Injection point 3 (seed 003 section 9): the unseen gotchas, error patterns and dead ends of
/// the file a `Read` / `Edit` / `Write` (or an alias such as `read_file`) just touched, to
/// append to the tool's result. `None` for other tools, a file outside the project, or when
/// nothing unseen is above the trust level's threshold. What is returned counts as used.
pub(crate) async fn for_tool_result(
    handle: &Engram,
    tool: &str,
    file: &str,
    context: &StepContext,
) -> Result<Option<StepInjection>> {
    use crate::observer::tools::ToolKind;
    let canonical = match ToolKind::of(tool) {
        ToolKind::Read => "Read",
        ToolKind::Edit => "Edit",
        ToolKind::Write => "Write",
        _ => return Ok(None),
    };
    let call = ToolCall {
        tool: canonical.to_owned(),
        file_path: Some(file.to_owned()),
        pattern: None,
    };
    let shown: HashSet<&str> = context.injected_ids.iter().map(String::as_str).collect();
    let threshold = crate::lifecycle::trust::level(&handle.ctx())
        .await?
        .injection_threshold();
    let memories = fresh_gotchas(handle, std::slice::from_ref(&call), &shown, threshold).await?;
    if memories.is_empty() {
        return Ok(None);
    }
    let ids: Vec<String> = memories.iter().map(|m| m.id.clone()).collect();
    memory::touch(&handle.ctx(), &ids, context.session_id.as_deref()).await?;
    Ok(Some(StepInjection {
        kind: InjectionKind::ToolResult,
        content: format(InjectionKind::ToolResult, &memories, &[]),
        memories,
    }))
}

/// Trigger 1: unseen gotchas, error patterns and dead ends of the files just read or changed.
async fn fresh_gotchas(
    handle: &Engram,
    calls: &[ToolCall],
    shown: &HashSet<&str>,
    threshold: f64,
) -> Result<Vec<Memory>> {
    let mut files: Vec<String> = Vec::new();
    // Most recent first, so the file just touched leads.
    for call in calls.iter().rev() {
        if !FILE_TOOLS.contains(&call.tool.as_str()) {
            continue;
        }
        let Some(path) = call.file_path.as_deref() else {
            continue;
        };
        // A path outside the project has no memories here; it is not an error in a log.
        if let Ok(relative) = memory::input::confine_path(path, handle.project_root()) {
            if !files.contains(&relative) {
                files.push(relative);
            }
        }
    }
    if files.is_empty() {
        return Ok(Vec::new());
    }
    files.truncate(super::neighbourhood::MAX_FILES);
    let now = handle.engine().clock.now_ms();
    let attached = memory::attached_to_files(&handle.ctx(), &files, 200).await?;
    Ok(attached
        .into_iter()
        .map(|(_, m)| m)
        .filter(|m| {
            matches!(
                m.memory_type,
                MemoryType::Gotcha | MemoryType::ErrorPattern | MemoryType::DeadEnd
            ) && m.stale_at.is_none()
                && !shown.contains(m.id.as_str())
                && (vouched_for(m) || current_confidence(m, now) > threshold)
        })
        .take(GOTCHA_LIMIT)
        .collect())
}

/// Whether the user vouched for `m` (pinned it, or taught it): shown whatever the trust level,
/// as the session-start context does. A gotcha the user wrote down about a file is what a
/// Read of that file should bring up first, even in a project engram has just met.
fn vouched_for(m: &Memory) -> bool {
    m.pinned || m.source == memory::MemorySource::UserTaught
}

/// Trigger 3: a memory matching every word of one of the latest search patterns.
async fn known_answer(
    handle: &Engram,
    calls: &[ToolCall],
    shown: &HashSet<&str>,
    threshold: f64,
) -> Result<Option<Memory>> {
    let now = handle.engine().clock.now_ms();
    let searches = calls
        .iter()
        .rev()
        .filter(|c| SEARCH_TOOLS.contains(&c.tool.as_str()))
        .filter_map(|c| c.pattern.as_deref())
        .take(SEARCH_LOOKBACK);
    for pattern in searches {
        let words = pattern_words(pattern);
        let options = SearchOptions {
            limit: Some(5),
            mode: SearchMode::All,
            filter: ListFilter::default(),
            // A grep pattern names what it wants exactly: a near word answers something else.
            typo: false,
        };
        let hits = handle.search(&words, &options).await?;
        if let Some(hit) = hits.into_iter().find(|h| {
            !shown.contains(h.memory.id.as_str())
                && h.memory.stale_at.is_none()
                && current_confidence(&h.memory, now) > threshold
        }) {
            return Ok(Some(hit.memory));
        }
    }
    Ok(None)
}

/// The words of a regex or glob pattern: escapes such as `\s`, `\b`, `\d` go (they would leave
/// a stray letter that no memory has to contain); the rest of the syntax (`+`, `*`, `.`,
/// brackets) is punctuation to the query builder anyway.
fn pattern_words(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            chars.next();
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The system message for `memories` (or the scratchpad's `notes`).
fn format(kind: InjectionKind, memories: &[Memory], notes: &[String]) -> String {
    match kind {
        InjectionKind::Gotchas | InjectionKind::ToolResult => {
            let mut out = String::from(if kind == InjectionKind::Gotchas {
                "MEMORY: known pitfalls in the files you are working on:\n"
            } else {
                "MEMORY (engram): known pitfalls in this file, from earlier sessions:\n"
            });
            for m in memories {
                let files = if m.related_files.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", m.related_files.join(", "))
                };
                out.push_str(&format!(
                    "- [{}]{files} {}\n",
                    m.memory_type.as_str(),
                    m.content.trim()
                ));
            }
            out.trim_end().to_owned()
        }
        InjectionKind::ScratchpadReflection => {
            let mut out = String::from("SCRATCHPAD: what you noted since the last step:");
            for note in notes {
                out.push_str("\n- ");
                out.push_str(note.trim());
            }
            out
        }
        InjectionKind::SearchShortCircuit => {
            format!("MEMORY CONTEXT: {}", memories[0].content.trim())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_escapes_leave_no_stray_letters() {
        assert_eq!(pattern_words(r"session\s+cookie"), "session +cookie");
        assert_eq!(pattern_words(r"\bopen\(\)"), " open  ");
        assert_eq!(pattern_words("**/*.test.ts"), "**/*.test.ts");
    }
}
