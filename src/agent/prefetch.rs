//! The coder's predictive prefetch plan (seed 003 section 9, "Coder: predictive pre-loading";
//! injection point 2): the files that past sessions working in these modules read, to load
//! into the agent's first message before it asks for them.
//!
//! The observer keeps, per project, in how many finalized sessions each file was read
//! (`observer_signal_counts`, signal `file_access`) and how many sessions read anything in each
//! module (`session_module`). A file's share is the first over the second for its own module
//! (its directory). Files read in more than 80% of their module's sessions form the first tier
//! (`always`), more than 50% the second (`usually`); a file needs the file-access signal's own
//! minimum of sessions (3), so one session's reads never make a plan.
//!
//! Only files the code index holds are planned, sized by it: a file it does not hold (deleted,
//! ignored such as `.env`, never indexed) or skipped (binary, too large) is left out, so an
//! ignored file an agent read never reaches a prompt. Packing: the first tier, then the second,
//! each by share, then sessions, then path; a file that does not fit the budget left is omitted
//! and a later, smaller one may still fit; at most `max_files`. With `with_content`, each
//! planned file is read from the project root (confined to it, at most the budget left, text
//! only, through the privacy filter) and measured by what was read.

use std::collections::HashMap;
use std::path::Path;

use libsql::params;

use super::modules;
use crate::code::analyze::looks_binary;
use crate::code::chunk::estimate_tokens;
use crate::error::{DbContext, Error, Result};
use crate::graph::module_layer::module_of;
use crate::memory::privacy::redact;
use crate::memory::Ctx;
use crate::observer::promote::MODULE_SESSIONS;
use crate::observer::signals::Signal;

/// Tokens a plan may use when the request names none (the seed's "~25% of context").
pub const DEFAULT_BUDGET_TOKENS: u32 = 32_000;
/// Largest budget accepted.
pub const MAX_BUDGET_TOKENS: u32 = 1_000_000;
/// Files a plan holds when the request names no limit (the seed's 12).
pub const DEFAULT_MAX_FILES: u32 = 12;
/// Largest `max_files` accepted.
pub const MAX_FILES: u32 = 200;
/// Share of its module's sessions above which a file is in the first tier.
pub const ALWAYS_SHARE: f64 = 0.8;
/// Share of its module's sessions above which a file is in the second tier.
pub const USUALLY_SHARE: f64 = 0.5;

/// What a prefetch plan is asked for.
#[derive(Debug, Clone, Default)]
pub struct PrefetchRequest {
    /// Module directories (`src/auth/`) the session will work in; none: the whole project.
    pub modules: Vec<String>,
    /// Tokens the planned files may use (1..=1,000,000, default [`DEFAULT_BUDGET_TOKENS`]).
    pub budget_tokens: Option<u32>,
    /// Most files (1..=200, default [`DEFAULT_MAX_FILES`]).
    pub max_files: Option<u32>,
    /// Read each planned file's text from the project root (needs one).
    pub with_content: bool,
}

/// How often past sessions in its module read a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// In more than 80% of them: loaded first.
    Always,
    /// In more than 50% of them.
    Usually,
}

impl Tier {
    /// `always` or `usually`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Always => "always",
            Tier::Usually => "usually",
        }
    }
}

/// A file in the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefetchFile {
    /// Relative to the project root.
    pub path: String,
    /// Its module (directory, `/`-terminated).
    pub module: String,
    /// Its tier.
    pub tier: Tier,
    /// Share of the module's sessions that read it (0..=1).
    pub share: f64,
    /// Sessions that read it.
    pub sessions: u32,
    /// Sessions that read anything in its module.
    pub module_sessions: u32,
    /// Its estimated tokens.
    pub tokens: u32,
    /// Its text, when asked for.
    pub content: Option<String>,
}

/// Why a frequently read file is not in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OmitReason {
    /// It does not fit the budget left.
    Budget,
    /// The plan already holds `max_files`.
    MaxFiles,
    /// The code index does not hold it (deleted, ignored, never indexed), or it is gone from
    /// disk.
    Missing,
    /// It could not be read as text.
    Unreadable,
}

impl OmitReason {
    /// `budget`, `max_files`, `missing` or `unreadable`.
    pub fn as_str(self) -> &'static str {
        match self {
            OmitReason::Budget => "budget",
            OmitReason::MaxFiles => "max_files",
            OmitReason::Missing => "missing",
            OmitReason::Unreadable => "unreadable",
        }
    }
}

