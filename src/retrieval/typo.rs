//! Typo tolerance for recall's keyword path: when exact BM25 finds too little, query words the
//! indexes have never seen are replaced by the closest indexed term (`dokcer` -> `docker`).
//!
//! The vocabulary is every term of the chunk and memory indexes with its document count (read
//! through `fts5vocab` tables), held in memory with a trigram index over it and rebuilt when the
//! indexes changed (at most every 30 s). A word's candidates are the terms sharing enough of its trigrams (padded, so
//! the ends count) and of about its length; the winner is the one at the smallest edit distance
//! (transpositions count one, as in Damerau's), then the most documents. The terms are porter
//! stems, as the index stores them, so a correction is searched as a prefix (`docker*`): the
//! stemmer applied to a stem does not always give the stem back.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use rust_stemmers::{Algorithm, Stemmer};

use super::term_counts::TermCounts;
use crate::error::{DbContext, Result};
use crate::memory::{self, Ctx};
use crate::store::Reader;
use crate::text::fts_query::FtsQuery;

/// Words shorter than this are never corrected (too many terms are one edit away).
const MIN_WORD_CHARS: usize = 4;
/// Longest word corrected (identifiers this long are not typed by hand).
const MAX_WORD_CHARS: usize = 32;

/// Every indexed term, with a trigram index over them.
#[derive(Debug, Default)]
pub(crate) struct Vocabulary {
    terms: Vec<(String, u32)>,
    grams: HashMap<[char; 3], Vec<u32>>,
}

/// What the vocabulary was built from: rebuilt when it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Generation([i64; 5]);

/// How long a vocabulary serves after the indexes changed before it is rebuilt. Reading every
/// term takes ~0.3 s at 50k chunks, and an agent writes memories between most recalls: a
/// rebuild per write would make every corrected recall pay it.
const REBUILD_AFTER_MS: i64 = 30_000;

/// Which index's terms a vocabulary holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Terms {
    /// The chunks' and the memories' (recall searches both).
    #[default]
    All,
    /// The memories' alone (memory search): a correction to a word only code holds would
    /// find no memory.
    Memories,
}

/// One of the engine's vocabularies, built on first need.
#[derive(Debug, Default)]
pub(crate) struct VocabularyCache {
    terms: Terms,
    built: tokio::sync::Mutex<Option<Built>>,
}

#[derive(Debug)]
struct Built {
    generation: Generation,
    at_ms: i64,
    vocabulary: Arc<Vocabulary>,
}

impl VocabularyCache {
    /// An empty cache of `terms`.
    pub(crate) fn new(terms: Terms) -> VocabularyCache {
        VocabularyCache {
            terms,
            built: Default::default(),
        }
    }

    /// The vocabulary: rebuilt when the indexes changed since it was built and it is at
    /// least [`REBUILD_AFTER_MS`] old (`now_ms` on the engine's clock).
    pub(crate) async fn current(
        &self,
        reader: &mut Reader<'_>,
        now_ms: i64,
    ) -> Result<Arc<Vocabulary>> {
        let mut cached = self.built.lock().await;
        let generation = generation(reader).await?;
        if let Some(built) = cached.as_ref() {
            if built.generation == generation || now_ms - built.at_ms < REBUILD_AFTER_MS {
                return Ok(built.vocabulary.clone());
            }
        }
        let vocabulary = Arc::new(Vocabulary::load(reader, self.terms).await?);
        *cached = Some(Built {
            generation,
            at_ms: now_ms,
            vocabulary: vocabulary.clone(),
        });
        Ok(vocabulary)
    }
}

