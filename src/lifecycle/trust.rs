//! Trust progression (seed 003 section 13): how far a project lets memory act on its own.
//!
//! Four levels per project, each with the least current confidence a memory needs to be put
//! in front of an agent without being asked for (step injection, and recall with
//! `applyTrust`):
//!
//! | level | name       | injected above | session summary     | reached by |
//! |-------|------------|----------------|---------------------|------------|
//! | 1     | cautious   | 0.80           | everything          | the start |
//! | 2     | standard   | 0.65           | everything          | 3+ ended sessions and at least half of what they learned confirmed by a person |
//! | 3     | confident  | 0.55           | what needs review   | 16+ ended sessions, 10+ of them at level 2, and corrections under 5% of the memories those used |
//! | 4     | autonomous | 0.45           | suppressed          | only by the user's choice (`setTrustLevel(4)`) |
//!
//! Levels advance when a session ends (`endSession`), never more than one at a time, and
//! never to 4. Regression is offered, never forced: once people flag three or more memories
//! wrong (or correct them) in one session, the project carries an offer to step down one
//! level until the app accepts it (`setTrustLevel`) or dismisses it.
//!
//! Evidence has to exist: a project whose sessions learned nothing stays cautious (nothing was
//! confirmed), and one whose sessions used no memory does not become confident (nothing could
//! be corrected).

use libsql::{params, Connection};
use serde::Serialize;

use super::counts::count_row;
use crate::error::{DbContext, Error, Result};
use crate::memory::Ctx;
use crate::store::begin_write;

/// Ended sessions before a project can leave level 1.
pub const STANDARD_MIN_SESSIONS: u64 = 3;
/// Share of learned memories a person must have confirmed to leave level 1.
pub const STANDARD_MIN_CONFIRMED: f64 = 0.5;
/// Ended sessions before a project can reach level 3.
pub const CONFIDENT_MIN_SESSIONS: u64 = 16;
/// Sessions at level 2 before a project can reach level 3.
pub const CONFIDENT_MIN_SESSIONS_AT_STANDARD: u64 = 10;
/// Corrections per memory used at level 2 below which a project can reach level 3.
pub const CONFIDENT_MAX_CORRECTION_RATE: f64 = 0.05;
/// Memories flagged wrong in one session that make an offer to step down.
pub const REGRESSION_WRONG_IN_SESSION: u64 = 3;

/// A project's trust level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TrustLevel {
    /// Level 1: only well-established memories are injected; new ones wait for confirmation.
    Cautious = 1,
    /// Level 2: the default once a person has confirmed what memory learns.
    Standard = 2,
    /// Level 3: corrections are rare; the session summary shows only what needs review.
    Confident = 3,
    /// Level 4: opt-in only; no session summary by default.
    Autonomous = 4,
}

/// How much of a session summary the app shows at a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryMode {
    /// Everything used and learned.
    Full,
    /// Only learned memories that need review.
    ReviewOnly,
    /// Nothing unless asked for.
    Suppressed,
}

impl SummaryMode {
    /// Its name: `full`, `review_only` or `suppressed`.
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryMode::Full => "full",
            SummaryMode::ReviewOnly => "review_only",
            SummaryMode::Suppressed => "suppressed",
        }
    }
}

impl TrustLevel {
    /// The level numbered `n` (1..=4).
    pub fn from_number(n: u32) -> Result<TrustLevel> {
        match n {
            1 => Ok(TrustLevel::Cautious),
            2 => Ok(TrustLevel::Standard),
            3 => Ok(TrustLevel::Confident),
            4 => Ok(TrustLevel::Autonomous),
            _ => Err(Error::invalid(format!(
                "trust level must be 1..=4, got {n}"
            ))),
        }
    }

    /// Its number, 1..=4.
    pub fn number(self) -> u32 {
        self as u32
    }

    /// Its name: `cautious`, `standard`, `confident` or `autonomous`.
    pub fn as_str(self) -> &'static str {
        match self {
            TrustLevel::Cautious => "cautious",
            TrustLevel::Standard => "standard",
            TrustLevel::Confident => "confident",
            TrustLevel::Autonomous => "autonomous",
        }
    }

    /// Memories are injected only when their current confidence is above this.
    pub fn injection_threshold(self) -> f64 {
        match self {
            TrustLevel::Cautious => 0.80,
            TrustLevel::Standard => 0.65,
            TrustLevel::Confident => 0.55,
            TrustLevel::Autonomous => 0.45,
        }
    }

    /// How much of a session summary to show.
    pub fn summary_mode(self) -> SummaryMode {
        match self {
            TrustLevel::Cautious | TrustLevel::Standard => SummaryMode::Full,
            TrustLevel::Confident => SummaryMode::ReviewOnly,
            TrustLevel::Autonomous => SummaryMode::Suppressed,
        }
    }

    /// Whether new memories wait for a person's confirmation.
    pub fn new_memories_need_review(self) -> bool {
        self == TrustLevel::Cautious
    }

    fn below(self) -> Option<TrustLevel> {
        TrustLevel::from_number(self.number() - 1).ok()
    }
}

