//! Cross-session synthesis with the app's LLM (the seed's section 12), through a callback: the
//! engine decides when and with what, the app's function turns the statistics into memories.
//!
//! - Mode 1, incremental statistics after every session without an LLM, is the counts table
//!   `finalize` keeps (`observer_signal_counts`).
//! - Session: `finalize` with a synthesis function calls it once for a successful session
//!   that promoted signal memories, with those signals, for up to 3 memories in prose.
//! - Mode 2, threshold: a module whose session count reached 5, 10, 20, 50 or 100 gets one
//!   call per threshold, with its statistics (files read, files used together, recurring
//!   errors): up to 5 memories.
//! - Mode 3, scheduled: pairs of modules whose files are often used together get one call
//!   each, once, asking why (the app runs it on its schedule, e.g. weekly).
//!
//! Every request carries the seed's prompt filled in, for apps that just pass it to a model.
//! What comes back is checked (type, non-empty, at most the request's count), filtered for
//! novelty, and stored as `observer_inferred` with `needsReview` (an LLM wrote it). No write
//! lock is held while the function runs: a session's synthesis is stored after its promotion,
//! in a transaction of its own.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use libsql::params;
use serde::Serialize;

use super::scratchpad::{is_outside, relative_path};
use crate::error::{DbContext, Error, Result};
use crate::graph::module_layer::module_of;
use crate::memory::{self, Ctx, Memory, MemorySource, MemoryType, RememberInput};
use crate::store::begin_write;

/// Session counts of a module at which it is synthesized (the seed's thresholds).
pub const THRESHOLDS: [u32; 5] = [5, 10, 20, 50, 100];
/// How long the app's function may take per call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Co-access sessions a cross-module pair needs before a scheduled run considers it.
pub const SCHEDULED_MIN_SESSIONS: u32 = 3;

/// What a synthesis call is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SynthesisMode {
    /// One finalized session's signals.
    Session,
    /// A module that reached a session-count threshold.
    Threshold,
    /// Module pairs used together (the app's schedule).
    Scheduled,
}

impl SynthesisMode {
    /// The JS / stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            SynthesisMode::Session => "session",
            SynthesisMode::Threshold => "threshold",
            SynthesisMode::Scheduled => "scheduled",
        }
    }
}

/// One statistic handed to the app's function.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalSummary {
    /// The signal (`file_access`, `co_access`, `error_retry`...).
    pub signal: String,
    /// Its key (a file, `a\nb` for a pair, a fingerprint...).
    pub key: String,
    /// The latest wording of what it saw.
    pub content: String,
    /// Sessions that showed it.
    pub sessions: u32,
}

/// What the app's function is asked.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisRequest {
    /// Which mode.
    pub mode: SynthesisMode,
    /// The session id, the module, or the module pair (`a + b`).
    pub subject: String,
    /// The modules concerned.
    pub modules: Vec<String>,
    /// Sessions behind the statistics.
    pub sessions: u32,
    /// The statistics.
    pub signals: Vec<SignalSummary>,
    /// The seed's prompt, filled in.
    pub prompt: String,
    /// The most memories kept from the answer.
    pub max_memories: u32,
}

/// A memory the app's function proposes.
#[derive(Debug, Clone)]
pub struct SynthesizedMemory {
    /// Its type.
    pub memory_type: MemoryType,
    /// Its text.
    pub content: String,
    /// Files it concerns.
    pub related_files: Vec<String>,
    /// 0..1 (default 0.7, at most 0.9: it still needs review).
    pub confidence: Option<f64>,
}

/// The app's synthesis function.
pub type SynthesizeFn = Arc<
    dyn Fn(SynthesisRequest) -> BoxFuture<'static, Result<Vec<SynthesizedMemory>>> + Send + Sync,
>;

/// One call's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthesisCall {
    /// Which mode.
    pub mode: SynthesisMode,
    /// What it was about.
    pub subject: String,
    /// Sessions behind it.
    pub sessions: u32,
    /// The memories stored.
    pub memories: Vec<Memory>,
    /// Proposals dropped (not novel, empty, over the count).
    pub dropped: u32,
    /// Why the call failed (it is retried at the next run), if it did.
    pub error: Option<String>,
}

/// Calls the app's function with a deadline.
async fn call(
    synthesize: &SynthesizeFn,
    request: SynthesisRequest,
) -> Result<Vec<SynthesizedMemory>> {
    match tokio::time::timeout(CALL_TIMEOUT, synthesize(request)).await {
        Ok(answer) => answer,
        Err(_) => Err(Error::Callback(format!(
            "synthesize did not answer within {} s",
            CALL_TIMEOUT.as_secs()
        ))),
    }
}

