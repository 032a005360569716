//! The in-process graph index (issue 38) answers `impact()` exactly as the graph tables do:
//! every node of the fixture projects in four languages (by key, and files also by absolute
//! path), with memories attached at every role (every fifth forgotten), under the default
//! options and each option that changes the answer; ties between seeds; two projects in one
//! file; an index is a snapshot of its load. `reach()` (both sides) and retrieval's file
//! neighbourhood answer as the tables do too. The engine's served index follows every kind of
//! graph write (cold and incremental index runs, file edits and removals, module imports,
//! authored nodes and edges, memories) to what a fresh load gives, also while answers and
//! writes run at once.

use std::path::Path;

use engram::code::IndexOptions;
use engram::graph::{Direction, EdgeInput, ImpactOptions, NeighbourOptions, NodeInput, Side};
use engram::memory::{MemoryPatch, MemoryType, RememberInput};
use engram::{Engram, OpenOptions};

mod common;
use common::copy_tree;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/graph");

/// Every node key of the engine's project, sorted (from a fresh load of the graph index).
async fn sorted_node_keys(e: &Engram) -> Vec<String> {
    let mut keys: Vec<String> = e
        .load_graph_index()
        .await
        .unwrap()
        .keys()
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys
}

/// A temp copy of a fixture project, indexed, with memories on some of its nodes.
async fn indexed_with_memories(language: &str) -> (tempfile::TempDir, Engram, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    copy_tree(&Path::new(FIXTURES).join(language), &root);
    if language == "go" {
        // A package no file imports: a file of it does not stand for its package.
        std::fs::create_dir_all(root.join("unused")).unwrap();
        std::fs::write(
            root.join("unused/unused.go"),
            "package unused\n\nfunc Lonely() int { return helper() }\n",
        )
        .unwrap();
        std::fs::write(
            root.join("unused/helper.go"),
            "package unused\n\nfunc helper() int { return 1 }\n",
        )
        .unwrap();
    }
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(root);
    let e = Engram::open(options).await.unwrap();
    e.index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    let keys = sorted_node_keys(&e).await;
    let files: Vec<&String> = keys
        .iter()
        .filter(|k| !k.contains(':') && !k.ends_with('/'))
        .collect();
    let symbols: Vec<&String> = keys.iter().filter(|k| k.contains(':')).collect();
    // One memory on every node (modules and packages too), each also on a file and a symbol.
    for (i, key) in keys.iter().enumerate() {
        let mut input = RememberInput::new(MemoryType::Gotcha, format!("note {i} on {key}"));
        input.target_node_id = Some(key.clone());
        input.related_files = vec![files[i % files.len()].clone()];
        input.impacted_node_ids = vec![symbols[(i * 7 + 3) % symbols.len()].clone()];
        let remembered = e.remember(input).await.unwrap().memory;
        if i % 5 == 4 {
            e.forget(&remembered.id, None).await.unwrap();
        }
    }
    (dir, e, keys)
}

#[tokio::test]
async fn the_index_answers_impact_as_the_graph_tables_do() {
    for language in ["ts", "py", "rs", "go"] {
        let (dir, e, keys) = indexed_with_memories(language).await;
        let index = e.load_graph_index().await.unwrap();
        let size = index.size();
        let stats = e.graph_stats().await.unwrap();
        assert_eq!(
            size.nodes as u64,
            stats.nodes_by_layer.iter().sum::<u64>(),
            "{language}"
        );
        assert_eq!(size.closure_rows as u64, stats.closure_rows, "{language}");
        assert!(
            size.closure_rows > 0 && size.links > 0 && size.bytes > 0,
            "{language}: {size:?}"
        );
        let root = dir.path().join("project");
        let variants = [
            ImpactOptions::default(),
            ImpactOptions {
                max_depth: Some(1),
                ..ImpactOptions::default()
            },
            ImpactOptions {
                layers: Some(vec![1]),
                ..ImpactOptions::default()
            },
            ImpactOptions {
                layers: Some(vec![2]),
                ..ImpactOptions::default()
            },
            ImpactOptions {
                limit: 2,
                memory_limit: 1,
                ..ImpactOptions::default()
            },
        ];
        let (mut with_affected, mut with_memories, mut truncated, mut memories_cut) = (0, 0, 0, 0);
        for key in &keys {
            let mut targets = vec![key.clone()];
            if !key.contains(':') && !key.ends_with('/') {
                // A file as an absolute path inside the root.
                targets.push(root.join(key).to_string_lossy().into_owned());
            }
            for target in &targets {
                for options in &variants {
                    let from_tables = e.impact_from_tables(target, options).await.unwrap();
                    let from_index = e.impact_through(&index, target, options).await.unwrap();
                    assert_eq!(from_index, from_tables, "{language}: {target} {options:?}");
                    with_affected += usize::from(!from_tables.affected.is_empty());
                    with_memories += usize::from(!from_tables.memories.is_empty());
                    truncated += usize::from(from_tables.truncated);
                    memories_cut += usize::from(from_tables.memories_truncated);
                }
            }
        }
        // The comparison covered answers with content, not only empty ones.
        assert!(
            with_affected > 0 && with_memories > 0 && truncated > 0 && memories_cut > 0,
            "{language}"
        );
        let missing = e
            .impact_through(&index, "no/such/file.ts", &ImpactOptions::default())
            .await;
        assert_eq!(missing.unwrap_err().code(), "ENGRAM_NOT_FOUND");
    }
}

