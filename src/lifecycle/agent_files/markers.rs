//! The generated section's bounds. Engram's markers are found line by line anywhere, even
//! inside a code block, both when reading and when splicing; a begin marker without an end
//! marker runs to the end of the file; an end marker with no begin marker is an ordinary
//! comment. [`check_markers`] refuses the files where that would misread or overwrite the
//! user's text, before anything reads or splices them. The same markers are used in
//! `.cursorrules`, where they are harmless text.

use super::lines::Line;
use super::END_MARKER;

// Markers are matched by prefix so a reworded begin marker is still recognised.
const BEGIN_PREFIX: &str = "<!-- engram:begin";
const END_PREFIX: &str = "<!-- engram:end";

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

pub(super) fn is_begin(trimmed: &str) -> bool {
    trimmed.starts_with(BEGIN_PREFIX)
}

pub(super) fn is_end(trimmed: &str) -> bool {
    trimmed.starts_with(END_PREFIX)
}

/// A run of lines either inside or outside the generated section (markers excluded).
pub(super) struct Region<'a> {
    pub(super) generated: bool,
    pub(super) lines: &'a [Line<'a>],
}

pub(super) fn regions<'a>(lines: &'a [Line<'a>]) -> Vec<Region<'a>> {
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
pub(super) fn find_section(text: &str) -> Option<(usize, usize)> {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::*;

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
}
