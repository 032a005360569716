//! The planner's and the QA context from recorded sessions and memories, on real libSQL files:
//! the calibration measured from three observed sessions that ran over their plans (the
//! observer's fixture, replayed), constraints from dead ends, files coupled by causal
//! dependencies added to scope, sections in order, the trust threshold, and what each builder
//! must leave out; a recorded QA session whose browser results go through the e2e pipeline.

use std::path::Path;
use std::sync::Arc;

use engram::agent::e2e;
use engram::agent::planner::PlannerRequest;
use engram::agent::qa::QaRequest;
use engram::agent::session_context::Section;
use engram::clock::ManualClock;
use engram::lifecycle::EventNote;
use engram::memory::{Memory, MemorySource, MemoryType, RememberInput};
use engram::observer::protocol::json;
use engram::observer::{SessionOptions, SessionType};
use engram::{EngineOptions, Engram, OpenOptions};
use serde_json::Value;

const T0: i64 = 1_767_225_600_000;

/// A new database file on a manual clock at [`T0`].
async fn engine() -> (tempfile::TempDir, Arc<ManualClock>, Engram) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let mut options = OpenOptions::new(dir.path().join("memory.db"));
    options.engine = EngineOptions {
        clock: clock.clone(),
        ..EngineOptions::default()
    };
    let e = Engram::open(options).await.unwrap();
    (dir, clock, e)
}

/// An engine that observed the fixture's three checkout sessions (each planned 10 steps, ran
/// 16, in `src/ui/`).
async fn calibrated() -> (tempfile::TempDir, Engram) {
    let (dir, clock, e) = engine().await;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/observer/calibration_three_sessions.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    for spec in doc["sessions"].as_array().unwrap() {
        let s = &spec["session"];
        let mut o = SessionOptions::new(s["sessionId"].as_str().unwrap());
        o.session_type = SessionType::parse(s["sessionType"].as_str().unwrap()).unwrap();
        o.planned_steps = s["plannedSteps"].as_u64().map(|n| n as u32);
        let session = e.observe(&o).unwrap();
        for m in spec["messages"].as_array().unwrap() {
            clock.advance(1000);
            session.observe(json::message(m).unwrap()).unwrap();
        }
        e.finalize(&session, None).await.unwrap();
    }
    (dir, e)
}

fn memory(t: MemoryType, content: &str, files: &[&str], confidence: f64) -> RememberInput {
    let mut i = RememberInput::new(t, content);
    i.related_files = files.iter().map(|f| (*f).to_owned()).collect();
    i.confidence = Some(confidence);
    i
}

async fn remember(e: &Engram, input: RememberInput) -> Memory {
    e.remember(input).await.unwrap().memory
}

