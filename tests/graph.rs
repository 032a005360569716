//! The knowledge graph against real libSQL files: the closure table checked against a BFS
//! recomputation after every step of random edit sequences, idempotent inject, deletion,
//! acyclic kinds, traversal filters and subgraphs.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use engram::graph::{Direction, EdgeInput, NodeInput, Side, TraverseOptions};
use engram::{EngineOptions, Engram, OpenOptions};

async fn open(dir: &tempfile::TempDir, closure_depth: u32) -> Engram {
    let mut options = OpenOptions::new(dir.path().join("graph.db"));
    options.engine = EngineOptions {
        closure_depth,
        ..EngineOptions::default()
    };
    Engram::open(options).await.expect("open")
}

/// xorshift64*: deterministic, seedable, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn key(i: u64) -> String {
    format!("n{i}")
}

/// The model: edges as (from, to, kind) -> weight.
type Model = BTreeMap<(String, String, String), f64>;

/// Shortest hop counts from `start` within `cap` over every edge kind but `contains`.
fn bfs_depths(model: &Model, start: &str, cap: u32) -> BTreeMap<String, u32> {
    let mut adjacency: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for (from, to, kind) in model.keys() {
        if kind != "contains" {
            adjacency.entry(from).or_default().insert(to);
        }
    }
    let mut depth = BTreeMap::new();
    let mut queue = VecDeque::from([(start, 0u32)]);
    let mut seen = BTreeSet::from([start]);
    while let Some((node, d)) = queue.pop_front() {
        if d == cap {
            continue;
        }
        for next in adjacency.get(node).into_iter().flatten() {
            if seen.insert(next) {
                depth.insert(next.to_string(), d + 1);
                queue.push_back((next, d + 1));
            }
        }
    }
    depth
}

/// Hop weights (largest transitive edge) between node pairs in the model.
fn hops(model: &Model) -> HashMap<(String, String), f64> {
    let mut out: HashMap<(String, String), f64> = HashMap::new();
    for ((from, to, kind), weight) in model {
        if kind != "contains" {
            let hop = out.entry((from.clone(), to.clone())).or_insert(*weight);
            *hop = hop.max(*weight);
        }
    }
    out
}

/// Checks every node's descendants and ancestors in the closure against the model.
async fn check_closure(e: &Engram, model: &Model, nodes: u64, cap: u32, step: &str) {
    let hops = hops(model);
    let mut ancestors_expected: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    for i in 0..nodes {
        let start = key(i);
        let expected = bfs_depths(model, &start, cap);
        for (d, depth) in &expected {
            ancestors_expected
                .entry(d.clone())
                .or_default()
                .insert(start.clone(), *depth);
        }
        let got = e
            .reach(&start, Side::Descendants, None, 10_000)
            .await
            .unwrap();
        let got_depths: BTreeMap<String, u32> = got
            .nodes
            .iter()
            .map(|r| (r.node.key.clone(), r.depth))
            .collect();
        assert_eq!(got_depths, expected, "descendants of {start} after {step}");
        // Each recorded path is a real path of that length and weight.
        for r in &got.nodes {
            let mut full = vec![start.clone()];
            full.extend(r.via.iter().cloned());
            full.push(r.node.key.clone());
            assert_eq!(
                full.len() as u32,
                r.depth + 1,
                "path length of {start}->{}",
                r.node.key
            );
            let mut weight = 0.0;
            for pair in full.windows(2) {
                weight += hops
                    .get(&(pair[0].clone(), pair[1].clone()))
                    .copied()
                    .unwrap_or_else(|| {
                        panic!(
                            "{start}->{}: recorded hop {pair:?} does not exist after {step}",
                            r.node.key
                        )
                    });
            }
            assert!(
                (weight - r.weight).abs() < 1e-9,
                "weight of {start}->{} is {}, path sums to {weight} after {step}",
                r.node.key,
                r.weight
            );
        }
    }
    for i in 0..nodes {
        let node = key(i);
        let got = e.reach(&node, Side::Ancestors, None, 10_000).await.unwrap();
        let got_depths: BTreeMap<String, u32> = got
            .nodes
            .iter()
            .map(|r| (r.node.key.clone(), r.depth))
            .collect();
        assert_eq!(
            got_depths,
            ancestors_expected.remove(&node).unwrap_or_default(),
            "ancestors of {node} after {step}"
        );
    }
}

