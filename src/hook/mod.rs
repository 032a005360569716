//! Claude Code's hooks feeding an observed session (`engram hook <event>` and the native
//! `engram-hook` launcher run this same code), so that engram learns from what the agent does
//! without being asked.
//!
//! Claude Code runs each hook as its own process with one JSON payload on stdin and reads what
//! it prints on stdout. An event that needs the database opens it, restores the session from
//! its last checkpoint, observes, checkpoints, and leaves without closing (every write is
//! committed to the WAL; a close would checkpoint and fsync it for nothing). Tool calls that
//! need no answer (anything but a file tool) only append to the session's state file
//! ([`state`]), redacted, and the next hook that opens the database observes them: most tool
//! calls cost no database work. A lock file per session ([`lock`]) serialises the hooks that
//! parallel tool calls run at once. A registry (`sessions.json`) notes when each session was
//! last seen, so that a session start finalizes the sessions of an agent that was killed.
//!
//! A hook must never get in the agent's way: on any error it prints nothing and appends one
//! line (event, code, message: never payload contents, which may hold secrets) to
//! `<root>/.engram/hooks/hook.log`.

mod lock;
pub mod native;
mod payload;
mod state;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::embed::{EmbeddingProvider, InputPrefixes, OllamaOptions, OpenAiOptions};
use crate::error::{Error, Result};
use crate::observer::{Session, SessionOptions};
use crate::Engram;
use payload::{str_field, tool_input, tool_use_id};
use state::HookState;

/// The events: command-line name and Claude Code's name.
pub const EVENTS: [(&str, &str); 7] = [
    ("session-start", "SessionStart"),
    ("user-prompt-submit", "UserPromptSubmit"),
    ("pre-tool-use", "PreToolUse"),
    ("post-tool-use", "PostToolUse"),
    ("post-tool-use-failure", "PostToolUseFailure"),
    ("stop", "Stop"),
    ("session-end", "SessionEnd"),
];
/// Tools whose result gets the file's unseen gotchas and dead ends appended.
const FILE_TOOLS: [&str; 4] = ["Read", "Edit", "Write", "MultiEdit"];
/// Overall budget of one hook run (env `ENGRAM_HOOK_TIMEOUT_MS`): then it gives up silently.
pub const TIMEOUT_MS: u64 = 10_000;
/// How long a hook waits for another hook of the same session to finish.
const LOCK_WAIT: Duration = Duration::from_secs(3);
/// How long a registry update waits for its lock (best effort: a missed update only delays).
const REGISTRY_WAIT: Duration = Duration::from_secs(1);
/// Most observer messages a state file holds before a hook flushes them into the session's
/// checkpoint (a tool result is two).
const MAX_PENDING: usize = 400;
/// A session not seen for this long is finalized by the next session's start.
const ORPHAN_MS: i64 = 6 * 3_600_000;
/// Most orphans one session start finalizes (each costs a finalize).
const MAX_ORPHANS: usize = 3;
/// Most stdin read (a Write's payload carries the whole file).
pub const MAX_STDIN_BYTES: usize = 64 << 20;
/// The lock of the session registry (no session key starts with a dot).
const REGISTRY_LOCK: &str = ".registry";
/// The session registry's file.
const REGISTRY: &str = "sessions.json";
/// The log is rotated (to hook.log.1) past this size.
const MAX_LOG_BYTES: u64 = 1 << 20;
/// Tokens of the context a session start prints.
const SESSION_START_BUDGET: u32 = 2000;

/// The command line of one event run: `<event> [--root DIR] [--db FILE] [--project ID]`.
#[derive(Debug, Clone, Default)]
pub struct HookArgs {
    /// The event (either naming; default: the payload's `hook_event_name`).
    pub event: Option<String>,
    /// The project root (default: the payload's `cwd`, else the working directory).
    pub root: Option<PathBuf>,
    /// The database (default `<root>/.engram/memory.db`).
    pub db: Option<PathBuf>,
    /// The project id in the database (default: the engine's default).
    pub project: Option<String>,
}

