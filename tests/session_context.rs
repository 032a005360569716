//! The session-start context and tool-result augmentation against real libSQL files and a
//! real indexed source tree: sections in order, the trust threshold, budgets, the handoff of
//! the last observed session, staleness from a real re-index, and what a session was shown
//! never being shown to it again; a recorded six-subtask build cut in its last subtask, resumed.

use std::sync::Arc;

use engram::agent::session_context::{Section, SessionContext, SessionContextRequest};
use engram::clock::ManualClock;
use engram::code::IndexOptions;
use engram::memory::{MemorySource, MemoryType, RememberInput, WorkUnitRef};
use engram::observer::ab::{assign, AbGroup};
use engram::observer::{Message, SessionOptions, SessionOutcome, ToolCall};
use engram::{EngineOptions, Engram, OpenOptions, DEFAULT_PROJECT_ID};

const T0: i64 = 1_767_225_600_000;
const MINUTE: i64 = 60_000;

const LOGIN_TS: &str =
    "export function login(user: string): string {\n  return `token:${user}`;\n}\n";
const POOL_TS: &str =
    "export function acquire(size: number): number {\n  return Math.min(size, 10);\n}\n";

struct Project {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    clock: Arc<ManualClock>,
    e: Engram,
}

async fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    for (path, text) in [("src/auth/login.ts", LOGIN_TS), ("src/db/pool.ts", POOL_TS)] {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let clock = Arc::new(ManualClock::new(T0));
    let mut options = OpenOptions::new(dir.path().join("memory.db"));
    options.project_root = Some(root.clone());
    options.engine = EngineOptions {
        clock: clock.clone(),
        ..EngineOptions::default()
    };
    let e = Engram::open(options).await.unwrap();
    e.index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    Project {
        _dir: dir,
        root,
        clock,
        e,
    }
}

fn memory(t: MemoryType, content: &str, file: Option<&str>, confidence: f64) -> RememberInput {
    let mut i = RememberInput::new(t, content);
    i.related_files = file.into_iter().map(str::to_owned).collect();
    i.confidence = Some(confidence);
    i
}

fn unit(label: &str) -> WorkUnitRef {
    WorkUnitRef {
        methodology: "native".into(),
        hierarchy: vec![label.into()],
        label: label.into(),
    }
}

/// A session id in the `full` A/B group (the only one that gets mid-session injection).
fn full_group_id(prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|id| assign(id, DEFAULT_PROJECT_ID) == AbGroup::Full)
        .unwrap()
}

fn sections(c: &SessionContext) -> Vec<(Section, String)> {
    c.memories
        .iter()
        .map(|m| (m.section, m.memory.content.clone()))
        .collect()
}

