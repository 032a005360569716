//! Decay: how far a memory's confidence has faded since it was last used.
//!
//! The model is the seed's (003 section 18, 000 `decay.go`): confidence halves once per
//! half-life of idleness (since creation or the last use by recall), with a half-life per
//! memory type; decisions, the timeless types and pinned memories never decay. Two refinements
//! from seed 000: a memory attached to nothing (no files, modules, graph nodes or relations)
//! and a memory another one supersedes each decay twice as fast. A disputed memory is used at
//! its confidence x 0.8 (seed 003 section 15). Use itself is the access boost: it restarts the
//! idle clock, and every fifth uncorrected use raises the stored confidence (see
//! `lifecycle::feedback`).
//!
//! Everything here is a pure function of a memory and "now", so retrieval scoring, `prune`
//! and the health report agree, and tests move the clock instead of waiting.

use crate::memory::{Memory, MemoryType};

/// One day in milliseconds.
pub const DAY_MS: f64 = 86_400_000.0;

/// How much faster an orphan or a superseded memory decays (its half-life is divided by this,
/// once for each of the two).
pub const NEGLECT_SPEEDUP: f64 = 2.0;

/// The factor a dispute puts on a memory's confidence while it lasts.
pub const DISPUTED_FACTOR: f64 = 0.8;

/// A memory idle for this many (effective) half-lives has expired: `prune` archives it. At
/// three half-lives its confidence is an eighth of what was stored.
pub const EXPIRY_HALF_LIVES: f64 = 3.0;

/// Days for the confidence of an unused memory of this type to halve (the seed's table);
/// `None`: it does not decay (decisions, preferences, patterns, requirements...).
pub fn default_half_life_days(memory_type: MemoryType) -> Option<f64> {
    use MemoryType as T;
    match memory_type {
        T::WorkState => Some(7.0),
        T::E2eObservation => Some(30.0),
        T::ErrorPattern | T::Gotcha => Some(60.0),
        T::ModuleInsight | T::DeadEnd => Some(90.0),
        T::CausalDependency | T::WorkflowRecipe => Some(120.0),
        T::TaskCalibration => Some(180.0),
        _ => None,
    }
}

/// The facts decay depends on. `prune` reads them with a narrow query instead of loading whole
/// memories; [`DecayInputs::of`] takes them from a loaded one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecayInputs {
    /// The memory's type.
    pub memory_type: MemoryType,
    /// Its own half-life, overriding the type's (ignored for decisions, which never decay).
    pub own_half_life_days: Option<f64>,
    /// Pinned memories never decay.
    pub pinned: bool,
    /// Attached to nothing: see [`is_orphan`].
    pub orphan: bool,
    /// Another memory supersedes it.
    pub superseded: bool,
    /// Last used by recall, or created (ms).
    pub last_accessed_at: i64,
}

impl DecayInputs {
    /// The inputs of a loaded memory.
    pub fn of(memory: &Memory) -> Self {
        DecayInputs {
            memory_type: memory.memory_type,
            own_half_life_days: memory.decay_half_life_days,
            pinned: memory.pinned,
            orphan: is_orphan(memory),
            superseded: memory.superseded_by.is_some(),
            last_accessed_at: memory.last_accessed_at,
        }
    }

    /// The half-life in days this memory decays with, after the neglect speed-ups; `None` when
    /// it does not decay.
    pub fn effective_half_life_days(&self) -> Option<f64> {
        if self.pinned || self.memory_type == MemoryType::Decision {
            return None;
        }
        let days = self
            .own_half_life_days
            .or_else(|| default_half_life_days(self.memory_type))
            .filter(|d| *d > 0.0)?;
        let mut effective = days;
        if self.orphan {
            effective /= NEGLECT_SPEEDUP;
        }
        if self.superseded {
            effective /= NEGLECT_SPEEDUP;
        }
        Some(effective)
    }

    /// Idle time in days at `now_ms` (a clock behind the last use counts as no time).
    pub fn idle_days(&self, now_ms: i64) -> f64 {
        ((now_ms - self.last_accessed_at).max(0) as f64) / DAY_MS
    }

    /// The share of the stored confidence left at `now_ms` (1 when it does not decay).
    pub fn factor(&self, now_ms: i64) -> f64 {
        match self.effective_half_life_days() {
            Some(days) => 0.5f64.powf(self.idle_days(now_ms) / days),
            None => 1.0,
        }
    }

