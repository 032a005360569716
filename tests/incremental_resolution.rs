//! Re-indexing changed files resolves references exactly as a full index of the same tree
//! does. A changed file only clears the resolutions of names whose definitions it changed
//! (`code::store::ResolveScope`), so this walks random edits that add, remove, duplicate,
//! move and rename definitions, and edit bodies only, in files that call one another's
//! names, and after each `index_paths` compares every reference's resolution (and the graph
//! edges it leads to) with a fresh database indexed from scratch.

use std::path::Path;

use engram::code::IndexOptions;
use engram::{Engram, OpenOptions};

mod common;
use common::Rng;

const FILES: usize = 6;
/// Few names, so that definitions collide across files and within one.
const NAMES: [&str; 5] = ["load", "save", "parse", "check", "close"];

/// One module: its definitions (a name may repeat), each calling some names.
#[derive(Clone, Default)]
struct Module {
    defs: Vec<(usize, Vec<usize>, u64)>,
}

impl Module {
    fn text(&self) -> String {
        let mut text = String::new();
        for (name, calls, body) in &self.defs {
            text.push_str(&format!("def {}(value):\n", NAMES[*name]));
            for call in calls {
                text.push_str(&format!("    value = {}(value)\n", NAMES[*call]));
            }
            text.push_str(&format!("    return value + {body}\n\n"));
        }
        text.push_str("class Runner:\n    def go(self):\n        return load(1)\n");
        text
    }
}

fn write_module(root: &Path, i: usize, module: &Module) {
    std::fs::write(root.join(format!("m{i}.py")), module.text()).unwrap();
}

/// Every reference with what it resolves to (`path:qualified name`), and every graph edge
/// of kind `calls`, in a stable order.
async fn resolutions(db: &Path) -> Vec<String> {
    let conn = libsql::Builder::new_local(db)
        .build()
        .await
        .unwrap()
        .connect()
        .unwrap();
    let mut rows = conn
        .query(
            "SELECT f.path || ' ' || r.kind || ' ' || coalesce(r.from_symbol, '-') || ' -> '
                    || r.target || ' @' || r.line || ' = '
                    || coalesce(sf.path || ':' || s.qualified_name, 'unresolved')
             FROM code_refs r JOIN code_files f ON f.id = r.file_id
             LEFT JOIN code_symbols s ON s.id = r.resolved_symbol_id
             LEFT JOIN code_files sf ON sf.id = s.file_id
             UNION ALL
             SELECT 'edge ' || a.key || ' -> ' || b.key || ' ' || e.kind
             FROM graph_edges e JOIN graph_nodes a ON a.id = e.from_id
             JOIN graph_nodes b ON b.id = e.to_id WHERE e.kind = 'calls'
             ORDER BY 1",
            (),
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.unwrap() {
        out.push(row.get::<String>(0).unwrap());
    }
    out
}

async fn open(db: &Path, root: &Path) -> Engram {
    let mut options = OpenOptions::new(db);
    options.project_root = Some(root.to_owned());
    Engram::open(options).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn re_indexed_files_resolve_as_a_full_index_does() {
    let seed = std::env::var("ENGRAM_RESOLVE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7e50_u64);
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let mut modules: Vec<Module> = (0..FILES)
        .map(|i| Module {
            defs: vec![(i % NAMES.len(), vec![(i + 1) % NAMES.len()], 0)],
        })
        .collect();
    for (i, module) in modules.iter().enumerate() {
        write_module(&root, i, module);
    }
    let db = dir.path().join("incremental.db");
    let e = open(&db, &root).await;
    e.index(&IndexOptions::default(), &|_| {}, &Default::default())
        .await
        .unwrap();
    let mut kinds_seen = [0u32; 5];
    for round in 0..40u64 {
        // One to three files change, each in one of five ways.
        let mut changed = Vec::new();
        for _ in 0..=rng.below(3) {
            let i = rng.below(FILES as u64) as usize;
            let module = &mut modules[i];
            let kind = rng.below(5) as usize;
            kinds_seen[kind] += 1;
            match kind {
                // Add a definition (perhaps a second one of a name in this file).
                0 => {
                    let calls = vec![rng.below(NAMES.len() as u64) as usize];
                    module
                        .defs
                        .push((rng.below(NAMES.len() as u64) as usize, calls, round));
                }
                // Remove one.
                1 if !module.defs.is_empty() => {
                    let at = rng.below(module.defs.len() as u64) as usize;
                    module.defs.remove(at);
                }
                // Rename one.
                2 if !module.defs.is_empty() => {
                    let at = rng.below(module.defs.len() as u64) as usize;
                    module.defs[at].0 = rng.below(NAMES.len() as u64) as usize;
                }
                // Change what one calls.
                3 if !module.defs.is_empty() => {
                    let at = rng.below(module.defs.len() as u64) as usize;
                    module.defs[at].1 = vec![rng.below(NAMES.len() as u64) as usize];
                }
                // Edit bodies only: every definition keeps its name, lines stay.
                _ => {
                    for def in &mut module.defs {
                        def.2 = round + 1;
                    }
                }
            }
            write_module(&root, i, module);
            changed.push(format!("m{i}.py"));
        }
        changed.sort();
        changed.dedup();
        e.index_paths(&changed, &IndexOptions::default())
            .await
            .unwrap();

        let fresh_db = dir.path().join(format!("fresh{round}.db"));
        let fresh = open(&fresh_db, &root).await;
        fresh
            .index(&IndexOptions::default(), &|_| {}, &Default::default())
            .await
            .unwrap();
        fresh.close().await;
        let (got, want) = (resolutions(&db).await, resolutions(&fresh_db).await);
        assert!(
            want.iter().any(|r| !r.ends_with("unresolved")) && want.len() > FILES,
            "the tree resolves something: {want:#?}"
        );
        assert_eq!(
            got, want,
            "round {round} (seed {seed:#x}) after changing {changed:?}"
        );
    }
    assert!(kinds_seen.iter().all(|&n| n > 0), "{kinds_seen:?}");
    e.close().await;
}