/// A tiered file left out of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct OmittedFile {
    /// Relative to the project root.
    pub path: String,
    /// Its tier.
    pub tier: Tier,
    /// Why.
    pub reason: OmitReason,
}

/// The files to load before a session starts, in loading order.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefetchPlan {
    /// The planned files: the first tier, then the second.
    pub files: Vec<PrefetchFile>,
    /// Tiered files left out, in the order they were considered.
    pub omitted: Vec<OmittedFile>,
    /// Tokens the planned files use.
    pub used_tokens: u32,
    /// The budget packed to.
    pub budget_tokens: u32,
}

/// A tiered file before packing.
struct Candidate {
    path: String,
    module: String,
    tier: Tier,
    share: f64,
    sessions: u32,
    module_sessions: u32,
}

/// Builds the plan for `request` from the observer's counts in `ctx`'s project.
pub(crate) async fn plan(ctx: &Ctx<'_>, request: PrefetchRequest) -> Result<PrefetchPlan> {
    let budget = super::bounded(
        "budgetTokens",
        request.budget_tokens,
        DEFAULT_BUDGET_TOKENS,
        MAX_BUDGET_TOKENS,
    )?;
    let max_files = super::bounded("maxFiles", request.max_files, DEFAULT_MAX_FILES, MAX_FILES)?;
    let module_keys = modules::normalised(&request.modules, ctx.project_root)?;
    let root = match (request.with_content, ctx.project_root) {
        (true, None) => {
            return Err(Error::invalid(
                "withContent needs the handle to be opened with projectRoot",
            ))
        }
        (_, root) => root,
    };

    let candidates = tiered(ctx, &module_keys).await?;
    let sizes = indexed_sizes(ctx, &candidates).await?;
    let mut plan = PrefetchPlan {
        files: Vec::new(),
        omitted: Vec::new(),
        used_tokens: 0,
        budget_tokens: budget,
    };
    for c in candidates {
        let omit = |plan: &mut PrefetchPlan, reason| {
            plan.omitted.push(OmittedFile {
                path: c.path.clone(),
                tier: c.tier,
                reason,
            })
        };
        if plan.files.len() as u32 >= max_files {
            omit(&mut plan, OmitReason::MaxFiles);
            continue;
        }
        // Sized before anything is read: a file over the budget left is never opened.
        let mut tokens = match size(sizes.get(&c.path)) {
            Ok(tokens) => tokens,
            Err(reason) => {
                omit(&mut plan, reason);
                continue;
            }
        };
        let left = budget - plan.used_tokens;
        if tokens > left {
            omit(&mut plan, OmitReason::Budget);
            continue;
        }
        let mut content = None;
        if let Some(root) = root.filter(|_| request.with_content) {
            match read_confined(root, &c.path, u64::from(left) * 4) {
                Ok(text) => {
                    // The file may have changed since it was indexed: what was read counts.
                    tokens = token_count(text.len() as u64);
                    content = Some(text);
                }
                Err(reason) => {
                    omit(&mut plan, reason);
                    continue;
                }
            }
            if tokens > left {
                omit(&mut plan, OmitReason::Budget);
                continue;
            }
        }
        plan.used_tokens += tokens;
        plan.files.push(PrefetchFile {
            path: c.path,
            module: c.module,
            tier: c.tier,
            share: c.share,
            sessions: c.sessions,
            module_sessions: c.module_sessions,
            tokens,
            content,
        });
    }
    Ok(plan)
}

