-- The observer's cross-session record (what cannot be recomputed, so it lives with the
-- memories and syncs with them).
--
-- One table of counts replaces the seed's per-signal tables (file nodes, co-access edges,
-- error patterns, module session counts): every signal names what it saw by a key (a file,
-- a pair of files, an error fingerprint, a module and command...), and the frequency filter,
-- the calibration means and the synthesis summaries all read "in how many sessions, and what
-- came of it" per key, with a measure's running sum and count and the latest wording.
CREATE TABLE observer_signal_counts (
  project_id       TEXT    NOT NULL,
  signal           TEXT    NOT NULL,
  key              TEXT    NOT NULL,
  session_count    INTEGER NOT NULL,
  occurrences      INTEGER NOT NULL,
  last_session_id  TEXT    NOT NULL,
  first_seen_at    INTEGER NOT NULL,
  last_seen_at     INTEGER NOT NULL,
  measure_sum      REAL    NOT NULL DEFAULT 0,
  measure_count    INTEGER NOT NULL DEFAULT 0,
  content          TEXT    NOT NULL DEFAULT '',  -- the latest session's wording

  memory_id        TEXT,              -- the memory it was promoted to
  PRIMARY KEY (project_id, signal, key)
) WITHOUT ROWID;

-- Each signal's record in a project: memories promoted, and how many of them were later
-- forgotten (the measured false-positive rate in the signal value). `rejected` is kept by the
-- triggers below, so every way a memory is forgotten or restored counts.
CREATE TABLE observer_signal_record (
  project_id  TEXT    NOT NULL,
  signal      TEXT    NOT NULL,
  promoted    INTEGER NOT NULL DEFAULT 0,
  rejected    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (project_id, signal)
) WITHOUT ROWID;

CREATE TRIGGER observer_memory_rejected AFTER UPDATE OF deprecated ON memories
WHEN new.deprecated = 1 AND old.deprecated = 0 AND new.source = 'observer_inferred'
  AND json_extract(new.metadata, '$.signal') IS NOT NULL
BEGIN
  UPDATE observer_signal_record SET rejected = rejected + 1
  WHERE project_id = new.project_id AND signal = json_extract(new.metadata, '$.signal');
END;

CREATE TRIGGER observer_memory_restored AFTER UPDATE OF deprecated ON memories
WHEN new.deprecated = 0 AND old.deprecated = 1 AND new.source = 'observer_inferred'
  AND json_extract(new.metadata, '$.signal') IS NOT NULL
BEGIN
  UPDATE observer_signal_record SET rejected = max(rejected - 1, 0)
  WHERE project_id = new.project_id AND signal = json_extract(new.metadata, '$.signal');
END;

-- Sessions the observer finalized, with the seed's section-19 metrics and A/B group.
CREATE TABLE observer_sessions (
  project_id      TEXT    NOT NULL,
  session_id      TEXT    NOT NULL,
  session_type    TEXT    NOT NULL,
  work_unit       TEXT,
  methodology     TEXT,
  ab_group        TEXT    NOT NULL,
  outcome         TEXT    NOT NULL,
  module          TEXT,
  started_at      INTEGER NOT NULL,
  finalized_at    INTEGER NOT NULL,
  steps           INTEGER NOT NULL,
  planned_steps   INTEGER,
  metrics         TEXT    NOT NULL,  -- JSON: tool calls, file reads, re-reads, errors, tokens...
  promoted        TEXT    NOT NULL,  -- JSON array of memory ids
  PRIMARY KEY (project_id, session_id)
) WITHOUT ROWID;
CREATE INDEX observer_sessions_recent ON observer_sessions(project_id, finalized_at DESC);

-- Cross-session synthesis runs (modes 2 and 3): which subject (a module, or a pair of
-- modules) was synthesized at which trigger (a session-count threshold; 0 for scheduled
-- runs), so that each trigger calls the app's LLM once.
CREATE TABLE observer_synthesis_log (
  project_id          TEXT    NOT NULL,
  subject             TEXT    NOT NULL,
  trigger_count       INTEGER NOT NULL,
  synthesized_at      INTEGER NOT NULL,
  memories_generated  INTEGER NOT NULL,
  PRIMARY KEY (project_id, subject, trigger_count)
) WITHOUT ROWID;
