//! Deterministic benchmark corpora, the same generator as `benches/js/corpus.mjs` (same seeds
//! give the same memories and queries, so core and JS figures describe the same data).
//!
//! - Zipf (realistic, the target's corpus): words drawn with exponent 1 from a 4,000-term
//!   vocabulary headed by English function words (dropped by the query builder, as in real
//!   queries), then programming words, then pronounceable pseudo-words standing in for
//!   identifiers. Queries are 1-5 distinct content words of a random memory; every 5th swaps
//!   one word for a word that occurs nowhere (exercising the OR fallback).
//! - Uniform (stress): every word of a 130-word vocabulary equally likely, so each query term
//!   is in roughly 15% of memories.

pub const WORDS: &str = "auth token refresh session cookie database migration schema index query cache redis queue worker \
thread pool connection timeout retry backoff error panic exception stack trace log metric \
deploy docker container kubernetes config env variable secret build compile test fixture mock \
route handler middleware request response header json parse serialize stream buffer file path \
module import export function class method interface type generic trait async await promise \
lock mutex race deadlock transaction commit rollback replica sync offline network socket http \
graph node edge closure impact search rank embedding vector chunk prefix budget token limit";

const FUNCTION_WORDS: &str =
    "the to a of and in is for it that on with as be this are by from at or an not can if \
when we use should which have do has was will into so then but its there their our these";

const VOCABULARY_SIZE: usize = 4000;

/// xorshift32 producing floats in [0, 1), as the JS `rng`.
pub struct Rng(u32);

impl Rng {
    pub fn new(seed: u32) -> Self {
        Rng(if seed == 0 { 1 } else { seed })
    }

    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0 as f64 / 4_294_967_296.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() * n as f64) as usize
    }
}

/// One generated memory.
pub struct Memory {
    pub content: String,
    pub tag: String,
    pub file: String,
}

pub struct Zipf {
    vocabulary: Vec<String>,
    cumulative: Vec<f64>,
    words: Vec<&'static str>,
    function_words: Vec<&'static str>,
}

fn pseudo_word(i: usize) -> String {
    let consonants = b"bcdfghklmnprstvz";
    let vowels = b"aeiou";
    let syllable = |k: usize| {
        format!(
            "{}{}",
            consonants[k % 16] as char,
            vowels[(k / 16) % 5] as char
        )
    };
    let mut word = syllable(i % 80) + &syllable((i / 80) % 80);
    if i >= 6400 {
        word += &syllable((i / 6400) % 80);
    }
    word
}

impl Zipf {
    pub fn new() -> Self {
        let words: Vec<&str> = WORDS.split(' ').collect();
        let function_words: Vec<&str> = FUNCTION_WORDS.split(' ').collect();
        let mut vocabulary: Vec<String> = Vec::new();
        for w in function_words.iter().chain(words.iter()) {
            if !vocabulary.iter().any(|v| v == w) {
                vocabulary.push((*w).to_owned());
            }
        }
        let mut i = 0;
        while vocabulary.len() < VOCABULARY_SIZE {
            vocabulary.push(pseudo_word(i));
            i += 1;
        }
        let mut total = 0.0;
        let cumulative = (0..vocabulary.len())
            .map(|rank| {
                total += 1.0 / (rank + 1) as f64;
                total
            })
            .collect();
        Zipf {
            vocabulary,
            cumulative,
            words,
            function_words,
        }
    }

    fn word(&self, rand: &mut Rng) -> &str {
        let target = rand.next() * self.cumulative[self.cumulative.len() - 1];
        let at = self.cumulative.partition_point(|&c| c < target);
        &self.vocabulary[at.min(self.vocabulary.len() - 1)]
    }

    pub fn memories(&self, count: usize, seed: u32) -> Vec<Memory> {
        let mut rand = Rng::new(seed);
        (0..count)
            .map(|i| {
                let n = 8 + rand.below(16);
                let content = (0..n)
                    .map(|_| self.word(&mut rand).to_owned())
                    .collect::<Vec<_>>()
                    .join(" ");
                let tag = self.words[rand.below(self.words.len())].to_owned();
                let file = format!("src/{}/{}.ts", self.word(&mut rand), i % 97);
                Memory {
                    content: format!("{content} (#{i})"),
                    tag,
                    file,
                }
            })
            .collect()
    }

    pub fn queries(&self, corpus: &[Memory], count: usize, seed: u32) -> Vec<String> {
        let mut rand = Rng::new(seed);
        (0..count)
            .map(|i| {
                let doc = &corpus[rand.below(corpus.len())].content;
                let mut words: Vec<&str> = doc.split(' ').collect();
                words.pop(); // the "(#i)" marker
                words.retain(|w| !self.function_words.contains(w));
                let fallback;
                if words.is_empty() {
                    fallback = self.word(&mut rand).to_owned();
                    words.push(&fallback);
                }
                let mut distinct = words.clone();
                distinct.sort_unstable();
                distinct.dedup();
                let want = (1 + i % 5).min(distinct.len());
                let mut picked: Vec<&str> = Vec::new();
                while picked.len() < want {
                    let w = words[rand.below(words.len())];
                    if !picked.contains(&w) {
                        picked.push(w);
                    }
                }
                let mut out: Vec<String> = picked.iter().map(|w| (*w).to_owned()).collect();
                if i % 5 == 4 {
                    *out.last_mut().unwrap() = format!("qqx{i}");
                }
                out.join(" ")
            })
            .collect()
    }
}

/// The uniform stress corpus.
pub fn uniform_memories(count: usize, seed: u32) -> Vec<Memory> {
    let words: Vec<&str> = WORDS.split(' ').collect();
    let mut rand = Rng::new(seed);
    (0..count)
        .map(|i| {
            let n = 8 + rand.below(16);
            let content = (0..n)
                .map(|_| words[rand.below(words.len())])
                .collect::<Vec<_>>()
                .join(" ");
            let tag = words[rand.below(words.len())].to_owned();
            let file = format!("src/{}/{}.ts", words[rand.below(words.len())], i % 97);
            Memory {
                content: format!("{content} (#{i})"),
                tag,
                file,
            }
        })
        .collect()
}

/// Uniform stress queries of 1-5 words.
pub fn uniform_queries(count: usize, seed: u32) -> Vec<String> {
    let words: Vec<&str> = WORDS.split(' ').collect();
    let mut rand = Rng::new(seed);
    (0..count)
        .map(|i| {
            let min = 1 + i % 5;
            let n = min + rand.below(1);
            (0..n)
                .map(|_| words[rand.below(words.len())])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Copies a database file with its WAL and shared-memory side files (a bench's template to a
/// fresh file per run).
#[allow(dead_code)] // Only the benches that prune or merge copy databases.
pub fn copy_database(from: &std::path::Path, to: &std::path::Path) {
    std::fs::copy(from, to).unwrap();
    for suffix in ["-wal", "-shm"] {
        let side = std::path::PathBuf::from(format!("{}{suffix}", from.display()));
        if side.exists() {
            std::fs::copy(&side, format!("{}{suffix}", to.display())).unwrap();
        }
    }
}
