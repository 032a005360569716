//! Reading an agent file into rules, block by block; nothing here panics, whatever the input.
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
//! Inside the generated section, a marked bullet's type is its `### ` heading's, and a bullet
//! whose text a human edited is read with its id and the new text, so the edit can be
//! imported; headings there do not leak into the section path of the user's rules after it.
//! `.cursorrules` files follow [`super::cursorrules`]; user rules are typed by
//! [`super::classify`].

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use super::blocks::{
    atx_heading, bullet, fence_open, is_separator_row, is_thematic_break, read_fence, table_cells,
    unquote, Bullet, Fence,
};
use super::body::Body;
use super::classify::{classify, is_codeish, WORKFLOW};
use super::cursorrules::{self, looks_like_markdown, PSEUDO_LEVEL};
use super::lines::{front_matter_len, indent_width, split_lines, Line};
use super::markers::regions;
use super::render::type_of_heading;
use super::{AgentFileKind, Rule, MIN_WORDS};

const BOILERPLATE: [&str; 1] = ["this file provides guidance to"];

static ID_MARKER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"<!--\s*engram:id=(\S+?)\s*-->").expect("id pattern"));
static LINK_ONLY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^(?:!?\[[^\]]*\]\([^)\s]*(?:\s+"[^"]*")?\)|<https?://[^>\s]+>|https?://\S+)[.;,]?$"#,
    )
    .expect("link pattern")
});

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

    /// The `.cursorrules` section title line `i` opens, if it is one.
    fn cursor_section(&self, i: usize) -> Option<&'a str> {
        if !self.mode.cursor {
            return None;
        }
        cursorrules::section_title(self.lines, i)
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

#[cfg(test)]
mod tests {
    use super::super::classify::{DECISION, GOTCHA, PATTERN, PREFERENCE, WORKFLOW};
    use super::super::fixtures::*;
    use super::super::*;

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
}
