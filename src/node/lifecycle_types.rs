//! JS-facing types of the lifecycle methods (feedback, review, supersedes, disputes, prune)
//! and their conversions. The `///` docs here become `index.d.ts`.

use napi_derive::napi;

use super::panel_types::TrustOffer;
use super::strict::Count;
use super::types::{Memory, MemoryPatch};
use crate::lifecycle as core;

/// Who says something about a memory, in which session, with what words.
#[napi(object, object_to_js = false)]
pub struct EventNote {
    /// Free text: a reason, a comment (privacy-filtered like memory content).
    pub comment: Option<String>,
    /// Who (a user name, an agent id).
    pub author: Option<String>,
    /// The session it happens in.
    pub session_id: Option<String>,
}

impl From<EventNote> for core::EventNote {
    fn from(n: EventNote) -> Self {
        core::EventNote {
            session_id: n.session_id,
            author: n.author,
            body: n.comment,
        }
    }
}

/// Feedback on a memory an agent was given.
#[napi(object, object_to_js = false)]
pub struct FeedbackInput {
    /// `helpful` (+0.05 confidence), `wrong` (-0.1, flagged for review) or `correction` (the
    /// `correction` text becomes a new memory that supersedes this one, which is forgotten).
    #[napi(ts_type = "'helpful' | 'wrong' | 'correction'")]
    pub kind: String,
    /// The corrected text (required with `correction`).
    pub correction: Option<String>,
    /// Why, in words.
    pub comment: Option<String>,
    /// Who.
    pub author: Option<String>,
    /// The session.
    pub session_id: Option<String>,
}

impl FeedbackInput {
    /// Converts to the core input (the kind parsed, with a coded error).
    pub(crate) fn into_core(self) -> crate::error::Result<core::FeedbackInput> {
        Ok(core::FeedbackInput {
            kind: core::FeedbackKind::parse(&self.kind)?,
            correction: self.correction,
            note: core::EventNote {
                session_id: self.session_id,
                author: self.author,
                body: self.comment,
            },
        })
    }
}

/// One entry of a memory's event log.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryEvent {
    /// UUIDv7.
    pub id: String,
    /// The memory it is about.
    pub memory_id: String,
    /// What happened.
    #[napi(
        ts_type = "'helpful' | 'wrong' | 'correction' | 'confirm' | 'reject' | 'dispute' | 'comment' | 'resolve'"
    )]
    pub kind: String,
    /// The session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Who.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// The words (for a correction: the corrected text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// When (ms since epoch).
    pub created_at: i64,
}

impl From<core::MemoryEvent> for MemoryEvent {
    fn from(e: core::MemoryEvent) -> Self {
        MemoryEvent {
            id: e.id,
            memory_id: e.memory_id,
            kind: e.kind.as_str().to_owned(),
            session_id: e.session_id,
            author: e.author,
            comment: e.body,
            created_at: e.created_at,
        }
    }
}

/// What `feedback` did.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackResult {
    /// The memory the feedback was about, as it is now.
    pub memory: Memory,
    /// For a correction: the new memory that supersedes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correction: Option<Memory>,
    /// The event recorded.
    pub event: MemoryEvent,
    /// Set once memories were flagged wrong 3+ times in this feedback's session: an offer
    /// (never forced) to step the project's trust level down; accept it with
    /// `setTrustLevel(offer.level)`, or `dismissTrustOffer()`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_offer: Option<TrustOffer>,
}

impl From<core::FeedbackOutcome> for FeedbackResult {
    fn from(o: core::FeedbackOutcome) -> Self {
        FeedbackResult {
            memory: o.memory.into(),
            correction: o.correction.map(Into::into),
            event: o.event.into(),
            trust_offer: o.trust_offer.map(Into::into),
        }
    }
}

/// Options of `confirm`.
#[napi(object, object_to_js = false)]
pub struct ConfirmOptions {
    /// An edit applied with the confirmation (one new version).
    pub patch: Option<MemoryPatch>,
    /// Why, in words.
    pub comment: Option<String>,
    /// Who.
    pub author: Option<String>,
    /// The session.
    pub session_id: Option<String>,
}

/// Paging of `reviewQueue`.
#[napi(object, object_to_js = false)]
pub struct ReviewQueueOptions {
    /// Page size, 1..1000 (default 50).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
    /// Rows to skip.
    #[napi(ts_type = "number")]
    pub offset: Option<Count>,
}

/// The two memories of `supersede`, as they are now.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SupersedeResult {
    /// The superseded memory (`supersededBy` set).
    pub older: Memory,
    /// The memory that supersedes it (a `supersedes` relation added).
    pub newer: Memory,
}

/// What `dispute`, `comment` or `resolveDispute` did.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisputeResult {
    /// The memory as it is now.
    pub memory: Memory,
    /// The event recorded.
    pub event: MemoryEvent,
}

impl From<core::DisputeOutcome> for DisputeResult {
    fn from(o: core::DisputeOutcome) -> Self {
        DisputeResult {
            memory: o.memory.into(),
            event: o.event.into(),
        }
    }
}

/// Options of `prune` (besides `signal`).
#[napi(object, object_to_js = false)]
pub struct PruneOptions {
    /// Days a forgotten memory, or an orphan node, is kept before deletion (default 30).
    pub grace_days: Option<f64>,
    /// Count what would be done, change nothing.
    pub dry_run: Option<bool>,
}

impl From<PruneOptions> for core::PruneOptions {
    fn from(o: PruneOptions) -> Self {
        let d = core::PruneOptions::default();
        core::PruneOptions {
            grace_days: o.grace_days.unwrap_or(d.grace_days),
            dry_run: o.dry_run.unwrap_or(d.dry_run),
        }
    }
}

