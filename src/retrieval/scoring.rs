//! How much a memory's own standing moves it in recall, beyond how well it matches: the agent's
//! phase (a gotcha matters more while implementing), who taught it (a user over the observer),
//! its current confidence (decayed since it was last used), and how recently and how often it
//! was used.
//!
//! Every factor is 1 for a typical memory, so a memory and a code chunk (factor 1) compare by
//! their fused match score alone. The phase weights, source trust and half-lives are the seed's
//! (003 §7, §18); the recency and frequency factors are ours, kept small until the observer's
//! feedback can calibrate them: the seed mixes them additively with cosine similarity, which has
//! no place once scores are fused ranks.

use crate::error::{Error, Result};
use crate::memory::{Memory, MemorySource, MemoryType};

/// What the agent is doing, which decides which memory types matter most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Planning, writing a spec.
    Define,
    /// Writing code.
    Implement,
    /// Testing, reviewing.
    Validate,
    /// Fixing what validation found, debugging.
    Refine,
    /// Reading and understanding code.
    Explore,
    /// Looking back on finished work.
    Reflect,
}

impl Phase {
    /// Every phase, in the seed's order.
    pub const ALL: [Phase; 6] = [
        Phase::Define,
        Phase::Implement,
        Phase::Validate,
        Phase::Refine,
        Phase::Explore,
        Phase::Reflect,
    ];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Define => "define",
            Phase::Implement => "implement",
            Phase::Validate => "validate",
            Phase::Refine => "refine",
            Phase::Explore => "explore",
            Phase::Reflect => "reflect",
        }
    }

    /// Parses a phase name; `ENGRAM_INVALID_ARG` listing the accepted ones.
    pub fn parse(name: &str) -> Result<Phase> {
        Phase::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown phase {name:?}; expected one of: define, implement, validate, refine, explore, reflect"
                ))
            })
    }

    /// How much memories of `memory_type` count in this phase (1 when the seed names none).
    pub fn weight(self, memory_type: MemoryType) -> f64 {
        use MemoryType as T;
        match (self, memory_type) {
            (Phase::Define, T::WorkflowRecipe) => 1.4,
            (Phase::Define, T::DeadEnd | T::Requirement) => 1.2,
            (Phase::Define, T::Decision | T::TaskCalibration) => 1.1,
            (Phase::Define, T::Gotcha | T::ErrorPattern) => 0.8,
            (Phase::Implement, T::Gotcha) => 1.4,
            (Phase::Implement, T::ErrorPattern) => 1.3,
            (Phase::Implement, T::CausalDependency | T::DeadEnd) => 1.2,
            (Phase::Implement, T::Pattern | T::PrefetchPattern) => 1.1,
            (Phase::Validate, T::ErrorPattern | T::E2eObservation) => 1.4,
            (Phase::Validate, T::Requirement) => 1.2,
            (Phase::Validate, T::WorkUnitOutcome) => 1.1,
            (Phase::Refine, T::ErrorPattern) => 1.3,
            (Phase::Refine, T::Gotcha | T::DeadEnd) => 1.2,
            (Phase::Explore, T::ModuleInsight) => 1.4,
            (Phase::Explore, T::Decision) => 1.2,
            (Phase::Explore, T::Pattern) => 1.1,
            (Phase::Reflect, T::WorkUnitOutcome) => 1.4,
            (Phase::Reflect, T::TaskCalibration) => 1.3,
            (Phase::Reflect, T::DeadEnd) => 1.1,
            _ => 1.0,
        }
    }
}

/// How far a memory's source is trusted (the seed's values).
pub fn source_trust(source: MemorySource) -> f64 {
    match source {
        MemorySource::UserTaught => 1.4,
        MemorySource::AgentExplicit => 1.2,
        MemorySource::QaAuto => 1.1,
        MemorySource::McpAuto | MemorySource::CommitAuto => 1.0,
        MemorySource::ObserverInferred => 0.85,
    }
}

use crate::lifecycle::decay::DAY_MS;
pub use crate::lifecycle::decay::{current_confidence, default_half_life_days};

/// The confidence a memory is stored with unless told otherwise: the factor's 1.
pub const DEFAULT_CONFIDENCE: f64 = 0.8;

/// The factor a memory's standing puts on its fused match score; see the module doc.
pub fn memory_factor(memory: &Memory, phase: Option<Phase>, now_ms: i64) -> f64 {
    let phase = phase.map_or(1.0, |p| p.weight(memory.memory_type));
    let confidence = (current_confidence(memory, now_ms) / DEFAULT_CONFIDENCE).min(1.25);
    let idle_days = ((now_ms - memory.last_accessed_at).max(0) as f64) / DAY_MS;
    let recency = 0.9 + 0.1 * (-idle_days / 30.0).exp();
    let frequency = 1.0 + 0.1 * ((memory.access_count as f64).ln_1p() / 100f64.ln_1p()).min(1.0);
    // Trust relative to the default source (an agent's own remember), so that the typical
    // memory's factor is 1 while the seed's ratios between sources stay.
    let trust = source_trust(memory.source) / source_trust(MemorySource::AgentExplicit);
    phase * trust * confidence * recency * frequency
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_parse_and_weigh_as_the_seed_says() {
        for phase in Phase::ALL {
            assert_eq!(Phase::parse(phase.as_str()).unwrap(), phase);
        }
        assert_eq!(
            Phase::parse("coding").unwrap_err().code(),
            "ENGRAM_INVALID_ARG"
        );
        assert_eq!(Phase::Implement.weight(MemoryType::Gotcha), 1.4);
        assert_eq!(Phase::Define.weight(MemoryType::Gotcha), 0.8);
        assert_eq!(Phase::Explore.weight(MemoryType::ModuleInsight), 1.4);
        assert_eq!(Phase::Reflect.weight(MemoryType::Preference), 1.0);
    }

    fn memory(memory_type: MemoryType, confidence: f64, last_accessed_at: i64) -> Memory {
        let mut m = crate::memory::model::sample(memory_type, "c");
        m.confidence = confidence;
        m.last_accessed_at = last_accessed_at;
        m
    }

    #[test]
    fn a_typical_fresh_memory_has_a_factor_near_one_and_standing_moves_it() {
        let fresh = memory(MemoryType::Pattern, DEFAULT_CONFIDENCE, 0);
        // The default source, confidence, fresh and never accessed: exactly 1.
        assert!((memory_factor(&fresh, None, 0) - 1.0).abs() < 1e-9);
        let mut user = fresh.clone();
        user.source = MemorySource::UserTaught;
        assert!(memory_factor(&user, None, 0) > memory_factor(&fresh, None, 0));
        let gotcha = memory(MemoryType::Gotcha, DEFAULT_CONFIDENCE, 0);
        assert!(
            memory_factor(&gotcha, Some(Phase::Implement), 0)
                > memory_factor(&gotcha, Some(Phase::Define), 0)
        );
        let stale = memory(MemoryType::Gotcha, DEFAULT_CONFIDENCE, 0);
        assert!(memory_factor(&stale, None, 180 * DAY_MS as i64) < 0.2);
    }
}
