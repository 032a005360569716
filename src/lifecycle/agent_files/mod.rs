//! The agent-file bridge's formats: the rule files coding agents load (`CLAUDE.md`,
//! `AGENTS.md`, `.cursorrules`) read into individual rules that become memories, and engram's
//! hot tier written back into them as a generated section that the next read recognises. Pure
//! text in, rules or text out: `agent_io`, `agent_import` and `agent_export` wire it to files
//! and the store.
//!
//! One idea per file. Reading: [`parse()`] walks a file's blocks into rules (`parse`), over the
//! input's lines (`lines`), the Markdown block syntax both `.md` files use (`blocks`), a rule's
//! text as it is read (`body`) and what `.cursorrules` adds to Markdown (`cursorrules`); each
//! user rule gets a memory type (`classify`). Writing: the generated section's markers and
//! their check (`markers`), rendering the section ([`render_section`]) and putting it into a
//! file ([`splice()`]).

mod blocks;
mod body;
mod classify;
mod cursorrules;
#[cfg(test)]
mod fixtures;
mod lines;
mod markers;
mod parse;
mod render;
mod splice;

pub use body::normalise_text;
pub use markers::check_markers;
pub use parse::parse;
pub use render::render_section;
pub use splice::splice;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
