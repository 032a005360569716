-- Index runs whose committed batches still await their graph sync (reference resolution and
-- the structural layer, done once at the end of a run). A run adds its row with its first
-- batch and removes it in the graph sync's transaction; a row left behind is a run that was
-- killed in between, and the next run resolves and syncs everything (the graph heals).
CREATE TABLE code_index_pending (
  project_id  TEXT    NOT NULL,
  run_id      TEXT    NOT NULL,
  since       INTEGER NOT NULL,
  PRIMARY KEY (project_id, run_id)
) WITHOUT ROWID;
