//! JS-facing types of the memory-panel methods (sessions, trust, health, coverage, gaps) and
//! their conversions. The `///` docs here become `index.d.ts`.

use napi_derive::napi;

use super::strict::Count;
use super::types::Memory;
use crate::lifecycle as core;

/// A pending offer to step the project's trust level down.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustOffer {
    /// The level offered (1..=4).
    pub level: u32,
    /// Why, in words for the app to show.
    pub reason: String,
    /// The session where memories were flagged wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

impl From<core::TrustOffer> for TrustOffer {
    fn from(o: core::TrustOffer) -> Self {
        TrustOffer {
            level: o.level.number(),
            reason: o.reason,
            session_id: o.session_id,
        }
    }
}

/// Where a project stands in trust progression: 1 cautious (inject above 0.80), 2 standard
/// (0.65), 3 confident (0.55), 4 autonomous (0.45, only by the user's choice).
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustState {
    /// 1..=4.
    pub level: u32,
    /// `cautious`, `standard`, `confident` or `autonomous`.
    #[napi(ts_type = "'cautious' | 'standard' | 'confident' | 'autonomous'")]
    pub level_name: String,
    /// Memories are injected only when their current confidence is above this.
    pub injection_threshold: f64,
    /// How much of a session summary to show.
    #[napi(ts_type = "'full' | 'review_only' | 'suppressed'")]
    pub summary_mode: String,
    /// Whether the app should ask for confirmation of everything a session learned.
    pub new_memories_need_review: bool,
    /// Sessions ended in the project.
    pub sessions: u32,
    /// Of those, sessions ended at the current level.
    pub sessions_at_level: u32,
    /// Share of learned memories a person confirmed (absent when nothing was learned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed_share: Option<f64>,
    /// `wrong` and correction feedback per distinct memory used, over the sessions at this
    /// level (absent when they used none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correction_rate: Option<f64>,
    /// A pending offer to step down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offer: Option<TrustOffer>,
}

impl From<core::TrustState> for TrustState {
    fn from(s: core::TrustState) -> Self {
        TrustState {
            level: s.level.number(),
            level_name: s.level.as_str().to_owned(),
            injection_threshold: s.injection_threshold,
            summary_mode: s.summary_mode.as_str().to_owned(),
            new_memories_need_review: s.new_memories_need_review,
            sessions: s.sessions as u32,
            sessions_at_level: s.sessions_at_level as u32,
            confirmed_share: s.confirmed_share,
            correction_rate: s.correction_rate,
            offer: s.offer.map(Into::into),
        }
    }
}

/// A memory an agent was given in a session.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsedMemory {
    /// The memory as it is now.
    pub memory: Memory,
    /// Times it was given in the session.
    pub uses: u32,
    /// Its citation chip: `[Memory #<id>: <brief>]`.
    pub citation: String,
}

/// A memory a session created.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LearnedMemory {
    /// The memory as it is now (confirm, edit or reject it by id).
    pub memory: Memory,
    /// Its citation chip: `[Memory #<id>: <brief>]`.
    pub citation: String,
}

/// The session-end summary: what the agent remembered, what it learned.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The session.
    pub session_id: String,
    /// What the agent was given, most used first (200 at most).
    pub used: Vec<UsedMemory>,
    /// What the session created and is still active, oldest first (200 at most).
    pub learned: Vec<LearnedMemory>,
    /// Learned memories waiting for review.
    pub needs_review: u32,
    /// Learned memories a person has not confirmed yet.
    pub awaiting_confirmation: u32,
    /// `wrong` and `correction` feedback given in the session.
    pub corrections: u32,
    /// Estimated tokens of discovery saved: per distinct memory used, the typical cost of
    /// rediscovering its type (an assumption, documented in the README, not a measurement).
    pub tokens_saved_estimate: u32,
    /// The project's trust level (1..=4) now.
    pub trust_level: u32,
    /// How much of this summary to show at that level.
    #[napi(ts_type = "'full' | 'review_only' | 'suppressed'")]
    pub mode: String,
    /// When the session was ended (ms), if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// When ending the session raised the trust level: the level before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_trust_level: Option<u32>,
}

impl From<core::SessionSummary> for SessionSummary {
    fn from(s: core::SessionSummary) -> Self {
        let awaiting = s.learned.iter().filter(|l| !l.memory.user_verified).count();
        SessionSummary {
            session_id: s.session_id,
            used: s
                .used
                .into_iter()
                .map(|u| UsedMemory {
                    memory: u.memory.into(),
                    uses: u.uses as u32,
                    citation: u.citation,
                })
                .collect(),
            learned: s
                .learned
                .into_iter()
                .map(|l| LearnedMemory {
                    memory: l.memory.into(),
                    citation: l.citation,
                })
                .collect(),
            needs_review: s.needs_review as u32,
            awaiting_confirmation: awaiting as u32,
            corrections: s.corrections as u32,
            tokens_saved_estimate: s.tokens_saved_estimate.min(u32::MAX as u64) as u32,
            trust_level: s.trust_level.number(),
            mode: s.mode.as_str().to_owned(),
            ended_at: s.ended_at,
            previous_trust_level: s.previous_trust_level.map(|l| l.number()),
        }
    }
}