/// `reach()` from the index equals the closure table's answer on every node, both sides,
/// at two depths and with limits that cut the answer.
#[tokio::test]
async fn the_index_answers_reach_as_the_closure_table_does() {
    for language in ["ts", "py", "rs", "go"] {
        let (_dir, e, keys) = indexed_with_memories(language).await;
        let index = e.load_graph_index().await.unwrap();
        let (mut answered, mut truncated) = (0, 0);
        for key in &keys {
            for side in [Side::Ancestors, Side::Descendants] {
                for (depth, limit) in [(None, 500), (Some(1), 500), (Some(2), 3), (None, 1)] {
                    let from_tables = e.reach_from_tables(key, side, depth, limit).await.unwrap();
                    let from_index = e.reach_through(&index, key, side, depth, limit).unwrap();
                    assert_eq!(
                        from_index, from_tables,
                        "{language}: {key} {side:?} {depth:?} {limit}"
                    );
                    answered += usize::from(from_tables.nodes.len() > 1);
                    truncated += usize::from(from_tables.truncated);
                }
            }
        }
        // Answers of several nodes (so their order counts) and cut ones were compared.
        assert!(
            answered > 0 && truncated > 0,
            "{language}: {answered} {truncated}"
        );
        // Authored edges whose weights order the answer against the keys' order.
        let nodes: Vec<NodeInput> = ["hub", "low", "mid", "top", "tip"]
            .map(|k| NodeInput::new(k, "concept"))
            .to_vec();
        let weighted = |from: &str, to: &str, weight: f64| EdgeInput {
            weight,
            ..EdgeInput::new(from, to, "uses")
        };
        let edges = [
            weighted("low", "hub", 0.2),
            weighted("mid", "hub", 0.5),
            weighted("top", "hub", 0.9),
            weighted("tip", "low", 0.1),
        ];
        e.inject_graph(&nodes, &edges).await.unwrap();
        let index = e.load_graph_index().await.unwrap();
        for (key, side) in [("hub", Side::Ancestors), ("tip", Side::Descendants)] {
            let from_tables = e.reach_from_tables(key, side, None, 10).await.unwrap();
            let from_index = e.reach_through(&index, key, side, None, 10).unwrap();
            assert_eq!(from_index, from_tables, "{language}: {key}");
        }
        let hub = e
            .reach_through(&index, "hub", Side::Ancestors, None, 10)
            .unwrap();
        let order: Vec<(&str, u32)> = hub
            .nodes
            .iter()
            .map(|r| (r.node.key.as_str(), r.depth))
            .collect();
        assert_eq!(order, [("top", 1), ("mid", 1), ("low", 1), ("tip", 2)]);
        assert_eq!(hub.nodes[3].via, ["low"]);
        for side in [Side::Ancestors, Side::Descendants] {
            let missing = e.reach_through(&index, "no/such/file.ts", side, None, 10);
            assert_eq!(missing.unwrap_err().code(), "ENGRAM_NOT_FOUND");
            let bad_limit = e.reach_through(&index, &keys[0], side, None, 0);
            assert_eq!(bad_limit.unwrap_err().code(), "ENGRAM_INVALID_ARG");
        }
    }
}

