//! The agent-file bridge: reads the rule files coding agents load (`CLAUDE.md`, `AGENTS.md`,
//! `.cursorrules`) into individual rules that become memories, and writes engram's hot tier
//! back into them as a generated section that the next read recognises.
//!
//! # Reading
//!
//! Markdown files are read block by block; nothing here panics, whatever the input.
//!
//! - ATX headings (`#`..`######`) set the section path, outermost first. When the file has a
//!   single H1 and it is the first heading, it is the file's title ("CLAUDE.md", the project
//!   name) and is left out of every path. Headings are never rules themselves.
//! - Each bullet (`-`, `*`, `+`, `1.`, `1)`) is one rule; continuation lines (indented, or
//!   unindented right below it) are joined to it with a space. A nested bullet is a rule of
//!   its own with the same section path: its parent's text is not repeated in it, because
//!   most sub-bullets read on their own and repeating the parent would duplicate it in many
//!   memories.
//! - A paragraph (consecutive non-blank lines) is one rule; a `>` quote is read as text.
//! - A fenced code block (```` ``` ```` or `~~~`) directly below a rule's last line, or below
//!   a rule ending with `:` with only blank lines between, belongs to that rule and is kept
//!   with its fences and newlines; any other code block is a rule of its own, always typed
//!   `workflow_recipe`.
//! - Each data row of a table is a rule, its cells joined with ` — `; the header row and the
//!   separator row are skipped (a header is column names, not a rule).
//! - Skipped: YAML front matter at the very top (`---` … `---`, as in `.mdc` rules), HTML
//!   comments (outside the markers, and inline ones inside rules), horizontal rules and
//!   `===` underlines, rules that are only a link, the "This file provides guidance to …"
//!   boilerplate, rules under [`MIN_WORDS`] words (unless they hold code, sit under a
//!   command-like heading, or carry an engram id), and duplicates within one file (same
//!   normalised text, ignoring case; generated and user rules are deduplicated separately
//!   because a hot-tier memory is often the very rule it was imported from).
//!
//! `.cursorrules` files are read as Markdown when they have a heading or a `-`/`*`/`+`
//! bullet outside the generated section, with two additions for their usual shape: a line
//! ending in `:` is a section for the lines below it (unless a code block follows it), and so
//! is a short line (at most six words, no closing punctuation) after a blank line and right
//! above more text. Otherwise the file is plain text: every non-blank line is a rule (numbered
//! lines too, without their number), with the same `:` and short-line sections.
//!
//! # Classification
//!
//! Each rule gets a memory type from its text (prose only, never code) and its headings, the
//! first match winning:
//!
//! 1. **gotcha** — the text says `never`, `do not`, `don't`, `avoid`, `must not`, `should
//!    not`, `careful`, `warning`, `caution`, `gotcha`, `pitfall`, `beware` or `important:`.
//!    Negative words beat every heading.
//! 2. **decision** — the text says `decided`, `decision`, `chose`/`chosen`, `ADR`, `went
//!    with`, `opted for`, `in favo(u)r of`, or "we use … because".
//! 3. **workflow_recipe** — the text is mainly a command: it starts with a code span that
//!    looks like a command line (has a space, or starts with a known tool such as `npm`,
//!    `cargo`, `make`), starts with "run"/"execute" and has a code span, or carries a shell
//!    code block (`bash`, `sh`, `console`, … or `$ ` prompts).
//! 4. The innermost heading with a known word decides: gotchas/pitfalls/caveats/warnings/
//!    troubleshooting/anti-patterns → gotcha; pattern(s)/idioms → pattern; conventions →
//!    pattern when the rule is code-shaped (a code block, or a code span with `(){}<>=;` or
//!    `::`), else preference; decisions/architecture/design/ADR/rationale → decision;
//!    commands/build/test/setup/install/workflow/scripts/run/deploy/release/lint/CI/dev/PR/
//!    commit/git → workflow_recipe; requirements/constraints/compliance/mandatory/must →
//!    requirement; style/naming/formatting/preferences/guidelines/practices/principles →
//!    preference.
//! 5. **requirement** — the text says `must`, `required`, `requirement`, `shall` or `should
//!    always` and no heading typed it (under a style heading, "must" is a preference).
//! 6. **preference** — everything else.
//!
//! # The generated section
//!
//! [`render_section`] writes the hot tier between [`BEGIN_MARKER`] and [`END_MARKER`], under
//! a `## Engram memory` heading, one `### ` heading per memory type in a fixed order
//! ([`TYPE_HEADINGS`]'s, then unknown types alphabetically), one bullet per memory ending in
//! `<!-- engram:id=ID -->`. A memory's text is written as [`normalise_text`] gives it (prose on
//! the bullet line, code blocks indented below it), so reading the section back yields that
//! exact text; a bullet whose text a human edited is read with its id and the new text, so the
//! edit can be imported. Inside the section, a marked bullet's type is its `### ` heading's;
//! headings there do not leak into the section path of the user's rules after it. The
//! markers are found line by line anywhere, even inside a code block, both when reading and
//! by [`splice`]; a begin marker without an end marker runs to the end of the file. The same
//! markers are used in `.cursorrules`, where they are harmless text.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::Regex;

/// First line of the generated section.
pub const BEGIN_MARKER: &str =
    "<!-- engram:begin generated (edits to bullets are imported back; do not edit the markers) -->";
/// Last line of the generated section.
pub const END_MARKER: &str = "<!-- engram:end -->";
/// The `##` heading that opens the generated section, so its `###` type headings nest under
/// it rather than under the user's last section.
pub const SECTION_TITLE: &str = "Engram memory";
/// Rules with fewer words are dropped, unless they hold code or sit under a command heading.
pub const MIN_WORDS: usize = 3;
/// Engram's memory types with the `###` heading the generated section files them under, in
/// the section's order: the six types agent files hold first, then the rest alphabetically.
pub const TYPE_HEADINGS: [(&str, &str); 16] = [
    ("gotcha", "Gotchas"),
    ("decision", "Decisions"),
    ("requirement", "Requirements"),
    ("workflow_recipe", "Workflow recipes"),
    ("pattern", "Patterns"),
    ("preference", "Preferences"),
    ("causal_dependency", "Causal dependencies"),
    ("context_cost", "Context costs"),
    ("dead_end", "Dead ends"),
    ("e2e_observation", "E2E observations"),
    ("error_pattern", "Error patterns"),
    ("module_insight", "Module insights"),
    ("prefetch_pattern", "Prefetch patterns"),
    ("task_calibration", "Task calibrations"),
    ("work_state", "Work state"),
    ("work_unit_outcome", "Work unit outcomes"),
];

// Markers are matched by prefix so a reworded begin marker is still recognised.
const BEGIN_PREFIX: &str = "<!-- engram:begin";
const END_PREFIX: &str = "<!-- engram:end";
// A `:` line or short title in a .cursorrules file: deeper than any ATX heading, so the next
// such line replaces it and any real heading closes it.
const PSEUDO_LEVEL: u8 = 7;
const BOILERPLATE: [&str; 1] = ["this file provides guidance to"];

const GOTCHA: &str = "gotcha";
const DECISION: &str = "decision";
const WORKFLOW: &str = "workflow_recipe";
const PATTERN: &str = "pattern";
const REQUIREMENT: &str = "requirement";
const PREFERENCE: &str = "preference";

/// Which agent file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentFileKind {
    /// Claude Code's `CLAUDE.md`.
    ClaudeMd,
    /// The cross-agent `AGENTS.md` (Codex and others).
    AgentsMd,
    /// Cursor's `.cursorrules`, Markdown or plain text.
    CursorRules,
}

impl AgentFileKind {
    /// Every kind, in declaration order.
    pub const ALL: [AgentFileKind; 3] = [
        AgentFileKind::ClaudeMd,
        AgentFileKind::AgentsMd,
        AgentFileKind::CursorRules,
    ];

    /// The file's name in a project root.
    pub fn file_name(self) -> &'static str {
        match self {
            AgentFileKind::ClaudeMd => "CLAUDE.md",
            AgentFileKind::AgentsMd => "AGENTS.md",
            AgentFileKind::CursorRules => ".cursorrules",
        }
    }

    /// The kind of a file by its base name (any directories are ignored); the `.md` names
    /// match in any case, `.cursorrules` only exactly.
    pub fn from_file_name(name: &str) -> Option<Self> {
        let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
        if base.eq_ignore_ascii_case("CLAUDE.md") {
            Some(AgentFileKind::ClaudeMd)
        } else if base.eq_ignore_ascii_case("AGENTS.md") {
            Some(AgentFileKind::AgentsMd)
        } else if base == ".cursorrules" {
            Some(AgentFileKind::CursorRules)
        } else {
            None
        }
    }

    /// The stored string.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentFileKind::ClaudeMd => "claude_md",
            AgentFileKind::AgentsMd => "agents_md",
            AgentFileKind::CursorRules => "cursorrules",
        }
    }
}

