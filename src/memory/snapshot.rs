//! The stored form of a past version (`memory_versions.snapshot`): the memory's JSON with every
//! field at its default left out (nulls, `false`, `0` counters, empty lists and objects).
//!
//! Why: a typical memory's full JSON is ~900 bytes of which ~800 are field names and empty
//! values, and history is written on every versioned change (expiry writes 40,000 at once in
//! a long-idle project), sent by sync and kept for the grace period. Leaving defaults out
//! cuts a snapshot to about a third. Reading accepts both forms: the fields left out are
//! exactly those `Memory` deserialises to their defaults (`#[serde(default)]` on the model),
//! and full snapshots written before this module, or by an older device, parse unchanged.

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
}
