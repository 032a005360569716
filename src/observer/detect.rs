//! The signal detectors: what one session's scratchpad shows, as candidates for promotion.
//!
//! Each detector reads the call log and analytics once (O(calls)). A candidate names its
//! signal, a key that identifies "the same thing" across sessions (a file, a pair of files,
//! an error fingerprint, a command...), the memory it would become, and the step it came from
//! (for the trust gate). Whether it is promoted is decided later, with the counts of earlier
//! sessions (`promote.rs`).

use std::collections::{HashMap, HashSet};

use super::language::LanguageKind;
use super::scratchpad::{Call, Scratchpad, NONE, OVERFLOW};
use super::signals::Signal;
use super::tools::{self, ToolKind};
use crate::graph::module_layer::module_of;
use crate::memory::MemoryType;

/// A number a calibration signal measures per session; promotion reports its mean across
/// sessions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    /// This session's value.
    pub value: f64,
}

/// Something a session showed that may become a memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Which signal.
    pub signal: Signal,
    /// Identifies the same observation across sessions (within the signal).
    pub key: String,
    /// The memory type it becomes.
    pub memory_type: MemoryType,
    /// The memory's text (for measured signals, this session's wording; promotion rewrites it
    /// with the mean across sessions).
    pub content: String,
    /// Files it concerns (inside the project).
    pub related_files: Vec<String>,
    /// Modules it concerns.
    pub related_modules: Vec<String>,
    /// The step it originated at.
    pub step: u32,
    /// The measured value, for calibration signals.
    pub measure: Option<Measure>,
    /// For import chases: the importing and imported file, to be checked against the code
    /// index before promotion.
    pub import_pair: Option<(String, String)>,
}

impl Candidate {
    fn new(signal: Signal, key: String, memory_type: MemoryType, content: String) -> Self {
        Candidate {
            signal,
            key,
            memory_type,
            content,
            related_files: Vec::new(),
            related_modules: Vec::new(),
            step: 0,
            measure: None,
            import_pair: None,
        }
    }

    fn files(mut self, files: impl IntoIterator<Item = String>) -> Self {
        for f in files {
            if let Some(m) = module_of(&f) {
                if !self.related_modules.contains(&m) {
                    self.related_modules.push(m);
                }
            }
            if !self.related_files.contains(&f) {
                self.related_files.push(f);
            }
        }
        self
    }

    fn at(mut self, step: u32) -> Self {
        self.step = step;
        self
    }

    fn measured(mut self, value: f64) -> Self {
        self.measure = Some(Measure { value });
        self
    }
}

/// Most candidates one detector yields per session (bounds finalize's work on huge sessions).
pub const MAX_PER_SIGNAL: usize = 64;
/// Calls slower than this many times the session's median call (and than
/// [`SLOW_CALL_MS`]) are time anomalies.
pub const SLOW_FACTOR: u32 = 5;
/// See [`SLOW_FACTOR`].
pub const SLOW_CALL_MS: u32 = 10_000;
/// Outputs this many times the median output (and over [`SPIKE_CHARS`]) are token spikes.
pub const SPIKE_FACTOR: u32 = 3;
/// See [`SPIKE_FACTOR`]: ~2,000 tokens.
pub const SPIKE_CHARS: u32 = 8_000;

/// Every candidate the session shows: the 16 single-session signals, and parallel conflicts
/// when the pad was merged from parallel agents.
pub fn detect(pad: &Scratchpad) -> Vec<Candidate> {
    let view = View::new(pad);
    let mut out = Vec::new();
    let detectors: [fn(&View<'_>) -> Vec<Candidate>; 17] = [
        file_access,
        co_access,
        error_retry,
        backtrack,
        read_abandon,
        repeated_grep,
        tool_sequence,
        time_anomaly,
        said,
        external_reference,
        glob_ignore,
        import_chase,
        test_order,
        config_touch,
        step_overrun,
        parallel_conflict,
        token_spike,
    ];
    for detector in detectors {
        let mut found = detector(&view);
        found.truncate(MAX_PER_SIGNAL);
        out.extend(found);
    }
    out
}

/// The pad with the lookups the detectors share.
struct View<'a> {
    pad: &'a Scratchpad,
    /// The module the session worked in: where most edits were, else most reads.
    module: Option<String>,
}

