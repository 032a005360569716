//! The agent-file bridge against real libSQL files and real-looking `CLAUDE.md`, `AGENTS.md`
//! (CRLF) and `.cursorrules` files in a temporary project root: import, re-import after edits,
//! export of the hot tier, edits of the generated section imported back, and bad input.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use engram::clock::ManualClock;
use engram::lifecycle::agent_files::{BEGIN_MARKER, END_MARKER};
use engram::lifecycle::{AgentExportOptions, AgentFileImport, AgentImportOptions};
use engram::memory::{
    ListFilter, Memory, MemoryScope, MemorySource, MemoryType, RememberInput, ShareScope,
};
use engram::{EngineOptions, Engram, OpenOptions};

const T0: i64 = 1_700_000_000_000;
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/agent_files");

struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    e: Engram,
}

impl Project {
    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.root.join(name), text).unwrap();
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.root.join(name)).unwrap()
    }

    async fn import(&self, files: &[&str]) -> Vec<AgentFileImport> {
        let options = AgentImportOptions {
            files: files.iter().map(|f| (*f).to_owned()).collect(),
        };
        self.e.import_agent_files(&options).await.unwrap().files
    }

    /// The active memory whose text contains `needle` (exactly one).
    async fn find(&self, needle: &str) -> Memory {
        let all = self.active().await;
        let found: Vec<_> = all.iter().filter(|m| m.content.contains(needle)).collect();
        assert_eq!(
            found.len(),
            1,
            "one active memory with {needle:?}: {found:#?}"
        );
        found[0].clone()
    }

    async fn active(&self) -> Vec<Memory> {
        let filter = ListFilter {
            limit: Some(1000),
            ..ListFilter::default()
        };
        self.e.list(&filter).await.unwrap()
    }
}

/// A project root holding the three fixture files.
async fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    for name in ["CLAUDE.md", "AGENTS.md", ".cursorrules"] {
        std::fs::copy(Path::new(FIXTURES).join(name), root.join(name)).unwrap();
    }
    let mut options = OpenOptions::new(dir.path().join("memory.db"));
    options.project_root = Some(root.clone());
    options.engine = EngineOptions {
        clock: Arc::new(ManualClock::new(T0)),
        ..EngineOptions::default()
    };
    let e = Engram::open(options).await.unwrap();
    Project {
        _dir: dir,
        root: std::fs::canonicalize(root).unwrap(),
        e,
    }
}

#[tokio::test]
async fn the_three_agent_files_become_typed_user_taught_memories() {
    let p = project().await;
    let report = p.import(&[]).await;
    let paths: Vec<_> = report.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["CLAUDE.md", "AGENTS.md", ".cursorrules"]);
    assert!(report.iter().all(|f| f.found && f.skipped.is_empty()));
    let claude = &report[0];
    assert_eq!(claude.kind, "claude_md");
    assert_eq!(claude.rules, 9, "{claude:#?}");
    assert_eq!(claude.created.len(), 9);
    assert_eq!(report[1].created.len(), 6, "{:#?}", report[1]);
    assert_eq!(report[2].created.len(), 6, "{:#?}", report[2]);

    let chose = p.find("We chose tRPC over REST").await;
    assert_eq!(chose.memory_type, MemoryType::Decision);
    assert_eq!(chose.source, MemorySource::UserTaught);
    assert!(chose.user_verified && chose.pinned && !chose.needs_review);
    assert_eq!(chose.tags, ["agent-file:CLAUDE.md"]);
    let origin = &chose.metadata["agentFile"];
    assert_eq!(origin["path"], "CLAUDE.md");
    assert_eq!(origin["section"], serde_json::json!(["Architecture"]));
    assert_eq!(origin["line"], 16);

    assert_eq!(
        p.find("regenerated after every schema change")
            .await
            .memory_type,
        MemoryType::Gotcha
    );
    let build = p.find("pnpm --filter desktop build").await;
    assert_eq!(build.memory_type, MemoryType::WorkflowRecipe);
    assert!(
        build
            .content
            .contains("```bash\npnpm --filter desktop build\n```"),
        "the code block stays with its rule: {:?}",
        build.content
    );
    // AGENTS.md is CRLF: no carriage return reaches a memory.
    let wrap = p.find("Wrap errors with").await;
    assert!(!wrap.content.contains('\r'));
    assert_eq!(wrap.tags, ["agent-file:AGENTS.md"]);
    assert_eq!(
        wrap.metadata["agentFile"]["section"],
        serde_json::json!(["Code style"])
    );
    // .cursorrules: plain lines under `Name:` sections.
    let mock = p.find("Do not mock the database").await;
    assert_eq!(mock.memory_type, MemoryType::Gotcha);
    assert_eq!(
        mock.metadata["agentFile"]["section"],
        serde_json::json!(["Testing"])
    );
    assert_eq!(mock.metadata["agentFile"]["kind"], "cursorrules");
    assert_eq!(p.active().await.len(), 21);
}

