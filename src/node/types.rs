//! JS-facing types (`#[napi(object)]` / `#[napi(string_enum)]`) and their conversions to and
//! from the core types. The `///` docs here become `index.d.ts`.
//!
//! Each string enum mirrors a core enum through two exhaustive matches, so adding a variant
//! on either side without the other fails to compile.

use std::collections::HashMap;

use napi_derive::napi;
use serde_json::Value as Json;

use super::strict::Count;
use crate::memory as core;

/// Declares a JS string enum mirroring a core enum, with exhaustive conversions both ways.
macro_rules! mirror_enum {
    ($(#[$meta:meta])* $name:ident => $core:path { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[napi(string_enum)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vmeta])* #[napi(value = $text)] $variant,)+
        }

        // napi checks the value against the variants.
        impl $crate::node::strict::Shape for $name {}

        /// Serialises as its JS string (results reach JS as JSON, see `node::json`).
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(match self { $($name::$variant => $text,)+ })
            }
        }

        impl From<$name> for $core {
            fn from(v: $name) -> Self {
                use $core as C;
                match v { $($name::$variant => C::$variant,)+ }
            }
        }

        impl From<$core> for $name {
            fn from(v: $core) -> Self {
                use $core as C;
                match v { $(C::$variant => $name::$variant,)+ }
            }
        }
    };
}

mirror_enum!(
    /// What kind of knowledge a memory holds (seed section 3).
    MemoryType => core::MemoryType {
        /// A trap or non-obvious constraint.
        Gotcha = "gotcha",
        /// An architectural decision with its rationale.
        Decision = "decision",
        /// A user or project coding preference.
        Preference = "preference",
        /// A reusable implementation pattern.
        Pattern = "pattern",
        /// A functional or non-functional requirement.
        Requirement = "requirement",
        /// A recurring error and its fix.
        ErrorPattern = "error_pattern",
        /// What a module is for.
        ModuleInsight = "module_insight",
        /// Files read together.
        PrefetchPattern = "prefetch_pattern",
        /// Partial work for cross-session continuity.
        WorkState = "work_state",
        /// File A must change when file B changes.
        CausalDependency = "causal_dependency",
        /// Actual vs planned steps per module.
        TaskCalibration = "task_calibration",
        /// A UI behaviour observed through tools.
        E2eObservation = "e2e_observation",
        /// An approach tried and abandoned.
        DeadEnd = "dead_end",
        /// The result of a work unit.
        WorkUnitOutcome = "work_unit_outcome",
        /// A step-by-step procedure.
        WorkflowRecipe = "workflow_recipe",
        /// Token cost profile of a module.
        ContextCost = "context_cost",
    }
);

mirror_enum!(
    /// Who or what created a memory.
    MemorySource => core::MemorySource {
        /// The agent recorded it explicitly.
        AgentExplicit = "agent_explicit",
        /// The observer derived it from behaviour.
        ObserverInferred = "observer_inferred",
        /// Extracted from QA failures.
        QaAuto = "qa_auto",
        /// Extracted from MCP tool results.
        McpAuto = "mcp_auto",
        /// Tagged at commit time.
        CommitAuto = "commit_auto",
        /// Taught by the user.
        UserTaught = "user_taught",
    }
);

mirror_enum!(
    /// How widely a memory applies inside the project.
    MemoryScope => core::MemoryScope {
        /// The whole project.
        Global = "global",
        /// One module.
        Module = "module",
        /// One work unit.
        WorkUnit = "work_unit",
        /// One session.
        Session = "session",
    }
);

mirror_enum!(
    /// Who may see a memory. `personal` memories never leave the device.
    ShareScope => core::ShareScope {
        /// Only this user on this device.
        Personal = "personal",
        /// Everyone on the project (default).
        Project = "project",
        /// The team.
        Team = "team",
        /// The organisation.
        Organization = "organization",
    }
);

