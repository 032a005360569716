//! Staleness from git end to end: real repositories made with the `git` command (engram reads
//! them with `gix`, never through it), real index runs, memories written at a commit whose
//! files then change, are deleted, or belong to a package inside a larger work tree.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use engram::agent::session_context::{Section, SessionContextRequest};
use engram::code::IndexOptions;
use engram::memory::{MemoryPatch, MemoryType, RememberInput};
use engram::{Engram, OpenOptions};

/// Runs `git` in `dir` with a fixed identity and no user configuration; returns its stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn commit(dir: &Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

async fn open(db: &Path, root: &Path) -> Engram {
    let mut options = OpenOptions::new(db);
    options.project_root = Some(root.to_path_buf());
    Engram::open(options).await.unwrap()
}

async fn index(e: &Engram) -> engram::code::git::GitStaleness {
    e.index(
        &IndexOptions::default(),
        &|_| {},
        &Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap()
    .git
}

async fn remember(e: &Engram, files: &[&str], commit: &str, pinned: bool) -> String {
    let mut input = RememberInput::new(MemoryType::Gotcha, format!("about {files:?} at {commit}"));
    input.related_files = files.iter().map(|f| f.to_string()).collect();
    input.commit_sha = Some(commit.to_owned());
    input.confidence = Some(0.8);
    input.pinned = Some(pinned);
    e.remember(input).await.unwrap().memory.id
}

async fn state(e: &Engram, id: &str) -> (f64, bool) {
    let m = e.get(id).await.unwrap();
    (m.confidence, m.needs_review)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[tokio::test(flavor = "multi_thread")]
async fn memories_lose_confidence_in_proportion_to_their_files_changed_since_their_commit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    for file in ["src/a.ts", "src/b.ts", "src/c.ts", "src/d.ts"] {
        write(&root, file, &format!("export const {} = 1\n", &file[4..5]));
    }
    git(&root, &["init", "-q"]);
    let first = commit(&root, "first");
    let e = open(&dir.path().join("m.db"), &root).await;

    let two_files = remember(&e, &["src/a.ts", "src/b.ts"], &first, false).await;
    let untouched = remember(&e, &["src/c.ts"], &first, false).await;
    let pinned = remember(&e, &["src/a.ts"], &first, true).await;
    let abbreviated = remember(&e, &["src/d.ts"], &first[..8], false).await;
    let elsewhere = remember(&e, &["src/a.ts"], &"ab".repeat(20), false).await;
    let mut no_commit = RememberInput::new(MemoryType::Gotcha, "no commit on this one");
    no_commit.related_files = vec!["src/a.ts".into()];
    no_commit.confidence = Some(0.8);
    let no_commit = e.remember(no_commit).await.unwrap().memory.id;

    // Nothing changed since the commit: nothing moves.
    let found = index(&e).await;
    assert_eq!(found.head.as_deref(), Some(first.as_str()));
    assert_eq!(
        (found.checked, found.lowered, found.unknown_commits),
        (5, 0, 1)
    );

    // One of two files changed: a quarter of the confidence goes (half x one half), and half
    // its files changed is the review bound.
    write(&root, "src/a.ts", "export const a = 2\n");
    write(&root, "src/d.ts", "export const d = 2\n");
    let second = commit(&root, "second");
    let found = index(&e).await;
    assert_eq!(found.head.as_deref(), Some(second.as_str()));
    assert_eq!(
        (found.lowered, found.flagged_for_review),
        (2, 2),
        "{found:?}"
    );
    let (confidence, review) = state(&e, &two_files).await;
    assert!(close(confidence, 0.8 * 0.75), "{confidence}");
    assert!(review);
    // Its one file changed: half of it goes.
    let (confidence, review) = state(&e, &abbreviated).await;
    assert!(close(confidence, 0.8 * 0.5), "{confidence}");
    assert!(review);
    assert_eq!(state(&e, &untouched).await, (0.8, false));
    assert_eq!(
        state(&e, &pinned).await,
        (0.8, false),
        "a pinned memory holds"
    );
    assert_eq!(
        state(&e, &elsewhere).await,
        (0.8, false),
        "an unknown commit says nothing"
    );
    assert_eq!(state(&e, &no_commit).await, (0.8, false));
    // The panel counts them (the pinned one too: its file changed, it just holds); the review
    // queue holds the two that lost confidence.
    let health = e.health(None).await.unwrap();
    assert_eq!(health.changed_in_git, 3);
    assert_eq!(health.needs_review, 2);
    // The session-start context warns about them.
    let context = e
        .session_context(SessionContextRequest::default())
        .await
        .unwrap();
    let warned: Vec<&str> = context
        .memories
        .iter()
        .filter(|m| m.section == Section::Stale)
        .map(|m| m.memory.id.as_str())
        .collect();
    assert!(warned.contains(&two_files.as_str()), "{}", context.text);
    assert!(warned.contains(&abbreviated.as_str()));
    assert!(!warned.contains(&untouched.as_str()));

    // A file changed again, or the pass run again, counts once.
    write(&root, "src/a.ts", "export const a = 3\n");
    commit(&root, "third");
    let found = index(&e).await;
    assert_eq!(found.lowered, 0, "{found:?}");
    assert!(close(state(&e, &two_files).await.0, 0.6));

    // The other file changes: the second half of the loss.
    write(&root, "src/b.ts", "export const b = 2\n");
    commit(&root, "fourth");
    assert_eq!(index(&e).await.lowered, 1);
    assert!(close(state(&e, &two_files).await.0, 0.8 * 0.75 * 0.75));

    // A new commitSha starts the count afresh: nothing changed since HEAD.
    let head = git(&root, &["rev-parse", "HEAD"]);
    let patch = MemoryPatch {
        commit_sha: Some(head),
        ..MemoryPatch::default()
    };
    e.update(&untouched, patch).await.unwrap();
    write(&root, "src/c.ts", "export const c = 2\n");
    commit(&root, "fifth");
    assert_eq!(index(&e).await.lowered, 1);
    assert!(close(state(&e, &untouched).await.0, 0.4));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_inside_a_larger_work_tree_sees_its_own_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("mono");
    write(&repo, "pkg/src/a.py", "def a():\n    return 1\n");
    write(&repo, "other/src/a.py", "def a():\n    return 1\n");
    git(&repo, &["init", "-q"]);
    let first = commit(&repo, "first");
    let e = open(&dir.path().join("m.db"), &repo.join("pkg")).await;
    let ours = remember(&e, &["src/a.py"], &first, false).await;
    // Only the other package's file of the same relative name changes.
    write(&repo, "other/src/a.py", "def a():\n    return 2\n");
    commit(&repo, "other package");
    assert_eq!(index(&e).await.lowered, 0);
    write(&repo, "pkg/src/a.py", "def a():\n    return 2\n");
    commit(&repo, "our package");
    assert_eq!(index(&e).await.lowered, 1);
    assert!(close(state(&e, &ours).await.0, 0.4));
}

#[tokio::test(flavor = "multi_thread")]
async fn no_repository_or_no_commit_leaves_everything_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("plain");
    write(&root, "src/a.ts", "export const a = 1\n");
    let e = open(&dir.path().join("m.db"), &root).await;
    let id = remember(&e, &["src/a.ts"], &"cd".repeat(20), false).await;
    let nothing = |found: engram::code::git::GitStaleness| {
        assert_eq!(found.head, None);
        assert_eq!(
            (found.checked, found.lowered, found.unknown_commits),
            (0, 0, 0)
        );
    };
    nothing(index(&e).await);
    // A repository without a commit yet.
    git(&root, &["init", "-q"]);
    nothing(index(&e).await);
    assert_eq!(state(&e, &id).await, (0.8, false));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_head_does_not_descend_from_says_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    write(&root, "src/a.ts", "export const a = 1\n");
    git(&root, &["init", "-q"]);
    let first = commit(&root, "first");
    // A side branch changes the file; its commit is not in main's history.
    git(&root, &["checkout", "-q", "-b", "side"]);
    write(&root, "src/a.ts", "export const a = 2\n");
    let side = commit(&root, "on the side");
    git(&root, &["checkout", "-q", "main"]);
    let e = open(&dir.path().join("m.db"), &root).await;
    let on_side = remember(&e, &["src/a.ts"], &side, false).await;
    let on_main = remember(&e, &["src/a.ts"], &first, false).await;
    let found = index(&e).await;
    assert_eq!((found.lowered, found.unknown_commits), (0, 1), "{found:?}");
    assert_eq!(state(&e, &on_side).await, (0.8, false));
    // Main moves on: its memory is lowered. Then an old commit is checked out: a memory
    // written later than HEAD says nothing about HEAD's files.
    write(&root, "src/a.ts", "export const a = 3\n");
    let later = commit(&root, "main moves on");
    assert_eq!(index(&e).await.lowered, 1);
    assert!(close(state(&e, &on_main).await.0, 0.4));
    let newer = remember(&e, &["src/a.ts"], &later, false).await;
    git(&root, &["checkout", "-q", &first]);
    let found = index(&e).await;
    assert_eq!(found.head.as_deref(), Some(first.as_str()));
    assert_eq!(found.lowered, 0, "{found:?}");
    assert_eq!(state(&e, &newer).await, (0.8, false));
}