#[tokio::test]
async fn importing_again_changes_nothing() {
    let p = project().await;
    p.import(&[]).await;
    let before = p.active().await;
    let again = p.import(&[]).await;
    for file in &again {
        assert_eq!(file.unchanged, file.rules, "{file:#?}");
        assert!(file.created.is_empty() && file.edited.is_empty() && file.removed.is_empty());
    }
    let after = p.active().await;
    assert_eq!(before, after, "no new versions, no new memories");
}

#[tokio::test]
async fn edits_supersede_removals_forget_additions_create() {
    let p = project().await;
    p.import(&["CLAUDE.md"]).await;
    let named = p.find("Use named exports").await;
    let prisma = p.find("Prisma client").await;
    let text = p
        .read("CLAUDE.md")
        .replace(
            "- Use named exports, not default exports, in every module.",
            "- Use named exports everywhere; default exports only for Next.js pages.",
        )
        .replace(
            "- The Prisma client must be regenerated after every schema change or the types lie.\n",
            "",
        )
        .replace(
            "## Architecture\n",
            "## Architecture\n\nAll dates are stored in UTC and formatted in the browser.\n",
        );
    p.write("CLAUDE.md", &text);
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert_eq!(report.unchanged, 7, "{report:#?}");
    assert_eq!(report.edited.len(), 1);
    assert_eq!(report.edited[0].old_id, named.id);
    assert_eq!(report.removed, [prisma.id.as_str()]);
    assert_eq!(report.created.len(), 1);

    let edited = p.e.get(&report.edited[0].new_id).await.unwrap();
    assert!(edited
        .content
        .contains("default exports only for Next.js pages"));
    assert_eq!(
        edited.metadata["agentFile"]["section"],
        serde_json::json!(["Conventions"])
    );
    let old = p.e.get(&named.id).await.unwrap();
    assert!(old.deprecated);
    assert_eq!(old.superseded_by.as_deref(), Some(edited.id.as_str()));
    assert!(old
        .deprecated_reason
        .unwrap()
        .starts_with("edited in CLAUDE.md"));
    let gone = p.e.get(&prisma.id).await.unwrap();
    assert!(gone.deprecated);
    assert_eq!(
        gone.deprecated_reason.as_deref(),
        Some("removed from CLAUDE.md")
    );
    let history = p.e.history(&prisma.id).await.unwrap();
    assert!(
        history.iter().any(|v| v.ended_by == "agent_file"),
        "{history:#?}"
    );
    let utc = p.e.get(&report.created[0]).await.unwrap();
    assert!(utc.content.contains("stored in UTC"));
    assert_eq!(
        utc.metadata["agentFile"]["section"],
        serde_json::json!(["Architecture"])
    );
}