/// Memory search with typo tolerance: the hits of `query`, and when fewer than half of the
/// page match every term (`Any` mode: fewer than half are found), those of the corrected
/// query: exact hits of the original, then of the correction, then partial ones in the same
/// order; the hits the correction placed carry the corrected query.
pub(crate) async fn search_memories(
    ctx: &Ctx<'_>,
    vocabulary: &VocabularyCache,
    query: &str,
    options: &memory::SearchOptions,
) -> Result<Vec<memory::SearchHit>> {
    let hits = memory::search(ctx, query, options).await?;
    let limit = options.limit.unwrap_or(memory::DEFAULT_SEARCH_LIMIT) as usize;
    let good = if options.mode == memory::SearchMode::Any {
        hits.len()
    } else {
        hits.iter().filter(|h| h.matched_all).count()
    };
    if !options.typo || good >= (limit / 2).max(1) {
        return Ok(hits);
    }
    let Some(corrected) =
        corrected_query(ctx, vocabulary, query, &mut TermCounts::default()).await?
    else {
        return Ok(hits);
    };
    let more = memory::search(ctx, &corrected, options).await?;
    // Exact before partial, the original's before the correction's at each level. A hit
    // carries the corrected query when the correction is what found it, or what made it match
    // every term (the original found it partially).
    let (exact, partial): (Vec<_>, Vec<_>) = hits.into_iter().partition(|h| h.matched_all);
    let (more_exact, more_partial): (Vec<_>, Vec<_>) =
        more.into_iter().partition(|h| h.matched_all);
    let mut merged: Vec<memory::SearchHit> = Vec::with_capacity(limit);
    let levels = [
        (exact, false),
        (more_exact, true),
        (partial, false),
        (more_partial, true),
    ];
    for (level, corrected_level) in levels {
        for mut hit in level {
            if merged.iter().any(|h| h.memory.id == hit.memory.id) {
                continue;
            }
            if corrected_level {
                hit.corrected_query = Some(corrected.clone());
            }
            merged.push(hit);
        }
    }
    merged.truncate(limit);
    Ok(merged)
}

/// `query` with every word that neither index holds replaced by the closest indexed term (as
/// a prefix: the terms are stems); `None` when no word needed or found a correction.
pub(crate) async fn corrected_query(
    ctx: &Ctx<'_>,
    cache: &VocabularyCache,
    query: &str,
    counts: &mut TermCounts,
) -> Result<Option<String>> {
    let Some(parsed) = FtsQuery::parse(query) else {
        return Ok(None);
    };
    let mut reader = ctx.store.reader().await;
    let mut vocabulary = None;
    let mut changed = false;
    let mut words = Vec::with_capacity(parsed.positive.len());
    for (term, expr) in parsed.positive.iter().zip(parsed.term_exprs()) {
        let plain = !term.phrase && !term.prefix && term.text.chars().all(char::is_alphanumeric);
        if plain
            && counts.of(&mut reader, &expr).await? == 0
            && memory::document_frequency(&mut reader, &expr).await? == 0
        {
            if vocabulary.is_none() {
                let now = ctx.clock.now_ms();
                vocabulary = Some(cache.current(&mut reader, now).await?);
            }
            if let Some(fixed) = vocabulary.as_ref().and_then(|v| v.correct(&term.text)) {
                words.push(format!("{fixed}*"));
                changed = true;
                continue;
            }
        }
        words.push(if term.phrase {
            format!("\"{}\"", term.text)
        } else if term.prefix {
            format!("{}*", term.text)
        } else {
            term.text.clone()
        });
    }
    for term in &parsed.negative {
        words.push(format!(
            "-{}{}",
            term.text,
            if term.prefix { "*" } else { "" }
        ));
    }
    Ok(changed.then(|| words.join(" ")))
}

/// Row counts and largest ids of both indexed tables (any insert or delete changes one) and
/// the memories' last update (a memory's text changes in place).
async fn generation(reader: &mut Reader<'_>) -> Result<Generation> {
    const SQL: &str =
        "SELECT (SELECT count(*) FROM code_chunks), (SELECT max(id) FROM code_chunks),
        (SELECT count(*) FROM memories), (SELECT max(seq) FROM memories),
        (SELECT max(updated_at) FROM memories)";
    let rows = reader
        .query_cached(SQL, (), |row| {
            let mut values = [0i64; 5];
            for (i, value) in values.iter_mut().enumerate() {
                *value = row
                    .get::<Option<i64>>(i as i32)
                    .ctx("index generation")?
                    .unwrap_or(0);
            }
            Ok(values)
        })
        .await?;
    Ok(Generation(rows.into_iter().next().unwrap_or_default()))
}

