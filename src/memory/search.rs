//! Keyword search over memories: FTS5 with BM25 ranking, built from user text by the safe
//! query builder. Implicit AND first; when AND finds too little, an OR of the query's
//! distinctive terms fills the rest of the page (AND hits always rank first).

use std::sync::LazyLock;

use libsql::{params_from_iter, Value};

use super::model::Memory;
use super::read::{push_filters, ListFilter};
use super::rows::{from_row, COLUMN_COUNT, SELECT_M};
use super::Ctx;
use crate::error::{DbContext, Error, Result};
use crate::store::Reader;
use crate::text::fts_query::FtsQuery;

/// How terms combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SearchMode {
    /// AND, then an OR of the distinctive terms (those in at most 1,000 memories, or the
    /// rarest) to fill the page when AND finds fewer than half of `limit`.
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
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// Maximum hits (default 10, at most 200).
    pub limit: Option<u32>,
    /// How terms combine.
    pub mode: SearchMode,
    /// The same filters as `list` (order, limit and offset of the filter are ignored).
    pub filter: ListFilter,
    /// When fewer than half of `limit` hits match every term, search once more with the words
    /// no index holds corrected to the closest indexed terms (default true). Applied by the
    /// handle's `search` (`retrieval::typo`), which knows the code index's words too.
    pub typo: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            limit: None,
            mode: SearchMode::default(),
            filter: ListFilter::default(),
            typo: true,
        }
    }
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
    /// The query this hit was found with, when that was the typo-corrected one.
    pub corrected_query: Option<String>,
}

/// Default number of hits.
pub const DEFAULT_SEARCH_LIMIT: u32 = 10;
/// Largest `limit` accepted.
pub const MAX_SEARCH_LIMIT: u32 = 200;

/// Column weights for bm25(): content, tags, related_files. Tags are deliberate labels, so a
/// tag hit counts more than a word in passing.
const BM25: &str = "bm25(memories_fts, 1.0, 2.0, 1.0)";

/// The fast path ranks this many times `limit` in the FTS index alone before filtering.
const OVERFETCH: u32 = 4;

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
    let mut conn = ctx.store.reader().await;
    let (first, fallback) = match options.mode {
        SearchMode::All => (query.and_expr(), None),
        SearchMode::Any => (query.or_expr(), None),
        SearchMode::Auto => (
            query.and_expr(),
            query.has_alternatives().then(|| query.clone()),
        ),
    };
    let mut hits = run(ctx, &mut conn, &first, options, limit).await?;
    for hit in &mut hits {
        hit.matched_all = options.mode != SearchMode::Any;
    }
    let too_few = (hits.len() as u32) < (limit / 2).max(1);
    let fallback = match fallback.filter(|_| too_few) {
        Some(query) => Some(distinctive(&mut conn, &query).await?.or_expr()),
        None => None,
    };
    // The OR matches a superset of the AND, so asking it for `limit` rows always yields
    // enough new ones to fill the page.
    //
    // Measured alternative, rejected: a ladder of "at least k of n terms" levels between AND
    // and OR. It helps only when every term is in a large share of the index (5-word OR
    // over a uniform 130-word corpus: 15 ms); on a realistic Zipf corpus it doubled p50,
    // since bm25() scans each repeated phrase of the expanded expression.
    if let Some(expr) = fallback {
        for hit in run(ctx, &mut conn, &expr, options, limit).await? {
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

/// One ranked query: the top `limit` memories of the project matching `expr` and the filter.
async fn run(
    ctx: &Ctx<'_>,
    conn: &mut Reader<'_>,
    expr: &str,
    options: &SearchOptions,
    limit: u32,
) -> Result<Vec<SearchHit>> {
    if is_broad(&options.filter) {
        // Fast path: rank in the FTS index alone (no table lookup per match, which dominated
        // for common terms), then filter the top few. Correct whenever the filter keeps
        // `limit` of the over-fetched rows, which a broad filter almost always does; when it
        // does not and the ranking was truncated, the joined query decides. Both statements
        // are fixed, so they run from the reader's statement cache.
        let fetch = limit * OVERFETCH;
        let ranked = conn
            .query_cached(&RANK_IN_INDEX, libsql::params![expr, fetch as i64], |row| {
                Ok((
                    row.get::<i64>(0).ctx("reading rowid")?,
                    row.get::<f64>(1).ctx("reading score")?,
                ))
            })
            .await?;
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        let ranked_json = serde_json::to_string(&ranked)
            .map_err(|e| Error::Internal(format!("encoding ranked hits: {e}")))?;
        let sql: &'static str = if options.filter.include_forgotten {
            &FETCH_RANKED_ANY
        } else {
            &FETCH_RANKED_ACTIVE
        };
        let hits = conn
            .query_cached(
                sql,
                libsql::params![ranked_json, ctx.project_id, limit as i64],
                hit_from_row,
            )
            .await?;
        if hits.len() as u32 >= limit || (ranked.len() as u32) < fetch {
            return Ok(hits);
        }
    }
    rank_joined(ctx, conn, expr, options, limit).await
}

/// A term in more memories than this is left out of the OR fill when rarer ones remain (see
/// [`FtsQuery::distinctive`]): scoring a thousand matches costs well under a millisecond,
/// while a word in a fifth of 10,000 memories made a 5-word fill cost 10-17 ms in recall.
const COMMON_TERM_MEMORIES: u64 = 1000;

/// The query reduced to its distinctive terms for the OR fill.
async fn distinctive(conn: &mut Reader<'_>, query: &FtsQuery) -> Result<FtsQuery> {
    let mut frequencies = Vec::with_capacity(query.positive.len());
    for expr in query.term_exprs() {
        frequencies.push(document_frequency(conn, &expr).await?);
    }
    Ok(query.distinctive(&frequencies, COMMON_TERM_MEMORIES))
}

/// How many memories (of every project, forgotten ones too) match the FTS5 expression `expr`.
pub(crate) async fn document_frequency(reader: &mut Reader<'_>, expr: &str) -> Result<u64> {
    const COUNT: &str = "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1";
    Ok(reader
        .query_integer(COUNT, libsql::params![expr])
        .await?
        .max(0) as u64)
}

/// True when the filter only scopes by project and forgotten state, so that most index
/// matches pass it.
fn is_broad(f: &ListFilter) -> bool {
    f.types.is_empty()
        && f.scopes.is_empty()
        && f.sources.is_empty()
        && f.share_scopes.is_empty()
        && f.tags.is_empty()
        && f.related_file.is_none()
        && f.needs_review.is_none()
        && f.pinned.is_none()
        && f.min_confidence.is_none()
        && !f.only_forgotten
}

/// `(seq, bm25)` of the best `?2` index matches of `?1`, best first.
static RANK_IN_INDEX: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT rowid, {BM25} AS score FROM memories_fts WHERE memories_fts MATCH ?1
         ORDER BY score LIMIT ?2 + 0"
    )
});

