//! Read operations: `get`, `list` with filters, `history`, `stats`. They run on pooled read
//! connections, concurrently with each other and with the writer (WAL).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use libsql::{params, params_from_iter, Value};

use super::model::{Memory, MemoryScope, MemorySource, MemoryType, ShareScope};
use super::rows::{from_row, SELECT_BY_ID, SELECT_M};
use super::Ctx;
use crate::error::{DbContext, Error, Result};

/// Filters and paging for `list`. Empty lists mean "any".
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only these types.
    pub types: Vec<MemoryType>,
    /// Only these scopes.
    pub scopes: Vec<MemoryScope>,
    /// Only these sources.
    pub sources: Vec<MemorySource>,
    /// Only these share scopes (personal, project, team, organization).
    pub share_scopes: Vec<ShareScope>,
    /// Memories carrying at least one of these tags.
    pub tags: Vec<String>,
    /// Memories related to this file (path relative to the project root).
    pub related_file: Option<String>,
    /// Only memories with this review flag.
    pub needs_review: Option<bool>,
    /// Only memories with this pin flag.
    pub pinned: Option<bool>,
    /// Only memories with stored confidence >= this.
    pub min_confidence: Option<f64>,
    /// Include forgotten (archived) memories.
    pub include_forgotten: bool,
    /// Only forgotten memories.
    pub only_forgotten: bool,
    /// Sort order (default newest first).
    pub order: ListOrder,
    /// Page size (default 50, at most 1000).
    pub limit: Option<u32>,
    /// Rows to skip.
    pub offset: Option<u32>,
}

/// How `list` sorts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ListOrder {
    /// Newest created first.
    #[default]
    Created,
    /// Most recently changed first.
    Updated,
    /// Highest stored confidence first.
    Confidence,
    /// Most recently accessed first.
    Accessed,
}

impl ListOrder {
    /// Parses `created | updated | confidence | accessed`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "created" => Ok(ListOrder::Created),
            "updated" => Ok(ListOrder::Updated),
            "confidence" => Ok(ListOrder::Confidence),
            "accessed" => Ok(ListOrder::Accessed),
            other => Err(Error::invalid(format!(
                "unknown order {other:?}; expected one of: created, updated, confidence, accessed"
            ))),
        }
    }

    fn sql(self) -> &'static str {
        match self {
            ListOrder::Created => "m.created_at DESC, m.seq DESC",
            ListOrder::Updated => "m.updated_at DESC, m.seq DESC",
            ListOrder::Confidence => "m.confidence DESC, m.seq DESC",
            ListOrder::Accessed => "m.last_accessed_at DESC, m.seq DESC",
        }
    }
}

/// Default and maximum page sizes of `list`.
pub const DEFAULT_LIST_LIMIT: u32 = 50;
/// Largest page `list` returns.
pub const MAX_LIST_LIMIT: u32 = 1000;

/// A past state of a memory.
#[derive(Debug, Clone)]
pub struct MemoryVersion {
    /// The version number this state had.
    pub version: u32,
    /// The change that ended it (`update`, `reinforce`, `forget`, `rollback`), or `current`.
    pub ended_by: String,
    /// When it ended (ms); for the current state, when it began.
    pub ended_at: i64,
    /// The memory as it was.
    pub memory: Memory,
}

/// Counts for dashboards and the CLI.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// All memories of the project, forgotten included.
    pub total: u64,
    /// Not forgotten.
    pub active: u64,
    /// Forgotten (archived).
    pub forgotten: u64,
    /// Active and waiting for review.
    pub needs_review: u64,
    /// Active and pinned.
    pub pinned: u64,
    /// Active memories whose text had secrets redacted.
    pub with_redactions: u64,
    /// Active memories per type.
    pub by_type: BTreeMap<String, u64>,
    /// Past versions stored for the project's memories.
    pub versions: u64,
}

