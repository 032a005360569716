//! Promotion: from a finished session's candidates to stored memories, in one transaction
//! (the seed's section 5 filter pipeline).
//!
//! 1. Validation: a session that did not succeed keeps only its dead ends (what failed is
//!    worth knowing; how it went is not a recipe). Its counts still update.
//! 2. Session-type gate: only the type's primary signals (and its cap, below).
//! 3. Frequency: every candidate's key is counted once per session in
//!    `observer_signal_counts`; a candidate needs its class's minimum sessions, unless an
//!    early trigger of its class fired in this session. A key already promoted is not
//!    promoted again (and one whose memory was forgotten stays rejected).
//! 4. Value: the seed's signal-value formula with the class's measured false-positive rate;
//!    under 0.4 is dropped.
//! 5. Novelty: a candidate whose words overlap ≥ 80 % (Jaccard) with an active memory of its
//!    type is dropped (exact duplicates would only reinforce; near ones would clutter). It
//!    runs last, on what passed everything else, and compares with up to 100 memories: those
//!    linked to the candidate's first file, else the type's newest.
//! 6. Trust gate: what originated after a web fetch or search is flagged `needsReview`,
//!    its confidence × 0.7, tagged `tainted:web`.
//! 7. Scoring and cap: confidence from the value and the observer's source trust (0.85);
//!    the agent's own records first, then by value, up to the session type's cap.
//! 8. One transaction: counts, the session's row, the memories and their links to the counts.

use std::collections::{HashMap, HashSet};

use libsql::params;
use serde::Serialize;

use super::ab::{self, AbGroup};
use super::detect::{self, Candidate};
use super::protocol::{SessionOutcome, SessionType};
use super::scratchpad::Scratchpad;
use super::signals::{self, Signal};
use crate::error::{DbContext, Result};
use crate::graph::module_layer::module_of;
use crate::memory::{
    self, Ctx, Memory, MemoryScope, MemorySource, MemoryType, RememberInput, WorkUnitRef,
};
use crate::store::begin_write;

/// The observer's source trust (the seed's `observer_inferred` multiplier).
pub const OBSERVER_TRUST: f64 = 0.85;
/// Confidence multiplier for what originated after outside text entered the session.
pub const TAINT_FACTOR: f64 = 0.7;
/// A candidate sharing this share of its words with an active memory of its type is not novel.
pub const NOVELTY_OVERLAP: f64 = 0.8;
/// Prefetch patterns need the file in at least this share of its module's sessions.
pub const PREFETCH_COVERAGE: f64 = 0.5;

/// What became of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Stored as a new memory.
    Promoted,
    /// Its text was already a memory, which was reinforced.
    Reinforced,
    /// The session did not succeed (only dead ends pass).
    Outcome,
    /// Not a primary signal of the session type.
    SessionType,
    /// Fewer sessions showed it than its class needs.
    TooFewSessions,
    /// Its signal value is under 0.4.
    LowValue,
    /// An active memory already says it.
    NotNovel,
    /// Promoted in an earlier session (or rejected since).
    AlreadyPromoted,
    /// Over the session type's cap.
    OverCap,
    /// The two files read one after the other do not import each other.
    NotAnImport,
}

/// A candidate with its numbers and fate.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateReport {
    /// Which signal.
    pub signal: Signal,
    /// Its key.
    pub key: String,
    /// The memory type it would become.
    pub memory_type: MemoryType,
    /// The text it would have.
    pub content: String,
    /// Sessions that showed it, this one included.
    pub sessions: u32,
    /// Its signal value.
    pub value: f64,
    /// Whether it originated after a web fetch or search.
    pub tainted: bool,
    /// Parallel agents whose own pads showed it (1 outside merged sessions).
    pub agents: u32,
    /// What became of it.
    pub decision: Decision,
    /// The memory it became (promoted or reinforced).
    pub memory_id: Option<String>,
}

/// The section-19 metrics of a session.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMetrics {
    /// Tool calls.
    pub tool_calls: u32,
    /// Read calls.
    pub file_reads: u32,
    /// Reads of files this session had already read.
    pub repeat_reads: u32,
    /// Files this session read that an earlier session of the project read too (the seed's
    /// cross-session re-reads, which memory should bring down; among the first 64 files read).
    pub files_read_before: u32,
    /// Distinct files changed.
    pub files_edited: u32,
    /// Tool calls that failed.
    pub errors: u32,
    /// Self-corrections said.
    pub self_corrections: u32,
    /// Input tokens reported, or output characters / 4 when the loop reported none.
    pub tokens: u64,
    /// Steps run.
    pub steps: u32,
    /// Memories promoted (new or reinforced).
    pub memories_promoted: u32,
    /// Calls dropped to stay under the scratchpad cap.
    pub evicted_calls: u64,
}

