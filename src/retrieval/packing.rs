//! Stage 4 of recall: packing the ranked items into a context of at most the budget's tokens,
//! with a short citation per item.
//!
//! Two passes in rank order. The first keeps each memory type within its share of the budget
//! for the phase (the seed's allocations, e.g. implementing: gotchas 30 %, error patterns 25 %)
//! and code within [`CODE_SHARE`] (a share smaller than its best item still takes that item,
//! unless the share is 0); the second lets whatever was held back by a share fill the
//! budget left over, so a share is a limit under contention and never wasted room. A chunk
//! overlapping the lines of a chunk already packed is left out (the same code twice only costs
//! tokens). An item too big for what is left is clipped at a line boundary when at least
//! [`MIN_CLIP_TOKENS`] remain, and skipped otherwise.
//!
//! The text lists memories first (rank order), then code grouped by file (files in the order
//! of their best item, chunks in line order), each item labelled `[n]` with its rank.

use std::fmt::Write as _;

use super::recall::{ItemContent, PackState, RecallItem};
use super::scoring::Phase;
use crate::code::chunk::estimate_tokens;
use crate::code::read::CodeChunk;
use crate::memory::{Memory, MemoryType};
use crate::text::clip_bytes;

/// The share of the budget code may take in the first pass.
pub const CODE_SHARE: f64 = 0.6;
/// The smallest room (tokens) worth filling with the head of an item too big for it.
pub const MIN_CLIP_TOKENS: u32 = 64;
/// Longest citation, in characters (the seed's limit).
pub const MAX_CITATION_CHARS: usize = 40;

/// The token budget of a phase (the seed's); 2,500 without a phase.
pub fn phase_budget(phase: Option<Phase>) -> u32 {
    match phase {
        Some(Phase::Define) | Some(Phase::Validate) | None => 2500,
        Some(Phase::Implement) => 3000,
        Some(Phase::Refine) | Some(Phase::Explore) => 2000,
        Some(Phase::Reflect) => 1500,
    }
}

/// The share of the budget memories of `memory_type` may take in the first pass (the seed's
/// allocation per phase; types it does not name share its "other" row). No phase: no limit.
pub fn type_share(phase: Option<Phase>, memory_type: MemoryType) -> f64 {
    use MemoryType as T;
    let Some(phase) = phase else {
        return 1.0;
    };
    match (phase, memory_type) {
        (Phase::Define, T::WorkflowRecipe) => 0.30,
        (Phase::Define, T::Requirement | T::Decision) => 0.20,
        (Phase::Define, T::DeadEnd) => 0.15,
        (Phase::Define, T::TaskCalibration) => 0.10,
        (Phase::Define, _) => 0.05,
        (Phase::Implement, T::Gotcha) => 0.30,
        (Phase::Implement, T::ErrorPattern) => 0.25,
        (Phase::Implement, T::CausalDependency | T::Pattern) => 0.15,
        (Phase::Implement, T::DeadEnd) => 0.10,
        (Phase::Implement, _) => 0.05,
        (Phase::Validate, T::ErrorPattern) => 0.30,
        (Phase::Validate, T::Requirement | T::E2eObservation) => 0.25,
        (Phase::Validate, T::WorkUnitOutcome) => 0.15,
        (Phase::Validate, _) => 0.05,
        (Phase::Refine, T::ErrorPattern) => 0.35,
        (Phase::Refine, T::Gotcha) => 0.25,
        (Phase::Refine, T::DeadEnd) => 0.20,
        (Phase::Refine, T::Pattern) => 0.15,
        (Phase::Refine, _) => 0.05,
        (Phase::Explore, T::ModuleInsight) => 0.40,
        (Phase::Explore, T::Decision) => 0.25,
        (Phase::Explore, T::Pattern) => 0.20,
        (Phase::Explore, T::CausalDependency) => 0.15,
        (Phase::Explore, _) => 0.0,
        (Phase::Reflect, T::WorkUnitOutcome) => 0.40,
        (Phase::Reflect, T::TaskCalibration) => 0.35,
        (Phase::Reflect, T::DeadEnd) => 0.15,
        (Phase::Reflect, _) => 0.10,
    }
}

