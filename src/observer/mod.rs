//! The MemoryObserver: watches what agents do and turns it into memories (seed sections 4,
//! 5, 11, 12, 19).
//!
//! A [`Session`] holds one agent session's scratchpad. [`Session::observe`] is synchronous,
//! O(1) per message and never touches the database; it can be called from any thread that
//! holds the session (the engine's registry gives every handle on the same engine, in the
//! main thread or a worker, the same session for the same id). `finalize` runs the signal
//! detectors (`detect.rs`) and the promotion pipeline (`promote.rs`) and writes everything in
//! one transaction.
//!
//! Parts: the messages (`protocol.rs`), tool families (`tools.rs`), error fingerprints
//! (`fingerprint.rs`), the agent's words (`language.rs`), the scratchpad (`scratchpad.rs`),
//! the 17 signal classes and the signal-value formula (`signals.rs`), A/B groups (`ab.rs`),
//! calibrated step limits (`calibration.rs`), merging parallel agents' pads (`merge.rs`),
//! checkpoints to resume after a crash (`checkpoint.rs`), synthesis with the app's LLM
//! (`synthesis.rs`).
//!
//! Tables (home `main`, migration 009): `observer_signal_counts(project_id, signal, key)`: in
//! how many sessions each signal saw each key (a file, a pair, an error fingerprint, a module
//! and command...), the running sum of a calibration measure, and the memory it was promoted
//! to. One table for all 17 signals (the seed has one per signal) because frequency,
//! calibration means and synthesis summaries all read the same "how often, and what came of
//! it"; the pseudo-signal `session_module` counts sessions per module (prefetch coverage).
//! `observer_signal_record(project_id, signal)`: memories promoted per signal and how many were
//! later forgotten, kept by triggers on `memories` (so every way of forgetting counts): the
//! measured false-positive rate in the signal value. `observer_sessions`: one row per
//! finalized session, its A/B group, outcome, metrics and promoted ids.
//! `observer_synthesis_log(project_id, subject, trigger_count)`: which module (or pair) the
//! app's LLM synthesized at which session-count threshold, so each trigger calls it once.
//! Scratchpad checkpoints live in the `code` home (`observer_checkpoints`): crash recovery is
//! device-local and never synced.

pub mod ab;
pub mod calibration;
pub mod checkpoint;
pub mod detect;
pub mod fingerprint;
pub mod language;
pub mod merge;
pub mod promote;
pub mod protocol;
pub mod scratchpad;
pub mod signals;
pub mod synthesis;
pub mod tools;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

pub use ab::AbGroup;
pub use calibration::StepLimit;
pub use checkpoint::Checkpoint;
pub use promote::{CandidateReport, Decision, Finalized, SessionMetrics};
pub use protocol::{
    Message, RecordEntry, SessionOptions, SessionOutcome, SessionType, ToolCall, ToolResult,
};
pub use scratchpad::{EarlyTrigger, Scratchpad};
pub use signals::Signal;
pub use synthesis::{
    SignalSummary, SynthesisCall, SynthesisMode, SynthesisRequest, SynthesizeFn, SynthesizedMemory,
};

use crate::clock::Clock;
use crate::error::{Error, Result};

/// One observed agent session.
#[derive(Debug)]
pub struct Session {
    project_id: Arc<str>,
    session_id: String,
    pad: Mutex<Option<Scratchpad>>,
    clock: Arc<dyn Clock>,
    root: Option<Arc<Path>>,
}

/// A summary of a session's scratchpad so far.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSnapshot {
    /// The session.
    pub session_id: String,
    /// Its type.
    pub session_type: SessionType,
    /// Its A/B group.
    pub ab_group: AbGroup,
    /// Messages observed.
    pub events: u64,
    /// The highest step seen.
    pub current_step: u32,
    /// Tool calls in the log (after eviction).
    pub tool_calls: u32,
    /// Distinct files read or changed.
    pub files_touched: u32,
    /// Distinct files changed.
    pub files_edited: u32,
    /// Errors (all occurrences).
    pub errors: u32,
    /// Self-corrections said.
    pub self_corrections: u32,
    /// Entries the agent recorded.
    pub recorded: u32,
    /// Early triggers that fired, in order.
    pub early_triggers: Vec<EarlyTrigger>,
    /// The first step with a web fetch or search, if any.
    pub external_step: Option<u32>,
    /// Bytes the scratchpad holds.
    pub bytes: usize,
    /// Its cap.
    pub max_bytes: usize,
    /// Calls dropped to stay under the cap.
    pub evicted_calls: u64,
}

