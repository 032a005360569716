//! The in-process vector index: every vector of one (project, item kind, model) held in memory
//! as int8 codes for the scan plus its f32 original for exact rescoring.
//!
//! Search is exact: the int8 scan (a quarter of f32's memory traffic, and a scan is bound by
//! memory traffic) gives each vector an approximate score with a proven error bound (see
//! `quant.rs`); everything whose upper bound reaches the k-th best lower bound is rescored with
//! its f32 vector. Measured on MiniLM vectors that is a few dozen rescored vectors per query.
//!
//! Vectors are normalised on insert and the query before the scan, so scores are cosines.

use std::collections::{BinaryHeap, HashMap};

use rayon::prelude::*;

use super::quant::{dot_f32, int_dots_into, quantize_into, CodeStats, QuantizedQuery};
use crate::error::{Error, Result};

/// Vectors per parallel work unit; below two units the scan stays on the calling thread
/// (waking pool threads costs more than scanning a few thousand vectors).
const BLOCK: usize = 8192;

/// One result: an item id and its cosine similarity to the query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorHit {
    /// The item's id (a chunk id or a memory's seq).
    pub id: i64,
    /// Cosine similarity in -1..=1.
    pub score: f32,
}

/// A search's hits and how much work it took.
#[derive(Debug, Clone, Default)]
pub struct SearchOutcome {
    /// Best first; ties broken by id.
    pub hits: Vec<VectorHit>,
    /// Vectors rescored in f32 after the int8 scan.
    pub rescored: usize,
}

/// An exact top-k index over vectors of one width.
#[derive(Debug, Clone)]
pub struct VectorIndex {
    dims: usize,
    ids: Vec<i64>,
    slots: HashMap<i64, usize>,
    codes: Vec<i8>,
    stats: Vec<CodeStats>,
    vectors: Vec<f32>,
}

impl VectorIndex {
    /// An empty index for `dims`-wide vectors.
    pub fn new(dims: usize) -> Self {
        VectorIndex {
            dims,
            ids: Vec::new(),
            slots: HashMap::new(),
            codes: Vec::new(),
            stats: Vec::new(),
            vectors: Vec::new(),
        }
    }

    /// Vector width.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Number of vectors held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids held, in slot order.
    pub fn ids(&self) -> &[i64] {
        &self.ids
    }

    /// Whether `id` has a vector here.
    pub fn contains(&self, id: i64) -> bool {
        self.slots.contains_key(&id)
    }

    /// Bytes held per vector (codes, f32 original, stats, id and its map entry).
    pub fn bytes_per_vector(&self) -> usize {
        self.dims * (1 + 4)
            + std::mem::size_of::<CodeStats>()
            + std::mem::size_of::<i64>()
            // A hashbrown entry: key, value and a control byte, at its typical 7/8 load.
            + (std::mem::size_of::<(i64, usize)>() + 1) * 8 / 7
    }

    /// Adds or replaces `id`'s vector. `ENGRAM_INVALID_ARG` for a wrong width or a vector that
    /// is zero or not finite (it has no direction to compare).
    pub fn upsert(&mut self, id: i64, vector: &[f32]) -> Result<()> {
        let unit = normalized(vector, self.dims)?;
        let slot = match self.slots.get(&id) {
            Some(&slot) => slot,
            None => {
                let slot = self.ids.len();
                self.ids.push(id);
                self.slots.insert(id, slot);
                self.codes.resize(self.codes.len() + self.dims, 0);
                self.vectors.resize(self.vectors.len() + self.dims, 0.0);
                self.stats.push(CodeStats {
                    scale: 0.0,
                    code_norm: 0.0,
                    residual: 0.0,
                });
                slot
            }
        };
        let range = slot * self.dims..(slot + 1) * self.dims;
        self.stats[slot] = quantize_into(&unit, &mut self.codes[range.clone()]);
        self.vectors[range].copy_from_slice(&unit);
        Ok(())
    }

    /// Removes `id`'s vector (the last slot moves into its place). False when it had none.
    pub fn remove(&mut self, id: i64) -> bool {
        let Some(slot) = self.slots.remove(&id) else {
            return false;
        };
        let last = self.ids.len() - 1;
        if slot != last {
            let moved = self.ids[last];
            self.ids[slot] = moved;
            self.slots.insert(moved, slot);
            self.stats[slot] = self.stats[last];
            let (dst, src) = (slot * self.dims, last * self.dims);
            self.codes.copy_within(src..src + self.dims, dst);
            self.vectors.copy_within(src..src + self.dims, dst);
        }
        self.ids.pop();
        self.stats.pop();
        self.codes.truncate(last * self.dims);
        self.vectors.truncate(last * self.dims);
        true
    }

