-- engram main schema v4: which graph nodes each memory is attached to, for impact analysis
-- and graph retrieval ("the memories on anything X affects" is one indexed join).
--
-- Links are derived from the memory row itself (target_node_id, impacted_node_ids,
-- related_files) by triggers, so every write path (remember, update, rollback, import) keeps
-- them in step. Nodes are named by key (`src/a.ts`, `src/a.ts:Auth.login`, `src/auth/`, or an
-- agent's own key), not by the graph's integer ids: the graph is recomputable and local, the
-- memories are not.

CREATE TABLE memory_links (
  project_id  TEXT    NOT NULL,
  node_key    TEXT    NOT NULL,
  memory_seq  INTEGER NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
  role        TEXT    NOT NULL,   -- target | impacted | file
  PRIMARY KEY (project_id, node_key, memory_seq, role)
) WITHOUT ROWID;
CREATE INDEX memory_links_memory ON memory_links(memory_seq);

-- Why no trigger problem for FTS here: new memories reach memories_fts after all rows of a
-- batch are inserted (migration 003), so the statement savepoints these triggers open have no
-- pending terms to flush.
CREATE TRIGGER memory_links_insert AFTER INSERT ON memories BEGIN
  INSERT OR IGNORE INTO memory_links (project_id, node_key, memory_seq, role)
  SELECT new.project_id, new.target_node_id, new.seq, 'target' WHERE new.target_node_id IS NOT NULL
  UNION ALL
  SELECT new.project_id, value, new.seq, 'impacted' FROM json_each(new.impacted_node_ids)
  UNION ALL
  SELECT new.project_id, value, new.seq, 'file' FROM json_each(new.related_files);
END;

CREATE TRIGGER memory_links_update
AFTER UPDATE OF project_id, target_node_id, impacted_node_ids, related_files ON memories
WHEN old.project_id IS NOT new.project_id
  OR old.target_node_id IS NOT new.target_node_id
  OR old.impacted_node_ids IS NOT new.impacted_node_ids
  OR old.related_files IS NOT new.related_files
BEGIN
  DELETE FROM memory_links WHERE memory_seq = old.seq;
  INSERT OR IGNORE INTO memory_links (project_id, node_key, memory_seq, role)
  SELECT new.project_id, new.target_node_id, new.seq, 'target' WHERE new.target_node_id IS NOT NULL
  UNION ALL
  SELECT new.project_id, value, new.seq, 'impacted' FROM json_each(new.impacted_node_ids)
  UNION ALL
  SELECT new.project_id, value, new.seq, 'file' FROM json_each(new.related_files);
END;

-- Memories written before this version.
INSERT OR IGNORE INTO memory_links (project_id, node_key, memory_seq, role)
SELECT project_id, target_node_id, seq, 'target' FROM memories WHERE target_node_id IS NOT NULL
UNION ALL
SELECT m.project_id, j.value, m.seq, 'impacted' FROM memories m, json_each(m.impacted_node_ids) j
UNION ALL
SELECT m.project_id, j.value, m.seq, 'file' FROM memories m, json_each(m.related_files) j;
