-- Staleness from git (lifecycle::git_drift): the related files of a memory found changed in
-- git since the commit it was written at, each counted once against its confidence. Kept with
-- the memories (it syncs with them) because a commit's history is the same on every clone:
-- a second device must not count the same change again.
CREATE TABLE memory_git_changes (
  memory_id TEXT NOT NULL,
  commit_sha TEXT NOT NULL,
  path TEXT NOT NULL,
  project_id TEXT NOT NULL,
  head TEXT NOT NULL,
  found_at INTEGER NOT NULL,
  PRIMARY KEY (memory_id, commit_sha, path)
) WITHOUT ROWID;

-- A deleted memory (prune, deleteAll, an import's replace) takes its counted changes along.
CREATE TRIGGER memory_git_changes_gone AFTER DELETE ON memories BEGIN
  DELETE FROM memory_git_changes WHERE memory_id = old.id;
END;

-- The session-start context lists the newest changes of a project.
CREATE INDEX memory_git_changes_project ON memory_git_changes(project_id, found_at DESC);
