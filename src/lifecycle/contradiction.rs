//! Contradiction detection between two memory texts, without a model.
//!
//! Two memories contradict when they talk about the same thing (most of their content words
//! are shared) and disagree on it in one of three ways a reader would notice:
//!
//! - **polarity**: one is negated and the other is not ("use the pool for migrations" /
//!   "never use the pool for migrations");
//! - **values**: both state values and the values differ ("JWTs expire after 24h" /
//!   "JWTs expire after 1h"). A number is a value when it carries a unit (`24h`, `500ms`,
//!   `10mb`) or follows a word that introduces one (`after`, `port`, `timeout`, `is`...);
//!   a number that names something ("note 5", "issue 42") is not, so two notes about
//!   different issues do not contradict;
//! - **opposites**: one holds a word whose opposite the other holds ("strict mode is enabled" /
//!   "strict mode is disabled").
//!
//! Same topic is a Jaccard similarity of at least [`MIN_SIMILARITY`] over content words (stop
//! words, negations and numbers left out) with at least [`MIN_SHARED`] words in common. The
//! rule is deliberately conservative: a false link costs a person a review, a missed one is
//! found later by consolidation. Both memories are kept and flagged; nothing is decided here.

use std::collections::BTreeSet;

/// Least share of content words two texts must share to be about the same thing.
pub const MIN_SIMILARITY: f64 = 0.5;

/// Least number of content words two texts must share.
pub const MIN_SHARED: usize = 3;

/// How two texts disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disagreement {
    /// One is negated, the other is not.
    Polarity,
    /// They state different numbers.
    Values,
    /// They use opposite words.
    Opposites,
}

/// A detected contradiction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contradiction {
    /// Jaccard similarity of the content words (how surely they are about the same thing).
    pub similarity: f64,
    /// How they disagree.
    pub disagreement: Disagreement,
}

const NEGATIONS: &[&str] = &[
    "not", "no", "never", "none", "nothing", "without", "avoid", "dont", "doesnt", "isnt", "arent",
    "wasnt", "werent", "cant", "cannot", "wont", "shouldnt", "mustnt", "neednt", "didnt", "havent",
    "hasnt",
];

const OPPOSITES: &[(&str, &str)] = &[
    ("true", "false"),
    ("enable", "disable"),
    ("enabled", "disabled"),
    ("enables", "disables"),
    ("always", "sometimes"),
    ("allow", "deny"),
    ("allowed", "forbidden"),
    ("allowed", "denied"),
    ("sync", "async"),
    ("synchronous", "asynchronous"),
    ("increase", "decrease"),
    ("before", "after"),
    ("required", "optional"),
    ("mutable", "immutable"),
    ("include", "exclude"),
    ("public", "private"),
    ("on", "off"),
    ("first", "last"),
    ("success", "failure"),
    ("works", "fails"),
    ("safe", "unsafe"),
    ("supported", "unsupported"),
    ("valid", "invalid"),
    ("min", "max"),
    ("minimum", "maximum"),
    ("upper", "lower"),
];

/// Words after which a number is a value (see the module doc).
const VALUE_CUES: &[&str] = &[
    "after", "for", "every", "is", "are", "was", "be", "to", "at", "of", "than", "within", "under",
    "over", "max", "maximum", "min", "minimum", "limit", "timeout", "port", "version", "size",
    "retries", "attempts", "expire", "expires", "ttl", "until", "from", "by", "per", "set",
    "equals", "uses", "use", "needs", "requires", "least", "most", "default",
];

const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "if", "then", "else", "of", "to", "in", "into", "for",
    "with", "by", "at", "from", "as", "is", "are", "was", "were", "be", "been", "being", "it",
    "its", "this", "that", "these", "those", "there", "here", "we", "you", "they", "he", "she",
    "i", "our", "your", "their", "do", "does", "did", "done", "so", "than", "too", "very", "can",
    "could", "should", "would", "will", "shall", "may", "might", "must", "has", "have", "had",
    "which", "who", "what", "when", "where", "why", "how", "all", "any", "each", "also", "only",
    "just", "use", "uses", "used", "using", "through", "about", "over", "under",
];

