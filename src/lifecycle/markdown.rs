//! A human-readable Markdown export of memories that imports back losslessly.
//!
//! # Format
//!
//! ```text
//! # Memories of my-project
//!
//! Exported by engram. …
//!
//! ## Decisions
//!
//! ### Use libSQL for storage because it embeds
//! <!-- engram: {"id":"m1","memory_type":"decision","confidence":0.8,…} -->
//! *confidence 0.80 · pinned · files: src/db.rs · tags: storage*
//!
//! > Use libSQL for storage because it embeds
//! > in the process and syncs to Turso.
//! ```
//!
//! - One `## ` section per memory type, in a fixed order: decision, gotcha, error_pattern,
//!   preference, pattern, requirement, then the other types alphabetically; within a type,
//!   memories keep their given order. [`parse`] returns them in file order.
//! - Each memory is a `### ` heading whose title is the first [`TITLE_WORDS`] words of the
//!   content outside code blocks (display only: never read back for a memory with metadata).
//! - Right below it, one metadata line `<!-- engram: {json} -->` holds every field except
//!   the content, under the field names of [`MarkdownMemory`]. An HTML comment is invisible
//!   in a rendered view; `<` and `>` inside the JSON are written as `\u003c` / `\u003e` so
//!   no string can close the comment early. The JSON is authoritative: moving a block under
//!   another `## ` heading does not change its type.
//! - Then a summary in italics (confidence, flags, files, modules, tags), for humans only;
//!   [`parse`] skips it.
//! - Then the content, verbatim, as a block quote: every content line is written as `> line`
//!   (an empty line as `>`). This is the content boundary: no content line, whatever it holds
//!   (`### x`, a code fence, `<!-- engram: … -->`), can be read as structure, and the content
//!   still renders as Markdown inside the quote. Reading strips the `>` and one space, so
//!   CRLF, unicode, tabs and trailing spaces come back exactly.
//!
//! # Reading hand-edited files
//!
//! [`parse`] reads whatever memories are there, in file order: a human may edit content,
//! delete or reorder blocks. Content lines a human adds without `>` are kept as written;
//! blank lines around the content that are not quoted are dropped. A file whose every line
//! ends in CRLF (an editor or git converted it) is read as if it had LF endings. Unknown JSON
//! fields are ignored, and missing ones take the defaults below; a metadata line that is not
//! closed by `-->` or whose JSON does not parse is a [`MarkdownError`] naming its line.
//!
//! A block a human adds with only a `### title` and content (no metadata line) under a
//! `## Type` heading is a new memory: empty id, the type of the heading (its heading from
//! this format, a type string, or the heading lower-cased with `_` for spaces), confidence
//! [`DEFAULT_CONFIDENCE`], scope `global`, share scope `project`, source `user_taught`,
//! `created_at` 0, no tags, files or modules, every flag false. With no content, the title
//! is the content. Such a block outside any `## ` section is an error.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The types whose sections come first, in this order; other types follow alphabetically.
pub const TYPE_ORDER: [&str; 6] = [
    "decision",
    "gotcha",
    "error_pattern",
    "preference",
    "pattern",
    "requirement",
];
/// Confidence of a memory added by hand (and of one whose metadata has none).
pub const DEFAULT_CONFIDENCE: f64 = 0.8;
/// Words of the content shown in a memory's `###` title.
pub const TITLE_WORDS: usize = 8;

/// Section headings of engram's memory types; other types are headed by their type string.
const HEADINGS: [(&str, &str); 16] = [
    ("decision", "Decisions"),
    ("gotcha", "Gotchas"),
    ("error_pattern", "Error patterns"),
    ("preference", "Preferences"),
    ("pattern", "Patterns"),
    ("requirement", "Requirements"),
    ("causal_dependency", "Causal dependencies"),
    ("context_cost", "Context costs"),
    ("dead_end", "Dead ends"),
    ("e2e_observation", "E2E observations"),
    ("module_insight", "Module insights"),
    ("prefetch_pattern", "Prefetch patterns"),
    ("task_calibration", "Task calibrations"),
    ("work_state", "Work state"),
    ("work_unit_outcome", "Work unit outcomes"),
    ("workflow_recipe", "Workflow recipes"),
];
const META_OPEN: &str = "<!-- engram:";
const META_CLOSE: &str = "-->";
const INTRO: &str = "Exported by engram. Edit the quoted content freely, delete or reorder \
memories, or add one as a `### title` with its text under a type heading; keep each \
`<!-- engram: … -->` line with its memory.";

