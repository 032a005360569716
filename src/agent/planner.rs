//! The planner's context (seed 003 section 9, "Planner"): what a planning agent should know
//! before it splits a task, and the seed's three planning transformations as data, so that an
//! app applies them to its plan rather than hoping the model reads them:
//!
//! 1. **Calibration**: tasks in these modules ran `factor` times the steps they planned (the
//!    observer's step-overrun measure, once it has 3 sessions): multiply subtask estimates by it.
//! 2. **Constraints**: each dead end (an approach tried and abandoned here) becomes a line to
//!    write into the plan.
//! 3. **Scope**: files that causal dependencies couple to the modules, outside them: add them to
//!    the plan's scope before the coder finds out.
//!
//! The text packs, to a token budget, the transformations first, then the memories behind
//! them: task calibrations, dead ends, causal dependencies, the newest work-unit outcomes and
//! the workflow recipes recall ranks for the task, each labelled and cited like the session
//! context's. Stale memories, those in review and those below the trust level's injection
//! threshold are left out, except those a person pinned, taught or confirmed, and the task
//! calibrations (measurements of the project's own sessions, not claims).

use super::modules;
use super::select::{self, Order};
use super::session_context::{pack_sections, recalled, Section, SessionContext};
use crate::error::{Error, Result};
use crate::lifecycle::decay::current_confidence;
use crate::memory::{Memory, MemorySource, MemoryType};
use crate::retrieval::request::{MAX_BUDGET_TOKENS, MAX_QUERY_BYTES};
use crate::retrieval::scoring::Phase;
use crate::Engram;

/// Tokens the planner's context may use when the request names no budget.
pub const DEFAULT_BUDGET_TOKENS: u32 = 3_000;

/// What the planner's context is asked for.
#[derive(Debug, Clone, Default)]
pub struct PlannerRequest {
    /// The task to plan, in words (1 byte to 8 KiB): ranks the recipes.
    pub task: String,
    /// Module directories (`src/auth/`) the task is likely to touch; none: the whole project.
    pub modules: Vec<String>,
    /// Tokens the text may use (1..=200,000, default [`DEFAULT_BUDGET_TOKENS`]).
    pub budget_tokens: Option<u32>,
}

/// Calibration to apply to the plan's estimates.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Steps run per step planned, the mean over the modules' sessions (above 1: tasks here
    /// run over their plans; multiply subtask estimates by it).
    pub factor: f64,
    /// Finalized sessions it comes from.
    pub sessions: u32,
}

/// A line to write into the plan, from a dead end.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    /// The constraint, in words.
    pub text: String,
    /// The dead-end memory it comes from.
    pub memory_id: String,
}

/// A file to add to the plan's scope, from causal dependencies.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeFile {
    /// Relative to the project root.
    pub path: String,
    /// The causal-dependency memories that couple it to the modules.
    pub memory_ids: Vec<String>,
}

/// The planner's context: the packed text and the transformations as data.
#[derive(Debug, Clone)]
pub struct PlannerContext {
    /// The packed text (transformations, then the memories behind them).
    pub context: SessionContext,
    /// The calibration, when the modules have enough measured sessions.
    pub calibration: Option<Calibration>,
    /// Constraints from dead ends, most confident first.
    pub constraints: Vec<Constraint>,
    /// Files outside the modules that causal dependencies couple to them.
    pub scope_files: Vec<ScopeFile>,
}

/// Most memories per section.
const CALIBRATIONS: u32 = 5;
const DEAD_ENDS: u32 = 8;
const DEPENDENCIES: u32 = 10;
const OUTCOMES: u32 = 5;
const RECIPES: u32 = 2;

