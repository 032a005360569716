//! The memory lifecycle against real libSQL files, with a manual clock: decay and pruning
//! across simulated months, feedback and trust by use, review, supersedes and contradicts,
//! disputes and share-scope filters.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use engram::clock::ManualClock;
use engram::graph::NodeInput;
use engram::lifecycle::decay::current_confidence;
use engram::lifecycle::{EventKind, EventNote, FeedbackInput, FeedbackKind, PruneOptions};
use engram::memory::{
    ListFilter, MemoryPatch, MemoryRelation, MemoryType, RelationType, RememberInput, ShareScope,
};
use engram::{EngineOptions, Engram, OpenOptions};

const T0: i64 = 1_700_000_000_000;
const DAY: i64 = 86_400_000;

async fn open_at(dir: &tempfile::TempDir, clock: Arc<ManualClock>) -> Engram {
    let mut opts = OpenOptions::new(dir.path().join("memory.db"));
    opts.engine = EngineOptions {
        clock,
        ..Default::default()
    };
    Engram::open(opts).await.expect("open")
}

fn input(t: MemoryType, content: &str, file: Option<&str>) -> RememberInput {
    let mut i = RememberInput::new(t, content);
    i.related_files = file.into_iter().map(str::to_owned).collect();
    i
}

fn note(body: &str) -> EventNote {
    EventNote {
        body: Some(body.into()),
        author: Some("ana".into()),
        session_id: Some("s1".into()),
    }
}

fn never() -> AtomicBool {
    AtomicBool::new(false)
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_expires_deletes_after_grace_and_spares_what_must_stay() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(&dir, clock.clone()).await;
    let work = e
        .remember(input(
            MemoryType::WorkState,
            "Half way through the auth refactor",
            Some("src/auth.ts"),
        ))
        .await
        .unwrap()
        .memory;
    let gotcha = e
        .remember(input(
            MemoryType::Gotcha,
            "Redis must run before the auth tests",
            Some("src/auth.ts"),
        ))
        .await
        .unwrap()
        .memory;
    let orphan = e
        .remember(input(
            MemoryType::Gotcha,
            "The staging VPN drops idle sockets",
            None,
        ))
        .await
        .unwrap()
        .memory;
    let decision = e
        .remember(input(
            MemoryType::Decision,
            "We chose Postgres over MySQL for JSONB",
            None,
        ))
        .await
        .unwrap()
        .memory;
    let mut pinned_input = input(
        MemoryType::Gotcha,
        "CI caches node_modules per lockfile",
        None,
    );
    pinned_input.pinned = Some(true);
    let pinned = e.remember(pinned_input).await.unwrap().memory;
    let mut verified_input = input(
        MemoryType::WorkState,
        "Ticket 42 is blocked on the API",
        None,
    );
    verified_input.user_verified = Some(true);
    let verified = e.remember(verified_input).await.unwrap().memory;

    // Day 20: the work state (7-day half-life: expires at 21) and the verified one (orphan:
    // 3.5-day half-life, expires at 10.5) are not both gone yet.
    clock.advance(20 * DAY);
    let dry = e
        .prune(
            &PruneOptions {
                dry_run: true,
                ..Default::default()
            },
            &never(),
        )
        .await
        .unwrap();
    assert_eq!(
        dry.expired, 1,
        "only the verified orphan work state: {dry:?}"
    );
    assert!(
        !e.get(&verified.id).await.unwrap().deprecated,
        "a dry run changes nothing"
    );

    // Day 95: the orphan gotcha (30-day half-life) expired at 90; the attached gotcha (60)
    // expires at 180; the work state at 21.
    clock.advance(75 * DAY);
    let mut before = Vec::new();
    for id in [&work.id, &orphan.id, &verified.id] {
        before.push(e.get(id).await.unwrap());
    }
    let report = e.prune(&PruneOptions::default(), &never()).await.unwrap();
    assert_eq!(report.expired, 3, "{report:?}");
    assert_eq!(report.deleted, 0);
    for (id, before) in [&work.id, &orphan.id, &verified.id].into_iter().zip(before) {
        let m = e.get(id).await.unwrap();
        assert!(m.deprecated, "{}", m.content);
        assert!(m
            .deprecated_reason
            .as_deref()
            .unwrap()
            .starts_with("expired"));
        let history = e.history(id).await.unwrap();
        assert_eq!(history[0].ended_by, "expire");
        assert!(
            !history[0].memory.deprecated,
            "the history keeps the active state"
        );
        assert_eq!(history[0].memory, before, "the whole of it");
        assert_eq!(m.version, before.version + 1);
    }
    for id in [&gotcha.id, &decision.id, &pinned.id] {
        assert!(!e.get(id).await.unwrap().deprecated);
    }
    // Rolled back, an expired memory is active again (the history made it reversible).
    let restored = e.rollback(&work.id, 1).await.unwrap();
    assert!(!restored.deprecated);
    e.forget(&work.id, Some("done".into())).await.unwrap();

    // Day 130 (35 days after expiry): past the 30-day grace period, the forgotten are deleted
    // for good, except the one a person verified.
    clock.advance(35 * DAY);
    let report = e.prune(&PruneOptions::default(), &never()).await.unwrap();
    assert_eq!(
        report.deleted, 2,
        "the orphan and the work state: {report:?}"
    );
    assert_eq!(report.kept_verified, 1);
    assert!(report.compacted);
    assert_eq!(
        e.get(&orphan.id).await.unwrap_err().code(),
        "ENGRAM_NOT_FOUND"
    );
    assert!(e.get(&verified.id).await.unwrap().deprecated);
    // The work state was forgotten again at day 95 by hand: its grace runs to day 125.
    assert_eq!(
        e.get(&work.id).await.unwrap_err().code(),
        "ENGRAM_NOT_FOUND"
    );
    let stats = e.stats().await.unwrap();
    assert_eq!(stats.total, 4, "gotcha, decision, pinned, verified");

    // A year on, the decision and the pinned memory are still at full confidence.
    clock.advance(365 * DAY);
    e.prune(&PruneOptions::default(), &never()).await.unwrap();
    let d = e.get(&decision.id).await.unwrap();
    assert!(!d.deprecated);
    assert_eq!(current_confidence(&d, T0 + 500 * DAY), d.confidence);
    assert!(!e.get(&pinned.id).await.unwrap().deprecated);
    assert!(e.get(&gotcha.id).await.unwrap().deprecated);
}

