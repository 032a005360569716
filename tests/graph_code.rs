//! The structural graph built by the indexer: impact analysis on fixture projects in
//! TypeScript, Python, Rust and Go with known import and call structure, the diff-based sync
//! on re-index, symbol-level staleness of attached memories, and the ranking helpers.

use std::path::Path;

use engram::code::IndexOptions;
use engram::graph::{
    CentralityMethod, CentralityOptions, Direction, EdgeInput, GraphSource, Impact, ImpactOptions,
    ModuleSummary, Neighbour, NeighbourOptions, NodeInput, Side,
};
use engram::memory::{MemoryType, RememberInput};
use engram::{Engram, OpenOptions};

mod common;
use common::copy_tree;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/graph");

/// A temp copy of a fixture project, indexed.
async fn indexed(language: &str) -> (tempfile::TempDir, Engram) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    copy_tree(&Path::new(FIXTURES).join(language), &root);
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(root);
    let e = Engram::open(options).await.unwrap();
    e.index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    (dir, e)
}

/// `depth key` lines of an impact, sorted within each depth.
fn levels(impact: &Impact) -> Vec<String> {
    let mut out: Vec<(u32, String)> = impact
        .affected
        .iter()
        .map(|r| (r.depth, r.node.key.clone()))
        .collect();
    out.sort();
    out.into_iter().map(|(d, k)| format!("{d} {k}")).collect()
}

/// (language, file, its impact, symbol, its impact): impacts as `depth key` lines.
type Case = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static [&'static str],
);