/// Appends SQL conditions for `filter` to `sql`, pushing parameters to `args`.
/// Only ever appends placeholders; every value is bound.
pub(crate) fn push_filters(filter: &ListFilter, sql: &mut String, args: &mut Vec<Value>) {
    fn any_of(sql: &mut String, args: &mut Vec<Value>, column: &str, values: Vec<Value>) {
        if values.is_empty() {
            return;
        }
        let start = args.len() + 1;
        let marks = (start..start + values.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        sql.push_str(&format!(" AND {column} IN ({marks})"));
        args.extend(values);
    }
    if filter.only_forgotten {
        sql.push_str(" AND m.deprecated = 1");
    } else if !filter.include_forgotten {
        sql.push_str(" AND m.deprecated = 0");
    }
    let text = |s: &str| Value::Text(s.to_owned());
    any_of(
        sql,
        args,
        "m.type",
        filter.types.iter().map(|t| text(t.as_str())).collect(),
    );
    any_of(
        sql,
        args,
        "m.scope",
        filter.scopes.iter().map(|t| text(t.as_str())).collect(),
    );
    any_of(
        sql,
        args,
        "m.share_scope",
        filter
            .share_scopes
            .iter()
            .map(|t| text(t.as_str()))
            .collect(),
    );
    any_of(
        sql,
        args,
        "m.source",
        filter.sources.iter().map(|t| text(t.as_str())).collect(),
    );
    if !filter.tags.is_empty() {
        let start = args.len() + 1;
        let marks = (start..start + filter.tags.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM json_each(m.tags) WHERE json_each.value IN ({marks}))"
        ));
        args.extend(filter.tags.iter().map(|t| text(t)));
    }
    if let Some(file) = &filter.related_file {
        args.push(text(file));
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM json_each(m.related_files) WHERE json_each.value = ?{})",
            args.len()
        ));
    }
    if let Some(b) = filter.needs_review {
        args.push(Value::Integer(b as i64));
        sql.push_str(&format!(" AND m.needs_review = ?{}", args.len()));
    }
    if let Some(b) = filter.pinned {
        args.push(Value::Integer(b as i64));
        sql.push_str(&format!(" AND m.pinned = ?{}", args.len()));
    }
    if let Some(c) = filter.min_confidence {
        args.push(Value::Real(c));
        sql.push_str(&format!(" AND m.confidence >= ?{}", args.len()));
    }
}

/// One memory of the handle's project, forgotten or not. Through the reader's statement
/// cache: preparing the full-row select costs about as much as running it.
pub(crate) async fn get(ctx: &Ctx<'_>, id: &str) -> Result<Memory> {
    let mut reader = ctx.store.reader().await;
    reader
        .query_cached(SELECT_BY_ID.as_str(), params![id, ctx.project_id], from_row)
        .await?
        .pop()
        .ok_or_else(|| Error::not_found("memory", id))
}

/// The project's memories with these ids, forgotten or not (unknown ids are skipped), in no
/// order.
pub(crate) async fn get_many(ctx: &Ctx<'_>, ids: &[String]) -> Result<Vec<Memory>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT {} FROM json_each(?1) j CROSS JOIN memories m ON m.id = j.value
         WHERE m.project_id = ?2",
        *SELECT_M
    );
    let ids = serde_json::to_string(ids).map_err(|e| Error::Internal(e.to_string()))?;
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(&sql, params![ids, ctx.project_id])
        .await
        .ctx("reading memories")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading memories")? {
        out.push(from_row(&row)?);
    }
    Ok(out)
}