/// What `finalize` returns.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finalized {
    /// The session.
    pub session_id: String,
    /// How it ended.
    pub outcome: SessionOutcome,
    /// Its A/B group.
    pub ab_group: AbGroup,
    /// The module it worked in.
    pub module: Option<String>,
    /// The memories promoted (new or reinforced), in order.
    pub promoted: Vec<Memory>,
    /// Every candidate and its fate.
    pub candidates: Vec<CandidateReport>,
    /// The session's metrics.
    pub metrics: SessionMetrics,
    /// The synthesis call, when `finalize` was given a synthesis function and the session
    /// succeeded with signal memories promoted.
    pub synthesis: Option<super::synthesis::SynthesisCall>,
}

/// Which signals a session type promotes (`None`: all).
fn primary_signals(t: SessionType) -> Option<&'static [Signal]> {
    match t {
        SessionType::Build => None,
        SessionType::Insights => Some(&[
            Signal::CoAccess,
            Signal::SelfCorrection,
            Signal::RepeatedGrep,
        ]),
        SessionType::Terminal => Some(&[Signal::ErrorRetry, Signal::ToolSequence]),
        SessionType::SpecCreation => Some(&[
            Signal::FileAccess,
            Signal::RepeatedGrep,
            Signal::ExternalReference,
        ]),
        SessionType::PrReview => Some(&[Signal::ErrorRetry, Signal::SelfCorrection]),
        SessionType::Roadmap | SessionType::Changelog => Some(&[]),
    }
}

/// Which recorded entries a session type promotes.
fn records_allowed(t: SessionType, memory_type: MemoryType) -> bool {
    match t {
        SessionType::Changelog => false,
        SessionType::Roadmap => {
            matches!(memory_type, MemoryType::Decision | MemoryType::Requirement)
        }
        _ => true,
    }
}

/// The pseudo-signal counting sessions per module in `observer_signal_counts` (the
/// denominator of prefetch coverage; `agent::prefetch` reads it).
pub(crate) const MODULE_SESSIONS: &str = "session_module";

