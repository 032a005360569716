//! The end-to-end observation pipeline (seed 003 section 9, "E2E validation memory pipeline"):
//! a browser or app-driving tool's result (a screenshot's description, a page structure, a
//! click's outcome) is classified by the app's language model into what a later QA session
//! should know, and stored as an `e2e_observation` for review.
//!
//! Only observation tools are considered ([`OBSERVATION_TOOLS`], or the app's list), matched by
//! their bare name so that MCP's `mcp__<server>__<tool>` spelling counts. The model gets the
//! seed's prompt ([`prompt`]: the tool, the first 400 characters of its result, and the
//! letters A-F) and answers with a letter and one sentence; [`parse_reply`] reads it, and F or
//! anything unreadable stores nothing. What is stored is the sentence (through the privacy
//! filter like every memory), confidence 0.75, source `mcp_auto`, `needsReview`, tagged with
//! its category, with the session and tool in its metadata.

use serde_json::json;

use crate::error::Result;
use crate::memory::{Memory, MemorySource, MemoryType, RememberInput};
use crate::Engram;

/// The tools whose results are observations when the app names none (the seed's list).
pub const OBSERVATION_TOOLS: &[&str] = &[
    "take_screenshot",
    "click_by_text",
    "fill_input",
    "get_page_structure",
    "eval",
];

/// Characters of a tool's result the model is shown.
pub const RESULT_CHARS: usize = 400;

/// Confidence of a stored observation (the seed's): below a new project's trust threshold
/// until a person reviews it.
pub const OBSERVATION_CONFIDENCE: f64 = 0.75;

/// What an end-to-end observation is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum E2eCategory {
    /// A: something that must hold before a step works.
    Precondition,
    /// B: how long something takes, or must be waited for.
    Timing,
    /// C: how the interface behaves.
    UiBehavior,
    /// D: an order the steps must run in.
    TestSequence,
    /// E: a pitfall of the driving tool itself.
    McpGotcha,
}

impl E2eCategory {
    const ALL: [(char, E2eCategory); 5] = [
        ('A', E2eCategory::Precondition),
        ('B', E2eCategory::Timing),
        ('C', E2eCategory::UiBehavior),
        ('D', E2eCategory::TestSequence),
        ('E', E2eCategory::McpGotcha),
    ];

    /// `precondition`, `timing`, `ui_behavior`, `test_sequence` or `mcp_gotcha`.
    pub fn as_str(self) -> &'static str {
        match self {
            E2eCategory::Precondition => "precondition",
            E2eCategory::Timing => "timing",
            E2eCategory::UiBehavior => "ui_behavior",
            E2eCategory::TestSequence => "test_sequence",
            E2eCategory::McpGotcha => "mcp_gotcha",
        }
    }
}

/// Whether `tool` is an observation tool: one of `tools` (the default list when empty),
/// compared without case and by the name after an MCP `mcp__<server>__` prefix.
pub fn is_observation_tool(tool: &str, tools: &[String]) -> bool {
    let bare = |name: &str| {
        name.rsplit("__")
            .next()
            .unwrap_or(name)
            .trim()
            .to_ascii_lowercase()
    };
    let wanted = bare(tool);
    if tools.is_empty() {
        OBSERVATION_TOOLS.iter().any(|t| *t == wanted)
    } else {
        tools.iter().any(|t| bare(t) == wanted)
    }
}

/// The seed's classification prompt for a tool's result (its first [`RESULT_CHARS`]
/// characters).
pub fn prompt(tool: &str, result: &str) -> String {
    let shown: String = result.chars().take(RESULT_CHARS).collect();
    format!(
        "Classify this MCP observation. Is this: A=precondition, B=timing, C=ui_behavior, \
         D=test_sequence, E=mcp_gotcha, F=not_worth_remembering\n\
         Tool={tool}, Result={shown}\n\
         Reply: letter + one sentence"
    )
}

