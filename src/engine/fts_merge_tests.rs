//! The keyword indexes' segment merge (see `engine::fts_merge`) on a whole engine: memories
//! written one by one leave their index in several segments; an index run, and an open of a
//! file left that way, merge it into one in the background, and searches answer as before; a
//! merge told to stop leaves the index as it was; `optimize` merges it at once. (Here, above the store, because it needs the
//! engine's background tasks and lifetime.)

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::fts_merge::{layout, worth_merging, Layout, INDEXES};
use crate::memory::{MemoryType, RememberInput, SearchOptions};
use crate::{Engram, OpenOptions};

/// Memories written one transaction each: every commit adds a segment, and FTS5's automerge
/// leaves several (of unequal sizes) behind.
const MEMORIES: usize = 60;

async fn open(dir: &Path) -> Engram {
    let mut options = OpenOptions::new(dir.join("engram.db"));
    options.project_root = Some(dir.join("project"));
    Engram::open(options).await.unwrap()
}

async fn memory_layout(e: &Engram) -> Layout {
    let index = &INDEXES[1];
    assert_eq!(index.table, "memories_fts");
    layout(&mut e.engine().store.reader().await, index)
        .await
        .unwrap()
}

/// An engine on a new file over an empty project, once its open-time merge check has ended.
async fn open_empty(dir: &Path) -> Engram {
    std::fs::create_dir_all(dir.join("project")).unwrap();
    let e = open(dir).await;
    wait_for_merge(&e).await;
    e
}

/// [`open_empty`], then [`MEMORIES`] remembered one by one: the memories' index scattered
/// (checked), and its layout.
async fn scattered_memories(dir: &Path) -> (Engram, Layout) {
    let e = open_empty(dir).await;
    remember_one_by_one(&e, 0, MEMORIES).await;
    let scattered = memory_layout(&e).await;
    assert!(worth_merging(&scattered), "{scattered:?}");
    (e, scattered)
}

/// Waits (up to a generous bound, for a loaded CI machine) until the merge task has finished.
async fn wait_for_merge(e: &Engram) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while e.engine().fts_merge.is_running() {
        assert!(Instant::now() < deadline, "the merge task never finished");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Remembers `count` memories one by one, numbered from `from`; varied words, so that each
/// segment holds terms of its own and terms shared with the others.
async fn remember_one_by_one(e: &Engram, from: usize, count: usize) {
    for i in from..from + count {
        let content = format!(
            "Gotcha {i}: the {} cache needs a restart after changing {} (ticket t{i})",
            ["build", "query", "session", "asset"][i % 4],
            ["the schema", "a flag", "the port", "its config"][i % 3],
        );
        e.remember(RememberInput::new(MemoryType::Gotcha, content))
            .await
            .unwrap();
    }
}

/// The ids `search` finds for a few queries, in order.
async fn answers(e: &Engram) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for query in [
        "cache restart",
        "schema",
        "ticket t17",
        "session flag",
        "port config",
    ] {
        let hits = e.search(query, &SearchOptions::default()).await.unwrap();
        out.push(hits.into_iter().map(|h| h.memory.id).collect());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_run_and_an_open_merge_a_scattered_keyword_index_into_one_segment() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("main.py"), "def main():\n    return 1\n").unwrap();
    let e = open(dir.path()).await;
    // The open's own check found nothing to merge; let it end before scattering the index.
    wait_for_merge(&e).await;
    remember_one_by_one(&e, 0, MEMORIES).await;
    let scattered = memory_layout(&e).await;
    assert!(
        worth_merging(&scattered),
        "one memory per commit scatters the index: {scattered:?}"
    );
    let before = answers(&e).await;
    assert!(before.iter().all(|ids| !ids.is_empty()));

    e.index_with_defaults().await;
    wait_for_merge(&e).await;
    let merged = memory_layout(&e).await;
    assert_eq!(merged.segments, 1, "merged after the index run: {merged:?}");
    assert_eq!(
        answers(&e).await,
        before,
        "the merged index answers the same"
    );

    // Scattered again, then closed: the next open merges it.
    remember_one_by_one(&e, MEMORIES, MEMORIES).await;
    assert!(worth_merging(&memory_layout(&e).await));
    let before = answers(&e).await;
    e.close().await;
    let e = open(dir.path()).await;
    wait_for_merge(&e).await;
    let merged = memory_layout(&e).await;
    assert_eq!(merged.segments, 1, "merged after the open: {merged:?}");
    assert_eq!(answers(&e).await, before);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merge_stops_when_told_and_a_later_run_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (e, scattered) = scattered_memories(dir.path()).await;
    let merge = &e.engine().fts_merge;
    let store = &e.engine().store;

    assert!(merge.claim());
    let steps = merge.run(store, &|| false).await.unwrap();
    assert_eq!(steps, 0, "told to stop before the first step");
    assert_eq!(memory_layout(&e).await, scattered);

    assert!(merge.claim(), "a finished run releases its claim");
    assert!(!merge.claim(), "one run at a time");
    let steps = merge.run(store, &|| true).await.unwrap();
    assert!(steps >= 1);
    assert_eq!(memory_layout(&e).await.segments, 1);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_while_merging_is_served_and_a_dropped_run_releases_its_claim() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_empty(dir.path()).await;
    let merge = &e.engine().fts_merge;
    let store = &e.engine().store;

    // Dropped after its first poll (the reader it waits for, at most): the claim is released.
    remember_one_by_one(&e, 0, MEMORIES).await;
    assert!(merge.claim());
    {
        let run = merge.run(store, &|| true);
        futures::pin_mut!(run);
        let _ = futures::poll!(run.as_mut());
    }
    assert!(!merge.is_running(), "a dropped run released its claim");

    // A second request while the first is claimed runs no task of its own; the running one
    // makes its pass and ends with nothing claimed.
    assert!(merge.claim());
    assert!(!merge.claim());
    merge.run(store, &|| true).await.unwrap();
    assert!(!merge.is_running());
    assert_eq!(memory_layout(&e).await.segments, 1);
    e.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimize_merges_a_scattered_index_at_once_and_a_raised_cancel_leaves_it() {
    let dir = tempfile::tempdir().unwrap();
    let (e, scattered) = scattered_memories(dir.path()).await;
    let before = answers(&e).await;

    let cancelled = AtomicBool::new(true);
    let error = e.optimize(&cancelled).await.unwrap_err();
    assert_eq!(error.code(), "ENGRAM_ABORTED");
    assert_eq!(
        memory_layout(&e).await,
        scattered,
        "cancelled before a step"
    );

    let not_cancelled = AtomicBool::new(false);
    let optimized = e.optimize(&not_cancelled).await.unwrap();
    let names: Vec<_> = optimized.keyword_indexes.iter().map(|m| m.index).collect();
    assert_eq!(names, ["code", "memories"]);
    let memories = &optimized.keyword_indexes[1];
    assert_eq!(memories.segments_before, scattered.segments);
    assert_eq!(memories.segments_after, 1);
    assert!(memories.steps >= 1);
    assert_eq!(optimized.keyword_indexes[0].steps, 0, "no code indexed");
    assert_eq!(memory_layout(&e).await.segments, 1);
    assert_eq!(
        answers(&e).await,
        before,
        "the merged index answers the same"
    );

    let again = e.optimize(&not_cancelled).await.unwrap();
    assert!(
        again.keyword_indexes.iter().all(|m| m.steps == 0),
        "{again:?}"
    );
    e.close().await;
}
