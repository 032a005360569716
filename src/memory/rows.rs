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
    let mut c = Columns { row, at: 0 };
    Ok(Memory {
        id: text(c.value()?)?,
        project_id: text(c.value()?)?,
        memory_type: c.parsed(MemoryType::parse)?,
        content: text(c.value()?)?,
        confidence: real(c.value()?)?,
        tags: c.json()?,
        related_files: c.json()?,
        related_modules: c.json()?,
        scope: c.parsed(MemoryScope::parse)?,
        share_scope: c.parsed(ShareScope::parse)?,
        source: c.parsed(MemorySource::parse)?,
        session_id: opt(c.value()?)?,
        commit_sha: opt(c.value()?)?,
        provenance_session_ids: c.json()?,
        work_unit_ref: match c.value()? {
            Value::Null => None,
            v => Some(parse_json(v)?),
        },
        methodology: opt(c.value()?)?,
        target_node_id: opt(c.value()?)?,
        impacted_node_ids: c.json()?,
        relations: c.json()?,
        decay_half_life_days: match c.value()? {
            Value::Null => None,
            v => Some(real(v)?),
        },
        needs_review: int(c.value()?)? != 0,
        user_verified: int(c.value()?)? != 0,
        citation_text: opt(c.value()?)?,
        pinned: int(c.value()?)? != 0,
        deprecated: int(c.value()?)? != 0,
        deprecated_at: opt_i64(c.value()?)?,
        deprecated_reason: opt(c.value()?)?,
        stale_at: opt_i64(c.value()?)?,
        redactions: int(c.value()?)? as u32,
        reinforce_count: int(c.value()?)? as u32,
        access_count: int(c.value()?)? as u32,
        created_at: int(c.value()?)?,
        updated_at: int(c.value()?)?,
        last_accessed_at: int(c.value()?)?,
        version: int(c.value()?)? as u32,
        metadata: c.json()?,
        triggers: c.json()?,
        superseded_by: opt(c.value()?)?,
        disputed_at: opt_i64(c.value()?)?,
        helpful_count: int(c.value()?)? as u32,
        wrong_count: int(c.value()?)? as u32,
        uncorrected_uses: int(c.value()?)? as u32,
    })
}

/// A row's columns, read in order. JSON and enum columns are parsed from the row's own text:
/// copying it into a `String` first was a third of the allocations of reading a memory.
struct Columns<'r> {
    row: &'r Row,
    at: i32,
}

impl Columns<'_> {
    fn value(&mut self) -> Result<Value> {
        let v = self
            .row
            .get_value(self.at)
            .map_err(|e| Error::db("reading memory row", e));
        self.at += 1;
        v
    }

    fn text(&mut self) -> Result<&str> {
        let at = self.at;
        self.at += 1;
        self.row
            .get_str(at)
            .map_err(|e| Error::db("reading memory row", e))
    }

    fn json<T: DeserializeOwned>(&mut self) -> Result<T> {
        serde_json::from_str(self.text()?)
            .map_err(|e| Error::Internal(format!("stored memory JSON: {e}")))
    }

    fn parsed<T>(&mut self, parse: impl FnOnce(&str) -> Result<T>) -> Result<T> {
        parse(self.text()?).map_err(corrupt_field)
    }
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
