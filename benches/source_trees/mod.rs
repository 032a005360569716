//! Real source trees installed on this machine, shared by the code and graph benches:
//! - `python`: the installed CPython standard library (`/usr/lib/python3.*`);
//! - `rust`: the tokio sources in the cargo registry (a dependency of libsql, so always fetched);
//! - `typescript`: `node_modules/@types/node` (`.d.ts` sources shipped in an npm package);
//! - `javascript`: `node_modules/@napi-rs/cli` (the CLI's shipped JavaScript);
//! - `ENGRAM_BENCH_CORPUS=/some/dir`: that directory only.

use std::path::{Path, PathBuf};

/// The corpora present here, by name.
#[allow(dead_code)] // the retrieval evaluation reads only tokio
pub fn corpora() -> Vec<(String, PathBuf)> {
    if let Ok(dir) = std::env::var("ENGRAM_BENCH_CORPUS") {
        return vec![("custom".to_owned(), PathBuf::from(dir))];
    }
    let mut found = Vec::new();
    if let Some(python) = newest_dir("/usr/lib", "python3.", |d| d.join("os.py").is_file()) {
        found.push(("python".to_owned(), python));
    }
    if let Some(tokio) = tokio_dir() {
        found.push(("rust".to_owned(), tokio));
    }
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("node_modules");
    for (name, dir) in [
        ("typescript", "@types/node"),
        ("javascript", "@napi-rs/cli"),
    ] {
        if modules.join(dir).is_dir() {
            found.push((name.to_owned(), modules.join(dir)));
        }
    }
    found
}

/// The newest tokio 1.x in the cargo registry, across its indexes, by version (1.54 after 1.9):
/// a dependency of libsql, so always fetched.
pub fn tokio_dir() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    std::fs::read_dir(cargo_home.join("registry/src"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|index| newest_dir(index.path(), "tokio-1.", |_| true))
        .max_by_key(|dir| version_of(dir))
}

/// The directory in `parent` named `prefix` + the highest version that passes `ok`.
pub fn newest_dir(
    parent: impl AsRef<Path>,
    prefix: &str,
    ok: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .filter(|p| p.is_dir() && ok(p))
        .max_by_key(|p| version_of(p))
}

/// The numbers of a versioned directory name (`tokio-1.54.1` -> [1, 54, 1]; `python3.11` after
/// `python3.9`).
fn version_of(dir: &Path) -> Vec<u64> {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    name.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

#[allow(dead_code)]
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::create_dir_all(to).unwrap();
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The `.rs` files under `root`, sorted (what `.gitignore` files leave).
#[allow(dead_code)] // only the embedding benches use it
pub fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = ignore::Walk::new(root)
        .flatten()
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
}

/// Contextual texts (prefix, blank line, code) of up to `limit` chunks of the rust corpus
/// (tokio), chunked by our own AST chunker, in file order.
// Only the embedding benches use it.
#[allow(dead_code)]
pub fn tokio_chunk_texts(limit: usize) -> Vec<String> {
    let (_, root) = corpora()
        .into_iter()
        .find(|(name, _)| name == "rust" || name == "custom")
        .expect("a rust corpus (tokio in the cargo registry)");
    let files = rust_files(&root);
    let mut parser = tree_sitter::Parser::new();
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let mut texts = Vec::new();
    for path in files {
        let Some(kind) = engram::code::FileKind::of(&path) else {
            continue;
        };
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let analysis = engram::code::analyze(
            &mut parser,
            &rel,
            &bytes,
            kind,
            &engram::code::AnalyzeOptions::default(),
            &cancel,
        );
        for chunk in analysis.chunks {
            texts.push(format!("{}\n\n{}", chunk.context, chunk.content));
            if texts.len() == limit {
                return texts;
            }
        }
    }
    texts
}