impl HookArgs {
    /// Reads the arguments leniently: a hook's command line must not fail it.
    pub fn parse(argv: &[String]) -> HookArgs {
        let mut args = HookArgs::default();
        let mut it = argv.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
                _ => (arg.as_str(), None),
            };
            let mut value = || inline.clone().or_else(|| it.next().cloned());
            let value = match flag {
                "--root" | "--db" | "--project" => value().filter(|v| !v.trim().is_empty()),
                _ if !flag.starts_with("--") && args.event.is_none() => {
                    args.event = Some(arg.clone());
                    continue;
                }
                _ => continue,
            };
            match flag {
                "--root" => args.root = value.map(PathBuf::from),
                "--db" => args.db = value.map(PathBuf::from),
                _ => args.project = value,
            }
        }
        args
    }
}

/// Claude Code's name of an event given either way (`session-start`, `SessionStart`,
/// `sessionstart`).
pub fn event_name(name: &str) -> Option<&'static str> {
    let key: String = name
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    EVENTS
        .iter()
        .map(|(_, e)| *e)
        .find(|e| e.to_lowercase() == key)
}

/// One hook run: where it works, for what session.
struct Ctx {
    event: String,
    root: PathBuf,
    hooks_dir: PathBuf,
    db_path: PathBuf,
    project: Option<String>,
    session_id: String,
    payload: Value,
}

impl Ctx {
    fn transcript(&self) -> Option<&str> {
        str_field(&self.payload, "transcript_path")
    }

    fn lock_file(&self, name: &str) -> PathBuf {
        let key = if name == REGISTRY_LOCK {
            name.to_owned()
        } else {
            state::session_key(name)
        };
        self.hooks_dir.join(format!("{key}.lock"))
    }
}

/// What a run reports: the line to print (if any) and the database handle to leave open.
pub struct HookOutcome {
    /// The JSON line for stdout (`None`: print nothing).
    pub stdout: Option<String>,
    /// The open handle, if the event opened one: exit without closing it (see the module doc).
    pub handle: Option<Engram>,
}

/// Handles one hook event; never fails: an error is logged and nothing is printed.
pub async fn run(args: HookArgs, stdin: &[u8]) -> HookOutcome {
    let mut log = LogTarget {
        event: args.event.as_deref().map_or("?".into(), |e| {
            event_name(e).map_or_else(|| e.to_owned(), str::to_owned)
        }),
        root: None,
    };
    let mut handle = None;
    let stdout = match handle_event(&args, stdin, &mut log, &mut handle).await {
        Ok(out) => out.map(|v| v.to_string()),
        Err(e) => {
            log.line(e.code(), &described(&e));
            None
        }
    };
    HookOutcome { stdout, handle }
}

/// Where failures are logged, refined as the payload tells more.
pub struct LogTarget {
    event: String,
    root: Option<PathBuf>,
}

impl LogTarget {
    /// A target for failures before any payload was read.
    pub fn new(event: &str, root: Option<PathBuf>) -> LogTarget {
        LogTarget {
            event: event.to_owned(),
            root,
        }
    }

    /// Appends `time event code: message` to the hook log (stderr when there is no root). The
    /// message's first line only, clipped: enough to act on, too short to carry a payload.
    pub fn line(&self, code: &str, message: &str) {
        let first = message.lines().next().unwrap_or("");
        let clipped = crate::text::clip_bytes(first, 300);
        let line = format!("{} {} {code}: {clipped}\n", iso_now(), self.event);
        let written = self
            .root
            .as_ref()
            .filter(|r| r.is_dir())
            .is_some_and(|root| {
                let dir = root.join(".engram").join("hooks");
                let file = dir.join("hook.log");
                if std::fs::metadata(&file).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
                    let _ = std::fs::rename(&file, dir.join("hook.log.1"));
                }
                std::fs::create_dir_all(&dir).is_ok()
                    && std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&file)
                        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()))
                        .is_ok()
            });
        if !written {
            eprint!("engram hook: {line}");
        }
    }
}

