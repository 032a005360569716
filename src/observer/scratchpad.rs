//! The scratchpad: everything one session observed, in memory, bounded, serialisable.
//!
//! `observe` appends to a compact call log (one fixed-size record per tool call, strings
//! interned once) and keeps the seed's running analytics current in O(1) per event; the
//! signal detectors read both at `finalize`. Nothing here touches the database.
//!
//! Memory is accounted as it grows; past the cap the oldest half of the low-value calls
//! (reads and other tools without errors) is dropped, then, if that is not enough, the oldest
//! half of everything. Interned strings stop growing at a quarter of the cap (later new
//! strings share one overflow slot), so the pad never exceeds its cap.
//!
//! Secrets: every text the pad keeps passes the privacy filter as it enters, because all of it
//! can be persisted (checkpoints store the pad, `finalize` stores signal keys and wordings
//! made from it, and promotes memories). Entering is the cheapest place: an interned string
//! (tool, path, pattern, command head, host) is filtered only the first time it is seen (a
//! repeat is a hash hit, as before), and the other texts (an error's headline, a matched
//! sentence, a recorded entry, a search) are kept rarely. Each is filtered *before* it is
//! clipped or cut to a headline or sentence, so no fragment of a secret survives undetected.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::fingerprint::{self, headline};
use super::language::{self, LanguageKind};
use super::protocol::{
    Message, RecordEntry, SessionOptions, SessionOutcome, SessionType, ToolCall, ToolResult,
};
use super::tools::{self, ToolKind};
use crate::memory::privacy::redact;

/// "Not yet" in a time slot.
pub const NO_TIME: i64 = i64::MIN;
/// "No string" in an interned-id slot.
pub const NONE: u32 = u32::MAX;
/// The slot every string interned after the interner filled up shares.
pub const OVERFLOW: u32 = u32::MAX - 1;
/// How many recent file accesses pair up as co-accessed (the seed's window of recent calls).
pub const CO_ACCESS_WINDOW: usize = 6;
/// Files accessed this many steps apart or closer are co-accessed.
pub const CO_ACCESS_STEPS: u32 = 2;
/// Most reasoning sentences, recorded entries and searches kept (each).
pub const MAX_NOTES: usize = 1000;
/// Most tool calls waiting for their result (older ones are given up on).
const MAX_PENDING: usize = 64;

/// Strings stored once, named by a dense id.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Interner {
    strings: Vec<Box<str>>,
    #[serde(skip)]
    ids: HashMap<Box<str>, u32>,
    bytes: usize,
}

impl Interner {
    /// The id of `s`, adding it while the interner holds fewer than `max_bytes`.
    pub fn intern(&mut self, s: &str, max_bytes: usize) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        if self.bytes + s.len() > max_bytes || self.strings.len() >= OVERFLOW as usize {
            return OVERFLOW;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.into());
        self.ids.insert(s.into(), id);
        self.bytes += s.len() + 2 * std::mem::size_of::<Box<str>>() + 16;
        id
    }

    /// The string of `id` (`""` for none or overflow).
    pub fn get(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// The id of `s` if interned.
    pub fn find(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    /// How many strings.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// Bytes accounted.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn rebuild_ids(&mut self) {
        self.ids = self
            .strings
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), i as u32))
            .collect();
    }
}

/// One tool call and what came of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// Step it was made in.
    pub step: u32,
    /// Tool family.
    pub kind: ToolKind,
    /// Tool name (text id).
    pub tool: u32,
    /// File id for file tools; text id of the pattern, command head or host otherwise.
    pub target: u32,
    /// When it was made (ms since the epoch: the message's timestamp, else the clock's).
    pub at: i64,
    /// When its result came ([`NO_TIME`]: not yet).
    pub done: i64,
    /// Index into the pad's errors when the result was an error (`NONE` otherwise).
    pub error: u32,
    /// Characters of output.
    pub result_len: u32,
    /// Hash of the text an edit replaced (0: none).
    pub edit_old: u64,
    /// Hash of the edit's new text (0: none).
    pub edit_new: u64,
    /// Paths a search or glob listed (first [`super::protocol::MAX_TEXT_BYTES`] of output).
    pub listed: u16,
    /// Of those, paths under generated or vendored directories.
    pub listed_ignored: u16,
    /// A shell command that runs tests.
    pub test: bool,
}

