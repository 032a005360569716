-- The node keys whose memory links changed, for the in-process graph indexes (issue 38; see
-- `graph_log` in the code home), by trigger on `memory_links`, whatever wrote them (the
-- memory triggers, a cascade from a deleted memory, an import). Trimmed from the bottom only.
CREATE TABLE memory_link_log (
  seq         INTEGER PRIMARY KEY,
  project_id  TEXT    NOT NULL,
  node_key    TEXT    NOT NULL
);

CREATE TRIGGER memory_links_log_insert AFTER INSERT ON memory_links BEGIN
  INSERT INTO memory_link_log (project_id, node_key) VALUES (new.project_id, new.node_key);
END;
CREATE TRIGGER memory_links_log_delete AFTER DELETE ON memory_links BEGIN
  INSERT INTO memory_link_log (project_id, node_key) VALUES (old.project_id, old.node_key);
END;
