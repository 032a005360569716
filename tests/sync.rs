//! Sync with a libSQL server: offline behaviour (always, against a closed port), bad
//! configurations, and convergence against a real `sqld` when one is available:
//! `ENGRAM_SQLD_BIN` (a `sqld` binary the tests start and restart themselves, one server per
//! test) or `ENGRAM_TEST_SYNC_URL` (a running server; tests use their own project ids on it,
//! and the restart test is skipped). Without either, the server tests print why and pass.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::sqld::{closed_port, project, Server};

use engram::memory::{
    ListFilter, MemoryPatch, MemoryType, RememberInput, SearchOptions, ShareScope,
};
use engram::sync::{SyncMode, SyncOptions, SyncState};
use engram::{EngineOptions, Engram, OpenOptions};

fn gotcha(content: &str) -> RememberInput {
    RememberInput::new(MemoryType::Gotcha, content)
}

fn sync_options(url: &str) -> SyncOptions {
    let mut o = SyncOptions::new(url);
    o.interval = Duration::from_secs(3600); // the tests run syncs themselves
    o
}

async fn open_synced(path: &Path, project: &str, sync: SyncOptions) -> engram::Result<Engram> {
    let mut options = OpenOptions::new(path);
    options.project_id = Some(project.into());
    options.engine = EngineOptions {
        sync: Some(sync),
        ..Default::default()
    };
    Engram::open(options).await
}

/// Waits until no engine of this process has `path` open (an engine outlives its last
/// handle by at most a moment while its sync loop lets go).
async fn wait_closed(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let canonical = engram::engine::canonical_db_path(path).unwrap();
    while engram::engine::is_open(&canonical) {
        assert!(Instant::now() < deadline, "engine still open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The contents of every active memory of the handle's project, sorted.
async fn all_contents(e: &Engram) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let filter = ListFilter {
            limit: Some(1000),
            offset: Some(out.len() as u32),
            ..Default::default()
        };
        let page = e.list(&filter).await.unwrap();
        if page.is_empty() {
            break;
        }
        out.extend(page.into_iter().map(|m| m.content));
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_server_never_fails_local_work_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let url = format!("http://127.0.0.1:{}", closed_port());
    let e = open_synced(&path, "offline", sync_options(&url))
        .await
        .unwrap();

    let mut ids = Vec::new();
    for i in 0..1000 {
        let m = e
            .remember(gotcha(&format!(
                "offline note {i} about the flaky retry path"
            )))
            .await
            .unwrap();
        ids.push(m.memory.id);
        if i % 10 == 0 {
            assert_eq!(e.get(&ids[i / 2]).await.unwrap().id, ids[i / 2]);
            let hits = e
                .search(&format!("note {i}"), &SearchOptions::default())
                .await
                .unwrap();
            assert!(!hits.is_empty(), "search {i}");
        }
    }
    let err = e.sync().await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SYNC_UNREACHABLE", "{err}");
    // Named by the connection probe, not after libSQL's three handshake retries (3 s).
    assert!(
        err.to_string().contains("connecting to 127.0.0.1:"),
        "{err}"
    );
    let status = e.sync_status().await.unwrap();
    // The loop may already be trying again.
    assert!(
        matches!(status.state, SyncState::Offline | SyncState::Syncing),
        "{:?}",
        status.state
    );
    assert_eq!(status.pending, 1000);
    // The loop's own run at open may have failed too.
    assert!(status.consecutive_failures >= 1);
    let failure = status.last_error.expect("failure recorded");
    assert_eq!(failure.code, "ENGRAM_SYNC_UNREACHABLE");
    assert!(status.next_attempt_at.is_some());

    // Durable: a restart finds every memory and every change still waiting.
    drop(e);
    wait_closed(&path).await;
    let e = open_synced(&path, "offline", sync_options(&url))
        .await
        .unwrap();
    assert_eq!(all_contents(&e).await.len(), 1000);
    assert_eq!(e.sync_status().await.unwrap().pending, 1000);
}

/// The nice value in a `/proc/.../stat` line: field 19, counted from the state (field 3),
/// which follows the parenthesised name.
#[cfg(target_os = "linux")]
fn nice_in_stat(stat: &str) -> i64 {
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(16).unwrap().parse().unwrap()
}

/// The nice value of each thread of this process named `name` (Linux: /proc).
#[cfg(target_os = "linux")]
fn nice_of_threads_named(name: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            out.push(nice_in_stat(&stat));
        }
    }
    out
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn sync_runs_go_on_threads_of_lower_priority_than_the_apps() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", closed_port());
    let e = open_synced(&dir.path().join("memory.db"), "nice", sync_options(&url))
        .await
        .unwrap();
    e.remember(gotcha("a change for the run to carry"))
        .await
        .unwrap();
    let err = e.sync().await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SYNC_UNREACHABLE", "{err}");
    // The run's runtime stays up after a failed run (it goes with the replica). Its threads
    // are 10 nicer than the app's (whose nice this test's thread inherited), at most 19.
    let own_nice = nice_in_stat(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
    let niced = nice_of_threads_named("engram-sync");
    assert!(!niced.is_empty(), "no sync thread found");
    let expected = (own_nice + 10).min(19);
    assert!(
        niced.iter().all(|&n| n == expected),
        "{niced:?}, app {own_nice}"
    );
}

/// A server that accepts connections and never answers: a sync run hangs in it until the
/// client gives up (the listener thread lives as long as the test process).
fn black_hole_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    url
}

