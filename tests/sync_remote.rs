//! Remote-only engines (`sync.url` without a path): the same API served straight from a libSQL
//! server, sharing its database with syncing devices. Coded failures always; the rest against
//! a real `sqld` (`ENGRAM_SQLD_BIN` or `ENGRAM_TEST_SYNC_URL`, see tests/sync.rs).

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::sqld::{closed_port, project, Server};
use engram::code::IndexOptions;
use engram::graph::ImpactOptions;
use engram::memory::{ListFilter, MemoryPatch, MemoryType, RememberInput, SearchOptions};
use engram::retrieval::recall::ItemContent;
use engram::retrieval::request::RecallRequest;
use engram::sync::{SyncMode, SyncOptions, SyncState};
use engram::{EngineOptions, Engram, OpenOptions};

fn gotcha(content: &str) -> RememberInput {
    RememberInput::new(MemoryType::Gotcha, content)
}

fn sync_options(url: &str) -> SyncOptions {
    let mut o = SyncOptions::new(url);
    o.interval = Duration::from_secs(3600);
    o
}

/// A remote-only handle: no path, only the server.
async fn remote(url: &str, project: &str) -> engram::Result<Engram> {
    remote_with(sync_options(url), project, None).await
}

async fn remote_with(
    sync: SyncOptions,
    project: &str,
    root: Option<&std::path::Path>,
) -> engram::Result<Engram> {
    let mut options = OpenOptions::new("");
    options.project_id = Some(project.into());
    options.project_root = root.map(|r| r.to_path_buf());
    options.engine = EngineOptions {
        sync: Some(sync),
        ..Default::default()
    };
    Engram::open(options).await
}

async fn device(dir: &tempfile::TempDir, name: &str, project: &str, url: &str) -> Engram {
    let mut options = OpenOptions::new(dir.path().join(format!("{name}.db")));
    options.project_id = Some(project.into());
    options.engine = EngineOptions {
        sync: Some(sync_options(url)),
        ..Default::default()
    };
    Engram::open(options).await.unwrap()
}

