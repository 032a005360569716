//! Merging the scratchpads of parallel sub-agents into one (the seed's
//! ParallelScratchpadMerger), to finalize a split task once.
//!
//! Each pad's files and strings are re-interned into the merged pad and its calls appended in
//! pad order (so each agent's own sequences stay intact for the sequence signals); errors merge
//! by fingerprint, analytics add up. Two things only a merge can see:
//!
//! - **Parallel conflict** (signal 16): files that more than one agent changed.
//! - **Quorum**: a candidate that more than one agent's pad shows on its own, or an entry more
//!   than one agent recorded (≥ 85 % word overlap), is confirmed by the agents themselves: it
//!   needs no other sessions (the seed's `effectiveFrequencyThreshold` of 1 when confirmed)
//!   and its confidence rises by 10 % per extra agent.

use std::collections::HashMap;

use super::detect;
use super::protocol::SessionOptions;
use super::scratchpad::{FileStat, Recorded, Scratchpad, NONE, OVERFLOW};
use super::signals::Signal;

/// Recorded entries sharing this much of their words (Jaccard) are the same entry.
pub const SAME_ENTRY: f64 = 0.85;

/// One pad made of `pads` (at least two), for a session opened with `options` at `now`.
pub fn merge(pads: Vec<Scratchpad>, options: &SessionOptions, now: i64) -> Scratchpad {
    let mut out = Scratchpad::new(options, now);
    out.started_at = pads.iter().map(|p| p.started_at).min().unwrap_or(now);
    out.merged_from = pads.len() as u32;
    let cap = out.max_bytes / 8;

    // Quorum of candidates: in how many pads each (signal, key) shows on its own.
    let mut shown: HashMap<(Signal, String), u32> = HashMap::new();
    for pad in &pads {
        let mut seen = std::collections::HashSet::new();
        for c in detect::detect(pad) {
            if seen.insert((c.signal, c.key.clone())) {
                *shown.entry((c.signal, c.key)).or_default() += 1;
            }
        }
    }
    let mut quorum: Vec<(Signal, String, u32)> = shown
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((s, k), n)| (s, k, n))
        .collect();
    quorum.sort();
    out.quorum = quorum;

    let mut editors: HashMap<u32, u32> = HashMap::new();
    for pad in pads {
        out.account(pad.bytes() - pad.files.bytes() - pad.texts.bytes());
        let files: Vec<u32> = (0..pad.files.len() as u32)
            .map(|id| out.files.intern(pad.files.get(id), cap))
            .collect();
        let texts: Vec<u32> = (0..pad.texts.len() as u32)
            .map(|id| out.texts.intern(pad.texts.get(id), cap))
            .collect();
        let file = |id: u32| {
            if id == NONE || id == OVERFLOW {
                id
            } else {
                files[id as usize]
            }
        };
        let text = |id: u32| {
            if id == NONE || id == OVERFLOW {
                id
            } else {
                texts[id as usize]
            }
        };

        let mut errors: Vec<u32> = Vec::with_capacity(pad.errors.len());
        for e in &pad.errors {
            let index = match out
                .errors
                .iter()
                .position(|x| x.fingerprint == e.fingerprint)
            {
                Some(i) => {
                    out.errors[i].count += e.count;
                    i
                }
                None => {
                    out.errors.push(e.clone());
                    out.errors.len() - 1
                }
            };
            errors.push(index as u32);
        }
        for c in &pad.calls {
            let mut call = *c;
            call.tool = text(c.tool);
            call.target = if c.kind.is_file() {
                file(c.target)
            } else {
                text(c.target)
            };
            if c.error != NONE {
                call.error = errors[c.error as usize];
            }
            out.calls.push(call);
        }

        let a = &pad.analytics;
        let m = &mut out.analytics;
        for (&id, stat) in &a.files {
            let id = file(id);
            if id == OVERFLOW {
                continue;
            }
            let merged = m.files.entry(id).or_insert(FileStat {
                first_step: stat.first_step,
                last_step: stat.last_step,
                ..FileStat::default()
            });
            merged.reads += stat.reads;
            merged.edits += stat.edits;
            merged.read_len += stat.read_len;
            merged.first_step = merged.first_step.min(stat.first_step);
            merged.last_step = merged.last_step.max(stat.last_step);
        }
        for (&p, &n) in &a.grep_counts {
            *m.grep_counts.entry(text(p)).or_default() += n;
        }
        for (&(x, y), &n) in &a.co_access {
            let (x, y) = (file(x), file(y));
            *m.co_access.entry((x.min(y), x.max(y))).or_default() += n;
        }
        m.config_touched
            .extend(a.config_touched.iter().map(|&f| file(f)));
        for &f in &a.edit_set {
            let f = file(f);
            m.edit_set.insert(f);
            *editors.entry(f).or_default() += 1;
        }
        m.self_corrections += a.self_corrections;
        m.input_tokens += a.input_tokens;
        m.output_chars += a.output_chars;
        m.current_step = m.current_step.max(a.current_step);

        out.said.extend(pad.said);
        for r in pad.recorded {
            add_recorded(&mut out.recorded, r);
        }
        out.searches.extend(pad.searches);
        for e in pad.early {
            if !out.early.iter().any(|x| x.signal == e.signal) {
                out.early.push(e);
            }
        }
        out.external_step = match (out.external_step, pad.external_step) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        out.step_done_at.extend(pad.step_done_at);
        out.steps_executed = out.steps_executed.max(pad.steps_executed);
        out.evicted_calls += pad.evicted_calls;
        out.events += pad.events;
        out.injected.extend(pad.injected);
    }
    out.conflicts = editors.into_iter().filter(|(_, n)| *n > 1).collect();
    out.conflicts.sort();
    out.fit();
    out
}

/// Adds a recorded entry, folding it into an earlier one that says the same.
fn add_recorded(entries: &mut Vec<Recorded>, r: Recorded) {
    let words = |t: &str| -> std::collections::HashSet<String> {
        t.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let mine = words(&r.content);
    for e in entries.iter_mut() {
        let other = words(&e.content);
        let shared = mine.intersection(&other).count();
        let union = mine.len() + other.len() - shared;
        if e.memory_type == r.memory_type && shared as f64 / union.max(1) as f64 >= SAME_ENTRY {
            e.agents += r.agents;
            for f in r.related_files {
                if !e.related_files.contains(&f) {
                    e.related_files.push(f);
                }
            }
            return;
        }
    }
    entries.push(r);
}