mirror_enum!(
    /// How a memory relates to another memory or a file.
    RelationType => core::RelationType {
        /// Must be considered together.
        RequiredWith = "required_with",
        /// Contradicts.
        ConflictsWith = "conflicts_with",
        /// Confirms.
        Validates = "validates",
        /// Replaces.
        Supersedes = "supersedes",
        /// Was derived from.
        DerivedFrom = "derived_from",
    }
);

/// Options of `Engram.open`.
#[napi(object, object_to_js = false)]
pub struct OpenOptions {
    /// Database file; created with its directory if missing. Every open of the same file in
    /// this process (any thread) shares one engine. Leave it out, with `sync.url` given, for a
    /// remote-only engine that reads and writes the server directly (server routes, hosts
    /// without a disk).
    pub path: Option<String>,
    /// Project root: memory file paths are stored relative to it and may not leave it.
    pub project_root: Option<String>,
    /// Project id for this handle (default `"default"`); one file can hold many projects.
    pub project_id: Option<String>,
    /// How long to wait for another process's lock before `ENGRAM_SQLITE_BUSY` (default 5000).
    #[napi(ts_type = "number")]
    pub busy_timeout_ms: Option<Count>,
    /// Pooled read connections (default 4).
    #[napi(ts_type = "number")]
    pub read_connections: Option<Count>,
    /// Largest accepted `content`, in UTF-8 bytes (default 16384).
    #[napi(ts_type = "number")]
    pub max_content_bytes: Option<Count>,
    /// Hops the graph's closure table covers (1..8, default 4): `impact()`, `ancestors()` and
    /// `descendants()` answer up to this depth from one indexed lookup. Changing it rebuilds
    /// the closure at the next graph write.
    #[napi(ts_type = "number")]
    pub closure_depth: Option<Count>,
    /// Memory budget of the in-process graph index that serves `impact()`, `ancestors()`,
    /// `descendants()`, `neighbours()` and recall's graph path, in MiB per project (default
    /// 256, about 190,000 nodes of a code graph). A larger graph is answered from the
    /// database, as every graph read is with 0 (slower, same answers).
    #[napi(ts_type = "number")]
    pub graph_index_max_mb: Option<Count>,
    /// The embedder (default: the built-in local model, loaded on first `embed()`).
    pub embeddings: Option<super::embed_options::EmbeddingsOptions>,
    /// Stage 3 of `recall()`: a rerank server or your own function (default none).
    pub reranker: Option<super::rerank_options::RerankerOptions>,
    /// Sync with a libSQL server (Turso Cloud or `sqld`) through an embedded replica (default
    /// none: the file stays on this device).
    pub sync: Option<super::sync::SyncOptions>,
}

/// The methodology unit a memory belongs to.
#[napi(object)]
#[derive(serde::Serialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct WorkUnitRef {
    /// e.g. `native`, `bmad`, `tdd`.
    pub methodology: String,
    /// e.g. `["spec_042", "subtask_3"]`.
    pub hierarchy: Vec<String>,
    /// Human label.
    pub label: String,
}

/// A typed link from a memory to another memory or a file.
#[napi(object)]
#[derive(serde::Serialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRelation {
    /// The other memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_memory_id: Option<String>,
    /// The file (relative to the project root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_file_path: Option<String>,
    /// Kind of relation.
    pub relation_type: RelationType,
    /// 0..1 (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Extracted automatically (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_extracted: Option<bool>,
}

