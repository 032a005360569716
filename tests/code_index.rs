//! The code indexer end to end: a real project tree in a temp dir (with the traps of real
//! repositories: .gitignore, node_modules, binaries, huge files, invalid UTF-8, deep nesting,
//! symlink loops and links out of the root), indexed into a real libSQL file.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use engram::code::{
    ChunkOptions, FileIssue, IndexOptions, IndexPhase, IndexProgress, IndexSummary,
};
use engram::{Engram, OpenOptions};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/code");

fn write(root: &Path, rel: &str, bytes: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIXTURES).join(name)).unwrap()
}

/// A small polyglot project with every kind of bad input next to good code.
fn project(root: &Path) {
    write(root, "src/auth/tokens.ts", fixture("sample.ts"));
    write(root, "src/http.ts", "export interface Request { headers: Record<string, string> }\nexport interface Response { status(code: number): Response; json(body: unknown): void }\n");
    write(
        root,
        "src/session/index.ts",
        "export class Session { constructor(readonly id: string) {} }\n",
    );
    write(root, "src/ui/PriceList.tsx", fixture("sample.tsx"));
    write(root, "web/counter.jsx", fixture("sample.jsx"));
    write(root, "app/__init__.py", "");
    write(root, "app/orders.py", fixture("sample.py"));
    write(
        root,
        "app/models.py",
        "class Order:\n    pass\n\n\nclass LineItem:\n    pass\n",
    );
    write(
        root,
        "app/rules/__init__.py",
        "def active(now):\n    return []\n",
    );
    write(root, "crate/src/lib.rs", "pub mod cache;\npub mod clock;\n");
    write(root, "crate/src/cache.rs", fixture("sample.rs"));
    write(
        root,
        "crate/src/clock.rs",
        "pub trait Clock { fn now(&self) -> std::time::Instant; }\n",
    );
    write(root, "crate/src/cache/eviction.rs", "pub fn maybe_evict<K, V>(_m: &mut std::collections::HashMap<K, V>, _now: std::time::Instant) {}\n");
    write(root, "go.mod", "module example.com/app\n\ngo 1.22\n");
    write(root, "server/server.go", fixture("sample.go"));
    write(
        root,
        "internal/store/store.go",
        "package store\n\ntype Store struct{}\n",
    );
    write(root, "README.md", fixture("notes.md"));
    // Ignored: by .gitignore, by the default list, and by a configured pattern.
    write(root, ".gitignore", "generated/\n");
    write(root, "generated/api.ts", "export const x = 1;\n");
    write(
        root,
        "node_modules/left-pad/index.js",
        "module.exports = () => {};\n",
    );
    write(root, "scratch/tmp.py", "print('not indexed')\n");
    // Bad input.
    write(
        root,
        "assets/blob.js",
        b"\x00\x01\x02binary\x00".repeat(100),
    );
    write(
        root,
        "big/huge.ts",
        "export const a = 1;\n".repeat(3_000_000),
    ); // ~60 MB
    write(
        root,
        "src/latin1.py",
        b"# caf\xe9\ndef caf():\n    return '\xe9'\n",
    );
    write(
        root,
        "src/deep.ts",
        format!(
            "export const deep = {}1{};\n",
            "[".repeat(5000),
            "]".repeat(5000)
        ),
    );
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(root, root.join("src/loop")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("src/outside.txt")).unwrap();
    }
}

/// Small chunk budgets (as in the fixture tests) so that classes are split end to end.
fn options() -> IndexOptions {
    let mut options = IndexOptions {
        ignore: vec!["scratch/".into()],
        max_file_bytes: 10 * 1024 * 1024,
        ..IndexOptions::default()
    };
    options.analyze.chunk = ChunkOptions {
        max_tokens: 160,
        small_tokens: 40,
        merge_tokens: 120,
    };
    options
}

async fn open(dir: &tempfile::TempDir) -> Engram {
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(dir.path().join("repo"));
    Engram::open(options).await.unwrap()
}

async fn run(e: &Engram) -> IndexSummary {
    e.index(&options(), &|_| {}, &Arc::new(AtomicBool::new(false)))
        .await
        .unwrap()
}