/// One rule found in an agent file.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Heading path, outermost first (empty at top level; the file's title left out).
    pub section: Vec<String>,
    /// The rule, whitespace-normalised: continuation lines joined with a space, fenced code
    /// kept with its fences and newlines.
    pub text: String,
    /// 1-based line where the rule starts.
    pub line: u32,
    /// One of `decision`, `preference`, `gotcha`, `workflow_recipe`, `pattern`,
    /// `requirement`; a marked bullet in the generated section has its heading's type, which
    /// may be any of engram's types.
    pub memory_type: &'static str,
    /// The memory id from the engram marker of a bullet inside the generated section (`None`
    /// for a bullet added there by hand, and outside the section).
    pub generated_id: Option<String>,
    /// Whether the rule sits inside engram's generated section.
    pub generated: bool,
}

/// One memory rendered into the generated section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneratedItem<'a> {
    /// The memory id, written in the bullet's marker.
    pub id: &'a str,
    /// The memory type, which picks the `###` heading.
    pub memory_type: &'a str,
    /// The memory's text; written as [`normalise_text`] gives it.
    pub text: &'a str,
}

/// Reads the rules of an agent file. Never panics; an empty or rule-less file gives none.
pub fn parse(kind: AgentFileKind, text: &str) -> Vec<Rule> {
    let lines = split_lines(text);
    let body = &lines[front_matter_len(&lines)..];
    let regions = regions(body);
    let cursor = kind == AgentFileKind::CursorRules;
    let plain = cursor
        && !regions
            .iter()
            .filter(|r| !r.generated)
            .any(|r| looks_like_markdown(r.lines));
    let mut drafts = Vec::new();
    let mut stats = HeadingStats::default();
    let mut user_sections = Sections::default();
    for region in &regions {
        if region.generated {
            // The section's own headings stay inside it.
            let mut sections = Sections::default();
            let mode = Mode {
                generated: true,
                cursor: false,
                line_rules: false,
            };
            RegionParser::new(region.lines, mode, &mut sections, &mut drafts, &mut stats).run();
        } else {
            let mode = Mode {
                generated: false,
                cursor,
                line_rules: plain,
            };
            RegionParser::new(
                region.lines,
                mode,
                &mut user_sections,
                &mut drafts,
                &mut stats,
            )
            .run();
        }
    }
    finish(drafts, stats.title_line())
}

/// The generated section for `items`, from [`BEGIN_MARKER`] to [`END_MARKER`] inclusive (with
/// a final newline): items grouped by type under `###` headings in [`TYPE_HEADINGS`] order
/// (unknown types after, alphabetically), in their given order within a type. Items whose
/// text is empty once normalised are left out.
pub fn render_section(items: &[GeneratedItem<'_>]) -> String {
    let mut out = format!("{BEGIN_MARKER}\n## {SECTION_TITLE}\n");
    for memory_type in ordered_types(items) {
        let bullets: Vec<String> = items
            .iter()
            .filter(|item| item.memory_type == memory_type)
            .filter_map(render_bullet)
            .collect();
        if bullets.is_empty() {
            continue;
        }
        let _ = write!(out, "\n### {}\n\n", heading_of(memory_type));
        for bullet in bullets {
            out.push_str(&bullet);
        }
    }
    out.push('\n');
    out.push_str(END_MARKER);
    out.push('\n');
    out
}

/// `existing` with its generated section replaced by `section` (or `section` appended after
/// one blank line when it has none); everything outside the markers is kept byte for byte.
/// In a CRLF file the section is written with CRLF too. Splicing the same section twice
/// gives the same text as splicing it once.
pub fn splice(existing: &str, section: &str) -> String {
    let crlf = existing.contains("\r\n");
    let mut section = section.trim_end_matches(['\r', '\n']).replace("\r\n", "\n");
    if crlf {
        section = section.replace('\n', "\r\n");
    }
    let newline = if crlf { "\r\n" } else { "\n" };
    if let Some((start, end)) = find_section(existing) {
        return format!("{}{}{}", &existing[..start], section, &existing[end..]);
    }
    let mut out = existing.to_owned();
    if !out.is_empty() {
        // One blank line between the user's text and the section, whatever the file ends with.
        if !out.ends_with('\n') {
            out.push_str(newline);
        }
        if !(out.ends_with("\n\n") || out.ends_with("\n\r\n")) {
            out.push_str(newline);
        }
    }
    out.push_str(&section);
    out.push_str(newline);
    out
}

/// `text` as [`parse`] reads it back from a generated bullet: prose with HTML comments
/// removed and whitespace collapsed to single spaces, each fenced code block on its own lines
/// with its fences (dedented, trailing spaces trimmed, closed if left open), parts joined by
/// newlines. Use it to compare a memory with the text of the bullet it was rendered to.
pub fn normalise_text(text: &str) -> String {
    body_of(text).text()
}

/// Checks that the generated section is well formed before anything reads or splices it: at
/// most one begin marker, and an end marker after it. Otherwise the section would run to the
/// end of the file, and splicing would replace (and importing would misread) the user's text
/// after it. The error names the 1-based line of the offending begin marker.
pub fn check_markers(text: &str) -> Result<(), String> {
    let mut begin: Option<usize> = None;
    let mut closed = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if is_begin(t) {
            if let Some(first) = begin {
                return Err(format!(
                    "a second engram begin marker at line {} (the first is at line {first}); \
                     keep one generated section",
                    i + 1
                ));
            }
            begin = Some(i + 1);
        } else if is_end(t) && begin.is_some() {
            closed = true;
        }
    }
    match begin {
        Some(line) if !closed => Err(format!(
            "the engram begin marker at line {line} has no end marker after it; \
             restore `{END_MARKER}` or remove the begin marker"
        )),
        _ => Ok(()),
    }
}

/// A line of the input: its 1-based number and its text without the line ending.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    num: u32,
    text: &'a str,
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
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
fn front_matter_len(lines: &[Line<'_>]) -> usize {
    if lines.first().map(|l| l.text.trim_end()) != Some("---") {
        return 0;
    }
    lines
        .iter()
        .skip(1)
        .position(|l| matches!(l.text.trim_end(), "---" | "..."))
        .map_or(0, |p| p + 2)
}

fn is_begin(trimmed: &str) -> bool {
    trimmed.starts_with(BEGIN_PREFIX)
}

fn is_end(trimmed: &str) -> bool {
    trimmed.starts_with(END_PREFIX)
}

/// A run of lines either inside or outside the generated section (markers excluded).
struct Region<'a> {
    generated: bool,
    lines: &'a [Line<'a>],
}

fn regions<'a>(lines: &'a [Line<'a>]) -> Vec<Region<'a>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut generated = false;
    for (i, line) in lines.iter().enumerate() {
        let t = line.text.trim();
        let boundary = if generated { is_end(t) } else { is_begin(t) };
        if boundary {
            out.push(Region {
                generated,
                lines: &lines[start..i],
            });
            start = i + 1;
            generated = !generated;
        }
    }
    out.push(Region {
        generated,
        lines: &lines[start..],
    });
    out
}

/// Byte range of the generated section in `text`: from the begin marker to the end of the
/// end marker (or of the text, trailing whitespace kept, when the end marker is missing).
fn find_section(text: &str) -> Option<(usize, usize)> {
    let mut offset = 0;
    let mut start = None;
    for raw in text.split_inclusive('\n') {
        let line = raw.trim_end_matches(['\r', '\n']);
        let t = line.trim();
        match start {
            None if is_begin(t) => start = Some(offset + line.find(BEGIN_PREFIX).unwrap_or(0)),
            Some(s) if is_end(t) => return Some((s, offset + line.trim_end().len())),
            _ => {}
        }
        offset += raw.len();
    }
    start.map(|s| (s, s.max(text.trim_end().len())))
}

