//! The stored form of a past version (`memory_versions.snapshot`): the memory's JSON with every
//! field at its default left out (nulls, `false`, `0` counters, empty lists and objects).
//!
//! Why: a typical memory's full JSON is ~900 bytes of which ~800 are field names and empty
//! values, and history is written on every versioned change (expiry writes 40,000 at once in
//! a long-idle project), sent by sync and kept for the grace period. Leaving defaults out
//! cuts a snapshot to about a third. Reading accepts both forms: the fields left out are
//! exactly those `Memory` deserialises to their defaults (`#[serde(default)]` on the model),
//! and full snapshots written before this module, or by an older device, parse unchanged.
//!
//! The form has two writers: [`encode`] for a memory loaded in Rust, and [`SQL`] for rows
//! SQLite snapshots where they are (`prune`'s expiry); the tests hold them to the same output.

use std::sync::LazyLock;

use serde_json::{Map, Value};

use super::model::Memory;
use crate::error::{Error, Result};

/// `memory` as a compact JSON object (see the module doc).
pub(crate) fn to_value(memory: &Memory) -> Value {
    let Value::Object(fields) = serde_json::to_value(memory).expect("memory serialises") else {
        unreachable!("a memory serialises to an object")
    };
    let kept: Map<String, Value> = fields
        .into_iter()
        .filter(|(_, value)| !is_default(value))
        .collect();
    Value::Object(kept)
}

/// `memory` as compact JSON text (see the module doc).
pub(crate) fn encode(memory: &Memory) -> String {
    to_value(memory).to_string()
}

/// How a column becomes a JSON member in [`SQL`], and when it is left out.
#[derive(Clone, Copy)]
enum Kind {
    /// Text, never a default (even empty): always written.
    Text,
    /// Text or NULL: left out when NULL.
    OptText,
    /// A REAL, never a default: always written, with every digit it needs (`quote`, not
    /// `json_object`, whose 15 digits do not always read back as the same `f64`).
    Real,
    /// A REAL or NULL: left out when NULL.
    OptReal,
    /// An integer or NULL: left out when 0 or NULL, as [`is_default`] leaves out `0`.
    Int,
    /// 0/1: left out when 0.
    Bool,
    /// Stored JSON (a list, an object, or NULL): left out when NULL, `[]` or `{}`.
    Json,
}

/// The columns of `memories` with their JSON names: every [`Memory`] field.
const FIELDS: &[(&str, &str, Kind)] = &[
    ("id", "id", Kind::Text),
    ("projectId", "project_id", Kind::Text),
    ("type", "type", Kind::Text),
    ("content", "content", Kind::Text),
    ("confidence", "confidence", Kind::Real),
    ("tags", "tags", Kind::Json),
    ("relatedFiles", "related_files", Kind::Json),
    ("relatedModules", "related_modules", Kind::Json),
    ("scope", "scope", Kind::Text),
    ("shareScope", "share_scope", Kind::Text),
    ("source", "source", Kind::Text),
    ("sessionId", "session_id", Kind::OptText),
    ("commitSha", "commit_sha", Kind::OptText),
    ("provenanceSessionIds", "provenance_session_ids", Kind::Json),
    ("workUnitRef", "work_unit_ref", Kind::Json),
    ("methodology", "methodology", Kind::OptText),
    ("targetNodeId", "target_node_id", Kind::OptText),
    ("impactedNodeIds", "impacted_node_ids", Kind::Json),
    ("relations", "relations", Kind::Json),
    ("decayHalfLifeDays", "decay_half_life_days", Kind::OptReal),
    ("needsReview", "needs_review", Kind::Bool),
    ("userVerified", "user_verified", Kind::Bool),
    ("citationText", "citation_text", Kind::OptText),
    ("pinned", "pinned", Kind::Bool),
    ("deprecated", "deprecated", Kind::Bool),
    ("deprecatedAt", "deprecated_at", Kind::Int),
    ("deprecatedReason", "deprecated_reason", Kind::OptText),
    ("staleAt", "stale_at", Kind::Int),
    ("redactions", "redactions", Kind::Int),
    ("reinforceCount", "reinforce_count", Kind::Int),
    ("accessCount", "access_count", Kind::Int),
    ("createdAt", "created_at", Kind::Int),
    ("updatedAt", "updated_at", Kind::Int),
    ("lastAccessedAt", "last_accessed_at", Kind::Int),
    ("version", "version", Kind::Int),
    ("metadata", "metadata", Kind::Json),
    ("triggers", "triggers", Kind::Json),
    ("supersededBy", "superseded_by", Kind::OptText),
    ("disputedAt", "disputed_at", Kind::Int),
    ("helpfulCount", "helpful_count", Kind::Int),
    ("wrongCount", "wrong_count", Kind::Int),
    ("uncorrectedUses", "uncorrected_uses", Kind::Int),
];

