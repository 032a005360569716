//! The memory type of a user rule, from its text (prose only, never code) and its headings,
//! the first match winning:
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
//! A code block standing alone is always a `workflow_recipe`, and a marked bullet in the
//! generated section keeps its heading's type: both are decided by the parser (`parse.rs`).

use super::body::Body;

pub(super) const GOTCHA: &str = "gotcha";
pub(super) const DECISION: &str = "decision";
pub(super) const WORKFLOW: &str = "workflow_recipe";
pub(super) const PATTERN: &str = "pattern";
pub(super) const REQUIREMENT: &str = "requirement";
pub(super) const PREFERENCE: &str = "preference";

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
pub(super) fn classify(section: &[String], body: &Body) -> &'static str {
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
pub(super) fn is_codeish(section: &[String]) -> bool {
    section
        .iter()
        .any(|title| has_any(&words(title), WORKFLOW_HEADINGS))
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

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
}
