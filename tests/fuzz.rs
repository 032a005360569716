//! Fuzz targets (issue 35), run as property tests under plain `cargo test` on stable with a
//! seeded random driver of our own ([`for_each_random`]; bolero was tried and dropped: its
//! dependencies pin `indexmap` 2.11.2, which would have downgraded a crate the addon ships): the FTS query builder against a real FTS5 table, the chunker on
//! arbitrary bytes for every language, the privacy filter, and the observer's message parser
//! and sessions against a real database.
//!
//! Each target first replays its seed corpus, `tests/fixtures/fuzz/<target>/` (one input per
//! file), then runs `ENGRAM_FUZZ_ITERATIONS` random inputs (default [`DEFAULT_ITERATIONS`],
//! a few seconds in a debug build). Longer sessions: see `tests/fixtures/fuzz/README.md`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use engram::code::{analyze, AnalyzeOptions, ChunkOptions, FileKind, Language, TextFormat};
use engram::memory::privacy::{redact, REDACTED};
use engram::observer::protocol::json;
use engram::observer::{SessionOptions, SessionOutcome, SessionType};
use engram::text::fts_query::FtsQuery;
use engram::{Engram, OpenOptions};
use serde_json::{json, Map, Value};

/// Random inputs per target when `ENGRAM_FUZZ_ITERATIONS` is unset.
const DEFAULT_ITERATIONS: usize = 200;

fn iterations() -> usize {
    std::env::var("ENGRAM_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_ITERATIONS)
}

/// The random phase of `target`: [`iterations`] inputs of 0..=`max_len` bytes (half of them
/// at most 32) from a splitmix64 stream seeded by `ENGRAM_FUZZ_SEED`, else by the target's
/// name (so a CI run is reproducible). A failing input is printed with its seed and index.
fn for_each_random(target: &str, max_len: usize, mut check: impl FnMut(&[u8])) {
    let seed = std::env::var("ENGRAM_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| {
            target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x1b3)
            })
        });
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in 0..iterations() {
        let cap = if next() % 2 == 0 {
            max_len.min(32)
        } else {
            max_len
        };
        let len = (next() % (cap as u64 + 1)) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&bytes)));
        if let Err(panic) = outcome {
            eprintln!(
                "{target}: random input {i} (ENGRAM_FUZZ_SEED={seed}) failed: {:?}",
                String::from_utf8_lossy(&bytes)
            );
            std::panic::resume_unwind(panic);
        }
    }
}

/// The seed corpus of `target`, sorted by file name.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "empty corpus {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Reads fuzz bytes one at a time (zeros once exhausted).
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos = start + n;
        &self.data[start..end]
    }
}

/// Non-ASCII text the decoders mix in: accents, combining marks, wide and astral characters,
/// zero-width and case-folding oddities.
const UNICODE: &[&str] = &[
    "é",
    "ß",
    "日本語",
    "🦀",
    "e\u{301}",
    "İ",
    "\u{200b}",
    "ﬁ",
    "Ω",
    "\u{feff}",
    "ǅ",
    "١٢٣",
];

