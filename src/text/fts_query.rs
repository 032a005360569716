//! A safe FTS5 query builder: any user text becomes a valid MATCH expression.
//!
//! FTS5's query language treats `"`, `*`, `-`, `:`, `^`, `(`, `)`, `AND`/`OR`/`NOT`/`NEAR` and
//! column names specially; raw user text in MATCH is a syntax error or, worse, a different
//! query. So every term is emitted as a double-quoted string (quotes inside doubled), which
//! FTS5 runs through the table's own tokenizer: `foo.bar` becomes the phrase `foo bar`,
//! exactly as it was indexed, and operators in user text are plain words.
//!
//! Supported syntax in user text:
//! - `"exact phrase"` (an unbalanced quote is ignored),
//! - `prefix*` (a trailing star on a term of at least two characters),
//! - `-term` excludes (only when something positive remains).
//!
//! Common English stopwords are dropped unless nothing else remains: with implicit AND they
//! would demand words nobody indexes meaningfully, and in the OR fallback they match
//! everything.

/// At most this many terms are used; the rest of a very long query is ignored.
pub const MAX_TERMS: usize = 32;

/// One unit of the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The text, without surrounding quotes.
    pub text: String,
    /// Quoted by the user: matched as a phrase, never dropped as a stopword.
    pub phrase: bool,
    /// Matched as a prefix of the last token.
    pub prefix: bool,
}

impl Term {
    fn render(&self) -> String {
        let mut out = String::with_capacity(self.text.len() + 4);
        out.push('"');
        out.push_str(&self.text.replace('"', "\"\""));
        out.push('"');
        if self.prefix {
            out.push('*');
        }
        out
    }
}

/// A parsed query, rendered on demand as an AND or an OR expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtsQuery {
    /// Terms that must (AND) or may (OR) match.
    pub positive: Vec<Term>,
    /// Terms whose matches are excluded.
    pub negative: Vec<Term>,
}

impl FtsQuery {
    /// Parses user text; `None` when nothing searchable remains (empty, only punctuation or
    /// emoji, only exclusions).
    pub fn parse(text: &str) -> Option<FtsQuery> {
        let mut positive = Vec::new();
        let mut negative = Vec::new();
        for raw in split(text) {
            if positive.len() + negative.len() >= MAX_TERMS {
                break;
            }
            let (term, negated) = match raw {
                Raw::Phrase(p) => (
                    Term {
                        text: p,
                        phrase: true,
                        prefix: false,
                    },
                    false,
                ),
                Raw::Word(w) => {
                    let negated = w.starts_with('-') && w.len() > 1;
                    let body = w.trim_start_matches('-');
                    let prefix = body.ends_with('*');
                    let body = body.trim_end_matches('*');
                    // A prefix of one character would scan most of the index.
                    let prefix =
                        prefix && body.chars().filter(|c| c.is_alphanumeric()).count() >= 2;
                    (
                        Term {
                            text: body.to_owned(),
                            phrase: false,
                            prefix,
                        },
                        negated,
                    )
                }
            };
            if !term.text.chars().any(char::is_alphanumeric) {
                continue; // nothing the tokenizer would keep
            }
            if negated {
                negative.push(term);
            } else {
                positive.push(term);
            }
        }
        if positive.is_empty() {
            return None;
        }
        let meaningful: Vec<Term> = positive
            .iter()
            .filter(|t| t.phrase || t.prefix || !is_stopword(&t.text))
            .cloned()
            .collect();
        if !meaningful.is_empty() {
            positive = meaningful;
        }
        positive.dedup();
        Some(FtsQuery { positive, negative })
    }

    /// Implicit AND of all positive terms.
    pub fn and_expr(&self) -> String {
        self.render(" ")
    }

    /// OR of all positive terms (the fallback when AND finds too little).
    pub fn or_expr(&self) -> String {
        self.render(" OR ")
    }

    /// One expression per positive term (each with the exclusions), for callers that weigh
    /// the terms themselves.
    pub fn term_exprs(&self) -> Vec<String> {
        self.positive
            .iter()
            .map(|term| {
                FtsQuery {
                    positive: vec![term.clone()],
                    negative: self.negative.clone(),
                }
                .and_expr()
            })
            .collect()
    }

    /// The same query keeping only the positive terms `keep` accepts (`None` when it accepts
    /// none).
    pub fn only(&self, mut keep: impl FnMut(usize, &Term) -> bool) -> Option<FtsQuery> {
        let positive: Vec<Term> = self
            .positive
            .iter()
            .enumerate()
            .filter(|(i, term)| keep(*i, term))
            .map(|(_, term)| term.clone())
            .collect();
        (!positive.is_empty()).then(|| FtsQuery {
            positive,
            negative: self.negative.clone(),
        })
    }

    /// The query reduced to the terms that pick documents out, for an OR that fills a page the
    /// AND left short: those whose `frequencies[i]` (documents matching term `i`) is at most
    /// `common`, or the rarest term when every one is more common.
    ///
    /// Why: FTS5 scores every match of an OR with `bm25()`, about 0.7 µs each, and a common
    /// word is in a tenth or a fifth of all documents. A document holding only such a word
    /// cannot outrank one holding a rare query word, so the fill loses little; the AND pass
    /// before it still requires every term.
    pub fn distinctive(&self, frequencies: &[u64], common: u64) -> FtsQuery {
        if let Some(rare) = self.only(|i, _| frequencies.get(i).is_some_and(|&f| f <= common)) {
            return rare;
        }
        let rarest = frequencies
            .iter()
            .enumerate()
            .min_by_key(|(_, f)| **f)
            .map_or(0, |(i, _)| i);
        self.only(|i, _| i == rarest)
            .unwrap_or_else(|| self.clone())
    }