/// Input of `remember` / `rememberMany`. Only `type` and `content` are required.
#[napi(object)]
pub struct RememberInput {
    /// What kind of knowledge.
    #[napi(js_name = "type")]
    pub memory_type: MemoryType,
    /// The text (1 byte to `maxContentBytes`); secrets are replaced by `[REDACTED]`.
    pub content: String,
    /// 0..1, default 0.8.
    pub confidence: Option<f64>,
    /// Tags.
    pub tags: Option<Vec<String>>,
    /// Files, relative to the project root (absolute paths inside it are accepted).
    pub related_files: Option<Vec<String>>,
    /// Modules.
    pub related_modules: Option<Vec<String>>,
    /// Default `global`.
    pub scope: Option<MemoryScope>,
    /// Default `project`.
    pub share_scope: Option<ShareScope>,
    /// Default `agent_explicit`.
    pub source: Option<MemorySource>,
    /// Creating session.
    pub session_id: Option<String>,
    /// Commit the knowledge refers to.
    pub commit_sha: Option<String>,
    /// Methodology unit.
    pub work_unit_ref: Option<WorkUnitRef>,
    /// Methodology plugin.
    pub methodology: Option<String>,
    /// Knowledge-graph node it is attached to.
    pub target_node_id: Option<String>,
    /// Graph nodes it affects.
    pub impacted_node_ids: Option<Vec<String>>,
    /// Links to memories or files.
    pub relations: Option<Vec<MemoryRelation>>,
    /// Custom decay half-life in days.
    pub decay_half_life_days: Option<f64>,
    /// Waiting for review (default false).
    pub needs_review: Option<bool>,
    /// Confirmed by a human (default false).
    pub user_verified: Option<bool>,
    /// Inline citation label, at most 40 characters.
    pub citation_text: Option<String>,
    /// Pinned memories never decay (default false).
    pub pinned: Option<bool>,
    /// A plain object for the app (at most 64 KiB as JSON).
    #[napi(ts_type = "Record<string, unknown>")]
    pub metadata: Option<Json>,
    /// Text that makes `recall()` put this memory first whatever else ranks, when it appears
    /// in the query or in a recent file's path (case-insensitive, at least 2 characters): a
    /// "never do X" memory with the patterns of X, such as `['.env']` for "never commit .env
    /// files" or `['println!']` for "log with tracing, not println!".
    pub triggers: Option<Vec<String>>,
}

/// Fields to change in `update`; omitted fields stay. An empty string clears `citationText`,
/// `commitSha`, `methodology` and `targetNodeId`. List fields are replaced, not merged.
#[napi(object)]
pub struct MemoryPatch {
    /// New type.
    #[napi(js_name = "type")]
    pub memory_type: Option<MemoryType>,
    /// New text (privacy-filtered again).
    pub content: Option<String>,
    /// New confidence 0..1.
    pub confidence: Option<f64>,
    /// New tags.
    pub tags: Option<Vec<String>>,
    /// New files.
    pub related_files: Option<Vec<String>>,
    /// New modules.
    pub related_modules: Option<Vec<String>>,
    /// New scope.
    pub scope: Option<MemoryScope>,
    /// New share scope.
    pub share_scope: Option<ShareScope>,
    /// New commit.
    pub commit_sha: Option<String>,
    /// New methodology.
    pub methodology: Option<String>,
    /// New graph node.
    pub target_node_id: Option<String>,
    /// New impacted nodes.
    pub impacted_node_ids: Option<Vec<String>>,
    /// New relations.
    pub relations: Option<Vec<MemoryRelation>>,
    /// New half-life in days.
    pub decay_half_life_days: Option<f64>,
    /// Review flag.
    pub needs_review: Option<bool>,
    /// Verified flag.
    pub user_verified: Option<bool>,
    /// Citation label.
    pub citation_text: Option<String>,
    /// Pin flag.
    pub pinned: Option<bool>,
    /// New metadata object.
    #[napi(ts_type = "Record<string, unknown>")]
    pub metadata: Option<Json>,
    /// Replaces the trigger patterns.
    pub triggers: Option<Vec<String>>,
}

