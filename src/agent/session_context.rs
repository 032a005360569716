//! The session-start context (injection points 1 and 2 of seed 003 section 9; the Yaad seed's
//! "session start → context"): what an agent should know when it starts on this project,
//! packed into a token budget, each memory labelled `[n]` with its id so that the agent can
//! cite it and give feedback on it.
//!
//! Sections, in the order they are packed (earlier sections win the budget):
//!
//! 1. **Resume**: the newest `work_state` memory whose work unit has no later
//!    `work_unit_outcome` (the task it describes is unfinished).
//! 2. **Last session**: the handoff line of the newest finalized observer session (type,
//!    outcome, age, steps, files edited, failed tool calls, memories promoted).
//! 3. **Pinned and taught**: pinned and `user_taught` memories, most confident first. They
//!    are shown whatever their confidence: a person said so.
//! 4. **Relevant**: with a task, the memories `recall` ranks for it; with modules, the memories
//!    naming one of them or attached to a file under one; with neither, the most confident
//!    knowledge of the project. Only memories above the trust level's injection threshold.
//! 5. **Workflow recipes**: for the task when there is one, else the most confident.
//! 6. **Possibly outdated**: memories marked stale (their code changed), then those whose
//!    related files mostly changed in git since their commit (`lifecycle::git_drift`), those
//!    in the modules first, so the agent verifies them before relying on them.
//! 7. **Files usually read first** (build sessions): the prefetch plan's paths for the
//!    modules (`agent::prefetch`), so the agent opens them without searching; the app loads
//!    their contents itself with `prefetch_plan` when it wants them in the first message.
//!
//! A memory appears once, in its first section. An item that does not fit the remaining budget
//! is left out and counted in [`SessionContext::omitted`]; later, smaller items may still fit.
//! With a session id, the packed memories count as used by that session, and an observer
//! session of that id open in this engine records them as shown (step injection and tool-result
//! augmentation never repeat them).

use std::collections::HashSet;

use libsql::params;
use serde::Serialize;

use crate::code::chunk::estimate_tokens;
use crate::error::{DbContext, Error, Result};
use crate::lifecycle::decay::current_confidence;
use crate::memory::rows::{from_row, SELECT_M};
use crate::memory::{self, ListFilter, ListOrder, Memory, MemorySource, MemoryType};
use crate::observer::SessionType;

use super::prefetch::{self, PrefetchFile, PrefetchRequest};
use super::select::{self, Order};
use crate::retrieval::request::{RecallFilters, RecallRequest, Stages, MAX_BUDGET_TOKENS};
use crate::retrieval::scoring::Phase;
use crate::vector::ItemKind;
use crate::Engram;

/// The heading of the prefetched files' section.
const FILES_HEADING: &str = "## Files usually read first in these modules";

/// Tokens the context may use when the request names no budget (the Yaad seed's "~2K").
pub const DEFAULT_BUDGET_TOKENS: u32 = 2_000;
/// Most candidates per section (pinned, relevant); the budget usually ends a section sooner.
const SECTION_LIMIT: u32 = 20;
/// Most workflow recipes and stale warnings.
const SHORT_SECTION_LIMIT: u32 = 5;
/// Most memories the last session promoted that its handoff lists.
const HANDOFF_LEARNED: usize = 5;
/// Most `work_unit_outcome` memories looked at to decide that a work state is finished.
const OUTCOME_LOOKBACK: u32 = 50;

/// Knowledge types the relevant section draws from (work states, recipes, metrics-like types
/// and per-task calibrations have their own places or belong to the planner).
const KNOWLEDGE_TYPES: &[MemoryType] = &[
    MemoryType::Gotcha,
    MemoryType::Decision,
    MemoryType::Preference,
    MemoryType::Pattern,
    MemoryType::Requirement,
    MemoryType::ErrorPattern,
    MemoryType::ModuleInsight,
    MemoryType::CausalDependency,
    MemoryType::DeadEnd,
    MemoryType::E2eObservation,
];

