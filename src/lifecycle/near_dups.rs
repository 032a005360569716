//! Finding near-duplicate texts among many, without comparing every pair: pure functions over
//! records that [`super::consolidate`] loads.
//!
//! Two records can only be duplicates when they share a partition (consolidation partitions
//! by memory type, scope and share scope). Within a partition a pair is a near-duplicate when
//! either test holds:
//!
//! - **words**: the Jaccard similarity of their word sets is at least the word threshold.
//!   Found exactly with prefix filtering (Chaudhuri et al., "A primitive operator for
//!   similarity joins", 2006): with words ordered rarest first, two sets of Jaccard ≥ t share
//!   a word among the first `n - ceil(t·n) + 1` of each, so only records sharing such a word
//!   are compared, and only when their sizes allow it (`|small| ≥ t·|large|`).
//! - **meaning**: the cosine similarity of their vectors is at least the vector threshold.
//!   Candidates come from random-hyperplane locality-sensitive hashing (Charikar, 2002):
//!   [`LSH_TABLES`] tables of [`LSH_BITS`]-bit signatures of the mean-centred vectors, seeded
//!   so runs agree; pairs sharing a bucket in any table are compared exactly. This one is
//!   approximate: a pair at cosine 0.95 (after centring) shares a bucket with probability
//!   `1 - (1 - 0.899^10)^8 ≈ 0.97`, at 0.98 about 0.997; in a bucket of more than
//!   256 records, only records that close in load order are compared.
//!
//! Pairs are joined into groups with union-find; a group's `similarity` is the least
//! similarity of the pairs that joined it.

use std::collections::HashMap;

/// Signature bits per LSH table (at most 16: signatures are `u16`).
pub const LSH_BITS: usize = 10;
const _: () = assert!(LSH_BITS <= 16);
/// LSH tables.
pub const LSH_TABLES: usize = 8;
/// A bucket larger than this is compared only within windows of this size (records in a
/// bucket are in load order), so a degenerate bucket cannot make the run quadratic.
const MAX_BUCKET_SPAN: usize = 256;

/// One text to compare.
#[derive(Debug, Clone)]
pub struct Record {
    /// Records compare only within the same partition.
    pub partition: u32,
    /// The text's words (any case; split and lower-cased by [`words`]).
    pub words: Vec<String>,
    /// The text's vector, if it has one (any length; records with vectors of another
    /// length than the first are not compared by meaning).
    pub vector: Option<Vec<f32>>,
}

/// How a pair was found similar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// Word-set Jaccard similarity.
    Words,
    /// Vector cosine similarity.
    Meaning,
}

/// A group of near-duplicates: indexes into the records, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Members (at least two), ascending.
    pub members: Vec<usize>,
    /// The least similarity among the pairs that joined the group.
    pub similarity: f64,
    /// How that weakest pair was found.
    pub basis: Basis,
}

/// The lower-cased words of `text`: runs of letters, digits and `_`.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Groups of near-duplicates among `records` (see the module doc). `word_threshold` and
/// `vector_threshold` are in (0, 1]; a threshold of `None` turns its test off.
pub fn groups(
    records: &[Record],
    word_threshold: Option<f64>,
    vector_threshold: Option<f64>,
) -> Vec<Group> {
    let mut pairs = Vec::new();
    if let Some(t) = word_threshold {
        pairs.extend(word_pairs(records, t));
    }
    if let Some(t) = vector_threshold {
        pairs.extend(vector_pairs(records, t));
    }
    join(records.len(), pairs)
}

/// A similar pair: (a, b, similarity, basis) with a < b.
type Pair = (usize, usize, f64, Basis);