/// The four parts of the health score, each 0..=1.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthParts {
    /// 1 − needsReview / active.
    pub reviewed: f64,
    /// 1 − stale / active.
    pub fresh: f64,
    /// activeLast30Days / active.
    pub used: f64,
    /// 1 − (disputed or superseded) / active.
    pub agreed: f64,
}

/// Health of a project's memories, for the panel's dashboard.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Every memory, forgotten ones included.
    pub total: u32,
    /// Memories not forgotten.
    pub active: u32,
    /// Active memories used in the last 30 days.
    pub active_last_30_days: u32,
    /// Active memories waiting for review.
    pub needs_review: u32,
    /// Active memories whose code changed since they were written.
    pub stale: u32,
    /// Active memories with related files changed in git since their `commitSha` (unless
    /// pinned, their confidence lowered by the share changed, at each full `index()`).
    pub changed_in_git: u32,
    /// Active memories under dispute.
    pub disputed: u32,
    /// Active memories a newer one supersedes.
    pub superseded: u32,
    /// Forgotten memories (kept until `prune` deletes them).
    pub forgotten: u32,
    /// Open memory gaps.
    pub open_gaps: u32,
    /// Estimated tokens saved in the session given (0 without one).
    pub tokens_saved_this_session: u32,
    /// 0-100: round(100 × (0.30 reviewed + 0.25 fresh + 0.25 used + 0.20 agreed)); 0 with no
    /// active memory.
    pub score: u32,
    /// The parts of the score.
    pub parts: HealthParts,
}

impl From<core::Health> for Health {
    fn from(h: core::Health) -> Self {
        let n = |v: u64| v.min(u32::MAX as u64) as u32;
        Health {
            total: n(h.total),
            active: n(h.active),
            active_last_30_days: n(h.active_last_30_days),
            needs_review: n(h.needs_review),
            stale: n(h.stale),
            changed_in_git: n(h.changed_in_git),
            disputed: n(h.disputed),
            superseded: n(h.superseded),
            forgotten: n(h.forgotten),
            open_gaps: n(h.open_gaps),
            tokens_saved_this_session: n(h.tokens_saved_this_session),
            score: h.score,
            parts: HealthParts {
                reviewed: h.parts.reviewed,
                fresh: h.parts.fresh,
                used: h.parts.used,
                agreed: h.parts.agreed,
            },
        }
    }
}

/// One module's coverage by memories.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleCoverage {
    /// The module: a directory of indexed code, two levels deep at most, ending in `/`
    /// (`./` for files at the root).
    pub module: String,
    /// Indexed files in it.
    pub files: u32,
    /// Of those, files with an active memory attached.
    pub covered_files: u32,
    /// Distinct active memories attached to its files.
    pub memories: u32,
    /// coveredFiles / files, 0..=1.
    pub coverage: f64,
}

impl From<core::ModuleCoverage> for ModuleCoverage {
    fn from(c: core::ModuleCoverage) -> Self {
        ModuleCoverage {
            module: c.module,
            files: c.files as u32,
            covered_files: c.covered_files as u32,
            memories: c.memories as u32,
            coverage: c.coverage,
        }
    }
}

/// A question an agent asked that memory could not answer.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryGap {
    /// UUIDv7.
    pub id: String,
    /// The question, privacy-filtered, lower case, single spaces (500 characters at most).
    pub query: String,
    /// The session it was first asked in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Times it was asked while open.
    pub hits: u32,
    /// First asked (ms).
    pub created_at: i64,
    /// Last asked (ms).
    pub last_seen_at: i64,
    /// When memory learned the answer (ms); absent while open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<i64>,
}

impl From<core::MemoryGap> for MemoryGap {
    fn from(g: core::MemoryGap) -> Self {
        MemoryGap {
            id: g.id,
            query: g.query,
            session_id: g.session_id,
            hits: g.hits.min(u32::MAX as u64) as u32,
            created_at: g.created_at,
            last_seen_at: g.last_seen_at,
            resolved_at: g.resolved_at,
        }
    }
}

/// Options of `memoryGaps`.
#[napi(object, object_to_js = false)]
pub struct MemoryGapsOptions {
    /// Closed gaps too (default false).
    pub include_resolved: Option<bool>,
    /// 1..=500 (default 100).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
}

/// Options of `health`.
#[napi(object, object_to_js = false)]
pub struct HealthOptions {
    /// The session whose tokens-saved estimate to include.
    pub session_id: Option<String>,
}