/// Calls the function for `request` and stores what it proposes, with a log row for
/// `trigger` when given; a failed call is reported, not raised.
pub(crate) async fn run_one(
    ctx: &Ctx<'_>,
    synthesize: &SynthesizeFn,
    request: SynthesisRequest,
    session_id: Option<&str>,
    trigger: Option<u32>,
) -> Result<SynthesisCall> {
    let mut report = SynthesisCall {
        mode: request.mode,
        subject: request.subject.clone(),
        sessions: request.sessions,
        memories: Vec::new(),
        dropped: 0,
        error: None,
    };
    let proposals = match call(synthesize, request.clone()).await {
        Ok(p) => p,
        Err(e) => {
            report.error = Some(format!("{}: {e}", e.code()));
            return Ok(report);
        }
    };
    let total = proposals.len();
    let mut inputs = Vec::new();
    for p in proposals.into_iter().take(request.max_memories as usize) {
        let content = p.content.trim();
        if content.is_empty() || !novel(ctx, p.memory_type, content).await? {
            continue;
        }
        let mut input = RememberInput::new(p.memory_type, content);
        input.confidence = Some(p.confidence.unwrap_or(0.7).clamp(0.05, 0.9));
        input.related_files = p
            .related_files
            .iter()
            .map(|f| relative_path(f, ctx.project_root))
            .filter(|f| !f.is_empty() && !is_outside(f))
            .collect();
        input.related_modules = request.modules.clone();
        input.source = Some(MemorySource::ObserverInferred);
        input.needs_review = Some(true);
        input.session_id = session_id.map(str::to_owned);
        input.tags = vec![
            "observer".into(),
            "synthesized".into(),
            format!("synthesis:{}", request.mode.as_str()),
        ];
        input.metadata = Some(serde_json::json!({
            "synthesis": request.mode.as_str(),
            "subject": request.subject,
        }));
        inputs.push(input);
    }
    let kept = inputs.len();
    let batch = memory::prepare_batch(ctx, inputs)?;
    let mut conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let stored = memory::remember_in(ctx, &mut conn, &tx, batch).await?;
    if let Some(trigger) = trigger {
        tx.execute(
            "INSERT OR REPLACE INTO observer_synthesis_log(project_id, subject, trigger_count,
               synthesized_at, memories_generated) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                ctx.project_id,
                request.subject.as_str(),
                i64::from(trigger),
                ctx.clock.now_ms(),
                stored.len() as i64
            ],
        )
        .await
        .ctx("logging a synthesis")?;
    }
    tx.commit().await.ctx("storing synthesized memories")?;
    report.dropped = (total - kept) as u32;
    report.memories = stored.into_iter().map(|r| r.memory).collect();
    Ok(report)
}

/// Whether no active memory of the type already says `content`.
async fn novel(ctx: &Ctx<'_>, memory_type: MemoryType, content: &str) -> Result<bool> {
    let mut reader = ctx.store.reader().await;
    let known = reader
        .query_cached(
            "SELECT content FROM memories
             WHERE project_id = ?1 AND type = ?2 AND deprecated = 0
             ORDER BY created_at DESC LIMIT 100",
            params![ctx.project_id, memory_type.as_str()],
            |row| row.get::<String>(0).ctx("reading known memories"),
        )
        .await?;
    let known: Vec<Vec<u64>> = known.iter().map(|t| super::promote::words(t)).collect();
    Ok(super::promote::is_novel(content, &known))
}

/// The JSON answer format every prompt asks for.
const ANSWER_FORMAT: &str = "Format: JSON [{ \"type\": \"...\", \"content\": \"...\", \
     \"relatedFiles\": [...], \"confidence\": 0.0-1.0 }]";

/// The request for a finalized session's promoted signals.
pub(crate) fn session_request(
    session_id: &str,
    module: Option<&str>,
    signals: Vec<SignalSummary>,
) -> SynthesisRequest {
    let mut prompt = format!(
        "You are reviewing what an observer noticed in one coding-agent session{}.\n\n\
         Raw signals:\n",
        module
            .map(|m| format!(" on the \"{m}\" module"))
            .unwrap_or_default()
    );
    for s in &signals {
        prompt.push_str(&format!(
            "- [{}] {} ({} sessions)\n",
            s.signal, s.content, s.sessions
        ));
    }
    prompt.push_str(
        "\nRewrite what is worth keeping as at most 3 memories of 1-3 sentences each, for a \
         future agent working in this codebase. Omit the obvious.\n",
    );
    prompt.push_str(ANSWER_FORMAT);
    SynthesisRequest {
        mode: SynthesisMode::Session,
        subject: session_id.to_owned(),
        modules: module.map(|m| vec![m.to_owned()]).unwrap_or_default(),
        sessions: 1,
        signals,
        prompt,
        max_memories: 3,
    }
}