/// A pending offer to step down a level.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustOffer {
    /// The level offered.
    pub level: TrustLevel,
    /// Why, in words for the app to show.
    pub reason: String,
    /// The session where memories were flagged wrong.
    pub session_id: Option<String>,
}

/// Where a project stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustState {
    /// The current level.
    pub level: TrustLevel,
    /// Least current confidence (exclusive) of an injected memory.
    pub injection_threshold: f64,
    /// How much of a session summary to show.
    pub summary_mode: SummaryMode,
    /// Whether new memories wait for confirmation.
    pub new_memories_need_review: bool,
    /// Sessions ended in the project.
    pub sessions: u64,
    /// Of those, sessions ended at the current level.
    pub sessions_at_level: u64,
    /// Learned memories (created in ended sessions) a person confirmed, as a share; `None`
    /// when they learned nothing.
    pub confirmed_share: Option<f64>,
    /// `wrong` and correction feedback per distinct memory used, over the sessions at the
    /// current level; `None` when they used none.
    pub correction_rate: Option<f64>,
    /// A pending offer to step down.
    pub offer: Option<TrustOffer>,
}

struct Stored {
    level: TrustLevel,
    reached_after: u64,
    offer: Option<TrustOffer>,
}

async fn stored(conn: &Connection, project_id: &str) -> Result<Stored> {
    let mut rows = conn
        .query(
            "SELECT level, reached_after, offer_level, offer_reason, offer_session_id
             FROM trust_levels WHERE project_id = ?1",
            params![project_id],
        )
        .await
        .ctx("reading trust level")?;
    let Some(row) = rows.next().await.ctx("reading trust level")? else {
        return Ok(Stored {
            level: TrustLevel::Cautious,
            reached_after: 0,
            offer: None,
        });
    };
    let level = TrustLevel::from_number(row.get::<i64>(0).ctx("trust level")? as u32)?;
    let offer = match row.get::<Option<i64>>(2).ctx("trust offer")? {
        Some(n) => Some(TrustOffer {
            level: TrustLevel::from_number(n as u32)?,
            reason: row
                .get::<Option<String>>(3)
                .ctx("trust offer")?
                .unwrap_or_default(),
            session_id: row.get(4).ctx("trust offer")?,
        }),
        None => None,
    };
    Ok(Stored {
        level,
        reached_after: row.get::<i64>(1).ctx("trust level")? as u64,
        offer,
    })
}

/// The project's current level (cautious until a session has moved it).
pub(crate) async fn level_in(conn: &Connection, project_id: &str) -> Result<TrustLevel> {
    Ok(stored(conn, project_id).await?.level)
}

/// The project's current level, read on a pooled reader.
pub(crate) async fn level(ctx: &Ctx<'_>) -> Result<TrustLevel> {
    let conn = ctx.store.reader().await;
    level_in(&conn, ctx.project_id).await
}

/// The evidence progression looks at, counted over the project's ended sessions.
struct Evidence {
    sessions: u64,
    sessions_at_level: u64,
    learned: u64,
    confirmed: u64,
    used_at_level: u64,
    corrections_at_level: u64,
}

async fn evidence(conn: &Connection, project_id: &str, since: u64) -> Result<Evidence> {
    let [sessions, sessions_at_level, used_at_level, corrections_at_level, learned, confirmed] =
        count_row(
            conn,
            "WITH ended AS (
               SELECT session_id, used, corrections,
                      row_number() OVER (ORDER BY ended_at, session_id) AS n
               FROM lifecycle_sessions WHERE project_id = ?1)
             SELECT
               (SELECT count(*) FROM ended),
               (SELECT count(*) FROM ended WHERE n > ?2),
               (SELECT coalesce(sum(used), 0) FROM ended WHERE n > ?2),
               (SELECT coalesce(sum(corrections), 0) FROM ended WHERE n > ?2),
               (SELECT count(*) FROM memories m WHERE m.project_id = ?1
                  AND m.session_id IN (SELECT session_id FROM ended)),
               (SELECT count(*) FROM memories m WHERE m.project_id = ?1 AND m.user_verified = 1
                  AND m.session_id IN (SELECT session_id FROM ended))",
            params![project_id, since as i64],
            "counting trust evidence",
        )
        .await?;
    Ok(Evidence {
        sessions,
        sessions_at_level,
        used_at_level,
        corrections_at_level,
        learned,
        confirmed,
    })
}