#[tokio::test(flavor = "multi_thread")]
async fn use_restarts_decay_and_earns_trust() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(&dir, clock.clone()).await;
    let mut i = input(
        MemoryType::Gotcha,
        "Webhook retries need idempotency keys",
        Some("src/hooks.ts"),
    );
    i.needs_review = Some(true);
    i.confidence = Some(0.7);
    let m = e.remember(i).await.unwrap().memory;
    let ids = vec![m.id.clone()];
    for _ in 0..4 {
        clock.advance(50 * DAY);
        e.mark_used(&ids, None).await.unwrap();
    }
    // 200 days old but used every 50: never idle for three half-lives.
    assert_eq!(
        e.prune(&PruneOptions::default(), &never())
            .await
            .unwrap()
            .expired,
        0
    );
    let after4 = e.get(&m.id).await.unwrap();
    assert_eq!((after4.access_count, after4.uncorrected_uses), (4, 4));
    assert_eq!(after4.confidence, 0.7);
    e.mark_used(&ids, None).await.unwrap();
    let after5 = e.get(&m.id).await.unwrap();
    assert!(
        (after5.confidence - 0.75).abs() < 1e-9,
        "5 uncorrected uses: +0.05"
    );
    assert!(after5.needs_review);
    // `wrong` restarts the count and costs 0.1.
    let out = e
        .feedback(
            &m.id,
            FeedbackInput {
                kind: FeedbackKind::Wrong,
                correction: None,
                note: note("outdated"),
            },
        )
        .await
        .unwrap();
    assert!((out.memory.confidence - 0.65).abs() < 1e-9);
    assert_eq!(
        (out.memory.uncorrected_uses, out.memory.wrong_count),
        (0, 1)
    );
    for _ in 0..9 {
        e.mark_used(&ids, None).await.unwrap();
    }
    let after9 = e.get(&m.id).await.unwrap();
    assert!(
        (after9.confidence - 0.70).abs() < 1e-9,
        "one raise at the 5th use"
    );
    assert!(after9.needs_review, "cleared only at 10 uses");
    e.mark_used(&ids, None).await.unwrap();
    let after10 = e.get(&m.id).await.unwrap();
    assert!(!after10.needs_review);
    assert!((after10.confidence - 0.75).abs() < 1e-9);
    // Raises stop at 0.95.
    e.update(
        &m.id,
        MemoryPatch {
            confidence: Some(0.94),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for _ in 0..10 {
        e.mark_used(&ids, None).await.unwrap();
    }
    assert!((e.get(&m.id).await.unwrap().confidence - 0.95).abs() < 1e-9);
}

#[tokio::test(flavor = "multi_thread")]
async fn feedback_moves_confidence_and_a_correction_supersedes() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let m = e
        .remember(input(
            MemoryType::Decision,
            "Sessions live for 24 hours",
            Some("src/session.ts"),
        ))
        .await
        .unwrap()
        .memory;
    let helpful = e
        .feedback(
            &m.id,
            FeedbackInput {
                kind: FeedbackKind::Helpful,
                correction: None,
                note: EventNote::default(),
            },
        )
        .await
        .unwrap();
    assert!((helpful.memory.confidence - 0.85).abs() < 1e-9);
    assert_eq!(helpful.memory.helpful_count, 1);
    assert_eq!(
        helpful.memory.version, 1,
        "feedback is not a content change"
    );

    let fixed = e
        .feedback(
            &m.id,
            FeedbackInput {
                kind: FeedbackKind::Correction,
                correction: Some("Sessions live for 8 hours since ADR-12".into()),
                note: note("changed in March"),
            },
        )
        .await
        .unwrap();
    let new = fixed.correction.expect("a new memory");
    assert_eq!(new.content, "Sessions live for 8 hours since ADR-12");
    assert!(new.user_verified);
    assert_eq!(new.related_files, vec!["src/session.ts"]);
    assert_eq!(new.relations[0].relation_type, RelationType::Supersedes);
    assert_eq!(
        new.relations[0].target_memory_id.as_deref(),
        Some(m.id.as_str())
    );
    assert!(fixed.memory.deprecated);
    assert_eq!(fixed.memory.superseded_by.as_deref(), Some(new.id.as_str()));
    let events = e.events(&m.id).await.unwrap();
    let kinds: Vec<_> = events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EventKind::Helpful, EventKind::Correction]);
    assert_eq!(
        events[1].body.as_deref(),
        Some("Sessions live for 8 hours since ADR-12")
    );
    assert_eq!(events[1].session_id.as_deref(), Some("s1"));

    // Bad input is coded, and changes nothing.
    let bad = e
        .feedback(
            &new.id,
            FeedbackInput {
                kind: FeedbackKind::Correction,
                correction: None,
                note: EventNote::default(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(bad.code(), "ENGRAM_INVALID_ARG");
    let missing = e
        .feedback(
            "nope",
            FeedbackInput {
                kind: FeedbackKind::Helpful,
                correction: None,
                note: EventNote::default(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(missing.code(), "ENGRAM_NOT_FOUND");
    // Secrets in a correction are redacted like any memory.
    let secret = e
        .feedback(
            &new.id,
            FeedbackInput {
                kind: FeedbackKind::Correction,
                correction: Some(
                    "Use PASSWORD=hunter2hunter2 for the staging session store".into(),
                ),
                note: EventNote::default(),
            },
        )
        .await
        .unwrap();
    assert!(secret.correction.unwrap().content.contains("[REDACTED]"));
    assert!(!e.events(&new.id).await.unwrap()[0]
        .body
        .as_deref()
        .unwrap()
        .contains("hunter2"));
}

#[tokio::test(flavor = "multi_thread")]
async fn review_queue_confirm_edit_and_reject() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let mut ids = Vec::new();
    for text in [
        "Auth tests need REDIS_URL set",
        "Token refresh fails when Redis is down",
        "Use tabs",
    ] {
        let mut i = input(MemoryType::Gotcha, text, Some("src/auth.ts"));
        i.needs_review = Some(true);
        ids.push(e.remember(i).await.unwrap().memory.id);
    }
    assert_eq!(e.review_queue(None, None).await.unwrap().len(), 3);
    let confirmed = e
        .confirm(&ids[0], None, EventNote::default())
        .await
        .unwrap();
    assert!(confirmed.user_verified && !confirmed.needs_review);
    let edited = e
        .confirm(
            &ids[1],
            Some(MemoryPatch {
                content: Some("Token refresh fails silently when Redis is unreachable".into()),
                ..Default::default()
            }),
            note("clarified"),
        )
        .await
        .unwrap();
    assert_eq!(
        edited.content,
        "Token refresh fails silently when Redis is unreachable"
    );
    assert_eq!(edited.version, 2, "edit and confirmation are one version");
    let rejected = e.reject(&ids[2], note("not a gotcha")).await.unwrap();
    assert!(rejected.deprecated && !rejected.needs_review);
    assert_eq!(
        rejected.deprecated_reason.as_deref(),
        Some("rejected in review: not a gotcha")
    );
    assert!(e.review_queue(None, None).await.unwrap().is_empty());
    assert_eq!(e.events(&ids[2]).await.unwrap()[0].kind, EventKind::Reject);
}

#[tokio::test(flavor = "multi_thread")]
async fn contradictions_on_write_are_linked_both_kept_and_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let old = e
        .remember(input(
            MemoryType::Decision,
            "JWT access tokens expire after 24h in the auth service",
            Some("src/auth/jwt.ts"),
        ))
        .await
        .unwrap()
        .memory;
    let unrelated = e
        .remember(input(
            MemoryType::Gotcha,
            "Never run database migrations on the primary during business hours",
            None,
        ))
        .await
        .unwrap()
        .memory;
    let new = e
        .remember(input(
            MemoryType::Decision,
            "JWT access tokens expire after 1h in the auth service",
            Some("src/auth/jwt.ts"),
        ))
        .await
        .unwrap()
        .memory;
    assert!(
        !new.needs_review && new.relations.is_empty(),
        "the scan runs after the write"
    );
    settle(&e).await;
    let new = e.get(&new.id).await.unwrap();
    assert!(new.needs_review);
    let link = new
        .relations
        .iter()
        .find(|r| r.relation_type == RelationType::ConflictsWith)
        .expect("linked");
    assert_eq!(link.target_memory_id.as_deref(), Some(old.id.as_str()));
    assert!(link.auto_extracted);
    let old_now = e.get(&old.id).await.unwrap();
    assert!(
        old_now.needs_review && !old_now.deprecated,
        "both kept, both flagged"
    );
    assert_eq!(
        old_now.relations[0].target_memory_id.as_deref(),
        Some(new.id.as_str())
    );
    assert_eq!(e.history(&old.id).await.unwrap()[0].ended_by, "conflict");
    let unrelated_now = e.get(&unrelated.id).await.unwrap();
    assert!(unrelated_now.relations.is_empty() && !unrelated_now.needs_review);
    // Agreement is not a contradiction.
    let agree = e
        .remember(input(
            MemoryType::Gotcha,
            "Do not run database migrations on the primary during business hours",
            None,
        ))
        .await
        .unwrap()
        .memory;
    settle(&e).await;
    let agree = e.get(&agree.id).await.unwrap();
    assert!(
        agree.relations.is_empty() && !agree.needs_review,
        "{agree:?}"
    );
}

/// Waits for `settled`, failing the test instead of hanging.
async fn settle(e: &Engram) {
    tokio::time::timeout(std::time::Duration::from_secs(30), e.settled())
        .await
        .expect("settled within 30 s")
        .expect("scans succeeded");
}

#[tokio::test(flavor = "multi_thread")]
async fn settled_hurries_the_scan_while_another_task_keeps_writing() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let old = e
        .remember(input(
            MemoryType::Decision,
            "The billing worker listens on port 4000 in staging",
            None,
        ))
        .await
        .unwrap()
        .memory;
    // A task that never leaves the writer idle for long (short writes that queue no scans):
    // without `settled` hurrying it, the scan would wait for an idle moment that never comes.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let busy = tokio::spawn({
        let (e, stop, id, written) = (e.clone(), stop.clone(), old.id.clone(), written.clone());
        async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                e.mark_used(std::slice::from_ref(&id), None).await.unwrap();
                written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            written.load(std::sync::atomic::Ordering::Relaxed)
        }
    });
    // On a loaded machine the task may not have run yet: the test is about a writer that is
    // already busy.
    while written.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let new = e
        .remember(input(
            MemoryType::Decision,
            "The billing worker listens on port 5000 in staging",
            None,
        ))
        .await
        .unwrap()
        .memory;
    settle(&e).await;
    let flagged = e.get(&new.id).await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = busy.await.unwrap();
    assert!(writes > 0, "the other task was writing");
    assert!(flagged.needs_review, "{flagged:?}");
    assert_eq!(
        flagged.relations[0].target_memory_id.as_deref(),
        Some(old.id.as_str())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn close_waits_for_the_queued_scans() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let mut ids = Vec::new();
    for port in [3000, 8080, 9090] {
        let content = format!("The admin dashboard listens on port {port} in staging");
        let m = e
            .remember(input(MemoryType::Decision, &content, None))
            .await;
        ids.push(m.unwrap().memory.id);
    }
    e.close().await;
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let newest = e.get(&ids[2]).await.unwrap();
    let linked: Vec<_> = newest
        .relations
        .iter()
        .filter_map(|r| r.target_memory_id.clone())
        .collect();
    assert!(newest.needs_review);
    assert_eq!(linked.len(), 2, "{linked:?}");
    assert!(linked.contains(&ids[0]) && linked.contains(&ids[1]));
    // Each pair was found once, by its newer memory: the oldest holds one link per newer one.
    let oldest = e.get(&ids[0]).await.unwrap();
    assert_eq!(oldest.relations.len(), 2, "{:?}", oldest.relations);
    // Its first state, then one change per link, ending with the current one.
    assert_eq!(e.history(&ids[0]).await.unwrap().len(), 3);
}