/// What a session-start context is asked for.
#[derive(Debug, Clone, Default)]
pub struct SessionContextRequest {
    /// The kind of session starting (default `build`): sets the phase the relevant memories are
    /// ranked for.
    pub session_type: Option<SessionType>,
    /// What the session is about to do, in words (at most 8 KiB).
    pub task: Option<String>,
    /// Module directories (`src/auth/`) it is likely to touch, relative to the project root.
    pub modules: Vec<String>,
    /// Tokens the context may use (1..=200,000, default [`DEFAULT_BUDGET_TOKENS`]).
    pub budget_tokens: Option<u32>,
    /// The agent session it is for: its memories count as used by it.
    pub session_id: Option<String>,
}

/// The sections of a session-start context, in packing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    /// Unfinished work to resume.
    Resume,
    /// Pinned and user-taught memories.
    Pinned,
    /// Memories for the task and modules.
    Relevant,
    /// Workflow recipes.
    Recipes,
    /// Memories whose code changed since they were written.
    Stale,
    /// Planner: how past tasks' step counts compared with their plans.
    Calibrations,
    /// Planner: approaches tried and abandoned.
    DeadEnds,
    /// Planner: files that change together.
    Dependencies,
    /// Planner: how recent work units ended.
    Outcomes,
    /// QA: what the app must do.
    Requirements,
    /// QA: what end-to-end runs observed.
    Observations,
    /// QA: errors seen before and their fixes.
    ErrorPatterns,
}

impl Section {
    fn heading(self) -> &'static str {
        match self {
            Section::Resume => "## Resume: unfinished work",
            Section::Pinned => "## Pinned and taught by the user",
            Section::Relevant => "## Relevant memories",
            Section::Recipes => "## Workflow recipes",
            Section::Stale => "## Possibly outdated: verify before relying on these",
            Section::Calibrations => "## Calibration: past tasks against their plans",
            Section::DeadEnds => "## Dead ends: approaches that failed here",
            Section::Dependencies => "## Causal dependencies: files that change together",
            Section::Outcomes => "## Recent work-unit outcomes",
            Section::Requirements => "## Requirements",
            Section::Observations => "## End-to-end observations",
            Section::ErrorPatterns => "## Error patterns",
        }
    }
}

/// A memory in the context.
#[derive(Debug, Clone)]
pub struct ContextMemory {
    /// Its section.
    pub section: Section,
    /// Its label in the text (`[label]`), from 1.
    pub label: u32,
    /// The chip an agent writes to cite it (`[Memory #id: brief]`).
    pub citation: String,
    /// Tokens its entry uses.
    pub tokens: u32,
    /// The memory.
    pub memory: Memory,
}

/// The newest finalized session, as the next session should hear of it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Handoff {
    /// The session.
    pub session_id: String,
    /// Its type.
    pub session_type: String,
    /// How it ended.
    pub outcome: String,
    /// Its work unit, when it had one.
    pub work_unit: Option<String>,
    /// The module it worked in.
    pub module: Option<String>,
    /// When it was finalized (ms since the epoch).
    pub ended_at: i64,
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

/// A session-start context.
#[derive(Debug, Clone)]
pub struct SessionContext {
    /// Markdown to put in the system prompt or first message (empty when there is nothing to
    /// say).
    pub text: String,
    /// Its estimated tokens.
    pub tokens: u32,
    /// The budget it was packed to.
    pub budget_tokens: u32,
    /// The memories in it, in the order shown.
    pub memories: Vec<ContextMemory>,
    /// The last session's handoff, when one was shown.
    pub handoff: Option<Handoff>,
    /// Candidates left out because they did not fit.
    pub omitted: u32,
    /// The prefetch plan's files listed in the text (build sessions), in its order.
    pub files: Vec<PrefetchFile>,
}