/// Active memories attached to any of `files` (project-relative) or to a symbol in one of them
/// (a link key `file:Symbol`), with the first of `files` each is attached to; at most `limit`,
/// in the order of `files`, then most recently used first.
pub(crate) async fn attached_to_files(
    ctx: &Ctx<'_>,
    files: &[String],
    limit: u32,
) -> Result<Vec<(usize, Memory)>> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    // A file's keys are `file` itself and `file:...` (its symbols), the range
    // (file || ':', file || ';') since ':' + 1 = ';'. Two lookups, not one with an OR: the OR
    // kept SQLite from using the key index and it walked every link of the project per file
    // (100-500 ms for 40-130 files at 10k memories).
    let sql = format!(
        "SELECT {}, top.position FROM (
           SELECT seq, min(position) AS position FROM (
             SELECT l.memory_seq AS seq, CAST(j.key AS INTEGER) AS position
             FROM json_each(?2) j CROSS JOIN memory_links l
             WHERE l.project_id = ?1 AND l.node_key = j.value
             UNION ALL
             SELECT l.memory_seq, CAST(j.key AS INTEGER)
             FROM json_each(?2) j CROSS JOIN memory_links l
             WHERE l.project_id = ?1 AND l.node_key > j.value || ':' AND l.node_key < j.value || ';')
           GROUP BY seq) AS top
         CROSS JOIN memories m ON m.seq = top.seq
         WHERE m.deprecated = 0
         ORDER BY top.position, m.last_accessed_at DESC, m.seq DESC LIMIT ?3",
        *SELECT_M
    );
    let json = serde_json::to_string(files).map_err(|e| Error::Internal(e.to_string()))?;
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(&sql, params![ctx.project_id, json, limit as i64])
        .await
        .ctx("reading attached memories")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading attached memories")? {
        let position: i64 = row.get(super::rows::COLUMN_COUNT).ctx("position")?;
        out.push((position as usize, from_row(&row)?));
    }
    Ok(out)
}

/// The project's active memories with trigger patterns (at most 1,000, most confident first).
pub(crate) async fn triggered(ctx: &Ctx<'_>) -> Result<Vec<Memory>> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            // INDEXED BY: without it the planner took the (project, deprecated) index and
            // read every memory of the project (8 ms at 10k) to find the few with triggers.
            "SELECT {} FROM memories m INDEXED BY memories_triggered
             WHERE m.project_id = ?1 AND m.triggers <> '[]' AND m.deprecated = 0
             ORDER BY m.confidence DESC, m.seq DESC LIMIT 1000",
            *SELECT_M
        )
    });
    let mut reader = ctx.store.reader().await;
    reader
        .query_cached(SQL.as_str(), params![ctx.project_id], from_row)
        .await
}

/// The memories of project `?1` with the file `?2` among their `related_files`, through the
/// links the triggers keep for them (one row per memory and file): tested against each
/// memory's JSON instead, the filter read every memory of the project (38 ms at 50,000).
/// More conditions and the order follow.
static LIST_BY_FILE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM memory_links l CROSS JOIN memories m ON m.seq = l.memory_seq
         WHERE l.project_id = ?1 AND l.node_key = ?2 AND l.role = 'file'
           AND m.project_id = ?1",
        *SELECT_M
    )
});

/// A filtered, sorted page of the project's memories.
pub(crate) async fn list(ctx: &Ctx<'_>, filter: &ListFilter) -> Result<Vec<Memory>> {
    if let Some(c) = filter.min_confidence {
        ctx.validator().unit("minConfidence", c)?;
    }
    let limit = filter.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    if limit == 0 || limit > MAX_LIST_LIMIT {
        return Err(Error::invalid(format!(
            "limit must be between 1 and {MAX_LIST_LIMIT}, got {limit}"
        )));
    }
    let mut args = vec![Value::Text(ctx.project_id.to_owned())];
    let mut sql = match &filter.related_file {
        Some(file) => {
            args.push(Value::Text(file.clone()));
            LIST_BY_FILE.clone()
        }
        None => format!(
            "SELECT {} FROM memories m WHERE m.project_id = ?1",
            *SELECT_M
        ),
    };
    let rest = ListFilter {
        related_file: None,
        ..filter.clone()
    };
    push_filters(&rest, &mut sql, &mut args);
    args.push(Value::Integer(limit as i64));
    args.push(Value::Integer(filter.offset.unwrap_or(0) as i64));
    sql.push_str(&format!(
        " ORDER BY {} LIMIT ?{} OFFSET ?{}",
        filter.order.sql(),
        args.len() - 1,
        args.len()
    ));
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(&sql, params_from_iter(args))
        .await
        .ctx("listing memories")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("listing memories")? {
        out.push(from_row(&row)?);
    }
    Ok(out)
}

