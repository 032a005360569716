//! The QA context (seed 003 section 9, "QA: targeted validation"): what a validating agent
//! should have before its first browser or test call, packed to a token budget: the
//! requirements first (what the app must do), then end-to-end observations (preconditions,
//! timings, UI behaviour, test sequences, tool gotchas from earlier runs), then error patterns
//! (errors seen before and how they were fixed). Each section is drawn from the modules under
//! test (or the whole project) and filtered like the planner's: not stale, not in review,
//! above the trust level's injection threshold, unless a person pinned, taught or confirmed
//! it (an end-to-end observation waits in review until confirmed).

use super::modules;
use super::planner::trust_filter;
use super::select::{self, Order};
use super::session_context::{pack_sections, Section, SessionContext};
use crate::error::Result;
use crate::memory::{Memory, MemoryType};
use crate::retrieval::request::MAX_BUDGET_TOKENS;
use crate::Engram;

/// Tokens the QA context may use when the request names no budget.
pub const DEFAULT_BUDGET_TOKENS: u32 = 2_000;
/// Most memories per section.
const SECTION_LIMIT: u32 = 10;

/// What the QA context is asked for.
#[derive(Debug, Clone, Default)]
pub struct QaRequest {
    /// Module directories (`src/checkout/`) under test; none: the whole project.
    pub modules: Vec<String>,
    /// Tokens the text may use (1..=200,000, default [`DEFAULT_BUDGET_TOKENS`]).
    pub budget_tokens: Option<u32>,
}

/// Builds the QA context for `request` (see the module doc).
pub(crate) async fn build(handle: &Engram, request: QaRequest) -> Result<SessionContext> {
    let budget = super::bounded(
        "budgetTokens",
        request.budget_tokens,
        DEFAULT_BUDGET_TOKENS,
        MAX_BUDGET_TOKENS,
    )?;
    let modules = modules::normalised(&request.modules, handle.project_root())?;
    let ctx = handle.ctx();
    let trusted = trust_filter(handle).await?;
    let sections = [
        (Section::Requirements, MemoryType::Requirement),
        (Section::Observations, MemoryType::E2eObservation),
        (Section::ErrorPatterns, MemoryType::ErrorPattern),
    ];
    let mut candidates: Vec<(Section, Memory)> = Vec::new();
    for (section, memory_type) in sections {
        let found = select::of_types(
            &ctx,
            &modules,
            &[memory_type],
            Order::Confidence,
            SECTION_LIMIT,
        )
        .await?;
        candidates.extend(
            found
                .into_iter()
                .filter(&trusted)
                .take(SECTION_LIMIT as usize)
                .map(|memory| (section, memory)),
        );
    }
    Ok(pack_sections(None, candidates, budget))
}
