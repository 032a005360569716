//! What a tool call is, from its name and arguments: the observer's signals need to know
//! whether an agent read, edited, ran, searched or fetched, and on what.
//!
//! Tool names differ between agent frameworks (`Read`, `read_file`, `view`, `cat`), so the
//! kind is matched on a normalised name (lower case, `-`/`_`/spaces removed) against the
//! names in common use; anything else is [`ToolKind::Other`] and still counts in sequences.

/// The families of tools the signals tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ToolKind {
    /// Reads a file (`Read`, `read_file`, `view`, `cat`, `open`).
    Read,
    /// Changes part of a file (`Edit`, `MultiEdit`, `str_replace`, `apply_patch`).
    Edit,
    /// Writes a whole file (`Write`, `write_file`, `create_file`).
    Write,
    /// Runs a shell command (`Bash`, `shell`, `run_command`, `terminal`, `exec`).
    Bash,
    /// Searches file contents (`Grep`, `search`, `ripgrep`, `code_search`).
    Grep,
    /// Lists files by pattern (`Glob`, `find_files`, `list_files`, `ls`).
    Glob,
    /// Fetches a web page (`WebFetch`, `fetch`, `browse`).
    WebFetch,
    /// Searches the web (`WebSearch`, `web_search`).
    WebSearch,
    /// Any other tool.
    Other,
}

impl ToolKind {
    /// Classifies a tool by its name.
    pub fn of(tool_name: &str) -> ToolKind {
        let mut key = [0u8; 32];
        let mut len = 0;
        for b in tool_name.bytes() {
            if matches!(b, b'_' | b'-' | b' ' | b'.') {
                continue;
            }
            if len == key.len() {
                return ToolKind::Other;
            }
            key[len] = b.to_ascii_lowercase();
            len += 1;
        }
        // Namespaced MCP tools (`mcp__fs__read_file`) keep their last segment's meaning.
        let key = std::str::from_utf8(&key[..len]).unwrap_or("");
        match key {
            "read" | "readfile" | "view" | "viewfile" | "cat" | "open" | "openfile"
            | "readnotebook" | "notebookread" => ToolKind::Read,
            "edit"
            | "multiedit"
            | "editfile"
            | "strreplace"
            | "strreplaceeditor"
            | "strreplacebasededittool"
            | "applypatch"
            | "patch"
            | "replace"
            | "notebookedit"
            | "insert" => ToolKind::Edit,
            "write" | "writefile" | "createfile" | "create" => ToolKind::Write,
            "bash" | "shell" | "sh" | "runcommand" | "runterminalcmd" | "terminal" | "exec"
            | "execute" | "command" | "runshellcommand" => ToolKind::Bash,
            "grep" | "search" | "ripgrep" | "rg" | "codesearch" | "searchcode" | "grepsearch"
            | "searchfiles" => ToolKind::Grep,
            "glob" | "findfiles" | "listfiles" | "ls" | "listdir" | "listdirectory" | "find"
            | "filesearch" => ToolKind::Glob,
            "webfetch" | "fetch" | "fetchurl" | "browse" | "httpget" | "readurl" => {
                ToolKind::WebFetch
            }
            "websearch" | "searchweb" | "internetsearch" | "googlesearch" => ToolKind::WebSearch,
            _ => match tool_name.rsplit("__").next() {
                Some(last) if last.len() < tool_name.len() => ToolKind::of(last),
                _ => ToolKind::Other,
            },
        }
    }

    /// Whether the tool brings text from outside the project into the agent's context (the
    /// trust gate's trigger).
    pub fn is_external(self) -> bool {
        matches!(self, ToolKind::WebFetch | ToolKind::WebSearch)
    }

    /// Whether the tool changes a file.
    pub fn is_edit(self) -> bool {
        matches!(self, ToolKind::Edit | ToolKind::Write)
    }

    /// Whether the tool touches one file.
    pub fn is_file(self) -> bool {
        matches!(self, ToolKind::Read | ToolKind::Edit | ToolKind::Write)
    }
}

/// The argument names that hold a tool's file, in the order they are looked for.
pub const PATH_KEYS: &[&str] = &[
    "file_path",
    "filePath",
    "path",
    "file",
    "target_file",
    "notebook_path",
    "filename",
];
/// The argument names that hold a search pattern.
pub const PATTERN_KEYS: &[&str] = &["pattern", "regex", "query", "glob", "search", "q"];
/// The argument names that hold a shell command.
pub const COMMAND_KEYS: &[&str] = &["command", "cmd", "script"];
/// The argument names that hold a URL.
pub const URL_KEYS: &[&str] = &["url", "uri", "href"];
/// The argument names of an edit's replaced text and its replacement.
pub const EDIT_OLD_KEYS: &[&str] = &["old_string", "oldString", "old_str", "old_text"];
/// See [`EDIT_OLD_KEYS`].
pub const EDIT_NEW_KEYS: &[&str] = &["new_string", "newString", "new_str", "new_text"];
/// The argument names of a whole file's new content.
pub const CONTENT_KEYS: &[&str] = &["content", "contents", "file_text", "text"];