impl Session {
    fn pad(&self) -> Result<MutexGuard<'_, Option<Scratchpad>>> {
        let guard = self.pad.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            return Err(Error::Conflict("the session was finalized".into()));
        }
        Ok(guard)
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.session_id
    }

    /// Records one message: O(1), no I/O. Fails only after `finalize`.
    pub fn observe(&self, message: Message) -> Result<()> {
        let now = self.clock.now_ms();
        let mut guard = self.pad()?;
        let pad = guard.as_mut().expect("checked by pad()");
        pad.observe(message, now, self.root.as_deref());
        Ok(())
    }

    /// Records several messages under one lock.
    pub fn observe_all(&self, messages: impl IntoIterator<Item = Message>) -> Result<()> {
        let mut guard = self.pad()?;
        let pad = guard.as_mut().expect("checked by pad()");
        for message in messages {
            pad.observe(message, self.clock.now_ms(), self.root.as_deref());
        }
        Ok(())
    }

    /// The session's state so far.
    pub fn snapshot(&self) -> Result<SessionSnapshot> {
        let guard = self.pad()?;
        let pad = guard.as_ref().expect("checked by pad()");
        let a = &pad.analytics;
        Ok(SessionSnapshot {
            session_id: pad.session_id.clone(),
            session_type: pad.session_type,
            ab_group: ab::assign(&pad.session_id, &self.project_id),
            events: pad.events,
            current_step: a.current_step,
            tool_calls: pad.calls.len() as u32,
            files_touched: a.files.len() as u32,
            files_edited: a.edit_set.len() as u32,
            errors: pad.errors.iter().map(|e| e.count).sum(),
            self_corrections: a.self_corrections,
            recorded: pad.recorded.len() as u32,
            early_triggers: pad.early.clone(),
            external_step: pad.external_step,
            bytes: pad.bytes(),
            max_bytes: pad.max_bytes,
            evicted_calls: pad.evicted_calls,
        })
    }

    /// What step injection needs from the session: its recent tool calls as the decider
    /// names them, the memories it showed, the entries recorded since the last step.
    pub(crate) fn injection_context(&self, step: u32) -> Result<PendingInjection> {
        let guard = self.pad()?;
        let pad = guard.as_ref().expect("checked by pad()");
        let start = pad
            .calls
            .len()
            .saturating_sub(crate::retrieval::injection::MAX_TOOL_CALLS);
        let tool_calls = pad.calls[start..]
            .iter()
            .filter_map(|c| {
                let (tool, file_path, pattern) = match c.kind {
                    tools::ToolKind::Read => ("Read", pad.project_file(c.target), None),
                    tools::ToolKind::Edit => ("Edit", pad.project_file(c.target), None),
                    tools::ToolKind::Write => ("Write", pad.project_file(c.target), None),
                    tools::ToolKind::Grep => ("Grep", None, Some(pad.texts.get(c.target))),
                    tools::ToolKind::Glob => ("Glob", None, Some(pad.texts.get(c.target))),
                    _ => return None,
                };
                Some(crate::retrieval::injection::ToolCall {
                    tool: tool.to_owned(),
                    file_path: file_path.map(str::to_owned),
                    pattern: pattern.filter(|p| !p.is_empty()).map(str::to_owned),
                })
            })
            .collect();
        // The seed's getNewSince(step - 1): entries of the previous step on, not shown yet.
        let notes = pad.recorded[pad.reflected.min(pad.recorded.len())..]
            .iter()
            .filter(|r| r.step + 1 >= step)
            .map(|r| r.content.clone())
            .collect();
        Ok(PendingInjection {
            context: crate::retrieval::injection::StepContext {
                tool_calls,
                injected_ids: pad.injected.clone(),
                session_id: Some(pad.session_id.clone()),
            },
            notes,
            notes_through: pad.recorded.len(),
            group: ab::assign(&pad.session_id, &self.project_id),
        })
    }

    /// Records what step injection showed.
    pub(crate) fn injected(&self, ids: impl Iterator<Item = String>, notes_through: usize) {
        let mut guard = self.pad.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pad) = guard.as_mut() {
            pad.injected.extend(ids);
            pad.reflected = pad.reflected.max(notes_through);
        }
    }

    /// A copy of the scratchpad (for a checkpoint).
    fn copy(&self) -> Result<Scratchpad> {
        let guard = self.pad()?;
        Ok(guard.as_ref().expect("checked by pad()").clone())
    }

    /// Takes the scratchpad out for finalizing (later calls fail).
    fn take(&self) -> Result<Scratchpad> {
        let mut guard = self.pad()?;
        Ok(guard.take().expect("checked by pad()"))
    }

    /// Puts a pad back after a failed finalize, so that nothing observed is lost.
    fn restore(&self, pad: Scratchpad) {
        *self.pad.lock().unwrap_or_else(|p| p.into_inner()) = Some(pad);
    }
}

/// (project, session id).
type SessionKey = (Arc<str>, String);

/// What [`Session::injection_context`] hands the decider.
pub(crate) struct PendingInjection {
    pub context: crate::retrieval::injection::StepContext,
    pub notes: Vec<String>,
    pub notes_through: usize,
    pub group: AbGroup,
}

