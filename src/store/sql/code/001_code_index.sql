-- The code index: files, their chunks (with a full-text index), definitions and references.
-- Everything here is recomputed from the files on the device, so it lives in the `code` home,
-- which stays local when the memories sync.

-- One row per file the indexer has seen (indexed or skipped). `issues` lists what degraded or
-- skipped it (JSON array of names such as "binary", "invalid_utf8"; NULL when clean).
CREATE TABLE code_files (
  id            INTEGER PRIMARY KEY,
  project_id    TEXT NOT NULL,
  path          TEXT NOT NULL,            -- relative to the project root, '/'-separated
  language      TEXT,                     -- NULL for skipped files
  content_hash  TEXT,                     -- NULL for skipped files
  size_bytes    INTEGER NOT NULL,
  mtime_ns      INTEGER,                  -- lets a re-index skip unchanged files without reading them
  line_count    INTEGER NOT NULL DEFAULT 0,
  chunk_count   INTEGER NOT NULL DEFAULT 0,
  issues        TEXT,
  indexed_at    INTEGER NOT NULL,
  UNIQUE (project_id, path)
);

-- Chunks in file order. `id` is the full-text rowid.
CREATE TABLE code_chunks (
  id              INTEGER PRIMARY KEY,
  file_id         INTEGER NOT NULL REFERENCES code_files(id) ON DELETE CASCADE,
  ordinal         INTEGER NOT NULL,
  kind            TEXT NOT NULL,
  name            TEXT,
  qualified_name  TEXT,
  symbols         TEXT NOT NULL DEFAULT '[]',
  start_line      INTEGER NOT NULL,
  end_line        INTEGER NOT NULL,
  start_byte      INTEGER NOT NULL,
  end_byte        INTEGER NOT NULL,
  content_hash    TEXT NOT NULL,
  token_estimate  INTEGER NOT NULL,
  context         TEXT NOT NULL,
  content         TEXT NOT NULL
);
CREATE INDEX code_chunks_file ON code_chunks(file_id, ordinal);

-- Contentless (the text lives in code_chunks) with deletes by rowid, so replacing a file's
-- chunks needs no old text. `symbol` holds the names and their split words (getUserName ->
-- get user name) so natural words find identifiers.
CREATE VIRTUAL TABLE code_chunks_fts USING fts5(
  symbol, context, content,
  content = '', contentless_delete = 1,
  tokenize = 'porter unicode61 remove_diacritics 2'
);

-- Definitions (the graph's layer-1 symbol nodes).
CREATE TABLE code_symbols (
  id              INTEGER PRIMARY KEY,
  file_id         INTEGER NOT NULL REFERENCES code_files(id) ON DELETE CASCADE,
  project_id      TEXT NOT NULL,
  kind            TEXT NOT NULL,
  name            TEXT NOT NULL,
  qualified_name  TEXT NOT NULL,
  start_line      INTEGER NOT NULL,
  end_line        INTEGER NOT NULL
);
CREATE INDEX code_symbols_file ON code_symbols(file_id);
CREATE INDEX code_symbols_name ON code_symbols(project_id, name);

-- References (the graph's layer-1 edges): imports resolved to a project path when possible,
-- calls and base types resolved to a definition when unambiguous. `stale_at` is set when the
-- file changes and cleared by its rebuild (readers use `stale_at IS NULL`).
CREATE TABLE code_refs (
  id                  INTEGER PRIMARY KEY,
  file_id             INTEGER NOT NULL REFERENCES code_files(id) ON DELETE CASCADE,
  project_id          TEXT NOT NULL,
  kind                TEXT NOT NULL,      -- imports | calls | extends | implements
  from_symbol         TEXT,
  target              TEXT NOT NULL,
  member              TEXT,
  line                INTEGER NOT NULL,
  resolved_path       TEXT,
  resolved_symbol_id  INTEGER REFERENCES code_symbols(id) ON DELETE SET NULL,
  stale_at            INTEGER
);
CREATE INDEX code_refs_file ON code_refs(file_id);
CREATE INDEX code_refs_symbol ON code_refs(resolved_symbol_id) WHERE resolved_symbol_id IS NOT NULL;
CREATE INDEX code_refs_target ON code_refs(project_id, target) WHERE kind <> 'imports';
CREATE INDEX code_refs_path ON code_refs(project_id, resolved_path) WHERE resolved_path IS NOT NULL;