/// Text from fuzz bytes: a byte from 0xC0 up is one of `atoms`, from 0x80 a non-ASCII string,
/// anything lower itself (control characters included).
fn mixed_text(data: &[u8], atoms: &[&str]) -> String {
    let mut out = String::new();
    for &b in data {
        match b {
            0xC0.. => out.push_str(atoms[usize::from(b - 0xC0) % atoms.len()]),
            0x80.. => out.push_str(UNICODE[usize::from(b - 0x80) % UNICODE.len()]),
            _ => out.push(char::from(b)),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// 1. The FTS query builder against real FTS5 tables.

const FTS_ATOMS: &[&str] = &[
    "\"",
    "*",
    "^",
    ":",
    "(",
    ")",
    "-",
    "+",
    " NEAR ",
    " AND ",
    " OR ",
    " NOT ",
    "NEAR(",
    " ",
    "content:",
    "{content tags}",
    "foo",
    "the",
    "a*",
    "-bar",
    "\"phrase with",
    "'",
    ".",
    ",",
    "user.name",
    "getUserName",
    "*\"",
    "\"\"",
    "NEAR/2",
    "--",
    "**",
    "\\",
    "\n",
    "\t",
    "AND",
    "or",
    "0x1F",
    "über",
    "-*",
];

/// The memory and code FTS tables as engram declares them (`src/store/sql/`), with a few rows
/// so that queries run their whole plan.
async fn fts_db() -> libsql::Connection {
    let db = libsql::Builder::new_local(":memory:")
        .build()
        .await
        .unwrap();
    let conn = db.connect().unwrap();
    conn.execute_batch(
        "CREATE VIRTUAL TABLE memories_fts USING fts5(
           content, tags, related_files,
           tokenize = 'porter unicode61 remove_diacritics 2');
         CREATE VIRTUAL TABLE code_chunks_fts USING fts5(
           symbol, context, content,
           content = '', contentless_delete = 1,
           tokenize = 'porter unicode61 remove_diacritics 2');
         INSERT INTO memories_fts VALUES
           ('the user name is foo bar', 'auth', 'src/user.rs'),
           ('über café NEAR and or not', 'misc', 'a.md');
         INSERT INTO code_chunks_fts(rowid, symbol, context, content) VALUES
           (1, 'getUserName get user name', 'File: src/user.ts', 'function getUserName() {}'),
           (2, 'phrase', 'File: a.py', 'phrase with foo the');",
    )
    .await
    .unwrap();
    std::mem::forget(db); // the connection keeps the in-memory database alive
    conn
}

async fn check_fts(conn: &libsql::Connection, text: &str) {
    let Some(query) = FtsQuery::parse(text) else {
        return; // nothing searchable: no query runs
    };
    let mut exprs = vec![query.and_expr(), query.or_expr()];
    exprs.extend(query.term_exprs());
    let frequencies: Vec<u64> = (0..query.positive.len() as u64).collect();
    exprs.push(query.distinctive(&frequencies, 1).or_expr());
    for expr in exprs {
        assert!(!expr.is_empty(), "empty expression for {text:?}");
        for table in ["memories_fts", "code_chunks_fts"] {
            let sql = format!("SELECT count(*) FROM {table} WHERE {table} MATCH ?1");
            let run = async {
                let mut rows = conn.query(&sql, [expr.as_str()]).await?;
                while rows.next().await?.is_some() {}
                Ok::<_, libsql::Error>(())
            };
            if let Err(e) = run.await {
                panic!("FTS5 rejected {expr:?} (from {text:?}) on {table}: {e}");
            }
        }
    }
}

#[test]
fn fuzz_fts_query() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let conn = rt.block_on(fts_db());
    for (path, bytes) in corpus("fts_query") {
        let text = String::from_utf8_lossy(&bytes);
        eprintln!("corpus {}", path.display());
        rt.block_on(check_fts(&conn, &text));
    }
    let conn = std::panic::AssertUnwindSafe(conn);
    let rt = std::panic::AssertUnwindSafe(rt);
    for_each_random("fts_query", 512, |bytes: &[u8]| {
        // Half the inputs as plain (lossy) UTF-8, half through the syntax alphabet.
        let text = match bytes.split_first() {
            Some((b, rest)) if b & 1 == 1 => mixed_text(rest, FTS_ATOMS),
            _ => String::from_utf8_lossy(bytes).into_owned(),
        };
        rt.block_on(check_fts(&conn, &text));
    });
}

// ---------------------------------------------------------------------------------------------
// 2. The chunker on arbitrary bytes for every language.

const CODE_ATOMS: &[&str] = &[
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "\n",
    "    ",
    "fn f() {",
    "def f():\n    ",
    "class A:",
    "function g(a) {",
    "func h() {",
    "impl X {",
    "/*",
    "*/",
    "//",
    "#",
    "\"",
    "'",
    "`",
    "${",
    "<div>",
    "</div>",
    "=>",
    ";",
    "\r\n",
    "\t",
    "import x from 'y'\n",
    "use a::b;\n",
    "\\",
    "```\n",
    "# Heading\n",
    "\n\n",
    "package main\n",
    "r#\"",
    "'''",
    "\"\"\"",
];

fn chunk_kinds() -> Vec<FileKind> {
    let mut kinds: Vec<FileKind> = Language::ALL.iter().map(|&l| FileKind::Code(l)).collect();
    kinds.push(FileKind::Text(TextFormat::Markdown));
    kinds.push(FileKind::Text(TextFormat::Plain));
    kinds
}

fn check_chunks(parser: &mut tree_sitter::Parser, bytes: &[u8]) {
    let options = AnalyzeOptions {
        chunk: ChunkOptions {
            max_tokens: 160,
            small_tokens: 40,
            merge_tokens: 120,
        },
        ..AnalyzeOptions::default()
    };
    let text = String::from_utf8_lossy(bytes);
    for kind in chunk_kinds() {
        let a = analyze(
            parser,
            "fuzz/input",
            bytes,
            kind,
            &options,
            &AtomicBool::new(false),
        );
        let mut prev_end_byte = 0;
        let mut prev_start_line = 1;
        for (i, c) in a.chunks.iter().enumerate() {
            let at = || format!("{kind:?} chunk {i} {}-{}", c.start_line, c.end_line);
            assert!(
                1 <= c.start_line && c.start_line <= c.end_line,
                "{}: bad lines",
                at()
            );
            assert!(
                c.end_line <= a.line_count.max(1),
                "{}: past the last line {}",
                at(),
                a.line_count
            );
            assert!(c.start_line >= prev_start_line, "{}: out of order", at());
            assert!(
                prev_end_byte <= c.start_byte
                    && c.start_byte <= c.end_byte
                    && c.end_byte <= text.len(),
                "{}: bytes {}..{} after {prev_end_byte} in {}",
                at(),
                c.start_byte,
                c.end_byte,
                text.len()
            );
            assert_eq!(
                text.get(c.start_byte..c.end_byte),
                Some(c.content.as_str()),
                "{}: content is not the file's text",
                at()
            );
            prev_end_byte = c.end_byte;
            prev_start_line = c.start_line;
        }
    }
}

/// Inputs too large for the corpus: deep nesting and a very long line.
fn generated_chunk_inputs() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, open) in [("parens", "("), ("braces", "{"), ("brackets", "[")] {
        out.push((name, open.repeat(2000).into_bytes()));
    }
    out.push((
        "nested calls",
        format!("f{}x{}", "(g".repeat(2000), ")".repeat(2000)).into_bytes(),
    ));
    out.push(("long line", "let a = 1; ".repeat(3_000).into_bytes()));
    out
}