impl Evidence {
    fn confirmed_share(&self) -> Option<f64> {
        (self.learned > 0).then(|| self.confirmed as f64 / self.learned as f64)
    }

    fn correction_rate(&self) -> Option<f64> {
        (self.used_at_level > 0)
            .then(|| self.corrections_at_level as f64 / self.used_at_level as f64)
    }

    /// The level this evidence earns from `level` (one step at most, never to 4).
    fn earns(&self, level: TrustLevel) -> TrustLevel {
        match level {
            TrustLevel::Cautious
                if self.sessions >= STANDARD_MIN_SESSIONS
                    && self
                        .confirmed_share()
                        .is_some_and(|s| s >= STANDARD_MIN_CONFIRMED) =>
            {
                TrustLevel::Standard
            }
            TrustLevel::Standard
                if self.sessions >= CONFIDENT_MIN_SESSIONS
                    && self.sessions_at_level >= CONFIDENT_MIN_SESSIONS_AT_STANDARD
                    && self
                        .correction_rate()
                        .is_some_and(|r| r < CONFIDENT_MAX_CORRECTION_RATE) =>
            {
                TrustLevel::Confident
            }
            other => other,
        }
    }
}

/// Where the project stands.
pub(crate) async fn state(ctx: &Ctx<'_>) -> Result<TrustState> {
    let conn = ctx.store.reader().await;
    let stored = stored(&conn, ctx.project_id).await?;
    let evidence = evidence(&conn, ctx.project_id, stored.reached_after).await?;
    Ok(TrustState {
        level: stored.level,
        injection_threshold: stored.level.injection_threshold(),
        summary_mode: stored.level.summary_mode(),
        new_memories_need_review: stored.level.new_memories_need_review(),
        sessions: evidence.sessions,
        sessions_at_level: evidence.sessions_at_level,
        confirmed_share: evidence.confirmed_share(),
        correction_rate: evidence.correction_rate(),
        offer: stored.offer,
    })
}

async fn write_level(
    tx: &Connection,
    project_id: &str,
    level: TrustLevel,
    reached_after: u64,
    now: i64,
) -> Result<()> {
    tx.execute(
        "INSERT INTO trust_levels (project_id, level, reached_after, updated_at)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (project_id) DO UPDATE SET level = excluded.level,
           reached_after = excluded.reached_after, offer_level = NULL, offer_reason = NULL,
           offer_session_id = NULL, updated_at = excluded.updated_at",
        params![project_id, level.number() as i64, reached_after as i64, now],
    )
    .await
    .ctx("saving trust level")?;
    Ok(())
}

/// After a session ended (inside its transaction): moves the level up one step when the
/// evidence earns it. Returns the level now.
pub(crate) async fn progress_in(tx: &Connection, project_id: &str, now: i64) -> Result<TrustLevel> {
    let current = stored(tx, project_id).await?;
    let evidence = evidence(tx, project_id, current.reached_after).await?;
    let earned = evidence.earns(current.level);
    if earned != current.level {
        write_level(tx, project_id, earned, evidence.sessions, now).await?;
    }
    Ok(earned)
}

/// After memories were flagged wrong in `session_id` (inside the feedback's transaction):
/// offers a step down once the session reaches [`REGRESSION_WRONG_IN_SESSION`], unless an
/// offer is already pending or the project is at level 1. Returns the pending offer.
pub(crate) async fn offer_regression_in(
    tx: &Connection,
    project_id: &str,
    session_id: &str,
    now: i64,
) -> Result<Option<TrustOffer>> {
    let current = stored(tx, project_id).await?;
    if current.offer.is_some() {
        return Ok(current.offer);
    }
    let Some(lower) = current.level.below() else {
        return Ok(None);
    };
    let mut rows = tx
        .query(
            "SELECT count(DISTINCT memory_id) FROM memory_events
             WHERE project_id = ?1 AND session_id = ?2 AND kind IN ('wrong', 'correction')",
            params![project_id, session_id],
        )
        .await
        .ctx("counting wrong memories")?;
    let flagged = match rows.next().await.ctx("counting wrong memories")? {
        Some(row) => row.get::<i64>(0).ctx("counting wrong memories")? as u64,
        None => 0,
    };
    drop(rows);
    if flagged < REGRESSION_WRONG_IN_SESSION {
        return Ok(None);
    }
    let offer = TrustOffer {
        level: lower,
        reason: format!("{flagged} memories were flagged wrong in one session"),
        session_id: Some(session_id.to_owned()),
    };
    tx.execute(
        "INSERT INTO trust_levels (project_id, level, reached_after, offer_level, offer_reason,
           offer_session_id, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (project_id) DO UPDATE SET offer_level = excluded.offer_level,
           offer_reason = excluded.offer_reason, offer_session_id = excluded.offer_session_id,
           updated_at = excluded.updated_at",
        params![
            project_id,
            current.level.number() as i64,
            current.reached_after as i64,
            lower.number() as i64,
            offer.reason.as_str(),
            session_id,
            now
        ],
    )
    .await
    .ctx("saving trust offer")?;
    Ok(Some(offer))
}