#[tokio::test]
async fn a_rule_in_two_files_is_one_memory_until_both_drop_it() {
    let p = project().await;
    let shared = "- Run `go test ./...` before every commit.";
    p.write(
        "CLAUDE.md",
        &format!("# Project\n\n## Testing\n\n{shared}\n"),
    );
    p.import(&["CLAUDE.md", "AGENTS.md"]).await;
    let m = p.find("before every commit").await;
    assert_eq!(m.tags, ["agent-file:CLAUDE.md", "agent-file:AGENTS.md"]);

    p.write("CLAUDE.md", "# Project\n");
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert_eq!(report.removed, [m.id.as_str()]);
    let kept = p.e.get(&m.id).await.unwrap();
    assert!(!kept.deprecated, "AGENTS.md still holds it");
    assert_eq!(kept.tags, ["agent-file:AGENTS.md"]);

    let agents = p
        .read("AGENTS.md")
        .replace("- Run `go test ./...` before every commit.\r\n", "");
    p.write("AGENTS.md", &agents);
    p.import(&["AGENTS.md"]).await;
    assert!(p.e.get(&m.id).await.unwrap().deprecated);
}

#[tokio::test]
async fn a_rule_engram_already_knew_is_tagged_not_duplicated_and_survives_removal() {
    let p = project().await;
    let mut input = RememberInput::new(
        MemoryType::Preference,
        "Use named exports, not default exports, in every module.",
    );
    input.source = Some(MemorySource::AgentExplicit);
    let known = p.e.remember(input).await.unwrap().memory;
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert!(report.created.contains(&known.id));
    let m = p.e.get(&known.id).await.unwrap();
    assert_eq!(m.tags, ["agent-file:CLAUDE.md"]);

    let text = p.read("CLAUDE.md").replace(
        "- Use named exports, not default exports, in every module.\n",
        "",
    );
    p.write("CLAUDE.md", &text);
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert_eq!(report.removed, [known.id.as_str()]);
    let m = p.e.get(&known.id).await.unwrap();
    assert!(!m.deprecated, "an agent's memory outlives the rule");
    assert!(m.tags.is_empty());
}

#[tokio::test]
async fn secrets_in_rules_are_redacted_and_still_match_on_reimport() {
    let p = project().await;
    p.write(
        "CLAUDE.md",
        "## Setup\n\n- Use the staging key sk-live-0123456789abcdefghijklmnopqrstuv for local runs.\n",
    );
    let first = p.import(&["CLAUDE.md"]).await.remove(0);
    assert_eq!(first.created.len(), 1);
    let m = p.e.get(&first.created[0]).await.unwrap();
    assert!(!m.content.contains("0123456789abcdef"), "{}", m.content);
    assert!(m.redactions > 0);
    let again = p.import(&["CLAUDE.md"]).await.remove(0);
    assert_eq!(again.unchanged, 1, "{again:#?}");
    assert!(again.created.is_empty() && again.removed.is_empty());
}

/// A project with memories of every kind the hot tier must choose among.
async fn learned(p: &Project) -> Vec<String> {
    let mut ids = Vec::new();
    let mut add = |memory_type, content: &str, edit: &dyn Fn(&mut RememberInput)| {
        let mut input = RememberInput::new(memory_type, content);
        edit(&mut input);
        ids.push(input);
    };
    add(
        MemoryType::Gotcha,
        "The payments webhook retries for 72 hours; handlers must be idempotent.",
        &|i| i.confidence = Some(0.95),
    );
    add(
        MemoryType::Decision,
        "Feature flags are read from LaunchDarkly, never from environment variables.",
        &|i| i.user_verified = Some(true),
    );
    add(
        MemoryType::Pattern,
        "Repository classes wrap every query in `withRetry()`.",
        &|i| i.pinned = Some(true),
    );
    add(
        MemoryType::Preference,
        "Maybe prefer smaller pull requests when refactoring.",
        &|i| i.confidence = Some(0.5),
    );
    add(
        MemoryType::Gotcha,
        "My local Postgres runs on port 5433, not 5432.",
        &|i| {
            i.confidence = Some(0.99);
            i.share_scope = Some(ShareScope::Personal);
        },
    );
    add(
        MemoryType::Gotcha,
        "The search index rebuild takes forty minutes on staging.",
        &|i| {
            i.confidence = Some(0.99);
            i.needs_review = Some(true);
        },
    );
    add(
        MemoryType::WorkState,
        "Half-way through migrating the billing module to the new client.",
        &|i| i.confidence = Some(0.99),
    );
    add(
        MemoryType::Requirement,
        "Only for this session: keep the old endpoint alive.",
        &|i| {
            i.confidence = Some(0.99);
            i.scope = Some(MemoryScope::Session);
        },
    );
    let written = p.e.remember_many(ids).await.unwrap();
    written.into_iter().map(|w| w.memory.id).collect()
}