/// An error as the log shows it: the message without its kind's prefix (the code says it), and
/// the cause of an I/O or database failure.
fn described(e: &Error) -> String {
    match e {
        Error::InvalidArg(m) | Error::Conflict(m) | Error::Internal(m) => m.clone(),
        other => match std::error::Error::source(other) {
            Some(cause) => format!("{other}: {cause}"),
            None => other.to_string(),
        },
    }
}

/// Reads the payload, finds the root and session, and runs the event's handler.
async fn handle_event(
    args: &HookArgs,
    stdin: &[u8],
    log: &mut LogTarget,
    handle: &mut Option<Engram>,
) -> Result<Option<Value>> {
    // The working directory is read only for a relative path: it may have been deleted.
    let absolute = |p: &Path| -> Result<PathBuf> {
        if p.is_absolute() {
            return Ok(normalize(p));
        }
        let cwd =
            std::env::current_dir().map_err(|e| Error::io("reading the working directory", e))?;
        Ok(normalize(&cwd.join(p)))
    };
    let payload: Option<Value> = payload::parse_json(stdin).filter(Value::is_object);
    let cwd = payload.as_ref().and_then(|p| str_field(p, "cwd"));
    let root = match (&args.root, cwd) {
        (Some(root), _) => absolute(root)?,
        (None, Some(cwd)) => absolute(Path::new(cwd))?,
        (None, None) => absolute(Path::new("."))?,
    };
    log.root = Some(root.clone());
    let payload = payload.ok_or_else(|| Error::invalid("stdin is not one JSON object"))?;
    let name = args
        .event
        .as_deref()
        .or_else(|| str_field(&payload, "hook_event_name"));
    let event = name.and_then(event_name);
    log.event = event.or(name).unwrap_or("?").to_owned();
    let Some(event) = event else {
        let events = EVENTS.map(|(cli, _)| cli).join(", ");
        return Err(Error::invalid(match name {
            None => format!("no event: name one of {events}"),
            Some(name) => format!("unknown event \"{name}\" (events: {events})"),
        }));
    };
    if !root.is_dir() {
        return Err(Error::invalid(format!(
            "project root {} is not a directory",
            root.display()
        )));
    }
    let session_id = str_field(&payload, "session_id").map_or("", str::trim);
    if session_id.is_empty() {
        return Err(Error::invalid("the payload has no session_id"));
    }
    let hooks_dir = root.join(".engram").join("hooks");
    let ctx = Ctx {
        event: event.to_owned(),
        db_path: args
            .db
            .as_deref()
            .map_or_else(|| Ok(root.join(".engram").join("memory.db")), absolute)?,
        hooks_dir,
        root,
        project: args.project.clone(),
        session_id: session_id.to_owned(),
        payload,
    };
    let out = match event {
        "SessionStart" => session_start(&ctx, handle).await?,
        "UserPromptSubmit" => with_session(&ctx, handle, |_| async { Ok(None) }).await?,
        "PreToolUse" => pre_tool_use(&ctx).await?,
        "PostToolUse" => post_tool_use(&ctx, handle).await?,
        "PostToolUseFailure" => {
            let p = &ctx.payload;
            let text = match p.get("error") {
                Some(Value::String(s)) => s.clone(),
                other => payload::result_text(other),
            };
            // A user's interruption is not a failure of the code: kept as an answer.
            let is_error = p.get("is_interrupt") != Some(&Value::Bool(true));
            journal_tool_use(&ctx, handle, text, is_error).await?
        }
        // The end of an agent turn, not of the session.
        "Stop" => {
            let ctx = &ctx;
            with_session(ctx, handle, |s| async move {
                end_turn(ctx, &s.session, &mut s.state(), &ctx.payload)?;
                Ok(None)
            })
            .await?
        }
        _ => {
            session_end(&ctx, handle).await?;
            None
        }
    };
    if event != "SessionEnd" {
        update_registry(&ctx, log, |r| {
            r.insert(ctx.session_id.clone(), json!(now_ms()));
        })
        .await;
    }
    Ok(out)
}