/// Every state of a memory, oldest first, ending with the current one.
pub(crate) async fn history(ctx: &Ctx<'_>, id: &str) -> Result<Vec<MemoryVersion>> {
    let current = get(ctx, id).await?;
    let conn = ctx.store.reader().await;
    let mut rows = conn
        .query(
            "SELECT version, ended_by, ended_at, snapshot FROM memory_versions
             WHERE memory_id = ?1 ORDER BY version",
            params![id],
        )
        .await
        .ctx("reading history")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading history")? {
        let snapshot: String = row.get(3).ctx("reading history")?;
        out.push(MemoryVersion {
            version: row.get::<i64>(0).ctx("reading history")? as u32,
            ended_by: row.get(1).ctx("reading history")?,
            ended_at: row.get(2).ctx("reading history")?,
            memory: super::snapshot::decode(&snapshot)?,
        });
    }
    out.push(MemoryVersion {
        version: current.version,
        ended_by: "current".into(),
        ended_at: current.updated_at,
        memory: current,
    });
    Ok(out)
}

/// Counts over the project's memories.
pub(crate) async fn stats(ctx: &Ctx<'_>) -> Result<Stats> {
    let conn = ctx.store.reader().await;
    let mut stats = Stats::default();
    let mut rows = conn
        .query(
            "SELECT
               count(*),
               coalesce(sum(deprecated = 0), 0),
               coalesce(sum(deprecated = 1), 0),
               coalesce(sum(deprecated = 0 AND needs_review = 1), 0),
               coalesce(sum(deprecated = 0 AND pinned = 1), 0),
               coalesce(sum(deprecated = 0 AND redactions > 0), 0)
             FROM memories WHERE project_id = ?1",
            params![ctx.project_id],
        )
        .await
        .ctx("counting memories")?;
    if let Some(row) = rows.next().await.ctx("counting memories")? {
        let n = |i| row.get::<i64>(i).map(|v| v as u64).ctx("counting memories");
        stats.total = n(0)?;
        stats.active = n(1)?;
        stats.forgotten = n(2)?;
        stats.needs_review = n(3)?;
        stats.pinned = n(4)?;
        stats.with_redactions = n(5)?;
    }
    drop(rows);
    let mut rows = conn
        .query(
            "SELECT type, count(*) FROM memories
             WHERE project_id = ?1 AND deprecated = 0 GROUP BY type ORDER BY type",
            params![ctx.project_id],
        )
        .await
        .ctx("counting by type")?;
    while let Some(row) = rows.next().await.ctx("counting by type")? {
        let t: String = row.get(0).ctx("counting by type")?;
        let c: i64 = row.get(1).ctx("counting by type")?;
        stats.by_type.insert(t, c as u64);
    }
    drop(rows);
    let mut rows = conn
        .query(
            "SELECT count(*) FROM memory_versions v
             WHERE v.memory_id IN (SELECT id FROM memories WHERE project_id = ?1)",
            params![ctx.project_id],
        )
        .await
        .ctx("counting versions")?;
    if let Some(row) = rows.next().await.ctx("counting versions")? {
        stats.versions = row.get::<i64>(0).ctx("counting versions")? as u64;
    }
    Ok(stats)
}

#[cfg(test)]
mod plan_tests {
    use super::LIST_BY_FILE;
    use crate::store::plan::{mentions, query_plan};

    #[tokio::test]
    async fn listing_by_file_starts_from_the_files_links() {
        let sql = format!("{} ORDER BY m.created_at DESC LIMIT 50", *LIST_BY_FILE);
        let plan = query_plan(&sql).await;
        let first = plan
            .iter()
            .find(|s| s.starts_with("SEARCH") || s.starts_with("SCAN"));
        assert!(
            first.is_some_and(|s| s.starts_with("SEARCH l")),
            "{plan:#?}"
        );
        assert!(
            mentions(&plan, "INTEGER PRIMARY KEY (rowid=?)"),
            "{plan:#?}"
        );
    }
}