/// Where the first pass may spend: one share per memory type, one for code.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Share {
    Memory(MemoryType),
    Code,
}

/// The citation of an item: `path:start-end` for a chunk (clipped from the left), the
/// memory's own citation text or `type: first words` for a memory; at most
/// [`MAX_CITATION_CHARS`] characters.
pub fn citation(content: &ItemContent) -> String {
    match content {
        ItemContent::Chunk(c) => {
            let full = format!("{}:{}-{}", c.path, c.start_line, c.end_line);
            let chars = full.chars().count();
            if chars <= MAX_CITATION_CHARS {
                full
            } else {
                let tail: String = full
                    .chars()
                    .skip(chars - (MAX_CITATION_CHARS - 1))
                    .collect();
                format!("…{tail}")
            }
        }
        ItemContent::Memory(m) => {
            let text = match m.citation_text.as_deref().map(str::trim) {
                Some(own) if !own.is_empty() => own.to_owned(),
                _ => format!(
                    "{}: {}",
                    m.memory_type.as_str(),
                    m.content.split_whitespace().collect::<Vec<_>>().join(" ")
                ),
            };
            clip_chars(&text, MAX_CITATION_CHARS)
        }
    }
}

fn clip_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max - 1).collect();
    format!("{}…", head.trim_end())
}

/// The label and header of a chunk in the context.
fn chunk_header(rank: usize, chunk: &CodeChunk) -> String {
    let symbol = chunk
        .qualified_name
        .as_deref()
        .or(chunk.name.as_deref())
        .map(|s| format!(" · {s}"))
        .unwrap_or_default();
    format!(
        "[{rank}] lines {}-{} ({}){symbol}\n",
        chunk.start_line, chunk.end_line, chunk.kind
    )
}

fn memory_text(rank: usize, memory: &Memory) -> String {
    let files = if memory.related_files.is_empty() {
        String::new()
    } else {
        format!(" · {}", memory.related_files.join(", "))
    };
    format!(
        "[{rank}] {} (confidence {:.2}){files}\n{}\n",
        memory.memory_type.as_str(),
        memory.confidence,
        memory.content.trim_end()
    )
}

/// Tokens an item costs in the context (its text and its header).
fn cost(rank: usize, content: &ItemContent) -> u32 {
    let bytes = match content {
        ItemContent::Chunk(c) => chunk_header(rank, c).len() + c.content.len() + 8,
        ItemContent::Memory(m) => memory_text(rank, m).len() + 1,
    };
    estimate_tokens(bytes) as u32
}

/// The head of `text` in whole lines within `max_bytes`, or `None` when not even one line fits.
fn head_lines(text: &str, max_bytes: usize) -> Option<&str> {
    let clipped = clip_bytes(text, max_bytes);
    if clipped.len() == text.len() {
        return Some(text);
    }
    clipped.rfind('\n').map(|end| &text[..end])
}

/// What was packed: the context and the tokens it uses.
pub struct Packed {
    /// The context text (empty when nothing fits).
    pub text: String,
    /// Its estimated tokens.
    pub tokens: u32,
}