/// `{ hookSpecificOutput }`: text Claude Code adds to the agent's context.
fn context(event: &str, text: String) -> Value {
    json!({ "hookSpecificOutput": { "hookEventName": event, "additionalContext": text } })
}

async fn session_start(ctx: &Ctx, handle: &mut Option<Engram>) -> Result<Option<Value>> {
    with_session(ctx, handle, |s| async move {
        // Orphans first, so that what they promote is in this session's context.
        finalize_orphans(ctx, &s.db).await;
        let request = crate::agent::session_context::SessionContextRequest {
            session_id: Some(ctx.session_id.clone()),
            budget_tokens: Some(SESSION_START_BUDGET),
            ..Default::default()
        };
        let found = s.db.session_context(request).await?;
        Ok((!found.text.is_empty()).then(|| context("SessionStart", found.text)))
    })
    .await
}

/// The call is observed together with its result (post-tool-use): this only notes when the
/// call started and reserves its step, in the order Claude Code issued the calls.
async fn pre_tool_use(ctx: &Ctx) -> Result<Option<Value>> {
    let id = tool_use_id(&ctx.payload).map(str::to_owned);
    with_state(ctx, |state| {
        if let Some(id) = id {
            if !state.calls.contains_key(&id) {
                state.step += 1;
                let note = state::CallNote {
                    step: state.step,
                    at: now_ms(),
                    done: false,
                };
                state.calls.insert(id, note);
            }
        }
        false
    })
    .await?;
    Ok(None)
}

/// A file tool's result may get the file's pitfalls appended: that needs the database. Any
/// other tool's call and result go to the state file.
async fn post_tool_use(ctx: &Ctx, handle: &mut Option<Engram>) -> Result<Option<Value>> {
    let p = &ctx.payload;
    let response = p.get("tool_response");
    let text = payload::result_text(response);
    let is_error = payload::response_is_error(response);
    let tool = str_field(p, "tool_name").unwrap_or("");
    if !FILE_TOOLS.contains(&tool) {
        return journal_tool_use(ctx, handle, text, is_error).await;
    }
    with_session(ctx, handle, |s| async move {
        let messages = tool_use_messages(&mut s.state(), p, text, is_error)?;
        let Some(messages) = messages else {
            return Ok(None);
        };
        observe_json(&s.session, &messages)?;
        let input = tool_input(p);
        let file = crate::observer::tools::PATH_KEYS
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str));
        let found = s.db.augment_tool_result(&s.session, tool, file).await?;
        Ok(found.map(|i| context("PostToolUse", i.content)))
    })
    .await
}

async fn session_end(ctx: &Ctx, handle: &mut Option<Engram>) -> Result<()> {
    let id = ctx.session_id.clone();
    let opened = open_database(ctx).await?;
    let db = handle.insert(opened);
    let lock = take_lock(ctx, &id, LOCK_WAIT).await?;
    let mut state = state::load(&ctx.hooks_dir, &id, ctx.transcript());
    let session = restore(db, &id, &mut state).await?;
    end_turn(ctx, &session, &mut state, &ctx.payload)?;
    finish(db, &session, &id).await?;
    state::remove(&ctx.hooks_dir, &id);
    lock.remove();
    let mut ignore = LogTarget::new(&ctx.event, Some(ctx.root.clone()));
    drop_from_registry(ctx, &mut ignore, &id).await;
    Ok(())
}

