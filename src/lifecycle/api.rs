//! The lifecycle methods of [`Engram`]: thin wrappers that give each operation the handle's
//! context (kept here so that `engram.rs` stays the core API's table of contents).

use std::sync::atomic::AtomicBool;

use super::{
    agent_export, agent_import, consolidate, dispute, events, feedback, gaps, health, links, prune,
    session, transfer, trust,
};
use super::{
    AgentExport, AgentExportOptions, AgentImportOptions, AgentImportReport, ConsolidateOptions,
    ConsolidateReport, DisputeOutcome, EventNote, ExportFormat, ExportOptions, Exported,
    FeedbackInput, FeedbackOutcome, Health, ImportReport, MemoryEvent, MemoryGap, ModuleCoverage,
    OnConflict, PruneOptions, PruneReport, SessionSummary, TrustLevel, TrustState,
};
use crate::error::Result;
use crate::memory::{self, ListFilter, Memory, MemoryPatch};
use crate::Engram;

impl Engram {
    /// Feedback on a memory: `helpful`, `wrong`, or a correction (a new memory that
    /// supersedes it). Recorded in the memory's event log.
    pub async fn feedback(&self, id: &str, input: FeedbackInput) -> Result<FeedbackOutcome> {
        let out = feedback::feedback(&self.ctx(), id, input).await?;
        self.schedule_embedding();
        Ok(out)
    }

    /// The review queue: active memories waiting for a person, newest first.
    pub async fn review_queue(
        &self,
        limit: Option<u32>,
        offset: Option<u32>,
    ) -> Result<Vec<Memory>> {
        let filter = ListFilter {
            needs_review: Some(true),
            limit,
            offset,
            ..ListFilter::default()
        };
        memory::list(&self.ctx(), &filter).await
    }

    /// Confirms a memory (after applying `patch`, an edit, if given): no longer waiting for
    /// review, verified by a person.
    pub async fn confirm(
        &self,
        id: &str,
        patch: Option<MemoryPatch>,
        note: EventNote,
    ) -> Result<Memory> {
        let out = feedback::confirm(&self.ctx(), id, patch, note).await?;
        self.schedule_embedding();
        Ok(out)
    }

    /// Rejects a memory in review: it is forgotten, with the reason in its history.
    pub async fn reject(&self, id: &str, note: EventNote) -> Result<Memory> {
        feedback::reject(&self.ctx(), id, note).await
    }

    /// Records that `newer` supersedes `older`; returns (older, newer) as they are now.
    pub async fn supersede(&self, older: &str, newer: &str) -> Result<(Memory, Memory)> {
        links::supersede(&self.ctx(), older, newer).await
    }

    /// Disputes a memory (the note's body says why); it is used at confidence x 0.8 until
    /// the dispute is resolved.
    pub async fn dispute(&self, id: &str, note: EventNote) -> Result<DisputeOutcome> {
        dispute::dispute(&self.ctx(), id, note).await
    }

    /// Adds a comment to a memory's thread.
    pub async fn comment(&self, id: &str, note: EventNote) -> Result<DisputeOutcome> {
        dispute::comment(&self.ctx(), id, note).await
    }

    /// Resolves a memory's open dispute.
    pub async fn resolve_dispute(&self, id: &str, note: EventNote) -> Result<DisputeOutcome> {
        dispute::resolve(&self.ctx(), id, note).await
    }

    /// A memory's event log (feedback, review, dispute thread), oldest first.
    pub async fn events(&self, id: &str) -> Result<Vec<MemoryEvent>> {
        memory::get(&self.ctx(), id).await?;
        events::of_memory(&self.ctx(), id).await
    }

    /// Counts memories of the project as used now (access count, last access, and the trust
    /// they earn by uncorrected use): for apps that put memories into a prompt themselves.
    /// `recall` with `trackAccess` does this for what it packs. Unknown ids are ignored.
    pub async fn mark_used(&self, ids: &[String], session_id: Option<&str>) -> Result<()> {
        let session_id = self.ctx().validator().opt_id("sessionId", session_id)?;
        let session_id = session_id.as_deref();
        memory::touch(&self.ctx(), ids, session_id).await
    }

    /// Runs the pruning job (see `lifecycle::prune`); `cancel` stops it between batches.
    pub async fn prune(&self, options: &PruneOptions, cancel: &AtomicBool) -> Result<PruneReport> {
        prune::prune(&self.ctx(), options, cancel).await
    }

    /// Exports the project's memories as lossless JSON (with history and events) or as
    /// readable, importable Markdown.
    pub async fn export_memories(&self, options: &ExportOptions) -> Result<Exported> {
        transfer::export(&self.ctx(), options).await
    }