impl<'a> View<'a> {
    fn new(pad: &'a Scratchpad) -> Self {
        let mut edits: HashMap<String, u32> = HashMap::new();
        let mut reads: HashMap<String, u32> = HashMap::new();
        for (&file, stat) in &pad.analytics.files {
            let Some(m) = pad.project_file(file).and_then(module_of) else {
                continue;
            };
            *edits.entry(m.clone()).or_default() += stat.edits;
            *reads.entry(m).or_default() += stat.reads;
        }
        let top = |counts: HashMap<String, u32>| {
            counts
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                .map(|(m, _)| m)
        };
        let module = top(edits).or_else(|| top(reads));
        View { pad, module }
    }

    fn file(&self, id: u32) -> Option<&'a str> {
        if id == NONE || id == OVERFLOW {
            return None;
        }
        self.pad.project_file(id)
    }

    fn text(&self, id: u32) -> Option<&'a str> {
        (id != NONE && id != OVERFLOW).then(|| self.pad.texts.get(id))
    }

    /// What a call did, in words: `edit src/a.ts`, `run cargo test`, `read x`.
    fn label(&self, call: &Call) -> Option<String> {
        match call.kind {
            ToolKind::Read => self.file(call.target).map(|f| format!("read `{f}`")),
            ToolKind::Edit | ToolKind::Write => {
                self.file(call.target).map(|f| format!("edit `{f}`"))
            }
            ToolKind::Bash => self.text(call.target).map(|c| format!("run `{c}`")),
            ToolKind::Grep | ToolKind::Glob => {
                self.text(call.target).map(|p| format!("search `{p}`"))
            }
            ToolKind::WebFetch | ToolKind::WebSearch => {
                self.text(call.target).map(|h| format!("fetch `{h}`"))
            }
            ToolKind::Other => None,
        }
    }

    fn module_label(&self) -> String {
        self.module
            .clone()
            .unwrap_or_else(|| "the project root".into())
    }

    /// Files edited between two call indexes (exclusive), in order.
    fn edits_between(&self, from: usize, to: usize) -> Vec<String> {
        let mut files = Vec::new();
        for call in &self.pad.calls[from.min(to)..to] {
            if call.kind.is_edit() {
                if let Some(f) = self.file(call.target) {
                    if !files.iter().any(|x: &String| x == f) {
                        files.push(f.to_owned());
                    }
                }
            }
        }
        files
    }
}

fn quote_list(files: &[String]) -> String {
    files
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn median(mut values: Vec<u32>) -> u32 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    values[values.len() / 2]
}

/// Signal 1: Files read this session (promotion groups them per module into prefetch patterns).
fn file_access(v: &View<'_>) -> Vec<Candidate> {
    let mut files: Vec<(&str, u32)> = v
        .pad
        .analytics
        .files
        .iter()
        .filter(|(_, s)| s.reads > 0)
        .filter_map(|(&id, s)| Some((v.file(id)?, s.first_step)))
        .collect();
    files.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
    files
        .into_iter()
        .take(MAX_PER_SIGNAL)
        .map(|(f, step)| {
            let module = module_of(f).unwrap_or_default();
            Candidate::new(
                Signal::FileAccess,
                f.to_owned(),
                MemoryType::PrefetchPattern,
                format!("`{f}` is read in most sessions working in `{module}`."),
            )
            .files([f.to_owned()])
            .at(step)
        })
        .collect()
}