/// Sets the project's level by the user's choice (the only way to level 4; also how an offer
/// to step down is accepted). Clears any pending offer.
pub(crate) async fn set_level(ctx: &Ctx<'_>, level: TrustLevel) -> Result<TrustState> {
    let now = ctx.clock.now_ms();
    {
        let conn = ctx.store.writer().await;
        let tx = begin_write(&conn).await?;
        let sessions = evidence(&tx, ctx.project_id, 0).await?.sessions;
        write_level(&tx, ctx.project_id, level, sessions, now).await?;
        tx.commit().await.ctx("committing trust level")?;
    }
    state(ctx).await
}

/// Dismisses a pending offer to step down (the level stays).
pub(crate) async fn dismiss_offer(ctx: &Ctx<'_>) -> Result<TrustState> {
    {
        let conn = ctx.store.writer().await;
        conn.execute(
            "UPDATE trust_levels SET offer_level = NULL, offer_reason = NULL,
               offer_session_id = NULL, updated_at = ?2
             WHERE project_id = ?1",
            params![ctx.project_id, ctx.clock.now_ms()],
        )
        .await
        .ctx("dismissing trust offer")?;
    }
    state(ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(sessions: u64, at_level: u64, learned: u64, confirmed: u64) -> Evidence {
        Evidence {
            sessions,
            sessions_at_level: at_level,
            learned,
            confirmed,
            used_at_level: 0,
            corrections_at_level: 0,
        }
    }

    #[test]
    fn cautious_needs_three_sessions_and_half_confirmed() {
        assert_eq!(
            evidence(2, 2, 4, 4).earns(TrustLevel::Cautious),
            TrustLevel::Cautious
        );
        assert_eq!(
            evidence(3, 3, 4, 1).earns(TrustLevel::Cautious),
            TrustLevel::Cautious
        );
        assert_eq!(
            evidence(3, 3, 4, 2).earns(TrustLevel::Cautious),
            TrustLevel::Standard
        );
        assert_eq!(
            evidence(9, 9, 0, 0).earns(TrustLevel::Cautious),
            TrustLevel::Cautious,
            "nothing learned, nothing confirmed"
        );
    }

    #[test]
    fn confident_needs_sixteen_sessions_ten_at_standard_and_rare_corrections() {
        let mut e = evidence(16, 10, 0, 0);
        e.used_at_level = 100;
        e.corrections_at_level = 4;
        assert_eq!(e.earns(TrustLevel::Standard), TrustLevel::Confident);
        e.corrections_at_level = 5;
        assert_eq!(
            e.earns(TrustLevel::Standard),
            TrustLevel::Standard,
            "5% is not under 5%"
        );
        e.corrections_at_level = 0;
        e.sessions_at_level = 9;
        assert_eq!(e.earns(TrustLevel::Standard), TrustLevel::Standard);
        e.sessions_at_level = 10;
        e.used_at_level = 0;
        assert_eq!(
            e.earns(TrustLevel::Standard),
            TrustLevel::Standard,
            "no use, no evidence"
        );
    }

    #[test]
    fn nothing_advances_to_autonomous_on_its_own() {
        let mut e = evidence(100, 90, 10, 10);
        e.used_at_level = 1000;
        assert_eq!(e.earns(TrustLevel::Confident), TrustLevel::Confident);
    }

    #[test]
    fn names_are_the_serialised_names() {
        for n in 1..=4 {
            let level = TrustLevel::from_number(n).unwrap();
            assert_eq!(serde_json::to_value(level).unwrap(), level.as_str());
            let mode = level.summary_mode();
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.as_str());
        }
    }

    #[test]
    fn thresholds_follow_the_seed() {
        let t: Vec<f64> = [1, 2, 3, 4]
            .iter()
            .map(|n| TrustLevel::from_number(*n).unwrap().injection_threshold())
            .collect();
        assert_eq!(t, [0.80, 0.65, 0.55, 0.45]);
        assert!(TrustLevel::from_number(5).is_err());
        assert!(TrustLevel::from_number(0).is_err());
    }
}