/// Builds the session-start context for `request` (see the module doc).
pub(crate) async fn build(
    handle: &Engram,
    request: SessionContextRequest,
) -> Result<SessionContext> {
    let request = validated(handle, request)?;
    let ctx = handle.ctx();
    let now = handle.engine().clock.now_ms();
    let budget = request.budget_tokens.unwrap_or(DEFAULT_BUDGET_TOKENS);
    let threshold = crate::lifecycle::trust::level(&ctx)
        .await?
        .injection_threshold();
    let trusted = |m: &Memory| m.stale_at.is_none() && current_confidence(m, now) > threshold;

    let mut candidates: Vec<(Section, Memory)> = Vec::new();
    if let Some(state) = unfinished_work(handle).await? {
        candidates.push((Section::Resume, state));
    }
    let handoff = last_session(handle, request.session_id.as_deref(), now).await?;
    for memory in pinned_and_taught(handle).await? {
        if memory.stale_at.is_none() {
            candidates.push((Section::Pinned, memory));
        }
    }
    for memory in relevant(handle, &request).await? {
        if trusted(&memory) {
            candidates.push((Section::Relevant, memory));
        }
    }
    for memory in recipes(handle, &request).await? {
        if trusted(&memory) {
            candidates.push((Section::Recipes, memory));
        }
    }
    for memory in stale(handle, &request.modules).await? {
        candidates.push((Section::Stale, memory));
    }

    let files = if request.session_type.unwrap_or(SessionType::Build) == SessionType::Build {
        let plan = PrefetchRequest {
            modules: request.modules.clone(),
            ..PrefetchRequest::default()
        };
        prefetch::plan(&ctx, plan).await?.files
    } else {
        Vec::new()
    };
    let packed = pack(candidates, handoff, files, budget);
    if let Some(session_id) = request.session_id.as_deref() {
        let ids: Vec<String> = packed
            .memories
            .iter()
            .map(|m| m.memory.id.clone())
            .collect();
        memory::touch(&ctx, &ids, Some(session_id)).await?;
        if let Some(session) = handle.open_session(session_id) {
            session.injected(ids.into_iter(), 0);
        }
    }
    Ok(packed)
}

/// Checks the request: `ENGRAM_INVALID_ARG` naming the field at fault.
fn validated(handle: &Engram, mut request: SessionContextRequest) -> Result<SessionContextRequest> {
    if let Some(task) = request.task.as_deref() {
        if task.trim().is_empty() {
            request.task = None;
        } else if task.len() > crate::retrieval::request::MAX_QUERY_BYTES {
            return Err(Error::invalid(format!(
                "task is {} bytes; at most {} are accepted",
                task.len(),
                crate::retrieval::request::MAX_QUERY_BYTES
            )));
        }
    }
    request.modules = super::modules::normalised(&request.modules, handle.project_root())?;
    if let Some(budget) = request.budget_tokens {
        super::bounded("budgetTokens", Some(budget), budget, MAX_BUDGET_TOKENS)?;
    }
    request.session_id = handle
        .ctx()
        .validator()
        .opt_id("sessionId", request.session_id.as_deref())?;
    Ok(request)
}

/// The phase a session of this type ranks its memories for.
fn phase_of(session_type: Option<SessionType>) -> Phase {
    match session_type.unwrap_or(SessionType::Build) {
        SessionType::Build | SessionType::Terminal => Phase::Implement,
        SessionType::Insights => Phase::Explore,
        SessionType::Roadmap | SessionType::SpecCreation => Phase::Define,
        SessionType::Changelog => Phase::Reflect,
        SessionType::PrReview => Phase::Validate,
    }
}