/// Signal 2: Files touched within a couple of steps of each other.
fn co_access(v: &View<'_>) -> Vec<Candidate> {
    let mut pairs: Vec<(&str, &str, u32)> = v
        .pad
        .analytics
        .co_access
        .iter()
        .filter_map(|(&(a, b), &n)| {
            let (a, b) = (v.file(a)?, v.file(b)?);
            Some(if a < b { (a, b, n) } else { (b, a, n) })
        })
        .collect();
    pairs.sort_by(|x, y| y.2.cmp(&x.2).then(x.0.cmp(y.0)).then(x.1.cmp(y.1)));
    let edited = |f: &str| {
        v.pad
            .files
            .find(f)
            .is_some_and(|id| v.pad.analytics.edit_set.contains(&id))
    };
    pairs
        .into_iter()
        .take(MAX_PER_SIGNAL)
        .map(|(a, b, _)| {
            let both_edited = edited(a) && edited(b);
            let (memory_type, content) = if both_edited {
                (
                    MemoryType::CausalDependency,
                    format!("`{a}` and `{b}` change together: when you edit one, check the other."),
                )
            } else {
                (
                    MemoryType::PrefetchPattern,
                    format!("`{a}` and `{b}` are used together: open both."),
                )
            };
            let step = [a, b]
                .iter()
                .filter_map(|f| v.pad.files.find(f))
                .filter_map(|id| v.pad.analytics.files.get(&id))
                .map(|s| s.first_step)
                .max()
                .unwrap_or(0);
            Candidate::new(Signal::CoAccess, format!("{a}\n{b}"), memory_type, content)
                .files([a.to_owned(), b.to_owned()])
                .at(step)
        })
        .collect()
}

/// Signal 3: An error seen twice, or fixed by a later successful call of the same tool and target.
fn error_retry(v: &View<'_>) -> Vec<Candidate> {
    let calls = &v.pad.calls;
    let mut out = Vec::new();
    for (i, error) in v.pad.errors.iter().enumerate() {
        let failures: Vec<usize> = calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.error == i as u32)
            .map(|(j, _)| j)
            .collect();
        let Some(&last_failure) = failures.last() else {
            continue;
        };
        let failed = calls[last_failure];
        let fixed_at = calls[last_failure + 1..]
            .iter()
            .position(|c| {
                c.kind == failed.kind && c.target == failed.target && c.answered() && !c.failed()
            })
            .map(|k| last_failure + 1 + k);
        if error.count < 2 && fixed_at.is_none() {
            continue;
        }
        let what = v
            .label(&failed)
            .unwrap_or_else(|| format!("{:?}", failed.kind));
        let mut c = match fixed_at {
            Some(fixed) => {
                let edits = v.edits_between(last_failure + 1, fixed);
                let how = if edits.is_empty() {
                    "it passed when run again (flaky or order-dependent)".to_owned()
                } else {
                    format!("fixed by editing {}", quote_list(&edits))
                };
                Candidate::new(
                    Signal::ErrorRetry,
                    format!("{:016x}", error.fingerprint),
                    MemoryType::ErrorPattern,
                    format!("{what} fails with \"{}\": {how}.", error.headline),
                )
                .files(edits)
            }
            None => Candidate::new(
                Signal::ErrorRetry,
                format!("{:016x}", error.fingerprint),
                MemoryType::Gotcha,
                format!(
                    "{what} fails with \"{}\" ({} times in one session, not resolved).",
                    error.headline, error.count
                ),
            ),
        };
        if let Some(f) = v.file(failed.target).filter(|_| failed.kind.is_file()) {
            c = c.files([f.to_owned()]);
        }
        out.push(c.at(calls[failures[0]].step));
    }
    out
}

/// Signal 4: An edit whose new text is what an earlier edit of the file replaced: undone.
fn backtrack(v: &View<'_>) -> Vec<Candidate> {
    let mut replaced: HashMap<u32, Vec<(u64, u32)>> = HashMap::new();
    let mut out: Vec<Candidate> = Vec::new();
    for call in v.pad.calls.iter().filter(|c| c.kind == ToolKind::Edit) {
        if call.edit_new != 0 {
            if let Some(&(_, first_step)) = replaced
                .get(&call.target)
                .and_then(|olds| olds.iter().find(|(h, _)| *h == call.edit_new))
            {
                if let Some(f) = v.file(call.target) {
                    if !out.iter().any(|c| c.key == f) {
                        let reason = v
                            .pad
                            .said
                            .iter()
                            .find(|s| s.step >= first_step && s.step <= call.step)
                            .map(|s| format!(" The agent said: \"{}\"", s.sentence))
                            .unwrap_or_default();
                        out.push(
                            Candidate::new(
                                Signal::Backtrack,
                                f.to_owned(),
                                MemoryType::Gotcha,
                                format!(
                                    "Edits to `{f}` get undone (step {first_step} reverted at \
                                     step {}): find out why before changing it.{reason}",
                                    call.step
                                ),
                            )
                            .files([f.to_owned()])
                            .at(first_step),
                        );
                    }
                }
            }
        }
        if call.edit_old != 0 {
            replaced
                .entry(call.target)
                .or_default()
                .push((call.edit_old, call.step));
        }
    }
    out
}

