//! What kind of question a query is: an identifier (`parseConfig`, `MAX_RETRIES`, `src/auth.ts`,
//! `Store::open`), a question about structure ("what calls X", "who imports the parser"), or a
//! description in words. The kind sets how much the graph path counts in the fusion; how the
//! rest is split between keywords and meaning is read per query (`weights`).
//!
//! The seed detects identifiers by `[a-z][A-Z]|_[a-z]` or a `/`, and structure only from the
//! agent's recent tool calls. We also catch `SCREAMING_SNAKE`, `::` and `.` paths, file names,
//! lone PascalCase words and backticked code, and structural phrasing in the query itself.

use std::sync::OnceLock;

use regex::Regex;

/// The kind of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryKind {
    /// Names something in the code: found by its tokens.
    Identifier,
    /// Describes behaviour in words: found by meaning.
    Semantic,
    /// Asks about relations (callers, imports, impact): found through the graph.
    Structural,
}

impl QueryKind {
    /// Lower-case name, as results report it.
    pub fn as_str(self) -> &'static str {
        match self {
            QueryKind::Identifier => "identifier",
            QueryKind::Semantic => "semantic",
            QueryKind::Structural => "structural",
        }
    }

    /// The weight each candidate path starts from in the fusion: keyword, dense, graph (each
    /// row sums to 1).
    ///
    /// The kind decides the graph path's share: the seed's 0.6 when the query asks about
    /// structure, 0.2 otherwise (it can be checked only by agents' use, through their recent
    /// files). The keyword and dense share is split per query, by what the paths found and
    /// whether chunks or memories are ranked (`weights`); these rows split it evenly.
    ///
    /// The seed's rows (identifier .5/.2/.3, semantic .25/.5/.25) fix the split by kind. On
    /// our dev sets a query's kind says little about which path finds its answer: doc
    /// sentences that the identifier pattern catches and those it does not favour the same
    /// path (see `docs/BENCHMARK.md`).
    pub fn path_weights(self) -> PathWeights {
        match self {
            QueryKind::Identifier | QueryKind::Semantic => PathWeights {
                keyword: 0.4,
                dense: 0.4,
                graph: 0.2,
            },
            QueryKind::Structural => PathWeights {
                keyword: 0.2,
                dense: 0.2,
                graph: 0.6,
            },
        }
    }
}

/// How much each candidate path counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathWeights {
    /// BM25 over memories and chunks.
    pub keyword: f64,
    /// Vector similarity.
    pub dense: f64,
    /// Graph neighbours of the files in play.
    pub graph: f64,
}

/// Tool names after which the agent is asking about structure (the seed's, plus ours).
const STRUCTURAL_TOOLS: [&str; 6] = [
    "analyzeImpact",
    "getDependencies",
    "impact",
    "neighbours",
    "traverse",
    "reach",
];

fn identifier_pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(concat!(
            r"[a-z][A-Z]",                   // camelCase (not 2FA, 4GB)
            r"|[A-Za-z0-9]_[A-Za-z0-9]",     // snake_case, SCREAMING_SNAKE
            r"|::|->|`",                     // paths, arrows, code spans
            r"|\b[\w.-]+/[\w.-]+/",          // a/b/... (not and/or)
            r"|\b[\w.-]+/[\w-]+\.\w{1,4}\b", // dir/file.ext
            r"|\b(src|lib|app|pkg|cmd|internal|tests?|crates|packages)/\w",
            r"|[A-Za-z_]\w*\.[A-Za-z_]\w*\(", // a.call(
            r"|\b[A-Za-z_]\w*\.[A-Za-z_]\w*\.[A-Za-z_]\w*\b", // a.b.c (not 1.2.3)
            r"|\b\w+\.(ts|tsx|js|jsx|mjs|cjs|py|rs|go|json|toml|yaml|yml|md|sql|sh)\b",
            r"|\b\w+\(\)", // name()
        ))
        .expect("valid pattern")
    })
}