/// A memory as the Markdown format carries it (a subset of engram's Memory; strings as
/// stored).
#[derive(Debug, Clone, PartialEq)]
pub struct MarkdownMemory {
    /// The memory id (empty for a memory added by hand).
    pub id: String,
    /// The memory type string, e.g. `gotcha`.
    pub memory_type: String,
    /// The content, verbatim.
    pub content: String,
    /// Confidence in 0..=1.
    pub confidence: f64,
    /// Free-form tags.
    pub tags: Vec<String>,
    /// Files the memory is about.
    pub related_files: Vec<String>,
    /// Modules the memory is about.
    pub related_modules: Vec<String>,
    /// How widely it applies (`global`, `module`, …).
    pub scope: String,
    /// Who may see it (`project`, `personal`, …).
    pub share_scope: String,
    /// Who created it (`user_taught`, `agent_explicit`, …).
    pub source: String,
    /// Pinned into the hot tier.
    pub pinned: bool,
    /// Confirmed by the user.
    pub user_verified: bool,
    /// Flagged for review.
    pub needs_review: bool,
    /// Superseded or wrong.
    pub deprecated: bool,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
}

/// Why a Markdown file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownError {
    /// 1-based line of the problem.
    pub line: u32,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for MarkdownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for MarkdownError {}

/// The metadata line's JSON, written (every field but the content).
#[derive(Serialize)]
struct MetaOut<'a> {
    id: &'a str,
    memory_type: &'a str,
    confidence: f64,
    tags: &'a [String],
    related_files: &'a [String],
    related_modules: &'a [String],
    scope: &'a str,
    share_scope: &'a str,
    source: &'a str,
    pinned: bool,
    user_verified: bool,
    needs_review: bool,
    deprecated: bool,
    created_at: i64,
}

/// The metadata line's JSON, read: unknown fields ignored, missing ones defaulted.
#[derive(Deserialize)]
#[serde(default)]
struct MetaIn {
    id: String,
    memory_type: Option<String>,
    confidence: Option<f64>,
    tags: Vec<String>,
    related_files: Vec<String>,
    related_modules: Vec<String>,
    scope: String,
    share_scope: String,
    source: String,
    pinned: bool,
    user_verified: bool,
    needs_review: bool,
    deprecated: bool,
    created_at: i64,
}

impl Default for MetaIn {
    fn default() -> Self {
        MetaIn {
            id: String::new(),
            memory_type: None,
            confidence: None,
            tags: Vec::new(),
            related_files: Vec::new(),
            related_modules: Vec::new(),
            scope: "global".into(),
            share_scope: "project".into(),
            source: "user_taught".into(),
            pinned: false,
            user_verified: false,
            needs_review: false,
            deprecated: false,
            created_at: 0,
        }
    }
}

impl MetaIn {
    fn into_memory(self, memory_type: String, content: String) -> MarkdownMemory {
        MarkdownMemory {
            id: self.id,
            memory_type,
            content,
            confidence: self.confidence.unwrap_or(DEFAULT_CONFIDENCE),
            tags: self.tags,
            related_files: self.related_files,
            related_modules: self.related_modules,
            scope: self.scope,
            share_scope: self.share_scope,
            source: self.source,
            pinned: self.pinned,
            user_verified: self.user_verified,
            needs_review: self.needs_review,
            deprecated: self.deprecated,
            created_at: self.created_at,
        }
    }
}

/// The export of `memories` of project `project_id` (see the module doc for the format).
pub fn render(project_id: &str, memories: &[MarkdownMemory]) -> String {
    let mut out = format!("# Memories of {}\n\n{INTRO}\n", one_line(project_id));
    for memory_type in ordered_types(memories) {
        out.push_str(&format!("\n## {}\n", heading_of(memory_type)));
        for memory in memories.iter().filter(|m| m.memory_type == memory_type) {
            render_memory(&mut out, memory);
        }
    }
    out
}