    /// Whether the memory has been idle for [`EXPIRY_HALF_LIVES`] effective half-lives.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.effective_half_life_days()
            .is_some_and(|days| self.idle_days(now_ms) >= EXPIRY_HALF_LIVES * days)
    }
}

/// Whether a memory is attached to nothing: no related files or modules, no graph node, no
/// relation to another memory or a file. Nothing keeps its knowledge in view, so it decays
/// faster.
pub fn is_orphan(memory: &Memory) -> bool {
    memory.related_files.is_empty()
        && memory.related_modules.is_empty()
        && memory.target_node_id.is_none()
        && memory.impacted_node_ids.is_empty()
        && memory.relations.is_empty()
}

/// The confidence a memory has now: its stored confidence, decayed per [`DecayInputs`], times
/// [`DISPUTED_FACTOR`] while it is disputed.
pub fn current_confidence(memory: &Memory, now_ms: i64) -> f64 {
    let disputed = if memory.disputed_at.is_some() {
        DISPUTED_FACTOR
    } else {
        1.0
    };
    memory.confidence * DecayInputs::of(memory).factor(now_ms) * disputed
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = DAY_MS as i64;

    fn memory(memory_type: MemoryType, confidence: f64) -> Memory {
        let mut m = crate::memory::model::sample(memory_type, "c");
        m.confidence = confidence;
        m.related_files = vec!["src/a.ts".into()];
        m
    }

    #[test]
    fn confidence_halves_per_half_life_unless_pinned_or_timeless() {
        let gotcha = memory(MemoryType::Gotcha, 0.8);
        assert!((current_confidence(&gotcha, 60 * DAY) - 0.4).abs() < 1e-9);
        assert!((current_confidence(&gotcha, 120 * DAY) - 0.2).abs() < 1e-9);
        assert_eq!(
            current_confidence(&gotcha, -5),
            0.8,
            "a clock behind is no decay"
        );
        let mut pinned = gotcha.clone();
        pinned.pinned = true;
        assert_eq!(current_confidence(&pinned, 600 * DAY), 0.8);
        let decision = memory(MemoryType::Decision, 0.9);
        assert_eq!(current_confidence(&decision, 6000 * DAY), 0.9);
        let mut own = gotcha;
        own.decay_half_life_days = Some(1.0);
        assert!((current_confidence(&own, DAY) - 0.4).abs() < 1e-9);
    }

    #[test]
    fn decisions_never_decay_even_with_their_own_half_life() {
        let mut decision = memory(MemoryType::Decision, 0.9);
        decision.decay_half_life_days = Some(1.0);
        assert_eq!(current_confidence(&decision, 365 * DAY), 0.9);
        assert!(!DecayInputs::of(&decision).expired(10_000 * DAY));
    }

    #[test]
    fn orphans_and_superseded_memories_decay_twice_as_fast_each() {
        let attached = memory(MemoryType::Gotcha, 0.8);
        let mut orphan = attached.clone();
        orphan.related_files.clear();
        assert!(is_orphan(&orphan) && !is_orphan(&attached));
        assert!((current_confidence(&orphan, 30 * DAY) - 0.4).abs() < 1e-9);
        let mut superseded = attached.clone();
        superseded.superseded_by = Some("newer".into());
        assert!((current_confidence(&superseded, 30 * DAY) - 0.4).abs() < 1e-9);
        let mut both = orphan.clone();
        both.superseded_by = Some("newer".into());
        assert!((current_confidence(&both, 15 * DAY) - 0.4).abs() < 1e-9);
    }

    #[test]
    fn a_dispute_costs_a_fifth_of_the_confidence() {
        let mut m = memory(MemoryType::Decision, 0.9);
        m.disputed_at = Some(1);
        assert!((current_confidence(&m, 0) - 0.72).abs() < 1e-9);
    }

    #[test]
    fn expiry_is_three_effective_half_lives_of_idleness() {
        let mut m = memory(MemoryType::WorkState, 0.8);
        m.last_accessed_at = 10 * DAY;
        let inputs = DecayInputs::of(&m);
        assert!(!inputs.expired(10 * DAY + 21 * DAY - 1));
        assert!(inputs.expired(10 * DAY + 21 * DAY));
        m.related_files.clear();
        assert!(
            DecayInputs::of(&m).expired(10 * DAY + 11 * DAY),
            "orphan: 3.5 days each"
        );
        let preference = memory(MemoryType::Preference, 0.8);
        assert!(!DecayInputs::of(&preference).expired(100_000 * DAY));
    }
}