/// Signal 5: A file read once and left, while the change landed in another file of its module.
fn read_abandon(v: &View<'_>) -> Vec<Candidate> {
    let a = &v.pad.analytics;
    let mut out = Vec::new();
    let mut abandoned: Vec<(u32, &str)> = a
        .files
        .iter()
        .filter(|(_, s)| s.reads == 1 && s.edits == 0)
        .filter_map(|(&id, s)| Some((s.first_step, v.file(id)?)))
        .collect();
    abandoned.sort();
    for (step, f) in abandoned {
        if out.len() == MAX_PER_SIGNAL {
            break;
        }
        let Some(module) = module_of(f) else { continue };
        let sibling = a
            .edit_set
            .iter()
            .filter_map(|&id| Some((a.files.get(&id)?.last_step, v.file(id)?)))
            .filter(|(s, e)| *s > step && module_of(e).as_deref() == Some(&module))
            .min();
        if let Some((_, edited)) = sibling {
            out.push(
                Candidate::new(
                    Signal::ReadAbandon,
                    f.to_owned(),
                    MemoryType::Gotcha,
                    format!(
                        "`{f}` is often opened and left while the change lands elsewhere in \
                         `{module}` (e.g. `{edited}`)."
                    ),
                )
                .files([f.to_owned(), edited.to_owned()])
                .at(step),
            );
        }
    }
    out
}

/// Signal 6: The same search made twice or more, and where the agent went after the last one.
fn repeated_grep(v: &View<'_>) -> Vec<Candidate> {
    let mut patterns: Vec<(u32, u32)> = v
        .pad
        .analytics
        .grep_counts
        .iter()
        .filter(|(&p, &n)| n >= 2 && p != OVERFLOW)
        .map(|(&p, &n)| (p, n))
        .collect();
    patterns.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let calls = &v.pad.calls;
    patterns
        .into_iter()
        .filter_map(|(pattern, count)| {
            let text = v.text(pattern)?;
            let searches: Vec<usize> = calls
                .iter()
                .enumerate()
                .filter(|(_, c)| matches!(c.kind, ToolKind::Grep | ToolKind::Glob))
                .filter(|(_, c)| c.target == pattern)
                .map(|(i, _)| i)
                .collect();
            let last = *searches.last()?;
            let last_step = calls[last].step;
            let mut found: Vec<String> = Vec::new();
            for c in &calls[last + 1..] {
                if c.step > last_step + 3 || found.len() == 3 {
                    break;
                }
                if c.kind.is_file() {
                    if let Some(f) = v.file(c.target) {
                        if !found.iter().any(|x| x == f) {
                            found.push(f.to_owned());
                        }
                    }
                }
            }
            let first_step = calls[searches[0]].step;
            let c = if found.is_empty() {
                Candidate::new(
                    Signal::RepeatedGrep,
                    text.to_owned(),
                    MemoryType::Gotcha,
                    format!("Searching for `{text}` turns up nothing useful ({count} searches in one session)."),
                )
            } else {
                Candidate::new(
                    Signal::RepeatedGrep,
                    text.to_owned(),
                    MemoryType::ModuleInsight,
                    format!("`{text}` is found in {}.", quote_list(&found)),
                )
                .files(found)
            };
            Some(c.at(first_step))
        })
        .collect()
}