fn request() -> SessionContextRequest {
    SessionContextRequest::default()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_project_has_nothing_to_say() {
    let p = project().await;
    let c = p.e.session_context(request()).await.unwrap();
    assert_eq!(c.text, "");
    assert_eq!(c.tokens, 0);
    assert!(c.memories.is_empty() && c.handoff.is_none());
    assert_eq!(c.omitted, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn sections_come_in_order_each_memory_once_with_labels_ids_and_the_handoff() {
    let p = project().await;
    let e = &p.e;
    // An earlier observed session, finalized: the handoff.
    let earlier = e.observe(&SessionOptions::new("earlier-session")).unwrap();
    earlier
        .observe(Message::ToolCall(ToolCall {
            tool: "Read".into(),
            step: 1,
            path: Some("src/auth/login.ts".into()),
            ..ToolCall::default()
        }))
        .unwrap();
    e.finalize(&earlier, Some(SessionOutcome::Success))
        .await
        .unwrap();
    p.clock.advance(5 * MINUTE);

    // Two work states: the newer one's work unit has a later outcome (done), the older not.
    let mut open_state = memory(
        MemoryType::WorkState,
        "Rate limiting: middleware written, tests for lockout still to do",
        Some("src/auth/login.ts"),
        0.9,
    );
    open_state.work_unit_ref = Some(unit("rate-limit"));
    let open_state = e.remember(open_state).await.unwrap().memory;
    p.clock.advance(MINUTE);
    let mut done_state = memory(
        MemoryType::WorkState,
        "Pool resize: half done",
        Some("src/db/pool.ts"),
        0.9,
    );
    done_state.work_unit_ref = Some(unit("pool-resize"));
    e.remember(done_state).await.unwrap();
    p.clock.advance(MINUTE);
    let mut outcome = memory(
        MemoryType::WorkUnitOutcome,
        "Pool resize shipped",
        None,
        0.9,
    );
    outcome.work_unit_ref = Some(unit("pool-resize"));
    e.remember(outcome).await.unwrap();

    // A pinned decision below the trust threshold is still shown (a person pinned it), as is
    // what the user taught.
    let mut pinned = memory(
        MemoryType::Decision,
        "Tokens are opaque strings; never parse them",
        None,
        0.3,
    );
    pinned.pinned = Some(true);
    e.remember(pinned).await.unwrap();
    let mut taught = memory(MemoryType::Preference, "Use named exports only", None, 0.7);
    taught.source = Some(MemorySource::UserTaught);
    e.remember(taught).await.unwrap();

    // Module memories: one above the cautious threshold (0.80), one below, one elsewhere.
    e.remember(memory(
        MemoryType::Gotcha,
        "login() must stay synchronous: the session middleware calls it without await",
        Some("src/auth/login.ts"),
        0.95,
    ))
    .await
    .unwrap();
    e.remember(memory(
        MemoryType::Gotcha,
        "login tokens look like JWTs but are not",
        Some("src/auth/login.ts"),
        0.6,
    ))
    .await
    .unwrap();
    e.remember(memory(
        MemoryType::Gotcha,
        "acquire() caps the pool at ten connections",
        Some("src/db/pool.ts"),
        0.95,
    ))
    .await
    .unwrap();
    e.remember(memory(
        MemoryType::WorkflowRecipe,
        "Run `npm test -- auth` before pushing auth changes",
        None,
        0.9,
    ))
    .await
    .unwrap();
    // A memory on login's symbol, then login changes: it is stale.
    let mut on_symbol = memory(
        MemoryType::Pattern,
        "login returns a token prefixed with token:",
        Some("src/auth/login.ts"),
        0.9,
    );
    on_symbol.target_node_id = Some("src/auth/login.ts:login".into());
    let on_symbol = e.remember(on_symbol).await.unwrap().memory;
    std::fs::write(
        p.root.join("src/auth/login.ts"),
        LOGIN_TS.replace("token:", "tok:"),
    )
    .unwrap();
    e.index_paths(&["src/auth/login.ts".to_string()], &IndexOptions::default())
        .await
        .unwrap();
    assert!(e.get(&on_symbol.id).await.unwrap().stale_at.is_some());

    let c = e
        .session_context(SessionContextRequest {
            modules: vec!["src/auth".into()],
            ..request()
        })
        .await
        .unwrap();
    let got = sections(&c);
    let want: Vec<(Section, &str)> = vec![
        (
            Section::Resume,
            "Rate limiting: middleware written, tests for lockout still to do",
        ),
        (
            Section::Pinned,
            "Tokens are opaque strings; never parse them",
        ),
        (Section::Pinned, "Use named exports only"),
        (
            Section::Relevant,
            "login() must stay synchronous: the session middleware calls it without await",
        ),
        (
            Section::Recipes,
            "Run `npm test -- auth` before pushing auth changes",
        ),
        (Section::Stale, "login returns a token prefixed with token:"),
    ];
    let got_ref: Vec<(Section, &str)> = got.iter().map(|(s, t)| (*s, t.as_str())).collect();
    assert_eq!(got_ref, want, "{}", c.text);
    assert_eq!(c.memories[0].memory.id, open_state.id);
    for (i, m) in c.memories.iter().enumerate() {
        assert_eq!(m.label as usize, i + 1);
        let line = format!(
            "[{}] {} · confidence",
            m.label,
            m.memory.memory_type.as_str()
        );
        assert!(c.text.contains(&line), "{line} in {}", c.text);
        assert!(c.text.contains(&m.memory.id));
        assert!(m.citation.starts_with(&format!("[Memory #{}", m.memory.id)));
    }
    // The handoff comes right after the resume section and names the earlier session.
    let handoff = c.handoff.as_ref().expect("a handoff");
    assert_eq!(handoff.session_id, "earlier-session");
    assert!(handoff
        .text
        .starts_with("build session earlier-session (success, 7 minutes ago"));
    let resume_at = c.text.find("## Resume").unwrap();
    let handoff_at = c.text.find("## Last session").unwrap();
    let pinned_at = c.text.find("## Pinned").unwrap();
    assert!(
        resume_at < handoff_at && handoff_at < pinned_at,
        "{}",
        c.text
    );
    assert!(c.tokens > 0 && c.tokens <= c.budget_tokens);
    assert_eq!(c.budget_tokens, 2_000);

    // A task brings what recall ranks for it, from any module.
    let c = e
        .session_context(SessionContextRequest {
            task: Some("how many connections does the pool acquire".into()),
            ..request()
        })
        .await
        .unwrap();
    assert!(
        sections(&c).contains(&(
            Section::Relevant,
            "acquire() caps the pool at ten connections".into()
        )),
        "{}",
        c.text
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_small_budget_keeps_the_first_sections_and_counts_what_it_left_out() {
    let p = project().await;
    for i in 0..12 {
        let mut m = memory(
            MemoryType::Decision,
            &format!("Decision {i}: the service keeps its state in one libSQL file per project, never in memory across requests"),
            None,
            0.95,
        );
        m.pinned = Some(i % 2 == 0);
        p.e.remember(m).await.unwrap();
    }
    let full = p.e.session_context(request()).await.unwrap();
    assert_eq!(full.memories.len(), 12);
    assert_eq!(full.omitted, 0);
    let small =
        p.e.session_context(SessionContextRequest {
            budget_tokens: Some(120),
            ..request()
        })
        .await
        .unwrap();
    assert!(small.tokens <= 120, "{} tokens", small.tokens);
    assert!(!small.memories.is_empty() && small.memories.len() < 12);
    assert_eq!(small.omitted as usize, 12 - small.memories.len());
    // Pinned memories come first, so the first packed ones are pinned.
    assert_eq!(small.memories[0].section, Section::Pinned);
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_session_was_shown_at_start_is_not_appended_to_its_reads_again() {
    let p = project().await;
    let e = &p.e;
    let gotcha = e
        .remember(memory(
            MemoryType::Gotcha,
            "acquire() caps the pool at ten connections",
            Some("src/db/pool.ts"),
            0.95,
        ))
        .await
        .unwrap()
        .memory;
    let dead_end = e
        .remember(memory(
            MemoryType::DeadEnd,
            "Raising the cap to 100 exhausted the database's connection slots",
            Some("src/db/pool.ts"),
            0.95,
        ))
        .await
        .unwrap()
        .memory;

    // A session that never got a session context: a Read of the file gets both.
    let fresh = e
        .observe(&SessionOptions::new(full_group_id("fresh")))
        .unwrap();
    let got = e
        .augment_tool_result(&fresh, "Read", Some("src/db/pool.ts"))
        .await
        .unwrap()
        .expect("pitfalls of pool.ts");
    let mut ids: Vec<_> = got.memories.iter().map(|m| m.id.clone()).collect();
    ids.sort();
    let mut want = vec![gotcha.id.clone(), dead_end.id.clone()];
    want.sort();
    assert_eq!(ids, want);
    assert!(got.content.contains("acquire() caps the pool"));
    // A second read of it in the same session: nothing new.
    assert!(e
        .augment_tool_result(&fresh, "read_file", Some("src/db/pool.ts"))
        .await
        .unwrap()
        .is_none());
    // Other tools, files without memories and paths outside the project: nothing.
    assert!(e
        .augment_tool_result(&fresh, "Bash", Some("src/db/pool.ts"))
        .await
        .unwrap()
        .is_none());
    assert!(e
        .augment_tool_result(&fresh, "Read", Some("src/auth/login.ts"))
        .await
        .unwrap()
        .is_none());
    assert!(e
        .augment_tool_result(&fresh, "Read", Some("/etc/passwd"))
        .await
        .unwrap()
        .is_none());

    // A session whose context already showed them: its Read gets nothing.
    let id = full_group_id("started");
    let started = e.observe(&SessionOptions::new(id.clone())).unwrap();
    let c = e
        .session_context(SessionContextRequest {
            modules: vec!["src/db/".into()],
            session_id: Some(id.clone()),
            ..request()
        })
        .await
        .unwrap();
    assert_eq!(c.memories.len(), 2, "{}", c.text);
    assert!(e
        .augment_tool_result(&started, "Read", Some("src/db/pool.ts"))
        .await
        .unwrap()
        .is_none());
    // What the context showed counts as used by the session.
    let summary = e.session_summary(&id).await.unwrap();
    assert_eq!(summary.used.len(), 2);

    // A control-group session never gets augmentation.
    let control = (0..)
        .map(|i| format!("control-{i}"))
        .find(|id| assign(id, DEFAULT_PROJECT_ID) == AbGroup::Control)
        .unwrap();
    let control = e.observe(&SessionOptions::new(control)).unwrap();
    assert!(e
        .augment_tool_result(&control, "Read", Some("src/db/pool.ts"))
        .await
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_with_the_field_named() {
    let p = project().await;
    let cases: Vec<(SessionContextRequest, &str)> = vec![
        (
            SessionContextRequest {
                budget_tokens: Some(0),
                ..request()
            },
            "budgetTokens",
        ),
        (
            SessionContextRequest {
                modules: vec!["../outside".into()],
                ..request()
            },
            "modules",
        ),
        (
            SessionContextRequest {
                modules: (0..51).map(|i| format!("m{i}/")).collect(),
                ..request()
            },
            "modules",
        ),
        (
            SessionContextRequest {
                task: Some("x".repeat(9_000)),
                ..request()
            },
            "task",
        ),
    ];
    for (bad, field) in cases {
        let err = p.e.session_context(bad).await.unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
        assert!(err.to_string().contains(field), "{err}");
    }
    // The root as a module means no module filter, not an error.
    let root = p.root.to_string_lossy().into_owned();
    assert!(p
        .e
        .session_context(SessionContextRequest {
            modules: vec![root, ".".into()],
            ..request()
        })
        .await
        .is_ok());
}

/// In a project engram has just met (trust threshold 0.80), a Read brings up the gotchas the
/// user taught or pinned, as the session-start context does, and not an agent's at the same
/// confidence.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_brings_up_what_the_user_taught_about_the_file_in_a_new_project() {
    let p = project().await;
    let e = &p.e;
    let mut taught = memory(
        MemoryType::Gotcha,
        "acquire() caps the pool at ten connections",
        Some("src/db/pool.ts"),
        0.8,
    );
    taught.source = Some(MemorySource::UserTaught);
    let taught = e.remember(taught).await.unwrap().memory;
    let agents = e
        .remember(memory(
            MemoryType::Gotcha,
            "the pool's idle timeout is thirty seconds",
            Some("src/db/pool.ts"),
            0.8,
        ))
        .await
        .unwrap()
        .memory;
    let session = e
        .observe(&SessionOptions::new(full_group_id("taught")))
        .unwrap();
    let got = e
        .augment_tool_result(&session, "Read", Some("src/db/pool.ts"))
        .await
        .unwrap()
        .expect("the taught gotcha");
    let ids: Vec<_> = got.memories.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids, vec![taught.id.clone()], "not {}", agents.id);
}

/// Replays the recorded six-subtask build, cut during subtask 6: the observer gets the
/// messages (checkpointed as they go, as the hooks do), the app's work states and outcomes
/// are remembered where the recording has them. The session is never finalized.
async fn build_cut_in_subtask_6(p: &Project) -> String {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agent_loop/build_six_subtasks_cut.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let spec = &doc["sessions"][0];
    let id = spec["session"]["sessionId"].as_str().unwrap().to_owned();
    let mut options = SessionOptions::new(&id);
    options.planned_steps = spec["session"]["plannedSteps"].as_u64().map(|n| n as u32);
    let session = p.e.observe(&options).unwrap();
    let messages = spec["messages"].as_array().unwrap();
    let writes = spec["appWrites"].as_array().unwrap();
    let mut next_write = 0;
    for (i, m) in messages.iter().enumerate() {
        p.clock.advance(1000);
        session
            .observe(engram::observer::protocol::json::message(m).unwrap())
            .unwrap();
        while next_write < writes.len() && writes[next_write]["afterMessage"] == i + 1 {
            let w = &writes[next_write];
            let kind = MemoryType::parse(w["type"].as_str().unwrap()).unwrap();
            let mut input = RememberInput::new(kind, w["content"].as_str().unwrap());
            input.related_files = w["relatedFiles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_owned())
                .collect();
            let label = w["unit"].as_str().unwrap();
            input.work_unit_ref = Some(WorkUnitRef {
                methodology: "native".into(),
                hierarchy: vec!["spec_rate_limit".into(), label.into()],
                label: label.into(),
            });
            input.confidence = Some(0.9);
            p.e.remember(input).await.unwrap();
            p.clock.advance(1000);
            next_write += 1;
        }
        p.e.checkpoint(&session).await.unwrap();
    }
    assert_eq!(
        next_write,
        writes.len(),
        "every recorded write was replayed"
    );
    id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_cut_in_its_sixth_subtask_is_resumed_there() {
    let p = project().await;
    let cut = build_cut_in_subtask_6(&p).await;
    p.clock.advance(30 * MINUTE);

    // The next session starts: it resumes subtask 6, not one of the five finished ones.
    let c = p.e.session_context(request()).await.unwrap();
    let resumed: Vec<&str> = c
        .memories
        .iter()
        .filter(|m| m.section == Section::Resume)
        .map(|m| m.memory.content.as_str())
        .collect();
    assert_eq!(resumed.len(), 1, "{}", c.text);
    assert!(
        resumed[0].starts_with("Rate limiting, subtask_6"),
        "{}",
        resumed[0]
    );
    assert!(resumed[0].contains("count after the check"));
    for done in 1..=5 {
        let label = format!("subtask_{done} (");
        assert!(
            !c.memories
                .iter()
                .any(|m| m.section == Section::Resume && m.memory.content.contains(&label)),
            "{label} is finished"
        );
    }
    // The cut session was never finalized: no handoff from it, but its checkpoint resumes with
    // the scratchpad it had (the failing test run is still there to learn from).
    assert!(c.handoff.is_none(), "{:?}", c.handoff);
    let resumed =
        p.e.resume_session(&cut)
            .await
            .unwrap()
            .expect("checkpointed");
    let pad = resumed.snapshot().unwrap();
    assert_eq!(pad.session_id, cut);
    assert_eq!(pad.current_step, 18, "six subtasks of three steps");
    assert_eq!((pad.files_edited, pad.errors), (6, 1));
}
