//! The MemoryObserver against real libSQL files: every recorded session in
//! `tests/fixtures/observer/` replayed with its expectations, and each signal, the trust gate,
//! the gates and the scratchpad cap checked on sessions built for them.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use engram::clock::ManualClock;
use engram::memory::Memory;
use engram::observer::protocol::json;
use engram::observer::{
    Decision, Finalized, Message, SessionOptions, SessionOutcome, SessionType, Signal, ToolCall,
    ToolResult,
};
use engram::{EngineOptions, Engram, OpenOptions};
use serde_json::Value;

/// The fixtures' clock origin (2026-01-01): their timestamps are at or after it.
const T0: i64 = 1_767_225_600_000;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/observer")
}

async fn open_at(dir: &Path, root: Option<PathBuf>, clock: Arc<ManualClock>) -> Engram {
    let mut options = OpenOptions::new(dir.join("memory.db"));
    options.project_root = root;
    options.engine = EngineOptions {
        clock,
        ..EngineOptions::default()
    };
    Engram::open(options).await.unwrap()
}

fn session_options(v: &Value) -> SessionOptions {
    let mut o = SessionOptions::new(v["sessionId"].as_str().unwrap());
    if let Some(t) = v["sessionType"].as_str() {
        o.session_type = SessionType::parse(t).unwrap();
    }
    o.work_unit = v["workUnit"].as_str().map(Into::into);
    o.planned_steps = v["plannedSteps"].as_u64().map(|n| n as u32);
    o
}

/// Whether a promoted memory matches a fixture matcher.
fn matches(m: &Memory, matcher: &Value, done: &Finalized) -> bool {
    let signal_of = |m: &Memory| {
        done.candidates
            .iter()
            .find(|c| c.memory_id.as_deref() == Some(m.id.as_str()))
            .map(|c| c.signal.as_str())
    };
    let str_ok = |key: &str, actual: Option<&str>| {
        matcher[key]
            .as_str()
            .is_none_or(|want| actual == Some(want))
    };
    str_ok("type", Some(m.memory_type.as_str()))
        && str_ok("source", Some(m.source.as_str()))
        && (matcher["signal"].is_null()
            || (m.source.as_str() == "observer_inferred" && str_ok("signal", signal_of(m))))
        && matcher["needsReview"]
            .as_bool()
            .is_none_or(|want| m.needs_review == want)
        && matcher["contains"].as_array().is_none_or(|parts| {
            parts
                .iter()
                .all(|p| m.content.contains(p.as_str().unwrap()))
        })
        && matcher["tags"].as_array().is_none_or(|tags| {
            tags.iter()
                .all(|t| m.tags.iter().any(|have| have == t.as_str().unwrap()))
        })
}

fn describe(done: &Finalized) -> String {
    let mut s = String::new();
    for c in &done.candidates {
        s += &format!(
            "\n  {:?} {} [{}] {:?} sessions={} value={:.2}: {}",
            c.decision,
            c.signal.as_str(),
            c.memory_type.as_str(),
            c.key.replace('\n', " | "),
            c.sessions,
            c.value,
            c.content
        );
    }
    s
}

fn check_session(name: &str, spec: &Value, done: &Finalized) {
    let context = || format!("{name} / {}:{}", done.session_id, describe(done));
    for matcher in spec["expectPromoted"].as_array().into_iter().flatten() {
        assert!(
            done.promoted.iter().any(|m| matches(m, matcher, done)),
            "expected a promoted memory like {matcher} in {}",
            context()
        );
    }
    for matcher in spec["expectNotPromoted"].as_array().into_iter().flatten() {
        if let Some(m) = done.promoted.iter().find(|m| matches(m, matcher, done)) {
            panic!(
                "{:?} was promoted, against {matcher}, in {}",
                m.content,
                context()
            );
        }
    }
    for want in spec["expectCount"].as_array().into_iter().flatten() {
        let n = done
            .promoted
            .iter()
            .filter(|m| matches(m, want, done))
            .count();
        assert_eq!(
            n as u64,
            want["count"].as_u64().unwrap(),
            "{want} in {}",
            context()
        );
    }
    for want in spec["expectDecisions"].as_array().into_iter().flatten() {
        let signal = Signal::parse(want["signal"].as_str().unwrap()).unwrap();
        let decision = want["decision"].as_str().unwrap();
        let found = done.candidates.iter().any(|c| {
            c.signal == signal
                && serde_json::to_value(c.decision).unwrap() == decision
                && want["contains"].as_array().is_none_or(|parts| {
                    parts
                        .iter()
                        .all(|p| c.content.contains(p.as_str().unwrap()))
                })
        });
        assert!(found, "expected a {want} candidate in {}", context());
    }
}