/// Runs the pipeline over `pad` and stores what passes, in one transaction.
pub(crate) async fn finalize(
    ctx: &Ctx<'_>,
    pad: &Scratchpad,
    outcome: SessionOutcome,
    synthesize: Option<&super::synthesis::SynthesizeFn>,
) -> Result<Finalized> {
    let now = ctx.clock.now_ms();
    let mut candidates = detect::detect(pad);
    // One candidate per (signal, key).
    let mut seen = HashSet::new();
    candidates.retain(|c| seen.insert((c.signal, c.key.clone())));
    let metrics = metrics(pad);
    let session_module = session_module(pad);

    // Reads before the write lock: which read pairs are imports, and what is already known.
    let imports = confirmed_imports(ctx, &candidates).await?;

    let mut reports = Vec::with_capacity(candidates.len());
    let mut conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;

    // 3. Frequency: count every key once for this session (one statement for the batch).
    let mut rows: Vec<CountRow<'_>> = Vec::with_capacity(candidates.len() + 8);
    let mut modules: Vec<String> = Vec::new();
    for c in &candidates {
        if c.import_pair.is_some() && !imports.contains(&c.key) {
            continue;
        }
        let (sum, count) = c.measure.map_or((0.0, 0), |m| (m.value, 1));
        rows.push((c.signal.as_str(), &c.key, sum, count, &c.content));
        if c.signal == Signal::FileAccess {
            for m in &c.related_modules {
                if !modules.contains(m) {
                    modules.push(m.clone());
                }
            }
        }
    }
    for m in &modules {
        rows.push((MODULE_SESSIONS, m, 0.0, 0, ""));
    }
    let counts = upsert_counts(&mut conn, ctx.project_id, &pad.session_id, now, &rows).await?;
    let fpr = false_positive_rates(&tx, ctx.project_id).await?;
    let mut metrics = metrics;
    metrics.files_read_before = counts
        .iter()
        .filter(|((signal, _), k)| signal == Signal::FileAccess.as_str() && k.sessions > 1)
        .count() as u32;

    // 1, 2, 4-7 per candidate.
    let early: HashSet<Signal> = pad.early.iter().map(|e| e.signal).collect();
    let quorum: HashMap<(Signal, &str), u32> = pad
        .quorum
        .iter()
        .map(|(s, k, n)| ((*s, k.as_str()), *n))
        .collect();
    let allowed = primary_signals(pad.session_type);
    let succeeded = outcome == SessionOutcome::Success;
    let mut passing: Vec<(f64, usize, RememberInput)> = Vec::new();
    let mut known: HashMap<MemoryType, Vec<Vec<u64>>> = HashMap::new();
    for c in candidates {
        let tainted = pad.external_step.is_some_and(|s| c.step > s);
        let count = counts.get(&(c.signal.as_str().to_owned(), c.key.clone()));
        let sessions = count.map_or(1, |k| k.sessions);
        let rate = fpr
            .get(&c.signal)
            .copied()
            .unwrap_or_else(|| signals::false_positive_rate(0, 0));
        let value = signals::signal_value(c.signal, sessions, rate);
        let agents = quorum
            .get(&(c.signal, c.key.as_str()))
            .copied()
            .unwrap_or(1);
        let mut report = CandidateReport {
            signal: c.signal,
            key: c.key.clone(),
            memory_type: c.memory_type,
            content: c.content.clone(),
            sessions,
            value,
            tainted,
            agents,
            decision: Decision::Promoted,
            memory_id: None,
        };
        let decision = if c.import_pair.is_some() && !imports.contains(&c.key) {
            Some(Decision::NotAnImport)
        } else if !succeeded && c.memory_type != MemoryType::DeadEnd {
            Some(Decision::Outcome)
        } else if allowed.is_some_and(|a| !a.contains(&c.signal)) {
            Some(Decision::SessionType)
        } else if count.is_some_and(|k| k.memory_id.is_some()) {
            Some(Decision::AlreadyPromoted)
        } else if sessions < c.signal.min_sessions() && !early.contains(&c.signal) && agents < 2 {
            Some(Decision::TooFewSessions)
        } else if value < signals::MIN_SIGNAL_VALUE {
            Some(Decision::LowValue)
        } else if !coverage_ok(&c, sessions, &counts) {
            Some(Decision::TooFewSessions)
        } else {
            None
        };
        // 5. Novelty, last: it reads memories, so only for what passed everything else.
        let decision = match decision {
            None if !novel(&mut conn, ctx.project_id, &mut known, &c).await? => {
                Some(Decision::NotNovel)
            }
            other => other,
        };
        if let Some(d) = decision {
            report.decision = d;
            reports.push(report);
            continue;
        }
        let content = match (c.measure, count) {
            (Some(_), Some(k)) if k.measure_count > 0 => {
                detect::measured_content(&c, k.measure_sum / f64::from(k.measure_count), sessions)
            }
            _ if c.signal == Signal::FileAccess => {
                let module = module_of(&c.key).unwrap_or_default();
                let of = counts
                    .get(&(MODULE_SESSIONS.to_owned(), module.clone()))
                    .map_or(sessions, |k| k.sessions);
                format!(
                    "`{}` is read in {sessions} of {of} sessions working in `{module}`: read it \
                     up front.",
                    c.key
                )
            }
            _ => c.content.clone(),
        };
        report.content = content.clone();
        let confidence = (value.min(0.95)
            * OBSERVER_TRUST
            * quorum_boost(agents)
            * if tainted { TAINT_FACTOR } else { 1.0 })
        .clamp(0.05, 0.95);
        let mut tags = vec![
            "observer".to_owned(),
            format!("signal:{}", c.signal.as_str()),
        ];
        if tainted {
            tags.push("tainted:web".into());
        }
        let input = RememberInput {
            memory_type: c.memory_type,
            content,
            confidence: Some(confidence),
            tags,
            related_files: c.related_files.clone(),
            related_modules: c.related_modules.clone(),
            scope: Some(match c.memory_type {
                MemoryType::PrefetchPattern | MemoryType::TaskCalibration
                    if !c.related_modules.is_empty() =>
                {
                    MemoryScope::Module
                }
                _ => MemoryScope::Global,
            }),
            source: Some(MemorySource::ObserverInferred),
            session_id: Some(pad.session_id.clone()),
            methodology: pad.methodology.clone(),
            work_unit_ref: work_unit_ref(pad),
            needs_review: Some(tainted),
            metadata: Some(serde_json::json!({
                "signal": c.signal.as_str(),
                "key": c.key,
                "sessions": sessions,
                "signalValue": (value * 1000.0).round() / 1000.0,
                "tainted": tainted,
            })),
            ..RememberInput::new(c.memory_type, String::new())
        };
        passing.push((value, reports.len(), input));
        reports.push(report);
    }

    // Recorded entries: the agent asked for them; first in line, still through the gates.
    let mut recorded: Vec<(usize, RememberInput)> = Vec::new();
    for r in &pad.recorded {
        let tainted = pad.external_step.is_some_and(|s| r.step > s);
        let ok = records_allowed(pad.session_type, r.memory_type)
            && (succeeded || r.memory_type == MemoryType::DeadEnd);
        let mut tags = vec!["recorded".to_owned()];
        if tainted {
            tags.push("tainted:web".into());
        }
        let report = CandidateReport {
            signal: Signal::SelfCorrection,
            key: String::new(),
            memory_type: r.memory_type,
            content: r.content.clone(),
            sessions: 1,
            value: 1.0,
            tainted,
            agents: r.agents,
            decision: if ok {
                Decision::Promoted
            } else {
                Decision::Outcome
            },
            memory_id: None,
        };
        if ok {
            let input = RememberInput {
                confidence: Some(
                    (0.8 * quorum_boost(r.agents) * if tainted { TAINT_FACTOR } else { 1.0 })
                        .min(0.95),
                ),
                tags,
                related_files: r
                    .related_files
                    .iter()
                    .map(|f| super::scratchpad::relative_path(f, ctx.project_root))
                    .filter(|f| !super::scratchpad::is_outside(f))
                    .collect(),
                source: Some(MemorySource::AgentExplicit),
                session_id: Some(pad.session_id.clone()),
                methodology: pad.methodology.clone(),
                work_unit_ref: work_unit_ref(pad),
                needs_review: Some(tainted),
                ..RememberInput::new(r.memory_type, r.content.clone())
            };
            recorded.push((reports.len(), input));
        }
        reports.push(report);
    }

    // 7. Cap: records first, then by value (stable: detection order breaks ties).
    passing.sort_by(|a, b| b.0.total_cmp(&a.0));
    let cap = pad.session_type.max_promoted();
    let mut chosen: Vec<(usize, RememberInput)> = Vec::new();
    for (index, input) in recorded
        .into_iter()
        .chain(passing.into_iter().map(|(_, i, r)| (i, r)))
    {
        if chosen.len() < cap {
            chosen.push((index, input));
        } else {
            reports[index].decision = Decision::OverCap;
        }
    }

    // 8. Store them with the counts.
    let (indexes, inputs): (Vec<usize>, Vec<RememberInput>) = chosen.into_iter().unzip();
    let batch = memory::prepare_batch(ctx, inputs)?;
    let stored = memory::remember_in(ctx, &mut conn, &tx, batch).await?;
    let mut links: Vec<(&str, String, String)> = Vec::new();
    let mut promoted_per_signal: HashMap<&str, i64> = HashMap::new();
    let mut promoted = Vec::with_capacity(stored.len());
    for (index, remembered) in indexes.into_iter().zip(stored) {
        let report = &mut reports[index];
        report.decision = if remembered.created {
            Decision::Promoted
        } else {
            Decision::Reinforced
        };
        report.memory_id = Some(remembered.memory.id.clone());
        if remembered.created && !report.key.is_empty() {
            *promoted_per_signal
                .entry(report.signal.as_str())
                .or_insert(0) += 1;
        }
        if !report.key.is_empty() {
            links.push((
                report.signal.as_str(),
                report.key.clone(),
                remembered.memory.id.clone(),
            ));
        }
        promoted.push(remembered.memory);
    }
    if !links.is_empty() {
        // By primary key, one row at a time: an UPDATE ... FROM json_each scans the whole
        // counts table for every linked row.
        let link = conn
            .cached(
                "UPDATE observer_signal_counts SET memory_id = ?4
                 WHERE project_id = ?1 AND signal = ?2 AND key = ?3",
            )
            .await?;
        for (signal, key, id) in links {
            link.execute(params![ctx.project_id, signal, key, id])
                .await
                .ctx("linking promoted memories to their signals")?;
            link.reset();
        }
    }
    for (signal, n) in promoted_per_signal {
        tx.execute(
            "INSERT INTO observer_signal_record(project_id, signal, promoted) VALUES (?1, ?2, ?3)
             ON CONFLICT(project_id, signal) DO UPDATE SET promoted = promoted + excluded.promoted",
            params![ctx.project_id, signal, n],
        )
        .await
        .ctx("recording promotions")?;
    }
    let ab_group = ab::assign(&pad.session_id, ctx.project_id);
    metrics.memories_promoted = promoted.len() as u32;
    let promoted_ids: Vec<&str> = promoted.iter().map(|m| m.id.as_str()).collect();
    tx.execute(
        "INSERT INTO observer_sessions(project_id, session_id, session_type, work_unit,
           methodology, ab_group, outcome, module, started_at, finalized_at, steps,
           planned_steps, metrics, promoted)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            ctx.project_id,
            pad.session_id.as_str(),
            pad.session_type.as_str(),
            pad.work_unit.as_deref(),
            pad.methodology.as_deref(),
            ab_group.as_str(),
            outcome.as_str(),
            session_module.as_deref(),
            pad.started_at,
            now,
            i64::from(metrics.steps),
            pad.planned_steps.map(i64::from),
            serde_json::to_string(&metrics).expect("metrics serialise"),
            serde_json::to_string(&promoted_ids).expect("ids serialise"),
        ],
    )
    .await
    .map_err(|e| match e {
        libsql::Error::SqliteFailure(code, _) if code & 0xff == 19 => {
            crate::error::Error::Conflict(format!(
                "session {:?} was already finalized",
                pad.session_id
            ))
        }
        other => crate::error::Error::db("recording the session", other),
    })?;
    // The session is over: its checkpoint (local home, same file today) goes with it.
    tx.execute(
        "DELETE FROM observer_checkpoints WHERE project_id = ?1 AND session_id = ?2",
        params![ctx.project_id, pad.session_id.as_str()],
    )
    .await
    .ctx("removing the session's checkpoint")?;
    tx.commit()
        .await
        .ctx("committing the session's promotion")?;
    // The app's LLM, after the commit (no write lock held while it runs).
    drop(conn);
    let signals: Vec<super::synthesis::SignalSummary> = reports
        .iter()
        .filter(|r| r.decision == Decision::Promoted && !r.key.is_empty())
        .map(|r| super::synthesis::SignalSummary {
            signal: r.signal.as_str().to_owned(),
            key: r.key.clone(),
            content: r.content.clone(),
            sessions: r.sessions,
        })
        .collect();
    let synthesis = match synthesize {
        Some(f) if outcome == SessionOutcome::Success && !signals.is_empty() => {
            let request = super::synthesis::session_request(
                &pad.session_id,
                session_module.as_deref(),
                signals,
            );
            Some(super::synthesis::run_one(ctx, f, request, Some(&pad.session_id), None).await?)
        }
        _ => None,
    };
    Ok(Finalized {
        session_id: pad.session_id.clone(),
        outcome,
        ab_group,
        module: session_module,
        promoted,
        candidates: reports,
        metrics,
        synthesis,
    })
}