/// What a `prune` run did (or, dry, would do).
#[napi(object)]
pub struct PruneReport {
    /// Memories forgotten because they were unused for three half-lives.
    pub expired: u32,
    /// Forgotten memories past the grace period, deleted for good.
    pub deleted: u32,
    /// Forgotten memories past the grace period kept because a person verified them.
    pub kept_verified: u32,
    /// Orphan knowledge nodes (agent or LLM made, no edges, no memories) deleted.
    pub orphan_nodes: u32,
    /// Vectors of forgotten memories evicted.
    pub vectors_evicted: u32,
    /// Whether the keyword index was compacted.
    pub compacted: bool,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Wall time in milliseconds.
    pub duration_ms: f64,
}

impl From<core::PruneReport> for PruneReport {
    fn from(r: core::PruneReport) -> Self {
        PruneReport {
            expired: r.expired as u32,
            deleted: r.deleted as u32,
            kept_verified: r.kept_verified as u32,
            orphan_nodes: r.orphan_nodes as u32,
            vectors_evicted: r.vectors_evicted as u32,
            compacted: r.compacted,
            dry_run: r.dry_run,
            duration_ms: r.duration_ms,
        }
    }
}

/// One keyword index in an `optimize` report.
#[napi(object)]
pub struct KeywordIndexReport {
    /// Which index: `code` (indexed code chunks) or `memories`.
    #[napi(ts_type = "'code' | 'memories'")]
    pub index: String,
    /// Its segments before (each adds a seek per term to every keyword search).
    pub segments_before: u32,
    /// Its segments after: 1 once merged (more if writes landed meanwhile); unchanged when too
    /// few of its pages lay outside its largest segment to be worth rewriting it (FTS5's own
    /// automerge folds those in).
    pub segments_after: u32,
}

/// What `optimize` did.
#[napi(object)]
pub struct OptimizeReport {
    /// The keyword indexes, code first (none for a database without a local file, whose
    /// server keeps its own).
    pub keyword_indexes: Vec<KeywordIndexReport>,
    /// Whether this project's graph closure was pending and got built.
    pub closure_built: bool,
    /// Wall time in milliseconds.
    pub duration_ms: f64,
}

impl From<crate::Optimized> for OptimizeReport {
    fn from(o: crate::Optimized) -> Self {
        OptimizeReport {
            keyword_indexes: o
                .keyword_indexes
                .into_iter()
                .map(|m| KeywordIndexReport {
                    index: m.index.to_owned(),
                    segments_before: m.segments_before.min(u32::MAX as u64) as u32,
                    segments_after: m.segments_after.min(u32::MAX as u64) as u32,
                })
                .collect(),
            closure_built: o.closure_built,
            duration_ms: o.duration_ms,
        }
    }
}

/// Options of `exportMemories`.
#[napi(object, object_to_js = false)]
pub struct ExportOptions {
    /// `json` (lossless: every field, the history and the event log; re-importable) or
    /// `markdown` (for people; importable).
    #[napi(ts_type = "'json' | 'markdown'")]
    pub format: String,
    /// Forgotten memories too (default: yes for JSON, no for Markdown).
    pub include_forgotten: Option<bool>,
    /// Write the document to this file (created or replaced) instead of returning it.
    pub path: Option<String>,
}

/// What `exportMemories` produced.
#[napi(object)]
pub struct ExportResult {
    /// The document, unless it was written to `path`.
    pub text: Option<String>,
    /// The file written, if `path` was given.
    pub path: Option<String>,
    /// Memories exported.
    pub memories: u32,
    /// Size of the document in bytes (UTF-8).
    pub bytes: f64,
}

/// Options of `importMemories`: the document as `text`, or a `path` to read it from.
#[napi(object, object_to_js = false)]
pub struct ImportOptions {
    /// The format of the document.
    #[napi(ts_type = "'json' | 'markdown'")]
    pub format: String,
    /// The document.
    pub text: Option<String>,
    /// A file holding the document: a regular file of at most 256 MiB (a FIFO, a device or a
    /// directory is refused with `ENGRAM_INVALID_ARG` without being opened).
    pub path: Option<String>,
    /// JSON only: what to do with a memory whose id this project already has: `skip` (the
    /// default) or `replace` (history and events included).
    #[napi(ts_type = "'skip' | 'replace'")]
    pub on_conflict: Option<String>,
}

/// What an import did.
#[napi(object)]
pub struct ImportReport {
    /// Memories written as new rows (JSON: with their own ids).
    pub imported: u32,
    /// Memories that replaced (JSON) or updated (Markdown) a stored one.
    pub updated: u32,
    /// Memories left out: id taken (JSON, `skip`) or unchanged (Markdown).
    pub skipped: u32,
    /// Memories left out because an active memory with the same content and scope exists.
    pub duplicates: u32,
    /// Past versions written.
    pub versions: u32,
    /// Events written.
    pub events: u32,
}

impl From<core::ImportReport> for ImportReport {
    fn from(r: core::ImportReport) -> Self {
        ImportReport {
            imported: r.imported as u32,
            updated: r.updated as u32,
            skipped: r.skipped as u32,
            duplicates: r.duplicates as u32,
            versions: r.versions as u32,
            events: r.events as u32,
        }
    }
}

/// The guard of `deleteAll`.
#[napi(object, object_to_js = false)]
pub struct DeleteAllOptions {
    /// Must be `true`: deletion is permanent.
    pub confirm: bool,
}

/// Options of `markUsed`.
#[napi(object, object_to_js = false)]
pub struct MarkUsedOptions {
    /// The agent session the memories were used in (counts for its summary).
    pub session_id: Option<String>,
}