fn lines(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn impact_levels(e: &Engram, target: &str, layers: Option<Vec<u8>>) -> Vec<String> {
    let options = ImpactOptions {
        layers,
        ..ImpactOptions::default()
    };
    levels(&e.impact(target, &options).await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn impact_of_a_file_and_of_a_symbol_in_four_languages() {
    // Each fixture: util <- orders (import + call) <- api (import + call) <- main (import +
    // call), and an `unused` helper and an unrelated file that nothing reaches.
    let cases: &[Case] = &[
        (
            "ts",
            "src/util.ts",
            &[
                "1 src/orders.ts",
                "1 src/orders.ts:renderOrder",
                "2 src/api.ts",
                "2 src/api.ts:handle",
                "3 src/main.ts",
            ],
            "src/orders.ts:renderOrder",
            &["1 src/api.ts:handle", "2 src/main.ts"],
        ),
        (
            "py",
            "app/util.py",
            &[
                "1 app/orders.py",
                "1 app/orders.py:render_order",
                "2 app/api.py",
                "2 app/api.py:handle",
                "3 main.py",
            ],
            "app/orders.py:render_order",
            &["1 app/api.py:handle", "2 main.py"],
        ),
        (
            "rs",
            "src/util.rs",
            &[
                // main.rs declares `mod util;`.
                "1 src/main.rs",
                "1 src/orders.rs",
                "1 src/orders.rs:render_order",
                "2 src/api.rs",
                "2 src/api.rs:handle",
                "3 src/main.rs:main",
            ],
            "src/orders.rs:render_order",
            &["1 src/api.rs:handle", "2 src/main.rs:main"],
        ),
        (
            "go",
            "util/util.go",
            &[
                // Go imports name packages: orders.go imports the module util/.
                "1 orders/orders.go",
                "1 orders/orders.go:RenderOrder",
                "2 api/api.go",
                "2 api/api.go:Handle",
                "3 main.go",
                "3 main.go:main",
            ],
            "orders/orders.go:RenderOrder",
            &["1 api/api.go:Handle", "2 main.go:main"],
        ),
    ];
    for (language, file, file_impact, symbol, symbol_impact) in cases {
        let (_dir, e) = indexed(language).await;
        assert_eq!(
            impact_levels(&e, file, Some(vec![1])).await,
            lines(file_impact),
            "{language}: impact of {file}"
        );
        assert_eq!(
            impact_levels(&e, symbol, None).await,
            lines(symbol_impact),
            "{language}: impact of {symbol}"
        );
        // Depth is a cap: one hop gives the direct dependents only.
        let direct = ImpactOptions {
            max_depth: Some(1),
            layers: Some(vec![1]),
            ..ImpactOptions::default()
        };
        let one = levels(&e.impact(file, &direct).await.unwrap());
        let expected: Vec<String> = file_impact
            .iter()
            .filter(|l| l.starts_with("1 "))
            .map(|s| s.to_string())
            .collect();
        assert_eq!(one, expected, "{language}: direct dependents of {file}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn go_packages_are_modules_with_aggregated_imports() {
    let (_dir, e) = indexed("go").await;
    assert_eq!(
        impact_levels(&e, "util/", Some(vec![2])).await,
        lines(&["1 orders/", "2 api/"]),
        "module-level dependents of util/"
    );
    let api = e.node("api/").await.unwrap().unwrap();
    assert_eq!((api.layer, api.kind.as_str()), (2, "module"));
    let sub = e
        .subgraph(&lines(&["api/", "orders/", "util/"]))
        .await
        .unwrap();
    let edges: Vec<String> = sub
        .edges
        .iter()
        .map(|x| format!("{} {} {} {}", x.from, x.kind, x.to, x.weight))
        .collect();
    assert_eq!(
        edges,
        lines(&["api/ imports orders/ 1", "orders/ imports util/ 1"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn impact_lists_the_memories_on_affected_nodes_nearest_first() {
    let (_dir, e) = indexed("ts").await;
    let mut on_handle = RememberInput::new(
        MemoryType::Gotcha,
        "handle() must stay synchronous: the router does not await it",
    );
    on_handle.target_node_id = Some("src/api.ts:handle".into());
    let on_handle = e.remember(on_handle).await.unwrap().memory;
    let mut on_util = RememberInput::new(MemoryType::Decision, "Dates are ISO 8601, UTC, no time");
    on_util.related_files = vec!["src/util.ts".into()];
    let on_util = e.remember(on_util).await.unwrap().memory;
    let mut elsewhere = RememberInput::new(MemoryType::Pattern, "standalone() is a fixture");
    elsewhere.target_node_id = Some("src/other.ts:standalone".into());
    e.remember(elsewhere).await.unwrap();
    // Each link column has its own insert trigger: an impacted node alone links too.
    let mut on_orders = RememberInput::new(MemoryType::ErrorPattern, "renderOrder throws on NaN");
    on_orders.impacted_node_ids = vec!["src/orders.ts:renderOrder".into(), "nope".into()];
    let on_orders = e.remember(on_orders).await.unwrap().memory;

    let impact = e
        .impact("src/util.ts", &ImpactOptions::default())
        .await
        .unwrap();
    let got: Vec<(String, String, u32)> = impact
        .memories
        .iter()
        .map(|m| (m.memory.id.clone(), m.role.clone(), m.depth))
        .collect();
    assert_eq!(
        got,
        vec![
            (on_util.id.clone(), "file".to_string(), 0),
            (on_orders.id.clone(), "impacted".to_string(), 1),
            (on_handle.id.clone(), "target".to_string(), 2),
        ]
    );
    assert!(!impact.memories_truncated);
    // A forgotten memory is no longer attached.
    e.forget(&on_handle.id, None).await.unwrap();
    let impact = e
        .impact("src/util.ts", &ImpactOptions::default())
        .await
        .unwrap();
    assert_eq!(impact.memories.len(), 2);
    // With room for one, a forgotten nearest memory gives its place to the next one.
    e.forget(&on_util.id, None).await.unwrap();
    let room_for_one = ImpactOptions {
        memory_limit: 1,
        ..ImpactOptions::default()
    };
    let impact = e.impact("src/util.ts", &room_for_one).await.unwrap();
    let got: Vec<_> = impact
        .memories
        .iter()
        .map(|m| m.memory.id.clone())
        .collect();
    assert_eq!(got, vec![on_orders.id.clone()]);
    // Only live memories past the limit count as cut: the other two are forgotten.
    assert!(!impact.memories_truncated);
    let mut later = RememberInput::new(MemoryType::Gotcha, "handle() logs every request");
    later.target_node_id = Some("src/api.ts:handle".into());
    e.remember(later).await.unwrap();
    let impact = e.impact("src/util.ts", &room_for_one).await.unwrap();
    assert_eq!(impact.memories.len(), 1);
    assert!(impact.memories_truncated);
    let none = ImpactOptions {
        memory_limit: 0,
        ..ImpactOptions::default()
    };
    let impact = e.impact("src/util.ts", &none).await.unwrap();
    assert!(impact.memories.is_empty() && impact.memories_truncated);
    // Unknown targets are a clear error.
    let err = e
        .impact("src/nope.ts", &ImpactOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_symbol_marks_only_its_memories_stale() {
    let (dir, e) = indexed("ts").await;
    let root = dir.path().join("project");
    let mut on_format = RememberInput::new(MemoryType::Gotcha, "formatDate drops the time zone");
    on_format.target_node_id = Some("src/util.ts:formatDate".into());
    let on_format = e.remember(on_format).await.unwrap().memory;
    let mut on_unused = RememberInput::new(MemoryType::Gotcha, "unusedHelper is kept for the CLI");
    on_unused.impacted_node_ids = vec!["src/util.ts:unusedHelper".into()];
    let on_unused = e.remember(on_unused).await.unwrap().memory;

    // Edit formatDate's body only; unusedHelper's text is untouched (its lines move).
    let util = root.join("src/util.ts");
    let text = std::fs::read_to_string(&util).unwrap().replace(
        "return d.toISOString().slice(0, 10);",
        "// UTC on purpose\n  return d.toISOString().slice(0, 10);",
    );
    std::fs::write(&util, text).unwrap();
    let summary = e
        .index_paths(&["src/util.ts".to_string()], &IndexOptions::default())
        .await
        .unwrap();
    assert_eq!(summary.graph.memories_marked_stale, 1);
    let format_after = e.get(&on_format.id).await.unwrap();
    assert!(format_after.stale_at.is_some() && format_after.needs_review);
    let unused_after = e.get(&on_unused.id).await.unwrap();
    assert!(unused_after.stale_at.is_none() && !unused_after.needs_review);
    // The edit changed no edge: nothing structural was rewritten.
    assert_eq!(
        (summary.graph.edges_written, summary.graph.edges_removed),
        (0, 0),
        "{:?}",
        summary.graph
    );
    let node = e.node("src/util.ts:unusedHelper").await.unwrap().unwrap();
    assert_eq!(node.start_line, Some(6), "line numbers follow the edit");

    // Deleting the symbol marks the memories on it stale too.
    let text = std::fs::read_to_string(&util).unwrap();
    let cut = text.find("export function unusedHelper").unwrap();
    std::fs::write(&util, &text[..cut]).unwrap();
    let summary = e
        .index_paths(&["src/util.ts".to_string()], &IndexOptions::default())
        .await
        .unwrap();
    assert_eq!(summary.graph.nodes_removed, 1);
    assert!(e.get(&on_unused.id).await.unwrap().stale_at.is_some());
    assert!(e.node("src/util.ts:unusedHelper").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn re_index_keeps_the_graph_equal_to_a_fresh_build() {
    let (dir, e) = indexed("py").await;
    let root = dir.path().join("project");
    // Move render_order's call target: orders now calls a new helper in a new module, and
    // api stops importing orders.
    std::fs::create_dir_all(root.join("app/fmt")).unwrap();
    std::fs::write(
        root.join("app/fmt/dates.py"),
        "def iso_day(d):\n    return d.isoformat()[:10]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("app/orders.py"),
        "from app.fmt.dates import iso_day\n\n\ndef render_order(order_id, at):\n    return f\"{order_id} on {iso_day(at)}\"\n",
    )
    .unwrap();
    std::fs::remove_file(root.join("app/other.py")).unwrap();
    e.index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    assert_eq!(
        impact_levels(&e, "app/util.py", None).await,
        Vec::<String>::new(),
        "nothing depends on util any more"
    );
    assert_eq!(
        impact_levels(&e, "app/fmt/dates.py", Some(vec![1])).await,
        lines(&[
            "1 app/orders.py",
            "1 app/orders.py:render_order",
            "2 app/api.py",
            "2 app/api.py:handle",
            "3 main.py",
        ])
    );
    assert!(e.node("app/other.py").await.unwrap().is_none());
    assert_eq!(
        impact_levels(&e, "app/fmt/", Some(vec![2])).await,
        lines(&["1 app/"])
    );

    // A fresh index of the same tree into a new file gives the same graph.
    let mut options = OpenOptions::new(dir.path().join("fresh.db"));
    options.project_root = Some(root.clone());
    let fresh = Engram::open(options).await.unwrap();
    fresh
        .index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    for key in [
        "app/util.py",
        "app/fmt/dates.py",
        "app/orders.py:render_order",
        "app/fmt/",
        "app/",
    ] {
        assert_eq!(
            impact_levels(&e, key, None).await,
            impact_levels(&fresh, key, None).await,
            "impact of {key}"
        );
    }
    // And removing a whole module prunes its node.
    std::fs::remove_dir_all(root.join("app/fmt")).unwrap();
    e.index_paths(&["app/fmt".to_string()], &IndexOptions::default())
        .await
        .unwrap();
    assert!(e.node("app/fmt/").await.unwrap().is_none());
    assert!(e.node("app/").await.unwrap().is_some());
}

/// Edits elsewhere move call edges by name resolution: a second definition of a called name
/// makes the call ambiguous (its edge goes), removing it makes the call resolve again; an
/// edit that keeps a file's definitions changes no edge. Each state equals a fresh build.
#[tokio::test(flavor = "multi_thread")]
async fn edges_follow_definitions_added_and_removed_elsewhere() {
    let (dir, e) = indexed("py").await;
    let root = dir.path().join("project");
    let callers = |e: &Engram| {
        let e = e.clone();
        async move { impact_levels(&e, "app/util.py:format_date", Some(vec![1])).await }
    };
    let before = callers(&e).await;
    assert!(before.contains(&"1 app/orders.py:render_order".to_owned()));

    // Body-only edit: definitions unchanged, so no edge is touched.
    std::fs::write(
        root.join("app/util.py"),
        "def format_date(d):\n    return str(d)[:10]\n\n\ndef unused_helper():\n    return 43\n",
    )
    .unwrap();
    let paths = ["app/util.py".to_owned()];
    let summary = e
        .index_paths(&paths, &IndexOptions::default())
        .await
        .unwrap();
    assert_eq!(summary.files_indexed, 1);
    assert_eq!(
        (summary.graph.edges_written, summary.graph.edges_removed),
        (0, 0)
    );
    assert_eq!(callers(&e).await, before);

    // A second `format_date` in another file: the call no longer resolves.
    let other = root.join("app/other.py");
    let original = std::fs::read_to_string(&other).unwrap();
    std::fs::write(
        &other,
        format!("{original}\n\ndef format_date(x):\n    return x\n"),
    )
    .unwrap();
    let paths = ["app/other.py".to_owned()];
    let summary = e
        .index_paths(&paths, &IndexOptions::default())
        .await
        .unwrap();
    assert!(summary.graph.edges_removed >= 1, "{:?}", summary.graph);
    let ambiguous = callers(&e).await;
    assert!(!ambiguous.contains(&"1 app/orders.py:render_order".to_owned()));
    assert_same_graph_as_fresh(&dir, &e, "ambiguous").await;

    // Gone again: the call resolves to util's definition as before.
    std::fs::write(&other, original).unwrap();
    e.index_paths(&paths, &IndexOptions::default())
        .await
        .unwrap();
    assert_eq!(callers(&e).await, before);
    assert_same_graph_as_fresh(&dir, &e, "restored").await;

    // A rename moves the definition: the unchanged caller's edge follows it.
    std::fs::rename(root.join("app/util.py"), root.join("app/helpers.py")).unwrap();
    let renamed = ["app/util.py".to_owned(), "app/helpers.py".to_owned()];
    e.index_paths(&renamed, &IndexOptions::default())
        .await
        .unwrap();
    let moved = impact_levels(&e, "app/helpers.py:format_date", Some(vec![1])).await;
    assert!(
        moved.contains(&"1 app/orders.py:render_order".to_owned()),
        "{moved:?}"
    );
    assert_same_graph_as_fresh(&dir, &e, "renamed").await;
}

/// Indexes the project afresh into another file and compares impacts of every node.
async fn assert_same_graph_as_fresh(dir: &tempfile::TempDir, e: &Engram, label: &str) {
    let mut options = OpenOptions::new(dir.path().join(format!("fresh-{label}.db")));
    options.project_root = Some(dir.path().join("project"));
    let fresh = Engram::open(options).await.unwrap();
    fresh
        .index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    let keys = fresh.node_keys(None, None, 10_000).await.unwrap();
    assert_eq!(
        e.node_keys(None, None, 10_000).await.unwrap(),
        keys,
        "{label}"
    );
    for key in keys {
        assert_eq!(
            impact_levels(e, &key, None).await,
            impact_levels(&fresh, &key, None).await,
            "{label}: impact of {key}"
        );
    }
}

/// Retrieval's graph helpers: the 1-hop neighbourhood of a file (standing for its symbols)
/// in each direction, and centrality over the import chain main -> api -> orders -> util.
#[tokio::test(flavor = "multi_thread")]
async fn neighbours_and_centrality_rank_the_fixture() {
    let (_dir, e) = indexed("py").await;
    let keys_of = |found: &[Neighbour]| {
        let mut keys: Vec<String> = found.iter().map(|n| n.node.key.clone()).collect();
        keys.sort();
        keys
    };
    let orders = ["app/orders.py".to_owned()];
    let both = e
        .neighbours(&orders, &NeighbourOptions::default())
        .await
        .unwrap();
    assert_eq!(
        keys_of(&both),
        [
            "app/api.py",
            "app/api.py:handle",
            "app/util.py",
            "app/util.py:format_date"
        ]
    );
    assert!(both.iter().all(|n| n.linked_to == orders));
    let out = NeighbourOptions {
        direction: Direction::Out,
        ..NeighbourOptions::default()
    };
    let out = e.neighbours(&orders, &out).await.unwrap();
    assert_eq!(keys_of(&out), ["app/util.py", "app/util.py:format_date"]);
    // Without its symbols the file only has its import neighbours.
    let file_only = NeighbourOptions {
        include_contained: false,
        ..NeighbourOptions::default()
    };
    let file_only = e.neighbours(&orders, &file_only).await.unwrap();
    assert_eq!(keys_of(&file_only), ["app/api.py", "app/util.py"]);
    // Two members of the set: a neighbour of both names both; unknown keys are skipped.
    let pair = [
        "app/orders.py".to_owned(),
        "main.py".to_owned(),
        "nope".to_owned(),
    ];
    let pair = e
        .neighbours(&pair, &NeighbourOptions::default())
        .await
        .unwrap();
    let api = pair.iter().find(|n| n.node.key == "app/api.py").unwrap();
    assert_eq!(api.linked_to, ["app/orders.py", "main.py"]);
    assert_eq!(pair[0].node.key, "app/api.py", "linked twice: heaviest");
    // A file given with its module counts once, for itself (and its symbols for it).
    let nested = ["app/".to_owned(), "app/api.py".to_owned()];
    let nested = e
        .neighbours(&nested, &NeighbourOptions::default())
        .await
        .unwrap();
    let main = nested.iter().find(|n| n.node.key == "main.py").unwrap();
    assert_eq!(
        (main.edges, main.linked_to.as_slice()),
        (2, &["app/api.py".to_owned()][..]),
        "main imports api.py and calls api.py:handle"
    );

    let chain: Vec<String> = ["main.py", "app/api.py", "app/orders.py", "app/util.py"]
        .map(String::from)
        .to_vec();
    let pagerank = e
        .centrality(&chain, &CentralityOptions::default())
        .await
        .unwrap();
    let order: Vec<&str> = pagerank.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        order,
        ["app/util.py", "app/orders.py", "app/api.py", "main.py"],
        "{pagerank:?}"
    );
    assert!((pagerank.iter().map(|s| s.score).sum::<f64>() - 1.0).abs() < 1e-9);
    let degree = CentralityOptions {
        method: CentralityMethod::Degree,
        ..CentralityOptions::default()
    };
    let degree = e.centrality(&chain, &degree).await.unwrap();
    let score = |key: &str| degree.iter().find(|s| s.key == key).unwrap().score;
    assert_eq!((score("app/api.py"), score("app/orders.py")), (1.0, 1.0));
    assert_eq!((score("main.py"), score("app/util.py")), (0.5, 0.5));
}

/// Layer 2 from an LLM: the deriver sees module summaries, its relations are written as
/// `llm` layer-2 nodes and edges with their closure, a later answer replaces an earlier one
/// (dropping relations and orphaned concept nodes), and bad answers change nothing.
#[tokio::test(flavor = "multi_thread")]
async fn derived_relations_replace_their_previous_answer() {
    let (_dir, e) = indexed("go").await;
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let seen = std::sync::Mutex::new(Vec::new());
    let summary = e
        .derive_relations(
            None,
            |modules: Vec<ModuleSummary>| {
                seen.lock().unwrap().extend(modules);
                async {
                    Ok(Some((
                        vec![NodeInput::new("concept:billing", "concept")],
                        vec![
                            EdgeInput::new("orders/", "concept:billing", "part_of"),
                            EdgeInput::new("api/", "orders/", "depends_on"),
                        ],
                    )))
                }
            },
            &cancel,
        )
        .await
        .unwrap();
    let seen = seen.into_inner().unwrap();
    let keys: Vec<&str> = seen.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(keys, ["api/", "orders/", "util/"]);
    let orders = &seen[1];
    assert_eq!(orders.files, ["orders/orders.go"]);
    assert_eq!(
        (orders.imports.as_slice(), orders.imported_by.as_slice()),
        (&["util/".to_owned()][..], &["api/".to_owned()][..])
    );
    assert!(!orders.symbols.is_empty());
    assert_eq!(
        (
            summary.modules,
            summary.nodes_written,
            summary.edges_written
        ),
        (3, 1, 2)
    );
    let concept = e.node("concept:billing").await.unwrap().unwrap();
    assert_eq!((concept.layer, concept.source), (2, GraphSource::Llm));
    // The closure follows: api/ reaches the concept through orders/, and so does everything
    // importing the orders package (Go imports name the package's module node).
    let up = e
        .reach("concept:billing", Side::Ancestors, None, 100)
        .await
        .unwrap();
    let mut up: Vec<(String, u32)> = up
        .nodes
        .iter()
        .map(|r| (r.node.key.clone(), r.depth))
        .collect();
    up.sort();
    let expected = [
        ("api/", 2),
        ("api/api.go", 2),
        ("main.go", 3),
        ("orders/", 1),
    ];
    assert_eq!(up, expected.map(|(k, d)| (k.to_owned(), d)));

    // A new answer for all modules keeps one relation: the other and the concept go.
    let summary = e
        .derive_relations(
            None,
            |_| async {
                Ok(Some((
                    vec![],
                    vec![EdgeInput::new("api/", "orders/", "depends_on")],
                )))
            },
            &cancel,
        )
        .await
        .unwrap();
    assert_eq!((summary.edges_removed, summary.nodes_removed), (1, 1));
    assert!(e.node("concept:billing").await.unwrap().is_none());

    // An edge touching no module asked about, or overwriting a code edge, is refused whole.
    let only_util = ["util/".to_owned()];
    let stray = e
        .derive_relations(
            Some(&only_util),
            |_| async {
                Ok(Some((
                    vec![],
                    vec![EdgeInput::new("api/", "orders/", "calls")],
                )))
            },
            &cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(stray.code(), "ENGRAM_INVALID_ARG");
    let code_edge = e
        .derive_relations(
            None,
            |_| async {
                let mut edge = EdgeInput::new("api/", "orders/", "imports");
                edge.layer = 2;
                Ok(Some((vec![], vec![edge])))
            },
            &cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(code_edge.code(), "ENGRAM_CONFLICT");
    // None leaves the relations as they are.
    e.derive_relations(None, |_| async { Ok(None) }, &cancel)
        .await
        .unwrap();
    // An answer for orders/ alone keeps api/ -> orders/: that edge belongs to api/.
    let only_orders = ["orders/".to_owned()];
    let kept = e
        .derive_relations(
            Some(&only_orders),
            |_| async { Ok(Some((vec![], vec![]))) },
            &cancel,
        )
        .await
        .unwrap();
    assert_eq!(kept.edges_removed, 0);
    // What an agent wrote is not the deriver's to replace.
    e.inject_graph(&[NodeInput::new("concept:agent", "concept")], &[])
        .await
        .unwrap();
    let taken = e
        .derive_relations(
            None,
            |_| async {
                Ok(Some((
                    vec![NodeInput::new("concept:agent", "concept")],
                    vec![EdgeInput::new("api/", "concept:agent", "uses")],
                )))
            },
            &cancel,
        )
        .await
        .unwrap_err();
    assert_eq!(taken.code(), "ENGRAM_CONFLICT");
    assert_eq!(
        e.node("concept:agent").await.unwrap().unwrap().source,
        GraphSource::Agent
    );
    let down = e
        .reach("api/", Side::Descendants, Some(1), 100)
        .await
        .unwrap();
    assert!(down.nodes.iter().any(|r| r.node.key == "orders/"));
}

/// Knowledge written about code goes stale with it: an agent node linked to a symbol whose
/// text changed, and an LLM relation of a module the index changed, until written again.
#[tokio::test(flavor = "multi_thread")]
async fn knowledge_about_changed_code_is_marked_stale_until_rewritten() {
    let (dir, e) = indexed("py").await;
    let root = dir.path().join("project");
    let concept = NodeInput::new("concept:dates", "concept");
    let about = EdgeInput::new("concept:dates", "app/util.py:format_date", "explains");
    let other = NodeInput::new("concept:orders", "concept");
    let about_other = EdgeInput::new("concept:orders", "app/orders.py", "explains");
    e.inject_graph(&[concept.clone(), other], &[about, about_other])
        .await
        .unwrap();
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let derived = || {
        e.derive_relations(
            None,
            |_| async {
                Ok(Some((
                    vec![],
                    vec![EdgeInput::new("app/", "concept:dates", "owns")],
                )))
            },
            &cancel,
        )
    };
    derived().await.unwrap();

    std::fs::write(
        root.join("app/util.py"),
        "def format_date(d):\n    return str(d)\n\n\ndef unused_helper():\n    return 42\n",
    )
    .unwrap();
    let summary = e
        .index_paths(&["app/util.py".to_owned()], &IndexOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (
            summary.graph.graph_nodes_marked_stale,
            summary.graph.edges_marked_stale
        ),
        (1, 1)
    );
    assert!(e
        .node("concept:dates")
        .await
        .unwrap()
        .unwrap()
        .stale_at
        .is_some());
    assert!(e
        .node("concept:orders")
        .await
        .unwrap()
        .unwrap()
        .stale_at
        .is_none());
    let owns = |e: Engram| async move {
        e.subgraph(&["app/".to_owned(), "concept:dates".to_owned()])
            .await
            .unwrap()
            .edges
            .into_iter()
            .find(|edge| edge.kind == "owns")
            .unwrap()
    };
    assert!(owns(e.clone()).await.stale_at.is_some());

    // Writing them again clears the flags.
    e.inject_graph(&[concept], &[]).await.unwrap();
    assert!(e
        .node("concept:dates")
        .await
        .unwrap()
        .unwrap()
        .stale_at
        .is_none());
    derived().await.unwrap();
    assert!(owns(e.clone()).await.stale_at.is_none());
}

/// `limit` keeps the nearest affected nodes and says it cut; `via` names the path from the
/// target up, through the symbol of the target that was reached.
#[tokio::test(flavor = "multi_thread")]
async fn impact_limit_keeps_the_nearest_and_paths_read_from_the_target() {
    let (_dir, e) = indexed("py").await;
    let all = e
        .impact("app/util.py", &ImpactOptions::default())
        .await
        .unwrap();
    assert!(!all.truncated);
    let depths: Vec<u32> = all.affected.iter().map(|r| r.depth).collect();
    let mut sorted = depths.clone();
    sorted.sort();
    assert_eq!(depths, sorted, "nearest first");
    let handle = all
        .affected
        .iter()
        .find(|r| r.node.key == "app/api.py:handle")
        .unwrap();
    assert_eq!(
        handle.via,
        ["app/util.py:format_date", "app/orders.py:render_order"]
    );
    let two = ImpactOptions {
        limit: 2,
        ..ImpactOptions::default()
    };
    let cut = e.impact("app/util.py", &two).await.unwrap();
    assert!(cut.truncated);
    assert_eq!(
        cut.affected,
        all.affected[..2],
        "the first two of the full answer"
    );
    assert!(
        cut.affected.iter().all(|r| r.depth == 1),
        "{:?}",
        levels(&cut)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn file_neighbours_are_one_edge_apart_in_either_direction() {
    let (_dir, e) = indexed("ts").await;
    let files = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    let near = e
        .file_neighbours(&files(&["src/orders.ts", "src/main.ts", "src/nowhere.ts"]))
        .await
        .unwrap();
    let of = |file: &str| -> Vec<String> {
        near.get(file)
            .map(|n| n.iter().cloned().collect())
            .unwrap_or_default()
    };
    // orders.ts imports util.ts and is imported by api.ts; main.ts imports api.ts only.
    assert_eq!(of("src/orders.ts"), ["src/api.ts", "src/util.ts"]);
    assert_eq!(of("src/main.ts"), ["src/api.ts"]);
    assert!(!near.contains_key("src/nowhere.ts"));
    assert!(e.file_neighbours(&[]).await.unwrap().is_empty());
}

/// A memory about a file that is deleted is stale and up for review after the next index run
/// (it was left standing before); one about a file that is only edited, or still there, is not.
#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_file_marks_the_memories_on_it_stale() {
    let (dir, e) = indexed("ts").await;
    let root = dir.path().join("project");
    let on_file = |content: &str, file: &str| {
        let mut input = RememberInput::new(MemoryType::Gotcha, content);
        input.related_files = vec![file.into()];
        input
    };
    let doomed = e
        .remember(on_file("formatDate drops the time zone", "src/util.ts"))
        .await
        .unwrap()
        .memory;
    let kept = e
        .remember(on_file(
            "the app entry reads the config once",
            "src/main.ts",
        ))
        .await
        .unwrap()
        .memory;

    // An edit leaves what is known about the file standing.
    let app = root.join("src/main.ts");
    let text = std::fs::read_to_string(&app).unwrap();
    std::fs::write(&app, format!("// entry\n{text}")).unwrap();
    std::fs::remove_file(root.join("src/util.ts")).unwrap();
    let summary = e
        .index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    assert_eq!(summary.files_removed, 1);
    let doomed = e.get(&doomed.id).await.unwrap();
    assert!(
        doomed.stale_at.is_some() && doomed.needs_review,
        "{doomed:?}"
    );
    let kept = e.get(&kept.id).await.unwrap();
    assert!(kept.stale_at.is_none() && !kept.needs_review, "{kept:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edit_long_after_a_memory_flags_it_for_review() {
    use std::time::{Duration, SystemTime};
    let (dir, e) = indexed("ts").await;
    let root = dir.path().join("project");
    let on_file = |content: &str, file: &str| {
        let mut input = RememberInput::new(MemoryType::Gotcha, content);
        input.related_files = vec![file.into()];
        input
    };
    let late = e
        .remember(on_file("formatDate drops the time zone", "src/util.ts"))
        .await
        .unwrap()
        .memory;
    let soon = e
        .remember(on_file(
            "the app entry reads the config once",
            "src/main.ts",
        ))
        .await
        .unwrap()
        .memory;
    assert!(!late.needs_review && !soon.needs_review);
    let day = Duration::from_secs(86_400);
    let edit = |file: &str, after: Duration, change: bool| {
        let path = root.join(file);
        if change {
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, format!("// edited\n{text}")).unwrap();
        }
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(SystemTime::now() + after)
            .unwrap();
    };
    // Edited 31 days after its memory, 10 days after; a file touched but not changed.
    edit("src/util.ts", 31 * day, true);
    edit("src/main.ts", 10 * day, true);
    let untouched = e
        .remember(on_file("other holds the leftovers", "src/other.ts"))
        .await;
    let untouched = untouched.unwrap().memory;
    edit("src/other.ts", 60 * day, false);

    let summary = e
        .index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    assert_eq!(summary.memories_flagged_for_review, 1, "{summary:?}");
    let late = e.get(&late.id).await.unwrap();
    assert!(late.needs_review && late.stale_at.is_none(), "{late:?}");
    assert!(!e.get(&soon.id).await.unwrap().needs_review);
    assert!(!e.get(&untouched.id).await.unwrap().needs_review);
    // Reviewed (written again): an edit soon after it flags nothing.
    let reviewed = engram::memory::MemoryPatch {
        needs_review: Some(false),
        ..Default::default()
    };
    e.update(&late.id, reviewed).await.unwrap();
    edit("src/util.ts", 5 * day, true);
    let summary = e
        .index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    assert_eq!(summary.memories_flagged_for_review, 0);
    assert!(!e.get(&late.id).await.unwrap().needs_review);
}
