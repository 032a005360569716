//! The agent-loop builders' JS surface: `Engram.sessionContext()` (injection points 1 and 2),
//! `Engram.prefetchPlan()` (the coder's files for injection point 2) and
//! `ObserverSession.augmentToolResult()` (injection point 3). Options are checked here;
//! results cross as JSON (see `json.rs`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional_object, required};
use super::class::{live_handle, Engram};
use super::json::{promise_json, JsonText};
use super::observer::{read_tool_target, ObserverSession};
use super::strict::Count;
use super::types::Memory;
use crate::agent::prefetch;
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
    /// Its section: in a session context, unfinished work to resume, pinned or user-taught,
    /// relevant to the task and modules, a workflow recipe, or possibly outdated (its code
    /// changed); in a planner's context, calibrations, dead ends, dependencies, outcomes and
    /// recipes; in a QA context, requirements, observations and error patterns.
    #[napi(
        ts_type = "'resume' | 'pinned' | 'relevant' | 'recipes' | 'stale' | 'calibrations' | 'dead_ends' | 'dependencies' | 'outcomes' | 'requirements' | 'observations' | 'error_patterns'"
    )]
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
    /// Build sessions: the prefetch plan's files listed in the text (paths, no content; see
    /// `prefetchPlan()` to load them).
    pub files: Vec<PrefetchFile>,
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

/// What `prefetchPlan()` is asked for.
#[napi(object, object_to_js = false)]
pub struct PrefetchPlanOptions {
    /// Module directories (`'src/auth/'`) the session will work in, relative to the project
    /// root (at most 50); none: the whole project.
    pub modules: Option<Vec<String>>,
    /// Tokens the planned files may use (1 to 1,000,000; default 32,000).
    #[napi(ts_type = "number")]
    pub budget_tokens: Option<Count>,
    /// Most files (1 to 200; default 12).
    #[napi(ts_type = "number")]
    pub max_files: Option<Count>,
    /// Read each planned file's text from the project root into `content` (needs a handle
    /// opened with `projectRoot`).
    pub with_content: Option<bool>,
}

/// A file of a prefetch plan.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefetchFile {
    /// Relative to the project root.
    pub path: String,
    /// Its module (directory, `/`-terminated).
    pub module: String,
    /// `always`: read in more than 80% of its module's past sessions; `usually`: more than 50%.
    #[napi(ts_type = "'always' | 'usually'")]
    pub tier: String,
    /// Share of its module's sessions that read it (0 to 1).
    pub share: f64,
    /// Sessions that read it.
    pub sessions: u32,
    /// Sessions that read anything in its module.
    pub module_sessions: u32,
    /// Its estimated tokens.
    pub tokens: u32,
    /// Its text (with `withContent`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// A frequently read file left out of a prefetch plan.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefetchOmitted {
    /// Relative to the project root.
    pub path: String,
    /// Its tier.
    #[napi(ts_type = "'always' | 'usually'")]
    pub tier: String,
    /// `budget`: it does not fit the budget left; `max_files`: the plan is full; `missing`:
    /// not in the code index (deleted, ignored, never indexed) or gone from disk;
    /// `unreadable`: skipped by the indexer, binary, or not UTF-8.
    #[napi(ts_type = "'budget' | 'max_files' | 'missing' | 'unreadable'")]
    pub reason: String,
}

/// The files to load before a coding session starts, in loading order.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefetchPlan {
    /// The planned files: the `always` tier, then `usually`, each by share.
    pub files: Vec<PrefetchFile>,
    /// Tiered files left out, in the order they were considered.
    pub omitted: Vec<PrefetchOmitted>,
    /// Tokens the planned files use.
    pub used_tokens: u32,
    /// The budget packed to.
    pub budget_tokens: u32,
}

fn prefetch_request(options: Option<PrefetchPlanOptions>) -> prefetch::PrefetchRequest {
    let Some(o) = options else {
        return prefetch::PrefetchRequest::default();
    };
    prefetch::PrefetchRequest {
        modules: o.modules.unwrap_or_default(),
        budget_tokens: o.budget_tokens.map(u32::from),
        max_files: o.max_files.map(u32::from),
        with_content: o.with_content.unwrap_or(false),
    }
}

