//! Integration tests of the core API against real libSQL files in temp dirs.

use std::sync::Arc;

use engram::clock::ManualClock;
use engram::memory::{
    ListFilter, MemoryPatch, MemoryScope, MemoryType, RememberInput, SearchMode, SearchOptions,
};
use engram::{EngineOptions, Engram, OpenOptions};

async fn open(dir: &tempfile::TempDir) -> Engram {
    Engram::open(OpenOptions::new(dir.path().join("memory.db")))
        .await
        .expect("open")
}

fn gotcha(content: &str) -> RememberInput {
    RememberInput::new(MemoryType::Gotcha, content)
}

#[tokio::test(flavor = "multi_thread")]
async fn remember_get_update_forget_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir).await;
    let mut input = gotcha("Refresh tokens must be rotated on every use");
    input.tags = vec!["auth".into(), "jwt".into(), "auth".into()];
    input.related_files = vec!["./src/auth/refresh.ts".into()];
    let r = e.remember(input).await.unwrap();
    assert!(r.created);
    assert_eq!(r.memory.tags, vec!["auth", "jwt"]);
    assert_eq!(r.memory.related_files, vec!["src/auth/refresh.ts"]);
    assert_eq!(r.memory.version, 1);

    let got = e.get(&r.memory.id).await.unwrap();
    assert_eq!(got, r.memory);

    let patch = MemoryPatch {
        content: Some("Refresh tokens are rotated on every use (see ADR-7)".into()),
        confidence: Some(0.95),
        ..Default::default()
    };
    let updated = e.update(&r.memory.id, patch).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.confidence, 0.95);

    let forgotten = e
        .forget(&r.memory.id, Some("obsolete".into()))
        .await
        .unwrap();
    assert!(forgotten.deprecated);
    assert_eq!(forgotten.version, 3);
    // Hidden from list and search, still readable by id.
    assert!(e.list(&ListFilter::default()).await.unwrap().is_empty());
    assert!(e
        .search("refresh tokens", &SearchOptions::default())
        .await
        .unwrap()
        .is_empty());
    assert!(e.get(&r.memory.id).await.unwrap().deprecated);

    let history = e.history(&r.memory.id).await.unwrap();
    let versions: Vec<_> = history
        .iter()
        .map(|v| (v.version, v.ended_by.as_str()))
        .collect();
    assert_eq!(versions, vec![(1, "update"), (2, "forget"), (3, "current")]);
    assert_eq!(
        history[0].memory.content,
        "Refresh tokens must be rotated on every use"
    );

    // Rolling back to version 2 restores the memory (as version 4).
    let restored = e.rollback(&r.memory.id, 2).await.unwrap();
    assert!(!restored.deprecated);
    assert_eq!(restored.version, 4);
    assert_eq!(restored.content, updated.content);
    assert_eq!(e.list(&ListFilter::default()).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicates_reinforce_within_project_and_scope() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir).await;
    let mut a = gotcha("Use jose instead of jsonwebtoken for Edge");
    a.confidence = Some(0.6);
    a.tags = vec!["auth".into()];
    a.session_id = Some("s1".into());
    let first = e.remember(a).await.unwrap();

    let mut b = gotcha("  use JOSE instead of jsonwebtoken   for edge ");
    b.tags = vec!["edge".into()];
    b.session_id = Some("s2".into());
    let second = e.remember(b).await.unwrap();
    assert!(!second.created);
    assert_eq!(second.memory.id, first.memory.id);
    assert_eq!(second.memory.reinforce_count, 1);
    // max(0.6, 0.8 default of the duplicate) + 0.05 boost.
    assert!((second.memory.confidence - 0.85).abs() < 1e-9);
    assert_eq!(second.memory.tags, vec!["auth", "edge"]);
    assert_eq!(second.memory.provenance_session_ids, vec!["s1", "s2"]);

    // Another scope is another memory.
    let mut c = gotcha("Use jose instead of jsonwebtoken for Edge");
    c.scope = Some(MemoryScope::Module);
    assert!(e.remember(c).await.unwrap().created);

    // Another project in the same file is another memory, and invisible from this one.
    let mut other = OpenOptions::new(dir.path().join("memory.db"));
    other.project_id = Some("other".into());
    let p2 = Engram::open(other).await.unwrap();
    assert!(
        p2.remember(gotcha("Use jose instead of jsonwebtoken for Edge"))
            .await
            .unwrap()
            .created
    );
    assert_eq!(p2.list(&ListFilter::default()).await.unwrap().len(), 1);
    assert_eq!(e.list(&ListFilter::default()).await.unwrap().len(), 2);
    assert_eq!(
        p2.get(&first.memory.id).await.unwrap_err().code(),
        "ENGRAM_NOT_FOUND"
    );

    // A forgotten memory no longer absorbs duplicates.
    e.forget(&first.memory.id, None).await.unwrap();
    let again = e
        .remember(gotcha("Use jose instead of jsonwebtoken for Edge"))
        .await
        .unwrap();
    assert!(again.created);
    assert_ne!(again.memory.id, first.memory.id);
    // ... and restoring it would now duplicate the new one.
    let err = e.rollback(&first.memory.id, 2).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_CONFLICT", "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_redacted_before_storage() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir).await;
    let mut input =
        gotcha("Staging uses DB_PASSWORD=hunter2 and ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
    input.tags = vec!["sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789".into()];
    input.metadata = Some(serde_json::json!({ "note": "token=abc123def456ghi" }));
    let r = e.remember(input).await.unwrap();
    assert_eq!(r.memory.redactions, 4);
    let stored = e.get(&r.memory.id).await.unwrap();
    let all = serde_json::to_string(&stored).unwrap();
    for secret in ["hunter2", "ghp_A1b2", "sk-ant-", "abc123def456ghi"] {
        assert!(!all.contains(secret), "{secret} leaked: {all}");
    }
    // The raw file does not contain the secret either (nothing was written before filtering).
    drop(e);
    let bytes = std::fs::read(dir.path().join("memory.db")).unwrap();
    let wal = std::fs::read(dir.path().join("memory.db-wal")).unwrap_or_default();
    for hay in [bytes, wal] {
        assert!(!hay.windows(7).any(|w| w == b"hunter2"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn input_limits_have_codes() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir).await;
    let cases: Vec<RememberInput> = vec![
        gotcha("   "),
        gotcha(&"x".repeat(16 * 1024 + 1)),
        {
            let mut i = gotcha("ok");
            i.confidence = Some(1.5);
            i
        },
        {
            let mut i = gotcha("ok");
            i.related_files = vec!["../../etc/passwd".into()];
            i
        },
        {
            let mut i = gotcha("ok");
            i.citation_text = Some("c".repeat(41));
            i
        },
        {
            let mut i = gotcha("ok");
            i.metadata = Some(serde_json::json!([1, 2]));
            i
        },
    ];
    for input in cases {
        let err = e.remember(input).await.unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG", "{err}");
    }
    // A batch with one bad input writes nothing.
    let err = e
        .remember_many(vec![gotcha("good one"), gotcha("")])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("input 1"), "{err}");
    assert_eq!(e.stats().await.unwrap().total, 0);
}

/// The OR fill leaves out a word in more than 1,000 memories while a rarer query word remains:
/// scoring every match of the common word would cost milliseconds, and a memory holding only it
/// would not outrank one holding the rare word anyway.
#[tokio::test(flavor = "multi_thread")]
async fn the_or_fill_skips_words_in_more_than_a_thousand_memories() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir).await;
    let common: Vec<RememberInput> = (0..1001)
        .map(|i| gotcha(&format!("the deploy script number {i} runs before tests")))
        .collect();
    e.remember_many(common).await.unwrap();
    e.remember_many(vec![
        gotcha("flaky snapshot of the billing page"),
        gotcha("snapshot tests need a fixed clock"),
    ])
    .await
    .unwrap();
    // No memory holds both words: the AND finds nothing, the fill takes only `snapshot`.
    let hits = e
        .search("deploy snapshot", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().all(|h| h.memory.content.contains("snapshot")));
    // `any` still means any word.
    let any = SearchOptions {
        mode: SearchMode::Any,
        ..Default::default()
    };
    let hits = e.search("deploy snapshot", &any).await.unwrap();
    assert!(hits.iter().any(|h| h.memory.content.contains("deploy")));
}