/// Reads an export, hand-edited or not, into its memories in file order.
pub fn parse(text: &str) -> Result<Vec<MarkdownMemory>, MarkdownError> {
    let crlf = is_crlf_file(text);
    let mut memories = Vec::new();
    let mut section: Option<String> = None;
    let mut block: Option<Block<'_>> = None;
    for (i, raw) in text.split('\n').enumerate() {
        let num = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let raw = if crlf {
            raw.strip_suffix('\r').unwrap_or(raw)
        } else {
            raw
        };
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let heading = heading(line);
        if heading.is_some() {
            if let Some(done) = block.take() {
                memories.extend(done.finish()?);
            }
        }
        match heading {
            Some((1, _)) => section = None,
            Some((2, title)) => section = Some(type_of_heading(title)),
            Some((_, title)) => block = Some(Block::new(num, title, section.clone())),
            // Text outside a memory block (the intro, notes) is not part of any memory.
            None => {
                if let Some(b) = block.as_mut() {
                    b.push(num, raw)?;
                }
            }
        }
    }
    if let Some(done) = block.take() {
        memories.extend(done.finish()?);
    }
    Ok(memories)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The distinct types of `memories` in section order.
fn ordered_types(memories: &[MarkdownMemory]) -> Vec<&str> {
    let rank = |t: &str| {
        TYPE_ORDER
            .iter()
            .position(|known| *known == t)
            .unwrap_or(TYPE_ORDER.len())
    };
    let mut types: Vec<&str> = memories.iter().map(|m| m.memory_type.as_str()).collect();
    types.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    types.dedup();
    types
}

fn heading_of(memory_type: &str) -> String {
    HEADINGS
        .iter()
        .find(|(t, _)| *t == memory_type)
        .map_or_else(|| one_line(memory_type), |(_, h)| (*h).to_owned())
}

/// The type a `##` heading stands for: a known heading or type string, else the heading
/// lower-cased with `_` for spaces.
fn type_of_heading(title: &str) -> String {
    HEADINGS
        .iter()
        .find(|(t, h)| title.eq_ignore_ascii_case(h) || title.eq_ignore_ascii_case(t))
        .map_or_else(
            || {
                title
                    .to_lowercase()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join("_")
            },
            |(t, _)| (*t).to_owned(),
        )
}

fn render_memory(out: &mut String, memory: &MarkdownMemory) {
    out.push_str(&format!("\n### {}\n", title_of(&memory.content)));
    out.push_str(&format!("{META_OPEN} {} {META_CLOSE}\n", meta_json(memory)));
    out.push_str(&summary(memory));
    out.push_str("\n\n");
    for line in memory.content.split('\n') {
        if line.is_empty() {
            out.push_str(">\n");
        } else {
            out.push_str("> ");
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// The first [`TITLE_WORDS`] words of the content outside code blocks, Markdown marks
/// trimmed off each word.
fn title_of(content: &str) -> String {
    let mut in_code = false;
    let prose = content.lines().filter(|line| {
        let fence = line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~");
        in_code ^= fence;
        !(fence || in_code)
    });
    let mut words = prose
        .flat_map(str::split_whitespace)
        .map(|w| w.trim_matches(|c: char| "`*#>_~|".contains(c)))
        .filter(|w| w.chars().any(char::is_alphanumeric));
    let title: Vec<&str> = words.by_ref().take(TITLE_WORDS).collect();
    match (title.is_empty(), words.next().is_some()) {
        (true, _) => "(untitled)".to_owned(),
        (false, true) => format!("{} …", title.join(" ")),
        (false, false) => title.join(" "),
    }
}

fn meta_json(memory: &MarkdownMemory) -> String {
    let meta = MetaOut {
        id: &memory.id,
        memory_type: &memory.memory_type,
        confidence: memory.confidence,
        tags: &memory.tags,
        related_files: &memory.related_files,
        related_modules: &memory.related_modules,
        scope: &memory.scope,
        share_scope: &memory.share_scope,
        source: &memory.source,
        pinned: memory.pinned,
        user_verified: memory.user_verified,
        needs_review: memory.needs_review,
        deprecated: memory.deprecated,
        created_at: memory.created_at,
    };
    // Serialising plain strings, numbers and bools cannot fail; `<`/`>` only occur inside
    // JSON strings, where the escapes mean the same characters.
    serde_json::to_string(&meta)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
}

/// The italic line for humans: confidence, flags, files, modules, tags.
fn summary(memory: &MarkdownMemory) -> String {
    let mut parts = vec![format!("confidence {:.2}", memory.confidence)];
    let flags = [
        (memory.pinned, "pinned"),
        (memory.user_verified, "verified"),
        (memory.needs_review, "needs review"),
        (memory.deprecated, "deprecated"),
    ];
    parts.extend(
        flags
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, f)| (*f).to_owned()),
    );
    let lists = [
        ("files", &memory.related_files),
        ("modules", &memory.related_modules),
        ("tags", &memory.tags),
    ];
    for (label, list) in lists {
        if !list.is_empty() {
            let items: Vec<String> = list.iter().map(|s| one_line(s)).collect();
            parts.push(format!("{label}: {}", items.join(", ")));
        }
    }
    format!("*{}*", parts.join(" · "))
}

/// Whether every line of `text` ends in CRLF (then the CRs are line endings, not content).
fn is_crlf_file(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut newlines = text.match_indices('\n').peekable();
    newlines.peek().is_some() && newlines.all(|(i, _)| i > 0 && bytes[i - 1] == b'\r')
}

/// An ATX heading of level 1 to 3 at the start of the line: its level and title.
fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|&c| c == '#').count();
    let rest = &line[level.min(line.len())..];
    if !(1..=3).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some((level, rest.trim()))
}