/// Confidence multiplier for what several parallel agents showed: +10 % per extra agent.
fn quorum_boost(agents: u32) -> f64 {
    1.0 + 0.1 * f64::from(agents.saturating_sub(1))
}

fn work_unit_ref(pad: &Scratchpad) -> Option<WorkUnitRef> {
    pad.work_unit.as_ref().map(|label| WorkUnitRef {
        methodology: pad.methodology.clone().unwrap_or_else(|| "native".into()),
        hierarchy: vec![label.clone()],
        label: label.clone(),
    })
}

/// One key counted for a session: signal, key, measure, measure count, wording.
type CountRow<'a> = (&'a str, &'a str, f64, i64, &'a str);

/// A key's counts after this session's upsert.
#[derive(Debug, Clone)]
struct KeyCount {
    sessions: u32,
    measure_sum: f64,
    measure_count: u32,
    memory_id: Option<String>,
}

/// Counts each `[signal, key, measure_sum, measure_count]` row once for this session and
/// returns the counts after.
async fn upsert_counts(
    conn: &mut crate::store::Writer<'_>,
    project_id: &str,
    session_id: &str,
    now: i64,
    rows: &[CountRow<'_>],
) -> Result<HashMap<(String, String), KeyCount>> {
    let mut out = HashMap::with_capacity(rows.len());
    let statement = conn
        .cached(
            "INSERT INTO observer_signal_counts(project_id, signal, key, session_count,
               occurrences, last_session_id, first_seen_at, last_seen_at, measure_sum,
               measure_count, content)
             VALUES (?1, ?2, ?3, 1, 1, ?4, ?5, ?5, ?6, ?7, ?8)
             ON CONFLICT(project_id, signal, key) DO UPDATE SET
               session_count = session_count + (last_session_id <> excluded.last_session_id),
               occurrences = occurrences + 1,
               measure_sum = measure_sum + excluded.measure_sum,
               measure_count = measure_count + excluded.measure_count,
               last_session_id = excluded.last_session_id,
               last_seen_at = excluded.last_seen_at,
               content = excluded.content
             RETURNING session_count, measure_sum, measure_count, memory_id",
        )
        .await?;
    for &(signal, key, sum, count, content) in rows {
        let mut returned = statement
            .query(params![
                project_id, signal, key, session_id, now, sum, count, content
            ])
            .await
            .ctx("counting the session's signals")?;
        if let Some(row) = returned
            .next()
            .await
            .ctx("counting the session's signals")?
        {
            out.insert(
                (signal.to_owned(), key.to_owned()),
                KeyCount {
                    sessions: row.get::<i64>(0).ctx("reading a signal count")? as u32,
                    measure_sum: row.get::<f64>(1).ctx("reading a signal count")?,
                    measure_count: row.get::<i64>(2).ctx("reading a signal count")? as u32,
                    memory_id: row.get::<Option<String>>(3).ctx("reading a signal count")?,
                },
            );
        }
        drop(returned);
        statement.reset();
    }
    Ok(out)
}

