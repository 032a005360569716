//! Stage 2 of recall: weighted fusion of the candidate paths, then the graph neighbourhood
//! boost.
//!
//! Each path gives an item a share in (0, 1], times the path's weight (`weights.rs`), summed
//! over the paths that found it:
//! - **ranked paths** (graph, cascade): `(k + 1) / (k + rank)`, reciprocal-rank fusion scaled
//!   so that rank 1 counts 1. The seed's k = 60 flattens the top of each list; on the dev
//!   evaluation k = 10 is better in Recall@10 and MRR@10 for every weighting tried (k = 5 is
//!   within noise of it).
//! - **the keyword path over code**, whose BM25 scores are on one scale per list:
//!   `(score / best)^2`, `best` being the list's top score ([`KEYWORD_SCORE_POWER`]). A rank says
//!   nothing of how much weaker the second match is: one that matched a single common word of the
//!   query counted nearly as much as one that matched three rare ones. Measured on the seven dev
//!   sets (`docs/BENCHMARK.md`, "Fusion by BM25 score": offline on one run's dumps, then the eval):
//!   MRR@10 over the 2,973 code queries +0.007 offline (95% interval +0.003..+0.011; 278 queries
//!   better, 179 worse), gains on five code sets (up to +0.014), `rust-blind` -0.005; powers 1.5-3
//!   and `exp((score / best - 1) / T)` for T 0.25-0.5 alike, with the shares unchanged. The
//!   all-terms hits and the any-term fill share a list, and their scores are not quite on one
//!   scale: the fill scores only the query's distinctive terms, so a short fill hit can outscore
//!   a long all-terms hit, and fusion now orders them so (the keyword-only rows moved by -0.002
//!   to +0.005). Memories keep reciprocal rank (by score, MRR@10 0.774 against 0.780 by rank on
//!   the memory set), as does any list without a positive score. In a list with one, a score
//!   that is not positive counts 0, so a list is never on two scales.
//! - **the dense path**, whose cosine similarities are on one scale per list:
//!   `exp((similarity - best) / T)` with `best` the list's top similarity and
//!   T = [`DENSE_TEMPERATURE`], scaled by the model's spread of cosines
//!   ([`dense_temperature`]; a sixth for multilingual-e5-small). A rank throws away how far apart the hits are: a dense
//!   second place 0.01 below the first and one 0.15 below it counted the same. Measured on the
//!   seven dev sets (`docs/BENCHMARK.md`, offline on one run's dumps, then confirmed by the
//!   eval): MRR@10 rose on every set, most on memories (0.750 -> 0.78), and the margin over
//!   the best single path went from +0.003 to at least +0.014 on every set. Temperatures
//!   0.02-0.2 were tried (0.1-0.2 alike; 0.02-0.05 lose on code), and a temperature scaled by
//!   each query's spread of similarities (top minus tenth) was worse on memories.
//!
//! An item in two lists of one path (one per kind, or the query's and a hypothetical's vector)
//! counts once, at its best share; its reported rank is its best rank.
//!
//! The boost lifts candidates ranked 11-50 that sit next to the top 10 in the code (a file one
//! graph edge away from a top item's file). The seed adds `0.3 × neighbours / 10` to the RRF
//! score, which would put any boosted item above the whole top 10. We scale it by the top
//! score instead: `+share × (n / 10) × top`, where n is how many of the top 10 it neighbours.
//! On the dev evaluation no share helped (0.05 to 0.3, same-file neighbours or not: Recall@10
//! equal or lower), so recall leaves it off unless asked.

use std::collections::HashMap;

/// Something recall can return.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemRef {
    /// A code chunk, by `code_chunks.id`.
    Chunk(i64),
    /// A memory, by id.
    Memory(String),
}

/// A candidate path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CandidatePath {
    /// BM25 over chunks and memories.
    Keyword,
    /// Vector similarity.
    Dense,
    /// Neighbours of the files in play.
    Graph,
    /// The walk from the top hits (`cascade`).
    Cascade,
}

