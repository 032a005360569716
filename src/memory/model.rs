//! The memory model: types, sources, scopes, relations, and the stored [`Memory`] record.
//!
//! Vocabulary follows the primary spec (seed 003, section 3). Every enum is stored and
//! exchanged as its snake_case string; unknown strings are rejected with `ENGRAM_INVALID_ARG`
//! naming the accepted values.

use serde::{Deserialize, Serialize};

/// Declares a string-valued enum with `as_str`, `parse` and the list of accepted values.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every accepted value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The stored / JS string.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }

            /// Parses the string form, or fails with `ENGRAM_INVALID_ARG` listing what is accepted.
            pub fn parse(s: &str) -> $crate::error::Result<Self> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err($crate::error::Error::invalid(format!(
                        "unknown {} {:?}; expected one of: {}",
                        $what,
                        other,
                        [$($text),+].join(", ")
                    ))),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// Also used by the observer's enums (session types and outcomes).
pub(crate) use string_enum;

string_enum!(
    /// What kind of knowledge a memory holds.
    MemoryType, "memory type" {
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

string_enum!(
    /// Who or what created a memory.
    MemorySource, "memory source" {
        /// The agent called record/remember.
        AgentExplicit = "agent_explicit",
        /// Derived by the observer from behaviour.
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

string_enum!(
    /// How widely a memory applies inside the project.
    MemoryScope, "memory scope" {
        /// The whole project.
        Global = "global",
        /// One module.
        Module = "module",
        /// One work unit (spec, subtask).
        WorkUnit = "work_unit",
        /// One session.
        Session = "session",
    }
);

string_enum!(
    /// Who may see a memory (seed sections 15 and 16). Personal memories never leave the device.
    ShareScope, "share scope" {
        /// Only this user, only this device.
        Personal = "personal",
        /// Everyone working on the project (the default).
        Project = "project",
        /// The user's team.
        Team = "team",
        /// The whole organisation.
        Organization = "organization",
    }
);

string_enum!(
    /// How two memories (or a memory and a file) relate.
    RelationType, "relation type" {
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

/// The methodology unit a memory belongs to (spec, subtask...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRelation {
    /// The other memory, if the relation points at one.
    pub target_memory_id: Option<String>,
    /// The file, if the relation points at one.
    pub target_file_path: Option<String>,
    /// The kind of relation.
    pub relation_type: RelationType,
    /// 0..=1.
    pub confidence: f64,
    /// Whether it was extracted automatically (vs stated by a user or agent).
    pub auto_extracted: bool,
}

/// `{}`: a memory's metadata when its stored form leaves it out.
fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// A stored memory, as returned by every read. Every field with a default (`false`, `0`, an
/// empty list, `{}`, `None`) may be absent when it is read back from JSON: past versions are
/// stored that way (see `memory::snapshot`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// UUIDv7 (time-ordered).
    pub id: String,
    /// The project this memory belongs to.
    pub project_id: String,
    /// What kind of knowledge it is.
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// The text, after the privacy filter.
    pub content: String,
    /// Stored confidence 0..=1.
    pub confidence: f64,
    /// Free-form tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Files the memory is about (relative to the project root).
    #[serde(default)]
    pub related_files: Vec<String>,
    /// Modules the memory is about.
    #[serde(default)]
    pub related_modules: Vec<String>,
    /// How widely it applies.
    pub scope: MemoryScope,
    /// Who may see it.
    pub share_scope: ShareScope,
    /// Who created it.
    pub source: MemorySource,
    /// Session that created it.
    pub session_id: Option<String>,
    /// Commit the knowledge refers to.
    pub commit_sha: Option<String>,
    /// Every session that created or reinforced it.
    #[serde(default)]
    pub provenance_session_ids: Vec<String>,
    /// Methodology unit.
    pub work_unit_ref: Option<WorkUnitRef>,
    /// Methodology plugin that created it.
    pub methodology: Option<String>,
    /// Knowledge-graph node it is attached to.
    pub target_node_id: Option<String>,
    /// Graph nodes it affects.
    #[serde(default)]
    pub impacted_node_ids: Vec<String>,
    /// Links to other memories or files.
    #[serde(default)]
    pub relations: Vec<MemoryRelation>,
    /// Custom decay half-life in days (None: the type's default).
    pub decay_half_life_days: Option<f64>,
    /// Waiting for a human to confirm.
    #[serde(default)]
    pub needs_review: bool,
    /// Confirmed by a human.
    #[serde(default)]
    pub user_verified: bool,
    /// Short text for inline citation chips (<= 40 chars).
    pub citation_text: Option<String>,
    /// Pinned memories never decay.
    #[serde(default)]
    pub pinned: bool,
    /// Archived by `forget`.
    #[serde(default)]
    pub deprecated: bool,
    /// When it was archived (ms).
    pub deprecated_at: Option<i64>,
    /// Why it was archived.
    pub deprecated_reason: Option<String>,
    /// When it was found stale (ms).
    pub stale_at: Option<i64>,
    /// How many secrets the privacy filter has replaced with `[REDACTED]` in this memory, over
    /// its whole life (a memory with any stays on this device once sync lands).
    #[serde(default)]
    pub redactions: u32,
    /// How many times a duplicate reinforced it.
    #[serde(default)]
    pub reinforce_count: u32,
    /// How many times retrieval returned it.
    #[serde(default)]
    pub access_count: u32,
    /// Created (ms since epoch).
    #[serde(default)]
    pub created_at: i64,
    /// Last changed (ms).
    #[serde(default)]
    pub updated_at: i64,
    /// Last returned by retrieval (ms).
    #[serde(default)]
    pub last_accessed_at: i64,
    /// Starts at 1, +1 per change; past versions are in the history.
    #[serde(default)]
    pub version: u32,
    /// Free-form JSON object for the app.
    #[serde(default = "empty_object")]
    pub metadata: serde_json::Value,
    /// Text that makes recall show this memory whatever else ranks: a pattern found in the
    /// query or in a recent file's path (case-insensitive), such as `println!` or `.env` for
    /// "never log with println!" or "never commit .env files".
    #[serde(default)]
    pub triggers: Vec<String>,
    /// The memory that replaces this one (it decays twice as fast while it stays).
    #[serde(default)]
    pub superseded_by: Option<String>,
    /// When a team member disputed it (ms); `None` when not disputed. A disputed memory is
    /// still used, at its confidence x 0.8.
    #[serde(default)]
    pub disputed_at: Option<i64>,
    /// Times feedback called it helpful.
    #[serde(default)]
    pub helpful_count: u32,
    /// Times feedback called it wrong.
    #[serde(default)]
    pub wrong_count: u32,
    /// Uses by recall since it was last called wrong or corrected (every 5th raises its
    /// confidence by 0.05, the 10th clears `needs_review`).
    #[serde(default)]
    pub uncorrected_uses: u32,
}

/// The text a memory is embedded as: its files, first module and type, a blank line, then its
/// content (the seed's contextual embedding for memories).
pub fn embedding_text(
    memory_type: &str,
    content: &str,
    related_files: &[String],
    related_modules: &[String],
) -> String {
    let mut prefix = Vec::with_capacity(3);
    if !related_files.is_empty() {
        prefix.push(format!("Files: {}", related_files.join(", ")));
    }
    if let Some(module) = related_modules.first() {
        prefix.push(format!("Module: {module}"));
    }
    prefix.push(format!("Type: {memory_type}"));
    format!("{}\n\n{content}", prefix.join(" | "))
}

/// A memory as tests need one: `memory_type` and `content`, every other field the default a
/// fresh `remember` gives (confidence 0.8, agent_explicit, all times 0).
#[cfg(test)]
pub(crate) fn sample(memory_type: MemoryType, content: &str) -> Memory {
    let json = serde_json::json!({
        "id": "m", "projectId": "p", "type": memory_type.as_str(), "content": content,
        "confidence": 0.8, "tags": [], "relatedFiles": [], "relatedModules": [],
        "scope": "module", "shareScope": "personal", "source": "agent_explicit",
        "provenanceSessionIds": [], "impactedNodeIds": [], "relations": [],
        "needsReview": false, "userVerified": false, "pinned": false, "deprecated": false,
        "redactions": 0, "reinforceCount": 0, "accessCount": 0, "createdAt": 0,
        "updatedAt": 0, "lastAccessedAt": 0, "version": 1, "metadata": {}, "triggers": [],
        "helpfulCount": 0, "wrongCount": 0, "uncorrectedUses": 0
    });
    serde_json::from_value(json).expect("a memory")
}
