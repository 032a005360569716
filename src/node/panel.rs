//! The `Engram` class's memory-panel methods: session summaries and ends, trust
//! progression, health, module coverage and memory gaps.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{optional_object, required};
use super::class::Engram;
use super::error::promise;
use super::json::{promise_json, JsonText};
use super::panel_types::{
    Health, HealthOptions, MemoryGap, MemoryGapsOptions, ModuleCoverage, SessionSummary, TrustState,
};
use super::strict::Count;
use crate::lifecycle::TrustLevel;

#[napi]
impl Engram {
    /// The summary of a session so far: the memories the agent was given (`recall` with
    /// `trackAccess` and `sessionId`, `markUsed` with `sessionId`), the memories it learned
    /// (created with that `sessionId`), each with its citation chip and id for
    /// confirm/edit/reject, and an estimate of the tokens memory saved.
    ///
    /// ```ts
    /// const s = await memory.sessionSummary('sess-42')
    /// console.log(`Memory saved ~${s.tokensSavedEstimate} tokens`, s.learned.map((l) => l.citation))
    /// ```
    #[napi(
        ts_args_type = "sessionId: string",
        ts_return_type = "Promise<SessionSummary>"
    )]
    pub fn session_summary<'env>(
        &self,
        env: &'env Env,
        session_id: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let session_id: String = arg!(env, required(env, &session_id, "sessionId"));
        promise_json(
            env,
            async move { handle.session_summary(&session_id).await },
            SessionSummary::from,
        )
    }

    /// Ends a session: records what it used and learned, lets the project's trust level
    /// progress (`previousTrustLevel` is set when it rose), and returns the summary. Ending
    /// a session again refreshes its counts.
    #[napi(
        ts_args_type = "sessionId: string",
        ts_return_type = "Promise<SessionSummary>"
    )]
    pub fn end_session<'env>(
        &self,
        env: &'env Env,
        session_id: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let session_id: String = arg!(env, required(env, &session_id, "sessionId"));
        promise_json(
            env,
            async move { handle.end_session(&session_id).await },
            SessionSummary::from,
        )
    }

    /// Where the project stands in trust progression: its level, the injection threshold
    /// that goes with it, the evidence for the next level, and any pending offer to step
    /// down.
    #[napi(ts_return_type = "Promise<TrustState>")]
    pub fn trust<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        promise_json(env, async move { handle.trust().await }, TrustState::from)
    }

    /// Sets the project's trust level (1..=4) by the user's choice: the only way to level 4
    /// (autonomous), and how an offer to step down is accepted. Clears any pending offer.
    #[napi(
        ts_args_type = "level: 1 | 2 | 3 | 4",
        ts_return_type = "Promise<TrustState>"
    )]
    pub fn set_trust_level<'env>(
        &self,
        env: &'env Env,
        level: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let level: Count = arg!(env, required(env, &level, "level"));
        let level = level.get();
        let level = arg!(env, TrustLevel::from_number(level));
        promise_json(
            env,
            async move { handle.set_trust_level(level).await },
            TrustState::from,
        )
    }

    /// Dismisses a pending offer to step the trust level down; the level stays.
    #[napi(ts_return_type = "Promise<TrustState>")]
    pub fn dismiss_trust_offer<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        promise_json(
            env,
            async move { handle.dismiss_trust_offer().await },
            TrustState::from,
        )
    }

    /// Health of the project's memories for the panel's dashboard: counts (total, active in
    /// the last 30 days, needs review, stale, disputed...) and a 0-100 score whose formula is
    /// in the README. With `options.sessionId`, that session's tokens-saved estimate.
    #[napi(
        ts_args_type = "options?: HealthOptions",
        ts_return_type = "Promise<Health>"
    )]
    pub fn health<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: Option<HealthOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let session_id = options.and_then(|o| o.session_id);
        promise_json(
            env,
            async move { handle.health(session_id.as_deref()).await },
            Health::from,
        )
    }

    /// How well memories cover each module of indexed code (files with an active memory
    /// attached), least covered first: the panel's progress bars.
    #[napi(ts_return_type = "Promise<ModuleCoverage[]>")]
    pub fn module_coverage<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        promise_json(env, async move { handle.module_coverage().await }, |v| {
            v.into_iter().map(ModuleCoverage::from).collect::<Vec<_>>()
        })
    }

    /// Memory gaps: questions an agent's recall (`trackAccess`) found no memory for, most
    /// asked first; each closes by itself once a later recall of it finds memories.
    #[napi(
        ts_args_type = "options?: MemoryGapsOptions",
        ts_return_type = "Promise<MemoryGap[]>"
    )]
    pub fn memory_gaps<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        let options: Option<MemoryGapsOptions> =
            arg!(env, optional_object(env, options.as_ref(), "options"));
        let (include_resolved, limit) = options.map_or((false, None), |o| {
            (o.include_resolved.unwrap_or(false), o.limit.map(u32::from))
        });
        promise_json(
            env,
            async move { handle.memory_gaps(include_resolved, limit).await },
            |v| v.into_iter().map(MemoryGap::from).collect::<Vec<_>>(),
        )
    }

    /// Closes a memory gap by hand (a person or an extraction answered it).
    #[napi(ts_args_type = "id: string", ts_return_type = "Promise<void>")]
    pub fn resolve_gap<'env>(
        &self,
        env: &'env Env,
        id: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let handle = arg!(env, self.handle());
        let id: String = arg!(env, required(env, &id, "id"));
        promise(env, async move { handle.resolve_gap(&id).await }, |()| ())
    }
}