/// Finalizes a session (promotion) and ends it (what it used and learned: trust progression).
async fn finish(db: &Engram, session: &Session, id: &str) -> Result<()> {
    db.finalize(session, Some(crate::observer::SessionOutcome::Success))
        .await?;
    db.end_session(id).await?;
    Ok(())
}

// --- observing -----------------------------------------------------------------------------------

/// The messages of a finished tool call and its result, at the step pre-tool-use reserved
/// (else the next one), and the call marked observed; `None` for a call already observed (a
/// payload delivered twice).
fn tool_use_messages(
    state: &mut HookState,
    p: &Value,
    result: String,
    is_error: bool,
) -> Result<Option<[Value; 2]>> {
    let tool =
        str_field(p, "tool_name").ok_or_else(|| Error::invalid("the payload has no tool_name"))?;
    let id = tool_use_id(p);
    let noted = id.and_then(|id| state.calls.get(id)).cloned();
    if noted.as_ref().is_some_and(|n| n.done) {
        return Ok(None);
    }
    let step = match &noted {
        Some(n) => n.step,
        None => {
            state.step += 1;
            state.step
        }
    };
    let now = now_ms();
    let started = noted.map_or(now, |n| n.at);
    if let Some(id) = id {
        let note = state::CallNote {
            step,
            at: started,
            done: true,
        };
        state.calls.insert(id.to_owned(), note);
    }
    let call = json!({
        "type": "memory:tool-call", "toolName": tool, "stepIndex": step, "toolCallId": id,
        "args": tool_input(p), "timestamp": started,
    });
    let answer = json!({
        "type": "memory:tool-result", "toolName": tool, "stepIndex": step, "toolCallId": id,
        "result": result, "isError": is_error, "timestamp": now,
    });
    Ok(Some([call, answer]))
}

/// Observes messages in the protocol's JSON form.
fn observe_json(session: &Session, messages: &[Value]) -> Result<()> {
    let read = messages
        .iter()
        .map(crate::observer::protocol::json::message)
        .collect::<Result<Vec<_>>>()?;
    session.observe_all(read)
}

/// Keeps a finished tool call and its result in the session's state file, every string in
/// them redacted as the database would be; flushes through the database once the file holds
/// [`MAX_PENDING`] messages.
async fn journal_tool_use(
    ctx: &Ctx,
    handle: &mut Option<Engram>,
    result: String,
    is_error: bool,
) -> Result<Option<Value>> {
    // Checked before the lock: a payload without a tool names no call to keep.
    str_field(&ctx.payload, "tool_name")
        .ok_or_else(|| Error::invalid("the payload has no tool_name"))?;
    let full = with_state(ctx, |state| {
        if let Ok(Some(messages)) = tool_use_messages(state, &ctx.payload, result, is_error) {
            for mut m in messages {
                crate::memory::privacy::redact_json(&mut m);
                state.pending.push(m);
            }
        }
        state.pending.len() >= MAX_PENDING
    })
    .await?;
    if full {
        with_session(ctx, handle, |_| async { Ok(None) }).await?;
    }
    Ok(None)
}

/// Ends an agent turn: the model's text since the last turn as reasoning (self-corrections and
/// dead ends are read from it), then a step-complete. Hook payloads carry no model text, so it
/// comes from the transcript; Stop's `last_assistant_message` stands in when there is none.
fn end_turn(ctx: &Ctx, session: &Session, state: &mut HookState, p: &Value) -> Result<()> {
    let current = state.step.max(session.snapshot()?.current_step);
    let said = match payload::transcript_texts(p, state) {
        Ok(said) => said,
        Err(e) => {
            let log = LogTarget::new(&ctx.event, Some(ctx.root.clone()));
            log.line(
                e.code(),
                &format!("reading the transcript: {}", described(&e)),
            );
            None
        }
    };
    let said = said.unwrap_or_else(|| {
        str_field(p, "last_assistant_message")
            .filter(|t| !t.trim().is_empty())
            .map(|t| {
                vec![payload::Said {
                    text: t.to_owned(),
                    step: None,
                }]
            })
            .unwrap_or_default()
    });
    let mut messages: Vec<Value> = said
        .into_iter()
        .map(|s| json!({ "type": "memory:reasoning", "text": s.text, "stepIndex": s.step.unwrap_or(current) }))
        .collect();
    if current > state.step_done || !messages.is_empty() {
        messages.push(json!({ "type": "memory:step-complete", "stepNumber": current }));
    }
    observe_json(session, &messages)?;
    state.step_done = current;
    // The turn's calls are done; a call noted but never answered was denied or cut short.
    state.calls.clear();
    Ok(())
}

