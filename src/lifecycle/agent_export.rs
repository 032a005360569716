//! Exporting engram's hot tier into an agent file as a generated section, so agents that only
//! read `CLAUDE.md` (or `AGENTS.md`, `.cursorrules`) still get what engram learned.
//!
//! The hot tier is what engram would hand an agent unprompted: active memories that are not
//! superseded, stale, disputed or waiting for review, whose current confidence (decayed) is
//! above the project's trust-level injection threshold, or that a person pinned or verified.
//! Left out as well:
//!
//! - `personal` memories: agent files are usually committed, and personal memories never
//!   leave the device;
//! - session and work-unit scoped memories, which are not standing rules;
//! - operational types that are not rules for an agent (`work_state`, `prefetch_pattern`,
//!   `context_cost`, `task_calibration`, `work_unit_outcome`), unless `types` asks for them;
//! - memories imported from agent files (tagged `agent-file:…`): they are in a file people
//!   maintain already, and being pinned they would crowd out what engram learned.
//!
//! Ranking: pinned first, then user-verified, then current confidence × (1 + ln(1 + uses)),
//! then the newest; the first `limit` are rendered by [`super::agent_files::render_section`]
//! and spliced into the file (everything outside the markers is kept byte for byte; a file
//! without a section gets it appended). The write is atomic; with `write: false` nothing is
//! written and the text the file would have is returned.

use libsql::params;
use serde::Serialize;

use super::agent_files::{self, GeneratedItem};
use super::agent_import::{root_of, TAG_PREFIX};
use super::agent_io;
use super::decay::current_confidence;
use super::trust;
use crate::error::{DbContext, Error, Result};
use crate::memory::rows::{from_row, SELECT_M};
use crate::memory::{Ctx, Memory, MemoryType};

/// Memories written into the generated section unless the caller says otherwise.
pub const DEFAULT_EXPORT_LIMIT: u32 = 30;
/// Most memories a generated section holds: agent files are read into every prompt.
pub const MAX_EXPORT_LIMIT: u32 = 200;
/// The file exported to when none is named.
pub const DEFAULT_EXPORT_FILE: &str = "CLAUDE.md";

/// Types exported by default: the ones that read as rules for an agent.
pub const DEFAULT_EXPORT_TYPES: [MemoryType; 11] = [
    MemoryType::Gotcha,
    MemoryType::Decision,
    MemoryType::Requirement,
    MemoryType::WorkflowRecipe,
    MemoryType::Pattern,
    MemoryType::Preference,
    MemoryType::ErrorPattern,
    MemoryType::DeadEnd,
    MemoryType::ModuleInsight,
    MemoryType::CausalDependency,
    MemoryType::E2eObservation,
];

/// What to export where.
#[derive(Debug, Clone, Default)]
pub struct AgentExportOptions {
    /// The agent file, relative to the project root (default `CLAUDE.md`).
    pub file: Option<String>,
    /// How many memories (default [`DEFAULT_EXPORT_LIMIT`], at most [`MAX_EXPORT_LIMIT`]).
    pub limit: Option<u32>,
    /// Write the file (default) or only return its would-be text.
    pub write: Option<bool>,
    /// Memory types to consider (empty: [`DEFAULT_EXPORT_TYPES`]).
    pub types: Vec<MemoryType>,
    /// Least current confidence (exclusive) for memories nobody pinned or verified; default the
    /// project's trust-level injection threshold.
    pub min_confidence: Option<f64>,
}

/// The result of an export.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExport {
    /// The file, relative to the project root.
    pub path: String,
    /// The file's whole text with the generated section in place.
    pub text: String,
    /// The memories in the section, in rank order.
    pub memory_ids: Vec<String>,
    /// Whether the file was written.
    pub written: bool,
    /// Whether the text differs from what the file held (a missing file counts as empty).
    pub changed: bool,
    /// The confidence threshold used.
    pub min_confidence: f64,
}

