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
//! the 17 signal classes and the signal-value formula (`signals.rs`), A/B groups (`ab.rs`).

pub mod ab;
pub mod detect;
pub mod fingerprint;
pub mod language;
pub mod promote;
pub mod protocol;
pub mod scratchpad;
pub mod signals;
pub mod tools;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

pub use ab::AbGroup;
pub use promote::{CandidateReport, Decision, Finalized, SessionMetrics};
pub use protocol::{
    Message, RecordEntry, SessionOptions, SessionOutcome, SessionType, ToolCall, ToolResult,
};
pub use scratchpad::{EarlyTrigger, Scratchpad};
pub use signals::Signal;

use crate::clock::Clock;
use crate::error::{Error, Result};

/// One observed agent session.
#[derive(Debug)]
pub struct Session {
    project_id: Arc<str>,
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
            pad: Mutex::new(Some(pad)),
            clock,
            root,
        });
        open.insert(key, session.clone());
        Ok(session)
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
) -> Result<Finalized> {
    let pad = session.take()?;
    let outcome = outcome.or(pad.outcome).unwrap_or(SessionOutcome::Success);
    match promote::finalize(ctx, &pad, outcome).await {
        Ok(done) => {
            sessions.close(&session.project_id, &pad.session_id);
            Ok(done)
        }
        Err(e) => {
            session.restore(pad);
            Err(e)
        }
    }
}