/// A replayed fixture: its engine (in a temp dir kept alive) and each session's result.
struct Replayed {
    e: Engram,
    results: Vec<Finalized>,
    _dir: tempfile::TempDir,
}

/// Replays one fixture file.
async fn replay(path: &Path) -> Replayed {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(dir.path(), None, clock.clone()).await;
    let mut results = Vec::new();
    for spec in doc["sessions"].as_array().unwrap() {
        let feed = |spec: &Value| {
            let session = e.observe(&session_options(&spec["session"])).unwrap();
            for m in spec["messages"].as_array().unwrap() {
                clock.advance(1000);
                session.observe(json::message(m).unwrap()).unwrap();
            }
            session
        };
        let session = match spec["parallel"].as_array() {
            None => feed(spec),
            Some(agents) => {
                let ids: Vec<String> = agents
                    .iter()
                    .map(|a| {
                        feed(a);
                        a["session"]["sessionId"].as_str().unwrap().to_owned()
                    })
                    .collect();
                e.merge_sessions(&ids, &session_options(&spec["merged"]))
                    .unwrap()
            }
        };
        let outcome = SessionOutcome::parse(spec["outcome"].as_str().unwrap()).unwrap();
        let done = e.finalize(&session, Some(outcome)).await.unwrap();
        check_session(&name, spec, &done);
        results.push(done);
    }
    Replayed {
        e,
        results,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_recorded_session_promotes_what_it_must_and_nothing_it_must_not() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "fixtures missing: {files:?}");
    for file in files {
        replay(&file).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_promotion_is_one_transaction_with_the_counts_and_the_session_row() {
    let replayed = replay(&fixtures_dir().join("co_access_three_sessions.json")).await;
    let last = replayed.results.last().unwrap();
    assert_eq!(last.metrics.files_edited, 2);
    // Both files were read in the earlier sessions too; the first session had none before.
    assert_eq!(last.metrics.files_read_before, 2);
    assert_eq!(replayed.results[0].metrics.files_read_before, 0);
    assert_eq!(last.metrics.memories_promoted as usize, last.promoted.len());
    // The co-access memory names both files and is linked to its count row.
    let pair = last
        .candidates
        .iter()
        .find(|c| c.signal == Signal::CoAccess && c.decision == Decision::Promoted)
        .unwrap();
    assert_eq!(pair.sessions, 3);
    assert!(pair.memory_id.is_some());
    let memory = last
        .promoted
        .iter()
        .find(|m| Some(&m.id) == pair.memory_id.as_ref())
        .unwrap();
    assert_eq!(
        memory.related_files,
        vec!["src/auth/session.ts", "src/auth/token.ts"]
    );
    assert_eq!(memory.source.as_str(), "observer_inferred");
    assert!(memory.tags.contains(&"signal:co_access".to_owned()));
    assert_eq!(memory.session_id.as_deref(), Some("auth-3"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_is_promoted_once_and_a_forgotten_one_stays_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(dir.path(), None, clock.clone()).await;
    let correction = |id: &str| {
        let s = e.observe(&SessionOptions::new(id)).unwrap();
        s.observe(Message::Reasoning {
            text: "Correction: the queue drains on SIGTERM, not on exit.".into(),
            step: 1,
        })
        .unwrap();
        s
    };
    let first = e.finalize(&correction("s1"), None).await.unwrap();
    assert_eq!(first.promoted.len(), 1);
    let id = first.promoted[0].id.clone();
    let second = e.finalize(&correction("s2"), None).await.unwrap();
    assert!(second.promoted.is_empty());
    assert_eq!(second.candidates[0].decision, Decision::AlreadyPromoted);
    assert_eq!(second.candidates[0].sessions, 2);
    // The user rejects it: it is not promoted again, and the class's record worsens.
    e.forget(&id, Some("wrong".into())).await.unwrap();
    let third = e.finalize(&correction("s3"), None).await.unwrap();
    assert!(third.promoted.is_empty());
    assert_eq!(third.candidates[0].decision, Decision::AlreadyPromoted);
    assert!(third.candidates[0].value < first.candidates[0].value);
}

#[tokio::test(flavor = "multi_thread")]
async fn handles_on_one_engine_share_a_session_and_finalize_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let a = open_at(dir.path(), None, clock.clone()).await;
    let b = open_at(dir.path(), None, clock.clone()).await;
    let s1 = a.observe(&SessionOptions::new("shared")).unwrap();
    let s2 = b.observe(&SessionOptions::new("shared")).unwrap();
    s1.observe(read_call("src/a.ts", 1)).unwrap();
    s2.observe(read_call("src/b.ts", 2)).unwrap();
    assert_eq!(s1.snapshot().unwrap().events, 2);
    a.finalize(&s2, None).await.unwrap();
    let err = s1.observe(read_call("src/c.ts", 3)).unwrap_err();
    assert_eq!(err.code(), "ENGRAM_CONFLICT");
    assert_eq!(
        a.finalize(&s1, None).await.unwrap_err().code(),
        "ENGRAM_CONFLICT"
    );
    // The id can be reopened, but a second finalize of it is refused and keeps the pad.
    let again = a.observe(&SessionOptions::new("shared")).unwrap();
    again.observe(read_call("src/d.ts", 1)).unwrap();
    let err = a.finalize(&again, None).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_CONFLICT");
    assert_eq!(again.snapshot().unwrap().events, 1);
    // Bad options are coded.
    let err = a.observe(&SessionOptions::new("  ")).unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}

fn read_call(path: &str, step: u32) -> Message {
    Message::ToolCall(ToolCall {
        tool: "Read".into(),
        step,
        path: Some(path.into()),
        ..ToolCall::default()
    })
}

fn call(tool: &str, step: u32, f: impl FnOnce(&mut ToolCall)) -> Message {
    let mut c = ToolCall {
        tool: tool.into(),
        step,
        ..ToolCall::default()
    };
    f(&mut c);
    Message::ToolCall(c)
}

fn result(tool: &str, step: u32, is_error: bool, text: &str) -> Message {
    Message::ToolResult(ToolResult {
        tool: tool.into(),
        step,
        is_error,
        text: text.into(),
        full_len: text.len() as u32,
        ..ToolResult::default()
    })
}

fn candidate(done: &Finalized, signal: Signal) -> &engram::observer::CandidateReport {
    done.candidates
        .iter()
        .find(|c| c.signal == signal)
        .unwrap_or_else(|| panic!("no {signal:?} candidate in{}", describe(done)))
}

#[tokio::test(flavor = "multi_thread")]
async fn each_single_session_signal_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    // A real project, indexed, so that the import chase can be confirmed.
    let root = dir.path().join("repo");
    std::fs::create_dir_all(root.join("src/orders")).unwrap();
    std::fs::write(
        root.join("src/orders/service.ts"),
        "import { price } from './pricing';\nexport const total = (n: number) => price(n);\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/orders/pricing.ts"),
        "export function price(n: number) { return n * 2; }\n",
    )
    .unwrap();
    std::fs::write(root.join("src/orders/legacy.ts"), "export const old = 1;\n").unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(dir.path(), Some(root.clone()), clock.clone()).await;
    e.index(
        &Default::default(),
        &|_| {},
        &Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();

    let s = e.observe(&SessionOptions::new("signals")).unwrap();
    let abs = |p: &str| root.join(p).to_string_lossy().into_owned();
    let big = "x".repeat(60_000);
    let listing: String = (0..12)
        .map(|i| format!("node_modules/lib{i}/index.d.ts\n"))
        .chain(["src/orders/service.ts\n".to_owned()])
        .collect();
    let steps: Vec<Message> = vec![
        // import chase: service.ts then pricing.ts, which it imports (absolute paths as
        // agents send them, made relative to the root).
        call("Read", 1, |c| c.path = Some(abs("src/orders/service.ts"))),
        result("Read", 1, false, "import { price } from './pricing';"),
        call("Read", 1, |c| c.path = Some(abs("src/orders/pricing.ts"))),
        result("Read", 1, false, "export function price"),
        // read-abandon: legacy.ts read once and left while pricing.ts is edited.
        call("Read", 2, |c| c.path = Some("src/orders/legacy.ts".into())),
        result("Read", 2, false, "export const old = 1;"),
        // repeated grep x3 (early trigger), then the file it leads to.
        call("Grep", 3, |c| c.pattern = Some("applyDiscount".into())),
        result("Grep", 3, false, ""),
        call("Grep", 4, |c| c.pattern = Some("applyDiscount".into())),
        result("Grep", 4, false, ""),
        call("Grep", 5, |c| c.pattern = Some("applyDiscount".into())),
        result(
            "Grep",
            5,
            false,
            "src/orders/pricing.ts:1:export function price",
        ),
        call("Read", 5, |c| c.path = Some("src/orders/pricing.ts".into())),
        result("Read", 5, false, "export function price"),
        // glob-ignore: a search listing mostly node_modules.
        call("Glob", 6, |c| c.pattern = Some("**/*.d.ts".into())),
        result("Glob", 6, false, &listing),
        // backtrack: an edit undone by the next one.
        call("Edit", 7, |c| {
            c.path = Some("src/orders/pricing.ts".into());
            c.old_text_hash = Some(11);
            c.new_text_hash = Some(22);
        }),
        result("Edit", 7, false, "ok"),
        call("Edit", 8, |c| {
            c.path = Some("src/orders/pricing.ts".into());
            c.old_text_hash = Some(22);
            c.new_text_hash = Some(11);
        }),
        result("Edit", 8, false, "ok"),
        // config touch: package.json with two source files.
        call("Edit", 9, |c| c.path = Some("src/orders/service.ts".into())),
        result("Edit", 9, false, "ok"),
        call("Edit", 9, |c| c.path = Some("package.json".into())),
        result("Edit", 9, false, "ok"),
        // tool sequence: edit, run, run.
        call("Bash", 10, |c| c.command = Some("npm run lint".into())),
        result("Bash", 10, false, "ok"),
        call("Bash", 10, |c| c.command = Some("npm test".into())),
        result("Bash", 10, false, "ok"),
        // token spike: one huge output.
        call("Bash", 11, |c| {
            c.command = Some("cat fixtures/orders.json".into())
        }),
        result("Bash", 11, false, &big),
        // external reference.
        call("WebFetch", 12, |c| {
            c.url = Some("https://developer.mozilla.org/en-US/docs/Web/API/Intl".into())
        }),
        result("WebFetch", 12, false, "Intl.NumberFormat"),
        Message::SessionComplete {
            outcome: SessionOutcome::Success,
            steps_executed: 12,
        },
    ];
    for m in steps {
        clock.advance(500);
        s.observe(m).unwrap();
    }
    let snapshot = s.snapshot().unwrap();
    assert_eq!(snapshot.external_step, Some(12));
    let early: Vec<Signal> = snapshot.early_triggers.iter().map(|t| t.signal).collect();
    assert_eq!(early, vec![Signal::RepeatedGrep, Signal::ConfigTouch]);
    let done = e.finalize(&s, None).await.unwrap();

    let chase = done
        .candidates
        .iter()
        .find(|c| {
            c.signal == Signal::ImportChase
                && c.key == "src/orders/service.ts\nsrc/orders/pricing.ts"
        })
        .unwrap_or_else(|| panic!("no import chase in{}", describe(&done)));
    assert_eq!(chase.decision, Decision::TooFewSessions);
    // pricing -> legacy is a read sequence but not an import.
    assert!(done
        .candidates
        .iter()
        .any(|c| c.signal == Signal::ImportChase && c.decision == Decision::NotAnImport));
    assert!(candidate(&done, Signal::ReadAbandon).key == "src/orders/legacy.ts");
    let grep = candidate(&done, Signal::RepeatedGrep);
    assert_eq!(
        grep.decision,
        Decision::Promoted,
        "early trigger skips the session count"
    );
    assert!(grep.content.contains("src/orders/pricing.ts"));
    assert!(candidate(&done, Signal::GlobIgnore)
        .content
        .contains("12 of 13"));
    assert_eq!(
        candidate(&done, Signal::Backtrack).key,
        "src/orders/pricing.ts"
    );
    let config = candidate(&done, Signal::ConfigTouch);
    assert_eq!(config.decision, Decision::Promoted);
    assert!(config.content.contains("package.json"));
    assert!(done
        .candidates
        .iter()
        .any(|c| c.signal == Signal::ToolSequence
            && c.key.contains("run `npm run lint` → run `npm test`")));
    assert!(candidate(&done, Signal::ContextTokenSpike)
        .content
        .contains("run `cat`"));
    assert!(candidate(&done, Signal::ExternalReference)
        .content
        .contains("developer.mozilla.org"));
    assert!(candidate(&done, Signal::FileAccess).sessions == 1);
    assert!(candidate(&done, Signal::CoAccess).sessions == 1);
    assert_eq!(done.metrics.tool_calls, 16);
    assert_eq!(done.metrics.repeat_reads, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_scratchpad_stays_under_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(dir.path(), None, clock.clone()).await;
    let mut options = SessionOptions::new("huge");
    options.max_bytes = 256 * 1024;
    let s = e.observe(&options).unwrap();
    for i in 0..200_000u32 {
        s.observe(call("Read", i / 3, |c| {
            c.path = Some(format!("src/m{}/f{i}.ts", i % 50))
        }))
        .unwrap();
        s.observe(result("Read", i / 3, i % 97 == 0, "error: boom"))
            .unwrap();
        if i % 1000 == 0 {
            let snap = s.snapshot().unwrap();
            assert!(
                snap.bytes <= options.max_bytes,
                "{} > cap at {i}",
                snap.bytes
            );
        }
    }
    let snap = s.snapshot().unwrap();
    assert!(snap.bytes <= options.max_bytes);
    assert!(snap.evicted_calls > 0);
    assert_eq!(snap.events, 400_000);
    // It still finalizes.
    let done = e.finalize(&s, None).await.unwrap();
    assert_eq!(done.metrics.tool_calls, 200_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn step_limits_follow_the_modules_measured_overrun() {
    let replayed = replay(&fixtures_dir().join("calibration_three_sessions.json")).await;
    // Three sessions planned 10 steps and ran 16.
    let limit = replayed.e.step_limit(30, Some("src/ui")).await.unwrap();
    assert_eq!((limit.limit, limit.sessions), (48, 3));
    assert!((limit.factor - 1.6).abs() < 1e-9);
    let other = replayed.e.step_limit(30, Some("src/api/")).await.unwrap();
    assert_eq!((other.limit, other.factor, other.sessions), (30, 1.0, 0));
    let capped = replayed.e.step_limit(900, Some("src/ui/")).await.unwrap();
    assert_eq!(capped.limit, 1000);
}

/// A session id of `group` in the default project (the assignment is a pure function).
fn id_in(group: engram::observer::AbGroup) -> String {
    (0..)
        .map(|i| format!("inject-{i}"))
        .find(|id| engram::observer::ab::assign(id, "default") == group)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn session_step_injection_uses_the_pad_and_respects_the_ab_group() {
    use engram::memory::{MemoryType, RememberInput};
    use engram::observer::{AbGroup, RecordEntry};
    use engram::retrieval::injection::InjectionKind;

    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(dir.path(), None, clock.clone()).await;
    let mut gotcha = RememberInput::new(
        MemoryType::Gotcha,
        "The session cookie must be re-signed after rotation",
    );
    gotcha.related_files = vec!["src/auth/cookie.ts".into()];
    gotcha.confidence = Some(0.9);
    let gotcha = e.remember(gotcha).await.unwrap().memory;

    let s = e
        .observe(&SessionOptions::new(id_in(AbGroup::Full)))
        .unwrap();
    s.observe(read_call("src/auth/cookie.ts", 2)).unwrap();
    // Nothing before step 5.
    assert!(e.session_step_injection(&s, 3).await.unwrap().is_none());
    let first = e.session_step_injection(&s, 5).await.unwrap().unwrap();
    assert_eq!(first.kind, InjectionKind::Gotchas);
    assert_eq!(first.memories[0].id, gotcha.id);
    // Shown once per session.
    assert!(e.session_step_injection(&s, 6).await.unwrap().is_none());
    // What the agent records comes back at the next step, once.
    s.observe(Message::Record(RecordEntry {
        memory_type: MemoryType::Gotcha,
        content: "cookie rotation happens in middleware, not the handler".into(),
        related_files: vec![],
        step: 6,
    }))
    .unwrap();
    let note = e.session_step_injection(&s, 7).await.unwrap().unwrap();
    assert_eq!(note.kind, InjectionKind::ScratchpadReflection);
    assert!(note.content.contains("rotation happens in middleware"));
    assert!(e.session_step_injection(&s, 8).await.unwrap().is_none());

    // A control-group session gets nothing mid-session, same files notwithstanding.
    let control = e
        .observe(&SessionOptions::new(id_in(AbGroup::Control)))
        .unwrap();
    control.observe(read_call("src/auth/cookie.ts", 5)).unwrap();
    assert!(e
        .session_step_injection(&control, 6)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn merging_parallel_sessions_confirms_by_quorum_and_ends_the_sources() {
    let replayed = replay(&fixtures_dir().join("parallel_agents.json")).await;
    let done = &replayed.results[0];
    let recorded = done
        .promoted
        .iter()
        .find(|m| m.source.as_str() == "agent_explicit")
        .unwrap();
    // Two agents recorded it: 0.8 x 1.1.
    assert!(
        (recorded.confidence - 0.88).abs() < 1e-9,
        "{}",
        recorded.confidence
    );
    let pair = done
        .candidates
        .iter()
        .find(|c| c.signal == Signal::CoAccess && c.key == "src/api/routes.ts\nsrc/api/types.ts")
        .unwrap();
    assert_eq!((pair.agents, pair.sessions), (2, 1));
    assert_eq!(pair.decision, Decision::Promoted);

    let e = &replayed.e;
    let err = |r: engram::Result<_>| {
        r.map(|_: Arc<engram::observer::Session>| ())
            .unwrap_err()
            .code()
    };
    e.observe(&SessionOptions::new("a")).unwrap();
    e.observe(&SessionOptions::new("b")).unwrap();
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        err(e.merge_sessions(&ids(&["a", "a"]), &SessionOptions::new("m"))),
        "ENGRAM_INVALID_ARG"
    );
    assert_eq!(
        err(e.merge_sessions(&ids(&["a", "zz"]), &SessionOptions::new("m"))),
        "ENGRAM_NOT_FOUND"
    );
    assert_eq!(
        err(e.merge_sessions(&ids(&["a", "b"]), &SessionOptions::new("a"))),
        "ENGRAM_CONFLICT"
    );
    // Nothing changed: both still open, then merged.
    let merged = e
        .merge_sessions(&ids(&["a", "b"]), &SessionOptions::new("m"))
        .unwrap();
    assert_eq!(merged.snapshot().unwrap().session_id, "m");
    assert_eq!(
        err(e.merge_sessions(&ids(&["a", "b"]), &SessionOptions::new("m2"))),
        "ENGRAM_NOT_FOUND"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkpointed_session_resumes_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    {
        let e = open_at(dir.path(), None, clock.clone()).await;
        let s = e.observe(&SessionOptions::new("long-build")).unwrap();
        s.observe(read_call("src/a.ts", 1)).unwrap();
        s.observe(Message::Reasoning {
            text: "Correction: the queue is drained by the worker, not the API.".into(),
            step: 2,
        })
        .unwrap();
        for step in 3..40 {
            s.observe(read_call(&format!("src/m/f{}.ts", step % 7), step))
                .unwrap();
        }
        let saved = e.checkpoint(&s).await.unwrap();
        assert_eq!((saved.step, saved.session_id.as_str()), (39, "long-build"));
        assert!(saved.bytes > 500);
        // Observed after the checkpoint, then the process dies: this part is lost.
        s.observe(read_call("src/lost.ts", 40)).unwrap();
        // Every handle and the session go: the engine (and its open sessions) with them.
    }
    let e = open_at(dir.path(), None, clock.clone()).await;
    assert!(e.resume_session("never-saved").await.unwrap().is_none());
    let s = e.resume_session("long-build").await.unwrap().unwrap();
    let snap = s.snapshot().unwrap();
    assert_eq!(
        (snap.current_step, snap.self_corrections, snap.files_touched),
        (39, 1, 8)
    );
    // The restored pad keeps working: lookups rebuilt, new files interned after the old ones.
    s.observe(read_call("src/a.ts", 41)).unwrap();
    s.observe(read_call("src/new.ts", 42)).unwrap();
    assert_eq!(s.snapshot().unwrap().files_touched, 9);
    // Resuming an open session returns it.
    let again = e.resume_session("long-build").await.unwrap().unwrap();
    assert!(Arc::ptr_eq(&s, &again));
    let done = e.finalize(&s, None).await.unwrap();
    assert!(done
        .promoted
        .iter()
        .any(|m| m.content.contains("drained by the worker")));
    assert_eq!(done.metrics.repeat_reads, 40 - 9);
    // Finalize removed the checkpoint.
    assert!(e.resume_session("long-build").await.unwrap().is_none());
}

/// A synthesis function that records its requests and answers with `answer`.
fn recording_synthesizer(
    answer: Vec<engram::observer::SynthesizedMemory>,
    fail: bool,
) -> (
    engram::observer::SynthesizeFn,
    Arc<std::sync::Mutex<Vec<engram::observer::SynthesisRequest>>>,
) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let f: engram::observer::SynthesizeFn = Arc::new(move |request| {
        log.lock().unwrap().push(request);
        let answer = answer.clone();
        Box::pin(async move {
            if fail {
                Err(engram::Error::Callback("model unavailable".into()))
            } else {
                Ok(answer)
            }
        })
    });
    (f, seen)
}

fn proposal(content: &str) -> engram::observer::SynthesizedMemory {
    engram::observer::SynthesizedMemory {
        memory_type: engram::memory::MemoryType::Gotcha,
        content: content.into(),
        related_files: vec!["src/q/worker.ts".into(), "/etc/passwd".into()],
        confidence: Some(0.99),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn finalize_calls_the_synthesis_function_once_and_stores_novel_answers_for_review() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(dir.path(), None, clock.clone()).await;
    let correction = |id: &str| {
        let s = e.observe(&SessionOptions::new(id)).unwrap();
        s.observe(read_call("src/q/worker.ts", 1)).unwrap();
        s.observe(Message::Reasoning {
            text: "Correction: the queue drains on SIGTERM, not on exit.".into(),
            step: 2,
        })
        .unwrap();
        s
    };
    let (f, seen) = recording_synthesizer(
        vec![
            proposal("The job queue drains only on SIGTERM; deploys must send it before killing."),
            // Says what the promoted memory says: not novel.
            proposal("Correction: the queue drains on SIGTERM, not on exit."),
            proposal("   "),
            proposal("A fourth one is over the count of three."),
        ],
        false,
    );
    let done = e
        .finalize_with(&correction("syn-1"), None, &f)
        .await
        .unwrap();
    let call = done.synthesis.as_ref().unwrap();
    assert_eq!(call.error, None);
    assert_eq!(call.memories.len(), 1, "{call:?}");
    assert_eq!(call.dropped, 3);
    let m = &call.memories[0];
    assert!(m.needs_review);
    assert_eq!(m.confidence, 0.9);
    assert_eq!(m.related_files, vec!["src/q/worker.ts"]);
    assert!(m.tags.contains(&"synthesis:session".to_owned()));
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].prompt.contains("drains on SIGTERM"));
    assert!(requests[0].prompt.contains("Format: JSON"));

    // A failing function never fails the finalize; a failed session never calls it.
    let (broken, _) = recording_synthesizer(vec![], true);
    let s = e.observe(&SessionOptions::new("syn-2")).unwrap();
    s.observe(Message::Reasoning {
        text: "Correction: migrations run in one transaction, not per statement.".into(),
        step: 1,
    })
    .unwrap();
    let done = e.finalize_with(&s, None, &broken).await.unwrap();
    assert_eq!(done.promoted.len(), 1);
    assert!(done
        .synthesis
        .unwrap()
        .error
        .unwrap()
        .contains("model unavailable"));
    let (f, seen) = recording_synthesizer(vec![proposal("x y z")], false);
    let done = e
        .finalize_with(&correction("syn-3"), Some(SessionOutcome::Failure), &f)
        .await
        .unwrap();
    assert!(done.synthesis.is_none());
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn threshold_and_scheduled_synthesis_run_once_per_trigger() {
    use engram::observer::SynthesisMode;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let e = open_at(dir.path(), None, clock.clone()).await;
    let session = |i: u32| {
        let s = e
            .observe(&SessionOptions::new(format!("auth-{i}")))
            .unwrap();
        s.observe(read_call("src/auth/session.ts", 1)).unwrap();
        s.observe(read_call("src/auth/token.ts", 1)).unwrap();
        s.observe(read_call("src/db/users.ts", 2)).unwrap();
        s
    };
    let (f, seen) = recording_synthesizer(
        vec![proposal("Auth sessions are minted in token.ts.")],
        false,
    );
    for i in 0..4 {
        e.finalize(&session(i), None).await.unwrap();
    }
    assert!(e
        .synthesize(SynthesisMode::Threshold, &f, 5)
        .await
        .unwrap()
        .is_empty());
    e.finalize(&session(4), None).await.unwrap();
    let calls = e.synthesize(SynthesisMode::Threshold, &f, 5).await.unwrap();
    // Both modules reached 5 sessions.
    let subjects: Vec<&str> = calls.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects.len(), 2, "{subjects:?}");
    assert!(subjects.contains(&"src/auth/"));
    let auth = seen
        .lock()
        .unwrap()
        .iter()
        .find(|r| r.subject == "src/auth/")
        .cloned()
        .unwrap();
    assert_eq!(auth.sessions, 5);
    assert!(auth
        .prompt
        .contains("You are analyzing 5 agent sessions on the \"src/auth/\" module"));
    assert!(auth.prompt.contains("- src/auth/session.ts: 5 sessions"));
    assert!(auth
        .prompt
        .contains("- src/auth/session.ts + src/auth/token.ts: 5 sessions"));
    assert_eq!(
        calls.iter().map(|c| c.memories.len()).sum::<usize>(),
        1,
        "the second is not novel"
    );
    // Logged: nothing is due until the next threshold.
    assert!(e
        .synthesize(SynthesisMode::Threshold, &f, 5)
        .await
        .unwrap()
        .is_empty());

    // Scheduled: the auth/db pair was used together in 5 sessions.
    let calls = e.synthesize(SynthesisMode::Scheduled, &f, 5).await.unwrap();
    let subjects: Vec<&str> = calls.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects, vec!["src/auth/ + src/db/"]);
    assert!(e
        .synthesize(SynthesisMode::Scheduled, &f, 5)
        .await
        .unwrap()
        .is_empty());
    let err = e
        .synthesize(SynthesisMode::Session, &f, 5)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}