/// One ranked list from a path, best first.
#[derive(Debug, Clone)]
pub struct RankedList {
    /// Which path found it.
    pub path: CandidatePath,
    /// Its weight in the fusion.
    pub weight: f64,
    /// The items, best first.
    pub items: Vec<ItemRef>,
    /// Each item's cosine similarity to the query, parallel to `items`, for a dense list (its
    /// share is then read from the similarity's distance below the list's best); empty for
    /// other paths.
    pub similarities: Vec<f32>,
    /// Each item's BM25 score (higher is better), parallel to `items`, for a keyword list (its
    /// share is then read from the score's ratio to the list's best); empty for other paths.
    pub scores: Vec<f32>,
    /// For a dense list, how far below the best similarity a share falls by a factor of e: the
    /// model's ([`dense_temperature`]).
    pub temperature: f64,
}

impl RankedList {
    /// A list from a path that only ranks (graph, cascade); its weight is set later.
    pub fn ranked(path: CandidatePath, items: Vec<ItemRef>) -> Self {
        RankedList {
            path,
            weight: 0.0,
            items,
            similarities: Vec::new(),
            scores: Vec::new(),
            temperature: DENSE_TEMPERATURE,
        }
    }
}

/// Rank (1-based) of an item in each path's list; absent where the path did not find it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathRanks {
    /// In its keyword list (chunks and memories are ranked separately).
    pub keyword: Option<u32>,
    /// In the dense list.
    pub dense: Option<u32>,
    /// In the graph list.
    pub graph: Option<u32>,
    /// In the cascade's list.
    pub cascade: Option<u32>,
}

/// A fused candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    /// The item.
    pub item: ItemRef,
    /// Its fused score, plus the boost when it got one.
    pub score: f64,
    /// Where each path ranked it.
    pub ranks: PathRanks,
    /// What the graph neighbourhood boost added (0 when none).
    pub boost: f64,
}

/// The RRF constant: damps the difference between the first ranks of a list.
pub const RRF_K: f64 = 10.0;

/// How far below the list's best similarity a dense hit's share falls by a factor of e, for
/// the built-in model and any model not in [`dense_temperature`]'s table.
pub const DENSE_TEMPERATURE: f64 = 0.15;

/// The dense temperature for vectors of `model`: [`DENSE_TEMPERATURE`] times the model's
/// [`similarity_spread`](crate::embed::EmbedderId::similarity_spread), since fusion compares a
/// similarity's distance below the list's best and models spread their cosines differently.
/// For multilingual-e5-small that is 0.025; replayed on the dumps of one eval run, 0.02-0.03
/// were alike and 0.15 lost up to 0.05 MRR@10 to them (`docs/BENCHMARK.md`).
pub fn dense_temperature(model: &crate::embed::EmbedderId) -> f64 {
    DENSE_TEMPERATURE * model.similarity_spread()
}

/// A keyword hit's share is its BM25 score's ratio to the list's best, to this power.
pub const KEYWORD_SCORE_POWER: i32 = 2;

/// The largest finite (and, for BM25, positive) value of `values`.
fn list_best(values: &[f32], positive: bool) -> Option<f32> {
    values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && (!positive || *v > 0.0))
        .max_by(f32::total_cmp)
}

/// Fuses `lists` by their weighted shares (see the module doc), best first; ties go to the
/// smaller item (stable output).
pub fn fuse(lists: &[RankedList]) -> Vec<Fused> {
    // Per item and path: its best rank and its best weighted share.
    let mut best: HashMap<ItemRef, [Option<(u32, f64)>; 4]> = HashMap::new();
    for list in lists {
        let slot = match list.path {
            CandidatePath::Keyword => 0,
            CandidatePath::Dense => 1,
            CandidatePath::Graph => 2,
            CandidatePath::Cascade => 3,
        };
        let top_similarity = list_best(&list.similarities, false);
        let top_score = list_best(&list.scores, true);
        for (index, item) in list.items.iter().enumerate() {
            let rank = index as u32 + 1;
            let similarity = list.similarities.get(index).copied();
            let score = list.scores.get(index).copied();
            let share = match (top_similarity, similarity, top_score, score) {
                (Some(top), Some(similarity), _, _) if similarity.is_finite() => {
                    ((f64::from(similarity) - f64::from(top)) / list.temperature).exp()
                }
                (_, _, Some(top), score) => {
                    // FTS5 keeps BM25 positive; anything else in a scored list counts nothing.
                    let score = score.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(0.0);
                    (f64::from(score) / f64::from(top)).powi(KEYWORD_SCORE_POWER)
                }
                _ => (RRF_K + 1.0) / (RRF_K + f64::from(rank)),
            };
            let value = list.weight * share;
            let entry = &mut best.entry(item.clone()).or_default()[slot];
            *entry = Some(match *entry {
                Some((seen_rank, seen_value)) => (seen_rank.min(rank), seen_value.max(value)),
                None => (rank, value),
            });
        }
    }
    let mut out: Vec<Fused> = best
        .into_iter()
        .map(|(item, paths)| Fused {
            item,
            score: paths.iter().flatten().map(|(_, value)| value).sum(),
            ranks: PathRanks {
                keyword: paths[0].map(|(rank, _)| rank),
                dense: paths[1].map(|(rank, _)| rank),
                graph: paths[2].map(|(rank, _)| rank),
                cascade: paths[3].map(|(rank, _)| rank),
            },
            boost: 0.0,
        })
        .collect();
    sort_best_first(&mut out);
    out
}