/// The newest work state whose work unit has no later outcome.
async fn unfinished_work(handle: &Engram) -> Result<Option<Memory>> {
    let states = handle
        .list(&ListFilter {
            types: vec![MemoryType::WorkState],
            order: ListOrder::Created,
            limit: Some(SHORT_SECTION_LIMIT),
            ..ListFilter::default()
        })
        .await?;
    if states.is_empty() {
        return Ok(None);
    }
    let outcomes = handle
        .list(&ListFilter {
            types: vec![MemoryType::WorkUnitOutcome],
            order: ListOrder::Created,
            limit: Some(OUTCOME_LOOKBACK),
            ..ListFilter::default()
        })
        .await?;
    Ok(states.into_iter().find(|state| {
        state.stale_at.is_none()
            && !outcomes.iter().any(|outcome| {
                outcome.created_at >= state.created_at
                    && state.work_unit_ref.is_some()
                    && outcome.work_unit_ref == state.work_unit_ref
            })
    }))
}

/// The newest finalized observer session other than `current`.
async fn last_session(handle: &Engram, current: Option<&str>, now: i64) -> Result<Option<Handoff>> {
    let ctx = handle.ctx();
    let mut reader = ctx.store.reader().await;
    let rows = reader
        .query_cached(
            "SELECT session_id, session_type, outcome, work_unit, module, finalized_at, steps,
                    json_extract(metrics, '$.filesEdited'), json_extract(metrics, '$.errors'),
                    json_array_length(promoted), promoted
             FROM observer_sessions
             WHERE project_id = ?1 AND session_id <> ?2
             ORDER BY finalized_at DESC LIMIT 1",
            params![ctx.project_id, current.unwrap_or("")],
            |row| {
                let count = |i: i32| -> Result<u32> {
                    let value: Option<i64> = row.get(i).ctx("reading the last session")?;
                    Ok(value.unwrap_or(0).clamp(0, i64::from(u32::MAX)) as u32)
                };
                let handoff = Handoff {
                    session_id: row.get(0).ctx("reading the last session")?,
                    session_type: row.get(1).ctx("reading the last session")?,
                    outcome: row.get(2).ctx("reading the last session")?,
                    work_unit: row.get(3).ctx("reading the last session")?,
                    module: row.get(4).ctx("reading the last session")?,
                    ended_at: row.get(5).ctx("reading the last session")?,
                    steps: count(6)?,
                    files_edited: count(7)?,
                    errors: count(8)?,
                    promoted: count(9)?,
                    text: String::new(),
                };
                let promoted: String = row.get(10).ctx("reading the last session")?;
                Ok((handoff, promoted))
            },
        )
        .await?;
    let Some((mut handoff, promoted)) = rows.into_iter().next() else {
        return Ok(None);
    };
    let ids: Vec<String> = serde_json::from_str(&promoted).unwrap_or_default();
    let mut learned = Vec::new();
    for id in ids.iter().take(HANDOFF_LEARNED) {
        match handle.get(id).await {
            Ok(m) if !m.deprecated => learned.push(crate::lifecycle::session::citation(&m)),
            // Forgotten or deleted since: not worth a line.
            Ok(_) | Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    handoff.text = handoff_text(&handoff, now);
    for citation in learned {
        handoff.text.push_str("\n- learned ");
        handoff.text.push_str(&citation);
    }
    Ok(Some(handoff))
}

/// `build session s-41 (success, 3 hours ago, work unit "spec 7"): 34 steps, 3 files edited,
/// 2 failed tool calls, 4 memories promoted.`
fn handoff_text(h: &Handoff, now: i64) -> String {
    let mut about = vec![h.outcome.clone(), age(now - h.ended_at)];
    if let Some(unit) = &h.work_unit {
        about.push(format!("work unit \"{unit}\""));
    }
    if let Some(module) = &h.module {
        about.push(format!("in {module}"));
    }
    let plural = |n: u32, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{} session {} ({}): {}, {}, {}, {}.",
        h.session_type,
        h.session_id,
        about.join(", "),
        plural(h.steps, "step", "steps"),
        plural(h.files_edited, "file edited", "files edited"),
        plural(h.errors, "failed tool call", "failed tool calls"),
        plural(h.promoted, "memory promoted", "memories promoted"),
    )
}

/// `just now`, `12 minutes ago`, `3 hours ago`, `2 days ago`.
fn age(ms: i64) -> String {
    let minutes = ms.max(0) / 60_000;
    match minutes {
        0 => "just now".to_owned(),
        1 => "1 minute ago".to_owned(),
        m if m < 120 => format!("{m} minutes ago"),
        m if m < 48 * 60 => format!("{} hours ago", m / 60),
        m => format!("{} days ago", m / (24 * 60)),
    }
}

/// Pinned memories, then user-taught ones, most confident first.
async fn pinned_and_taught(handle: &Engram) -> Result<Vec<Memory>> {
    let mut out = handle
        .list(&ListFilter {
            pinned: Some(true),
            order: ListOrder::Confidence,
            limit: Some(SECTION_LIMIT),
            ..ListFilter::default()
        })
        .await?;
    out.extend(
        handle
            .list(&ListFilter {
                sources: vec![MemorySource::UserTaught],
                order: ListOrder::Confidence,
                limit: Some(SECTION_LIMIT),
                ..ListFilter::default()
            })
            .await?,
    );
    Ok(out)
}

/// Memories for the task (ranked by recall), then those of the modules, else the project's
/// most confident knowledge.
async fn relevant(handle: &Engram, request: &SessionContextRequest) -> Result<Vec<Memory>> {
    let mut out = Vec::new();
    if let Some(task) = request.task.as_deref() {
        out.extend(
            recalled(
                handle,
                task,
                phase_of(request.session_type),
                KNOWLEDGE_TYPES,
                SECTION_LIMIT,
            )
            .await?,
        );
    }
    if !request.modules.is_empty() {
        out.extend(
            select::of_types(
                &handle.ctx(),
                &request.modules,
                KNOWLEDGE_TYPES,
                Order::Confidence,
                SECTION_LIMIT,
            )
            .await?,
        );
    }
    if request.task.is_none() && request.modules.is_empty() {
        out = handle
            .list(&ListFilter {
                types: KNOWLEDGE_TYPES.to_vec(),
                order: ListOrder::Confidence,
                limit: Some(SECTION_LIMIT),
                ..ListFilter::default()
            })
            .await?;
    }
    Ok(out)
}

/// Workflow recipes for the task, else the most confident ones.
async fn recipes(handle: &Engram, request: &SessionContextRequest) -> Result<Vec<Memory>> {
    match request.task.as_deref() {
        Some(task) => {
            recalled(
                handle,
                task,
                phase_of(request.session_type),
                &[MemoryType::WorkflowRecipe],
                SHORT_SECTION_LIMIT,
            )
            .await
        }
        None => {
            handle
                .list(&ListFilter {
                    types: vec![MemoryType::WorkflowRecipe],
                    order: ListOrder::Confidence,
                    limit: Some(SHORT_SECTION_LIMIT),
                    ..ListFilter::default()
                })
                .await
        }
    }
}

/// Memories of `types` that recall ranks for `task` (memories only, no packing, the trust
/// threshold applied; nothing counted as used: [`build`] does that for what it packs).
pub(crate) async fn recalled(
    handle: &Engram,
    task: &str,
    phase: Phase,
    types: &[MemoryType],
    limit: u32,
) -> Result<Vec<Memory>> {
    let recall = handle
        .recall(RecallRequest {
            query: task.to_owned(),
            phase: Some(phase),
            filters: RecallFilters {
                kinds: vec![ItemKind::Memory],
                types: types.to_vec(),
                ..RecallFilters::default()
            },
            limit: Some(limit),
            stages: Stages {
                packing: false,
                ..Stages::default()
            },
            apply_trust: true,
            ..RecallRequest::default()
        })
        .await?;
    Ok(recall
        .items
        .into_iter()
        .filter_map(|item| match item.content {
            crate::retrieval::recall::ItemContent::Memory(m) => Some(m),
            crate::retrieval::recall::ItemContent::Chunk(_) => None,
        })
        .collect())
}

/// Memories marked stale, newest mark first, then those flagged because their files changed
/// in git; those in `modules` lead.
async fn stale(handle: &Engram, modules: &[String]) -> Result<Vec<Memory>> {
    use std::sync::LazyLock;
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {} FROM memories m INDEXED BY memories_stale
             WHERE m.project_id = ?1 AND m.stale_at IS NOT NULL AND m.deprecated = 0
             ORDER BY m.stale_at DESC, m.seq DESC LIMIT 50",
            *SELECT_M
        )
    });
    // Then those whose files mostly changed in git since their commit (flagged for review by
    // `lifecycle::git_drift`), newest change first.
    static CHANGED_IN_GIT: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {} FROM memory_git_changes g
               JOIN memories m ON m.id = g.memory_id AND m.commit_sha = g.commit_sha
             WHERE g.project_id = ?1 AND m.deprecated = 0 AND m.stale_at IS NULL
               AND m.needs_review = 1
             GROUP BY m.seq ORDER BY max(g.found_at) DESC, m.seq DESC LIMIT 50",
            *SELECT_M
        )
    });
    let ctx = handle.ctx();
    let mut reader = ctx.store.reader().await;
    let mut found = reader
        .query_cached(SQL.as_str(), params![ctx.project_id], from_row)
        .await?;
    found.extend(
        reader
            .query_cached(CHANGED_IN_GIT.as_str(), params![ctx.project_id], from_row)
            .await?,
    );
    let in_modules = |m: &Memory| {
        m.related_files
            .iter()
            .any(|f| modules.iter().any(|module| f.starts_with(module.as_str())))
            || m.related_modules.iter().any(|named| {
                modules
                    .iter()
                    .any(|module| module.trim_end_matches('/') == named.trim_end_matches('/'))
            })
    };
    // Stable: within each group the newest mark stays first.
    found.sort_by_key(|m| !in_modules(m));
    found.truncate(SHORT_SECTION_LIMIT as usize);
    Ok(found)
}