/// Pairs with word-set Jaccard ≥ `t`, exactly, by prefix filtering.
fn word_pairs(records: &[Record], t: f64) -> Vec<Pair> {
    // Words as ids, and each record's set ordered rarest first (ties by id).
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut sets: Vec<Vec<u32>> = records
        .iter()
        .map(|r| {
            let mut set: Vec<u32> = r
                .words
                .iter()
                .map(|w| {
                    let next = ids.len() as u32;
                    *ids.entry(w.as_str()).or_insert(next)
                })
                .collect();
            set.sort_unstable();
            set.dedup();
            set
        })
        .collect();
    let mut frequency = vec![0u32; ids.len()];
    for set in &sets {
        for &w in set {
            frequency[w as usize] += 1;
        }
    }
    for set in &mut sets {
        set.sort_unstable_by_key(|&w| (frequency[w as usize], w));
    }
    let mut order: Vec<usize> = (0..records.len())
        .filter(|&i| !sets[i].is_empty())
        .collect();
    order.sort_by_key(|&i| (records[i].partition, sets[i].len(), i));

    let mut pairs = Vec::new();
    // (partition, word) -> records already seen with that word in their prefix.
    let mut index: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
    let mut seen = vec![usize::MAX; records.len()];
    for &x in &order {
        let set = &sets[x];
        let n = set.len();
        let prefix = n - (t * n as f64).ceil() as usize + 1;
        let partition = records[x].partition;
        for &w in &set[..prefix.min(n)] {
            let posting = index.entry((partition, w)).or_default();
            for &y in posting.iter() {
                // Sets come in ascending size: y is no larger than x.
                if seen[y] == x || (sets[y].len() as f64) < t * n as f64 {
                    continue;
                }
                seen[y] = x;
                let similarity = jaccard(&sets[x], &sets[y], |w| (frequency[w as usize], w));
                if similarity >= t {
                    pairs.push((x.min(y), x.max(y), similarity, Basis::Words));
                }
            }
            posting.push(x);
        }
    }
    pairs
}

/// Jaccard similarity of two sets of distinct ids, both sorted by `key` (a merge, no
/// allocation).
fn jaccard<K: Ord>(a: &[u32], b: &[u32], key: impl Fn(u32) -> K) -> f64 {
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match key(a[i]).cmp(&key(b[j])) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - common;
    if union == 0 {
        0.0
    } else {
        common as f64 / union as f64
    }
}

/// Pairs with cosine ≥ `t` among the records with vectors, found through LSH buckets.
fn vector_pairs(records: &[Record], t: f64) -> Vec<Pair> {
    let Some(dims) = records.iter().find_map(|r| r.vector.as_ref().map(Vec::len)) else {
        return Vec::new();
    };
    if dims == 0 {
        return Vec::new();
    }
    let with: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].vector.as_ref().is_some_and(|v| v.len() == dims))
        .collect();
    let n = with.len();
    // Unit vectors in one flat array (the comparisons read them in bucket order).
    let mut units = vec![0f32; n * dims];
    for (k, &i) in with.iter().enumerate() {
        let v = records[i].vector.as_deref().expect("filtered");
        let norm = dot(v, v).sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        for (u, x) in units[k * dims..][..dims].iter_mut().zip(v) {
            *u = x * scale;
        }
    }
    let unit = |k: usize| &units[k * dims..][..dims];
    let signatures = signatures(&units, dims, n);
    let signature = |k: usize, table: usize| signatures[k * LSH_TABLES + table];

    let mut pairs = Vec::new();
    let mut order: Vec<usize> = (0..n).collect();
    for table in 0..LSH_TABLES {
        let key = |k: usize| (records[with[k]].partition, signature(k, table));
        order.sort_unstable_by_key(|&k| (key(k), k));
        for bucket in order.chunk_by(|&a, &b| key(a) == key(b)) {
            for (pos, &a) in bucket.iter().enumerate() {
                let window = &bucket[pos + 1..bucket.len().min(pos + 1 + MAX_BUCKET_SPAN)];
                for &b in window {
                    // Compared already in the first table where the two share a bucket.
                    if (0..table).any(|earlier| signature(a, earlier) == signature(b, earlier)) {
                        continue;
                    }
                    let cosine = f64::from(dot(unit(a), unit(b)));
                    if cosine >= t {
                        let (x, y) = (with[a].min(with[b]), with[a].max(with[b]));
                        pairs.push((x, y, cosine.min(1.0), Basis::Meaning));
                    }
                }
            }
        }
    }
    pairs
}