    /// Imports an export into this project: JSON restores memories with their ids, history
    /// and events (`on_conflict` decides about ids already present); Markdown updates the
    /// memories it names and remembers the rest.
    pub async fn import_memories(
        &self,
        format: ExportFormat,
        text: &str,
        on_conflict: OnConflict,
    ) -> Result<ImportReport> {
        let report = match format {
            ExportFormat::Json => transfer::import_json(&self.ctx(), text, on_conflict).await?,
            ExportFormat::Markdown => transfer::import_markdown(&self.ctx(), text).await?,
        };
        self.schedule_embedding();
        Ok(report)
    }

    /// [`Engram::import_memories`] of the file at `path`, read off the async workers. Only a
    /// regular file of at most [`super::MAX_IMPORT_FILE_BYTES`] is read: a FIFO, device
    /// (`/dev/zero`) or directory fails with `ENGRAM_INVALID_ARG` at once, before it is
    /// opened, and so does a larger file (naming the limit).
    pub async fn import_memories_from_file(
        &self,
        format: ExportFormat,
        path: std::path::PathBuf,
        on_conflict: OnConflict,
    ) -> Result<ImportReport> {
        let text = tokio::task::spawn_blocking(move || transfer::read_import_file(&path))
            .await
            .map_err(|e| crate::Error::Internal(format!("reading the import file: {e}")))??;
        self.import_memories(format, &text, on_conflict).await
    }

    /// Deletes every memory of the project for good (account deletion): history, events,
    /// vectors and links included. Returns how many memories were deleted.
    pub async fn delete_all(&self) -> Result<u64> {
        transfer::delete_all(&self.ctx()).await
    }

    /// The summary of a session so far (what the agent was given, what it learned, the
    /// tokens-saved estimate), for the app's session-end panel.
    pub async fn session_summary(&self, session_id: &str) -> Result<SessionSummary> {
        session::summary(&self.ctx(), session_id).await
    }

    /// Ends a session: records what it used and learned, lets the project's trust level
    /// progress, and returns the summary (`previous_trust_level` set when the level rose).
    pub async fn end_session(&self, session_id: &str) -> Result<SessionSummary> {
        session::end(&self.ctx(), session_id).await
    }

    /// Where the project stands in trust progression.
    pub async fn trust(&self) -> Result<TrustState> {
        trust::state(&self.ctx()).await
    }

    /// Sets the project's trust level by the user's choice (the only way to level 4, and how
    /// an offer to step down is accepted).
    pub async fn set_trust_level(&self, level: TrustLevel) -> Result<TrustState> {
        trust::set_level(&self.ctx(), level).await
    }

    /// Dismisses a pending offer to step the trust level down.
    pub async fn dismiss_trust_offer(&self) -> Result<TrustState> {
        trust::dismiss_offer(&self.ctx()).await
    }

    /// Health counts and the 0-100 score (see `lifecycle::health`); with a session, its
    /// tokens-saved estimate too.
    pub async fn health(&self, session_id: Option<&str>) -> Result<Health> {
        health::health(&self.ctx(), session_id).await
    }

    /// Coverage of each module of indexed code by active memories, least covered first.
    pub async fn module_coverage(&self) -> Result<Vec<ModuleCoverage>> {
        health::module_coverage(&self.ctx()).await
    }

    /// Memory gaps: questions recall could not answer from memory, most asked first.
    pub async fn memory_gaps(
        &self,
        include_resolved: bool,
        limit: Option<u32>,
    ) -> Result<Vec<MemoryGap>> {
        gaps::list(&self.ctx(), include_resolved, limit).await
    }

    /// Closes a memory gap by hand.
    pub async fn resolve_gap(&self, id: &str) -> Result<()> {
        gaps::resolve(&self.ctx(), id).await
    }

    /// Imports the project's agent files (`CLAUDE.md`, `AGENTS.md`, `.cursorrules`, or the
    /// files named) as memories, reconciling them with the last import: see
    /// `lifecycle::agent_import`. Needs the project root.
    pub async fn import_agent_files(
        &self,
        options: &AgentImportOptions,
    ) -> Result<AgentImportReport> {
        let report = agent_import::import(&self.ctx(), options).await?;
        self.schedule_embedding();
        Ok(report)
    }

    /// Writes the hot tier into an agent file as engram's generated section (or, with
    /// `write: false`, returns the text it would have): see `lifecycle::agent_export`.
    pub async fn export_agent_file(&self, options: &AgentExportOptions) -> Result<AgentExport> {
        agent_export::export(&self.ctx(), options).await
    }

    /// Merges near-duplicate memories into the strongest of each group (see
    /// `lifecycle::consolidate`). Uses the current model's stored vectors when a model is
    /// configured (nothing is embedded here), word overlap always; `cancel` stops between
    /// batches.
    pub async fn consolidate(
        &self,
        options: &ConsolidateOptions,
        cancel: &AtomicBool,
    ) -> Result<ConsolidateReport> {
        // Without a model (or with one that cannot load) the word test alone runs.
        let embedder = self.loaded_embedder().await.ok().map(|e| e.id().clone());
        consolidate::consolidate(&self.ctx(), options, embedder.as_ref(), cancel).await
    }
}