    /// The `k` vectors most similar to `query` among those `allow` accepts (all when `None`).
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        allow: Option<&(dyn Fn(i64) -> bool + Sync)>,
    ) -> Result<SearchOutcome> {
        let unit = normalized(query, self.dims)?;
        if k == 0 || self.is_empty() {
            return Ok(SearchOutcome::default());
        }
        let query = QuantizedQuery::new(&unit);
        let n = self.len();
        // Pass 1: per vector, the approximate score and its bound; per block, the k best lower
        // bounds. Excluded vectors get a bound of NaN so pass 2 skips them.
        let mut estimates = vec![(0f32, 0f32); n];
        let scan_block = |(block, out): (usize, &mut [(f32, f32)])| -> TopK {
            let first = block * BLOCK;
            let mut dots = vec![0i32; out.len()];
            let codes = &self.codes[first * self.dims..(first + out.len()) * self.dims];
            int_dots_into(&query.codes, codes, &mut dots);
            let mut lowers = TopK::new(k);
            for (i, (estimate, dot)) in out.iter_mut().zip(dots).enumerate() {
                let slot = first + i;
                if allow.is_some_and(|allow| !allow(self.ids[slot])) {
                    *estimate = (f32::NEG_INFINITY, f32::NAN);
                    continue;
                }
                let (approx, bound) = query.estimate(dot, &self.stats[slot]);
                *estimate = (approx, bound);
                lowers.push(approx - bound);
            }
            lowers
        };
        let blocks: Vec<TopK> = if n > 2 * BLOCK {
            estimates
                .par_chunks_mut(BLOCK)
                .enumerate()
                .map(scan_block)
                .collect()
        } else {
            estimates
                .chunks_mut(BLOCK)
                .enumerate()
                .map(scan_block)
                .collect()
        };
        let mut lowers = TopK::new(k);
        for block in blocks {
            for value in block.into_values() {
                lowers.push(value);
            }
        }
        // Fewer than k allowed vectors: every allowed one is a candidate.
        let threshold = lowers.kth().unwrap_or(f32::NEG_INFINITY);
        // Pass 2: rescore every vector whose upper bound reaches the threshold.
        let mut hits: Vec<VectorHit> = estimates
            .iter()
            .enumerate()
            .filter(|(_, (approx, bound))| !bound.is_nan() && approx + bound >= threshold)
            .map(|(slot, _)| VectorHit {
                id: self.ids[slot],
                score: dot_f32(
                    &unit,
                    &self.vectors[slot * self.dims..(slot + 1) * self.dims],
                ),
            })
            .collect();
        let rescored = hits.len();
        hits.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        hits.truncate(k);
        Ok(SearchOutcome { hits, rescored })
    }
}

/// `vector / ‖vector‖`, or `ENGRAM_INVALID_ARG` when it has the wrong width, is zero or is not
/// finite.
fn normalized(vector: &[f32], dims: usize) -> Result<Vec<f32>> {
    if vector.len() != dims {
        return Err(Error::invalid(format!(
            "vector has {} dimensions, the index holds {dims}",
            vector.len()
        )));
    }
    let norm = vector
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return Err(Error::invalid(
            "vector is zero or has a non-finite component",
        ));
    }
    Ok(vector
        .iter()
        .map(|x| (f64::from(*x) / norm) as f32)
        .collect())
}

/// The k largest values seen (a min-heap of size k).
struct TopK {
    k: usize,
    heap: BinaryHeap<std::cmp::Reverse<TotalF32>>,
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    fn push(&mut self, value: f32) {
        if self.heap.len() < self.k {
            self.heap.push(std::cmp::Reverse(TotalF32(value)));
        } else if self.heap.peek().is_some_and(|min| value > min.0 .0) {
            self.heap.pop();
            self.heap.push(std::cmp::Reverse(TotalF32(value)));
        }
    }

    /// The k-th largest value, when k values were seen.
    fn kth(&self) -> Option<f32> {
        (self.heap.len() == self.k).then(|| self.heap.peek().map(|min| min.0 .0))?
    }

    fn into_values(self) -> impl Iterator<Item = f32> {
        self.heap.into_iter().map(|value| value.0 .0)
    }
}

/// An f32 ordered by `total_cmp` (the values here are never NaN).
#[derive(PartialEq)]
struct TotalF32(f32);

impl Eq for TotalF32 {}