/// The category and sentence of a model's reply (`B: the pay button is enabled after ~2 s`;
/// a category's name in place of its letter is read too); `None` for F or an unreadable
/// reply.
pub fn parse_reply(reply: &str) -> Option<(E2eCategory, String)> {
    let reply = reply.trim_start_matches(|c: char| c.is_whitespace() || c == '*');
    let (category, rest) = E2eCategory::ALL
        .iter()
        .find_map(|&(letter, category)| {
            let rest = reply.strip_prefix(letter)?;
            // A letter alone, not the start of a word ("Eval ...").
            (!rest.starts_with(|c: char| c.is_alphanumeric())).then_some((category, rest))
        })
        .or_else(|| {
            E2eCategory::ALL.iter().find_map(|&(_, category)| {
                let name = category.as_str();
                let head = reply.get(..name.len())?;
                head.eq_ignore_ascii_case(name)
                    .then(|| (category, &reply[name.len()..]))
            })
        })?;
    let sentence = rest
        .trim_start_matches(|c: char| {
            c.is_whitespace() || matches!(c, ':' | '.' | ')' | '-' | '=' | '*')
        })
        .trim();
    (!sentence.is_empty()).then(|| (category, sentence.to_owned()))
}

/// Stores the observation a model's `reply` about `tool`'s result holds, for review; `None`
/// when the reply says it is not worth remembering or cannot be read.
pub(crate) async fn store(
    handle: &Engram,
    session_id: &str,
    tool: &str,
    reply: &str,
) -> Result<Option<(E2eCategory, Memory)>> {
    let Some((category, sentence)) = parse_reply(reply) else {
        return Ok(None);
    };
    let mut input = RememberInput::new(MemoryType::E2eObservation, sentence);
    input.confidence = Some(OBSERVATION_CONFIDENCE);
    input.source = Some(MemorySource::McpAuto);
    input.needs_review = Some(true);
    input.tags = vec![category.as_str().to_owned()];
    input.session_id = Some(session_id.to_owned());
    input.metadata = Some(json!({ "e2eCategory": category.as_str(), "tool": tool }));
    let stored = handle.remember(input).await?;
    Ok(Some((category, stored.memory)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_by_letter_or_name() {
        let read = |r: &str| parse_reply(r).map(|(c, s)| (c.as_str(), s));
        assert_eq!(
            read("B: the pay button is enabled ~2 s after the card frame loads"),
            Some((
                "timing",
                "the pay button is enabled ~2 s after the card frame loads".into()
            ))
        );
        assert_eq!(
            read("  **A)** log in first"),
            Some(("precondition", "log in first".into()))
        );
        assert_eq!(
            read("ui_behavior - the modal closes on Escape"),
            Some(("ui_behavior", "the modal closes on Escape".into()))
        );
        assert_eq!(read("F: nothing new"), None);
        assert_eq!(read("Eval failed because the page reloaded"), None);
        assert_eq!(read("B:"), None, "a letter without a sentence");
        assert_eq!(read(""), None);
        assert_eq!(read("é"), None);
    }

    #[test]
    fn observation_tools_match_by_bare_name() {
        assert!(is_observation_tool("take_screenshot", &[]));
        assert!(is_observation_tool(
            "mcp__chrome-devtools__Take_Screenshot",
            &[]
        ));
        assert!(!is_observation_tool("Read", &[]));
        let own = vec!["browser_snapshot".to_owned()];
        assert!(is_observation_tool(
            "mcp__playwright__browser_snapshot",
            &own
        ));
        assert!(!is_observation_tool("take_screenshot", &own));
    }

    #[test]
    fn the_prompt_shows_the_first_400_characters() {
        let p = prompt("eval", &"é".repeat(1000));
        assert!(p.contains(&format!("Result={}\n", "é".repeat(400))));
        assert!(p.contains("F=not_worth_remembering"));
    }
}
