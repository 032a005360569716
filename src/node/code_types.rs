//! JS types of the code index: index options, progress and summary, chunks and code hits.

use napi_derive::napi;

use super::derive::DerivedSummary;
use super::strict::Count;
use crate::code as core;
use crate::error::Error as CoreError;

/// Options of `index()` (besides `onProgress` and `signal`).
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct IndexOptions {
    /// Extra ignore patterns in .gitignore syntax (`.gitignore` files are always honoured).
    pub ignore: Option<Vec<String>>,
    /// Apply the default ignore list (node_modules/, target/, dist/, build/, lock files...).
    /// Default true.
    pub use_default_ignores: Option<bool>,
    /// Files larger than this many bytes are skipped and reported (`too_large`). Default 1 MiB.
    pub max_file_bytes: Option<f64>,
    /// Parser threads; default one per core.
    #[napi(ts_type = "number")]
    pub threads: Option<Count>,
}

impl IndexOptions {
    /// The core options, validated.
    pub fn into_core(self) -> Result<core::IndexOptions, CoreError> {
        let mut options = core::IndexOptions::default();
        if let Some(ignore) = self.ignore {
            options.ignore = ignore;
        }
        if let Some(use_defaults) = self.use_default_ignores {
            options.use_default_ignores = use_defaults;
        }
        if let Some(max) = self.max_file_bytes {
            if !(max.is_finite() && max >= 1.0) {
                return Err(CoreError::invalid("maxFileBytes must be a positive number"));
            }
            options.max_file_bytes = max as u64;
        }
        if let Some(threads) = self.threads.map(u32::from) {
            if threads == 0 || threads > 64 {
                return Err(CoreError::invalid("threads must be between 1 and 64"));
            }
            options.threads = threads as usize;
        }
        Ok(options)
    }
}

/// A progress report of `index()`.
#[napi(object)]
pub struct IndexProgress {
    /// `scanning`, `indexing`, `resolving` or `done`.
    pub phase: String,
    /// Files handled so far (unchanged ones included).
    pub files_done: u32,
    /// Files found by the walk.
    pub files_total: u32,
}

impl From<&core::IndexProgress> for IndexProgress {
    fn from(p: &core::IndexProgress) -> Self {
        IndexProgress {
            phase: p.phase.as_str().to_owned(),
            files_done: p.files_done as u32,
            files_total: p.files_total as u32,
        }
    }
}

/// A file `index()` skipped or degraded.
#[napi(object)]
pub struct FileProblem {
    /// Path relative to the project root.
    pub path: String,
    /// `binary`, `too_large`, `unreadable` (skipped); `invalid_utf8`, `syntax_errors`,
    /// `too_deep`, `parse_timeout` (indexed in a degraded way).
    pub issue: String,
}

/// What `index()` did.
#[napi(object)]
pub struct IndexSummary {
    /// Files found after ignores.
    pub files_seen: u32,
    /// Files parsed and written.
    pub files_indexed: u32,
    /// Files already indexed with the same content.
    pub files_unchanged: u32,
    /// Files skipped (binary, too large, unreadable).
    pub files_skipped: u32,
    /// Files removed from the index (deleted or now ignored).
    pub files_removed: u32,
    /// Chunks written.
    pub chunks: u32,
    /// Definitions written.
    pub symbols: u32,
    /// Imports, calls and inheritance references written.
    pub references: u32,
    /// Lines of the files written.
    pub lines: f64,
    /// Bytes of the files written.
    pub bytes: f64,
    /// Wall time in milliseconds.
    pub duration_ms: f64,
    /// Skipped and degraded files (at most 1,000).
    pub problems: Vec<FileProblem>,
    /// Paths read and written (skipped ones included), at most 1,000.
    pub indexed_paths: Vec<String>,
    /// Paths removed from the index (deleted, renamed away or now ignored), at most 1,000.
    pub removed_paths: Vec<String>,
    /// What the run changed in the knowledge graph.
    pub graph: GraphSyncSummary,
    /// Memories on files this run found edited more than 30 days after the memory was last
    /// written: flagged for review (`needsReview`), still in use.
    pub memories_flagged_for_review: u32,
    /// Memories whose related files changed in git since their `commitSha` (a full run only).
    pub git: GitStaleness,
    /// What `deriveRelations` wrote for the modules the run changed (absent when it was not
    /// given, nothing changed, or it failed).
    pub derived_relations: Option<DerivedSummary>,
    /// Why `deriveRelations` failed (`CODE: message`); the index itself is committed.
    pub derived_relations_error: Option<String>,
}