/// One `###` block being read.
struct Block<'a> {
    line: u32,
    title: &'a str,
    section: Option<String>,
    meta: Option<MetaIn>,
    summary_done: bool,
    content: Vec<&'a str>,
}

impl<'a> Block<'a> {
    fn new(line: u32, title: &'a str, section: Option<String>) -> Self {
        Block {
            line,
            title,
            section,
            meta: None,
            summary_done: false,
            content: Vec::new(),
        }
    }

    fn push(&mut self, num: u32, raw: &'a str) -> Result<(), MarkdownError> {
        if self.content.is_empty() {
            let t = raw.trim();
            if self.meta.is_none() && t.starts_with(META_OPEN) {
                self.meta = Some(parse_meta(num, t)?);
                return Ok(());
            }
            if self.meta.is_some() && !self.summary_done && is_summary(t) {
                self.summary_done = true;
                return Ok(());
            }
            if t.is_empty() {
                return Ok(());
            }
        }
        self.content.push(raw);
        Ok(())
    }

    fn finish(mut self) -> Result<Option<MarkdownMemory>, MarkdownError> {
        while self
            .content
            .last()
            .is_some_and(|l| !l.starts_with('>') && l.trim().is_empty())
        {
            self.content.pop();
        }
        let content: Vec<&str> = self.content.iter().map(|l| unquote(l)).collect();
        let content = content.join("\n");
        if let Some(mut meta) = self.meta.take() {
            let memory_type = match (meta.memory_type.take(), self.section.take()) {
                (Some(t), _) | (None, Some(t)) => t,
                (None, None) => {
                    return Err(
                        self.error("memory has no type: none in its metadata, no ## section above")
                    )
                }
            };
            return Ok(Some(meta.into_memory(memory_type, content)));
        }
        let Some(memory_type) = self.section.clone() else {
            return Err(self.error("memory without metadata is not under a ## type heading"));
        };
        let content = if content.trim().is_empty() {
            self.title.to_owned()
        } else {
            content
        };
        if content.trim().is_empty() {
            return Ok(None);
        }
        Ok(Some(MetaIn::default().into_memory(memory_type, content)))
    }

    fn error(&self, message: &str) -> MarkdownError {
        MarkdownError {
            line: self.line,
            message: message.to_owned(),
        }
    }
}

fn is_summary(trimmed: &str) -> bool {
    trimmed.len() >= 2 && trimmed.starts_with('*') && trimmed.ends_with('*')
}

/// A content line without its quote marker (`>` and one space); unquoted lines as written.
fn unquote(line: &str) -> &str {
    match line.strip_prefix('>') {
        Some(rest) => rest.strip_prefix(' ').unwrap_or(rest),
        None => line,
    }
}