#[tokio::test]
async fn export_writes_the_hot_tier_and_keeps_the_users_text() {
    let p = project().await;
    p.import(&["CLAUDE.md"]).await;
    let ids = learned(&p).await;
    let original = p.read("CLAUDE.md");
    let out =
        p.e.export_agent_file(&AgentExportOptions::default())
            .await
            .unwrap();
    assert_eq!(out.path, "CLAUDE.md");
    assert!(out.written && out.changed);
    assert_eq!(out.min_confidence, 0.8, "level 1's injection threshold");
    // Pinned, then verified, then by confidence; the rest is left out for a reason each.
    assert_eq!(
        out.memory_ids,
        [ids[2].clone(), ids[1].clone(), ids[0].clone()]
    );
    let file = p.read("CLAUDE.md");
    assert_eq!(file, out.text);
    assert!(
        file.starts_with(&original),
        "the user's text is kept byte for byte"
    );
    assert!(file.contains(BEGIN_MARKER) && file.contains(END_MARKER));
    assert!(file.contains(&format!("<!-- engram:id={} -->", ids[0])));
    assert!(file.contains("### Gotchas") && file.contains("### Decisions"));
    for absent in [
        "port 5433",
        "forty minutes",
        "billing module",
        "old endpoint",
        "smaller pull",
    ] {
        assert!(!file.contains(absent), "{absent} must not be exported");
    }
    // The imported rules are not written twice.
    assert_eq!(file.matches("We chose tRPC over REST").count(), 1);

    let again =
        p.e.export_agent_file(&AgentExportOptions::default())
            .await
            .unwrap();
    assert!(!again.changed && !again.written);

    // Importing the exported file creates nothing: the section is recognised.
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert_eq!(report.unchanged, report.rules);
    assert!(report.created.is_empty() && report.generated_added.is_empty());
    assert!(report.generated_edits.is_empty(), "{report:#?}");
}

#[tokio::test]
async fn export_without_write_returns_the_text_and_touches_nothing() {
    let p = project().await;
    learned(&p).await;
    let options = AgentExportOptions {
        file: Some("docs/AGENT_RULES.md".into()),
        write: Some(false),
        limit: Some(1),
        ..AgentExportOptions::default()
    };
    std::fs::create_dir(p.root.join("docs")).unwrap();
    let out = p.e.export_agent_file(&options).await.unwrap();
    assert!(!out.written && out.changed);
    assert_eq!(out.memory_ids.len(), 1);
    assert!(out.text.starts_with(BEGIN_MARKER));
    assert!(!p.root.join("docs/AGENT_RULES.md").exists());
}

