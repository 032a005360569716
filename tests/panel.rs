//! The data behind the app's memory panel, against real libSQL files and a real index of
//! real source files: session summaries, trust progression across simulated sessions,
//! regression offers, trust-gated recall, health counts and score, module coverage, memory
//! gaps, and compact history snapshots.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use engram::clock::ManualClock;
use engram::code::IndexOptions;
use engram::lifecycle::{
    discovery_tokens, EventNote, FeedbackInput, FeedbackKind, SummaryMode, TrustLevel,
};
use engram::memory::{MemoryPatch, MemoryType, RememberInput};
use engram::retrieval::recall::ItemContent;
use engram::retrieval::request::RecallRequest;
use engram::{EngineOptions, Engram, OpenOptions};

const T0: i64 = 1_700_000_000_000;
const DAY: i64 = 86_400_000;

struct Project {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    e: Engram,
}

/// A project with a few real source files indexed.
async fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    for (path, text) in [
        (
            "src/auth/session.ts",
            "export function refresh(token: string): string {\n  return token.trim()\n}\n",
        ),
        (
            "src/auth/password.ts",
            "export function check(a: string, b: string): boolean {\n  return a === b\n}\n",
        ),
        (
            "src/db/pool.ts",
            "export const pool = { size: 10 }\nexport function acquire() { return pool }\n",
        ),
        ("main.py", "def main():\n    print('hi')\n"),
    ] {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let clock = Arc::new(ManualClock::new(T0));
    let mut options = OpenOptions::new(dir.path().join("memory.db"));
    options.project_root = Some(root);
    options.engine = EngineOptions {
        clock: clock.clone(),
        ..EngineOptions::default()
    };
    let e = Engram::open(options).await.unwrap();
    e.index(
        &IndexOptions::default(),
        &|_| {},
        &Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
    Project {
        _dir: dir,
        clock,
        e,
    }
}

fn learned(t: MemoryType, content: &str, session: &str, file: Option<&str>) -> RememberInput {
    let mut input = RememberInput::new(t, content);
    input.session_id = Some(session.into());
    input.related_files = file.into_iter().map(str::to_owned).collect();
    input
}

fn in_session(session: &str) -> EventNote {
    EventNote {
        session_id: Some(session.into()),
        ..EventNote::default()
    }
}

fn tracked(query: &str, session: &str) -> RecallRequest {
    let mut request = RecallRequest::new(query);
    request.track_access = true;
    request.session_id = Some(session.into());
    request
}

fn memory_ids(recall: &engram::retrieval::recall::Recall) -> Vec<String> {
    recall
        .items
        .iter()
        .filter_map(|i| match &i.content {
            ItemContent::Memory(m) => Some(m.id.clone()),
            ItemContent::Chunk(_) => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_summary_lists_what_was_used_and_learned_with_citations() {
    let p = project().await;
    let old =
        p.e.remember(learned(
            MemoryType::Gotcha,
            "Token refresh fails silently when Redis is unreachable",
            "s0",
            Some("src/auth/session.ts"),
        ))
        .await
        .unwrap()
        .memory;
    let decision =
        p.e.remember(learned(
            MemoryType::Decision,
            "Redis holds the refresh tokens; Postgres only the users",
            "s0",
            None,
        ))
        .await
        .unwrap()
        .memory;

    let recall =
        p.e.recall(tracked("redis refresh token", "s1"))
            .await
            .unwrap();
    let used_ids = memory_ids(&recall);
    assert!(used_ids.contains(&old.id) && used_ids.contains(&decision.id));
    p.e.recall(tracked("redis refresh", "s1")).await.unwrap();
    let mut taught = learned(
        MemoryType::ErrorPattern,
        "Auth tests hang without REDIS_URL set",
        "s1",
        Some("src/auth/session.ts"),
    );
    taught.needs_review = Some(true);
    let taught = p.e.remember(taught).await.unwrap().memory;
    p.e.mark_used(std::slice::from_ref(&taught.id), Some("s1"))
        .await
        .unwrap();

    let summary = p.e.session_summary("s1").await.unwrap();
    assert_eq!(summary.session_id, "s1");
    let used: Vec<(&str, u64)> = summary
        .used
        .iter()
        .map(|u| (u.memory.id.as_str(), u.uses))
        .collect();
    assert!(used.contains(&(old.id.as_str(), 2)), "{used:?}");
    assert!(used.contains(&(taught.id.as_str(), 1)), "{used:?}");
    assert_eq!(summary.used[0].uses, 2, "most used first");
    assert_eq!(summary.learned.len(), 1);
    assert_eq!(summary.learned[0].memory.id, taught.id);
    assert_eq!(summary.needs_review, 1);
    assert_eq!(
        summary.learned[0].citation,
        format!(
            "[Memory #{}: Auth tests hang without REDIS_URL set]",
            taught.id
        )
    );
    let expected_tokens: u64 = summary
        .used
        .iter()
        .map(|u| discovery_tokens(u.memory.memory_type))
        .sum();
    assert_eq!(summary.tokens_saved_estimate, expected_tokens);
    assert!(expected_tokens >= 1_500 + 1_000 + 1_500);
    assert_eq!(summary.trust_level, TrustLevel::Cautious);
    assert_eq!(summary.mode, SummaryMode::Full);
    assert_eq!(summary.ended_at, None);

    // Another session's summary holds none of it; ending records the end.
    assert!(p.e.session_summary("s2").await.unwrap().used.is_empty());
    p.clock.advance(60_000);
    let ended = p.e.end_session("s1").await.unwrap();
    assert_eq!(ended.ended_at, Some(T0 + 60_000));
    assert_eq!(ended.previous_trust_level, None);
    assert!(p.e.session_summary("").await.is_err());
    let health = p.e.health(Some("s1")).await.unwrap();
    assert_eq!(health.tokens_saved_this_session, expected_tokens);
}

/// Runs one session that learns `learned_count` memories (confirming `confirm` of them),
/// uses the first `uses` of them (each once) and flags `wrong` of them wrong, then ends it.
async fn session(
    p: &Project,
    name: &str,
    learned_count: usize,
    confirm: usize,
    uses: usize,
    wrong: usize,
) -> engram::lifecycle::SessionSummary {
    p.clock.advance(DAY);
    let mut ids = Vec::new();
    for i in 0..learned_count {
        let m =
            p.e.remember(learned(
                MemoryType::Pattern,
                &format!("{name} pattern number {i} wraps handlers"),
                name,
                None,
            ))
            .await
            .unwrap()
            .memory;
        ids.push(m.id);
    }
    for id in ids.iter().take(confirm) {
        p.e.confirm(id, None, in_session(name)).await.unwrap();
    }
    for id in ids.iter().skip(confirm).take(wrong) {
        p.e.feedback(
            id,
            FeedbackInput {
                kind: FeedbackKind::Wrong,
                correction: None,
                note: in_session(name),
            },
        )
        .await
        .unwrap();
    }
    let used: Vec<String> = ids.iter().take(uses).cloned().collect();
    p.e.mark_used(&used, Some(name)).await.unwrap();
    p.e.end_session(name).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn trust_rises_with_evidence_one_level_at_a_time_and_never_to_autonomous() {
    let p = project().await;
    let start = p.e.trust().await.unwrap();
    assert_eq!(start.level, TrustLevel::Cautious);
    assert_eq!(start.injection_threshold, 0.80);
    assert!(start.new_memories_need_review);

    // Two sessions, everything confirmed: not yet (3 sessions needed).
    session(&p, "a1", 2, 2, 1, 0).await;
    session(&p, "a2", 2, 2, 1, 0).await;
    assert_eq!(p.e.trust().await.unwrap().level, TrustLevel::Cautious);
    // A third where only 1 of 4 is confirmed: 5 of 8 overall is still half.
    let third = session(&p, "a3", 4, 1, 1, 0).await;
    assert_eq!(third.previous_trust_level, Some(TrustLevel::Cautious));
    assert_eq!(third.trust_level, TrustLevel::Standard);
    let state = p.e.trust().await.unwrap();
    assert_eq!(
        (state.level, state.sessions, state.sessions_at_level),
        (TrustLevel::Standard, 3, 0)
    );
    assert_eq!(state.injection_threshold, 0.65);

    // Level 3 needs 16 sessions, 10 at level 2 and corrections under 5% of uses: 12 more
    // clean sessions (15 in all) are not enough, the 16th is.
    for i in 0..12 {
        session(&p, &format!("b{i}"), 1, 1, 1, 0).await;
    }
    assert_eq!(p.e.trust().await.unwrap().level, TrustLevel::Standard);
    let sixteenth = session(&p, "b12", 1, 1, 1, 0).await;
    assert_eq!(sixteenth.trust_level, TrustLevel::Confident);
    assert_eq!(sixteenth.mode, SummaryMode::ReviewOnly);

    // Nothing but the user's choice reaches level 4.
    for i in 0..12 {
        session(&p, &format!("c{i}"), 1, 1, 1, 0).await;
    }
    assert_eq!(p.e.trust().await.unwrap().level, TrustLevel::Confident);
    let autonomous = p.e.set_trust_level(TrustLevel::Autonomous).await.unwrap();
    assert_eq!(autonomous.level, TrustLevel::Autonomous);
    assert_eq!(autonomous.injection_threshold, 0.45);
    assert_eq!(autonomous.summary_mode, SummaryMode::Suppressed);
}

#[tokio::test(flavor = "multi_thread")]
async fn frequent_corrections_keep_a_project_standard() {
    let p = project().await;
    p.e.set_trust_level(TrustLevel::Standard).await.unwrap();
    // 16 sessions, each using 10 memories and flagging 1 wrong: 10% corrections.
    for i in 0..16 {
        session(&p, &format!("w{i}"), 10, 9, 10, 1).await;
    }
    let state = p.e.trust().await.unwrap();
    assert_eq!(state.level, TrustLevel::Standard);
    let rate = state.correction_rate.unwrap();
    assert!((rate - 0.1).abs() < 1e-9, "{rate}");
}

#[tokio::test(flavor = "multi_thread")]
async fn three_wrong_memories_in_a_session_offer_a_step_down_never_force_it() {
    let p = project().await;
    // A cautious project has nowhere to step down to.
    let summary = session(&p, "early", 3, 0, 0, 3).await;
    assert_eq!(summary.corrections, 3);
    assert!(p.e.trust().await.unwrap().offer.is_none());

    p.e.set_trust_level(TrustLevel::Confident).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        let m =
            p.e.remember(learned(
                MemoryType::Gotcha,
                &format!("risky claim {i}"),
                "x",
                None,
            ))
            .await
            .unwrap()
            .memory;
        ids.push(m.id);
    }
    let wrong = |id: String| {
        let e = p.e.clone();
        async move {
            e.feedback(
                &id,
                FeedbackInput {
                    kind: FeedbackKind::Wrong,
                    correction: None,
                    note: in_session("bad"),
                },
            )
            .await
            .unwrap()
        }
    };
    assert!(wrong(ids[0].clone()).await.trust_offer.is_none());
    assert!(wrong(ids[1].clone()).await.trust_offer.is_none());
    let third = wrong(ids[2].clone()).await;
    let offer = third.trust_offer.expect("three wrong in one session");
    assert_eq!(offer.level, TrustLevel::Standard);
    assert_eq!(offer.session_id.as_deref(), Some("bad"));
    // Offered, not applied.
    let state = p.e.trust().await.unwrap();
    assert_eq!(state.level, TrustLevel::Confident);
    assert_eq!(state.offer.as_ref(), Some(&offer));
    // Dismissed: the level stays and the offer goes.
    let dismissed = p.e.dismiss_trust_offer().await.unwrap();
    assert_eq!(
        (dismissed.level, dismissed.offer),
        (TrustLevel::Confident, None)
    );
    // Accepted (through setTrustLevel): one level down.
    let accepted = p.e.set_trust_level(offer.level).await.unwrap();
    assert_eq!(accepted.level, TrustLevel::Standard);
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_trust_keeps_memories_at_or_below_the_threshold_out_of_recall() {
    let p = project().await;
    let mut low = RememberInput::new(MemoryType::Decision, "Queue jobs retry five times");
    low.confidence = Some(0.7);
    let low = p.e.remember(low).await.unwrap().memory;
    let mut high = RememberInput::new(MemoryType::Decision, "Queue jobs time out after a minute");
    high.confidence = Some(0.9);
    let high = p.e.remember(high).await.unwrap().memory;

    let mut request = RecallRequest::new("queue jobs");
    request.apply_trust = true;
    let cautious = memory_ids(&p.e.recall(request.clone()).await.unwrap());
    assert_eq!(cautious, vec![high.id.clone()], "level 1: above 0.80 only");
    p.e.set_trust_level(TrustLevel::Standard).await.unwrap();
    let standard = memory_ids(&p.e.recall(request.clone()).await.unwrap());
    assert!(standard.contains(&low.id) && standard.contains(&high.id));
    // The stricter of minConfidence and the threshold wins.
    request.filters.min_confidence = Some(0.85);
    let strict = memory_ids(&p.e.recall(request).await.unwrap());
    assert_eq!(strict, vec![high.id]);
}

#[tokio::test(flavor = "multi_thread")]
async fn health_counts_and_score_follow_the_documented_formula() {
    let p = project().await;
    let empty = p.e.health(None).await.unwrap();
    assert_eq!((empty.total, empty.score), (0, 0));

    let mut ids = Vec::new();
    for i in 0..10 {
        let mut input = RememberInput::new(MemoryType::Decision, format!("decision {i} on pools"));
        input.related_files = vec!["src/db/pool.ts".into()];
        ids.push(p.e.remember(input).await.unwrap().memory.id);
    }
    // 2 need review, 4 used (within 30 days), 1 disputed, 1 forgotten.
    p.e.feedback(
        &ids[0],
        FeedbackInput {
            kind: FeedbackKind::Wrong,
            correction: None,
            note: EventNote::default(),
        },
    )
    .await
    .unwrap();
    p.e.update(
        &ids[1],
        MemoryPatch {
            needs_review: Some(true),
            ..MemoryPatch::default()
        },
    )
    .await
    .unwrap();
    p.e.mark_used(&ids[2..6], None).await.unwrap();
    let why = EventNote {
        body: Some("pools are per worker now".into()),
        ..EventNote::default()
    };
    p.e.dispute(&ids[6], why).await.unwrap();
    p.e.forget(&ids[9], None).await.unwrap();

    let h = p.e.health(None).await.unwrap();
    assert_eq!((h.total, h.active, h.forgotten), (10, 9, 1));
    assert_eq!(
        (h.needs_review, h.active_last_30_days, h.disputed),
        (2, 4, 1)
    );
    let expected = engram::lifecycle::health_score(9, 2, 0, 4, 1);
    assert_eq!(h.score, expected.0);
    // 100 × (0.30 × 7/9 + 0.25 × 1 + 0.25 × 4/9 + 0.20 × 8/9) = 77.2 → 77
    assert_eq!(h.score, 77);

    // 31 days later nothing counts as recently used.
    p.clock.advance(31 * DAY);
    assert_eq!(p.e.health(None).await.unwrap().active_last_30_days, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn module_coverage_counts_indexed_files_with_active_memories() {
    let p = project().await;
    let mut on_session = RememberInput::new(MemoryType::Gotcha, "refresh trims the token");
    on_session.related_files = vec!["src/auth/session.ts".into()];
    p.e.remember(on_session).await.unwrap();
    let mut forgotten = RememberInput::new(MemoryType::Gotcha, "pools start at ten");
    forgotten.related_files = vec!["src/db/pool.ts".into()];
    let forgotten = p.e.remember(forgotten).await.unwrap().memory;
    p.e.forget(&forgotten.id, None).await.unwrap();

    let coverage = p.e.module_coverage().await.unwrap();
    let rows: Vec<(&str, u64, u64, u64)> = coverage
        .iter()
        .map(|c| (c.module.as_str(), c.files, c.covered_files, c.memories))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("./", 1, 0, 0),
            ("src/db/", 1, 0, 0),
            ("src/auth/", 2, 1, 1)
        ],
        "least covered first; forgotten memories do not cover"
    );
    assert_eq!(coverage[2].coverage, 0.5);
}

#[tokio::test(flavor = "multi_thread")]
async fn recalls_that_find_no_memory_are_gaps_until_one_does() {
    let p = project().await;
    p.e.remember(RememberInput::new(
        MemoryType::Decision,
        "We deploy on Fridays",
    ))
    .await
    .unwrap();
    let mut only_memories = tracked("How are  Kafka consumers rebalanced?", "g1");
    only_memories.filters.kinds = vec![engram::vector::ItemKind::Memory];
    assert!(memory_ids(&p.e.recall(only_memories.clone()).await.unwrap()).is_empty());
    p.clock.advance(1000);
    p.e.recall(only_memories.clone()).await.unwrap();
    // Not tracked (a person browsing): no gap.
    p.e.recall(RecallRequest::new("what about zookeeper"))
        .await
        .unwrap();

    let gaps = p.e.memory_gaps(false, None).await.unwrap();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(gaps[0].query, "how are kafka consumers rebalanced?");
    assert_eq!(
        (gaps[0].hits, gaps[0].session_id.as_deref()),
        (2, Some("g1"))
    );
    assert_eq!(p.e.health(None).await.unwrap().open_gaps, 1);

    // Memory learns the answer: the next such recall closes the gap.
    p.e.remember(RememberInput::new(
        MemoryType::ModuleInsight,
        "Kafka consumers are rebalanced by the cooperative sticky assignor",
    ))
    .await
    .unwrap();
    assert!(!memory_ids(&p.e.recall(only_memories).await.unwrap()).is_empty());
    assert!(p.e.memory_gaps(false, None).await.unwrap().is_empty());
    let all = p.e.memory_gaps(true, None).await.unwrap();
    assert!(all[0].resolved_at.is_some());
    assert!(p.e.resolve_gap("no-such-gap").await.is_err());
    assert!(p.e.memory_gaps(false, Some(0)).await.is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn history_is_stored_compactly_and_reads_back_whole() {
    let p = project().await;
    let mut input = RememberInput::new(MemoryType::Gotcha, "the pool leaks on timeout");
    input.tags = vec!["db".into()];
    let first = p.e.remember(input).await.unwrap().memory;
    p.e.update(
        &first.id,
        MemoryPatch {
            content: Some("the pool leaks connections on timeout".into()),
            ..MemoryPatch::default()
        },
    )
    .await
    .unwrap();
    let history = p.e.history(&first.id).await.unwrap();
    assert_eq!(
        history[0].memory, first,
        "the past version reads back as it was"
    );
    let restored = p.e.rollback(&first.id, 1).await.unwrap();
    assert_eq!(restored.content, first.content);
    assert_eq!(restored.tags, first.tags);
}
