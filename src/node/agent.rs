//! The agent-loop builders' JS surface: `Engram.sessionContext()` (injection points 1 and 2)
//! and `ObserverSession.augmentToolResult()` (injection point 3). Options are checked here;
//! results cross as JSON (see `json.rs`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional_object, required};
use super::class::{live_handle, Engram};
use super::json::{promise_json, JsonText};
use super::observer::{read_tool_target, ObserverSession};
use super::types::Memory;
use crate::agent::session_context as core;
use crate::error::Error as CoreError;
use crate::observer::SessionType;

/// What `sessionContext()` is asked for.
#[napi(object, object_to_js = false)]
pub struct SessionContextOptions {
    /// The kind of session starting (default `'build'`): sets the phase the relevant memories
    /// are ranked for.
    #[napi(
        ts_type = "'build' | 'insights' | 'roadmap' | 'terminal' | 'changelog' | 'spec_creation' | 'pr_review'"
    )]
    pub session_type: Option<String>,
    /// What the session is about to do, in words: the relevant memories and recipes are
    /// ranked for it (at most 8 KiB).
    pub task: Option<String>,
    /// Module directories (`'src/auth/'`) it is likely to touch, relative to the project root
    /// (at most 50): memories naming one or attached to a file under one come in.
    pub modules: Option<Vec<String>>,
    /// Tokens the context may use (1 to 200,000; default 2,000).
    pub budget_tokens: Option<f64>,
    /// The agent session it is for: the memories in it count as used by the session, and an
    /// observed session of that id open in this process records them as shown (step injection
    /// and `augmentToolResult` never repeat them).
    pub session_id: Option<String>,
}

/// A memory in a session-start context.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextMemory {
    /// Its section: unfinished work to resume, pinned or user-taught, relevant to the task
    /// and modules, a workflow recipe, or possibly outdated (its code changed).
    #[napi(ts_type = "'resume' | 'pinned' | 'relevant' | 'recipes' | 'stale'")]
    pub section: String,
    /// Its label in the text (`[label]`), from 1.
    pub label: u32,
    /// The chip an agent writes to cite it (`[Memory #id: brief]`).
    pub citation: String,
    /// Tokens its entry uses.
    pub tokens: u32,
    /// The memory.
    pub memory: Memory,
}

/// The newest finalized observed session, as the next session hears of it.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHandoff {
    /// The session.
    pub session_id: String,
    /// Its type.
    pub session_type: String,
    /// How it ended (`success`, `partial`, `failure`, `abandoned`).
    pub outcome: String,
    /// Its work unit, when it had one.
    pub work_unit: Option<String>,
    /// The module it worked in.
    pub module: Option<String>,
    /// When it was finalized (ms since the epoch).
    pub ended_at: f64,
    /// Steps it ran.
    pub steps: u32,
    /// Distinct files it changed.
    pub files_edited: u32,
    /// Tool calls that failed.
    pub errors: u32,
    /// Memories it promoted.
    pub promoted: u32,
    /// The line the context shows.
    pub text: String,
}

/// What an agent should know when it starts a session on this project.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionContext {
    /// Markdown for the system prompt or the first message (`''` when there is nothing to
    /// say): sections of memories, each labelled `[n]` with its id.
    pub text: String,
    /// Its estimated tokens.
    pub tokens: u32,
    /// The budget it was packed to.
    pub budget_tokens: u32,
    /// The memories in it, in the order shown.
    pub memories: Vec<ContextMemory>,
    /// The last session's handoff, when it was shown.
    pub handoff: Option<SessionHandoff>,
    /// Candidates left out because they did not fit the budget.
    pub omitted: u32,
}

/// What `augmentToolResult()` adds to a tool's result.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultAugmentation {
    /// The text to append: the file's known pitfalls.
    pub content: String,
    /// The result given with `content` appended after a blank line (`content` alone when no
    /// result was given).
    pub result: String,
    /// The memories in it.
    pub memories: Vec<Memory>,
}

fn section_name(section: core::Section) -> &'static str {
    match section {
        core::Section::Resume => "resume",
        core::Section::Pinned => "pinned",
        core::Section::Relevant => "relevant",
        core::Section::Recipes => "recipes",
        core::Section::Stale => "stale",
    }
}

