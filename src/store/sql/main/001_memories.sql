-- engram main schema v1: memories, their version history and the BM25 index.
-- Times are integer milliseconds since the Unix epoch; lists are JSON arrays.

CREATE TABLE memories (
  -- Stable integer key: the FTS index refers to it (a TEXT primary key's implicit rowid may
  -- change on VACUUM, which would silently detach the index).
  seq                    INTEGER PRIMARY KEY,
  id                     TEXT    NOT NULL UNIQUE,
  project_id             TEXT    NOT NULL,
  type                   TEXT    NOT NULL,
  content                TEXT    NOT NULL,
  -- sha256 of the normalised, redacted content: the dedup key within (project, scope).
  content_hash           TEXT    NOT NULL,
  confidence             REAL    NOT NULL DEFAULT 0.8 CHECK (confidence >= 0.0 AND confidence <= 1.0),
  tags                   TEXT    NOT NULL DEFAULT '[]',
  related_files          TEXT    NOT NULL DEFAULT '[]',
  related_modules        TEXT    NOT NULL DEFAULT '[]',
  scope                  TEXT    NOT NULL DEFAULT 'global',
  share_scope            TEXT    NOT NULL DEFAULT 'project',
  source                 TEXT    NOT NULL DEFAULT 'agent_explicit',
  session_id             TEXT,
  commit_sha             TEXT,
  provenance_session_ids TEXT    NOT NULL DEFAULT '[]',
  work_unit_ref          TEXT,
  methodology            TEXT,
  target_node_id         TEXT,
  impacted_node_ids      TEXT    NOT NULL DEFAULT '[]',
  relations              TEXT    NOT NULL DEFAULT '[]',
  decay_half_life_days   REAL,
  needs_review           INTEGER NOT NULL DEFAULT 0,
  user_verified          INTEGER NOT NULL DEFAULT 0,
  citation_text          TEXT,
  pinned                 INTEGER NOT NULL DEFAULT 0,
  -- forget() archives: the row stays for audit and rollback.
  deprecated             INTEGER NOT NULL DEFAULT 0,
  deprecated_at          INTEGER,
  deprecated_reason      TEXT,
  stale_at               INTEGER,
  -- How many secrets the privacy filter replaced (such memories stay local once sync lands).
  redactions             INTEGER NOT NULL DEFAULT 0,
  reinforce_count        INTEGER NOT NULL DEFAULT 0,
  access_count           INTEGER NOT NULL DEFAULT 0,
  created_at             INTEGER NOT NULL,
  updated_at             INTEGER NOT NULL,
  last_accessed_at       INTEGER NOT NULL,
  version                INTEGER NOT NULL DEFAULT 1,
  metadata               TEXT    NOT NULL DEFAULT '{}'
);

-- Dedup: one active memory per (project, scope, content).
CREATE UNIQUE INDEX idx_memories_dedup ON memories(project_id, scope, content_hash) WHERE deprecated = 0;
-- list(): newest first within a project, optionally by type.
CREATE INDEX idx_memories_project_created ON memories(project_id, deprecated, created_at DESC);
CREATE INDEX idx_memories_project_type ON memories(project_id, type, created_at DESC);
CREATE INDEX idx_memories_needs_review ON memories(project_id) WHERE needs_review = 1 AND deprecated = 0;

-- Past states of each memory; the current state lives in `memories`.
CREATE TABLE memory_versions (
  memory_id   TEXT    NOT NULL,
  version     INTEGER NOT NULL,
  -- JSON snapshot of the memory as it was at this version.
  snapshot    TEXT    NOT NULL,
  -- The change that ended this version: update | reinforce | forget | restore | rollback.
  ended_by    TEXT    NOT NULL,
  ended_at    INTEGER NOT NULL,
  PRIMARY KEY (memory_id, version)
) WITHOUT ROWID;

-- BM25 over content, tags and files; external content keeps one copy of the text.
CREATE VIRTUAL TABLE memories_fts USING fts5(
  content, tags, related_files,
  content = 'memories', content_rowid = 'seq',
  tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
  INSERT INTO memories_fts(rowid, content, tags, related_files)
  VALUES (new.seq, new.content, new.tags, new.related_files);
END;

CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
  INSERT INTO memories_fts(memories_fts, rowid, content, tags, related_files)
  VALUES ('delete', old.seq, old.content, old.tags, old.related_files);
END;

-- Only a real change of indexed text re-indexes (counters, flags and same-value writes do not).
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags, related_files ON memories
WHEN old.content IS NOT new.content OR old.tags IS NOT new.tags OR old.related_files IS NOT new.related_files
BEGIN
  INSERT INTO memories_fts(memories_fts, rowid, content, tags, related_files)
  VALUES ('delete', old.seq, old.content, old.tags, old.related_files);
  INSERT INTO memories_fts(rowid, content, tags, related_files)
  VALUES (new.seq, new.content, new.tags, new.related_files);
END;