/// The statistics of `signal` whose key starts with `prefix`, strongest first.
async fn strongest(
    ctx: &Ctx<'_>,
    signal: &str,
    prefix: &str,
    min_sessions: u32,
    limit: usize,
) -> Result<Vec<SignalSummary>> {
    // A key range on the primary key: `src/auth/` .. `src/auth0` (the next byte after `/`).
    let mut end = prefix.to_owned();
    if let Some(last) = end.pop() {
        end.push(char::from_u32(last as u32 + 1).unwrap_or(char::MAX));
    } else {
        end.push(char::MAX);
    }
    let mut reader = ctx.store.reader().await;
    let mut rows = reader
        .query_cached(
            "SELECT key, session_count, content FROM observer_signal_counts
             WHERE project_id = ?1 AND signal = ?2 AND key >= ?3 AND key < ?4
               AND session_count >= ?5",
            params![ctx.project_id, signal, prefix, end, i64::from(min_sessions)],
            |row| {
                Ok(SignalSummary {
                    signal: signal.to_owned(),
                    key: row.get::<String>(0).ctx("reading statistics")?,
                    sessions: row.get::<i64>(1).ctx("reading statistics")? as u32,
                    content: row.get::<String>(2).ctx("reading statistics")?,
                })
            },
        )
        .await?;
    rows.sort_by(|a, b| b.sessions.cmp(&a.sessions).then_with(|| a.key.cmp(&b.key)));
    rows.truncate(limit);
    Ok(rows)
}

/// Modules due for a threshold synthesis: (module, sessions, threshold), most sessions first.
async fn due_modules(ctx: &Ctx<'_>) -> Result<Vec<(String, u32, u32)>> {
    let mut reader = ctx.store.reader().await;
    let modules = reader
        .query_cached(
            "SELECT c.key, c.session_count,
                    (SELECT max(trigger_count) FROM observer_synthesis_log l
                     WHERE l.project_id = c.project_id AND l.subject = c.key)
             FROM observer_signal_counts c
             WHERE c.project_id = ?1 AND c.signal = 'session_module' AND c.session_count >= ?2",
            params![ctx.project_id, i64::from(THRESHOLDS[0])],
            |row| {
                Ok((
                    row.get::<String>(0).ctx("reading module counts")?,
                    row.get::<i64>(1).ctx("reading module counts")? as u32,
                    row.get::<Option<i64>>(2)
                        .ctx("reading module counts")?
                        .unwrap_or(0) as u32,
                ))
            },
        )
        .await?;
    let mut due: Vec<(String, u32, u32)> = modules
        .into_iter()
        .filter_map(|(module, sessions, done)| {
            let reached = THRESHOLDS.iter().rev().find(|&&t| t <= sessions)?;
            (*reached > done).then_some((module, sessions, *reached))
        })
        .collect();
    due.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(due)
}

/// The seed's threshold prompt for a module.
fn module_request(module: &str, sessions: u32, signals: Vec<SignalSummary>) -> SynthesisRequest {
    let section = |title: &str, signal: &str, render: &dyn Fn(&SignalSummary) -> String| {
        let lines: Vec<String> = signals
            .iter()
            .filter(|s| s.signal == signal)
            .map(render)
            .collect();
        format!(
            "{title}:\n{}\n",
            if lines.is_empty() {
                "- (none)".into()
            } else {
                lines.join("\n")
            }
        )
    };
    let prompt = format!(
        "You are analyzing {sessions} agent sessions on the \"{module}\" module.\n\n{}\n{}\n{}\n\
         Identify (max 5 memories, omit obvious things):\n\
         1. Files to prefetch (prefetch_pattern)\n\
         2. Non-obvious file coupling (causal_dependency or gotcha)\n\
         3. Recurring errors (error_pattern)\n\
         4. Non-obvious module purpose (module_insight)\n\n{ANSWER_FORMAT}",
        section("File access patterns", "file_access", &|s| format!(
            "- {}: {} sessions",
            s.key, s.sessions
        )),
        section("Co-accessed pairs", "co_access", &|s| format!(
            "- {}: {} sessions",
            s.key.replace('\n', " + "),
            s.sessions
        )),
        section("Recurring errors", "error_retry", &|s| format!(
            "- {}: {} sessions",
            s.content, s.sessions
        )),
    );
    SynthesisRequest {
        mode: SynthesisMode::Threshold,
        subject: module.to_owned(),
        modules: vec![module.to_owned()],
        sessions,
        signals,
        prompt,
        max_memories: 5,
    }
}

