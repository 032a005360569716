//! The HyDE fallback of recall (hypothetical document embeddings, the spec's section 7): when
//! the query's own vector finds too little, the app's model writes the memory that would
//! answer it, and the dense path searches once more with that text's vector.
//!
//! "Too little" is the spec's rule on a scale that means the same for every query: fewer than
//! [`HydeOptions::min_results`] returned items whose cosine similarity to the query is at least
//! [`HydeOptions::min_similarity`] (the fused scores of RRF are ranks, not evidence); its
//! default is moved to the model's scale, as fusion's temperature is. The
//! second search joins the dense path as one more list of it, so an item either vector found
//! keeps its best rank there and the keyword and graph paths still count; the spec's plain
//! replacement of the result would drop an exact keyword match the model's guess misses.
//!
//! The app's function is any LLM call; its failures are reported in `skipped` and the first
//! result stands. Nothing it writes is stored: the text only searches.

use futures::future::BoxFuture;

use crate::embed::EmbedderId;
use crate::error::Result;

/// Longest hypothetical text searched with, in characters (a 2-sentence memory is ~300; the
/// embedder cuts longer input anyway).
pub const MAX_HYPOTHETICAL_CHARS: usize = 2_000;

/// The spec's cosine similarity for an item to count as close, on the built-in model's scale.
pub const DEFAULT_MIN_SIMILARITY: f64 = 0.5;

/// When the fallback runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HydeOptions {
    /// Items needed at [`Self::min_similarity`] or above for the fallback not to run (default 3,
    /// the spec's).
    pub min_results: usize,
    /// Cosine similarity to the query an item needs to count. `None`: [`DEFAULT_MIN_SIMILARITY`]
    /// moved to the model's scale ([`EmbedderId::rescaled_threshold`]; 0.917 for
    /// multilingual-e5-small, whose cosines crowd near 0.9), see [`Self::min_similarity_for`].
    pub min_similarity: Option<f32>,
}

impl Default for HydeOptions {
    fn default() -> Self {
        HydeOptions {
            min_results: 3,
            min_similarity: None,
        }
    }
}

impl HydeOptions {
    /// The similarity an item of `model`'s vectors needs to count: the one set, else the
    /// default on that model's scale.
    pub fn min_similarity_for(&self, model: &EmbedderId) -> f32 {
        self.min_similarity
            .unwrap_or_else(|| model.rescaled_threshold(DEFAULT_MIN_SIMILARITY) as f32)
    }
}

/// What the app's function is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HydeRequest {
    /// The recall's query.
    pub query: String,
    /// The spec's prompt for a fast model, ready to send.
    pub prompt: String,
}

/// The app's function: the hypothetical memory for a request, or `None` for no answer.
/// A failure is an `ENGRAM_CALLBACK` error, reported in the recall's `skipped`.
pub type HypotheticalFn =
    Box<dyn FnOnce(HydeRequest) -> BoxFuture<'static, Result<Option<String>>> + Send>;

/// The fallback of one recall: when it runs and the function it asks.
pub struct Hyde {
    /// When it runs.
    pub options: HydeOptions,
    /// The app's model.
    pub generate: HypotheticalFn,
}

/// The spec's prompt for `query`.
pub fn prompt(query: &str) -> String {
    format!("Write a 2-sentence memory that would perfectly answer: \"{query}\"")
}

/// Whether a recall whose items have these similarities to the query (vectors of `model`)
/// found too little.
pub fn found_too_little(
    similarities: impl Iterator<Item = Option<f32>>,
    o: &HydeOptions,
    model: &EmbedderId,
) -> bool {
    let bound = o.min_similarity_for(model);
    similarities
        .filter(|s| s.is_some_and(|s| s >= bound))
        .count()
        < o.min_results
}

/// The function's answer as the text to search with: trimmed, at most
/// [`MAX_HYPOTHETICAL_CHARS`] characters, `None` when blank.
pub fn searchable(answer: Option<String>) -> Option<String> {
    let answer = answer?;
    let text: String = answer.trim().chars().take(MAX_HYPOTHETICAL_CHARS).collect();
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> EmbedderId {
        EmbedderId {
            provider: "local".into(),
            model: name.into(),
            dims: 384,
        }
    }

    #[test]
    fn too_little_counts_items_at_the_similarity_bound() {
        let o = HydeOptions::default();
        let minilm = model("all-minilm-l6-v2@128");
        let run = |s: &[Option<f32>]| found_too_little(s.iter().copied(), &o, &minilm);
        assert!(run(&[]));
        assert!(run(&[Some(0.9), Some(0.5), None, Some(0.49)]));
        assert!(!run(&[Some(0.9), Some(0.5), Some(0.5)]));
        let one = HydeOptions {
            min_results: 1,
            min_similarity: Some(0.8),
        };
        assert!(!found_too_little([Some(0.8)].into_iter(), &one, &minilm));
        assert!(found_too_little(
            [Some(0.79), None].into_iter(),
            &one,
            &minilm
        ));
    }

    /// The default bound follows the model's scale (e5's cosines of unrelated texts sit near
    /// 0.8, above the built-in model's 0.5); one the app set is kept whatever the model.
    #[test]
    fn the_default_bound_is_on_the_models_scale_and_a_set_one_is_kept() {
        let e5 = model("multilingual-e5-small-q4@128");
        let o = HydeOptions::default();
        assert_eq!(o.min_similarity_for(&model("all-minilm-l6-v2@128")), 0.5);
        let moved = o.min_similarity_for(&e5);
        assert!(
            (f64::from(moved) - (1.0 - 0.5 / 6.0)).abs() < 1e-6,
            "{moved}"
        );
        let crowded = [Some(0.85), Some(0.86), Some(0.88)];
        assert!(found_too_little(crowded.into_iter(), &o, &e5));
        assert!(!found_too_little(
            crowded.into_iter(),
            &o,
            &model("all-minilm-l6-v2@128")
        ));
        let set = HydeOptions {
            min_similarity: Some(0.5),
            ..o
        };
        assert_eq!(set.min_similarity_for(&e5), 0.5);
        assert!(!found_too_little(crowded.into_iter(), &set, &e5));
    }

    #[test]
    fn answers_are_trimmed_capped_and_blank_ones_dropped() {
        assert_eq!(searchable(None), None);
        assert_eq!(searchable(Some(" \n ".into())), None);
        assert_eq!(searchable(Some("  a b ".into())).as_deref(), Some("a b"));
        let long = "é".repeat(MAX_HYPOTHETICAL_CHARS + 10);
        assert_eq!(
            searchable(Some(long)).unwrap().chars().count(),
            MAX_HYPOTHETICAL_CHARS
        );
        assert!(prompt("why \"x\"").contains("answer: \"why \"x\"\""));
    }
}