/// A SQL expression that is the compact snapshot of the `memories` row aliased `m`: what
/// [`encode`] writes for that row loaded as a [`Memory`], built by SQLite without a round trip
/// through Rust (`prune` expires tens of thousands of memories at once). It reads back as the
/// same memory; the text may differ in key order and number spelling. Stored JSON columns are
/// copied as they are (every writer stores them as serde wrote them).
pub(crate) static SQL: LazyLock<String> = LazyLock::new(|| {
    // Each member is `,"key":value` or NULL (left out): one `printf` joins them, about a
    // quarter cheaper than a chain of `||` (each of which copies the text so far).
    let members: Vec<String> = FIELDS
        .iter()
        .map(|&(key, column, kind)| {
            let c = format!("m.{column}");
            let name = format!("',\"{key}\":'");
            match kind {
                Kind::Text => format!("{name} || json_quote({c})"),
                Kind::OptText => {
                    format!("CASE WHEN {c} IS NOT NULL THEN {name} || json_quote({c}) END")
                }
                Kind::Real => format!("{name} || quote({c})"),
                Kind::OptReal => format!("CASE WHEN {c} IS NOT NULL THEN {name} || quote({c}) END"),
                Kind::Int => format!("CASE WHEN {c} <> 0 THEN {name} || {c} END"),
                Kind::Bool => format!("CASE WHEN {c} THEN {name} || 'true' END"),
                Kind::Json => format!("CASE WHEN {c} NOT IN ('[]', '{{}}') THEN {name} || {c} END"),
            }
        })
        .collect();
    // `printf` writes NULL as nothing; the first member (the id, always there) loses its comma.
    format!(
        "'{{' || substr(printf('{}', {}), 2) || '}}'",
        "%s".repeat(members.len()),
        members.join(", ")
    )
});

/// Reads a stored snapshot, compact or full.
pub(crate) fn decode(text: &str) -> Result<Memory> {
    serde_json::from_str(text).map_err(|e| Error::Internal(format!("stored version JSON: {e}")))
}