fn sort_best_first(items: &mut [Fused]) {
    items.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.item.cmp(&b.item))
    });
}

/// How many of the top items boost a candidate at most (and the boost's divisor).
pub const BOOST_TOP: usize = 10;
/// Candidates ranked below this get no boost.
pub const BOOST_UNTIL: usize = 50;
/// The boost of a candidate neighbouring all of the top 10, as a share of the top score.
pub const BOOST_SHARE: f64 = 0.1;

/// Applies the graph neighbourhood boost to `fused` (sorted best first) and re-sorts it.
/// `neighbours(top, candidate)` says whether a candidate sits next to a top item.
pub fn neighbourhood_boost(
    fused: &mut [Fused],
    neighbours: impl FnMut(&ItemRef, &ItemRef) -> bool,
) {
    neighbourhood_boost_with(fused, BOOST_SHARE, neighbours)
}

/// [`neighbourhood_boost`] with another share (for ablations).
pub fn neighbourhood_boost_with(
    fused: &mut [Fused],
    share: f64,
    mut neighbours: impl FnMut(&ItemRef, &ItemRef) -> bool,
) {
    let Some(top_score) = fused.first().map(|f| f.score) else {
        return;
    };
    let top: Vec<ItemRef> = fused
        .iter()
        .take(BOOST_TOP)
        .map(|f| f.item.clone())
        .collect();
    let until = fused.len().min(BOOST_UNTIL);
    for candidate in fused.iter_mut().take(until).skip(BOOST_TOP) {
        let n = top
            .iter()
            .filter(|t| neighbours(t, &candidate.item))
            .count();
        if n > 0 {
            candidate.boost = share * (n as f64 / BOOST_TOP as f64) * top_score;
            candidate.score += candidate.boost;
        }
    }
    sort_best_first(fused);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(ids: &[i64]) -> Vec<ItemRef> {
        ids.iter().map(|&i| ItemRef::Chunk(i)).collect()
    }

    fn list(path: CandidatePath, weight: f64, ids: &[i64]) -> RankedList {
        RankedList {
            weight,
            ..RankedList::ranked(path, chunks(ids))
        }
    }

    /// `(k + 1) / (k + rank)`.
    fn rrf(rank: f64) -> f64 {
        (RRF_K + 1.0) / (RRF_K + rank)
    }

    #[test]
    fn ranked_paths_fuse_by_reciprocal_rank_rewarding_agreement() {
        let lists = [
            list(CandidatePath::Keyword, 0.25, &[1, 2, 3]),
            list(CandidatePath::Graph, 0.5, &[3, 4, 1]),
        ];
        let fused = fuse(&lists);
        let order: Vec<&ItemRef> = fused.iter().map(|f| &f.item).collect();
        // 3: .25 rrf(3) + .5 rrf(1); 1: .25 rrf(1) + .5 rrf(3); 4: .5 rrf(2); 2: .25 rrf(2).
        assert_eq!(
            order,
            [
                &ItemRef::Chunk(3),
                &ItemRef::Chunk(1),
                &ItemRef::Chunk(4),
                &ItemRef::Chunk(2)
            ]
        );
        assert!((fused[0].score - (0.25 * rrf(3.0) + 0.5 * rrf(1.0))).abs() < 1e-12);
        assert_eq!(
            fused[0].ranks,
            PathRanks {
                keyword: Some(3),
                dense: None,
                graph: Some(1),
                cascade: None,
            }
        );
    }

    #[test]
    fn a_dense_hit_counts_by_its_distance_below_the_lists_best_similarity() {
        // The same ranks in both runs: only how far the dense second place is below the first
        // changes, and with it whether it beats the keyword path's first place.
        let run = |second_similarity: f32| {
            let dense = RankedList {
                weight: 0.5,
                similarities: vec![0.6, second_similarity],
                ..RankedList::ranked(CandidatePath::Dense, chunks(&[1, 2]))
            };
            let fused = fuse(&[list(CandidatePath::Keyword, 0.4, &[3]), dense]);
            let second = fused.iter().find(|f| f.item == ItemRef::Chunk(2)).unwrap();
            let expected = 0.5 * ((f64::from(second_similarity) - 0.6) / DENSE_TEMPERATURE).exp();
            assert!((second.score - expected).abs() < 1e-6);
            assert_eq!(second.ranks.dense, Some(2));
            fused.iter().map(|f| f.item.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            run(0.59),
            chunks(&[1, 2, 3]),
            "a close second outranks keyword's first"
        );
        assert_eq!(run(0.45), chunks(&[1, 3, 2]), "a distant second does not");
        // The list's best counts 1 whatever its similarity.
        let low = RankedList {
            weight: 1.0,
            similarities: vec![0.1],
            ..RankedList::ranked(CandidatePath::Dense, chunks(&[9]))
        };
        assert!((fuse(&[low])[0].score - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_dense_list_counts_distances_at_its_models_temperature() {
        let id = |model: &str| crate::embed::EmbedderId {
            provider: "local".into(),
            model: model.into(),
            dims: 384,
        };
        let e5 = dense_temperature(&id("multilingual-e5-small-q4@128"));
        assert!((e5 - 0.025).abs() < 1e-12);
        assert_eq!(dense_temperature(&id("e5-small-0123456789ab@128")), e5);
        // Thresholds move the same way: the same distance below 1, scaled.
        let moved = id("multilingual-e5-small-q4@128").rescaled_threshold(0.95);
        assert!((moved - (1.0 - 0.05 / 6.0)).abs() < 1e-12);
        assert_eq!(id("all-minilm-l6-v2@128").rescaled_threshold(0.95), 0.95);
        assert_eq!(
            dense_temperature(&id("all-minilm-l6-v2@128")),
            DENSE_TEMPERATURE
        );
        // 0.01 below the best: nearly level at the built-in model's temperature, well below
        // at e5's, where that is a wide gap.
        let share = |temperature: f64| {
            let dense = RankedList {
                weight: 1.0,
                similarities: vec![0.88, 0.87],
                temperature,
                ..RankedList::ranked(CandidatePath::Dense, chunks(&[1, 2]))
            };
            fuse(&[dense])[1].score
        };
        assert!((share(DENSE_TEMPERATURE) - (-0.01f64 / 0.15).exp()).abs() < 1e-6);
        assert!((share(e5) - (-0.01f64 / 0.025).exp()).abs() < 1e-6);
    }

    #[test]
    fn a_keyword_hit_counts_by_its_bm25_score_against_the_lists_best() {
        // Same ranks in both runs: only how far the keyword second place's score is below
        // the first's changes, and with it whether it beats the dense path's first place.
        let run = |second_score: f32| {
            let keyword = RankedList {
                weight: 0.4,
                scores: vec![12.0, second_score],
                ..RankedList::ranked(CandidatePath::Keyword, chunks(&[1, 2]))
            };
            let dense = RankedList {
                weight: 0.3,
                similarities: vec![0.5],
                ..RankedList::ranked(CandidatePath::Dense, chunks(&[3]))
            };
            let fused = fuse(&[keyword, dense]);
            let second = fused.iter().find(|f| f.item == ItemRef::Chunk(2)).unwrap();
            let expected = 0.4 * (f64::from(second_score) / 12.0).powi(KEYWORD_SCORE_POWER);
            assert!((second.score - expected).abs() < 1e-9);
            assert_eq!(second.ranks.keyword, Some(2));
            fused.iter().map(|f| f.item.clone()).collect::<Vec<_>>()
        };
        assert_eq!(run(11.0), chunks(&[1, 2, 3]), "a close second stays ahead");
        assert_eq!(run(6.0), chunks(&[1, 3, 2]), "a weak second falls behind");
        // A score that is not positive, in a list with a positive best, counts nothing.
        let mixed = RankedList {
            weight: 1.0,
            scores: vec![8.0, f32::NAN, -2.0, 2.0],
            ..RankedList::ranked(CandidatePath::Keyword, chunks(&[6, 7, 8, 9]))
        };
        let shares: Vec<(ItemRef, f64)> = fuse(&[mixed])
            .into_iter()
            .map(|f| (f.item, f.score))
            .collect();
        assert_eq!(
            shares,
            [
                (ItemRef::Chunk(6), 1.0),
                (ItemRef::Chunk(9), 0.0625),
                (ItemRef::Chunk(7), 0.0),
                (ItemRef::Chunk(8), 0.0)
            ]
        );
        // Without usable scores (none, or none positive), ranks decide.
        let unscored = RankedList {
            weight: 1.0,
            scores: vec![0.0, -1.0],
            ..RankedList::ranked(CandidatePath::Keyword, chunks(&[4, 5]))
        };
        let fused = fuse(&[unscored]);
        assert!((fused[0].score - rrf(1.0)).abs() < 1e-12);
        assert!((fused[1].score - rrf(2.0)).abs() < 1e-12);
    }

    #[test]
    fn an_item_in_two_lists_of_one_path_counts_once_at_its_best() {
        let fused = fuse(&[
            list(CandidatePath::Keyword, 1.0, &[7, 8]),
            list(CandidatePath::Keyword, 1.0, &[8]),
        ]);
        let eight = fused.iter().find(|f| f.item == ItemRef::Chunk(8)).unwrap();
        assert_eq!(eight.ranks.keyword, Some(1));
        assert!((eight.score - 1.0).abs() < 1e-12);
        // Two dense lists (the query's vector and a hypothetical's): the best share counts,
        // and the best rank is reported even when it comes from the other list.
        let dense = |ids: &[i64], similarities: Vec<f32>| RankedList {
            weight: 1.0,
            similarities,
            ..RankedList::ranked(CandidatePath::Dense, chunks(ids))
        };
        let fused = fuse(&[
            dense(&[1, 5], vec![0.50, 0.49]),
            dense(&[6, 7, 5], vec![0.8, 0.5, 0.4]),
        ]);
        let five = fused.iter().find(|f| f.item == ItemRef::Chunk(5)).unwrap();
        assert_eq!(five.ranks.dense, Some(2));
        assert!((five.score - (-0.01 / DENSE_TEMPERATURE).exp()).abs() < 1e-6);
    }

    #[test]
    fn the_boost_lifts_neighbours_of_the_top_ten_only_from_ranks_eleven_to_fifty() {
        let items: Vec<ItemRef> = chunks(&(1..=60).collect::<Vec<_>>());
        let mut fused = fuse(&[RankedList {
            weight: 1.0,
            ..RankedList::ranked(CandidatePath::Graph, items)
        }]);
        let top = fused[0].score;
        // Chunk 30 neighbours the top 5; chunk 55 (rank 55) and chunk 2 (top 10) would too.
        neighbourhood_boost(&mut fused, |t, c| {
            let ItemRef::Chunk(t) = t else { unreachable!() };
            matches!(c, ItemRef::Chunk(30 | 55 | 2)) && *t <= 5
        });
        let thirty = fused
            .iter()
            .position(|f| f.item == ItemRef::Chunk(30))
            .unwrap();
        assert!(thirty < 29, "moved up from rank 30 to {}", thirty + 1);
        assert!((fused[thirty].boost - BOOST_SHARE * 0.5 * top).abs() < 1e-12);
        for untouched in [2, 55] {
            let f = fused
                .iter()
                .find(|f| f.item == ItemRef::Chunk(untouched))
                .unwrap();
            assert_eq!(f.boost, 0.0, "chunk {untouched}");
        }
    }
}