/// A text cut into what comparison needs.
#[derive(Debug, Default)]
struct Profile {
    words: BTreeSet<String>,
    /// Numbers that state a value (not those that name something).
    numbers: BTreeSet<String>,
    negations: usize,
    all: BTreeSet<String>,
}

fn profile(text: &str) -> Profile {
    let mut p = Profile::default();
    // Apostrophes are dropped so that "don't" is the single token "dont".
    let folded: String = text
        .chars()
        .filter(|c| *c != '\'' && *c != '’')
        .flat_map(char::to_lowercase)
        .collect();
    let mut previous: Option<String> = None;
    for token in folded.split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_')) {
        let token = token.trim_matches('.');
        if token.is_empty() {
            continue;
        }
        let before = previous.replace(token.to_owned());
        p.all.insert(token.to_owned());
        if token.starts_with(|c: char| c.is_ascii_digit()) {
            let has_unit = token.chars().any(|c| c.is_alphabetic());
            if has_unit || before.as_deref().is_some_and(|w| VALUE_CUES.contains(&w)) {
                p.numbers.insert(token.to_owned());
            }
        } else if NEGATIONS.contains(&token) {
            p.negations += 1;
        } else if !STOP_WORDS.contains(&token) && !is_opposite_word(token) {
            p.words.insert(token.to_owned());
        }
    }
    p
}

fn is_opposite_word(token: &str) -> bool {
    OPPOSITES.iter().any(|(a, b)| *a == token || *b == token)
}

/// Whether `a` and `b` contradict each other (see the module doc); `None` when they do not,
/// or when they are not about the same thing.
pub fn contradiction(a: &str, b: &str) -> Option<Contradiction> {
    Profiled::new(a).contradiction(b)
}

/// A text cut once for comparing it with many others (the write-time scan compares a new
/// memory with dozens of candidates).
#[derive(Debug)]
pub struct Profiled(Profile);

impl Profiled {
    /// Cuts `text`.
    pub fn new(text: &str) -> Self {
        Profiled(profile(text))
    }

    /// [`contradiction`] of this text and `other`.
    pub fn contradiction(&self, other: &str) -> Option<Contradiction> {
        compare(&self.0, &profile(other))
    }
}

fn compare(pa: &Profile, pb: &Profile) -> Option<Contradiction> {
    let shared = pa.words.intersection(&pb.words).count();
    let union = pa.words.union(&pb.words).count();
    if shared < MIN_SHARED || union == 0 {
        return None;
    }
    let similarity = shared as f64 / union as f64;
    if similarity < MIN_SIMILARITY {
        return None;
    }
    let disagreement = if (pa.negations % 2) != (pb.negations % 2) {
        Disagreement::Polarity
    } else if !pa.numbers.is_empty() && !pb.numbers.is_empty() && pa.numbers != pb.numbers {
        Disagreement::Values
    } else if OPPOSITES.iter().any(|(x, y)| {
        let holds = |p: &Profile, w: &str| p.all.contains(w);
        (holds(pa, x) && holds(pb, y) && !holds(pa, y) && !holds(pb, x))
            || (holds(pa, y) && holds(pb, x) && !holds(pa, x) && !holds(pb, y))
    }) {
        Disagreement::Opposites
    } else {
        return None;
    };
    Some(Contradiction {
        similarity,
        disagreement,
    })
}

