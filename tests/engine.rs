//! Engine-level behaviour: one engine per file, migrations, corrupt and newer-schema files,
//! busy handling, concurrent writers.

use std::sync::Arc;
use std::time::Duration;

use engram::memory::{ListFilter, MemoryType, RememberInput};
use engram::store::Home;
use engram::{EngineOptions, Engram, OpenOptions};

#[tokio::test(flavor = "multi_thread")]
async fn one_engine_per_canonical_path() {
    let dir = tempfile::tempdir().unwrap();
    let a = Engram::open(OpenOptions::new(dir.path().join("m.db")))
        .await
        .unwrap();
    // A different spelling of the same path joins the same engine.
    let b = Engram::open(OpenOptions::new(dir.path().join("sub/../m.db")))
        .await
        .unwrap_or_else(|_| panic!("second open"));
    assert!(Arc::ptr_eq(a.engine(), b.engine()));
    let c = Engram::open(OpenOptions::new(dir.path().join("other.db")))
        .await
        .unwrap();
    assert!(!Arc::ptr_eq(a.engine(), c.engine()));
}

#[tokio::test(flavor = "multi_thread")]
async fn migrations_apply_once_and_reopen_is_current() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    {
        let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
        let s = &e.engine().schema()[0];
        assert_eq!(
            (s.version, s.applied),
            (Home::Main.latest(), Home::Main.latest())
        );
        e.remember(RememberInput::new(MemoryType::Decision, "keep me"))
            .await
            .unwrap();
        // Released once its queued contradiction scan is done (a dropped handle would leave
        // the engine to that scan for a few milliseconds, and the open below would join it).
        e.close().await;
    }
    let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
    let s = &e.engine().schema()[0];
    assert_eq!(s.applied, 0);
    assert_eq!(e.list(&ListFilter::default()).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v1_file_is_upgraded_in_place_keeping_its_memories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        // A file as the first release wrote it: schema v1 and one memory.
        let db = libsql::Builder::new_local(&path).build().await.unwrap();
        let conn = db.connect().unwrap();
        conn.execute_batch(include_str!("../src/store/sql/main/001_memories.sql"))
            .await
            .unwrap();
        conn.execute_batch(
            "CREATE TABLE engram_schema (home TEXT PRIMARY KEY, version INTEGER NOT NULL, updated_at INTEGER NOT NULL);
             INSERT INTO engram_schema VALUES ('main', 1, 0);
             INSERT INTO memories (id, project_id, type, content, content_hash, created_at, updated_at, last_accessed_at)
             VALUES ('m-1', 'default', 'decision', 'use pnpm workspaces', 'h', 1, 1, 1);",
        )
        .await
        .unwrap();
    }
    let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
    let s = &e.engine().schema()[0];
    assert_eq!(
        (s.version, s.applied),
        (Home::Main.latest(), Home::Main.latest() - 1)
    );
    let kept = e.list(&ListFilter::default()).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].content, "use pnpm workspaces");
    let hits = e.search("pnpm", &Default::default()).await.unwrap();
    assert_eq!(hits.len(), 1, "the FTS index survives the upgrade");
    drop(e);
    let db = libsql::Builder::new_local(&path).build().await.unwrap();
    let conn = db.connect().unwrap();
    let mut rows = conn
        .query(
            "SELECT name FROM pragma_index_info('idx_memories_project_created')",
            (),
        )
        .await
        .unwrap();
    let mut columns = Vec::new();
    while let Some(row) = rows.next().await.unwrap() {
        columns.push(row.get::<String>(0).unwrap());
    }
    assert_eq!(columns, ["project_id", "deprecated", "created_at", "seq"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    {
        let db = libsql::Builder::new_local(&path).build().await.unwrap();
        let conn = db.connect().unwrap();
        conn.execute_batch(
            "CREATE TABLE engram_schema (home TEXT PRIMARY KEY, version INTEGER NOT NULL, updated_at INTEGER NOT NULL);
             INSERT INTO engram_schema VALUES ('main', 999, 0);",
        )
        .await
        .unwrap();
    }
    let err = Engram::open(OpenOptions::new(&path)).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SCHEMA_TOO_NEW", "{err}");
    assert!(err.to_string().contains("999"));
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_file_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    std::fs::write(&path, vec![0x42u8; 8192]).unwrap();
    let err = Engram::open(OpenOptions::new(&path)).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_CORRUPT", "{err}");
    // Nothing was lost: the file is as it was.
    assert_eq!(std::fs::read(&path).unwrap(), vec![0x42u8; 8192]);
}

#[tokio::test(flavor = "multi_thread")]
async fn directory_path_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let err = Engram::open(OpenOptions::new(dir.path()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}

#[tokio::test(flavor = "multi_thread")]
async fn lock_held_by_another_process_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let mut opts = OpenOptions::new(&path);
    opts.engine = EngineOptions::default().busy_timeout(Duration::from_millis(50));
    let e = Engram::open(opts).await.unwrap();
    // A second SQLite connection outside the engine stands in for another process.
    let db = libsql::Builder::new_local(&path).build().await.unwrap();
    let other = db.connect().unwrap();
    other.execute("BEGIN IMMEDIATE", ()).await.unwrap();
    let err = e
        .remember(RememberInput::new(MemoryType::Gotcha, "blocked"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SQLITE_BUSY", "{err}");
    other.execute("ROLLBACK", ()).await.unwrap();
    e.remember(RememberInput::new(MemoryType::Gotcha, "now free"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let mut tasks = Vec::new();
    for t in 0..8 {
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
            let mut ids = Vec::new();
            for i in 0..100 {
                let r = e
                    .remember(RememberInput::new(
                        MemoryType::Pattern,
                        format!("task {t} item {i}"),
                    ))
                    .await
                    .unwrap();
                ids.push(r.memory.id);
                if i % 10 == 0 {
                    e.list(&ListFilter::default()).await.unwrap();
                }
            }
            ids
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
    assert_eq!(e.stats().await.unwrap().active, 800);
    for id in all.iter().step_by(37) {
        e.get(id).await.unwrap();
    }
}

/// The database file's size once it has stopped changing for 300 ms (at most 10 s).
async fn settled_size(path: &std::path::Path) -> u64 {
    let mut last = std::fs::metadata(path).unwrap().len();
    for _ in 0..33 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = std::fs::metadata(path).unwrap().len();
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

#[tokio::test(flavor = "multi_thread")]
async fn the_wal_is_checkpointed_beside_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
    let before = settled_size(&path).await;
    // ~14 WAL pages per remember: 150 stay under the writer's own automatic checkpoint
    // (4,000 pages), so only the checkpoint thread can have copied them into the file.
    let mut ids = Vec::new();
    for i in 0..150 {
        let content = format!(
            "Checkpointed note {i}: {}",
            "the cache key includes the locale ".repeat(8)
        );
        ids.push(
            e.remember(RememberInput::new(MemoryType::Pattern, content))
                .await
                .unwrap()
                .memory
                .id,
        );
    }
    let after = settled_size(&path).await;
    assert!(
        after >= before + 64 * 1024,
        "the file grew from {before} to {after} bytes"
    );
    e.close().await;
    let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
    assert_eq!(e.stats().await.unwrap().active, 150);
    e.get(&ids[149]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_that_never_pause_still_let_the_wal_start_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
    // ~14 WAL pages per remember, no pause: ~17,000 pages (~70 MB of WAL) unless the
    // checkpoint thread takes the writer to checkpoint the WAL's end, so that it starts over.
    let mut largest_wal = 0;
    for i in 0..1200 {
        let content = format!("Steady write {i}: the session cache is keyed by tenant");
        e.remember(RememberInput::new(MemoryType::Pattern, content))
            .await
            .unwrap();
        let wal = std::fs::metadata(dir.path().join("m.db-wal")).map_or(0, |m| m.len());
        largest_wal = largest_wal.max(wal);
    }
    assert!(
        largest_wal < 40 * 1024 * 1024,
        "the WAL grew to {largest_wal} bytes"
    );
    assert_eq!(e.stats().await.unwrap().active, 1200);
}

/// Runs a Python program with `sqlite3` (another application's SQLite) against `path`; its
/// stdout.
fn python_sqlite(path: &std::path::Path, program: &str) -> String {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\n{program}"
        ))
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The file as another application sees it: journal mode and tables, read by Python's sqlite3.
fn seen_by_python(path: &std::path::Path) -> String {
    python_sqlite(
        path,
        "print(db.execute('PRAGMA journal_mode').fetchone()[0])\n\
         print([r[0] for r in db.execute(\"SELECT name FROM sqlite_master WHERE type='table' ORDER BY name\")])",
    )
}

/// Opens another application's database with engram: refused with ENGRAM_INVALID_ARG naming its
/// tables, and the file is exactly as it was (bytes, rollback journal, tables; no WAL file).
async fn assert_foreign_refused(setup: &str, tables: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    python_sqlite(&path, &format!("{setup}\ndb.commit()\ndb.close()"));
    let bytes = std::fs::read(&path).unwrap();
    let before = seen_by_python(&path);
    assert!(before.starts_with("delete\n"), "{before}");

    let err = Engram::open(OpenOptions::new(&path)).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG", "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&format!(
            "is not an engram database (it has tables: {tables}): engram refuses to modify it; \
             pass a new path"
        )),
        "{message}"
    );
    assert!(message.contains("app.db"), "{message}");

    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the file's bytes changed"
    );
    assert_eq!(seen_by_python(&path), before);
    assert!(
        !dir.path().join("app.db-wal").exists(),
        "a WAL file was left"
    );
    // Refused again, the same way (nothing half-done by the first attempt).
    let again = Engram::open(OpenOptions::new(&path)).await.unwrap_err();
    assert_eq!(again.code(), "ENGRAM_INVALID_ARG", "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_applications_database_is_refused_untouched() {
    assert_foreign_refused(
        "db.execute('CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)')\n\
         db.executemany('INSERT INTO customers(name) VALUES (?)', [('ada',), ('grace',)])",
        "customers",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_applications_memories_table_is_refused_untouched() {
    // Same table name as engram's own: still not engram's file.
    assert_foreign_refused(
        "db.execute('CREATE TABLE memories (id TEXT PRIMARY KEY, body TEXT)')\n\
         db.execute(\"INSERT INTO memories VALUES ('1', 'theirs')\")\n\
         db.execute('CREATE TABLE notes (id INTEGER PRIMARY KEY)')",
        "memories, notes",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_sqlite_file_is_engrams_to_fill() {
    let dir = tempfile::tempdir().unwrap();
    // A database with no tables (another tool made it, or it is a 0-byte file).
    let made = dir.path().join("made.db");
    python_sqlite(&made, "db.execute('PRAGMA user_version = 7')\ndb.commit()");
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    for path in [made, empty] {
        let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
        e.remember(RememberInput::new(MemoryType::Decision, "mine now"))
            .await
            .unwrap();
        e.close().await;
        // An engram file reopens (its tables are engram's).
        Engram::open(OpenOptions::new(&path))
            .await
            .unwrap()
            .close()
            .await;
    }
}
