-- engram code schema v7: the authored graph rows written before main v11 get their keyed
-- copy (main home, which syncs). In a file that already syncs, they are also queued for the
-- server: the capture triggers of the new tables are installed only after migrations ran.
INSERT OR IGNORE INTO knowledge_nodes (project_id, key, layer, kind, label, file_path,
  start_line, end_line, source, confidence, metadata, created_at, updated_at)
SELECT project_id, key, layer, kind, label, file_path, start_line, end_line, source,
  confidence, metadata, created_at, updated_at
FROM graph_nodes WHERE source <> 'ast';

INSERT OR IGNORE INTO knowledge_edges (project_id, from_key, to_key, kind, layer, weight,
  source, confidence, metadata, created_at, updated_at)
SELECT e.project_id, f.key, t.key, e.kind, e.layer, e.weight, e.source, e.confidence,
  e.metadata, e.created_at, e.updated_at
FROM graph_edges e JOIN graph_nodes f ON f.id = e.from_id JOIN graph_nodes t ON t.id = e.to_id
WHERE e.source <> 'ast';

INSERT INTO sync_changes (tbl, key, delta)
SELECT 'knowledge_nodes', json_array(project_id, key), NULL FROM knowledge_nodes
WHERE EXISTS (SELECT 1 FROM sync_state WHERE name = 'url');
INSERT INTO sync_changes (tbl, key, delta)
SELECT 'knowledge_edges', json_array(project_id, from_key, to_key, kind), NULL FROM knowledge_edges
WHERE EXISTS (SELECT 1 FROM sync_state WHERE name = 'url');
