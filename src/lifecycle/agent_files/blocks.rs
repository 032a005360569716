//! Markdown's block syntax, one line at a time, as `CLAUDE.md` and `AGENTS.md` (and Markdown
//! `.cursorrules`) use it: ATX headings, thematic breaks, list items, code fences, table rows
//! and quotes. Only the syntax: what a block means for the rules is the parser's (`parse.rs`).

use super::lines::{dedent, indent_width, Line};

/// An ATX heading: its level and title (closing `#`s removed).
pub(super) fn atx_heading(trimmed: &str) -> Option<(u8, &str)> {
    let level = trimmed.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let title = rest.trim();
    let closed = title.trim_end_matches('#');
    let title = if closed.is_empty() || closed.ends_with([' ', '\t']) {
        closed.trim_end()
    } else {
        title
    };
    Some((u8::try_from(level).unwrap_or(6), title))
}

/// A horizontal rule (`---`, `* * *`, `___`) or a setext `===` underline.
pub(super) fn is_thematic_break(trimmed: &str) -> bool {
    let mut marks = trimmed.chars().filter(|c| !c.is_whitespace());
    let Some(first) = marks.next() else {
        return false;
    };
    matches!(first, '-' | '*' | '_' | '=')
        && marks.clone().all(|c| c == first)
        && marks.count() >= 2
        && (first != '=' || !trimmed.contains(char::is_whitespace))
}

/// A list item's first line.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bullet<'a> {
    pub(super) indent: usize,
    pub(super) content_indent: usize,
    pub(super) unordered: bool,
    pub(super) text: &'a str,
}

pub(super) fn bullet(text: &str) -> Option<Bullet<'_>> {
    let rest = text.trim_start();
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let (marker_len, unordered) = if rest.starts_with(['-', '*', '+']) {
        (1, true)
    } else if (1..=9).contains(&digits) && rest[digits..].starts_with(['.', ')']) {
        (digits + 1, false)
    } else {
        return None;
    };
    let after = &rest[marker_len..];
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let indent = indent_width(text);
    Some(Bullet {
        indent,
        content_indent: indent + marker_len + 1,
        unordered,
        text: after.trim(),
    })
}

/// An opening code fence.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fence {
    /// Leading whitespace characters, removed from every line of the block.
    indent: usize,
    mark: char,
    len: usize,
}

pub(super) fn fence_open(text: &str) -> Option<Fence> {
    let rest = text.trim_start();
    let mark = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let len = rest.chars().take_while(|&c| c == mark).count();
    // A backtick fence's info string cannot hold a backtick (that is inline code).
    if len < 3 || (mark == '`' && rest[len..].contains('`')) {
        return None;
    }
    Some(Fence {
        indent: text.chars().take_while(|c| c.is_whitespace()).count(),
        mark,
        len,
    })
}

fn closes(text: &str, fence: Fence) -> bool {
    let t = text.trim();
    t.chars().count() >= fence.len && t.chars().all(|c| c == fence.mark)
}

/// The code block opened at `lines[start]`, fences included, and the index after it. A block
/// left open runs to the end of its region and gets a closing fence.
pub(super) fn read_fence(lines: &[Line<'_>], start: usize, fence: Fence) -> (String, usize) {
    let mut code = dedent(lines[start].text, fence.indent)
        .trim_end()
        .to_owned();
    for (k, line) in lines.iter().enumerate().skip(start + 1) {
        code.push('\n');
        if closes(line.text, fence) {
            code.push_str(line.text.trim());
            return (code, k + 1);
        }
        code.push_str(dedent(line.text, fence.indent).trim_end());
    }
    code.push('\n');
    code.extend(std::iter::repeat_n(fence.mark, fence.len));
    (code, lines.len())
}

pub(super) fn is_separator_row(trimmed: &str) -> bool {
    trimmed.contains('|')
        && trimmed.contains('-')
        && trimmed
            .chars()
            .all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

/// A table row's non-empty cells, split at pipes outside code spans (`\|` is a literal pipe).
pub(super) fn table_cells(trimmed: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    let mut escaped = false;
    for c in trimmed.chars() {
        match c {
            '|' if !in_code && !escaped => cells.push(std::mem::take(&mut cell)),
            _ => {
                if c == '`' {
                    in_code = !in_code;
                }
                if escaped && c == '|' {
                    cell.pop();
                }
                cell.push(c);
            }
        }
        escaped = c == '\\';
    }
    cells.push(cell);
    cells
        .into_iter()
        .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|c| !c.is_empty())
        .collect()
}

/// Text of a quoted line without its `>` markers.
pub(super) fn unquote(text: &str) -> &str {
    let mut t = text.trim_start();
    while let Some(rest) = t.strip_prefix('>') {
        t = rest.trim_start();
    }
    t
}