async fn add_nodes(e: &Engram, count: u64) {
    let nodes: Vec<NodeInput> = (0..count)
        .map(|i| NodeInput::new(key(i), "concept"))
        .collect();
    e.inject_graph(&nodes, &[]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn closure_equals_bfs_after_every_random_insert_and_delete() {
    const KINDS: &[&str] = &["calls", "imports", "contains", "uses"];
    for seed in [1u64, 7, 42, 1234] {
        let dir = tempfile::tempdir().unwrap();
        let cap = 2 + (seed % 3) as u32;
        let e = open(&dir, cap).await;
        let nodes = 9 + seed % 5;
        add_nodes(&e, nodes).await;
        let mut model = Model::new();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        for step in 0..120 {
            let roll = rng.below(10);
            let label;
            if roll < 5 || model.is_empty() {
                // A batch of 1-4 edges (new ones, or re-weighted existing ones).
                let mut batch = Vec::new();
                for _ in 0..1 + rng.below(4) {
                    let from = rng.below(nodes);
                    let mut to = rng.below(nodes);
                    if to == from {
                        to = (to + 1) % nodes;
                    }
                    let kind = KINDS[rng.below(KINDS.len() as u64) as usize];
                    let weight = 1.0 + rng.below(3) as f64;
                    batch.push(EdgeInput::new(key(from), key(to), kind).weighted(weight));
                    model.insert((key(from), key(to), kind.to_string()), weight);
                }
                e.inject_graph(&[], &batch).await.unwrap();
                label = format!("step {step}: inject {} edges (seed {seed})", batch.len());
            } else if roll < 9 {
                let index = rng.below(model.len() as u64) as usize;
                let (from, to, kind) = model.keys().nth(index).unwrap().clone();
                assert!(e.delete_edge(&from, &to, &kind).await.unwrap());
                model.remove(&(from.clone(), to.clone(), kind.clone()));
                label = format!("step {step}: delete {from}-[{kind}]->{to} (seed {seed})");
            } else {
                // Delete a node with its edges, then bring it back bare.
                let victim = key(rng.below(nodes));
                assert!(e.delete_node(&victim).await.unwrap());
                model.retain(|(f, t, _), _| *f != victim && *t != victim);
                e.inject_graph(&[NodeInput::new(victim.clone(), "concept")], &[])
                    .await
                    .unwrap();
                label = format!("step {step}: delete node {victim} (seed {seed})");
            }
            check_closure(&e, &model, nodes, cap, &label).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_batch_rebuilds_the_closure_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 3;
    let e = open(&dir, cap).await;
    let nodes = 400;
    add_nodes(&e, nodes).await;
    let mut rng = Rng(99);
    let mut model = Model::new();
    let mut batch = Vec::new();
    // More hops than the rebuild threshold (2,000) in one write.
    while model.len() < 2_500 {
        let from = rng.below(nodes);
        let to = rng.below(nodes);
        if from == to || model.contains_key(&(key(from), key(to), "calls".into())) {
            continue;
        }
        model.insert((key(from), key(to), "calls".into()), 1.0);
        batch.push(EdgeInput::new(key(from), key(to), "calls"));
    }
    e.inject_graph(&[], &batch).await.unwrap();
    check_closure(&e, &model, nodes, cap, "a 2,500-edge batch").await;
    // And incremental steps on top of the rebuilt table stay exact.
    for (i, edge) in batch.iter().take(20).enumerate() {
        e.delete_edge(&edge.from, &edge.to, "calls").await.unwrap();
        model.remove(&(edge.from.clone(), edge.to.clone(), "calls".into()));
        if i % 5 == 0 {
            check_closure(&e, &model, nodes, cap, &format!("delete {i}")).await;
        }
    }
}

/// A rebuild clears only its own project's rows: with another project's graph in the same
/// database it deletes by node, alone in it the whole table at once. Both projects rebuild in
/// turn (one id sorts before the other, one after) and both closures stay exact.
#[tokio::test(flavor = "multi_thread")]
async fn a_rebuild_leaves_another_projects_closure_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 3;
    let open_project = |id: &'static str| {
        let mut options = OpenOptions::new(dir.path().join("graph.db"));
        options.project_id = Some(id.to_owned());
        options.engine = EngineOptions {
            closure_depth: cap,
            ..EngineOptions::default()
        };
        Engram::open(options)
    };
    let nodes = 300;
    let mut projects = Vec::new();
    for (id, seed) in [("alpha", 5u64), ("omega", 11)] {
        let e = open_project(id).await.expect("open");
        add_nodes(&e, nodes).await;
        // A small graph first (incremental maintenance, no rebuild).
        let (mut rng, mut model) = (Rng(seed), Model::new());
        e.inject_graph(&[], &random_edges(&mut rng, nodes, &mut model, 40))
            .await
            .unwrap();
        projects.push((id, Some(e), rng, model));
    }
    for turn in 0..projects.len() {
        // More hops than the rebuild threshold (2,000) in one write of this project.
        let (rebuilt, e, rng, model) = &mut projects[turn];
        let rebuilt = *rebuilt;
        let target = model.len() + 2_100;
        let batch = random_edges(rng, nodes, model, target);
        let e = e.as_ref().expect("open");
        e.inject_graph(&[], &batch).await.unwrap();
        // Reopened: the graph index each handle serves reads from is loaded from the tables
        // again, so what is checked is what the rebuild left in SQLite.
        for (_, e, _, _) in &mut projects {
            e.take().expect("open").close().await;
        }
        for (id, e, _, model) in &mut projects {
            let reopened = e.insert(open_project(id).await.expect("reopen"));
            let label = format!("{id} after a rebuild of {rebuilt}");
            check_closure(reopened, model, nodes, cap, &label).await;
        }
    }
}

/// New `calls` edges between random nodes until `model` holds `until` of them.
fn random_edges(rng: &mut Rng, nodes: u64, model: &mut Model, until: usize) -> Vec<EdgeInput> {
    let mut batch = Vec::new();
    while model.len() < until {
        let (from, to) = (rng.below(nodes), rng.below(nodes));
        if from == to || model.contains_key(&(key(from), key(to), "calls".into())) {
            continue;
        }
        model.insert((key(from), key(to), "calls".into()), 1.0);
        batch.push(EdgeInput::new(key(from), key(to), "calls"));
    }
    batch
}

#[tokio::test(flavor = "multi_thread")]
async fn inject_is_idempotent_and_reports_what_it_created() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, 4).await;
    let nodes = vec![
        NodeInput::new("concept:auth", "concept"),
        NodeInput::new("concept:tokens", "concept"),
    ];
    let edges = vec![EdgeInput::new("concept:auth", "concept:tokens", "uses").weighted(2.0)];
    let first = e.inject_graph(&nodes, &edges).await.unwrap();
    assert_eq!((first.nodes_created, first.edges_created), (2, 1));
    let before = e.node("concept:auth").await.unwrap().unwrap();
    let again = e.inject_graph(&nodes, &edges).await.unwrap();
    assert_eq!((again.nodes_created, again.nodes_updated), (0, 2));
    assert_eq!((again.edges_created, again.edges_updated), (0, 1));
    let after = e.node("concept:auth").await.unwrap().unwrap();
    assert_eq!(after.created_at, before.created_at);
    assert_eq!(
        (after.label.as_str(), after.kind.as_str(), after.layer),
        (before.label.as_str(), before.kind.as_str(), before.layer)
    );
    let reach = e
        .reach("concept:auth", Side::Descendants, None, 100)
        .await
        .unwrap();
    assert_eq!(reach.nodes.len(), 1);
    assert_eq!(reach.nodes[0].weight, 2.0);

    // Unknown endpoints fail the whole batch; nothing of it is kept.
    let bad = vec![
        EdgeInput::new("concept:tokens", "concept:auth", "mentions"),
        EdgeInput::new("concept:auth", "concept:nowhere", "uses"),
    ];
    let err = e.inject_graph(&[], &bad).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_NOT_FOUND");
    let ancestors = e
        .reach("concept:auth", Side::Ancestors, None, 100)
        .await
        .unwrap();
    assert!(ancestors.nodes.is_empty(), "the first edge was rolled back");
}