#[test]
fn fuzz_chunker() {
    let mut parser = tree_sitter::Parser::new();
    for (path, bytes) in corpus("chunker") {
        eprintln!("corpus {}", path.display());
        check_chunks(&mut parser, &bytes);
    }
    for (name, bytes) in generated_chunk_inputs() {
        eprintln!("generated {name}");
        check_chunks(&mut parser, &bytes);
    }
    let parser = std::sync::Mutex::new(parser);
    for_each_random("chunker", 2048, |bytes: &[u8]| {
        let mut parser = parser.lock().unwrap_or_else(|e| e.into_inner());
        // Half the inputs as raw bytes (any encoding), half through the code alphabet.
        match bytes.split_first() {
            Some((b, rest)) if b & 1 == 1 => {
                check_chunks(&mut parser, mixed_text(rest, CODE_ATOMS).as_bytes())
            }
            _ => check_chunks(&mut parser, bytes),
        }
    });
}

// ---------------------------------------------------------------------------------------------
// 3. The privacy filter.

const SECRET_ATOMS: &[&str] = &[
    "sk-",
    "sk-ant-api03-",
    "sk-proj-",
    "ghp_",
    "github_pat_",
    "glpat-",
    "AKIA",
    "xoxb-",
    "AIza",
    "sk_live_",
    "eyJhbGciOiJIUzI1NiJ9",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "-----BEGIN ",
    " PRIVATE KEY-----",
    "password=",
    "api_key: ",
    "secret = ",
    "token\": \"",
    "Authorization: Bearer ",
    "postgres://user:",
    "@db.example.com/x",
    "https://hooks.slack.com/services/",
    "aws_secret_access_key = ",
    REDACTED,
    "\"",
    "'",
    "=",
    ":",
    ".",
    "\n",
    " ",
    "A1b2C3d4E5f6G7h8I9j0K1l2M3n4",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCY",
    "0123456789abcdef0123456789abcdef",
    "AbCdEfGhIjKlMnOp",
];