/// Whether a `.cursorrules` text has Markdown structure: a heading or an unordered bullet.
fn looks_like_markdown(lines: &[Line<'_>]) -> bool {
    lines.iter().any(|l| {
        let t = l.text.trim();
        atx_heading(t).is_some()
            || bullet(l.text).is_some_and(|b| b.unordered) && !is_thematic_break(t)
    })
}

/// Column width of a line's indentation (tabs to the next multiple of 4).
fn indent_width(text: &str) -> usize {
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
fn dedent(text: &str, n: usize) -> &str {
    let mut rest = text;
    for _ in 0..n {
        match rest.strip_prefix([' ', '\t']) {
            Some(r) => rest = r,
            None => break,
        }
    }
    rest
}

/// An ATX heading: its level and title (closing `#`s removed).
fn atx_heading(trimmed: &str) -> Option<(u8, &str)> {
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
fn is_thematic_break(trimmed: &str) -> bool {
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
struct Bullet<'a> {
    indent: usize,
    content_indent: usize,
    unordered: bool,
    text: &'a str,
}

fn bullet(text: &str) -> Option<Bullet<'_>> {
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
struct Fence {
    /// Leading whitespace characters, removed from every line of the block.
    indent: usize,
    mark: char,
    len: usize,
}

fn fence_open(text: &str) -> Option<Fence> {
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
fn read_fence(lines: &[Line<'_>], start: usize, fence: Fence) -> (String, usize) {
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

fn is_separator_row(trimmed: &str) -> bool {
    trimmed.contains('|')
        && trimmed.contains('-')
        && trimmed
            .chars()
            .all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

/// A table row's non-empty cells, split at pipes outside code spans (`\|` is a literal pipe).
fn table_cells(trimmed: &str) -> Vec<String> {
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
fn unquote(text: &str) -> &str {
    let mut t = text.trim_start();
    while let Some(rest) = t.strip_prefix('>') {
        t = rest.trim_start();
    }
    t
}

static COMMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<!--.*?-->").expect("comment pattern"));
static ID_MARKER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"<!--\s*engram:id=(\S+?)\s*-->").expect("id pattern"));
static LINK_ONLY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^(?:!?\[[^\]]*\]\([^)\s]*(?:\s+"[^"]*")?\)|<https?://[^>\s]+>|https?://\S+)[.;,]?$"#,
    )
    .expect("link pattern")
});

/// One piece of a rule's text.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// Words joined with single spaces.
    Prose(String),
    /// A fenced code block with its fences, lines joined with `\n`.
    Code(String),
}

/// A rule's text as it is read: prose lines collapse into one part until a code block.
#[derive(Debug, Clone, Default)]
struct Body {
    parts: Vec<Part>,
}

impl Body {
    fn push_prose(&mut self, raw: &str) {
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

    fn push_code(&mut self, code: String) {
        self.parts.push(Part::Code(code));
    }

    fn text(&self) -> String {
        let parts: Vec<&str> = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Prose(s) | Part::Code(s) => s.as_str(),
            })
            .collect();
        parts.join("\n")
    }

    fn prose(&self) -> String {
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

    fn code(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Code(s) => Some(s.as_str()),
            Part::Prose(_) => None,
        })
    }

    fn has_code(&self) -> bool {
        self.code().next().is_some()
    }

    fn ends_with_colon(&self) -> bool {
        matches!(self.parts.last(), Some(Part::Prose(p)) if p.ends_with(':'))
    }
}

/// Free text read the way a generated bullet's text is read back.
fn body_of(text: &str) -> Body {
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

/// One heading on the current path.
#[derive(Debug, Clone)]
struct Heading {
    level: u8,
    line: u32,
    title: String,
}

/// The heading path at the current line.
#[derive(Debug, Clone, Default)]
struct Sections {
    stack: Vec<Heading>,
}

impl Sections {
    fn enter(&mut self, level: u8, line: u32, title: &str) {
        while self.stack.last().is_some_and(|h| h.level >= level) {
            self.stack.pop();
        }
        self.stack.push(Heading {
            level,
            line,
            title: title.to_owned(),
        });
    }
}

/// What the headings outside the generated section say about the file's title.
#[derive(Debug, Default)]
struct HeadingStats {
    first: Option<u32>,
    h1: Vec<u32>,
}

impl HeadingStats {
    /// The line of the title H1: the only H1, when it is also the first heading.
    fn title_line(&self) -> Option<u32> {
        match self.h1.as_slice() {
            [only] if self.first == Some(*only) => Some(*only),
            _ => None,
        }
    }
}

/// A rule before filtering and classification (a later code block may still join it).
#[derive(Debug)]
struct Draft {
    section: Vec<Heading>,
    body: Body,
    line: u32,
    generated: bool,
    id: Option<String>,
    heading_type: Option<&'static str>,
    standalone_code: bool,
}

#[derive(Debug, Clone, Copy)]
struct Mode {
    generated: bool,
    /// `.cursorrules` additions: `:` lines and short titles are sections.
    cursor: bool,
    /// Plain text: one rule per line, no paragraphs, no unindented continuation.
    line_rules: bool,
}

/// The last rule a following code block may join.
#[derive(Debug, Clone, Copy)]
struct Open {
    draft: usize,
    end: usize,
    colon: bool,
}

/// Reads one region's blocks into drafts.
struct RegionParser<'a, 'o> {
    lines: &'a [Line<'a>],
    mode: Mode,
    sections: &'o mut Sections,
    drafts: &'o mut Vec<Draft>,
    stats: &'o mut HeadingStats,
    open: Option<Open>,
}