/// Signal 7: Edit-and-run trigrams (each with at least one command): recipes when they recur.
fn tool_sequence(v: &View<'_>) -> Vec<Candidate> {
    let mut labels: Vec<(String, u32)> = Vec::new();
    for call in &v.pad.calls {
        if !(call.kind.is_edit() || call.kind == ToolKind::Bash) || call.failed() {
            continue;
        }
        if let Some(label) = v.label(call) {
            if labels.last().map(|(l, _)| l) != Some(&label) {
                labels.push((label, call.step));
            }
        }
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for w in labels.windows(3) {
        if out.len() == MAX_PER_SIGNAL {
            break;
        }
        if !w.iter().any(|(l, _)| l.starts_with("run ")) {
            continue;
        }
        let key = w
            .iter()
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(" → ");
        if seen.insert(key.clone()) {
            let files: Vec<String> = w
                .iter()
                .filter_map(|(l, _)| l.strip_prefix("edit `")?.strip_suffix('`').map(Into::into))
                .collect();
            out.push(
                Candidate::new(
                    Signal::ToolSequence,
                    key.clone(),
                    MemoryType::WorkflowRecipe,
                    format!("Recipe: {key}."),
                )
                .files(files)
                .at(w[0].1),
            );
        }
    }
    out
}

/// Signal 8: Calls far slower than the session's median call.
fn time_anomaly(v: &View<'_>) -> Vec<Candidate> {
    let answered: Vec<&Call> = v.pad.calls.iter().filter(|c| c.answered()).collect();
    let durations: Vec<u32> = answered
        .iter()
        .map(|c| (c.done - c.at).clamp(0, i64::from(u32::MAX)) as u32)
        .collect();
    let median = median(durations.clone());
    let bar = (median.saturating_mul(SLOW_FACTOR)).max(SLOW_CALL_MS);
    let mut out: Vec<Candidate> = Vec::new();
    for (call, duration) in answered.iter().zip(durations) {
        if duration <= bar {
            continue;
        }
        let Some(label) = v.label(call) else { continue };
        if out.iter().any(|c| c.key == label) {
            continue;
        }
        let seconds = f64::from(duration) / 1000.0;
        out.push(
            Candidate::new(
                Signal::TimeAnomaly,
                label.clone(),
                MemoryType::Gotcha,
                format!("{label} is slow: about {seconds:.0} s."),
            )
            .files(
                v.file(call.target)
                    .filter(|_| call.kind.is_file())
                    .map(String::from),
            )
            .at(call.step)
            .measured(seconds),
        );
    }
    out
}

/// Signal 9: Self-corrections and dead ends in the agent's words, with the files it was on.
fn said(v: &View<'_>) -> Vec<Candidate> {
    v.pad
        .said
        .iter()
        .map(|s| {
            let files: Vec<String> = v
                .pad
                .calls
                .iter()
                .filter(|c| c.kind.is_file() && c.step + 2 >= s.step && c.step <= s.step)
                .filter_map(|c| v.file(c.target).map(String::from))
                .take(3)
                .collect();
            let key = format!(
                "{:016x}",
                super::fingerprint::hash_text(&s.sentence.to_lowercase())
            );
            let (memory_type, content) = match s.kind {
                LanguageKind::SelfCorrection => (MemoryType::Gotcha, s.sentence.clone()),
                LanguageKind::DeadEnd => (MemoryType::DeadEnd, format!("Dead end: {}", s.sentence)),
            };
            Candidate::new(Signal::SelfCorrection, key, memory_type, content)
                .files(files)
                .at(s.step)
        })
        .collect()
}

/// Signal 10: Outside documentation fetched while working in a module.
fn external_reference(v: &View<'_>) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    for call in v.pad.calls.iter().filter(|c| c.kind.is_external()) {
        let Some(source) = v.text(call.target) else {
            continue;
        };
        let module = v.module_label();
        let key = format!("{module}\n{source}");
        if out.iter().any(|c| c.key == key) {
            continue;
        }
        let mut c = Candidate::new(
            Signal::ExternalReference,
            key,
            MemoryType::ModuleInsight,
            format!("Work in `{module}` relies on outside documentation: {source}."),
        )
        .at(call.step);
        c.related_modules.extend(v.module.clone());
        out.push(c);
    }
    out
}

