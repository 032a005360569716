//! Keyword search over memories: FTS5 with BM25 ranking, built from user text by the safe
//! query builder. Implicit AND first; when AND finds too little, an OR query fills the rest
//! of the page (AND hits always rank first).

use libsql::{params_from_iter, Value};

use super::model::Memory;
use super::read::{push_filters, ListFilter};
use super::rows::{from_row, COLUMN_COUNT, SELECT_M};
use super::Ctx;
use crate::error::{DbContext, Error, Result};
use crate::retrieval::fts_query::FtsQuery;

/// How terms combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SearchMode {
    /// AND, then OR to fill the page when AND finds fewer than half of `limit`.
    #[default]
    Auto,
    /// Every term must match.
    All,
    /// Any term may match.
    Any,
}

impl SearchMode {
    /// Parses `auto | all | any`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(SearchMode::Auto),
            "all" => Ok(SearchMode::All),
            "any" => Ok(SearchMode::Any),
            other => Err(Error::invalid(format!(
                "unknown search mode {other:?}; expected one of: auto, all, any"
            ))),
        }
    }
}

/// Options of `search`.
#[derive(Debug, Clone, Default)]
pub struct SearchOptions {
    /// Maximum hits (default 10, at most 200).
    pub limit: Option<u32>,
    /// How terms combine.
    pub mode: SearchMode,
    /// The same filters as `list` (order, limit and offset of the filter are ignored).
    pub filter: ListFilter,
}

/// One search result.
#[derive(Debug, Clone)]
pub struct SearchHit {
    /// The memory.
    pub memory: Memory,
    /// BM25 relevance, higher is better (the negated FTS5 `bm25()`).
    pub score: f64,
    /// True when every query term matched (the AND pass), false for OR-fallback hits.
    pub matched_all: bool,
}

/// Default number of hits.
pub const DEFAULT_SEARCH_LIMIT: u32 = 10;
/// Largest `limit` accepted.
pub const MAX_SEARCH_LIMIT: u32 = 200;

/// Column weights for bm25(): content, tags, related_files. Tags are deliberate labels, so a
/// tag hit counts more than a word in passing.
const BM25: &str = "bm25(memories_fts, 1.0, 2.0, 1.0)";

pub(crate) async fn search(
    ctx: &Ctx<'_>,
    text: &str,
    options: &SearchOptions,
) -> Result<Vec<SearchHit>> {
    let limit = options.limit.unwrap_or(DEFAULT_SEARCH_LIMIT);
    if limit == 0 || limit > MAX_SEARCH_LIMIT {
        return Err(Error::invalid(format!(
            "limit must be between 1 and {MAX_SEARCH_LIMIT}, got {limit}"
        )));
    }
    if let Some(c) = options.filter.min_confidence {
        ctx.validator().unit("minConfidence", c)?;
    }
    let Some(query) = FtsQuery::parse(text) else {
        return Ok(Vec::new());
    };
    let conn = ctx.store.reader().await;
    let first_all = options.mode != SearchMode::Any;
    let first = if first_all {
        query.and_expr()
    } else {
        query.or_expr()
    };
    let mut hits = run(ctx, &conn, &first, options, limit, first_all).await?;

    let too_few = (hits.len() as u32) < (limit / 2).max(1);
    if options.mode == SearchMode::Auto && too_few && query.has_alternatives() {
        let more = run(ctx, &conn, &query.or_expr(), options, limit, false).await?;
        for hit in more {
            if hits.len() as u32 >= limit {
                break;
            }
            if !hits.iter().any(|h| h.memory.id == hit.memory.id) {
                hits.push(hit);
            }
        }
    }
    Ok(hits)
}

async fn run(
    ctx: &Ctx<'_>,
    conn: &libsql::Connection,
    expr: &str,
    options: &SearchOptions,
    limit: u32,
    matched_all: bool,
) -> Result<Vec<SearchHit>> {
    // Two phases: rank (rowid, score) with a bounded sort, then fetch full rows for the top
    // hits only. Sorting whole rows made the sorter carry every column of every match.
    let mut inner = format!(
        "SELECT m.seq AS seq, {BM25} AS score
         FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid
         WHERE memories_fts MATCH ?1 AND m.project_id = ?2"
    );
    let mut args = vec![
        Value::Text(expr.to_owned()),
        Value::Text(ctx.project_id.to_owned()),
    ];
    push_filters(&options.filter, &mut inner, &mut args);
    args.push(Value::Integer(limit as i64));
    inner.push_str(&format!(" ORDER BY score LIMIT ?{}", args.len()));
    let sql = format!(
        "WITH top AS ({inner}) SELECT {}, top.score FROM top JOIN memories m ON m.seq = top.seq ORDER BY top.score",
        *SELECT_M
    );
    let mut rows = conn
        .query(&sql, params_from_iter(args))
        .await
        .ctx("searching memories")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("searching memories")? {
        let bm25: f64 = row.get(COLUMN_COUNT).ctx("reading score")?;
        out.push(SearchHit {
            memory: from_row(&row)?,
            score: -bm25,
            matched_all,
        });
    }
    Ok(out)
}