/// Renders the hot tier into the agent file (see the module doc).
pub(crate) async fn export(ctx: &Ctx<'_>, options: &AgentExportOptions) -> Result<AgentExport> {
    let root = root_of(ctx)?;
    let limit = options.limit.unwrap_or(DEFAULT_EXPORT_LIMIT);
    if limit == 0 || limit > MAX_EXPORT_LIMIT {
        return Err(Error::invalid(format!(
            "limit must be between 1 and {MAX_EXPORT_LIMIT}, got {limit}"
        )));
    }
    let min_confidence = match options.min_confidence {
        Some(c) => ctx.validator().unit("minConfidence", c)?,
        None => trust::level(ctx).await?.injection_threshold(),
    };
    let path = agent_io::locate(root, options.file.as_deref().unwrap_or(DEFAULT_EXPORT_FILE))?;
    let existing = agent_io::read(&path)?;
    if let Some(text) = &existing {
        agent_files::check_markers(text)
            .map_err(|e| Error::invalid(format!("{}: {e}", path.relative)))?;
    }
    let types = if options.types.is_empty() {
        DEFAULT_EXPORT_TYPES.to_vec()
    } else {
        options.types.clone()
    };
    let hot = hot_tier(ctx, &types, min_confidence, limit).await?;
    let items: Vec<GeneratedItem<'_>> = hot
        .iter()
        .map(|m| GeneratedItem {
            id: &m.id,
            memory_type: m.memory_type.as_str(),
            text: &m.content,
        })
        .collect();
    let section = agent_files::render_section(&items);
    let before = existing.unwrap_or_default();
    let text = agent_files::splice(&before, &section);
    let changed = text != before;
    let write = options.write.unwrap_or(true);
    if write && changed {
        // The file may have been saved while the hot tier was read: never write over that.
        if agent_io::read(&path)?.unwrap_or_default() != before {
            return Err(Error::Conflict(format!(
                "{} changed while it was being exported; export again",
                path.relative
            )));
        }
        agent_io::write(&path, &text)?;
    }
    Ok(AgentExport {
        path: path.relative,
        text,
        memory_ids: hot.iter().map(|m| m.id.clone()).collect(),
        written: write && changed,
        changed,
        min_confidence,
    })
}

/// The ranked hot tier: at most `limit` memories.
async fn hot_tier(
    ctx: &Ctx<'_>,
    types: &[MemoryType],
    min_confidence: f64,
    limit: u32,
) -> Result<Vec<Memory>> {
    let types: Vec<&str> = types.iter().map(|t| t.as_str()).collect();
    let types = serde_json::to_string(&types).expect("strings serialise");
    // Stored confidence bounds the current one from above, so the SQL filter only drops rows
    // that cannot qualify; decay is applied below.
    let sql = format!(
        "SELECT {} FROM memories m
         WHERE m.project_id = ?1 AND m.deprecated = 0 AND m.superseded_by IS NULL
           AND m.stale_at IS NULL AND m.disputed_at IS NULL AND m.needs_review = 0
           AND m.share_scope <> 'personal' AND m.scope IN ('global', 'module')
           AND m.type IN (SELECT value FROM json_each(?2))
           AND (m.pinned = 1 OR m.user_verified = 1 OR m.confidence > ?3)
           AND NOT EXISTS (SELECT 1 FROM json_each(m.tags) t
                           WHERE substr(t.value, 1, length(?4)) = ?4)",
        *SELECT_M
    );
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            &sql,
            params![ctx.project_id, types, min_confidence, TAG_PREFIX],
        )
        .await
        .ctx("reading the hot tier")?;
    let now = ctx.clock.now_ms();
    let mut ranked: Vec<(Memory, f64)> = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading the hot tier")? {
        let m = from_row(&row)?;
        let current = current_confidence(&m, now);
        if !(m.pinned || m.user_verified || current > min_confidence) {
            continue;
        }
        let score = current * (1.0 + f64::from(m.access_count).ln_1p());
        ranked.push((m, score));
    }
    ranked.sort_by(|(a, sa), (b, sb)| {
        b.pinned
            .cmp(&a.pinned)
            .then(b.user_verified.cmp(&a.user_verified))
            .then(sb.total_cmp(sa))
            .then(b.created_at.cmp(&a.created_at))
            .then(a.id.cmp(&b.id))
    });
    ranked.truncate(limit as usize);
    Ok(ranked.into_iter().map(|(m, _)| m).collect())
}
