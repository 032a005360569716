//! The input as lines: each with its 1-based number (what a rule reports), without its line
//! ending, a byte-order mark dropped; the YAML front matter at the top (as in `.mdc` rules),
//! which the parser skips; and indentation measured the way Markdown does (a tab to the next
//! multiple of four).

/// A line of the input: its 1-based number and its text without the line ending.
#[derive(Debug, Clone, Copy)]
pub(super) struct Line<'a> {
    pub(super) num: u32,
    pub(super) text: &'a str,
}

pub(super) fn split_lines(text: &str) -> Vec<Line<'_>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines()
        .enumerate()
        .map(|(i, l)| Line {
            num: u32::try_from(i + 1).unwrap_or(u32::MAX),
            text: l.trim_end_matches('\r'),
        })
        .collect()
}

/// How many lines the YAML front matter takes at the very top (0 without one, or when it
/// is never closed: then the `---` is a horizontal rule).
pub(super) fn front_matter_len(lines: &[Line<'_>]) -> usize {
    if lines.first().map(|l| l.text.trim_end()) != Some("---") {
        return 0;
    }
    lines
        .iter()
        .skip(1)
        .position(|l| matches!(l.text.trim_end(), "---" | "..."))
        .map_or(0, |p| p + 2)
}

/// Column width of a line's indentation (tabs to the next multiple of 4).
pub(super) fn indent_width(text: &str) -> usize {
    let mut width = 0;
    for c in text.chars() {
        match c {
            ' ' => width += 1,
            '\t' => width += 4 - width % 4,
            _ => break,
        }
    }
    width
}

/// `text` without up to `n` leading spaces or tabs.
pub(super) fn dedent(text: &str, n: usize) -> &str {
    let mut rest = text;
    for _ in 0..n {
        match rest.strip_prefix([' ', '\t']) {
            Some(r) => rest = r,
            None => break,
        }
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::super::classify::PREFERENCE;
    use super::super::fixtures::*;
    use super::super::*;

    #[test]
    fn front_matter_is_skipped_and_lines_still_count_it() {
        let mdc = "---\ndescription: React rules\nglobs: src/**/*.tsx\nalwaysApply: false\n---\n\n- Use React Query for server state.\n";
        let rules = parse(AgentFileKind::CursorRules, mdc);
        assert_eq!(
            rows(&rules),
            vec![row(7, PREFERENCE, "", "Use React Query for server state.")]
        );
        // Not at the very top: a horizontal rule, and the lines after it are read.
        let late = "Intro line that is long enough.\n---\ntitle: not front matter\n---\n";
        assert_eq!(parse(AgentFileKind::ClaudeMd, late).len(), 2);
    }
}