async fn sql_rows(dir: &tempfile::TempDir, sql: &str) -> Vec<Vec<String>> {
    let db = libsql::Builder::new_local(dir.path().join("engram.db"))
        .build()
        .await
        .unwrap();
    let conn = db.connect().unwrap();
    let mut rows = conn.query(sql, ()).await.unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.unwrap() {
        let mut cols = Vec::new();
        for i in 0..row.column_count() {
            cols.push(match row.get_value(i).unwrap() {
                libsql::Value::Null => "NULL".to_owned(),
                libsql::Value::Integer(n) => n.to_string(),
                libsql::Value::Text(t) => t,
                other => format!("{other:?}"),
            });
        }
        out.push(cols);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_is_indexed_with_its_bad_files_skipped_or_degraded() {
    let dir = tempfile::tempdir().unwrap();
    project(&dir.path().join("repo"));
    let e = open(&dir).await;
    let phases = Mutex::new(Vec::new());
    let report = |p: &IndexProgress| {
        phases
            .lock()
            .unwrap()
            .push((p.phase, p.files_done, p.files_total))
    };
    let s = e
        .index(&options(), &report, &Arc::new(AtomicBool::new(false)))
        .await
        .unwrap();

    // 16 good files + blob.js + huge.ts + latin1.py + deep.ts; nothing ignored, nothing linked.
    assert_eq!(s.files_seen, 20, "{s:?}");
    assert_eq!(s.files_skipped, 2);
    assert_eq!(s.files_indexed, 18);
    let problem = |path: &str| {
        s.problems
            .iter()
            .filter(|p| p.path == path)
            .map(|p| p.issue)
            .collect::<Vec<_>>()
    };
    assert_eq!(problem("assets/blob.js"), [FileIssue::Binary]);
    assert_eq!(problem("big/huge.ts"), [FileIssue::TooLarge]);
    assert_eq!(problem("src/latin1.py"), [FileIssue::InvalidUtf8]);
    assert!(
        problem("src/deep.ts").contains(&FileIssue::TooDeep),
        "{:?}",
        problem("src/deep.ts")
    );

    let phases = phases.into_inner().unwrap();
    let names: Vec<_> = phases.iter().map(|p| p.0).collect();
    assert_eq!(names.first(), Some(&IndexPhase::Scanning));
    assert_eq!(names.last(), Some(&IndexPhase::Done));
    assert!(names.contains(&IndexPhase::Indexing) && names.contains(&IndexPhase::Resolving));
    assert_eq!(phases.last().unwrap().1, 20, "done counts every file");

    let chunks = e.chunks_of("src/auth/tokens.ts").await.unwrap();
    let sign = chunks
        .iter()
        .find(|c| c.qualified_name.as_deref() == Some("TokenService.sign"))
        .unwrap();
    assert_eq!(
        (sign.kind.as_str(), sign.language.as_str()),
        ("method", "typescript")
    );
    assert!(sign
        .context
        .starts_with("File: src/auth/tokens.ts | method: TokenService.sign"));
    let latin1 = e.chunks_of("./src/latin1.py").await.unwrap();
    assert!(
        latin1[0].content.contains("caf\u{fffd}"),
        "invalid bytes are replaced"
    );
    assert!(e.chunks_of("src/deep.ts").await.unwrap().len() > 1);
    assert!(e.chunks_of("big/huge.ts").await.unwrap().is_empty());
    assert!(e.chunks_of("generated/api.ts").await.unwrap().is_empty());
    let err = e.chunks_of("../engram.db").await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");

    // Search finds methods by their split names and by content.
    let hits = e.search_code("sign token", 5).await.unwrap();
    assert_eq!(
        hits[0].chunk.qualified_name.as_deref(),
        Some("TokenService.sign"),
        "{hits:?}"
    );
    let hits = e.search_code("rotate the secret", 5).await.unwrap();
    assert_eq!(hits[0].chunk.path, "README.md");
    // FTS5 syntax in user text is searched as words, never a syntax error.
    let words = e.search_code("NOT (\"roles\" OR", 5).await.unwrap();
    assert!(
        words
            .iter()
            .all(|h| h.chunk.content.to_lowercase().contains("roles")),
        "{words:?}"
    );
    assert!(e.search_code("\"(*", 5).await.unwrap().is_empty());

    let imports = sql_rows(
        &dir,
        "SELECT f.path, r.target, r.resolved_path FROM code_refs r JOIN code_files f ON f.id = r.file_id
         WHERE r.kind = 'imports' AND r.resolved_path IS NOT NULL ORDER BY 1, 2, 3",
    )
    .await;
    let imports: Vec<String> = imports.into_iter().map(|r| r.join(" ")).collect();
    assert_eq!(
        imports,
        [
            "app/orders.py . app/rules/__init__.py",
            "app/orders.py .models app/models.py",
            "app/orders.py .models app/models.py",
            "crate/src/cache.rs crate::clock::Clock crate/src/clock.rs",
            "crate/src/cache.rs eviction crate/src/cache/eviction.rs",
            "crate/src/lib.rs cache crate/src/cache.rs",
            "crate/src/lib.rs clock crate/src/clock.rs",
            "server/server.go example.com/app/internal/store internal/store",
            "src/auth/tokens.ts ../session/index src/session/index.ts",
            "src/auth/tokens.ts ./http src/auth/http.ts",
        ]
        .into_iter()
        .filter(|l| !l.ends_with("src/auth/http.ts"))
        .collect::<Vec<_>>()
    );
    // Calls resolve when the name has one definition in the project; the rest stay by name.
    let calls = sql_rows(
        &dir,
        "SELECT r.from_symbol, r.target, s.qualified_name FROM code_refs r
         LEFT JOIN code_symbols s ON s.id = r.resolved_symbol_id
         WHERE r.kind = 'calls' AND r.from_symbol IN ('requireUser', 'OrderService.price', 'TokenService.sign')
         ORDER BY 1, 2",
    )
    .await;
    let resolved = |from: &str, target: &str| {
        calls
            .iter()
            .find(|r| r[0] == from && r[1] == target)
            .map(|r| r[2].clone())
    };
    assert_eq!(
        resolved("requireUser", "verify").as_deref(),
        Some("TokenService.verify")
    );
    assert_eq!(
        resolved("OrderService.price", "total").as_deref(),
        Some("total")
    );
    assert_eq!(
        resolved("OrderService.price", "active").as_deref(),
        Some("active")
    );
    assert_eq!(
        resolved("TokenService.sign", "createHash").as_deref(),
        Some("NULL")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_run_skips_unchanged_files_and_follows_edits_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    project(&repo);
    let e = open(&dir).await;
    let first = run(&e).await;
    let again = run(&e).await;
    assert_eq!(again.files_indexed, 0, "{again:?}");
    assert_eq!(again.files_unchanged, first.files_seen);

    // Touched but identical: hashed, found unchanged, not rewritten.
    let same = std::fs::read(repo.join("src/http.ts")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(repo.join("src/http.ts"), same).unwrap();
    write(&repo, "src/session/index.ts", "export class Session {}\nexport function openSession(id: string) { return new Session(); }\n");
    std::fs::remove_file(repo.join("app/models.py")).unwrap();
    let third = run(&e).await;
    assert_eq!(
        (third.files_indexed, third.files_removed),
        (1, 1),
        "{third:?}"
    );
    assert_eq!(third.files_unchanged, first.files_seen - 2);
    let chunks = e.chunks_of("src/session/index.ts").await.unwrap();
    assert!(chunks
        .iter()
        .any(|c| c.symbols.contains(&"openSession".to_owned())));
    assert!(e.chunks_of("app/models.py").await.unwrap().is_empty());
    let orphans = sql_rows(
        &dir,
        "SELECT count(*) FROM code_chunks WHERE file_id NOT IN (SELECT id FROM code_files)
         UNION ALL SELECT count(*) FROM code_symbols WHERE file_id NOT IN (SELECT id FROM code_files)
         UNION ALL SELECT count(*) FROM code_refs WHERE stale_at IS NOT NULL",
    )
    .await;
    assert_eq!(orphans, [["0"], ["0"], ["0"]]);
    // The model's import no longer resolves to a file that is gone.
    let dangling = sql_rows(
        &dir,
        "SELECT count(*) FROM code_refs WHERE resolved_path = 'app/models.py'",
    )
    .await;
    assert_eq!(
        dangling,
        [["0"]],
        "imports of a removed file are resolved again, though their files did not change"
    );
    let fts = sql_rows(&dir, "SELECT count(*) FROM code_chunks").await;
    let hits = e.search_code("openSession", 5).await.unwrap();
    assert_eq!(
        hits.len(),
        1,
        "{} chunks; the old text is gone from the index",
        fts[0][0]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_aborted_run_keeps_whole_batches_and_the_next_run_completes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for i in 0..600 {
        write(
            &repo,
            &format!("src/m{i:03}.ts"),
            format!("export function f{i}(x: number) {{ return x + {i}; }}\n"),
        );
    }
    let e = open(&dir).await;
    let cancel = Arc::new(AtomicBool::new(false));
    let stop_early = |p: &IndexProgress| {
        if p.phase == IndexPhase::Indexing && p.files_done > 0 {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    let mut opts = options();
    opts.threads = 1;
    let err = e.index(&opts, &stop_early, &cancel).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_ABORTED");
    let partial = sql_rows(&dir, "SELECT count(*) FROM code_files").await[0][0]
        .parse::<u64>()
        .unwrap();
    assert!(partial < 600, "stopped before the end ({partial} files)");
    let per_file = sql_rows(&dir, "SELECT count(*) FROM code_files f WHERE chunk_count <> (SELECT count(*) FROM code_chunks c WHERE c.file_id = f.id)").await;
    assert_eq!(per_file, [["0"]], "every committed file is whole");

    let pre_cancelled = e
        .index(&options(), &|_| {}, &Arc::new(AtomicBool::new(true)))
        .await
        .unwrap_err();
    assert_eq!(pre_cancelled.code(), "ENGRAM_ABORTED");
    let done = run(&e).await;
    assert_eq!(done.files_indexed + done.files_unchanged, 600);
    assert_eq!(done.files_unchanged, partial);
    assert_eq!(e.search_code("f599", 1).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn one_index_run_per_project_at_a_time_and_a_root_is_required() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for i in 0..300 {
        write(
            &repo,
            &format!("src/m{i:03}.py"),
            format!("def f{i}():\n    return {i}\n"),
        );
    }
    let e = open(&dir).await;
    let (started, release) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let first = {
        let (e, started, release) = (e.clone(), started.clone(), release.clone());
        tokio::spawn(async move {
            // Holds the first run in its scanning report until the second call has been made.
            let hold = move |_: &IndexProgress| {
                started.store(true, Ordering::SeqCst);
                for _ in 0..1000 {
                    if release.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            };
            e.index(&options(), &hold, &Arc::new(AtomicBool::new(false)))
                .await
        })
    };
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let second = e
        .index(&options(), &|_| {}, &Arc::new(AtomicBool::new(false)))
        .await;
    release.store(true, Ordering::SeqCst);
    assert_eq!(second.unwrap_err().code(), "ENGRAM_CONFLICT");
    assert_eq!(first.await.unwrap().unwrap().files_indexed, 300);
    assert_eq!(
        run(&e).await.files_unchanged,
        300,
        "the claim is released when a run ends"
    );

    let rootless = Engram::open(OpenOptions::new(dir.path().join("engram.db")))
        .await
        .unwrap();
    let err = rootless
        .index(&options(), &|_| {}, &Arc::new(AtomicBool::new(false)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_resolves_to_its_own_file_first_then_to_the_only_definition_in_the_project() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write(
        &repo,
        "a.py",
        "def helper():\n    pass\n\ndef run_a():\n    helper()\n    shared()\n",
    );
    write(
        &repo,
        "b.py",
        "def helper():\n    pass\n\ndef run_b():\n    helper()\n",
    );
    write(&repo, "c.py", "def run_c():\n    helper()\n    shared()\n");
    write(&repo, "d.py", "def shared():\n    pass\n");
    let e = open(&dir).await;
    run(&e).await;
    let calls = sql_rows(
        &dir,
        "SELECT r.from_symbol || ' -> ' || r.target || ' = ' || coalesce(f.path || ':' || s.qualified_name, 'unresolved')
         FROM code_refs r LEFT JOIN code_symbols s ON s.id = r.resolved_symbol_id
         LEFT JOIN code_files f ON f.id = s.file_id WHERE r.kind = 'calls' ORDER BY 1",
    )
    .await;
    assert_eq!(
        calls.into_iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
        [
            "run_a -> helper = a.py:helper",
            "run_a -> shared = d.py:shared",
            "run_b -> helper = b.py:helper",
            "run_c -> helper = unresolved",
            "run_c -> shared = d.py:shared",
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_bigger_than_the_in_flight_budget_does_not_stall_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write(&repo, "src/a.ts", "export const a = 1;\n");
    write(&repo, "src/b.ts", "export const b = 2;\n");
    // Sparse: 100 MB by its size, over the 64 MiB budget and the size cap, never read.
    let big = std::fs::File::create(repo.join("data.json")).unwrap();
    big.set_len(100 * 1024 * 1024).unwrap();
    let e = open(&dir).await;
    let summary = tokio::time::timeout(std::time::Duration::from_secs(60), run(&e))
        .await
        .expect("the run finishes");
    assert_eq!((summary.files_indexed, summary.files_skipped), (2, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn keyword_search_keeps_to_its_project_when_another_crowds_the_ranking() {
    // Search ranks in the shared FTS index first and keeps its own project's rows; when
    // another project's better matches fill that ranking it must still find its own.
    let dir = tempfile::tempdir().unwrap();
    let open_project = |id: &'static str, files: Vec<(String, String)>| {
        let root = dir.path().join(id);
        for (path, text) in &files {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        let mut options = OpenOptions::new(dir.path().join("engram.db"));
        options.project_root = Some(root);
        options.project_id = Some(id.to_owned());
        Engram::open(options)
    };
    let crowd: Vec<(String, String)> = (0..60)
        .map(|i| {
            (
                format!("src/m{i}.ts"),
                format!("export function quasar{i}(quasar: number) {{ return quasar * {i} }}\n"),
            )
        })
        .collect();
    let other = open_project("crowd", crowd).await.unwrap();
    run(&other).await;
    let own = open_project(
        "own",
        vec![(
            "src/lone.ts".to_owned(),
            "export function lone() {\n  // one mention of a quasar, deep in a long text\n  return 1\n}\n"
                .to_owned(),
        )],
    )
    .await
    .unwrap();
    run(&own).await;
    let hits = own.search_code("quasar", 5).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].chunk.path, "src/lone.ts");
    let theirs = other.search_code("quasar", 5).await.unwrap();
    assert_eq!(theirs.len(), 5);
    assert!(theirs.iter().all(|h| h.chunk.path.starts_with("src/m")));
}

#[tokio::test(flavor = "multi_thread")]
async fn imports_find_a_file_added_after_them_and_lose_one_removed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    write(
        &root,
        "app/main.py",
        "from app.util import helper\n\n\ndef main():\n    return helper()\n",
    );
    write(
        &root,
        "web/page.ts",
        "import { render } from './view'\n\nexport const page = () => render()\n",
    );
    let e = open(&dir).await;
    run(&e).await;
    let imports = "SELECT f.path, coalesce(r.resolved_path, 'NULL') FROM code_refs r
                   JOIN code_files f ON f.id = r.file_id WHERE r.kind = 'imports' ORDER BY 1";
    let unresolved = vec![
        vec!["app/main.py".to_owned(), "NULL".to_owned()],
        vec!["web/page.ts".to_owned(), "NULL".to_owned()],
    ];
    assert_eq!(sql_rows(&dir, imports).await, unresolved);

    // The imported files appear; the importers are unchanged, yet their imports find them, and
    // the graph has the import edges (impact of the new file reaches its importer).
    write(&root, "app/util.py", "def helper():\n    return 1\n");
    write(
        &root,
        "web/view.ts",
        "export function render() { return 1 }\n",
    );
    let summary = run(&e).await;
    assert_eq!(summary.files_indexed, 2);
    assert_eq!(
        sql_rows(&dir, imports).await,
        vec![
            vec!["app/main.py".to_owned(), "app/util.py".to_owned()],
            vec!["web/page.ts".to_owned(), "web/view.ts".to_owned()],
        ]
    );
    let impact = e
        .impact("web/view.ts", &engram::graph::ImpactOptions::default())
        .await
        .unwrap();
    assert!(
        impact.affected.iter().any(|a| a.node.key == "web/page.ts"),
        "{:?}",
        impact
            .affected
            .iter()
            .map(|a| &a.node.key)
            .collect::<Vec<_>>()
    );

    // Removed again (through the path update a watcher makes): the imports are unresolved.
    std::fs::remove_file(root.join("app/util.py")).unwrap();
    std::fs::remove_file(root.join("web/view.ts")).unwrap();
    e.index_paths(
        &["app/util.py".to_owned(), "web/view.ts".to_owned()],
        &options(),
    )
    .await
    .unwrap();
    assert_eq!(sql_rows(&dir, imports).await, unresolved);
}

/// The parts rows of `path`'s chunks: (chunk kind, part symbol), in order.
async fn parts_of(db_path: &Path, path: &str) -> Vec<(String, String)> {
    let db = libsql::Builder::new_local(db_path).build().await.unwrap();
    let conn = db.connect().unwrap();
    let mut rows = conn
        .query(
            "SELECT c.kind, p.symbol FROM code_files f JOIN code_chunks c ON c.file_id = f.id
             JOIN code_chunk_parts p ON p.chunk_id = c.id WHERE f.path = ?1
             ORDER BY c.ordinal, p.ordinal",
            [path],
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.unwrap() {
        out.push((row.get(0).unwrap(), row.get(1).unwrap()));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_from_before_chunk_parts_reads_its_grouped_files_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    let small = "def one():\n    return 1\n\n\ndef two():\n    return 2\n";
    write(&root, "pkg/small.py", small);
    write(&root, "pkg/large.py", fixture("sample.py"));
    write(&root, "pkg/single.py", "def only():\n    return 42\n");
    let db_path = dir.path().join("engram.db");
    let e = open(&dir).await;
    run(&e).await;
    let mut on_small =
        engram::memory::RememberInput::new(engram::memory::MemoryType::Gotcha, "one() is 1");
    on_small.related_files = vec!["pkg/small.py".into()];
    let memory = e.remember(on_small).await.unwrap().memory;
    // Closed and awaited, not dropped: the contradiction scan that `remember` started keeps
    // the engine a moment longer, and an `open` meanwhile would join that engine (and its
    // schema statuses from the first open) instead of opening the file again.
    e.close().await;
    let expected = vec![
        ("block".to_owned(), "one".to_owned()),
        ("block".to_owned(), "two".to_owned()),
    ];
    assert_eq!(parts_of(&db_path, "pkg/small.py").await, expected);

    // Back to schema 8, as an older engram left it: no parts table, no graph log.
    {
        let db = libsql::Builder::new_local(&db_path).build().await.unwrap();
        let conn = db.connect().unwrap();
        conn.execute_batch(
            "DROP TABLE code_chunk_parts;
             DROP TABLE graph_log;
             UPDATE engram_schema SET version = 8 WHERE home = 'code';",
        )
        .await
        .unwrap();
    }
    // The file's time says it was edited long after the memory, but its content is as it was:
    // being read again for the upgrade is not an edit that sends the memory to review.
    std::fs::File::options()
        .write(true)
        .open(root.join("pkg/small.py"))
        .unwrap()
        .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60 * 86_400))
        .unwrap();
    let e = open(&dir).await;
    let code = e
        .engine()
        .schema()
        .iter()
        .find(|s| s.home == "code")
        .unwrap()
        .clone();
    // Migrations 9 (chunk parts) and 10 (the graph log) ran again.
    assert_eq!((code.version, code.applied), (10, 2));
    let again = run(&e).await;
    assert_eq!(again.memories_flagged_for_review, 0, "{again:?}");
    assert!(!e.get(&memory.id).await.unwrap().needs_review);
    e.close().await;
    // Only the files with grouped chunks were read again.
    assert_eq!(
        (again.files_indexed, again.files_unchanged),
        (2, 1),
        "{again:?}"
    );
    assert_eq!(parts_of(&db_path, "pkg/small.py").await, expected);
}