/// A command reduced to what identifies it across sessions: the program and its first
/// word-like arguments (`npm run test -- --watch src/a.ts` → `npm run test`), at most
/// three words, no paths, flags or quoted text.
pub fn command_head(command: &str) -> String {
    // `cd dir && cargo test` runs `cargo test`: keep the last segment that is not a `cd`.
    let segment = command
        .split(['&', ';', '|'])
        .map(str::trim)
        .rfind(|s| !s.is_empty() && !s.starts_with("cd ") && *s != "cd")
        .unwrap_or(command.trim());
    let mut words = Vec::with_capacity(3);
    for word in segment.split_whitespace() {
        if word.contains('=') && words.is_empty() {
            continue; // `RUST_LOG=debug cargo test`
        }
        let plain = word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.' | '@'));
        if word == "-m" && words.len() == 1 {
            continue; // `python -m pytest` runs pytest
        }
        if !plain || word.starts_with('-') || (word.contains('.') && !words.is_empty()) {
            break;
        }
        words.push(word);
        if words.len() == 3 {
            break;
        }
    }
    if words.is_empty() {
        segment.chars().take(40).collect()
    } else {
        words.join(" ")
    }
}

/// Whether a command runs tests.
pub fn is_test_command(command: &str) -> bool {
    let lower = command.to_ascii_lowercase();
    const MARKERS: &[&str] = &[
        "test",
        "jest",
        "vitest",
        "mocha",
        "pytest",
        "unittest",
        "nextest",
        "playwright",
        "cypress",
        "rspec",
        "phpunit",
        "ava ",
        "e2e",
    ];
    MARKERS.iter().any(|m| lower.contains(m))
}

/// Whether a path names a configuration file: changing one often has to go with a code
/// change (the config-touch signal).
pub fn is_config_file(path: &str) -> bool {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    const EXACT: &[&str] = &[
        "package.json",
        "tsconfig.json",
        "jsconfig.json",
        "cargo.toml",
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
        "go.mod",
        "makefile",
        "dockerfile",
        "docker-compose.yml",
        "docker-compose.yaml",
        ".babelrc",
        ".eslintrc",
        ".prettierrc",
        "build.rs",
        "webpack.config.js",
        "pnpm-workspace.yaml",
        "turbo.json",
        "nx.json",
    ];
    EXACT.contains(&lower.as_str())
        || lower.starts_with(".env")
        || lower.starts_with("tsconfig.")
        || lower.starts_with(".eslintrc")
        || lower.contains(".config.")
        || (path.contains(".github/") && (lower.ends_with(".yml") || lower.ends_with(".yaml")))
}

/// Directories whose files are generated or vendored: a search that mostly lands there is
/// searching the wrong place (the glob-ignore signal).
pub const IGNORED_DIRS: &[&str] = &[
    "node_modules",
    "dist",
    "build",
    "target",
    ".git",
    "vendor",
    "__pycache__",
    ".next",
    "coverage",
    "out",
    ".venv",
    "venv",
    ".turbo",
    ".cache",
];

/// Whether a listed path lies under one of the [`IGNORED_DIRS`].
pub fn in_ignored_dir(path: &str) -> bool {
    path.split(['/', '\\'])
        .any(|part| IGNORED_DIRS.contains(&part))
}

/// The host of a URL (`https://docs.rs/libsql/latest` → `docs.rs`), or the text itself
/// clipped when it is not a URL (a web search's query).
pub fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host.split(':').next().unwrap_or(host);
    host.trim_start_matches("www.")
        .chars()
        .take(100)
        .collect::<String>()
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_of_common_frameworks_are_classified() {
        assert_eq!(ToolKind::of("Read"), ToolKind::Read);
        assert_eq!(ToolKind::of("read_file"), ToolKind::Read);
        assert_eq!(ToolKind::of("str_replace_based_edit_tool"), ToolKind::Edit);
        assert_eq!(ToolKind::of("MultiEdit"), ToolKind::Edit);
        assert_eq!(ToolKind::of("run_terminal_cmd"), ToolKind::Bash);
        assert_eq!(ToolKind::of("mcp__filesystem__read_file"), ToolKind::Read);
        assert_eq!(ToolKind::of("WebFetch"), ToolKind::WebFetch);
        assert_eq!(ToolKind::of("web_search"), ToolKind::WebSearch);
        assert_eq!(ToolKind::of("TodoWrite"), ToolKind::Other);
        assert_eq!(ToolKind::of(&"x".repeat(100)), ToolKind::Other);
    }

    #[test]
    fn command_heads_drop_paths_flags_and_cd() {
        assert_eq!(command_head("npm run test -- --watch"), "npm run test");
        assert_eq!(command_head("cd app && cargo test -p core"), "cargo test");
        assert_eq!(command_head("RUST_LOG=debug cargo build"), "cargo build");
        assert_eq!(command_head("pytest tests/test_a.py -k foo"), "pytest");
        assert_eq!(command_head("python3 -m pytest -x"), "python3 pytest");
    }

    #[test]
    fn config_files_tests_ignored_dirs_and_hosts() {
        assert!(is_config_file("app/package.json"));
        assert!(is_config_file("vite.config.ts"));
        assert!(is_config_file(".env.local"));
        assert!(is_config_file(".github/workflows/ci.yml"));
        assert!(!is_config_file("src/config.ts"));
        assert!(is_test_command("npx vitest run"));
        assert!(!is_test_command("npm run build"));
        assert!(in_ignored_dir("node_modules/react/index.js"));
        assert!(!in_ignored_dir("src/builder.ts"));
        assert_eq!(url_host("https://www.docs.rs/libsql?x=1"), "docs.rs");
        assert_eq!(url_host("http://user@host:8080/a"), "host");
    }
}
