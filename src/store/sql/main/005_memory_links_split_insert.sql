-- engram main schema v5: the memory-link insert trigger split in three, each guarded by a
-- WHEN on its own column. The single trigger of v4 ran one compound SELECT over two json_each
-- tables for every inserted memory, empty lists included, and cost ~30 us per remember
-- (rememberMany 17k/s -> 12k/s); guarded single-source inserts cost ~8 us for a memory with
-- one related file and nothing for empty lists.
DROP TRIGGER memory_links_insert;

CREATE TRIGGER memory_links_insert_target AFTER INSERT ON memories
WHEN new.target_node_id IS NOT NULL BEGIN
  INSERT OR IGNORE INTO memory_links (project_id, node_key, memory_seq, role)
  VALUES (new.project_id, new.target_node_id, new.seq, 'target');
END;

CREATE TRIGGER memory_links_insert_impacted AFTER INSERT ON memories
WHEN new.impacted_node_ids <> '[]' BEGIN
  INSERT OR IGNORE INTO memory_links (project_id, node_key, memory_seq, role)
  SELECT new.project_id, value, new.seq, 'impacted' FROM json_each(new.impacted_node_ids);
END;

CREATE TRIGGER memory_links_insert_files AFTER INSERT ON memories
WHEN new.related_files <> '[]' BEGIN
  INSERT OR IGNORE INTO memory_links (project_id, node_key, memory_seq, role)
  SELECT new.project_id, value, new.seq, 'file' FROM json_each(new.related_files);
END;
