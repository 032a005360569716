-- The memories whose row changed or went away, for the memory rows the in-process graph
-- indexes keep for `impact()` (issue 38), by trigger, whatever wrote them (an update, a touch,
-- a forget, a pull, a delete). Inserts are not logged: a new seq is in no cache. The log keeps
-- its last 100,000 rows: each insert removes the one that many before it (one indexed delete),
-- so the log needs no trimming pass; a cache further behind than that reloads.
CREATE TABLE memory_row_log (
  seq         INTEGER PRIMARY KEY,
  memory_seq  INTEGER NOT NULL
);

CREATE TRIGGER memory_row_log_update AFTER UPDATE ON memories BEGIN
  INSERT INTO memory_row_log (memory_seq) VALUES (new.seq);
  DELETE FROM memory_row_log WHERE seq = last_insert_rowid() - 100000;
END;
CREATE TRIGGER memory_row_log_delete AFTER DELETE ON memories BEGIN
  INSERT INTO memory_row_log (memory_seq) VALUES (old.seq);
  DELETE FROM memory_row_log WHERE seq = last_insert_rowid() - 100000;
END;