/// The git staleness pass after a full index run: each memory with a `commitSha` loses
/// confidence in proportion to the share of its related files changed in git since that
/// commit (half of it when all changed; each file counted once), and goes to review once half
/// of them have. Pinned memories keep their confidence.
#[napi(object)]
pub struct GitStaleness {
    /// The `HEAD` commit compared with; absent when the project is in no git repository (or
    /// it has no commit), and then nothing was done.
    pub head: Option<String>,
    /// Memories with a `commitSha` and related files that were looked at.
    pub checked: u32,
    /// Memories whose confidence this run lowered.
    pub lowered: u32,
    /// Memories this run flagged for review.
    pub flagged_for_review: u32,
    /// Memories whose commit the repository does not hold (another clone's, rebased away):
    /// left as they were.
    pub unknown_commits: u32,
    /// Wall time of the pass in milliseconds (it runs once the files are indexed, after the
    /// run's `durationMs`).
    pub duration_ms: f64,
}

/// What an index run changed in the knowledge graph's structural and module layers.
#[napi(object)]
pub struct GraphSyncSummary {
    /// Wall time in milliseconds of the graph sync (part of the run's `durationMs`).
    pub duration_ms: f64,
    /// Nodes created or changed.
    pub nodes_written: u32,
    /// Nodes deleted with their files or definitions.
    pub nodes_removed: u32,
    /// Edges created or re-weighted.
    pub edges_written: u32,
    /// Edges deleted.
    pub edges_removed: u32,
    /// Memories newly marked stale (and needing review) because a symbol they are attached
    /// to changed or disappeared.
    pub memories_marked_stale: u32,
    /// Modules whose files or imports the run touched.
    pub modules_changed: Vec<String>,
    /// Nodes you or an LLM wrote, newly marked stale: they have an edge to or from a symbol
    /// whose text changed or that went away.
    pub graph_nodes_marked_stale: u32,
    /// LLM relations newly marked stale: they touch a module the run changed.
    pub edges_marked_stale: u32,
}

impl From<core::IndexSummary> for IndexSummary {
    fn from(s: core::IndexSummary) -> Self {
        IndexSummary {
            files_seen: s.files_seen as u32,
            files_indexed: s.files_indexed as u32,
            files_unchanged: s.files_unchanged as u32,
            files_skipped: s.files_skipped as u32,
            files_removed: s.files_removed as u32,
            chunks: s.chunks as u32,
            symbols: s.symbols as u32,
            references: s.references as u32,
            lines: s.lines as f64,
            bytes: s.bytes as f64,
            duration_ms: s.duration.as_secs_f64() * 1000.0,
            indexed_paths: s.indexed_paths,
            removed_paths: s.removed_paths,
            graph: GraphSyncSummary {
                duration_ms: s.graph.duration.as_secs_f64() * 1000.0,
                nodes_written: s.graph.nodes_written as u32,
                nodes_removed: s.graph.nodes_removed as u32,
                edges_written: s.graph.edges_written as u32,
                edges_removed: s.graph.edges_removed as u32,
                memories_marked_stale: s.graph.memories_marked_stale as u32,
                modules_changed: s.graph.modules_changed,
                graph_nodes_marked_stale: s.graph.graph_nodes_marked_stale as u32,
                edges_marked_stale: s.graph.edges_marked_stale as u32,
            },
            memories_flagged_for_review: s.memories_flagged_for_review as u32,
            git: GitStaleness {
                head: s.git.head,
                checked: s.git.checked as u32,
                lowered: s.git.lowered as u32,
                flagged_for_review: s.git.flagged_for_review as u32,
                unknown_commits: s.git.unknown_commits as u32,
                duration_ms: s.git.duration.as_secs_f64() * 1000.0,
            },
            derived_relations: None,
            derived_relations_error: None,
            problems: s
                .problems
                .into_iter()
                .map(|p| FileProblem {
                    path: p.path,
                    issue: p.issue.as_str().to_owned(),
                })
                .collect(),
        }
    }
}