impl<'a, 'o> RegionParser<'a, 'o> {
    fn new(
        lines: &'a [Line<'a>],
        mode: Mode,
        sections: &'o mut Sections,
        drafts: &'o mut Vec<Draft>,
        stats: &'o mut HeadingStats,
    ) -> Self {
        RegionParser {
            lines,
            mode,
            sections,
            drafts,
            stats,
            open: None,
        }
    }

    fn run(mut self) {
        let mut i = 0;
        while i < self.lines.len() {
            i = self.block(i);
        }
    }

    fn trimmed(&self, i: usize) -> &'a str {
        self.lines.get(i).map_or("", |l| l.text.trim())
    }

    /// Reads the block starting at line `i`; returns the index after it.
    fn block(&mut self, i: usize) -> usize {
        let line = self.lines[i];
        let t = line.text.trim();
        if t.is_empty() {
            // Blank lines keep `open`: a code block after "…:" and a blank line still joins.
            return i + 1;
        }
        if let Some(fence) = fence_open(line.text) {
            return self.code_block(i, fence);
        }
        self.open = None;
        if t.starts_with("<!--") {
            return self.skip_comment(i);
        }
        if let Some((level, title)) = atx_heading(t) {
            self.heading(line.num, level, title);
            return i + 1;
        }
        if is_thematic_break(t) {
            return i + 1;
        }
        if let Some(b) = bullet(line.text) {
            return self.list_item(i, b);
        }
        if self.table_starts(i) {
            return self.table(i);
        }
        if let Some(title) = self.cursor_section(i) {
            self.sections.enter(PSEUDO_LEVEL, line.num, title);
            return i + 1;
        }
        self.paragraph(i)
    }

    fn heading(&mut self, line: u32, level: u8, title: &str) {
        if !self.mode.generated {
            self.stats.first.get_or_insert(line);
            if level == 1 && self.stats.h1.len() < 2 {
                self.stats.h1.push(line);
            }
        }
        self.sections.enter(level, line, title);
    }

    fn skip_comment(&self, i: usize) -> usize {
        let after = self.trimmed(i).strip_prefix("<!--").unwrap_or_default();
        if after.contains("-->") {
            return i + 1;
        }
        (i + 1..self.lines.len())
            .find(|&k| self.lines[k].text.contains("-->"))
            .map_or(self.lines.len(), |k| k + 1)
    }

    fn code_block(&mut self, i: usize, fence: Fence) -> usize {
        let (code, next) = read_fence(self.lines, i, fence);
        if let Some(open) = self.open {
            if i == open.end + 1 || open.colon {
                self.drafts[open.draft].body.push_code(code);
                self.open = Some(Open {
                    end: next - 1,
                    colon: false,
                    ..open
                });
                return next;
            }
        }
        let mut body = Body::default();
        body.push_code(code);
        self.push(self.lines[i].num, body, None, true);
        self.open = None;
        next
    }

    /// Whether line `k` starts a block that ends a paragraph or a lazy continuation.
    fn starts_block(&self, k: usize) -> bool {
        let line = self.lines[k];
        let t = line.text.trim();
        t.is_empty()
            || fence_open(line.text).is_some()
            || t.starts_with("<!--")
            || atx_heading(t).is_some()
            || is_thematic_break(t)
            || bullet(line.text).is_some()
            || self.table_starts(k)
            || self.cursor_section(k).is_some()
    }

    fn list_item(&mut self, i: usize, b: Bullet<'a>) -> usize {
        let mut body = Body::default();
        let mut id = None;
        self.prose_line(&mut body, &mut id, b.text);
        let strict = self.mode.cursor || self.mode.line_rules;
        let mut end = i;
        let mut k = i + 1;
        while k < self.lines.len() {
            let line = self.lines[k];
            if line.text.trim().is_empty() {
                k += 1;
                continue;
            }
            let gap = k > end + 1;
            let indent = indent_width(line.text);
            let inside = indent >= b.content_indent;
            if bullet(line.text).is_some() || (gap && !inside) {
                break;
            }
            if let Some(fence) = fence_open(line.text) {
                let (code, next) = read_fence(self.lines, k, fence);
                body.push_code(code);
                end = next - 1;
                k = next;
                continue;
            }
            // An unindented line right below the item continues it (Markdown's lazy
            // continuation) unless it starts a block; .cursorrules lines are rules of their own.
            let lazy = !gap && !self.starts_block(k) && (!strict || indent > b.indent);
            if !(inside || lazy) {
                break;
            }
            self.prose_line(&mut body, &mut id, line.text);
            end = k;
            k += 1;
        }
        let colon = body.ends_with_colon();
        let draft = self.push(self.lines[i].num, body, id, false);
        self.open = Some(Open { draft, end, colon });
        end + 1
    }

    fn paragraph(&mut self, i: usize) -> usize {
        let mut body = Body::default();
        let mut id = None;
        self.prose_line(&mut body, &mut id, unquote(self.lines[i].text));
        let mut end = i;
        if !self.mode.line_rules {
            while end + 1 < self.lines.len() && !self.starts_block(end + 1) {
                end += 1;
                self.prose_line(&mut body, &mut id, unquote(self.lines[end].text));
            }
        }
        let colon = body.ends_with_colon();
        let draft = self.push(self.lines[i].num, body, id, false);
        self.open = Some(Open { draft, end, colon });
        end + 1
    }

    fn table_starts(&self, i: usize) -> bool {
        let t = self.trimmed(i);
        t.starts_with('|') || (t.contains('|') && is_separator_row(self.trimmed(i + 1)))
    }

    fn table(&mut self, i: usize) -> usize {
        let mut k = if is_separator_row(self.trimmed(i + 1)) {
            i + 2
        } else {
            i
        };
        while k < self.lines.len() {
            let t = self.trimmed(k);
            if t.is_empty() || !t.contains('|') {
                break;
            }
            if !is_separator_row(t) {
                let mut body = Body::default();
                body.push_prose(&table_cells(t).join(" — "));
                self.push(self.lines[k].num, body, None, false);
            }
            k += 1;
        }
        k
    }

    /// In `.cursorrules`, the section title line `i` opens, if it is one: a line ending in
    /// `:` (not followed by code), or a short title after a blank line right above more text.
    fn cursor_section(&self, i: usize) -> Option<&'a str> {
        if !self.mode.cursor {
            return None;
        }
        let line = self.lines[i];
        let t = line.text.trim();
        if t.is_empty() || t.starts_with("<!--") || bullet(line.text).is_some() {
            return None;
        }
        let words = t.split_whitespace().count();
        if let Some(title) = t.strip_suffix(':') {
            let code_follows = (i + 1..self.lines.len())
                .find(|&k| !self.lines[k].text.trim().is_empty())
                .is_some_and(|k| fence_open(self.lines[k].text).is_some());
            return (words <= 12 && !code_follows).then(|| title.trim_end());
        }
        let after_blank = i == 0 || self.trimmed(i - 1).is_empty();
        let before_text = !self.trimmed(i + 1).is_empty();
        let bare = !t.ends_with(['.', '!', '?', ';', ',', ')', '`', '"']);
        (words <= 6 && bare && after_blank && before_text && atx_heading(t).is_none()).then_some(t)
    }

    fn prose_line(&self, body: &mut Body, id: &mut Option<String>, text: &str) {
        if self.mode.generated && id.is_none() {
            *id = ID_MARKER.captures(text).map(|c| c[1].to_owned());
        }
        body.push_prose(text);
    }

    fn push(&mut self, line: u32, body: Body, id: Option<String>, standalone_code: bool) -> usize {
        let heading_type = if self.mode.generated {
            self.sections
                .stack
                .last()
                .and_then(|h| type_of_heading(&h.title))
        } else {
            None
        };
        self.drafts.push(Draft {
            section: self.sections.stack.clone(),
            body,
            line,
            generated: self.mode.generated,
            id: id.filter(|_| self.mode.generated),
            heading_type,
            standalone_code,
        });
        self.drafts.len() - 1
    }
}

/// Filters, deduplicates and classifies the drafts into rules.
fn finish(drafts: Vec<Draft>, title_line: Option<u32>) -> Vec<Rule> {
    let mut seen = HashSet::new();
    let mut rules = Vec::new();
    for draft in drafts {
        let text = draft.body.text();
        if text.is_empty() {
            continue;
        }
        let section: Vec<String> = draft
            .section
            .iter()
            .filter(|h| Some(h.line) != title_line)
            .map(|h| h.title.clone())
            .collect();
        let prose = draft.body.prose();
        let has_code = draft.body.has_code();
        let marked = draft.id.is_some();
        if !has_code && (LINK_ONLY.is_match(&prose) || is_boilerplate(&prose)) {
            continue;
        }
        let short = prose.split_whitespace().count() < MIN_WORDS;
        if short && !has_code && !marked && !is_codeish(&section) {
            continue;
        }
        if !seen.insert((draft.generated, draft.id.clone(), text.to_lowercase())) {
            continue;
        }
        let memory_type = match draft.heading_type.filter(|_| marked) {
            Some(t) => t,
            None if draft.standalone_code => WORKFLOW,
            None => classify(&section, &draft.body),
        };
        rules.push(Rule {
            section,
            text,
            line: draft.line,
            memory_type,
            generated_id: draft.id,
            generated: draft.generated,
        });
    }
    rules
}

fn is_boilerplate(prose: &str) -> bool {
    let lower = prose.to_lowercase();
    BOILERPLATE.iter().any(|b| lower.starts_with(b))
}

/// Lower-case words (letters, digits, apostrophes; `’` read as `'`).
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .replace('’', "'")
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

fn has_any(words: &[String], list: &[&str]) -> bool {
    words.iter().any(|w| list.contains(&w.as_str()))
}

fn has_phrase(words: &[String], phrases: &[&str]) -> bool {
    phrases.iter().any(|p| {
        let p: Vec<&str> = p.split(' ').collect();
        words
            .windows(p.len())
            .any(|w| w.iter().zip(&p).all(|(a, b)| a == b))
    })
}

const GOTCHA_WORDS: &[&str] = &[
    "never",
    "avoid",
    "careful",
    "warning",
    "caution",
    "gotcha",
    "gotchas",
    "pitfall",
    "pitfalls",
    "beware",
    "don't",
    "dont",
    "mustn't",
    "shouldn't",
];
const GOTCHA_PHRASES: &[&str] = &["do not", "must not", "should not"];
const DECISION_WORDS: &[&str] = &["decided", "decision", "chose", "chosen", "adr"];
const DECISION_PHRASES: &[&str] = &["went with", "opted for", "in favor of", "in favour of"];
const WE_USE: &[&str] = &["we use", "we're using", "we are using"];
const REQUIREMENT_WORDS: &[&str] = &["must", "required", "requirement", "requirements", "shall"];
const SHELL_LANGS: &[&str] = &[
    "bash",
    "sh",
    "shell",
    "zsh",
    "fish",
    "console",
    "terminal",
    "powershell",
    "ps1",
    "cmd",
];
const TOOLS: &[&str] = &[
    "npm", "npx", "pnpm", "yarn", "bun", "bunx", "deno", "node", "cargo", "rustup", "make", "go",
    "python", "python3", "pip", "uv", "poetry", "pytest", "git", "gh", "docker", "kubectl", "just",
    "mvn", "gradle", "dotnet", "bundle", "rake", "mix", "composer", "turbo",
];