impl Vocabulary {
    /// Reads every term of the `source` indexes (document counts summed over them).
    async fn load(reader: &mut Reader<'_>, source: Terms) -> Result<Vocabulary> {
        const ALL: &str = "SELECT term, sum(doc) FROM (
            SELECT term, doc FROM code_chunks_vocab UNION ALL SELECT term, doc FROM memories_vocab)
            GROUP BY term";
        const MEMORIES: &str = "SELECT term, doc FROM memories_vocab";
        let sql = match source {
            Terms::All => ALL,
            Terms::Memories => MEMORIES,
        };
        let terms = reader
            .query_cached(sql, (), |row| {
                let term: String = row.get(0).ctx("term")?;
                let docs: i64 = row.get(1).ctx("term documents")?;
                Ok((term, docs.clamp(0, i64::from(u32::MAX)) as u32))
            })
            .await?;
        Ok(Vocabulary::new(terms))
    }

    /// A vocabulary of `terms` with their document counts.
    pub(crate) fn new(terms: Vec<(String, u32)>) -> Vocabulary {
        let terms: Vec<(String, u32)> = terms
            .into_iter()
            .filter(|(term, _)| {
                let chars = term.chars().count();
                (MIN_WORD_CHARS - 1..=MAX_WORD_CHARS + 2).contains(&chars)
                    && term.chars().any(char::is_alphabetic)
            })
            .collect();
        let mut grams: HashMap<[char; 3], Vec<u32>> = HashMap::new();
        for (i, (term, _)) in terms.iter().enumerate() {
            let mut own = trigrams(term);
            own.sort_unstable();
            own.dedup();
            for gram in own {
                grams.entry(gram).or_default().push(i as u32);
            }
        }
        Vocabulary { terms, grams }
    }

    /// The indexed term closest to `word` (lower-cased), when one is close enough (one edit
    /// for words of up to five characters, two for longer ones) and `word` is not itself one.
    /// A word too far from every term is tried once more as its English stem, so an inflected
    /// misspelling meets the stem the index holds (`confgurations` -> `confgur` -> `configur`).
    pub(crate) fn correct(&self, word: &str) -> Option<&str> {
        let word = word.to_lowercase();
        let raw = match self.closest(&word) {
            Closest::Known => return None,
            Closest::Term(term, distance) => Some((distance, term)),
            Closest::Nothing => None,
        };
        // The stem too: `conenction` is two edits from `convention` but its stem one from
        // `connect`, the word meant. The nearer wins; a tie keeps the word's own match.
        let stem = STEMMER.stem(&word);
        let stemmed = if stem == word {
            None
        } else {
            match self.closest(&stem) {
                // The index holds the stem under the other Porter: searching it finds the word.
                Closest::Known => self.term(&stem).map(|term| (0, term)),
                Closest::Term(term, distance) => Some((distance, term)),
                Closest::Nothing => None,
            }
        };
        match (raw, stemmed) {
            (Some(r), Some(s)) if s.0 < r.0 => Some(s.1),
            (Some(r), _) => Some(r.1),
            (None, s) => s.map(|(_, term)| term),
        }
    }

    /// `word` as the vocabulary stores it, when it is there.
    fn term(&self, word: &str) -> Option<&str> {
        let grams = trigrams(word);
        let first = self.grams.get(grams.first()?)?;
        first
            .iter()
            .map(|&i| self.terms[i as usize].0.as_str())
            .find(|term| *term == word)
    }

    /// The closest indexed term to the lower-cased `word`, or that `word` is indexed itself.
    fn closest(&self, word: &str) -> Closest<'_> {
        let word: Vec<char> = word.chars().collect();
        if !(MIN_WORD_CHARS..=MAX_WORD_CHARS).contains(&word.len()) {
            return Closest::Nothing;
        }
        let max_distance = if word.len() <= 5 { 1 } else { 2 };
        let word_text: String = word.iter().collect();
        let mut own = trigrams(&word_text);
        own.sort_unstable();
        own.dedup();
        // A term `max_distance` edits away shares at least this many padded trigrams: an
        // insertion, deletion or substitution breaks at most three, a swap of neighbours four.
        let needed = own.len().saturating_sub(4 * max_distance).max(1);
        let mut shared: HashMap<u32, usize> = HashMap::new();
        for gram in &own {
            for &i in self.grams.get(gram).into_iter().flatten() {
                *shared.entry(i).or_default() += 1;
            }
        }
        let mut best: Option<(usize, u32, &str)> = None;
        for (i, count) in shared {
            if count < needed {
                continue;
            }
            let (term, docs) = &self.terms[i as usize];
            let chars: Vec<char> = term.chars().collect();
            if chars == word {
                return Closest::Known; // an indexed word needs no correction
            }
            if chars.len().abs_diff(word.len()) > max_distance {
                continue;
            }
            let distance = edit_distance(&word, &chars);
            if distance > max_distance {
                continue;
            }
            let better = match best {
                None => true,
                Some((d, n, t)) => {
                    (distance, std::cmp::Reverse(*docs), term.as_str())
                        < (d, std::cmp::Reverse(n), t)
                }
            };
            if better {
                best = Some((distance, *docs, term));
            }
        }
        best.map_or(Closest::Nothing, |(distance, _, term)| {
            Closest::Term(term, distance)
        })
    }
}