/// Removes `dir` at once (no retries), and checks that nothing writes it again.
async fn remove_for_good(dir: tempfile::TempDir) {
    let path = dir.keep();
    std::fs::remove_dir_all(&path).expect("nothing holds or writes the directory");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !path.exists(),
        "something wrote into {} after close",
        path.display()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn closing_the_last_handle_drops_a_hanging_run_and_releases_the_replica() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let mut options = sync_options(&black_hole_url());
    options.interval = Duration::from_millis(100);
    let a = open_synced(&path, "p", options.clone()).await.unwrap();
    let b = open_synced(&path, "p", options.clone()).await.unwrap();
    a.remember(gotcha("written while the server hangs"))
        .await
        .unwrap();
    // The loop's first run opens the replica and gets stuck in the server.
    let replica = dir.path().join("memory.db.sync").join("replica.db");
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.sync_status().await.unwrap().state != SyncState::Syncing || !replica.exists() {
        assert!(Instant::now() < deadline, "the loop never started a run");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Another handle is open: closing this one waits for nothing and breaks nothing.
    tokio::time::timeout(Duration::from_secs(1), a.close())
        .await
        .expect("resolves at once while b is open");
    let canonical = engram::engine::canonical_db_path(&path).unwrap();
    assert!(engram::engine::is_open(&canonical));
    b.remember(gotcha("b still works")).await.unwrap();
    assert_eq!(b.sync_status().await.unwrap().state, SyncState::Syncing);

    // The last one: the hanging run is dropped, the engine and its replica let go.
    let closing = b.close();
    tokio::time::timeout(Duration::from_secs(5), closing.clone())
        .await
        .expect("close does not wait for the network");
    assert!(!engram::engine::is_open(&canonical));
    closing.await; // a second wait resolves too

    // Nothing was lost: the outbox still has both writes.
    let c = open_synced(&path, "p", options).await.unwrap();
    assert_eq!(all_contents(&c).await.len(), 2);
    assert_eq!(c.sync_status().await.unwrap().pending, 2);
    c.close().await;
    remove_for_good(dir).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_reopened_while_its_engine_closes_waits_for_the_replica() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let options = sync_options(&black_hole_url());
    for round in 0..5 {
        let e = open_synced(&path, "p", options.clone()).await.unwrap();
        e.remember(gotcha(&format!("round {round}"))).await.unwrap();
        // Not awaited: the next open must wait for the replica itself.
        drop(e.close());
    }
    let e = open_synced(&path, "p", options).await.unwrap();
    assert_eq!(all_contents(&e).await.len(), 5);
    e.close().await;
    remove_for_good(dir).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn personal_and_redacted_memories_never_queue_for_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", closed_port());
    let e = open_synced(&dir.path().join("m.db"), "p", sync_options(&url))
        .await
        .unwrap();
    let mut personal = gotcha("my own shortcut: alias gs='git status'");
    personal.share_scope = Some(ShareScope::Personal);
    e.remember(personal).await.unwrap();
    e.remember(gotcha(
        "deploys need AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY set",
    ))
    .await
    .unwrap();
    assert_eq!(e.sync_status().await.unwrap().pending, 0);

    let shared = e
        .remember(gotcha("run migrations before seeding"))
        .await
        .unwrap();
    assert_eq!(e.sync_status().await.unwrap().pending, 1);
    // Made personal later: the server must learn it is gone (one more change)...
    let patch = MemoryPatch {
        share_scope: Some(ShareScope::Personal),
        ..Default::default()
    };
    e.update(&shared.memory.id, patch).await.unwrap();
    let pending = e.sync_status().await.unwrap().pending;
    assert!(pending >= 2, "{pending}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_used_before_sync_queues_its_shareable_rows_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let plain = Engram::open(OpenOptions::new(&path)).await.unwrap();
    plain
        .remember_many(
            (0..25)
                .map(|i| gotcha(&format!("older lesson {i}")))
                .collect(),
        )
        .await
        .unwrap();
    let mut mine = gotcha("a personal one");
    mine.share_scope = Some(ShareScope::Personal);
    plain.remember(mine).await.unwrap();
    drop(plain);
    wait_closed(&path).await;

    let url = format!("http://127.0.0.1:{}", closed_port());
    let e = open_synced(&path, "default", sync_options(&url))
        .await
        .unwrap();
    assert_eq!(e.sync_status().await.unwrap().pending, 25);
    drop(e);
    wait_closed(&path).await;
    // Queued once: a second open adds nothing.
    let e = open_synced(&path, "default", sync_options(&url))
        .await
        .unwrap();
    assert_eq!(e.sync_status().await.unwrap().pending, 25);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_sync_configurations_fail_with_coded_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    for bad in [
        "ftp://example.com",
        "example.com",
        "https://user:pw@example.com",
        "",
    ] {
        let err = open_synced(&path, "c", sync_options(bad))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "ENGRAM_SYNC_CONFIG", "{bad}: {err}");
    }
    let mut fast = sync_options("http://127.0.0.1:9");
    fast.interval = Duration::from_millis(10);
    assert_eq!(
        open_synced(&path, "c", fast).await.unwrap_err().code(),
        "ENGRAM_SYNC_CONFIG"
    );

    let url = format!("http://127.0.0.1:{}", closed_port());
    let e = open_synced(&path, "c", sync_options(&url)).await.unwrap();
    // Another server for a live engine, or sync for a file open without it: refused.
    let other = open_synced(&path, "c", sync_options("http://127.0.0.1:9"))
        .await
        .unwrap_err();
    assert_eq!(other.code(), "ENGRAM_SYNC_CONFIG", "{other}");
    drop(e);
    wait_closed(&path).await;
    // The file remembers its server across restarts.
    let err = open_synced(&path, "c", sync_options("http://127.0.0.1:9"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SYNC_CONFIG", "{err:?}");
    assert!(err.to_string().contains(&url), "{err}");

    // Without sync options the same file opens (changes keep queueing for the next sync).
    // The closed engine goes away shortly after its last handle (a running sync is dropped).
    let plain = loop {
        let plain = Engram::open(OpenOptions::new(&path)).await.unwrap();
        if plain.sync_status().await.unwrap().state == SyncState::Disabled {
            break plain;
        }
        drop(plain);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(plain.sync().await.unwrap_err().code(), "ENGRAM_SYNC_CONFIG");
    drop(plain);

    // A plain database where the replica goes is refused rather than overwritten.
    let other_dir = tempfile::tempdir().unwrap();
    let fresh = other_dir.path().join("fresh.db");
    let replica_dir = other_dir.path().join("fresh.db.sync");
    std::fs::create_dir_all(&replica_dir).unwrap();
    std::fs::write(replica_dir.join("replica.db"), b"").unwrap();
    let err = open_synced(&fresh, "c", sync_options(&url))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SYNC_CONFIG", "{err}");
}

// ---- against a real libSQL server -------------------------------------------------------

/// A device: its own file in `dir`, syncing `project` with `server`.
async fn device(dir: &tempfile::TempDir, name: &str, project: &str, server: &Server) -> Engram {
    open_synced(
        &dir.path().join(format!("{name}.db")),
        project,
        sync_options(&server.url),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_devices_converge_through_the_server() {
    let Some(server) = Server::start("two_devices_converge_through_the_server") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let project = project("converge");
    let a = device(&dir, "a", &project, &server).await;
    let b = device(&dir, "b", &project, &server).await;

    for i in 0..30 {
        a.remember(gotcha(&format!("device A learned fact {i}")))
            .await
            .unwrap();
        b.remember(gotcha(&format!("device B learned fact {i}")))
            .await
            .unwrap();
    }
    // The same lesson on both devices: one stays active everywhere.
    let dup_a = a
        .remember(gotcha("cache keys include the tenant id"))
        .await
        .unwrap();
    let dup_b = b
        .remember(gotcha("cache keys include the tenant id"))
        .await
        .unwrap();
    assert_ne!(dup_a.memory.id, dup_b.memory.id);

    // The loop pushes shortly after writes on its own; explicit runs make the order certain.
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();

    let in_a = all_contents(&a).await;
    let in_b = all_contents(&b).await;
    assert_eq!(in_a.len(), 61, "{in_a:?}");
    assert_eq!(in_a, in_b);
    assert_eq!(a.sync_status().await.unwrap().pending, 0);
    assert_eq!(b.sync_status().await.unwrap().pending, 0);
    let a_side = (
        a.get(&dup_a.memory.id).await.unwrap(),
        a.get(&dup_b.memory.id).await.unwrap(),
    );
    let b_side = (
        b.get(&dup_a.memory.id).await.unwrap(),
        b.get(&dup_b.memory.id).await.unwrap(),
    );
    assert_ne!(
        a_side.0.deprecated, a_side.1.deprecated,
        "exactly one stays active"
    );
    assert_eq!(a_side.0.deprecated, b_side.0.deprecated);
    assert_eq!(a_side.1.deprecated, b_side.1.deprecated);
    let archived = if a_side.0.deprecated {
        &a_side.0
    } else {
        &a_side.1
    };
    assert!(archived
        .deprecated_reason
        .as_deref()
        .unwrap()
        .contains("(sync)"));
    // Pulled memories are searchable (indexed on arrival).
    let hits = b
        .search("device A fact 7", &SearchOptions::default())
        .await
        .unwrap();
    assert!(hits
        .iter()
        .any(|h| h.memory.content == "device A learned fact 7"));

    // An edit on A and a forget on B reach the other side, with their history.
    let target = a
        .search("device B fact 3", &SearchOptions::default())
        .await
        .unwrap()
        .into_iter()
        .find(|h| h.memory.content == "device B learned fact 3")
        .unwrap()
        .memory;
    let patch = MemoryPatch {
        content: Some("device B learned fact 3, corrected on A".into()),
        ..Default::default()
    };
    a.update(&target.id, patch).await.unwrap();
    let forgotten = b
        .search("device A fact 5", &SearchOptions::default())
        .await
        .unwrap()
        .into_iter()
        .find(|h| h.memory.content == "device A learned fact 5")
        .unwrap()
        .memory;
    b.forget(&forgotten.id, Some("obsolete".into()))
        .await
        .unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    a.sync().await.unwrap();
    let on_b = b.get(&target.id).await.unwrap();
    assert_eq!(on_b.content, "device B learned fact 3, corrected on A");
    assert_eq!(on_b.version, 2);
    let history = b.history(&target.id).await.unwrap();
    // The past version travelled with the memory (history lists the current one last).
    assert_eq!(history.len(), 2, "{history:#?}");
    assert_eq!(history[0].ended_by, "update");
    assert_eq!(history[0].memory.content, "device B learned fact 3");
    assert!(a.get(&forgotten.id).await.unwrap().deprecated);
    assert_eq!(all_contents(&a).await, all_contents(&b).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_restart_mid_sync_loses_nothing() {
    let Some(mut server) = Server::start("a_server_restart_mid_sync_loses_nothing") else {
        return;
    };
    if !server.owned() {
        eprintln!("skipping the restart test: it needs ENGRAM_SQLD_BIN to restart the server");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let project = project("restart");
    let a = device(&dir, "a", &project, &server).await;
    let writes: Vec<RememberInput> = (0..600)
        .map(|i| gotcha(&format!("restart-proof note number {i}")))
        .collect();
    a.remember_many(writes).await.unwrap();

    // Kill the server while a sync is pushing (600 changes take two batches).
    let push = {
        let a = a.clone();
        tokio::spawn(async move { a.sync().await })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    server.stop();
    let _ = push.await.unwrap(); // either finished before the kill or failed: both are fine
    for i in 600..700 {
        a.remember(gotcha(&format!("restart-proof note number {i}")))
            .await
            .unwrap();
    }
    let err = a.sync().await.unwrap_err();
    assert!(
        matches!(err.code(), "ENGRAM_SYNC_UNREACHABLE" | "ENGRAM_SYNC"),
        "{err}"
    );
    assert!(a.sync_status().await.unwrap().pending >= 100);

    server.spawn();
    let mut report = a.sync().await.unwrap();
    while report.pending > 0 {
        report = a.sync().await.unwrap();
    }
    let b = device(&dir, "b", &project, &server).await;
    b.sync().await.unwrap();
    let on_b = all_contents(&b).await;
    assert_eq!(on_b.len(), 700);
    assert_eq!(on_b, all_contents(&a).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn closing_while_the_loop_pushes_releases_the_replica_and_loses_nothing() {
    let Some(server) =
        Server::start("closing_while_the_loop_pushes_releases_the_replica_and_loses_nothing")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let project = project("close-mid-push");
    let mut options = sync_options(&server.url);
    options.interval = Duration::from_millis(100);
    let a = open_synced(&path, &project, options.clone()).await.unwrap();
    a.sync().await.unwrap();
    let writes: Vec<RememberInput> = (0..600)
        .map(|i| gotcha(&format!("pushed or kept, never lost: note {i}")))
        .collect();
    a.remember_many(writes).await.unwrap();
    // The loop starts pushing shortly after the write; close while it does.
    tokio::time::sleep(Duration::from_millis(70)).await;
    tokio::time::timeout(Duration::from_secs(10), a.close())
        .await
        .expect("close resolves");
    let canonical = engram::engine::canonical_db_path(&path).unwrap();
    assert!(!engram::engine::is_open(&canonical));
    let sync_dir = dir.path().join("a.db.sync");
    std::fs::remove_dir_all(&sync_dir).expect("the replica is released");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!sync_dir.exists(), "the replica came back after close");

    // What was not pushed waited in the outbox: a fresh replica pushes the rest.
    let a = open_synced(&path, &project, options).await.unwrap();
    let mut report = a.sync().await.unwrap();
    while report.pending > 0 {
        report = a.sync().await.unwrap();
    }
    let other = tempfile::tempdir().unwrap();
    let b = device(&other, "b", &project, &server).await;
    b.sync().await.unwrap();
    assert_eq!(all_contents(&b).await.len(), 600);
    a.close().await;
    b.close().await;
    remove_for_good(dir).await;
    remove_for_good(other).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn personal_memories_stay_on_their_device() {
    let Some(server) = Server::start("personal_memories_stay_on_their_device") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let project = project("personal");
    let a = device(&dir, "a", &project, &server).await;
    let b = device(&dir, "b", &project, &server).await;
    let mut mine = gotcha("my personal editor shortcut");
    mine.share_scope = Some(ShareScope::Personal);
    a.remember(mine).await.unwrap();
    let shared = a
        .remember(gotcha("the team's shared lesson"))
        .await
        .unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    assert_eq!(
        all_contents(&b).await,
        vec!["the team's shared lesson".to_string()]
    );

    // Made personal on A: gone from B, kept on A.
    let patch = MemoryPatch {
        share_scope: Some(ShareScope::Personal),
        ..Default::default()
    };
    a.update(&shared.memory.id, patch).await.unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    a.sync().await.unwrap();
    assert!(all_contents(&b).await.is_empty());
    assert_eq!(all_contents(&a).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_writes_mode_reports_a_server_without_it() {
    let Some(server) = Server::start("offline_writes_mode_reports_a_server_without_it") else {
        return;
    };
    if !server.owned() {
        return; // a Turso Cloud URL would support it; only sqld's 404 is asserted here
    }
    let dir = tempfile::tempdir().unwrap();
    let mut options = sync_options(&server.url);
    options.mode = SyncMode::OfflineWrites;
    let e = open_synced(&dir.path().join("o.db"), "o", options)
        .await
        .unwrap();
    e.remember(gotcha("written while the mode is unsupported"))
        .await
        .unwrap();
    let err = e.sync().await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_SYNC_UNSUPPORTED", "{err}");
    assert_eq!(e.sync_status().await.unwrap().pending, 1);

    // libSQL leaves a blocking task behind after the 404 that never ends: closing must not
    // wait for it, and the file must open again afterwards with the write still waiting.
    tokio::time::timeout(Duration::from_secs(30), e.close())
        .await
        .expect("close() after a refused offline-writes run released the files");
    let mut options = sync_options(&server.url);
    options.mode = SyncMode::OfflineWrites;
    let again = tokio::time::timeout(
        Duration::from_secs(30),
        open_synced(&dir.path().join("o.db"), "o", options),
    )
    .await
    .expect("the file opens again after close()")
    .unwrap();
    assert_eq!(again.sync_status().await.unwrap().pending, 1);
    again.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn conflicts_settle_without_losing_privacy_history_or_relearned_content() {
    let Some(server) =
        Server::start("conflicts_settle_without_losing_privacy_history_or_relearned_content")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let project = project("conflicts");
    let a = device(&dir, "a", &project, &server).await;
    let b = device(&dir, "b", &project, &server).await;
    let round = || async {
        a.sync().await.unwrap();
        b.sync().await.unwrap();
        a.sync().await.unwrap();
    };

    // Forgotten, then learned again in the same words before a push: the new memory is not
    // taken for a duplicate of the old one (which arrives archived in the same batch).
    let old = a
        .remember(gotcha("retry budgets are per tenant"))
        .await
        .unwrap();
    round().await;
    a.forget(&old.memory.id, None).await.unwrap();
    let again = a
        .remember(gotcha("retry budgets are per tenant"))
        .await
        .unwrap();
    assert_ne!(again.memory.id, old.memory.id);
    round().await;
    for e in [&a, &b] {
        assert!(!e.get(&again.memory.id).await.unwrap().deprecated);
        assert!(e.get(&old.memory.id).await.unwrap().deprecated);
    }

    // B makes a memory personal while A, not knowing yet, edits it: B's copy stays B's.
    let shared = a
        .remember(gotcha("the staging db is reset nightly"))
        .await
        .unwrap();
    round().await;
    let private = MemoryPatch {
        share_scope: Some(ShareScope::Personal),
        ..Default::default()
    };
    b.update(&shared.memory.id, private).await.unwrap();
    b.sync().await.unwrap();
    let edit = MemoryPatch {
        content: Some("the staging db is reset nightly at 02:00".into()),
        ..Default::default()
    };
    a.update(&shared.memory.id, edit).await.unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    let on_b = b.get(&shared.memory.id).await.unwrap();
    assert_eq!(on_b.share_scope, ShareScope::Personal);
    assert_eq!(on_b.content, "the staging db is reset nightly");

    // Private drafts made shared later bring their history along.
    let mut draft = gotcha("draft: flaky test in auth");
    draft.share_scope = Some(ShareScope::Personal);
    let draft = a.remember(draft).await.unwrap();
    let reword = MemoryPatch {
        content: Some("the auth test is flaky under load".into()),
        ..Default::default()
    };
    a.update(&draft.memory.id, reword).await.unwrap();
    let publish = MemoryPatch {
        share_scope: Some(ShareScope::Project),
        ..Default::default()
    };
    a.update(&draft.memory.id, publish).await.unwrap();
    round().await;
    let history = b.history(&draft.memory.id).await.unwrap();
    assert_eq!(history.len(), 3, "{history:#?}");
    assert_eq!(history[0].memory.content, "draft: flaky test in auth");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_recreated_at_the_same_url_gets_everything_again() {
    let Some(mut server) =
        Server::start("a_server_recreated_at_the_same_url_gets_everything_again")
    else {
        return;
    };
    if !server.owned() {
        return; // recreating needs our own server
    }
    let dir = tempfile::tempdir().unwrap();
    let project = project("recreated");
    let a = device(&dir, "a", &project, &server).await;
    for i in 0..20 {
        a.remember(gotcha(&format!("kept through a server rebuild {i}")))
            .await
            .unwrap();
    }
    a.sync().await.unwrap();
    server.wipe();
    server.spawn();
    // Work goes on; the replica is ahead of the new server, so a sync or two may fail while
    // engram notices the new database and starts a fresh replica.
    a.remember(gotcha("written after the rebuild"))
        .await
        .unwrap();
    let mut report = None;
    for _ in 0..5 {
        match a.sync().await {
            Ok(r) if r.pending == 0 => {
                report = Some(r);
                break;
            }
            Ok(r) => eprintln!("partial: {r:?}"),
            Err(e) => eprintln!("failed: {e}"),
        }
    }
    assert!(
        report.is_some(),
        "{:?}",
        a.sync_status().await.unwrap().last_error
    );
    let b = device(&dir, "b", &project, &server).await;
    b.sync().await.unwrap();
    assert_eq!(all_contents(&b).await.len(), 21);
}

#[tokio::test(flavor = "multi_thread")]
async fn authored_graph_nodes_and_edges_reach_the_other_devices_graph() {
    use engram::graph::{EdgeInput, NodeInput, Side};
    let Some(server) =
        Server::start("authored_graph_nodes_and_edges_reach_the_other_devices_graph")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let project = project("knowledge");
    // B has the code, but has not indexed it yet when A's knowledge arrives.
    let root = dir.path().join("repo");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/retry.ts"),
        "export function retry(times: number) {\n  return times\n}\n",
    )
    .unwrap();
    let open = |name: &str| {
        let mut options = OpenOptions::new(dir.path().join(format!("{name}.db")));
        options.project_id = Some(project.clone());
        options.project_root = Some(root.clone());
        options.engine = EngineOptions {
            sync: Some(sync_options(&server.url)),
            ..Default::default()
        };
        Engram::open(options)
    };
    let a = open("a").await.unwrap();
    let b = open("b").await.unwrap();
    let index = |e: &Engram| {
        let e = e.clone();
        async move {
            e.index(
                &engram::code::IndexOptions::default(),
                &|_| {},
                &std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
            )
            .await
            .unwrap()
        }
    };
    index(&a).await;

    let mut secret = NodeInput::new("concept:auth", "concept");
    secret.label = "auth uses api_key=sk-live-abcdefghijklmnopqrstuvwx".into();
    let nodes = [
        NodeInput::new("concept:retries", "concept"),
        NodeInput::new("decision:backoff", "decision"),
        secret,
    ];
    let edges = [
        EdgeInput::new("decision:backoff", "concept:retries", "depends_on").weighted(2.0),
        EdgeInput::new("concept:auth", "concept:retries", "depends_on"),
        // Its end is a code node: B has it only once it indexes.
        EdgeInput::new("concept:retries", "src/retry.ts", "documents"),
    ];
    a.inject_graph(&nodes, &edges).await.unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();

    let code_edge = || ["concept:retries".to_string(), "src/retry.ts".to_string()];
    assert!(b.subgraph(&code_edge()).await.unwrap().edges.is_empty());
    index(&b).await;
    let sub = b.subgraph(&code_edge()).await.unwrap();
    assert_eq!(
        sub.edges.len(),
        1,
        "replayed once its end exists: {:?}",
        sub.edges
    );
    assert_eq!(sub.edges[0].kind, "documents");

    let node = b
        .node("decision:backoff")
        .await
        .unwrap()
        .expect("node arrived");
    assert_eq!(node.kind, "decision");
    // What arrives was redacted on A before it was stored anywhere.
    let auth = b.node("concept:auth").await.unwrap().unwrap();
    assert!(auth.label.contains("[REDACTED]"), "{}", auth.label);
    // The closure is maintained on B: the decision depends on retries, weight 2.
    let reach = b
        .reach("concept:retries", Side::Ancestors, None, 100)
        .await
        .unwrap();
    let found: Vec<(&str, f64)> = reach
        .nodes
        .iter()
        .map(|n| (n.node.key.as_str(), n.weight))
        .collect();
    assert!(found.contains(&("decision:backoff", 2.0)), "{found:?}");

    // A deletion travels too; deleting a node takes its edges along.
    a.delete_node("concept:auth").await.unwrap();
    a.delete_edge("decision:backoff", "concept:retries", "depends_on")
        .await
        .unwrap();
    a.sync().await.unwrap();
    b.sync().await.unwrap();
    assert!(b.node("concept:auth").await.unwrap().is_none());
    let reach = b
        .reach("concept:retries", Side::Ancestors, None, 100)
        .await
        .unwrap();
    assert!(reach.nodes.is_empty(), "{:?}", reach.nodes);

    // Written on B, seen on A.
    b.inject_graph(
        &[NodeInput::new("concept:jitter", "concept")],
        &[EdgeInput::new(
            "concept:jitter",
            "concept:retries",
            "refines",
        )],
    )
    .await
    .unwrap();
    b.sync().await.unwrap();
    a.sync().await.unwrap();
    let sub = a
        .subgraph(&["concept:jitter".into(), "concept:retries".into()])
        .await
        .unwrap();
    assert_eq!(sub.edges.len(), 1, "{:?}", sub.edges);
    assert_eq!(sub.edges[0].kind, "refines");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_carries_what_was_queued_when_it_began() {
    let Some(server) = Server::start("a_push_carries_what_was_queued_when_it_began") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let e = open_synced(&dir.path().join("p.db"), "p", sync_options(&server.url))
        .await
        .unwrap();
    e.sync().await.unwrap();
    let before = e.sync_status().await.unwrap().totals.pushed;
    for i in 0..30 {
        e.remember(gotcha(&format!("queued before the push {i}")))
            .await
            .unwrap();
    }

    // Writes keep landing while the run goes on: they wait for a later run instead of
    // keeping this one going. (The loop also pushes after local writes; it never runs at the
    // same time as this run, so what this run carried is its own.)
    let writer = {
        let e = e.clone();
        tokio::spawn(async move {
            for i in 0..200 {
                e.remember(gotcha(&format!("written while the push runs {i}")))
                    .await
                    .unwrap();
            }
        })
    };
    let report = e.sync().await.unwrap();
    writer.await.unwrap();
    assert!(
        report.pushed < 230,
        "the push chased the writes made while it ran: {report:?}"
    );

    // Later runs carry the rest; nothing is lost or pushed twice.
    let deadline = Instant::now() + Duration::from_secs(20);
    while e.sync_status().await.unwrap().pending > 0 {
        assert!(Instant::now() < deadline, "the outbox never emptied");
        e.sync().await.unwrap();
    }
    assert_eq!(e.sync_status().await.unwrap().totals.pushed - before, 230);
    e.close().await;
}