/// Decides which of `items` (ranked, best first) go into a context of `budget` tokens, sets
/// each item's `pack` state, `tokens` and `citation`, and renders the context.
pub fn pack(items: &mut [RecallItem], phase: Option<Phase>, budget: u32) -> Packed {
    use std::collections::HashMap;
    for item in items.iter_mut() {
        item.citation = citation(&item.content);
    }
    let mut used: u32 = 0;
    let mut spent: HashMap<Share, u32> = HashMap::new();
    // Chosen text per item: `None` = not packed, `Some(None)` = whole, `Some(Some(head))`.
    let mut chosen: Vec<Option<Option<String>>> = vec![None; items.len()];
    let share_of = |content: &ItemContent| match content {
        ItemContent::Chunk(_) => Share::Code,
        ItemContent::Memory(m) => Share::Memory(m.memory_type),
    };
    let limit_of = |share: Share| -> u32 {
        let fraction = match share {
            Share::Code => CODE_SHARE,
            Share::Memory(t) => type_share(phase, t),
        };
        (fraction * budget as f64).floor() as u32
    };
    let overlaps = |items: &[RecallItem], chosen: &[Option<Option<String>>], i: usize| {
        let ItemContent::Chunk(c) = &items[i].content else {
            return false;
        };
        items.iter().zip(chosen).any(|(other, picked)| {
            picked.is_some()
                && matches!(&other.content, ItemContent::Chunk(o)
                    if o.path == c.path && o.start_line <= c.end_line && c.start_line <= o.end_line)
        })
    };
    for first_pass in [true, false] {
        for i in 0..items.len() {
            if chosen[i].is_some() || items[i].pack == PackState::Overlap {
                continue;
            }
            if overlaps(items, &chosen, i) {
                items[i].pack = PackState::Overlap;
                continue;
            }
            let rank = i + 1;
            let share = share_of(&items[i].content);
            let tokens = cost(rank, &items[i].content);
            let share_limit = limit_of(share);
            let share_spent = *spent.get(&share).unwrap_or(&0);
            // A share smaller than its best item still takes that item.
            let within_share = tokens <= share_limit.saturating_sub(share_spent)
                || (share_spent == 0 && share_limit > 0);
            let room = budget.saturating_sub(used);
            let fits = tokens <= room && (!first_pass || within_share);
            let (pick, tokens) = if fits {
                (Some(None), tokens)
            } else if !first_pass && room >= MIN_CLIP_TOKENS {
                match clip_to(rank, &items[i].content, room) {
                    Some((head, tokens)) => (Some(Some(head)), tokens),
                    None => (None, 0),
                }
            } else {
                (None, 0)
            };
            if let Some(pick) = pick {
                used += tokens;
                *spent.entry(share).or_default() += tokens;
                items[i].tokens = tokens;
                items[i].pack = if pick.is_some() {
                    PackState::Clipped
                } else {
                    PackState::Packed
                };
                chosen[i] = Some(pick);
            } else {
                items[i].pack = PackState::OverBudget;
            }
        }
    }
    Packed {
        text: render(items, &chosen),
        tokens: used,
    }
}

/// The head of a chunk or memory that fits `room` tokens, with its cost.
fn clip_to(rank: usize, content: &ItemContent, room: u32) -> Option<(String, u32)> {
    const MARK: &str = "\n… (clipped to the budget)";
    let text = text_of(content);
    // Header and fences: what the item costs beyond its text (rounding up once more).
    let overhead = cost(rank, content).saturating_sub(estimate_tokens(text.len()) as u32) + 1;
    let max_bytes = (room.saturating_sub(overhead) as usize * 4).checked_sub(MARK.len())?;
    let head = head_lines(text, max_bytes)?;
    let clipped = format!("{head}{MARK}");
    let tokens = overhead + estimate_tokens(clipped.len()) as u32;
    (tokens <= room).then_some((clipped, tokens))
}

fn text_of(content: &ItemContent) -> &str {
    match content {
        ItemContent::Chunk(c) => &c.content,
        ItemContent::Memory(m) => &m.content,
    }
}

/// A chunk chosen for the context: its rank, the chunk, its head when clipped.
type PickedChunk<'a> = (usize, &'a CodeChunk, Option<&'a str>);