/// Retrieval's file neighbourhood from the index equals the tables' answer, file by file and
/// for all files at once, also with authored relations and across a `contains` edge.
#[tokio::test]
async fn the_index_answers_file_neighbours_as_the_tables_do() {
    for language in ["ts", "py", "rs", "go"] {
        let (_dir, e, keys) = indexed_with_memories(language).await;
        let files: Vec<String> = keys
            .iter()
            .filter(|k| !k.contains(':') && !k.ends_with('/'))
            .cloned()
            .collect();
        // An authored relation between two files' symbols, and one to a node of no file.
        let symbols: Vec<&String> = keys.iter().filter(|k| k.contains(':')).collect();
        let edges = [
            EdgeInput::new(
                symbols[0].as_str(),
                symbols[symbols.len() - 1].as_str(),
                "relates_to",
            ),
            EdgeInput::new(files[0].as_str(), "an idea", "relates_to"),
        ];
        e.inject_graph(&[NodeInput::new("an idea", "concept")], &edges)
            .await
            .unwrap();
        let index = e.load_graph_index().await.unwrap();
        let mut with_neighbours = 0;
        for file in &files {
            let one = std::slice::from_ref(file);
            let from_tables = e.file_neighbours_from_tables(one).await.unwrap();
            assert_eq!(
                e.file_neighbours_through(&index, one),
                from_tables,
                "{language}: {file}"
            );
            with_neighbours += usize::from(!from_tables.is_empty());
        }
        let all = e.file_neighbours_from_tables(&files).await.unwrap();
        assert_eq!(e.file_neighbours_through(&index, &files), all, "{language}");
        assert!(with_neighbours > 1, "{language}: {all:?}");
        // A file is not its own neighbour, and containment is not a relation.
        for (file, neighbours) in &all {
            assert!(!neighbours.contains(file), "{language}: {file}");
        }
        let unknown = ["no/such/file.ts".to_owned()];
        assert!(e.file_neighbours_through(&index, &unknown).is_empty());
    }
}

/// `neighbours()` from the index equals the tables' answer (to the bit of every summed
/// weight) for every node alone, files with their module or symbols, and all files at once,
/// under each option that changes the answer; with authored fractional weights too.
#[tokio::test]
async fn the_index_answers_neighbours_as_the_tables_do() {
    for language in ["ts", "py", "rs", "go"] {
        let (_dir, e, keys) = indexed_with_memories(language).await;
        let symbols: Vec<&String> = keys.iter().filter(|k| k.contains(':')).collect();
        let weighted = |from: &str, to: &str, weight: f64| EdgeInput {
            weight,
            ..EdgeInput::new(from, to, "relates_to")
        };
        let edges = [
            weighted(symbols[0], symbols[symbols.len() - 1], 0.1),
            weighted(symbols[1], symbols[symbols.len() - 1], 0.2),
            weighted("an idea", symbols[symbols.len() - 1], 0.7),
        ];
        e.inject_graph(&[NodeInput::new("an idea", "concept")], &edges)
            .await
            .unwrap();
        let index = e.load_graph_index().await.unwrap();
        let files: Vec<String> = keys
            .iter()
            .filter(|k| !k.contains(':') && !k.ends_with('/'))
            .cloned()
            .collect();
        let mut sets: Vec<Vec<String>> = keys.iter().map(|k| vec![k.clone()]).collect();
        for file in &files {
            // A file with its container (module or package) and with its first symbol.
            if let Some(slash) = file.rfind('/') {
                sets.push(vec![file.clone(), file[..=slash].to_owned()]);
            }
            if let Some(symbol) = symbols.iter().find(|s| s.starts_with(file.as_str())) {
                sets.push(vec![file.clone(), (*symbol).clone()]);
            }
        }
        sets.push(files.clone());
        sets.push(vec![
            symbols[0].clone(),
            symbols[1].clone(),
            "an idea".into(),
        ]);
        let defaults = NeighbourOptions::default();
        let variants = [
            defaults.clone(),
            NeighbourOptions {
                direction: Direction::Out,
                ..defaults.clone()
            },
            NeighbourOptions {
                direction: Direction::In,
                include_contained: false,
                ..defaults.clone()
            },
            NeighbourOptions {
                kinds: Some(vec!["calls".into(), "contains".into()]),
                ..defaults.clone()
            },
            NeighbourOptions {
                layers: Some(vec![2]),
                ..defaults.clone()
            },
            NeighbourOptions {
                limit: 2,
                ..defaults.clone()
            },
        ];
        let (mut answered, mut fractional) = (0, 0);
        for set in &sets {
            for options in &variants {
                let from_tables = e.neighbours_from_tables(set, options).await.unwrap();
                let from_index = e.neighbours_through(&index, set, options).expect("bounded");
                assert_eq!(from_index, from_tables, "{language}: {set:?} {options:?}");
                answered += usize::from(from_tables.len() > 1);
                fractional += usize::from(from_tables.iter().any(|n| n.weight.fract() != 0.0));
            }
        }
        assert!(
            answered > 0 && fractional > 0,
            "{language}: {answered} {fractional}"
        );
    }
}

