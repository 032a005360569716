//! The memory-side dev set: agent-style memories of five projects (gotchas, decisions, error
//! patterns, recipes, dead ends with their near-topic distractors), written by hand for the
//! purpose in `benches/fixtures/memory_eval.json`, with questions answered by one to three of
//! them. Paragraphs of the README files of the crates in the cargo registry join them as
//! distractors (rebuilt from the registry on every run), so that recall searches more than a
//! thousand memories, not three hundred. Their number depends on the crates in the registry
//! (1,361 with this project's lockfile fetched).

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The hand-written part of the set.
#[derive(Deserialize)]
pub struct MemorySet {
    /// The memories the questions are about (and their distractors).
    pub memories: Vec<EvalMemory>,
    /// The questions.
    pub questions: Vec<Question>,
}

/// One memory as the set writes it.
#[derive(Deserialize)]
pub struct EvalMemory {
    /// The set's own id (`m001`), which questions cite.
    pub id: String,
    /// A memory type (`gotcha`, `decision`, ...).
    #[serde(rename = "type")]
    pub memory_type: String,
    /// The text.
    pub content: String,
    /// Related files.
    #[serde(default)]
    pub files: Vec<String>,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// One question and the memories that answer it.
#[derive(Deserialize)]
pub struct Question {
    /// As a developer would ask it.
    pub question: String,
    /// The ids of every memory needed to answer it.
    pub evidence: Vec<String>,
    /// `paraphrase`, `lexical` or `multi`.
    #[serde(default)]
    pub style: String,
}

/// Reads the set, or `None` when the fixture is absent.
pub fn load() -> Option<MemorySet> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/fixtures/memory_eval.json");
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).expect("memory_eval.json parses"))
}

/// Up to `limit` prose paragraphs (25-120 words, no code) of the README files of the crates in
/// the cargo registry, in a stable order.
pub fn distractors(limit: usize) -> Vec<String> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let Some(registry) = cargo_home.map(|h| h.join("registry/src")) else {
        return Vec::new();
    };
    let mut readmes: Vec<PathBuf> = std::fs::read_dir(&registry)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|krate| krate.path().join("README.md"))
        .filter(|p| p.is_file())
        .collect();
    readmes.sort();
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for readme in readmes {
        let Ok(text) = std::fs::read_to_string(&readme) else {
            continue;
        };
        let mut in_code = false;
        let mut paragraph = Vec::new();
        for line in text.lines().chain(std::iter::once("")) {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                paragraph.clear();
                continue;
            }
            if in_code {
                continue;
            }
            let plain = !line.trim().is_empty()
                && !line.starts_with('#')
                && !line.starts_with('|')
                && !line.starts_with("    ")
                && !line.contains("](http")
                && !line.contains("<img");
            if plain {
                paragraph.push(line.trim());
                continue;
            }
            let words = paragraph
                .iter()
                .map(|l| l.split_whitespace().count())
                .sum::<usize>();
            if (25..=120).contains(&words) {
                let text = paragraph.join(" ");
                if seen.insert(text.clone()) {
                    out.push(text);
                    if out.len() == limit {
                        return out;
                    }
                }
            }
            paragraph.clear();
        }
    }
    out
}
