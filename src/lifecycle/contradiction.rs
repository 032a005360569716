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

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

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

/// What a word is to the comparison, for the words that are not plain content words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WordClass {
    Negation,
    Stop,
    Opposite,
}

/// The special words by class, looked up once per token (a linear scan of the lists was
/// most of the cost of comparing a memory with its candidates).
static WORD_CLASSES: LazyLock<HashMap<&'static str, WordClass>> = LazyLock::new(|| {
    let mut classes = HashMap::new();
    for (a, b) in OPPOSITES {
        classes.insert(*a, WordClass::Opposite);
        classes.insert(*b, WordClass::Opposite);
    }
    for w in STOP_WORDS {
        classes.entry(*w).or_insert(WordClass::Stop);
    }
    // Negations win: "no" and "not" must count as negations whatever else they are.
    for w in NEGATIONS {
        classes.insert(*w, WordClass::Negation);
    }
    classes
});

/// A text cut into what comparison needs.
#[derive(Debug, Default)]
struct Profile {
    words: BTreeSet<String>,
    /// Numbers that state a value (not those that name something).
    numbers: BTreeSet<String>,
    negations: usize,
    all: BTreeSet<String>,
}

/// `text` lower-cased with apostrophes dropped, so that "don't" is the single token "dont".
fn fold(text: &str) -> String {
    if text.is_ascii() {
        // The common case, a byte at a time (char-wise lower-casing is most of a comparison).
        let mut folded = text.to_ascii_lowercase();
        folded.retain(|c| c != '\'');
        return folded;
    }
    text.chars()
        .filter(|c| *c != '\'' && *c != '’')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The tokens of a folded text: runs of letters, digits, `.` and `_`, outer dots trimmed.
fn tokens(folded: &str) -> impl Iterator<Item = &str> {
    folded
        .split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_'))
        .map(|token| token.trim_matches('.'))
        .filter(|token| !token.is_empty())
}

fn starts_with_digit(token: &str) -> bool {
    token.starts_with(|c: char| c.is_ascii_digit())
}

/// Whether a token is a content word: what topic similarity is measured over.
fn is_content_word(token: &str) -> bool {
    !starts_with_digit(token) && !WORD_CLASSES.contains_key(token)
}

fn profile(text: &str) -> Profile {
    let mut p = Profile::default();
    let folded = fold(text);
    let mut previous: Option<&str> = None;
    for token in tokens(&folded) {
        let before = previous.replace(token);
        p.all.insert(token.to_owned());
        if starts_with_digit(token) {
            let has_unit = token.chars().any(|c| c.is_alphabetic());
            if has_unit || before.is_some_and(|w| VALUE_CUES.contains(&w)) {
                p.numbers.insert(token.to_owned());
            }
        } else {
            match WORD_CLASSES.get(token) {
                Some(WordClass::Negation) => p.negations += 1,
                Some(_) => {}
                None => {
                    p.words.insert(token.to_owned());
                }
            }
        }
    }
    p
}

/// Jaccard similarity of two sets of content words, or `None` below the same-topic bar
/// ([`MIN_SHARED`] words, [`MIN_SIMILARITY`]).
fn topic_similarity(shared: usize, union: usize) -> Option<f64> {
    if shared < MIN_SHARED || union == 0 {
        return None;
    }
    let similarity = shared as f64 / union as f64;
    (similarity >= MIN_SIMILARITY).then_some(similarity)
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
        // Most candidates are not on the same topic: measure that on borrowed tokens first,
        // and cut `other` fully only when it is.
        self.same_topic(other)?;
        compare(&self.0, &profile(other))
    }

    /// The words to look a same-topic text up by in the keyword index: few enough to be cheap,
    /// enough that every text on the same topic holds one of them (up to `max`).
    ///
    /// A text on the same topic shares at least half of this text's `n` content words (a
    /// Jaccard similarity of 1/2 needs it) and at least [`MIN_SHARED`], so any `n - shared + 1`
    /// of them include one it holds (prefix filtering). The longest are taken, length being a
    /// cheap stand-in for rarity. Empty when no text can be on the same topic. Each term is
    /// letters, digits, `.` and `_` only: quoted, it is a literal word or phrase for FTS5.
    pub fn topic_terms(&self, max: usize) -> Vec<&str> {
        let n = self.0.words.len();
        if n < MIN_SHARED {
            return Vec::new();
        }
        let least_shared = n.div_ceil(2).max(MIN_SHARED);
        let mut words: Vec<&str> = self
            .0
            .words
            .iter()
            .map(String::as_str)
            // "__" is a word here but nothing to FTS5, which could not find it.
            .filter(|w| w.chars().any(char::is_alphanumeric))
            .collect();
        words.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        words.truncate((n - least_shared + 1).min(max));
        words
    }

    /// The Jaccard similarity of the content words when `other` is on the same topic:
    /// exactly the test [`compare`] starts with, without building `other`'s profile.
    fn same_topic(&self, other: &str) -> Option<f64> {
        let folded = fold(other);
        let mut words: Vec<&str> = tokens(&folded).filter(|t| is_content_word(t)).collect();
        words.sort_unstable();
        words.dedup();
        // Both sides are sorted: count the shared words in one merge.
        let mut mine = self.0.words.iter().map(String::as_str).peekable();
        let mut shared = 0;
        for word in &words {
            while mine.next_if(|m| m < word).is_some() {}
            if mine.next_if_eq(word).is_some() {
                shared += 1;
            }
        }
        topic_similarity(shared, self.0.words.len() + words.len() - shared)
    }
}