/// Each vector's [`LSH_TABLES`] signatures of [`LSH_BITS`] bits: the sides of the seeded
/// hyperplanes its mean-centred unit vector lies on. Centred, because embeddings share a
/// common direction that would otherwise put most of them on the same side of every plane.
fn signatures(units: &[f32], dims: usize, n: usize) -> Vec<u16> {
    let mut mean = vec![0f32; dims];
    for u in units.chunks_exact(dims) {
        for (m, x) in mean.iter_mut().zip(u) {
            *m += x;
        }
    }
    for m in &mut mean {
        *m /= n.max(1) as f32;
    }
    let planes = hyperplanes(dims, LSH_TABLES * LSH_BITS);
    let mut out = vec![0u16; n * LSH_TABLES];
    let mut centred = vec![0f32; dims];
    for (k, u) in units.chunks_exact(dims).enumerate() {
        for ((c, x), m) in centred.iter_mut().zip(u).zip(&mean) {
            *c = x - m;
        }
        for (plane_index, plane) in planes.chunks_exact(dims).enumerate() {
            if dot(plane, &centred) >= 0.0 {
                let (table, bit) = (plane_index / LSH_BITS, plane_index % LSH_BITS);
                out[k * LSH_TABLES + table] |= 1 << bit;
            }
        }
    }
    out
}

/// f32 dot product with 16 independent accumulators, so that it vectorises without
/// fast-math (and without `mul_add`, a library call on CPUs built without FMA).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [0f32; LANES];
    let (mut xs, mut ys) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (x, y) in (&mut xs).zip(&mut ys) {
        for lane in 0..LANES {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    let tail: f32 = xs
        .remainder()
        .iter()
        .zip(ys.remainder())
        .map(|(x, y)| x * y)
        .sum();
    lanes.iter().sum::<f32>() + tail
}

/// `count` hyperplanes of `dims` Gaussian-ish components from a fixed seed (xorshift, sum of
/// uniforms), so the same vectors always land in the same buckets.
fn hyperplanes(dims: usize, count: usize) -> Vec<f32> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..dims * count)
        .map(|_| (0..4).map(|_| next()).sum::<f32>() - 2.0)
        .collect()
}

