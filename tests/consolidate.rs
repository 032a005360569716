//! Consolidation against real libSQL files: near-duplicates by words without a model, by
//! meaning with the real all-MiniLM-L6-v2 model (skipped without it, except under CI), what a
//! merge keeps and forgets, what is never merged, dry runs and cancellation.

use std::sync::atomic::AtomicBool;

use engram::embed::{EmbeddingProvider, LocalModelOptions};
use engram::lifecycle::ConsolidateOptions;
use engram::memory::{MemoryRelation, MemoryType, RelationType, RememberInput, ShareScope};
use engram::{Engram, OpenOptions};

mod common;

async fn open(dir: &tempfile::TempDir, provider: EmbeddingProvider) -> Engram {
    let mut options = OpenOptions::new(dir.path().join("memory.db"));
    options.engine.embeddings = provider;
    Engram::open(options).await.unwrap()
}

fn input(memory_type: MemoryType, content: &str) -> RememberInput {
    RememberInput::new(memory_type, content)
}

const WEBHOOK: &str =
    "The payments webhook retries for 72 hours, so every handler must be idempotent.";
/// 13 of its 14 words are `WEBHOOK`'s: Jaccard 0.93.
const WEBHOOK_AGAIN: &str =
    "The payments webhook retries for 72 hours, so every handler must always be idempotent.";

#[tokio::test]
async fn word_near_duplicates_merge_into_the_strongest() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, EmbeddingProvider::Disabled).await;
    let mut weak = input(MemoryType::Gotcha, WEBHOOK);
    weak.confidence = Some(0.6);
    weak.tags = vec!["payments".into()];
    weak.related_files = vec!["src/webhooks/stripe.ts".into()];
    let mut strong = input(MemoryType::Gotcha, WEBHOOK_AGAIN);
    strong.user_verified = Some(true);
    strong.confidence = Some(0.7);
    let mut other_type = input(
        MemoryType::Requirement,
        "Every handler must be idempotent: the payments webhook retries for 72 hours.",
    );
    other_type.confidence = Some(0.9);
    let mut personal = input(MemoryType::Gotcha, &format!("{WEBHOOK} Really."));
    personal.share_scope = Some(ShareScope::Personal);
    let unrelated = input(
        MemoryType::Gotcha,
        "Redis must run before the auth tests start.",
    );
    let ids: Vec<String> = e
        .remember_many(vec![weak, strong, other_type, personal, unrelated])
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.memory.id)
        .collect();

    let dry = e
        .consolidate(
            &ConsolidateOptions {
                dry_run: true,
                ..ConsolidateOptions::default()
            },
            &AtomicBool::new(false),
        )
        .await
        .unwrap();
    assert_eq!(dry.scanned, 5);
    assert_eq!(dry.with_vectors, 0, "no model");
    assert_eq!(dry.groups.len(), 1, "{dry:#?}");
    assert_eq!(dry.groups[0].kept, ids[1], "the verified one is kept");
    assert_eq!(dry.groups[0].merged, [ids[0].clone()]);
    assert_eq!(dry.groups[0].basis, "words");
    assert!(dry.groups[0].similarity >= 0.9);
    assert_eq!(dry.merged, 0);
    assert!(
        !e.get(&ids[0]).await.unwrap().deprecated,
        "a dry run writes nothing"
    );

    let done = e
        .consolidate(&ConsolidateOptions::default(), &AtomicBool::new(false))
        .await
        .unwrap();
    assert_eq!(done.groups, dry.groups);
    assert_eq!(done.merged, 1);
    let gone = e.get(&ids[0]).await.unwrap();
    assert!(gone.deprecated);
    assert_eq!(
        gone.deprecated_reason,
        Some(format!("merged into {}", ids[1]))
    );
    let kept = e.get(&ids[1]).await.unwrap();
    assert_eq!(kept.tags, ["payments"]);
    assert_eq!(kept.related_files, ["src/webhooks/stripe.ts"]);
    assert_eq!(kept.confidence, 0.7, "the highest stored confidence");
    assert_eq!(kept.reinforce_count, 1);
    assert!(kept.relations.contains(&MemoryRelation {
        target_memory_id: Some(ids[0].clone()),
        target_file_path: None,
        relation_type: RelationType::DerivedFrom,
        confidence: 1.0,
        auto_extracted: true,
    }));
    let history = e.history(&ids[1]).await.unwrap();
    assert!(history.iter().any(|v| v.ended_by == "consolidate"));
    for untouched in &ids[2..] {
        assert!(!e.get(untouched).await.unwrap().deprecated);
    }

    // Nothing is left to merge; a merge can be undone.
    let again = e
        .consolidate(&ConsolidateOptions::default(), &AtomicBool::new(false))
        .await
        .unwrap();
    assert!(again.groups.is_empty());
    e.rollback(&ids[0], 1).await.unwrap();
    assert!(!e.get(&ids[0]).await.unwrap().deprecated);
}