/// Whether `value` is what the field deserialises to when absent. Only integer zeros count:
/// a float such as a confidence of `0.0` is kept, because its field has no default.
fn is_default(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_u64() == Some(0) || n.as_i64() == Some(0),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
        Value::String(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::model::{
        MemoryRelation, MemoryScope, MemorySource, MemoryType, RelationType, ShareScope,
        WorkUnitRef,
    };

    fn bare() -> Memory {
        Memory {
            id: "m1".into(),
            project_id: "p".into(),
            memory_type: MemoryType::Gotcha,
            content: "the cache is cleared on deploy".into(),
            confidence: 0.0,
            tags: vec![],
            related_files: vec![],
            related_modules: vec![],
            scope: MemoryScope::Global,
            share_scope: ShareScope::Project,
            source: MemorySource::AgentExplicit,
            session_id: None,
            commit_sha: None,
            provenance_session_ids: vec![],
            work_unit_ref: None,
            methodology: None,
            target_node_id: None,
            impacted_node_ids: vec![],
            relations: vec![],
            decay_half_life_days: None,
            needs_review: false,
            user_verified: false,
            citation_text: None,
            pinned: false,
            deprecated: false,
            deprecated_at: None,
            deprecated_reason: None,
            stale_at: None,
            redactions: 0,
            reinforce_count: 0,
            access_count: 0,
            created_at: 0,
            updated_at: 0,
            last_accessed_at: 0,
            version: 0,
            metadata: serde_json::json!({}),
            triggers: vec![],
            superseded_by: None,
            disputed_at: None,
            helpful_count: 0,
            wrong_count: 0,
            uncorrected_uses: 0,
        }
    }

    /// A memory with no field at its default.
    fn full() -> Memory {
        let mut memory = bare();
        memory.confidence = 0.7;
        memory.tags = vec!["db".into()];
        memory.related_files = vec!["src/a.rs".into()];
        memory.related_modules = vec!["store".into()];
        memory.session_id = Some("s".into());
        memory.commit_sha = Some("abc".into());
        memory.provenance_session_ids = vec!["s".into()];
        memory.work_unit_ref = Some(WorkUnitRef {
            methodology: "m".into(),
            hierarchy: vec!["1".into()],
            label: "l".into(),
        });
        memory.methodology = Some("m".into());
        memory.target_node_id = Some("n".into());
        memory.impacted_node_ids = vec!["n2".into()];
        memory.relations = vec![MemoryRelation {
            relation_type: RelationType::Supersedes,
            target_memory_id: Some("m0".into()),
            target_file_path: None,
            confidence: 0.9,
            auto_extracted: true,
        }];
        memory.decay_half_life_days = Some(9.5);
        memory.needs_review = true;
        memory.user_verified = true;
        memory.citation_text = Some("cache".into());
        memory.pinned = true;
        memory.deprecated = true;
        memory.deprecated_at = Some(5);
        memory.deprecated_reason = Some("why".into());
        memory.stale_at = Some(6);
        memory.redactions = 1;
        memory.reinforce_count = 2;
        memory.access_count = 3;
        memory.created_at = 1;
        memory.updated_at = 2;
        memory.last_accessed_at = 3;
        memory.version = 4;
        memory.metadata = serde_json::json!({"k": [1]});
        memory.triggers = vec!["println!".into()];
        memory.superseded_by = Some("m2".into());
        memory.disputed_at = Some(7);
        memory.helpful_count = 1;
        memory.wrong_count = 2;
        memory.uncorrected_uses = 3;
        memory
    }

    #[test]
    fn a_memory_of_defaults_round_trips_and_keeps_only_what_has_no_default() {
        let memory = bare();
        let value = to_value(&memory);
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "confidence",
                "content",
                "id",
                "projectId",
                "scope",
                "shareScope",
                "source",
                "type"
            ]
        );
        assert_eq!(decode(&encode(&memory)).unwrap(), memory);
    }

    #[test]
    fn a_memory_with_every_field_set_round_trips() {
        let memory = full();
        let full = serde_json::to_value(&memory).unwrap();
        assert_eq!(
            to_value(&memory),
            full,
            "nothing at its default, nothing left out"
        );
        assert_eq!(decode(&encode(&memory)).unwrap(), memory);
    }

    #[test]
    fn a_full_snapshot_from_before_compaction_still_reads() {
        let memory = bare();
        let full = serde_json::to_string(&memory).unwrap();
        assert!(full.len() > 2 * encode(&memory).len());
        assert_eq!(decode(&full).unwrap(), memory);
    }

    /// [`SQL`] over `memory` stored as a row.
    async fn sql_snapshot(memory: &Memory) -> String {
        let db = libsql::Builder::new_local(":memory:")
            .build()
            .await
            .unwrap();
        let conn = db.connect().unwrap();
        crate::store::migrate(&conn, crate::store::Home::ALL)
            .await
            .unwrap();
        conn.execute(
            &crate::memory::rows::INSERT,
            crate::memory::rows::to_params(memory, "hash"),
        )
        .await
        .unwrap();
        let mut rows = conn
            .query(&format!("SELECT {} FROM memories m", *SQL), ())
            .await
            .unwrap();
        rows.next().await.unwrap().unwrap().get(0).unwrap()
    }

    #[test]
    fn the_sql_snapshot_covers_every_column() {
        let columns: Vec<&str> = FIELDS.iter().map(|(_, column, _)| *column).collect();
        let selected: Vec<&str> = crate::memory::rows::SELECT_M
            .split(", ")
            .map(|c| c.trim_start_matches("m."))
            .collect();
        assert_eq!(columns, selected);
    }

    #[tokio::test]
    async fn the_sql_snapshot_is_the_compact_form() {
        let mut odd = full();
        // Needs 17 digits to read back (json_object's 15 would not do).
        odd.confidence = 0.1 + 0.2;
        odd.decay_half_life_days = Some(1.0 / 3.0);
        odd.content = "quotes \" and \\ and \u{1} and é ✓".into();
        odd.metadata = serde_json::json!({"a": null, "b": [1, {"c": null}], "d": {}});
        // A zero time is left out like any integer zero.
        odd.deprecated_at = Some(0);
        let mut empty_strings = bare();
        empty_strings.content = String::new();
        empty_strings.citation_text = Some(String::new());
        for memory in [bare(), full(), odd, empty_strings] {
            let text = sql_snapshot(&memory).await;
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(value, to_value(&memory), "{text}");
            let mut expected = memory.clone();
            if expected.deprecated_at == Some(0) {
                expected.deprecated_at = None;
            }
            assert_eq!(decode(&text).unwrap(), expected);
        }
    }
}