/// The files of `modules` read often enough to be in a tier, in packing order.
async fn tiered(ctx: &Ctx<'_>, modules: &[String]) -> Result<Vec<Candidate>> {
    const SQL: &str = "SELECT signal, key, session_count FROM observer_signal_counts
        WHERE project_id = ?1 AND (signal = ?2 AND session_count >= ?3 OR signal = ?4)";
    let mut reader = ctx.store.reader().await;
    let rows = reader
        .query_cached(
            SQL,
            params![
                ctx.project_id,
                Signal::FileAccess.as_str(),
                i64::from(Signal::FileAccess.min_sessions()),
                MODULE_SESSIONS
            ],
            |row| {
                let signal: String = row.get(0).ctx("reading the observer's counts")?;
                let key: String = row.get(1).ctx("reading the observer's counts")?;
                let sessions: i64 = row.get(2).ctx("reading the observer's counts")?;
                Ok((
                    signal == MODULE_SESSIONS,
                    key,
                    sessions.clamp(0, 1 << 31) as u32,
                ))
            },
        )
        .await?;
    let module_sessions: HashMap<&str, u32> = rows
        .iter()
        .filter(|(is_module, ..)| *is_module)
        .map(|(_, key, n)| (key.as_str(), *n))
        .collect();
    let mut out = Vec::new();
    for (is_module, path, sessions) in &rows {
        if *is_module || !modules::covers(modules, path) {
            continue;
        }
        let Some(module) = module_of(path) else {
            continue; // a file at the root has no module to be typical of
        };
        // A module counts every session that read in it; never fewer than one file's.
        let of = module_sessions
            .get(module.as_str())
            .copied()
            .unwrap_or(0)
            .max(*sessions);
        let share = f64::from(*sessions) / f64::from(of.max(1));
        let tier = if share > ALWAYS_SHARE {
            Tier::Always
        } else if share > USUALLY_SHARE {
            Tier::Usually
        } else {
            continue;
        };
        out.push(Candidate {
            path: path.clone(),
            module,
            tier,
            share,
            sessions: *sessions,
            module_sessions: of,
        });
    }
    out.sort_by(|a, b| {
        a.tier
            .cmp(&b.tier)
            .then(b.share.total_cmp(&a.share))
            .then(b.sessions.cmp(&a.sessions))
            .then(a.path.cmp(&b.path))
    });
    Ok(out)
}

/// What the code index knows of the candidates: `Some(bytes)` for an indexed file, `None` for
/// one it skipped (binary, too large, unreadable).
async fn indexed_sizes(
    ctx: &Ctx<'_>,
    candidates: &[Candidate],
) -> Result<HashMap<String, Option<u64>>> {
    const SQL: &str = "SELECT path, size_bytes, language IS NOT NULL FROM code_files
        WHERE project_id = ?1 AND path IN (SELECT value FROM json_each(?2))";
    if candidates.is_empty() {
        return Ok(HashMap::new());
    }
    let paths: Vec<&str> = candidates.iter().map(|c| c.path.as_str()).collect();
    let json = serde_json::to_string(&paths).map_err(|e| Error::Internal(e.to_string()))?;
    let mut reader = ctx.store.reader().await;
    let rows = reader
        .query_cached(SQL, params![ctx.project_id, json], |row| {
            let path: String = row.get(0).ctx("reading the code index")?;
            let bytes: i64 = row.get(1).ctx("reading the code index")?;
            let indexed: bool = row.get(2).ctx("reading the code index")?;
            Ok((path, indexed.then_some(bytes.max(0) as u64)))
        })
        .await?;
    Ok(rows.into_iter().collect())
}

/// A candidate's tokens from the code index's size for it; or why it cannot be planned. Only
/// indexed files are planned: what the index leaves out (ignored files such as `.env`, files
/// gone since) never reaches a prompt.
fn size(indexed: Option<&Option<u64>>) -> std::result::Result<u32, OmitReason> {
    match indexed {
        Some(Some(bytes)) => Ok(token_count(*bytes)),
        Some(None) => Err(OmitReason::Unreadable),
        None => Err(OmitReason::Missing),
    }
}

/// Tokens of a file of `bytes` bytes (the chunker's estimate).
fn token_count(bytes: u64) -> u32 {
    estimate_tokens(usize::try_from(bytes).unwrap_or(usize::MAX)).min(u32::MAX as usize) as u32
}

/// The text of `path` under `root` through the privacy filter, refusing anything that
/// resolves outside the root (a symlink pointing away), is not a regular file, is bigger than
/// `max_bytes` (it grew past the budget left since it was indexed) or is not UTF-8 text. A
/// small blocking read (at most the budget's bytes), like the indexer's own.
fn read_confined(
    root: &Path,
    path: &str,
    max_bytes: u64,
) -> std::result::Result<String, OmitReason> {
    let full = std::fs::canonicalize(root.join(path)).map_err(|_| OmitReason::Missing)?;
    if !full.starts_with(root) {
        return Err(OmitReason::Missing);
    }
    let len = std::fs::metadata(&full)
        .map_err(|_| OmitReason::Missing)?
        .len();
    if len > max_bytes {
        return Err(OmitReason::Budget);
    }
    let bytes = crate::file_read::read_regular(&full, max_bytes, "a prefetched file")
        .map_err(|_| OmitReason::Unreadable)?;
    if looks_binary(&bytes) {
        return Err(OmitReason::Unreadable);
    }
    let text = String::from_utf8(bytes).map_err(|_| OmitReason::Unreadable)?;
    let redacted = redact(&text);
    Ok(if redacted.count > 0 {
        redacted.text
    } else {
        text
    })
}