impl Call {
    /// Whether the call ended in an error.
    pub fn failed(&self) -> bool {
        self.error != NONE
    }

    /// Whether its result came.
    pub fn answered(&self) -> bool {
        self.done != NO_TIME
    }
}

/// A distinct error seen in the session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorSeen {
    /// Fingerprint (tool kind + normalised headline).
    pub fingerprint: u64,
    /// The first occurrence's headline.
    pub headline: String,
    /// Which tool.
    pub tool: ToolKind,
    /// How many times.
    pub count: u32,
}

/// Per-file running counts.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct FileStat {
    /// Reads.
    pub reads: u32,
    /// Edits and writes.
    pub edits: u32,
    /// First step it was touched.
    pub first_step: u32,
    /// Last step it was touched.
    pub last_step: u32,
    /// Characters read from it.
    pub read_len: u64,
}

/// A sentence of the agent's reasoning that matched a pattern.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Said {
    /// Step.
    pub step: u32,
    /// Correction or dead end.
    pub kind: LanguageKind,
    /// The sentence.
    pub sentence: String,
}

/// An entry the agent recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recorded {
    /// Memory type.
    pub memory_type: crate::memory::MemoryType,
    /// Text.
    pub content: String,
    /// Files (as given).
    pub related_files: Vec<String>,
    /// Step.
    pub step: u32,
    /// Parallel agents that recorded it (the quorum; 1 outside merged pads).
    #[serde(default = "one")]
    pub agents: u32,
}

fn one() -> u32 {
    1
}

/// An in-session early trigger that fired (the seed's `EARLY_TRIGGERS`): its signal is
/// promoted at `finalize` without waiting for other sessions to confirm it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EarlyTrigger {
    /// Which signal.
    pub signal: super::signals::Signal,
    /// The seed's priority for it.
    pub priority: f64,
    /// The step it fired at.
    pub step: u32,
}

/// The seed's `ScratchpadAnalytics`, kept current by every `observe`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Analytics {
    /// Per file: reads, edits, first and last step.
    pub files: HashMap<u32, FileStat>,
    /// Search / glob pattern counts.
    pub grep_counts: HashMap<u32, u32>,
    /// Intra-session co-access: pairs of files (lower id first) touched within
    /// [`CO_ACCESS_STEPS`] steps of each other, with how often.
    #[serde(with = "pairs")]
    pub co_access: HashMap<(u32, u32), u32>,
    /// Configuration files changed.
    pub config_touched: HashSet<u32>,
    /// Files changed.
    pub edit_set: HashSet<u32>,
    /// Self-corrections said.
    pub self_corrections: u32,
    /// Input tokens reported by step-complete messages.
    pub input_tokens: u64,
    /// Characters of tool output (a token estimate when the loop reports none: ~4 per token).
    pub output_chars: u64,
    /// The current (highest seen) step.
    pub current_step: u32,
    /// The last 8 tool kinds, oldest first.
    pub recent_tools: Vec<ToolKind>,
    /// Recent file accesses (step, file) for co-access pairing.
    recent_files: Vec<(u32, u32)>,
}