fn structural_pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(concat!(
            r"(?i)\b(what|who)\s+(calls|imports|uses|depends\s+on|references|extends|implements|inherits\s+from)\b",
            r"|\b(callers?|callees?|dependents|importers|implementations|subclasses)\s+of\b",
            r"|\bimpact\s+of\s+(changing|editing|removing|deleting|renaming|modifying)\b",
            r"|\bwhat\s+(breaks|would\s+break)\b|\bblast\s+radius\b",
        ))
        .expect("valid pattern")
    })
}

/// The kind of `query`, given the agent's recent tool calls (names).
pub fn detect(query: &str, recent_tool_calls: &[String]) -> QueryKind {
    let trimmed = query.trim();
    if structural_pattern().is_match(trimmed) {
        return QueryKind::Structural;
    }
    if identifier_pattern().is_match(trimmed) || is_lone_pascal_word(trimmed) {
        return QueryKind::Identifier;
    }
    if recent_tool_calls
        .iter()
        .any(|t| STRUCTURAL_TOOLS.contains(&t.as_str()))
    {
        return QueryKind::Structural;
    }
    QueryKind::Semantic
}

/// One word starting with a capital that has another capital inside and a lower-case letter
/// (`HashMap`; not `Engram`, `API` or `TODO`): a type name.
fn is_lone_pascal_word(query: &str) -> bool {
    let mut chars = query.chars();
    query.split_whitespace().count() == 1
        && chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.clone().any(|c| c.is_ascii_uppercase())
        && chars.clone().any(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_recognised_in_their_usual_spellings() {
        for q in [
            "parseConfig",
            "where is parse_config defined",
            "MAX_RETRIES",
            "Store::open",
            "src/auth/session.ts",
            "session.ts",
            "HashMap",
            "what does `open` return",
            "self.store.get()",
            "open()",
        ] {
            assert_eq!(detect(q, &[]), QueryKind::Identifier, "{q}");
        }
    }

    #[test]
    fn descriptions_are_semantic() {
        for q in [
            "retry the upload when the network fails",
            "how are sessions stored",
            "Database migrations",
            "Why do we use Redis.",
            "enable 2FA for admins",
            "needs 4GB of memory",
            "tests and/or benchmarks",
            "upgrade from v1.2.3",
            "bind to 127.0.0.1 only",
            "API",
            "TODO",
            "Engram",
            "e.g. the retry loop, i.e. backoff",
        ] {
            assert_eq!(detect(q, &[]), QueryKind::Semantic, "{q}");
        }
    }

    #[test]
    fn relations_are_structural_from_the_words_or_the_tools() {
        for q in [
            "what calls the session store",
            "who imports the parser",
            "callers of verifyPassword",
            "what depends on the config loader",
            "impact of changing the schema",
            "what would break if I delete the cache",
        ] {
            assert_eq!(detect(q, &[]), QueryKind::Structural, "{q}");
        }
        for q in [
            "which version uses less memory",
            "what is the import format for CSV",
            "what call limits does the API have",
            "performance impact of the cache",
            "retry delay depends on the backoff",
            "Which references should I read",
        ] {
            assert_ne!(detect(q, &[]), QueryKind::Structural, "{q}");
        }
        let tools = vec!["Read".to_owned(), "analyzeImpact".to_owned()];
        assert_eq!(detect("the session store", &tools), QueryKind::Structural);
        // An identifier wins over the tools (the seed's order).
        assert_eq!(detect("sessionStore", &tools), QueryKind::Identifier);
    }

    #[test]
    fn each_row_of_weights_sums_to_one() {
        for kind in [
            QueryKind::Identifier,
            QueryKind::Semantic,
            QueryKind::Structural,
        ] {
            let w = kind.path_weights();
            assert!((w.keyword + w.dense + w.graph - 1.0).abs() < 1e-9);
        }
    }
}
