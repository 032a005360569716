//! A rule's text as it is read: prose collapsed to single spaces with HTML comments removed,
//! fenced code kept with its fences and newlines. The generated section is written in the form
//! [`normalise_text`] gives (so reading a bullet back yields the memory's exact text), and the
//! import compares a memory with its bullet through it.

use std::sync::LazyLock;

use regex::Regex;

use super::blocks::{fence_open, read_fence};
use super::lines::{split_lines, Line};
use super::markers::{is_begin, is_end};

/// `text` as [`parse`](super::parse()) reads it back from a generated bullet: prose with HTML
/// comments removed and whitespace collapsed to single spaces, each fenced code block on its own
/// lines with its fences (dedented, trailing spaces trimmed, closed if left open), parts joined by
/// newlines. Use it to compare a memory with the text of the bullet it was rendered to.
pub fn normalise_text(text: &str) -> String {
    body_of(text).text()
}

static COMMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<!--.*?-->").expect("comment pattern"));

/// One piece of a rule's text.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Part {
    /// Words joined with single spaces.
    Prose(String),
    /// A fenced code block with its fences, lines joined with `\n`.
    Code(String),
}

/// A rule's text as it is read: prose lines collapse into one part until a code block.
#[derive(Debug, Clone, Default)]
pub(super) struct Body {
    pub(super) parts: Vec<Part>,
}

impl Body {
    pub(super) fn push_prose(&mut self, raw: &str) {
        let cleaned = COMMENT.replace_all(raw, " ");
        let words = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
        if words.is_empty() {
            return;
        }
        match self.parts.last_mut() {
            Some(Part::Prose(prose)) => {
                prose.push(' ');
                prose.push_str(&words);
            }
            _ => self.parts.push(Part::Prose(words)),
        }
    }

    pub(super) fn push_code(&mut self, code: String) {
        self.parts.push(Part::Code(code));
    }

    pub(super) fn text(&self) -> String {
        let parts: Vec<&str> = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Prose(s) | Part::Code(s) => s.as_str(),
            })
            .collect();
        parts.join("\n")
    }

    pub(super) fn prose(&self) -> String {
        let prose: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Prose(s) => Some(s.as_str()),
                Part::Code(_) => None,
            })
            .collect();
        prose.join(" ")
    }

    pub(super) fn code(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Code(s) => Some(s.as_str()),
            Part::Prose(_) => None,
        })
    }

    pub(super) fn has_code(&self) -> bool {
        self.code().next().is_some()
    }

    pub(super) fn ends_with_colon(&self) -> bool {
        matches!(self.parts.last(), Some(Part::Prose(p)) if p.ends_with(':'))
    }
}

/// Free text read the way a generated bullet's text is read back.
pub(super) fn body_of(text: &str) -> Body {
    let lines: Vec<Line<'_>> = split_lines(text)
        .into_iter()
        .filter(|l| {
            let t = l.text.trim();
            !(is_begin(t) || is_end(t))
        })
        .collect();
    let mut body = Body::default();
    let mut i = 0;
    while i < lines.len() {
        if let Some(fence) = fence_open(lines[i].text) {
            let (code, next) = read_fence(&lines, i, fence);
            body.push_code(code);
            i = next;
        } else {
            body.push_prose(lines[i].text);
            i += 1;
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn normalise_text_matches_what_parse_reads() {
        assert_eq!(normalise_text("  a\n\tb  <!-- note -->  c "), "a b c");
        assert_eq!(
            normalise_text("Run:\n    ```sh  \n    make  \n\n    ```\nDone."),
            "Run:\n```sh\nmake\n\n```\nDone."
        );
        assert_eq!(
            normalise_text("```\nnever closed"),
            "```\nnever closed\n```"
        );
        assert_eq!(normalise_text(&format!("x\n{END_MARKER}\ny")), "x y");
    }
}
