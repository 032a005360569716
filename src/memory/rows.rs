//! Mapping between the `memories` table and [`Memory`]: one column list, one reader, one
//! writer, so that every query returns the same shape.

use std::sync::LazyLock;

use libsql::{Row, Value};
use serde::de::DeserializeOwned;

use super::model::{Memory, MemoryScope, MemorySource, MemoryType, ShareScope};
use crate::error::{Error, Result};

/// The selected columns, in the order [`from_row`] reads them.
const COLUMNS: &[&str] = &[
    "id",
    "project_id",
    "type",
    "content",
    "confidence",
    "tags",
    "related_files",
    "related_modules",
    "scope",
    "share_scope",
    "source",
    "session_id",
    "commit_sha",
    "provenance_session_ids",
    "work_unit_ref",
    "methodology",
    "target_node_id",
    "impacted_node_ids",
    "relations",
    "decay_half_life_days",
    "needs_review",
    "user_verified",
    "citation_text",
    "pinned",
    "deprecated",
    "deprecated_at",
    "deprecated_reason",
    "stale_at",
    "redactions",
    "reinforce_count",
    "access_count",
    "created_at",
    "updated_at",
    "last_accessed_at",
    "version",
    "metadata",
    "triggers",
    "superseded_by",
    "disputed_at",
    "helpful_count",
    "wrong_count",
    "uncorrected_uses",
];

/// `m.id, m.project_id, ...` for queries that alias `memories` as `m`.
pub(crate) static SELECT_M: LazyLock<String> = LazyLock::new(|| {
    COLUMNS
        .iter()
        .map(|c| format!("m.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
});

/// One memory of a project by id: `?1` id, `?2` project.
pub(crate) static SELECT_BY_ID: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM memories m WHERE m.id = ?1 AND m.project_id = ?2",
        *SELECT_M
    )
});

/// Number of columns [`from_row`] consumes (extra columns may follow, e.g. a score).
pub(crate) const COLUMN_COUNT: i32 = COLUMNS.len() as i32;

/// The INSERT for a new memory: every column plus `content_hash`.
pub(crate) static INSERT: LazyLock<String> = LazyLock::new(|| {
    let cols = COLUMNS.join(", ");
    let params = (1..=COLUMNS.len() + 1)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("INSERT INTO memories ({cols}, content_hash) VALUES ({params})")
});

/// The UPDATE that rewrites every mutable column of one memory, by id.
pub(crate) static UPDATE: LazyLock<String> = LazyLock::new(|| {
    // id (1) and project_id (2) identify the row and never change.
    let sets = COLUMNS
        .iter()
        .enumerate()
        .skip(2)
        .map(|(i, c)| format!("{c} = ?{}", i + 1))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "UPDATE memories SET {sets}, content_hash = ?{} WHERE id = ?1 AND project_id = ?2",
        COLUMNS.len() + 1
    )
});

fn json<T: serde::Serialize>(v: &T) -> Value {
    Value::Text(serde_json::to_string(v).expect("memory fields serialise"))
}

fn opt_text(v: &Option<String>) -> Value {
    v.as_ref().map_or(Value::Null, |s| Value::Text(s.clone()))
}

fn opt_int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Integer)
}

/// The parameters for [`INSERT`] / [`UPDATE`], in [`COLUMNS`] order, then the content hash.
pub(crate) fn to_params(m: &Memory, content_hash: &str) -> Vec<Value> {
    vec![
        Value::Text(m.id.clone()),
        Value::Text(m.project_id.clone()),
        Value::Text(m.memory_type.as_str().into()),
        Value::Text(m.content.clone()),
        Value::Real(m.confidence),
        json(&m.tags),
        json(&m.related_files),
        json(&m.related_modules),
        Value::Text(m.scope.as_str().into()),
        Value::Text(m.share_scope.as_str().into()),
        Value::Text(m.source.as_str().into()),
        opt_text(&m.session_id),
        opt_text(&m.commit_sha),
        json(&m.provenance_session_ids),
        m.work_unit_ref.as_ref().map_or(Value::Null, json),
        opt_text(&m.methodology),
        opt_text(&m.target_node_id),
        json(&m.impacted_node_ids),
        json(&m.relations),
        m.decay_half_life_days.map_or(Value::Null, Value::Real),
        Value::Integer(m.needs_review as i64),
        Value::Integer(m.user_verified as i64),
        opt_text(&m.citation_text),
        Value::Integer(m.pinned as i64),
        Value::Integer(m.deprecated as i64),
        opt_int(m.deprecated_at),
        opt_text(&m.deprecated_reason),
        opt_int(m.stale_at),
        Value::Integer(m.redactions as i64),
        Value::Integer(m.reinforce_count as i64),
        Value::Integer(m.access_count as i64),
        Value::Integer(m.created_at),
        Value::Integer(m.updated_at),
        Value::Integer(m.last_accessed_at),
        Value::Integer(m.version as i64),
        json(&m.metadata),
        json(&m.triggers),
        opt_text(&m.superseded_by),
        opt_int(m.disputed_at),
        Value::Integer(m.helpful_count as i64),
        Value::Integer(m.wrong_count as i64),
        Value::Integer(m.uncorrected_uses as i64),
        Value::Text(content_hash.to_owned()),
    ]
}

