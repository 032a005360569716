//! What a recall asks for: the query, the agent's situation (phase, recent files and tool
//! calls), filters, the token budget and which stages run. Checked here, before any work.

use std::path::Path;

use super::scoring::Phase;
use crate::error::{Error, Result};
use crate::memory::input::confine_path;
use crate::memory::{MemoryScope, MemoryType, ShareScope};
use crate::vector::ItemKind;

/// Items returned when the request names no limit.
pub const DEFAULT_RECALL_LIMIT: u32 = 20;
/// Largest `limit` accepted.
pub const MAX_RECALL_LIMIT: u32 = 200;
/// Longest query accepted, in bytes (a pasted stack trace fits; a whole file does not).
pub const MAX_QUERY_BYTES: usize = 8 * 1024;
/// Largest token budget accepted.
pub const MAX_BUDGET_TOKENS: u32 = 200_000;
/// Most recent files and most recent tool calls taken into account.
pub const MAX_RECENT: usize = 200;

/// One recall.
#[derive(Debug, Clone, Default)]
pub struct RecallRequest {
    /// What the agent or user is looking for (at most [`MAX_QUERY_BYTES`] bytes; a blank query
    /// finds nothing).
    pub query: String,
    /// What the agent is doing: weights memory types and sets the default budget.
    pub phase: Option<Phase>,
    /// Files the agent read or edited lately, most recent first (project-relative or absolute
    /// inside the root): the graph path starts from them.
    pub recent_files: Vec<String>,
    /// The agent's recent tool calls (`Grep`, `Read`...), most recent first: a run of searches
    /// makes the query structural.
    pub recent_tool_calls: Vec<String>,
    /// What may be returned.
    pub filters: RecallFilters,
    /// Tokens the packed context may use (default: the phase's budget).
    pub budget_tokens: Option<u32>,
    /// Ranked items returned (1..=[`MAX_RECALL_LIMIT`], default [`DEFAULT_RECALL_LIMIT`]).
    pub limit: Option<u32>,
    /// Items the reranker scores again, from the top of the fused list (1..=200, default 30;
    /// only when a reranker is configured).
    pub rerank_depth: Option<u32>,
    /// Which stages run.
    pub stages: Stages,
    /// Counts the packed memories as used (access count, last access): set it when the
    /// context goes into an agent's prompt, not when a person browses.
    pub track_access: bool,
    /// The agent session the recall is for (1..=256 bytes). With `track_access`, the memories
    /// used count for the session's summary, and a recall that finds no memory notes a gap.
    pub session_id: Option<String>,
    /// Leaves out memories whose current confidence is not above the project's trust-level
    /// injection threshold (combined with `filters.min_confidence`, the stricter wins): for
    /// context put in front of an agent unasked.
    pub apply_trust: bool,
}

/// What a recall may return. Empty lists mean "any".
#[derive(Debug, Clone, Default)]
pub struct RecallFilters {
    /// `Chunk`, `Memory` or both.
    pub kinds: Vec<ItemKind>,
    /// Memories of these types only.
    pub types: Vec<MemoryType>,
    /// Memories in these scopes only.
    pub scopes: Vec<MemoryScope>,
    /// Memories in these share scopes only (personal, project, team, organization).
    pub share_scopes: Vec<ShareScope>,
    /// Chunks in these files or directories, memories related to a file in them.
    pub files: Vec<String>,
    /// Chunks under these module directories (`src/auth/`), memories naming one of them or
    /// related to a file under one.
    pub modules: Vec<String>,
    /// Memories whose current (decayed) confidence is at least this.
    pub min_confidence: Option<f64>,
    /// Also memories marked stale (their code changed since they were written).
    pub include_stale: bool,
}

/// Which stages of the pipeline run; everything but the boost by default. Switching a stage
/// off is how the ablations are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stages {
    /// Stage 1: BM25 over chunks and memories.
    pub keyword: bool,
    /// Stage 1: vector similarity (skipped, and reported, when no model is available).
    pub dense: bool,
    /// Stage 1: neighbours of the recent files in the graph, memories attached to them.
    pub graph: bool,
    /// Stage 2: the graph neighbourhood boost (off by default: it did not help on the dev
    /// evaluation).
    pub boost: bool,
    /// Stage 2: a memory's standing (phase, source, decayed confidence, use).
    pub scoring: bool,
    /// Stage 3: the configured reranker (none is configured by default).
    pub rerank: bool,
    /// Stage 4: the packed context (off: `context` is empty, items are still ranked).
    pub packing: bool,
    /// Stage 1: correcting misspelt terms when exact BM25 finds too little.
    pub typo: bool,
    /// Stage 2: the cascade, a walk from the top hits over files, code edges and memory
    /// relations whose finds join the fusion (`cascade`).
    pub cascade: bool,
}

impl Default for Stages {
    fn default() -> Self {
        Stages {
            keyword: true,
            dense: true,
            graph: true,
            boost: false,
            scoring: true,
            rerank: true,
            packing: true,
            typo: true,
            cascade: false,
        }
    }
}

impl RecallRequest {
    /// A request for `query` with every default.
    pub fn new(query: impl Into<String>) -> Self {
        RecallRequest {
            query: query.into(),
            ..RecallRequest::default()
        }
    }