#[tokio::test]
async fn the_index_is_a_snapshot_of_its_load() {
    let (_dir, e, keys) = indexed_with_memories("ts").await;
    let before = e.load_graph_index().await.unwrap();
    let file = keys.iter().find(|k| k.ends_with(".ts")).unwrap().clone();
    let mut input = RememberInput::new(MemoryType::Decision, "a memory after the load");
    input.related_files = vec![file.clone()];
    e.remember(input).await.unwrap();
    let options = ImpactOptions {
        memory_limit: 1000,
        ..ImpactOptions::default()
    };
    let stale = e.impact_through(&before, &file, &options).await.unwrap();
    let fresh = e.load_graph_index().await.unwrap();
    let current = e.impact_through(&fresh, &file, &options).await.unwrap();
    assert_eq!(
        current,
        e.impact_from_tables(&file, &options).await.unwrap()
    );
    assert_eq!(current.memories.len(), stale.memories.len() + 1);
}

/// Two seeds of a target reached from one node at the same depth and weight: both paths take
/// the row into the lower seed id, whichever order the rows come in (nodes created in both
/// orders).
#[tokio::test]
async fn ties_between_seeds_go_the_same_way() {
    for contained_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let e = Engram::open(OpenOptions::new(dir.path().join("engram.db")))
            .await
            .unwrap();
        let nodes = [
            NodeInput::new("part", "concept"),
            NodeInput::new("whole", "concept"),
            NodeInput::new("user", "concept"),
        ];
        let order: Vec<NodeInput> = if contained_first {
            nodes.to_vec()
        } else {
            nodes.iter().rev().cloned().collect()
        };
        e.inject_graph(&order, &[]).await.unwrap();
        let edges = [
            EdgeInput::new("whole", "part", "contains"),
            EdgeInput::new("user", "whole", "uses"),
            EdgeInput::new("user", "part", "uses"),
        ];
        e.inject_graph(&[], &edges).await.unwrap();
        let index = e.load_graph_index().await.unwrap();
        let options = ImpactOptions::default();
        let from_tables = e.impact_from_tables("whole", &options).await.unwrap();
        let from_index = e.impact_through(&index, "whole", &options).await.unwrap();
        assert_eq!(from_index, from_tables);
        let user = &from_tables.affected[0];
        assert_eq!(user.node.key, "user");
        // `part` has the lower id when it was created first: the tie goes through it.
        let expected: Vec<String> = if contained_first {
            vec!["part".into()]
        } else {
            Vec::new()
        };
        assert_eq!(user.via, expected, "part created first: {contained_first}");
    }
}

/// Two projects in one file with the same keys: each index holds its own project's nodes,
/// closure rows and links, and answers as its project's tables do.
#[tokio::test]
async fn each_project_gets_its_own_graph() {
    let dir = tempfile::tempdir().unwrap();
    let mut handles = Vec::new();
    for (project, extra) in [("one", false), ("two", true)] {
        let mut options = OpenOptions::new(dir.path().join("engram.db"));
        options.project_id = Some(project.to_owned());
        let e = Engram::open(options).await.unwrap();
        let mut nodes = vec![
            NodeInput::new("a", "concept"),
            NodeInput::new("b", "concept"),
        ];
        let mut edges = vec![EdgeInput::new("b", "a", "uses")];
        if extra {
            nodes.push(NodeInput::new("c", "concept"));
            edges.push(EdgeInput::new("c", "b", "uses"));
        }
        e.inject_graph(&nodes, &edges).await.unwrap();
        let mut input = RememberInput::new(MemoryType::Decision, format!("a of {project}"));
        input.target_node_id = Some("a".to_owned());
        e.remember(input).await.unwrap();
        handles.push(e);
    }
    for (e, affected) in handles.iter().zip([1, 2]) {
        let index = e.load_graph_index().await.unwrap();
        assert_eq!(index.size().nodes, affected + 1);
        let options = ImpactOptions::default();
        let from_index = e.impact_through(&index, "a", &options).await.unwrap();
        assert_eq!(
            from_index,
            e.impact_from_tables("a", &options).await.unwrap()
        );
        assert_eq!(from_index.affected.len(), affected);
        assert_eq!(from_index.memories.len(), 1);
    }
}