/// The context's opening lines.
const HEADER: &str = "# Project memory (engram)\nWhat earlier sessions on this project learned. Cite a memory you rely on as [Memory #id]; report one that proves wrong (feedback).\n";

/// One memory's entry: `[3] gotcha · confidence 0.85 · id · src/a.ts` then its text.
fn entry(label: u32, memory: &Memory) -> String {
    let files = if memory.related_files.is_empty() {
        String::new()
    } else {
        format!(" · {}", memory.related_files.join(", "))
    };
    format!(
        "[{label}] {} · confidence {:.2} · {}{files}\n{}\n",
        memory.memory_type.as_str(),
        memory.confidence,
        memory.id,
        memory.content.trim()
    )
}

fn tokens_of(text: &str) -> u32 {
    estimate_tokens(text.len()) as u32
}

/// The context being packed.
struct Packer {
    budget: u32,
    text: String,
    used: u32,
    omitted: u32,
    current: Option<Section>,
    memories: Vec<ContextMemory>,
}

impl Packer {
    /// Appends `block` (with the header first, when it is the first) if it fits.
    fn add(&mut self, block: &str) -> bool {
        let header = if self.text.is_empty() { HEADER } else { "" };
        let cost = tokens_of(header) + tokens_of(block);
        if self.used.saturating_add(cost) > self.budget {
            self.omitted += 1;
            return false;
        }
        self.text.push_str(header);
        self.text.push_str(block);
        self.used += cost;
        true
    }

