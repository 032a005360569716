//! Data-driven chunker tests: each fixture in `tests/fixtures/code/` has a `.chunks` file with
//! the expected chunk list (`kind name lines`), produced by real tree-sitter parses with small
//! budgets so that splitting, merging and atomic functions all show up in small files.
//!
//! After an intended change, `ENGRAM_BLESS=1 cargo test --test code_chunks` rewrites the
//! expectations; review the diff like code.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use engram::code::chunk::{embedding_text, text_hash};
use engram::code::{
    analyze, AnalyzeOptions, Chunk, ChunkKind, ChunkOptions, Definition, FileAnalysis, FileKind,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/code")
}

fn small_budgets() -> AnalyzeOptions {
    AnalyzeOptions {
        chunk: ChunkOptions {
            max_tokens: 160,
            small_tokens: 40,
            merge_tokens: 120,
        },
        ..AnalyzeOptions::default()
    }
}

fn analyze_fixture(name: &str) -> (String, FileAnalysis) {
    let path = fixtures().join(name);
    let bytes = std::fs::read(&path).unwrap();
    let kind = FileKind::of(&path).expect("fixture has a known kind");
    let mut parser = tree_sitter::Parser::new();
    let analysis = analyze(
        &mut parser,
        name,
        &bytes,
        kind,
        &small_budgets(),
        &AtomicBool::new(false),
    );
    (String::from_utf8(bytes).unwrap(), analysis)
}

fn render(analysis: &FileAnalysis) -> String {
    let mut out = String::new();
    for c in &analysis.chunks {
        let name = c
            .qualified_name
            .as_deref()
            .or(c.name.as_deref())
            .unwrap_or("-");
        out.push_str(&format!(
            "{} {} {}-{}",
            c.kind.as_str(),
            name,
            c.start_line,
            c.end_line
        ));
        if c.symbols.len() > 1
            || (c.symbols.len() == 1 && c.qualified_name.as_ref() != c.symbols.first())
        {
            out.push_str(&format!(" [{}]", c.symbols.join(", ")));
        }
        out.push('\n');
        for part in &c.parts {
            out.push_str(&format!(
                "  part {} {} {}-{}\n",
                part.kind.as_str(),
                part.symbol,
                part.start_line,
                part.end_line
            ));
        }
    }
    out
}

#[test]
fn every_fixture_chunks_as_expected() {
    let bless = std::env::var_os("ENGRAM_BLESS").is_some();
    let mut failures = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if FileKind::of(&path).is_none() || name.ends_with(".chunks") {
            continue;
        }
        let (_, analysis) = analyze_fixture(&name);
        let actual = render(&analysis);
        let expected_path = fixtures().join(format!("{name}.chunks"));
        if bless {
            std::fs::write(&expected_path, &actual).unwrap();
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if actual != expected {
            failures.push(format!(
                "{name}\n--- expected\n{expected}--- actual\n{actual}"
            ));
        }
        checked += 1;
    }
    assert!(
        checked >= 7,
        "fixtures for every language ({checked} found)"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_method_chunk_names_its_class_and_repeats_its_signature() {
    let (source, analysis) = analyze_fixture("sample.ts");
    let sign = analysis
        .chunks
        .iter()
        .find(|c| c.qualified_name.as_deref() == Some("TokenService.sign"))
        .expect("sign has its own chunk");
    assert_eq!(
        sign.context,
        "File: sample.ts | method: TokenService.sign | Lines: 32-38 | In: export class TokenService extends BaseService implements Disposable {"
    );
    assert!(
        sign.content.starts_with("/** Signs a token"),
        "doc comment goes with the method"
    );
    assert_eq!(&source[sign.start_byte..sign.end_byte], sign.content);
    assert_eq!(sign.token_estimate as usize, sign.content.len().div_ceil(4));
    assert_eq!(sign.content_hash.len(), 32);
}

/// Source files of a real corpus installed on this machine: this crate's sources, Python's
/// standard library, the TypeScript compiler's declarations and JavaScript from node_modules.
fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut take = |dir: PathBuf, limit: usize| {
        let mut found = Vec::new();
        collect(&dir, &mut found);
        found.sort();
        files.extend(found.into_iter().take(limit));
    };
    take(root.join("src"), usize::MAX);
    take(root.join("tests/fixtures/code"), usize::MAX);
    take(PathBuf::from("/usr/lib/python3.11/json"), 40);
    take(PathBuf::from("/usr/lib/python3.11/asyncio"), 40);
    take(root.join("node_modules/typescript/lib"), 6);
    take(root.join("node_modules/semver"), 40);
    take(root.join("node_modules/@napi-rs/cli/dist"), 20);
    files
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if matches!(FileKind::of(&path), Some(FileKind::Code(_)))
            && entry.metadata().is_ok_and(|m| m.len() < 600_000)
        {
            out.push(path);
        }
    }
}