fn prefetch_file(f: prefetch::PrefetchFile) -> PrefetchFile {
    PrefetchFile {
        path: f.path,
        module: f.module,
        tier: f.tier.as_str().to_owned(),
        share: f.share,
        sessions: f.sessions,
        module_sessions: f.module_sessions,
        tokens: f.tokens,
        content: f.content,
    }
}

fn prefetch_result(plan: prefetch::PrefetchPlan) -> PrefetchPlan {
    PrefetchPlan {
        files: plan.files.into_iter().map(prefetch_file).collect(),
        omitted: plan
            .omitted
            .into_iter()
            .map(|o| PrefetchOmitted {
                path: o.path,
                tier: o.tier.as_str().to_owned(),
                reason: o.reason.as_str().to_owned(),
            })
            .collect(),
        used_tokens: plan.used_tokens,
        budget_tokens: plan.budget_tokens,
    }
}

/// What `plannerContext()` is asked for besides the task.
#[napi(object, object_to_js = false)]
pub struct PlannerContextOptions {
    /// Module directories (`'src/auth/'`) the task is likely to touch, relative to the
    /// project root (at most 50); none: the whole project.
    pub modules: Option<Vec<String>>,
    /// Tokens the text may use (1 to 200,000; default 3,000).
    #[napi(ts_type = "number")]
    pub budget_tokens: Option<Count>,
}

/// How past tasks in the modules compared with their plans.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanCalibration {
    /// Steps run per step planned (above 1: tasks here run over their plans): multiply
    /// subtask estimates by it.
    pub factor: f64,
    /// Finalized observed sessions it comes from.
    pub sessions: u32,
}

/// A line to write into the plan, from a dead end.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanConstraint {
    /// The constraint (`Do not repeat: ...`).
    pub text: String,
    /// The dead-end memory it comes from.
    pub memory_id: String,
}

/// A file to add to the plan's scope.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanScopeFile {
    /// Relative to the project root.
    pub path: String,
    /// The causal-dependency memories coupling it to the modules.
    pub memory_ids: Vec<String>,
}

/// What a planning agent should know, and the planning transformations as data.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannerContext {
    /// Markdown for the planner's prompt: the transformations (`## Apply to the plan`), then
    /// calibrations, dead ends, causal dependencies, recent outcomes and recipes, each memory
    /// labelled `[n]` with its id.
    pub text: String,
    /// Its estimated tokens.
    pub tokens: u32,
    /// The budget it was packed to.
    pub budget_tokens: u32,
    /// The memories in it, in the order shown.
    pub memories: Vec<ContextMemory>,
    /// Candidates left out because they did not fit the budget.
    pub omitted: u32,
    /// Multiply subtask estimates by `factor`; null until 3 sessions in the modules were
    /// measured against a plan.
    pub calibration: Option<PlanCalibration>,
    /// Constraints from dead ends, most confident first.
    pub constraints: Vec<PlanConstraint>,
    /// Files outside the modules that causal dependencies couple to them.
    pub scope_files: Vec<PlanScopeFile>,
}

/// What `qaContext()` is asked for.
#[napi(object, object_to_js = false)]
pub struct QaContextOptions {
    /// Module directories (`'src/checkout/'`) under test (at most 50); none: the project.
    pub modules: Option<Vec<String>>,
    /// Tokens the text may use (1 to 200,000; default 2,000).
    #[napi(ts_type = "number")]
    pub budget_tokens: Option<Count>,
}

fn context_memories(memories: Vec<core::ContextMemory>) -> Vec<ContextMemory> {
    memories
        .into_iter()
        .map(|m| ContextMemory {
            section: section_name(m.section).to_owned(),
            label: m.label,
            citation: m.citation,
            tokens: m.tokens,
            memory: Memory::from(m.memory),
        })
        .collect()
}

fn planner_result(p: crate::agent::planner::PlannerContext) -> PlannerContext {
    PlannerContext {
        text: p.context.text,
        tokens: p.context.tokens,
        budget_tokens: p.context.budget_tokens,
        memories: context_memories(p.context.memories),
        omitted: p.context.omitted,
        calibration: p.calibration.map(|c| PlanCalibration {
            factor: c.factor,
            sessions: c.sessions,
        }),
        constraints: p
            .constraints
            .into_iter()
            .map(|c| PlanConstraint {
                text: c.text,
                memory_id: c.memory_id,
            })
            .collect(),
        scope_files: p
            .scope_files
            .into_iter()
            .map(|f| PlanScopeFile {
                path: f.path,
                memory_ids: f.memory_ids,
            })
            .collect(),
    }
}