fn request(
    options: Option<SessionContextOptions>,
) -> std::result::Result<core::SessionContextRequest, CoreError> {
    let Some(o) = options else {
        return Ok(core::SessionContextRequest::default());
    };
    let budget_tokens = match o.budget_tokens {
        None => None,
        Some(n) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n <= f64::from(u32::MAX) => {
            Some(n as u32)
        }
        Some(n) => {
            return Err(CoreError::invalid(format!(
                "budgetTokens must be a whole number >= 1, got {n}"
            )))
        }
    };
    Ok(core::SessionContextRequest {
        session_type: o
            .session_type
            .as_deref()
            .map(SessionType::parse)
            .transpose()?,
        task: o.task,
        modules: o.modules.unwrap_or_default(),
        budget_tokens,
        session_id: o.session_id,
    })
}

fn result(c: core::SessionContext) -> SessionContext {
    SessionContext {
        text: c.text,
        tokens: c.tokens,
        budget_tokens: c.budget_tokens,
        memories: c
            .memories
            .into_iter()
            .map(|m| ContextMemory {
                section: section_name(m.section).to_owned(),
                label: m.label,
                citation: m.citation,
                tokens: m.tokens,
                memory: Memory::from(m.memory),
            })
            .collect(),
        handoff: c.handoff.map(|h| SessionHandoff {
            session_id: h.session_id,
            session_type: h.session_type,
            outcome: h.outcome,
            work_unit: h.work_unit,
            module: h.module,
            ended_at: h.ended_at as f64,
            steps: h.steps,
            files_edited: h.files_edited,
            errors: h.errors,
            promoted: h.promoted,
            text: h.text,
        }),
        omitted: c.omitted,
    }
}

#[napi]
impl Engram {
    /// What an agent should know when it starts a session on this project (the seed's
    /// injection points 1 and 2), packed into `budgetTokens` (default 2,000) with citations:
    /// the newest unfinished `work_state` (resume), the last observed session's handoff line,
    /// pinned and user-taught memories, the memories for `task` and `modules` (or the
    /// project's most confident knowledge), workflow recipes, and memories whose code changed
    /// since (to verify). Earlier sections win the budget; each memory appears once.
    /// Memories below the trust level's injection threshold are left out, except pinned and
    /// user-taught ones.
    ///
    /// ```ts
    /// const ctx = await memory.sessionContext({ task: 'add rate limiting to the login route', modules: ['src/auth/'] })
    /// const system = `${basePrompt}\n\n${ctx.text}`
    /// ```
    #[napi(
        ts_args_type = "options?: SessionContextOptions",
        ts_return_type = "Promise<SessionContext>"
    )]
    pub fn session_context<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: Option<SessionContextOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let request = arg!(env, request(options));
        promise_json(
            env,
            async move { handle.session_context(request).await },
            result,
        )
    }
}

#[napi]
impl ObserverSession {
    /// Injection point 3: the known pitfalls (gotchas, error patterns, dead ends) of the file
    /// a file tool (`Read`, `Edit`, `Write` or an alias) just read or changed, to append to the
    /// tool's result; `null` for other tools, when there are none the session was not already
    /// shown (by step injection, `sessionContext` with this session's id, or an earlier
    /// augmentation), or for sessions outside the `full` A/B group. What is returned counts as
    /// used and is never shown to this session again.
    ///
    /// ```ts
    /// execute: async (args) => {
    ///   const output = await readFile(args.file_path, 'utf8')
    ///   const extra = await session.augmentToolResult('Read', args, output)
    ///   return extra ? extra.result : output
    /// }
    /// ```
    #[napi(
        ts_args_type = "toolName: string, args: Record<string, unknown>, result?: string",
        ts_return_type = "Promise<ToolResultAugmentation | null>"
    )]
    pub fn augment_tool_result<'env>(
        &self,
        env: &'env Env,
        tool_name: Unknown<'env>,
        args: Unknown<'env>,
        result: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let tool: String = arg!(env, required(env, &tool_name, "toolName"));
        let file = arg!(env, read_tool_target(env, &args));
        let result: Option<String> = match result {
            Some(r) if !matches!(r.get_type(), Ok(ValueType::Undefined | ValueType::Null)) => {
                Some(arg!(env, required(env, &r, "result")))
            }
            _ => None,
        };
        let handle = arg!(env, live_handle(self.owner()));
        let session = self.core().clone();
        promise_json(
            env,
            async move {
                handle
                    .augment_tool_result(&session, &tool, file.as_deref())
                    .await
            },
            move |found| {
                found.map(|i| ToolResultAugmentation {
                    result: match &result {
                        Some(r) => format!("{r}\n\n{}", i.content),
                        None => i.content.clone(),
                    },
                    content: i.content,
                    memories: i.memories.into_iter().map(Memory::from).collect(),
                })
            },
        )
    }
}
