-- engram main schema v12: the memory lifecycle (issue 9): supersession, disputes, feedback
-- counters and the event log they come from.
--
-- superseded_by: the memory that replaces this one (it decays twice as fast, seed 000).
-- disputed_at: set while a team member disputes the memory (used at confidence x 0.8, seed
--   003 section 15); cleared when the dispute is resolved.
-- helpful_count / wrong_count: feedback received.
-- uncorrected_uses: recall uses since the last `wrong` or correction: every 5th raises the
--   confidence by 0.05 (to 0.95 at most), the 10th clears needs_review (seed 003 section 18).
ALTER TABLE memories ADD COLUMN superseded_by TEXT;
ALTER TABLE memories ADD COLUMN disputed_at INTEGER;
ALTER TABLE memories ADD COLUMN helpful_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN wrong_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN uncorrected_uses INTEGER NOT NULL DEFAULT 0;

-- prune(): forgotten memories past their grace period, oldest first.
CREATE INDEX memories_forgotten_at ON memories(project_id, deprecated_at) WHERE deprecated = 1;

-- What people and agents said about memories, in order: feedback (helpful, wrong,
-- correction), review decisions (confirm, reject), and dispute threads (dispute, comment,
-- resolve). Trust progression and the session summary are computed from it. Keyed by a
-- UUIDv7 so that events from several devices merge through sync without clashing.
CREATE TABLE memory_events (
  id          TEXT    PRIMARY KEY,
  project_id  TEXT    NOT NULL,
  memory_id   TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  session_id  TEXT,
  author      TEXT,
  body        TEXT,
  created_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX memory_events_memory ON memory_events(memory_id, created_at);
CREATE INDEX memory_events_kind ON memory_events(project_id, kind, created_at);
CREATE INDEX memory_events_session ON memory_events(project_id, session_id) WHERE session_id IS NOT NULL;

-- prune() clears `superseded_by` pointing at memories it deletes.
CREATE INDEX memories_superseded_by ON memories(superseded_by) WHERE superseded_by IS NOT NULL;
