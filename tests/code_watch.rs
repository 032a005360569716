//! Keeping the index current: targeted re-index of changed paths (`index_paths`) and the file
//! watcher end to end, on a real project tree in a temp dir with real inotify events.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engram::code::{IndexOptions, WatchEvent, WatchOptions};
use engram::{Engram, OpenOptions};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

async fn open(dir: &tempfile::TempDir) -> Engram {
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(dir.path().join("repo"));
    Engram::open(options).await.unwrap()
}

async fn index(e: &Engram) {
    e.index(
        &IndexOptions::default(),
        &|_| {},
        &Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
}

/// Qualified names of a file's chunks (empty when not indexed).
async fn names(e: &Engram, path: &str) -> Vec<String> {
    e.chunks_of(path)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.qualified_name.unwrap_or_else(|| c.kind.clone()))
        .collect()
}

/// Where the call `from -> target` resolves: `path:qualified name`, or `unresolved`.
async fn call_target(dir: &tempfile::TempDir, from: &str, target: &str) -> String {
    let db = libsql::Builder::new_local(dir.path().join("engram.db"))
        .build()
        .await
        .unwrap();
    let conn = db.connect().unwrap();
    let mut rows = conn
        .query(
            "SELECT coalesce(f.path || ':' || s.qualified_name, 'unresolved')
             FROM code_refs r LEFT JOIN code_symbols s ON s.id = r.resolved_symbol_id
             LEFT JOIN code_files f ON f.id = s.file_id
             WHERE r.kind = 'calls' AND r.from_symbol = ?1 AND r.target = ?2",
            libsql::params![from, target],
        )
        .await
        .unwrap();
    match rows.next().await.unwrap() {
        Some(row) => row.get::<String>(0).unwrap(),
        None => "no such call".to_owned(),
    }
}

/// Polls `check` until it holds or 10 s pass; returns whether it held.
async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread")]
async fn index_paths_follows_edits_deletes_directory_renames_and_re_resolves_changed_names() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write(&repo, "lib/util.py", "def helper():\n    return 1\n");
    write(&repo, "app/main.py", "def run():\n    return helper()\n");
    write(&repo, "pkg/a/mod.py", "def alpha():\n    pass\n");
    let e = open(&dir).await;
    index(&e).await;
    let opts = IndexOptions::default();
    assert_eq!(
        call_target(&dir, "run", "helper").await,
        "lib/util.py:helper"
    );

    // An edit replaces the file's chunks.
    write(
        &repo,
        "lib/util.py",
        "def helper():\n    return 2\n\ndef other():\n    pass\n",
    );
    let summary = e.index_paths(&["lib/util.py".into()], &opts).await.unwrap();
    assert_eq!(summary.indexed_paths, ["lib/util.py"]);
    assert_eq!(names(&e, "lib/util.py").await, ["block"]);
    assert!(e.chunks_of("lib/util.py").await.unwrap()[0]
        .content
        .contains("def other"));

    // A second definition of `helper` makes the call ambiguous; removing it resolves it again.
    write(&repo, "lib/dup.py", "def helper():\n    return 3\n");
    e.index_paths(&[repo.join("lib/dup.py").to_str().unwrap().into()], &opts)
        .await
        .unwrap();
    assert_eq!(call_target(&dir, "run", "helper").await, "unresolved");
    std::fs::remove_file(repo.join("lib/dup.py")).unwrap();
    let summary = e.index_paths(&["lib/dup.py".into()], &opts).await.unwrap();
    assert_eq!(summary.removed_paths, ["lib/dup.py"]);
    assert_eq!(
        call_target(&dir, "run", "helper").await,
        "lib/util.py:helper"
    );

    // A directory rename: the old paths go, the new ones come, from the two event paths.
    std::fs::rename(repo.join("pkg/a"), repo.join("pkg/b")).unwrap();
    let summary = e
        .index_paths(&["pkg/a".into(), "pkg/b".into()], &opts)
        .await
        .unwrap();
    assert_eq!(summary.removed_paths, ["pkg/a/mod.py"]);
    assert_eq!(summary.indexed_paths, ["pkg/b/mod.py"]);
    assert!(names(&e, "pkg/a/mod.py").await.is_empty());
    assert_eq!(names(&e, "pkg/b/mod.py").await, ["alpha"]);

    // Unchanged files are not rewritten; paths outside the root are refused.
    let summary = e.index_paths(&["app/main.py".into()], &opts).await.unwrap();
    assert_eq!((summary.files_indexed, summary.files_unchanged), (0, 1));
    let err = e
        .index_paths(&["../outside.py".into()], &opts)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}