/// Each signal's false-positive rate in this project: its promoted memories that were
/// forgotten since (`observer_signal_record`, kept by triggers on `memories`).
async fn false_positive_rates(
    tx: &crate::store::WriteTx,
    project_id: &str,
) -> Result<HashMap<Signal, f64>> {
    let mut rows = tx
        .query(
            "SELECT signal, promoted, rejected FROM observer_signal_record WHERE project_id = ?1",
            params![project_id],
        )
        .await
        .ctx("reading the signals' record")?;
    let mut out = HashMap::new();
    while let Some(row) = rows.next().await.ctx("reading the signals' record")? {
        let name: String = row.get(0).ctx("reading the signals' record")?;
        if let Some(signal) = Signal::parse(&name) {
            let promoted = row.get::<i64>(1).ctx("reading the signals' record")? as u32;
            let rejected = row.get::<i64>(2).ctx("reading the signals' record")? as u32;
            out.insert(signal, signals::false_positive_rate(promoted, rejected));
        }
    }
    Ok(out)
}

/// Prefetch patterns need the file in enough of its module's sessions.
fn coverage_ok(c: &Candidate, sessions: u32, counts: &HashMap<(String, String), KeyCount>) -> bool {
    if c.signal != Signal::FileAccess {
        return true;
    }
    let Some(module) = module_of(&c.key) else {
        return true;
    };
    let of = counts
        .get(&(MODULE_SESSIONS.to_owned(), module))
        .map_or(sessions, |k| k.sessions.max(sessions));
    f64::from(sessions) / f64::from(of.max(1)) >= PREFETCH_COVERAGE
}