    /// Whether AND and OR would differ.
    pub fn has_alternatives(&self) -> bool {
        self.positive.len() > 1
    }

    fn render(&self, joiner: &str) -> String {
        let pos = self
            .positive
            .iter()
            .map(Term::render)
            .collect::<Vec<_>>()
            .join(joiner);
        if self.negative.is_empty() {
            return pos;
        }
        let neg = self
            .negative
            .iter()
            .map(Term::render)
            .collect::<Vec<_>>()
            .join(" OR ");
        format!("({pos}) NOT ({neg})")
    }
}

enum Raw {
    Word(String),
    Phrase(String),
}

/// Splits on whitespace, keeping balanced double-quoted runs together.
fn split(text: &str) -> Vec<Raw> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            if let Some(end) = rest[1..].find('"') {
                if !word.is_empty() {
                    out.push(Raw::Word(std::mem::take(&mut word)));
                }
                let phrase = rest[1..1 + end].replace(|c: char| c.is_control(), " ");
                out.push(Raw::Phrase(phrase));
                rest = &rest[end + 2..];
            } else {
                // An unbalanced quote is just punctuation.
                rest = &rest[1..];
            }
            continue;
        }
        // Control characters (NUL ends a C string inside SQLite) separate words like spaces.
        if c.is_whitespace() || c.is_control() {
            if !word.is_empty() {
                out.push(Raw::Word(std::mem::take(&mut word)));
            }
        } else {
            word.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    if !word.is_empty() {
        out.push(Raw::Word(word));
    }
    out
}

fn is_stopword(word: &str) -> bool {
    const STOPWORDS: &[&str] = &[
        "a", "about", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does",
        "for", "from", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me",
        "my", "near", "not", "of", "on", "or", "our", "should", "so", "that", "the", "their",
        "then", "there", "these", "this", "to", "was", "we", "were", "what", "when", "where",
        "which", "who", "why", "will", "with", "you", "your",
    ];
    let lower = word.to_lowercase();
    STOPWORDS.binary_search(&lower.as_str()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinctive_keeps_the_rare_terms_or_else_the_rarest() {
        let query = FtsQuery::parse("deploy snapshot flaky").unwrap();
        let words = |q: FtsQuery| q.positive.into_iter().map(|t| t.text).collect::<Vec<_>>();
        assert_eq!(
            words(query.distinctive(&[5000, 12, 900], 1000)),
            ["snapshot", "flaky"]
        );
        assert_eq!(
            words(query.distinctive(&[5000, 3000, 1200], 1000)),
            ["flaky"]
        );
        assert_eq!(
            words(query.distinctive(&[1, 2, 3], 1000)),
            ["deploy", "snapshot", "flaky"]
        );
        let negated = FtsQuery::parse("deploy snapshot -flaky").unwrap();
        assert_eq!(negated.distinctive(&[5000, 12], 1000).negative.len(), 1);
    }

    #[test]
    fn stopword_list_is_sorted_for_binary_search() {
        assert!(is_stopword("the"));
        assert!(is_stopword("NEAR"));
        assert!(!is_stopword("database"));
    }

    #[test]
    fn plain_words_become_quoted_and() {
        let q = FtsQuery::parse("jwt refresh token").unwrap();
        assert_eq!(q.and_expr(), r#""jwt" "refresh" "token""#);
        assert_eq!(q.or_expr(), r#""jwt" OR "refresh" OR "token""#);
    }

    #[test]
    fn phrases_prefixes_and_exclusions() {
        let q = FtsQuery::parse(r#""connection pool" auth* -legacy"#).unwrap();
        assert_eq!(
            q.and_expr(),
            r#"("connection pool" "auth"*) NOT ("legacy")"#
        );
    }

    #[test]
    fn operators_and_syntax_in_user_text_are_words() {
        let q = FtsQuery::parse("content:foo NEAR(bar) OR baz ^qux").unwrap();
        assert_eq!(
            q.and_expr(),
            // `OR` is a stopword here, not an operator.
            r#""content:foo" "NEAR(bar)" "baz" "^qux""#
        );
    }

    #[test]
    fn control_characters_never_reach_sqlite() {
        let q = FtsQuery::parse("\"a\0b\" c\0d").unwrap();
        assert!(!q.and_expr().contains('\0'), "{}", q.and_expr());
    }

    #[test]
    fn nothing_searchable_is_none() {
        for text in [
            "",
            "   ",
            "\0",
            "***",
            "\"\"",
            "-foo",
            "🙂 🎉",
            "-- --",
            "\"",
            "( ) :",
        ] {
            assert!(FtsQuery::parse(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn stopwords_are_dropped_unless_alone() {
        let q = FtsQuery::parse("how do I configure the database").unwrap();
        assert_eq!(q.and_expr(), r#""configure" "database""#);
        let q = FtsQuery::parse("the who").unwrap();
        assert_eq!(q.and_expr(), r#""the" "who""#);
    }

    #[test]
    fn long_queries_are_capped() {
        let text = (0..100)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let q = FtsQuery::parse(&text).unwrap();
        assert_eq!(q.positive.len(), MAX_TERMS);
    }
}
