-- engram main schema v13: sessions, trust progression and memory gaps (issue 9).
--
-- These tables stay on the device for now (sync does not send them): trust is earned on the
-- device where the person works, and a gap is a note for this device's next extraction.

-- Memories an agent was given in a session (recall with trackAccess and a sessionId, or
-- markUsed with a sessionId): the "what the agent remembered" half of the session summary.
CREATE TABLE session_memory_use (
  project_id     TEXT    NOT NULL,
  session_id     TEXT    NOT NULL,
  memory_id      TEXT    NOT NULL,
  uses           INTEGER NOT NULL,
  first_used_at  INTEGER NOT NULL,
  last_used_at   INTEGER NOT NULL,
  PRIMARY KEY (project_id, session_id, memory_id)
) WITHOUT ROWID;

-- Sessions the app ended (`endSession`), with what they used and learned: the record trust
-- progression counts.
CREATE TABLE lifecycle_sessions (
  project_id    TEXT    NOT NULL,
  session_id    TEXT    NOT NULL,
  ended_at      INTEGER NOT NULL,
  trust_level   INTEGER NOT NULL,  -- the level the session ran at
  used          INTEGER NOT NULL,  -- distinct memories used
  learned       INTEGER NOT NULL,  -- memories created in the session
  corrections   INTEGER NOT NULL,  -- wrong + correction feedback given in the session
  tokens_saved  INTEGER NOT NULL,  -- estimate, see lifecycle::session
  PRIMARY KEY (project_id, session_id)
) WITHOUT ROWID;
CREATE INDEX lifecycle_sessions_ended ON lifecycle_sessions(project_id, ended_at);

-- The project's trust level (1 cautious, 2 standard, 3 confident, 4 autonomous) and the
-- session count when it was reached; `offer_*` holds a pending offer to step down.
CREATE TABLE trust_levels (
  project_id        TEXT    PRIMARY KEY,
  level             INTEGER NOT NULL,
  reached_after     INTEGER NOT NULL,  -- ended sessions when this level was reached
  offer_level       INTEGER,
  offer_reason      TEXT,
  offer_session_id  TEXT,
  updated_at        INTEGER NOT NULL
) WITHOUT ROWID;

-- Recalls that found nothing relevant to what the agent asked (seed 004 gap detection),
-- kept for the next extraction; `resolved_at` is set once a memory covers it.
CREATE TABLE memory_gaps (
  id           TEXT    PRIMARY KEY,
  project_id   TEXT    NOT NULL,
  session_id   TEXT,
  query        TEXT    NOT NULL,
  best_score   REAL,
  hits         INTEGER NOT NULL DEFAULT 1,
  created_at   INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  resolved_at  INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX memory_gaps_query ON memory_gaps(project_id, query) WHERE resolved_at IS NULL;
CREATE INDEX memory_gaps_open ON memory_gaps(project_id, last_seen_at) WHERE resolved_at IS NULL;