impl PartialOrd for TotalF32 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TotalF32 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::quant::pseudo_random;
    use super::*;

    /// Vectors clustered around a few centres, so many scores sit close together (the hard
    /// case for a quantised scan).
    fn clustered(n: usize, dims: usize) -> Vec<Vec<f32>> {
        let centres: Vec<Vec<f32>> = (0..8).map(|c| pseudo_random(1000 + c, dims)).collect();
        (0..n)
            .map(|i| {
                let noise = pseudo_random(i as u64 + 7, dims);
                centres[i % 8]
                    .iter()
                    .zip(noise)
                    .map(|(c, e)| c + 0.05 * e)
                    .collect()
            })
            .collect()
    }

    fn brute_force(vectors: &[(i64, Vec<f32>)], query: &[f32], k: usize) -> Vec<i64> {
        let unit = |v: &[f32]| {
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / n).collect::<Vec<f32>>()
        };
        let q = unit(query);
        let mut scored: Vec<(f64, i64)> = vectors
            .iter()
            .map(|(id, v)| {
                let u = unit(v);
                (
                    q.iter()
                        .zip(&u)
                        .map(|(a, b)| f64::from(*a) * f64::from(*b))
                        .sum(),
                    *id,
                )
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().take(k).map(|(_, id)| id).collect()
    }

    #[test]
    fn search_is_exact_against_brute_force_also_past_one_block() {
        let dims = 64;
        let vectors: Vec<(i64, Vec<f32>)> = clustered(2 * BLOCK + 500, dims)
            .into_iter()
            .enumerate()
            .map(|(i, v)| (i as i64 * 3 + 1, v))
            .collect();
        let mut index = VectorIndex::new(dims);
        for (id, v) in &vectors {
            index.upsert(*id, v).unwrap();
        }
        for q in 0..5 {
            let query = &vectors[q * 101].1;
            let outcome = index.search(query, 10, None).unwrap();
            let ids: Vec<i64> = outcome.hits.iter().map(|h| h.id).collect();
            assert_eq!(ids, brute_force(&vectors, query, 10));
            assert!(outcome.rescored >= 10 && outcome.rescored < vectors.len() / 4);
        }
    }

    #[test]
    fn filters_removals_and_replacements_are_honoured() {
        let dims = 32;
        let mut vectors: Vec<(i64, Vec<f32>)> = (0..300)
            .map(|i| (i, pseudo_random(i as u64, dims)))
            .collect();
        let mut index = VectorIndex::new(dims);
        for (id, v) in &vectors {
            index.upsert(*id, v).unwrap();
        }
        // Remove every third, replace every fifth.
        for id in (0..300).step_by(3) {
            assert!(index.remove(id));
            assert!(!index.contains(id));
        }
        assert!(!index.remove(0), "removing twice reports nothing removed");
        vectors.retain(|(id, _)| id % 3 != 0);
        for (id, v) in vectors.iter_mut().filter(|(id, _)| id % 5 == 0) {
            *v = pseudo_random(*id as u64 + 5000, dims);
            index.upsert(*id, v).unwrap();
        }
        assert_eq!(index.len(), vectors.len());
        let query = pseudo_random(77, dims);
        let got: Vec<i64> = index
            .search(&query, 7, None)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(got, brute_force(&vectors, &query, 7));
        let even = |id: i64| id % 2 == 0;
        let got: Vec<i64> = index
            .search(&query, 7, Some(&even))
            .unwrap()
            .hits
            .iter()
            .map(|h| h.id)
            .collect();
        let allowed: Vec<(i64, Vec<f32>)> = vectors
            .iter()
            .filter(|(id, _)| even(*id))
            .cloned()
            .collect();
        assert_eq!(got, brute_force(&allowed, &query, 7));
        // Fewer allowed than k: all of them.
        let few = |id: i64| id == 4 || id == 8;
        assert_eq!(index.search(&query, 7, Some(&few)).unwrap().hits.len(), 2);
    }

    #[test]
    fn scores_are_cosines_and_bad_vectors_are_refused() {
        let mut index = VectorIndex::new(3);
        index.upsert(1, &[2.0, 0.0, 0.0]).unwrap();
        index.upsert(2, &[0.0, 5.0, 0.0]).unwrap();
        let hits = index.search(&[1.0, 1.0, 0.0], 2, None).unwrap().hits;
        assert!((hits[0].score - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!((hits[0].id, hits[1].id), (1, 2), "a tie is broken by id");
        for bad in [&[0.0, 0.0, 0.0][..], &[f32::NAN, 1.0, 0.0], &[1.0, 0.0]] {
            let err = index.upsert(3, bad).unwrap_err();
            assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
        }
        assert_eq!(
            index.search(&[1.0, 0.0], 1, None).unwrap_err().code(),
            "ENGRAM_INVALID_ARG"
        );
        assert!(index
            .search(&[1.0, 0.0, 0.0], 0, None)
            .unwrap()
            .hits
            .is_empty());
    }
}