/// Signal 11: Searches that mostly list generated or vendored files.
fn glob_ignore(v: &View<'_>) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    for call in &v.pad.calls {
        if call.listed < 5 || u32::from(call.listed_ignored) * 2 < u32::from(call.listed) {
            continue;
        }
        let Some(pattern) = v.text(call.target) else {
            continue;
        };
        if out.iter().any(|c| c.key == pattern) {
            continue;
        }
        out.push(
            Candidate::new(
                Signal::GlobIgnore,
                pattern.to_owned(),
                MemoryType::Gotcha,
                format!(
                    "Searching `{pattern}` mostly lists generated or vendored files ({} of {}, \
                     e.g. under {}): limit it to the source directories.",
                    call.listed_ignored,
                    call.listed,
                    tools::IGNORED_DIRS[..3].join(", ")
                ),
            )
            .at(call.step),
        );
    }
    out
}

/// Signal 12: A file read right after another (within the next two reads): an import chase if
/// the first imports the second (checked against the code index at promotion).
fn import_chase(v: &View<'_>) -> Vec<Candidate> {
    let reads: Vec<(&str, u32)> = v
        .pad
        .calls
        .iter()
        .filter(|c| c.kind == ToolKind::Read)
        .filter_map(|c| Some((v.file(c.target)?, c.step)))
        .collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, &(a, step)) in reads.iter().enumerate() {
        for &(b, _) in reads.iter().skip(i + 1).take(2) {
            if out.len() == MAX_PER_SIGNAL {
                return out;
            }
            if a != b && seen.insert((a, b)) {
                let mut c = Candidate::new(
                    Signal::ImportChase,
                    format!("{a}\n{b}"),
                    MemoryType::CausalDependency,
                    format!("Reading `{a}` leads to `{b}`, which it imports: read both."),
                )
                .files([a.to_owned(), b.to_owned()])
                .at(step);
                c.import_pair = Some((a.to_owned(), b.to_owned()));
                out.push(c);
            }
        }
    }
    out
}

/// Signal 13: Test runs: how many it took to pass, per module and test command.
fn test_order(v: &View<'_>) -> Vec<Candidate> {
    let mut runs: Vec<(u32, Vec<&Call>)> = Vec::new();
    for call in v.pad.calls.iter().filter(|c| c.test && c.answered()) {
        match runs.iter_mut().find(|(t, _)| *t == call.target) {
            Some((_, list)) => list.push(call),
            None => runs.push((call.target, vec![call])),
        }
    }
    let module = v.module_label();
    runs.into_iter()
        .filter_map(|(target, list)| {
            let command = v.text(target)?;
            let to_pass = list
                .iter()
                .position(|c| !c.failed())
                .map_or(list.len(), |i| i + 1);
            let mut c = Candidate::new(
                Signal::TestOrder,
                format!("{module}\n{command}"),
                MemoryType::TaskCalibration,
                format!("In `{module}`, `{command}` takes about {to_pass} runs to pass."),
            )
            .at(list[0].step)
            .measured(to_pass as f64);
            c.related_modules.extend(v.module.clone());
            Some(c)
        })
        .collect()
}

/// Signal 14: A configuration file changed along with at least two other files.
fn config_touch(v: &View<'_>) -> Vec<Candidate> {
    let a = &v.pad.analytics;
    let others: Vec<String> = a
        .edit_set
        .iter()
        .filter(|id| !a.config_touched.contains(id))
        .filter_map(|&id| v.file(id).map(String::from))
        .collect();
    if others.len() < 2 {
        return Vec::new();
    }
    let module = v.module_label();
    let mut configs: Vec<(&str, u32)> = a
        .config_touched
        .iter()
        .filter_map(|&id| Some((v.file(id)?, a.files.get(&id)?.first_step)))
        .collect();
    configs.sort();
    configs
        .into_iter()
        .map(|(config, step)| {
            let mut c = Candidate::new(
                Signal::ConfigTouch,
                format!("{config}\n{module}"),
                MemoryType::CausalDependency,
                format!("Changes in `{module}` need `{config}` changed too."),
            )
            .files([config.to_owned()])
            .at(step);
            c.related_modules.extend(v.module.clone());
            c
        })
        .collect()
}