/// The served index equals a fresh load of the tables, and `impact()` (served) the tables'
/// answer, on every node and on a missing one.
async fn assert_served_follows(e: &Engram, step: &str) {
    let served = e
        .served_graph_picture()
        .await
        .unwrap()
        .expect("loaded here");
    let index = e.load_graph_index().await.unwrap();
    let fresh = index.picture();
    if let Some(difference) = served.first_difference(&fresh) {
        panic!("{step}: served index differs from a fresh load: {difference}");
    }
    let options = ImpactOptions::default();
    let mut keys: Vec<String> = index.keys().map(str::to_owned).collect();
    keys.sort();
    for key in &keys {
        let served = e.impact(key, &options).await.unwrap();
        assert_eq!(
            served,
            e.impact_from_tables(key, &options).await.unwrap(),
            "{step}: {key}"
        );
    }
    assert_eq!(
        e.impact("no/such/file.ts", &options)
            .await
            .unwrap_err()
            .code(),
        "ENGRAM_NOT_FOUND"
    );
    let files: Vec<String> = index
        .keys()
        .filter(|k| !k.contains(':') && !k.ends_with('/'))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        e.file_neighbours(&files).await.unwrap(),
        e.file_neighbours_from_tables(&files).await.unwrap(),
        "{step}"
    );
    let options = NeighbourOptions::default();
    for key in &keys {
        let one = std::slice::from_ref(key);
        assert_eq!(
            e.neighbours(one, &options).await.unwrap(),
            e.neighbours_from_tables(one, &options).await.unwrap(),
            "{step}: {key}"
        );
        for side in [Side::Ancestors, Side::Descendants] {
            let served = e.reach(key, side, None, 500).await.unwrap();
            let tables = e.reach_from_tables(key, side, None, 500).await.unwrap();
            assert_eq!(served, tables, "{step}: {key} {side:?}");
        }
    }
}

