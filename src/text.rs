//! Text helpers any layer may use: cutting UTF-8 text by bytes without splitting a character
//! (std's `floor_char_boundary` is not stable yet), shared by the chunker, the definition
//! summaries and the HTTP providers; and the safe FTS5 query builder ([`fts_query`]), shared by
//! every BM25 path (memory search, code search, recall), which lives here rather than in
//! `retrieval` so that `memory` and `code` can search without depending on the ranking pipeline.

pub mod fts_query;

/// The largest character boundary of `text` at or below byte `i` (`text.len()` past the end).
pub(crate) fn floor_char_boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn clip_bytes(text: &str, max: usize) -> &str {
    &text[..floor_char_boundary(text, max)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_keep_whole_characters() {
        assert_eq!(clip_bytes("héllo", 2), "h");
        assert_eq!(clip_bytes("héllo", 3), "hé");
        assert_eq!(clip_bytes("abc", 10), "abc");
        assert_eq!(floor_char_boundary("héllo", 2), 1);
        assert_eq!(floor_char_boundary("abc", 99), 3);
    }
}