fn check_redact(text: &str) {
    let once = redact(text);
    let twice = redact(&once.text);
    assert_eq!(twice.text, once.text, "not idempotent on {text:?}");
    if once.count == 0 {
        assert_eq!(once.text, text, "changed without a replacement");
    }
    // Each replacement swaps a secret of at least one byte (two when quoted) for the marker
    // (quotes kept): at most REDACTED.len() bytes more.
    assert!(
        once.text.len() <= text.len() + once.count as usize * REDACTED.len(),
        "grew from {} to {} bytes with {} replacements",
        text.len(),
        once.text.len(),
        once.count
    );
}

#[test]
fn fuzz_privacy() {
    for (path, bytes) in corpus("privacy") {
        eprintln!("corpus {}", path.display());
        check_redact(&String::from_utf8_lossy(&bytes));
    }
    for_each_random("privacy", 1024, |bytes: &[u8]| {
        let text = match bytes.split_first() {
            Some((b, rest)) if b & 1 == 1 => mixed_text(rest, SECRET_ATOMS),
            _ => String::from_utf8_lossy(bytes).into_owned(),
        };
        check_redact(&text);
    });
}

// ---------------------------------------------------------------------------------------------
// 4. The observer's message parser, and sessions against a real database.

const MESSAGE_TYPES: &[&str] = &[
    "memory:tool-call",
    "memory:tool-result",
    "memory:reasoning",
    "memory:step-complete",
    "memory:session-complete",
    "memory:record",
    "memory:search",
    "memory:unknown",
];

const MESSAGE_KEYS: &[&str] = &[
    "type",
    "toolName",
    "stepIndex",
    "toolCallId",
    "args",
    "result",
    "isError",
    "text",
    "stepNumber",
    "inputTokens",
    "outcome",
    "stepsExecuted",
    "entry",
    "content",
    "relatedFiles",
    "query",
    "timestamp",
    "file_path",
    "path",
    "command",
    "pattern",
    "url",
    "old_string",
    "new_string",
];

const STRINGS: &[&str] = &[
    "Read",
    "Edit",
    "Bash",
    "Grep",
    "success",
    "failure",
    "partial",
    "abandoned",
    "gotcha",
    "decision",
    "pattern",
    "bogus",
    "src/a.rs",
    "../../etc/passwd",
    "",
    "cargo test",
    "error: failed",
    "[REDACTED]",
    "password=hunter2hunter2",
];

fn json_string(r: &mut Reader) -> Value {
    let b = r.byte();
    if b & 1 == 0 {
        Value::from(STRINGS[usize::from(b >> 1) % STRINGS.len()])
    } else {
        let n = usize::from(r.byte() % 48);
        Value::from(mixed_text(r.take(n), STRINGS))
    }
}

fn json_number(r: &mut Reader) -> Value {
    match r.byte() % 8 {
        0 => json!(-1),
        1 => json!(u64::from(u32::MAX) + 1),
        2 => json!(u64::MAX),
        3 => json!(i64::MIN),
        4 => json!(1.5),
        5 => json!(f64::MAX),
        _ => json!(r.byte()),
    }
}

