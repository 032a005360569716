//! The coder's prefetch plan from recorded sessions: real observed sessions finalized into a
//! real libSQL file, over a real indexed tree. What each tier holds and in what order, the
//! 80% and 50% bounds, the minimum of sessions, modules, the budget and file limit, files that
//! were deleted since, file contents, and refused requests.

use std::sync::Arc;

use engram::agent::prefetch::{OmitReason, PrefetchPlan, PrefetchRequest, Tier};
use engram::agent::session_context::SessionContextRequest;
use engram::clock::ManualClock;
use engram::code::IndexOptions;
use engram::observer::{Message, SessionOptions, SessionOutcome, SessionType, ToolCall};
use engram::{EngineOptions, Engram, OpenOptions};

const T0: i64 = 1_767_225_600_000;

struct Project {
    dir: tempfile::TempDir,
    root: std::path::PathBuf,
    e: Engram,
}

fn source(name: &str, lines: usize) -> String {
    (0..lines)
        .map(|i| format!("export const {name}{i} = {i};\n"))
        .collect()
}

/// `src/auth/` with five files (one of ~50k tokens), `src/db/pool.ts` and `src/auth/gone.ts`.
async fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let files = [
        ("src/auth/login.ts", source("login", 20)),
        ("src/auth/session.ts", source("session", 30)),
        ("src/auth/util.ts", source("util", 10)),
        ("src/auth/rare.ts", source("rare", 5)),
        ("src/auth/gone.ts", source("gone", 5)),
        ("src/auth/huge.ts", source("huge", 8_000)),
        ("src/db/pool.ts", source("pool", 12)),
    ];
    for (path, text) in &files {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let mut options = OpenOptions::new(dir.path().join("memory.db"));
    options.project_root = Some(root.clone());
    options.engine = EngineOptions {
        clock: Arc::new(ManualClock::new(T0)),
        ..EngineOptions::default()
    };
    let e = Engram::open(options).await.unwrap();
    index(&e).await;
    Project { dir, root, e }
}

async fn index(e: &Engram) {
    e.index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
}

/// One observed session that reads `files`, finalized.
async fn session(e: &Engram, id: &str, files: &[&str]) {
    let s = e.observe(&SessionOptions::new(id)).unwrap();
    for (step, file) in files.iter().enumerate() {
        s.observe(Message::ToolCall(ToolCall {
            tool: "Read".into(),
            step: step as u32 + 1,
            path: Some((*file).into()),
            ..ToolCall::default()
        }))
        .unwrap();
    }
    e.finalize(&s, Some(SessionOutcome::Success)).await.unwrap();
}

/// Five sessions in `src/auth/` (login in 5, session in 4, util in 3, rare in 2, huge and gone
/// in 5) and three in `src/db/` (pool in 3).
async fn recorded() -> Project {
    let p = project().await;
    for i in 0..5 {
        let mut files = vec!["src/auth/login.ts", "src/auth/huge.ts", "src/auth/gone.ts"];
        if i < 4 {
            files.push("src/auth/session.ts");
        }
        if i < 3 {
            files.push("src/auth/util.ts");
        }
        if i < 2 {
            files.push("src/auth/rare.ts");
        }
        session(&p.e, &format!("auth-{i}"), &files).await;
    }
    for i in 0..3 {
        session(&p.e, &format!("db-{i}"), &["src/db/pool.ts"]).await;
    }
    p
}

fn paths(plan: &PrefetchPlan) -> Vec<(&str, Tier)> {
    plan.files
        .iter()
        .map(|f| (f.path.as_str(), f.tier))
        .collect()
}