/// One session's scratchpad.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scratchpad {
    /// Session id.
    pub session_id: String,
    /// Session type.
    pub session_type: SessionType,
    /// Work unit label.
    pub work_unit: Option<String>,
    /// Methodology.
    pub methodology: Option<String>,
    /// Steps the plan expected.
    pub planned_steps: Option<u32>,
    /// Memory cap.
    pub max_bytes: usize,
    /// When the session started (ms since the epoch).
    pub started_at: i64,
    /// File paths (relative to the project root where they lie inside it).
    pub files: Interner,
    /// Patterns, command heads, hosts, tool names.
    pub texts: Interner,
    /// The call log, oldest first.
    pub calls: Vec<Call>,
    /// Distinct errors.
    pub errors: Vec<ErrorSeen>,
    /// Running analytics.
    pub analytics: Analytics,
    /// Corrections and dead ends said.
    pub said: Vec<Said>,
    /// Entries the agent recorded.
    pub recorded: Vec<Recorded>,
    /// Memory searches the agent made.
    pub searches: Vec<String>,
    /// Early triggers that fired.
    pub early: Vec<EarlyTrigger>,
    /// The first step with a web fetch or search: what the agent concluded after it may be
    /// steered by outside text (the trust gate).
    pub external_step: Option<u32>,
    /// When (ms since the epoch) each step completed.
    pub step_done_at: Vec<(u32, i64)>,
    /// The outcome a session-complete message reported.
    pub outcome: Option<SessionOutcome>,
    /// Steps the loop reported running.
    pub steps_executed: Option<u32>,
    /// Calls dropped to stay under the cap.
    pub evicted_calls: u64,
    /// Events observed.
    pub events: u64,
    /// Memories step injection showed this session (never shown twice).
    pub injected: Vec<String>,
    /// How many recorded entries step injection has reflected back already.
    pub reflected: usize,
    /// For a pad merged from parallel agents: how many pads it came from.
    #[serde(default)]
    pub merged_from: u32,
    /// For a merged pad: files more than one agent changed, with how many agents.
    #[serde(default)]
    pub conflicts: Vec<(u32, u32)>,
    /// For a merged pad: candidates more than one agent showed (signal, key, agents).
    #[serde(default)]
    pub quorum: Vec<(super::signals::Signal, String, u32)>,
    #[serde(skip)]
    pending: Vec<(u32, Option<Box<str>>)>,
    #[serde(skip)]
    error_ids: HashMap<u64, u32>,
    bytes: usize,
}

const CALL_BYTES: usize = std::mem::size_of::<Call>();

impl Scratchpad {
    /// An empty pad for a session starting at `now`.
    pub fn new(options: &SessionOptions, now: i64) -> Self {
        let clean = |text: &Option<String>| text.as_deref().map(|t| redact(t).text);
        Scratchpad {
            session_id: options.session_id.trim().to_owned(),
            session_type: options.session_type,
            work_unit: clean(&options.work_unit),
            methodology: clean(&options.methodology),
            planned_steps: options.planned_steps,
            max_bytes: options.max_bytes,
            started_at: now,
            files: Interner::default(),
            texts: Interner::default(),
            calls: Vec::new(),
            errors: Vec::new(),
            analytics: Analytics::default(),
            said: Vec::new(),
            recorded: Vec::new(),
            searches: Vec::new(),
            early: Vec::new(),
            external_step: None,
            step_done_at: Vec::new(),
            outcome: None,
            steps_executed: None,
            evicted_calls: 0,
            events: 0,
            injected: Vec::new(),
            reflected: 0,
            merged_from: 0,
            conflicts: Vec::new(),
            quorum: Vec::new(),
            pending: Vec::new(),
            error_ids: HashMap::new(),
            bytes: 1024,
        }
    }

    /// Rebuilds the lookup tables a restored pad does not serialise.
    pub fn after_restore(&mut self) {
        self.files.rebuild_ids();
        self.texts.rebuild_ids();
        self.error_ids = self
            .errors
            .iter()
            .enumerate()
            .map(|(i, e)| (e.fingerprint, i as u32))
            .collect();
    }

    /// Evicts until the pad is under its cap, if it is over (after a merge).
    pub(crate) fn fit(&mut self) {
        if self.bytes() > self.max_bytes {
            self.evict();
        }
    }

    /// Adds `n` to the bytes accounted outside the interners (merging pads).
    pub(crate) fn account(&mut self, n: usize) {
        self.bytes += n;
    }

    /// Bytes the pad accounts for (kept at or under `max_bytes`).
    pub fn bytes(&self) -> usize {
        self.bytes + self.files.bytes() + self.texts.bytes()
    }

