//! The privacy filter over a whole [`Memory`]: for memories that arrive whole rather than field
//! by field through `remember` and `update` (a JSON import's memories and their past versions),
//! whose every text field must pass the filter before it is stored. Ids (the memory's, its
//! sessions', the memory it was superseded by) are not text and stay as they are.

use super::model::Memory;
use super::privacy::{redact, redact_json};

/// Redacts every free-text field of `m` in place; returns how many secrets were replaced (the
/// caller adds them to `m.redactions`). Idempotent: a scrubbed memory scrubs to itself.
pub(crate) fn scrub(m: &mut Memory) -> u32 {
    let mut count = 0;
    let mut text = |s: &mut String| {
        let r = redact(s);
        if r.count > 0 {
            *s = r.text;
            count += r.count;
        }
    };
    text(&mut m.content);
    for list in [
        &mut m.tags,
        &mut m.related_files,
        &mut m.related_modules,
        &mut m.impacted_node_ids,
        &mut m.triggers,
    ] {
        list.iter_mut().for_each(&mut text);
    }
    for field in [
        &mut m.citation_text,
        &mut m.methodology,
        &mut m.commit_sha,
        &mut m.target_node_id,
        &mut m.deprecated_reason,
    ] {
        field.iter_mut().for_each(&mut text);
    }
    if let Some(unit) = &mut m.work_unit_ref {
        text(&mut unit.methodology);
        text(&mut unit.label);
        unit.hierarchy.iter_mut().for_each(&mut text);
    }
    for relation in &mut m.relations {
        relation.target_file_path.iter_mut().for_each(&mut text);
    }
    count + redact_json(&mut m.metadata)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::model::WorkUnitRef;
    use crate::memory::privacy::REDACTED;

    #[test]
    fn every_text_field_is_filtered_and_ids_are_kept() {
        let secret = "PASSWORD=hunter2";
        let mut m: Memory = serde_json::from_value(serde_json::json!({
            "id": "0190a0b0-0000-7000-8000-000000000001", "projectId": "p", "type": "gotcha",
            "content": secret, "confidence": 0.8, "scope": "global", "shareScope": "project",
            "source": "agent_explicit", "sessionId": "s1", "version": 1, "createdAt": 0,
            "updatedAt": 0, "lastAccessedAt": 0, "tags": [secret], "relatedFiles": [secret],
            "relatedModules": [secret], "impactedNodeIds": [secret], "triggers": [secret],
            "citationText": secret, "methodology": secret, "commitSha": secret,
            "targetNodeId": secret, "deprecatedReason": secret,
            "relations": [{ "targetFilePath": secret, "relationType": "validates",
                            "confidence": 1.0, "autoExtracted": false }],
            "metadata": { "note": secret, "apiKey": "abc" },
        }))
        .unwrap();
        m.work_unit_ref = Some(WorkUnitRef {
            methodology: secret.into(),
            hierarchy: vec![secret.into()],
            label: secret.into(),
        });
        assert_eq!(scrub(&mut m), 17);
        let stored = serde_json::to_string(&m).unwrap();
        assert!(!stored.contains("hunter2"), "{stored}");
        assert_eq!(m.metadata["apiKey"], REDACTED);
        assert_eq!(m.session_id.as_deref(), Some("s1"));
        assert_eq!(scrub(&mut m), 0);
    }
}