/// The import-chase keys whose first file imports the second, per the code index.
async fn confirmed_imports(ctx: &Ctx<'_>, candidates: &[Candidate]) -> Result<HashSet<String>> {
    let pairs: Vec<serde_json::Value> = candidates
        .iter()
        .filter_map(|c| c.import_pair.as_ref())
        .map(|(a, b)| serde_json::json!([a, b]))
        .collect();
    if pairs.is_empty() {
        return Ok(HashSet::new());
    }
    let mut reader = ctx.store.reader().await;
    let found = reader
        .query_cached(
            "SELECT DISTINCT j.value ->> 0, j.value ->> 1
             FROM json_each(?2) AS j
             JOIN code_files f ON f.project_id = ?1 AND f.path = j.value ->> 0
             JOIN code_refs r ON r.file_id = f.id
             WHERE r.kind = 'imports' AND r.resolved_path = j.value ->> 1",
            params![ctx.project_id, serde_json::Value::Array(pairs).to_string()],
            |row| {
                let a: String = row.get(0).ctx("reading imports")?;
                let b: String = row.get(1).ctx("reading imports")?;
                Ok(format!("{a}\n{b}"))
            },
        )
        .await?;
    Ok(found.into_iter().collect())
}

/// Whether a candidate says something no active memory of its type already says. It is
/// compared with up to 100 of them: those linked to its first related file, else the newest.
async fn novel(
    conn: &mut crate::store::Writer<'_>,
    project_id: &str,
    by_type: &mut HashMap<MemoryType, Vec<Vec<u64>>>,
    c: &Candidate,
) -> Result<bool> {
    let read = |rows: Vec<String>| rows.iter().map(|t| words(t)).collect::<Vec<_>>();
    if let Some(file) = c.related_files.first() {
        // Through the memory's file links (an index lookup), not a scan of the type.
        let statement = conn
            .cached(
                "SELECT m.content FROM memory_links l JOIN memories m ON m.seq = l.memory_seq
                 WHERE l.project_id = ?1 AND l.node_key = ?2 AND l.role = 'file'
                   AND m.type = ?3 AND m.deprecated = 0
                 LIMIT 100",
            )
            .await?;
        let texts = collect_texts(
            &statement,
            params![project_id, file.as_str(), c.memory_type.as_str()],
        )
        .await?;
        return Ok(is_novel(&c.content, &read(texts)));
    }
    let known = match by_type.entry(c.memory_type) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            let statement = conn
                .cached(
                    "SELECT content FROM memories
                     WHERE project_id = ?1 AND type = ?2 AND deprecated = 0
                     ORDER BY created_at DESC LIMIT 100",
                )
                .await?;
            let texts =
                collect_texts(&statement, params![project_id, c.memory_type.as_str()]).await?;
            e.insert(read(texts))
        }
    };
    Ok(is_novel(&c.content, known))
}

