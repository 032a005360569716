//! Damaged database files, made by damaging real ones: a file cut short is refused at open;
//! a page overwritten with random bytes is found by the integrity check, after which writes
//! fail with `ENGRAM_CORRUPT` and nothing more is written into the file; `doctor` reports the
//! damage without writing, and `salvage` copies the memories that can still be read, with
//! their history and events, into a new file.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use engram::lifecycle::salvage::{doctor, salvage};
use engram::memory::{ListFilter, MemoryPatch, MemoryType, RememberInput};
use engram::{Engram, OpenOptions};

const MEMORIES: usize = 600;

async fn open(path: &Path) -> engram::Result<Engram> {
    Engram::open(OpenOptions::new(path)).await
}

/// A closed database of `MEMORIES` memories (one updated, one forgotten with a reason), its
/// WAL checkpointed into the file.
async fn database(path: &Path) -> (String, String) {
    let e = open(path).await.unwrap();
    let inputs: Vec<RememberInput> = (0..MEMORIES)
        .map(|i| {
            RememberInput::new(
                MemoryType::Gotcha,
                format!(
                    "Memory {i}: the cache key of module {} must include the tenant id, or tenants read each other's entries",
                    i % 37
                ),
            )
        })
        .collect();
    let written = e.remember_many(inputs).await.unwrap();
    let updated = written[3].memory.id.clone();
    e.update(
        &updated,
        MemoryPatch {
            content: Some("Memory 3, corrected: the key includes tenant and region".into()),
            ..MemoryPatch::default()
        },
    )
    .await
    .unwrap();
    let forgotten = written[5].memory.id.clone();
    e.forget(&forgotten, Some("the cache was removed".into()))
        .await
        .unwrap();
    e.comment(
        &updated,
        engram::lifecycle::EventNote {
            body: Some("checked against the region rollout".into()),
            author: Some("ana".into()),
            session_id: None,
        },
    )
    .await
    .unwrap();
    e.close().wait().await;
    (updated, forgotten)
}

/// Overwrites the page at `fraction` of the file with bytes that are not a page.
fn overwrite_page(path: &Path, fraction: f64) {
    let length = std::fs::metadata(path).unwrap().len();
    let page = 4096;
    let pages = length / page;
    let at = ((pages as f64 * fraction) as u64).clamp(1, pages - 1) * page;
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(at)).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..page)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    file.write_all(&noise).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_cut_short_is_refused_at_open_and_doctor_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    database(&path).await;
    let length = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(length - 1000)
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let Err(err) = open(&path).await else {
        panic!("a file cut short is refused")
    };
    assert_eq!(err.code(), "ENGRAM_CORRUPT");
    let message = err.to_string();
    assert!(message.contains("cut short"), "{message}");
    assert!(message.contains("engram doctor"), "{message}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing was written");

    let report = doctor(&path).await.unwrap();
    assert!(!report.ok);
    assert!(report
        .header
        .as_deref()
        .unwrap()
        .contains("not a whole number"));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "doctor writes nothing"
    );

    // Salvage gets the memories back from what is left.
    let to = dir.path().join("salvaged.db");
    let saved = salvage(&path, &to).await.unwrap();
    assert_eq!(saved.projects, 1);
    assert!(saved.memories as usize >= MEMORIES - 20, "{saved:?}");
    let e = open(&to).await.unwrap();
    let listed = e
        .list(&ListFilter {
            include_forgotten: true,
            limit: Some(1000),
            ..ListFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len() as u64, saved.memories);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_page_is_found_then_writes_are_refused_and_salvage_copies_what_is_readable() {
    for fraction in [0.25, 0.5, 0.75, 1.0] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.db");
        let (updated, forgotten) = database(&path).await;
        overwrite_page(&path, fraction);

        // The damage is not in the header: open succeeds; the full check finds it.
        let e = open(&path).await.unwrap();
        let problems = e.check_integrity().await.unwrap();
        assert!(!problems.is_empty(), "page at {fraction}: found");
        let err = e
            .remember(RememberInput::new(
                MemoryType::Gotcha,
                "written after damage",
            ))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "ENGRAM_CORRUPT", "page at {fraction}: {err}");
        assert!(err.to_string().contains("writes are refused"), "{err}");
        assert!(err.to_string().contains("--salvage"), "{err}");
        e.close().wait().await;

        let report = doctor(&path).await.unwrap();
        assert!(!report.ok && !report.problems.is_empty(), "{report:?}");

        let to = dir.path().join("salvaged.db");
        let saved = salvage(&path, &to).await.unwrap();
        assert_eq!(saved.memories, report.readable_memories, "{saved:?}");
        assert!(
            saved.memories as usize >= MEMORIES / 2,
            "page at {fraction}: {saved:?}"
        );
        let s = open(&to).await.unwrap();
        // The salvaged file is sound and takes writes.
        assert!(s.check_integrity().await.unwrap().is_empty());
        s.remember(RememberInput::new(
            MemoryType::Gotcha,
            "the new file takes writes",
        ))
        .await
        .unwrap();
        // History and events come along with the memories they belong to.
        if let Ok(m) = s.get(&updated).await {
            assert!(m.content.contains("corrected"));
            assert!(!s.history(&updated).await.unwrap().is_empty());
        }
        if let Ok(m) = s.get(&forgotten).await {
            assert!(m.deprecated);
        }
        s.close().wait().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sound_file_passes_and_salvage_copies_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let (updated, forgotten) = database(&path).await;
    let report = doctor(&path).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.readable_memories as usize, MEMORIES);
    let e = open(&path).await.unwrap();
    assert!(e.check_integrity().await.unwrap().is_empty());
    e.close().wait().await;

    let to = dir.path().join("copy.db");
    let saved = salvage(&path, &to).await.unwrap();
    assert_eq!((saved.memories as usize, saved.lost), (MEMORIES, 0));
    assert!(saved.versions >= 2 && saved.events >= 1, "{saved:?}");
    let s = open(&to).await.unwrap();
    assert!(s.get(&updated).await.unwrap().content.contains("corrected"));
    assert_eq!(s.history(&updated).await.unwrap().len(), 2);
    assert!(s.get(&forgotten).await.unwrap().deprecated);
    let events = s.events(&updated).await.unwrap();
    assert!(events
        .iter()
        .any(|e| e.body.as_deref() == Some("checked against the region rollout")));
    // A second salvage into the same file is refused: it never overwrites.
    let err = salvage(&path, &to).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}