#[tokio::test(flavor = "multi_thread")]
async fn misspelt_words_are_corrected_when_exact_search_finds_too_little() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir).await;
    let texts = [
        "Docker compose needs the host network for the test database",
        "Configuration files are loaded from the XDG config directory",
        "Compose files are validated before the deploy step",
    ];
    e.remember_many(texts.iter().map(|t| gotcha(t)).collect())
        .await
        .unwrap();

    // One edit away from an indexed word: the AND finds nothing, the correction finds it,
    // ahead of the partial match the OR fill brings.
    let hits = e
        .search("dokcer compose", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits[0].memory.content, texts[0], "{hits:?}");
    assert_eq!(hits[0].corrected_query.as_deref(), Some("docker* compose"));
    assert!(hits[0].matched_all);
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(hits[1].memory.content, texts[2]);
    assert!(
        !hits[1].matched_all && hits[1].corrected_query.is_none(),
        "the original query's partial hit stays, after, unmarked: {hits:?}"
    );

    // An inflected misspelling meets the stem the index holds.
    let hits = e
        .search("confgurations", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].memory.content, texts[1]);
    assert_eq!(hits[0].corrected_query.as_deref(), Some("configur*"));

    // Off, and never for words the index holds or enough exact hits.
    let exact = SearchOptions {
        typo: false,
        ..Default::default()
    };
    assert!(e.search("confgurations", &exact).await.unwrap().is_empty());
    let hits = e
        .search("compose", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().all(|h| h.corrected_query.is_none()));
    // Corrected to the memories' words, not to a word only code holds.
    assert_eq!(
        e.search("netwrok", &SearchOptions::default())
            .await
            .unwrap()[0]
            .corrected_query
            .as_deref(),
        Some("network*")
    );
    assert!(e
        .search("zqxwvy", &SearchOptions::default())
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn search_ranks_and_survives_hostile_queries() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir).await;
    let texts = [
        "The connection pool must be closed before the worker exits",
        "Database migrations run inside one transaction",
        "Use the connection string from the environment, never hard-code it",
        "Prefer authMiddleware over ad-hoc token checks in routes",
        "Docker networking: services talk over the compose network",
    ];
    let inputs = texts.iter().map(|t| gotcha(t)).collect();
    e.remember_many(inputs).await.unwrap();

    let hits = e
        .search("connection pool", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits[0].memory.content, texts[0]);
    assert!(hits[0].matched_all);
    // OR fallback fills in the partial match, ranked after.
    assert!(hits
        .iter()
        .any(|h| h.memory.content == texts[2] && !h.matched_all));

    // Exact phrase and prefix.
    let hits = e
        .search("\"compose network\"", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    let hits = e
        .search("migrat*", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits[0].memory.content, texts[1]);
    // Stemming: "migrating" finds "migrations".
    let hits = e
        .search("migrating", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    // Exclusion.
    let all = SearchOptions {
        mode: SearchMode::Any,
        ..Default::default()
    };
    let hits = e.search("connection -pool", &all).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].memory.content, texts[2]);

    for hostile in [
        "\"",
        "\"unbalanced",
        "*",
        "-",
        "a:b",
        "content:connection",
        "NEAR(pool, 2)",
        "(((",
        ")",
        "AND OR NOT",
        "^pool",
        "pool\"",
        "🙂 pool 🎉",
        "'; DROP TABLE memories; --",
        "\u{0000}pool",
        "a\"b\"c",
        "-*-",
        "NOT pool",
        "pool*\"*",
        "{pool}",
        "[pool]",
        "pool + - * / = ~",
        "ÜBER façade",
        "ø",
        "\\",
        "%",
        "_",
        "auth-middleware",
    ] {
        let r = e.search(hostile, &SearchOptions::default()).await;
        assert!(r.is_ok(), "{hostile:?}: {:?}", r.err());
    }
    let hits = e
        .search("authMiddleware", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(e.stats().await.unwrap().active, 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn list_filters_and_orders() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut opts = OpenOptions::new(dir.path().join("m.db"));
    opts.engine = EngineOptions {
        clock: clock.clone(),
        ..Default::default()
    };
    let e = Engram::open(opts).await.unwrap();
    for (i, t) in [MemoryType::Gotcha, MemoryType::Decision, MemoryType::Gotcha]
        .into_iter()
        .enumerate()
    {
        let mut input = RememberInput::new(t, format!("memory number {i}"));
        input.tags = vec![format!("t{i}")];
        input.related_files = vec![format!("src/f{i}.ts")];
        input.confidence = Some(0.5 + i as f64 / 10.0);
        e.remember(input).await.unwrap();
        clock.advance(1000);
    }
    let gotchas = e
        .list(&ListFilter {
            types: vec![MemoryType::Gotcha],
            ..Default::default()
        })
        .await
        .unwrap();
    let contents: Vec<_> = gotchas.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, vec!["memory number 2", "memory number 0"]);
    let tagged = e
        .list(&ListFilter {
            tags: vec!["t1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tagged.len(), 1);
    let by_file = e
        .list(&ListFilter {
            related_file: Some("src/f0.ts".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_file[0].content, "memory number 0");
    let confident = e
        .list(&ListFilter {
            min_confidence: Some(0.65),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(confident.len(), 1);
    let err = e
        .list(&ListFilter {
            limit: Some(0),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
    let stats = e.stats().await.unwrap();
    assert_eq!(stats.by_type.get("gotcha"), Some(&2));
}

/// Listing by file goes through the links kept for `related_files`: it must see exactly what
/// the memories' own lists say, after edits and across projects and filters.
#[tokio::test(flavor = "multi_thread")]
async fn listing_by_file_follows_the_related_files_through_edits() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir).await;
    let by_file = |file: &str| ListFilter {
        related_file: Some(file.into()),
        ..Default::default()
    };
    let mut both = gotcha("The session cookie is set by both login and refresh");
    both.related_files = vec!["src/login.ts".into(), "src/refresh.ts".into()];
    let both = e.remember(both).await.unwrap().memory;
    let mut one = RememberInput::new(MemoryType::Decision, "Login answers 401, never 403");
    one.related_files = vec!["src/login.ts".into()];
    let one = e.remember(one).await.unwrap().memory;
    e.remember(gotcha("Nothing to do with any file"))
        .await
        .unwrap();
    let mut other = OpenOptions::new(dir.path().join("memory.db"));
    other.project_id = Some("other".into());
    let p2 = Engram::open(other).await.unwrap();
    let mut theirs = gotcha("Another project's note on its own login");
    theirs.related_files = vec!["src/login.ts".into()];
    p2.remember(theirs).await.unwrap();

    let ids = |list: Vec<engram::memory::Memory>| {
        let mut ids: Vec<String> = list.into_iter().map(|m| m.id).collect();
        ids.sort();
        ids
    };
    let mut expected = vec![both.id.clone(), one.id.clone()];
    expected.sort();
    assert_eq!(
        ids(e.list(&by_file("src/login.ts")).await.unwrap()),
        expected
    );
    assert_eq!(
        ids(e.list(&by_file("src/refresh.ts")).await.unwrap()),
        vec![both.id.clone()]
    );
    // With another filter, and in the order asked for (newest first by default).
    let decisions = ListFilter {
        types: vec![MemoryType::Decision],
        ..by_file("src/login.ts")
    };
    assert_eq!(ids(e.list(&decisions).await.unwrap()), vec![one.id.clone()]);
    let newest_first: Vec<String> = e
        .list(&by_file("src/login.ts"))
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(newest_first, vec![one.id.clone(), both.id.clone()]);

    // An edit moves the memory from one file to another.
    let patch = MemoryPatch {
        related_files: Some(vec!["src/logout.ts".into()]),
        ..Default::default()
    };
    e.update(&both.id, patch).await.unwrap();
    assert_eq!(
        ids(e.list(&by_file("src/login.ts")).await.unwrap()),
        vec![one.id.clone()]
    );
    assert!(e.list(&by_file("src/refresh.ts")).await.unwrap().is_empty());
    assert_eq!(
        ids(e.list(&by_file("src/logout.ts")).await.unwrap()),
        vec![both.id.clone()]
    );
    // The other project sees only its own.
    assert_eq!(p2.list(&by_file("src/login.ts")).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn search_finds_weak_matches_behind_other_projects_and_forgotten_ones() {
    // The index is shared by every project in a file, and forgotten memories stay in it.
    // Ranking in the index alone and filtering afterwards must not lose a project's own
    // (weaker) hits when better-scoring rows of another project or forgotten rows fill the
    // over-fetched top.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let mut other = OpenOptions::new(&path);
    other.project_id = Some("other".into());
    let other = Engram::open(other).await.unwrap();
    let batch = (0..60)
        .map(|i| gotcha(&format!("cache cache cache eviction note {i}")))
        .collect();
    other.remember_many(batch).await.unwrap();

    let mine = Engram::open(OpenOptions::new(&path)).await.unwrap();
    let strong = mine
        .remember(gotcha("cache cache cache cache stale entry"))
        .await
        .unwrap()
        .memory;
    let weak = [
        "the cache is rebuilt on deploy and the build takes a while to warm it again",
        "a long note about deploys that mentions the cache only once among many other words",
    ];
    for text in weak {
        mine.remember(gotcha(text)).await.unwrap();
    }
    mine.forget(&strong.id, Some("superseded".into()))
        .await
        .unwrap();

    let options = SearchOptions {
        limit: Some(2),
        ..Default::default()
    };
    let hits = mine.search("cache", &options).await.unwrap();
    let mut contents: Vec<_> = hits.iter().map(|h| h.memory.content.as_str()).collect();
    contents.sort();
    let mut expected = weak.to_vec();
    expected.sort();
    assert_eq!(contents, expected);
    assert!(hits.iter().all(|h| h.memory.project_id == "default"));
    // Scores still come back best first.
    assert!(hits[0].score >= hits[1].score);

    // The other project sees its own rows, best first, and never ours.
    let theirs = other
        .search("cache", &SearchOptions::default())
        .await
        .unwrap();
    assert_eq!(theirs.len(), 10);
    assert!(theirs.iter().all(|h| h.memory.project_id == "other"));
    assert!(theirs.windows(2).all(|w| w[0].score >= w[1].score));
}

/// FTS5's own check of an external-content index against its table: fails on any term the
/// index holds that the table does not, or the other way round.
async fn assert_index_matches_table(path: &std::path::Path) {
    let db = libsql::Builder::new_local(path).build().await.unwrap();
    let conn = db.connect().unwrap();
    conn.execute(
        "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)",
        (),
    )
    .await
    .expect("search index matches the memories table");
}

#[tokio::test(flavor = "multi_thread")]
async fn search_index_stays_exact_through_batches_duplicates_and_edits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let e = Engram::open(OpenOptions::new(&path)).await.unwrap();
    // A batch that inserts a memory and then reinforces it (new tag) before commit, around
    // other inserts: the reinforce rewrites indexed columns of a row inserted moments before.
    let mut again = gotcha("flaky test: reset the clock mock");
    again.tags = vec!["timing".into()];
    let batch = vec![
        gotcha("use pnpm, never npm, in this monorepo"),
        gotcha("flaky test: reset the clock mock"),
        gotcha("migrations run before seeding"),
        again,
        gotcha("the cache warms on first request"),
    ];
    let out = e.remember_many(batch).await.unwrap();
    assert_eq!(
        out.iter().map(|r| r.created).collect::<Vec<_>>(),
        [true, true, true, false, true]
    );
    assert_index_matches_table(&path).await;
    let by_tag = e.search("timing", &SearchOptions::default()).await.unwrap();
    assert_eq!(by_tag.len(), 1, "the reinforced tag is searchable");
    assert_eq!(by_tag[0].memory.id, out[1].memory.id);

    // Edits of indexed text, forgetting and rolling back keep index and table in step.
    let id = out[0].memory.id.clone();
    e.update(
        &id,
        MemoryPatch {
            content: Some("use yarn berry in this monorepo".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(e
        .search("pnpm", &SearchOptions::default())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        e.search("yarn", &SearchOptions::default())
            .await
            .unwrap()
            .len(),
        1
    );
    e.forget(&out[2].memory.id, None).await.unwrap();
    e.rollback(&id, 1).await.unwrap();
    e.remember(gotcha("a single remember after the batch"))
        .await
        .unwrap();
    assert_index_matches_table(&path).await;
    assert_eq!(
        e.search("pnpm", &SearchOptions::default())
            .await
            .unwrap()
            .len(),
        1,
        "rollback restores the old text in the index"
    );
}