/// A stored memory.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// UUIDv7.
    pub id: String,
    /// Project.
    pub project_id: String,
    /// Kind of knowledge.
    #[napi(js_name = "type")]
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// Text after the privacy filter.
    pub content: String,
    /// Stored confidence 0..1.
    pub confidence: f64,
    /// Tags.
    pub tags: Vec<String>,
    /// Files relative to the project root.
    pub related_files: Vec<String>,
    /// Modules.
    pub related_modules: Vec<String>,
    /// Scope.
    pub scope: MemoryScope,
    /// Share scope.
    pub share_scope: ShareScope,
    /// Creator.
    pub source: MemorySource,
    /// Creating session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_sha: Option<String>,
    /// Every session that created or reinforced it.
    pub provenance_session_ids: Vec<String>,
    /// Methodology unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_unit_ref: Option<WorkUnitRef>,
    /// Methodology plugin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub methodology: Option<String>,
    /// Graph node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_node_id: Option<String>,
    /// Impacted graph nodes.
    pub impacted_node_ids: Vec<String>,
    /// Links.
    pub relations: Vec<MemoryRelation>,
    /// Custom half-life in days.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decay_half_life_days: Option<f64>,
    /// Waiting for review.
    pub needs_review: bool,
    /// Confirmed by a human.
    pub user_verified: bool,
    /// Citation label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub citation_text: Option<String>,
    /// Never decays.
    pub pinned: bool,
    /// Archived by `forget`.
    pub forgotten: bool,
    /// When archived (ms since epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forgotten_at: Option<i64>,
    /// Why archived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forgotten_reason: Option<String>,
    /// When found stale (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_at: Option<i64>,
    /// Secrets replaced by the privacy filter over the memory's life.
    pub redactions: u32,
    /// Times a duplicate reinforced it.
    pub reinforce_count: u32,
    /// Times retrieval returned it.
    pub access_count: u32,
    /// Created (ms since epoch).
    pub created_at: i64,
    /// Last changed (ms).
    pub updated_at: i64,
    /// Last returned by retrieval (ms).
    pub last_accessed_at: i64,
    /// 1 at creation, +1 per change (see `history`).
    pub version: u32,
    /// App metadata.
    #[napi(ts_type = "Record<string, unknown>")]
    pub metadata: Json,
    /// Patterns that make `recall()` put it first (lower case).
    pub triggers: Vec<String>,
    /// The memory that replaces this one (it decays twice as fast meanwhile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// When a team member disputed it (ms); absent when not disputed. A disputed memory is
    /// used at confidence x 0.8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disputed_at: Option<i64>,
    /// Times feedback called it helpful.
    pub helpful_count: u32,
    /// Times feedback called it wrong.
    pub wrong_count: u32,
    /// Uses since it was last called wrong or corrected: every 5th raises its confidence by
    /// 0.05 (to 0.95), the 10th clears `needsReview`.
    pub uncorrected_uses: u32,
}

/// Result of `remember`.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RememberResult {
    /// The memory as stored.
    pub memory: Memory,
    /// `false` when an identical active memory (same project and scope) was reinforced
    /// instead of a new one being created.
    pub created: bool,
}

/// Filters of `list`.
#[napi(object)]
pub struct ListFilter {
    /// Only these types.
    pub types: Option<Vec<MemoryType>>,
    /// Only these scopes.
    pub scopes: Option<Vec<MemoryScope>>,
    /// Only these sources.
    pub sources: Option<Vec<MemorySource>>,
    /// Only these share scopes (personal, project, team, organization).
    pub share_scopes: Option<Vec<ShareScope>>,
    /// At least one of these tags.
    pub tags: Option<Vec<String>>,
    /// Related to this file (relative to the project root).
    pub related_file: Option<String>,
    /// Review flag.
    pub needs_review: Option<bool>,
    /// Pin flag.
    pub pinned: Option<bool>,
    /// Stored confidence at least this.
    pub min_confidence: Option<f64>,
    /// Include forgotten memories.
    pub include_forgotten: Option<bool>,
    /// Only forgotten memories.
    pub only_forgotten: Option<bool>,
    /// Sort order (default `created`, newest first).
    #[napi(ts_type = "'created' | 'updated' | 'confidence' | 'accessed'")]
    pub order_by: Option<String>,
    /// Page size, 1..1000 (default 50).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
    /// Rows to skip.
    #[napi(ts_type = "number")]
    pub offset: Option<Count>,
}