    fn add_memory(&mut self, section: Section, memory: Memory) {
        let label = self.memories.len() as u32 + 1;
        let body = entry(label, &memory);
        let block = if self.current == Some(section) {
            body.clone()
        } else {
            format!("\n{}\n{body}", section.heading())
        };
        if self.add(&block) {
            self.current = Some(section);
            self.memories.push(ContextMemory {
                section,
                label,
                citation: crate::lifecycle::session::citation(&memory),
                tokens: tokens_of(&body),
                memory,
            });
        }
    }
}

/// Packs the candidates, in order, into `budget` tokens, the handoff right after the resume
/// section (see the module doc).
fn pack(
    candidates: Vec<(Section, Memory)>,
    mut handoff: Option<Handoff>,
    files: Vec<PrefetchFile>,
    budget: u32,
) -> SessionContext {
    pack_with(None, candidates, &mut handoff, files, budget)
}

/// Packs `preamble` (a block of its own, first; left out whole when it does not fit) and the
/// candidates into `budget` tokens in the session context's format: the planner's and the QA
/// context are built this way too.
pub(crate) fn pack_sections(
    preamble: Option<&str>,
    candidates: Vec<(Section, Memory)>,
    budget: u32,
) -> SessionContext {
    pack_with(preamble, candidates, &mut None, Vec::new(), budget)
}