#[tokio::test]
async fn contradicting_disputed_and_agent_file_memories_are_never_merged() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, EmbeddingProvider::Disabled).await;
    let a = e
        .remember(input(MemoryType::Gotcha, WEBHOOK))
        .await
        .unwrap()
        .memory;
    let b = e
        .remember(input(MemoryType::Gotcha, WEBHOOK_AGAIN))
        .await
        .unwrap()
        .memory;
    e.dispute(
        &b.id,
        engram::lifecycle::EventNote {
            body: Some("It is 48 hours now".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut tagged = input(
        MemoryType::Preference,
        "Use named exports, not default exports, anywhere.",
    );
    tagged.tags = vec!["agent-file:CLAUDE.md".into()];
    e.remember(tagged).await.unwrap();
    e.remember(input(
        MemoryType::Preference,
        "Use named exports, not default exports, anywhere at all.",
    ))
    .await
    .unwrap();
    let report = e
        .consolidate(&ConsolidateOptions::default(), &AtomicBool::new(false))
        .await
        .unwrap();
    assert_eq!(
        report.scanned, 2,
        "the disputed and the agent-file memory are left out"
    );
    assert!(report.groups.is_empty(), "{report:#?}");
    assert_eq!(
        report.conflicts, 0,
        "the write-time scan linked the pair already"
    );
    assert!(!e.get(&a.id).await.unwrap().deprecated);
}

#[tokio::test]
async fn a_contradiction_a_bulk_write_skipped_is_linked_by_consolidation() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, EmbeddingProvider::Disabled).await;
    // More than 32 memories in one write: the contradiction scan is skipped.
    let mut inputs: Vec<RememberInput> = (0..40)
        .map(|i| {
            input(
                MemoryType::Gotcha,
                &format!("Filler memory number {i} about module {i}."),
            )
        })
        .collect();
    inputs.push(input(
        MemoryType::Requirement,
        "Migrations must run inside a transaction on the primary database.",
    ));
    inputs.push(input(
        MemoryType::Requirement,
        "Migrations must not run inside a transaction on the primary database.",
    ));
    let written = e.remember_many(inputs).await.unwrap();
    let (must, must_not) = (&written[40].memory, &written[41].memory);
    assert!(must.relations.is_empty() && !must.needs_review);

    let dry = ConsolidateOptions {
        dry_run: true,
        ..ConsolidateOptions::default()
    };
    let preview = e.consolidate(&dry, &AtomicBool::new(false)).await.unwrap();
    assert_eq!(preview.conflicts, 1);
    assert!(e.get(&must.id).await.unwrap().relations.is_empty(), "dry");

    let report = e
        .consolidate(&ConsolidateOptions::default(), &AtomicBool::new(false))
        .await
        .unwrap();
    assert_eq!(report.conflicts, 1);
    assert_eq!(report.merged, 0, "contradicting memories are not merged");
    for (id, other) in [(&must.id, &must_not.id), (&must_not.id, &must.id)] {
        let m = e.get(id).await.unwrap();
        assert!(!m.deprecated && m.needs_review);
        assert!(m
            .relations
            .iter()
            .any(|r| r.relation_type == RelationType::ConflictsWith
                && r.target_memory_id.as_deref() == Some(other.as_str())));
    }
    let again = e
        .consolidate(&ConsolidateOptions::default(), &AtomicBool::new(false))
        .await
        .unwrap();
    assert_eq!(again.conflicts, 0, "linked once");
}

#[tokio::test]
async fn cancelled_consolidation_writes_nothing_and_thresholds_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, EmbeddingProvider::Disabled).await;
    let ids: Vec<String> = e
        .remember_many(vec![
            input(MemoryType::Gotcha, WEBHOOK),
            input(MemoryType::Gotcha, WEBHOOK_AGAIN),
        ])
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.memory.id)
        .collect();
    let err = e
        .consolidate(&ConsolidateOptions::default(), &AtomicBool::new(true))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_ABORTED");
    assert!(!e.get(&ids[0]).await.unwrap().deprecated);
    for bad in [0.0, 1.5, f64::NAN] {
        let options = ConsolidateOptions {
            threshold: Some(bad),
            ..ConsolidateOptions::default()
        };
        let err = e
            .consolidate(&options, &AtomicBool::new(false))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG", "{bad}");
    }
    // A stricter word threshold keeps these two apart.
    let strict = ConsolidateOptions {
        word_threshold: Some(1.0),
        dry_run: true,
        ..ConsolidateOptions::default()
    };
    let report = e
        .consolidate(&strict, &AtomicBool::new(false))
        .await
        .unwrap();
    assert!(report.groups.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn paraphrases_merge_by_meaning_with_the_real_model() {
    if !common::model_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let e = open(
        &dir,
        EmbeddingProvider::Local {
            model_dir: None,
            options: LocalModelOptions::default(),
        },
    )
    .await;
    let ids: Vec<String> = e
        .remember_many(vec![
            input(
                MemoryType::Preference,
                "Install dependencies with pnpm instead of npm.",
            ),
            input(
                MemoryType::Preference,
                "Use pnpm rather than npm to install dependencies.",
            ),
            input(
                MemoryType::Preference,
                "Prefer early returns over nested conditionals.",
            ),
        ])
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.memory.id)
        .collect();
    e.embed_pending(|_| {}, &AtomicBool::new(false))
        .await
        .unwrap();
    // Words alone do not pair them (Jaccard 6/10): only meaning can.
    let options = ConsolidateOptions {
        threshold: Some(0.9),
        dry_run: true,
        ..ConsolidateOptions::default()
    };
    let report = e
        .consolidate(&options, &AtomicBool::new(false))
        .await
        .unwrap();
    assert_eq!(report.with_vectors, 3);
    assert_eq!(report.groups.len(), 1, "{report:#?}");
    let group = &report.groups[0];
    assert_eq!(group.basis, "meaning");
    let mut members = vec![group.kept.clone()];
    members.extend(group.merged.iter().cloned());
    members.sort();
    let mut expected = vec![ids[0].clone(), ids[1].clone()];
    expected.sort();
    assert_eq!(members, expected);
}