/// Options of `search`.
#[napi(object)]
pub struct SearchOptions {
    /// Maximum hits, 1..200 (default 10).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
    /// `auto` (default): all terms, then any of the distinctive ones (those in at most 1,000
    /// memories, else the rarest) to fill the page; `all`; `any`.
    #[napi(ts_type = "'auto' | 'all' | 'any'")]
    pub mode: Option<String>,
    /// Only these types.
    pub types: Option<Vec<MemoryType>>,
    /// Only these scopes.
    pub scopes: Option<Vec<MemoryScope>>,
    /// Only these sources.
    pub sources: Option<Vec<MemorySource>>,
    /// Only these share scopes (personal, project, team, organization).
    pub share_scopes: Option<Vec<ShareScope>>,
    /// At least one of these tags.
    pub tags: Option<Vec<String>>,
    /// Related to this file.
    pub related_file: Option<String>,
    /// Stored confidence at least this.
    pub min_confidence: Option<f64>,
    /// Include forgotten memories.
    pub include_forgotten: Option<bool>,
    /// When fewer than half of `limit` hits match every term, search once more with the
    /// words no index holds corrected to the closest indexed ones (`dokcer` -> `docker`,
    /// `confgurations` -> `configur*`); those hits carry `correctedQuery` (default true).
    pub typo: Option<bool>,
}

/// One search result.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// The memory.
    pub memory: Memory,
    /// BM25 relevance (higher is better; comparable within one result list).
    pub score: f64,
    /// Every query term matched (false for hits added by the OR fallback).
    pub matched_all: bool,
    /// The query this hit was found with, when it was the typo-corrected one
    /// (`dokcer compose` -> `docker* compose`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected_query: Option<String>,
}

/// A state of a memory in its history.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryVersion {
    /// The version number of this state.
    pub version: u32,
    /// What ended it: `update`, `reinforce`, `forget`, `rollback`; `current` for the live state.
    pub ended_by: String,
    /// When it ended (ms); for `current`, when it began.
    pub ended_at: i64,
    /// The memory as it was.
    pub memory: Memory,
}

/// Counts over the handle's project.
#[napi(object)]
pub struct Stats {
    /// All memories, forgotten included.
    pub total: u32,
    /// Not forgotten.
    pub active: u32,
    /// Forgotten.
    pub forgotten: u32,
    /// Active and waiting for review.
    pub needs_review: u32,
    /// Active and pinned.
    pub pinned: u32,
    /// Active memories that had secrets redacted.
    pub with_redactions: u32,
    /// Active memories per type.
    pub by_type: HashMap<String, u32>,
    /// Past versions stored.
    pub versions: u32,
    /// Schema version of the main home.
    pub schema_version: u32,
    /// Canonical database path.
    pub path: String,
}

/// Refuses a blank entry or a NUL byte in one of a memory's lists (`at` names the input:
/// `input`, `inputs[2]`, `patch`). The core drops blank entries, as it must for what engram
/// derives itself; from an app they are a mistake to report.
fn check_entries(at: &str, field: &str, items: Option<&Vec<String>>) -> crate::error::Result<()> {
    for (i, item) in items.into_iter().flatten().enumerate() {
        if item.trim().is_empty() {
            return Err(crate::error::Error::invalid(format!(
                "{at}.{field}[{i}] is empty"
            )));
        }
        if item.contains('\0') {
            return Err(crate::error::Error::invalid(format!(
                "{at}.{field}[{i}] contains a NUL byte"
            )));
        }
    }
    Ok(())
}

impl RememberInput {
    /// Checks the entries of its lists (see [`check_entries`]).
    pub(crate) fn check_lists(&self, at: &str) -> crate::error::Result<()> {
        check_entries(at, "tags", self.tags.as_ref())?;
        check_entries(at, "relatedFiles", self.related_files.as_ref())?;
        check_entries(at, "relatedModules", self.related_modules.as_ref())?;
        check_entries(at, "impactedNodeIds", self.impacted_node_ids.as_ref())?;
        check_entries(at, "triggers", self.triggers.as_ref())
    }
}

impl MemoryPatch {
    /// Checks the entries of its lists (see [`check_entries`]).
    pub(crate) fn check_lists(&self, at: &str) -> crate::error::Result<()> {
        check_entries(at, "tags", self.tags.as_ref())?;
        check_entries(at, "relatedFiles", self.related_files.as_ref())?;
        check_entries(at, "relatedModules", self.related_modules.as_ref())?;
        check_entries(at, "impactedNodeIds", self.impacted_node_ids.as_ref())?;
        check_entries(at, "triggers", self.triggers.as_ref())
    }
}

