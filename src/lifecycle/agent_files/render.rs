//! Writing the hot tier as the generated section. [`render_section`] writes it between
//! [`BEGIN_MARKER`] and [`END_MARKER`], under a `## Engram memory` heading, one `### ` heading
//! per memory type in a fixed order ([`TYPE_HEADINGS`]'s, then unknown types alphabetically),
//! one bullet per memory ending in `<!-- engram:id=ID -->`. A memory's text is written as
//! [`normalise_text`](super::normalise_text) gives it (prose on the bullet line, code blocks
//! indented below it), so reading the section back yields that exact text.

use std::fmt::Write as _;

use super::body::{body_of, Part};
use super::{GeneratedItem, BEGIN_MARKER, END_MARKER, SECTION_TITLE, TYPE_HEADINGS};

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

/// The memory type a generated-section heading stands for (its heading or its type string).
pub(super) fn type_of_heading(title: &str) -> Option<&'static str> {
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
    use super::super::classify::{GOTCHA, PREFERENCE};
    use super::super::fixtures::*;
    use super::super::*;

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
}