#[tokio::test]
async fn the_served_index_follows_every_kind_of_graph_write() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    copy_tree(&Path::new(FIXTURES).join("ts"), &root);
    // A file nothing imports yet (the edit below imports it without changing its row).
    std::fs::write(root.join("src/lonely.ts"), "export const lonely = 1\n").unwrap();
    let mut options = OpenOptions::new(dir.path().join("engram.db"));
    options.project_root = Some(root.clone());
    let e = Engram::open(options).await.unwrap();
    let index_run = || async {
        e.index(&IndexOptions::default(), &|_| {}, &Default::default())
            .await
            .unwrap();
    };
    // Loaded while the project is empty; the cold index rebuilds the closure (a reload).
    let empty = e.served_graph_picture().await.unwrap().unwrap();
    assert_eq!(empty.node_count(), 0);
    index_run().await;
    assert_served_follows(&e, "cold index").await;
    let keys = sorted_node_keys(&e).await;
    let files: Vec<&String> = keys
        .iter()
        .filter(|k| k.ends_with(".ts") && !k.contains(':'))
        .collect();
    assert!(files.len() >= 3, "{files:?}");
    assert_eq!(files[1], "src/lonely.ts");

    // Memories on files and symbols, one forgotten, one on a key no node has yet.
    let mut ids = Vec::new();
    for (i, key) in keys.iter().enumerate().take(12) {
        let mut input = RememberInput::new(MemoryType::Gotcha, format!("note {i} on {key}"));
        input.target_node_id = Some(key.clone());
        input.related_files = vec![files[i % files.len()].clone(), "src/later.ts".into()];
        ids.push(e.remember(input).await.unwrap().memory.id);
    }
    e.forget(&ids[3], None).await.unwrap();
    // A memory moved to another file: its old links go, new ones come.
    let patch = MemoryPatch {
        related_files: Some(vec![files[2].clone()]),
        target_node_id: Some(files[2].clone()),
        ..MemoryPatch::default()
    };
    e.update(&ids[5], patch).await.unwrap();
    assert_served_follows(&e, "memories").await;

    // An edited file: a new function calling into another file, a new import (of the file
    // nothing imported: its `imported` flag changes, its row does not).
    let edited = root.join(files[0]);
    let mut text = std::fs::read_to_string(&edited).unwrap();
    let other = Path::new(files[1].as_str());
    let other_module = other.file_stem().unwrap().to_string_lossy().into_owned();
    text = format!("import * as other from './{other_module}'\n{text}\nexport function addedLater() {{ return other }}\n");
    std::fs::write(&edited, text).unwrap();
    // A new file the early memories already named, importing the edited one.
    let later_dir = root.join("src");
    std::fs::create_dir_all(&later_dir).unwrap();
    std::fs::write(
        later_dir.join("later.ts"),
        format!(
            "import {{ addedLater }} from '../{}'\nexport const later = () => addedLater()\n",
            files[0].trim_end_matches(".ts")
        ),
    )
    .unwrap();
    index_run().await;
    assert_served_follows(&e, "edit").await;

    // A file in a new directory (a new module), then an import from it into `src/`: a
    // module's aggregated imports change while its own row does not.
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::write(root.join("lib/extra.ts"), "export const extra = 2\n").unwrap();
    index_run().await;
    assert_served_follows(&e, "new module").await;
    std::fs::write(
        root.join("lib/extra.ts"),
        "import { later } from '../src/later'\nexport const extra = later\n",
    )
    .unwrap();
    index_run().await;
    assert_served_follows(&e, "module import").await;

    // Authored nodes and edges onto code nodes, then one edge and one node deleted.
    let nodes = [
        NodeInput::new("concept:auth", "concept"),
        NodeInput::new("concept:billing", "concept"),
        NodeInput::new("concept:all", "concept"),
    ];
    let edges = [
        EdgeInput::new("concept:auth", files[0].as_str(), "uses"),
        EdgeInput::new("concept:billing", "concept:auth", "uses"),
        EdgeInput::new("concept:all", "concept:auth", "contains"),
        EdgeInput::new("concept:all", "concept:billing", "contains"),
    ];
    e.inject_graph(&nodes, &edges).await.unwrap();
    assert_served_follows(&e, "authored").await;
    assert!(e
        .delete_edge("concept:all", "concept:billing", "contains")
        .await
        .unwrap());
    assert!(e.delete_node("concept:auth").await.unwrap());
    assert_served_follows(&e, "authored deletions").await;

    // A file removed.
    std::fs::remove_file(root.join(files[1].as_str())).unwrap();
    index_run().await;
    assert_served_follows(&e, "removal").await;

    // Every memory deleted: their links go by cascade.
    assert!(e.delete_all().await.unwrap() > 0);
    assert_served_follows(&e, "memories deleted").await;
    // Loaded empty, reloaded after the cold index's closure rebuild, then only replays.
    assert_eq!(e.served_graph_loads(), 2);
}

/// Answers and writes at once, with one and with two read connections: `impact()` never waits
/// forever on the index a refresh is writing (a refresh holds a reader while it waits for the
/// index's write lock, so an answer takes its reader before the index's read lock), and the
/// index still equals a fresh load afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_and_writes_at_once_never_wait_forever() {
    for readers in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        copy_tree(&Path::new(FIXTURES).join("ts"), &root);
        let mut options = OpenOptions::new(dir.path().join("engram.db"));
        options.project_root = Some(root);
        options.engine.store.read_connections = readers;
        let e = Engram::open(options).await.unwrap();
        e.index(&IndexOptions::default(), &|_| {}, &Default::default())
            .await
            .unwrap();
        assert!(e.warm_graph_index().await.unwrap());
        let keys = sorted_node_keys(&e).await;
        let writer = {
            let e = e.clone();
            tokio::spawn(async move {
                for i in 0..150 {
                    let key = format!("concept:{i}");
                    let edges = [EdgeInput::new(key.as_str(), "src/util.ts", "uses")];
                    e.inject_graph(&[NodeInput::new(key.as_str(), "concept")], &edges)
                        .await
                        .unwrap();
                    let mut input = RememberInput::new(MemoryType::Gotcha, format!("note {i}"));
                    input.target_node_id = Some(key);
                    e.remember(input).await.unwrap();
                }
            })
        };
        let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let readers_done: Vec<_> = (0..8)
            .map(|t| {
                let (e, keys, writing) = (e.clone(), keys.clone(), writing.clone());
                tokio::spawn(async move {
                    let mut answered = 0;
                    while writing.load(std::sync::atomic::Ordering::Relaxed) || answered < 50 {
                        let key = &keys[(t * 7 + answered) % keys.len()];
                        e.impact(key, &ImpactOptions::default()).await.unwrap();
                        answered += 1;
                    }
                })
            })
            .collect();
        let all = async {
            writer.await.unwrap();
            writing.store(false, std::sync::atomic::Ordering::Relaxed);
            for reader in readers_done {
                reader.await.unwrap();
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), all)
            .await
            .unwrap_or_else(|_| panic!("{readers} reader(s): impact() and writes stalled"));
        assert_served_follows(&e, &format!("{readers} reader(s), after the writes")).await;
    }
}