/// Reads a [`Memory`] from a row selected with [`SELECT_M`].
pub(crate) fn from_row(row: &Row) -> Result<Memory> {
    let mut col = 0;
    let mut next = || {
        let v = row
            .get_value(col)
            .map_err(|e| Error::db("reading memory row", e));
        col += 1;
        v
    };
    Ok(Memory {
        id: text(next()?)?,
        project_id: text(next()?)?,
        memory_type: MemoryType::parse(&text(next()?)?).map_err(corrupt_field)?,
        content: text(next()?)?,
        confidence: real(next()?)?,
        tags: parse_json(next()?)?,
        related_files: parse_json(next()?)?,
        related_modules: parse_json(next()?)?,
        scope: MemoryScope::parse(&text(next()?)?).map_err(corrupt_field)?,
        share_scope: ShareScope::parse(&text(next()?)?).map_err(corrupt_field)?,
        source: MemorySource::parse(&text(next()?)?).map_err(corrupt_field)?,
        session_id: opt(next()?)?,
        commit_sha: opt(next()?)?,
        provenance_session_ids: parse_json(next()?)?,
        work_unit_ref: match next()? {
            Value::Null => None,
            v => Some(parse_json(v)?),
        },
        methodology: opt(next()?)?,
        target_node_id: opt(next()?)?,
        impacted_node_ids: parse_json(next()?)?,
        relations: parse_json(next()?)?,
        decay_half_life_days: match next()? {
            Value::Null => None,
            v => Some(real(v)?),
        },
        needs_review: int(next()?)? != 0,
        user_verified: int(next()?)? != 0,
        citation_text: opt(next()?)?,
        pinned: int(next()?)? != 0,
        deprecated: int(next()?)? != 0,
        deprecated_at: opt_i64(next()?)?,
        deprecated_reason: opt(next()?)?,
        stale_at: opt_i64(next()?)?,
        redactions: int(next()?)? as u32,
        reinforce_count: int(next()?)? as u32,
        access_count: int(next()?)? as u32,
        created_at: int(next()?)?,
        updated_at: int(next()?)?,
        last_accessed_at: int(next()?)?,
        version: int(next()?)? as u32,
        metadata: parse_json(next()?)?,
        triggers: parse_json(next()?)?,
        superseded_by: opt(next()?)?,
        disputed_at: opt_i64(next()?)?,
        helpful_count: int(next()?)? as u32,
        wrong_count: int(next()?)? as u32,
        uncorrected_uses: int(next()?)? as u32,
    })
}

fn corrupt_field(e: Error) -> Error {
    Error::Internal(format!("stored memory has an invalid field: {e}"))
}

fn unexpected(what: &str, v: &Value) -> Error {
    Error::Internal(format!("stored memory: expected {what}, found {v:?}"))
}

fn text(v: Value) -> Result<String> {
    match v {
        Value::Text(s) => Ok(s),
        other => Err(unexpected("text", &other)),
    }
}

fn opt(v: Value) -> Result<Option<String>> {
    match v {
        Value::Null => Ok(None),
        Value::Text(s) => Ok(Some(s)),
        other => Err(unexpected("text or null", &other)),
    }
}

fn int(v: Value) -> Result<i64> {
    match v {
        Value::Integer(i) => Ok(i),
        other => Err(unexpected("integer", &other)),
    }
}

fn opt_i64(v: Value) -> Result<Option<i64>> {
    match v {
        Value::Null => Ok(None),
        Value::Integer(i) => Ok(Some(i)),
        other => Err(unexpected("integer or null", &other)),
    }
}

fn real(v: Value) -> Result<f64> {
    match v {
        Value::Real(r) => Ok(r),
        Value::Integer(i) => Ok(i as f64),
        other => Err(unexpected("number", &other)),
    }
}

fn parse_json<T: DeserializeOwned>(v: Value) -> Result<T> {
    let s = text(v)?;
    serde_json::from_str(&s).map_err(|e| Error::Internal(format!("stored memory JSON: {e}")))
}