#[test]
fn every_function_of_a_real_corpus_lands_whole_in_exactly_one_chunk() {
    let files = corpus();
    assert!(files.len() >= 30, "corpus too small: {} files", files.len());
    let mut parser = tree_sitter::Parser::new();
    let (mut functions, mut chunks, mut parts) = (0, 0, 0);
    for budgets in [small_budgets(), AnalyzeOptions::default()] {
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let kind = FileKind::of(path).unwrap();
            let name = path.display().to_string();
            let a = analyze(
                &mut parser,
                &name,
                &bytes,
                kind,
                &budgets,
                &AtomicBool::new(false),
            );
            let text = String::from_utf8_lossy(&bytes);
            // Chunks are in order, disjoint, and together hold every non-blank byte.
            let mut covered = 0;
            for c in &a.chunks {
                assert!(
                    c.start_byte >= covered,
                    "{name}: chunks overlap at byte {}",
                    c.start_byte
                );
                assert!(
                    text[covered..c.start_byte].trim().is_empty(),
                    "{name}: bytes {covered}..{} in no chunk",
                    c.start_byte
                );
                covered = c.end_byte;
            }
            assert!(
                text[covered..].trim().is_empty(),
                "{name}: tail after byte {covered} in no chunk"
            );
            for c in &a.chunks {
                check_parts(&name, &text, c, &a.definitions);
                parts += c.parts.len();
            }
            for d in a.definitions.iter().filter(|d| d.kind.is_atomic()) {
                let holders = a
                    .chunks
                    .iter()
                    .filter(|c| c.start_byte <= d.start_byte && d.end_byte <= c.end_byte)
                    .count();
                assert_eq!(
                    holders, 1,
                    "{name}: {} (lines {}-{}) is split",
                    d.qualified_name, d.start_line, d.end_line
                );
                functions += 1;
            }
            chunks += a.chunks.len();
        }
    }
    assert!(functions > 1000, "only {functions} functions checked");
    assert!(parts > 100, "only {parts} parts of grouped chunks checked");
    eprintln!(
        "{} files, {functions} functions, {chunks} chunks, {parts} parts",
        files.len()
    );
}

/// A grouped chunk has one part per outermost definition it holds, a container chunk (a class
/// that fit whole) one per member when it holds two or more, in order, each cut from the
/// chunk's own text around that definition and keyed by the hash of what is embedded; other
/// chunks have none.
fn check_parts(name: &str, text: &str, c: &Chunk, defs: &[Definition]) {
    let inside = |d: &Definition| c.start_byte <= d.start_byte && d.end_byte <= c.end_byte;
    let outermost: Vec<usize> = (0..defs.len())
        .filter(|&i| inside(&defs[i]) && defs[i].parent.is_none_or(|p| !inside(&defs[p])))
        .collect();
    let held: Vec<&Definition> = match (c.kind, outermost.as_slice()) {
        (ChunkKind::Block, _) => outermost.iter().map(|&i| &defs[i]).collect(),
        (ChunkKind::Def(_), [container]) => {
            let members: Vec<&Definition> = defs
                .iter()
                .filter(|d| d.parent == Some(*container) && inside(d))
                .collect();
            if members.len() >= 2 {
                members
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    };
    let symbols: Vec<&str> = c.parts.iter().map(|p| p.symbol.as_str()).collect();
    let expected: Vec<&str> = held.iter().map(|d| d.qualified_name.as_str()).collect();
    assert_eq!(
        symbols, expected,
        "{name}: lines {}-{}",
        c.start_line, c.end_line
    );
    for (part, def) in c.parts.iter().zip(held) {
        let body = c
            .content
            .get(part.content_range.clone())
            .unwrap_or_else(|| panic!("{name}: {} cuts the chunk mid-character", part.symbol));
        let at = c.start_byte + part.content_range.start;
        assert!(
            at <= def.start_byte && def.end_byte <= at + body.len(),
            "{name}: part {} does not hold its definition",
            part.symbol
        );
        assert_eq!(&text[at..at + body.len()], body);
        assert!(part.start_line <= def.start_line && part.end_line == def.end_line);
        assert!(part
            .context
            .contains(&format!(": {} | Lines: ", part.symbol)));
        assert_eq!(
            part.embed_hash,
            text_hash(&embedding_text(&part.context, body))
        );
    }
}
