-- engram main schema v2: list() orders by (created_at DESC, seq DESC). The v1 indexes ended at
-- created_at, so rows sharing a timestamp (every batch from rememberMany) were sorted in a
-- temp b-tree: 1 ms for a page of 10 at 10k memories. Ending the indexes with seq DESC lets
-- the index deliver the order.
DROP INDEX idx_memories_project_created;
CREATE INDEX idx_memories_project_created ON memories(project_id, deprecated, created_at DESC, seq DESC);
DROP INDEX idx_memories_project_type;
CREATE INDEX idx_memories_project_type ON memories(project_id, type, deprecated, created_at DESC, seq DESC);
