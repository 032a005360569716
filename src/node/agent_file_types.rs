//! JS-facing types of the agent-file bridge (`importAgentFiles`, `exportAgentFile`) and their
//! conversions. The `///` docs here become `index.d.ts`.

use napi_derive::napi;

use super::strict::Count;
use crate::error::Result;
use crate::lifecycle as core;
use crate::memory::MemoryType;

/// Options of `importAgentFiles`.
#[napi(object, object_to_js = false)]
pub struct ImportAgentFilesOptions {
    /// Files relative to the project root (or absolute inside it). Default: `CLAUDE.md`,
    /// `AGENTS.md` and `.cursorrules` at the root, those that exist. Other `.md`/`.mdc` files
    /// are read as Markdown, anything else like `.cursorrules`.
    pub files: Option<Vec<String>>,
}

impl From<ImportAgentFilesOptions> for core::AgentImportOptions {
    fn from(o: ImportAgentFilesOptions) -> Self {
        core::AgentImportOptions {
            files: o.files.unwrap_or_default(),
        }
    }
}

/// A rule whose text changed between imports.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRuleEdit {
    /// The memory of the old text, now forgotten and superseded.
    pub old_id: String,
    /// The memory of the new text.
    pub new_id: String,
}

/// A rule or generated bullet that was left alone.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedAgentRule {
    /// 1-based line in the file.
    pub line: u32,
    /// Why.
    pub reason: String,
}

/// What importing one agent file did.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFileImport {
    /// The file, relative to the project root.
    pub path: String,
    /// How it was read.
    #[napi(ts_type = "'claude_md' | 'agents_md' | 'cursorrules'")]
    pub kind: String,
    /// Whether the file exists; a missing file changes nothing.
    pub found: bool,
    /// Rules read outside engram's generated section.
    pub rules: u32,
    /// Rules imported before and unchanged.
    pub unchanged: u32,
    /// Memories created (or, for text engram already had, reinforced and tagged) for new rules.
    pub created: Vec<String>,
    /// Rules edited in the file: the new text supersedes the old memory.
    pub edited: Vec<AgentRuleEdit>,
    /// Memories whose rule left the file: forgotten, or only untagged when they did not come
    /// from an agent file alone.
    pub removed: Vec<String>,
    /// Memories updated from bullets people edited in the generated section.
    pub generated_edits: Vec<String>,
    /// Memories created from bullets people added to the generated section.
    pub generated_added: Vec<String>,
    /// Rules and bullets left alone, with why.
    pub skipped: Vec<SkippedAgentRule>,
}

/// What `importAgentFiles` did, file by file.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentImportReport {
    /// One entry per file, in the order asked.
    pub files: Vec<AgentFileImport>,
}

impl From<core::AgentImportReport> for AgentImportReport {
    fn from(r: core::AgentImportReport) -> Self {
        let files = r
            .files
            .into_iter()
            .map(|f| AgentFileImport {
                path: f.path,
                kind: f.kind,
                found: f.found,
                rules: f.rules,
                unchanged: f.unchanged,
                created: f.created,
                edited: f
                    .edited
                    .into_iter()
                    .map(|e| AgentRuleEdit {
                        old_id: e.old_id,
                        new_id: e.new_id,
                    })
                    .collect(),
                removed: f.removed,
                generated_edits: f.generated_edits,
                generated_added: f.generated_added,
                skipped: f
                    .skipped
                    .into_iter()
                    .map(|s| SkippedAgentRule {
                        line: s.line,
                        reason: s.reason,
                    })
                    .collect(),
            })
            .collect();
        AgentImportReport { files }
    }
}

/// Options of `exportAgentFile`.
#[napi(object, object_to_js = false)]
pub struct ExportAgentFileOptions {
    /// The agent file, relative to the project root (default `CLAUDE.md`).
    pub file: Option<String>,
    /// How many memories (default 30, at most 200).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
    /// Write the file (default `true`); `false` only returns the text it would have.
    pub write: Option<bool>,
    /// Memory types to consider (default: the rule-like types, without `work_state`,
    /// `prefetch_pattern`, `context_cost`, `task_calibration`, `work_unit_outcome`).
    #[napi(ts_type = "MemoryType[]")]
    pub types: Option<Vec<String>>,
    /// Least current confidence (exclusive) of memories nobody pinned or verified; default
    /// the project's trust-level injection threshold.
    pub min_confidence: Option<f64>,
}

impl ExportAgentFileOptions {
    /// The core options; fails on an unknown memory type.
    pub fn into_core(self) -> Result<core::AgentExportOptions> {
        let types = self
            .types
            .unwrap_or_default()
            .iter()
            .map(|t| MemoryType::parse(t))
            .collect::<Result<Vec<_>>>()?;
        Ok(core::AgentExportOptions {
            file: self.file,
            limit: self.limit.map(u32::from),
            write: self.write,
            types,
            min_confidence: self.min_confidence,
        })
    }
}

/// What `exportAgentFile` produced.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFileExport {
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

impl From<core::AgentExport> for AgentFileExport {
    fn from(e: core::AgentExport) -> Self {
        AgentFileExport {
            path: e.path,
            text: e.text,
            memory_ids: e.memory_ids,
            written: e.written,
            changed: e.changed,
            min_confidence: e.min_confidence,
        }
    }
}