/// Full rows of the first `?3` of the ranked `(seq, bm25)` list `?1` (JSON) that are in
/// project `?2` (and not forgotten, unless `include_forgotten`), best first. CROSS JOIN
/// pins the join order: walk the ranked list and look each row up by primary key. Left to
/// itself the planner scanned the project index and probed the list per row (2.3 ms instead
/// of 0.2 ms at 10k memories). Filtering and the cut happen before any wide row is decoded.
fn fetch_ranked_sql(deprecated: &str) -> String {
    format!(
        "SELECT {}, top.score FROM (
           SELECT m.seq AS seq, j.value ->> 1 AS score FROM json_each(?1) AS j
           CROSS JOIN memories m ON m.seq = j.value ->> 0
           WHERE m.project_id = ?2 {deprecated} ORDER BY j.key LIMIT ?3 + 0) AS top
         CROSS JOIN memories m ON m.seq = top.seq
         ORDER BY top.score",
        *SELECT_M
    )
}

static FETCH_RANKED_ACTIVE: LazyLock<String> =
    LazyLock::new(|| fetch_ranked_sql("AND m.deprecated = 0"));
static FETCH_RANKED_ANY: LazyLock<String> = LazyLock::new(|| fetch_ranked_sql(""));

/// Ranking joined with the memories table: exact for any filter, but it looks up every
/// match's row.
async fn rank_joined(
    ctx: &Ctx<'_>,
    conn: &libsql::Connection,
    expr: &str,
    options: &SearchOptions,
    limit: u32,
) -> Result<Vec<SearchHit>> {
    let mut top = format!(
        "SELECT m.seq AS seq, {BM25} AS score
         FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid
         WHERE memories_fts MATCH ?1 AND m.project_id = ?2"
    );
    let mut args = vec![
        Value::Text(expr.to_owned()),
        Value::Text(ctx.project_id.to_owned()),
    ];
    push_filters(&options.filter, &mut top, &mut args);
    args.push(Value::Integer(limit as i64));
    top.push_str(&format!(" ORDER BY score LIMIT ?{}", args.len()));
    hits_for(conn, &top, args).await
}

/// Full rows for `top`, a query of `(seq, score)` with bm25 scores (lower is better), as hits
/// best first. Fetching rows only after the bounded sort keeps the sorter from carrying
/// every column of every match.
async fn hits_for(
    conn: &libsql::Connection,
    top: &str,
    args: Vec<Value>,
) -> Result<Vec<SearchHit>> {
    let sql = format!(
        "SELECT {}, top.score FROM ({top}) AS top CROSS JOIN memories m ON m.seq = top.seq
         ORDER BY top.score",
        *SELECT_M
    );
    let mut rows = conn
        .query(&sql, params_from_iter(args))
        .await
        .ctx("searching memories")?;
    let mut hits = Vec::new();
    while let Some(row) = rows.next().await.ctx("searching memories")? {
        hits.push(hit_from_row(&row)?);
    }
    Ok(hits)
}

/// A memory row followed by its bm25 score (lower is better) as a hit.
fn hit_from_row(row: &libsql::Row) -> Result<SearchHit> {
    let bm25: f64 = row.get(COLUMN_COUNT).ctx("reading score")?;
    Ok(SearchHit {
        memory: from_row(row)?,
        score: -bm25,
        matched_all: false,
        corrected_query: None,
    })
}
