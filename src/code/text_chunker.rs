//! Chunks for files without a grammar: Markdown by sections (a heading and what follows it, up
//! to the next heading of any level), everything else by paragraphs; anything over the budget
//! is cut at blank lines, then line ends.

use super::chunk::{finish, pack_lines, Chunk, ChunkHead, ChunkKind, ChunkOptions, Lines};
use super::language::TextFormat;

/// Chunks `text` of the given format.
pub fn chunk(path: &str, text: &str, format: TextFormat, options: &ChunkOptions) -> Vec<Chunk> {
    let lines = Lines::new(text);
    let sections = match format {
        TextFormat::Markdown => markdown_sections(text),
        TextFormat::Plain => vec![(0, text.len(), None)],
    };
    let kind = match format {
        TextFormat::Markdown => ChunkKind::Section,
        TextFormat::Plain => ChunkKind::Text,
    };
    let mut chunks = Vec::new();
    for (start, end, heading) in sections {
        for (s, e) in pack_lines(text, start, end, options.max_tokens) {
            let head = ChunkHead {
                kind,
                name: heading.clone(),
                qualified_name: None,
                symbols: Vec::new(),
                enclosing: None,
            };
            chunks.extend(finish(path, text, &lines, s, e, head));
        }
    }
    chunks
}

/// `(start, end, heading)` per section; text before the first heading is a section without one.
/// Lines inside fenced code blocks are never headings.
fn markdown_sections(text: &str) -> Vec<(usize, usize, Option<String>)> {
    let mut sections = Vec::new();
    let (mut start, mut heading) = (0, None);
    let mut in_fence = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence {
            if let Some(title) = heading_text(trimmed) {
                if offset > start {
                    sections.push((start, offset, heading.take()));
                }
                start = offset;
                heading = Some(title);
            }
        }
        offset += line.len();
    }
    if text.len() > start {
        sections.push((start, text.len(), heading));
    }
    sections
}

fn heading_text(line: &str) -> Option<String> {
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim();
    (!title.is_empty()).then(|| title.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_cut_at_headings_outside_code_fences() {
        let md = "intro\n\n# One\ntext\n```sh\n# not a heading\n```\n## Two ##\nmore\n";
        let chunks = chunk(
            "README.md",
            md,
            TextFormat::Markdown,
            &ChunkOptions::default(),
        );
        let names: Vec<_> = chunks.iter().map(|c| c.name.as_deref()).collect();
        assert_eq!(names, [None, Some("One"), Some("Two")]);
        assert_eq!((chunks[1].start_line, chunks[1].end_line), (3, 7));
        assert_eq!(
            chunks[2].context,
            "File: README.md | section: Two | Lines: 8-9"
        );
    }

    #[test]
    fn plain_text_over_budget_is_cut_at_blank_lines() {
        let para = "key = \"value\"\n".repeat(20);
        let text = format!("{para}\n{para}\n{para}");
        let options = ChunkOptions {
            max_tokens: 100,
            ..ChunkOptions::default()
        };
        let chunks = chunk("a.toml", &text, TextFormat::Plain, &options);
        assert_eq!(chunks.len(), 3);
        assert_eq!((chunks[1].start_line, chunks[1].end_line), (22, 41));
        assert!(chunks.iter().all(|c| c.kind == ChunkKind::Text));
    }
}
