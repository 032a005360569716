-- Observer scratchpads checkpointed at subtask boundaries, to resume a session after a crash
-- (the seed's ScratchpadStore.checkpoint). Device-local crash recovery: it lives with the
-- recomputable, never-synced data. One row per open session; finalize removes it.
CREATE TABLE observer_checkpoints (
  project_id  TEXT    NOT NULL,
  session_id  TEXT    NOT NULL,
  saved_at    INTEGER NOT NULL,
  step        INTEGER NOT NULL,
  state       TEXT    NOT NULL,  -- the scratchpad as JSON
  PRIMARY KEY (project_id, session_id)
) WITHOUT ROWID;
