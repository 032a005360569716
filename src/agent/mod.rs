//! Ready-made contexts for an agent loop (seed 003 section 9, the Yaad seed's session start):
//! what an app or an agent hook puts in front of an agent without assembling it from recall,
//! list and the observer itself.
//!
//! - [`session_context`]: injection points 1 and 2, what an agent should know when it starts
//!   a session on this project (unfinished work to resume, the last session's handoff, pinned
//!   and user-taught memories, memories for the task and modules, workflow recipes, stale
//!   warnings), packed into a token budget with citations.
//!
//! - [`prefetch`]: the coder's predictive prefetch plan, the files past sessions in these
//!   modules read (two frequency tiers), packed into a token budget.
//! - [`planner`]: the planner's context, with its transformations (calibration factor,
//!   constraints from dead ends, coupled files to add to scope) as data.
//! - [`qa`]: the QA context: requirements, end-to-end observations, error patterns.
//! - [`e2e`]: end-to-end observations from browser-tool results, classified by the app's
//!   model and stored for review.
//! - [`modules`]: how every builder checks and normalises the module directories it is given.
//!
//! Injection point 3 (gotchas appended to a file tool's result) lives with the step injection
//! it shares its trigger with: `retrieval::injection::for_tool_result`.

pub mod e2e;
pub mod modules;
pub mod planner;
pub mod prefetch;
pub mod qa;
mod select;
pub mod session_context;

/// `value` (or `default`) checked to be within `1..=max`; `ENGRAM_INVALID_ARG` naming `name`.
pub(crate) fn bounded(
    name: &str,
    value: Option<u32>,
    default: u32,
    max: u32,
) -> crate::error::Result<u32> {
    let value = value.unwrap_or(default);
    if value == 0 || value > max {
        return Err(crate::error::Error::invalid(format!(
            "{name} must be between 1 and {max}, got {value}"
        )));
    }
    Ok(value)
}