    /// Records one message. `now` is the engine clock's time, used when the message has no
    /// timestamp; `root` makes absolute paths inside the project relative.
    pub fn observe(&mut self, message: Message, now: i64, root: Option<&Path>) {
        self.events += 1;
        match message {
            Message::ToolCall(call) => self.on_call(call, now, root),
            Message::ToolResult(result) => self.on_result(result, now),
            Message::Reasoning { text, step } => self.on_reasoning(&text, step),
            Message::StepComplete { step, input_tokens } => {
                self.bump_step(step);
                self.analytics.input_tokens += u64::from(input_tokens.unwrap_or(0));
                if self.step_done_at.len() < 1_000_000 {
                    self.step_done_at.push((step, now));
                    self.bytes += 16;
                }
            }
            Message::SessionComplete {
                outcome,
                steps_executed,
            } => {
                self.outcome = Some(outcome);
                self.steps_executed = Some(steps_executed);
            }
            Message::Record(entry) => self.on_record(entry),
            Message::Search { query } => {
                if self.searches.len() < MAX_NOTES {
                    let query = redacted(query);
                    self.bytes += query.len() + 24;
                    self.searches.push(query);
                }
            }
        }
        if self.bytes() > self.max_bytes {
            self.evict();
        }
    }

    fn bump_step(&mut self, step: u32) {
        self.analytics.current_step = self.analytics.current_step.max(step);
    }

    fn text_cap(&self) -> usize {
        self.max_bytes / 8
    }

    fn intern_file(&mut self, path: &str, root: Option<&Path>) -> u32 {
        let cap = self.text_cap();
        intern_clean(&mut self.files, cap, path, |p| relative_path(p, root))
    }

    /// The text id of what `derive` makes of `raw` (a command's head, a clipped pattern).
    fn intern_text_of(&mut self, raw: &str, derive: impl Fn(&str) -> String) -> u32 {
        let cap = self.text_cap();
        intern_clean(&mut self.texts, cap, raw, derive)
    }

    fn intern_text(&mut self, text: &str) -> u32 {
        self.intern_text_of(text, str::to_owned)
    }

    fn on_call(&mut self, call: ToolCall, now: i64, root: Option<&Path>) {
        let kind = ToolKind::of(&call.tool);
        let step = call.step;
        self.bump_step(step);
        let tool = self.intern_text(&call.tool);
        let mut test = false;
        let target = match kind {
            ToolKind::Read | ToolKind::Edit | ToolKind::Write => match call.path.as_deref() {
                Some(p) if !p.trim().is_empty() => self.intern_file(p.trim(), root),
                _ => NONE,
            },
            ToolKind::Bash => match call.command.as_deref() {
                Some(c) if !c.trim().is_empty() => {
                    test = tools::is_test_command(c);
                    self.intern_text_of(c, tools::command_head)
                }
                _ => NONE,
            },
            ToolKind::Grep | ToolKind::Glob => match call.pattern.as_deref() {
                Some(p) if !p.trim().is_empty() => self.intern_text_of(p, |p| {
                    let p: String = p.split_whitespace().collect::<Vec<_>>().join(" ");
                    crate::text::clip_bytes(&p, 200).to_owned()
                }),
                _ => NONE,
            },
            ToolKind::WebFetch | ToolKind::WebSearch => {
                match call.url.as_deref().or(call.pattern.as_deref()) {
                    Some(u) if !u.trim().is_empty() => {
                        if kind == ToolKind::WebFetch {
                            self.intern_text_of(u, tools::url_host)
                        } else {
                            self.intern_text_of(u, |u| {
                                format!("search: {}", crate::text::clip_bytes(u.trim(), 100))
                            })
                        }
                    }
                    _ => NONE,
                }
            }
            ToolKind::Other => NONE,
        };
        if kind.is_external() && self.external_step.is_none() {
            self.external_step = Some(step);
        }
        let at = call.at_ms.unwrap_or(now);
        let index = self.calls.len() as u32;
        self.calls.push(Call {
            step,
            kind,
            tool,
            target,
            at,
            done: NO_TIME,
            error: NONE,
            result_len: 0,
            edit_old: call.old_text_hash.unwrap_or(0),
            edit_new: call.new_text_hash.unwrap_or(0),
            listed: 0,
            listed_ignored: 0,
            test,
        });
        self.bytes += CALL_BYTES;
        if self.pending.len() >= MAX_PENDING {
            self.pending.remove(0);
        }
        self.pending.push((index, call.call_id.map(Into::into)));

        let recent = &mut self.analytics.recent_tools;
        if recent.len() == 8 {
            recent.remove(0);
        }
        recent.push(kind);

        match kind {
            ToolKind::Grep | ToolKind::Glob if target != NONE => {
                let count = self.analytics.grep_counts.entry(target).or_default();
                *count += 1;
                if *count == 3 {
                    self.fire(super::signals::Signal::RepeatedGrep, 0.8, step);
                }
            }
            _ if kind.is_file() && target != NONE && target != OVERFLOW => {
                self.on_file_access(kind, target, step)
            }
            _ => {}
        }
    }

