//! The 17 behavioural signals (the seed's section 4 taxonomy): each class's score, the
//! memory types it promotes to, and how many sessions must show it before it is promoted.
//!
//! The seed's signal-value formula is applied per candidate:
//! `value = score × 0.5 + cross_session_relevance × 0.3 + (1 − false_positive_rate) × 0.2`,
//! where the class score is the table's, cross-session relevance is how far the candidate is
//! toward its class's minimum session count (1.0 once reached), and the false-positive rate
//! is measured: the share of this class's promoted memories in the project that were later
//! forgotten or rejected, smoothed with a prior of 1 in 5 (see [`false_positive_rate`]).
//! Candidates under [`MIN_SIGNAL_VALUE`] are dropped before promotion filtering.

use serde::{Deserialize, Serialize};

use crate::memory::MemoryType;

/// Candidates valued under this are discarded (the seed's 0.4).
pub const MIN_SIGNAL_VALUE: f64 = 0.4;

macro_rules! signals {
    ($($(#[$meta:meta])* $variant:ident = $n:literal, $name:literal, $score:literal, [$($promotes:ident),*], $min:literal;)+) => {
        /// One of the 17 signal classes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Signal {
            $($(#[$meta])* #[serde(rename = $name)] $variant = $n,)+
        }

        impl Signal {
            /// Every class, in the seed's numbering.
            pub const ALL: &'static [Signal] = &[$(Signal::$variant,)+];

            /// The stored / JS name.
            pub fn as_str(self) -> &'static str {
                match self { $(Signal::$variant => $name,)+ }
            }

            /// The class score from the seed's table.
            pub fn score(self) -> f64 {
                match self { $(Signal::$variant => $score,)+ }
            }

            /// The memory types it promotes to (the first is the default).
            pub fn promotes_to(self) -> &'static [MemoryType] {
                match self { $(Signal::$variant => &[$(MemoryType::$promotes),*],)+ }
            }

            /// Sessions that must show it before it is promoted (unless an early trigger fired).
            pub fn min_sessions(self) -> u32 {
                match self { $(Signal::$variant => $min,)+ }
            }

            /// Parses the stored name.
            pub fn parse(s: &str) -> Option<Signal> {
                match s { $($name => Some(Signal::$variant),)+ _ => None }
            }
        }
    };
}

signals! {
    /// Files read in many sessions: read them up front.
    FileAccess = 1, "file_access", 0.72, [PrefetchPattern], 3;
    /// Files touched together: one needs the other.
    CoAccess = 2, "co_access", 0.91, [CausalDependency, PrefetchPattern], 3;
    /// The same error again, and what fixed it.
    ErrorRetry = 3, "error_retry", 0.85, [ErrorPattern, Gotcha], 2;
    /// An edit undone: the change does not hold.
    Backtrack = 4, "backtrack", 0.68, [Gotcha], 2;
    /// A file opened and left while the change landed next to it.
    ReadAbandon = 5, "read_abandon", 0.79, [Gotcha], 3;
    /// The same search again: where the answer is.
    RepeatedGrep = 6, "repeated_grep", 0.76, [ModuleInsight, Gotcha], 2;
    /// The same edit/run sequence: a recipe.
    ToolSequence = 7, "tool_sequence", 0.73, [WorkflowRecipe], 3;
    /// A call far slower than the session's usual one.
    TimeAnomaly = 8, "time_anomaly", 0.48, [Gotcha], 3;
    /// The agent corrected itself (and its dead ends).
    SelfCorrection = 9, "self_correction", 0.88, [Gotcha, ModuleInsight, DeadEnd], 1;
    /// Outside documentation consulted for a module.
    ExternalReference = 10, "external_reference", 0.61, [ModuleInsight], 3;
    /// A search that mostly lists generated or vendored files.
    GlobIgnore = 11, "glob_ignore", 0.64, [Gotcha], 2;
    /// A file read right after a file that imports it.
    ImportChase = 12, "import_chase", 0.52, [CausalDependency], 4;
    /// How many test runs a change took to pass.
    TestOrder = 13, "test_order", 0.74, [TaskCalibration], 3;
    /// A configuration file changed along with code.
    ConfigTouch = 14, "config_touch", 0.66, [CausalDependency], 2;
    /// More steps than planned.
    StepOverrun = 15, "step_overrun", 0.71, [TaskCalibration], 3;
    /// Parallel agents changed the same file.
    ParallelConflict = 16, "parallel_conflict", 0.82, [Gotcha], 1;
    /// One read or command that costs far more context than the others.
    ContextTokenSpike = 17, "context_token_spike", 0.63, [ContextCost], 3;
}

/// The seed's signal value of a candidate of `signal` seen in `sessions` sessions, with the
/// class's measured false-positive rate.
pub fn signal_value(signal: Signal, sessions: u32, false_positive_rate: f64) -> f64 {
    let relevance = (f64::from(sessions) / f64::from(signal.min_sessions().max(1))).min(1.0);
    signal.score() * 0.5 + relevance * 0.3 + (1.0 - false_positive_rate.clamp(0.0, 1.0)) * 0.2
}

/// A class's false-positive rate from its record: `rejected` of `promoted` memories were
/// forgotten or rejected. Smoothed toward 1 in 5 (as if 5 earlier promotions had had one
/// rejection), so a new project neither trusts nor distrusts a class outright.
pub fn false_positive_rate(promoted: u32, rejected: u32) -> f64 {
    (f64::from(rejected) + 1.0) / (f64::from(promoted) + 5.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_seventeen_numbered_classes() {
        assert_eq!(Signal::ALL.len(), 17);
        for (i, s) in Signal::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i + 1);
            assert_eq!(Signal::parse(s.as_str()), Some(*s));
            assert!(!s.promotes_to().is_empty());
        }
    }

    #[test]
    fn weak_classes_need_their_sessions_and_a_clean_record() {
        let fresh = false_positive_rate(0, 0);
        // Time anomaly, first session: 0.24 + 0.1 + 0.16 = 0.50.
        assert!((signal_value(Signal::TimeAnomaly, 1, fresh) - 0.5).abs() < 1e-9);
        // A class whose memories are usually rejected falls under the bar.
        let bad = false_positive_rate(20, 19);
        assert!(signal_value(Signal::TimeAnomaly, 1, bad) < MIN_SIGNAL_VALUE);
        assert!(signal_value(Signal::CoAccess, 3, fresh) > 0.9);
    }
}