/// Scans that run because the writer is idle take about a millisecond of it per pass and hand
/// the rest of their pass back to the queue: nothing handed back may be lost or scanned twice.
#[tokio::test(flavor = "multi_thread")]
async fn idle_scans_yield_the_writer_between_short_passes_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let mut ids = Vec::new();
    for port in [3000, 8080, 9090, 7070, 6060] {
        let content = format!("The admin dashboard listens on port {port} in staging");
        let m = e
            .remember(input(MemoryType::Decision, &content, None))
            .await;
        ids.push(m.unwrap().memory.id);
    }
    // Nobody awaits `settled`, so every pass is an idle one: wait for the newest memory's
    // links to appear by themselves.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let newest = e.get(&ids[4]).await.unwrap();
        if newest.relations.len() >= 3 || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Then `settled` has nothing left to wait for.
    tokio::time::timeout(std::time::Duration::from_secs(10), e.settled())
        .await
        .expect("the scans' count reached what was queued")
        .unwrap();
    // Each memory linked up to three older ones (the cap), each pair once: the oldest is
    // linked by every newer memory that chose it, and no memory links itself.
    let mut links = 0;
    for id in &ids {
        let m = e.get(id).await.unwrap();
        assert!(m
            .relations
            .iter()
            .all(|r| r.target_memory_id.as_deref() != Some(id.as_str())));
        let mut targets: Vec<_> = m
            .relations
            .iter()
            .filter_map(|r| r.target_memory_id.clone())
            .collect();
        let before = targets.len();
        targets.sort();
        targets.dedup();
        assert_eq!(
            targets.len(),
            before,
            "a pair linked twice: {:?}",
            m.relations
        );
        links += before;
    }
    // Memory k (0-based) finds min(k, 3) older ones: 0 + 1 + 2 + 3 + 3 links, two ends each.
    assert_eq!(links, 2 * 9);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn supersede_links_decays_faster_and_refuses_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(&dir, clock.clone()).await;
    let a = e
        .remember(input(
            MemoryType::Gotcha,
            "Build with webpack 4",
            Some("webpack.config.js"),
        ))
        .await
        .unwrap()
        .memory;
    // A supersedes relation given at remember time takes effect.
    let mut bi = input(
        MemoryType::Gotcha,
        "Build with vite since the migration",
        Some("vite.config.ts"),
    );
    bi.relations = vec![MemoryRelation {
        target_memory_id: Some(a.id.clone()),
        target_file_path: None,
        relation_type: RelationType::Supersedes,
        confidence: 1.0,
        auto_extracted: false,
    }];
    let b = e.remember(bi).await.unwrap().memory;
    let a_now = e.get(&a.id).await.unwrap();
    assert_eq!(a_now.superseded_by.as_deref(), Some(b.id.as_str()));
    clock.advance(30 * DAY);
    let (a_now, b_now) = (e.get(&a.id).await.unwrap(), e.get(&b.id).await.unwrap());
    let now = T0 + 30 * DAY;
    assert!(
        (current_confidence(&a_now, now) - 0.4).abs() < 1e-9,
        "superseded: 30-day half-life"
    );
    assert!((current_confidence(&b_now, now) - 0.8 * 0.5f64.powf(0.5)).abs() < 1e-9);

    let c = e
        .remember(input(
            MemoryType::Gotcha,
            "Build with rolldown",
            Some("rolldown.config.ts"),
        ))
        .await
        .unwrap()
        .memory;
    let (b2, c2) = e.supersede(&b.id, &c.id).await.unwrap();
    assert_eq!(b2.superseded_by.as_deref(), Some(c.id.as_str()));
    assert_eq!(c2.relations[0].relation_type, RelationType::Supersedes);
    assert_eq!(
        e.supersede(&c.id, &a.id).await.unwrap_err().code(),
        "ENGRAM_CYCLE"
    );
    assert_eq!(
        e.supersede(&a.id, &a.id).await.unwrap_err().code(),
        "ENGRAM_INVALID_ARG"
    );
    assert_eq!(
        e.supersede(&a.id, "nope").await.unwrap_err().code(),
        "ENGRAM_NOT_FOUND"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn disputes_cost_a_fifth_and_keep_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let m = e
        .remember(input(
            MemoryType::Decision,
            "All services log JSON to stdout",
            None,
        ))
        .await
        .unwrap()
        .memory;
    let d = e
        .dispute(&m.id, note("The batch jobs log to files"))
        .await
        .unwrap();
    assert_eq!(d.memory.disputed_at, Some(T0));
    assert!((current_confidence(&d.memory, T0) - 0.64).abs() < 1e-9);
    assert_eq!(
        e.dispute(&m.id, EventNote::default())
            .await
            .unwrap_err()
            .code(),
        "ENGRAM_INVALID_ARG"
    );
    e.comment(&m.id, note("Batch jobs are being migrated"))
        .await
        .unwrap();
    let r = e
        .resolve_dispute(&m.id, note("Kept; batch jobs migrate in Q3"))
        .await
        .unwrap();
    assert_eq!(r.memory.disputed_at, None);
    assert_eq!(
        e.resolve_dispute(&m.id, EventNote::default())
            .await
            .unwrap_err()
            .code(),
        "ENGRAM_CONFLICT"
    );
    let thread: Vec<_> = e
        .events(&m.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.body.unwrap()))
        .collect();
    assert_eq!(
        thread,
        vec![
            (EventKind::Dispute, "The batch jobs log to files".to_owned()),
            (
                EventKind::Comment,
                "Batch jobs are being migrated".to_owned()
            ),
            (
                EventKind::Resolve,
                "Kept; batch jobs migrate in Q3".to_owned()
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn share_scope_filters_every_memory_query() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    for (scope, text) in [
        (ShareScope::Personal, "I alias gst to git status"),
        (ShareScope::Team, "The team reviews every migration"),
        (ShareScope::Organization, "Secrets live in the vault"),
    ] {
        let mut i = input(MemoryType::Preference, text, None);
        i.share_scope = Some(scope);
        e.remember(i).await.unwrap();
    }
    let team = e
        .list(&ListFilter {
            share_scopes: vec![ShareScope::Team, ShareScope::Organization],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(team.len(), 2);
    assert!(team.iter().all(|m| m.share_scope != ShareScope::Personal));
    let mut options = engram::memory::SearchOptions::default();
    options.filter.share_scopes = vec![ShareScope::Personal];
    let hits = e.search("git status", &options).await.unwrap();
    assert_eq!(hits.len(), 1);
    options.filter.share_scopes = vec![ShareScope::Team];
    assert!(e.search("git status", &options).await.unwrap().is_empty());
    let mut request = engram::retrieval::request::RecallRequest::new("vault secrets");
    request.filters.share_scopes = vec![ShareScope::Team];
    let out = e.recall(request).await.unwrap();
    assert!(
        out.items.is_empty(),
        "the organization memory is filtered out"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_removes_orphan_agent_nodes_but_not_attached_or_user_ones() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(&dir, clock.clone()).await;
    let node = |key: &str, source: &str| {
        let mut n = NodeInput::new(key, "concept");
        n.source = engram::graph::GraphSource::parse(source).unwrap();
        n
    };
    e.inject_graph(
        &[
            node("concept:lonely", "agent"),
            node("concept:attached", "agent"),
            node("concept:mine", "user"),
        ],
        &[],
    )
    .await
    .unwrap();
    let mut i = input(
        MemoryType::Pattern,
        "Use the repository pattern for data access",
        None,
    );
    i.target_node_id = Some("concept:attached".into());
    e.remember(i).await.unwrap();
    clock.advance(31 * DAY);
    let report = e.prune(&PruneOptions::default(), &never()).await.unwrap();
    assert_eq!(report.orphan_nodes, 1, "{report:?}");
    assert!(e.node("concept:lonely").await.unwrap().is_none());
    assert!(e.node("concept:attached").await.unwrap().is_some());
    assert!(e.node("concept:mine").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn export_delete_all_import_restores_everything() {
    use engram::lifecycle::{ExportFormat, ExportOptions, OnConflict};
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(&dir, clock.clone()).await;
    let mut a = input(
        MemoryType::Gotcha,
        "Redis must run before the auth tests",
        Some("src/auth.ts"),
    );
    a.tags = vec!["auth".into()];
    a.metadata = Some(serde_json::json!({ "ticket": "ENG-7" }));
    let a = e.remember(a).await.unwrap().memory;
    clock.advance(DAY);
    e.update(
        &a.id,
        MemoryPatch {
            confidence: Some(0.9),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    e.feedback(
        &a.id,
        FeedbackInput {
            kind: FeedbackKind::Helpful,
            correction: None,
            note: note("saved an hour"),
        },
    )
    .await
    .unwrap();
    let b = e
        .remember(input(
            MemoryType::Decision,
            "We chose Postgres over MySQL for JSONB",
            None,
        ))
        .await
        .unwrap()
        .memory;
    e.dispute(&b.id, note("Is MySQL 8 JSON enough?"))
        .await
        .unwrap();
    let c = e
        .remember(input(
            MemoryType::WorkState,
            "Half way through the billing refactor",
            None,
        ))
        .await
        .unwrap()
        .memory;
    e.forget(&c.id, Some("done".into())).await.unwrap();
    e.mark_used(std::slice::from_ref(&a.id), None)
        .await
        .unwrap();

    let ids = [&a.id, &b.id, &c.id];
    let mut before = Vec::new();
    for id in ids {
        before.push((
            e.get(id).await.unwrap(),
            e.history(id).await.unwrap().len(),
            e.events(id).await.unwrap(),
        ));
    }
    let json = e
        .export_memories(&ExportOptions {
            format: ExportFormat::Json,
            include_forgotten: None,
        })
        .await
        .unwrap();
    assert_eq!(json.memories, 3);

    assert_eq!(e.delete_all().await.unwrap(), 3);
    assert_eq!(e.stats().await.unwrap().total, 0);
    assert_eq!(e.get(&a.id).await.unwrap_err().code(), "ENGRAM_NOT_FOUND");
    assert!(e
        .search("Redis auth", &Default::default())
        .await
        .unwrap()
        .is_empty());

    let report = e
        .import_memories(ExportFormat::Json, &json.text, OnConflict::Skip)
        .await
        .unwrap();
    assert_eq!(
        (report.imported, report.skipped, report.duplicates),
        (3, 0, 0),
        "{report:?}"
    );
    assert_eq!(
        report.versions, 2,
        "a: update; c: forget; the dispute is no version: {report:?}"
    );
    assert_eq!(report.events, 2);
    for (id, (memory, versions, events)) in ids.iter().zip(before) {
        assert_eq!(e.get(id).await.unwrap(), memory, "restored exactly");
        assert_eq!(e.history(id).await.unwrap().len(), versions);
        assert_eq!(e.events(id).await.unwrap(), events);
    }
    let hits = e.search("Redis auth", &Default::default()).await.unwrap();
    assert_eq!(hits.len(), 1, "searchable again");
    // Importing again skips every id; replacing rewrites them.
    let again = e
        .import_memories(ExportFormat::Json, &json.text, OnConflict::Skip)
        .await
        .unwrap();
    assert_eq!((again.imported, again.skipped), (0, 3));
    let replaced = e
        .import_memories(ExportFormat::Json, &json.text, OnConflict::Replace)
        .await
        .unwrap();
    assert_eq!(replaced.updated, 3);
    assert_eq!(e.get(&a.id).await.unwrap().helpful_count, 1);

    // Bad documents are refused before anything is written.
    for bad in [
        "not json",
        r#"{"format":"other","version":1,"projectId":"p","exportedAt":0,"memories":[]}"#,
        r#"{"format":"engram.memories","version":99,"projectId":"p","exportedAt":0,"memories":[]}"#,
    ] {
        let err = e
            .import_memories(ExportFormat::Json, bad, OnConflict::Skip)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG", "{bad}: {err}");
    }
    let mut doc: serde_json::Value = serde_json::from_str(&json.text).unwrap();
    doc["memories"][1]["type"] = "nonsense".into();
    let err = e
        .import_memories(ExportFormat::Json, &doc.to_string(), OnConflict::Replace)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
    let mut doc: serde_json::Value = serde_json::from_str(&json.text).unwrap();
    doc["memories"][2]["content"] = "".into();
    let err = e
        .import_memories(ExportFormat::Json, &doc.to_string(), OnConflict::Replace)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("memory 2"), "{err}");
    // A hand-edited secret is redacted on the way in.
    let mut doc: serde_json::Value = serde_json::from_str(&json.text).unwrap();
    doc["memories"][0]["content"] =
        "Deploy key is sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789".into();
    e.import_memories(ExportFormat::Json, &doc.to_string(), OnConflict::Replace)
        .await
        .unwrap();
    let redacted = e.get(&a.id).await.unwrap();
    assert!(
        redacted.content.contains("[REDACTED]") && redacted.redactions >= 1,
        "{}",
        redacted.content
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn markdown_export_reads_back_and_imports_edits() {
    use engram::lifecycle::{ExportFormat, ExportOptions, OnConflict};
    let dir = tempfile::tempdir().unwrap();
    let e = open_at(&dir, Arc::new(ManualClock::new(T0))).await;
    let a = e
        .remember(input(
            MemoryType::Gotcha,
            "Redis must run before the auth tests",
            Some("src/auth.ts"),
        ))
        .await
        .unwrap()
        .memory;
    let b = e
        .remember(input(
            MemoryType::Decision,
            "We chose Postgres:\n\n```sql\nSELECT 1;\n```\n### not a heading",
            None,
        ))
        .await
        .unwrap()
        .memory;
    let md = e
        .export_memories(&ExportOptions {
            format: ExportFormat::Markdown,
            include_forgotten: None,
        })
        .await
        .unwrap();
    assert!(
        md.text.contains("## Decisions") && md.text.contains("> Redis must run"),
        "{}",
        md.text
    );
    // Unchanged, it imports as nothing to do.
    let same = e
        .import_memories(ExportFormat::Markdown, &md.text, OnConflict::Skip)
        .await
        .unwrap();
    assert_eq!(
        (same.skipped, same.updated, same.imported),
        (2, 0, 0),
        "{same:?}"
    );
    // A person edits one memory and adds one by hand.
    let edited = md.text.replace(
        "> Redis must run before the auth tests",
        "> Redis must run before the auth and billing tests",
    )
        + "\n## Gotchas\n\n### Flaky clock\n\n> The CI clock drifts by seconds on macOS runners\n";
    let report = e
        .import_memories(ExportFormat::Markdown, &edited, OnConflict::Skip)
        .await
        .unwrap();
    assert_eq!(
        (report.updated, report.imported, report.skipped),
        (1, 1, 1),
        "{report:?}"
    );
    let a_now = e.get(&a.id).await.unwrap();
    assert_eq!(
        a_now.content,
        "Redis must run before the auth and billing tests"
    );
    assert_eq!(a_now.version, 2);
    assert_eq!(e.get(&b.id).await.unwrap(), b);
    let added = e
        .search("CI clock drifts", &Default::default())
        .await
        .unwrap();
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].memory.memory_type, MemoryType::Gotcha);
    let err = e
        .import_memories(
            ExportFormat::Markdown,
            "### orphan block\n\n> no section",
            OnConflict::Skip,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}