    fn on_file_access(&mut self, kind: ToolKind, file: u32, step: u32) {
        let stat = self.analytics.files.entry(file).or_insert(FileStat {
            first_step: step,
            ..FileStat::default()
        });
        stat.last_step = step;
        if kind.is_edit() {
            stat.edits += 1;
        } else {
            stat.reads += 1;
        }
        if stat.reads + stat.edits == 1 {
            self.bytes += 48;
        }
        if kind.is_edit() && self.analytics.edit_set.insert(file) {
            self.bytes += 16;
            if tools::is_config_file(self.files.get(file)) {
                self.analytics.config_touched.insert(file);
            }
            if !self.analytics.config_touched.is_empty() && self.analytics.edit_set.len() >= 2 {
                self.fire(super::signals::Signal::ConfigTouch, 0.7, step);
            }
        }
        // Co-access: pair with the files touched within the last few steps.
        let recent = &mut self.analytics.recent_files;
        recent.retain(|&(s, _)| step.saturating_sub(s) <= CO_ACCESS_STEPS);
        for &(_, other) in recent.iter() {
            if other != file {
                let pair = (other.min(file), other.max(file));
                let count = self.analytics.co_access.entry(pair).or_default();
                if *count == 0 {
                    self.bytes += 32;
                }
                *count += 1;
            }
        }
        match recent.iter_mut().find(|(_, f)| *f == file) {
            Some(entry) => entry.0 = step,
            None => {
                if recent.len() == CO_ACCESS_WINDOW {
                    recent.remove(0);
                }
                recent.push((step, file));
            }
        }
    }