/// The context: memories in rank order, then code grouped by file.
fn render(items: &[RecallItem], chosen: &[Option<Option<String>>]) -> String {
    let mut out = String::new();
    let picked = || {
        items
            .iter()
            .zip(chosen)
            .enumerate()
            .filter_map(|(i, (item, pick))| pick.as_ref().map(|p| (i + 1, item, p.as_deref())))
    };
    let mut memories = picked()
        .filter(|(_, item, _)| matches!(item.content, ItemContent::Memory(_)))
        .peekable();
    if memories.peek().is_some() {
        out.push_str("## Memories\n\n");
        for (rank, item, head) in memories {
            if let ItemContent::Memory(m) = &item.content {
                match head {
                    None => out.push_str(&memory_text(rank, m)),
                    Some(head) => {
                        let mut clipped = m.clone();
                        clipped.content = head.to_owned();
                        out.push_str(&memory_text(rank, &clipped));
                    }
                }
                out.push('\n');
            }
        }
    }
    // Files in the order of their best packed chunk; chunks of a file in line order.
    let mut files: Vec<(&str, Vec<PickedChunk<'_>>)> = Vec::new();
    for (rank, item, head) in picked() {
        if let ItemContent::Chunk(c) = &item.content {
            match files.iter_mut().find(|(path, _)| *path == c.path) {
                Some((_, chunks)) => chunks.push((rank, c, head)),
                None => files.push((&c.path, vec![(rank, c, head)])),
            }
        }
    }
    if !files.is_empty() {
        out.push_str("## Code\n\n");
    }
    for (path, mut chunks) in files {
        chunks.sort_by_key(|(_, c, _)| c.start_line);
        let _ = writeln!(out, "### {path} ({})\n", chunks[0].1.language);
        for (rank, chunk, head) in chunks {
            out.push_str(&chunk_header(rank, chunk));
            let _ = writeln!(
                out,
                "```{}\n{}\n```\n",
                chunk.language,
                head.unwrap_or(&chunk.content).trim_end()
            );
        }
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::model::sample;
    use crate::retrieval::recall::StageRanks;

    fn chunk(id: i64, path: &str, lines: (u32, u32), bytes: usize) -> ItemContent {
        let content: String = (0..bytes / 20)
            .map(|i| format!("let line_{i:06} = 0;\n"))
            .collect();
        ItemContent::Chunk(CodeChunk {
            id,
            path: path.into(),
            language: "typescript".into(),
            kind: "function".into(),
            name: Some(format!("f{id}")),
            qualified_name: Some(format!("f{id}")),
            symbols: vec![format!("f{id}")],
            start_line: lines.0,
            end_line: lines.1,
            start_byte: 0,
            end_byte: content.len() as u64,
            content_hash: String::new(),
            token_estimate: estimate_tokens(content.len()) as u32,
            context: String::new(),
            content,
        })
    }

    fn memory(memory_type: MemoryType, bytes: usize) -> ItemContent {
        ItemContent::Memory(sample(memory_type, &"word ".repeat(bytes / 5)))
    }

    fn items(contents: Vec<ItemContent>) -> Vec<RecallItem> {
        contents
            .into_iter()
            .enumerate()
            .map(|(i, content)| {
                RecallItem::new(content, 1.0 / (i + 1) as f64, StageRanks::default())
            })
            .collect()
    }

    fn states(items: &[RecallItem]) -> Vec<&'static str> {
        items.iter().map(|i| i.pack.as_str()).collect()
    }

    #[test]
    fn overlapping_chunks_are_packed_once() {
        let mut list = items(vec![
            chunk(1, "a.ts", (10, 20), 200),
            chunk(2, "a.ts", (15, 30), 200),
            chunk(3, "a.ts", (21, 30), 200),
            chunk(4, "b.ts", (10, 20), 200),
        ]);
        pack(&mut list, None, 10_000);
        assert_eq!(states(&list), ["packed", "overlap", "packed", "packed"]);
    }

    #[test]
    fn shares_hold_under_contention_and_the_rest_fills_the_budget() {
        // Implementing: gotchas get 30 % of 1,000 tokens in the first pass. Four gotchas of
        // ~130 tokens: two fit the share, the error pattern after them still gets its own
        // share, and the second pass packs the other gotchas into what is left.
        let mut list = items(vec![
            memory(MemoryType::Gotcha, 500),
            memory(MemoryType::Gotcha, 500),
            memory(MemoryType::Gotcha, 500),
            memory(MemoryType::Gotcha, 500),
            memory(MemoryType::ErrorPattern, 500),
        ]);
        let packed = pack(&mut list, Some(Phase::Implement), 1000);
        assert!(
            list.iter().all(|i| i.pack == PackState::Packed),
            "{:?}",
            states(&list)
        );
        assert!(packed.tokens <= 1000);
        // In the context, ranks keep their labels even though the first pass took [5] before
        // [3] and [4].
        let at = |label: &str| packed.text.find(label).unwrap();
        assert!(at("[1]") < at("[3]") && at("[3]") < at("[5]"));

        // A budget too small for all: the error pattern's share protects it from the
        // higher-ranked gotchas.
        let mut list = items(vec![
            memory(MemoryType::Gotcha, 500),
            memory(MemoryType::Gotcha, 500),
            memory(MemoryType::Gotcha, 500),
            memory(MemoryType::ErrorPattern, 500),
        ]);
        // Each costs 133 tokens: the first pass packs one gotcha (share 135) and the error
        // pattern (its share, 112, is less than one item, but a share always takes its best
        // item); the second has room for one more gotcha only.
        pack(&mut list, Some(Phase::Implement), 450);
        assert_eq!(states(&list), ["packed", "packed", "budget", "packed"]);
    }

    #[test]
    fn an_item_too_big_for_the_room_left_is_clipped_at_a_line() {
        let mut list = items(vec![chunk(1, "a.ts", (1, 400), 8000)]);
        let packed = pack(&mut list, None, 500);
        assert_eq!(list[0].pack, PackState::Clipped);
        assert!(
            packed.tokens <= 500 && packed.tokens > 400,
            "{}",
            packed.tokens
        );
        assert!(packed.text.contains("… (clipped to the budget)"));
        assert!(packed.text.contains("let line_000000 = 0;"));
        // Nothing is cut inside a line.
        assert!(packed
            .text
            .lines()
            .filter(|l| l.starts_with("let "))
            .all(|l| l.ends_with("= 0;")));
        // Too little room for any useful head: skipped.
        let mut list = items(vec![chunk(1, "a.ts", (1, 400), 8000)]);
        pack(&mut list, None, MIN_CLIP_TOKENS - 1);
        assert_eq!(list[0].pack, PackState::OverBudget);
    }

    #[test]
    fn code_is_grouped_by_file_in_line_order() {
        let mut list = items(vec![
            chunk(1, "b.ts", (50, 60), 100),
            chunk(2, "a.ts", (1, 5), 100),
            chunk(3, "b.ts", (1, 10), 100),
        ]);
        let text = pack(&mut list, None, 10_000).text;
        let at = |s: &str| text.find(s).unwrap();
        assert!(
            at("### b.ts") < at("[3] lines 1-10") && at("[3] lines 1-10") < at("[1] lines 50-60")
        );
        assert!(at("[1] lines 50-60") < at("### a.ts"));
        assert_eq!(text.matches("### b.ts").count(), 1);
    }

    #[test]
    fn citations_are_short() {
        let long = chunk(
            1,
            &format!("{}/deep/file.ts", "dir/".repeat(20)),
            (100, 120),
            10,
        );
        let c = citation(&long);
        assert_eq!(c.chars().count(), MAX_CITATION_CHARS);
        assert!(c.starts_with('…') && c.ends_with("deep/file.ts:100-120"));
        let mut m = sample(
            MemoryType::Gotcha,
            "a rather long memory text that will not fit in forty characters",
        );
        assert_eq!(
            citation(&ItemContent::Memory(m.clone())),
            "gotcha: a rather long memory text that…"
        );
        m.citation_text = Some("ADR-7".into());
        assert_eq!(citation(&ItemContent::Memory(m)), "ADR-7");
    }
}