fn compare(pa: &Profile, pb: &Profile) -> Option<Contradiction> {
    let shared = pa.words.intersection(&pb.words).count();
    let similarity = topic_similarity(shared, pa.words.len() + pb.words.len() - shared)?;
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
    fn the_topic_gate_agrees_with_the_full_profiles() {
        let texts = [
            "Run the database migrations through the connection pool",
            "Never run the database migrations through the connection pool",
            "Don't cache session tokens in the browser's storage",
            "Cache session tokens in the browser storage, not the cookie",
            "JWT access tokens expire after 24h",
            "JWT access tokens expire after 1h; refresh tokens after 30 days",
            "Strict mode is enabled in tsconfig.json",
            "strict MODE is disabled in tsconfig.json... always",
            "the the the a an of",
            "pool pool pool database database migrations",
            "no, not none: nothing without avoid",
            "src/auth/session.ts uses the session_store for tokens",
        ];
        for a in texts {
            let profiled = Profiled::new(a);
            for b in texts {
                let (pa, pb) = (profile(a), profile(b));
                let shared = pa.words.intersection(&pb.words).count();
                let full = topic_similarity(shared, pa.words.union(&pb.words).count());
                assert_eq!(profiled.same_topic(b), full, "{a:?} / {b:?}");
            }
        }
        // The gate passes the pairs that matter.
        let p = Profiled::new(texts[0]);
        assert!(p.same_topic(texts[1]).is_some());
        assert!(p.same_topic(texts[2]).is_none());
    }

    #[test]
    fn topic_terms_are_the_longest_content_words_enough_to_find_any_same_topic_text() {
        // 5 content words: a same-topic text shares at least 3, so any 3 find it.
        let p = Profiled::new("Never run the database migrations through pool.connect() twice");
        assert_eq!(
            p.topic_terms(8),
            vec!["pool.connect", "migrations", "database"]
        );
        assert_eq!(p.topic_terms(2), vec!["pool.connect", "migrations"]);
        assert!(Profiled::new("a an the").topic_terms(5).is_empty());
        assert!(Profiled::new("pool database").topic_terms(5).is_empty());
        for t in Profiled::new("\"quoted\" OR NEAR(x y) -minus col:value * émoji 🎉 test")
            .topic_terms(10)
        {
            assert!(
                t.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.'),
                "{t}"
            );
        }
        // The guarantee: every text on the same topic holds one of the terms.
        let texts = [
            "run database migrations pool twice",
            "twice run migrations pool quickly database",
            "pool.connect database migrations run",
            "never run database migrations twice through the pool",
        ];
        let terms = p.topic_terms(8);
        let mut same_topic = 0;
        for text in texts {
            if p.same_topic(text).is_some() {
                same_topic += 1;
                let other = profile(text);
                assert!(terms.iter().any(|t| other.words.contains(*t)), "{text}");
            }
        }
        assert_eq!(same_topic, texts.len());
    }
}
