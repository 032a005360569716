//! Memory-aware step limits (the seed's section 9): a task in a module whose sessions ran
//! over their plan gets proportionally more steps, from the step-overrun signal's mean ratio
//! of steps run to steps planned.

use libsql::params;
use serde::Serialize;

use super::signals::Signal;
use crate::error::{DbContext, Result};
use crate::memory::Ctx;

/// The most a calibration factor multiplies a limit by (the seed's cap).
pub const MAX_FACTOR: f64 = 2.0;
/// No limit above this many steps, whatever the factor (`MAX_ABSOLUTE_STEPS`).
pub const MAX_ABSOLUTE_STEPS: u32 = 1000;

/// A step limit and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepLimit {
    /// The limit to use.
    pub limit: u32,
    /// The factor applied (1 without enough calibration).
    pub factor: f64,
    /// Finalized sessions the factor comes from (0: none applied).
    pub sessions: u32,
}

/// The key the step-overrun signal counts a session under: its module, or the root.
fn overrun_key(module: Option<&str>) -> String {
    match module.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) if m.ends_with('/') => m.to_owned(),
        Some(m) => format!("{m}/"),
        None => "the project root".to_owned(),
    }
}

/// The limit for a task of `base` planned steps in `module` (a directory such as `src/auth/`).
/// The factor is the mean steps-run-to-planned ratio of the module's sessions once the signal
/// has its 3 sessions, between 1 (never fewer steps than asked) and 2.
pub(crate) async fn step_limit(
    ctx: &Ctx<'_>,
    base: u32,
    module: Option<&str>,
) -> Result<StepLimit> {
    let key = overrun_key(module);
    let mut reader = ctx.store.reader().await;
    let found = reader
        .query_cached(
            "SELECT session_count, measure_sum, measure_count FROM observer_signal_counts
             WHERE project_id = ?1 AND signal = ?2 AND key = ?3",
            params![ctx.project_id, Signal::StepOverrun.as_str(), key],
            |row| {
                Ok((
                    row.get::<i64>(0).ctx("reading calibration")? as u32,
                    row.get::<f64>(1).ctx("reading calibration")?,
                    row.get::<i64>(2).ctx("reading calibration")?,
                ))
            },
        )
        .await?;
    let (factor, sessions) = match found.first() {
        Some(&(sessions, sum, count))
            if count > 0 && sessions >= Signal::StepOverrun.min_sessions() =>
        {
            ((sum / count as f64).clamp(1.0, MAX_FACTOR), sessions)
        }
        _ => (1.0, 0),
    };
    // Rounded to a millionth first: 30 x 1.6 is 48.000000000000004 in binary.
    let scaled = (f64::from(base) * factor * 1e6).round() / 1e6;
    let limit = scaled.ceil().min(f64::from(MAX_ABSOLUTE_STEPS)) as u32;
    Ok(StepLimit {
        limit: limit.max(base.min(MAX_ABSOLUTE_STEPS)),
        factor,
        sessions,
    })
}

/// How far the sessions in `modules` (module keys such as `src/auth/`, their subdirectories
/// included; every module when empty) ran over their plans: the mean steps-run-to-planned ratio over the modules whose
/// step-overrun signal has its 3 sessions, weighted by their measures, with the sessions it
/// comes from; `None` without such a module. Unclamped: the planner shows it as measured.
pub(crate) async fn overrun_ratio(ctx: &Ctx<'_>, modules: &[String]) -> Result<Option<(f64, u32)>> {
    let keys = serde_json::to_string(modules).unwrap_or_default();
    let mut reader = ctx.store.reader().await;
    let found = reader
        .query_cached(
            "SELECT sum(measure_sum), sum(measure_count), sum(session_count)
             FROM observer_signal_counts c
             WHERE project_id = ?1 AND signal = ?2 AND session_count >= ?3 AND measure_count > 0
               AND (?4 = '[]' OR EXISTS (
                     SELECT 1 FROM json_each(?4) j WHERE c.key >= j.value
                       AND c.key < substr(j.value, 1, length(j.value) - 1) || '0'))",
            params![
                ctx.project_id,
                Signal::StepOverrun.as_str(),
                i64::from(Signal::StepOverrun.min_sessions()),
                keys
            ],
            |row| {
                Ok((
                    row.get::<Option<f64>>(0).ctx("reading calibration")?,
                    row.get::<Option<i64>>(1).ctx("reading calibration")?,
                    row.get::<Option<i64>>(2).ctx("reading calibration")?,
                ))
            },
        )
        .await?;
    Ok(match found.first() {
        Some(&(Some(sum), Some(count), Some(sessions))) if count > 0 => Some((
            sum / count as f64,
            sessions.clamp(0, i64::from(u32::MAX)) as u32,
        )),
        _ => None,
    })
}
