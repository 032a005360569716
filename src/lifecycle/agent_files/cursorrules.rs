//! What `.cursorrules` adds to Markdown. A `.cursorrules` file is read as Markdown when it has
//! a heading or a `-`/`*`/`+` bullet outside the generated section, with two additions for its
//! usual shape: a line ending in `:` is a section for the lines below it (unless a code block
//! follows it), and so is a short line (at most six words, no closing punctuation) after a
//! blank line and right above more text. Otherwise the file is plain text: every non-blank line
//! is a rule (numbered lines too, without their number), with the same `:` and short-line
//! sections.

use super::blocks::{atx_heading, bullet, fence_open, is_thematic_break};
use super::lines::Line;

// A `:` line or short title in a .cursorrules file: deeper than any ATX heading, so the next
// such line replaces it and any real heading closes it.
pub(super) const PSEUDO_LEVEL: u8 = 7;

/// Whether a `.cursorrules` text has Markdown structure: a heading or an unordered bullet.
pub(super) fn looks_like_markdown(lines: &[Line<'_>]) -> bool {
    lines.iter().any(|l| {
        let t = l.text.trim();
        atx_heading(t).is_some()
            || bullet(l.text).is_some_and(|b| b.unordered) && !is_thematic_break(t)
    })
}

/// The section title line `i` of a `.cursorrules` file opens, if it is one: a line ending in
/// `:` (not followed by code), or a short title after a blank line right above more text.
pub(super) fn section_title<'a>(lines: &[Line<'a>], i: usize) -> Option<&'a str> {
    let trimmed = |k: usize| lines.get(k).map_or("", |l| l.text.trim());
    let line = lines[i];
    let t = line.text.trim();
    if t.is_empty() || t.starts_with("<!--") || bullet(line.text).is_some() {
        return None;
    }
    let words = t.split_whitespace().count();
    if let Some(title) = t.strip_suffix(':') {
        let code_follows = (i + 1..lines.len())
            .find(|&k| !lines[k].text.trim().is_empty())
            .is_some_and(|k| fence_open(lines[k].text).is_some());
        return (words <= 12 && !code_follows).then(|| title.trim_end());
    }
    let after_blank = i == 0 || trimmed(i - 1).is_empty();
    let before_text = !trimmed(i + 1).is_empty();
    let bare = !t.ends_with(['.', '!', '?', ';', ',', ')', '`', '"']);
    (words <= 6 && bare && after_blank && before_text && atx_heading(t).is_none()).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::super::classify::{GOTCHA, PREFERENCE};
    use super::super::fixtures::*;
    use super::super::*;

    #[test]
    fn cursorrules_with_bullets_use_colon_lines_and_short_titles_as_sections() {
        let rules = parse(AgentFileKind::CursorRules, CURSORRULES);
        let style = "Code Style and Structure";
        assert_eq!(
            rows(&rules),
            vec![
                row(
                    1,
                    PREFERENCE,
                    "",
                    "You are an expert in TypeScript, Node.js, Next.js App Router, React, Shadcn UI, Radix UI and Tailwind."
                ),
                row(4, PREFERENCE, style, "Write concise, technical TypeScript code with accurate examples."),
                row(5, GOTCHA, style, "Use functional and declarative programming patterns; avoid classes."),
                row(6, PREFERENCE, style, "Prefer iteration and modularization over code duplication."),
                row(
                    9,
                    PREFERENCE,
                    "Naming Conventions",
                    "Use lowercase with dashes for directories (e.g., components/auth-wizard)."
                ),
                row(10, PREFERENCE, "Naming Conventions", "Favor named exports for components."),
                row(13, PREFERENCE, "TypeScript Usage", "Use TypeScript for all code; prefer interfaces over types."),
            ]
        );
    }

    #[test]
    fn plain_cursorrules_give_one_rule_per_line() {
        let rules = parse(AgentFileKind::CursorRules, CURSORRULES_PLAIN);
        assert_eq!(
            rows(&rules),
            vec![
                row(
                    1,
                    PREFERENCE,
                    "",
                    "You are an expert Python developer who writes FastAPI services."
                ),
                row(
                    2,
                    PREFERENCE,
                    "",
                    "Always answer in English, even when the question is in another language."
                ),
                row(
                    5,
                    PREFERENCE,
                    "Key Principles",
                    "Write concise, technical responses with accurate Python examples."
                ),
                row(
                    6,
                    PREFERENCE,
                    "Key Principles",
                    "Use type hints for all function signatures."
                ),
                row(
                    9,
                    PREFERENCE,
                    "Error Handling",
                    "Handle errors and edge cases at the beginning of functions."
                ),
                row(
                    10,
                    GOTCHA,
                    "Error Handling",
                    "Never swallow exceptions silently."
                ),
                row(
                    11,
                    PREFERENCE,
                    "Error Handling",
                    "Validate request bodies with Pydantic models."
                ),
                row(
                    12,
                    PREFERENCE,
                    "Error Handling",
                    "Return HTTP 422 for validation errors."
                ),
            ]
        );
        // The same lines in a CLAUDE.md are Markdown paragraphs.
        let as_markdown = parse(AgentFileKind::ClaudeMd, CURSORRULES_PLAIN);
        assert_eq!(as_markdown[0].text, "You are an expert Python developer who writes FastAPI services. Always answer in English, even when the question is in another language.");
    }
}