#[tokio::test]
async fn edits_to_the_generated_section_are_imported_back() {
    let p = project().await;
    let ids = learned(&p).await;
    // AGENTS.md is CRLF; the section is written CRLF too.
    let options = AgentExportOptions {
        file: Some("AGENTS.md".into()),
        ..AgentExportOptions::default()
    };
    p.e.export_agent_file(&options).await.unwrap();
    let exported = p.read("AGENTS.md");
    assert!(
        !exported.replace("\r\n", "").contains('\n'),
        "CRLF throughout"
    );

    let edited = exported
        .replace(
            "handlers must be idempotent.",
            "handlers must be idempotent and log the event id.",
        )
        .replace(
            "### Decisions\r\n\r\n",
            "### Decisions\r\n\r\n- Releases are cut from main every Tuesday by the on-call.\r\n",
        );
    p.write("AGENTS.md", &edited);
    let report = p.import(&["AGENTS.md"]).await.remove(0);
    assert_eq!(report.generated_edits, [ids[0].clone()], "{report:#?}");
    assert_eq!(report.generated_added.len(), 1);
    assert_eq!(
        report.created.len(),
        6,
        "the user's own rules, first imported now"
    );
    assert!(report.removed.is_empty());

    let m = p.e.get(&ids[0]).await.unwrap();
    assert!(m.content.ends_with("idempotent and log the event id."));
    assert!(m.user_verified);
    assert_eq!(m.version, 2);
    let history = p.e.history(&ids[0]).await.unwrap();
    assert_eq!(history[0].ended_by, "agent_file", "{history:#?}");

    let added = p.e.get(&report.generated_added[0]).await.unwrap();
    assert_eq!(added.memory_type, MemoryType::Decision);
    assert!(
        added.tags.is_empty(),
        "a hand-added bullet is engram's, not the file's"
    );
    assert!(added.user_verified);
    // The next export writes it back with its id.
    let out = p.e.export_agent_file(&options).await.unwrap();
    assert!(out.memory_ids.contains(&added.id));
    assert!(out.text.contains(&format!(
        "Tuesday by the on-call. <!-- engram:id={} -->",
        added.id
    )));
    let again = p.import(&["AGENTS.md"]).await.remove(0);
    assert!(again.generated_added.is_empty() && again.generated_edits.is_empty());
}

#[tokio::test]
async fn moving_a_bullet_under_another_heading_changes_its_type() {
    let p = project().await;
    let ids = learned(&p).await;
    p.e.export_agent_file(&AgentExportOptions::default())
        .await
        .unwrap();
    let text = p.read("CLAUDE.md");
    let line = text
        .lines()
        .find(|l| l.contains(&format!("engram:id={}", ids[0])))
        .unwrap()
        .to_owned();
    let moved = text
        .replace(&format!("{line}\n"), "")
        .replace("### Patterns\n\n", &format!("### Patterns\n\n{line}\n"));
    p.write("CLAUDE.md", &moved);
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert_eq!(report.generated_edits, [ids[0].clone()]);
    assert_eq!(
        p.e.get(&ids[0]).await.unwrap().memory_type,
        MemoryType::Pattern
    );
}

#[tokio::test]
async fn bullets_naming_unknown_or_forgotten_memories_are_skipped() {
    let p = project().await;
    let ids = learned(&p).await;
    p.e.export_agent_file(&AgentExportOptions::default())
        .await
        .unwrap();
    p.e.forget(&ids[1], None).await.unwrap();
    let text = p.read("CLAUDE.md").replace(
        &format!("engram:id={}", ids[2]),
        "engram:id=00000000-0000-0000-0000-000000000000",
    );
    p.write("CLAUDE.md", &text);
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    let reasons: Vec<_> = report.skipped.iter().map(|s| s.reason.as_str()).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("is forgotten")));
    assert!(reasons.iter().any(|r| r.contains("names no memory")));
    // Nothing was changed for them.
    assert_eq!(p.e.get(&ids[2]).await.unwrap().version, 1);
}

#[tokio::test]
async fn a_missing_file_changes_nothing() {
    let p = project().await;
    p.import(&["CLAUDE.md"]).await;
    std::fs::remove_file(p.root.join("CLAUDE.md")).unwrap();
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert!(!report.found);
    assert_eq!(
        p.active().await.len(),
        9,
        "a checkout without the file forgets nothing"
    );
}

