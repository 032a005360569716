//! The engine's vector indexes against SQL: an index replayed from the change log after chunks
//! and their parts changed holds exactly the keys a full reload reads (here, above the vector
//! layer, because it needs a whole engine).

use std::sync::Arc;

use crate::embed::EmbedderId;
use crate::vector::{part_key, ItemKind};

/// Keys the engine's chunk index holds for its project, as of now.
async fn chunk_keys(e: &crate::Engram, model: &EmbedderId) -> Vec<i64> {
    let engine = e.engine();
    let slot = engine
        .vectors
        .current(&engine.store, e.project_id(), ItemKind::Chunk, model)
        .await
        .unwrap();
    let mut keys: Vec<i64> = slot.with(|l| l.index.ids().to_vec()).unwrap();
    keys.sort_unstable();
    keys
}

/// Every chunk and part key of the project, from SQL.
async fn keys_in_sql(e: &crate::Engram) -> Vec<i64> {
    let mut reader = e.engine().store.reader().await;
    let mut keys = reader
        .query_cached(
            "SELECT id, NULL FROM code_chunks UNION ALL
             SELECT chunk_id, ordinal FROM code_chunk_parts",
            (),
            |row| {
                let id: i64 = row.get(0).unwrap();
                let ordinal: Option<i64> = row.get(1).unwrap();
                Ok(ordinal.map_or(id, |o| part_key(id, o)))
            },
        )
        .await
        .unwrap();
    keys.sort_unstable();
    keys
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replayed_index_holds_exactly_the_chunks_and_parts_a_reload_reads() {
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    let three =
        "def one():\n    return 1\n\n\ndef two():\n    return 2\n\n\ndef three():\n    return 3\n";
    std::fs::write(root.join("small.py"), three).unwrap();
    let mut options = crate::OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(root.clone());
    options.engine.embeddings =
        crate::embed::EmbeddingProvider::Callback(crate::embed::CallbackOptions::new(
            "lengths",
            Arc::new(|texts: Vec<String>| {
                Box::pin(async move {
                    Ok(texts
                        .iter()
                        .map(|t| vec![1.0, t.len() as f32, t.matches('o').count() as f32])
                        .collect())
                })
            }),
        ));
    let e = crate::Engram::open(options.clone()).await.unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let defaults = crate::code::IndexOptions::default();
    let index = || e.index(&defaults, &|_| {}, &cancel);
    index().await.unwrap();
    let model = e
        .embed_pending(|_| {}, &AtomicBool::new(false))
        .await
        .unwrap()
        .model;
    let before = chunk_keys(&e, &model).await;
    assert_eq!(before, keys_in_sql(&e).await);
    assert_eq!(before.iter().filter(|k| **k < 0).count(), 3, "{before:?}");

    // One function goes: the index, loaded already, replays the change (a part key left
    // behind would be a key SQL does not have, even when the chunk's id is reused).
    let two = "def one():\n    return 1\n\n\ndef three():\n    return 3\n";
    std::fs::write(root.join("small.py"), two).unwrap();
    index().await.unwrap();
    e.embed_pending(|_| {}, &AtomicBool::new(false))
        .await
        .unwrap();
    let after = chunk_keys(&e, &model).await;
    assert_eq!(after.iter().filter(|k| **k < 0).count(), 2, "{after:?}");
    assert_eq!(after, keys_in_sql(&e).await);
    // A fresh engine on the file (a full reload) holds the same keys.
    drop(e);
    let e = crate::Engram::open(options).await.unwrap();
    assert_eq!(chunk_keys(&e, &model).await, after);
}