/// An indexed piece of a file.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeChunk {
    /// Row id (changes when the file is re-indexed).
    pub id: i64,
    /// Path relative to the project root.
    pub path: String,
    /// `typescript`, `tsx`, `javascript`, `python`, `rust`, `go`, `markdown` or `text`.
    pub language: String,
    /// `function`, `method`, `class`, `interface`, `type`, `enum`, `struct`, `trait`, `impl`,
    /// `module`, `macro`; `code` (outside definitions), `block` (several small definitions),
    /// `section` (Markdown), `text`.
    pub kind: String,
    /// The definition's name, when the chunk is one definition (or the heading of a section).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The name qualified by enclosing definitions: `Class.method`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qualified_name: Option<String>,
    /// Qualified names of every definition that starts in the chunk.
    pub symbols: Vec<String>,
    /// First line (1-based).
    pub start_line: u32,
    /// Last line (inclusive).
    pub end_line: u32,
    /// Byte offset of the start.
    pub start_byte: f64,
    /// Byte offset of the end (exclusive).
    pub end_byte: f64,
    /// 128-bit content hash (hex).
    pub content_hash: String,
    /// Estimated tokens.
    pub token_estimate: u32,
    /// `File: path | kind: name | Lines: a-b | In: <enclosing signature>`: prepended for
    /// embedding, indexed for search.
    pub context: String,
    /// The chunk's text.
    pub content: String,
}

impl From<core::CodeChunk> for CodeChunk {
    fn from(c: core::CodeChunk) -> Self {
        CodeChunk {
            id: c.id,
            path: c.path,
            language: c.language,
            kind: c.kind,
            name: c.name,
            qualified_name: c.qualified_name,
            symbols: c.symbols,
            start_line: c.start_line,
            end_line: c.end_line,
            start_byte: c.start_byte as f64,
            end_byte: c.end_byte as f64,
            content_hash: c.content_hash,
            token_estimate: c.token_estimate,
            context: c.context,
            content: c.content,
        }
    }
}

/// A chunk found by `searchCode()`.
#[napi(object)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeHit {
    /// The chunk.
    pub chunk: CodeChunk,
    /// BM25 relevance (higher is better; comparable within one result list).
    pub score: f64,
}

/// Options of `searchCode()`.
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct CodeSearchOptions {
    /// Most hits to return (1 to 1,000, default 10).
    #[napi(ts_type = "number")]
    pub limit: Option<Count>,
}

/// Options of `watch()` (besides `onEvent`): the options of `index()` plus the debounce.
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    /// Extra ignore patterns in .gitignore syntax.
    pub ignore: Option<Vec<String>>,
    /// Apply the default ignore list. Default true.
    pub use_default_ignores: Option<bool>,
    /// Files larger than this many bytes are skipped. Default 1 MiB.
    pub max_file_bytes: Option<f64>,
    /// Quiet time after the last file event before the changed paths are re-indexed, in
    /// milliseconds (10 to 60,000). Default 500.
    #[napi(ts_type = "number")]
    pub debounce_ms: Option<Count>,
}

impl WatchOptions {
    /// The core options, validated.
    pub fn into_core(self) -> Result<core::WatchOptions, CoreError> {
        let index = IndexOptions {
            ignore: self.ignore,
            use_default_ignores: self.use_default_ignores,
            max_file_bytes: self.max_file_bytes,
            threads: None,
        }
        .into_core()?;
        let mut options = core::WatchOptions {
            index,
            ..core::WatchOptions::default()
        };
        if let Some(ms) = self.debounce_ms.map(u32::from) {
            if !(10..=60_000).contains(&ms) {
                return Err(CoreError::invalid(
                    "debounceMs must be between 10 and 60000",
                ));
            }
            options.debounce = std::time::Duration::from_millis(u64::from(ms));
        }
        Ok(options)
    }
}

/// What the watcher reports: an update that changed the index, or a failed update (the
/// watcher goes on and retries those paths with the next event).
#[napi(object)]
pub struct WatchEvent {
    /// `'updated'` or `'failed'`.
    #[napi(ts_type = "'updated' | 'failed'")]
    pub r#type: String,
    /// For `'updated'`: what the update did (`indexedPaths`, `removedPaths`...).
    pub summary: Option<IndexSummary>,
    /// For `'failed'`: the error code.
    pub code: Option<String>,
    /// For `'failed'`: what went wrong.
    pub message: Option<String>,
}

impl From<&core::WatchEvent> for WatchEvent {
    fn from(event: &core::WatchEvent) -> Self {
        match event {
            core::WatchEvent::Updated(summary) => WatchEvent {
                r#type: "updated".into(),
                summary: Some(IndexSummary::from((**summary).clone())),
                code: None,
                message: None,
            },
            core::WatchEvent::Failed { code, message } => WatchEvent {
                r#type: "failed".into(),
                summary: None,
                code: Some((*code).to_owned()),
                message: Some(message.clone()),
            },
        }
    }
}