fn section_name(section: core::Section) -> &'static str {
    match section {
        core::Section::Resume => "resume",
        core::Section::Pinned => "pinned",
        core::Section::Relevant => "relevant",
        core::Section::Recipes => "recipes",
        core::Section::Stale => "stale",
        core::Section::Calibrations => "calibrations",
        core::Section::DeadEnds => "dead_ends",
        core::Section::Dependencies => "dependencies",
        core::Section::Outcomes => "outcomes",
        core::Section::Requirements => "requirements",
        core::Section::Observations => "observations",
        core::Section::ErrorPatterns => "error_patterns",
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
        memories: context_memories(c.memories),
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
        files: c.files.into_iter().map(prefetch_file).collect(),
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
impl Engram {
    /// The coder's prefetch plan (the seed's predictive pre-loading, for injection point 2):
    /// the files past observed sessions in `modules` read in more than 80% (`always`, first)
    /// or more than 50% (`usually`) of their module's sessions, at least 3 sessions each,
    /// packed into `budgetTokens` (default 32,000) and `maxFiles` (default 12). Files deleted
    /// since, or too big for the budget left, are listed in `omitted` with the reason.
    ///
    /// ```ts
    /// const plan = await memory.prefetchPlan({ modules: ['src/auth/'], withContent: true })
    /// const first = plan.files.map((f) => `// ${f.path}\n${f.content}`).join('\n\n')
    /// ```
    #[napi(
        ts_args_type = "options?: PrefetchPlanOptions",
        ts_return_type = "Promise<PrefetchPlan>"
    )]
    pub fn prefetch_plan<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: Option<PrefetchPlanOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let request = prefetch_request(options);
        promise_json(
            env,
            async move { handle.prefetch_plan(request).await },
            prefetch_result,
        )
    }

    /// The planner's context (the seed's planner injection): task calibrations, dead ends,
    /// causal dependencies, the newest work-unit outcomes and the recipes ranked for `task`,
    /// for the `modules` it will touch, packed into `budgetTokens` (default 3,000), with the
    /// planning transformations as data: `calibration.factor` to multiply subtask estimates
    /// by, `constraints` from dead ends to write into the plan, `scopeFiles` coupled to the
    /// modules to add to its scope.
    ///
    /// ```ts
    /// const p = await memory.plannerContext('add rate limiting to login', { modules: ['src/auth/'] })
    /// const estimate = Math.ceil(subtasks.length * (p.calibration?.factor ?? 1))
    /// ```
    #[napi(
        ts_args_type = "task: string, options?: PlannerContextOptions",
        ts_return_type = "Promise<PlannerContext>"
    )]
    pub fn planner_context<'env>(
        &self,
        env: &'env Env,
        task: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let task: String = arg!(env, required(env, &task, "task"));
        let options: Option<PlannerContextOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let request = crate::agent::planner::PlannerRequest {
            task,
            modules: options
                .as_ref()
                .and_then(|o| o.modules.clone())
                .unwrap_or_default(),
            budget_tokens: options.and_then(|o| o.budget_tokens).map(u32::from),
        };
        promise_json(
            env,
            async move { handle.planner_context(request).await },
            planner_result,
        )
    }

    /// The QA context (the seed's QA injection, before the first browser or test call): the
    /// requirements, end-to-end observations and error patterns of the `modules` under test,
    /// in that order, packed into `budgetTokens` (default 2,000) with citations.
    ///
    /// ```ts
    /// const qa = await memory.qaContext({ modules: ['src/checkout/'] })
    /// const system = `${basePrompt}\n\n${qa.text}`
    /// ```
    #[napi(
        ts_args_type = "options?: QaContextOptions",
        ts_return_type = "Promise<SessionContext>"
    )]
    pub fn qa_context<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: Option<QaContextOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let request = crate::agent::qa::QaRequest {
            modules: options
                .as_ref()
                .and_then(|o| o.modules.clone())
                .unwrap_or_default(),
            budget_tokens: options.and_then(|o| o.budget_tokens).map(u32::from),
        };
        promise_json(env, async move { handle.qa_context(request).await }, result)
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