    fn on_result(&mut self, result: ToolResult, now: i64) {
        self.bump_step(result.step);
        self.analytics.output_chars += u64::from(result.full_len);
        let Some(index) = self.take_pending(&result) else {
            return;
        };
        let at = result.at_ms.unwrap_or(now);
        let mut error = NONE;
        let kind = self.calls[index].kind;
        if result.is_error {
            let clipped = &result.text[..crate::text::floor_char_boundary(&result.text, 4096)];
            let fp = fingerprint::fingerprint(&format!("{kind:?}"), clipped);
            error = match self.error_ids.get(&fp) {
                Some(&i) => {
                    self.errors[i as usize].count += 1;
                    i
                }
                None => {
                    let i = self.errors.len() as u32;
                    // The whole start is filtered before a line is picked: a key block's
                    // lines alone do not look like a key.
                    let head = headline(&redact(clipped).text);
                    self.bytes += head.len() + 64;
                    self.errors.push(ErrorSeen {
                        fingerprint: fp,
                        headline: head,
                        tool: kind,
                        count: 1,
                    });
                    self.error_ids.insert(fp, i);
                    i
                }
            };
            if self.errors[error as usize].count == 2 {
                self.fire(super::signals::Signal::ErrorRetry, 0.75, result.step);
            }
        }
        let (mut listed, mut ignored) = (0u16, 0u16);
        if !result.is_error && matches!(kind, ToolKind::Glob | ToolKind::Grep) {
            for line in result.text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                // Grep lines are `path:line:text`; glob lines are paths.
                let path = line.split(':').next().unwrap_or(line);
                if path.contains('/') || path.contains('.') {
                    listed = listed.saturating_add(1);
                    if tools::in_ignored_dir(path) {
                        ignored = ignored.saturating_add(1);
                    }
                }
            }
        }
        let call = &mut self.calls[index];
        call.done = at;
        call.error = error;
        call.result_len = result.full_len;
        call.listed = listed;
        call.listed_ignored = ignored;
        if call.kind == ToolKind::Read && call.target != NONE {
            if let Some(stat) = self.analytics.files.get_mut(&call.target) {
                stat.read_len += u64::from(result.full_len);
            }
        }
    }

    /// The call a result answers: the one with its id, else the latest unanswered call of
    /// the same tool.
    fn take_pending(&mut self, result: &ToolResult) -> Option<usize> {
        let position = match result.call_id.as_deref() {
            Some(id) => self
                .pending
                .iter()
                .rposition(|(_, cid)| cid.as_deref() == Some(id)),
            None => None,
        }
        .or_else(|| {
            let tool = self.texts.find(&result.tool)?;
            self.pending
                .iter()
                .rposition(|&(i, _)| self.calls.get(i as usize).is_some_and(|c| c.tool == tool))
        })?;
        let (index, _) = self.pending.remove(position);
        Some(index as usize).filter(|&i| i < self.calls.len())
    }

    fn on_reasoning(&mut self, text: &str, step: u32) {
        self.bump_step(step);
        let mut hits = language::scan(text);
        if !hits.is_empty() {
            // Rare (a correction or a dead end): the scanned text is filtered and scanned
            // again, so that a sentence cut out of it holds no part of a secret.
            let clean = redact(crate::text::clip_bytes(text, language::SCAN_BYTES));
            if clean.count > 0 {
                hits = language::scan(&clean.text);
            }
        }
        for hit in hits {
            if hit.kind == LanguageKind::SelfCorrection {
                self.analytics.self_corrections += 1;
                if self.analytics.self_corrections == 1 {
                    self.fire(super::signals::Signal::SelfCorrection, 0.9, step);
                }
            }
            if self.said.len() < MAX_NOTES {
                self.bytes += hit.sentence.len() + 48;
                self.said.push(Said {
                    step,
                    kind: hit.kind,
                    sentence: hit.sentence,
                });
            }
        }
    }

    fn on_record(&mut self, entry: RecordEntry) {
        self.bump_step(entry.step);
        if self.recorded.len() < MAX_NOTES {
            self.bytes += entry.content.len()
                + entry
                    .related_files
                    .iter()
                    .map(|f| f.len() + 24)
                    .sum::<usize>()
                + 64;
            self.recorded.push(Recorded {
                memory_type: entry.memory_type,
                content: redacted(entry.content),
                related_files: entry.related_files.into_iter().map(redacted).collect(),
                step: entry.step,
                agents: 1,
            });
        }
    }

    fn fire(&mut self, signal: super::signals::Signal, priority: f64, step: u32) {
        if !self.early.iter().any(|e| e.signal == signal) {
            self.early.push(EarlyTrigger {
                signal,
                priority,
                step,
            });
        }
    }

    /// Drops calls until the pad is back under 3/4 of its cap: first the oldest half of the
    /// low-value ones (reads and other tools that did not fail), then the oldest half of all.
    fn evict(&mut self) {
        let target = self.max_bytes / 4 * 3;
        self.pending.clear();
        let before = self.calls.len();
        let half = self.calls.len() / 2;
        let mut index = 0;
        self.calls.retain(|c| {
            index += 1;
            index > half || c.failed() || !matches!(c.kind, ToolKind::Read | ToolKind::Other)
        });
        if self.bytes() - (before - self.calls.len()) * CALL_BYTES > target {
            let half = self.calls.len() / 2;
            self.calls.drain(..half);
        }
        let dropped = before - self.calls.len();
        self.bytes -= dropped * CALL_BYTES;
        self.evicted_calls += dropped as u64;
        // Co-access pairs seen once are the next least valuable.
        if self.bytes() > target {
            let pairs = self.analytics.co_access.len();
            self.analytics.co_access.retain(|_, n| *n > 1);
            self.bytes -= (pairs - self.analytics.co_access.len()) * 32;
        }
        if self.bytes() > target {
            let steps = self.step_done_at.len();
            self.step_done_at.drain(..steps / 2);
            self.bytes -= steps / 2 * 16;
        }
        self.calls.shrink_to(self.calls.len() * 2);
    }

    /// The file path of a call's target, when it is a file inside the project.
    pub fn project_file(&self, id: u32) -> Option<&str> {
        let path = self.files.get(id);
        (!path.is_empty() && !is_outside(path)).then_some(path)
    }
}