    /// Checks the request and normalises paths against `root`; `ENGRAM_INVALID_ARG` naming
    /// the field at fault.
    pub(crate) fn validated(mut self, root: Option<&Path>) -> Result<RecallRequest> {
        if self.query.len() > MAX_QUERY_BYTES {
            return Err(Error::invalid(format!(
                "query is {} bytes; at most {MAX_QUERY_BYTES} are accepted",
                self.query.len()
            )));
        }
        if let Some(limit) = self.limit {
            if !(1..=MAX_RECALL_LIMIT).contains(&limit) {
                return Err(Error::invalid(format!(
                    "limit must be between 1 and {MAX_RECALL_LIMIT}, got {limit}"
                )));
            }
        }
        if let Some(depth) = self.rerank_depth {
            let max = super::rerank::MAX_RERANK_DEPTH;
            if !(1..=max).contains(&depth) {
                return Err(Error::invalid(format!(
                    "rerankDepth must be between 1 and {max}, got {depth}"
                )));
            }
        }
        if let Some(budget) = self.budget_tokens {
            if !(1..=MAX_BUDGET_TOKENS).contains(&budget) {
                return Err(Error::invalid(format!(
                    "budgetTokens must be between 1 and {MAX_BUDGET_TOKENS}, got {budget}"
                )));
            }
        }
        if let Some(session) = &self.session_id {
            let trimmed = session.trim();
            if trimmed.is_empty() || trimmed.len() > 256 {
                return Err(Error::invalid("sessionId must be 1 to 256 bytes"));
            }
            self.session_id = Some(trimmed.to_owned());
        }
        if let Some(c) = self.filters.min_confidence {
            if !(0.0..=1.0).contains(&c) {
                return Err(Error::invalid(format!(
                    "minConfidence must be between 0 and 1, got {c}"
                )));
            }
        }
        self.recent_files.truncate(MAX_RECENT);
        self.recent_tool_calls.truncate(MAX_RECENT);
        self.recent_files = confine_all(&self.recent_files, root, "recentFiles")?;
        self.filters.files = confine_all(&self.filters.files, root, "filters.files")?;
        self.filters.modules = confine_all(&self.filters.modules, root, "filters.modules")?;
        Ok(self)
    }

    /// The limit in effect.
    pub fn limit_or_default(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_RECALL_LIMIT) as usize
    }
}

/// Project-relative forms of `paths`, without trailing slashes, duplicates dropped.
fn confine_all(paths: &[String], root: Option<&Path>, field: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(paths.len());
    for path in paths {
        let relative = confine_path(path, root)
            .map_err(|e| Error::invalid(format!("{field}: {e}")))?
            .trim_end_matches('/')
            .to_owned();
        if !relative.is_empty() && !out.contains(&relative) {
            out.push(relative);
        }
    }
    Ok(out)
}

/// Whether `path` is one of `prefixes` or lies under one of them (as a directory).
pub(crate) fn under_any(path: &str, prefixes: &[String]) -> bool {
    prefixes.iter().any(|p| {
        path == p
            || (path.len() > p.len()
                && path.starts_with(p.as_str())
                && path[p.len()..].starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_and_out_of_range_requests_are_refused() {
        let code = |r: RecallRequest| r.validated(None).unwrap_err().code();
        // A blank query is valid (it finds nothing, like search's).
        assert!(RecallRequest::new("  ").validated(None).is_ok());
        assert_eq!(
            code(RecallRequest::new("x".repeat(MAX_QUERY_BYTES + 1))),
            "ENGRAM_INVALID_ARG"
        );
        let mut r = RecallRequest::new("q");
        r.limit = Some(0);
        assert_eq!(code(r), "ENGRAM_INVALID_ARG");
        let mut r = RecallRequest::new("q");
        r.budget_tokens = Some(MAX_BUDGET_TOKENS + 1);
        assert_eq!(code(r), "ENGRAM_INVALID_ARG");
        let mut r = RecallRequest::new("q");
        r.rerank_depth = Some(0);
        assert_eq!(code(r), "ENGRAM_INVALID_ARG");
        let mut r = RecallRequest::new("q");
        r.filters.min_confidence = Some(1.5);
        assert_eq!(code(r), "ENGRAM_INVALID_ARG");
    }

    #[test]
    fn paths_are_confined_to_the_root_and_normalised() {
        let root = Path::new("/repo");
        let mut r = RecallRequest::new("q");
        r.recent_files = vec![
            "/repo/src/a.ts".into(),
            "./src/a.ts".into(),
            "src/b/".into(),
        ];
        let r = r.validated(Some(root)).unwrap();
        assert_eq!(r.recent_files, vec!["src/a.ts", "src/b"]);
        let mut r = RecallRequest::new("q");
        r.filters.files = vec!["/elsewhere/x.ts".into()];
        let err = r.validated(Some(root)).unwrap_err();
        assert!(err.to_string().contains("filters.files"), "{err}");
        let mut r = RecallRequest::new("q");
        r.recent_files = vec!["../outside.ts".into()];
        assert!(r.validated(Some(root)).is_err());
    }

    #[test]
    fn under_any_matches_files_and_directories_only_at_separators() {
        let prefixes = vec!["src/auth".to_owned(), "lib/x.ts".to_owned()];
        assert!(under_any("src/auth/login.ts", &prefixes));
        assert!(under_any("lib/x.ts", &prefixes));
        assert!(!under_any("src/authz/login.ts", &prefixes));
        assert!(!under_any("lib/x.tsx", &prefixes));
    }
}