/// Heading words per category, checked in this order for the innermost heading first.
const GOTCHA_HEADINGS: &[&str] = &[
    "gotcha",
    "gotchas",
    "pitfall",
    "pitfalls",
    "caveat",
    "caveats",
    "warning",
    "warnings",
    "troubleshooting",
    "anti",
    "antipatterns",
    "don'ts",
    "donts",
    "avoid",
];
const PATTERN_HEADINGS: &[&str] = &["pattern", "patterns", "idioms"];
const CONVENTION_HEADINGS: &[&str] = &["convention", "conventions"];
const DECISION_HEADINGS: &[&str] = &[
    "decision",
    "decisions",
    "architecture",
    "architectural",
    "adr",
    "adrs",
    "design",
    "rationale",
];
const WORKFLOW_HEADINGS: &[&str] = &[
    "command",
    "commands",
    "build",
    "building",
    "builds",
    "test",
    "tests",
    "testing",
    "setup",
    "install",
    "installation",
    "workflow",
    "workflows",
    "script",
    "scripts",
    "run",
    "running",
    "deploy",
    "deployment",
    "deploying",
    "release",
    "releasing",
    "lint",
    "linting",
    "ci",
    "dev",
    "development",
    "debugging",
    "tooling",
    "quickstart",
    "started",
    "pr",
    "prs",
    "commit",
    "commits",
    "committing",
    "git",
    "migrations",
];
const REQUIREMENT_HEADINGS: &[&str] = &[
    "requirement",
    "requirements",
    "constraint",
    "constraints",
    "compliance",
    "mandatory",
    "must",
];
const PREFERENCE_HEADINGS: &[&str] = &[
    "style",
    "styles",
    "styling",
    "convention",
    "conventions",
    "preference",
    "preferences",
    "guideline",
    "guidelines",
    "naming",
    "formatting",
    "practices",
    "principles",
];

/// The memory type of a user rule (see the module doc for the order of the checks).
fn classify(section: &[String], body: &Body) -> &'static str {
    let prose = body.prose();
    let words = words(&prose);
    if has_gotcha_cue(&prose, &words) {
        return GOTCHA;
    }
    if has_any(&words, DECISION_WORDS)
        || has_phrase(&words, DECISION_PHRASES)
        || (has_phrase(&words, WE_USE) && has_any(&words, &["because"]))
    {
        return DECISION;
    }
    if is_command(&prose, &words, body) {
        return WORKFLOW;
    }
    let code_shaped = body.has_code() || has_code_shaped_span(&prose);
    if let Some(t) = section
        .iter()
        .rev()
        .find_map(|title| heading_category(title, code_shaped))
    {
        return t;
    }
    if has_any(&words, REQUIREMENT_WORDS) || has_phrase(&words, &["should always"]) {
        return REQUIREMENT;
    }
    PREFERENCE
}

fn has_gotcha_cue(prose: &str, words: &[String]) -> bool {
    let lower = prose.to_lowercase();
    has_any(words, GOTCHA_WORDS)
        || has_phrase(words, GOTCHA_PHRASES)
        || lower.contains("important:")
        || lower.contains("**important**")
        || lower.contains("important**:")
}

/// Whether a rule is mainly a command: a leading command-like code span, "run `…`", or a
/// shell code block.
fn is_command(prose: &str, words: &[String], body: &Body) -> bool {
    let shell_block = body.code().any(|code| {
        let info = code.trim_start_matches(['`', '~']).trim().to_lowercase();
        let lang = info.split_whitespace().next().unwrap_or_default();
        SHELL_LANGS.contains(&lang) || code.lines().any(|l| l.trim_start().starts_with("$ "))
    });
    let leading_span = prose
        .strip_prefix('`')
        .and_then(|rest| rest.split('`').next())
        .is_some_and(|span| {
            let first = span.split_whitespace().next().unwrap_or_default();
            span.trim().contains(' ') || TOOLS.contains(&first) || first.starts_with("./")
        });
    let run = words
        .first()
        .is_some_and(|w| matches!(w.as_str(), "run" | "execute" | "invoke"))
        && prose.contains('`');
    shell_block || leading_span || run
}

/// Whether some code span in `prose` looks like code rather than a name.
fn has_code_shaped_span(prose: &str) -> bool {
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .any(|span| span.contains(['(', ')', '{', '}', '<', '>', '=', ';']) || span.contains("::"))
}

fn heading_category(title: &str, code_shaped: bool) -> Option<&'static str> {
    let words = words(title);
    if has_any(&words, GOTCHA_HEADINGS) {
        Some(GOTCHA)
    } else if has_any(&words, PATTERN_HEADINGS)
        || (code_shaped && has_any(&words, CONVENTION_HEADINGS))
    {
        Some(PATTERN)
    } else if has_any(&words, DECISION_HEADINGS) {
        Some(DECISION)
    } else if has_any(&words, WORKFLOW_HEADINGS) {
        Some(WORKFLOW)
    } else if has_any(&words, REQUIREMENT_HEADINGS) {
        Some(REQUIREMENT)
    } else if has_any(&words, PREFERENCE_HEADINGS) {
        Some(PREFERENCE)
    } else {
        None
    }
}

/// Whether a heading on the path is about commands, where short rules are kept.
fn is_codeish(section: &[String]) -> bool {
    section
        .iter()
        .any(|title| has_any(&words(title), WORKFLOW_HEADINGS))
}

/// The memory type a generated-section heading stands for (its heading or its type string).
fn type_of_heading(title: &str) -> Option<&'static str> {
    TYPE_HEADINGS
        .iter()
        .find(|(t, h)| title.eq_ignore_ascii_case(h) || title.eq_ignore_ascii_case(t))
        .map(|(t, _)| *t)
}

fn heading_of(memory_type: &str) -> &str {
    TYPE_HEADINGS
        .iter()
        .find(|(t, _)| *t == memory_type)
        .map_or(memory_type, |(_, h)| h)
}

/// The distinct types of `items` in section order.
fn ordered_types<'a>(items: &[GeneratedItem<'a>]) -> Vec<&'a str> {
    let rank = |t: &str| {
        TYPE_HEADINGS
            .iter()
            .position(|(known, _)| *known == t)
            .unwrap_or(TYPE_HEADINGS.len())
    };
    let mut types: Vec<&str> = items.iter().map(|item| item.memory_type).collect();
    types.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    types.dedup();
    types
}