/// Builds the planner's context for `request` (see the module doc).
pub(crate) async fn build(handle: &Engram, request: PlannerRequest) -> Result<PlannerContext> {
    let task = request.task.trim();
    if task.is_empty() || task.len() > MAX_QUERY_BYTES {
        return Err(Error::invalid(format!(
            "task must be 1 to {MAX_QUERY_BYTES} bytes of text, got {}",
            task.len()
        )));
    }
    let budget = super::bounded(
        "budgetTokens",
        request.budget_tokens,
        DEFAULT_BUDGET_TOKENS,
        MAX_BUDGET_TOKENS,
    )?;
    let modules = modules::normalised(&request.modules, handle.project_root())?;
    let ctx = handle.ctx();
    let trusted = trust_filter(handle).await?;
    let calibrations = select::of_types(
        &ctx,
        &modules,
        &[MemoryType::TaskCalibration],
        Order::Newest,
        CALIBRATIONS,
    )
    .await?;
    let dead_ends = select::of_types(
        &ctx,
        &modules,
        &[MemoryType::DeadEnd],
        Order::Confidence,
        DEAD_ENDS,
    )
    .await?;
    let dependencies = select::of_types(
        &ctx,
        &modules,
        &[MemoryType::CausalDependency],
        Order::Confidence,
        DEPENDENCIES,
    )
    .await?;
    let outcomes = select::of_types(
        &ctx,
        &modules,
        &[MemoryType::WorkUnitOutcome],
        Order::Newest,
        OUTCOMES,
    )
    .await?;
    let recipes = recalled(
        handle,
        task,
        Phase::Define,
        &[MemoryType::WorkflowRecipe],
        RECIPES,
    )
    .await?;

    let calibration = crate::observer::calibration::overrun_ratio(&ctx, &modules)
        .await?
        .map(|(factor, sessions)| Calibration { factor, sessions });
    let dead_ends: Vec<Memory> = dead_ends
        .into_iter()
        .filter(&trusted)
        .take(DEAD_ENDS as usize)
        .collect();
    let dependencies: Vec<Memory> = dependencies
        .into_iter()
        .filter(&trusted)
        .take(DEPENDENCIES as usize)
        .collect();
    let constraints: Vec<Constraint> = dead_ends
        .iter()
        .map(|m| Constraint {
            text: format!("Do not repeat: {}", first_line(&m.content)),
            memory_id: m.id.clone(),
        })
        .collect();
    let scope_files = coupled_files(&dependencies, &modules);

    let preamble = transformations(calibration.as_ref(), &constraints, &scope_files);
    let mut candidates: Vec<(Section, Memory)> = Vec::new();
    let sections = [
        (Section::Calibrations, calibrations, CALIBRATIONS),
        (Section::DeadEnds, dead_ends, DEAD_ENDS),
        (Section::Dependencies, dependencies, DEPENDENCIES),
        (Section::Outcomes, outcomes, OUTCOMES),
        (Section::Recipes, recipes, RECIPES),
    ];
    for (section, memories, limit) in sections {
        // Calibrations are measurements of this project's own sessions, not claims: the trust
        // threshold (meant for what an agent may be told as fact) does not hold them back.
        let measured = |m: &Memory| section == Section::Calibrations && m.stale_at.is_none();
        candidates.extend(
            memories
                .into_iter()
                .filter(|m| measured(m) || trusted(m))
                .take(limit as usize)
                .map(|memory| (section, memory)),
        );
    }
    Ok(PlannerContext {
        context: pack_sections(Some(&preamble), candidates, budget),
        calibration,
        constraints,
        scope_files,
    })
}

/// Whether a memory may go in front of an agent: not stale, and vouched for by a person
/// (pinned, taught, or confirmed in review), or out of review and above the trust level's
/// injection threshold.
pub(crate) async fn trust_filter(handle: &Engram) -> Result<impl Fn(&Memory) -> bool> {
    let threshold = crate::lifecycle::trust::level(&handle.ctx())
        .await?
        .injection_threshold();
    let now = handle.engine().clock.now_ms();
    Ok(move |m: &Memory| {
        m.stale_at.is_none()
            && (m.pinned
                || m.user_verified
                || m.source == MemorySource::UserTaught
                || (!m.needs_review && current_confidence(m, now) > threshold))
    })
}

/// Files of `dependencies` outside `modules`, each with the memories naming it, in the order
/// first named (every named file when there are no modules).
fn coupled_files(dependencies: &[Memory], modules: &[String]) -> Vec<ScopeFile> {
    let mut out: Vec<ScopeFile> = Vec::new();
    for memory in dependencies {
        let touches_modules = modules.is_empty()
            || memory
                .related_files
                .iter()
                .any(|f| modules::covers(modules, f));
        if !touches_modules {
            continue;
        }
        for file in &memory.related_files {
            if !modules.is_empty() && modules::covers(modules, file) {
                continue;
            }
            match out.iter_mut().find(|s| &s.path == file) {
                Some(known) => known.memory_ids.push(memory.id.clone()),
                None => out.push(ScopeFile {
                    path: file.clone(),
                    memory_ids: vec![memory.id.clone()],
                }),
            }
        }
    }
    out
}

/// The transformations as the text's first block (empty when there are none).
fn transformations(
    calibration: Option<&Calibration>,
    constraints: &[Constraint],
    scope: &[ScopeFile],
) -> String {
    if calibration.is_none() && constraints.is_empty() && scope.is_empty() {
        return String::new();
    }
    let mut text = String::from("\n## Apply to the plan\n");
    if let Some(c) = calibration {
        text.push_str(&format!(
            "- Calibration: tasks here ran {:.2}x the steps they planned ({} sessions): multiply subtask estimates by {:.2}.\n",
            c.factor, c.sessions, c.factor
        ));
    }
    for c in constraints {
        text.push_str(&format!(
            "- Constraint: {} [Memory #{}]\n",
            c.text, c.memory_id
        ));
    }
    if !scope.is_empty() {
        let files: Vec<String> = scope.iter().map(|s| format!("`{}`", s.path)).collect();
        text.push_str(&format!(
            "- Scope: also include {} (they change together with these modules).\n",
            files.join(", ")
        ));
    }
    text
}

/// The first line of `text`, at most 200 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_owned(),
    }
}