// --- sessions, state, locks ----------------------------------------------------------------------

/// What a handler gets inside [`with_session`].
struct Open {
    db: Engram,
    session: Arc<Session>,
    state: Arc<Mutex<HookState>>,
}

impl Open {
    /// The session's hook state (held only between awaits).
    fn state(&self) -> std::sync::MutexGuard<'_, HookState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs `f` under the session's lock on the open database and the session restored from its
/// checkpoint (or a new one), then checkpoints it and saves the hook state.
async fn with_session<F, Fut>(ctx: &Ctx, handle: &mut Option<Engram>, f: F) -> Result<Option<Value>>
where
    F: FnOnce(Open) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Value>>>,
{
    let id = &ctx.session_id;
    let _lock = take_lock(ctx, id, LOCK_WAIT).await?;
    let mut state = state::load(&ctx.hooks_dir, id, ctx.transcript());
    let db = match handle {
        Some(db) => db.clone(),
        None => handle.insert(open_database(ctx).await?).clone(),
    };
    let session = restore(&db, id, &mut state).await?;
    let cell = Arc::new(Mutex::new(state));
    let out = f(Open {
        db: db.clone(),
        session: session.clone(),
        state: cell.clone(),
    })
    .await?;
    db.checkpoint(&session).await?;
    let mut state = std::mem::take(&mut *cell.lock().unwrap_or_else(|e| e.into_inner()));
    state::save(&ctx.hooks_dir, id, &mut state, ctx.transcript())?;
    Ok(out)
}

/// The session restored from its checkpoint (or a new one), with what the state file held
/// observed and the state's step numbering caught up.
async fn restore(db: &Engram, id: &str, state: &mut HookState) -> Result<Arc<Session>> {
    let session = match db.resume_session(id).await? {
        Some(session) => session,
        None => db.observe(&SessionOptions::new(id))?,
    };
    flush_pending(&session, state)?;
    state.step = state.step.max(session.snapshot()?.current_step);
    Ok(session)
}

/// Observes what the state file holds for the session (see [`journal_tool_use`]).
fn flush_pending(session: &Session, state: &mut HookState) -> Result<()> {
    if !state.pending.is_empty() {
        observe_json(session, &state.pending)?;
        state.pending.clear();
    }
    Ok(())
}

/// Runs `f(state)` under the session's lock and saves the state (no database); returns what
/// `f` returned.
async fn with_state(ctx: &Ctx, f: impl FnOnce(&mut HookState) -> bool) -> Result<bool> {
    let id = &ctx.session_id;
    let _lock = take_lock(ctx, id, LOCK_WAIT).await?;
    let mut state = state::load(&ctx.hooks_dir, id, ctx.transcript());
    let out = f(&mut state);
    state::save(&ctx.hooks_dir, id, &mut state, ctx.transcript())?;
    Ok(out)
}

/// Takes the lock `name`; `ENGRAM_CONFLICT` when another hook holds it for `wait`.
async fn take_lock(ctx: &Ctx, name: &str, wait: Duration) -> Result<lock::Lock> {
    let file = ctx.lock_file(name);
    lock::acquire(&file, wait).await?.ok_or_else(|| {
        let shown = file.strip_prefix(&ctx.root).unwrap_or(&file);
        Error::Conflict(format!(
            "another hook held the lock {} for {} ms",
            shown.display(),
            wait.as_millis()
        ))
    })
}

/// Opens the database without sync (a hook must not wait on a network), with the embedder
/// the environment names.
async fn open_database(ctx: &Ctx) -> Result<Engram> {
    let mut options = crate::OpenOptions::new(&ctx.db_path);
    options.project_root = Some(ctx.root.clone());
    options.project_id = ctx.project.clone();
    if let Some(provider) = embeddings_from_env()? {
        options.engine.embeddings = provider;
    }
    Engram::open(options).await
}

/// The embedder the CLI's environment names (`ENGRAM_EMBED_PROVIDER`, `_MODEL`, `_URL`,
/// `_API_KEY`, `_QUERY_PREFIX`, `_DOCUMENT_PREFIX`); `None`: the default. The prefixes must be
/// the CLI's own: the document one is part of the model's identity, so a hook without it would
/// find none of the vectors the CLI stored.
fn embeddings_from_env() -> Result<Option<EmbeddingProvider>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let Some(provider) = var("ENGRAM_EMBED_PROVIDER") else {
        return Ok(None);
    };
    let model = || {
        var("ENGRAM_EMBED_MODEL").ok_or_else(|| {
            Error::invalid(format!(
                "ENGRAM_EMBED_MODEL is required for provider '{provider}'"
            ))
        })
    };
    // Read as the CLI reads them (for the servers only; only-whitespace counts as unset),
    // checked as the open option is.
    let prefixes = || {
        InputPrefixes {
            query: var("ENGRAM_EMBED_QUERY_PREFIX").unwrap_or_default(),
            document: var("ENGRAM_EMBED_DOCUMENT_PREFIX").unwrap_or_default(),
        }
        .validated(["ENGRAM_EMBED_QUERY_PREFIX", "ENGRAM_EMBED_DOCUMENT_PREFIX"])
    };
    Ok(Some(match provider.as_str() {
        "none" => EmbeddingProvider::Disabled,
        "local" => EmbeddingProvider::default(),
        "ollama" => {
            let mut options = OllamaOptions::new(model()?);
            if let Some(url) = var("ENGRAM_EMBED_URL") {
                options.base_url = url;
            }
            options.prefixes = prefixes()?;
            EmbeddingProvider::Ollama(options)
        }
        "openai" => {
            let mut options = OpenAiOptions::new(model()?);
            if let Some(url) = var("ENGRAM_EMBED_URL") {
                options.base_url = url;
            }
            let official = options.base_url == crate::embed::openai::DEFAULT_OPENAI_URL;
            options.api_key = var("ENGRAM_EMBED_API_KEY")
                .or_else(|| official.then(|| var("OPENAI_API_KEY")).flatten());
            options.prefixes = prefixes()?;
            EmbeddingProvider::OpenAi(options)
        }
        other => {
            return Err(Error::invalid(format!(
                "ENGRAM_EMBED_PROVIDER must be local, ollama, openai or none, got '{other}'"
            )))
        }
    }))
}