fn list<T: Into<U>, U>(v: Option<Vec<T>>) -> Vec<U> {
    v.unwrap_or_default().into_iter().map(Into::into).collect()
}

impl From<WorkUnitRef> for core::WorkUnitRef {
    fn from(w: WorkUnitRef) -> Self {
        core::WorkUnitRef {
            methodology: w.methodology,
            hierarchy: w.hierarchy,
            label: w.label,
        }
    }
}

impl From<core::WorkUnitRef> for WorkUnitRef {
    fn from(w: core::WorkUnitRef) -> Self {
        WorkUnitRef {
            methodology: w.methodology,
            hierarchy: w.hierarchy,
            label: w.label,
        }
    }
}

impl From<MemoryRelation> for core::MemoryRelation {
    fn from(r: MemoryRelation) -> Self {
        core::MemoryRelation {
            target_memory_id: r.target_memory_id,
            target_file_path: r.target_file_path,
            relation_type: r.relation_type.into(),
            confidence: r.confidence.unwrap_or(1.0),
            auto_extracted: r.auto_extracted.unwrap_or(false),
        }
    }
}

impl From<core::MemoryRelation> for MemoryRelation {
    fn from(r: core::MemoryRelation) -> Self {
        MemoryRelation {
            target_memory_id: r.target_memory_id,
            target_file_path: r.target_file_path,
            relation_type: r.relation_type.into(),
            confidence: Some(r.confidence),
            auto_extracted: Some(r.auto_extracted),
        }
    }
}

impl From<RememberInput> for core::RememberInput {
    fn from(i: RememberInput) -> Self {
        core::RememberInput {
            memory_type: i.memory_type.into(),
            content: i.content,
            confidence: i.confidence,
            tags: i.tags.unwrap_or_default(),
            related_files: i.related_files.unwrap_or_default(),
            related_modules: i.related_modules.unwrap_or_default(),
            scope: i.scope.map(Into::into),
            share_scope: i.share_scope.map(Into::into),
            source: i.source.map(Into::into),
            session_id: i.session_id,
            commit_sha: i.commit_sha,
            work_unit_ref: i.work_unit_ref.map(Into::into),
            methodology: i.methodology,
            target_node_id: i.target_node_id,
            impacted_node_ids: i.impacted_node_ids.unwrap_or_default(),
            relations: list(i.relations),
            decay_half_life_days: i.decay_half_life_days,
            needs_review: i.needs_review,
            user_verified: i.user_verified,
            citation_text: i.citation_text,
            pinned: i.pinned,
            metadata: i.metadata,
            triggers: i.triggers.unwrap_or_default(),
        }
    }
}

impl From<MemoryPatch> for core::MemoryPatch {
    fn from(p: MemoryPatch) -> Self {
        core::MemoryPatch {
            memory_type: p.memory_type.map(Into::into),
            content: p.content,
            confidence: p.confidence,
            tags: p.tags,
            related_files: p.related_files,
            related_modules: p.related_modules,
            scope: p.scope.map(Into::into),
            share_scope: p.share_scope.map(Into::into),
            commit_sha: p.commit_sha,
            methodology: p.methodology,
            target_node_id: p.target_node_id,
            impacted_node_ids: p.impacted_node_ids,
            relations: p.relations.map(|r| r.into_iter().map(Into::into).collect()),
            decay_half_life_days: p.decay_half_life_days,
            needs_review: p.needs_review,
            user_verified: p.user_verified,
            citation_text: p.citation_text,
            pinned: p.pinned,
            metadata: p.metadata,
            triggers: p.triggers,
        }
    }
}

