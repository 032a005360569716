//! What the agent's own words say: self-corrections ("I was wrong about X, Y is actually…")
//! and dead ends ("this approach won't work"). The patterns are the seed's (section 4), with
//! two sharpened: `Wait` and `Actually` count only at the start of a sentence and followed by
//! punctuation, because "wait for the build" and "what it actually does" are not corrections.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

/// What a matched sentence means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LanguageKind {
    /// The agent corrected its own earlier belief.
    SelfCorrection,
    /// The agent gave up on an approach.
    DeadEnd,
}

/// Most bytes of reasoning text scanned per message (the patterns look for short phrases;
/// a long message is mostly code the agent is quoting).
pub const SCAN_BYTES: usize = 16 * 1024;
/// Most characters kept of a matched sentence.
pub const SENTENCE_CHARS: usize = 300;

const SELF_CORRECTION: &[&str] = &[
    r"(?i)\bI was wrong about (.+?)\. (.+?) is actually",
    r"(?i)\blet me reconsider\b",
    r"(?i)(?:^|[.!?]\s+)actually,\s+(.+?)\s+(?:not|instead of|rather than)\s+(.+)",
    r"(?i)\bI initially thought (.+?) but (.+)",
    r"(?i)\bcorrection:\s*(.+)",
    r"(?:^|[.!?]\s+)Wait[,.]\s+(.+)",
];

const DEAD_END: &[&str] = &[
    r"(?i)\bthis approach (?:won't|will not|cannot|can't) work",
    r"(?i)\bI need to abandon this",
    r"(?i)\blet me try a different approach",
    r"(?i)\bunavailable in (?:test|ci|production)",
    r"(?i)\bnot available in this environment",
    r"(?i)\bthat (?:didn't|did not) work\b",
];

static SET: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(SELF_CORRECTION.iter().chain(DEAD_END)).expect("language patterns compile")
});
static EACH: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    SELF_CORRECTION
        .iter()
        .chain(DEAD_END)
        .map(|p| Regex::new(p).expect("language pattern compiles"))
        .collect()
});

/// One matched sentence.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LanguageHit {
    /// What it means.
    pub kind: LanguageKind,
    /// The sentence holding the match, trimmed and clipped.
    pub sentence: String,
}

/// The first self-correction and the first dead end in `text` (at most one of each).
pub fn scan(text: &str) -> Vec<LanguageHit> {
    let text = crate::text::clip_bytes(text, SCAN_BYTES);
    let matched = SET.matches(text);
    if !matched.matched_any() {
        return Vec::new();
    }
    // Per kind, the earliest match in the text (the patterns' order says nothing of it).
    let mut first: [Option<(usize, usize)>; 2] = [None, None];
    for i in matched.iter() {
        let slot = usize::from(i >= SELF_CORRECTION.len());
        if let Some(m) = EACH[i].find(text) {
            if first[slot].is_none_or(|(start, _)| m.start() < start) {
                first[slot] = Some((m.start(), m.end()));
            }
        }
    }
    let mut hits = Vec::new();
    for (slot, kind) in [LanguageKind::SelfCorrection, LanguageKind::DeadEnd]
        .into_iter()
        .enumerate()
    {
        if let Some((start, end)) = first[slot] {
            hits.push(LanguageHit {
                kind,
                sentence: sentence_around(text, start, end),
            });
        }
    }
    hits
}

/// The sentence(s) spanning `start..end`: from the previous sentence end to the next one.
fn sentence_around(text: &str, start: usize, end: usize) -> String {
    let is_end = |c: char| matches!(c, '.' | '!' | '?' | '\n');
    // Skip the punctuation the match may start with (`. Wait, ...`).
    let start = text[start..]
        .find(|c: char| !is_end(c) && !c.is_whitespace())
        .map_or(start, |i| start + i);
    let from = text[..start].rfind(is_end).map_or(0, |i| i + 1);
    let to = text[end..]
        .find(['.', '!', '?', '\n'])
        .map_or(text.len(), |i| end + i + 1);
    let sentence = text[from..to.max(from)].trim();
    if sentence.chars().count() <= SENTENCE_CHARS {
        sentence.to_owned()
    } else {
        let mut s: String = sentence.chars().take(SENTENCE_CHARS - 1).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_corrections_and_dead_ends_with_their_sentence() {
        let hits = scan(
            "I read the config. I was wrong about the cache. The store is actually keyed by \
             project. Then I ran it.",
        );
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].kind, LanguageKind::SelfCorrection);
        assert!(hits[0].sentence.starts_with("I was wrong about the cache"));
        let hits = scan("Mocking the clock is unavailable in CI. Let me try a different approach.");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].kind, LanguageKind::DeadEnd);
        assert_eq!(hits[0].sentence, "Mocking the clock is unavailable in CI.");
    }

    #[test]
    fn ordinary_uses_of_wait_and_actually_are_not_corrections() {
        assert!(scan("I will wait for the build to finish.").is_empty());
        assert!(scan("This is what the function actually does, not more.").is_empty());
        let hits = scan("Tests pass. Wait, the migration runs twice.");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].sentence, "Wait, the migration runs twice.");
    }
}