/// Up to `max` distinctive words of `text` for finding memories on the same topic through the
/// keyword index: content words of at least three characters, longest first (length is a
/// cheap stand-in for rarity), each safe to quote in an FTS5 query (letters, digits, `_`).
pub fn topic_terms(text: &str, max: usize) -> Vec<String> {
    let mut words: Vec<String> = profile(text)
        .words
        .into_iter()
        .map(|w| w.replace('.', " "))
        .flat_map(|w| w.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|w| w.chars().count() >= 3 && w.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect();
    words.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    words.dedup();
    words.truncate(max);
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negation_on_the_same_topic_is_a_contradiction() {
        let c = contradiction(
            "Run the database migrations through the connection pool",
            "Never run the database migrations through the connection pool",
        )
        .expect("contradiction");
        assert_eq!(c.disagreement, Disagreement::Polarity);
        assert!(c.similarity >= 0.99);
        let c = contradiction(
            "Do not mock the payment gateway in integration tests",
            "Mock the payment gateway in integration tests",
        );
        assert_eq!(c.map(|c| c.disagreement), Some(Disagreement::Polarity));
        let c = contradiction(
            "Don't cache session tokens in the browser storage",
            "Cache session tokens in the browser storage",
        );
        assert_eq!(c.map(|c| c.disagreement), Some(Disagreement::Polarity));
    }

    #[test]
    fn different_numbers_on_the_same_topic_are_a_contradiction() {
        let c = contradiction(
            "JWT access tokens expire after 24h",
            "JWT access tokens expire after 1h",
        );
        assert_eq!(c.map(|c| c.disagreement), Some(Disagreement::Values));
        assert_eq!(
            contradiction(
                "The API server listens on port 3000 locally",
                "The API server listens on port 8080 locally"
            )
            .map(|c| c.disagreement),
            Some(Disagreement::Values)
        );
    }

    #[test]
    fn numbers_that_name_things_are_not_values() {
        assert_eq!(
            contradiction(
                "offline note 5 about the flaky retry path",
                "offline note 3 about the flaky retry path"
            ),
            None
        );
        assert_eq!(
            contradiction(
                "Issue 42 is caused by the flaky retry path in the worker",
                "Issue 43 is caused by the flaky retry path in the worker"
            ),
            None
        );
        assert_eq!(
            contradiction(
                "The worker retries 3 times with a timeout of 30 seconds",
                "The worker retries 3 times with a timeout of 60 seconds"
            )
            .map(|c| c.disagreement),
            Some(Disagreement::Values)
        );
    }

    #[test]
    fn opposite_words_on_the_same_topic_are_a_contradiction() {
        let c = contradiction(
            "TypeScript strict mode is enabled for the web package",
            "TypeScript strict mode is disabled for the web package",
        );
        assert_eq!(c.map(|c| c.disagreement), Some(Disagreement::Opposites));
    }

    #[test]
    fn agreement_and_unrelated_texts_are_not_contradictions() {
        // Same statement, other words order: agreement.
        assert_eq!(
            contradiction(
                "JWT access tokens expire after 24h",
                "After 24h the JWT access tokens expire"
            ),
            None
        );
        // Both negated: agreement.
        assert_eq!(
            contradiction(
                "Never commit the .env file to the repository",
                "Do not commit the .env file to the repository"
            ),
            None
        );
        // Negated, but about something else.
        assert_eq!(
            contradiction(
                "Never log request bodies in the auth middleware",
                "Use pnpm workspaces for the monorepo packages"
            ),
            None
        );
        // Too few words in common to tell.
        assert_eq!(contradiction("tests pass", "tests never pass"), None);
    }

    #[test]
    fn topic_terms_are_distinct_quotable_content_words_longest_first() {
        let terms = topic_terms(
            "Never run the database migrations through pool.connect() twice",
            4,
        );
        assert_eq!(terms, vec!["migrations", "database", "connect", "twice"]);
        assert!(topic_terms("a an the", 5).is_empty());
        for t in topic_terms(
            "\"quoted\" OR NEAR(x y) -minus col:value * émoji 🎉 test",
            10,
        ) {
            assert!(t.chars().all(|c| c.is_alphanumeric() || c == '_'), "{t}");
        }
    }
}