fn pack_with(
    preamble: Option<&str>,
    candidates: Vec<(Section, Memory)>,
    handoff: &mut Option<Handoff>,
    files: Vec<PrefetchFile>,
    budget: u32,
) -> SessionContext {
    let mut packer = Packer {
        budget,
        text: String::new(),
        used: 0,
        omitted: 0,
        current: None,
        memories: Vec::new(),
    };
    if let Some(block) = preamble.filter(|b| !b.is_empty()) {
        packer.add(block);
    }
    let mut shown_handoff = None;
    let mut add_handoff = |packer: &mut Packer, handoff: &mut Option<Handoff>| {
        if let Some(h) = handoff.take() {
            if packer.add(&format!("\n## Last session\n{}\n", h.text)) {
                packer.current = None;
                shown_handoff = Some(h);
            }
        }
    };
    let mut seen: HashSet<String> = HashSet::new();
    for (section, memory) in candidates {
        if section != Section::Resume {
            add_handoff(&mut packer, handoff);
        }
        if seen.insert(memory.id.clone()) {
            packer.add_memory(section, memory);
        }
    }
    add_handoff(&mut packer, handoff);
    let mut shown_files = Vec::new();
    for file in files {
        let line = format!(
            "- `{}` (read in {} of {} sessions in `{}`)\n",
            file.path, file.sessions, file.module_sessions, file.module
        );
        let block = if shown_files.is_empty() {
            format!("\n{FILES_HEADING}\n{line}")
        } else {
            line
        };
        if packer.add(&block) {
            shown_files.push(file);
        }
    }
    SessionContext {
        tokens: tokens_of(&packer.text),
        text: packer.text,
        budget_tokens: budget,
        memories: packer.memories,
        handoff: shown_handoff,
        omitted: packer.omitted,
        files: shown_files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_naturally() {
        assert_eq!(age(0), "just now");
        assert_eq!(age(-5), "just now");
        assert_eq!(age(61_000), "1 minute ago");
        assert_eq!(age(90 * 60_000), "90 minutes ago");
        assert_eq!(age(5 * 3_600_000), "5 hours ago");
        assert_eq!(age(3 * 86_400_000), "3 days ago");
    }

    #[test]
    fn handoff_line_names_what_happened() {
        let h = Handoff {
            session_id: "s-41".into(),
            session_type: "build".into(),
            outcome: "success".into(),
            work_unit: Some("spec 7".into()),
            module: None,
            ended_at: 0,
            steps: 1,
            files_edited: 3,
            errors: 0,
            promoted: 2,
            text: String::new(),
        };
        assert_eq!(
            handoff_text(&h, 3 * 3_600_000),
            "build session s-41 (success, 3 hours ago, work unit \"spec 7\"): 1 step, 3 files edited, 0 failed tool calls, 2 memories promoted."
        );
    }
}