/// The served index keeps to its memory budget (`graph_index_max_bytes`): a graph over it at
/// the load, or grown past it by later writes, is answered from the tables, with the same
/// answers; a budget of 0 never loads one.
#[tokio::test]
async fn the_served_index_keeps_to_its_memory_budget() {
    let (dir, e, keys) = indexed_with_memories("ts").await;
    let size = e.load_graph_index().await.unwrap().size().bytes as u64;
    e.close().wait().await;
    let open = |max_bytes: u64| {
        let mut options = OpenOptions::new(dir.path().join("engram.db"));
        options.project_root = Some(dir.path().join("project"));
        options.engine.graph_index_max_bytes = max_bytes;
        Engram::open(options)
    };
    let file = keys
        .iter()
        .find(|k| !k.contains(':') && !k.ends_with('/'))
        .unwrap();
    let answers_as_the_tables_do = |e: Engram, step: &'static str| async move {
        let options = ImpactOptions::default();
        let served = e.impact(file, &options).await.unwrap();
        assert_eq!(
            served,
            e.impact_from_tables(file, &options).await.unwrap(),
            "{step}"
        );
        assert!(!served.affected.is_empty() || !served.memories.is_empty());
        e
    };

    // Within its budget: loaded once, then grown past it by authored nodes (long keys: ~1 KB
    // of estimate each): the refresh after them reloads, measures, and turns the index off.
    let e = open(size * 2).await.unwrap();
    assert!(e.warm_graph_index().await.unwrap());
    assert_eq!(e.served_graph_loads(), 1);
    let e = answers_as_the_tables_do(e, "within budget").await;
    let nodes: Vec<NodeInput> = (0..(size / 1000 + 50))
        .map(|i| NodeInput::new(format!("idea {i} {}", "x".repeat(400)), "concept"))
        .collect();
    e.inject_graph(&nodes, &[]).await.unwrap();
    assert!(!e.warm_graph_index().await.unwrap());
    assert_eq!(e.served_graph_loads(), 1, "over budget: no index installed");
    let e = answers_as_the_tables_do(e, "grown past the budget").await;
    e.close().wait().await;

    // Over its budget at the load, and a budget of 0.
    for max_bytes in [size / 2, 0] {
        let e = open(max_bytes).await.unwrap();
        assert!(!e.warm_graph_index().await.unwrap(), "{max_bytes}");
        assert_eq!(e.served_graph_loads(), 0, "{max_bytes}");
        let e = answers_as_the_tables_do(e, "over budget at the load").await;
        e.close().wait().await;
    }
}

/// The memory rows the served `impact()` keeps follow every write to a memory: after each,
/// the served answer on every node equals the tables' (which read the rows afresh).
#[tokio::test]
async fn the_served_memory_rows_follow_every_memory_write() {
    let (_dir, e, keys) = indexed_with_memories("py").await;
    assert!(e.warm_graph_index().await.unwrap());
    let options = ImpactOptions::default();
    // Also one memory at most: the cut, and whether it cut, read through the cached rows
    // (every fifth memory of the fixture is forgotten).
    let one_memory = ImpactOptions {
        memory_limit: 1,
        ..ImpactOptions::default()
    };
    let all_answer_as_the_tables_do = |step: &'static str| {
        let (e, keys, option_sets) = (&e, &keys, [&options, &one_memory]);
        async move {
            let mut memories = 0;
            for key in keys {
                for options in option_sets {
                    let served = e.impact(key, options).await.unwrap();
                    assert_eq!(
                        served,
                        e.impact_from_tables(key, options).await.unwrap(),
                        "{step}: {key}"
                    );
                    memories += served.memories.len();
                }
            }
            memories
        }
    };
    // Filled by these answers; then each kind of write to memories they hold.
    assert!(all_answer_as_the_tables_do("filled").await > 0);
    let on_first = e.impact(&keys[0], &options).await.unwrap().memories;
    let id = on_first[0].memory.id.clone();
    let patch = MemoryPatch {
        content: Some("the note, corrected".into()),
        confidence: Some(0.31),
        ..MemoryPatch::default()
    };
    e.update(&id, patch).await.unwrap();
    all_answer_as_the_tables_do("content and confidence").await;
    e.rollback(&id, 1).await.unwrap();
    all_answer_as_the_tables_do("rollback").await;
    e.forget(&id, Some("wrong".into())).await.unwrap();
    all_answer_as_the_tables_do("forgotten").await;
    let mut input = RememberInput::new(MemoryType::Decision, "a new note on the first node");
    input.target_node_id = Some(keys[0].clone());
    e.remember(input).await.unwrap();
    all_answer_as_the_tables_do("remembered").await;
    assert!(e.delete_all().await.unwrap() > 0);
    assert_eq!(all_answer_as_the_tables_do("deleted").await, 0);
    assert_eq!(
        e.served_graph_loads(),
        1,
        "followed by replays, not reloads"
    );
}