fn auth() -> PrefetchRequest {
    PrefetchRequest {
        modules: vec!["src/auth".into()],
        ..PrefetchRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn files_come_in_two_tiers_by_share_of_their_modules_sessions() {
    let p = recorded().await;
    let plan = p.e.prefetch_plan(auth()).await.unwrap();
    // gone.ts is read in every session too: it leads the first tier until it is deleted.
    assert_eq!(
        paths(&plan),
        vec![
            ("src/auth/gone.ts", Tier::Always),
            ("src/auth/login.ts", Tier::Always),
            // 4 of 5 is not more than 80%; 3 of 5 is more than 50%.
            ("src/auth/session.ts", Tier::Usually),
            ("src/auth/util.ts", Tier::Usually),
        ],
        "{plan:#?}"
    );
    let login = &plan.files[1];
    assert_eq!((login.sessions, login.module_sessions), (5, 5));
    assert_eq!(login.module, "src/auth/");
    assert!((login.share - 1.0).abs() < 1e-9);
    assert!((plan.files[2].share - 0.8).abs() < 1e-9);
    // The 50k-token file does not fit the default 32k budget; the smaller ones after it do.
    assert_eq!(plan.omitted.len(), 1, "{:?}", plan.omitted);
    assert_eq!(plan.omitted[0].path, "src/auth/huge.ts");
    assert_eq!(plan.omitted[0].reason, OmitReason::Budget);
    assert_eq!(plan.budget_tokens, 32_000);
    assert_eq!(
        plan.used_tokens,
        plan.files.iter().map(|f| f.tokens).sum::<u32>()
    );
    assert!(plan
        .files
        .iter()
        .all(|f| f.tokens > 0 && f.content.is_none()));
    // rare.ts (2 sessions, under the file-access signal's minimum of 3) is in no tier.
    assert!(plan.omitted.iter().all(|o| o.path != "src/auth/rare.ts"));

    // No module: the whole project, each file measured against its own module.
    let all = p.e.prefetch_plan(PrefetchRequest::default()).await.unwrap();
    assert!(paths(&all).contains(&("src/db/pool.ts", Tier::Always)));
    assert_eq!(all.files.len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_file_leaves_the_plan_and_limits_are_kept() {
    let p = recorded().await;
    std::fs::remove_file(p.root.join("src/auth/gone.ts")).unwrap();
    index(&p.e).await;
    let plan = p.e.prefetch_plan(auth()).await.unwrap();
    assert_eq!(plan.files[0].path, "src/auth/login.ts");
    assert!(plan
        .omitted
        .iter()
        .any(|o| o.path == "src/auth/gone.ts" && o.reason == OmitReason::Missing));

    let two = PrefetchRequest {
        max_files: Some(2),
        ..auth()
    };
    let plan = p.e.prefetch_plan(two).await.unwrap();
    assert_eq!(plan.files.len(), 2);
    assert!(plan
        .omitted
        .iter()
        .any(|o| o.path == "src/auth/util.ts" && o.reason == OmitReason::MaxFiles));

    // A budget the first file alone fills: the rest are left out for the budget.
    let login_tokens = p.e.prefetch_plan(auth()).await.unwrap().files[0].tokens;
    let tight = PrefetchRequest {
        budget_tokens: Some(login_tokens),
        ..auth()
    };
    let plan = p.e.prefetch_plan(tight).await.unwrap();
    assert_eq!(paths(&plan), vec![("src/auth/login.ts", Tier::Always)]);
    assert_eq!(plan.used_tokens, login_tokens);
    assert!(plan
        .omitted
        .iter()
        .any(|o| o.path == "src/auth/session.ts" && o.reason == OmitReason::Budget));
}

#[tokio::test(flavor = "multi_thread")]
async fn contents_are_read_from_the_project_root() {
    let p = recorded().await;
    let with = PrefetchRequest {
        with_content: true,
        ..auth()
    };
    let plan = p.e.prefetch_plan(with).await.unwrap();
    let login = plan
        .files
        .iter()
        .find(|f| f.path == "src/auth/login.ts")
        .unwrap();
    assert_eq!(login.content.as_deref(), Some(source("login", 20).as_str()));
    assert!(plan.files.iter().all(|f| f.content.is_some()));

    // A file grown since it was indexed is measured by what was read.
    std::fs::write(p.root.join("src/auth/util.ts"), source("util", 400)).unwrap();
    let with = PrefetchRequest {
        with_content: true,
        ..auth()
    };
    let plan = p.e.prefetch_plan(with).await.unwrap();
    let util = plan
        .files
        .iter()
        .find(|f| f.path == "src/auth/util.ts")
        .unwrap();
    assert_eq!(util.tokens as usize, source("util", 400).len().div_ceil(4));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_with_the_field_named() {
    let p = recorded().await;
    let bad = [
        (
            PrefetchRequest {
                budget_tokens: Some(0),
                ..auth()
            },
            "budgetTokens",
        ),
        (
            PrefetchRequest {
                max_files: Some(100_000),
                ..auth()
            },
            "maxFiles",
        ),
        (
            PrefetchRequest {
                modules: vec!["../outside".into()],
                ..PrefetchRequest::default()
            },
            "modules",
        ),
    ];
    for (request, field) in bad {
        let err = p.e.prefetch_plan(request).await.unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
        assert!(err.to_string().contains(field), "{err}");
    }
    // Without a project root, sizes still come from the index; contents cannot be read.
    let rootless = Engram::open(OpenOptions::new(p.dir.path().join("memory.db")))
        .await
        .unwrap();
    let plan = rootless.prefetch_plan(auth()).await.unwrap();
    assert_eq!(plan.files[1].path, "src/auth/login.ts");
    let err = rootless
        .prefetch_plan(PrefetchRequest {
            with_content: true,
            ..auth()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
    assert!(err.to_string().contains("projectRoot"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_without_sessions_has_an_empty_plan() {
    let p = project().await;
    session(&p.e, "only-one", &["src/auth/login.ts"]).await;
    let plan = p.e.prefetch_plan(auth()).await.unwrap();
    assert!(plan.files.is_empty() && plan.omitted.is_empty(), "{plan:?}");
    assert_eq!(plan.used_tokens, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_sessions_context_lists_the_files_to_open_first() {
    let p = recorded().await;
    let request = SessionContextRequest {
        modules: vec!["src/auth/".into()],
        ..SessionContextRequest::default()
    };
    let ctx = p.e.session_context(request.clone()).await.unwrap();
    let listed: Vec<&str> = ctx.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        listed,
        [
            "src/auth/gone.ts",
            "src/auth/login.ts",
            "src/auth/session.ts",
            "src/auth/util.ts"
        ]
    );
    let section = ctx
        .text
        .split("## Files usually read first in these modules\n")
        .nth(1)
        .expect("the files section");
    assert!(
        section.starts_with("- `src/auth/gone.ts` (read in 5 of 5 sessions in `src/auth/`)\n"),
        "{section}"
    );
    assert!(!section.contains("huge.ts"), "over the plan's budget");

    // Other session types are not about to edit code.
    let review = SessionContextRequest {
        session_type: Some(SessionType::PrReview),
        ..request.clone()
    };
    let ctx = p.e.session_context(review).await.unwrap();
    assert!(ctx.files.is_empty());
    assert!(!ctx.text.contains("Files usually read first"));
    // A tight budget keeps what fits and counts the rest.
    let tight = SessionContextRequest {
        budget_tokens: Some(40),
        ..request
    };
    let ctx = p.e.session_context(tight).await.unwrap();
    assert!(ctx.files.len() < 4 && ctx.omitted > 0, "{ctx:?}");
    assert!(ctx.tokens <= 40);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_indexed_files_are_planned_and_contents_pass_the_privacy_filter() {
    let p = recorded().await;
    // On disk and read in every later session, but never indexed (as an ignored file would
    // be): never planned, never read.
    std::fs::write(
        p.root.join("src/auth/local.ts"),
        "export const local = 1;\n",
    )
    .unwrap();
    // (10 of the module's 15 sessions: the second tier.)
    for i in 0..10 {
        session(
            &p.e,
            &format!("late-{i}"),
            &["src/auth/local.ts", "src/auth/login.ts"],
        )
        .await;
    }
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    std::fs::write(
        p.root.join("src/auth/login.ts"),
        format!("export const token = \"{secret}\";\n"),
    )
    .unwrap();
    let plan =
        p.e.prefetch_plan(PrefetchRequest {
            with_content: true,
            ..auth()
        })
        .await
        .unwrap();
    assert!(plan
        .omitted
        .iter()
        .any(|o| o.path == "src/auth/local.ts" && o.reason == OmitReason::Missing));
    assert!(plan.files.iter().all(|f| f.path != "src/auth/local.ts"));
    let login = plan
        .files
        .iter()
        .find(|f| f.path == "src/auth/login.ts")
        .unwrap();
    let text = login.content.as_deref().unwrap();
    assert!(
        !text.contains(secret) && text.contains("[REDACTED]"),
        "{text}"
    );
}