fn json_value(r: &mut Reader, depth: u32) -> Value {
    if r.done() {
        return Value::Null;
    }
    match r.byte() % if depth >= 4 { 4 } else { 7 } {
        0 => Value::Null,
        1 => Value::Bool(r.byte() & 1 == 1),
        2 => json_number(r),
        3 => json_string(r),
        4 => Value::Array(
            (0..r.byte() % 4)
                .map(|_| json_value(r, depth + 1))
                .collect(),
        ),
        _ => json_object(r, depth),
    }
}

fn json_object(r: &mut Reader, depth: u32) -> Value {
    let mut map = Map::new();
    for _ in 0..r.byte() % 6 {
        let key = MESSAGE_KEYS[usize::from(r.byte()) % MESSAGE_KEYS.len()];
        map.insert(key.to_owned(), json_value(r, depth + 1));
    }
    Value::Object(map)
}

/// A message-shaped value: usually a known type, then a few fields of any JSON.
fn json_message(r: &mut Reader) -> Value {
    let mut v = json_object(r, 1);
    let b = r.byte();
    if b < 224 {
        let kind = MESSAGE_TYPES[usize::from(b) % MESSAGE_TYPES.len()];
        v["type"] = Value::from(kind);
    }
    v
}

/// A parsed message or a coded invalid-argument error, nothing else.
fn check_message(v: &Value) -> Option<engram::observer::Message> {
    match json::message(v) {
        Ok(m) => Some(m),
        Err(e) => {
            assert_eq!(e.code(), "ENGRAM_INVALID_ARG", "{v}: {e}");
            None
        }
    }
}

static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// Feeds the valid messages of `values` to a new session and finalizes it.
async fn check_session(e: &Engram, session_type: u8, values: &[Value]) {
    let types = [
        "build",
        "insights",
        "roadmap",
        "terminal",
        "changelog",
        "spec_creation",
        "pr_review",
    ];
    let id = format!("fuzz-{}", SESSIONS.fetch_add(1, Ordering::Relaxed));
    let mut options = SessionOptions::new(id);
    options.session_type =
        SessionType::parse(types[usize::from(session_type) % types.len()]).unwrap();
    options.planned_steps = Some(u32::from(session_type));
    let session = e.observe(&options).unwrap();
    let mut outcome = None;
    for v in values {
        if let Some(m) = check_message(v) {
            if let engram::observer::Message::SessionComplete { outcome: o, .. } = &m {
                outcome = Some(*o);
            }
            session.observe(m).unwrap();
        }
    }
    let outcome = outcome.or(match session_type % 5 {
        0 => Some(SessionOutcome::Success),
        1 => Some(SessionOutcome::Failure),
        2 => Some(SessionOutcome::Partial),
        3 => Some(SessionOutcome::Abandoned),
        _ => None,
    });
    e.finalize(&session, outcome).await.unwrap();
}

#[test]
fn fuzz_observer_messages() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let e = rt
        .block_on(Engram::open(OpenOptions::new(dir.path().join("memory.db"))))
        .unwrap();
    for (path, bytes) in corpus("observer") {
        eprintln!("corpus {}", path.display());
        let v: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let values = match v {
            Value::Array(values) => values,
            one => vec![one],
        };
        rt.block_on(check_session(&e, 0, &values));
    }
    let e = std::panic::AssertUnwindSafe(e);
    let rt = std::panic::AssertUnwindSafe(rt);
    for_each_random("observer", 1024, |bytes: &[u8]| {
        // Raw bytes that happen to be JSON, then a sequence of message-shaped values.
        if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
            check_message(&v);
        }
        let mut r = Reader::new(bytes);
        let session_type = r.byte();
        let mut values = Vec::new();
        while !r.done() && values.len() < 32 {
            values.push(json_message(&mut r));
        }
        rt.block_on(check_session(&e, session_type, &values));
    });
}
