//! The memory lifecycle and trust (issue 9): decay, pruning, feedback and review,
//! supersedes/contradicts links, disputes, sessions and trust progression, health and
//! coverage for the app's panel, memory gaps, export/import/delete-all, and the pure formats
//! they read and write (Markdown, agent files), and the agent-file bridge that imports rule
//! files as memories and exports the hot tier back into them.
//!
//! API boundary: like `memory`, everything takes a [`crate::memory::Ctx`] and knows nothing of
//! JavaScript; [`api`] adds the methods to [`crate::Engram`]. Decay is pure (a memory and
//! "now"), so retrieval scoring, `prune` and tests with a manual clock agree on it.
//!
//! Tables (home `main`, migration 012 on): `memories` gains `superseded_by`, `disputed_at`,
//! `helpful_count`, `wrong_count` and `uncorrected_uses` (uses since the last `wrong` or
//! correction, which `memory::touch` turns into trust: see its doc). `memory_events` holds
//! feedback (helpful, wrong, correction), review (confirm, reject) and dispute threads
//! (dispute, comment, resolve); it syncs like `memory_versions` (it follows its memory's
//! shareability and is deleted with it). Partial indexes serve prune
//! (`memories_forgotten_at`) and unlinking superseded memories (`memories_superseded_by`).
//! Migration 013 adds sessions (`session_memory_use`, `lifecycle_sessions`), `trust_levels` and
//! `memory_gaps`; 015 `memory_git_changes`, what the git staleness pass counted (`git_drift`).

mod agent_export;
pub mod agent_files;
mod agent_import;
mod agent_io;
mod api;
pub(crate) mod conflict_scan;
mod consolidate;
pub mod contradiction;
mod counts;
pub mod decay;
mod dispute;
pub mod events;
mod feedback;
mod gaps;
pub mod git_drift;
mod health;
pub(crate) mod links;
pub mod markdown;
pub mod near_dups;
mod prune;
pub mod salvage;
pub(crate) mod session;
mod transfer;
pub(crate) mod trust;

pub use agent_export::{
    AgentExport, AgentExportOptions, DEFAULT_EXPORT_FILE, DEFAULT_EXPORT_LIMIT,
    DEFAULT_EXPORT_TYPES, MAX_EXPORT_LIMIT,
};
pub use agent_import::{
    file_tag as agent_file_tag, AgentFileImport, AgentImportOptions, AgentImportReport, RuleEdit,
    SkippedRule, RULE_CONFIDENCE, TAG_PREFIX as AGENT_FILE_TAG_PREFIX,
};
pub use agent_io::MAX_AGENT_FILE_BYTES;
pub use conflict_scan::MAX_CONFLICTS_PER_MEMORY;
pub use consolidate::{
    ConsolidateOptions, ConsolidateReport, MergeGroup, BATCH as CONSOLIDATE_BATCH,
    DEFAULT_VECTOR_THRESHOLD, DEFAULT_WORD_THRESHOLD,
};
pub use dispute::DisputeOutcome;
pub use events::{EventKind, EventNote, MemoryEvent};
pub use feedback::{
    FeedbackInput, FeedbackKind, FeedbackOutcome, CORRECTION_CONFIDENCE, HELPFUL_BOOST,
    WRONG_PENALTY,
};
pub(crate) use gaps::after_recall as note_recall_for_gaps;
pub use gaps::{normalise as normalise_gap_query, MemoryGap, MAX_GAP_QUERY_CHARS};
pub use health::{module_of, score as health_score, Health, HealthParts, ModuleCoverage};
pub use links::CONFLICT_SCAN_MAX_BATCH;
pub use prune::{PruneOptions, PruneReport, BATCH as PRUNE_BATCH, DEFAULT_GRACE_DAYS};
pub(crate) use session::record_use_in as record_session_use_in;
pub use session::{
    citation, discovery_tokens, LearnedMemory, SessionSummary, UsedMemory, SUMMARY_LIMIT,
};
pub use transfer::{
    ExportFormat, ExportOptions, Exported, ImportReport, OnConflict, BATCH as TRANSFER_BATCH,
    JSON_FORMAT, JSON_VERSION, MAX_IMPORT_FILE_BYTES,
};
pub use trust::{SummaryMode, TrustLevel, TrustOffer, TrustState};