/// One item's bullet: prose on the marked bullet line, code blocks and later prose indented
/// below it so they stay inside the list item.
fn render_bullet(item: &GeneratedItem<'_>) -> Option<String> {
    let body = body_of(item.text);
    let mut parts = body.parts.iter().peekable();
    parts.peek()?;
    let mut out = String::from("- ");
    if let Some(Part::Prose(first)) = parts.peek() {
        out.push_str(first);
        out.push(' ');
        parts.next();
    }
    let _ = writeln!(out, "<!-- engram:id={} -->", item.id);
    for part in parts {
        match part {
            Part::Prose(prose) => {
                let _ = writeln!(out, "  {prose}");
            }
            Part::Code(code) => {
                for line in code.lines() {
                    if line.is_empty() {
                        out.push('\n');
                    } else {
                        let _ = writeln!(out, "  {line}");
                    }
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAUDE_MD: &str = "\
# CLAUDE.md

This file provides guidance to Claude Code (claude.ai/code) when working with code in this repository.

## Project overview

Acme Billing is a Next.js 14 app that issues invoices
and syncs payments from Stripe.

## Commands

```bash
npm install
npm run dev
```

- `npm test` runs the unit tests
- `npm run lint`
- `pnpm dev`
- Run a single test file with `npx vitest run src/lib/money.test.ts`
- Regenerate the Prisma client after editing the schema:
  ```bash
  npx prisma generate
  ```

## Code style

- Use TypeScript strict mode; no `any`.
- Prefer named exports over default exports.
  Default exports make renames harder to grep.
- Components live in `src/components`, one per file:
  - File names are PascalCase, e.g. `InvoiceTable.tsx`
  - Co-locate the test as `InvoiceTable.test.tsx`
- Keep lines short.
- Be terse.

| Tool | Purpose |
|------|---------|
| `npm run typecheck` | Type-check without emitting |
| `npm run format` | Format with Prettier |

## Architecture decisions

- We chose Prisma over raw SQL because migrations are reviewed in PRs.
- Money is stored as integer cents in `BigInt` columns.

---

## Gotchas

- Never call Stripe from a React Server Component; use the `/api/stripe` routes.
- The dev database is reset by `npm run db:reset`, which also drops seed data.

[Contributing guide](docs/CONTRIBUTING.md)

<!-- TODO: document the deploy pipeline -->
";

    const AGENTS_MD: &str = "\
# AGENTS.md

## Dev environment tips
- Use `pnpm dlx turbo run where <project_name>` to jump to a package instead of scanning with `ls`.
- Run `pnpm install --filter <project_name>` to add the package to your workspace so Vite, ESLint, and TypeScript can see it.
- Check the name field inside each package's package.json to confirm the right name—skip the top-level one.

## Testing instructions
- Find the CI plan in the .github/workflows folder.
- From the package root you can just call `pnpm test`. The commit should pass all tests before you merge.
- Fix any test or type errors until the whole suite is green.
- Do not mock the database in integration tests.

## PR instructions
- Title format: [<project_name>] <Title>
- Always run `pnpm lint` and `pnpm test` before committing.
";

    const CURSORRULES: &str = "\
You are an expert in TypeScript, Node.js, Next.js App Router, React, Shadcn UI, Radix UI and Tailwind.

Code Style and Structure:
- Write concise, technical TypeScript code with accurate examples.
- Use functional and declarative programming patterns; avoid classes.
- Prefer iteration and modularization over code duplication.

Naming Conventions
- Use lowercase with dashes for directories (e.g., components/auth-wizard).
- Favor named exports for components.

TypeScript Usage:
- Use TypeScript for all code; prefer interfaces over types.
";

    const CURSORRULES_PLAIN: &str = "\
You are an expert Python developer who writes FastAPI services.
Always answer in English, even when the question is in another language.

Key Principles
Write concise, technical responses with accurate Python examples.
Use type hints for all function signatures.

Error Handling:
Handle errors and edge cases at the beginning of functions.
Never swallow exceptions silently.
1. Validate request bodies with Pydantic models.
2. Return HTTP 422 for validation errors.
OK
";

    /// (line, type, section path joined with " > ", text) of each rule.
    fn rows(rules: &[Rule]) -> Vec<(u32, &'static str, String, String)> {
        rules
            .iter()
            .map(|r| (r.line, r.memory_type, r.section.join(" > "), r.text.clone()))
            .collect()
    }

    fn row(
        line: u32,
        t: &'static str,
        section: &str,
        text: &str,
    ) -> (u32, &'static str, String, String) {
        (line, t, section.to_owned(), text.to_owned())
    }

    #[test]
    fn markers_must_enclose_one_section() {
        assert!(check_markers("# Rules\n- use pnpm everywhere\n").is_ok());
        let section = render_section(&hot_tier());
        assert!(check_markers(&splice("# Rules\n", &section)).is_ok());
        assert!(check_markers(&format!("{END_MARKER}\n# Rules\n{section}")).is_ok());
        let open = format!("# Rules\n{BEGIN_MARKER}\n- a bullet\n\n## Mine\n- keep me\n");
        let err = check_markers(&open).unwrap_err();
        assert!(
            err.contains("line 2") && err.contains("no end marker"),
            "{err}"
        );
        let twice = format!("{section}\n{section}");
        assert!(check_markers(&twice).unwrap_err().contains("second"));
    }

    fn hot_tier() -> Vec<GeneratedItem<'static>> {
        vec![
            GeneratedItem {
                id: "mem_01",
                memory_type: "preference",
                text: "Prefer   named exports\nover default exports.",
            },
            GeneratedItem {
                id: "mem_02",
                memory_type: "gotcha",
                text: "Never run `prisma migrate reset` against the staging database.",
            },
            GeneratedItem {
                id: "mem_03",
                memory_type: "error_pattern",
                text: "Flaky timer tests:\n  ```ts\n  await vi.runAllTimersAsync();\n  ```\nthen rerun",
            },
            GeneratedItem {
                id: "mem_04",
                memory_type: "gotcha",
                text: "Seed data",
            },
        ]
    }

    #[test]
    fn claude_md_gives_one_rule_per_bullet_paragraph_code_block_and_table_row() {
        let rules = parse(AgentFileKind::ClaudeMd, CLAUDE_MD);
        let overview =
            "Acme Billing is a Next.js 14 app that issues invoices and syncs payments from Stripe.";
        assert_eq!(
            rows(&rules),
            vec![
                row(7, PREFERENCE, "Project overview", overview),
                row(12, WORKFLOW, "Commands", "```bash\nnpm install\nnpm run dev\n```"),
                row(17, WORKFLOW, "Commands", "`npm test` runs the unit tests"),
                row(18, WORKFLOW, "Commands", "`npm run lint`"),
                row(19, WORKFLOW, "Commands", "`pnpm dev`"),
                row(20, WORKFLOW, "Commands", "Run a single test file with `npx vitest run src/lib/money.test.ts`"),
                row(
                    21,
                    WORKFLOW,
                    "Commands",
                    "Regenerate the Prisma client after editing the schema:\n```bash\nnpx prisma generate\n```"
                ),
                row(28, PREFERENCE, "Code style", "Use TypeScript strict mode; no `any`."),
                row(
                    29,
                    PREFERENCE,
                    "Code style",
                    "Prefer named exports over default exports. Default exports make renames harder to grep."
                ),
                row(31, PREFERENCE, "Code style", "Components live in `src/components`, one per file:"),
                row(32, PREFERENCE, "Code style", "File names are PascalCase, e.g. `InvoiceTable.tsx`"),
                row(33, PREFERENCE, "Code style", "Co-locate the test as `InvoiceTable.test.tsx`"),
                row(34, PREFERENCE, "Code style", "Keep lines short."),
                row(39, WORKFLOW, "Code style", "`npm run typecheck` — Type-check without emitting"),
                row(40, WORKFLOW, "Code style", "`npm run format` — Format with Prettier"),
                row(
                    44,
                    DECISION,
                    "Architecture decisions",
                    "We chose Prisma over raw SQL because migrations are reviewed in PRs."
                ),
                row(45, DECISION, "Architecture decisions", "Money is stored as integer cents in `BigInt` columns."),
                row(
                    51,
                    GOTCHA,
                    "Gotchas",
                    "Never call Stripe from a React Server Component; use the `/api/stripe` routes."
                ),
                row(
                    52,
                    GOTCHA,
                    "Gotchas",
                    "The dev database is reset by `npm run db:reset`, which also drops seed data."
                ),
            ]
        );
        assert!(rules
            .iter()
            .all(|r| !r.generated && r.generated_id.is_none()));
    }

    #[test]
    fn title_headings_boilerplate_table_headers_links_comments_and_short_rules_are_skipped() {
        let rules = parse(AgentFileKind::ClaudeMd, CLAUDE_MD);
        for r in &rules {
            assert!(!r.section.iter().any(|s| s == "CLAUDE.md"), "{r:?}");
            for skipped in [
                "guidance",
                "Tool",
                "|---",
                "Contributing",
                "TODO",
                "Be terse",
                "---",
            ] {
                assert!(!r.text.contains(skipped), "{skipped} in {r:?}");
            }
            assert!(!r.text.starts_with('#'), "{r:?}");
        }
        // Two H1s: neither is a title, both are sections.
        let two = "# Backend\n\n- Handlers return typed errors, never strings.\n\n# Frontend\n\n- Components are function components.\n";
        let sections: Vec<Vec<String>> = parse(AgentFileKind::ClaudeMd, two)
            .into_iter()
            .map(|r| r.section)
            .collect();
        assert_eq!(
            sections,
            vec![vec!["Backend".to_owned()], vec!["Frontend".to_owned()]]
        );
    }

    #[test]
    fn agents_md_in_codex_style() {
        let rules = parse(AgentFileKind::AgentsMd, AGENTS_MD);
        assert_eq!(rules.len(), 9);
        let dev = "Dev environment tips";
        let testing = "Testing instructions";
        assert_eq!(
            rows(&rules)[..2],
            [
                row(
                    4,
                    WORKFLOW,
                    dev,
                    "Use `pnpm dlx turbo run where <project_name>` to jump to a package instead of scanning with `ls`."
                ),
                row(
                    5,
                    WORKFLOW,
                    dev,
                    "Run `pnpm install --filter <project_name>` to add the package to your workspace so Vite, ESLint, and TypeScript can see it."
                ),
            ]
        );
        assert_eq!(
            rows(&rules)[4..],
            [
                row(
                    10,
                    WORKFLOW,
                    testing,
                    "From the package root you can just call `pnpm test`. The commit should pass all tests before you merge."
                ),
                row(11, WORKFLOW, testing, "Fix any test or type errors until the whole suite is green."),
                row(12, GOTCHA, testing, "Do not mock the database in integration tests."),
                row(15, WORKFLOW, "PR instructions", "Title format: [<project_name>] <Title>"),
                row(16, WORKFLOW, "PR instructions", "Always run `pnpm lint` and `pnpm test` before committing."),
            ]
        );
    }

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

    #[test]
    fn code_blocks_join_the_rule_above_them_or_stand_alone() {
        let text = "\
## Setup

Install the toolchain first:

```sh
rustup toolchain install stable
```

- Seed the local database
```sql
INSERT INTO users VALUES (1);
```

- Nothing to see in this bullet

```js
console.log(1)
```

~~~
unclosed tilde fence
";
        let rules = parse(AgentFileKind::ClaudeMd, text);
        assert_eq!(
            rows(&rules),
            vec![
                row(
                    3,
                    WORKFLOW,
                    "Setup",
                    "Install the toolchain first:\n```sh\nrustup toolchain install stable\n```"
                ),
                row(
                    9,
                    WORKFLOW,
                    "Setup",
                    "Seed the local database\n```sql\nINSERT INTO users VALUES (1);\n```"
                ),
                row(14, WORKFLOW, "Setup", "Nothing to see in this bullet"),
                row(16, WORKFLOW, "Setup", "```js\nconsole.log(1)\n```"),
                row(20, WORKFLOW, "Setup", "~~~\nunclosed tilde fence\n~~~"),
            ]
        );
    }

    #[test]
    fn nested_bullets_continuations_quotes_and_links() {
        let text = "\
## Conventions

1. Services return `Result<T, AppError>`; handlers map errors
   to HTTP codes in one place.
   - Nested rules stay separate rules.
     Their continuation joins them.
2) Ordered items with a parenthesis work too.

> Quoted notes are read as plain text.

- [API reference](https://example.com/api)
- See the [API reference](https://example.com/api) before adding endpoints.
https://example.com/bare-link
- Quoted notes are read as plain text.
";
        let rules = parse(AgentFileKind::ClaudeMd, text);
        assert_eq!(
            rows(&rules),
            vec![
                row(
                    3,
                    PATTERN,
                    "Conventions",
                    "Services return `Result<T, AppError>`; handlers map errors to HTTP codes in one place."
                ),
                row(5, PREFERENCE, "Conventions", "Nested rules stay separate rules. Their continuation joins them."),
                row(7, PREFERENCE, "Conventions", "Ordered items with a parenthesis work too."),
                row(9, PREFERENCE, "Conventions", "Quoted notes are read as plain text."),
                row(
                    12,
                    PREFERENCE,
                    "Conventions",
                    "See the [API reference](https://example.com/api) before adding endpoints. https://example.com/bare-link"
                ),
            ]
        );
    }

    fn classify_one(heading: &str, text: &str) -> &'static str {
        let file = format!("## {heading}\n\n{text}\n");
        let rules = parse(AgentFileKind::ClaudeMd, &file);
        assert_eq!(rules.len(), 1, "{file}");
        rules[0].memory_type
    }

    #[test]
    fn classification_covers_every_branch() {
        let cases = [
            // Negative words beat every heading.
            (
                "Code style",
                "- Don't use default exports in components.",
                GOTCHA,
            ),
            (
                "Architecture",
                "- Avoid circular imports between packages.",
                GOTCHA,
            ),
            (
                "Notes",
                "- **Important:** the cache is per process.",
                GOTCHA,
            ),
            (
                "Troubleshooting",
                "- The watcher misses files on network drives.",
                GOTCHA,
            ),
            // Decision cues in the text, then decision headings.
            (
                "Testing",
                "- We use Vitest because it shares the Vite config.",
                DECISION,
            ),
            ("Notes", "- ADR 7 moved sessions into Redis.", DECISION),
            (
                "Architecture",
                "- Each bounded context owns its tables.",
                DECISION,
            ),
            (
                "Design decisions",
                "- Events are the source of truth.",
                DECISION,
            ),
            // Commands, by text or heading.
            (
                "Notes",
                "- `cargo test --workspace` checks everything.",
                WORKFLOW,
            ),
            (
                "Notes",
                "- Run `make bench` to compare against main.",
                WORKFLOW,
            ),
            (
                "Notes",
                "Deploy steps:\n```console\n$ fly deploy\n```",
                WORKFLOW,
            ),
            (
                "Build and test",
                "- Builds are reproducible on CI runners.",
                WORKFLOW,
            ),
            // Patterns: pattern headings, or conventions with code-shaped text.
            (
                "Patterns",
                "- Repositories wrap every query in a span.",
                PATTERN,
            ),
            (
                "Conventions",
                "- Wrap handlers as `withAuth(handler)` in routes.",
                PATTERN,
            ),
            (
                "Conventions",
                "- Use `camelCase` for variables and functions.",
                PREFERENCE,
            ),
            // Requirements: a requirements heading, or obligation words with no typed heading.
            ("Constraints", "- Support Node 18 and Node 20.", REQUIREMENT),
            ("Notes", "- All endpoints must be idempotent.", REQUIREMENT),
            (
                "Notes",
                "- Responses should always include a request id.",
                REQUIREMENT,
            ),
            (
                "Code style",
                "- Functions must stay under fifty lines.",
                PREFERENCE,
            ),
            // Everything else.
            (
                "Notes",
                "- Keep pull requests small and focused.",
                PREFERENCE,
            ),
        ];
        for (heading, text, expected) in cases {
            assert_eq!(classify_one(heading, text), expected, "{heading}: {text}");
        }
    }

    #[test]
    fn render_section_groups_by_type_in_a_fixed_order() {
        let items = [
            GeneratedItem {
                id: "a",
                memory_type: "zeta_custom",
                text: "Custom type goes last",
            },
            GeneratedItem {
                id: "b",
                memory_type: "preference",
                text: "Tabs,\n  not spaces",
            },
            GeneratedItem {
                id: "c",
                memory_type: "gotcha",
                text: "Never push to main",
            },
            GeneratedItem {
                id: "d",
                memory_type: "gotcha",
                text: "  \n ",
            },
            GeneratedItem {
                id: "e",
                memory_type: "decision",
                text: "```sh\nmake\n```",
            },
        ];
        assert_eq!(
            render_section(&items),
            format!(
                "{BEGIN_MARKER}\n## Engram memory\n\n\
                 ### Gotchas\n\n- Never push to main <!-- engram:id=c -->\n\n\
                 ### Decisions\n\n- <!-- engram:id=e -->\n  ```sh\n  make\n  ```\n\n\
                 ### Preferences\n\n- Tabs, not spaces <!-- engram:id=b -->\n\n\
                 ### zeta_custom\n\n- Custom type goes last <!-- engram:id=a -->\n\n\
                 {END_MARKER}\n"
            )
        );
        assert_eq!(
            render_section(&[]),
            format!("{BEGIN_MARKER}\n## Engram memory\n\n{END_MARKER}\n")
        );
    }

    #[test]
    fn rendered_section_parses_back_in_every_file_and_leaves_user_rules_alone() {
        let items = hot_tier();
        let section = render_section(&items);
        let files = [
            (AgentFileKind::ClaudeMd, CLAUDE_MD),
            (AgentFileKind::AgentsMd, AGENTS_MD),
            (AgentFileKind::CursorRules, CURSORRULES),
            (AgentFileKind::CursorRules, CURSORRULES_PLAIN),
            (AgentFileKind::ClaudeMd, ""),
        ];
        for (kind, text) in files {
            let spliced = splice(text, &section);
            assert!(spliced.starts_with(text));
            let rules = parse(kind, &spliced);
            let user: Vec<Rule> = rules.iter().filter(|r| !r.generated).cloned().collect();
            assert_eq!(user, parse(kind, text), "{kind:?}");
            let generated: Vec<(Option<&str>, &str, &str)> = rules
                .iter()
                .filter(|r| r.generated)
                .map(|r| (r.generated_id.as_deref(), r.memory_type, r.text.as_str()))
                .collect();
            assert_eq!(
                generated,
                vec![
                    (
                        Some("mem_02"),
                        GOTCHA,
                        "Never run `prisma migrate reset` against the staging database."
                    ),
                    (Some("mem_04"), GOTCHA, "Seed data"),
                    (
                        Some("mem_01"),
                        PREFERENCE,
                        "Prefer named exports over default exports."
                    ),
                    (
                        Some("mem_03"),
                        "error_pattern",
                        "Flaky timer tests:\n```ts\nawait vi.runAllTimersAsync();\n```\nthen rerun"
                    ),
                ],
                "{kind:?}"
            );
            for item in &items {
                let rule = rules
                    .iter()
                    .find(|r| r.generated_id.as_deref() == Some(item.id))
                    .expect("rendered");
                assert_eq!(rule.text, normalise_text(item.text));
                assert_eq!(rule.section[0], SECTION_TITLE);
            }
        }
    }

    #[test]
    fn splice_replaces_in_place_is_idempotent_and_keeps_the_rest_byte_for_byte() {
        let section = render_section(&hot_tier());
        for text in [
            CLAUDE_MD,
            AGENTS_MD,
            CURSORRULES,
            CURSORRULES_PLAIN,
            "",
            "no newline at end",
        ] {
            let once = splice(text, &section);
            assert_eq!(splice(&once, &section), once);
            assert!(once.contains(&format!("\n\n{BEGIN_MARKER}")) || text.is_empty());
        }
        assert_eq!(splice("", &section), section);
        assert_eq!(splice("a rule", &section), format!("a rule\n\n{section}"));
        assert_eq!(
            splice("a rule\n\n\n", &section),
            format!("a rule\n\n\n{section}")
        );

        // A section in the middle is replaced; the text around it is untouched, and the user's
        // rules after it keep their own section path.
        let before = "# Notes\n\n## Style\n\n- Use tabs for indentation everywhere.\n\n";
        let after = "  \n- Prefer small modules with one export.\n";
        let old = render_section(&[GeneratedItem {
            id: "old",
            memory_type: "gotcha",
            text: "Old gotcha text here",
        }]);
        let file = format!("{before}{}{after}", old.trim_end());
        let new = splice(&file, &section);
        assert_eq!(new, format!("{before}{}{after}", section.trim_end()));
        let rules = parse(AgentFileKind::ClaudeMd, &new);
        let last = rules.last().expect("user rule after the section");
        assert_eq!(
            (last.text.as_str(), last.section.clone(), last.generated),
            (
                "Prefer small modules with one export.",
                vec!["Style".to_owned()],
                false
            )
        );
        assert!(!rules
            .iter()
            .any(|r| r.generated_id.as_deref() == Some("old")));
    }

    #[test]
    fn an_edited_generated_bullet_is_read_back_with_its_id() {
        let spliced = splice(CLAUDE_MD, &render_section(&hot_tier()));
        let edited = spliced
            .replace(
                "Prefer named exports over default exports. <!--",
                "Prefer named exports, except in Next.js pages. <!--",
            )
            .replace(
                "- Seed data <!-- engram:id=mem_04 -->\n",
                "- Seed data <!-- engram:id=mem_04 -->\n- A rule typed in by hand here.\n",
            );
        let rules = parse(AgentFileKind::ClaudeMd, &edited);
        let by_id = |id: &str| {
            rules
                .iter()
                .find(|r| r.generated_id.as_deref() == Some(id))
                .expect("present")
        };
        assert_eq!(
            by_id("mem_01").text,
            "Prefer named exports, except in Next.js pages."
        );
        assert_eq!(by_id("mem_01").memory_type, PREFERENCE);
        let by_hand = rules
            .iter()
            .find(|r| r.text == "A rule typed in by hand here.")
            .expect("parsed");
        assert_eq!(
            (
                by_hand.generated,
                by_hand.generated_id.clone(),
                by_hand.memory_type
            ),
            (true, None, GOTCHA)
        );
        // The same text outside the section is a user rule without an id.
        let outside = "- Prefer named exports over default exports. <!-- engram:id=mem_01 -->\n";
        let rule = &parse(AgentFileKind::ClaudeMd, outside)[0];
        assert_eq!((rule.generated, rule.generated_id.clone()), (false, None));
        assert_eq!(rule.text, "Prefer named exports over default exports.");
    }

    #[test]
    fn crlf_parses_like_lf_and_splice_keeps_crlf() {
        let section = render_section(&hot_tier());
        for (kind, text) in [
            (AgentFileKind::ClaudeMd, CLAUDE_MD),
            (AgentFileKind::AgentsMd, AGENTS_MD),
            (AgentFileKind::CursorRules, CURSORRULES),
            (AgentFileKind::CursorRules, CURSORRULES_PLAIN),
        ] {
            let lf = splice(text, &section);
            let crlf = text.replace('\n', "\r\n");
            assert_eq!(parse(kind, &crlf), parse(kind, text));
            let spliced = splice(&crlf, &section);
            assert_eq!(spliced, lf.replace('\n', "\r\n"));
            assert_eq!(parse(kind, &spliced), parse(kind, &lf));
            assert_eq!(splice(&spliced, &section), spliced);
        }
    }

    #[test]
    fn a_missing_end_marker_runs_to_the_end_of_the_file() {
        let section = render_section(&hot_tier());
        let broken = format!("- Keep the changelog up to date.\n\n{BEGIN_MARKER}\n- Stale bullet text <!-- engram:id=x -->\n\n");
        let rules = parse(AgentFileKind::ClaudeMd, &broken);
        assert_eq!(rules[1].generated_id.as_deref(), Some("x"));
        let fixed = splice(&broken, &section);
        assert_eq!(
            fixed,
            format!(
                "- Keep the changelog up to date.\n\n{}\n\n",
                section.trim_end()
            )
        );
        // An end marker with no begin marker is an ordinary comment.
        assert_eq!(
            parse(
                AgentFileKind::ClaudeMd,
                "<!-- engram:end -->\n- A lone rule sits here.\n"
            )
            .len(),
            1
        );
    }

    #[test]
    fn odd_input_never_panics() {
        let mut big = String::new();
        while big.len() < 1 << 20 {
            big.push_str("## Héading ✨\n- bullet\twith tabs and émoji 🚀 that is long\n  continued\n```\ncode\n");
            big.push_str(
                "| a | b |\n|---|---|\n| c | d |\n<!-- open\n\n1.\n-\n> quote\n\t\t- deep\n",
            );
        }
        let long_line = "word ".repeat(40_000);
        let inputs = [
            "",
            "\n\n\r\n",
            "\u{feff}# Title\n",
            "---\n",
            "```",
            "<!--",
            "#######\n#\n# \n-",
            "|",
            "1)",
            BEGIN_MARKER,
            END_MARKER,
            &big,
            &long_line,
        ];
        for kind in AgentFileKind::ALL {
            for input in inputs {
                let rules = parse(kind, input);
                assert!(rules.iter().all(|r| !r.text.is_empty() && r.line >= 1));
                let spliced = splice(input, &render_section(&hot_tier()));
                assert_eq!(
                    parse(kind, &spliced)
                        .iter()
                        .filter(|r| r.generated_id.is_some())
                        .count(),
                    4
                );
            }
        }
        assert_eq!(
            parse(AgentFileKind::ClaudeMd, &long_line)[0].text.len(),
            long_line.len() - 1
        );
    }

    #[test]
    fn duplicates_are_dropped_ignoring_case() {
        let text =
            "- Use pnpm, not npm.\n- use pnpm,   not npm.\n\n## Other\n\n- Use pnpm, not npm.\n";
        let rules = parse(AgentFileKind::AgentsMd, text);
        assert_eq!(
            rows(&rules),
            vec![row(1, PREFERENCE, "", "Use pnpm, not npm.")]
        );
    }

    #[test]
    fn file_kinds_round_trip_their_names() {
        for kind in AgentFileKind::ALL {
            assert_eq!(AgentFileKind::from_file_name(kind.file_name()), Some(kind));
        }
        assert_eq!(
            AgentFileKind::from_file_name("repo/sub/claude.md"),
            Some(AgentFileKind::ClaudeMd)
        );
        assert_eq!(
            AgentFileKind::from_file_name("C:\\repo\\Agents.MD"),
            Some(AgentFileKind::AgentsMd)
        );
        assert_eq!(AgentFileKind::from_file_name(".CURSORRULES"), None);
        assert_eq!(AgentFileKind::from_file_name("README.md"), None);
        let names: Vec<&str> = AgentFileKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["claude_md", "agents_md", "cursorrules"]);
    }

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