/// `path` with `.` and `..` resolved lexically (as Node's `path.resolve` does).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

// --- the registry of sessions and orphans ---------------------------------------------------------

fn read_registry(ctx: &Ctx) -> BTreeMap<String, Value> {
    std::fs::read(ctx.hooks_dir.join(REGISTRY))
        .ok()
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default()
}

/// Changes the registry under its own short lock; best effort (a missed update only delays).
async fn update_registry(
    ctx: &Ctx,
    log: &mut LogTarget,
    change: impl FnOnce(&mut BTreeMap<String, Value>),
) {
    let done: Result<()> = async {
        let _lock = take_lock(ctx, REGISTRY_LOCK, REGISTRY_WAIT).await?;
        let mut registry = read_registry(ctx);
        change(&mut registry);
        let text =
            serde_json::to_vec(&registry).map_err(|e| Error::Internal(format!("registry: {e}")))?;
        state::write_atomic(&ctx.hooks_dir.join(REGISTRY), &text)
    }
    .await;
    if let Err(e) = done {
        log.line(e.code(), &format!("updating {REGISTRY}: {}", described(&e)));
    }
}

async fn drop_from_registry(ctx: &Ctx, log: &mut LogTarget, id: &str) {
    update_registry(ctx, log, |r| {
        r.remove(id);
    })
    .await;
}

