-- The session-start context lists the memories marked stale (their code changed) on every
-- session start: a partial index keeps that a lookup of the few, not a walk of the project.
CREATE INDEX memories_stale ON memories(project_id, stale_at DESC) WHERE stale_at IS NOT NULL AND deprecated = 0;