#[tokio::test(flavor = "multi_thread")]
async fn acyclic_kinds_reject_a_closing_edge_and_roll_back_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, 4).await;
    let nodes: Vec<NodeInput> = ["d1", "d2", "d3"]
        .iter()
        .map(|k| NodeInput::new(*k, "decision"))
        .collect();
    let chain = vec![
        EdgeInput::new("d3", "d2", "supersedes"),
        EdgeInput::new("d2", "d1", "supersedes"),
    ];
    e.inject_graph(&nodes, &chain).await.unwrap();
    // A cycle of another kind is fine: only same-kind cycles are contradictions.
    e.inject_graph(&[], &[EdgeInput::new("d1", "d3", "mentions")])
        .await
        .unwrap();
    let closing = vec![
        EdgeInput::new("d1", "d2", "relates_to"),
        EdgeInput::new("d1", "d3", "supersedes"),
    ];
    let err = e.inject_graph(&[], &closing).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_CYCLE");
    assert!(err.to_string().contains("d1 -[supersedes]-> d3"), "{err}");
    let sub = e
        .subgraph(&["d1".into(), "d2".into(), "d3".into()])
        .await
        .unwrap();
    let kinds: Vec<String> = sub
        .edges
        .iter()
        .map(|edge| format!("{}-{}-{}", edge.from, edge.kind, edge.to))
        .collect();
    assert_eq!(
        kinds,
        vec!["d1-mentions-d3", "d2-supersedes-d1", "d3-supersedes-d2"],
        "the batch's first edge was rolled back with the cycle"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn traverse_follows_direction_kind_and_layer_filters() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, 4).await;
    let mut nodes: Vec<NodeInput> = ["a", "b", "c", "d"]
        .iter()
        .map(|k| NodeInput::new(*k, "service"))
        .collect();
    nodes[3].layer = 2;
    let mut to_d = EdgeInput::new("c", "d", "calls");
    to_d.layer = 2;
    let edges = vec![
        EdgeInput::new("a", "b", "calls").weighted(2.0),
        EdgeInput::new("b", "c", "calls").weighted(3.0),
        EdgeInput::new("a", "c", "documents"),
        to_d,
    ];
    e.inject_graph(&nodes, &edges).await.unwrap();

    let options = TraverseOptions {
        max_depth: 3,
        kinds: Some(vec!["calls".into()]),
        ..TraverseOptions::default()
    };
    let out = e.traverse("a", &options).await.unwrap();
    let reached: Vec<(String, u32, f64, Vec<String>)> = out
        .nodes
        .iter()
        .map(|r| (r.node.key.clone(), r.depth, r.weight, r.via.clone()))
        .collect();
    assert_eq!(
        reached,
        vec![
            ("b".into(), 1, 2.0, vec![]),
            ("c".into(), 2, 5.0, vec!["b".into()]),
            ("d".into(), 3, 6.0, vec!["b".into(), "c".into()]),
        ]
    );
    assert_eq!(out.edges.len(), 3);

    let layer3 = TraverseOptions {
        max_depth: 3,
        layers: Some(vec![3]),
        ..TraverseOptions::default()
    };
    let keys: Vec<String> = e
        .traverse("a", &layer3)
        .await
        .unwrap()
        .nodes
        .into_iter()
        .map(|r| r.node.key)
        .collect();
    assert_eq!(
        keys,
        vec!["b", "c"],
        "the layer-2 edge to d is filtered out"
    );

    let incoming = TraverseOptions {
        max_depth: 1,
        direction: Direction::In,
        ..TraverseOptions::default()
    };
    let keys: Vec<String> = e
        .traverse("c", &incoming)
        .await
        .unwrap()
        .nodes
        .into_iter()
        .map(|r| r.node.key)
        .collect();
    assert_eq!(keys, vec!["a", "b"]);

    let limited = TraverseOptions {
        max_depth: 3,
        limit: 1,
        ..TraverseOptions::default()
    };
    let out = e.traverse("a", &limited).await.unwrap();
    assert!(out.truncated);
    assert_eq!(out.nodes.len(), 1);

    let err = e.traverse("nope", &options).await.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_NOT_FOUND");
    let err = e
        .reach("a", Side::Descendants, Some(9), 10)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_in_labels_and_metadata_are_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, 4).await;
    let mut node = NodeInput::new("concept:deploy", "concept");
    node.label = "deploy with AKIAIOSFODNN7EXAMPLE".into();
    node.metadata = serde_json::json!({ "env": "PASSWORD=hunter2hunter2", "n": 3 });
    e.inject_graph(&[node], &[]).await.unwrap();
    let stored = e.node("concept:deploy").await.unwrap().unwrap();
    assert!(
        !stored.label.contains("AKIAIOSFODNN7EXAMPLE"),
        "{}",
        stored.label
    );
    assert!(
        !stored.metadata.to_string().contains("hunter2hunter2"),
        "{}",
        stored.metadata
    );
    assert_eq!(stored.metadata["n"], 3);
}

/// Reopening with a deeper `closure_depth` leaves the closure to be rebuilt just after the
/// open (pending meanwhile), and reads see the deeper rows before any write.
#[tokio::test(flavor = "multi_thread")]
async fn reopening_with_another_depth_rebuilds_the_closure() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir, 2).await;
    add_nodes(&e, 5).await;
    let chain: Vec<EdgeInput> = (0..4)
        .map(|i| EdgeInput::new(key(i), key(i + 1), "calls"))
        .collect();
    e.inject_graph(&[], &chain).await.unwrap();
    let depth_of_n0 = |e: Engram, depth: u32| async move {
        e.reach(&key(4), Side::Ancestors, Some(depth), 100)
            .await
            .unwrap()
            .nodes
            .iter()
            .find(|r| r.node.key == key(0))
            .map(|r| r.depth)
    };
    assert_eq!(depth_of_n0(e.clone(), 2).await, None, "n0 is 4 hops away");
    // Awaited: an open while background work still holds the engine would join it.
    e.close().await;
    let e = open(&dir, 4).await;
    assert_eq!(depth_of_n0(e.clone(), 4).await, Some(4));
    assert_eq!(e.graph_stats().await.unwrap().closure_depth, 4);
}
