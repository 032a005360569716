-- engram main schema v3: new memories are added to memories_fts by the writer (one
-- INSERT ... SELECT per write transaction, see memory/write.rs), not by a trigger.
-- Why: FTS5 flushes its pending terms to a new segment at every statement savepoint, and a
-- trigger on INSERT makes each memory insert open one, so a batch of 1,000 wrote 1,000 tiny
-- segments and merged them (a third of rememberMany's time). Inserted after the rows, the
-- batch's terms reach the index as one segment. Update and delete keep their triggers: they
-- are rare, and their 'delete' must see the exact old values.
DROP TRIGGER memories_fts_insert;