/// Signal 15: Steps run against steps planned, per module.
fn step_overrun(v: &View<'_>) -> Vec<Candidate> {
    let Some(planned) = v.pad.planned_steps.filter(|&p| p > 0) else {
        return Vec::new();
    };
    let actual = v.pad.steps_executed.unwrap_or(v.pad.analytics.current_step);
    if actual == 0 {
        return Vec::new();
    }
    let ratio = f64::from(actual) / f64::from(planned);
    let module = v.module_label();
    let mut c = Candidate::new(
        Signal::StepOverrun,
        module.clone(),
        MemoryType::TaskCalibration,
        format!("Tasks in `{module}` take about {ratio:.1}x the planned steps."),
    )
    .at(actual)
    .measured(ratio);
    c.related_modules.extend(v.module.clone());
    vec![c]
}

/// Signal 16: files that more than one parallel agent changed (merged pads only).
fn parallel_conflict(v: &View<'_>) -> Vec<Candidate> {
    v.pad
        .conflicts
        .iter()
        .filter_map(|&(id, agents)| {
            let f = v.file(id)?;
            let step = v.pad.analytics.files.get(&id).map_or(0, |s| s.first_step);
            Some(
                Candidate::new(
                    Signal::ParallelConflict,
                    f.to_owned(),
                    MemoryType::Gotcha,
                    format!(
                        "Parallel agents changed `{f}` in the same task ({agents} agents): give \
                         it to one agent or sequence the work on it."
                    ),
                )
                .files([f.to_owned()])
                .at(step),
            )
        })
        .collect()
}

/// Signal 17: Outputs far larger than the session's median output: what eats the context.
fn token_spike(v: &View<'_>) -> Vec<Candidate> {
    let answered: Vec<&Call> = v
        .pad
        .calls
        .iter()
        .filter(|c| c.answered() && !c.failed())
        .collect();
    let median = median(answered.iter().map(|c| c.result_len).collect());
    let bar = median.saturating_mul(SPIKE_FACTOR).max(SPIKE_CHARS);
    let mut out: Vec<Candidate> = Vec::new();
    for call in answered {
        if call.result_len <= bar {
            continue;
        }
        let Some(label) = v.label(call) else { continue };
        if out.iter().any(|c| c.key == label) {
            continue;
        }
        let tokens = f64::from(call.result_len) / 4.0;
        out.push(
            Candidate::new(
                Signal::ContextTokenSpike,
                label.clone(),
                MemoryType::ContextCost,
                format!("{label} costs about {tokens:.0} tokens of context."),
            )
            .files(
                v.file(call.target)
                    .filter(|_| call.kind.is_file())
                    .map(String::from),
            )
            .at(call.step)
            .measured(tokens),
        );
    }
    out
}

/// The wording of a measured candidate with the mean over `sessions` sessions.
pub fn measured_content(c: &Candidate, mean: f64, sessions: u32) -> String {
    let (label, rest) = c.key.split_once('\n').unwrap_or(("", c.key.as_str()));
    match c.signal {
        Signal::TimeAnomaly => format!(
            "{} is slow: about {mean:.0} s ({sessions} sessions).",
            c.key
        ),
        Signal::ContextTokenSpike => format!(
            "{} costs about {mean:.0} tokens of context ({sessions} sessions).",
            c.key
        ),
        Signal::TestOrder => format!(
            "In `{label}`, `{rest}` takes about {mean:.1} runs to pass ({sessions} sessions)."
        ),
        Signal::StepOverrun => format!(
            "Tasks in `{}` take about {mean:.1}x the planned steps ({sessions} sessions).",
            c.key
        ),
        _ => c.content.clone(),
    }
}