/// The first column of every row, as text.
async fn collect_texts(
    statement: &crate::store::Cached,
    params: impl libsql::params::IntoParams,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut rows = statement
        .query(params)
        .await
        .ctx("reading known memories")?;
    while let Some(row) = rows.next().await.ctx("reading known memories")? {
        out.push(row.get::<String>(0).ctx("reading known memories")?);
    }
    Ok(out)
}

/// A text's distinct words (lower case, alphanumeric runs), as sorted 64-bit hashes: cheap
/// to build and to intersect for the hundreds of texts one finalize compares.
pub(crate) fn words(text: &str) -> Vec<u64> {
    let mut out: Vec<u64> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(|w| super::fingerprint::hash_text(&w.to_lowercase()))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// How many values two sorted, deduplicated lists share.
fn shared(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Whether `content` shares less than [`NOVELTY_OVERLAP`] of its words (Jaccard) with every
/// known text.
pub(crate) fn is_novel(content: &str, known: &[Vec<u64>]) -> bool {
    let mine = words(content);
    if mine.is_empty() {
        return true;
    }
    known.iter().all(|other| {
        let common = shared(&mine, other);
        let union = mine.len() + other.len() - common;
        (common as f64 / union.max(1) as f64) < NOVELTY_OVERLAP
    })
}

/// The module the session worked in (most edits, else most reads).
fn session_module(pad: &Scratchpad) -> Option<String> {
    let mut counts: HashMap<String, (u32, u32)> = HashMap::new();
    for (&id, stat) in &pad.analytics.files {
        if let Some(m) = pad.project_file(id).and_then(module_of) {
            let e = counts.entry(m).or_default();
            e.0 += stat.edits;
            e.1 += stat.reads;
        }
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(m, _)| m)
}

fn metrics(pad: &Scratchpad) -> SessionMetrics {
    let a = &pad.analytics;
    let file_reads: u32 = a.files.values().map(|s| s.reads).sum();
    let distinct_read = a.files.values().filter(|s| s.reads > 0).count() as u32;
    SessionMetrics {
        tool_calls: pad.calls.len() as u32 + pad.evicted_calls as u32,
        file_reads,
        repeat_reads: file_reads - distinct_read,
        files_read_before: 0,
        files_edited: a.edit_set.len() as u32,
        errors: pad.errors.iter().map(|e| e.count).sum(),
        self_corrections: a.self_corrections,
        tokens: if a.input_tokens > 0 {
            a.input_tokens
        } else {
            a.output_chars / 4
        },
        steps: pad.steps_executed.unwrap_or(a.current_step),
        memories_promoted: 0,
        evicted_calls: pad.evicted_calls,
    }
}
