//! The XLM-R tokenizer of multilingual-e5-small: a per-code-point normalisation, SentencePiece's
//! metaspace, and a unigram (Viterbi) segmentation over 250k pieces by `tokenizers`' `Unigram`
//! model.
//!
//! The steps, as the model file's reference engine takes them (our test compares the ids):
//! 1. each code point the map names is replaced (by zero or more code points: control characters
//!    go, tabs and newlines become spaces, compatibility forms fold);
//! 2. runs of spaces collapse to one;
//! 3. a leading space is added unless the text starts with one, and every space becomes `▁`;
//! 4. the whole string is segmented at once, and the pieces are wrapped in `<s>` ... `</s>`,
//!    the content cut to fit the token limit. One difference from the reference: a run of
//!    characters the vocabulary lacks becomes one `<unk>` (as in Hugging Face's XLM-R
//!    tokenizer), where the reference engine emits one per character.

use std::collections::HashMap;

use tokenizers::models::unigram::Unigram;
use tokenizers::Model;

use crate::embed::e5_file::Vocabulary;
use crate::error::{Error, Result};

/// SentencePiece's word-boundary mark, U+2581.
const METASPACE: char = '\u{2581}';

/// A loaded unigram tokenizer.
pub struct UnigramTokenizer {
    model: Unigram,
    normalisation: HashMap<char, Vec<char>>,
    bos: u32,
    eos: u32,
}

impl UnigramTokenizer {
    /// Builds the tokenizer from a model file's vocabulary and normalisation map.
    pub fn new(vocabulary: Vocabulary, normalisation: Vec<(char, Vec<char>)>) -> Result<Self> {
        let Vocabulary {
            pieces,
            bos,
            eos,
            unk,
        } = vocabulary;
        let mut model = Unigram::from(pieces, Some(unk as usize), false)
            .map_err(|e| Error::ModelUnavailable(format!("unigram vocabulary: {e}")))?;
        // Chunks rarely repeat: a cache of whole texts would only hold copies.
        model.resize_cache(0);
        Ok(Self {
            model,
            normalisation: normalisation.into_iter().collect(),
            bos,
            eos,
        })
    }

    /// The ids of `text`: `<s>`, at most `max_tokens - 2` pieces, `</s>`.
    pub fn encode(&self, text: &str, max_tokens: usize) -> Result<Vec<u32>> {
        let normalised = self.normalise(text);
        let pieces = self
            .model
            .tokenize(&normalised)
            .map_err(|e| Error::Embedding(format!("tokenising failed: {e}")))?;
        let content = max_tokens.saturating_sub(2);
        let mut ids = Vec::with_capacity(pieces.len().min(content) + 2);
        ids.push(self.bos);
        ids.extend(pieces.iter().take(content).map(|t| t.id));
        ids.push(self.eos);
        Ok(ids)
    }

    /// Steps 1-3 of the module's list.
    fn normalise(&self, text: &str) -> String {
        let mut out = Metaspaced {
            text: String::with_capacity(text.len() + 3),
            started: false,
            after_space: false,
        };
        for c in text.chars() {
            match self.normalisation.get(&c) {
                Some(replacement) => replacement.iter().for_each(|&r| out.push(r)),
                None => out.push(c),
            }
        }
        if !out.started {
            out.text.push(METASPACE);
        }
        out.text
    }
}

/// A normalised text being written: spaces collapsed and written as [`METASPACE`].
struct Metaspaced {
    text: String,
    started: bool,
    after_space: bool,
}

impl Metaspaced {
    fn push(&mut self, c: char) {
        let space = c == ' ';
        if space && self.after_space {
            return;
        }
        if !self.started && !space {
            self.text.push(METASPACE);
        }
        self.started = true;
        self.after_space = space;
        self.text.push(if space { METASPACE } else { c });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy vocabulary: specials, the metaspace, letters and two words.
    fn tokenizer() -> UnigramTokenizer {
        let pieces = [
            "<s>",
            "<pad>",
            "</s>",
            "<unk>",
            "\u{2581}",
            "a",
            "b",
            "\u{2581}ab",
            "ba",
        ];
        let scores = [0.0, 0.0, 0.0, 0.0, -2.0, -3.0, -3.0, -1.0, -1.5];
        let vocabulary = Vocabulary {
            pieces: pieces
                .iter()
                .zip(scores)
                .map(|(p, s)| ((*p).to_owned(), s))
                .collect(),
            bos: 0,
            eos: 2,
            unk: 3,
        };
        UnigramTokenizer::new(vocabulary, vec![('\t', vec![' ']), ('\u{7}', vec![])]).unwrap()
    }

    #[test]
    fn spaces_collapse_and_become_metaspace() {
        let t = tokenizer();
        assert_eq!(t.normalise("ab  ba"), "\u{2581}ab\u{2581}ba");
        assert_eq!(t.normalise(" ab\t\u{7} ba"), "\u{2581}ab\u{2581}ba");
        assert_eq!(t.normalise(""), "\u{2581}");
    }

    #[test]
    fn the_best_segmentation_is_wrapped_and_cut() {
        let t = tokenizer();
        assert_eq!(t.encode("ab ba", 16).unwrap(), vec![0, 7, 4, 8, 2]);
        assert_eq!(t.encode("ab ba", 3).unwrap(), vec![0, 7, 2]);
        // Unknown characters fuse into one <unk>.
        assert_eq!(t.encode("ab xyz", 16).unwrap(), vec![0, 7, 4, 3, 2]);
    }
}