/// The engine's open sessions, by (project, session id).
#[derive(Debug, Default)]
pub struct Sessions(Mutex<HashMap<SessionKey, Arc<Session>>>);

impl Sessions {
    /// Opens a session, or joins the open one with the same id (options then come from the
    /// first `open`).
    pub(crate) fn open(
        &self,
        project_id: &Arc<str>,
        options: &SessionOptions,
        clock: Arc<dyn Clock>,
        root: Option<Arc<Path>>,
    ) -> Result<Arc<Session>> {
        options.validate()?;
        let key = (project_id.clone(), options.session_id.trim().to_owned());
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = open.get(&key) {
            return Ok(session.clone());
        }
        let pad = Scratchpad::new(options, clock.now_ms());
        let session = Arc::new(Session {
            project_id: project_id.clone(),
            session_id: pad.session_id.clone(),
            pad: Mutex::new(Some(pad)),
            clock,
            root,
        });
        open.insert(key, session.clone());
        Ok(session)
    }

    /// Merges the open sessions `source_ids` of a project (parallel sub-agents of one task)
    /// into a new open session `options.session_id`; the sources end (their pads move into the
    /// merged one). Fails with `ENGRAM_NOT_FOUND` for an id that is not open,
    /// `ENGRAM_CONFLICT` when the new id is open, `ENGRAM_INVALID_ARG` for fewer than two
    /// distinct sources; nothing changes on failure.
    pub(crate) fn merge(
        &self,
        project_id: &Arc<str>,
        source_ids: &[String],
        options: &SessionOptions,
        clock: Arc<dyn Clock>,
        root: Option<Arc<Path>>,
    ) -> Result<Arc<Session>> {
        options.validate()?;
        let mut ids: Vec<&str> = source_ids.iter().map(|s| s.trim()).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() < 2 {
            return Err(Error::invalid(
                "mergeSessions needs at least two distinct session ids",
            ));
        }
        let target = (project_id.clone(), options.session_id.trim().to_owned());
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if open.contains_key(&target) {
            return Err(Error::Conflict(format!(
                "session {:?} is already open",
                target.1
            )));
        }
        let sources: Vec<Arc<Session>> = ids
            .iter()
            .map(|id| {
                open.get(&(project_id.clone(), (*id).to_owned()))
                    .cloned()
                    .ok_or_else(|| Error::not_found("session", *id))
            })
            .collect::<Result<_>>()?;
        let mut pads = Vec::with_capacity(sources.len());
        for source in &sources {
            match source.take() {
                Ok(pad) => pads.push(pad),
                Err(e) => {
                    for (source, pad) in sources.iter().zip(pads) {
                        source.restore(pad);
                    }
                    return Err(e);
                }
            }
        }
        let merged = merge::merge(pads, options, clock.now_ms());
        for id in &ids {
            open.remove(&(project_id.clone(), (*id).to_owned()));
        }
        let session = Arc::new(Session {
            project_id: project_id.clone(),
            session_id: merged.session_id.clone(),
            pad: Mutex::new(Some(merged)),
            clock,
            root,
        });
        open.insert(target, session.clone());
        Ok(session)
    }

    /// The open session `session_id` of a project.
    pub(crate) fn get(&self, project_id: &Arc<str>, session_id: &str) -> Option<Arc<Session>> {
        let open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&(project_id.clone(), session_id.trim().to_owned()))
            .cloned()
    }

    /// Registers a pad restored from a checkpoint (or returns the session opened meanwhile).
    fn insert_restored(
        &self,
        project_id: &Arc<str>,
        pad: Scratchpad,
        clock: Arc<dyn Clock>,
        root: Option<Arc<Path>>,
    ) -> Arc<Session> {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        open.entry((project_id.clone(), pad.session_id.clone()))
            .or_insert_with(|| {
                Arc::new(Session {
                    project_id: project_id.clone(),
                    session_id: pad.session_id.clone(),
                    pad: Mutex::new(Some(pad)),
                    clock,
                    root,
                })
            })
            .clone()
    }

    fn close(&self, project_id: &Arc<str>, session_id: &str) {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        open.remove(&(project_id.clone(), session_id.to_owned()));
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Finalizes `session`: detection, promotion, one transaction. On failure the scratchpad is
/// put back, so the call can be retried.
pub(crate) async fn finalize(
    ctx: &crate::memory::Ctx<'_>,
    sessions: &Sessions,
    session: &Session,
    outcome: Option<SessionOutcome>,
    synthesize: Option<&SynthesizeFn>,
) -> Result<Finalized> {
    let pad = session.take()?;
    let outcome = outcome.or(pad.outcome).unwrap_or(SessionOutcome::Success);
    match promote::finalize(ctx, &pad, outcome, synthesize).await {
        Ok(done) => {
            sessions.close(&session.project_id, &session.session_id);
            Ok(done)
        }
        Err(e) => {
            session.restore(pad);
            Err(e)
        }
    }
}