/// Runs mode 2 (threshold) or 3 (scheduled) for at most `limit` subjects.
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    mode: SynthesisMode,
    synthesize: &SynthesizeFn,
    limit: usize,
) -> Result<Vec<SynthesisCall>> {
    let mut calls = Vec::new();
    match mode {
        SynthesisMode::Session => return Err(Error::invalid(
            "session synthesis runs in finalize(); synthesize() runs 'threshold' or 'scheduled'",
        )),
        SynthesisMode::Threshold => {
            for (module, sessions, threshold) in due_modules(ctx).await?.into_iter().take(limit) {
                let mut signals = strongest(ctx, "file_access", &module, 2, 10).await?;
                signals.retain(|s| module_of(&s.key).as_deref() == Some(module.as_str()));
                signals.extend(strongest(ctx, "co_access", &module, 2, 10).await?);
                let errors = strongest(ctx, "error_retry", "", 2, 200).await?;
                signals.extend(
                    errors
                        .into_iter()
                        .filter(|e| e.content.contains(module.as_str()))
                        .take(10),
                );
                let request = module_request(&module, sessions, signals);
                calls.push(run_one(ctx, synthesize, request, None, Some(threshold)).await?);
            }
        }
        SynthesisMode::Scheduled => {
            for (pair, sessions, signals) in cross_module_pairs(ctx).await?.into_iter().take(limit)
            {
                let modules: Vec<String> = pair.split(" + ").map(str::to_owned).collect();
                let mut prompt = format!(
                    "Agents working in \"{}\" and \"{}\" keep using files of both together \
                     ({sessions} sessions).\n\nFiles used together:\n",
                    modules[0], modules[1]
                );
                for s in &signals {
                    prompt.push_str(&format!(
                        "- {}: {} sessions\n",
                        s.key.replace('\n', " + "),
                        s.sessions
                    ));
                }
                prompt.push_str(
                    "\nIf the coupling is real and not obvious, describe it as at most 2 memories \
                     (causal_dependency or gotcha).\n",
                );
                prompt.push_str(ANSWER_FORMAT);
                let request = SynthesisRequest {
                    mode,
                    subject: pair,
                    modules,
                    sessions,
                    signals,
                    prompt,
                    max_memories: 2,
                };
                calls.push(run_one(ctx, synthesize, request, None, Some(0)).await?);
            }
        }
    }
    Ok(calls)
}

/// Pairs of modules whose files were used together in at least
/// [`SCHEDULED_MIN_SESSIONS`] sessions and not synthesized yet: (`a + b`, the strongest
/// pair's sessions, its file pairs), strongest first. (The co-access memory of a pair, if
/// promoted, says that the files go together; the synthesis is asked why.)
async fn cross_module_pairs(ctx: &Ctx<'_>) -> Result<Vec<(String, u32, Vec<SignalSummary>)>> {
    let mut reader = ctx.store.reader().await;
    let pairs = reader
        .query_cached(
            "SELECT key, session_count, content FROM observer_signal_counts
             WHERE project_id = ?1 AND signal = 'co_access' AND session_count >= ?2",
            params![ctx.project_id, i64::from(SCHEDULED_MIN_SESSIONS)],
            |row| {
                Ok(SignalSummary {
                    signal: "co_access".into(),
                    key: row.get::<String>(0).ctx("reading co-access")?,
                    sessions: row.get::<i64>(1).ctx("reading co-access")? as u32,
                    content: row.get::<String>(2).ctx("reading co-access")?,
                })
            },
        )
        .await?;
    let done: std::collections::HashSet<String> = reader
        .query_cached(
            "SELECT subject FROM observer_synthesis_log WHERE project_id = ?1 AND trigger_count = 0",
            params![ctx.project_id],
            |row| row.get::<String>(0).ctx("reading the synthesis log"),
        )
        .await?
        .into_iter()
        .collect();
    let mut clusters: std::collections::BTreeMap<String, (u32, Vec<SignalSummary>)> =
        Default::default();
    for p in pairs {
        let Some((a, b)) = p.key.split_once('\n') else {
            continue;
        };
        let (Some(ma), Some(mb)) = (module_of(a), module_of(b)) else {
            continue;
        };
        if ma == mb {
            continue;
        }
        let subject = if ma < mb {
            format!("{ma} + {mb}")
        } else {
            format!("{mb} + {ma}")
        };
        if done.contains(&subject) {
            continue;
        }
        let entry = clusters.entry(subject).or_default();
        entry.0 = entry.0.max(p.sessions);
        entry.1.push(p);
    }
    let mut out: Vec<(String, u32, Vec<SignalSummary>)> = clusters
        .into_iter()
        .map(|(subject, (sessions, mut signals))| {
            signals.sort_by_key(|s| std::cmp::Reverse(s.sessions));
            signals.truncate(10);
            (subject, sessions, signals)
        })
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}