async fn contents(e: &Engram) -> Vec<String> {
    let filter = ListFilter {
        limit: Some(1000),
        ..Default::default()
    };
    let mut out: Vec<String> = e
        .list(&filter)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn remote_only_failures_are_coded() {
    let unreachable = format!("http://127.0.0.1:{}", closed_port());
    let err = remote(&unreachable, "p").await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SYNC_UNREACHABLE", "{err}");

    let mut offline = sync_options(&unreachable);
    offline.mode = SyncMode::OfflineWrites;
    let err = remote_with(offline, "p", None).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SYNC_CONFIG", "{err}");

    let err = remote("ftp://example.com/db", "p").await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SYNC_CONFIG", "{err}");

    // No path and no server is not an engine.
    let err = Engram::open(OpenOptions::new("")).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG", "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_only_engine_shares_one_database_with_devices() {
    let Some(server) = Server::start("a_remote_only_engine_shares_one_database_with_devices")
    else {
        return;
    };
    let project = project("remote");
    let r = remote(&server.url, &project).await.unwrap();
    let status = r.sync_status().await.unwrap();
    assert_eq!(status.state, SyncState::Remote);
    assert_eq!(status.url.as_deref(), Some(server.url.as_str()));
    assert_eq!(r.sync().await.unwrap_err().code(), "ENGRAM_SYNC_CONFIG");
    // A second open of the same server in this process joins the same engine.
    let again = remote(&server.url, &project).await.unwrap();
    assert!(Arc::ptr_eq(r.engine(), again.engine()));
    drop(again);

    let mut ids = Vec::new();
    for i in 0..5 {
        let m = r
            .remember(gotcha(&format!("the server route learned lesson {i}")))
            .await
            .unwrap();
        assert!(m.created);
        ids.push(m.memory.id);
    }
    // Dedup and versioning run on the server as on a file.
    let dup = r
        .remember(gotcha("the server route learned lesson 3"))
        .await
        .unwrap();
    assert!(!dup.created);
    assert_eq!(dup.memory.id, ids[3]);
    let patch = MemoryPatch {
        content: Some("the server route learned lesson 0, revised".into()),
        ..Default::default()
    };
    assert_eq!(r.update(&ids[0], patch).await.unwrap().version, 2);
    assert_eq!(r.history(&ids[0]).await.unwrap().len(), 2);
    let hits = r
        .search("lesson revised", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits.first().map(|h| h.memory.id.as_str()), Some(&*ids[0]));

    // A device on a file sees what the remote engine wrote, and the other way round.
    let dir = tempfile::tempdir().unwrap();
    let d = device(&dir, "laptop", &project, &server.url).await;
    d.sync().await.unwrap();
    assert_eq!(contents(&d).await, contents(&r).await);
    assert_eq!(d.get(&ids[0]).await.unwrap().version, 2);
    let from_device = d
        .remember(gotcha("the laptop found a flaky test in the billing suite"))
        .await
        .unwrap();
    d.sync().await.unwrap();
    // The remote engine reads the server: no sync needed on its side.
    let seen = r.get(&from_device.memory.id).await.unwrap();
    assert_eq!(seen.content, from_device.memory.content);
    let hits = r
        .search("flaky billing", &SearchOptions::default())
        .await
        .unwrap();
    assert!(hits.iter().any(|h| h.memory.id == from_device.memory.id));

    r.forget(&ids[1], Some("obsolete".into())).await.unwrap();
    d.sync().await.unwrap();
    assert!(d.get(&ids[1]).await.unwrap().deprecated);
    assert_eq!(contents(&d).await, contents(&r).await);
    assert_eq!(contents(&r).await.len(), 5);
}

const FILES: &[(&str, &str)] = &[
    (
        "src/auth/password.ts",
        "export function checkPassword(stored: string, given: string): boolean {\n  \
         return stored === given\n}\n",
    ),
    (
        "src/auth/login.ts",
        "import { checkPassword } from './password'\n\nexport function login(user: string, \
         password: string): boolean {\n  return checkPassword(user, password)\n}\n",
    ),
];

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_only_engine_indexes_recalls_and_answers_impact() {
    let Some(server) = Server::start("a_remote_only_engine_indexes_recalls_and_answers_impact")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in FILES {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let project = project("remote-code");
    let r = remote_with(sync_options(&server.url), &project, Some(dir.path()))
        .await
        .unwrap();
    let summary = r
        .index(
            &IndexOptions::default(),
            &|_| {},
            &Arc::new(AtomicBool::new(false)),
        )
        .await
        .unwrap();
    assert_eq!(summary.files_indexed, 2, "{summary:?}");
    r.remember({
        let mut m = gotcha("checkPassword must stay constant-time");
        m.related_files = vec!["src/auth/password.ts".into()];
        m
    })
    .await
    .unwrap();

    let recall = r.recall(RecallRequest::new("checkPassword")).await.unwrap();
    let symbols: Vec<&str> = recall
        .items
        .iter()
        .filter_map(|i| match &i.content {
            ItemContent::Chunk(c) => c.symbols.first().map(String::as_str),
            ItemContent::Memory(_) => None,
        })
        .collect();
    assert!(symbols.contains(&"checkPassword"), "{symbols:?}");
    assert!(recall.items.iter().any(
        |i| matches!(&i.content, ItemContent::Memory(m) if m.content.contains("constant-time"))
    ));

    // The closure table works on the server: login depends on password.
    let impact = r
        .impact("src/auth/password.ts", &ImpactOptions::default())
        .await
        .unwrap();
    let affected: Vec<&str> = impact
        .affected
        .iter()
        .map(|n| n.node.key.as_str())
        .collect();
    assert!(affected.iter().any(|k| k.contains("login")), "{affected:?}");
}

/// Remote-only engines apply no pragmas (`Store::open_remote`): they rely on the server
/// enforcing foreign keys, so that `memory_links` rows go with their memory (`list` by file
/// and `impact` read them). Checked on a stream of the server's own.
#[tokio::test(flavor = "multi_thread")]
async fn the_server_enforces_the_foreign_keys_remote_only_engines_rely_on() {
    let Some(server) = Server::start("the_server_enforces_the_foreign_keys") else {
        return;
    };
    let db = libsql::Builder::new_remote(server.url.clone(), String::new())
        .build()
        .await
        .unwrap();
    let conn = db.connect().unwrap();
    let mut rows = conn.query("PRAGMA foreign_keys", ()).await.unwrap();
    let on: i64 = rows.next().await.unwrap().unwrap().get(0).unwrap();
    assert_eq!(on, 1, "the server runs with foreign keys off");
    drop(rows);
    // And a cascade happens (on tables of this test's own: TEMP tables are refused over the
    // remote protocol).
    let suffix = project("fk").replace('-', "_");
    let (parent, child) = (format!("fk_parent_{suffix}"), format!("fk_child_{suffix}"));
    for sql in [
        format!("CREATE TABLE {parent}(id INTEGER PRIMARY KEY)"),
        format!(
            "CREATE TABLE {child}(parent_id INTEGER REFERENCES {parent}(id) ON DELETE CASCADE)"
        ),
        format!("INSERT INTO {parent} VALUES (1)"),
        format!("INSERT INTO {child} VALUES (1)"),
        format!("DELETE FROM {parent} WHERE id = 1"),
    ] {
        conn.execute(&sql, ()).await.unwrap();
    }
    let mut rows = conn
        .query(&format!("SELECT count(*) FROM {child}"), ())
        .await
        .unwrap();
    let left: i64 = rows.next().await.unwrap().unwrap().get(0).unwrap();
    drop(rows);
    for table in [&child, &parent] {
        conn.execute(&format!("DROP TABLE {table}"), ())
            .await
            .unwrap();
    }
    assert_eq!(left, 0, "the child row outlived its parent");
}
