//! Content identity for deduplication: two memories are the same when their redacted text is
//! equal after case folding and whitespace collapsing.

use sha2::{Digest, Sha256};

/// Lower-cases and collapses every whitespace run to one space, trimming both ends.
pub fn normalize(content: &str) -> String {
    let mut out = String::with_capacity(content.len());
    for word in content.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// Hex sha256 of the normalised content: the dedup key within (project, scope).
pub fn content_hash(content: &str) -> String {
    hex::encode(Sha256::digest(normalize(content).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_and_case_do_not_matter() {
        assert_eq!(
            content_hash("Use  jose\tfor JWT\n"),
            content_hash("use jose for jwt")
        );
    }

    #[test]
    fn different_words_differ() {
        assert_ne!(content_hash("use jose"), content_hash("use jsonwebtoken"));
        // Punctuation is content: "a.b" and "a b" are different facts.
        assert_ne!(content_hash("a.b"), content_hash("a b"));
    }
}