/// `text` through the privacy filter (`text` itself when it holds no secret).
fn redacted(text: String) -> String {
    let r = redact(&text);
    if r.count > 0 {
        r.text
    } else {
        text
    }
}

/// Bytes of a raw text filtered before a string is derived from it: a derived string (a
/// pattern, a query, a head, a host) comes from its start, and a huge command seen once should
/// not cost a filter pass over all of it.
const RAW_FILTER_BYTES: usize = 4096;

/// The id in `interner` of `derive(raw)`, where `raw` passes the privacy filter the first time
/// its derived string is seen: a repeat is one hash lookup, as without the filter. The raw text
/// is filtered before it is derived (a pattern clipped mid-token would hide the token's
/// shape), and the derived string once more (a command's head may come from past the filtered
/// start). A string that held a secret never matches its filtered form, so each of its repeats
/// is filtered again (rare, and then correct: it finds the same id).
fn intern_clean(
    interner: &mut Interner,
    cap: usize,
    raw: &str,
    derive: impl Fn(&str) -> String,
) -> u32 {
    let key = derive(raw);
    if let Some(id) = interner.find(&key) {
        return id;
    }
    let clean = redact(crate::text::clip_bytes(raw, RAW_FILTER_BYTES));
    let key = if clean.count == 0 {
        key
    } else {
        derive(&clean.text)
    };
    interner.intern(&redacted(key), cap)
}

/// `path` relative to `root` when it lies inside it; `./` and duplicate slashes removed.
pub fn relative_path(path: &str, root: Option<&Path>) -> String {
    let path = path.trim();
    if let Some(root) = root {
        if let Ok(rest) = Path::new(path).strip_prefix(root) {
            return rest.to_string_lossy().replace('\\', "/");
        }
    }
    let mut out = path.trim_start_matches("./").to_owned();
    while out.contains("//") {
        out = out.replace("//", "/");
    }
    out
}

/// Whether a stored path points outside the project (absolute after `relative_path`, or
/// climbing out with `..`).
pub fn is_outside(path: &str) -> bool {
    Path::new(path).is_absolute() || path.starts_with("../") || path.contains(":\\")
}

/// JSON maps need string keys: the co-access map is stored as a list of `[[a, b], n]`.
mod pairs {
    use std::collections::HashMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        map: &HashMap<(u32, u32), u32>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let list: Vec<(&(u32, u32), &u32)> = map.iter().collect();
        list.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<HashMap<(u32, u32), u32>, D::Error> {
        let list: Vec<((u32, u32), u32)> = Vec::deserialize(d)?;
        Ok(list.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

    fn call(tool: &str, pattern: Option<String>, command: Option<String>) -> Message {
        Message::ToolCall(ToolCall {
            tool: tool.into(),
            step: 1,
            pattern,
            command,
            ..ToolCall::default()
        })
    }

    #[test]
    fn what_enters_the_pad_is_filtered_once_per_distinct_string() {
        let mut pad = Scratchpad::new(&SessionOptions::new("s"), 0);
        // The token straddles the 200-byte clip of a pattern: clipped first, its remaining 16
        // characters would no longer look like a GitHub token.
        let pattern = format!("{} {TOKEN}", "x".repeat(179));
        for _ in 0..3 {
            pad.observe(call("Grep", Some(pattern.clone()), None), 0, None);
            pad.observe(call("Bash", None, Some(format!("'gh' {TOKEN}"))), 0, None);
        }
        pad.observe(call("Grep", Some("handle".into()), None), 0, None);
        let state = serde_json::to_string(&pad).unwrap();
        assert!(!state.contains(&TOKEN[4..20]), "{state}");
        // One id per distinct string, secrets or not: the repeated pattern was counted thrice.
        let id = pad.texts.find(&format!("{} [REDACTED]", "x".repeat(179)));
        assert_eq!(pad.analytics.grep_counts.get(&id.unwrap()), Some(&3));
        assert_eq!(pad.texts.len(), 5, "Grep, Bash, two patterns, one head");
    }
}