fn sections(memories: &[engram::agent::session_context::ContextMemory]) -> Vec<(Section, &str)> {
    memories
        .iter()
        .map(|m| (m.section, m.memory.content.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_planner_gets_calibration_constraints_and_scope_as_data() {
    let (_dir, e) = calibrated().await;
    let dead_end = remember(
        &e,
        memory(
            MemoryType::DeadEnd,
            "Debouncing the pay button in CSS: the double submit still went through",
            &["src/ui/Checkout.tsx"],
            0.9,
        ),
    )
    .await;
    // Below the cautious trust threshold (0.80): not a constraint.
    remember(
        &e,
        memory(
            MemoryType::DeadEnd,
            "Maybe the form library is at fault",
            &["src/ui/Checkout.tsx"],
            0.5,
        ),
    )
    .await;
    let coupled = remember(
        &e,
        memory(
            MemoryType::CausalDependency,
            "Checkout.tsx and api/payments.ts change together",
            &["src/ui/Checkout.tsx", "src/api/payments.ts"],
            0.9,
        ),
    )
    .await;
    // A dependency elsewhere: neither in the modules nor coupled to them.
    remember(
        &e,
        memory(
            MemoryType::CausalDependency,
            "db/pool.ts and db/migrate.ts change together",
            &["src/db/pool.ts", "src/db/migrate.ts"],
            0.9,
        ),
    )
    .await;
    let mut recipe = memory(
        MemoryType::WorkflowRecipe,
        "Checkout changes: run the end-to-end checkout suite twice before merging",
        &[],
        0.9,
    );
    recipe.source = Some(MemorySource::UserTaught);
    remember(&e, recipe).await;

    let request = PlannerRequest {
        task: "make the checkout pay button safe against double submits".into(),
        modules: vec!["src/ui".into()],
        budget_tokens: None,
    };
    let p = e.planner_context(request.clone()).await.unwrap();
    let calibration = p.calibration.clone().expect("three measured sessions");
    assert!((calibration.factor - 1.6).abs() < 1e-9, "{calibration:?}");
    assert_eq!(calibration.sessions, 3);
    assert_eq!(p.constraints.len(), 1, "{:?}", p.constraints);
    assert_eq!(p.constraints[0].memory_id, dead_end.id);
    assert!(p.constraints[0]
        .text
        .contains("Debouncing the pay button in CSS"));
    assert_eq!(p.scope_files.len(), 1, "{:?}", p.scope_files);
    assert_eq!(p.scope_files[0].path, "src/api/payments.ts");
    assert_eq!(p.scope_files[0].memory_ids, vec![coupled.id.clone()]);

    let text = &p.context.text;
    let apply = text
        .find("## Apply to the plan")
        .expect("the transformations");
    assert!(
        text.contains("multiply subtask estimates by 1.60"),
        "{text}"
    );
    assert!(
        text.contains(&format!("[Memory #{}]", dead_end.id)),
        "{text}"
    );
    assert!(
        text.contains("also include `src/api/payments.ts`"),
        "{text}"
    );
    assert!(apply < text.find("## Dead ends").unwrap());
    let shown = sections(&p.context.memories);
    let order: Vec<Section> = shown.iter().map(|(s, _)| *s).collect();
    let mut sorted = order.clone();
    sorted.sort_by_key(|s| {
        [
            Section::Calibrations,
            Section::DeadEnds,
            Section::Dependencies,
            Section::Outcomes,
            Section::Recipes,
        ]
        .iter()
        .position(|x| x == s)
    });
    assert_eq!(order, sorted, "sections in the planner's order: {shown:?}");
    assert!(shown.contains(&(
        Section::Recipes,
        "Checkout changes: run the end-to-end checkout suite twice before merging"
    )));
    assert!(!shown.iter().any(|(_, c)| c.contains("form library")));
    assert!(!shown.iter().any(|(_, c)| c.contains("db/pool.ts")));
    // The calibration memories the observer promoted from the same sessions come first.
    assert_eq!(order.first(), Some(&Section::Calibrations), "{shown:?}");

    // A parent directory counts the sessions of the modules under it.
    let parent = e
        .planner_context(PlannerRequest {
            modules: vec!["src/".into()],
            ..request.clone()
        })
        .await
        .unwrap();
    assert_eq!(parent.calibration.map(|c| c.sessions), Some(3));

    // The API module has no measured sessions or dead ends; the coupling works both ways.
    let other = e
        .planner_context(PlannerRequest {
            modules: vec!["src/api/".into()],
            ..request.clone()
        })
        .await
        .unwrap();
    assert!(other.calibration.is_none() && other.constraints.is_empty());
    let scope: Vec<&str> = other.scope_files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(scope, ["src/ui/Checkout.tsx"]);

    for bad in [
        PlannerRequest {
            task: "  ".into(),
            ..request.clone()
        },
        PlannerRequest {
            budget_tokens: Some(0),
            ..request.clone()
        },
        PlannerRequest {
            modules: vec!["../x".into()],
            ..request.clone()
        },
    ] {
        let err = e.planner_context(bad).await.unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG", "{err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn qa_starts_with_requirements_then_observations_then_error_patterns() {
    let (_dir, e) = calibrated().await;
    let error = remember(
        &e,
        memory(
            MemoryType::ErrorPattern,
            "`TypeError: pay is not a function` means the Checkout form lost its handler",
            &["src/ui/Checkout.tsx"],
            0.9,
        ),
    )
    .await;
    let observed = remember(
        &e,
        memory(
            MemoryType::E2eObservation,
            "The pay button is enabled only after the card iframe reports ready (~2 s)",
            &["src/ui/Checkout.tsx"],
            0.9,
        ),
    )
    .await;
    let requirement = remember(
        &e,
        memory(
            MemoryType::Requirement,
            "A payment must never be submitted twice",
            &["src/ui/Checkout.tsx"],
            0.95,
        ),
    )
    .await;
    remember(
        &e,
        memory(
            MemoryType::Gotcha,
            "Checkout.tsx re-renders on every keystroke",
            &["src/ui/Checkout.tsx"],
            0.95,
        ),
    )
    .await;
    remember(
        &e,
        memory(
            MemoryType::Requirement,
            "Migrations run before the API starts",
            &["src/db/migrate.ts"],
            0.95,
        ),
    )
    .await;

    let qa = e
        .qa_context(QaRequest {
            modules: vec!["src/ui/".into()],
            budget_tokens: None,
        })
        .await
        .unwrap();
    let ids: Vec<(Section, &str)> = qa
        .memories
        .iter()
        .map(|m| (m.section, m.memory.id.as_str()))
        .collect();
    assert_eq!(
        ids,
        vec![
            (Section::Requirements, requirement.id.as_str()),
            (Section::Observations, observed.id.as_str()),
            (Section::ErrorPatterns, error.id.as_str()),
        ],
        "{}",
        qa.text
    );
    assert!(qa.text.find("## Requirements").unwrap() < qa.text.find("## Error patterns").unwrap());
    assert!(!qa.text.contains("re-renders"), "no other types");

    // The whole project: the other module's requirement too; a tight budget keeps the first.
    let all = e.qa_context(QaRequest::default()).await.unwrap();
    assert_eq!(
        all.memories
            .iter()
            .filter(|m| m.section == Section::Requirements)
            .count(),
        2
    );
    let tight = e
        .qa_context(QaRequest {
            modules: vec!["src/ui/".into()],
            budget_tokens: Some(100),
        })
        .await
        .unwrap();
    assert_eq!(tight.memories[0].memory.id, requirement.id);
    assert!(tight.omitted > 0 && tight.tokens <= 100, "{tight:?}");
}

/// Replays the recorded QA session through the observer and the e2e pipeline: every browser
/// result goes to the model's recorded reply (`modelReply`), other tools are not classified.
/// Returns the engine and what was stored, in order.
async fn qa_session_replayed() -> (tempfile::TempDir, Engram, Vec<(String, Memory)>, usize) {
    let (dir, clock, e) = engine().await;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agent_loop/qa_browser_session.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let spec = &doc["sessions"][0];
    let id = spec["session"]["sessionId"].as_str().unwrap();
    let session = e.observe(&SessionOptions::new(id)).unwrap();
    let (mut stored, mut classified) = (Vec::new(), 0);
    for m in spec["messages"].as_array().unwrap() {
        clock.advance(1000);
        session.observe(json::message(m).unwrap()).unwrap();
        let tool = m["toolName"].as_str().unwrap_or_default();
        if m["type"] != "memory:tool-result" || !e2e::is_observation_tool(tool, &[]) {
            assert!(
                m.get("modelReply").is_none(),
                "{tool} is not an observation tool"
            );
            continue;
        }
        // What the app's model was asked, then what it answered.
        let prompt = e2e::prompt(tool, m["result"].as_str().unwrap());
        assert!(prompt.contains("F=not_worth_remembering"));
        let Some(reply) = m["modelReply"].as_str() else {
            continue;
        };
        classified += 1;
        if let Some((category, memory)) = e.store_e2e_observation(id, tool, reply).await.unwrap() {
            stored.push((category.as_str().to_owned(), memory));
        }
    }
    e.finalize(&session, None).await.unwrap();
    (dir, e, stored, classified)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_qa_session_leaves_observations_for_review_then_in_the_qa_context() {
    let (_dir, e, stored, classified) = qa_session_replayed().await;
    // Five observation results were classified (the filled input's result was not worth a
    // call); the navigation is not an observation tool; the second screenshot's reply was F.
    assert_eq!(classified, 5);
    let categories: Vec<&str> = stored.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(
        categories,
        vec!["precondition", "timing", "ui_behavior", "test_sequence"]
    );
    for (category, m) in &stored {
        assert_eq!(m.memory_type, MemoryType::E2eObservation);
        assert_eq!(m.source, MemorySource::McpAuto);
        assert!(m.needs_review);
        assert!((m.confidence - e2e::OBSERVATION_CONFIDENCE).abs() < 1e-9);
        assert_eq!(m.tags, vec![category.clone()]);
        assert_eq!(m.session_id.as_deref(), Some("qa-checkout-1"));
    }
    assert!(stored[1].1.content.contains("card iframe reports ready"));

    // Waiting for review: the review queue holds them, the QA context does not use them yet.
    let queue = e.review_queue(None, None).await.unwrap();
    assert_eq!(queue.len(), 4);
    let request = || QaRequest {
        modules: Vec::new(),
        budget_tokens: None,
    };
    let before = e.qa_context(request()).await.unwrap();
    assert!(
        before
            .memories
            .iter()
            .all(|m| m.section != Section::Observations),
        "{}",
        before.text
    );
    // A person confirms three and rejects one; the confirmed ones reach the QA context.
    for (_, m) in &stored[..3] {
        e.confirm(&m.id, None, EventNote::default()).await.unwrap();
    }
    e.reject(&stored[3].1.id, EventNote::default())
        .await
        .unwrap();
    let after = e.qa_context(request()).await.unwrap();
    let observed: Vec<&str> = after
        .memories
        .iter()
        .filter(|m| m.section == Section::Observations)
        .map(|m| m.memory.id.as_str())
        .collect();
    assert_eq!(observed.len(), 3, "{}", after.text);
    for (_, m) in &stored[..3] {
        assert!(observed.contains(&m.id.as_str()));
    }
    assert!(!observed.contains(&stored[3].1.id.as_str()));
    assert!(after.text.contains("Confirm payment"), "{}", after.text);
}