/// `impact()` polled once with a waker that does nothing, as a JS thread does first
/// (`promise_inline_first`): the tables' answer and a replay of graph writes hand themselves
/// to the runtime (pending after that poll), so the JS thread is never held for them; an
/// answer from a current served index completes in that one poll. Either way the answer is
/// the tables'.
#[tokio::test]
async fn only_an_answer_from_a_current_index_completes_in_the_first_poll() {
    use std::future::Future;
    use std::task::{Context, Poll};

    let (_dir, e, _keys) = indexed_with_memories("ts").await;
    let options = ImpactOptions::default();
    let target = "src/util.ts";
    let tables = e.impact_from_tables(target, &options).await.unwrap();
    let first_poll_of = |target: &'static str| {
        let mut call = Box::pin(e.impact(target, &options));
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        match call.as_mut().poll(&mut cx) {
            Poll::Ready(answer) => Some(answer.unwrap()),
            Poll::Pending => None,
        }
    };
    let first_poll = || first_poll_of(target);
    // Not loaded yet: the tables answer, on the runtime (the call starts the index's load).
    assert_eq!(first_poll(), None);
    assert_eq!(e.impact(target, &options).await.unwrap(), tables);
    let mut loaded = false;
    for _ in 0..500 {
        if e.warm_graph_index().await.unwrap() {
            loaded = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(loaded, "the served index never loaded");
    // No after-write work (the fixture's memories' contradiction scans) holding a reader.
    e.settled().await.unwrap();
    assert_eq!(first_poll(), Some(tables.clone()));

    // A graph write: the next call replays it on the runtime, then answers inline again.
    let nodes = [NodeInput::new("adr:dates", "decision")];
    let edges = [EdgeInput::new("adr:dates", target, "governs")];
    e.inject_graph(&nodes, &edges).await.unwrap();
    let tables = e.impact_from_tables(target, &options).await.unwrap();
    assert!(tables.affected.iter().any(|r| r.node.key == "adr:dates"));
    let loads = e.served_graph_loads();
    assert_eq!(first_poll(), None);
    assert_eq!(e.impact(target, &options).await.unwrap(), tables);
    assert_eq!(e.served_graph_loads(), loads, "replayed, not reloaded");
    assert_eq!(first_poll(), Some(tables));

    // An answer that walks more closure rows than a JS thread should (a hub that 5,001 nodes
    // depend on) goes to the runtime even from a current index.
    let mut hub_nodes = vec![NodeInput::new("hub", "concept")];
    let mut hub_edges = Vec::new();
    for i in 0..5_001 {
        let key = format!("dep:{i}");
        hub_nodes.push(NodeInput::new(key.as_str(), "concept"));
        hub_edges.push(EdgeInput::new(key.as_str(), "hub", "uses"));
    }
    e.inject_graph(&hub_nodes, &hub_edges).await.unwrap();
    assert!(e.warm_graph_index().await.unwrap());
    assert!(first_poll().is_some(), "current, and a small answer");
    assert_eq!(first_poll_of("hub"), None);
    let hub = e.impact("hub", &options).await.unwrap();
    assert_eq!(hub, e.impact_from_tables("hub", &options).await.unwrap());
    assert!(hub.truncated && hub.affected.len() == 100);
}