#[tokio::test(flavor = "multi_thread")]
async fn ignored_paths_are_never_indexed_by_path_and_leave_when_they_become_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write(&repo, ".gitignore", "gen/\n");
    write(&repo, "src/a.ts", "export const a = 1;\n");
    write(&repo, "gen/out.ts", "export const g = 1;\n");
    write(&repo, "node_modules/x/index.js", "module.exports = 1;\n");
    write(&repo, ".hidden/h.ts", "export const h = 1;\n");
    let e = open(&dir).await;
    index(&e).await;
    let opts = IndexOptions::default();
    let summary = e
        .index_paths(
            &[
                "gen/out.ts".into(),
                "node_modules/x/index.js".into(),
                ".hidden/h.ts".into(),
                "gen".into(),
            ],
            &opts,
        )
        .await
        .unwrap();
    assert_eq!(summary.files_indexed, 0, "{summary:?}");
    assert!(names(&e, "gen/out.ts").await.is_empty());

    // `src/` becomes ignored: re-checking it removes its files.
    write(&repo, ".gitignore", "gen/\nsrc/\n");
    let summary = e.index_paths(&["src".into()], &opts).await.unwrap();
    assert_eq!(summary.removed_paths, ["src/a.ts"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_watcher_follows_edits_renames_deletes_and_new_directories_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write(
        &repo,
        "src/tokens.ts",
        "export function sign() { return 1; }\n",
    );
    write(
        &repo,
        "src/old_name.ts",
        "export function legacy() { return 2; }\n",
    );
    write(
        &repo,
        "src/gone.ts",
        "export function doomed() { return 3; }\n",
    );
    write(&repo, "node_modules/dep/index.js", "exports.x = 1;\n");
    let e = open(&dir).await;
    index(&e).await;

    let events: Arc<Mutex<Vec<WatchEvent>>> = Arc::default();
    let sink = events.clone();
    let watcher = e
        .watch(
            WatchOptions {
                debounce: Duration::from_millis(100),
                ..WatchOptions::default()
            },
            Arc::new(move |event: &WatchEvent| sink.lock().unwrap().push(event.clone())),
        )
        .unwrap();

    write(
        &repo,
        "src/tokens.ts",
        "export function verify() { return 4; }\n",
    );
    std::fs::rename(repo.join("src/old_name.ts"), repo.join("src/new_name.ts")).unwrap();
    std::fs::remove_file(repo.join("src/gone.ts")).unwrap();
    write(&repo, "src/feature/deep/x.py", "def fresh():\n    pass\n");
    write(&repo, "node_modules/dep/index.js", "exports.x = 2;\n");

    let followed = eventually(|| async {
        names(&e, "src/tokens.ts").await == ["verify"]
            && names(&e, "src/old_name.ts").await.is_empty()
            && names(&e, "src/new_name.ts").await == ["legacy"]
            && names(&e, "src/gone.ts").await.is_empty()
            && names(&e, "src/feature/deep/x.py").await == ["fresh"]
    })
    .await;
    assert!(followed, "events so far: {:?}", events.lock().unwrap());
    // A file written into the new directory after it was first seen is followed too.
    write(&repo, "src/feature/deep/y.py", "def later():\n    pass\n");
    assert!(eventually(|| async { names(&e, "src/feature/deep/y.py").await == ["later"] }).await);

    {
        let events = events.lock().unwrap();
        let updated: Vec<&String> = events
            .iter()
            .map(|e| match e {
                WatchEvent::Updated(s) => s,
                WatchEvent::Failed { code, message } => panic!("{code}: {message}"),
            })
            .flat_map(|s| s.indexed_paths.iter().chain(&s.removed_paths))
            .collect();
        assert!(updated.iter().any(|p| *p == "src/gone.ts"), "{updated:?}");
        assert!(
            updated.iter().all(|p| !p.starts_with("node_modules/")),
            "ignored trees are not watched: {updated:?}"
        );
    }

    watcher.stop();
    let after_stop = events.lock().unwrap().len();
    write(
        &repo,
        "src/tokens.ts",
        "export function afterStop() { return 5; }\n",
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        names(&e, "src/tokens.ts").await,
        ["verify"],
        "no updates once stopped"
    );
    assert_eq!(
        events.lock().unwrap().len(),
        after_stop,
        "no events once stopped"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_named_go_mod_does_not_block_index_paths() {
    // Opening a FIFO for reading waits for a writer, which may never come: the search for a Go
    // file's go.mod must pass over it, not hang the re-index.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(root.join("cmd")).unwrap();
    std::fs::write(root.join("cmd/main.go"), "package main\n\nfunc main() {}\n").unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("go.mod"))
        .status()
        .unwrap();
    assert!(made.success());
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(root);
    let e = Engram::open(options).await.unwrap();
    // A regression blocks a thread in open(): after 10 s, a writer comes and goes (a
    // non-blocking open, which fails harmlessly when no reader waits), so the test then fails
    // on the time taken instead of hanging.
    let fifo = dir.path().join("repo/go.mod");
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(10));
        let mut writer = std::fs::OpenOptions::new();
        writer.write(true);
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut writer, libc_o_nonblock());
        drop(writer.open(&fifo));
    });
    let started = Instant::now();
    let (paths, index_options) = (["cmd/main.go".to_owned()], IndexOptions::default());
    let summary = e.index_paths(&paths, &index_options).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "index_paths blocked on the FIFO for {:?}",
        started.elapsed()
    );
    assert_eq!(summary.files_indexed, 1);
}

/// `O_NONBLOCK` (Linux, then macOS and the BSDs).
#[cfg(unix)]
fn libc_o_nonblock() -> i32 {
    if cfg!(target_os = "linux") {
        0o4000
    } else {
        0x0004
    }
}