/// What the vocabulary holds near a word.
enum Closest<'a> {
    /// The word itself is indexed.
    Known,
    /// The closest indexed term within the allowed edits, and its distance.
    Term(&'a str, usize),
    /// No indexed term is close enough.
    Nothing,
}

/// English stems (Porter2) of query words. The index stems with the original Porter, so the
/// two may differ in a suffix; a correction is searched as a prefix, which absorbs that.
static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The trigrams of `word` padded with two `\0` on each side, so that its ends count.
fn trigrams(word: &str) -> Vec<[char; 3]> {
    let padded: Vec<char> = ['\0', '\0']
        .into_iter()
        .chain(word.chars())
        .chain(['\0', '\0'])
        .collect();
    padded.windows(3).map(|w| [w[0], w[1], w[2]]).collect()
}

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`: the optimal string
/// alignment distance.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    for (j, cell) in rows.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows[i * width] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[(i - 1) * width + j] + 1)
                .min(rows[i * width + j - 1] + 1)
                .min(rows[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[(i - 2) * width + j - 2] + 1);
            }
            rows[i * width + j] = d;
        }
    }
    rows[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary() -> Vocabulary {
        Vocabulary::new(
            [
                ("docker", 40),
                ("dock", 3),
                ("kubernet", 12),
                ("container", 30),
                ("password", 25),
                ("passport", 2),
                ("db", 90),
            ]
            .into_iter()
            .map(|(t, n)| (t.to_owned(), n))
            .collect(),
        )
    }

    #[test]
    fn misspelt_words_find_the_closest_indexed_term() {
        let v = vocabulary();
        assert_eq!(v.correct("dokcer"), Some("docker"), "a swap is one edit");
        assert_eq!(v.correct("Dockr"), Some("docker"));
        assert_eq!(v.correct("pasword"), Some("password"));
        assert_eq!(v.correct("containr"), Some("container"));
        assert_eq!(
            v.correct("kubernetse"),
            Some("kubernet"),
            "two edits for long words"
        );
        assert_eq!(v.correct("ocntainre"), Some("container"), "two swaps");
    }

    #[test]
    fn known_short_or_far_words_are_left_alone() {
        let v = vocabulary();
        assert_eq!(v.correct("docker"), None, "already indexed");
        assert_eq!(v.correct("dbx"), None, "too short to correct");
        assert_eq!(v.correct("zebra"), None);
        assert_eq!(v.correct("dxqwer"), None, "three edits from docker");
    }

    #[test]
    fn inflected_misspellings_meet_the_stem_the_index_holds() {
        let v = Vocabulary::new(
            [
                ("configur", 12),
                ("migrat", 9),
                ("deploy", 20),
                ("general", 4),
            ]
            .into_iter()
            .map(|(t, n)| (t.to_owned(), n))
            .collect(),
        );
        assert_eq!(v.correct("confgurations"), Some("configur"));
        assert_eq!(v.correct("migratons"), Some("migrat"));
        assert_eq!(v.correct("deplyoing"), Some("deploy"));
        assert_eq!(
            v.correct("generalizations"),
            Some("general"),
            "the stem itself, when the other Porter left the word unmatched"
        );
        assert_eq!(v.correct("zebras"), None, "a stem far from every term");
        // Two edits from a term as written, one from another through its stem: the nearer.
        let v = Vocabulary::new(vec![("convention".into(), 50), ("connect".into(), 5)]);
        assert_eq!(v.correct("conenction"), Some("connect"));
    }

    #[test]
    fn ties_go_to_the_term_in_more_documents() {
        let v = Vocabulary::new(vec![("parse".into(), 5), ("parso".into(), 50)]);
        assert_eq!(v.correct("parsx"), Some("parso"));
    }

    #[test]
    fn edit_distance_counts_swaps_as_one() {
        let d = |a: &str, b: &str| {
            edit_distance(
                &a.chars().collect::<Vec<_>>(),
                &b.chars().collect::<Vec<_>>(),
            )
        };
        assert_eq!(d("dokcer", "docker"), 1);
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("same", "same"), 0);
    }
}