fn parse_meta(num: u32, trimmed: &str) -> Result<MetaIn, MarkdownError> {
    let error = |message: String| MarkdownError { line: num, message };
    let inner = trimmed
        .strip_prefix(META_OPEN)
        .and_then(|rest| rest.strip_suffix(META_CLOSE))
        .ok_or_else(|| {
            error("engram metadata comment is not closed by `-->` on its line".into())
        })?;
    serde_json::from_str(inner.trim()).map_err(|e| error(format!("malformed engram metadata: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(id: &str, memory_type: &str, content: &str) -> MarkdownMemory {
        MarkdownMemory {
            id: id.into(),
            memory_type: memory_type.into(),
            content: content.into(),
            confidence: 0.8,
            tags: Vec::new(),
            related_files: Vec::new(),
            related_modules: Vec::new(),
            scope: "global".into(),
            share_scope: "project".into(),
            source: "agent_explicit".into(),
            pinned: false,
            user_verified: false,
            needs_review: false,
            deprecated: false,
            created_at: 1_700_000_000_000,
        }
    }

    /// `memories` in the order [`render`] writes them (by type, stable within a type).
    fn in_file_order(memories: &[MarkdownMemory]) -> Vec<MarkdownMemory> {
        let types = ordered_types(memories);
        types
            .iter()
            .flat_map(|t| memories.iter().filter(move |m| m.memory_type == *t))
            .cloned()
            .collect()
    }

    /// A deterministic xorshift generator for the property-style loops.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    /// Pieces that could be mistaken for structure, or that a careless format would mangle.
    const TRICKY: &[&str] = &[
        "### Looks like a memory heading",
        "## Decisions",
        "# Memories of another project",
        "<!-- engram: {\"id\":\"fake\"} -->",
        "<!-- engram: not json",
        "-->",
        "*confidence 0.10 · tags: fake*",
        "```",
        "````rust",
        "~~~",
        "> already quoted",
        ">",
        "",
        " ",
        "trailing spaces   ",
        "\ttab indented",
        "    four-space code",
        "CRLF line\r",
        "\r",
        "unicode: ünïcödé, 日本語, עברית",
        "emoji 🚀🔥 and ZWJ 👩‍💻",
        "- a bullet",
        "1. numbered",
        "| a | b |",
        "\\ backslash \\n not a newline",
        "\"quotes\" and 'apostrophes'",
        "<script>alert(1)</script>",
        "plain words only",
    ];

    fn tricky_text(rng: &mut Rng, max_lines: usize) -> String {
        let lines: Vec<&str> = (0..rng.below(max_lines + 1))
            .map(|_| rng.pick(TRICKY))
            .collect();
        lines.join("\n")
    }

    fn tricky_list(rng: &mut Rng) -> Vec<String> {
        (0..rng.below(4))
            .map(|_| {
                rng.pick(&[
                    "src/a.ts", "auth", "-->", "a, b", "·", "*x*", "<!--", "日本", "sp ace", "",
                ])
                .to_owned()
            })
            .collect()
    }

    fn tricky_memory(rng: &mut Rng, i: usize) -> MarkdownMemory {
        let types = [
            "decision",
            "gotcha",
            "error_pattern",
            "preference",
            "pattern",
            "requirement",
            "workflow_recipe",
            "dead_end",
            "zz_custom",
            "",
        ];
        let confidences = [
            0.0,
            1.0,
            0.8,
            0.1 + 0.2,
            1.0 / 3.0,
            1e-300,
            0.999_999_999_999_9,
        ];
        let created = [0, -1, 1_700_000_000_123, i64::MAX, i64::MIN];
        MarkdownMemory {
            id: format!("mem_{i}_{}", rng.pick(&["", "-->", "é", "<x>"])),
            memory_type: types[rng.below(types.len())].to_owned(),
            content: tricky_text(rng, 6),
            confidence: confidences[rng.below(confidences.len())],
            tags: tricky_list(rng),
            related_files: tricky_list(rng),
            related_modules: tricky_list(rng),
            scope: rng.pick(&["global", "module", "work_unit"]).to_owned(),
            share_scope: rng.pick(&["project", "personal", "team"]).to_owned(),
            source: rng
                .pick(&["agent_explicit", "user_taught", "qa_auto"])
                .to_owned(),
            pinned: rng.below(2) == 1,
            user_verified: rng.below(2) == 1,
            needs_review: rng.below(2) == 1,
            deprecated: rng.below(2) == 1,
            created_at: created[rng.below(created.len())],
        }
    }

    #[test]
    fn render_writes_the_documented_layout() {
        let mut m = memory(
            "m1",
            "gotcha",
            "Never call Stripe from a server component.\n\n```ts\nfetch('/api/stripe')\n```",
        );
        m.confidence = 0.9;
        m.pinned = true;
        m.related_files = vec!["src/a.ts".into(), "src/b.ts".into()];
        m.tags = vec!["auth".into()];
        let text = render("acme billing", &[m]);
        let expected = format!(
            "# Memories of acme billing\n\n{INTRO}\n\n## Gotchas\n\n\
             ### Never call Stripe from a server component.\n\
             <!-- engram: {{\"id\":\"m1\",\"memory_type\":\"gotcha\",\"confidence\":0.9,\"tags\":[\"auth\"],\
             \"related_files\":[\"src/a.ts\",\"src/b.ts\"],\"related_modules\":[],\"scope\":\"global\",\
             \"share_scope\":\"project\",\"source\":\"agent_explicit\",\"pinned\":true,\"user_verified\":false,\
             \"needs_review\":false,\"deprecated\":false,\"created_at\":1700000000000}} -->\n\
             *confidence 0.90 · pinned · files: src/a.ts, src/b.ts · tags: auth*\n\n\
             > Never call Stripe from a server component.\n>\n> ```ts\n> fetch('/api/stripe')\n> ```\n"
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn sections_follow_the_fixed_type_order() {
        let memories: Vec<MarkdownMemory> = [
            "zz_custom",
            "requirement",
            "dead_end",
            "pattern",
            "preference",
            "error_pattern",
            "gotcha",
            "decision",
            "context_cost",
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| memory(&format!("m{i}"), t, "Some content here"))
        .collect();
        let text = render("p", &memories);
        let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(
            headings,
            [
                "## Decisions",
                "## Gotchas",
                "## Error patterns",
                "## Preferences",
                "## Patterns",
                "## Requirements",
                "## Context costs",
                "## Dead ends",
                "## zz_custom",
            ]
        );
    }

    #[test]
    fn titles_are_the_first_words_of_the_content() {
        assert_eq!(
            title_of("## Use   `pnpm`\nfor *every* install in this repo, please"),
            "Use pnpm for every install in this repo, …"
        );
        assert_eq!(title_of("Short one"), "Short one");
        assert_eq!(title_of("```\n---\n```"), "(untitled)");
        assert_eq!(
            title_of("Run this:\n```sh\nmake all\n```\nthen check"),
            "Run this: then check"
        );
    }

    #[test]
    fn parse_of_render_gives_back_every_field_of_tricky_memories() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let memories: Vec<MarkdownMemory> = (0..rng.below(6))
                .map(|i| tricky_memory(&mut rng, i))
                .collect();
            let text = render("proj <-->\nname", &memories);
            let parsed = parse(&text).unwrap_or_else(|e| panic!("round {round}: {e}\n{text}"));
            assert_eq!(parsed, in_file_order(&memories), "round {round}:\n{text}");
        }
    }

    #[test]
    fn exact_contents_round_trip() {
        let contents = [
            "",
            "\n",
            "\n\nleading and trailing blank lines\n\n",
            "crlf\r\nlines\r\n",
            "\r",
            "trailing spaces   \n   leading spaces",
            "> a quote\n>\n>> nested",
            "### not a heading\n<!-- engram: {\"id\":\"nope\"} -->\n*not a summary*",
            "````\n```\ncode with a fence inside\n```\n````",
            "😀 🇩🇪 e\u{301} \u{200b}zero width",
        ];
        let memories: Vec<MarkdownMemory> = contents
            .iter()
            .enumerate()
            .map(|(i, c)| memory(&format!("m{i}"), "pattern", c))
            .collect();
        let parsed = parse(&render("p", &memories)).expect("parses");
        let got: Vec<&str> = parsed.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(got, contents);
    }

    #[test]
    fn a_file_converted_to_crlf_reads_like_the_original() {
        let mut a = memory("a", "decision", "Use libSQL.\nIt embeds.");
        a.tags = vec!["db".into()];
        let memories = vec![a, memory("b", "gotcha", "Watch out\n\nfor this")];
        let crlf = render("p", &memories).replace('\n', "\r\n");
        assert_eq!(parse(&crlf).expect("parses"), memories);
    }

    #[test]
    fn hand_edits_are_read_as_they_are() {
        let memories = vec![
            memory("d1", "decision", "Use libSQL for storage."),
            memory("g1", "gotcha", "Never run migrations by hand."),
            memory("g2", "gotcha", "The watcher misses network drives."),
            memory("p1", "preference", "Prefer small modules."),
        ];
        let text = render("p", &memories);
        // Edit g1's content, delete d1's block, and move p1's section above the gotchas.
        let edited = text.replace("> Never run migrations by hand.", "> Never run migrations by hand;\n> use `npm run migrate`.\nAdded without a quote marker.");
        let d1 = edited.find("### Use libSQL").expect("d1");
        let gotchas = edited.find("## Gotchas").expect("gotchas");
        let prefs = edited.find("## Preferences").expect("prefs");
        let edited = format!(
            "{}{}\n{}",
            &edited[..d1],
            &edited[prefs..],
            &edited[gotchas..prefs]
        );
        let parsed = parse(&edited).expect("parses");
        let ids: Vec<&str> = parsed.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["p1", "g1", "g2"]);
        assert_eq!(
            parsed[1].content,
            "Never run migrations by hand;\nuse `npm run migrate`.\nAdded without a quote marker."
        );
        assert_eq!(parsed[0], memories[3]);
        assert_eq!(parsed[2], memories[2]);
    }

    #[test]
    fn a_block_added_by_hand_gets_the_defaults() {
        let text = "\
# Memories of p

## Gotchas

### Seeds are not idempotent

Running the seed script twice
duplicates the users.

### Always rebuild the index after a schema change

## Workflow recipes

### Release
> Tag, then `npm publish`.

## Team lore

### Friday deploys
Nobody deploys on Friday afternoons.
";
        let parsed = parse(text).expect("parses");
        let mut expected = memory(
            "",
            "gotcha",
            "Running the seed script twice\nduplicates the users.",
        );
        expected.source = "user_taught".into();
        expected.created_at = 0;
        assert_eq!(parsed[0], expected);
        assert_eq!(
            parsed[1].content,
            "Always rebuild the index after a schema change"
        );
        let rest: Vec<(&str, &str)> = parsed[2..]
            .iter()
            .map(|m| (m.memory_type.as_str(), m.content.as_str()))
            .collect();
        assert_eq!(
            rest,
            [
                ("workflow_recipe", "Tag, then `npm publish`."),
                ("team_lore", "Nobody deploys on Friday afternoons.")
            ]
        );
    }

    #[test]
    fn metadata_is_lenient_about_fields_and_strict_about_syntax() {
        let text = "## Gotchas\n\n### x\n<!-- engram: {\"id\":\"g\",\"future_field\":[1,2],\"confidence\":null} -->\n> body\n";
        let parsed = parse(text).expect("unknown fields are ignored");
        assert_eq!(
            (
                parsed[0].id.as_str(),
                parsed[0].memory_type.as_str(),
                parsed[0].confidence
            ),
            ("g", "gotcha", DEFAULT_CONFIDENCE)
        );
        assert_eq!(parsed[0].scope, "global");

        let bad_json =
            "# Memories of p\n\n## Gotchas\n\n### x\n<!-- engram: {\"id\": 5} -->\n> body\n";
        let err = parse(bad_json).expect_err("id must be a string");
        assert_eq!(err.line, 6);
        assert!(
            err.message.starts_with("malformed engram metadata"),
            "{err}"
        );
        assert!(err
            .to_string()
            .starts_with("line 6: malformed engram metadata"));

        let unclosed = "## Gotchas\n\n### x\n\n<!-- engram: {\"id\":\"g\"}\n> body\n";
        assert_eq!(parse(unclosed).expect_err("unclosed").line, 5);

        let no_type = "### x\n<!-- engram: {\"id\":\"g\"} -->\n> body\n";
        assert_eq!(parse(no_type).expect_err("no type").line, 1);
        let no_section = "# Memories of p\n\n### Orphan\nSome text.\n";
        assert_eq!(parse(no_section).expect_err("no section").line, 3);
    }

    #[test]
    fn empty_and_text_only_files_have_no_memories() {
        assert_eq!(parse("").expect("empty"), Vec::new());
        assert_eq!(parse(&render("p", &[])).expect("no memories"), Vec::new());
        assert_eq!(
            parse("# Notes\n\nJust prose, no memories.\n").expect("prose"),
            Vec::new()
        );
    }
}