/// Union-find over the pairs: groups of two or more, each with its weakest link.
fn join(n: usize, pairs: Vec<Pair>) -> Vec<Group> {
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for &(a, b, _, _) in &pairs {
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    }
    let mut groups: HashMap<usize, Group> = HashMap::new();
    for &(a, _, similarity, basis) in &pairs {
        let r = root(&mut parent, a);
        let group = groups.entry(r).or_insert(Group {
            members: Vec::new(),
            similarity: f64::INFINITY,
            basis,
        });
        if similarity < group.similarity {
            group.similarity = similarity;
            group.basis = basis;
        }
    }
    for i in 0..n {
        let r = root(&mut parent, i);
        if let Some(group) = groups.get_mut(&r) {
            group.members.push(i);
        }
    }
    let mut out: Vec<Group> = groups.into_values().collect();
    out.sort_by_key(|g| g.members[0]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(partition: u32, t: &str) -> Record {
        Record {
            partition,
            words: words(t),
            vector: None,
        }
    }

    #[test]
    fn words_are_lower_cased_runs() {
        assert_eq!(
            words("Use `jose`, not JWT-lib!"),
            ["use", "jose", "not", "jwt", "lib"]
        );
    }

    #[test]
    fn word_join_finds_exactly_the_pairs_above_the_threshold() {
        let base = "the payments webhook retries for seventy two hours so every handler must be idempotent";
        let records = vec![
            text(0, base),
            text(0, &format!("{base} always")), // 14/15 = 0.93
            text(0, "the payments webhook never retries"),
            text(1, base),                                  // another partition
            text(0, &format!("{base} always and forever")), // 14/17 = 0.82, 15/17 = 0.88
        ];
        let groups = groups(&records, Some(0.9), None);
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(groups[0].members, [0, 1]);
        assert!((groups[0].similarity - 14.0 / 15.0).abs() < 1e-9);
        assert_eq!(groups[0].basis, Basis::Words);

        // Brute force agrees on random-ish sets.
        let vocabulary: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let mut seed = 7u64;
        let mut rand = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        let mut records = Vec::new();
        for _ in 0..300 {
            let base = rand(30);
            let len = 8 + rand(6);
            let words: Vec<String> = (0..len)
                .map(|k| vocabulary[(base + k + usize::from(rand(10) == 0)) % 40].clone())
                .collect();
            records.push(Record {
                partition: rand(2) as u32,
                words,
                vector: None,
            });
        }
        for t in [0.7, 0.8, 0.9] {
            let mut fast: Vec<(usize, usize)> =
                word_pairs(&records, t).iter().map(|p| (p.0, p.1)).collect();
            fast.sort_unstable();
            let sets: Vec<Vec<u32>> = records
                .iter()
                .map(|r| {
                    let mut s: Vec<u32> = r.words.iter().map(|w| w[1..].parse().unwrap()).collect();
                    s.sort_unstable();
                    s.dedup();
                    s
                })
                .collect();
            let mut slow = Vec::new();
            for a in 0..records.len() {
                for b in a + 1..records.len() {
                    if records[a].partition == records[b].partition
                        && jaccard(&sets[a], &sets[b], |w| w) >= t
                    {
                        slow.push((a, b));
                    }
                }
            }
            assert!(!slow.is_empty(), "the data has pairs at {t}");
            assert_eq!(fast, slow, "threshold {t}");
        }
    }

    #[test]
    fn vectors_close_in_meaning_group_and_chains_join() {
        let dims = 64;
        let mut seed = 11u64;
        let mut gauss = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let mut records = Vec::new();
        let mut originals = Vec::new();
        for _ in 0..200 {
            let v: Vec<f32> = (0..dims).map(|_| gauss()).collect();
            originals.push(v.clone());
            records.push(Record {
                partition: 0,
                words: vec![],
                vector: Some(v),
            });
        }
        // Near copies of the first ten (cosine ~0.99), one of them in another partition.
        for (i, v) in originals.iter().take(10).enumerate() {
            let noisy: Vec<f32> = v.iter().map(|x| x + gauss() * 0.05).collect();
            records.push(Record {
                partition: u32::from(i == 9),
                words: vec![],
                vector: Some(noisy),
            });
        }
        let groups = groups(&records, None, Some(0.95));
        let found: Vec<Vec<usize>> = groups.iter().map(|g| g.members.clone()).collect();
        let expected: Vec<Vec<usize>> = (0..9).map(|i| vec![i, 200 + i]).collect();
        assert_eq!(found, expected);
        assert!(groups
            .iter()
            .all(|g| g.basis == Basis::Meaning && g.similarity >= 0.95));
    }

    #[test]
    fn union_find_keeps_the_weakest_link() {
        let pairs = vec![
            (0, 1, 0.99, Basis::Words),
            (1, 2, 0.91, Basis::Meaning),
            (4, 5, 0.95, Basis::Words),
        ];
        let groups = join(6, pairs);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].members, [0, 1, 2]);
        assert_eq!(groups[0].similarity, 0.91);
        assert_eq!(groups[0].basis, Basis::Meaning);
        assert_eq!(groups[1].members, [4, 5]);
    }
}