impl From<core::Memory> for Memory {
    fn from(m: core::Memory) -> Self {
        Memory {
            id: m.id,
            project_id: m.project_id,
            memory_type: m.memory_type.into(),
            content: m.content,
            confidence: m.confidence,
            tags: m.tags,
            related_files: m.related_files,
            related_modules: m.related_modules,
            scope: m.scope.into(),
            share_scope: m.share_scope.into(),
            source: m.source.into(),
            session_id: m.session_id,
            commit_sha: m.commit_sha,
            provenance_session_ids: m.provenance_session_ids,
            work_unit_ref: m.work_unit_ref.map(Into::into),
            methodology: m.methodology,
            target_node_id: m.target_node_id,
            impacted_node_ids: m.impacted_node_ids,
            relations: m.relations.into_iter().map(Into::into).collect(),
            decay_half_life_days: m.decay_half_life_days,
            needs_review: m.needs_review,
            user_verified: m.user_verified,
            citation_text: m.citation_text,
            pinned: m.pinned,
            forgotten: m.deprecated,
            forgotten_at: m.deprecated_at,
            forgotten_reason: m.deprecated_reason,
            stale_at: m.stale_at,
            redactions: m.redactions,
            reinforce_count: m.reinforce_count,
            access_count: m.access_count,
            created_at: m.created_at,
            updated_at: m.updated_at,
            last_accessed_at: m.last_accessed_at,
            version: m.version,
            metadata: m.metadata,
            triggers: m.triggers,
            superseded_by: m.superseded_by,
            disputed_at: m.disputed_at,
            helpful_count: m.helpful_count,
            wrong_count: m.wrong_count,
            uncorrected_uses: m.uncorrected_uses,
        }
    }
}

impl From<core::Remembered> for RememberResult {
    fn from(r: core::Remembered) -> Self {
        RememberResult {
            memory: r.memory.into(),
            created: r.created,
        }
    }
}

impl ListFilter {
    /// Converts to the core filter (string options parsed, with coded errors).
    pub(crate) fn into_core(self) -> crate::error::Result<core::ListFilter> {
        Ok(core::ListFilter {
            types: list(self.types),
            scopes: list(self.scopes),
            sources: list(self.sources),
            share_scopes: list(self.share_scopes),
            tags: self.tags.unwrap_or_default(),
            related_file: self.related_file,
            needs_review: self.needs_review,
            pinned: self.pinned,
            min_confidence: self.min_confidence,
            include_forgotten: self.include_forgotten.unwrap_or(false),
            only_forgotten: self.only_forgotten.unwrap_or(false),
            order: self
                .order_by
                .as_deref()
                .map(core::ListOrder::parse)
                .transpose()?
                .unwrap_or_default(),
            limit: self.limit.map(u32::from),
            offset: self.offset.map(u32::from),
        })
    }
}

impl SearchOptions {
    /// Converts to the core options (string options parsed, with coded errors).
    pub(crate) fn into_core(self) -> crate::error::Result<core::SearchOptions> {
        Ok(core::SearchOptions {
            limit: self.limit.map(u32::from),
            mode: self
                .mode
                .as_deref()
                .map(core::SearchMode::parse)
                .transpose()?
                .unwrap_or_default(),
            filter: core::ListFilter {
                types: list(self.types),
                scopes: list(self.scopes),
                sources: list(self.sources),
                share_scopes: list(self.share_scopes),
                tags: self.tags.unwrap_or_default(),
                related_file: self.related_file,
                min_confidence: self.min_confidence,
                include_forgotten: self.include_forgotten.unwrap_or(false),
                ..Default::default()
            },
            typo: self.typo.unwrap_or(true),
        })
    }
}

impl From<core::SearchHit> for SearchHit {
    fn from(h: core::SearchHit) -> Self {
        SearchHit {
            memory: h.memory.into(),
            score: h.score,
            matched_all: h.matched_all,
            corrected_query: h.corrected_query,
        }
    }
}

impl From<core::MemoryVersion> for MemoryVersion {
    fn from(v: core::MemoryVersion) -> Self {
        MemoryVersion {
            version: v.version,
            ended_by: v.ended_by,
            ended_at: v.ended_at,
            memory: v.memory.into(),
        }
    }
}
