//! Stage 2 of recall: weighted reciprocal-rank fusion of the candidate paths, then the graph
//! neighbourhood boost.
//!
//! RRF scores an item `Σ weight / (k + rank)` over the lists that hold it (rank 1-based): ranks,
//! not raw scores, so BM25, cosine and graph weights need no common scale. The seed's k = 60
//! flattens the top of each list; on the dev evaluation k = 10 is better in Recall@10 and
//! MRR@10 for every weighting tried (k = 5 is within noise of it).
//!
//! The boost lifts candidates ranked 11-50 that sit next to the top 10 in the code (a file one
//! graph edge away from a top item's file). The seed adds `0.3 × neighbours / 10` to the RRF
//! score, but RRF scores are at most 1/(k+1), so that would put any boosted item above the whole
//! top 10. We scale it by the top score instead: `+share × (n / 10) × top`, where n is how many
//! of the top 10 it neighbours. On the dev evaluation no share helped (0.05 to 0.3, same-file
//! neighbours or not: Recall@10 equal or lower), so recall leaves it off unless asked.

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
    /// Its RRF score, plus the boost when it got one.
    pub score: f64,
    /// Where each path ranked it.
    pub ranks: PathRanks,
    /// What the graph neighbourhood boost added (0 when none).
    pub boost: f64,
}

/// The RRF constant: damps the difference between the first ranks of a list.
pub const RRF_K: f64 = 10.0;

/// Fuses `lists` by weighted RRF with [`RRF_K`], best first; ties go to the smaller item
/// (stable output).
pub fn weighted_rrf(lists: &[RankedList]) -> Vec<Fused> {
    weighted_rrf_with(lists, RRF_K)
}

/// [`weighted_rrf`] with another constant (for ablations).
pub fn weighted_rrf_with(lists: &[RankedList], k: f64) -> Vec<Fused> {
    // Per item and path: the best (rank, weight) seen, so an item in two lists of one path
    // (one per kind) counts once, at its best rank, with that list's weight.
    let mut best: HashMap<ItemRef, [Option<(u32, f64)>; 4]> = HashMap::new();
    for list in lists {
        let slot = match list.path {
            CandidatePath::Keyword => 0,
            CandidatePath::Dense => 1,
            CandidatePath::Graph => 2,
            CandidatePath::Cascade => 3,
        };
        for (index, item) in list.items.iter().enumerate() {
            let rank = index as u32 + 1;
            let entry = &mut best.entry(item.clone()).or_default()[slot];
            if entry.is_none_or(|(seen, _)| rank < seen) {
                *entry = Some((rank, list.weight));
            }
        }
    }
    let mut out: Vec<Fused> = best
        .into_iter()
        .map(|(item, paths)| {
            let score = paths
                .iter()
                .flatten()
                .map(|(rank, weight)| weight / (k + *rank as f64))
                .sum();
            Fused {
                item,
                score,
                ranks: PathRanks {
                    keyword: paths[0].map(|(rank, _)| rank),
                    dense: paths[1].map(|(rank, _)| rank),
                    graph: paths[2].map(|(rank, _)| rank),
                    cascade: paths[3].map(|(rank, _)| rank),
                },
                boost: 0.0,
            }
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

    #[test]
    fn rrf_rewards_agreement_and_weights_paths() {
        let lists = [
            RankedList {
                path: CandidatePath::Keyword,
                weight: 0.25,
                items: chunks(&[1, 2, 3]),
            },
            RankedList {
                path: CandidatePath::Dense,
                weight: 0.5,
                items: chunks(&[3, 4, 1]),
            },
        ];
        let fused = weighted_rrf(&lists);
        let order: Vec<&ItemRef> = fused.iter().map(|f| &f.item).collect();
        // 3: .25/(k+3) + .5/(k+1); 1: .25/(k+1) + .5/(k+3); 4: .5/(k+2); 2: .25/(k+2).
        assert_eq!(
            order,
            [
                &ItemRef::Chunk(3),
                &ItemRef::Chunk(1),
                &ItemRef::Chunk(4),
                &ItemRef::Chunk(2)
            ]
        );
        assert!((fused[0].score - (0.25 / (RRF_K + 3.0) + 0.5 / (RRF_K + 1.0))).abs() < 1e-12);
        assert_eq!(
            fused[0].ranks,
            PathRanks {
                keyword: Some(3),
                dense: Some(1),
                graph: None,
                cascade: None,
            }
        );
    }

    #[test]
    fn an_item_in_two_lists_of_one_path_counts_once_at_its_best_rank() {
        let keyword = |items| RankedList {
            path: CandidatePath::Keyword,
            weight: 1.0,
            items,
        };
        let fused = weighted_rrf(&[keyword(chunks(&[7, 8])), keyword(chunks(&[8]))]);
        let eight = fused.iter().find(|f| f.item == ItemRef::Chunk(8)).unwrap();
        assert_eq!(eight.ranks.keyword, Some(1));
        assert!((eight.score - 1.0 / (RRF_K + 1.0)).abs() < 1e-12);
    }

    #[test]
    fn the_boost_lifts_neighbours_of_the_top_ten_only_from_ranks_eleven_to_fifty() {
        let items: Vec<ItemRef> = chunks(&(1..=60).collect::<Vec<_>>());
        let mut fused = weighted_rrf(&[RankedList {
            path: CandidatePath::Dense,
            weight: 1.0,
            items,
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