#[tokio::test]
async fn bad_input_is_refused_with_a_code_and_imports_nothing() {
    let p = project().await;
    let e = &p.e;
    let import = |files: &[&str]| {
        let options = AgentImportOptions {
            files: files.iter().map(|f| (*f).to_owned()).collect(),
        };
        async move { e.import_agent_files(&options).await }
    };
    let code = |r: engram::Result<engram::lifecycle::AgentImportReport>| r.unwrap_err().code();
    assert_eq!(code(import(&["../CLAUDE.md"]).await), "ENGRAM_INVALID_ARG");
    assert_eq!(code(import(&["/etc/passwd"]).await), "ENGRAM_INVALID_ARG");
    std::fs::write(p.root.join("rules.md"), b"- caf\xe9 au lait\n").unwrap();
    let err = import(&["CLAUDE.md", "rules.md"]).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
    assert!(err.to_string().contains("rules.md"), "{err}");
    assert!(
        p.active().await.is_empty(),
        "CLAUDE.md was not imported either"
    );

    let err =
        p.e.export_agent_file(&AgentExportOptions {
            limit: Some(0),
            ..AgentExportOptions::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");

    // Without a project root there are no agent files.
    let dir = tempfile::tempdir().unwrap();
    let bare = Engram::open(OpenOptions::new(dir.path().join("m.db")))
        .await
        .unwrap();
    let err = bare
        .import_agent_files(&AgentImportOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
    assert!(err.to_string().contains("projectRoot"));
}

#[tokio::test]
async fn a_stale_bullet_does_not_roll_back_a_memory_changed_after_the_export() {
    let p = project().await;
    let ids = learned(&p).await;
    p.e.export_agent_file(&AgentExportOptions::default())
        .await
        .unwrap();
    let patch = engram::memory::MemoryPatch {
        content: Some("The payments webhook retries for 96 hours now.".into()),
        ..Default::default()
    };
    p.e.update(&ids[0], patch).await.unwrap();
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert!(report.generated_edits.is_empty(), "{report:#?}");
    assert!(report
        .skipped
        .iter()
        .any(|s| s.reason.contains("changed since this section was exported")));
    let m = p.e.get(&ids[0]).await.unwrap();
    assert_eq!(m.content, "The payments webhook retries for 96 hours now.");
    assert!(!m.user_verified);
}

#[tokio::test]
async fn a_begin_marker_without_an_end_is_refused_and_the_file_kept() {
    let p = project().await;
    learned(&p).await;
    let text = format!(
        "# Rules\n\n{BEGIN_MARKER}\n- a bullet\n\n## Mine\n\n- Keep this rule of mine forever.\n"
    );
    p.write("CLAUDE.md", &text);
    let err =
        p.e.import_agent_files(&AgentImportOptions::default())
            .await
            .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
    assert!(
        err.to_string().contains("CLAUDE.md") && err.to_string().contains("line 3"),
        "{err}"
    );
    let err =
        p.e.export_agent_file(&AgentExportOptions::default())
            .await
            .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
    assert_eq!(p.read("CLAUDE.md"), text, "nothing written");
    assert_eq!(p.active().await.len(), 8, "nothing imported");
}

#[tokio::test]
async fn an_edit_in_one_file_keeps_the_memory_another_file_holds() {
    let p = project().await;
    let shared = "- Run `go test ./...` before every commit.";
    p.write(
        "CLAUDE.md",
        &format!("# Project\n\n## Testing\n\n{shared}\n"),
    );
    p.import(&["CLAUDE.md", "AGENTS.md"]).await;
    let m = p.find("before every commit").await;
    p.write(
        "CLAUDE.md",
        "# Project\n\n## Testing\n\n- Run `go test ./...` before every push.\n",
    );
    let report = p.import(&["CLAUDE.md"]).await.remove(0);
    assert!(report.edited.is_empty(), "{report:#?}");
    assert_eq!(report.created.len(), 1);
    assert_eq!(report.removed, [m.id.as_str()]);
    let kept = p.e.get(&m.id).await.unwrap();
    assert!(!kept.deprecated && kept.superseded_by.is_none());
    assert_eq!(kept.tags, ["agent-file:AGENTS.md"]);
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlinked_agent_file_is_read_once() {
    let p = project().await;
    std::fs::remove_file(p.root.join("AGENTS.md")).unwrap();
    std::os::unix::fs::symlink(p.root.join("CLAUDE.md"), p.root.join("AGENTS.md")).unwrap();
    let report = p.import(&[]).await;
    let paths: Vec<_> = report.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["CLAUDE.md", ".cursorrules"]);
    let chose = p.find("We chose tRPC over REST").await;
    assert_eq!(chose.tags, ["agent-file:CLAUDE.md"]);
    assert_eq!(chose.reinforce_count, 0);
}