/// Finalizes sessions not seen for [`ORPHAN_MS`] (Claude Code was killed, or SessionEnd is not
/// installed), so that what they showed is promoted. One whose lock is held is still alive.
async fn finalize_orphans(ctx: &Ctx, db: &Engram) {
    let now = now_ms();
    let orphans: Vec<String> = read_registry(ctx)
        .into_iter()
        .filter(|(id, seen)| {
            id != &ctx.session_id
                && seen
                    .as_f64()
                    .is_none_or(|s| now as f64 - s > ORPHAN_MS as f64)
        })
        .map(|(id, _)| id)
        .take(MAX_ORPHANS)
        .collect();
    let mut log = LogTarget::new(&ctx.event, Some(ctx.root.clone()));
    for id in orphans {
        let Ok(Some(lock)) = lock::acquire(&ctx.lock_file(&id), Duration::ZERO).await else {
            continue; // a hook of it is running: alive after all
        };
        let done: Result<()> = async {
            let mut state = state::load(&ctx.hooks_dir, &id, None);
            let session = match db.resume_session(&id).await? {
                Some(s) => Some(s),
                None if !state.pending.is_empty() => Some(db.observe(&SessionOptions::new(&id))?),
                None => None,
            };
            if let Some(session) = session {
                flush_pending(&session, &mut state)?;
                end_turn(ctx, &session, &mut state, &Value::Null)?;
                finish(db, &session, &id).await?;
            }
            state::remove(&ctx.hooks_dir, &id);
            Ok(())
        }
        .await;
        if let Err(e) = done {
            log.line(
                e.code(),
                &format!("finalizing an orphaned session: {}", described(&e)),
            );
        }
        lock.remove();
        drop_from_registry(ctx, &mut log, &id).await;
    }
}

// --- time ----------------------------------------------------------------------------------------

/// Milliseconds since the epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The clock's nanoseconds within the second (a jitter source).
fn now_nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

/// Now as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn iso_now() -> String {
    let mut out = String::with_capacity(24);
    crate::log::push_timestamp(&mut out, std::time::SystemTime::now());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_in_either_naming_and_arguments_leniently() {
        assert_eq!(event_name("session-start"), Some("SessionStart"));
        assert_eq!(event_name("PostToolUse"), Some("PostToolUse"));
        assert_eq!(
            event_name("post_tool_use_failure"),
            Some("PostToolUseFailure")
        );
        assert_eq!(event_name("start"), None);
        let argv: Vec<String> = [
            "stop",
            "--root",
            "/p",
            "--db=/d.db",
            "--bogus",
            "--project",
            " ",
        ]
        .map(String::from)
        .to_vec();
        let args = HookArgs::parse(&argv);
        assert_eq!(args.event.as_deref(), Some("stop"));
        assert_eq!(args.root, Some(PathBuf::from("/p")));
        assert_eq!(args.db, Some(PathBuf::from("/d.db")));
        assert_eq!(args.project, None);
    }

    #[test]
    fn log_times_are_iso_utc() {
        let t = iso_now();
        assert_eq!(t.len(), 24, "{t}");
        assert!(
            t.starts_with("20") && t.ends_with('Z') && &t[10..11] == "T",
            "{t}"
        );
    }
}
