//! Putting the generated section into a file: replaced in place when the file has one,
//! appended after one blank line when it has none; everything outside the markers is kept
//! byte for byte, and a CRLF file gets a CRLF section.

use super::markers::find_section;

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

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::*;

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
}
